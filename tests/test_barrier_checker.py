"""The barrier-protocol checker: proofs on the good corpus, refutations on the planted bugs,
the periodicity argument against brute force, and agreement with the reference interpreter
(deadlocks and barrier errors it finds statically also happen when the kernel runs)."""

from __future__ import annotations

import functools
import re
from pathlib import Path

import pytest
from corpus_files import SLOW_BAD, load_corpus

from tilesafe.checkers import barrier, ownership
from tilesafe.checkers.obligation import Severity, Verdict
from tilesafe.checkers.registry import CHECKERS, CheckOptions
from tilesafe.frontend.load import compile_source
from tilesafe.semantics.interpreter.interp import InterpError, random_inputs, run_kernel
from tilesafe.semantics.temporal.events import build_model
from tilesafe.semantics.temporal.explore import (
    Machine,
    search,
)
from tilesafe.semantics.temporal.parametric import explore_all

ROOT = Path(__file__).resolve().parent.parent
GOOD = sorted((ROOT / "corpus" / "good").glob("*.tsk"))
# TS434 (a CTA rank or multicast mask outside the cluster) is proved by the access checker
# for every instance (tests/test_cluster_access.py), not by the temporal ones
ACCESS_CODES = ("ts434_",)
TEMPORAL_BAD = sorted(p for p in (ROOT / "corpus" / "bad").glob("ts[34]*.tsk")
                      if not p.name.startswith(ACCESS_CODES))
OPTS = CheckOptions()


@functools.cache
def kernel_of(path: Path):
    """Parsed once per test session, so the checkers' per-kernel cache is shared."""
    return load_corpus(path).kernels[0]


def expected(path: Path) -> str:
    return re.match(r"//\s*expect:\s*(TS\d{3})", path.read_text().splitlines()[0]).group(1)


def both(k):
    return barrier.check(k, OPTS) + ownership.check(k, OPTS)


def test_registered():
    assert CHECKERS["barrier"] == "tilesafe.checkers.barrier"
    assert CHECKERS["ownership"] == "tilesafe.checkers.ownership"


@pytest.mark.parametrize("path", GOOD, ids=[p.name for p in GOOD])
def test_good_corpus_proved(path: Path):
    obs = barrier.check(kernel_of(path), OPTS)
    assert {o.name.split(": ", 1)[1] for o in obs} == {p.name for p in barrier.PROPS}
    bad = [f"{o.name}: {o.verdict.value} {o.message}" for o in obs
           if o.verdict is not Verdict.PROVED]
    assert not bad, bad
    assert all(o.evidence["states explored (with partial-order reduction)"] >= 1 for o in obs)


def test_pipelines_proved_for_every_trip_count():
    for name in ("pipeline2", "pipeline3", "warp_specialized", "tma_store_pipeline"):
        obs = barrier.check(kernel_of(ROOT / "corpus" / "good" / f"{name}.tsk"), OPTS)
        arg = obs[0].evidence["argument"]
        assert arg["covers"] == "every trip count allowed by 'where'", (name, arg)
        assert "periodicity argument" in obs[0].method


@pytest.mark.parametrize("path", [pytest.param(p, id=p.name, marks=pytest.mark.slow if p.name in
                                               SLOW_BAD else ()) for p in TEMPORAL_BAD])
def test_planted_bug_caught_with_its_code(path: Path):
    code = expected(path)
    obs = both(kernel_of(path))
    errors = {o.code for o in obs if o.verdict is not Verdict.PROVED
              and o.severity is Severity.ERROR}
    assert errors == {code}, [(o.code, o.verdict.value, o.message) for o in obs
                              if o.verdict is not Verdict.PROVED]
    refuted = [o for o in obs if o.code == code and o.verdict is Verdict.REFUTED]
    assert refuted and refuted[0].counterexample


def test_deadlock_trace_names_waits_and_barrier_states():
    obs = barrier.check(kernel_of(ROOT / "corpus" / "bad" / "ts410_producer_waits_full.tsk"),
                        OPTS)
    o = next(o for o in obs if o.code == "TS410")
    cex = o.counterexample
    assert cex["trace"][0].startswith("  1. producer")
    assert any("sync" in line for line in cex["trace"])
    blocked = "\n".join(cex["blocked"])
    assert "producer (thread 0) waits full[0] parity 0" in blocked
    assert "consumer (threads 32-159) waits full[0] parity 0" in blocked
    assert "phase 0 (parity 0), pending 1/1, tx 0" in blocked
    assert "waits full[0] parity 0" in o.message


