"""The block family: `sync` (the block-wide barrier) and the end of a program.

Why here: `sync` is a joint step of every class (Mut.sync, a move of its own in the
search), and a block that can reach it with some class unable to (finished, or waiting
elsewhere) deadlocks there (TS420).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from tilesafe.frontend.span import Span
from tilesafe.semantics.temporal.explore import objects as obj
from tilesafe.semantics.temporal.explore.ops.base import Family, Op, line_of
from tilesafe.semantics.temporal.explore.state import State
from tilesafe.semantics.temporal.instrs import End, Instr, Sync

if TYPE_CHECKING:
    from tilesafe.semantics.temporal.explore.machine import Machine
    from tilesafe.semantics.temporal.explore.mut import Mut


class SyncOp(Op):
    """Never a step of one class: the search offers the joint move once every class is
    at its `sync`."""

    def static_writes(self, a: int, ins: Instr) -> Any:
        return (obj.BLOCK,)

    def step_objects(self, a: int, pc: int, ins: Instr, ev: Any) -> tuple:
        return (), ()

    def apply(self, s: Mut, a: int, ins: Sync, ev: Any, span: Span | None) -> None:
        raise AssertionError("sync is a joint move")

    def blocked(self, state: State, a: int, ins: Sync,
                phases: Mapping[int, int] | None) -> str | None:
        return f"waits at sync (line {line_of(ins)})"


class EndOp(Op):
    def step_objects(self, a: int, pc: int, ins: Instr, ev: Any) -> tuple:
        return (), ()

    def blocked(self, state: State, a: int, ins: End,
                phases: Mapping[int, int] | None) -> str | None:
        return None


def stuck(m: Machine, state: State, live: list[int]) -> tuple[str, str] | None:
    """Every class still running waits at `sync`: some class finished, or the block never
    gets there together (TS420)."""
    if not all(isinstance(m.instr(state, a), Sync) for a in live):
        return None
    done = [m.agents[a].cls.describe() for a in range(m.n) if a not in live]
    return "TS420", ("every blocked thread waits at sync, but " +
                     (", ".join(done) + " finished" if done else "not all arrived"))


FAMILY = Family("block", {Sync: SyncOp, End: EndOp}, stuck=stuck)
