"""An instruction's operands evaluated in one environment (cached per pc and counters).

Why records: the same instruction at the same loop counters always evaluates alike, so
the machine evaluates it once (Machine.event) and every step, footprint of the future and
explanation reads the result by name. Evaluation may fail (a barrier index outside its
array): `Err` carries the violation, raised when the step is taken.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from tilesafe.semantics.temporal.explore.errors import ExploreError


class Err(NamedTuple):
    error: ExploreError


class NoOperands(NamedTuple):
    """An instruction without operands (fences, commit, wait_group, sync, named barriers)."""


class InitOperands(NamedTuple):
    insts: tuple[int, ...]  # the barrier instances it initialises


class WaitOperands(NamedTuple):
    inst: int
    parity: int


class ArriveOperands(NamedTuple):
    """arrive (tx: expect_tx bytes per arrival, or None) and expect_tx (tx: bytes)."""

    inst: int
    tx: int | None


class CopyOperands(NamedTuple):
    """tma_load (inst: the barrier it signals) and tma_store (inst -1)."""

    inst: int
    atoms: tuple[int, ...]  # the atoms of the slice (ownership; () otherwise)


class AccessOperands(NamedTuple):
    """A shared-memory access as atoms (ownership): what it reads only, writes, certainly
    writes, reads before writing (exposed) and covers under launch-constant conditions;
    whether its footprint is exact, its interned thread map (a class of more than one
    thread) and the footprint itself (for definedness covers)."""

    reads: tuple[int, ...]
    writes: tuple[int, ...]
    exact: bool
    touch: int
    exposed: tuple[int, ...]
    must: tuple[int, ...]
    covers: tuple[tuple[int, int], ...]
    fp: Any


class MmaOperands(NamedTuple):
    """A wgmma step (the MMAs of a collapsed loop of them included): the atoms its tiles
    cover (ownership; () otherwise), and per buffer the tiles' element mask."""

    atoms: tuple[int, ...]
    regions: tuple[tuple[str, int], ...]


NO_OPERANDS = NoOperands()

# The kind of a class's next step (machine.Step.kind), checked for every class in every
# state: an ordinary step, the end of its program, the block-wide `sync` (a joint move),
# or a step whose evaluation failed (its Err is raised when it is taken).
STEP, AT_END, AT_SYNC, FAILS = 0, 1, 2, 3
