"""The named-barrier family: bar_sync (an arrive, then a wait) and bar_arrive.

Why here: a named barrier's phase completes when the classes arrived in it hold `count`
threads; its state is one bit mask of arrived classes per id in use (State.named). The
arrivers release what they hold (ownership); the classes that arrived with `bar_sync` may
claim it once the phase completes (named-pool, then named-claim holders, state.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tilesafe.frontend.span import Span
from tilesafe.semantics.temporal.explore import objects as obj
from tilesafe.semantics.temporal.explore import perms, threads
from tilesafe.semantics.temporal.explore.errors import ExploreError
from tilesafe.semantics.temporal.explore.ops.base import Family, Op, line_of
from tilesafe.semantics.temporal.explore.state import (
    RELAXED_CLUSTER_ARRIVE,
    State,
    claimable_by,
    named_claim,
    named_pool,
)
from tilesafe.semantics.temporal.instrs import CtaSync, NamedArrive, NamedWait, Sync

if TYPE_CHECKING:
    from tilesafe.semantics.temporal.explore.machine import Machine
    from tilesafe.semantics.temporal.explore.mut import Mut


@dataclass(frozen=True)
class NamedIds:
    """The named barriers a block uses: their ids (State.named is indexed like `ids`), the
    thread counts used with each, and whether the block also uses `sync` (barrier 0)."""

    ids: tuple[int, ...]
    index: Mapping[int, int]
    counts: tuple[tuple[int, ...], ...]
    uses_sync: bool


def prepare(m: Machine) -> NamedIds:
    code = [ins for ag in m.agents for ins in ag.code]
    # (a cluster's CTA syncs hand holdings over through named-barrier claims too)
    ids = sorted({ins.named for ins in code if isinstance(ins, (NamedArrive, NamedWait,
                                                                CtaSync))})
    counts = tuple(tuple(sorted({ins.ncount for ins in code
                                 if isinstance(ins, NamedArrive) and ins.named == b}))
                   for b in ids)
    return NamedIds(tuple(ids), {b: i for i, b in enumerate(ids)}, counts,
                    any(isinstance(ins, Sync) for ins in code))


def tables(m: Machine) -> NamedIds:
    return m.tables["named"]


def named_text(m: Machine, named: int) -> str:
    """`bar_sync 3`, or what a cluster's view made a named barrier of."""
    cl = m.model.cluster
    return f"bar_sync {named}" if cl is None else cl.named_text(named)


