"""The cluster family: what the CTAs of a thread-block cluster add to the explorer of their
view as one block (semantics/temporal/cluster_view.py; docs/temporal.md §16).

Why a family of its own: the view makes distributed shared memory, remote arrivals and
multicast loads ordinary accesses, arrivals and loads of the one-block model, and the
cluster barrier and each CTA's `sync` named barriers. What is left is what only clusters
have, and it is decided here:

* **Scopes.** An arrive is a release; a hand-off to a thread of another CTA needs it at
  cluster scope. `release_mode` says what an arrive does with what the class holds: a
  relaxed arrive (any barrier) and an arrive at `.cta` scope on a peer's barrier give it up
  to nobody (perms.strand: whoever needs it next is refuted with TS309, naming the CTA,
  the barrier and the scope); an arrive at cluster scope on a peer's barrier pools it
  apart, and only a wait acquiring at cluster scope takes it (perms.collect remote).
  A relaxed cluster_arrive hands nothing over either (named.py).
* **Lifetimes.** A CTA's shared memory and barriers exist from its start to the exit of
  its last thread. A class touching another CTA's (a DSMEM access, an arrive on its
  barrier, a TMA load into its memory) must have passed a cluster-barrier wait before --
  the only thing that tells it the peer runs and initialised its barriers (TS433) -- and
  the peer must not have exited (TS432: every class of it finished); a load landing in an
  exited CTA is TS432 too.
* **Partial-order reduction.** A step that may end its class writes the object
  `alive(cta)` (a class's future always does: it may still end), and every step touching
  another CTA's memory or barriers reads the other's, so an access and the peer's exit
  are never taken as independent; such a step is never fused into its class's previous
  one.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tilesafe.frontend.span import Span
from tilesafe.semantics.temporal.cluster_view import CLUSTER_BARRIER
from tilesafe.semantics.temporal.explore import objects as obj
from tilesafe.semantics.temporal.explore import perms, threads
from tilesafe.semantics.temporal.explore.errors import ExploreError
from tilesafe.semantics.temporal.explore.notes import ConvergeNote
from tilesafe.semantics.temporal.explore.ops.base import Family, Op, line_of
from tilesafe.semantics.temporal.explore.state import (
    CTA_SCOPE_ARRIVE,
    NO_WINDOW,
    RELAXED_ARRIVE,
    State,
)
from tilesafe.semantics.temporal.instrs import (
    Arrive,
    ClusterSync,
    CtaSync,
    NamedArrive,
    NamedWait,
)

if TYPE_CHECKING:
    from tilesafe.semantics.temporal.explore.machine import Machine
    from tilesafe.semantics.temporal.explore.mut import Mut

# What an arrive does with what the class holds (release_mode).
NO_DEPOSIT, DEPOSIT, DEPOSIT_REMOTE = 0, 1, 2


@dataclass(frozen=True)
class ClusterTables:
    """Which CTA each class, barrier instance and atom belongs to; per class and pc,
    whether the class passed a cluster-barrier wait before it (`met`)."""

    class_cta: tuple[int, ...]
    inst_cta: tuple[int, ...]
    atom_cta: tuple[int, ...]
    members: tuple[tuple[int, ...], ...]  # per CTA: its classes
    met: tuple[tuple[bool, ...], ...]


def prepare(m: Machine) -> ClusterTables | None:
    cl = m.model.cluster
    if cl is None:
        return None
    class_cta = tuple(m.model.cta_of_class(a) for a in range(m.n))
    inst_cta = tuple(m.model.cta_of_inst(i) for i in range(m.ninst))
    atom_cta = []
    for x in range(len(m.atoms)):
        size = m.k.buffer(m.atoms.buf[x]).size
        low = (m.atoms.mask[x] & -m.atoms.mask[x]).bit_length() - 1
        atom_cta.append(cl.cta_of_atom_elements(size, low))
    members = tuple(tuple(a for a in range(m.n) if class_cta[a] == r) for r in range(cl.ctas))
    met = []
    for ag in m.agents:
        seen, row = False, []
        for ins in ag.code:
            row.append(seen)
            # A wait at the top level of the program (no loop around it) is passed on
            # every run before what follows it.
            if not ins.ctx and (isinstance(ins, ClusterSync) or isinstance(ins, NamedWait)
                                and ins.named == CLUSTER_BARRIER):
                seen = True
        met.append(tuple(row))
    return ClusterTables(class_cta, inst_cta, tuple(atom_cta), members, tuple(met))


def tables(m: Machine) -> ClusterTables | None:
    return m.tables.get("cluster")


# ---- scopes -------------------------------------------------------------------------------------


def release_mode(m: Machine, a: int, ins: Arrive, inst: int) -> int | tuple[int, int]:
    """DEPOSIT (into the phase), DEPOSIT_REMOTE (pooled apart: a release at cluster scope
    to another CTA), or ("strand", why): a release nobody can acquire."""
    if not ins.release:
        return ("strand", RELAXED_ARRIVE)
    t = tables(m)
    if t is None or t.inst_cta[inst] == t.class_cta[a]:
        return DEPOSIT
    return DEPOSIT_REMOTE if ins.cluster else ("strand", CTA_SCOPE_ARRIVE)


# ---- lifetimes ----------------------------------------------------------------------------------


def check_peers(s: Mut, a: int, ctas: Any, what: str, span: Span | None) -> None:
    """Class `a` touches the memory or barriers of the CTAs `ctas`: every other one must be
    known to run (TS433) and not have exited (TS432)."""
    m = s.m
    t = tables(m)
    if t is None:
        return
    own = t.class_cta[a]
    name = m.agents[a].cls.name
    for c in sorted(set(ctas)):
        if c == own:
            continue
        if not t.met[a][s.agents[a][0]]:
            raise ExploreError("TS433", f"{name} {what} of cta {c} before it passed a "
                               f"cluster barrier: cta {c} may not have started, its barriers "
                               "may not be initialised (a `cluster_sync` after the inits, "
                               "before any CTA touches another)", span)
        if all(s.agents[b][0] == m.last_pc[b] for b in t.members[c]):
            raise ExploreError("TS432", f"{name} {what} of cta {c} after every thread of cta "
                               f"{c} finished: its shared memory and barriers are gone (a "
                               "cluster barrier before exit keeps each CTA until its peers "
                               "are done with it)", span)


def landing(s: Mut, inst: int, atoms: tuple[int, ...]) -> None:
    """A TMA load lands in CTA r's memory: r must not have exited."""
    m = s.m
    t = tables(m)
    if t is None:
        return
    c = t.inst_cta[inst]
    if all(s.agents[b][0] == m.last_pc[b] for b in t.members[c]):
        where = ", ".join(sorted({m.atoms.label(x) for x in atoms})) or m.labels[inst]
        raise ExploreError("TS432", f"a TMA load lands in {where} of cta {c} (signalling "
                           f"{m.labels[inst]}) after every thread of cta {c} finished: its "
                           "shared memory is gone", None)


