"""The classes of trip counts and the end *shapes* of each loop of a nest: finitely many
size assignments whose runs stand for every size assignment `where` allows.

Why: far from its end a loop's terms depend on the iteration's residue only (nest_terms.py);
near the end they may depend on the sizes in ways the trip count does not capture -- the
flagship GEMM's k-loop runs 8 ceil(K / 512) steps, the last ceil(K / 64) mod 8 of them
without data, and its last tile stores only the quarters below N. A *shape* is what the
terms within `eff` of the end (and those the loop's class decides) evaluate to; z3
enumerates one size assignment per shape of each class, blocking the shapes found (a new
one must differ from every representative somewhere near the end), until no other exists.
The classes: each small trip count on its own, and past a threshold one class per residue
modulo the period (nest_argument.py picks both from what the runs needed).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import z3

from tilesafe.semantics.temporal.events import Model
from tilesafe.semantics.temporal.nest import A, C, I, Nest
from tilesafe.semantics.temporal.nest_terms import TILE, LoopFacts, NestFacts, NestTerms, _Enc
from tilesafe.semantics.temporal.param_sizes import SizeSearch
from tilesafe.semantics.temporal.param_smt import Enc, Timeout, smt2_with_status

MAX_SHAPES = 16  # per class: more is UNKNOWN
MAX_SMALL = 96  # small trip counts explored one by one
HUGE = 1 << 20  # the trip count a large class's representative aims at


@dataclass(frozen=True)
class LoopClass:
    """Trip counts T of one loop: "upto" T <= value (every loop empty), "small" T == value,
    "large" T >= thr with T % period == value."""

    kind: str
    value: int
    period: int = 1
    thr: int = 0

    def holds(self, t: Any) -> Any:
        if self.kind == "upto":
            return t <= self.value
        if self.kind == "small":
            return t == self.value
        return z3.And(t >= self.thr, t % self.period == self.value)

    def text(self) -> str:
        if self.kind == "upto":
            return f"T <= {self.value}"
        if self.kind == "small":
            return f"T = {self.value}"
        return f"T >= {self.thr}, T = {self.value} mod {self.period}"


class Shapes:
    """Classes and shape representatives of the loops of one nest."""

    def __init__(self, model: Model, nest: Nest, facts: NestFacts, terms: NestTerms,
                 sizes: SizeSearch, queries: list[str], ms: Callable[[], int]) -> None:
        self.model = model
        self.k = model.kernel
        self.nest = nest
        self.facts = facts
        self.terms = terms
        self.sizes = sizes
        self.queries = queries
        self.ms = ms

    # -- classes ------------------------------------------------------------------------------

    def classes(self, lf: LoopFacts, thr: int, period: int) -> list[LoopClass] | str:
        lo, hi = self.sizes.min_trip(lf.t_expr), self.sizes.max_trip(lf.t_expr)
        if lo is None:
            return "no sizes satisfy the 'where' clause"
        lo_eff = max(lo, -max(lf.offsets.values()))
        out: list[LoopClass] = []
        if lo < lo_eff:
            out.append(LoopClass("upto", lo_eff - 1))
        top = thr - 1 if hi is None else min(thr - 1, hi)
        if top - lo_eff + 1 > MAX_SMALL:
            return f"too many small trip counts of the {lf.name} loop to explore one by one"
        for v in range(lo_eff, top + 1):
            if self.sizes.for_trip(lf.t_expr, v) is not None:
                out.append(LoopClass("small", v))
        if hi is None or hi >= thr:
            for r in range(period):
                cls = LoopClass("large", r, period, max(thr, lo_eff))
                if self.sizes.some([lambda enc, c=cls: c.holds(enc.term(lf.t_expr))],
                                   small=False) is not None:
                    out.append(cls)
        return out

    # -- shapes -------------------------------------------------------------------------------

    def reps(self, lf: LoopFacts, cls: LoopClass) -> list[dict[str, int]] | str:
        """One size assignment per shape of the class (large classes: with T as large as
        the class allows first, so that their runs reach the periodic middle)."""
        found: list[dict[str, int]] = []
        phases = [None]
        if cls.kind == "large":
            big = self._largest(lf, cls)
            if big is not None:
                phases = [max(cls.thr, big - 2 * cls.period), None]
        for floor in phases:
            while True:
                if len(found) > MAX_SHAPES:
                    return (f"more than {MAX_SHAPES} end shapes of the {lf.name} loop for "
                            f"{cls.text()}")
                new = self._another(lf, cls, found, floor)
                if new is None:
                    break
                found.append(new)
        return found

    def _largest(self, lf: LoopFacts, cls: LoopClass) -> int | None:
        enc = Enc(self.k, self.model, "", {})
        s = z3.Optimize()
        s.set("timeout", self.ms())
        t = enc.term(lf.t_expr)
        s.add(*enc.where(), cls.holds(t), t <= HUGE)
        h = s.maximize(t)
        if s.check() != z3.sat:
            return None
        return s.upper(h).as_long()

    def _another(self, lf: LoopFacts, cls: LoopClass, found: list[dict[str, int]],
                 floor: int | None) -> dict[str, int] | None:
        x = Enc(self.k, self.model, "", {})
        t = x.term(lf.t_expr)
        s = z3.Solver()
        s.set("timeout", self.ms())
        s.add(*x.where(), cls.holds(t))
        if floor is not None:
            s.add(t >= floor)
        for j, rep in enumerate(found):
            s.add(z3.Or(self._differs(lf, x, rep, j) or [z3.BoolVal(False)]))
        res = s.check()
        self.queries.append(smt2_with_status(s, res))
        if res == z3.unknown:
            raise Timeout(f"end shapes of the {lf.name} loop")
        if res != z3.sat:
            return None
        mdl = s.model()
        return {n: mdl.eval(v, model_completion=True).as_long() for n, v in x.sizes.items()}

    def _differs(self, lf: LoopFacts, x: Enc, rep: dict[str, int], j: int) -> list:
        """Ways the candidate `x` differs from representative `rep` within `eff` of the
        loop's end: some term of some class at the same distance from the end (the other
        loop's sizes and position shared)."""
        inner = lf is self.facts.inner
        other = self.facts.outer.sizes if inner else self.facts.inner.sizes
        out = []
        tile = self.facts.dep[I][0] == TILE  # the inner loop's terms read the tile too
        for a in self.nest.agents:
            for region in ((I,) if inner else (A, C, I) if tile else (A, C)):
                # Terms that read no size are equal at equal distances from the end within
                # a class (equal T, or T equal mod the period with every iteration past the
                # start margin): only those that read sizes can make shapes.
                exprs = [e for e, _ in self.terms.terms.get((a, region), [])
                         if any(v.startswith("size:") for v in self.terms._reads(e))]
                if not exprs:
                    continue
                tag = f"_{j}_{a}_{region}"
                shared: dict = {}
                xj = _Enc(self.k, self.model, "", shared, tag)
                yj = _Enc(self.k, self.model, "", shared, tag)
                xj.sizes = x.sizes
                yj.sizes = {n: (x.sizes[n] if n in other else z3.IntVal(rep[n]))
                            for n in x.sizes}
                d = z3.Int("d" + tag)
                tx, ty = xj.term(lf.t_expr), yj.term(lf.t_expr)
                if inner:
                    pos = z3.Int("t" + tag)
                    cons = (self.terms._place(xj, a, pos, tx - d)
                            + self.terms._place(yj, a, pos, ty - d))
                else:
                    kk = z3.Int("k" + tag) if region == I else None
                    cons = (self.terms._place(xj, a, tx - d, kk)
                            + self.terms._place(yj, a, ty - d, kk))
                cons += [d >= 1, d <= lf.eff, *self.terms._thread(xj)]
                out.append(z3.And(*cons, self.terms._differ(xj, yj, exprs)))
        return out
