"""The shape of a loop nest in the event model, and the linear progress of its classes.

Why: a persistent kernel walks tiles in an outer loop and, inside each tile, a pipeline of
k-steps whose count depends on the sizes (docs/temporal.md §15). Both trip counts are
unbounded, so the argument for every trip count needs one measure of how far the block
has got: the *linear position* of a class in the nest, `1 + t * LAM + slot`, where t is
its tile (outer iteration), LAM = T_i + E + 2 the length of a tile (T_i the inner trip
count, E the largest offset of a class's inner trip count from T_i), and the slot 0 before
the inner loop (region A), 1 + k inside it at k-step k (region I), LAM - 1 after it (region
C). Before the outer loop a class is at 0 (PRE), after it at INF (POST). A class's
position never decreases along its program, and the level of a state -- the least
position of the classes with the nest -- never decreases along a run.

A state *normalised* at level lam replaces each such class's tile and k-step counters by
its offset from lam (the counters of constant loops inside the regions are kept): states
of two runs, or of two levels of one run, that normalise alike and whose classes see the
same events ahead behave alike (nest_runs.py). `denormalise` puts a normalised state
back at a level of a run.
"""

from __future__ import annotations

from dataclasses import dataclass

from tilesafe.frontend import ir
from tilesafe.semantics.temporal.events import Model
from tilesafe.semantics.temporal.explore.state import State, moved
from tilesafe.semantics.temporal.instrs import Enter, Next

INF = 1 << 62  # the position after the outer loop
PRE, A, I, C, POST, FREE = "pre", "A", "I", "C", "post", "free"  # regions of a program point
PRE_MARK, POST_MARK = "P", "Z"  # normalised counters of a class before / after the nest


@dataclass(frozen=True)
class NestAgent:
    """The pcs of one class's nest: outer Enter/Next, inner Enter/Next (pcs of control
    instructions, never a position), and the two loops."""

    outer_enter: int
    outer_next: int
    inner_enter: int
    inner_next: int
    outer: ir.For
    inner: ir.For

    def region(self, pc: int) -> str:
        if pc < self.outer_enter:
            return PRE
        if pc > self.outer_next:
            return POST
        if pc < self.inner_enter:
            return A
        if pc < self.inner_next:
            return I
        return C


@dataclass(frozen=True)
class Nest:
    """The nest of a model: its classes with the two loops (the others run none)."""

    agents: dict[int, NestAgent]

    def region(self, a: int, pc: int) -> str:
        na = self.agents.get(a)
        return FREE if na is None else na.region(pc)


def find(model: Model) -> Nest | str:
    """The nest of the model, or why the model is not one: every class with a loop whose
    trip count depends on the sizes runs exactly two, an outer one at the top of its
    program (in no other kept loop) and an inner one directly inside it."""
    by_agent: dict[int, list] = {}
    for sl in model.sym_loops:
        by_agent.setdefault(sl.agent, []).append(sl)
    out: dict[int, NestAgent] = {}
    for a, sls in by_agent.items():
        name = model.agents[a].name
        outer = [s for s in sls if not s.nested]
        inner = [s for s in sls if s.nested]
        if len({id(s.stmt) for s in outer}) != 1 or len({id(s.stmt) for s in inner}) != 1:
            return (f"{name} does not run exactly one size-dependent loop nested in one other "
                    "(a tile loop around a k-loop)")
        o, i = outer[0].stmt, inner[0].stmt
        pcs = _pcs(model, a, o) + _pcs(model, a, i)
        if None in pcs:
            return f"{name}: a size-dependent loop is not kept in its program"
        oe, on, ie, inn = pcs
        code = model.agents[a].code
        if code[oe].ctx or len(code[ie].ctx) != 1 or code[ie].ctx[0].stmt is not o:
            return (f"the loop at line {i.span.line} is not directly inside the loop at line "
                    f"{o.span.line}, or that one is inside another kept loop")
        out[a] = NestAgent(oe, on, ie, inn, o, i)
    if not out:
        return "no nest of size-dependent loops"
    return Nest(out)


def _pcs(model: Model, a: int, loop: ir.For) -> tuple[int | None, int | None]:
    enter = nxt = None
    for pc, ins in enumerate(model.agents[a].code):
        if isinstance(ins, Enter) and ins.stmt is loop:
            enter = pc
        elif isinstance(ins, Next) and ins.stmt is loop:
            nxt = pc
    return enter, nxt


class Linear:
    """Linear positions, levels and normalisation for one run (inner trip count T_i and the
    largest inner offset E fix the tile length)."""

    def __init__(self, nest: Nest, t_inner: int, e_max: int) -> None:
        self.nest = nest
        self.lam = max(2, t_inner + e_max + 2)

    def position(self, a: int, pos: tuple[int, tuple[int, ...]]) -> int:
        na = self.nest.agents[a]
        pc, ctrs = pos
        r = na.region(pc)
        if r == PRE:
            return 0
        if r == POST:
            return INF
        base = 1 + ctrs[0] * self.lam
        if r == A:
            return base
        if r == I:
            return base + 1 + ctrs[1]
        return base + self.lam - 1

    def level(self, state: State) -> int:
        return min(self.position(a, state.agents[a]) for a in self.nest.agents)

    def where(self, p: int) -> tuple[str, int, int]:
        """(region, tile, k-step) of a position (tile and k -1 where they do not apply)."""
        if p == 0:
            return PRE, -1, -1
        if p >= INF:
            return POST, -1, -1
        t, slot = divmod(p - 1, self.lam)
        if slot == 0:
            return A, t, -1
        if slot == self.lam - 1:
            return C, t, -1
        return I, t, slot - 1

    def between(self, p: int, q: int) -> list[int]:
        """The region slots (C of p's tile, A of the next; A of tile 0 from PRE) strictly
        between two positions of one class (q may be INF)."""
        if p == 0:
            return [1] if 1 < q < INF else []
        t = (p - 1) // self.lam
        slots = (1 + t * self.lam + self.lam - 1,) + ((1 + (t + 1) * self.lam,) if q < INF
                                                      else ())
        return [x for x in slots if p < x < q]

    def normalise(self, state: State, lam: int) -> State:
        agents = list(state.agents)
        for a, na in self.nest.agents.items():
            pc, ctrs = agents[a]
            r = na.region(pc)
            if r == PRE:
                agents[a] = (pc, (PRE_MARK,) + ctrs)
            elif r == POST:
                agents[a] = (pc, (POST_MARK,) + ctrs)
            else:
                rest = ctrs[2:] if r == I else ctrs[1:]
                agents[a] = (pc, (self.position(a, (pc, ctrs)) - lam,) + rest)
        return moved(state, tuple(agents), state.bars)

    def denormalise(self, state: State, lam: int) -> State:
        agents = list(state.agents)
        for a, na in self.nest.agents.items():
            pc, ctrs = agents[a]
            head, rest = ctrs[0], ctrs[1:]
            if head == PRE_MARK or head == POST_MARK:
                agents[a] = (pc, rest)
                continue
            r, t, k = self.where(lam + head)
            if r != na.region(pc):
                raise Misplaced(f"a class at offset {head} lands in region {r}, its program "
                                f"point is in region {na.region(pc)}")
            agents[a] = (pc, ((t, k) if r == I else (t,)) + rest)
        return moved(state, tuple(agents), state.bars)


class Misplaced(Exception):
    """A normalised state does not fit the run it is put into (never expected when the
    runs agree on the events ahead: a sign of a bug, reported as UNKNOWN)."""