# ---- partial-order reduction --------------------------------------------------------------------


def _cta_of_key(t: ClusterTables, key: tuple) -> int | None:
    tag = key[0]
    if tag in ("b", "bp", "be"):
        return t.inst_cta[key[1]]
    if tag in ("F", "u"):
        return t.atom_cta[key[1]]
    return None


def foreign(m: Machine, a: int, keys: Any) -> frozenset:
    """The `alive` objects of the other CTAs whose memory or barriers these keys name."""
    t = tables(m)
    if t is None:
        return frozenset()
    own = t.class_cta[a]
    out = set()
    for k in keys:
        c = _cta_of_key(t, k)
        if c is not None and c != own:
            out.add(obj.alive(c))
    return frozenset(out)


def step_objects(m: Machine, a: int, pc: int, ctrs: tuple[int, ...], reads: frozenset,
                 writes: frozenset, joint: bool) -> tuple[frozenset, frozenset, bool]:
    """A step's objects with the cluster's added: (reads, writes, touches another CTA).
    Only a step that may be its class's last writes `alive` (one that leaves the class at
    its end, or before steps that may be fused into it, or a joint step): writing it on
    every step would make all steps of a CTA conflict."""
    t = tables(m)
    if t is None:
        return reads, writes, False
    other = foreign(m, a, reads | writes)
    if joint or may_end(m, a, pc, ctrs):
        writes = writes | {obj.alive(t.class_cta[a])}
    return reads | other, writes, bool(other)


# Instructions a move may be followed by in the same move (Op.fusable: Mut.fuse_local).
_FUSABLE_LIMIT = 256


def may_end(m: Machine, a: int, pc: int, ctrs: tuple[int, ...]) -> bool:
    """Can the class be at its end after this step (and the local steps fused into it)?"""
    if pc >= m.last_pc[a]:
        return False
    p, c = m.settle(a, pc + 1, ctrs)
    for _ in range(_FUSABLE_LIMIT):
        if p == m.last_pc[a]:
            return True
        op = m.hooks.ops.get(type(m.agents[a].code[p]))
        if op is None or not op.fusable:
            return False
        p, c = m.settle(a, p + 1, c)
    return True


def copy_objects(m: Machine, keys: frozenset) -> frozenset:
    """A copy's completion meets the steps of the CTA it lands in (its exit)."""
    t = tables(m)
    if t is None:
        return keys
    ctas = {_cta_of_key(t, k) for k in keys} - {None}
    return keys | {obj.alive(c) for c in ctas}


# ---- the CTA's `sync` and the cluster barrier as joint steps -------------------------------------


