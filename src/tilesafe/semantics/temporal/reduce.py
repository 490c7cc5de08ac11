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
from tilesafe.semantics.temporal import blockparam, cluster_view, ring, symmetry
from tilesafe.semantics.temporal.budget import Budget
from tilesafe.semantics.temporal.cluster_view import ClusterInfo
from tilesafe.semantics.temporal.events import Model, Unsupported, build_model
from tilesafe.semantics.temporal.explore import Machine
from tilesafe.semantics.temporal.parametric import Outcome, explore_all, sample_sizes

_PROGRESS: dict[tuple[int, int], tuple[ir.Kernel, object]] = {}
ENABLED = True  # False: the unreduced search only (bench/bench_temporal.py's "before")


def proves(out: Outcome) -> bool:
    """The outcome settles every property: complete, nothing found, nothing unsettled."""
    return out.complete and not out.findings and not out.unsettled and not out.budget


def _explore(model: Model, por: bool, timeout_ms: int, budget: Budget,
             symmetric: bool = True) -> Outcome | None:
    """Explore up to symmetry; without it if the classes turn out not to be identical (or
    `symmetric` is False: a cluster's view, whose CTA syncs the renaming does not follow)."""
    for sym in (True, False) if symmetric else (False,):
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
            r: ring.Ring | str | None = None, cluster: ClusterInfo | None = None
            ) -> tuple[Model, Outcome] | None:
    """The kernel proved through its stage projections (semantics/temporal/ring.py): each
    P_s's safety (with POR) and progress (barrier semantics, without POR), for every J.
    With `cluster`, `kernel` is the cluster kernel itself: each projection is explored
    through its view of the CTAs as one block (semantics/temporal/cluster_view.py)."""
    if not ENABLED:
        return None
    if r is None:
        r = ring.project(kernel, timeout_ms)
    if isinstance(r, str):
        return None
    first: Model | None = None
    prog_states = safety_states = 0
    queries = list(r.queries)
    out: Outcome | None = None
    points: dict[str, set[str]] = {}
    try:
        for n, p in enumerate(r.projections):
            seen = blockparam.lift(cluster_view.view(p)) if cluster is not None else p
            # safety first: with POR it is the cheaper search, and a buggy kernel (whose
            # refutation the unreduced search will give) fails it soonest
            model = build_model(seen, ownership, cluster)
            out = _explore(model, True, timeout_ms, budget, cluster is None)
            if out is None or not proves(out):
                return None
            key = (id(kernel), n)
            hit = _PROGRESS.get(key)
            if hit is not None and hit[0] is kernel:
                prog = hit[1]
            else:
                pm = replace(build_model(seen, False, cluster), progress=True)
                prog = _explore(pm, False, timeout_ms, budget, cluster is None)
                if len(_PROGRESS) > 64:
                    _PROGRESS.clear()
                _PROGRESS[key] = (kernel, prog)
            if prog is None or not proves(prog):
                return None
            first = first or model
            prog_states += prog.states
            safety_states += out.states
            queries.extend(q for q in out.queries if q not in queries)
            for where, shares in out.points.items():
                points.setdefault(where, set()).update(shares)
    except Unsupported:
        return None
    assert first is not None and out is not None
    grps = symmetry.groups(first.agents) if cluster is None else ()
    visits = (f"k = 0, {r.stages}, {2 * r.stages}, ... (every stage alike)" if r.alike else
              f"k = s, s + {r.stages}, s + {2 * r.stages}, ... for each stage s in turn "
              "(the stages differ)")
    out.argument["ring"] = {
        "stages": r.stages, "barriers": list(r.barriers), "buffers": list(r.buffers),
        "projection": f"loops over {visits}, {ring.J_NAME} iterations, every value >= 0",
        "projections": len(r.projections),
        "progress states": prog_states, "safety states": safety_states,
        "symmetry": [[first.agents[a].name for a in g] for g in grps]}
    if cluster is not None:
        out.argument["ring"]["cluster"] = ("stage s of every CTA: the projection of the "
                                           "cluster kernel, explored through its view")
    out.queries[:] = queries
    out.points = points
    out.states = prog_states + safety_states
    return first, out
