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
    timeout_ms: int = 10_000  # per solver / ISL query; past it the verdict is UNKNOWN
    max_states: int = 200_000  # explicit-state exploration bound (barrier checker)


CheckFn = Callable[[ir.Kernel, CheckOptions], list[Obligation]]

# name -> module path. Order is report order.
CHECKERS: dict[str, str] = {
    "layout": "tilesafe.checkers.layout",
    "access": "tilesafe.checkers.access",
    "barrier": "tilesafe.checkers.barrier",
    "ownership": "tilesafe.checkers.ownership",
    "tma": "tilesafe.checkers.tma",
    "banks": "tilesafe.checkers.banks",
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