class CtaSyncOp(Op):
    """A CTA's `sync`: one step of all of the CTA's classes, taken by its first class once
    every one is at a `sync`. What they hold is handed over to the CTA's classes (a
    completed named-barrier phase they may claim, named.py) -- not to other CTAs, which are
    not ordered after it -- and every thread of the CTA is ordered after every access."""

    def gates(self, ins: CtaSync) -> bool:
        return True

    def joint(self, ins: CtaSync) -> bool:
        return True

    def converges(self, ins: CtaSync) -> tuple[int, ...]:
        return ins.group

    def objects(self, a: int, ins: CtaSync, ev: Any) -> tuple:
        """The CTA's named key and its own atoms. Not the atoms of other CTAs its classes
        hold: the step hands those to its own classes (named claims), which are all at it;
        a class of another CTA can claim no more of them before than after it (a write
        needs the whole atom, held by the CTA either way; a read takes a fixed share of the
        free part, which the step does not change)."""
        m = self.m
        key = obj.named(m.tables["named"].index[ins.named])
        if not m.ownership:
            return (), (key,)
        own = [x for x, c in enumerate(tables(m).atom_cta) if c == ins.cta]
        return (), (key,) + tuple(obj.free(x) for x in own) + tuple(
            obj.unfenced(x) for x in own)

    def gate(self, state: State, a: int, ins: CtaSync, ev: Any, reads: frozenset,
             writes: frozenset) -> tuple[bool, frozenset, frozenset]:
        m = self.m
        ok = a == ins.group[0] and all(
            isinstance(m.agents[g].code[state.agents[g][0]], CtaSync) for g in ins.group)
        return ok, reads, writes

    def apply(self, s: Mut, a: int, ins: CtaSync, ev: Any, span: Span | None) -> None:
        m = self.m
        i = m.tables["named"].index[ins.named]
        named_arrive = m.hooks.ops[NamedArrive]
        for g in ins.group:
            threads.release(s, g)
            if m.ownership:
                named_arrive.release(s, g, i)
                perms.publish(s, g)
        mask = 0
        for g in ins.group:
            mask |= 1 << g
        named_arrive.complete(s, i, mask)
        for g in ins.group:
            if m.ownership:
                threads.ordered_all(s, g)
            s.advance(g)
        s.note(ConvergeNote, ins.group)

    def detail(self, a: int, ins: CtaSync, ev: Any, completes: int, observes: int,
               observed: bool) -> tuple[str, str]:
        return f"sync of cta {ins.cta} (every class of it together)", ""

    def blocked(self, state: State, a: int, ins: CtaSync,
                phases: Mapping[int, int] | None) -> str | None:
        return f"waits at sync of cta {ins.cta} (line {line_of(ins)})"


class ClusterSyncOp(Op):
    """`cluster_sync` (no arrive or wait of the kernel split apart): one step of every
    class that has not finished, once each is at a `cluster_sync` -- PTX's cluster barrier
    waits for the threads that have not exited. It releases and acquires at cluster scope:
    what every class holds becomes free, as at the block's `sync`."""

    def gates(self, ins: ClusterSync) -> bool:
        return True

    def joint(self, ins: ClusterSync) -> bool:
        return True

    def converges(self, ins: ClusterSync) -> tuple[int, ...]:
        return tuple(range(self.m.n))

    def objects(self, a: int, ins: ClusterSync, ev: Any) -> tuple:
        return (), (obj.BLOCK,)

    def live(self, state: State) -> list[int]:
        m = self.m
        return [g for g in range(m.n) if state.agents[g][0] != m.last_pc[g]]

    def gate(self, state: State, a: int, ins: ClusterSync, ev: Any, reads: frozenset,
             writes: frozenset) -> tuple[bool, frozenset, frozenset]:
        m = self.m
        live = self.live(state)
        ok = a == live[0] and all(
            isinstance(m.agents[g].code[state.agents[g][0]], ClusterSync) for g in live)
        return ok, reads, writes

    def apply(self, s: Mut, a: int, ins: ClusterSync, ev: Any, span: Span | None) -> None:
        m = self.m
        live = [g for g in range(m.n) if s.agents[g][0] != m.last_pc[g]]
        if m.ownership:
            s.wins = [NO_WINDOW] * m.n  # every thread is ordered after every access
            perms.everything_free(s)
        for g in live:
            s.advance(g)
        s.note(ConvergeNote, tuple(live))

    def detail(self, a: int, ins: ClusterSync, ev: Any, completes: int, observes: int,
               observed: bool) -> tuple[str, str]:
        return "cluster_sync (every class of the cluster together)", ""

    def blocked(self, state: State, a: int, ins: ClusterSync,
                phases: Mapping[int, int] | None) -> str | None:
        return f"waits at cluster_sync (line {line_of(ins)})"


def stuck(m: Machine, state: State, live: list[int]) -> tuple[str, str] | None:
    """Every class still running waits at a CTA's `sync` or at `cluster_sync`: some class
    it needs finished or waits elsewhere (TS420)."""
    at = [m.instr(state, a) for a in live]
    if not at or not all(isinstance(ins, (CtaSync, ClusterSync)) for ins in at):
        return None
    done = [m.agents[a].cls.describe() for a in range(m.n) if a not in live]
    where = sorted({f"sync of cta {ins.cta}" if isinstance(ins, CtaSync) else "cluster_sync"
                    for ins in at})
    return "TS420", (f"every blocked thread waits at {', '.join(where)}, but "
                     + (", ".join(done) + " finished" if done else "not all arrive"))


FAMILY = Family("cluster", {CtaSync: CtaSyncOp, ClusterSync: ClusterSyncOp}, prepare=prepare,
                stuck=stuck)