def test_unknown_outside_the_argument():
    """A parity that is not periodic in the iteration: explored for small trip counts, and
    the verdict is UNKNOWN (TS490), never PROVED."""
    src = (ROOT / "corpus" / "good" / "pipeline2.tsk").read_text()
    src = src.replace("wait full[s] parity (k / STAGES) % 2",
                      "wait full[s] parity (k / STAGES) % 2 + k / 1000000")
    obs = barrier.check(compile_source(src).kernels[0], OPTS)
    assert {o.verdict for o in obs} == {Verdict.UNKNOWN}
    assert {o.code for o in obs} == {"TS490"}
    assert "periodic" in obs[0].message


def test_bug_beyond_the_small_window_found_by_the_argument():
    """A four-stage ring whose producer parity repeats every 16 iterations instead of 8:
    harmless for the first four tiles (the directly explored window), wrong on the second
    pass over the ring. The level-set argument finds it, and so does plain exploration at
    the trip count of its counterexample."""
    src = (ROOT / "corpus" / "good" / "pipeline2.tsk").read_text()
    src = src.replace("const STAGES = 2", "const STAGES = 4")
    src = src.replace("wait empty[s] parity (k / STAGES + 1) % 2",
                      "wait empty[s] parity (k / 8 + 1) % 2")
    k = compile_source(src).kernels[0]
    model = build_model(k, False)
    out = explore_all(model, True, 200_000, 10_000)
    window = [e for e in out.explorations if e["trip"] is not None and e["trip"] <= 4]
    assert window and all(e["kind"] == "full" for e in window)
    codes = {f.code for f, _, _ in out.findings}
    assert "TS408" in codes
    obs = barrier.check(k, OPTS)
    o = next(o for o in obs if o.code == "TS408")
    assert o.counterexample["trip count"] >= 5
    mach = Machine(model, o.counterexample["sizes"])
    assert "TS408" in search(mach, [mach.initial()], True, 200_000).findings


def test_parametric_verdict_matches_brute_force():
    """pipeline2 is proved for all trip counts; exploring each trip count 1..16 outright
    agrees (and with and without partial-order reduction, the same verdict)."""
    k = kernel_of(ROOT / "corpus" / "good" / "pipeline2.tsk")
    model = build_model(k, False)
    out = explore_all(model, True, 200_000, 10_000)
    assert out.complete and not out.findings
    for trip in range(1, 17):
        mach = Machine(model, {"M": 64, "N": 64 * trip})
        for por in (True, False):
            res = search(mach, [mach.initial()], por, 200_000)
            assert res.stats.complete and not res.findings, (trip, por)
            assert res.stats.finals >= 1


def test_por_reduces_states_but_keeps_verdicts():
    for name in ("pipeline2", "row_reduce", "ts406_empty_count_too_high"):
        folder = "bad" if name.startswith("ts") else "good"
        k = kernel_of(ROOT / "corpus" / folder / f"{name}.tsk")
        for own in (False, True):
            model = build_model(k, own)
            sizes = {s: 64 for s in k.sizes}
            sizes.update({"N": 64 * 3} if "N" in sizes else {})
            mach = Machine(model, sizes)
            full = search(mach, [mach.initial()], False, 200_000)
            red = search(mach, [mach.initial()], True, 200_000)
            assert red.stats.states <= full.stats.states
            assert set(red.findings) == set(full.findings), (name, own)
            assert (red.stats.deadlocks > 0) == (full.stats.deadlocks > 0)


# ---- agreement with the reference interpreter ------------------------------------------------

INTERP_SIZES = {"ts302": {"M": 8, "N": 32}, "ts301": {"M": 64, "N": 64},
                "ts404": {"M": 256, "N": 128},
                # the ring must wrap (more tiles than its three stages) to deadlock
                "ts406_producer_on_consumer_warp": {"M": 64, "N": 256}}
ERRORS_TOO = ("TS401", "TS402", "TS404", "TS405", "TS301")  # the interpreter checks these
DEADLOCK = ("TS406", "TS410", "TS420")


def interp_outcomes(k, sizes, seeds):
    inputs = random_inputs(k, sizes, 1)
    out = []
    for seed in seeds:
        try:
            res = run_kernel(k, sizes, inputs, seed=seed)
            out.append(("ok", res, inputs))
        except InterpError as exc:
            out.append((exc.code, None, inputs))
    return out


@pytest.mark.parametrize("path", [p for p in TEMPORAL_BAD if expected(p) in DEADLOCK + ERRORS_TOO],
                         ids=lambda p: p.name)
def test_static_deadlocks_and_errors_happen_in_the_interpreter(path: Path):
    code = expected(path)
    k = kernel_of(path)
    sizes = next((v for k, v in INTERP_SIZES.items() if path.stem == k),
                 INTERP_SIZES.get(path.name[:5], {"M": 64, "N": 192}))
    codes = [c for c, _, _ in interp_outcomes(k, sizes, range(2))]
    if code in DEADLOCK:
        assert set(codes) <= {"TS410", "TS420"} and codes, codes
        if code == "TS420":
            assert "TS420" in codes
    else:
        assert code in codes, codes
