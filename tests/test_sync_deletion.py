"""Never a false "proved": delete each `sync`, `bar_sync`/`bar_arrive`, `wait`, `arrive`
and `fence` of each good kernel in turn. The temporal checkers must refute the mutant, or
-- when they prove it -- the deletion must be harmless: the reference interpreter gives the
reference output under many schedules (uniform random and adversarial PCT). An UNKNOWN is
allowed (it claims nothing) but is collected, so a regression that turns refutations into
unknowns shows.

Why: a deleted `sync` between a class's writes and its reads of other threads' elements
used to verify (the lockstep class hid the race, issue 8); this sweep checks every such
mutant of the corpus, not one hand-picked case."""

from __future__ import annotations

import functools
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from tilesafe.checkers import barrier, global_memory, ownership
from tilesafe.checkers.obligation import Severity, Verdict
from tilesafe.checkers.registry import CheckOptions
from tilesafe.frontend import ir
from tilesafe.frontend.load import load_program
from tilesafe.frontend.walk import statements

sys.path.insert(0, str(Path(__file__).resolve().parent))
import corpus_refs as R  # noqa: E402
from schedules import failure  # noqa: E402

from tilesafe.semantics.interpreter.interp import random_inputs  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
GOOD = sorted((ROOT / "corpus" / "good").glob("*.tsk"))
KINDS = (ir.Sync, ir.NamedBar, ir.Wait, ir.Arrive, ir.Fence)
OPTS = CheckOptions()
SEEDS = range(4)


def without(stmts: tuple[ir.Stmt, ...], target: ir.Stmt) -> tuple[ir.Stmt, ...]:
    """The statements with `target` (by identity) removed, wherever it is nested."""
    out = []
    for s in stmts:
        if s is target:
            continue
        if isinstance(s, (ir.For, ir.Role)):
            s = replace(s, body=without(s.body, target))
        elif isinstance(s, ir.If):
            s = replace(s, then=without(s.then, target), orelse=without(s.orelse, target))
        out.append(s)
    return tuple(out)


@functools.cache
def mutants(path: Path) -> list[tuple[str, ir.Kernel]]:
    k = load_program(path).kernels[0]
    out = []
    for s in statements(k.body):
        if isinstance(s, KINDS):
            label = f"{type(s).__name__.lower()} at line {s.span.line}"
            out.append((label, replace(k, body=without(k.body, s))))
    return out


CASES = [(p, i) for p in GOOD for i in range(len(mutants(p)))]
UNKNOWN: list[str] = []


@pytest.mark.parametrize("path, i", CASES,
                         ids=[f"{p.stem}-{mutants(p)[i][0].replace(' ', '_')}" for p, i in CASES])
def test_deleted_synchronisation_is_refuted_or_harmless(path: Path, i: int):
    label, k = mutants(path)[i]
    # the checkers that speak of ordering: mbarrier phases, shared memory, global memory
    obs = barrier.check(k, OPTS) + ownership.check(k, OPTS) + global_memory.check(k, OPTS)
    errors = [o for o in obs if o.verdict is not Verdict.PROVED and o.severity is Severity.ERROR]
    if any(o.verdict is Verdict.REFUTED for o in errors):
        return
    if errors:
        UNKNOWN.append(f"{path.stem}: {label}: {errors[0].code} {errors[0].message[:120]}")
        return
    # Proved: then the deletion must not change what the kernel computes.
    case = R.CASES[path.stem]
    sizes = case.quick
    inputs = random_inputs(k, sizes, 1)
    want = case.ref(sizes, inputs)
    for seed in SEEDS:
        for policy in ("random", "pct"):
            bad = failure(k, sizes, inputs, want, seed=seed, policy=policy)
            assert bad is None, f"{label} deleted: proved, but {policy} seed {seed}: {bad}"


def test_the_sweep_covers_the_shapes_of_issue_8():
    """The transposes and CuTe re-tilings (write a tile, sync, read other threads' elements)
    are in the sweep, and their sync deletions are refuted (see the test above)."""
    names = {p.stem for p, _ in CASES}
    assert {"transpose_swizzled", "transpose_ragged", "cute_layout", "cute_colmajor"} <= names
    for name in ("transpose_swizzled", "transpose_ragged", "cute_layout", "cute_colmajor"):
        path = ROOT / "corpus" / "good" / f"{name}.tsk"
        (label, k), = [m for m in mutants(path) if m[0].startswith("sync")]
        obs = ownership.check(k, OPTS)
        assert any(o.verdict is Verdict.REFUTED and o.code == "TS304" for o in obs), name
