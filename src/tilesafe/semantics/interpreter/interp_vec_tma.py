"""The copy engine of the lockstep interpreter: TMA issue, bulk groups, fences, and the
copy-engine steps (a load landing; a store reading shared memory, then writing global).

Why per thread and per copy: copies are few (one per tile) and each moves a whole box with
numpy, so issuing them one thread at a time and performing them one copy at a time costs
little, and keeps them exactly the scalar engine's (semantics/interpreter/interp.py: tma_common,
s_TmaLoad, s_TmaStore, s_WaitGroup, perform, _exit_with_copies): the same checks in the
same order, the same messages, the same per-block list of pending copies whose positions
are the copy agents of the recorded schedule. `fence proxy_async` is the one vectorised
operation: a byte written by the generic proxy carries its writer and the writer's release
count at the time, and a fence clears the bytes its thread wrote since its last release --
the scalar engine's list of unfenced writes, kept per byte.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from tilesafe.frontend import ir
from tilesafe.semantics.hw import tma_rules
from tilesafe.semantics.interpreter import interp_error as E
from tilesafe.semantics.interpreter.interp import _box_offsets  # one cache for both engines
from tilesafe.semantics.interpreter.interp_error import InterpError
from tilesafe.semantics.interpreter.interp_io import tensormap_spec
from tilesafe.semantics.interpreter.interp_vec_data import DataOps, Outcome
from tilesafe.semantics.interpreter.interp_vec_prog import Node
from tilesafe.semantics.interpreter.interp_vec_state import Batch, Group, VGlobal
from tilesafe.semantics.interpreter.interp_vec_sync import Blocked, SyncOps
from tilesafe.semantics.interpreter.smem import NAN_BITS


class VCopy:
    """One copy-engine operation of one block (interp_agents.Copy, plus its block and step key)."""

    __slots__ = ("kind", "stmt", "pc", "tid", "row", "g", "slots", "addrs", "flat", "mask",
                 "fill", "bar", "nbytes", "data", "read_done", "write_done", "elem_bytes",
                 "buffer")

    def __init__(self, kind: str, stmt: ir.Stmt, pc: int, tid: int, row: int) -> None:
        self.kind, self.stmt, self.pc, self.tid, self.row = kind, stmt, pc, tid, row
        self.read_done = self.write_done = False

    @property
    def key(self) -> tuple[int, str]:
        """Copies with equal keys are performed together (one step each, in order)."""
        return (self.pc, self.kind if self.kind == "load" or not self.read_done else "write")


class TmaOps:
    """Compiles TMA issue, bulk-group and fence nodes; performs copies."""

    def __init__(self, data: DataOps, sync: SyncOps) -> None:
        self.data = data
        self.sync = sync
        self.kernel = data.kernel
        self.tmap_ok: set[str] = set()

    def check_tensormap(self, tm: ir.TensorMap, shape: tuple[int, ...]) -> None:
        if tm.name in self.tmap_ok:
            return
        bad = tma_rules.admissibility(tensormap_spec(self.kernel, tm, shape))
        if bad:
            v = bad[0]
            raise InterpError(v.code, f"tensormap '{tm.name}': {v.message}", tm.span,
                              {"rule": v.rule, "citation": v.citation})
        self.tmap_ok.add(tm.name)

    # -- issue ------------------------------------------------------------------------------

    def maker(self, pc: int, s: ir.TmaLoad | ir.TmaStore, sl: ir.BufferSlice
              ) -> Callable[[Group], list[VCopy]]:
        """interp_copies.CopyCompiler.tma_common: one copy per lane, expressions evaluated
        per group."""
        tm = self.kernel.tensormap(s.tensormap)
        gl: VGlobal = self.data.globals[tm.tensor]
        pl = self.data.plan.placements[sl.buffer]
        eb = pl.elem_bytes
        prefix = [self.data.expr(p) for p in sl.prefix]
        coords = [self.data.expr(c) for c in s.coords]
        rank_buf = len(pl.buffer.shape)
        box_grid = np.indices(tm.box).reshape(len(tm.box), -1).astype(np.int64)
        gshape = np.array(gl.shape, dtype=np.int64).reshape(-1, 1)
        gstrides = np.array(gl.strides, dtype=np.int64).reshape(-1, 1)
        fill = NAN_BITS.get(gl.tensor.dtype, 0) if tm.oob_fill == "nan" else 0
        kind = "load" if isinstance(s, ir.TmaLoad) else "store"

        def vals(fns: list, g: Group) -> list[list[int]]:
            cols = [np.broadcast_to(np.asarray(f(g), dtype=np.int64), (g.n,)).tolist()
                    for f in fns]
            return [list(r) for r in zip(*cols, strict=True)] if cols else [[]] * g.n

        def make(g: Group) -> list[VCopy]:
            pres, origins = vals(prefix, g), vals(coords, g)
            out = []
            for j, lane in enumerate(g.lanes.tolist()):
                st = g.st
                row, tid = st.row_of(lane), st.tid_of(lane)
                self.check_tensormap(tm, gl.shape)
                pre = tuple(pres[j])
                for p, d in zip(pre, pl.buffer.shape, strict=False):
                    if not 0 <= p < d:
                        raise st.err(E.SHARED_OOB, f"slice {sl.buffer}{list(pre)} is outside "
                                     f"shape {list(pl.buffer.shape)}", sl.span, row, tid)
                base = pl.address(pre + (0,) * (rank_buf - len(pre)))
                if base % tma_rules.SMEM_ALIGNMENT:
                    raise st.err("TS510", f"TMA shared address {base} of {sl.buffer}"
                                 f"{list(pre)} is not {tma_rules.SMEM_ALIGNMENT}-byte aligned",
                                 sl.span, row, tid)
                addrs = base + _box_offsets(tm.box, eb, tm.swizzle, base)
                if addrs.min() < pl.base or addrs.max() + eb > pl.base + pl.nbytes:
                    raise st.err(E.SHARED_OOB, f"TMA box at {sl.buffer}{list(pre)} reaches "
                                 f"outside the buffer (bytes {pl.base}..{pl.base + pl.nbytes - 1})",
                                 sl.span, row, tid)
                origin = np.array(origins[j], dtype=np.int64).reshape(-1, 1)
                gidx = origin + box_grid
                mask = np.all((gidx >= 0) & (gidx < gshape), axis=0)
                c = VCopy(kind, s, pc, tid, row)
                c.g, c.elem_bytes, c.buffer, c.fill = gl, eb, sl.buffer, fill
                c.addrs, c.slots = addrs, addrs // eb
                c.flat, c.mask = np.where(mask, (gidx * gstrides).sum(axis=0), 0), mask
                out.append(c)
            return out

        return make

    def tma_load(self, pc: int, node: Node) -> Callable[[Group], Outcome]:
        s = node.stmt
        assert isinstance(s, ir.TmaLoad)
        make, index = self.maker(pc, s, s.dst), self.sync.bar_index(s.barrier)

        def tma_load(g: Group) -> Outcome:
            st = g.st
            copies, ks = make(g), index(g).tolist()
            for c, k in zip(copies, ks, strict=True):
                if not st.bars[c.row][k].initialized:
                    raise st.err(E.UNINIT, f"tma_load signals mbarrier {st.label(k)} before "
                                 "init", s.span, c.row, c.tid,
                                 barriers=st.barrier_states(c.row))
                if not st.fenced[c.row, k]:
                    raise st.err(E.UNFENCED_INIT, f"tma_load signals mbarrier {st.label(k)} "
                                 f"whose init (thread {int(st.init_by[c.row, k])}) was not "
                                 "followed by 'fence mbarrier_init'", s.span, c.row, c.tid)
                c.bar, c.nbytes = k, s.nbytes
                issue(st, c)
            return Outcome([(node.next, g.lanes)])

        return tma_load

    def tma_store(self, pc: int, node: Node) -> Callable[[Group], Outcome]:
        s = node.stmt
        assert isinstance(s, ir.TmaStore)
        make = self.maker(pc, s, s.src)

        def tma_store(g: Group) -> Outcome:
            st = g.st
            for lane, c in zip(g.lanes.tolist(), make(g), strict=True):
                st.bulk.setdefault(lane, [[], []])[0].append(c)
                issue(st, c)
            return Outcome([(node.next, g.lanes)])

        return tma_store

    def wait_group(self, pc: int, node: Node) -> Callable[[Group], Outcome]:
        """interp_copies.CopyCompiler.s_WaitGroup, one thread after the other."""
        s = node.stmt
        assert isinstance(s, ir.WaitGroup)
        limit, read_only = s.pending, s.read

        def waiting(st: Batch, lane: int) -> int:
            groups = st.bulk.setdefault(lane, [[], []])[1]
            while groups and all(c.write_done for c in groups[0]):
                groups.pop(0)
            older = groups[:len(groups) - limit] if limit else groups
            if read_only:
                return sum(1 for grp in older if not all(c.read_done for c in grp))
            return sum(1 for grp in older if not all(c.write_done for c in grp))

        def wait_group(g: Group) -> Outcome:
            st = g.st
            go, stay, objs = [], [], []
            for lane in g.lanes.tolist():
                if waiting(st, lane) == 0:
                    go.append(lane)
                    continue
                tid = st.tid_of(lane)
                obj = ((lambda lane=lane: waiting(st, lane) == 0), ("group", tid),
                       (lambda lane=lane: f"wait_group {limit}{' read' if read_only else ''}"
                        f" ({waiting(st, lane)} older committed groups not complete)"))
                stay.append(lane)
                objs.append(obj)
                st.block_order(obj[1], [tid])
            blk = (Blocked("group", pc, node, np.array(stay, np.int64), objs=objs)
                   if stay else None)
            return Outcome([(node.next, np.array(go, np.int64))], blk)

        return wait_group

    def fence(self, node: Node) -> Callable[[Group], Outcome]:
        s = node.stmt
        assert isinstance(s, ir.Fence)
        if s.kind is ir.FenceKind.MBARRIER_INIT:
            def fence_init(g: Group) -> Outcome:
                st = g.st
                for lane in g.lanes.tolist():
                    row = st.row_of(lane)
                    st.fenced[row, st.init_by[row] == st.tid_of(lane)] = True
                return Outcome([(node.next, g.lanes)])

            return fence_init

        def fence_proxy(g: Group) -> Outcome:
            st = g.st
            if st.tags is not None:
                nt, total = st.nthreads, st.total
                rows = np.unique(g.lanes // nt)
                fencing = np.zeros((st.nblocks, nt), bool)
                fencing[g.lanes // nt, g.lanes % nt] = True
                tags = st.tags.reshape(st.nblocks, total)[rows]
                epoch = st.tag_epoch.reshape(st.nblocks, total)[rows]
                who = np.where(tags >= 0, tags, 0)
                rel = st.rel.reshape(st.nblocks, nt)[rows]
                r = np.arange(len(rows))[:, None]
                clear = (tags >= 0) & fencing[rows][r, who] & (epoch == rel[r, who])
                tags[clear] = -1
                st.tags.reshape(st.nblocks, total)[rows] = tags
            return Outcome([(node.next, g.lanes)])

        return fence_proxy


# ---- the copy engine --------------------------------------------------------------------------


def issue(st: Batch, c: VCopy) -> None:
    st.copies[c.row].append(c)
    st.copy_keys[c.key] = st.copy_keys.get(c.key, 0) + 1


def _rekey(st: Batch, old: tuple, new: tuple | None) -> None:
    st.copy_keys[old] -= 1
    if not st.copy_keys[old]:
        del st.copy_keys[old]
    if new is not None:
        st.copy_keys[new] = st.copy_keys.get(new, 0) + 1


def perform(st: Batch, c: VCopy, batched: bool) -> bool:
    """interp._Block.perform: the next step of a copy; True when it is finished."""
    g: VGlobal = c.g
    eb = c.elem_bytes
    sbits = st.smem_view(eb)
    base = c.row * (st.total // eb)
    old = c.key
    if c.kind == "load":
        vals = np.full(c.flat.shape, c.fill, dtype=g.bits.dtype)
        vals[c.mask] = g.bits[c.flat[c.mask]]
        sbits[base + c.slots] = vals
        if st.tags is not None:
            for k in range(eb):
                st.tags[c.row * st.total + c.addrs + k] = -1
        st.bar_update(c.row, c.bar, lambda b: b.complete_tx(c.nbytes), c.stmt.span, None)
        c.read_done = c.write_done = True
        _rekey(st, old, None)
        return True
    if not c.read_done:
        if st.tags is not None:
            for k in range(eb):
                writers = st.tags[c.row * st.total + c.addrs + k]
                bad = np.nonzero(writers >= 0)[0]
                if bad.size:
                    j = int(bad[0])
                    raise st.err(E.PROXY_FENCE,
                                 f"tma_store reads '{c.buffer}' at address {int(c.addrs[j])} "
                                 f"(box element {j}) that thread {int(writers[j])} wrote "
                                 "through the generic proxy with no 'fence proxy_async' "
                                 "before a synchronisation (or after this store was issued)",
                                 c.stmt.span, c.row, None, writer=int(writers[j]),
                                 address=int(c.addrs[j]), issuer=c.tid)
        c.data = sbits[base + c.slots].copy()
        c.read_done = True
        _rekey(st, old, c.key)
        return False
    flat = c.flat[c.mask]
    if batched:
        g.order.claim(flat, st.first + c.row + 1)
    g.bits[flat] = c.data[c.mask]
    c.write_done = True
    _rekey(st, old, None)
    return True


def exit_with_copies(st: Batch, row: int) -> None:
    """interp._Block._exit_with_copies for block `row`: every thread has finished."""
    for c in st.copies[row]:
        if c.kind == "load":
            raise st.err(E.EXIT_LOAD, f"every thread finished while a TMA load into "
                         f"'{c.buffer}' (signalling {st.label(c.bar)}) is still in flight: "
                         "nothing waited for it", c.stmt.span, row, None, issuer=c.tid,
                         barriers=st.barrier_states(row))
        if not c.read_done:
            raise st.err(E.EXIT_STORE, f"every thread finished while a TMA store from "
                         f"'{c.buffer}' (thread {c.tid}) has not read shared memory yet: "
                         "'wait_group 0 read' before exit", c.stmt.span, row, None,
                         issuer=c.tid)
