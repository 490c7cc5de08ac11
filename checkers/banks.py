"""Checker "banks": shared-memory bank conflicts of every ordinary load and store (a lint).

Every shared-memory `Load` and `Store` of the generic proxy gets one obligation, "this access
is free of bank conflicts", with severity WARNING: a conflict costs time, never correctness,
so these obligations never make `verify` fail. TMA copies are done by the copy engine, not by
a warp, and are not checked here.

How an access is evaluated (all concrete, checked against `semantics/banks.py`):

* Threads: the statement's thread set is the block narrowed by its role; a role with
  `elect one` runs on one thread, and one thread cannot conflict with itself (PROVED at
  once). Warps are threads 32w .. 32w+31 of the block; lane = thread % 32.
* Guards: an `if` condition (or the left side of `&&`/`||` guarding a load on its right)
  that depends only on the thread, loop variables and constants is evaluated per lane.
  Every other guard is assumed true in the "bound" evaluation, which decides PROVED: adding
  lanes can only add distinct words per bank, so it over-approximates every block and every
  outcome of the guard. Guards on sizes or block coordinates are also evaluated concretely
  (the "concrete" evaluation, which decides REFUTED); guards that read memory or use
  mutable/float values cannot be evaluated at all.
* Sizes: indices and loop bounds are evaluated at one representative size assignment that
  satisfies `where` (a small search, largest-first, so tiles are full and pipelined loops
  wrap their rings), reported in the evidence. Block coordinates: block (0, 0, 0) when
  nothing depends on them, otherwise blocks {0, 1, last} in each grid dimension.
* Loop iterations: for each enclosing loop variable v, a syntactic argument decides how
  many iterations must be looked at, independently of the sizes: if nothing that shapes the
  warp access (indices, evaluated guards, bounds of inner loops) depends on v, one
  iteration; if it depends on v only through terms periodic in v (`v % c`, `(a*v + t) % c`,
  sums/products/min/max of periodic terms), one period; otherwise every iteration at the
  representative sizes, up to LOOP_CAP. Lanes of one warp execute iteration i of a loop
  together (lock-step), so instances are keyed by iteration *indices*.
* Address: the absolute byte address of each lane's element from `semantics/smem.py`'s
  `plan_shared`, exactly as the reference interpreter places the buffer; width = element
  bytes. Cost: `banks.wavefronts_nvidia` per warp instance.

Verdicts:

* PROVED when the bound evaluation finds one wavefront per phase in every instance.
* REFUTED (TS601, "k-way bank conflict", k = worst per-phase wavefronts) when the concrete
  evaluation has a conflicting instance and no data-dependent guard encloses the access. If
  only the bound evaluation conflicts (a size/block guard shuts the lanes out at the
  representative sizes, e.g. the else-branch of a ragged-tail guard), a few more size
  assignments, ragged ones first, and the corner blocks are searched for a witness. The
  counterexample names sizes, block, warp, iteration, the colliding lanes, their indices and
  addresses.
  The message adds a layout fix. For buffers not touched by TMA: `swizzle_synth.synthesize`
  on the buffer's last two dims, counterexample-guided: start from the worst warp instance
  of every access of the buffer, recount *every* instance of every access of the buffer
  under the answer, add those still conflicting and ask again (up to SYNTH_ROUNDS). CuTe
  family first, then the row-XOR family, written as an F2 `linear` layout. The synthesiser
  speaks of CuTe `Swizzle<B,Mb,S>` on BYTE offsets; our `swizzle(B, M, S, inner)` acts on
  ELEMENT offsets, so the suggestion is `swizzle(B, Mb - log2(elem_bytes), S, row_major)`.
  The recount re-places the buffers with the new layout through `plan_shared` (which
  realises it with `semantics/layouts.realize`, as the interpreter does), requires it to
  permute the buffer's elements, and only a layout whose recount agrees is suggested. For
  TMA buffers the copy engine fixes the arrangement, so only the TMA swizzle modes that fit
  the row are recounted.
* UNKNOWN (TS690) when an index reads memory (or any value that cannot be evaluated), when a
  conflict needs lanes that only a data-dependent guard could admit, when a conflict is only
  seen with size/block guards assumed true and no checked size/block activates it, or when a
  non-periodic loop was cut at LOOP_CAP iterations without finding a conflict.

Evidence also carries an AMD CDNA LDS estimate (64-lane wavefronts made of warps 2w and
2w+1, `banks.wavefronts_amd_lds`, CDNA3 always, CDNA4 for reads): information only.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import math
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from tilesafe.checkers.obligation import Obligation, Severity, Verdict
from tilesafe.checkers.registry import CheckOptions
from tilesafe.frontend import ir
from tilesafe.frontend.span import Span
from tilesafe.frontend.walk import statements
from tilesafe.semantics import bank_param, banks, evaluate, swizzle_synth
from tilesafe.semantics.interp_error import InterpError
from tilesafe.semantics.interp_io import check_where
from tilesafe.semantics.smem import Placement, plan_shared

CHECKER = "banks"
CONFLICT = "TS601"  # some warp instance needs more wavefronts than the ideal
UNDECIDED = "TS690"  # the addresses (or the lanes that run) depend on data, or coverage cut

SIZE_CANDIDATES = (768, 384, 512, 256, 192, 128, 96, 64, 1024, 100, 65, 48, 33, 32, 24, 16,
                   12, 8, 7, 5, 4, 3, 2, 1)
# For witnesses of guarded conflicts: ragged sizes early, so that partial tiles show up.
WITNESS_CANDIDATES = (768, 100, 65, 33, 7, 384, 1, 512, 256, 192, 128, 96, 64, 48, 32, 24,
                      16, 12, 8, 5, 4, 3, 2)
MAX_SIZE_TRIES = 20_000
LOOP_CAP = 256  # iterations of one non-periodic loop looked at (per context)
MAX_PERIOD = 256  # a longer period is treated as "not periodic"
MAX_LANE_EVALS = 400_000  # per access: past it the remaining iterations are not looked at
SYNTH_ROUNDS = 8  # counterexample-guided synthesis rounds per swizzle family
WITNESS_SIZES = 8  # size assignments tried when looking for a witness block

Op = Literal["read", "write"]


# ---- access sites ---------------------------------------------------------------------------


@dataclass(frozen=True)
class _Guard:
    cond: ir.Expr
    positive: bool


@dataclass(frozen=True)
class _Scope:
    role: ir.Role | None = None
    loops: tuple[ir.For, ...] = ()
    guards: tuple[_Guard, ...] = ()


@dataclass(frozen=True)
class Site:
    """One shared-memory load or store of the kernel text."""

    buffer: str
    op: Op
    indices: tuple[ir.Expr, ...]
    span: Span
    scope: _Scope


def sites(kernel: ir.Kernel) -> tuple[tuple[Site, ...], dict[int, ir.Expr]]:
    """Every generic-proxy shared access in text order, and the `let` bindings by uid."""
    out: list[Site] = []
    lets: dict[int, ir.Expr] = {}
    _walk(kernel.body, _Scope(), out, lets)
    return tuple(out), lets


def _walk(stmts: Sequence[ir.Stmt], scope: _Scope, out: list[Site],
          lets: dict[int, ir.Expr]) -> None:
    for s in stmts:
        if isinstance(s, ir.For):
            _loads(s.lo, scope, out)
            _loads(s.hi, scope, out)
            _walk(s.body, dataclasses.replace(scope, loops=scope.loops + (s,)), out, lets)
        elif isinstance(s, ir.If):
            _loads(s.cond, scope, out)
            _walk(s.then, _guarded(scope, s.cond, True), out, lets)
            _walk(s.orelse, _guarded(scope, s.cond, False), out, lets)
        elif isinstance(s, ir.Role):
            _walk(s.body, dataclasses.replace(scope, role=s), out, lets)
        else:
            if isinstance(s, ir.Let):
                lets[s.uid] = s.value
            for value in _expr_fields(s):
                _loads(value, scope, out)
            if isinstance(s, ir.Store) and s.space is ir.Space.SHARED:
                out.append(Site(s.tensor, "write", s.indices, s.span, scope))


def _expr_fields(s: ir.Stmt) -> Iterator[ir.Expr]:
    for f in dataclasses.fields(s):
        value = getattr(s, f.name)
        items = value if isinstance(value, tuple) else (value,)
        for item in items:
            if isinstance(item, ir.Expr):
                yield item
            elif isinstance(item, ir.BarrierRef) and item.index is not None:
                yield item.index
            elif isinstance(item, ir.BufferSlice):
                yield from item.prefix


def _guarded(scope: _Scope, cond: ir.Expr, positive: bool) -> _Scope:
    return dataclasses.replace(scope, guards=scope.guards + (_Guard(cond, positive),))


def _loads(e: ir.Expr, scope: _Scope, out: list[Site]) -> None:
    """Shared loads inside an expression; the right side of && / || runs only when the
    left side lets it (short-circuit), so it is guarded by it."""
    if isinstance(e, ir.BinOp) and e.op in ("&&", "||"):
        _loads(e.lhs, scope, out)
        _loads(e.rhs, _guarded(scope, e.lhs, e.op == "&&"), out)
        return
    if isinstance(e, ir.Load):
        for i in e.indices:
            _loads(i, scope, out)
        if e.space is ir.Space.SHARED:
            out.append(Site(e.tensor, "read", e.indices, e.span, scope))
        return
    if isinstance(e, ir.BinOp):
        _loads(e.lhs, scope, out)
        _loads(e.rhs, scope, out)
    elif isinstance(e, ir.UnOp):
        _loads(e.operand, scope, out)
    elif isinstance(e, ir.Call):
        for a in e.args:
            _loads(a, scope, out)


# ---- dependences and concrete evaluation ------------------------------------------------

DATA = "data"
THREAD = "thread"
BLOCK = "block"
SIZE = "size"


def deps(e: ir.Expr, lets: Mapping[int, ir.Expr]) -> frozenset[object]:
    """What a term depends on: THREAD, BLOCK, SIZE, DATA (memory, mutable or float values)
    and the uids of loop variables."""
    if isinstance(e, ir.IntConst):
        return frozenset()
    if isinstance(e, ir.FloatConst) or e.type is ir.ScalarType.FLOAT:
        return frozenset({DATA})
    if isinstance(e, ir.SizeVar):
        return frozenset({SIZE})
    if isinstance(e, ir.Builtin):
        return frozenset({BLOCK if e.kind.value.startswith("block") else THREAD})
    if isinstance(e, ir.LoopVar):
        return frozenset({e.uid})
    if isinstance(e, ir.LocalRef):
        if e.mutable or e.uid not in lets:
            return frozenset({DATA})
        return deps(lets[e.uid], lets)
    if isinstance(e, ir.Load):
        return frozenset({DATA})
    if isinstance(e, ir.BinOp):
        return deps(e.lhs, lets) | deps(e.rhs, lets)
    if isinstance(e, ir.UnOp):
        return deps(e.operand, lets)
    if isinstance(e, ir.Call):
        if e.func not in ("min", "max", "abs"):
            return frozenset({DATA})
        return frozenset().union(*(deps(a, lets) for a in e.args))
    return frozenset({DATA})


class _Env:
    """The values one lane sees: thread, block coordinates, sizes, loop variables."""

    __slots__ = ("thread", "block", "sizes", "loops")

    def __init__(self, sizes: Mapping[str, int]) -> None:
        self.thread = 0
        self.block: tuple[int, int, int] = (0, 0, 0)
        self.sizes = sizes
        self.loops: dict[int, int] = {}


Fn = Callable[[_Env], Any]

def compile_expr(e: ir.Expr, lets: Mapping[int, ir.Expr]) -> Fn:
    """A closure computing an integer/boolean term for one lane (callers check `deps` has no
    DATA first). Operators mean what semantics/evaluate.py says (floor / and %)."""

    def leaf(x: ir.Expr) -> Fn:
        if isinstance(x, ir.SizeVar):
            name = x.name
            return lambda env: env.sizes[name]
        if isinstance(x, ir.Builtin):
            kind = x.kind
            if kind is ir.BuiltinKind.THREAD:
                return lambda env: env.thread
            if kind is ir.BuiltinKind.LANE:
                return lambda env: env.thread % 32
            if kind is ir.BuiltinKind.WARP_ID:
                return lambda env: env.thread // 32
            axis = "xyz".index(kind.value[-1])
            return lambda env: env.block[axis]
        if isinstance(x, ir.LoopVar):
            uid = x.uid
            return lambda env: env.loops[uid]
        if isinstance(x, ir.LocalRef) and not x.mutable and x.uid in lets:
            return evaluate.compile_expr(lets[x.uid], leaf)
        raise ValueError(f"cannot evaluate {type(x).__name__} concretely")

    return evaluate.compile_expr(e, leaf)


# ---- periodicity in a loop variable (size-independent) ---------------------------------

CONST = ("const", 1)
_Kind = tuple[str, int] | None  # ("const", 1) | ("per", P) | ("lin", P) | None (unknown)


def _lcm(a: int, b: int) -> int:
    return a * b // math.gcd(a, b)


def _join(kinds: Sequence[_Kind], allow_lin: bool) -> _Kind:
    """Combine operands: const ∘ const = const; periodic parts give the lcm of periods;
    `lin` (shift by a constant per period) survives only where allow_lin (+, -)."""
    if any(k is None for k in kinds):
        return None
    name, period = "const", 1
    for k in kinds:
        assert k is not None
        if k[0] == "lin" and not allow_lin:
            return None
        if k[0] != "const":
            name = "lin" if "lin" in (name, k[0]) else "per"
            period = _lcm(period, k[1])
    return (name, period) if period <= MAX_PERIOD else None


def period_in(e: ir.Expr, uid: int, lets: Mapping[int, ir.Expr]) -> _Kind:
    """How term e depends on loop variable `uid`.

    ("const", 1): not at all. ("per", P): e(v + P) = e(v) for every v. ("lin", P): e(v + t)
    = e(v) + a*t for every multiple t of P, with a*P an integer. None: neither is shown.
    Rules: v is lin 1; +,- keep lin; times a v-free term keeps the kind; lin / c is lin c*P
    (the shift a*t is a multiple of c); lin % c is per c*P; comparisons, min, max, abs and
    boolean operators only of per/const operands.
    """
    if isinstance(e, ir.LoopVar):
        return ("lin", 1) if e.uid == uid else CONST
    if isinstance(e, (ir.IntConst, ir.SizeVar, ir.Builtin, ir.FloatConst)):
        return CONST
    if isinstance(e, ir.LocalRef):
        if e.mutable or e.uid not in lets:
            return None
        return period_in(lets[e.uid], uid, lets)
    if isinstance(e, ir.UnOp):
        inner = period_in(e.operand, uid, lets)
        return inner if e.op == "-" else _join([inner], allow_lin=False)
    if isinstance(e, ir.BinOp):
        lhs, rhs = period_in(e.lhs, uid, lets), period_in(e.rhs, uid, lets)
        if e.op in ("+", "-"):
            return _join([lhs, rhs], allow_lin=True)
        if e.op == "*":
            if lhs == CONST:
                return rhs
            if rhs == CONST:
                return lhs
            return None
        if e.op in ("/", "%"):
            if not isinstance(e.rhs, ir.IntConst) or e.rhs.value <= 0 or lhs is None:
                return None
            c = e.rhs.value
            if lhs[0] != "lin":
                return lhs
            p = c * lhs[1]
            if p > MAX_PERIOD:
                return None
            return ("lin", p) if e.op == "/" else ("per", p)
        return _join([lhs, rhs], allow_lin=False)
    if isinstance(e, ir.Call) and e.func in ("min", "max", "abs"):
        return _join([period_in(a, uid, lets) for a in e.args], allow_lin=False)
    return None


# ---- evaluation plan of one site --------------------------------------------------------


@dataclass(frozen=True)
class _Context:
    sizes: Mapping[str, int]
    block: tuple[int, int, int]


@dataclass(frozen=True)
class _LoopPlan:
    loop: ir.For
    lo: Fn
    hi: Fn
    checks: int | None  # iterations to look at: 1 (v-free), P (periodic), None (all)
    why: str


@dataclass
class _Lane:
    coord: tuple[int, ...]
    concrete: bool  # active with every evaluable guard evaluated
    values: tuple[int, ...]  # loop variable values of this lane


@dataclass
class _Inst:
    """One warp executing the access once: lanes by lane number."""

    context: int
    warp: int
    iteration: tuple[int, ...]  # iteration indices of the enclosing loops
    lanes: dict[int, _Lane] = field(default_factory=dict)


@dataclass
class _Eval:
    """Everything enumerated for one site (layout-independent: logical coordinates)."""

    site: Site
    instances: list[_Inst]
    contexts: list[_Context]
    loops: list[_LoopPlan]
    data_guards: list[str]
    context_guards: list[str]
    truncated: dict[str, tuple[int, int]]  # loop var -> (checked, trip) where cut short
    out_of_bounds: int
    block_dependent: bool
    size_dependent: bool


def _where(span: Span) -> str:
    return f"{span.line}:{span.col}"


class _Unevaluable(Exception):
    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def _threads(kernel: ir.Kernel, site: Site) -> range:
    role = site.scope.role
    if role is None:
        return range(kernel.block)
    return range(role.threads.lo, min(role.threads.hi, kernel.block))


def _loop_plans(site: Site, lets: Mapping[int, ir.Expr], shaping: list[ir.Expr]
                ) -> list[_LoopPlan]:
    plans = []
    loops = site.scope.loops
    for depth, loop in enumerate(loops):
        for bound in (loop.lo, loop.hi):
            if DATA in deps(bound, lets):
                raise _Unevaluable(f"the bounds of loop '{loop.var.name}' at "
                                   f"{_where(loop.span)} depend on data")
        inner_bounds = [b for inner in loops[depth + 1:] for b in (inner.lo, inner.hi)]
        kinds = [period_in(e, loop.var.uid, lets) for e in shaping + inner_bounds]
        joined = _join(kinds, allow_lin=True)
        if joined == CONST:
            checks, why = 1, "the access does not depend on it"
        elif joined is not None and joined[0] == "per":
            checks, why = joined[1], f"the access is periodic in it with period {joined[1]}"
        else:
            checks, why = None, "the access depends on it non-periodically"
        plans.append(_LoopPlan(loop, compile_expr(loop.lo, lets), compile_expr(loop.hi, lets),
                               checks, why))
    return plans


def _blocks(grid: tuple[int, ...]) -> list[tuple[int, int, int]]:
    axes = [sorted({0, 1, g - 1} & set(range(g))) for g in grid]
    axes += [[0]] * (3 - len(axes))
    return [(a, b, c) for a in axes[0] for b in axes[1] for c in axes[2]]


def _evaluate(kernel: ir.Kernel, site: Site, lets: Mapping[int, ir.Expr],
              sizes: Mapping[str, int], grid: tuple[int, ...],
              all_corners: bool = False) -> _Eval:
    """Enumerate the site's warp instances (raises _Unevaluable for data-dependent indices).

    Blocks: the corner blocks when an index or a loop bound depends on the block (or when
    `all_corners`), else block (0, 0, 0) only: guards are the only other block-dependent
    part, and the bound evaluation assumes them true anyway."""
    for i, idx in enumerate(site.indices):
        if DATA in deps(idx, lets):
            raise _Unevaluable(f"index {i} of {site.buffer}[...] depends on data (memory, a "
                               "mutable variable or a float)")
    static: list[tuple[Fn, bool]] = []
    by_context: list[tuple[Fn, bool]] = []
    data_guards: list[str] = []
    context_guards: list[str] = []
    for g in site.scope.guards:
        d = deps(g.cond, lets)
        label = f"guard at {_where(g.cond.span)}"
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
    contexts = [_Context(sizes, b) for b in (_blocks(grid) if corners else [(0, 0, 0)])]
    index_fns = [compile_expr(i, lets) for i in site.indices]
    shape = kernel.buffer(site.buffer).shape
    instances: dict[tuple[int, int, tuple[int, ...]], _Inst] = {}
    truncated: dict[str, tuple[int, int]] = {}
    out_of_bounds = 0
    budget = [MAX_LANE_EVALS]
    env = _Env(sizes)

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
            inst = instances[(ci, warp, iters)] = _Inst(ci, warp, iters)
        inst.lanes[env.thread % 32] = _Lane(coord, concrete, values)

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

    threads = _threads(kernel, site)
    for ci, ctx in enumerate(contexts):
        env.block = ctx.block
        for t in threads:
            env.thread = t
            walk(ci, 0, (), ())
    ordered = sorted(instances.values(), key=lambda x: (x.context, x.warp, x.iteration))
    return _Eval(site, ordered, contexts, plans, data_guards, context_guards, truncated,
                 out_of_bounds, corners, size_dep)


# ---- costing under a placement ----------------------------------------------------------


@dataclass(frozen=True)
class _Cost:
    inst: _Inst
    report: banks.BankReport


def _addresses(inst: _Inst, place: Placement, concrete: bool) -> list[int | None]:
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


def _costs(ev: _Eval, place: Placement, concrete: bool) -> list[_Cost]:
    """Cost of every instance. A report's `worst` may describe a shifted copy of the
    instance's addresses; use `_recount` for the real ones."""
    width = place.elem_bytes
    out = []
    for inst in ev.instances:
        addrs = _addresses(inst, place, concrete)
        if any(a is not None for a in addrs):
            out.append(_Cost(inst, _nvidia(_shifted(addrs), width)))
    return out


