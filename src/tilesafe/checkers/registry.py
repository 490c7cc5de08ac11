"""The list of checkers `verify` runs. Adding a checker is one module plus one line here.

Each checker module exposes `check(kernel: ir.Kernel, options: CheckOptions) ->
list[Obligation]`; it must not print and must turn solver timeouts into UNKNOWN verdicts.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass

from tilesafe.checkers.obligation import Obligation
from tilesafe.frontend import ir


@dataclass(frozen=True)
class CheckOptions:
    """Budgets. A budget running out gives UNKNOWN with the reason and the `tilesafe
    verify` option that raises it (in parentheses), never PROVED.

    timeout_ms     per solver / ISL query (--query-timeout MS)
    max_states     states explored by all temporal searches of one kernel together: every
                   trip count, the level sets and tails, both checkers' semantics, replays
                   (--max-states N)
    max_seconds    wall-clock time of those searches, per kernel (--timeout SECONDS)
    max_memory_mb  resident size of the verifying process while they run (--max-memory MB)
    """

    timeout_ms: int = 10_000
    max_states: int = 1_000_000
    max_seconds: float = 300.0
    max_memory_mb: int = 4096


CheckFn = Callable[[ir.Kernel, CheckOptions], list[Obligation]]

# name -> module path. Order is report order.
CHECKERS: dict[str, str] = {
    "layout": "tilesafe.checkers.layout",
    "access": "tilesafe.checkers.access",
    "global": "tilesafe.checkers.global_memory",
    "barrier": "tilesafe.checkers.barrier",
    "ownership": "tilesafe.checkers.ownership",
    "tma": "tilesafe.checkers.tma",
    "mma": "tilesafe.checkers.mma",
    "banks": "tilesafe.checkers.banks",
    "value": "tilesafe.checkers.value",
}


def load(name: str) -> CheckFn:
    return importlib.import_module(CHECKERS[name]).check


def run_all(kernel: ir.Kernel, options: CheckOptions | None = None,
            only: tuple[str, ...] | None = None) -> list[Obligation]:
    options = options or CheckOptions()
    results: list[Obligation] = []
    for name in CHECKERS:
        if only is None or name in only:
            results.extend(load(name)(kernel, options))
    return results
