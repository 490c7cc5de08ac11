"""Global verification budgets (states, seconds, memory): running out gives UNKNOWN (TS491)
with the reason and an option of `tilesafe verify` that raises the limit, never PROVED;
the defaults verify the good corpus (tests/test_corpus.py)."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest

from tilesafe import cli
from tilesafe.checkers import barrier, ownership
from tilesafe.checkers.obligation import Verdict
from tilesafe.checkers.registry import CheckOptions
from tilesafe.frontend.load import compile_source, load_program
from tilesafe.semantics.temporal.budget import Budget, BudgetExceeded
from tilesafe.semantics.temporal.events import build_model
from tilesafe.semantics.temporal.parametric import explore_all

ROOT = Path(__file__).resolve().parent.parent
GOOD = ROOT / "corpus" / "good"


def temporal(path: Path, options: CheckOptions):
    k = load_program(path).kernels[0]
    return barrier.check(k, options) + ownership.check(k, options)


@pytest.mark.parametrize("options, option", [
    (CheckOptions(max_states=40), "--max-states"),
    (CheckOptions(max_seconds=1e-4), "--timeout"),
])
def test_too_small_budget_is_unknown_never_proved(options: CheckOptions, option: str):
    obs = temporal(GOOD / "pipeline2.tsk", options)
    assert obs and all(o.verdict is Verdict.UNKNOWN for o in obs)
    assert {o.code for o in obs} == {"TS491"}
    assert all(option in o.message for o in obs), obs[0].message


def test_memory_budget_is_unknown():
    obs = temporal(GOOD / "pipeline2.tsk", CheckOptions(max_memory_mb=1))
    assert all(o.verdict is not Verdict.PROVED for o in obs)
    assert "--max-memory" in obs[0].message and obs[0].code == "TS491"


def test_the_state_budget_bounds_all_searches_together():
    """An eight-stage ring: every search of the kernel (several trip
    counts, level sets, both semantics) draws from one budget, so a small one ends the
    verification in UNKNOWN instead of growing without bound."""
    src = (GOOD / "pipeline2.tsk").read_text()
    src = src.replace("const STAGES = 2", "const STAGES = 8")
    k = compile_source(src).kernels[0]
    budget = Budget(max_states=2000)
    out = explore_all(build_model(k, True), True, 10**9, 10_000, budget)
    assert not out.complete and out.budget and "--max-states" in out.reason
    assert budget.states <= 2001
    with pytest.raises(BudgetExceeded):  # sticky: later searches stop at once
        budget.charge()


def test_cli_budget_options_and_messages_name_real_options():
    out, err = io.StringIO(), io.StringIO()
    code = cli.main(["verify", "--only", "barrier", "--max-states", "40",
                     str(GOOD / "pipeline2.tsk")], out, err)
    assert code == 1 and "--max-states" in out.getvalue() and "TS491" in out.getvalue()
    assert cli.main(["verify", "--timeout", "0", str(GOOD / "pipeline2.tsk")],
                    io.StringIO(), io.StringIO()) == 2
    # Every "raise --X" a message can show names an option `tilesafe verify` has.
    verify = next(a for a in cli._parser()._subparsers._group_actions[0].choices.items()
                  if a[0] == "verify")[1]
    options = {s for a in verify._actions for s in a.option_strings}
    sources = [p.read_text() for p in (ROOT / "src" / "tilesafe").rglob("*.py")]
    named = {m for text in sources for m in re.findall(r"raise (--[a-z-]+)", text)}
    assert named and named <= options, named - options
