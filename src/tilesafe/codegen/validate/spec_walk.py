"""The specification's statement walk: every access and synchronisation statement of the
IR as `SpecEvent`s with their execution conditions (roles, `elect one`, `if`s, `for`
bounds with one counter per loop, divisions by a possibly-zero value) and operands.

Why separate: the launch facts, expressions and addresses (spec.py) say what a value or an
address *is*; this walk says *when* each statement runs and which events it is -- `arrive
one per warp` as a convergence plus the lowest lane's arrive, a whole-array `init` as one
event per element -- and is the only part that follows the control structure.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from tilesafe.codegen.validate import terms as T
from tilesafe.codegen.validate.spec_events import (
    CLUSTER_SPACE,
    SpecEvent,
    SpecLoop,
    WalkCtx,
    counter,
    thread,
)
from tilesafe.codegen.validate.spec_mma import TensorCoreWalk, unrolled
from tilesafe.codegen.validate.terms import LeafInfo, Term
from tilesafe.frontend import ir

if TYPE_CHECKING:
    from tilesafe.codegen.validate.spec import Spec


class StatementWalk(TensorCoreWalk):
    """`s_<Stmt>` per statement type: emits its events, returns the context after it."""

    def __init__(self, spec: Spec) -> None:
        self.spec = spec
        self.k = spec.k
        self.events: list[SpecEvent] = spec.events
        self.loops: dict[int, SpecLoop] = spec.loops
        self.expr = spec.expr
        self.int_expr = spec.int_expr
        self.cond = spec.cond
        self.address = spec.address
        self.shared_address = spec.shared_address
        self.barrier = spec.barrier
        self._dtype = spec._dtype
        self._vars: dict[int, ir.DType] = {}  # var uid -> its dtype

    # -- statements -----------------------------------------------------------------------

    def stmts(self, body: tuple[ir.Stmt, ...], ctx: WalkCtx) -> None:
        for s in body:
            self.spec.order += 1
            ctx = getattr(self, "s_" + type(s).__name__)(s, ctx)

    def emit(self, kind: str, s: ir.Stmt, ctx: WalkCtx, conds: list[Term], what: str,
             inb: Term = T.TRUE, sub: int = 1, cond: Term | None = None, **ops: object
             ) -> SpecEvent:
        ev = SpecEvent(kind, s, s.span, T.and_(ctx.cond if cond is None else cond, *conds),
                       ctx.fors, (self.spec.order, sub), what, dict(ops), inb, ctx.role,
                       copies=ctx.copies)
        self.events.append(ev)
        return ev

    def _after(self, ctx: WalkCtx, conds: list[Term]) -> WalkCtx:
        """A statement's divisions by zero stop the run: later statements need them not."""
        return replace(ctx, cond=T.and_(ctx.cond, *conds)) if conds else ctx

    def s_Let(self, s: ir.Let, ctx: WalkCtx) -> WalkCtx:
        conds: list[Term] = []
        v = self.expr(s.value, ctx, conds)
        return replace(self._after(ctx, conds), env={**ctx.env, s.uid: v})

    def _var(self, s: ir.VarDecl | ir.Assign, ctx: WalkCtx, dtype: ir.DType) -> WalkCtx:
        conds: list[Term] = []
        self.expr(s.value, ctx, conds)
        info = LeafInfo("nondet", note=f"var {s.name} after {s.span.line}:{s.span.col}")
        name = f"var:{s.uid}:{s.span.line}:{s.span.col}{ctx.tag}"
        if dtype.is_float:
            v = T.leaf(name, 32, info)
        elif dtype is ir.DType.U8:
            v = T.uint(T.leaf(name, 8, info))
        else:
            v = T.sint(T.leaf(name, 32, info))
        return replace(self._after(ctx, conds), env={**ctx.env, s.uid: v})

    def s_VarDecl(self, s: ir.VarDecl, ctx: WalkCtx) -> WalkCtx:
        self._vars[s.uid] = s.dtype
        return self._var(s, ctx, s.dtype)

    def s_Assign(self, s: ir.Assign, ctx: WalkCtx) -> WalkCtx:
        return self._var(s, ctx, self._vars[s.uid])

    def s_Store(self, s: ir.Store, ctx: WalkCtx) -> WalkCtx:
        conds: list[Term] = []
        value = self.expr(s.value, ctx, conds)
        idx = [self.int_expr(i, ctx, conds) for i in s.indices]
        dtype = self._dtype(s.tensor, s.space)
        addr, inb = self.address(s.tensor, s.space, idx)
        extra: dict[str, object] = {"space": s.space.value}
        if s.cta is not None:  # a peer CTA's copy: its own address, mapped to that CTA
            extra = {"space": CLUSTER_SPACE, "cta": self.int_expr(s.cta, ctx, conds)}
        self.emit("st", s, ctx, conds, f"store {dtype.value}", inb, addr=addr,
                  tensor=s.tensor, dtype=dtype, value=value, **extra)
        return self._after(ctx, conds)

    def s_For(self, s: ir.For, ctx: WalkCtx) -> WalkCtx:
        if unrolled(s):
            return self.unroll(s, ctx)
        conds: list[Term] = []
        lo = self.int_expr(s.lo, ctx, conds)
        hi = self.int_expr(s.hi, ctx, conds)
        f = self.per_copy(s, ctx)
        n = counter(f)
        T.leaf(f"n:F{f.var.uid}", 64, LeafInfo("int", False, 0, 2**64 - 1,
                                               note=f"iteration of for {f.var.name}"))
        var = T.iadd(lo, T.imul(T.uint(n), T.const_int(s.step)))
        outer = T.and_(ctx.cond, *conds)
        self.loops[f.var.uid] = SpecLoop(f, n, lo, hi, s.step, outer, ctx.fors, ctx.copies)
        inner = replace(ctx, cond=T.and_(outer, T.ilt(var, hi)), fors=ctx.fors + (f,),
                        env={**ctx.env, s.var.uid: var})
        self.stmts(s.body, inner)
        return self._after(ctx, conds)

    def s_If(self, s: ir.If, ctx: WalkCtx) -> WalkCtx:
        c, conds = self.cond(s.cond, ctx)
        base = T.and_(ctx.cond, *conds)
        self.stmts(s.then, replace(ctx, cond=T.and_(base, c)))
        self.stmts(s.orelse, replace(ctx, cond=T.and_(base, T.not_(c))))
        return self._after(ctx, conds)

    def s_Role(self, s: ir.Role, ctx: WalkCtx) -> WalkCtx:
        t = thread()
        lo, hi = s.threads.lo, s.threads.hi
        if s.elect_one:
            inside = T.eq(t, T.const_int(lo))
        else:
            inside = T.and_(T.ile(T.const_int(lo), t), T.ilt(t, T.const_int(hi)))
        self.stmts(s.body, replace(ctx, cond=T.and_(ctx.cond, inside), role=s))
        return ctx

    def s_Init(self, s: ir.Init, ctx: WalkCtx) -> WalkCtx:
        bar = self.k.barrier(s.barrier.name)
        conds: list[Term] = []
        if s.barrier.index is None and bar.length is not None:
            e = T.leaf(f"e:{s.span.line}:{s.span.col}{ctx.tag}", 32,
                       LeafInfo("int", False, 0, bar.instances - 1,
                                note=f"element of {bar.name}"))
            addr, inb = self.barrier(s.barrier, ctx, conds, T.uint(e))
            self.emit("mbar.init", s, ctx, conds, "init", inb, addr=addr, count=bar.count,
                      elem=e)
        else:
            addr, inb = self.barrier(s.barrier, ctx, conds)
            self.emit("mbar.init", s, ctx, conds, "init", inb, addr=addr, count=bar.count)
        return self._after(ctx, conds)

    def s_Fence(self, s: ir.Fence, ctx: WalkCtx) -> WalkCtx:
        kind = "fence.mbarrier_init" if s.kind is ir.FenceKind.MBARRIER_INIT \
            else "fence.proxy_async"
        self.emit(kind, s, ctx, [], f"fence {s.kind.value}")
        return ctx

    def s_Sync(self, s: ir.Sync, ctx: WalkCtx) -> WalkCtx:
        self.emit("bar.sync", s, ctx, [], "sync", id=0)
        return ctx

    def s_NamedBar(self, s: ir.NamedBar, ctx: WalkCtx) -> WalkCtx:
        kind = "bar.arrive" if s.arrive else "bar.sync"
        what = f"{'bar_arrive' if s.arrive else 'bar_sync'} {s.bar_id}, {s.count}"
        self.emit(kind, s, ctx, [], what, id=s.bar_id, count=s.count)
        return ctx

    def s_Wait(self, s: ir.Wait, ctx: WalkCtx) -> WalkCtx:
        conds: list[Term] = []
        addr, inb = self.barrier(s.barrier, ctx, conds)
        parity = self.int_expr(s.parity, ctx, conds)
        self.emit("mbar.wait", s, ctx, conds, "wait", inb, addr=addr, parity=parity,
                  sem=_sem(s.relaxed, "acquire", s.scope))
        return self._after(ctx, conds)

    def s_ClusterBarrier(self, s: ir.ClusterBarrier, ctx: WalkCtx) -> WalkCtx:
        what = "cluster_sync" if s.arrive and s.wait else (
            "cluster_arrive" + (" relaxed" if s.relaxed else "") if s.arrive else "cluster_wait")
        if s.arrive:
            self.emit("cluster.arrive", s, ctx, [], what,
                      sem="relaxed" if s.relaxed else "release")
        if s.wait:
            self.emit("cluster.wait", s, ctx, [], what, sub=2, sem="acquire")
        return ctx

    def _role_range(self, ctx: WalkCtx) -> tuple[int, int]:
        role = ctx.role
        lo = role.threads.lo if role is not None else 0
        hi = role.threads.hi if role is not None else self.k.block
        if role is not None and role.elect_one:
            hi = lo + 1
        return lo, hi

    def s_Arrive(self, s: ir.Arrive, ctx: WalkCtx) -> WalkCtx:
        conds: list[Term] = []
        addr, inb = self.barrier(s.barrier, ctx, conds)
        ops: dict[str, object] = {"addr": addr, "sem": _sem(s.relaxed, "release", s.scope)}
        if s.barrier.cta is not None:  # a peer CTA's barrier, through its cluster address
            ops["cta"] = self.int_expr(s.barrier.cta, ctx, conds)
            ops["space"] = CLUSTER_SPACE
        what = "arrive"
        if s.tx_bytes is not None:
            ops["tx"] = self.int_expr(s.tx_bytes, ctx, conds)
            what = "arrive expect_tx"
        lo, hi = self._role_range(ctx)
        t = thread()
        if s.mode is ir.ArriveMode.EACH:
            self.emit("mbar.arrive", s, ctx, conds, what, inb, **ops)
        elif s.mode is ir.ArriveMode.ONE:
            self.emit("mbar.arrive", s, ctx, conds, what, inb,
                      cond=T.and_(ctx.cond, T.eq(t, T.const_int(lo))), sub=2, **ops)
        else:
            base = T.imul(T.ifdiv(t, T.const_int(32)), T.const_int(32))
            leader = T.imax(T.const_int(lo), base)
            if not (ctx.role is not None and ctx.role.elect_one):
                if lo % 32 == 0 and hi % 32 == 0:
                    mask = T.const_int(2**32 - 1)  # whole warps: every lane of the warp
                else:
                    first = T.imax(T.isub(T.const_int(lo), base), T.const_int(0))
                    last = T.imin(T.isub(T.const_int(hi), base), T.const_int(32))
                    mask = T.isub(_pow2(last), _pow2(first))
                self.emit("converge", s, ctx, conds, "converge", mask=mask)
            self.emit("mbar.arrive", s, ctx, conds, what, inb, sub=2,
                      cond=T.and_(ctx.cond, T.eq(t, leader)), **ops)
        return self._after(ctx, conds)

    def s_ExpectTx(self, s: ir.ExpectTx, ctx: WalkCtx) -> WalkCtx:
        conds: list[Term] = []
        addr, inb = self.barrier(s.barrier, ctx, conds)
        tx = self.int_expr(s.nbytes, ctx, conds)
        self.emit("mbar.expect_tx", s, ctx, conds, "expect_tx", inb, addr=addr, tx=tx)
        return self._after(ctx, conds)

    def _slice(self, sl: ir.BufferSlice, ctx: WalkCtx, conds: list[Term]) -> tuple[Term, Term]:
        buf = self.k.buffer(sl.buffer)
        idx = [self.int_expr(p, ctx, conds) for p in sl.prefix]
        inb = T.and_(*[T.and_(T.ile(T.const_int(0), i), T.ilt(i, T.const_int(e)))
                       for i, e in zip(idx, buf.shape, strict=False)])
        idx += [T.const_int(0)] * (len(buf.shape) - len(idx))
        return self.shared_address(buf, idx), inb

    def s_TmaLoad(self, s: ir.TmaLoad, ctx: WalkCtx) -> WalkCtx:
        conds: list[Term] = []
        smem, inb1 = self._slice(s.dst, ctx, conds)
        coords = tuple(self.int_expr(c, ctx, conds) for c in s.coords)
        bar, inb2 = self.barrier(s.barrier, ctx, conds)
        extra: dict[str, object] = {}
        if s.multicast is not None:
            extra["mask"] = self.int_expr(s.multicast, ctx, conds)
        self.emit("tma.load", s, ctx, conds, "tma_load", T.and_(inb1, inb2), smem=smem,
                  tmap=f"tm_{s.tensormap}", coords=tuple(reversed(coords)), bar=bar,
                  dims=len(coords), **extra)
        return self._after(ctx, conds)

    def s_TmaStore(self, s: ir.TmaStore, ctx: WalkCtx) -> WalkCtx:
        conds: list[Term] = []
        smem, inb = self._slice(s.src, ctx, conds)
        coords = tuple(self.int_expr(c, ctx, conds) for c in s.coords)
        self.emit("tma.store", s, ctx, conds, "tma_store", inb, smem=smem,
                  tmap=f"tm_{s.tensormap}", coords=tuple(reversed(coords)), dims=len(coords))
        return self._after(ctx, conds)

    def s_CommitGroup(self, s: ir.CommitGroup, ctx: WalkCtx) -> WalkCtx:
        self.emit("commit", s, ctx, [], "commit_group")
        return ctx

    def s_WaitGroup(self, s: ir.WaitGroup, ctx: WalkCtx) -> WalkCtx:
        self.emit("wait_group", s, ctx, [], "wait_group", pending=s.pending, read=s.read)
        return ctx


def _sem(relaxed: bool, strong: str, scope: ir.Scope) -> str:
    """An mbarrier operation's memory semantics as PTX spells them (`release.cta`, ...)."""
    return f"{'relaxed' if relaxed else strong}.{scope.value}"


def _pow2(x: Term) -> Term:
    """2^x for 0 <= x <= 32 (a lane count), as a piecewise constant."""
    acc = T.const_int(2**32)
    for k in range(31, -1, -1):
        acc = T.ite(T.eq(x, T.const_int(k)), T.const_int(2**k), acc)
    return acc
