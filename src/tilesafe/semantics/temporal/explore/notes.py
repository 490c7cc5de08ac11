"""What one move did, recorded while it is applied (Machine.apply with `rec`).

Why: a counterexample is explained step by step (explain.py), replayed with exact footprints
(semantics/temporal/witness.py), turned into an interpreter schedule (semantics/temporal/guide.py)
and written into certificates (proofs/certificates.py, which replays the barrier operations on a
model of its own). Each reads these records instead of re-deriving what a move did.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from tilesafe.semantics.temporal.instrs import Instr


class StepNote(NamedTuple):
    """Class `agents[0]` performed `ins` with operands `ev` at loop counters `ctrs`; `fused`:
    a local step run together with the move's own (Mut.fuse_local)."""

    agents: tuple[int, ...]
    ins: Instr
    ev: Any
    ctrs: tuple[int, ...]
    fused: bool = False


class ConvergeNote(NamedTuple):
    """The classes of a split `arrive ..., one per warp` converged and arrived together."""

    agents: tuple[int, ...]


class SyncNote(NamedTuple):
    """Every class met at the block-wide `sync`."""

    agents: tuple[int, ...]


class BarNote(NamedTuple):
    """One mbarrier operation: `what` ("init", "arrive", "expect_tx", "complete_tx",
    "wait") on instance `inst` with `args`."""

    inst: int
    what: str
    args: tuple


class CompletesNote(NamedTuple):
    """A phase of barrier instance `inst` completed."""

    inst: int


class ObservesNote(NamedTuple):
    """A wait passed on barrier instance `inst`."""

    inst: int


class IssuedNote(NamedTuple):
    """A copy was issued: kind "L" (a TMA load signalling instance `who`) or "S" (a TMA
    store of class `who`)."""

    kind: str
    who: int


class CopyDoneNote(NamedTuple):
    """The copy engine finished `copy` (a LoadCopy or StoreCopy)."""

    copy: Any
