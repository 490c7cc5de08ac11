"""Explanations of explored runs: replayed traces, who waits on what, why a state is a
deadlock, and what a block leaves running at exit.

Why apart from the search: the search only needs codes; a counterexample needs words, and
they come from the same family modules (each Op says how its steps read in a trace and
how a class stuck at it reads) so that a new family explains itself too.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from typing import TYPE_CHECKING

from tilesafe.frontend.span import Span
from tilesafe.semantics.temporal import symmetry
from tilesafe.semantics.temporal.events import TraceStep
from tilesafe.semantics.temporal.explore.errors import CannotMove, ExploreError
from tilesafe.semantics.temporal.explore.notes import (
    CompletesNote,
    IssuedNote,
    ObservesNote,
    StepNote,
)
from tilesafe.semantics.temporal.explore.operands import Err
from tilesafe.semantics.temporal.explore.state import (
    CLASS,
    CTA_SCOPE_ARRIVE,
    EARMARK,
    FREE,
    GIVEN_BACK,
    MMA,
    NAMED_CLAIM,
    NAMED_POOL,
    POOL,
    RELAXED_ARRIVE,
    REMOTE_MARK,
    REMOTE_POOL,
    STRANDED,
    State,
)
from tilesafe.semantics.temporal.instrs import Access, End

if TYPE_CHECKING:
    from tilesafe.semantics.temporal.explore.machine import Machine


def replay(m: Machine, root: tuple, path: tuple) -> tuple[list[TraceStep], tuple, dict]:
    """Re-run a path recording each step (with absolute phase numbers along the run)."""
    steps: list[TraceStep] = []
    phases: dict[int, int] = {}
    st = root
    copy_ids: dict[tuple, list[int]] = {}
    next_copy = itertools.count()
    for i, mv in enumerate(path):
        rec: list = []
        if mv[0] == "c" and mv[1] >= len(st.copies):
            break
        try:
            nxt, _ = m.apply(st, mv, rec)
            if m.sym:  # the path was found between representatives (semantics/temporal/symmetry.py)
                nxt = symmetry.canon(nxt, m.sym, m.ninst)
        except CannotMove:
            break
        except ExploreError:
            nxt = None
        steps.append(_describe(m, st, mv, rec, phases, copy_ids, next_copy, i))
        if nxt is None:
            break
        st = nxt
    return steps, st, phases


def _describe(m: Machine, st: State, mv: tuple, rec: list, phases: dict, copy_ids: dict,
              next_copy: itertools.count, index: int) -> TraceStep:
    completes = observes = copy_id = -1
    inst_label = ""
    for r in rec:
        if isinstance(r, CompletesNote):
            completes = phases.get(r.inst, 0)
            phases[r.inst] = completes + 1
            inst_label = m.labels[r.inst]
        elif isinstance(r, ObservesNote):
            observes = phases.get(r.inst, 0) - 1
            inst_label = m.labels[r.inst]
        elif isinstance(r, IssuedNote):
            copy_id = next(next_copy)
            copy_ids.setdefault((r.kind, r.who), []).append(copy_id)
    if mv[0] == "sync":
        ins = next((m.instr(st, a) for a in range(m.n)), None)
        line = ins.stmt.span.line if ins is not None and ins.stmt is not None else 0
        return TraceStep(index, tuple(a.cls.name for a in m.agents), "sync", line,
                         "all threads meet at sync")
    if mv[0] == "c":
        c = st.copies[mv[1]]
        handler = m.hooks.in_flight[c[0]]
        ids = copy_ids.get(handler.issue_key(c)) or [-1]
        return handler.trace_step(index, c, completes, ids.pop(0))
    a = mv[1]
    pc, ctrs = st.agents[a]
    ins = m.agents[a].code[pc]
    op = m.hooks.ops[type(ins)]
    ev = m.event(a, pc, ctrs)
    group = ins.group if getattr(ins, "joint", False) else ()  # classes that meet there
    names = tuple(m.agents[g].cls.name for g in (group or (a,)))
    line = ins.stmt.span.line if ins.stmt is not None else 0
    iters = ", ".join(f"{lc.stmt.var.name}={lc.lo(m.env(a, ins, ctrs)) + lc.step * i}"
                      for lc, i in zip(ins.ctx, ctrs, strict=False))
    where = f" [{iters}]" if iters else ""
    label = m.atoms.label
    fused = [r.ev for r in rec if isinstance(r, StepNote) and r.fused
             and not isinstance(r.ev, Err) and isinstance(r.ins, Access)]
    ok = not isinstance(ev, Err)
    own_reads, own_writes = op.touched(ins, ev) if ok else ((), ())
    reads = tuple(label(x) for x in own_reads)
    writes = tuple(label(x) for x in own_writes)
    own_only = ok and op.trace_own_reads_only
    for f in fused:
        if not own_only:
            reads += tuple(label(x) for x in f.reads)
        writes += tuple(label(x) for x in f.writes)
    detail, named = op.detail(a, ins, ev, completes, observes,
                              any(isinstance(r, ObservesNote) for r in rec))
    inst_label = named or inst_label
    if fused:
        detail += "; then " + "; ".join(
            "reads " + ", ".join(sorted({label(x) for x in f.reads})) for f in fused)
    # Other local steps fused into the move (the class's own wgmma state): named, so that
    # a trace shows every MMA, commit and wait the class went through.
    others = [r for r in rec if isinstance(r, StepNote) and r.fused
              and not isinstance(r.ins, Access) and not isinstance(r.ev, Err)]
    if others:
        detail += "; then " + "; ".join(
            m.hooks.ops[type(r.ins)].detail(a, r.ins, r.ev, -1, -1, False)[0] for r in others)
    return TraceStep(index, names, ins.op, line, detail + where, inst_label, completes,
                     observes, copy_id, reads, writes)


def trace_lines(steps: list[TraceStep]) -> list[str]:
    return [f"{s.index + 1:3d}. {' + '.join(s.agents)}: {s.detail}"
            + (f" (line {s.line})" if s.line else "") for s in steps]


def blocked_lines(m: Machine, state: State, phases: Mapping[int, int] | None = None
                  ) -> list[str]:
    """Who waits on what, with the barrier state (phase, pending, tx)."""
    lines = []
    for a in range(m.n):
        ins = m.instr(state, a)
        if isinstance(ins, End):
            continue
        text = m.hooks.ops[type(ins)].blocked(state, a, ins, phases)
        if text is not None:
            lines.append(f"{m.agents[a].cls.describe()} {text}")
    return lines


def bar_text(m: Machine, state: State, inst: int, phases: Mapping[int, int] | None = None
             ) -> str:
    st, _, _, ncomp = state.bars[inst]
    if not st.initialized:
        return f"{m.labels[inst]}: uninitialised"
    n = phases.get(inst, ncomp) if phases is not None else ncomp
    return (f"{m.labels[inst]}: phase {n} (parity {st.parity}), pending "
            f"{st.pending}/{st.expected}, tx {st.tx}")


def exit_violation(m: Machine, state: State) -> tuple[str, str, Span | None] | None:
    """At a state where every agent has finished: asynchronous work the block leaves
    behind, as the first family that finds some says (Family.at_exit)."""
    for fam in m.hooks.families:
        if fam.at_exit is not None:
            bad = fam.at_exit(m, state)
            if bad is not None:
                return bad
    return None


def classify_deadlock(m: Machine, state: State) -> tuple[str, str]:
    """The code of a deadlock and why, from the family whose instructions the classes are
    stuck at (Family.stuck: TS421 named barriers, TS420 `sync`, TS407 / TS406 / TS408
    mbarrier waits); TS410 otherwise."""
    live = [a for a in range(m.n) if not isinstance(m.instr(state, a), End)]
    for fam in m.hooks.families:
        if fam.stuck is not None:
            got = fam.stuck(m, state, live)
            if got is not None:
                return got
    return "TS410", "every unfinished agent is blocked and the copy engine is idle"


def holder_text(m: Machine, k: tuple) -> str:
    """Who a permission holder names, for evidence and messages."""
    tag = k[0]
    if k == FREE:
        return "free"
    if tag == CLASS:
        return m.agents[k[1]].cls.name
    if tag == POOL:
        return f"barrier {m.labels[k[1]]} (current phase)"
    if tag == EARMARK:
        return f"barrier {m.labels[k[1]]} (released to {m.agents[k[2]].cls.name})"
    if tag == GIVEN_BACK:
        return f"finished TMA store of {m.agents[k[1]].cls.name} (not yet waited)"
    if tag == MMA:
        group = "its open group" if k[2] == 0 else f"its group committed {k[2]} ago"
        return f"a pending wgmma of {m.agents[k[1]].cls.name} ({group})"
    if tag == REMOTE_POOL:
        return f"barrier {m.labels[k[1]]} (current phase, released by another CTA)"
    if tag == REMOTE_MARK:
        return (f"barrier {m.labels[k[1]]} (released by another CTA to "
                f"{m.agents[k[2]].cls.name}: only an acquire at cluster scope takes it)")
    if tag == STRANDED:
        why = ("its relaxed arrive on " + m.labels[k[3]] if k[2] == RELAXED_ARRIVE else
               "its arrive at .cta scope on another CTA's " + m.labels[k[3]]
               if k[2] == CTA_SCOPE_ARRIVE else "its relaxed cluster_arrive")
        return f"{m.agents[k[1]].cls.name}, given up by {why} (which releases nothing)"
    ids = m.tables["named"].ids
    if tag == NAMED_POOL:
        return f"named barrier {ids[k[1]]} (released by its arrivers)"
    if tag == NAMED_CLAIM:
        who = ", ".join(m.agents[c].cls.name for c in range(m.n) if (k[2] >> c) & 1)
        return f"named barrier {ids[k[1]]} (completed; claimable by {who})"
    return str(k)
