"""A checker counterexample as a schedule the reference interpreter can follow.

Why: a refutation is only as convincing as a run that shows it. The explorer's run moves
lockstep classes, whole joint `sync`s and copy-engine completions; the interpreter moves
single threads statement by statement. The bridge is the *unit*: a statement the event
model has as an instruction of a class (a synchronising statement, or a statement whose
shared-memory accesses form one access instruction, a collapsed loop included). A class
move that performs n instructions (its step and the local steps fused into it) lets every
thread of the class complete its next n units; a copy move completes the matching
copy-engine operation (semantics/interpreter/schedule.py follows the result).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tilesafe.frontend.walk import statements
from tilesafe.semantics.interpreter.schedule import Guide, GuideStep
from tilesafe.semantics.temporal import blockparam
from tilesafe.semantics.temporal.events import Agent, Model
from tilesafe.semantics.temporal.explore import CannotMove, ExploreError, Finding, Machine
from tilesafe.semantics.temporal.explore.notes import StepNote
from tilesafe.semantics.temporal.explore.state import LoadCopy
from tilesafe.semantics.temporal.instrs import Arrive, Control, End, NamedWait, Wgmma


def unit_statements(agent: Agent, kernel: Any = None) -> tuple[frozenset[int], dict[int, int]]:
    """The ids of a class's unit statements, and for every statement inside one the id of
    the innermost unit statement containing it. With `kernel` (the model's), ids of a
    persistent kernel's lifted statements are those of the statements the interpreter runs
    (semantics/temporal/blockparam.py)."""
    units = {ins.stmt for ins in agent.code
             if not isinstance(ins, (Control, End)) and ins.stmt is not None}

    def oid(s: Any) -> int:
        return id(s) if kernel is None else blockparam.origin_id(kernel, id(s))

    ids = frozenset(oid(s) for s in units)
    inside: dict[int, int] = {}
    # Outer units first, so that nested ones (an `if` whose condition reads shared memory,
    # around units of its own) override for their statements.
    for u in sorted(units, key=lambda s: -sum(1 for _ in statements((s,)))):
        for sub in statements((u,)):
            inside[oid(sub)] = oid(u)
    return ids, inside


def guide_for(model: Model, mach: Machine, finding: Finding,
              block: tuple[int, ...]) -> Guide:
    """The finding's run (from the start of the kernel, on `mach`) as a Guide for `block`."""
    per_class = [unit_statements(ag, model.kernel) for ag in model.agents]
    units: dict[int, frozenset[int]] = {}
    unit_of: dict[int, Mapping[int, int]] = {}
    for ag, (ids, inside) in zip(model.agents, per_class, strict=True):
        for t in ag.cls.threads:
            units[t] = ids
            unit_of[t] = inside
    steps: list[GuideStep] = []
    violator: frozenset[int] = frozenset()
    st = finding.root
    for mv in finding.path:
        if mv[0] == "a":
            violator = frozenset(model.agents[mv[1]].cls.threads)
        rec: list = []
        try:
            nxt, _ = mach.apply(st, mv, rec)
        except CannotMove:
            break
        except ExploreError:
            nxt = None  # the violating move itself: the interpreter performs it too
        steps.append(_step(model, mach, st, mv, rec))
        if nxt is None:
            break
        st = nxt
    return Guide(tuple(block), units, unit_of, tuple(steps), violator)


def _step(model: Model, mach: Machine, st: tuple, mv: tuple, rec: list) -> GuideStep:
    if mv[0] == "sync":
        return GuideStep({t: 1 for ag in model.agents for t in ag.cls.threads})
    if mv[0] == "c":
        c = st.copies[mv[1]]
        if isinstance(c, LoadCopy):
            name, idx = model.instances[c.inst]
            return GuideStep(copy=("load", name, idx))
        return GuideStep(copy=("store", frozenset(model.agents[c.cls].cls.threads), c.age))
    a = mv[1]
    ins = mach.instr(st, a)
    if isinstance(ins, (Arrive, Wgmma)) and ins.joint:  # the classes meet: one unit each
        return GuideStep({t: 1 for g in ins.group for t in model.agents[g].cls.threads})
    # A bar_sync is two instructions (narrive, nwait) but one unit: the interpreter's thread
    # completes it on arriving (it then blocks inside it until the phase completes).
    n = sum(1 for r in rec if isinstance(r, StepNote) and r.agents == (a,)
            and not isinstance(r.ins, NamedWait))
    if not isinstance(ins, NamedWait):
        n = max(1, n)
    return GuideStep({t: n for t in model.agents[a].cls.threads})
