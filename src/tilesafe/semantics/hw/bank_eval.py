"""Enumerating the warp accesses of one shared-memory access site and costing them in
wavefronts: the concrete half of the bank-conflict analysis.

Why: a site's cost is decided by which lanes of which warp touch which addresses together.
`evaluate_site` enumerates, at one size assignment and a few blocks, every warp instance of
the site (lanes in lock-step per loop iteration; iterations cut to a period where
`bank_sites.period_in` shows one), with each lane's logical coordinate; a warp is the
kernel target's (32 lanes on NVIDIA, a 64-lane wavefront on gfx942); `costs` places them
with the interpreter's own shared-memory placement (semantics/interpreter/smem.py) and counts
wavefronts under the target's bank model (semantics/hw/bank_model.py); `amd_estimate` gives
the CDNA LDS estimate shown as evidence for an NVIDIA kernel. Instances are layout-
independent, so a candidate layout is recounted without enumerating again
(semantics/hw/bank_suggest.py).
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from tilesafe.frontend import ir
from tilesafe.frontend.span import Span
from tilesafe.semantics.expr import size_combos
from tilesafe.semantics.hw import bank_model, banks
from tilesafe.semantics.hw.bank_sites import (
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
from tilesafe.semantics.interpreter.interp_error import InterpError
from tilesafe.semantics.interpreter.interp_io import check_where
from tilesafe.semantics.interpreter.smem import Placement

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
    """One warp executing the access once, as arrays over its lanes: which lanes take
    part (`present`), their logical coordinates (`coords`, one row per lane), whether they
    are active with every evaluable guard evaluated (`concrete`), and their loop variables'
    values (`values`). `lanes` gives the same as Lane records (for counterexamples)."""

    context: int
    warp: int
    iteration: tuple[int, ...]  # iteration indices of the enclosing loops
    present: np.ndarray
    coords: np.ndarray
    concrete: np.ndarray
    values: np.ndarray

    @functools.cached_property
    def lanes(self) -> dict[int, Lane]:
        return {int(ln): Lane(tuple(int(c) for c in self.coords[ln]), bool(self.concrete[ln]),
                              tuple(int(v) for v in self.values[ln]))
                for ln in np.flatnonzero(self.present)}


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
    model: bank_model.BankModel = bank_model.NVIDIA  # the target's warp and banks


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
    threads = np.asarray(site_threads(kernel, site), dtype=np.int64)
    instances: list[WarpAccess] = []
    truncated: dict[str, tuple[int, int]] = {}
    oob = [0]
    budget = [MAX_LANE_EVALS]
    env = LaneEnv(sizes)
    env.thread = threads
    model = bank_model.for_target(kernel.target)
    nl = model.lanes  # lanes of the target's warp (wavefront)
    warps = threads // nl

    def leaf(ci: int, active: np.ndarray, iters: tuple[int, ...],
             values: tuple[np.ndarray, ...]) -> None:
        for f, pos in static:
            active = active & (np.broadcast_to(f(env), threads.shape).astype(bool) == pos)
        if not active.any():
            return
        coord = [np.broadcast_to(np.asarray(f(env), dtype=np.int64), threads.shape)
                 for f in index_fns]
        inb = np.ones(threads.shape, bool)
        for c, e in zip(coord, shape, strict=True):
            inb &= (c >= 0) & (c < e)
        oob[0] += int((active & ~inb).sum())  # TS202 is the access checker's; not banks'
        active = active & inb
        concrete = np.ones(threads.shape, bool)
        for f, pos in by_context:
            concrete &= np.broadcast_to(f(env), threads.shape).astype(bool) == pos
        coords = np.stack(coord, axis=1) if coord else np.zeros((len(threads), 0), np.int64)
        vals = (np.stack([np.broadcast_to(v, threads.shape) for v in values], axis=1)
                if values else np.zeros((len(threads), 0), np.int64))
        for w in np.unique(warps[active]):
            rows = np.flatnonzero(active & (warps == w))
            lanes = threads[rows] % nl
            present = np.zeros(nl, bool)
            present[lanes] = True
            c32 = np.zeros((nl, coords.shape[1]), np.int64)
            c32[lanes] = coords[rows]
            k32 = np.zeros(nl, bool)
            k32[lanes] = concrete[rows]
            v32 = np.zeros((nl, vals.shape[1]), np.int64)
            v32[lanes] = vals[rows]
            instances.append(WarpAccess(ci, int(w), iters, present, c32, k32, v32))

    def walk(ci: int, depth: int, active: np.ndarray, iters: tuple[int, ...],
             values: tuple[np.ndarray, ...]) -> None:
        """Every thread at once: iteration i of a loop runs in the lanes whose trip count
        exceeds i (lock-step, as a warp executes it)."""
        if depth == len(plans):
            budget[0] -= int(active.sum())
            leaf(ci, active, iters, values)
            return
        lp = plans[depth]
        lo = np.broadcast_to(np.asarray(lp.lo(env), dtype=np.int64), threads.shape)
        hi = np.broadcast_to(np.asarray(lp.hi(env), dtype=np.int64), threads.shape)
        trip = np.maximum(0, -(-(hi - lo) // lp.loop.step))
        limit = LOOP_CAP if lp.checks is None else lp.checks
        want = np.minimum(trip, limit)
        most = int(want[active].max()) if active.any() else 0
        uid = lp.loop.var.uid
        done = most
        for i in range(most):
            if budget[0] <= 0:
                done = i
                break
            value = lo + i * lp.loop.step
            env.loops[uid] = value
            walk(ci, depth + 1, active & (want > i), iters + (i,), values + (value,))
        env.loops.pop(uid, None)
        n = np.minimum(want, done)
        cut = active & ((n < want) | ((n < trip) & (lp.checks is None)))
        if cut.any():
            seen = truncated.get(lp.loop.var.name, (int(n[cut].min()), int(trip[cut].max())))
            truncated[lp.loop.var.name] = (min(seen[0], int(n[cut].min())),
                                           max(seen[1], int(trip[cut].max())))

    everyone = np.ones(threads.shape, bool)
    with np.errstate(all="ignore"):
        for ci, ctx in enumerate(contexts):
            env.block = ctx.block
            walk(ci, 0, everyone, (), ())
    instances.sort(key=lambda x: (x.context, x.warp, x.iteration))
    return SiteEval(site, instances, contexts, plans, data_guards, context_guards, truncated,
                    oob[0], corners, size_dep, model)


# ---- costing under a placement ----------------------------------------------------------


@dataclass(frozen=True)
class Cost:
    """An instance's count; `merged`: under the model's lower-bound count (every lane pair
    touching one dword merged; the same count on NVIDIA)."""

    inst: WarpAccess
    report: banks.BankReport
    merged: bool = False


def _addresses(inst: WarpAccess, place: Placement, concrete: bool) -> list[int | None]:
    """Each lane's byte address (None: the lane does not take part), through the
    placement's slot table, for all lanes at once."""
    take = inst.present & inst.concrete if concrete else inst.present
    if not take.any():
        return [None] * len(take)
    flat = inst.coords @ np.asarray(place.strides, dtype=np.int64)
    addrs = _slots(place)[np.where(take, flat, 0)] * place.elem_bytes
    return [int(a) if t else None for a, t in zip(addrs, take, strict=True)]


