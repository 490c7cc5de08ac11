"""The bulk-copy family: tma_load, tma_store, commit, wait_group, and the copy engine.

Why here: a TMA copy is issued by a class and finished by the copy engine at any later
step; this module holds both halves (the issue as an Op, the completion as an InFlight),
the bulk groups that order a class after its stores, what a block may leave running at
exit (TS307, TS430), and how copies react to phases of the barriers they signal. What a
copy does to permissions (ownership) is perms.py's.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from tilesafe.frontend.span import Span
from tilesafe.semantics.temporal.events import TraceStep, slice_mask
from tilesafe.semantics.temporal.explore import objects as obj
from tilesafe.semantics.temporal.explore import perms
from tilesafe.semantics.temporal.explore.errors import ExploreError
from tilesafe.semantics.temporal.explore.notes import IssuedNote
from tilesafe.semantics.temporal.explore.operands import CopyOperands, Err
from tilesafe.semantics.temporal.explore.ops import cluster
from tilesafe.semantics.temporal.explore.ops.base import Family, InFlight, Op, Scan, line_of
from tilesafe.semantics.temporal.explore.ops.mbarrier import bar_op, completing, instance
from tilesafe.semantics.temporal.explore.state import (
    LOAD_IN_PHASE,
    LOAD_UNOBSERVED,
    LoadCopy,
    State,
    StoreCopy,
    load_copy,
    store_copy,
)
from tilesafe.semantics.temporal.instrs import Commit, Instr, TmaLoad, TmaStore, WaitGroup

if TYPE_CHECKING:
    from tilesafe.semantics.temporal.explore.machine import Machine
    from tilesafe.semantics.temporal.explore.mut import Mut


class _Copy(Op):
    """What the two TMA copies share: a slice of a shared buffer."""

    enumerated = True

    def slice_atoms(self, ins: TmaLoad | TmaStore, env: Mapping[str, Any]) -> tuple[int, ...]:
        m = self.m
        prefix = tuple(int(f(env)) for f in ins.prefix)
        mask = slice_mask(m.k.buffer(ins.buffer), prefix)
        if mask == 0:
            raise ExploreError("TS409", f"TMA slice {ins.buffer}{list(prefix)} is outside the "
                               "buffer", ins.stmt.span)
        return m.atoms.of(ins.buffer, mask) if m.ownership else ()

    def scans(self, ins: Instr) -> bool:
        return self.m.ownership

    def scan(self, a: int, ins: TmaLoad | TmaStore, env: Mapping[str, Any],
             found: Scan) -> None:
        prefix = tuple(int(f(env)) for f in ins.prefix)
        mask = slice_mask(self.m.k.buffer(ins.buffer), prefix)
        if mask:
            found.regions[ins.buffer].add(mask)


class TmaLoadOp(_Copy):
    def evaluate(self, a: int, ins: TmaLoad, env: Mapping[str, Any]) -> CopyOperands:
        inst = instance(self.m, ins, env)
        return CopyOperands(inst, self.slice_atoms(ins, env))

    def objects(self, a: int, ins: TmaLoad, ev: CopyOperands) -> tuple:
        if not self.m.ownership:
            return (obj.phase(ev.inst),), ()
        return (obj.phase(ev.inst),), ((obj.pool(ev.inst),)
                                       + tuple(obj.free(x) for x in ev.atoms)
                                       + tuple(obj.unfenced(x) for x in ev.atoms))

    def future(self, a: int, ins: TmaLoad, ev: CopyOperands) -> tuple:
        reads, writes = self.objects(a, ins, ev)
        landing = self.m.copy_objects(load_copy(ev.inst, ins.nbytes, True, ev.atoms))
        return reads, tuple(writes) + tuple(landing)

    def apply(self, s: Mut, a: int, ins: TmaLoad, ev: CopyOperands, span: Span | None) -> None:
        m = self.m
        inst = ev.inst
        st, init_by, fenced, _ = s.bars[inst]
        label = m.labels[inst]
        ct = cluster.tables(m)
        if ct is not None:  # a multicast's load into another CTA (ops/cluster.py)
            cluster.check_peers(s, a, (ct.inst_cta[inst],), f"loads (TMA) into the shared "
                                f"memory signalling {label}", span)
        if not st.initialized:
            raise ExploreError("TS401", f"tma_load signals {label} before init", span)
        if not fenced:
            raise ExploreError("TS405", f"tma_load signals {label}, whose init by "
                               f"{m.agents[init_by].cls.name} was not followed by 'fence "
                               "mbarrier_init' (the copy engine may not see the init)", span)
        for _ in range(ins.count):
            if m.ownership:
                perms.load_takes(s, a, inst, ev.atoms, span)
            s.copies.append(load_copy(inst, ins.nbytes, True, ev.atoms))
            s.lflags[inst] |= LOAD_IN_PHASE
            s.note(IssuedNote, "L", inst)

    def detail(self, a: int, ins: TmaLoad, ev: Any, completes: int, observes: int,
               observed: bool) -> tuple[str, str]:
        if isinstance(ev, Err):
            return ins.op, ""
        label = self.m.labels[ev.inst]
        return (f"tma_load {ins.buffer} signal {label} ({ins.nbytes} bytes)"
                + completing(completes), label)


class TmaStoreOp(_Copy):
    trace_own_reads_only = True  # what the copy engine reads

    def evaluate(self, a: int, ins: TmaStore, env: Mapping[str, Any]) -> CopyOperands:
        return CopyOperands(-1, self.slice_atoms(ins, env))

    def objects(self, a: int, ins: TmaStore, ev: CopyOperands) -> tuple:
        if not self.m.ownership:
            return (), (obj.groups(a),)
        return (tuple(obj.unfenced(x) for x in ev.atoms),
                (obj.groups(a),) + tuple(obj.free(x) for x in ev.atoms))

    def static_writes(self, a: int, ins: Instr) -> Any:
        return (obj.groups(a),)

    def apply(self, s: Mut, a: int, ins: TmaStore, ev: CopyOperands,
              span: Span | None) -> None:
        m = self.m
        for _ in range(ins.count):
            share = perms.store_reads(s, a, ev.atoms, span) if m.ownership else 0
            s.copies.append(store_copy(a, 0, ev.atoms, share))
            if 0 not in s.sages[a]:
                s.sages[a] = tuple(sorted(s.sages[a] + (0,)))
            s.note(IssuedNote, "S", a)

    def detail(self, a: int, ins: TmaStore, ev: Any, completes: int, observes: int,
               observed: bool) -> tuple[str, str]:
        return f"tma_store from {ins.buffer}", ""

    def touched(self, ins: Instr, ev: Any) -> tuple[tuple[int, ...], tuple[int, ...]]:
        return ev.atoms, ()


class CommitOp(Op):
    def static_writes(self, a: int, ins: Instr) -> Any:
        return (obj.groups(a),)

    def step_objects(self, a: int, pc: int, ins: Instr, ev: Any) -> tuple:
        return (), tuple(self.m.static_w[a][pc])

    def apply(self, s: Mut, a: int, ins: Commit, ev: Any, span: Span | None) -> None:
        s.sages[a] = tuple(age + 1 for age in s.sages[a])
        s.copies = [store_copy(a, c.age + 1, c.atoms, c.share)
                    if isinstance(c, StoreCopy) and c.cls == a else c for c in s.copies]
        if self.m.ownership:
            perms.groups_committed(s, a)


class WaitGroupOp(Op):
    def gates(self, ins: Instr) -> bool:
        return True

    def static_writes(self, a: int, ins: Instr) -> Any:
        return (obj.groups(a),)

    def step_objects(self, a: int, pc: int, ins: Instr, ev: Any) -> tuple:
        return (obj.groups(a),), ()

    def gate(self, state: State, a: int, ins: WaitGroup, ev: Any, reads: frozenset,
             writes: frozenset) -> tuple[bool, frozenset, frozenset]:
        ok = not any(isinstance(c, StoreCopy) and c.cls == a and c.age > ins.pending
                     for c in state.copies)
        return ok, reads, writes

    def apply(self, s: Mut, a: int, ins: WaitGroup, ev: Any, span: Span | None) -> None:
        s.sages[a] = tuple(age for age in s.sages[a] if age <= ins.pending)
        if self.m.ownership:
            perms.groups_waited(s, a, ins.pending)

    def detail(self, a: int, ins: WaitGroup, ev: Any, completes: int, observes: int,
               observed: bool) -> tuple[str, str]:
        return f"wait_group {ins.pending}", ""

    def blocked(self, state: State, a: int, ins: WaitGroup,
                phases: Mapping[int, int] | None) -> str | None:
        return f"waits at wait_group {ins.pending} (line {line_of(ins)})"


# ---- the copy engine --------------------------------------------------------------------------


class LoadLands(InFlight):
    def objects(self, c: LoadCopy) -> frozenset:
        m = self.m
        keys = [obj.phase(c.inst)]
        if m.ownership:
            keys += [obj.pool(c.inst)] + [obj.earmark(c.inst, w) for w in m.waiters[c.inst]]
            keys += [obj.unfenced(x) for x in c.atoms]
        return frozenset(keys)

    def complete(self, s: Mut, c: LoadCopy) -> None:
        cluster.landing(s, c.inst, c.atoms)
        if self.m.ownership:
            perms.load_lands(s, c.inst, c.atoms)
        bar_op(s, c.inst, lambda b: b.complete_tx(c.nbytes), None, "complete_tx", (c.nbytes,))

    def issue_key(self, c: LoadCopy) -> tuple:
        return ("L", c.inst)

    def trace_step(self, index: int, c: LoadCopy, completes: int, cid: int) -> TraceStep:
        m = self.m
        label = m.labels[c.inst]
        done = f", completing phase {completes}" if completes >= 0 else ""
        return TraceStep(index, ("copy engine",), "copy_load", 0,
                         f"TMA load lands: complete_tx {c.nbytes} bytes on {label}{done}",
                         label, completes, -1, cid,
                         writes=tuple(m.atoms.label(x) for x in c.atoms))


class StoreFinishes(InFlight):
    def objects(self, c: StoreCopy) -> frozenset:
        return frozenset([obj.groups(c.cls)])

    def complete(self, s: Mut, c: StoreCopy) -> None:
        if self.m.ownership:
            perms.store_done(s, c)

    def issue_key(self, c: StoreCopy) -> tuple:
        return ("S", c.cls)

    def trace_step(self, index: int, c: StoreCopy, completes: int, cid: int) -> TraceStep:
        return TraceStep(index, ("copy engine",), "copy_store", 0,
                         f"TMA store of {self.m.agents[c.cls].cls.name} finishes", "", -1, -1,
                         cid)


# ---- reactions and exit -----------------------------------------------------------------------


def on_phase(s: Mut, inst: int, span: Span | None) -> None:
    """A phase completed: a load issued in it now lands in no phase a wait observes yet;
    a load still in flight that signals it was counted in a phase it did not finish
    (expect_tx too small: TS407, soft)."""
    if s.lflags[inst] & LOAD_IN_PHASE:
        s.lflags[inst] = (s.lflags[inst] & ~LOAD_IN_PHASE) | LOAD_UNOBSERVED
    fresh = False
    for i, c in enumerate(s.copies):
        if isinstance(c, LoadCopy) and c.inst == inst and c.fresh:
            fresh = True
            s.copies[i] = load_copy(c.inst, c.nbytes, False, c.atoms)
    if fresh:
        s.flag(ExploreError("TS407", f"a phase of {s.m.labels[inst]} completed while a copy "
                            "that signals it is still in flight: expect_tx counts fewer bytes "
                            "than the copies deliver", span, soft=True))


def on_wait(s: Mut, a: int, inst: int, cluster_scope: bool = False) -> None:
    s.lflags[inst] &= ~LOAD_UNOBSERVED  # this wait is ordered after every landed load


def at_exit(m: Machine, state: State) -> tuple[str, str, Span | None] | None:
    """At a state where every agent has finished: asynchronous work the block may leave
    behind. PTX does not drain the copy engine at exit: a TMA store whose shared-memory
    reads no `wait_group ... read` of its issuer covered (TS307), or a TMA load whose
    landing no wait is ordered after (TS430), may still be running when the block's
    shared memory is handed to the next block -- undefined behaviour. Copies finishing
    early in one interleaving prove nothing: the copy engine may be slower."""
    for a, ages in enumerate(state.sages):
        if ages:
            span = next((ins.stmt.span for ins in reversed(m.agents[a].code)
                         if isinstance(ins, TmaStore) and ins.stmt is not None), None)
            return ("TS307", f"{m.agents[a].cls.name} exits with a TMA store whose "
                    "shared-memory reads no 'wait_group 0 read' (or a covering "
                    "wait_group) waited for: the block may exit while the copy engine "
                    "still reads its shared memory", span)
    for inst, flags in enumerate(state.lflags):
        if flags:
            return ("TS430", f"the block exits with a TMA load signalling "
                    f"{m.labels[inst]} that no wait is ordered after: the copy may "
                    "still be writing shared memory when the block exits (a load "
                    "nobody consumes)", _load_span(m, inst))
    return None


def _load_span(m: Machine, inst: int) -> Span | None:
    name = m.model.instances[inst][0]
    for ag in m.agents:
        for ins in reversed(ag.code):
            if isinstance(ins, TmaLoad) and ins.bar == name and ins.stmt is not None:
                return ins.stmt.span
    return None


FAMILY = Family("bulk", {TmaLoad: TmaLoadOp, TmaStore: TmaStoreOp, Commit: CommitOp,
                         WaitGroup: WaitGroupOp},
                in_flight={"L": LoadLands, "S": StoreFinishes},
                on_phase=on_phase, on_wait=on_wait, at_exit=at_exit)
