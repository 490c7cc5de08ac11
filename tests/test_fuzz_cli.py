"""The CLI fuzzer (tests/fuzz_cli.py): generated files through lint, fmt, verify and run in
resource-limited worker processes must never end in exit 3 or a crashed worker.

CI runs a small smoke batch (the hypothesis tests of tests/test_fuzz_frontend.py keep the
2,100 frontend cases); the nightly run is 10,000 cases:

    TILESAFE_SLOW=1 python -m pytest -m slow tests/test_fuzz_cli.py -s

(or `python tests/fuzz_cli.py --cases 10000`, which also writes failing cases to a folder).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent


def _load_fuzzer():
    """tests/ is not a package: load fuzz_cli.py by path, whatever pytest's import mode."""
    spec = importlib.util.spec_from_file_location("fuzz_cli", HERE / "fuzz_cli.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("fuzz_cli", module)
    spec.loader.exec_module(module)
    return module


fuzz_cli = _load_fuzzer()


def _failures(outcomes) -> str:
    return "\n".join(f"case {o.case.index} ({o.case.generator}, {' '.join(o.case.argv)}): "
                     f"{o.status}\n{o.detail}" for o in outcomes
                     if o.status in ("3", "crash"))


def test_cases_are_reproducible_from_seed_and_index():
    a = [fuzz_cli.make_case(7, i) for i in range(12)]
    b = [fuzz_cli.make_case(7, i) for i in range(12)]
    assert a == b
    assert [c.command for c in a[:4]] == ["lint", "fmt", "verify", "run"]
    assert len({c.text for c in a[:4]}) == 1  # four commands on one text
    assert len({c.text for c in a}) == 3


def test_every_generator_is_used():
    seen = {fuzz_cli.make_case(0, i).generator for i in range(0, 400, 4)}
    assert seen == {name for name, _, _ in fuzz_cli.GENERATORS}


def test_smoke_batch_has_no_internal_error(tmp_path):
    outcomes = fuzz_cli.fuzz(seed=1, count=16, workers=1, out=tmp_path)
    assert len(outcomes) == 16
    assert {o.case.command for o in outcomes} == {"lint", "fmt", "verify", "run"}
    assert not _failures(outcomes), _failures(outcomes)


def test_a_case_past_its_time_is_a_timeout_not_a_failure(tmp_path):
    """The harness itself: SIGALRM ends the case, and the next one gets a fresh worker."""
    # a verify of a real pipeline: seconds of work, far past a 1 ms limit (a generated case
    # may be a file the frontend rejects at once, which finishes first)
    pipeline = (HERE.parent / "corpus" / "good" / "pipeline2.tsk").read_text()
    slow = fuzz_cli.Case(0, "corpus", "verify", ("verify", "{file}", "--format", "json"),
                         pipeline, 0.001)
    fast = fuzz_cli.make_case(0, 0)  # a lint
    w = fuzz_cli._Worker(3072, tmp_path / "w.log")
    try:
        status, _, _ = w.ask(slow)
        assert status == "timeout"
    finally:
        w.close()
    w = fuzz_cli._Worker(3072, tmp_path / "w.log")
    try:
        status, _, _ = w.ask(fast)
        assert status in ("0", "1", "2")
    finally:
        w.close()


@pytest.mark.slow
def test_nightly_ten_thousand_cases(tmp_path):
    outcomes = fuzz_cli.fuzz(seed=0, count=10_000, workers=2, out=tmp_path)
    result = fuzz_cli.summary(outcomes, 0.0)
    print(result)
    assert result["cases"] == 10_000
    assert not result["failures"], _failures(outcomes)