_SLOTS: dict[int, tuple[Placement, np.ndarray]] = {}


def _slots(place: Placement) -> np.ndarray:
    """The placement's slot table as an array, cached by identity (hashing the placement
    would hash its whole slot tuple on every call)."""
    hit = _SLOTS.get(id(place))
    if hit is None or hit[0] is not place:
        if len(_SLOTS) > 256:
            _SLOTS.clear()
        hit = _SLOTS[id(place)] = (place, np.asarray(place.slots, dtype=np.int64))
    return hit[1]


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
def _amd_cost(addrs: tuple[int | None, ...], width: int, op: Op, arch: banks.AmdArch
              ) -> banks.BankReport:
    return banks.wavefronts_amd_lds(addrs, width, op, arch)


def costs(ev: SiteEval, place: Placement, concrete: bool, merged: bool = False
          ) -> list[Cost]:
    """Cost of every instance under the site's bank model: its upper-bound count, or with
    `merged` its lower-bound count (semantics/hw/bank_model.py). A report's `worst` may
    describe a shifted copy of the instance's addresses; use `recount_real` for the real
    ones."""
    width = place.elem_bytes
    count = ev.model.cost_merged if merged else ev.model.cost
    out = []
    for inst in ev.instances:
        addrs = _addresses(inst, place, concrete)
        if any(a is not None for a in addrs):
            out.append(Cost(inst, count(_shifted(addrs), width, ev.site.op), merged))
    return out


def recount_real(cost: Cost, place: Placement, concrete: bool,
                 model: bank_model.BankModel = bank_model.NVIDIA, op: str = "read") -> Cost:
    addrs = tuple(_addresses(cost.inst, place, concrete))
    count = model.cost_merged if cost.merged else model.cost
    return Cost(cost.inst, count(addrs, place.elem_bytes, op), cost.merged)


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
    found: list[tuple[dict[str, int], tuple[int, ...]]] = []
    for sizes in itertools.islice(size_combos.combos(kernel, candidates), MAX_SIZE_TRIES):
        try:
            grid = check_where(kernel, sizes)
        except (InterpError, ZeroDivisionError, KeyError):
            continue
        found.append((sizes, grid))
        if len(found) >= count:
            break
    return found
