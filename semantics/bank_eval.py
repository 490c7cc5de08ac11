"""Enumerating the warp accesses of one shared-memory access site and costing them in
wavefronts: the concrete half of the bank-conflict analysis.

Why: a site's cost is decided by which lanes of which warp touch which addresses together.
`evaluate_site` enumerates, at one size assignment and a few blocks, every warp instance of
the site (lanes in lock-step per loop iteration; iterations cut to a period where
`bank_sites.period_in` shows one), with each lane's logical coordinate; `costs` places them
with the interpreter's own shared-memory placement (semantics/smem.py) and counts NVIDIA
wavefronts (semantics/banks.py); `amd_estimate` gives the CDNA LDS estimate shown as
evidence. Instances are layout-independent, so a candidate layout is recounted without
enumerating again (semantics/bank_suggest.py).
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from tilesafe.frontend import ir
from tilesafe.frontend.span import Span
from tilesafe.semantics import banks
from tilesafe.semantics.bank_sites import (
    BLOCK,
    CONST,
    DATA,
    SIZE,
    Fn,
    LaneEnv,
    Op,
    Site,
    compile_expr,
    deps,
    join_kinds,
    period_in,
)
from tilesafe.semantics.interp_error import InterpError
from tilesafe.semantics.interp_io import check_where
from tilesafe.semantics.smem import Placement

SIZE_CANDIDATES = (768, 384, 512, 256, 192, 128, 96, 64, 1024, 100, 65, 48, 33, 32, 24, 16,
                   12, 8, 7, 5, 4, 3, 2, 1)
MAX_SIZE_TRIES = 20_000
LOOP_CAP = 256  # iterations of one non-periodic loop looked at (per context)
MAX_LANE_EVALS = 400_000  # per access: past it the remaining iterations are not looked at

# ---- evaluation plan of one site --------------------------------------------------------


@dataclass(frozen=True)
class Context:
    sizes: Mapping[str, int]
    block: tuple[int, int, int]


@dataclass(frozen=True)
class LoopPlan:
    loop: ir.For
    lo: Fn
    hi: Fn
    checks: int | None  # iterations to look at: 1 (v-free), P (periodic), None (all)
    why: str


@dataclass
class Lane:
    coord: tuple[int, ...]
    concrete: bool  # active with every evaluable guard evaluated
    values: tuple[int, ...]  # loop variable values of this lane


@dataclass
class WarpAccess:
    """One warp executing the access once: lanes by lane number."""

    context: int
    warp: int
    iteration: tuple[int, ...]  # iteration indices of the enclosing loops
    lanes: dict[int, Lane] = field(default_factory=dict)


@dataclass
class SiteEval:
    """Everything enumerated for one site (layout-independent: logical coordinates)."""

    site: Site
    instances: list[WarpAccess]
    contexts: list[Context]
    loops: list[LoopPlan]
    data_guards: list[str]
    context_guards: list[str]
    truncated: dict[str, tuple[int, int]]  # loop var -> (checked, trip) where cut short
    out_of_bounds: int
    block_dependent: bool
    size_dependent: bool


def where(span: Span) -> str:
    return f"{span.line}:{span.col}"


class Unevaluable(Exception):
    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def site_threads(kernel: ir.Kernel, site: Site) -> range:
    role = site.scope.role
    if role is None:
        return range(kernel.block)
    return range(role.threads.lo, min(role.threads.hi, kernel.block))


def _loop_plans(site: Site, lets: Mapping[int, ir.Expr], shaping: list[ir.Expr]
                ) -> list[LoopPlan]:
    plans = []
    loops = site.scope.loops
    for depth, loop in enumerate(loops):
        for bound in (loop.lo, loop.hi):
            if DATA in deps(bound, lets):
                raise Unevaluable(f"the bounds of loop '{loop.var.name}' at "
                                   f"{where(loop.span)} depend on data")
        inner_bounds = [b for inner in loops[depth + 1:] for b in (inner.lo, inner.hi)]
        kinds = [period_in(e, loop.var.uid, lets) for e in shaping + inner_bounds]
        joined = join_kinds(kinds, allow_lin=True)
        if joined == CONST:
            checks, why = 1, "the access does not depend on it"
        elif joined is not None and joined[0] == "per":
            checks, why = joined[1], f"the access is periodic in it with period {joined[1]}"
        else:
            checks, why = None, "the access depends on it non-periodically"
        plans.append(LoopPlan(loop, compile_expr(loop.lo, lets), compile_expr(loop.hi, lets),
                               checks, why))
    return plans


def _blocks(grid: tuple[int, ...]) -> list[tuple[int, int, int]]:
    axes = [sorted({0, 1, g - 1} & set(range(g))) for g in grid]
    axes += [[0]] * (3 - len(axes))
    return [(a, b, c) for a in axes[0] for b in axes[1] for c in axes[2]]


def evaluate_site(kernel: ir.Kernel, site: Site, lets: Mapping[int, ir.Expr],
              sizes: Mapping[str, int], grid: tuple[int, ...],
              all_corners: bool = False) -> SiteEval:
    """Enumerate the site's warp instances (raises Unevaluable for data-dependent indices).

    Blocks: the corner blocks when an index or a loop bound depends on the block (or when
    `all_corners`), else block (0, 0, 0) only: guards are the only other block-dependent
    part, and the bound evaluation assumes them true anyway."""
    for i, idx in enumerate(site.indices):
        if DATA in deps(idx, lets):
            raise Unevaluable(f"index {i} of {site.buffer}[...] depends on data (memory, a "
                               "mutable variable or a float)")
    static: list[tuple[Fn, bool]] = []
    by_context: list[tuple[Fn, bool]] = []
    data_guards: list[str] = []
    context_guards: list[str] = []
    for g in site.scope.guards:
        d = deps(g.cond, lets)
        label = f"guard at {where(g.cond.span)}"
        if DATA in d:
            data_guards.append(label)
        elif d & {BLOCK, SIZE}:
            context_guards.append(label)
            by_context.append((compile_expr(g.cond, lets), g.positive))
        else:
            static.append((compile_expr(g.cond, lets), g.positive))
    shaping = list(site.indices) + [g.cond for g in site.scope.guards
                                    if DATA not in deps(g.cond, lets)]
    plans = _loop_plans(site, lets, shaping)
    everything = list(site.indices) + [b for lp in site.scope.loops for b in (lp.lo, lp.hi)]
    all_deps = frozenset().union(*(deps(e, lets) for e in everything)) if everything else (
        frozenset())
    block_dep = BLOCK in all_deps
    size_dep = SIZE in frozenset().union(*(deps(e, lets) for e in site.indices)) if (
        site.indices) else False
    corners = block_dep or all_corners
    contexts = [Context(sizes, b) for b in (_blocks(grid) if corners else [(0, 0, 0)])]
    index_fns = [compile_expr(i, lets) for i in site.indices]
    shape = kernel.buffer(site.buffer).shape
    instances: dict[tuple[int, int, tuple[int, ...]], WarpAccess] = {}
    truncated: dict[str, tuple[int, int]] = {}
    out_of_bounds = 0
    budget = [MAX_LANE_EVALS]
    env = LaneEnv(sizes)

    def leaf(ci: int, iters: tuple[int, ...], values: tuple[int, ...]) -> None:
        nonlocal out_of_bounds
        if not all(bool(f(env)) == pos for f, pos in static):
            return
        coord = tuple(f(env) for f in index_fns)
        if not all(0 <= c < e for c, e in zip(coord, shape, strict=True)):
            out_of_bounds += 1  # the access checker reports it (TS202); not a bank question
            return
        concrete = all(bool(f(env)) == pos for f, pos in by_context)
        warp = env.thread // 32
        inst = instances.get((ci, warp, iters))
        if inst is None:
            inst = instances[(ci, warp, iters)] = WarpAccess(ci, warp, iters)
        inst.lanes[env.thread % 32] = Lane(coord, concrete, values)

    def walk(ci: int, depth: int, iters: tuple[int, ...], values: tuple[int, ...]) -> None:
        if depth == len(plans):
            budget[0] -= 1
            leaf(ci, iters, values)
            return
        lp = plans[depth]
        lo, hi = lp.lo(env), lp.hi(env)
        trip = max(0, -(-(hi - lo) // lp.loop.step))
        limit = LOOP_CAP if lp.checks is None else lp.checks
        n = min(trip, limit)
        uid = lp.loop.var.uid
        for i in range(n):
            if budget[0] <= 0:
                n = i
                break
            env.loops[uid] = lo + i * lp.loop.step
            walk(ci, depth + 1, iters + (i,), values + (lo + i * lp.loop.step,))
        env.loops.pop(uid, None)
        if n < min(trip, limit) or (n < trip and lp.checks is None):
            seen = truncated.get(lp.loop.var.name, (n, trip))
            truncated[lp.loop.var.name] = (min(seen[0], n), max(seen[1], trip))

    threads = site_threads(kernel, site)
    for ci, ctx in enumerate(contexts):
        env.block = ctx.block
        for t in threads:
            env.thread = t
            walk(ci, 0, (), ())
    ordered = sorted(instances.values(), key=lambda x: (x.context, x.warp, x.iteration))
    return SiteEval(site, ordered, contexts, plans, data_guards, context_guards, truncated,
                 out_of_bounds, corners, size_dep)


# ---- costing under a placement ----------------------------------------------------------


@dataclass(frozen=True)
class Cost:
    inst: WarpAccess
    report: banks.BankReport


def _addresses(inst: WarpAccess, place: Placement, concrete: bool) -> list[int | None]:
    addrs: list[int | None] = [None] * banks.NVIDIA_WARP
    for lane, ln in inst.lanes.items():
        if ln.concrete or not concrete:
            addrs[lane] = place.address(ln.coord)
    return addrs


# Shifting every lane's address by a multiple of SHIFT_PERIOD bytes keeps every bank (word %
# 32 on NVIDIA and CDNA3, % 64 on CDNA4) and which lanes share a word or an address, so the
# cost is the same: instances are counted once per shifted pattern (warps of a tile, loop
# iterations that step by whole rows, ...). Counterexamples are recounted on the real
# addresses.
SHIFT_PERIOD = 256


def _shifted(addrs: Sequence[int | None]) -> tuple[int | None, ...]:
    low = min(a for a in addrs if a is not None)
    off = low - low % SHIFT_PERIOD
    return tuple(None if a is None else a - off for a in addrs)


@functools.lru_cache(maxsize=1 << 16)
def _nvidia(addrs: tuple[int | None, ...], width: int) -> banks.BankReport:
    return banks.wavefronts_nvidia(addrs, width)


@functools.lru_cache(maxsize=1 << 16)
def _amd_cost(addrs: tuple[int | None, ...], width: int, op: Op, arch: banks.AmdArch
              ) -> banks.BankReport:
    return banks.wavefronts_amd_lds(addrs, width, op, arch)


def costs(ev: SiteEval, place: Placement, concrete: bool) -> list[Cost]:
    """Cost of every instance. A report's `worst` may describe a shifted copy of the
    instance's addresses; use `recount_real` for the real ones."""
    width = place.elem_bytes
    out = []
    for inst in ev.instances:
        addrs = _addresses(inst, place, concrete)
        if any(a is not None for a in addrs):
            out.append(Cost(inst, _nvidia(_shifted(addrs), width)))
    return out


