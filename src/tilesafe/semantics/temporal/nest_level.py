"""One level of a nest run explored: every state whose least class is at linear position
`lam` (nest.py), reached from the level's entry states, with the usual checks -- and the
record of everything the exploration read of the kernel.

Why its own module: this is the only place the nested argument explores states; what it
returns -- the entry states of the later levels, normalised, the violations, and the
*reads* (every instruction evaluated and every control-flow walk taken, by class, program
point and loop counters) -- is what the memo of nest_runs.py shares between levels of one
run and between runs: the exploration is a deterministic function of its entry states and
of the values of its reads, so equal entries and equal read values give equal results.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tilesafe.semantics.temporal.budget import Budget
from tilesafe.semantics.temporal.explore import (
    Finding,
    Machine,
    classify_deadlock,
    exit_violation,
    finished,
)
from tilesafe.semantics.temporal.explore.state import Pos, State
from tilesafe.semantics.temporal.nest import Linear

EVENT, SETTLE = "e", "s"  # a read: an instruction's operands / the control walk after a step


class NestMachine(Machine):
    """A machine that records what it reads while `reads` is a set: the operands it
    evaluates (`event`, `step_of`) and the control walks it takes (`settle`, keyed by the
    instruction the walk starts after)."""

    reads: set | None = None
    precise_pools = True

    def event(self, a: int, pc: int, ctrs: tuple[int, ...]) -> Any:
        if self.reads is not None:
            self.reads.add((EVENT, a, pc, ctrs))
        return super().event(a, pc, ctrs)

    def step_of(self, a: int, pc: int, ctrs: tuple[int, ...]) -> Any:
        if self.reads is not None:
            self.reads.add((EVENT, a, pc, ctrs))
        return super().step_of(a, pc, ctrs)

    def settle(self, a: int, pc: int, ctrs: tuple[int, ...]) -> Pos:
        if self.reads is not None:
            self.reads.add((SETTLE, a, pc - 1, ctrs))
        return super().settle(a, pc, ctrs)


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
    reads: set  # (kind, class, pc, counters): see NestMachine


def explore_level(m: NestMachine, lin: Linear, entries: list[State], lam: int, por: bool,
                  budget: Budget) -> Explored:
    """Breadth-first over the states of level `lam` from `entries`; successors at higher
    levels are the next levels' entries. Stops at the first violation."""
    out = Explored({}, [], 0, 0, set())
    m.reads = out.reads
    try:
        _explore(m, lin, entries, lam, por, budget, out)
    finally:
        m.reads = None
    return out


def _explore(m: NestMachine, lin: Linear, entries: list[State], lam: int, por: bool,
             budget: Budget, out: Explored) -> None:
    seen_states = set(entries)
    queue = list(entries)
    for st in entries:  # where the entries stand is read too
        for a, (pc, ctrs) in enumerate(st.agents):
            out.reads.add((EVENT, a, pc, ctrs))
    while queue:
        st = queue.pop()
        out.states += 1
        budget.charge()
        if finished(m, st):
            bad = exit_violation(m, st)
            if bad is not None:
                out.found.append(Found(bad[0], bad[1], False))
                return
        succ, enabled, _ = m.successors(st, por)
        if not enabled:
            if not finished(m, st) or st.copies:
                code, why = classify_deadlock(m, st)
                out.found.append(Found(code, why, False))
                return
            continue
        for _mv, new, info in succ:
            out.transitions += 1
            if new is None:
                out.found.append(Found(info.code, info.message, False))
                return
            if info is not None:
                out.found.append(Found(info.code, info.message,
                                       bool(info.detail.get("candidate"))))
                return
            lv = lin.level(new)
            if lv == lam:
                if new not in seen_states:
                    seen_states.add(new)
                    queue.append(new)
            else:
                out.outputs.setdefault(lv, set()).add(new)


def finding(f: Found) -> Finding:
    """A level's violation as the explorer's record (no path: see Found)."""
    return Finding(f.code, f.message, None, (), (), False,
                   {"candidate": "nested argument"} if f.candidate else {})