def _recount(cost: _Cost, place: Placement, concrete: bool) -> _Cost:
    addrs = _addresses(cost.inst, place, concrete)
    return _Cost(cost.inst, banks.wavefronts_nvidia(addrs, place.elem_bytes))


def _worst(costs: Sequence[_Cost]) -> _Cost | None:
    best: _Cost | None = None
    for c in costs:
        if best is None or (c.report.max_way, c.report.wavefronts) > (
                best.report.max_way, best.report.wavefronts):
            best = c
    return best


def _amd(ev: _Eval, place: Placement) -> dict[str, object]:
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


# ---- the checker ----------------------------------------------------------------------------


def check(kernel: ir.Kernel, options: CheckOptions) -> list[Obligation]:
    """The registry entry point: one obligation per shared load/store, all WARNING."""
    return check_kernel(kernel, options)


def check_kernel(kernel: ir.Kernel, options: CheckOptions | None = None,
                 suggest: bool = True) -> list[Obligation]:
    """`check`, optionally without the (z3) layout suggestion for refuted accesses."""
    options = options or CheckOptions()
    start = time.perf_counter()
    all_sites, lets = sites(kernel)
    if not all_sites:
        return []
    reps = representative_sizes(kernel)
    try:
        plan = plan_shared(kernel.shared)
    except InterpError as err:  # a layout that cannot be realised: the layout lint's case
        return [Obligation(CHECKER, _Checker.name_of(kernel, site), Verdict.UNKNOWN,
                           "enumeration", site.span, UNDECIDED, f"cannot place the shared "
                           f"buffers: {err}", Severity.WARNING) for site in all_sites]
    evals: dict[int, _Eval | str] = {}
    for k, site in enumerate(all_sites):
        if site.scope.role is not None and site.scope.role.elect_one:
            evals[k] = "elect"
        elif not reps:
            evals[k] = "no size assignment satisfying `where` was found"
        else:
            try:
                evals[k] = _evaluate(kernel, site, lets, reps[0][0], reps[0][1])
            except _Unevaluable as why:
                evals[k] = why.reason
            except (ArithmeticError, KeyError, TypeError, ValueError) as err:
                evals[k] = f"evaluation failed ({type(err).__name__}: {err})"
    setup = time.perf_counter() - start
    ctx = _Checker(kernel, options, all_sites, lets, plan, evals, reps, suggest)
    out = []
    for k in range(len(all_sites)):
        t0 = time.perf_counter()
        ob = ctx.obligation(k)
        out.append(dataclasses.replace(ob, seconds=time.perf_counter() - t0 + setup))
    return out