def recount_real(cost: Cost, place: Placement, concrete: bool) -> Cost:
    addrs = _addresses(cost.inst, place, concrete)
    return Cost(cost.inst, banks.wavefronts_nvidia(addrs, place.elem_bytes))


def worst_cost(costs: Sequence[Cost]) -> Cost | None:
    best: Cost | None = None
    for c in costs:
        if best is None or (c.report.max_way, c.report.wavefronts) > (
                best.report.max_way, best.report.wavefronts):
            best = c
    return best


def amd_estimate(ev: SiteEval, place: Placement) -> dict[str, object]:
    """AMD CDNA LDS estimate: wavefront w = warps 2w and 2w+1 at the same iteration."""
    width = place.elem_bytes
    waves: dict[tuple[int, int, tuple[int, ...]], list[int | None]] = {}
    for inst in ev.instances:
        key = (inst.context, inst.warp // 2, inst.iteration)
        addrs = waves.setdefault(key, [None] * banks.AMD_WAVE)
        half = (inst.warp % 2) * banks.NVIDIA_WARP
        for lane, a in enumerate(_addresses(inst, place, concrete=False)):
            addrs[half + lane] = a
    out: dict[str, object] = {
        "wavefront": "64 lanes = NVIDIA warps 2w and 2w+1 at the same iteration",
        "width_bytes": width,
    }
    archs: list[banks.AmdArch] = ["cdna3"] + (["cdna4"] if ev.site.op == "read" else [])
    for arch in archs:
        total = ideal = worst = 0
        at: dict[str, object] = {}
        for (ci, wave, iters), addrs in waves.items():
            if all(a is None for a in addrs):
                continue
            rep = _amd_cost(_shifted(addrs), width, ev.site.op, arch)
            total, ideal = total + rep.wavefronts, ideal + rep.ideal
            if rep.max_way > worst:
                worst = rep.max_way
                at = {"wave": wave, "iteration": list(iters),
                      "block": list(ev.contexts[ci].block)}
        out[arch] = {"wavefronts": total, "ideal": ideal, "worst_way": worst, "worst_at": at}
    if ev.site.op == "write":
        out["cdna4"] = "skipped: CDNA4 LDS write phases are not documented"
    return out


# ---- representative sizes ---------------------------------------------------------------


def representative_sizes(kernel: ir.Kernel, count: int = 1,
                         candidates: Sequence[int] = SIZE_CANDIDATES
                         ) -> list[tuple[dict[str, int], tuple[int, ...]]]:
    """Up to `count` size assignments satisfying `where` (with their grids). The default
    candidates go largest-first so that tiles are full and pipelined loops go round their
    rings."""
    names = kernel.sizes
    found: list[tuple[dict[str, int], tuple[int, ...]]] = []
    combos = itertools.product(candidates, repeat=len(names))
    for values in itertools.islice(combos, MAX_SIZE_TRIES):
        sizes = dict(zip(names, values, strict=True))
        try:
            grid = check_where(kernel, sizes)
        except (InterpError, ZeroDivisionError, KeyError):
            continue
        found.append((sizes, grid))
        if len(found) >= count:
            break
    return found
