"""Synchronisation statements of the scalar engine compiled to closures: mbarrier init,
arrive (each thread, one, one per warp with its convergence), expect_tx and waits; `sync`
and named barriers; fences. Each returns (kind, stmt, fn) as interp_agents.py says; a
blocking fn returns a Blocker whose `ready()` the scheduler re-evaluates.

Why separate: these are the statements whose effects are the block's barrier state
(phases, pending counts, tx bytes, named-barrier phases, `init` fences) and whose errors
are protocol errors (TS4xx); nothing else writes that state but the copy engine's
completion (interp.py) and reads it but the TMA load's checks (interp_copies.py, which
shares `bar_index`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from tilesafe.frontend import ir
from tilesafe.semantics.hw.mbarrier import MbarrierError
from tilesafe.semantics.interpreter import interp_error as E
from tilesafe.semantics.interpreter.interp_agents import COMPOUND, EFFECT, Blocker, Thread

if TYPE_CHECKING:
    from tilesafe.semantics.interpreter.interp import _Block


class SyncCompiler:
    """`s_<Stmt>` for Init, Fence, Sync, NamedBar, Wait, Arrive, ExpectTx."""

    def __init__(self, blk: _Block, expr: Callable[[ir.Expr], Callable[[Any], Any]]) -> None:
        self.b = blk
        self.k = blk.kernel
        self.expr = expr

    def bar_index(self, ref: ir.BarrierRef) -> Callable[[Any], int]:
        n = self.k.barrier(ref.name).instances
        if ref.index is None:
            return lambda t: 0
        f, blk, name, span = self.expr(ref.index), self.b, ref.name, ref.span

        def index(t: Thread) -> int:
            i = f(t)
            if 0 <= i < n:
                return i
            raise blk.err(E.SHARED_OOB, f"barrier index {name}[{i}] is outside 0..{n - 1}",
                          span, t, barrier=name, index=i)

        return index

    def s_Init(self, s: ir.Init, role):
        blk, name = self.b, s.barrier.name
        bar = self.k.barrier(name)
        whole = s.barrier.index is None
        index = self.bar_index(s.barrier)

        def init(t: Thread) -> None:
            for i in (range(bar.instances) if whole else (index(t),)):
                st = blk.bars[name][i]
                if st.initialized:
                    raise blk.err(E.REINIT, f"init of mbarrier {blk.label(name, i)}, which is "
                                  f"live (initialised by thread {blk.init_by[name][i]})",
                                  s.span, t, barriers=blk.barrier_states())
                try:
                    blk.bars[name][i] = st.init(bar.count)
                except MbarrierError as exc:
                    raise blk.model_err(exc, blk.label(name, i), s.span, t) from None
                blk.phase[name][i] = 0
                blk.init_by[name][i] = t.tid
                blk.fenced[name][i] = False

        return EFFECT, s, init

    def publish_inits(self, t: Thread) -> None:
        """A release at cluster scope by t (`fence mbarrier_init`, the release of
        `cluster_arrive`) makes its barrier inits visible to the copy engine and to peers."""
        blk = self.b
        for name, owners in blk.init_by.items():
            for i, owner in enumerate(owners):
                if owner == t.tid:
                    blk.fenced[name][i] = True

    def s_Fence(self, s: ir.Fence, role):
        blk = self.b
        if s.kind is ir.FenceKind.MBARRIER_INIT:
            return EFFECT, s, self.publish_inits

        def fence_proxy(t: Thread) -> None:
            tags = blk.tags
            if tags is not None:
                tid = t.tid
                for addr, eb in t.unfenced:
                    if tags[addr] == tid:
                        tags[addr:addr + eb] = -1
            t.unfenced.clear()

        return EFFECT, s, fence_proxy

    def s_Sync(self, s: ir.Sync, role):
        blk, rname = self.b, role.name if role else "block"

        def sync(t: Thread) -> Blocker | None:
            t.unfenced.clear()  # a release: later fences no longer cover earlier writes
            blk.sync_count += 1
            gen = blk.sync_gen
            if blk.sync_count == blk.nthreads:
                blk.sync_count = 0
                blk.sync_gen += 1
                return None
            return Blocker(s, rname, ("sync", gen), lambda: blk.sync_gen != gen,
                            lambda: f"wait at sync (line {s.span.line}; {blk.sync_count} of "
                            f"{blk.nthreads} threads arrived)")

        return EFFECT, s, sync

    def s_NamedBar(self, s: ir.NamedBar, role):
        blk, rname = self.b, role.name if role else "block"
        what = "bar_arrive" if s.arrive else "bar_sync"

        def named(t: Thread) -> Blocker | None:
            t.unfenced.clear()  # a release, as at sync
            if s.count % 32 or s.count > blk.nthreads:
                raise blk.err(E.NAMED_COUNT, f"{what} {s.bar_id}, {s.count}: the thread count "
                              f"must be a multiple of 32 and at most the block's "
                              f"{blk.nthreads}", s.span, t)
            if s.bar_id == 0 and blk.uses_sync and s.count != blk.nthreads:
                raise blk.err(E.NAMED_COLLISION, f"{what} 0, {s.count}: barrier 0 is the "
                              "block-wide barrier `sync` uses (bar.sync 0 for every thread)",
                              s.span, t)
            st = blk.named.setdefault(s.bar_id, [0, 0, s.count, set()])
            if st[0] and st[2] != s.count:
                raise blk.err(E.NAMED_COLLISION, f"{what} {s.bar_id}, {s.count} while a phase "
                              f"of barrier {s.bar_id} with count {st[2]} is in progress "
                              f"({st[0]} threads arrived): two uses share one id",
                              s.span, t)
            if t.tid in st[3]:
                raise blk.err(E.NAMED_MISMATCH, f"thread arrives twice in one phase of "
                              f"barrier {s.bar_id} (count {st[2]}, {st[0]} arrivals): more "
                              "threads arrive than it counts, or an arrive ran a phase "
                              "ahead", s.span, t)
            st[2] = s.count
            st[0] += 1
            st[3].add(t.tid)
            gen = st[1]
            if st[0] == st[2]:
                st[0], st[1], st[3] = 0, st[1] + 1, set()
                return None
            if s.arrive:
                return None
            return Blocker(s, rname, ("named", s.bar_id, gen), lambda: st[1] != gen,
                            lambda: f"wait at bar_sync {s.bar_id} (line {s.span.line}; "
                            f"{st[0]} of {st[2]} threads arrived)")

        return EFFECT, s, named

    def s_Wait(self, s: ir.Wait, role):
        blk, name, rname = self.b, s.barrier.name, role.name if role else "block"
        index, parity = self.bar_index(s.barrier), self.expr(s.parity)

        def wait(t: Thread) -> Blocker | None:
            i, p = index(t), parity(t)
            st = blk.bars[name][i]
            if not st.initialized:
                raise blk.err(E.UNINIT, f"wait on mbarrier {blk.label(name, i)} before init",
                              s.span, t, barriers=blk.barrier_states())
            try:
                if st.test_wait_parity(p):
                    return None
            except MbarrierError as exc:
                raise blk.model_err(exc, blk.label(name, i), s.span, t) from None
            insts = blk.bars[name]
            return Blocker(s, rname, ("wait", name, i, p), lambda: insts[i].parity != p,
                            lambda: f"wait {blk.label(name, i)} parity {p} "
                            f"[{blk.bar_state_text(name, i)}]")

        return EFFECT, s, wait

    def s_ClusterBarrier(self, s: ir.ClusterBarrier, role):
        """`cluster_arrive` counts the thread towards the cluster barrier's current phase
        (a release, unless `relaxed`: it also publishes the thread's barrier inits);
        `cluster_wait` blocks until the phase the thread arrived in completed; passing it
        makes every peer CTA usable (interp_cluster.py)."""
        blk, rname = self.b, role.name if role else "block"
        publish = self.publish_inits

        def arrive(t: Thread) -> None:
            if t.cluster_phase >= 0:
                raise blk.err(E.NAMED_MISMATCH, "cluster_arrive twice without a cluster_wait "
                              "between: the thread would count towards two phases", s.span, t)
            if not s.relaxed:
                t.unfenced.clear()
                publish(t)
            blk.cluster.arrive(t)

        def wait(t: Thread) -> Blocker | None:
            cl = blk.cluster
            if t.cluster_phase < 0:
                raise blk.err(E.NAMED_MISMATCH, "cluster_wait without a cluster_arrive before "
                              "it: there is no phase to wait for", s.span, t)
            if cl.passed(t):
                return None
            ph = t.cluster_phase
            return Blocker(s, rname, ("cluster", ph), lambda: cl.phase > ph,
                           lambda: f"wait at the cluster barrier (line {s.span.line}; "
                           f"{len(cl.arrived)} of {cl.nthreads} threads arrived, "
                           f"{sum(1 for x in cl.threads if x.done)} exited)")

        def cluster_barrier(t: Thread):
            yield s
            if s.arrive:
                arrive(t)
            if s.wait:
                blocker = wait(t)
                if blocker is not None:
                    yield blocker
                t.cluster_phase = -1
                t.met = True

        return COMPOUND, s, cluster_barrier

    def s_Arrive(self, s: ir.Arrive, role):
        blk, name = self.b, s.barrier.name
        index = self.bar_index(s.barrier)
        tx = self.expr(s.tx_bytes) if s.tx_bytes is not None else None
        target = (self.remote_target(s) if s.barrier.cta is not None
                  else lambda t, i: blk)

        def arrive(t: Thread) -> None:
            t.unfenced.clear()
            i = index(t)
            bar = target(t, i)
            if tx is None:
                bar.bar_update(name, i, lambda st: st.arrive(1)[0], s.span, t)
            else:
                n = tx(t)
                bar.bar_update(name, i, lambda st: st.arrive_expect_tx(n)[0], s.span, t)

        return self.arrival(s, role, arrive)

    def remote_target(self, s: ir.Arrive) -> Callable[[Thread, int], Any]:
        """`arrive full@r[s]`: the block of CTA r -- inside the cluster, after the two met,
        before r exited (_Block.peer) -- whose barrier's init r published to the cluster
        (`fence mbarrier_init` or a cluster_arrive's release; TS405 otherwise)."""
        blk, name, rank = self.b, s.barrier.name, self.expr(s.barrier.cta)
        what = f"arrive on mbarrier '{name}'"

        def target(t: Thread, i: int) -> Any:
            peer = blk.peer(rank(t), t, s.span, what)
            if peer is not blk and peer.bars[name][i].initialized and not peer.fenced[name][i]:
                raise blk.err(E.UNFENCED_INIT, f"arrive on mbarrier {peer.label(name, i)} of CTA "
                              f"{peer.rank}, whose init was not published to the cluster "
                              "('fence mbarrier_init' or a cluster_arrive after it)", s.span, t)
            return peer

        return target

    def arrival(self, s: ir.Arrive, role, arrive: Callable[[Thread], None]):
        """Who performs `arrive`: every thread, the role's lowest (`one`), or each warp's
        leader after its lanes converge (`one per warp`)."""
        blk, name = self.b, s.barrier.name
        lo = role.threads.lo if role is not None else 0
        hi = role.threads.hi if role is not None else blk.nthreads
        if role is not None and role.elect_one:
            hi = lo + 1
        mode = s.mode

        if mode is ir.ArriveMode.EACH:
            return EFFECT, s, arrive
        if mode is ir.ArriveMode.ONE:
            def arrive_one(t: Thread):
                if t.tid == lo:
                    yield s
                    arrive(t)

            return COMPOUND, s, arrive_one

        # `one per warp` is elect.sync + arrive: the lanes of each warp (of the role) first
        # converge -- none goes on before all reached the statement -- then the lowest lane
        # arrives. The convergence is what orders the other lanes' earlier accesses before
        # the arrival.
        gates: dict[int, list[int]] = {}  # warp -> [lanes arrived, generation]
        rname = role.name if role is not None else "block"

        def converge(t: Thread) -> Blocker | None:
            t.unfenced.clear()
            w = t.warp
            size = min(hi, 32 * w + 32) - max(lo, 32 * w)
            gate = gates.setdefault(w, [0, 0])
            gate[0] += 1
            gen = gate[1]
            if gate[0] == size:
                gate[0], gate[1] = 0, gen + 1
                return None
            return Blocker(s, rname, ("gate", id(gates), w, gen), lambda: gate[1] != gen,
                            lambda: f"converge at 'arrive {name}, one per warp' (line "
                            f"{s.span.line}; {gate[0]} of {size} lanes of warp {w} there)")

        def arrive_per_warp(t: Thread):
            yield s
            blocker = converge(t)
            if blocker is not None:
                yield blocker
            if t.tid == max(lo, 32 * t.warp):
                yield s
                arrive(t)

        return COMPOUND, s, arrive_per_warp

    def s_ExpectTx(self, s: ir.ExpectTx, role):
        blk, name = self.b, s.barrier.name
        index, nbytes = self.bar_index(s.barrier), self.expr(s.nbytes)

        def expect(t: Thread) -> None:
            i, n = index(t), nbytes(t)
            blk.bar_update(name, i, lambda st: st.expect_tx(n), s.span, t)

        return EFFECT, s, expect