class NamedArriveOp(Op):
    enumerated = True

    def objects(self, a: int, ins: NamedArrive, ev: Any) -> tuple:
        key = obj.named(tables(self.m).index[ins.named])
        if self.m.ownership:  # a completing phase makes what it pooled claimable
            return (), (key,) + tuple(obj.free(x) for x in range(len(self.m.atoms)))
        return (), (key,)

    def gates(self, ins: NamedArrive) -> bool:
        return self.m.ownership and self.m.precise_pools

    def gate(self, state: State, a: int, ins: NamedArrive, ev: Any, reads: frozenset,
             writes: frozenset) -> tuple[bool, frozenset, frozenset]:
        """Always enabled; with `Machine.precise_pools`, the atoms it touches in this
        state: those the class holds a share of (it releases them), those with a pool of
        this barrier (a completing phase hands them over) or one the class may claim (it
        gives its claim up) -- no other class's step adds such a holder while the class
        stands at this arrive (a pool of this barrier is this barrier's object; a claim
        for the class needs a phase it arrived in)."""
        i = tables(self.m).index[ins.named]
        me, pool = self.m.keys.cls[a], named_pool(i)
        out = [obj.named(i)]
        for x, p in enumerate(state.perms):
            if any(k == me or k == pool or claimable_by(k, a) for k, _ in p.holders):
                out.append(obj.free(x))
        return True, reads, frozenset(out)

    def apply(self, s: Mut, a: int, ins: NamedArrive, ev: Any, span: Span | None) -> None:
        """bar.arrive / the arrive of bar.sync: the class's threads count towards the
        current phase of the named barrier; its accesses are published and what it holds
        is released to the barrier (handed to the syncers when the phase completes)."""
        m = self.m
        t = tables(m)
        i = t.index[ins.named]
        mask = s.named[i]
        self.check(s, a, ins, mask, t, span)
        if ins.release:
            threads.release(s, a)
            if m.ownership:
                self.release(s, a, i)
                perms.publish(s, a)
        elif m.ownership:
            # A relaxed cluster_arrive hands nothing over: what the class holds stays
            # with it, marked, so that a peer that needs it is told why (TS309).
            perms.strand(s, a, RELAXED_CLUSTER_ARRIVE, -1)
        mask |= 1 << a
        arrived = sum(m.agents[c].cls.size for c in range(m.n) if (mask >> c) & 1)
        if arrived > ins.ncount:
            raise ExploreError("TS412", f"{arrived} threads arrive at {named_text(m, ins.named)} "
                               f"in one phase but its count is {ins.ncount}", span)
        if arrived + self.exited(s, ins, mask) == ins.ncount:
            mask = self.finish(s, i, mask, a if ins.syncs else -1)
        s.named[i] = mask

    def exited(self, s: Mut, ins: NamedArrive, mask: int) -> int:
        """Threads of classes that finished without arriving, which a barrier counting
        only the live threads (the cluster barrier) treats as arrived."""
        if not ins.exits_count:
            return 0
        m = self.m
        return sum(m.agents[c].cls.size for c in range(m.n)
                   if not (mask >> c) & 1 and s.agents[c][0] == m.last_pc[c])

    def finish(self, s: Mut, i: int, mask: int, me: int) -> int:
        """The phase completes (the new mask: empty). Syncers: the classes that arrived
        with bar_sync -- at their wait now, or `me`."""
        m = self.m
        syncers = 1 << me if me >= 0 else 0
        for c in range(m.n):
            if c != me and (mask >> c) & 1 and \
                    isinstance(m.agents[c].code[s.agents[c][0]], NamedWait):
                syncers |= 1 << c
        self.complete(s, i, syncers)
        return 0

    def check(self, s: Mut, a: int, ins: NamedArrive, mask: int, t: NamedIds,
              span: Span | None) -> None:
        """Counts of whole warps, one count and one synchronisation per id."""
        m = self.m
        name = m.agents[a].cls.name
        if m.model.cluster is not None and ins.named >= m.model.cluster_ids:
            # A CTA's `sync` or the cluster barrier of a cluster's view: counts are exact
            # by construction; only arriving twice in one phase can go wrong.
            if (mask >> a) & 1:
                raise ExploreError("TS412", f"{name} arrives at {named_text(m, ins.named)} "
                                   "twice in one phase", span)
            return
        what = "bar_sync" if ins.syncs else "bar_arrive"
        if ins.ncount % 32 or ins.ncount > m.k.block:
            raise ExploreError("TS414", f"{what} {ins.named}, {ins.ncount}: the thread count "
                               f"must be a multiple of 32 (whole warps) and at most the "
                               f"block's {m.k.block}", span)
        i = t.index[ins.named]
        if len(t.counts[i]) > 1:
            raise ExploreError("TS413", f"barrier id {ins.named} is used with thread counts "
                               f"{', '.join(map(str, t.counts[i]))}: two synchronisations "
                               "share one id (their arrivals mix into one phase)", span)
        if ins.named == 0 and t.uses_sync and ins.ncount != m.k.block:
            raise ExploreError("TS413", f"{what} 0, {ins.ncount}: barrier 0 is the "
                               "block-wide barrier `sync` uses (bar.sync 0 for every "
                               "thread); give this synchronisation an id of its own", span)
        for b in range(m.n):
            if b == a or (mask >> b) & 1:
                continue
            bins = m.agents[b].code[s.agents[b][0]]
            if isinstance(bins, NamedArrive) and bins.named == ins.named:
                both = sum(m.agents[c].cls.size for c in range(m.n)
                           if (mask >> c) & 1 or c in (a, b))
                if both > ins.ncount:
                    raise ExploreError(
                        "TS413", f"{name} and {m.agents[b].cls.name} arrive at barrier id "
                        f"{ins.named} (count {ins.ncount}) at the same time, {both} threads "
                        "for one phase: the hardware mixes their warps into one phase -- two "
                        "synchronisations share one id", span)
        if (mask >> a) & 1:
            raise ExploreError("TS412", f"{name} arrives at named barrier {ins.named} twice in "
                               f"one phase (count {ins.ncount}): the barrier completes without "
                               "the threads it was meant to wait for", span)

    def release(self, s: Mut, a: int, i: int) -> None:
        """The class gives what it holds to the barrier's phase. It also gives up its claim
        on what a completed phase it waited for left unclaimed: the other classes of that
        phase keep theirs; once none is left it is released here (whoever gets it is
        ordered after this arrive, ordered after that phase's arrivals)."""
        me = self.m.keys.cls[a]
        for x in range(len(self.m.atoms)):
            h = perms.holders(s, x)
            mine = h.pop(me, 0)
            pools = [k for k in h if claimable_by(k, a)]
            for k in pools:
                v = h.pop(k)
                _, index, mask = k
                rest = mask & ~(1 << a)
                if rest:
                    k2 = named_claim(index, rest)
                    h[k2] = h.get(k2, 0) + v
                else:
                    mine += v
            if mine:
                key = named_pool(i)
                h[key] = h.get(key, 0) + mine
            if mine or pools:
                perms.set_holders(s, x, h)

    def complete(self, s: Mut, i: int, syncers: int) -> None:
        """A phase completes: what its arrivers released becomes claimable (like free
        memory) by the classes that arrived in it with `bar_sync` -- each is ordered after
        every arrival of the phase once it passes its wait. Without such a class it stays
        with the barrier (no thread is ordered after the arrivers)."""
        m = self.m
        if not m.ownership or not syncers:
            return
        key = named_claim(i, syncers)
        for x in range(len(m.atoms)):
            h = perms.holders(s, x)
            pool = h.pop(named_pool(i), 0)
            if not pool:
                continue
            h[key] = h.get(key, 0) + pool
            perms.set_holders(s, x, h)


