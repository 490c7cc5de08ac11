"""Stage projection of a ring pipeline (docs/temporal.md §10).

Why: a ring of S stages explored as a whole has states for every way the producer and the
consumers can be spread over the stages, which grows like S^3 and more. But in a ring the
stages never meet: iteration k of every loop touches only stage k % S (its barriers
full[k % S], empty[k % S], its buffer slices buf[k % S, ...]). The *projection* onto stage s
keeps, of every run, the steps that touch stage s; it is a run of the kernel whose loops
visit only the iterations k = s, s + S, s + 2S, ... (every step's effect on stage s depends
only on stage s and the step's own operands, and dropping steps only removes blocking).
The projection onto stage s is P_s: the kernel whose synchronising loops are
`for k in s .. s + S * J step S`, for every J >= 0 (stage s's iterations, J of them). When
z3 also proves that every operand at iteration s + jS equals the one at iteration jS (the
ring index being s instead of 0), all projections are the same system P = P_0 and one
search serves every stage; otherwise (a stage owned by one CTA of a cluster, a condition on
k % S) each P_s is searched, S searches of one stage each. So:

* safety (every violation of a step: counts, parities, permissions, races, uninitialised
  reads, copies at exit) of the kernel follows from that of the P_s: a violating step of
  the kernel projects onto a violating step of P_s on its stage s;
* deadlock freedom follows from the P_s' deadlock freedom and their *progress* property: in
  every reachable state of P_s with no copy in flight, one of the classes at the least
  iteration (or one outside the loops, or a joint `sync`) can move. A deadlock of the
  kernel, projected onto the stage s* of the least iteration k* any class is at, is a
  state of P_s* in which the classes at k* are blocked exactly as in the kernel (same step,
  same stage state) and every other class is later or outside the loops -- which progress
  excludes.

A P_s has one stage's worth of states whatever S is, so the time to prove a ring grows at
most linearly with its stage count (not at all when the stages are alike). A P_s is
explored by the same parametric argument as any kernel (every J), with POR for safety and
without it for progress (a state property is not preserved by persistent sets).

In a cluster (semantics/temporal/cluster_view.py) stage s is stage s of every CTA: the
projection is taken of the kernel, before the view makes one block of its CTAs, and a step
of iteration k touches stage k % S of whichever CTA it names (a peer's barrier
`full@r[k % S]`, a peer's buffer, a multicast's CTAs), so the argument is the same with
"stage s" read as "stage s of every CTA". Conditions (anything else: None, and the kernel
is explored whole):

1. the loops that synchronise are not nested, start at 0 with step 1, share one bound
   (depending on the sizes) and contain no `sync`, bulk groups, TMA stores, `init` or
   mbarrier fences, cluster barriers; wgmma statements only inside them, each iteration
   committing and waiting for (`wgmma_wait 0`) its MMAs after its last one;
2. inside them every barrier operation names an array of length S indexed k % S, every
   TMA load and shared-memory access a buffer whose first dimension is S, indexed k % S;
   outside them those barriers appear only in `init` of the whole array and those
   buffers not at all; a barrier guarding a ring buffer is a ring barrier guarding its
   stages (`guards buf[i]`);
3. (z3) the index terms equal k % S, for every size `where` allows, 0 <= s < S, j >= 0
   and every thread and inner iteration. Whether the stages are alike (one P) is a second
   query: every other term in the loops (parities, byte counts, conditions, inner bounds,
   the other indices of shared accesses, the CTA a peer access names, multicast masks)
   takes the same value at k = s + jS as at k = jS.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import z3

from tilesafe.frontend import ir
from tilesafe.frontend.walk import loads, own_exprs, statements
from tilesafe.semantics.temporal.event_terms import SYNC_STMTS, TENSOR_SYNC
from tilesafe.semantics.temporal.events import Lets, expr_key, free_vars, has_sync

J_NAME = "J__ring"
BANNED = (ir.Sync, ir.CommitGroup, ir.WaitGroup, ir.TmaStore, ir.Init, ir.NamedBar,
          ir.ClusterBarrier)


@dataclass(frozen=True)
class Ring:
    stages: int
    barriers: tuple[str, ...]
    buffers: tuple[str, ...]
    # P (the stages alike: the loops visit k = 0, S, 2S, ..., J iterations), or P_0 ..
    # P_{S-1} (P_s's loops visit k = s, s + S, ...)
    projections: tuple[ir.Kernel, ...]
    queries: tuple[str, ...]  # SMT-LIB of the z3 proofs

    @property
    def alike(self) -> bool:
        """One projection serves every stage."""
        return len(self.projections) == 1


def project(kernel: ir.Kernel, timeout_ms: int = 5000) -> Ring | str:
    """The stage projection of a ring kernel, or why the kernel is not one."""
    loops = _sync_loops(kernel.body, False)
    if isinstance(loops, str):
        return loops
    if not loops:
        return "no loop synchronises"
    first = loops[0]
    hi_key = expr_key(first.hi, Lets())
    for lp in loops:
        if not (isinstance(lp.lo, ir.IntConst) and lp.lo.value == 0 and lp.step == 1):
            return "a synchronising loop does not start at 0 with step 1"
        if expr_key(lp.hi, Lets()) != hi_key:
            return "the synchronising loops have different bounds"
    lets = Lets({s.uid: s.value for s in statements(kernel.body) if isinstance(s, ir.Let)})
    uses = _ring_uses(kernel, loops)
    if isinstance(uses, str):
        return uses
    stages, bars, bufs, idx_terms, other_terms = uses
    if stages < 2:
        return "one stage"
    why = _outside(kernel, loops, bars, bufs) or _mma_state_resets(kernel, loops)
    if why:
        return why
    queries: list[str] = []
    ok = _prove_terms(kernel, lets, stages, idx_terms, [], timeout_ms, queries)
    if ok is not True:
        return ok
    alike = _prove_terms(kernel, lets, stages, [], other_terms, timeout_ms, queries) is True
    offsets = (0,) if alike else tuple(range(stages))
    return Ring(stages, tuple(sorted(bars)), tuple(sorted(bufs)),
                tuple(_projected(kernel, loops, stages, s) for s in offsets), tuple(queries))


# ---- conditions 1 and 2 -------------------------------------------------------------------------


def _sync_loops(stmts: tuple[ir.Stmt, ...], inside: bool) -> list[ir.For] | str:
    """The ring's loops: those that synchronise. Inside one, a loop of MMAs (tensor-core
    statements, no barrier operation) is part of the iteration, not a ring loop."""
    out: list[ir.For] = []
    for s in stmts:
        if isinstance(s, ir.For) and has_sync(s.body):
            if inside:
                mmas_only = all(isinstance(x, TENSOR_SYNC) for x in statements(s.body)
                                if isinstance(x, SYNC_STMTS))
                if not mmas_only:
                    return "nested synchronising loops"
                continue
            inner = _sync_loops(s.body, True)
            if isinstance(inner, str):
                return inner
            out.append(s)
        elif isinstance(s, (ir.Role, ir.If, ir.For)):
            bodies = (s.then, s.orelse) if isinstance(s, ir.If) else (s.body,)
            for b in bodies:
                inner = _sync_loops(b, inside)
                if isinstance(inner, str):
                    return inner
                out.extend(inner)
    return out


def _ring_uses(kernel: ir.Kernel, loops: list[ir.For]):
    """(S, ring barriers, ring buffers, index terms (loop, expr), other terms (loop, expr))."""
    stages: set[int] = set()
    bars: set[str] = set()
    bufs: set[str] = set()
    idx: list[tuple[ir.For, ir.Expr]] = []
    other: list[tuple[ir.For, ir.Expr]] = []

    def bar(lp: ir.For, ref: ir.BarrierRef) -> str | None:
        b = kernel.barrier(ref.name)
        if ref.index is None or b.length is None:
            return f"barrier {ref.name} is not an array indexed in the loop"
        stages.add(b.length)
        bars.add(b.name)
        idx.append((lp, ref.index))
        if ref.cta is not None:  # a peer's barrier: which peer may depend on the stage
            other.append((lp, ref.cta))
        return None

    def shared(lp: ir.For, name: str, indices: tuple[ir.Expr, ...],
               cta: ir.Expr | None = None) -> str | None:
        if not indices:
            return f"buffer {name} is used whole in the loop"
        stages.add(kernel.buffer(name).shape[0])
        bufs.add(name)
        idx.append((lp, indices[0]))
        other.extend((lp, i) for i in indices[1:])
        if cta is not None:
            other.append((lp, cta))
        return None

    for lp in loops:
        for s in statements(lp.body):
            why = None
            if isinstance(s, BANNED) or (isinstance(s, ir.Fence)
                                         and s.kind is not ir.FenceKind.PROXY_ASYNC):
                return f"{type(s).__name__.lower()} inside a synchronising loop"
            if isinstance(s, (ir.Wait, ir.Arrive, ir.ExpectTx)):
                why = bar(lp, s.barrier)
                if isinstance(s, ir.Wait):
                    other.append((lp, s.parity))
                elif isinstance(s, ir.Arrive) and s.tx_bytes is not None:
                    other.append((lp, s.tx_bytes))
                elif isinstance(s, ir.ExpectTx):
                    other.append((lp, s.nbytes))
            elif isinstance(s, ir.Wgmma):
                why = (shared(lp, s.a.buffer, tuple(i.start for i in s.a.index))
                       or shared(lp, s.b.buffer, tuple(i.start for i in s.b.index)))
            elif isinstance(s, ir.TmaLoad):
                why = bar(lp, s.barrier) or shared(lp, s.dst.buffer, s.dst.prefix)
                if s.multicast is not None:
                    other.append((lp, s.multicast))
            elif isinstance(s, ir.If):
                other.append((lp, s.cond))
            elif isinstance(s, ir.For):
                other.extend(((lp, s.lo), (lp, s.hi)))
            if isinstance(s, ir.Store) and s.space is ir.Space.SHARED:
                why = why or shared(lp, s.tensor, s.indices, s.cta)
            for e in own_exprs(s):
                for ld in loads(e):
                    if ld.space is ir.Space.SHARED:
                        why = why or shared(lp, ld.tensor, ld.indices, ld.cta)
            if why:
                return why
    if len(stages) != 1:
        return "the ring's barriers and buffers do not have one stage count"
    for b in kernel.barriers:
        for g in b.all_guards:
            if (g.buffer in bufs) != (b.name in bars):
                return f"barrier {b.name} and the buffer it guards are not both in the ring"
            if b.name in bars and not g.indexed:
                return f"ring barrier {b.name} guards all of {g.buffer}"
            if g.per_cta:
                return f"barrier {b.name} hands over the stages of every CTA of a cluster"
    return stages.pop(), bars, bufs, idx, other


def _outside(kernel: ir.Kernel, loops: list[ir.For], bars: set[str], bufs: set[str]) -> str:
    inside = {id(s) for lp in loops for s in statements(lp.body)}
    for s in statements(kernel.body):
        if id(s) in inside or s in loops:
            continue
        ref = getattr(s, "barrier", None)
        if isinstance(ref, ir.BarrierRef) and ref.name in bars:
            if not (isinstance(s, ir.Init) and ref.index is None):
                return f"ring barrier {ref.name} is used outside the loop"
        if isinstance(s, ir.Store) and s.space is ir.Space.SHARED and s.tensor in bufs:
            return f"ring buffer {s.tensor} is written outside the loop"
        for sl in (getattr(s, "dst", None), getattr(s, "src", None)):
            if isinstance(sl, ir.BufferSlice) and sl.buffer in bufs:
                return f"ring buffer {sl.buffer} is copied outside the loop"
        for e in own_exprs(s):
            for ld in loads(e):
                if ld.space is ir.Space.SHARED and ld.tensor in bufs:
                    return f"ring buffer {ld.tensor} is read outside the loop"
    return ""


def _mma_state_resets(kernel: ir.Kernel, loops: list[ir.For]) -> str:
    """Why a class's tensor-core state may differ between the heads of two iterations in a
    way the projection would not see, or ''.

    A class's wgmma state (semantics/temporal/explore/ops/wgmma.py) is its groups no wait
    covered and the fragments touched since its last wgmma_fence (every fragment at the
    start). Dropping other stages' iterations keeps it exact when every iteration starts
    with no group (the loop is entered with none: no wgmma statement outside the loops;
    each iteration ends with a `wgmma_commit` and a `wgmma_wait 0` after its last MMA, at
    the top level of the body) and with no more fragments touched than P's first
    iteration starts with -- every fragment, as no `wgmma_fence` comes before the loops.
    Then a kernel's iteration starts in a state P's has, or one with fewer fragments
    touched (which can only report fewer TS534s), so every violation projects."""
    inside = {id(s) for lp in loops for s in statements(lp.body)}
    for s in statements(kernel.body):
        if isinstance(s, TENSOR_SYNC) and id(s) not in inside:
            return f"{type(s).__name__.lower()} outside the synchronising loops"
    for lp in loops:
        last = max((i for i, s in enumerate(lp.body)
                    if any(isinstance(x, ir.Wgmma) for x in statements((s,)))), default=None)
        if last is None:
            continue
        rest = lp.body[last + 1:]
        commit = next((i for i, s in enumerate(rest) if isinstance(s, ir.WgmmaCommit)), None)
        if commit is None or not any(isinstance(s, ir.WgmmaWait) and s.pending == 0
                                     for s in rest[commit + 1:]):
            return ("wgmma groups may cross iterations (no wgmma_commit then wgmma_wait 0 "
                    "after the last MMA of the loop)")
    return ""


# ---- condition 3 (z3) ---------------------------------------------------------------------------


def _prove_terms(kernel: ir.Kernel, lets: Lets, stages: int, idx: list, other: list,
                 timeout_ms: int, queries: list[str]) -> bool | str:
    """One z3 query: some index term differs from s, or some other term differs between
    k = s + jS and k = jS (each distinct term once); unsat proves it (condition 3 with the
    index terms, the stages alike with the others)."""
    from tilesafe.semantics.temporal.param_smt import Enc, Timeout, prove_unsat

    holder = _Lets(lets)
    shared: dict = {}
    enc_s = Enc(kernel, holder, "", shared)  # type: ignore[arg-type]
    enc_0 = Enc(kernel, holder, "", shared)  # type: ignore[arg-type]
    s_var, j_var = z3.Int("ring_s"), z3.Int("ring_j")
    th = enc_s.var("thread")
    base = enc_s.where() + [s_var >= 0, s_var < stages, j_var >= 0, th >= 0,
                            th < kernel.block]
    diffs = []
    seen: set = set()
    try:
        for kind, items in (("idx", idx), ("other", other)):
            for lp, e in items:
                key = (kind, lp.var.uid, expr_key(e, lets))
                if key in seen or (kind == "other"
                                   and f"loop:{lp.var.uid}" not in free_vars(e, lets)):
                    continue  # a term without k is the same at every iteration
                seen.add(key)
                enc_s.loops = {lp.var.uid: s_var + stages * j_var}
                enc_0.loops = {lp.var.uid: stages * j_var}
                diffs.append(enc_s.term(e) != (s_var if kind == "idx" else enc_0.term(e)))
    except (ValueError, KeyError):
        return "a term in the loop has no z3 form"
    if not diffs:
        return True
    try:
        if not prove_unsat(base + [z3.Or(*diffs)], timeout_ms, queries):
            return (f"an index in the loop is not k % {stages}" if idx else
                    "a term differs between the stages")
    except Timeout:
        return "the solver gave up on the stage terms"
    return True


@dataclass(frozen=True)
class _Lets:
    """What param_smt.Enc reads of a model: the let bindings."""

    lets: Lets


# ---- P ------------------------------------------------------------------------------------------


def _projected(kernel: ir.Kernel, loops: list[ir.For], stages: int, offset: int
               ) -> ir.Kernel:
    """P_offset: the synchronising loops visit k = offset, offset + S, ... (J of them)."""
    ids = {id(lp) for lp in loops}
    sp = kernel.span
    int_t = ir.ScalarType.INT
    j = ir.SizeVar(sp, int_t, J_NAME)
    lo = ir.IntConst(sp, int_t, offset)
    hi: ir.Expr = ir.BinOp(sp, int_t, "*", ir.IntConst(sp, int_t, stages), j)
    if offset:
        hi = ir.BinOp(sp, int_t, "+", lo, hi)

    def stmts(ss: tuple[ir.Stmt, ...]) -> tuple[ir.Stmt, ...]:
        return tuple(stmt(s) for s in ss)

    def stmt(s: ir.Stmt) -> ir.Stmt:
        if isinstance(s, ir.For) and id(s) in ids:
            return replace(s, lo=lo, hi=hi, step=stages)
        if isinstance(s, ir.Role):
            return replace(s, body=stmts(s.body))
        if isinstance(s, ir.If):
            return replace(s, then=stmts(s.then), orelse=stmts(s.orelse))
        if isinstance(s, ir.For):
            return replace(s, body=stmts(s.body))
        return s

    nonneg = ir.BinOp(sp, ir.ScalarType.BOOL, ">=", j, ir.IntConst(sp, ir.ScalarType.INT, 0))
    return replace(kernel, sizes=kernel.sizes + (J_NAME,), where=kernel.where + (nonneg,),
                   body=stmts(kernel.body))
