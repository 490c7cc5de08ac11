"""The synchronisation half of the event compiler: one instruction per synchronising
statement (mbarriers, fences, `sync`, TMA copies, bulk groups, named barriers, wgmma and its
async groups), with the operands checked uniform over the class that performs it.

Why its own module: the control-flow half (loops, branches, accesses: events._Compiler)
does not change when an instruction family arrives; a family adds its statements here and
its meaning in semantics/temporal/explore/ops/.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from tilesafe.frontend import ir
from tilesafe.frontend.fragments import WARPGROUP
from tilesafe.semantics.temporal.cluster_view import CLUSTER_BARRIER, CTA_SYNC, ClusterInfo
from tilesafe.semantics.temporal.event_terms import Unsupported, compile_expr, free_vars
from tilesafe.semantics.temporal.instrs import (
    Arrive,
    ClusterSync,
    Commit,
    CtaSync,
    ExpectTx,
    FenceInit,
    FenceProxy,
    Fn,
    Init,
    InnerLoop,
    Lets,
    LoopCtx,
    MmaTileTerm,
    NamedArrive,
    NamedWait,
    Sync,
    TmaLoad,
    TmaStore,
    Wait,
    WaitGroup,
    Wgmma,
    WgmmaCommit,
    WgmmaFence,
    WgmmaWait,
)

if TYPE_CHECKING:
    from tilesafe.semantics.temporal.events import ThreadClass
    from tilesafe.semantics.temporal.instrs import Instr


class SyncCompiler:
    """Mixin of events._Compiler: the statements that are events of their class."""

    k: ir.Kernel
    cls: ThreadClass
    members: set[int]
    classes: tuple[ThreadClass, ...]
    cluster: ClusterInfo | None  # a cluster's view (semantics/temporal/cluster_view.py)
    joint_cluster: bool  # every cluster barrier is a cluster_sync: a joint step

    def emit(self, ins: Instr) -> int:  # events._Compiler's
        raise NotImplementedError

    # -- synchronisation ---------------------------------------------------------------------

    def bar_index(self, ref: ir.BarrierRef, lets: Lets) -> tuple[Fn | None, tuple[ir.Expr, ...]]:
        if ref.index is None:
            return None, ()
        self.require_uniform(ref.index, lets, "a barrier index")
        return compile_expr(ref.index, lets), (ref.index,)

    def require_uniform(self, e: ir.Expr, lets: Lets, what: str) -> None:
        """Synchronising operands must be the same for every thread of the class."""
        fv = free_vars(e, lets)
        if "data" in fv or "block" in fv:
            raise Unsupported(f"{what} must not depend on memory or the block index", e.span)
        if "thread" in fv:
            vals = np.asarray(compile_expr(e, lets)({"thread": np.array(self.cls.threads)}))
            if fv != {"thread"} or (vals != vals.flat[0]).any():
                raise Unsupported(f"{what} differs between the threads of class "
                                  f"{self.cls.name}", e.span)

    def sync_stmt(self, s: ir.Stmt, ctx: tuple[LoopCtx, ...], lets: Lets,
                  role: ir.Role | None) -> None:
        n = self.cls.size
        if isinstance(s, ir.Init):
            idx, ex = self.bar_index(s.barrier, lets)
            self.emit(Init(s, ctx, bar=s.barrier.name, idx=idx, count=n,
                            sync_exprs=ex, lets=lets))
        elif isinstance(s, ir.Fence):
            fence = FenceInit if s.kind is ir.FenceKind.MBARRIER_INIT else FenceProxy
            self.emit(fence(s, ctx, lets=lets))
        elif isinstance(s, ir.Sync) and self.cluster is not None:
            cta = self.cluster.cta_of_thread(self.cls.threads[0])
            group = tuple(c.index for c in self.classes
                          if self.cluster.cta_of_thread(c.threads[0]) == cta)
            self.emit(CtaSync(s, ctx, cta=cta, group=group, named=CTA_SYNC + cta, lets=lets))
        elif isinstance(s, ir.Sync):
            self.emit(Sync(s, ctx, lets=lets))
        elif isinstance(s, ir.Wait):
            idx, ex = self.bar_index(s.barrier, lets)
            self.require_uniform(s.parity, lets, "a wait parity")
            self.emit(Wait(s, ctx, bar=s.barrier.name, idx=idx,
                            parity=compile_expr(s.parity, lets), sync_exprs=ex + (s.parity,),
                            cluster=s.scope is ir.Scope.CLUSTER and not s.relaxed,
                            lets=lets))
        elif isinstance(s, ir.Arrive):
            idx, ex = self.bar_index(s.barrier, lets)
            tx = None
            if s.tx_bytes is not None:
                self.require_uniform(s.tx_bytes, lets, "an expect_tx byte count")
                tx = compile_expr(s.tx_bytes, lets)
                ex = ex + (s.tx_bytes,)
            count, group = self.arrivals(s, role)
            self.emit(Arrive(s, ctx, bar=s.barrier.name, idx=idx, count=count, tx=tx,
                            per_warp=s.mode is ir.ArriveMode.PER_WARP, group=group,
                            release=not s.relaxed, cluster=s.scope is ir.Scope.CLUSTER,
                            sync_exprs=ex, lets=lets))
        elif isinstance(s, ir.ExpectTx):
            idx, ex = self.bar_index(s.barrier, lets)
            self.require_uniform(s.nbytes, lets, "an expect_tx byte count")
            self.emit(ExpectTx(s, ctx, bar=s.barrier.name, idx=idx, count=n,
                            tx=compile_expr(s.nbytes, lets), sync_exprs=ex + (s.nbytes,),
                            lets=lets))
        elif isinstance(s, ir.TmaLoad):
            idx, ex = self.bar_index(s.barrier, lets)
            prefix, pex = self.prefix(s.dst, lets)
            self.emit(TmaLoad(s, ctx, bar=s.barrier.name, idx=idx, count=n,
                            nbytes=s.nbytes, buffer=s.dst.buffer, prefix=prefix,
                            sync_exprs=ex + pex, lets=lets))
        elif isinstance(s, ir.TmaStore):
            prefix, pex = self.prefix(s.src, lets)
            self.emit(TmaStore(s, ctx, count=n, nbytes=s.nbytes, buffer=s.src.buffer,
                            prefix=prefix, sync_exprs=pex, lets=lets))
        elif isinstance(s, ir.CommitGroup):
            self.emit(Commit(s, ctx, lets=lets))
        elif isinstance(s, ir.WaitGroup):
            self.emit(WaitGroup(s, ctx, pending=s.pending, lets=lets))
        elif isinstance(s, ir.Wgmma):
            self.wgmma(s, s, [], ctx, lets, role)
        elif isinstance(s, ir.WgmmaFence):
            self.emit(WgmmaFence(s, ctx, lets=lets))
        elif isinstance(s, ir.WgmmaCommit):
            self.emit(WgmmaCommit(s, ctx, lets=lets))
        elif isinstance(s, ir.WgmmaWait):
            self.emit(WgmmaWait(s, ctx, pending=s.pending, lets=lets))
        elif isinstance(s, ir.NamedBar):
            # bar_sync = arrive, then wait until the phase it arrived in completes
            # (semantics/temporal/explore/ops/named.py); bar_arrive = the arrive alone.
            self.emit(NamedArrive(s, ctx, count=n, named=s.bar_id, ncount=s.count,
                                  syncs=not s.arrive, lets=lets))
            if not s.arrive:
                self.emit(NamedWait(s, ctx, count=n, named=s.bar_id, ncount=s.count,
                                lets=lets))
        elif isinstance(s, ir.ClusterBarrier) and self.joint_cluster:
            # Every cluster barrier of the kernel is a `cluster_sync`: one joint step.
            self.emit(ClusterSync(s, ctx, lets=lets))
        elif isinstance(s, ir.ClusterBarrier):
            # The cluster's view (semantics/temporal/cluster_view.py): a named barrier of
            # every thread of the cluster, where a finished class counts as arrived.
            if s.arrive:
                self.emit(NamedArrive(s, ctx, count=n, named=CLUSTER_BARRIER,
                                      ncount=self.k.block, release=not s.relaxed,
                                      exits_count=True, lets=lets))
            if s.wait:
                self.emit(NamedWait(s, ctx, count=n, named=CLUSTER_BARRIER,
                                    ncount=self.k.block, exits_count=True, lets=lets))

    def wgmma(self, w: ir.Wgmma, at: ir.Stmt, loops: list[tuple[ir.For, Lets]],
              ctx: tuple[LoopCtx, ...], lets: Lets, role: ir.Role | None) -> None:
        """One instruction for the wgmma `w` (and the loops `loops` around it, collapsed:
        `at` is then the outermost loop). Tile origins may differ between the warpgroups of
        a class (they are evaluated for every thread); within a warpgroup they are one
        (TS531, checker mma)."""
        inner = []
        exprs: list[ir.Expr] = []
        for lp, llets in loops:
            for bound in (lp.lo, lp.hi):
                if free_vars(bound, llets) & {"thread", "block", "data"}:
                    raise Unsupported("a loop of wgmmas must have bounds uniform over the "
                                      "block (no thread, block index or memory)", bound.span)
                exprs.append(bound)
            inner.append(InnerLoop(lp.var.uid, compile_expr(lp.lo, llets),
                                   compile_expr(lp.hi, llets), lp.step))
        tiles = []
        for t in (w.a, w.b):
            starts = []
            for i in t.index:
                if free_vars(i.start, lets) & {"block", "data"}:
                    raise Unsupported("a wgmma tile origin must not depend on memory or the "
                                      "block index", i.start.span)
                starts.append(compile_expr(i.start, lets))
                exprs.append(i.start)
            tiles.append(MmaTileTerm(t.buffer, tuple(starts),
                                     tuple(1 if i.extent is None else i.extent
                                           for i in t.index)))
        self.emit(Wgmma(at, ctx, fragment=w.acc, tiles=tuple(tiles), inner=tuple(inner),
                        group=self.mma_group(role), where=w.span, sync_exprs=tuple(exprs),
                        lets=lets))

    def mma_group(self, role: ir.Role | None) -> tuple[int, ...]:
        """The classes whose threads share a warpgroup (of the role) with this class,
        transitively: the 128 threads of a warpgroup issue its MMA together."""
        lo = role.threads.lo if role is not None else 0
        hi = role.threads.hi if role is not None else self.k.block
        if role is not None and role.elect_one:
            hi = lo + 1

        def groups_of(c: ThreadClass) -> set[int]:
            return {t // WARPGROUP for t in c.threads if lo <= t < hi}

        group = {self.cls.index}
        frontier = groups_of(self.cls)
        seen: set[int] = set()
        while frontier:
            w = frontier.pop()
            seen.add(w)
            for c in self.classes:
                wc = groups_of(c)
                if w in wc and c.index not in group:
                    group.add(c.index)
                    frontier |= wc - seen
        return tuple(sorted(group))

    def prefix(self, sl: ir.BufferSlice, lets: Lets) -> tuple[tuple[Fn, ...], tuple[ir.Expr, ...]]:
        for p in sl.prefix:
            self.require_uniform(p, lets, "a TMA slice index")
        return tuple(compile_expr(p, lets) for p in sl.prefix), sl.prefix

    def arrivals(self, s: ir.Arrive, role: ir.Role | None) -> tuple[int, tuple[int, ...]]:
        """Arrivals this class makes, and (per warp) the classes whose lanes converge."""
        lo = role.threads.lo if role is not None else 0
        hi = role.threads.hi if role is not None else self.k.block
        if role is not None and role.elect_one:
            hi = lo + 1
        if s.mode is ir.ArriveMode.EACH:
            return self.cls.size, ()
        if s.mode is ir.ArriveMode.ONE:
            return (1 if lo in self.members else 0), ()
        warps = {t // 32 for t in self.cls.threads if lo <= t < hi}
        leaders = {max(lo, 32 * w) for w in warps}
        # Classes that share a warp with this one (transitively) converge together.
        group = {self.cls.index}
        frontier = set(warps)
        seen_w: set[int] = set()
        while frontier:
            w = frontier.pop()
            seen_w.add(w)
            for c in self.classes:
                if any(32 * w <= t < 32 * w + 32 and lo <= t < hi for t in c.threads):
                    if c.index not in group:
                        group.add(c.index)
                        frontier |= {t // 32 for t in c.threads if lo <= t < hi} - seen_w
        return len(leaders & self.members), tuple(sorted(group))
