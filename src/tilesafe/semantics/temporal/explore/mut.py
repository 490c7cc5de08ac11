"""A state being changed by one move (copy-on-write of its parts).

Why mutable lists: a move changes a few entries of a few parts; the family modules edit
them in place and `freeze` makes the next immutable State. The first soft violation of the
move (a protocol slip the run survives) is kept in `soft`; `rec`, when given, collects
what the move did (notes.py).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from tilesafe.semantics.temporal.explore.errors import CannotMove, ExploreError
from tilesafe.semantics.temporal.explore.notes import CopyDoneNote, StepNote, SyncNote
from tilesafe.semantics.temporal.explore.operands import AT_END, AT_SYNC, FAILS
from tilesafe.semantics.temporal.explore.state import State

_new = tuple.__new__

if TYPE_CHECKING:
    from tilesafe.semantics.temporal.explore.machine import Machine


class Mut:
    def __init__(self, m: Machine, state: State, rec: list | None) -> None:
        self.m = m
        agents, bars, obs, copies, perms, defined, lflags, sages, wins, named, mma = state
        self.agents = list(agents)
        self.bars = list(bars)
        self.obs = list(obs)
        self.copies = list(copies)
        self.perms = list(perms)
        self.defined = list(defined)
        self.lflags = list(lflags)
        self.sages = list(sages)
        self.wins = list(wins)
        self.named = list(named)
        self.mma = list(mma)
        self.soft: ExploreError | None = None
        self.rec = rec

    def freeze(self) -> State:
        return _new(State, (tuple(self.agents), tuple(self.bars), tuple(self.obs),
                            tuple(sorted(self.copies)), tuple(self.perms),
                            tuple(self.defined), tuple(self.lflags), tuple(self.sages),
                            tuple(self.wins), tuple(self.named), tuple(self.mma)))

    def note(self, kind: Callable[..., object], *fields: object) -> None:
        """Record `kind(*fields)` (notes.py) when the move is being recorded: built only
        then, since most moves of a search are not."""
        if self.rec is not None:
            self.rec.append(kind(*fields))

    def flag(self, err: ExploreError) -> None:
        """A soft violation: the first one of the move is the one reported."""
        if self.soft is None:
            self.soft = err

    def advance(self, a: int) -> None:
        pc, ctrs = self.agents[a]
        self.agents[a] = self.m.settle(a, pc + 1, ctrs)

    # -- moves -------------------------------------------------------------------------------

    def step(self, a: int) -> None:
        """Class `a` performs its next instruction (and the local ones after it)."""
        m = self.m
        pc, ctrs = self.agents[a]
        ins, op, ev, _, _, kind, joint, _, _ = m.step_of(a, pc, ctrs)
        if kind == AT_END or kind == AT_SYNC:
            raise CannotMove(f"replay: {m.agents[a].cls.name} cannot move")
        span = ins.stmt.span if ins.stmt is not None else None
        if self.rec is not None:
            self.rec.append(StepNote((a,), ins, ev, ctrs))
        if kind == FAILS:
            # The error is cached with the operands: raise it with a fresh traceback, not
            # one grown by every earlier raise (which would keep their frames alive).
            raise ev.error.with_traceback(None)
        op.apply(self, a, ins, ev, span)
        if not joint:
            self.advance(a)
            self.fuse_local(a)

    def fuse_local(self, a: int) -> None:
        """Run the agent's next steps at once while they touch nothing shared (a shared-
        memory access the class already holds permission for, a fence with nothing to do):
        they commute with every other step, so no interleaving is lost."""
        m = self.m
        while True:
            pc, ctrs = self.agents[a]
            st = m.step_of(a, pc, ctrs)
            if not st.op.fusable or st.kind == FAILS or st.remote or not st.op.local(
                    self, a, st.ins, st.ev, st.reads, st.writes):
                return
            if self.rec is not None:
                self.rec.append(StepNote((a,), st.ins, st.ev, ctrs, True))
            st.op.apply(self, a, st.ins, st.ev, st.ins.stmt.span)
            self.advance(a)

    def sync(self) -> None:
        """Every class passes the block-wide barrier together."""
        m = self.m
        self.note(SyncNote, tuple(range(m.n)))
        for a in range(m.n):
            self.advance(a)
        for f in m.hooks.sync:
            f(self)

    def copy_done(self, j: int) -> None:
        """The copy engine finishes the j-th copy in flight."""
        c = self.copies.pop(j)
        self.note(CopyDoneNote, c)
        self.m.hooks.in_flight[c[0]].complete(self, c)
