"""Breadth-first search of a machine's states (shortest counterexamples first).

Why bounded: once something is found the search goes only SLACK steps deeper (a refuted
kernel needs no complete state space, and a broken protocol can make it huge); every state
is charged to the verification's budget and `max_states` bounds one search. A search that
stops early says so (Stats.complete, reason): its verdict is never "proved".
"""

from __future__ import annotations

from collections import deque
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tilesafe.semantics.temporal.budget import Budget, BudgetExceeded
from tilesafe.semantics.temporal.events import Unsupported
from tilesafe.semantics.temporal.explore.errors import ExploreError, Finding
from tilesafe.semantics.temporal.explore.explain import classify_deadlock, exit_violation
from tilesafe.semantics.temporal.explore.state import State

if TYPE_CHECKING:
    from tilesafe.semantics.temporal.explore.machine import Machine

# Set by `verify --certificates` (proofs/certificates.py): an object whose `begin(machine,
# roots, por)` returns a graph with `visit(state)` and `edge(state, move, next)`; every
# search then records the states and transitions it explored, for an independent checker.
GRAPH_RECORDER: ContextVar[Any] = ContextVar("tilesafe_graph_recorder", default=None)

SLACK = 12  # after a violation, explore this many steps deeper (for nearby codes), no more


@dataclass
class Stats:
    states: int = 0
    transitions: int = 0
    complete: bool = True
    reason: str = ""
    deadlocks: int = 0
    finals: int = 0
    budget: bool = False  # stopped because the verification budget is spent


@dataclass
class SearchResult:
    stats: Stats
    findings: dict[str, Finding]
    parents: dict
    visited: set
    first_final: tuple | None = None


def finding_key(f: Finding) -> str:
    """Searches keep the first finding per key: the code, and apart from it the first
    candidate of the code (which may be confirmed, and reached sooner)."""
    return f.code + "?" if f.detail.get("candidate") else f.code


def rank(f: Finding) -> int:
    """Which finding of a code to keep: a violation outright, then a candidate the checker
    can confirm on exact footprints, then one it cannot (semantics/temporal/witness.py). Candidates
    do not cut the search short: unconfirmed, they must not cost the other properties."""
    kind = f.detail.get("candidate")
    if not kind:
        return 0
    return 2 if kind.startswith("possible") else 1


def finished(m: Machine, state: State) -> bool:
    """Every class has reached the end of its program."""
    return all(p[0] == last for p, last in zip(state.agents, m.last_pc, strict=True))


def search(m: Machine, roots: list[tuple], por: bool, max_states: int,
           stop_on_hard: bool = False, budget: Budget | None = None) -> SearchResult:
    """Breadth-first exploration from `roots`; the first finding of each code is kept with
    the path that reaches it (see the module docstring for the bounds)."""
    stats = Stats()
    parents: dict = {r: None for r in roots}
    # (state, depth): a state is a deep tuple whose hash is not cached, so each dictionary
    # lookup rehashes it; one lookup per successor (setdefault) is all the search needs
    queue = deque((r, 0) for r in roots)
    recorder = GRAPH_RECORDER.get()
    graph = recorder.begin(m, roots, por) if recorder is not None else None
    findings: dict[str, Finding] = {}
    first_final = None
    horizon: int | None = None

    def found(f: Finding, d: int) -> None:
        nonlocal horizon
        key = finding_key(f)
        old = findings.get(key)
        if old is None or rank(f) < rank(old):
            findings[key] = f
        if horizon is None and not f.detail.get("candidate"):
            horizon = d + SLACK

    while queue:
        st, d = queue.popleft()
        if horizon is not None and d > horizon:
            stats.complete = False
            stats.reason = "stopped after a violation"
            continue
        stats.states += 1
        if stats.states > max_states:
            stats.complete = False
            stats.reason = f"state limit {max_states} reached"
            break
        if budget is not None:
            try:
                budget.charge()
            except BudgetExceeded as exc:
                stats.complete = False
                stats.reason = exc.reason
                stats.budget = True
                break
        if graph is not None:
            graph.visit(st)
        if finished(m, st):
            # The block exits here: copies still in flight are the witness of TS307/TS430.
            bad = exit_violation(m, st)
            if bad is not None:
                root, path = path_to(parents, st)
                found(Finding(bad[0], bad[1], bad[2], path, root, False, {"state": st}), d)
                continue
        try:
            succ, enabled, _ = m.successors(st, por)
        except Unsupported as exc:
            stats.complete = False
            stats.reason = exc.message
            break
        if m.model.progress and enabled and not st.copies:
            why = no_progress(m, st, enabled)
            if why:
                root, path = path_to(parents, st)
                found(Finding("TS490", why, None, path, root, False, {"state": st}), d)
        if not enabled:
            if finished(m, st) and not st.copies:
                stats.finals += 1
                if first_final is None:
                    first_final = st
            else:
                stats.deadlocks += 1
                code, why = classify_deadlock(m, st)
                root, path = path_to(parents, st)
                found(Finding(code, why, None, path, root, False, {"state": st}), d)
            continue
        for mv, nxt, info in succ:
            stats.transitions += 1
            if graph is not None and nxt is not None:
                graph.edge(st, mv, nxt)
            if nxt is None:
                err: ExploreError = info
                root, path = path_to(parents, st)
                found(Finding(err.code, err.message, err.span, path + (mv,), root, False,
                              {"state": st, **err.detail}), d + 1)
                if stop_on_hard:
                    stats.reason = "stopped at the first error"
                    return SearchResult(stats, findings, parents, set(parents), first_final)
                continue
            if info is not None:
                root, path = path_to(parents, st)
                found(Finding(info.code, info.message, info.span, path + (mv,), root, True,
                              {"state": st, **info.detail}), d + 1)
            before = len(parents)
            parents.setdefault(nxt, (st, mv))
            if len(parents) > before:
                queue.append((nxt, d + 1))
    return SearchResult(stats, findings, parents, set(parents), first_final)


def path_to(parents: dict, st: tuple) -> tuple[tuple, tuple]:
    """The root a state was reached from, and the moves from it."""
    out = []
    while parents.get(st) is not None:
        st, mv = parents[st]
        out.append(mv)
    return st, tuple(reversed(out))


def no_progress(m: Machine, state: State, enabled: list) -> str | None:
    """The progress property of a stage projection (semantics/temporal/ring.py): with no copy in
    flight, some class at the least iteration of the loops, or outside them, or the
    block-wide `sync`, can move. A violation: why."""
    level: dict[int, int] = {}
    for a, ag in enumerate(m.agents):
        p = ag.param_loop
        if p is not None:
            pc, ctrs = state.agents[a]
            if p[0] < pc < p[1]:
                level[a] = ctrs[p[2]]
    if not level:
        return None
    low = min(level.values())
    for mv in enabled:
        if mv[0] == "sync" or (mv[0] == "a" and level.get(mv[1], low) == low):
            return None
    return (f"no class at the least iteration ({low}) of the stage projection can move: "
            "its progress is not shown")
