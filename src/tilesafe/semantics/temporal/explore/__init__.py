"""Explicit-state exploration of the event model (semantics/temporal/events.py) for concrete sizes.

Why: the barrier protocol and the ownership discipline are properties of every interleaving
of the agents and the copy engine. A state is hashable, so reachable states are enumerated
breadth-first (shortest counterexamples first) with a partial-order reduction that skips
interleavings of independent steps.

The package, by job:
  state.py     the named immutable state (State and its records), holders, moves
  objects.py   what steps touch (keys for the partial-order reduction)
  machine.py   one system's static part (environments, evaluation, caches) and its moves
  atoms.py     atoms of shared memory and the prepass that finds them
  futures.py   what each class may still touch (for persistent sets)
  ops/         one module per instruction family behind a registry (ops/__init__.py)
  mut.py       a state being changed by one move; perms.py and threads.py: ownership
  por.py       enabled moves and persistent sets
  search.py    the bounded breadth-first search
  explain.py   traces, blocked lines, deadlock classification, exit violations
"""

from tilesafe.semantics.temporal.explore.errors import CannotMove, ExploreError, Finding
from tilesafe.semantics.temporal.explore.explain import (
    classify_deadlock,
    exit_violation,
    replay,
    trace_lines,
)
from tilesafe.semantics.temporal.explore.machine import Machine
from tilesafe.semantics.temporal.explore.search import (
    GRAPH_RECORDER,
    SLACK,
    SearchResult,
    Stats,
    finding_key,
    finished,
    path_to,
    rank,
    search,
)
from tilesafe.semantics.temporal.explore.state import State

__all__ = ["GRAPH_RECORDER", "SLACK", "CannotMove", "ExploreError", "Finding", "Machine",
           "SearchResult", "State", "Stats", "classify_deadlock", "exit_violation",
           "finding_key", "finished", "path_to", "rank", "replay", "search", "trace_lines"]
