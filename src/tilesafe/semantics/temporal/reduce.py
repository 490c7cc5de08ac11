"""Reduced explorations that may PROVE a kernel, tried before the unreduced one.

Why: the unreduced search (semantics/temporal/parametric.py over semantics/temporal/explore/) grows
with the product of the classes' positions. A reduction explores a smaller system whose correctness
implies the kernel's (docs/temporal.md §9-§10): identical classes up to renaming
(semantics/temporal/symmetry.py), a ring's stages through its stage projection
(semantics/temporal/ring.py). It is used only when it proves everything it covers. Anything else --
a finding, a candidate, an incomplete search, a reduction that does not apply (SymmetryBroken, a
kernel outside the ring form) -- and the checker runs the unreduced search as before, so every
refutation and every counterexample still comes from the kernel itself, and an unknown stays an
unknown.
"""

from __future__ import annotations

from dataclasses import replace

from tilesafe.frontend import ir
from tilesafe.semantics.temporal import ring, symmetry
from tilesafe.semantics.temporal.budget import Budget
from tilesafe.semantics.temporal.events import Model, Unsupported, build_model
from tilesafe.semantics.temporal.explore import Machine
from tilesafe.semantics.temporal.parametric import Outcome, explore_all, sample_sizes

_PROGRESS: dict[int, tuple[ir.Kernel, object]] = {}
ENABLED = True  # False: the unreduced search only (bench/bench_temporal.py's "before")


def proves(out: Outcome) -> bool:
    """The outcome settles every property: complete, nothing found, nothing unsettled."""
    return out.complete and not out.findings and not out.unsettled and not out.budget


def _explore(model: Model, por: bool, timeout_ms: int, budget: Budget) -> Outcome | None:
    """Explore up to symmetry; without it if the classes turn out not to be identical."""
    for sym in (True, False):
        try:
            out = explore_all(replace(model, symmetric=sym), por,
                              budget.max_states or 10**9, timeout_ms, budget)
        except symmetry.SymmetryBroken:
            continue
        except Unsupported:
            return None
        if sym and not out.complete and "differ" in out.reason:
            continue
        return out
    return None


def prove(kernel: ir.Kernel, model: Model, timeout_ms: int, budget: Budget
          ) -> tuple[Model, Outcome] | None:
    """The first reduction that proves the kernel: (the model it explored, its outcome)."""
    if not ENABLED:
        return None
    r = ring.project(kernel, timeout_ms)
    if isinstance(r, ring.Ring):
        # A ring whose projection is not proved is explored whole, unreduced: what fails
        # in P (a bug, most often) is what the unreduced search must show.
        return by_ring(kernel, model.ownership, timeout_ms, budget, r)
    out = by_symmetry(model, timeout_ms, budget)
    return (model, out) if out is not None else None


def by_symmetry(model: Model, timeout_ms: int, budget: Budget) -> Outcome | None:
    """The kernel explored up to renamings of identical classes, when that proves it."""
    grps = symmetry.groups(model.agents)
    if not grps:
        return None
    try:
        for sizes in sample_sizes(model, timeout_ms)[:1]:  # identical classes? (cheap)
            Machine(replace(model, symmetric=True), sizes)
        out = explore_all(replace(model, symmetric=True), True, budget.max_states or 10**9,
                          timeout_ms, budget)
    except Unsupported:
        return None
    if not proves(out):
        return None
    out.argument["symmetry"] = [[model.agents[a].name for a in g] for g in grps]
    return out


def by_ring(kernel: ir.Kernel, ownership: bool, timeout_ms: int, budget: Budget,
            r: ring.Ring | str | None = None) -> tuple[Model, Outcome] | None:
    """The kernel proved through its stage projection P (semantics/temporal/ring.py): P's safety
    (with POR) and P's progress (barrier semantics, without POR), for every J."""
    if r is None:
        r = ring.project(kernel, timeout_ms)
    if isinstance(r, str):
        return None
    try:
        hit = _PROGRESS.get(id(kernel))
        if hit is not None and hit[0] is kernel:
            prog = hit[1]
        else:
            pm = replace(build_model(r.projected, False), progress=True)
            prog = _explore(pm, False, timeout_ms, budget)
            if len(_PROGRESS) > 64:
                _PROGRESS.clear()
            _PROGRESS[id(kernel)] = (kernel, prog)
        if prog is None or not proves(prog):
            return None
        model = build_model(r.projected, ownership)
    except Unsupported:
        return None
    out = _explore(model, True, timeout_ms, budget)
    if out is None or not proves(out):
        return None
    grps = symmetry.groups(model.agents)
    out.argument["ring"] = {
        "stages": r.stages, "barriers": list(r.barriers), "buffers": list(r.buffers),
        "projection": f"loops over k = 0, {r.stages}, {2 * r.stages}, ... ({ring.J_NAME} "
                      "iterations, every value >= 0)",
        "progress states": prog.states, "safety states": out.states,
        "symmetry": [[model.agents[a].name for a in g] for g in grps]}
    out.queries.extend(r.queries)
    out.states += prog.states
    return model, out
