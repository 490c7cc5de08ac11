"""The tensor-core family: wgmma, wgmma_fence, wgmma_commit, wgmma_wait, and the fragment
register accesses (`acc[r]`, `acc[r] = v`) that the MMAs race with.

Why here: an MMA is issued by a warpgroup and performed asynchronously -- it reads its A
and B tiles from shared memory at some point, and writes the warpgroup's accumulator
registers, until a `wgmma_wait` of the issuing thread covers its group (docs/semantics.md,
"Tensor cores"). Per class the state keeps the groups no wait covered yet (State.mma) and,
under ownership, the read share each group's MMAs hold of their tiles (holder `MMA`, until
the covering wait gives it back to the class, perms.py). Everything else follows from the
existing rules: a stage released before the wait hands the producer a stage an MMA still
reads (its next TMA load is TS303), a thread writing an operand under a pending MMA is
TS302, generic writes read by an MMA without `fence proxy_async` are TS301.

No in-flight item: an MMA always completes (it waits for nothing), so the only thing its
completion decides is when a `wgmma_wait` may pass -- and a run in which every MMA
completes just before the wait that covers it is always possible. The read share is held
from the issue to that wait, which is exactly the interval in which the hardware may read
the tiles; a wait never blocks in the model, and no interleaving is lost.

Codes: TS308 a fragment register read or written while an MMA of the class into the
fragment is not covered by a wgmma_wait (its value is the MMA's or not, whichever comes
first); TS431 the block exits with MMAs no wgmma_wait covered (never committed, or not
waited for); TS534 a wgmma without a `wgmma_fence` since the class last accessed the
fragment's registers (or before its first MMA), as PTX requires.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from tilesafe.frontend.span import Span
from tilesafe.semantics.temporal.explore import objects as obj
from tilesafe.semantics.temporal.explore import perms
from tilesafe.semantics.temporal.explore.errors import ExploreError
from tilesafe.semantics.temporal.explore.notes import ConvergeNote
from tilesafe.semantics.temporal.explore.operands import Err, MmaOperands
from tilesafe.semantics.temporal.explore.ops.base import Family, Op, Scan, line_of
from tilesafe.semantics.temporal.explore.state import DEFINED, MMA, MmaGroup, MmaRec, State, mma_rec
from tilesafe.semantics.temporal.instrs import (
    FragAccess,
    Instr,
    Wgmma,
    WgmmaCommit,
    WgmmaFence,
    WgmmaWait,
)

if TYPE_CHECKING:
    from tilesafe.semantics.temporal.explore.machine import Machine
    from tilesafe.semantics.temporal.explore.mut import Mut

NOT_READY = "TS308"
PENDING_AT_EXIT = "TS431"
NO_FENCE = "TS534"


@dataclass(frozen=True)
class Fragments:
    """The kernel's fragments as bits (State.mma masks), a class's initial record (no
    group, every fragment "touched": a wgmma_fence must come before the first MMA), and per
    class the free shares of every tile its MMAs may read (what its waits may give back)."""

    bit: Mapping[str, int]
    names: tuple[str, ...]
    initial: MmaRec
    tiles: tuple[tuple[tuple, ...], ...]

    def mask(self, names: tuple[str, ...]) -> int:
        out = 0
        for n in names:
            out |= self.bit[n]
        return out

    def text(self, mask: int) -> str:
        return ", ".join(n for n in self.names if mask & self.bit[n])


def prepare(m: Machine) -> Fragments:
    names = tuple(f.name for f in m.k.fragments)
    bit = {n: 1 << i for i, n in enumerate(names)}
    tiles = []
    for a in range(m.n):
        atoms: set[int] = set()
        if m.ownership:
            for ins in m.agents[a].code:
                if isinstance(ins, Wgmma):
                    for ctrs in m.envs(a, ins):
                        ev = m.evaluate_safe(a, ins, m.env(a, ins, ctrs))
                        if ev is not None:
                            atoms.update(ev.atoms)
        tiles.append(tuple(obj.free(x) for x in sorted(atoms)))
    return Fragments(bit, names, mma_rec((), (1 << len(names)) - 1), tuple(tiles))


def tables(m: Machine) -> Fragments:
    return m.tables["wgmma"]


def pending(rec: MmaRec) -> int:
    """The fragments MMAs of the class not covered by a wait still write."""
    out = 0
    for _, frags in rec[0]:
        out |= frags
    return out


# ---- operands -------------------------------------------------------------------------------


def tile_mask(m: Machine, buffer: str, origin: tuple[int, ...], extents: tuple[int, ...]
              ) -> int:
    """Bit mask of a tile's elements (row-major logical order, as events.slice_mask), the
    part inside the buffer (a tile reaching outside is the access checker's TS202)."""
    cache = m.model.__dict__.setdefault("_mma_tiles", {})
    key = (buffer, origin, extents)
    hit = cache.get(key)
    if hit is None:
        buf = m.k.buffer(buffer)
        cells = np.zeros(buf.shape, bool)
        cells[tuple(slice(max(0, o), max(0, min(d, o + e)))
                    for o, e, d in zip(origin, extents, buf.shape, strict=True))] = True
        bits = np.packbits(cells.reshape(-1), bitorder="little")
        hit = cache[key] = int.from_bytes(bits.tobytes(), "little")
    return hit


def regions(m: Machine, a: int, ins: Wgmma, env: Mapping[str, Any]) -> dict[str, int]:
    """Per buffer, the elements the step's MMAs read: every iteration of its collapsed
    loops, every warpgroup of the class (origins evaluated for each of its threads)."""
    threads = np.asarray(m.agents[a].cls.threads)
    out: dict[str, int] = {}
    for inner in _iterations(ins, env):
        e = {**inner, "thread": threads}
        for t in ins.tiles:
            starts = [np.broadcast_to(np.asarray(f(e)), threads.shape) for f in t.starts]
            for origin in set(zip(*(s.tolist() for s in starts), strict=True)):
                out[t.buffer] = out.get(t.buffer, 0) | tile_mask(m, t.buffer, origin,
                                                                 t.extents)
    return out


def _iterations(ins: Wgmma, env: Mapping[str, Any]) -> list[dict[str, Any]]:
    envs = [dict(env)]
    for lp in ins.inner:
        nxt = []
        for e in envs:
            for v in range(int(lp.lo(e)), int(lp.hi(e)), lp.step):
                nxt.append({**e, f"L{lp.uid}": v})
        envs = nxt
    return envs


# ---- the MMA ------------------------------------------------------------------------------------


class WgmmaOp(Op):
    enumerated = True
    fusable = True

    def evaluate(self, a: int, ins: Wgmma, env: Mapping[str, Any]) -> MmaOperands:
        m = self.m
        found = regions(m, a, ins, env)
        atoms: list[int] = []
        if m.ownership:
            for buf, mask in found.items():
                atoms.extend(m.atoms.of(buf, mask))
        return MmaOperands(tuple(sorted(atoms)), tuple(sorted(found.items())))

    def scans(self, ins: Instr) -> bool:
        return self.m.ownership

    def scan(self, a: int, ins: Wgmma, env: Mapping[str, Any], found: Scan) -> None:
        for buf, mask in regions(self.m, a, ins, env).items():
            found.regions[buf].add(mask)

    def objects(self, a: int, ins: Wgmma, ev: MmaOperands) -> tuple:
        if not self.m.ownership:
            return (), ()
        return (tuple(obj.unfenced(x) for x in ev.atoms),
                tuple(obj.free(x) for x in ev.atoms))

    def static_writes(self, a: int, ins: Wgmma) -> Any:
        return (obj.warp_meet(id(ins.stmt)),) if ins.joint else ()

    def gates(self, ins: Wgmma) -> bool:
        return ins.joint or self.m.ownership

    def joint(self, ins: Wgmma) -> bool:
        return ins.joint

    def converges(self, ins: Wgmma) -> tuple[int, ...]:
        return ins.group if ins.joint else ()

    def gate(self, state: State, a: int, ins: Wgmma, ev: Any, reads: frozenset,
             writes: frozenset) -> tuple[bool, frozenset, frozenset]:
        """Alone: enabled, touching only what it must claim (a tile the class holds a share
        of is its own business). Split warpgroups: one step of the group, taken by its first
        class once every class of the group is at this wgmma (with the objects of all)."""
        if not ins.joint:
            return (True,) + self.claims(state, a, ev)
        if a != min(ins.group):
            return False, reads, writes
        m = self.m
        agents = state.agents
        ok = all(m.agents[g].code[agents[g][0]].stmt is ins.stmt for g in ins.group)
        for g in ins.group:
            if g != a:
                other = m.step_of(g, *agents[g])
                reads, writes = reads | other.reads, writes | other.writes
        return ok, reads, writes

    def claims(self, state: State | Mut, a: int, ev: MmaOperands
               ) -> tuple[frozenset, frozenset]:
        if not self.m.ownership or isinstance(ev, Err):
            return frozenset(), frozenset()
        me = self.m.keys.cls[a]
        need = [x for x in ev.atoms if not dict(state.perms[x].holders).get(me)]
        return (frozenset(obj.unfenced(x) for x in need),
                frozenset(obj.free(x) for x in need))

    def local(self, s: Mut, a: int, ins: Wgmma, ev: Any, reads: frozenset,
              writes: frozenset) -> bool:
        """A wgmma of a class alone on tiles it holds shares of, with nothing to report:
        what it changes (its groups, its shares moved to its MMAs) nobody else sees."""
        if ins.joint or isinstance(ev, Err):
            return False
        r, w = self.claims(s, a, ev)
        return not r and not w and not self.violation(s, a, ins, ev)

    def violation(self, s: Mut, a: int, ins: Wgmma, ev: MmaOperands) -> bool:
        if tables(self.m).bit[ins.fragment] & s.mma[a][1]:
            return True
        return self.m.ownership and any(s.perms[x].unfenced or s.defined[x] != DEFINED
                                        for x in ev.atoms)

    def apply(self, s: Mut, a: int, ins: Wgmma, ev: MmaOperands, span: Span | None) -> None:
        span = ins.where or span
        if not ins.joint:
            self.issue(s, a, ins, ev, span)
            return
        m = self.m
        for g in ins.group:
            pc, ctrs = s.agents[g]
            gev = m.event(g, pc, ctrs)
            if isinstance(gev, Err):
                raise gev.error.with_traceback(None)
            self.issue(s, g, m.agents[g].code[pc], gev, span)
        for g in ins.group:
            s.advance(g)
        s.note(ConvergeNote, ins.group)

    def issue(self, s: Mut, a: int, ins: Wgmma, ev: MmaOperands, span: Span | None) -> None:
        """The class's warpgroups issue their MMAs into its open group: they need a
        wgmma_fence since the fragment's registers were last touched, and (ownership) a
        share of every tile element, written and fenced for the async proxy."""
        m = self.m
        t = tables(m)
        bit = t.bit[ins.fragment]
        groups, touched = s.mma[a]
        if touched & bit:
            s.flag(ExploreError(NO_FENCE, f"{m.agents[a].cls.name} issues a wgmma into "
                                f"'{ins.fragment}' with no wgmma_fence since its registers "
                                "were last accessed (or before its first MMA): PTX requires "
                                "wgmma.fence between register accesses and the wgmma that "
                                "uses them", span, soft=True))
        opened = dict(groups)
        opened[0] = opened.get(0, 0) | bit
        s.mma[a] = mma_rec(tuple(sorted(opened.items())), touched)
        if m.ownership:
            perms.mma_reads(s, a, ev.atoms, span)

    def detail(self, a: int, ins: Wgmma, ev: Any, completes: int, observes: int,
               observed: bool) -> tuple[str, str]:
        if isinstance(ev, Err):
            return ins.op, ""
        label = self.m.atoms.label
        tiles = ", ".join(sorted({label(x) for x in ev.atoms}) if ev.atoms
                          else sorted({t.buffer for t in ins.tiles}))
        what = (f"wgmma into {ins.fragment}: the warpgroup's MMA reads {tiles} until a "
                "wgmma_wait covers its group")
        if ins.inner:
            what += " (the MMAs of its loop as one step)"
        return what, ""

    def touched(self, ins: Instr, ev: Any) -> tuple[tuple[int, ...], tuple[int, ...]]:
        return ev.atoms, ()

    def blocked(self, state: State, a: int, ins: Wgmma,
                phases: Mapping[int, int] | None) -> str | None:
        if ins.joint:
            return (f"waits for the threads of its warpgroup to converge at wgmma "
                    f"(line {line_of(ins)})")
        return super().blocked(state, a, ins, phases)


# ---- groups, fences, registers ------------------------------------------------------------------


class _Private(Op):
    """An operation on the class's own wgmma state: no other class sees it, so it is local
    (fused into the class's previous move) unless it reports something."""

    fusable = True

    def local(self, s: Mut, a: int, ins: Instr, ev: Any, reads: frozenset,
              writes: frozenset) -> bool:
        return not self.violation(s, a, ins, ev)

    def violation(self, s: Mut, a: int, ins: Instr, ev: Any) -> bool:
        return False


class WgmmaFenceOp(_Private):
    def apply(self, s: Mut, a: int, ins: WgmmaFence, ev: Any, span: Span | None) -> None:
        groups, _ = s.mma[a]
        s.mma[a] = mma_rec(groups, 0)


class WgmmaCommitOp(_Private):
    def apply(self, s: Mut, a: int, ins: WgmmaCommit, ev: Any, span: Span | None) -> None:
        groups, touched = s.mma[a]
        s.mma[a] = mma_rec(tuple((age + 1, f) for age, f in groups), touched)
        if self.m.ownership:
            perms.mma_committed(s, a)


class WgmmaWaitOp(_Private):
    def gates(self, ins: Instr) -> bool:
        return self.m.ownership

    def static_writes(self, a: int, ins: Instr) -> Any:
        """Its future (futures.py): the free shares of every tile the class's MMAs read."""
        return tables(self.m).tiles[a]

    def step_objects(self, a: int, pc: int, ins: Instr, ev: Any) -> tuple:
        return (), ()  # the gate says which, in the state at hand

    def gate(self, state: State, a: int, ins: WgmmaWait, ev: Any, reads: frozenset,
             writes: frozenset) -> tuple[bool, frozenset, frozenset]:
        """Never blocks (its MMAs can always complete first), but the shares it gives back
        are visible to whoever wants those atoms whole (a TMA load refilling the stage):
        ordered against them, a counterexample shows the MMA still pending there."""
        ages = covered(state.mma[a][0], ins.pending)
        return True, reads, frozenset(obj.free(x) for x in back(state, a, ages))

    def local(self, s: Mut, a: int, ins: Instr, ev: Any, reads: frozenset,
              writes: frozenset) -> bool:
        return not self.m.ownership or not back(s, a, covered(s.mma[a][0], ins.pending))

    def apply(self, s: Mut, a: int, ins: WgmmaWait, ev: Any, span: Span | None) -> None:
        """At most N committed groups that hold MMAs stay pending -- the newest, since
        MMAs complete in issue order --, the older ones are complete and their tiles' shares
        are the class's again. The open group (age 0) is not waited for: wait_group waits
        for committed groups only."""
        groups, touched = s.mma[a]
        ages = covered(groups, ins.pending)
        s.mma[a] = mma_rec(tuple(g for g in groups if g[0] not in ages), touched)
        if self.m.ownership:
            perms.mma_waited(s, a, ages)

    def detail(self, a: int, ins: WgmmaWait, ev: Any, completes: int, observes: int,
               observed: bool) -> tuple[str, str]:
        return f"wgmma_wait {ins.pending}", ""


class FragAccessOp(_Private):
    enumerated = True

    def evaluate(self, a: int, ins: FragAccess, env: Mapping[str, Any]) -> bool:
        """Does every thread of the class certainly do the access when the step runs?"""
        if not ins.certain:
            return False
        try:
            return all(int(hi(env)) > int(lo(env)) for lo, hi in ins.guards)
        except KeyError:
            return False

    def violation(self, s: Mut, a: int, ins: FragAccess, ev: Any) -> bool:
        used = tables(self.m).mask(ins.reads + ins.writes)
        return self.m.ownership and bool(pending(s.mma[a]) & used)

    def apply(self, s: Mut, a: int, ins: FragAccess, ev: Any, span: Span | None) -> None:
        m = self.m
        t = tables(m)
        used = t.mask(ins.reads + ins.writes)
        groups, touched = s.mma[a]
        racy = pending(s.mma[a]) & used
        if m.ownership and racy:
            names = t.text(racy)
            ages = sorted({age for age, f in groups if f & racy})
            why = ("it was never committed (wgmma_wait waits for committed groups only)"
                   if ages == [0] else "no wgmma_wait covered its group")
            verb = "reads" if t.mask(ins.reads) & racy else "writes"
            detail: dict[str, Any] = {"agent": a, "atom": f"registers of {names}"}
            if not ev:  # a condition or loop inside the statement decides: a candidate
                detail["candidate"] = "fragment"
            s.flag(ExploreError(NOT_READY, f"{m.agents[a].cls.name} {verb} registers of "
                                f"'{names}' while a wgmma into them may still be pending: "
                                f"{why}; the value is the MMA's or not, whichever comes "
                                "first", ins.where or span, soft=True, **detail))
        s.mma[a] = mma_rec(groups, touched | used)

    def detail(self, a: int, ins: FragAccess, ev: Any, completes: int, observes: int,
               observed: bool) -> tuple[str, str]:
        parts = []
        if ins.reads:
            parts.append("reads " + ", ".join(ins.reads))
        if ins.writes:
            parts.append("writes " + ", ".join(ins.writes))
        return "fragment registers: " + "; ".join(parts), ""


def covered(groups: tuple[MmaGroup, ...], n: int) -> frozenset[int]:
    """The ages of the groups a `wgmma_wait n` waits for: every committed group holding MMAs
    but the n newest -- the interpreter's rule (docs/semantics.md, "Tensor cores"). PTX
    counts empty groups among the newest n too (it would also wait for a group older than
    n commits); keeping more groups pending, this rule never proves what PTX refutes."""
    committed = [age for age, _ in groups if age > 0]  # sorted by age: newest first
    return frozenset(committed[n:])


def back(state: State | Mut, a: int, ages: frozenset[int]) -> list[int]:
    """The atoms whose shares class `a`'s groups of these ages give back."""
    return [x for x, (h, _) in enumerate(state.perms)
            if any(k[0] == MMA and k[1] == a and k[2] in ages for k, _ in h)]


# ---- exit and deadlocks -------------------------------------------------------------------------


def at_exit(m: Machine, state: State) -> tuple[str, str, Span | None] | None:
    """Every class finished: MMAs no wgmma_wait covered may still be running -- reading
    shared memory that is handed to the next block on the SM, writing registers of threads
    that have exited (TS431). An MMA that happened to complete in one interleaving proves
    nothing: the tensor core may be slower."""
    for a, (groups, _) in enumerate(state.mma):
        if not groups:
            continue
        span = next((ins.where or ins.span for ins in reversed(m.agents[a].code)
                     if isinstance(ins, Wgmma)), None)
        open_only = all(age == 0 for age, _ in groups)
        why = ("its last MMAs were never committed ('wgmma_wait' waits for committed groups "
               "only: 'wgmma_commit' first)" if open_only else
               "no 'wgmma_wait' covered their group ('wgmma_wait 0' before the threads end)")
        return (PENDING_AT_EXIT, f"{m.agents[a].cls.name} exits with MMAs into "
                f"'{tables(m).text(pending((groups, 0)))}' that may still be pending: {why}",
                span)
    return None


def stuck(m: Machine, state: State, live: list[int]) -> tuple[str, str] | None:
    """A class waits at a wgmma for threads of its warpgroup that never come (TS410)."""
    for a in live:
        ins = m.instr(state, a)
        if isinstance(ins, Wgmma) and ins.joint:
            away = [m.agents[g].cls.describe() for g in ins.group
                    if m.instr(state, g).stmt is not ins.stmt]
            if away:
                return "TS410", (f"{m.agents[a].cls.name} waits at wgmma (line "
                                 f"{line_of(ins)}) for the rest of its warpgroup, but "
                                 f"{', '.join(away)} never come: the 128 threads of a "
                                 "warpgroup issue each MMA together")
    return None


FAMILY = Family("wgmma", {Wgmma: WgmmaOp, WgmmaFence: WgmmaFenceOp, WgmmaCommit: WgmmaCommitOp,
                          WgmmaWait: WgmmaWaitOp, FragAccess: FragAccessOp},
                prepare=prepare, at_exit=at_exit, stuck=stuck)