class NamedWaitOp(Op):
    enumerated = True

    def gates(self, ins: NamedWait) -> bool:
        return True

    def objects(self, a: int, ins: NamedWait, ev: Any) -> tuple:
        key = obj.named(tables(self.m).index[ins.named])
        if not ins.exits_count:
            return (key,), ()
        # The cluster barrier's wait may complete the phase itself (every class that has
        # not arrived finished), with what completing a phase writes.
        free = tuple(obj.free(x) for x in range(len(self.m.atoms))) if self.m.ownership else ()
        return (key,), (key,) + free

    def gate(self, state: State, a: int, ins: NamedWait, ev: Any, reads: frozenset,
             writes: frozenset) -> tuple[bool, frozenset, frozenset]:
        mask = state.named[tables(self.m).index[ins.named]]
        return not (mask >> a) & 1 or self.rest_exited(state, ins, mask), reads, writes

    def rest_exited(self, state: State, ins: NamedWait, mask: int) -> bool:
        """The cluster barrier: every class that has not arrived has finished, so the
        phase completes (PTX waits for the threads that have not exited)."""
        m = self.m
        return ins.exits_count and all((mask >> c) & 1 or state.agents[c][0] == m.last_pc[c]
                                       for c in range(m.n))

    def apply(self, s: Mut, a: int, ins: NamedWait, ev: Any, span: Span | None) -> None:
        """The phase the class arrived in has completed: every thread of the class (and
        of every class that arrived) arrived before any passes, so its threads are
        ordered."""
        i = tables(self.m).index[ins.named]
        if (s.named[i] >> a) & 1:  # completed by the classes that exited meanwhile
            arrive = self.m.hooks.ops[NamedArrive]
            s.named[i] = arrive.finish(s, i, s.named[i], a)
        if self.m.ownership:
            threads.ordered_all(s, a)

    def blocked(self, state: State, a: int, ins: NamedWait,
                phases: Mapping[int, int] | None) -> str | None:
        return f"waits at {named_text(self.m, ins.named)} (line {line_of(ins)})"


def stuck(m: Machine, state: State, live: list[int]) -> tuple[str, str] | None:
    """Every class still running waits at a named barrier (or at `sync`): TS421."""
    at = [m.instr(state, a) for a in live]
    if not (any(isinstance(ins, NamedWait) for ins in at)
            and all(isinstance(ins, (NamedWait, Sync)) for ins in at)):
        return None
    t = tables(m)
    lines = []
    for a, ins in zip(live, at, strict=True):
        if isinstance(ins, NamedWait):
            i = t.index[ins.named]
            got = sum(m.agents[c].cls.size for c in range(m.n) if (state.named[i] >> c) & 1)
            lines.append(f"{m.agents[a].cls.name} waits at {named_text(m, ins.named)} "
                         f"({got} of {ins.ncount} threads arrived)")
    done = [m.agents[a].cls.describe() for a in range(m.n) if a not in live]
    return "TS421", ("named barrier never completes: " + "; ".join(lines) +
                     ("; " + ", ".join(done) + " finished" if done else ""))


FAMILY = Family("named", {NamedArrive: NamedArriveOp, NamedWait: NamedWaitOp},
                prepare=prepare, stuck=stuck)
