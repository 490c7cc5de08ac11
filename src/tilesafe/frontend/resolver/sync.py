"""Resolving synchronisation and copies: mbarrier operations, fences, the block's `sync`,
TMA loads and stores with their bulk groups, named barriers, and the references they take
(a barrier, a shared-buffer slice, a tensor map and its box).

Why apart from frontend/resolver/stmts.py: the statement resolver had grown past what one
can read at once; these statements share their own references and checks (a slice must
match its tensor map's box and dtype, only `arrive` may name a peer CTA's barrier).
"""

from __future__ import annotations

from tilesafe.frontend import ast, ir
from tilesafe.frontend import diagnostics as dg
from tilesafe.frontend.resolver.base import ResolverBase
from tilesafe.frontend.span import Span


class SyncResolver(ResolverBase):
    def s_Init(self, s: ast.Init) -> ir.Stmt | None:
        ref = self.bar_ref(s.barrier, allow_whole=True)
        return ir.Init(s.span, ref) if ref else None

    def s_Fence(self, s: ast.Fence) -> ir.Stmt:
        return ir.Fence(s.span, ir.FenceKind(s.kind))

    def s_Sync(self, s: ast.Sync) -> ir.Stmt:
        if self.role is not None:
            # Legal syntax, and a real bug pattern: the checkers report the deadlock.
            pass
        return ir.Sync(s.span)

    def s_Wait(self, s: ast.Wait) -> ir.Stmt | None:
        ref = self.bar_ref(s.barrier)
        parity = self.expr(s.parity)
        self.require_affine(parity, s.parity.span, "a wait parity")
        if ref is None:
            return None
        return ir.Wait(s.span, ref, parity, self.sem_scope(s.scope), s.relaxed)

    def s_Arrive(self, s: ast.Arrive) -> ir.Stmt | None:
        ref = self.bar_ref(s.barrier, remote=True)
        tx = None
        if s.tx_bytes is not None:
            tx = self.expr(s.tx_bytes)
            self.require_affine(tx, s.tx_bytes.span, "a byte count")
        if ref is None:
            return None
        return ir.Arrive(s.span, ref, ir.ArriveMode(s.mode), tx, self.sem_scope(s.scope),
                         s.relaxed)

    def s_ExpectTx(self, s: ast.ExpectTx) -> ir.Stmt | None:
        ref = self.bar_ref(s.barrier)
        nbytes = self.expr(s.nbytes)
        self.require_affine(nbytes, s.nbytes.span, "a byte count")
        return ir.ExpectTx(s.span, ref, nbytes) if ref else None

    def s_TmaLoad(self, s: ast.TmaLoad) -> ir.Stmt | None:
        tmap, coords = self.tma_target(s.tensormap, s.coords, s.span, gather_ok=True)
        dst = self.buf_slice(s.dst)
        bar = self.bar_ref(s.barrier)
        mask = self.multicast_mask(s.multicast)
        if tmap is None or dst is None or bar is None:
            return None
        nbytes = self.match_box(tmap, dst, s.span)
        return ir.TmaLoad(s.span, dst, tmap.name, coords, bar, nbytes, mask)

    def s_TmaStore(self, s: ast.TmaStore) -> ir.Stmt | None:
        tmap, coords = self.tma_target(s.tensormap, s.coords, s.span)
        src = self.buf_slice(s.src)
        if tmap is None or src is None:
            return None
        nbytes = self.match_box(tmap, src, s.span)
        return ir.TmaStore(s.span, tmap.name, coords, src, nbytes)

    def s_CommitGroup(self, s: ast.CommitGroup) -> ir.Stmt:
        return ir.CommitGroup(s.span)

    def s_NamedBar(self, s: ast.NamedBar) -> ir.Stmt:
        what = "bar_arrive" if s.arrive else "bar_sync"
        bar_id = self.const_int(s.bar_id, f"a {what} barrier id")
        count = self.const_int(s.count, f"a {what} thread count")
        if not 0 <= bar_id < ir.NAMED_BARRIERS:
            self.error(dg.BAD_VALUE, f"barrier id {bar_id} outside 0 .. "
                       f"{ir.NAMED_BARRIERS - 1} (a block has {ir.NAMED_BARRIERS} named "
                       "barriers)", s.bar_id.span)
            bar_id = 0
        if count < 1:
            self.error(dg.BAD_VALUE, f"thread count {count} must be positive", s.count.span)
            count = 32
        return ir.NamedBar(s.span, s.arrive, bar_id, count)

    def s_WaitGroup(self, s: ast.WaitGroup) -> ir.Stmt:
        return ir.WaitGroup(s.span, s.pending, s.read)

    # ---- references ------------------------------------------------------------------------

    def bar_ref(self, ref: ast.BarRef, allow_whole: bool = False,
                remote: bool = False) -> ir.BarrierRef | None:
        """`remote`: the statement may name a peer CTA's barrier (only `arrive` can: PTX
        waits, inits and signals only barriers of the executing CTA)."""
        cta = None
        if ref.cta is not None:
            if remote:
                cta = self.cta_ref(ref.cta, f"'{ref.name}@...' (a peer CTA's barrier)")
            else:
                self.error(dg.BAD_CLUSTER, f"'{ref.name}@...': only `arrive` may name a peer "
                           "CTA's barrier (waits, inits and TMA signals use the executing "
                           "CTA's own)", ref.cta.span)
        bar = self.barriers.get(ref.name)
        if bar is None:
            if self.taken(ref.name):
                self.error(dg.WRONG_KIND, f"'{ref.name}' is not an mbarrier", ref.span)
            else:
                self.unknown(ref.name, ref.span, "mbarrier")
            return None
        index = None
        if ref.index is not None:
            if bar.length is None:
                self.error(dg.RANK_MISMATCH, f"mbarrier '{bar.name}' is not an array", ref.span)
                return None
            index = self.expr(ref.index)
            self.require_affine(index, ref.index.span, "a barrier index")
        elif bar.length is not None and not allow_whole:
            self.error(dg.RANK_MISMATCH, f"mbarrier array '{bar.name}' needs an index",
                       ref.span, f"write {bar.name}[i]")
            return None
        return ir.BarrierRef(ref.span, ref.name, index, cta)

    def buf_slice(self, ref: ast.BufRef) -> ir.BufferSlice | None:
        buf = self.buffers.get(ref.name)
        if buf is None:
            if self.taken(ref.name):
                self.error(dg.WRONG_KIND, f"'{ref.name}' is not a shared buffer", ref.span)
            else:
                self.unknown(ref.name, ref.span, "shared buffer")
            return None
        if len(ref.indices) > len(buf.shape):
            self.error(dg.RANK_MISMATCH, f"'{buf.name}' has rank {len(buf.shape)} but "
                       f"{len(ref.indices)} indices were given", ref.span)
            return None
        prefix = []
        for e in ref.indices:
            value = self.expr(e)
            self.require_affine(value, e.span, "a buffer index")
            prefix.append(value)
        return ir.BufferSlice(ref.span, ref.name, tuple(prefix))

    def tma_target(self, name: str, coords: tuple[ast.Expr, ...], span: Span,
                   gather_ok: bool = False):
        """`gather_ok`: a load's box may start at a value read from an index tensor (the
        expert's weight tile at `w[e, ...]`): the box is still one dense box, and the
        provers bound its origin by the `requires` clauses as they bound a gather's index.
        A store's may not (a box scattered by data: its exactly-once is not argued)."""
        tmap = self.tmaps.get(name)
        values = []
        for e in coords:
            value = self.expr(e)
            self.require_affine(value, e.span, "a TMA coordinate", gather_ok)
            values.append(value)
        if tmap is None:
            if self.taken(name):
                self.error(dg.WRONG_KIND, f"'{name}' is not a tensormap", span)
            else:
                self.unknown(name, span, "tensormap")
            return None, ()
        if len(coords) != len(tmap.box):
            self.error(dg.RANK_MISMATCH, f"tensormap '{name}' takes {len(tmap.box)} "
                       f"coordinates, got {len(coords)}", span)
            return None, ()
        return tmap, tuple(values)

    def match_box(self, tmap: ir.TensorMap, sl: ir.BufferSlice, span: Span) -> int:
        buf = self.buffers[sl.buffer]
        tile = buf.shape[len(sl.prefix):]
        tensor = self.tensors[tmap.tensor]
        if tuple(tile) != tuple(tmap.box):
            self.error(dg.BAD_TENSORMAP,
                       f"'{buf.name}' slice has shape {list(tile)} but tensormap "
                       f"'{tmap.name}' moves boxes of {list(tmap.box)}", span)
        if tensor.dtype is not buf.dtype:
            self.error(dg.DTYPE_MISMATCH,
                       f"tensormap '{tmap.name}' moves {tensor.dtype.value} but "
                       f"'{buf.name}' holds {buf.dtype.value}", span)
        n = 1
        for d in tmap.box:
            n *= d
        return n * tensor.dtype.nbytes
