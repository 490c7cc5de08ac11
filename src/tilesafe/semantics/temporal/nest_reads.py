"""What a level of a nest run read, and what each read evaluates to in a run.

Why its own module: the memo of nest_runs.py compares a level's reads -- the operands of an
instruction, the landing of a control walk, by class, program point and loop counters --
between runs and levels. A read is kept with the nest's counters as an offset from the
level (`norm_read`, as states are normalised), and its value in a run is computed here:
far from both loops' ends it is a function of the point's class (region, start or residue
of each loop, the trip counts modulo the periods: nest_terms.py's conditions N3-N4) and is
computed once per class for every run; near an end it is the value itself, shared between
the runs that agree on what it depends on (N4: the inner loop's reads on the inner sizes,
the tile's others on the outer sizes and T_i mod L).
"""

from __future__ import annotations

from typing import Any

from tilesafe.semantics.temporal.explore import Machine
from tilesafe.semantics.temporal.explore.operands import AccessOperands, Err
from tilesafe.semantics.temporal.nest import INF, POST, POST_MARK, PRE, PRE_MARK, I, Linear
from tilesafe.semantics.temporal.nest_level import SETTLE, NestMachine
from tilesafe.semantics.temporal.nest_terms import MOD, TILE, NestFacts


class ReadValues:
    """The values of reads in one run (trip counts T_o, T_i; a machine made on demand)."""

    def __init__(self, ctx: Any, sizes: dict[str, int], t_outer: int, t_inner: int) -> None:
        self.ctx = ctx  # nest_argument.Context: model, nest, facts, template, memo, budget
        self.sizes = sizes
        self.t_o, self.t_i = t_outer, t_inner
        self.facts: NestFacts = ctx.facts
        self.lin = Linear(ctx.nest, t_inner, max(self.facts.inner.offsets.values()))
        # the run's outer and inner sizes (reads near an end share values by them)
        self.side = tuple(tuple(sorted((n, v) for n, v in sizes.items() if n in lf.sizes))
                          for lf in (self.facts.outer, self.facts.inner))
        self._m: NestMachine | None = None
        self._desc: dict[tuple, Any] = {}

    @property
    def machine(self) -> NestMachine:
        if self._m is None:
            self._m = NestMachine(self.ctx.model, self.sizes, template=self.ctx.template)
        return self._m

    def norm_read(self, read: tuple, lam: int) -> tuple:
        """A read (kind, class, pc, counters) with the nest's counters as an offset from
        the level (as states are normalised)."""
        kind, a, pc, ctrs = read
        na = self.ctx.nest.agents.get(a)
        if na is None:
            return read
        r = na.region(pc) if pc >= 0 else PRE
        if r == PRE:
            return (kind, a, pc, (PRE_MARK,) + ctrs)
        if r == POST:
            return (kind, a, pc, (POST_MARK,) + ctrs)
        rest = ctrs[2:] if r == I else ctrs[1:]
        return (kind, a, pc, (self.lin.position(a, (pc, ctrs)) - lam,) + rest)

    def desc(self, read: tuple, lam: int) -> Any:
        """What a read evaluates to in this run at level `lam`: the operands, or where the
        control walk lands (relative to where it starts). At a point far from both loops'
        ends the value is a function of the point's class -- region, start, residues, the
        trip counts' residues (nest_terms.py) -- so it is computed once per class for
        every run (`Context.far`)."""
        kind, a, pc, ctrs = read
        na = self.ctx.nest.agents.get(a)
        if na is None:
            return self._value(kind, a, pc, ctrs, 0)
        if ctrs[:1] in ((PRE_MARK,), (POST_MARK,)):
            return self._value(kind, a, pc, ctrs[1:], 0 if ctrs[0] == PRE_MARK else INF)
        off, rest = ctrs[0], ctrs[1:]
        key = (kind, a, pc, lam + off, rest)
        hit = self._desc.get(key)
        if hit is None:
            hit = self._desc[key] = self._describe(kind, a, pc, lam + off, rest)
        return hit

    def _describe(self, kind: str, a: int, pc: int, p: int, rest: tuple) -> Any:
        o, n = self.facts.outer, self.facts.inner
        region, t, k = self.lin.where(p)
        if region != self.ctx.nest.agents[a].region(pc):
            return ("misfit", region)
        margin = 1 if kind == SETTLE else 0  # a walk may go on to the next iteration
        head = self._global(region, region)
        cls = None
        if region == I:
            ctrs = (t, k) + rest
            if self.t_i - k >= n.eff + margin:
                cls = (head, k if k < n.start else -1, k % n.period, self.t_i % n.period)
                if self.facts.dep[I][0] == TILE:  # the terms read the tile as well
                    cls = (cls + (t if t < o.start else -1, t % o.period)
                           if self.t_o - t >= o.eff + margin else None)
        else:
            ctrs = (t,) + rest
            if self.t_o - t >= o.eff + margin:
                cls = (head, t if t < o.start else -1, t % o.period)
        if cls is None:
            near = self._near_key(kind, a, pc, region, t, k, rest)
            hit = self.ctx.near.get(near)
            if hit is None:
                hit = self.ctx.near[near] = self._value(kind, a, pc, ctrs, p)
            return hit
        far = (kind, a, pc, rest, cls)
        hit = self.ctx.far.get(far)
        if hit is None:
            hit = self.ctx.far[far] = self._value(kind, a, pc, ctrs, p)
        return hit

    def _near_key(self, kind: str, a: int, pc: int, region: str, t: int, k: int,
                  rest: tuple) -> tuple:
        """What a read near a loop's end depends on (N4), to share its value between the
        runs that agree on it: the inner loop's terms read its own sizes (and, for a walk
        out of a tile, how far the outer loop's end is), the tile's others the outer
        sizes and the inner trip count modulo the period; a walk from A or C into the
        inner loop reads both sides."""
        o, n = self.facts.outer, self.facts.inner
        small = (self.t_o if self.t_o < o.eff else -1, self.t_i if self.t_i < n.eff else -1)
        if region == I:
            key = (kind, a, pc, rest, region, k, self.side[1]) + small
            last = self.t_i - k <= 1 - min(n.offsets.values())  # a walk may leave the tile
            if self.facts.dep[I][0] == TILE or (kind == SETTLE and last):
                return key + (self.side[0], t)
            return key
        key = (kind, a, pc, rest, region, t, self.side[0]) + small + (self.t_i % n.period,)
        return key + ((self.side[1],) if kind == SETTLE else ())

    def _value(self, kind: str, a: int, pc: int, ctrs: tuple[int, ...], p: int) -> Any:
        """The value itself (a walk's landing relative to the position `p` it starts at)."""
        m = self.machine
        if kind == SETTLE:
            q = Machine.settle(m, a, pc + 1, ctrs)
            if a not in self.ctx.nest.agents:
                return q
            landing = self.norm_read((SETTLE, a, q[0], q[1]), p)
            return landing[2], landing[3]
        ev = Machine.event(m, a, pc, ctrs)
        if isinstance(ev, Err):
            return ("err", ev.error.code)
        if isinstance(ev, AccessOperands):
            return tuple(ev[:7])
        return ev

    def _global(self, tag: str, region: str) -> tuple:
        o, n = self.facts.outer, self.facts.inner
        dep_o, dep_i = self.facts.dep.get(region, ("none", "none"))
        return (tag, self.t_o if self.t_o < o.eff else -1, self.t_i if self.t_i < n.eff else -1,
                self.t_o % o.period if dep_o == MOD else -1,
                self.t_i % n.period if dep_i == MOD else -1)

