"""The mutation baseline as a regression gate (docs/mutation.md).

corpus/mutants/ records what the last full campaign found for every mutant of
corpus/good/. Here a fixed sample of the mutants it records as killed (the entries marked
`gate`: chosen across operators, cheap to verify) is regenerated and verified again; if one
of them now survives, a checker lost a property it used to prove false. The slow test does
the same for every baseline-killed mutant (TILESAFE_SLOW=1, as for every test marked slow:
tests/conftest.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tilesafe.mutation import baseline

ROOT = Path(__file__).resolve().parent.parent
ENTRIES = baseline.load(ROOT / "corpus" / "mutants")
GATE = [e for e in ENTRIES if e.gate]


def test_the_baseline_covers_the_good_corpus_and_has_a_gate():
    kernels = {e.kernel for e in ENTRIES}
    good = {f"corpus/good/{p.name}" for p in (ROOT / "corpus" / "good").glob("*.tsk")}
    assert kernels == good
    assert all(e.expected == "killed" for e in GATE)
    assert len(GATE) >= 20 and len({e.operator.split(".")[0] for e in GATE}) >= 12


def _regressions(entries: list[baseline.Entry]) -> list[str]:
    results = baseline.check(entries, ROOT)
    assert len(results) == len(entries)
    return [f"{r.entry.id} ({r.entry.edit}): {r.detail}" for r in results if not r.killed]


def test_gate_sample_of_baseline_killed_mutants_is_still_killed():
    lost = _regressions(GATE)
    assert not lost, "baseline-killed mutants now survive:\n" + "\n".join(lost)


def test_the_gate_fails_when_a_checker_is_weakened(monkeypatch):
    """The gate can fail: with the barrier checker switched off, a gate mutant that only
    the barrier checker refuted (TS4xx) is reported as surviving."""
    from tilesafe.checkers import registry

    only_barrier = [e for e in GATE if e.codes and all(c.startswith("TS4") for c in e.codes)]
    assert only_barrier, "the gate sample has no mutant killed by the barrier checker alone"
    monkeypatch.delitem(registry.CHECKERS, "barrier")
    results = baseline.check(only_barrier[:1], ROOT)
    assert [r.killed for r in results] == [False]
    assert results[0].detail.startswith("nothing refuted")


@pytest.mark.slow
def test_every_baseline_killed_mutant_is_still_killed():
    killed = [e for e in ENTRIES if e.expected == "killed"]
    lost = _regressions(killed)
    assert not lost, "baseline-killed mutants now survive:\n" + "\n".join(lost)
