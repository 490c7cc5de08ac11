"""Synchronisation nodes of the lockstep interpreter: `sync`, named barriers, mbarrier
init/arrive/expect_tx/wait, the convergence of `arrive, one per warp`, and the threads that
wait at them.

Why these are exact: a group step stands for its threads' steps in thread order. `sync`
and the per-warp convergence only count arrivals, so counting a whole group at once gives
the same counts, and the last arriving thread of a block (or warp) is the one that
completes the barrier, as in the scalar engine. A wait only reads barrier state. Every
operation that changes an mbarrier (init, arrive, expect_tx) or a named barrier runs one
thread after the other through the same MbarrierState calls and messages as
semantics/interpreter/interp.py, so its errors and phases are the scalar engine's.

A waiting thread is recorded as in the scalar engine: under a key saying what it waits for,
in the order it started waiting (a one-block batch keeps that order for the deadlock
message, which names the statement of the first waiting thread).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from tilesafe.frontend import ir
from tilesafe.frontend.walk import statements
from tilesafe.semantics.hw.mbarrier import MbarrierError
from tilesafe.semantics.interpreter import interp_error as E
from tilesafe.semantics.interpreter.interp_vec_data import DataOps, Outcome
from tilesafe.semantics.interpreter.interp_vec_prog import Node
from tilesafe.semantics.interpreter.interp_vec_state import Batch, Group


class Blocked:
    """Lanes (sorted) waiting at node `pc`; `a`, `b`: per-lane parameters of the kind
    (wait: instance, parity; sync: generation; gate: warp, generation); `objs`: per-lane
    Python state (named: (barrier state, generation); group: the wait_group test)."""

    __slots__ = ("kind", "pc", "node", "lanes", "a", "b", "objs")

    def __init__(self, kind: str, pc: int, node: Node, lanes: np.ndarray, a: Any = None,
                 b: Any = None, objs: list | None = None) -> None:
        self.kind, self.pc, self.node, self.lanes = kind, pc, node, lanes
        self.a, self.b, self.objs = a, b, objs

    def rows(self, st: Batch) -> Any:
        return 0 if st.nblocks == 1 else self.lanes // st.nthreads

    def ready(self, st: Batch) -> np.ndarray:
        if self.kind == "wait":
            return st.parity[self.rows(st), self.a] != self.b
        if self.kind == "sync":
            return st.sync_gen[self.rows(st)] != self.a
        if self.kind == "gate":
            return st.gates[self.pc][1][self.rows(st), self.a] != self.b
        return np.array([o[0]() for o in self.objs], dtype=bool)

    def take(self, mask: np.ndarray) -> Blocked | None:
        """The lanes where `mask` is False (those that stay), or None."""
        keep = ~mask
        if not keep.any():
            return None
        objs = (None if self.objs is None
                else [o for o, k in zip(self.objs, keep.tolist(), strict=True) if k])
        return Blocked(self.kind, self.pc, self.node, self.lanes[keep], _pick(self.a, keep),
                       _pick(self.b, keep), objs)

    def key(self, st: Batch, j: int) -> tuple:
        if self.kind == "wait":
            name, i = st.inst[int(self.a[j])]
            return ("wait", name, i, int(self.b[j]))
        if self.kind == "sync":
            return ("sync", int(self.a[j]))
        if self.kind == "gate":
            return ("gate", self.pc, int(self.a[j]), int(self.b[j]))
        return self.objs[j][1]

    def describe(self, st: Batch, j: int) -> str:
        s = self.node.stmt
        row = st.row_of(int(self.lanes[j]))
        if self.kind == "wait":
            k, p = int(self.a[j]), int(self.b[j])
            return f"wait {st.label(k)} parity {p} [{st.bar_state_text(row, k)}]"
        if self.kind == "sync":
            return (f"wait at sync (line {s.span.line}; {int(st.sync_count[row])} of "
                    f"{st.nthreads} threads arrived)")
        if self.kind == "gate":
            w = int(self.a[j])
            count = int(st.gates[self.pc][0][row, w])
            size = min(self.node.hi, 32 * w + 32) - max(self.node.lo, 32 * w)
            return (f"converge at 'arrive {s.barrier.name}, one per warp' (line "
                    f"{s.span.line}; {count} of {size} lanes of warp {w} there)")
        return self.objs[j][2]()


def _pick(x: Any, keep: np.ndarray) -> Any:
    return x[keep] if isinstance(x, np.ndarray) else x


def _keys_in_order(st: Batch, blk: Blocked) -> None:
    if st.order is not None:
        for j, tid in enumerate((blk.lanes % st.nthreads).tolist()):
            st.block_order(blk.key(st, j), [tid])


def _last_of_runs(keys: np.ndarray) -> np.ndarray:
    """For sorted keys, True at the last position of each run of equal keys."""
    out = np.ones(len(keys), bool)
    out[:-1] = keys[1:] != keys[:-1]
    return out


class SyncOps:
    """Compiles the synchronisation nodes of one launch."""

    def __init__(self, data: DataOps) -> None:
        self.data = data
        self.kernel = data.kernel
        self.uses_sync = any(isinstance(s, ir.Sync) for s in statements(self.kernel.body))

    def bar_index(self, ref: ir.BarrierRef) -> Callable[[Group], np.ndarray]:
        """Instance of the launch-wide numbering per lane (TS202 outside the array)."""
        n = self.kernel.barrier(ref.name).instances
        name = ref.name
        f = self.data.expr(ref.index) if ref.index is not None else None

        def index(g: Group) -> np.ndarray:
            off = g.st.offset[name]
            if f is None:
                return np.full(g.n, off, np.int64)
            i = np.broadcast_to(np.asarray(f(g), dtype=np.int64), (g.n,))
            bad = (i < 0) | (i >= n)
            if bad.any():
                j = int(np.argmax(bad))
                raise g.st.lane_err(E.SHARED_OOB, f"barrier index {name}[{int(i[j])}] is "
                                    f"outside 0..{n - 1}", ref.span, int(g.lanes[j]),
                                    barrier=name, index=int(i[j]))
            return i + off

        return index

    def per_lane(self, fn: Callable[[Batch, int, int, int], None]
                 ) -> Callable[[Group], None]:
        """Run `fn(batch, lane, row, tid)` for each lane, in thread order."""

        def run(g: Group) -> None:
            st = g.st
            for lane in g.lanes.tolist():
                fn(st, lane, lane // st.nthreads, lane % st.nthreads)

        return run

    # -- mbarriers --------------------------------------------------------------------------

    def init(self, node: Node) -> Callable[[Group], Outcome]:
        s = node.stmt
        assert isinstance(s, ir.Init)
        bar = self.kernel.barrier(s.barrier.name)
        index = self.bar_index(s.barrier)

        def init(g: Group) -> Outcome:
            st = g.st
            ks = (None if s.barrier.index is None else index(g).tolist())
            for j, lane in enumerate(g.lanes.tolist()):
                row, tid = st.row_of(lane), st.tid_of(lane)
                off = st.offset[bar.name]
                for k in (range(off, off + bar.instances) if ks is None else (ks[j],)):
                    old = st.bars[row][k]
                    if old.initialized:
                        raise st.err(E.REINIT, f"init of mbarrier {st.label(k)}, which is "
                                     f"live (initialised by thread {int(st.init_by[row, k])})",
                                     s.span, row, tid, barriers=st.barrier_states(row))
                    try:
                        st.bars[row][k] = old.init(bar.count)
                    except MbarrierError as exc:
                        raise st.model_err(exc, k, s.span, row, tid) from None
                    st.parity[row, k] = 0
                    st.phase[row, k] = 0
                    st.init_by[row, k] = tid
                    st.fenced[row, k] = False
            return Outcome([(node.next, g.lanes)])

        return init

    def arrive(self, node: Node) -> Callable[[Group], Outcome]:
        s = node.stmt
        assert isinstance(s, ir.Arrive)
        index = self.bar_index(s.barrier)
        tx = self.data.expr(s.tx_bytes) if s.tx_bytes is not None else None

        def arrive(g: Group) -> Outcome:
            st = g.st
            ks = index(g).tolist()
            ns = (np.broadcast_to(np.asarray(tx(g), dtype=np.int64), (g.n,)).tolist()
                  if tx is not None else None)
            for j, lane in enumerate(g.lanes.tolist()):
                st.release(lane)
                row, tid = st.row_of(lane), st.tid_of(lane)
                if ns is None:
                    st.bar_update(row, ks[j], lambda b: b.arrive(1)[0], s.span, tid)
                else:
                    st.bar_update(row, ks[j], lambda b, n=ns[j]: b.arrive_expect_tx(n)[0],
                                  s.span, tid)
            return Outcome([(node.next, g.lanes)])

        return arrive

    def expect_tx(self, node: Node) -> Callable[[Group], Outcome]:
        s = node.stmt
        assert isinstance(s, ir.ExpectTx)
        index, nbytes = self.bar_index(s.barrier), self.data.expr(s.nbytes)

        def expect(g: Group) -> Outcome:
            st = g.st
            ks = index(g).tolist()
            ns = np.broadcast_to(np.asarray(nbytes(g), dtype=np.int64), (g.n,)).tolist()
            for j, lane in enumerate(g.lanes.tolist()):
                st.bar_update(st.row_of(lane), ks[j], lambda b, n=ns[j]: b.expect_tx(n),
                              s.span, st.tid_of(lane))
            return Outcome([(node.next, g.lanes)])

        return expect

    def wait(self, pc: int, node: Node) -> Callable[[Group], Outcome]:
        s = node.stmt
        assert isinstance(s, ir.Wait)
        index, parity = self.bar_index(s.barrier), self.data.expr(s.parity)

        def wait(g: Group) -> Outcome:
            st = g.st
            k = index(g)
            p = np.broadcast_to(np.asarray(parity(g), dtype=np.int64), (g.n,))
            rows = 0 if st.nblocks == 1 else g.row
            inited = np.array([st.bars[r][kk].initialized for r, kk in
                               zip(np.broadcast_to(rows, (g.n,)).tolist(), k.tolist(),
                                   strict=True)])
            if not inited.all() or not np.isin(p, (0, 1)).all():
                j = int(np.argmin(inited & np.isin(p, (0, 1))))
                lane = int(g.lanes[j])
                row, tid, kj = st.row_of(lane), st.tid_of(lane), int(k[j])
                if not inited[j]:
                    raise st.err(E.UNINIT, f"wait on mbarrier {st.label(kj)} before init",
                                 s.span, row, tid, barriers=st.barrier_states(row))
                try:
                    st.bars[row][kj].test_wait_parity(int(p[j]))
                except MbarrierError as exc:
                    raise st.model_err(exc, kj, s.span, row, tid) from None
            passes = st.parity[rows, k] != p
            go = [(node.next, g.lanes[passes])]
            if passes.all():
                return Outcome(go)
            stay = ~passes
            blk = Blocked("wait", pc, node, g.lanes[stay], k[stay], p[stay])
            _keys_in_order(st, blk)
            return Outcome(go, blk)

        return wait

    # -- block-wide and warp-wide barriers --------------------------------------------------

    def sync(self, pc: int, node: Node) -> Callable[[Group], Outcome]:
        def sync(g: Group) -> Outcome:
            st = g.st
            st.release(g.lanes)
            rows = np.zeros(g.n, np.int64) if st.nblocks == 1 else g.row
            counts = np.bincount(rows, minlength=st.nblocks)
            new = st.sync_count + counts
            done = new == st.nthreads
            gen = st.sync_gen[rows]
            last = _last_of_runs(rows) & done[rows]
            st.sync_count = np.where(done, 0, new)
            st.sync_gen = st.sync_gen + done
            blk = Blocked("sync", pc, node, g.lanes[~last], gen[~last])
            _keys_in_order(st, blk)
            return Outcome([(node.next, g.lanes[last])], blk if len(blk.lanes) else None)

        return sync

    def converge(self, pc: int, node: Node) -> Callable[[Group], Outcome]:
        """`arrive, one per warp`, first step: each warp's lanes of the role wait for each
        other (elect.sync's convergence), then the lowest goes on to arrive."""
        nwarps = -(-self.kernel.block // 32)
        lo, hi = node.lo, node.hi
        size = np.array([min(hi, 32 * w + 32) - max(lo, 32 * w) for w in range(nwarps)])

        def converge(g: Group) -> Outcome:
            st = g.st
            if pc not in st.gates:
                st.gates[pc] = (np.zeros((st.nblocks, nwarps), np.int64),
                                np.zeros((st.nblocks, nwarps), np.int64))
            count, gens = st.gates[pc]
            st.release(g.lanes)
            rows = np.zeros(g.n, np.int64) if st.nblocks == 1 else g.row
            warp = g.tid // 32
            cell = rows * nwarps + warp
            add = np.bincount(cell, minlength=st.nblocks * nwarps).reshape(st.nblocks, nwarps)
            new = count + add
            done = new == size[None, :]
            gen = gens[rows, warp]
            last = _last_of_runs(cell) & done[rows, warp]
            count[...] = np.where(done, 0, new)
            gens += done
            blk = Blocked("gate", pc, node, g.lanes[~last], warp[~last], gen[~last])
            _keys_in_order(st, blk)
            return Outcome([(node.next, g.lanes[last])], blk if len(blk.lanes) else None)

        return converge

    def named(self, pc: int, node: Node) -> Callable[[Group], Outcome]:
        s = node.stmt
        assert isinstance(s, ir.NamedBar)
        what = "bar_arrive" if s.arrive else "bar_sync"

        def named(g: Group) -> Outcome:
            st = g.st
            go, stay, objs = [], [], []
            for lane in g.lanes.tolist():
                st.release(lane)
                row, tid = st.row_of(lane), st.tid_of(lane)
                state = self._named_arrive(st, s, what, row, tid)
                if state is None:
                    go.append(lane)
                    continue
                stay.append(lane)
                objs.append(state)
                st.block_order(state[1], [tid])
            blk = (Blocked("named", pc, node, np.array(stay, np.int64), objs=objs)
                   if stay else None)
            return Outcome([(node.next, np.array(go, np.int64))], blk)

        return named

    def _named_arrive(self, st: Batch, s: ir.NamedBar, what: str, row: int,
                      tid: int) -> tuple | None:
        """interp_sync.SyncCompiler.s_NamedBar for one thread: None when it goes on, else the
        (ready test, key, description) of its wait."""
        nthreads = st.nthreads
        if s.count % 32 or s.count > nthreads:
            raise st.err(E.NAMED_COUNT, f"{what} {s.bar_id}, {s.count}: the thread count "
                         f"must be a multiple of 32 and at most the block's {nthreads}",
                         s.span, row, tid)
        if s.bar_id == 0 and self.uses_sync and s.count != nthreads:
            raise st.err(E.NAMED_COLLISION, f"{what} 0, {s.count}: barrier 0 is the "
                         "block-wide barrier `sync` uses (bar.sync 0 for every thread)",
                         s.span, row, tid)
        bar = st.named[row].setdefault(s.bar_id, [0, 0, s.count, set()])
        if bar[0] and bar[2] != s.count:
            raise st.err(E.NAMED_COLLISION, f"{what} {s.bar_id}, {s.count} while a phase "
                         f"of barrier {s.bar_id} with count {bar[2]} is in progress "
                         f"({bar[0]} threads arrived): two uses share one id", s.span, row,
                         tid)
        if tid in bar[3]:
            raise st.err(E.NAMED_MISMATCH, f"thread arrives twice in one phase of "
                         f"barrier {s.bar_id} (count {bar[2]}, {bar[0]} arrivals): more "
                         "threads arrive than it counts, or an arrive ran a phase ahead",
                         s.span, row, tid)
        bar[2] = s.count
        bar[0] += 1
        bar[3].add(tid)
        gen = bar[1]
        if bar[0] == bar[2]:
            bar[0], bar[1], bar[3] = 0, bar[1] + 1, set()
            return None
        if s.arrive:
            return None
        return ((lambda: bar[1] != gen), ("named", s.bar_id, gen),
                (lambda: f"wait at bar_sync {s.bar_id} (line {s.span.line}; "
                 f"{bar[0]} of {bar[2]} threads arrived)"))