def _sized_bounds(loop: ir.For, lets: Mapping[int, ir.Expr]) -> bool:
    """A loop whose trip count reads the sizes or the block (enumerated for one only)."""
    from tilesafe.semantics.events import Lets, free_vars

    table = Lets(dict(lets))
    return any(v.startswith("size:") or v == "block"
               for e in (loop.lo, loop.hi) for v in free_vars(e, table))


@dataclass(frozen=True)
class Suggestion:
    layout: str  # in our layout syntax
    degree: int  # worst conflict degree of every access of the buffer under it (verified)
    note: str


class _Checker:
    def __init__(self, kernel: ir.Kernel, options: CheckOptions, all_sites: tuple[Site, ...],
                 lets: Mapping[int, ir.Expr], plan: Any, evals: Mapping[int, _Eval | str],
                 reps: list[tuple[dict[str, int], tuple[int, ...]]], suggest: bool) -> None:
        self.kernel, self.options, self.sites, self.lets = kernel, options, all_sites, lets
        self.plan, self.evals, self.reps, self.want_suggestion = plan, evals, reps, suggest
        self.suggestions: dict[str, tuple[Suggestion | None, str]] = {}

    @staticmethod
    def name_of(kernel: ir.Kernel, site: Site) -> str:
        return (f"{kernel.name}: shared {site.op} of {site.buffer} at {_where(site.span)} "
                "free of bank conflicts")

    def name(self, site: Site) -> str:
        return self.name_of(self.kernel, site)

    def obligation(self, k: int) -> Obligation:
        site, ev = self.sites[k], self.evals[k]
        name = self.name(site)
        if ev == "elect":
            return Obligation(CHECKER, name, Verdict.PROVED, "trivial", site.span,
                              message="conflict-free: one thread (elect one) runs it",
                              severity=Severity.WARNING, evidence={"threads": 1})
        if isinstance(ev, str):
            return Obligation(CHECKER, name, Verdict.UNKNOWN, "enumeration", site.span,
                              UNDECIDED, f"cannot evaluate the lane addresses: {ev}",
                              Severity.WARNING, evidence={"reason": ev})
        place = self.plan.placements[site.buffer]
        bound = _costs(ev, place, concrete=False)
        evidence = self.evidence(ev, place, bound)
        worst_bound = _worst(bound)
        if worst_bound is None or worst_bound.report.max_way <= 1:
            return self.proved(name, ev, bound, evidence)
        # Without size/block guards the concrete evaluation is the bound one.
        worst = _worst(_costs(ev, place, concrete=True)) if ev.context_guards else worst_bound
        if worst is not None and worst.report.max_way > 1:
            if ev.data_guards:
                return self.conditional(name, ev, worst, evidence, concrete=True)
            return self.refuted(name, ev, worst, place, evidence)
        witness = self.witness(ev, worst_bound)
        if witness is not None:
            ev2, cost = witness
            return self.refuted(name, ev2, cost, place, evidence, witnessed=True)
        return self.conditional(name, ev, worst_bound, evidence, concrete=False)

    # -- evidence and messages --

    def evidence(self, ev: _Eval, place: Placement, bound: Sequence[_Cost]) -> dict[str, object]:
        worst = _worst(bound)
        trips = {}
        for lp in ev.loops:
            name = lp.loop.var.name
            if name in ev.truncated:
                n, trip = ev.truncated[name]
                trips[name] = f"first {n} of {trip} iterations ({lp.why}; the rest unchecked)"
            elif lp.checks is None:
                trips[name] = f"every iteration ({lp.why})"
            else:
                trips[name] = f"first {lp.checks} iteration(s) of each run ({lp.why})"
        return {
            "model": "NVIDIA sm_50..sm_90: 32 banks of 4 B; lanes touching one 32-bit word "
                     "merge (semantics/banks.py wavefronts_nvidia)",
            "buffer": place.buffer.name,
            "layout": str(place.buffer.layout),
            "base_address": place.base,
            "width_bytes": place.elem_bytes,
            "op": ev.site.op,
            "sizes": dict(ev.contexts[0].sizes) if ev.contexts else {},
            "size_dependent_index": ev.size_dependent,
            "blocks_checked": [list(c.block) for c in ev.contexts],
            "iterations": trips,
            "warp_accesses": len(bound),
            "wavefronts": sum(c.report.wavefronts for c in bound),
            "ideal": sum(c.report.ideal for c in bound),
            "worst_way": worst.report.max_way if worst else 0,
            "assumed_true_guards": ev.data_guards + ev.context_guards,
            "data_guards": ev.data_guards,
            "out_of_bounds_lanes": ev.out_of_bounds,
            "amd_lds": _amd(ev, place),
        }

    def proved(self, name: str, ev: _Eval, bound: Sequence[_Cost],
               evidence: dict[str, object]) -> Obligation:
        site = ev.site
        total = sum(c.report.wavefronts for c in bound)
        ideal = sum(c.report.ideal for c in bound)
        scope = f"{len(bound)} warp accesses"
        if ev.truncated:
            cut = ", ".join(f"{v}: {n} of {t}" for v, (n, t) in ev.truncated.items())
            return Obligation(CHECKER, name, Verdict.UNKNOWN, "enumeration", site.span,
                              UNDECIDED, f"no conflict in the iterations checked, but loop "
                              f"iterations were cut ({cut}) and the address is not periodic "
                              "in them", Severity.WARNING, evidence=evidence)
        msg = f"conflict-free: {total} wavefronts, ideal {ideal} ({scope}"
        method = "enumeration"
        # Counted at representative sizes: the address reads the sizes or the block, or a
        # non-periodic loop was enumerated for the trip count of those sizes only.
        partial = (ev.size_dependent or ev.block_dependent
                   or any(lp.checks is None and _sized_bounds(lp.loop, self.lets)
                          for lp in ev.loops))
        if partial:
            ok, how = bank_param.invariant(
                self.kernel, site.indices, site.scope.loops,
                site.scope.role, self.lets, self.plan.placements[site.buffer],
                self.options.timeout_ms)
            evidence["scope"] = ("every size and block (parametric: " + how + ")" if ok else
                                 "the representative sizes and blocks only: " + how)
            if ok:
                method = "enumeration + z3 (translation invariance, every size)"
                msg += "; for every size and block: the lane offsets do not depend on them"
            else:
                where = (f"at sizes {_sizes(ev.contexts[0].sizes)}" if ev.contexts else
                         "at the representative sizes")
                return Obligation(CHECKER, name, Verdict.UNKNOWN, "enumeration", site.span,
                                  UNDECIDED, f"conflict-free in the {len(bound)} warp accesses "
                                  f"counted ({total} wavefronts, ideal {ideal}; {where}), but "
                                  f"not shown for every size and block: {how}",
                                  Severity.WARNING, evidence=evidence)
        else:
            evidence["scope"] = ("every size and block (the address depends on neither, and "
                                 "every loop is periodic in it)")
        if partial and method == "enumeration":
            if ev.size_dependent:
                msg += f"; at sizes {_sizes(ev.contexts[0].sizes)}"
            if ev.block_dependent:
                msg += f"; blocks {', '.join(str(c.block) for c in ev.contexts)}"
        if ev.data_guards:
            msg += "; data-dependent guards assumed true, which can only over-count"
        return Obligation(CHECKER, name, Verdict.PROVED, method, site.span,
                          message=msg + ")", severity=Severity.WARNING, evidence=evidence)

    def counterexample(self, ev: _Eval, cost: _Cost, place: Placement,
                       concrete: bool) -> dict[str, object]:
        cost = _recount(cost, place, concrete)  # the real addresses, not a shifted copy
        inst, rep = cost.inst, cost.report
        worst = rep.worst
        assert worst is not None
        lanes = list(worst.lanes)
        first = inst.lanes[lanes[0]]
        names = [lp.loop.var.name for lp in ev.loops]
        return {
            "sizes": dict(ev.contexts[inst.context].sizes),
            "block": list(ev.contexts[inst.context].block),
            "warp": inst.warp,
            "threads": [inst.warp * 32, inst.warp * 32 + 31],
            "iteration": dict(zip(names, first.values, strict=True)),
            "iteration_index": dict(zip(names, inst.iteration, strict=True)),
            "degree": rep.max_way,
            "wavefronts": rep.wavefronts,
            "ideal": rep.ideal,
            "bank": worst.bank,
            "lanes": lanes,
            "indices": [list(inst.lanes[ln].coord) for ln in lanes],
            "addresses": list(worst.addrs),
            "words": sorted({a // banks.WORD_BYTES for a in worst.addrs}),
        }

    def refuted(self, name: str, ev: _Eval, cost: _Cost, place: Placement,
                evidence: dict[str, object], witnessed: bool = False) -> Obligation:
        site = ev.site
        cex = self.counterexample(ev, cost, place, concrete=True)
        lanes = cex["lanes"]
        assert isinstance(lanes, list)
        verb = "read" if site.op == "read" else "write"
        iteration = cex["iteration"]
        where = f"warp {cex['warp']} (threads {cex['threads'][0]}..{cex['threads'][1]})"
        if iteration:
            where += " at " + ", ".join(f"{k}={v}" for k, v in iteration.items())
        if ev.block_dependent:
            where += f", block {tuple(cex['block'])}"
        if cex["sizes"] and (ev.size_dependent or witnessed):
            where += f", sizes {_sizes(cex['sizes'])}"
        addrs = cex["addresses"]
        assert isinstance(addrs, list)
        shown = ", ".join(f"lane {ln} @{a}" for ln, a in list(zip(lanes, addrs, strict=True))[:6])
        more = ", ..." if len(lanes) > 6 else ""
        msg = (f"{cex['degree']}-way bank conflict: {where}: {len(lanes)} lanes {verb} "
               f"{len(cex['words'])} distinct words of bank {cex['bank']} ({shown}{more}); "
               f"{cex['wavefronts']} wavefronts, ideal {cex['ideal']}. ")
        suggestion, text = self.suggest(site.buffer)
        msg += text
        evidence = dict(evidence)
        if suggestion is not None:
            evidence["suggestion"] = dataclasses.asdict(suggestion)
        evidence["suggestion_text"] = text
        return Obligation(CHECKER, name, Verdict.REFUTED, "enumeration", site.span, CONFLICT, msg,
                          Severity.WARNING, counterexample=cex, evidence=evidence)

    def conditional(self, name: str, ev: _Eval, cost: _Cost, evidence: dict[str, object],
                    concrete: bool) -> Obligation:
        site = ev.site
        place = self.plan.placements[site.buffer]
        cex = self.counterexample(ev, cost, place, concrete)
        guards = ", ".join(ev.data_guards or ev.context_guards)
        lanes = cex["lanes"]
        assert isinstance(lanes, list)
        shown = ", ".join(map(str, lanes[:8])) + (", ..." if len(lanes) > 8 else "")
        what = ("reads memory or a mutable/float value" if ev.data_guards else
                "admits them for no size and block tried")
        msg = (f"a {cex['degree']}-way bank conflict (warp {cex['warp']}, lanes {shown}) "
               f"happens only if these lanes all pass the {guards}, which {what}; undecided")
        return Obligation(CHECKER, name, Verdict.UNKNOWN, "enumeration", site.span, UNDECIDED,
                          msg, Severity.WARNING, counterexample=cex, evidence=evidence)

    def witness(self, ev: _Eval, cost: _Cost) -> tuple[_Eval, _Cost] | None:
        """A conflict seen only with size/block guards assumed true: look for sizes and a
        block where the guards really admit it (a few size assignments, corner blocks)."""
        if ev.data_guards:
            return None
        place = self.plan.placements[ev.site.buffer]
        for sizes, grid in representative_sizes(self.kernel, WITNESS_SIZES, WITNESS_CANDIDATES):
            try:
                ev2 = _evaluate(self.kernel, ev.site, self.lets, sizes, grid, all_corners=True)
            except (_Unevaluable, ArithmeticError, KeyError, TypeError, ValueError):
                return None
            if ev2.truncated:
                continue
            worst = _worst(_costs(ev2, place, concrete=True))
            if worst is not None and worst.report.max_way > 1:
                return ev2, worst
        return None

    # -- layout suggestion --

    def suggest(self, buffer: str) -> tuple[Suggestion | None, str]:
        if not self.want_suggestion:
            return None, "(layout suggestion not requested)"
        if buffer not in self.suggestions:
            self.suggestions[buffer] = self._suggest(buffer)
        return self.suggestions[buffer]

    def _buffer_evals(self, buffer: str) -> list[_Eval]:
        out = []
        for k, site in enumerate(self.sites):
            ev = self.evals[k]
            if site.buffer == buffer and isinstance(ev, _Eval):
                out.append(ev)
        return out

    def recount(self, buffer: str, term: ir.LayoutTerm
                ) -> tuple[int, list[tuple[_Eval, _Inst]]] | None:
        """Worst conflict degree of every access of `buffer` if it had layout `term`, with
        the buffers re-placed as the interpreter would, and the worst instance of each access
        that still conflicts. None: `term` is not a permutation of the buffer's elements (not
        a drop-in replacement) or cannot be realised."""
        buf = self.kernel.buffer(buffer)
        new = dataclasses.replace(buf, layout=term)
        shared = tuple(new if b.name == buffer else b for b in self.kernel.shared)
        try:
            place = plan_shared(shared).placements[buffer]
        except InterpError:
            return None
        first = place.base // buf.dtype.nbytes
        if sorted(place.slots) != list(range(first, first + buf.size)):
            return None
        worst, bad = 1, []
        for ev in self._buffer_evals(buffer):
            w = _worst(_costs(ev, place, concrete=False))
            if w is not None and w.report.max_way > 1:
                worst = max(worst, w.report.max_way)
                bad.append((ev, w.inst))
        return worst, bad

    def _suggest(self, buffer: str) -> tuple[Suggestion | None, str]:
        """Counterexample-guided: synthesise for the worst warp instance of each access, recount
        every instance under the answer, add the ones still conflicting, and repeat."""
        buf = self.kernel.buffer(buffer)
        if _tma_buffer(self.kernel, buffer):
            return self._suggest_tma(buf)
        evs = self._buffer_evals(buffer)
        place = self.plan.placements[buffer]
        initial: list[tuple[_Eval, _Inst]] = []
        for ev in evs:
            w = _worst(_costs(ev, place, concrete=False))
            if w is not None:
                initial.append((ev, w.inst))
        eb = buf.dtype.nbytes
        notes: list[str] = []
        best: Suggestion | None = None
        for family in ("cute", "rowxor"):
            chosen = list(initial)
            for _ in range(SYNTH_ROUNDS):
                tile, patterns = _synth_problem(buf, chosen)
                if tile is None:
                    return None, "No layout suggestion: the accesses do not fit the synthesiser."
                try:
                    res = swizzle_synth.synthesize(tile, patterns, family, "nvidia",
                                                   self.options.timeout_ms)
                except (ValueError, AssertionError) as err:
                    notes.append(f"{family}: {err}")
                    break
                if res.status == "identity":
                    term: ir.LayoutTerm | None = ir.LayoutTerm("row_major", ())
                elif res.status == "found" and res.swizzle is not None:
                    term = _as_term(res.swizzle, buf, eb)
                    if term is None:
                        notes.append(f"{family}: {res.swizzle} has no form in our layout syntax")
                        break
                else:
                    notes.append(f"{family}: {res.reason}")
                    break
                counted = self.recount(buffer, term)
                if counted is None:
                    notes.append(f"{family}: {term} is not a permutation of {buffer}")
                    break
                degree, still = counted
                sug = Suggestion(str(term), degree, f"{family} family: {res.reason}; recounted")
                if degree == 1:
                    return sug, (f"A `{term}` layout for {buffer} removes it (swizzle "
                                 f"synthesis, verified: every access of {buffer} is then "
                                 "conflict-free).")
                if best is None or degree < best.degree:
                    best = sug
                fresh = [x for x in still if not any(x[1] is c[1] for c in chosen)]
                if not fresh:
                    notes.append(f"{family}: best {term} is still {degree}-way")
                    break
                chosen.extend(fresh)
            else:
                notes.append(f"{family}: no verified answer in {SYNTH_ROUNDS} rounds")
        if best is not None:
            return best, (f"No conflict-free swizzle found; `{best.layout}` for {buffer} lowers "
                          f"the worst conflict of its accesses to {best.degree}-way (verified).")
        return None, ("No swizzle(B, M, S, row_major) or row-XOR layout of "
                      f"{buffer} removes it: " + "; ".join(notes))

    def _suggest_tma(self, buf: ir.SharedBuffer) -> tuple[Suggestion | None, str]:
        row_bytes = buf.shape[-1] * buf.dtype.nbytes
        best: tuple[int, ir.LayoutTerm] | None = None
        for head in ("swizzle32B", "swizzle64B", "swizzle128B"):
            span = {"swizzle32B": 32, "swizzle64B": 64, "swizzle128B": 128}[head]
            term = ir.LayoutTerm(head, (ir.LayoutTerm("row_major", ()),))
            if row_bytes > span or str(term) == str(buf.layout):
                continue
            counted = self.recount(buf.name, term)
            if counted is not None and (best is None or counted[0] < best[0]):
                best = (counted[0], term)
        if best is None or best[0] > 1:
            got = f" (best: `{best[1]}`, {best[0]}-way)" if best else ""
            return None, (f"No layout suggestion: {buf.name} is a TMA buffer, so its layout "
                          f"must be a TMA swizzle mode, and none removes it{got}.")
        degree, term = best
        sug = Suggestion(str(term), degree, "TMA swizzle mode, recounted")
        return sug, (f"A `{term}` layout for {buf.name} (with the tensormap's swizzle mode "
                     "changed to match) removes it (verified: every access of "
                     f"{buf.name} is then conflict-free).")


def _sizes(sizes: Mapping[str, object]) -> str:
    return ", ".join(f"{k}={v}" for k, v in sizes.items())


def _tma_buffer(kernel: ir.Kernel, buffer: str) -> bool:
    return any((isinstance(s, ir.TmaLoad) and s.dst.buffer == buffer)
               or (isinstance(s, ir.TmaStore) and s.src.buffer == buffer)
               for s in statements(kernel.body))


def _synth_problem(buf: ir.SharedBuffer, chosen: Sequence[tuple[_Eval, _Inst]]
                   ) -> tuple[swizzle_synth.Tile | None, list[swizzle_synth.AccessPattern]]:
    """The buffer's last two dims as a row-major tile, and the chosen warp instances (bound
    evaluation) as access patterns, one per site, deduplicated."""
    shape = buf.shape
    rows, cols = (shape[-2], shape[-1]) if len(shape) >= 2 else (1, shape[0])
    try:
        tile = swizzle_synth.Tile(rows, cols, buf.dtype.nbytes)
    except ValueError:
        return None, []
    tables: dict[int, tuple[_Eval, dict[tuple[object, ...], None]]] = {}
    for ev, inst in chosen:
        key = tuple((lane, ln.coord[-2:] if len(shape) >= 2 else (0, ln.coord[0]))
                    for lane, ln in sorted(inst.lanes.items()))
        tables.setdefault(id(ev), (ev, {}))[1].setdefault(key, None)
    patterns = []
    for n, (ev, seen) in enumerate(tables.values()):
        table = [dict(k) for k in seen]

        def coords(lane: int, it: int, table: list[dict] = table) -> tuple[int, int] | None:
            rc = table[it].get(lane) if lane < banks.NVIDIA_WARP else None
            return None if rc is None else (int(rc[0]), int(rc[1]))

        patterns.append(swizzle_synth.AccessPattern(
            f"{ev.site.op}@{_where(ev.site.span)}#{n}", coords, buf.dtype.nbytes, len(table),
            ev.site.op))
    return tile, patterns


def _as_term(sw: swizzle_synth.Swizzle, buf: ir.SharedBuffer, eb: int) -> ir.LayoutTerm | None:
    """A synthesised byte-offset swizzle in our layout syntax (element offsets).

    CuTe Swizzle<B, Mb, S> on byte offsets x = e * eb (eb = 2**k) only moves bits >= Mb >= k,
    so on element offsets it is Swizzle<B, Mb - k, S>: our `swizzle(B, Mb - k, S, row_major)`.
    A row-XOR swizzle becomes an F2 `linear` layout when every extent is a power of two.
    """
    k = eb.bit_length() - 1
    if isinstance(sw, swizzle_synth.CuteSwizzle):
        if sw.base < k:
            return None
        return ir.LayoutTerm("swizzle", (sw.bits, sw.base - k, sw.shift,
                                         ir.LayoutTerm("row_major", ())))
    shape = buf.shape
    if any(e & (e - 1) for e in shape) or sw.chunk_log2 < k or len(shape) < 2:
        return None
    strides = [1] * len(shape)
    for i in range(len(shape) - 2, -1, -1):
        strides[i] = strides[i + 1] * shape[i + 1]
    bases: list[tuple[int, ...]] = []
    for i, e in enumerate(shape):
        nbits = e.bit_length() - 1
        dim = []
        for j in range(nbits):
            off = strides[i] << j
            if i == len(shape) - 2 and j < len(sw.columns):
                off ^= sw.columns[j] << (sw.chunk_log2 - k)
            dim.append(off)
        bases.append(tuple(dim))
    return ir.LayoutTerm("linear", tuple(bases))
