"""What z3 must show about a loop nest before its runs stand for every size (docs/temporal.md
§15, conditions N1-N5): the trip-count groups of both loops, the sizes of each loop kept
apart, the synchronising terms periodic in each loop's iteration far from its end, the
object-naming terms (barrier indices, slices, shared indices) periodic everywhere, and
what the terms outside the inner loop may read of the inner loop's sizes.

Why its own module: the explorations of the nested argument (nest_runs.py) compare levels
of different runs and of one run by what their classes see ahead. That comparison is sound
only for the facts proved here: two copies of the sizes (param_smt.Enc) that share one
loop's sizes and differ in the other's, positions in the loops as z3 terms, `unsat` as the
only proof. Every query is kept as SMT-LIB in the evidence.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import z3

from tilesafe.frontend import ir
from tilesafe.frontend.walk import statements
from tilesafe.semantics.temporal.events import Model, conjuncts, free_vars
from tilesafe.semantics.temporal.instrs import Branch, Enter, Next
from tilesafe.semantics.temporal.nest import FREE, POST, PRE, A, C, I, Nest
from tilesafe.semantics.temporal.param_smt import (
    Enc,
    Timeout,
    divisor_product,
    divisors,
    prove_unsat,
    show,
    trip_expr,
)
from tilesafe.semantics.temporal.param_terms import G_CANDIDATES, H_CANDIDATES, TermConditions

# What a region's terms read of a loop's sizes besides positions: nothing, T mod L, or (the
# inner loop's terms, of the outer loop) the tile itself
NONE, MOD, TILE = "none", "mod", "tile"


@dataclass
class LoopFacts:
    """One loop of the nest: its trip count T (offsets per class), the sizes only it reads,
    period L, start margin H, end margin G and the distance below which its end is visible
    (`eff`, at least 2 - the least offset: where a class leaves the loop)."""

    name: str
    t_expr: ir.Expr
    offsets: dict[int, int]
    sizes: frozenset[str]
    period: int = 1
    start: int = 0
    margin: int = 0

    @property
    def eff(self) -> int:
        return max(self.margin, 2 - min(self.offsets.values()))

    def evidence(self) -> dict[str, Any]:
        return {"T": show(self.t_expr), "L": self.period, "H": self.start, "G": self.margin,
                "offsets": dict(self.offsets)}


@dataclass
class NestFacts:
    outer: LoopFacts
    inner: LoopFacts
    # region -> (reads of the outer sizes, reads of the inner sizes): NONE or MOD (T mod L)
    dep: dict[str, tuple[str, str]]


class _Enc(Enc):
    """An encoder whose shared variables carry a suffix: one fresh thread and loop
    variable per copy of the question (a counterexample may pick them apart)."""

    def __init__(self, kernel: ir.Kernel, model: Model, suffix: str, shared: dict,
                 var_suffix: str) -> None:
        super().__init__(kernel, model, suffix, shared)
        self.var_suffix = var_suffix

    def var(self, key: str) -> Any:
        name = key + self.var_suffix
        if name not in self.shared:
            self.shared[name] = z3.Int(name)
        return self.shared[name]


class NestTerms:
    """The z3 conditions of one nest; `why` says what failed (None: all hold)."""

    def __init__(self, model: Model, nest: Nest, cond: TermConditions,
                 queries: list[str], ms: Callable[[], int]) -> None:
        self.model = model
        self.k = model.kernel
        self.nest = nest
        self.cond = cond  # trip-count offsets (param_terms)
        self.queries = queries
        self.ms = ms
        # Every loop of the kernel by its variable: a term's other loop variables range
        # over their loops' iterations only.
        nest_loops = {lp.var.uid for na in nest.agents.values() for lp in (na.outer, na.inner)}
        self.loops = {st.var.uid: st for st in statements(self.k.body)
                      if isinstance(st, ir.For) and st.var.uid not in nest_loops}
        self.terms: dict[tuple[int, str], list[tuple[ir.Expr, bool]]] = {}
        for a, ag in enumerate(model.agents):
            na = nest.agents.get(a)
            for pc, ins in enumerate(ag.code):
                if na is not None and pc in (na.outer_enter, na.outer_next, na.inner_enter,
                                             na.inner_next):
                    continue
                values = _value_ids(ins)
                for e in ins.sync_exprs:
                    self.terms.setdefault((a, nest.region(a, pc)), []).append(
                        (e, id(e) in values))

    # -- N1: the two trip-count groups, N2: the sizes kept apart ----------------------------

    def facts(self) -> NestFacts | str:
        size_names = {f"size:{n}" for n in self.k.sizes}
        loops: dict[str, dict[int, ir.For]] = {
            "outer": {a: na.outer for a, na in self.nest.agents.items()},
            "inner": {a: na.inner for a, na in self.nest.agents.items()}}
        groups: dict[str, tuple[ir.Expr, dict[int, int]]] = {}
        for name, by_agent in loops.items():
            ref = next(iter(by_agent.values()))
            t_expr = trip_expr(ref)
            offsets = {}
            for a, loop in by_agent.items():
                for e in (loop.lo, loop.hi):
                    if free_vars(e, self.model.lets) - size_names:
                        return (f"the bounds of the {name} loop at line {loop.span.line} read "
                                "more than the sizes")
                c = self.cond.offset(t_expr, trip_expr(loop))
                if c is None:
                    return (f"the {name} loops at lines {ref.span.line} and {loop.span.line} "
                            "do not run a constant number of iterations apart")
                offsets[a] = c
            groups[name] = (t_expr, offsets)
        inner_sizes = frozenset(v[5:] for v in free_vars(groups["inner"][0], self.model.lets))
        outer_reads = frozenset(v[5:] for v in free_vars(groups["outer"][0], self.model.lets))
        if inner_sizes & outer_reads:
            return ("the trip counts of the two loops share a size "
                    f"({', '.join(sorted(inner_sizes & outer_reads))})")
        for w in self.k.where:
            for part in conjuncts(w):
                read = {v[5:] for v in free_vars(part, self.model.lets) if v.startswith("size:")}
                if read & inner_sizes and read - inner_sizes:
                    return (f"the 'where' clause ties the sizes of the two loops together "
                            f"(line {part.span.line})")
        outer_sizes = frozenset(self.k.sizes) - inner_sizes
        facts = NestFacts(LoopFacts("outer", *groups["outer"], outer_sizes),
                          LoopFacts("inner", *groups["inner"], inner_sizes), {})
        for step in (lambda: self._periods(facts, facts.inner),
                     lambda: self._periods(facts, facts.outer),
                     lambda: self._deps(facts), lambda: self._objects(facts)):
            why = step()
            if why:
                return why
        return facts

    # -- encodings ----------------------------------------------------------------------------

    def _pair(self, shared_sizes: frozenset[str], tag: str = "") -> tuple[Enc, Enc]:
        shared: dict = {}
        x = _Enc(self.k, self.model, "", shared, tag)
        y = _Enc(self.k, self.model, "_2", shared, tag)
        for n in shared_sizes:
            y.sizes[n] = x.sizes[n]
        return x, y

    def _place(self, enc: Enc, a: int, t: Any, k: Any) -> list:
        """Put the copy at tile t and k-step k of class a's loops (None: not placed);
        the constraints that the position exists."""
        na = self.nest.agents[a]
        out = []
        if t is not None:
            enc.loops[na.outer.var.uid] = enc.term(na.outer.lo) + na.outer.step * t
            out += [t >= 0, t < enc.term(trip_expr(na.outer))]
        if k is not None:
            enc.loops[na.inner.var.uid] = enc.term(na.inner.lo) + na.inner.step * k
            out += [k >= 0, k < enc.term(trip_expr(na.inner))]
        return out

    def _thread(self, enc: Enc) -> list:
        th = enc.var("thread")
        return [th >= 0, th < self.k.block]

    def _differ(self, x: Enc, y: Enc, exprs: list[ir.Expr]) -> Any:
        """Some term differs between the copies, its other loops' variables (shared by
        the copies) within their loops' ranges."""
        lets = self.model.lets
        uids = {int(v[5:]) for e in exprs for v in free_vars(e, lets) if v.startswith("loop:")}
        ranges = []
        for uid in sorted(uids):
            st = self.loops.get(uid)
            if st is None or uid in x.loops:
                continue
            v = x.var(f"loop:{uid}")
            lo, hi = x.term(st.lo), x.term(st.hi)
            ranges += [v >= lo, v < hi, (v - lo) % st.step == 0]
        return z3.And(*ranges, z3.Or([x.term(e) != y.term(e) for e in exprs]))

    def _reads(self, e: ir.Expr) -> frozenset[str]:
        """What a term reads, with the bounds of the other loops it reads the variable of."""
        lets = self.model.lets
        out = set(free_vars(e, lets))
        for v in list(out):
            st = self.loops.get(int(v[5:])) if v.startswith("loop:") else None
            if st is not None:
                out |= free_vars(st.lo, lets) | free_vars(st.hi, lets)
        return frozenset(out)

    def _groups(self, exprs: list[ir.Expr]) -> list[tuple[list[ir.Expr], bool]]:
        """Terms that read no size in one query without the sizes' constraints (a
        stronger claim, and a much smaller question); each term that reads sizes alone."""
        sized = [e for e in exprs if any(v.startswith("size:") for v in self._reads(e))]
        plain = [e for e in exprs if all(e is not x for x in sized)]
        return ([(plain, False)] if plain else []) + [([e], True) for e in sized]

    def _unsat(self, cons: list) -> bool:
        return prove_unsat(cons, self.ms(), self.queries)

    # -- N3: periodic far from the end ------------------------------------------------------

    def _far(self, facts: NestFacts, lf: LoopFacts, period: int, start: int,
             margin: int) -> bool:
        """Every term inside `lf` (the inner loop: region I; the outer: A, I, C) at
        iteration i equals the term at i + period*q, the other loop's sizes and position
        kept, when both iterations are past `start` (or equal) and at least `margin` from
        the end (the inner loop: with trip counts equal mod the period)."""
        inner = lf is facts.inner
        regions = (I,) if inner else (A, I, C)
        for a in self.nest.agents:
            for region in regions:
                every = [e for e, _ in self.terms.get((a, region), [])]
                for exprs, sized in self._groups(every):
                    other = facts.outer.sizes if inner else facts.inner.sizes
                    x, y = self._pair(other)
                    i, q = z3.Int("i"), z3.Int("q")
                    j = i + period * q
                    pos = z3.Int("pos")  # the other loop's iteration (shared)
                    if inner:
                        cons = self._place(x, a, pos, i) + self._place(y, a, pos, j)
                    else:
                        kk = pos if region == I else None
                        cons = self._place(x, a, i, kk) + self._place(y, a, j, kk)
                    cons = [i >= 0, j >= 0, z3.Or(q == 0, z3.And(i >= start, j >= start)),
                            *self._thread(x)] + (cons if sized else [])
                    if sized:
                        cons += [*x.where(), *y.where(), x.term(lf.t_expr) - i >= margin,
                                 y.term(lf.t_expr) - j >= margin]
                        if inner:
                            cons.append((y.term(lf.t_expr) - x.term(lf.t_expr)) % period == 0)
                    if not self._unsat(cons + [self._differ(x, y, exprs)]):
                        return False
        return True

    def _periods(self, facts: NestFacts, lf: LoopFacts) -> str | None:
        inner = lf is facts.inner
        lets = self.model.lets
        l0 = 1
        for a, na in self.nest.agents.items():
            loop = na.inner if inner else na.outer
            for region in ((I,) if inner else (A, I, C)):
                for e, _ in self.terms.get((a, region), []):
                    l0 = math.lcm(l0, divisor_product(e, loop.var.uid, lets))
        l0 = min(l0, 1 << 12)
        big_h, big_g = H_CANDIDATES[-1], G_CANDIDATES[-1]
        try:
            for cand in divisors(l0):
                if not self._far(facts, lf, cand, big_h, big_g):
                    continue
                lf.period = cand
                lf.start = next(h for h in H_CANDIDATES
                                if h == big_h or self._far(facts, lf, cand, h, big_g))
                lf.margin = next(g for g in G_CANDIDATES
                                 if g == big_g or self._far(facts, lf, cand, lf.start, g))
                return None
        except Timeout:
            return f"a periodicity query on the {lf.name} loop timed out"
        return (f"a synchronising term in the {lf.name} loop is not periodic far from its end "
                f"(tried periods dividing {l0})")

    # -- N4: what the other regions read of the sizes ----------------------------------------

    def _same(self, facts: NestFacts, a: int, region: str, side: str, mod: bool) -> bool:
        """The region's terms of class a do not change when only `side`'s sizes (and, for
        the inner loop's terms and the outer side, the tile) change -- with `mod`, when
        they change by a multiple of that loop's period in its trip count."""
        lf = facts.outer if side == "outer" else facts.inner
        keep = facts.inner.sizes if side == "outer" else facts.outer.sizes
        every = [e for e, _ in self.terms.get((a, region), [])]
        for exprs, sized in self._groups(every):
            x, y = self._pair(keep)
            cons = [*self._thread(x)]
            if a in self.nest.agents and region in (A, I, C):
                t, k = z3.Int("t"), z3.Int("k")
                kk = k if region == I else None
                if side == "outer":  # the tile may differ too (region I only)
                    place = self._place(x, a, t, kk) + self._place(y, a, z3.Int("t2"), kk)
                else:
                    place = self._place(x, a, t, kk) + self._place(y, a, t, kk)
                cons += place if sized else [v >= 0 for v in (t, k, z3.Int("t2"))]
            if sized:
                cons += [*x.where(), *y.where()]
                if mod:
                    cons.append((x.term(lf.t_expr) - y.term(lf.t_expr)) % lf.period == 0)
            try:
                if not self._unsat(cons + [self._differ(x, y, exprs)]):
                    return False
            except Timeout:
                return False
        return True

    def _deps(self, facts: NestFacts) -> str | None:
        # The inner loop's terms may read the tile (a last-tile special case): then they
        # are periodic in it far from the outer loop's end (the outer far query covers
        # region I) and part of the outer loop's end shape near it.
        tile = any(not self._same(facts, a, I, "outer", False) for a in self.nest.agents)
        facts.dep[I] = (TILE if tile else NONE, NONE)
        agents = range(len(self.model.agents))
        for region, sides in ((A, ("inner",)), (C, ("inner",)), (PRE, ("outer", "inner")),
                              (POST, ("outer", "inner")), (FREE, ("outer", "inner"))):
            got = {"outer": NONE, "inner": NONE}
            for side in sides:
                for a in agents:
                    if self._same(facts, a, region, side, False):
                        continue
                    if not self._same(facts, a, region, side, True):
                        return (f"a synchronising term of {self.model.agents[a].name} "
                                f"({region}) reads the {side} loop's sizes beyond its trip "
                                "count modulo the period")
                    got[side] = MOD
            facts.dep[region] = (got["outer"], got["inner"])
        return None

    # -- N5: the terms that name objects, periodic everywhere ---------------------------------

    def _objects(self, facts: NestFacts) -> str | None:
        """Barrier indices, slices and shared indices at any position of any size
        assignment equal those at a position with the same starts and residues of both
        loops: so one machine's atoms and futures cover every run (nest_argument.py)."""
        o, n = facts.outer, facts.inner
        for (a, region), items in self.terms.items():
            every = [e for e, value in items if not value]
            for exprs, sized in self._groups(every):
                x, y = self._pair(frozenset())
                cons = [*self._thread(x)]
                if a in self.nest.agents and region in (A, I, C):
                    ti, tq, ki, kq = z3.Ints("ti tq ki kq")
                    tj, kj = ti + o.period * tq, ki + n.period * kq
                    kx, ky = (ki, kj) if region == I else (None, None)
                    place = self._place(x, a, ti, kx) + self._place(y, a, tj, ky)
                    cons += place if sized else [ti >= 0, tj >= 0, ki >= 0, kj >= 0]
                    cons += [z3.Or(tq == 0, z3.And(ti >= o.start, tj >= o.start))]
                    if region == I:
                        cons += [z3.Or(kq == 0, z3.And(ki >= n.start, kj >= n.start))]
                if sized:
                    cons += [*x.where(), *y.where()]
                try:
                    if not self._unsat(cons + [self._differ(x, y, exprs)]):
                        return (f"a barrier index, slice or shared index of "
                                f"{self.model.agents[a].name} ({region}) depends on the "
                                "sizes beyond the loops' periods")
                except Timeout:
                    return "a query on the barrier indices and slices timed out"
        return None


def _value_ids(ins: Any) -> set[int]:
    """The terms of an instruction that are values (parities, byte counts, conditions,
    loop bounds), not names of objects."""
    if isinstance(ins, (Branch, Enter, Next)):
        return {id(e) for e in ins.sync_exprs}
    out = set()
    for f in ("parity", "tx_bytes", "nbytes"):
        e = getattr(ins.stmt, f, None)
        if isinstance(e, ir.Expr):
            out.add(id(e))
    return out
