"""The registry of instruction families: record type -> the Op that gives it meaning.

Adding a family is one module here (its Ops, what it leaves in flight, its listeners; see
base.py for the contract and docs/temporal.md, "Adding an instruction family") and one
line in FAMILIES. The order of FAMILIES is the order listeners run in when a barrier phase
completes, a wait passes, a class arrives or the block meets at `sync`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tilesafe.semantics.temporal.explore.ops import (
    block,
    bulk,
    cluster,
    mbarrier,
    named,
    ownership,
    wgmma,
)
from tilesafe.semantics.temporal.explore.ops.base import Family, InFlight, Op

if TYPE_CHECKING:
    from tilesafe.semantics.temporal.explore.machine import Machine

FAMILIES: tuple[Family, ...] = (
    mbarrier.FAMILY,
    bulk.FAMILY,
    named.FAMILY,
    block.FAMILY,
    ownership.FAMILY,
    wgmma.FAMILY,
    cluster.FAMILY,
)


class Hooks:
    """One machine's view of the registry: an Op per record type, an InFlight per copy
    tag, static tables per family, and the listeners of the families that apply to the
    machine, in registry order: `phase` (s, inst, span), `wait` (s, a, inst), `arrive`
    (s, a, inst, acquire, deposit), `sync` (s) -- see Family."""

    def __init__(self, m: Machine, families: tuple[Family, ...] = FAMILIES) -> None:
        self.families = families
        self.ops: dict[type, Op] = {}
        self.in_flight: dict[str, InFlight] = {}
        for fam in families:
            for record, op in fam.ops.items():
                if record in self.ops:
                    raise ValueError(f"{record.__name__} is registered twice")
                self.ops[record] = op(m)
            for tag, handler in fam.in_flight.items():
                self.in_flight[tag] = handler(m)
        live = [f for f in families if f.applies is None or f.applies(m)]
        # The listeners, in registry order (the hot paths loop over these lists).
        self.phase = [f.on_phase for f in live if f.on_phase is not None]
        self.wait = [f.on_wait for f in live if f.on_wait is not None]
        self.arrive = [f.on_arrive for f in live if f.on_arrive is not None]
        self.sync = [f.on_sync for f in live if f.on_sync is not None]

    def tables(self, m: Machine) -> dict[str, Any]:
        """Every family's static tables for machine `m` (Family.prepare)."""
        return {f.name: f.prepare(m) for f in self.families if f.prepare is not None}



__all__ = ["FAMILIES", "Family", "Hooks", "InFlight", "Op"]
