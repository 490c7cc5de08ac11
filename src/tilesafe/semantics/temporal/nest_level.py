"""One level of a nest run explored: every state whose least class is at linear position
`lam` (nest.py), reached from the level's entry states, with the usual checks.

Why its own module: this is the only place the nested argument explores states; what it
returns -- the entry states of the later levels, normalised, the violations, and the
positions its classes stood at (what the result depends on) -- is what the memo of
nest_runs.py shares between levels of one run and between runs.
"""

from __future__ import annotations

from dataclasses import dataclass

from tilesafe.semantics.temporal.budget import Budget
from tilesafe.semantics.temporal.explore import (
    Finding,
    Machine,
    classify_deadlock,
    exit_violation,
    finished,
)
from tilesafe.semantics.temporal.explore.state import State
from tilesafe.semantics.temporal.nest import INF, Linear

FREE_POS = -1  # stands for the classes outside the nest (their events are read at any level)
FREE_READ = (-1, FREE_POS)


@dataclass(frozen=True)
class Found:
    """A violation at a level: the code and message (the run that shows it from the start
    is re-found by a plain exploration, nest_argument.py)."""

    code: str
    message: str
    candidate: bool


@dataclass
class Explored:
    outputs: dict[int, set[State]]  # later levels -> their entry states (concrete)
    found: list[Found]
    states: int
    transitions: int
    # (class, position relative to lam) whose instructions the level read: INF after the
    # nest; FREE_READ for the classes outside it
    seen: set[tuple[int, int]]


def explore_level(m: Machine, lin: Linear, entries: list[State], lam: int, por: bool,
                  budget: Budget) -> Explored:
    """Breadth-first over the states of level `lam` from `entries`; successors at higher
    levels are the next levels' entries. Stops at the first hard violation."""
    out = Explored({}, [], 0, 0, {FREE_READ})
    seen_states = set(entries)
    queue = list(entries)
    nest = lin.nest.agents

    def mark(st: State) -> None:
        for a in nest:
            p = lin.position(a, st.agents[a])
            out.seen.add((a, INF if p >= INF else p - lam))

    def passed(old: State, new: State) -> None:
        """A class that skips positions (no event of its own there) still runs their
        control -- the branches and loop exits of the regions between: read them too."""
        for a in nest:
            p, q = lin.position(a, old.agents[a]), lin.position(a, new.agents[a])
            if q - p > 1:
                for x in lin.between(p, q):
                    out.seen.add((a, x - lam))

    while queue:
        st = queue.pop()
        out.states += 1
        budget.charge()
        mark(st)
        if finished(m, st):
            bad = exit_violation(m, st)
            if bad is not None:
                out.found.append(Found(bad[0], bad[1], False))
                return out
        succ, enabled, _ = m.successors(st, por)
        if not enabled:
            if not finished(m, st) or st.copies:
                code, why = classify_deadlock(m, st)
                out.found.append(Found(code, why, False))
                return out
            continue
        for _mv, new, info in succ:
            out.transitions += 1
            if new is None:
                out.found.append(Found(info.code, info.message, False))
                return out
            if info is not None:
                out.found.append(Found(info.code, info.message,
                                       bool(info.detail.get("candidate"))))
                if not info.detail.get("candidate"):
                    return out
            passed(st, new)
            lv = lin.level(new)
            if lv == lam:
                if new not in seen_states:
                    seen_states.add(new)
                    queue.append(new)
            else:
                mark(new)
                out.outputs.setdefault(lv, set()).add(new)
    return out


def finding(f: Found) -> Finding:
    """A level's violation as the explorer's record (no path: see Found)."""
    return Finding(f.code, f.message, None, (), (), False,
                   {"candidate": "nested argument"} if f.candidate else {})
