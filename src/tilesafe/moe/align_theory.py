"""The inspector's meaning as a z3 theory, and the facts about its output proved from it.

Why: the executors of corpus/moe are proved *under* their `requires` clauses on the routing
(sorted ids, block -> expert table). Checking those clauses at every launch covers any
routing, but leaves the composition "inspector then executor" resting on a run-time check.
This module states what `tilesafe.moe.align` computes -- by definitions, not by a model of
numpy -- and proves, for every number of pairs TK, experts E and router ids, the facts an
executor's clauses can ask of it; tilesafe/moe/compose.py then discharges each clause.

The definitions (`Defs`), each conservative (a recursion on a natural number, or a choice),
so they cannot make the theory inconsistent and a "proved" cannot be vacuous:

* C(i, e): how many of the pairs 0 .. i-1 have id e (C(0, e) = 0, one step per pair);
* cnt(e) = C(TK, e); pad(e) = cnt(e) rounded up to a multiple of B;
* off(0) = 0, off(e + 1) = off(e) + pad(e); total = off(E) -- the padded exclusive scan;
* pos(i) = off(id(i)) + C(i, id(i)): where pair i lands (its rank among its expert's pairs);
* sids(p): a pair i with pos(i) = p if there is one (a choice), else the sentinel TK;
* rinv(e, r): a valid pair that is the r-th of expert e, if there is one (a choice);
* G(e, x): how many of the experts 0 .. e-1 end at or before row x; be(b) = G(E, bB) for the
  blocks before `total`, -1 after -- `np.searchsorted` / `repeat` of align.py;
* V(i, e): how many of the pairs 0 .. i-1 have a valid id below e; D(e) = cnt(0) + .. +
  cnt(e - 1).

Only *valid* pairs (0 <= id < E) are placed: align.py leaves the others out, so every fact
below is about valid pairs; a clause that needs every pair placed needs the executor's own
clause that the router ids are valid (an input, checked at launch).

The lemmas (`LEMMAS`) are proved by induction -- a base case and a step, each one z3 query
over ground instances of the definitions -- or directly from earlier lemmas, and are then
given to the obligations as quantified facts with E-matching patterns on uninterpreted
terms only (tilesafe/moe/compose.py). Every query has a resource limit: an answer other
than unsat leaves the lemma, and everything that uses it, unproved (never assumed).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import z3

RLIMIT = 2_000_000  # z3 resource units per query (deterministic, unlike a timeout)



def _fn(name: str, arity: int) -> z3.FuncDeclRef:
    """An integer function, made in z3's context at the time (Defs are made inside
    `fresh_z3_context`, so no sort may be made at import)."""
    return z3.Function(name, *[z3.IntSort()] * (arity + 1))


def _fnf(name: str, arity: int) -> Any:
    return field(default_factory=lambda: _fn(name, arity))


@dataclass(frozen=True)
class Defs:
    """The theory's symbols. `block` (B) is a number: the executor's block is a constant."""

    block: int
    tk: z3.ArithRef = field(default_factory=lambda: z3.Int("TK"))
    experts: z3.ArithRef = field(default_factory=lambda: z3.Int("E"))
    total: z3.ArithRef = field(default_factory=lambda: z3.Int("total"))
    ids: z3.FuncDeclRef = _fnf("id", 1)
    count: z3.FuncDeclRef = _fnf("C", 2)
    off: z3.FuncDeclRef = _fnf("off", 1)
    pos: z3.FuncDeclRef = _fnf("pos", 1)
    sids: z3.FuncDeclRef = _fnf("sids", 1)
    ends: z3.FuncDeclRef = _fnf("G", 2)
    be: z3.FuncDeclRef = _fnf("be", 1)
    rank_pair: z3.FuncDeclRef = _fnf("rinv", 2)
    valid_below: z3.FuncDeclRef = _fnf("V", 2)
    dsum: z3.FuncDeclRef = _fnf("D", 1)

    # ---- the definitions, as ground instances ------------------------------------------

    def valid(self, i: z3.ArithRef) -> z3.BoolRef:
        """Pair i exists and its id names an expert."""
        return z3.And(0 <= i, i < self.tk, 0 <= self.ids(i), self.ids(i) < self.experts)

    def cnt(self, e: z3.ArithRef) -> z3.ArithRef:
        return self.count(self.tk, e)

    def pad(self, e: z3.ArithRef) -> z3.ArithRef:
        b = self.block
        return (self.cnt(e) + (b - 1)) / b * b  # cnt >= 0 (lemma count_nonneg): floor

    def base(self) -> list[z3.BoolRef]:
        """The facts that hold without a step: sizes, the first values, `total`, `pos`."""
        return [self.tk >= 0, self.experts >= 1, self.off(0) == 0,
                self.total == self.off(self.experts)]

    def count_step(self, i: z3.ArithRef, e: z3.ArithRef) -> z3.BoolRef:
        return z3.Implies(z3.And(0 <= i, i < self.tk), self.count(i + 1, e) == self.count(
            i, e) + z3.If(self.ids(i) == e, 1, 0))

    def count_zero(self, e: z3.ArithRef) -> z3.BoolRef:
        return self.count(0, e) == 0

    def off_step(self, e: z3.ArithRef) -> z3.BoolRef:
        return z3.Implies(z3.And(0 <= e, e < self.experts),
                          self.off(e + 1) == self.off(e) + self.pad(e))

    def pos_def(self, i: z3.ArithRef) -> z3.BoolRef:
        return self.pos(i) == self.off(self.ids(i)) + self.count(i, self.ids(i))

    def sids_def(self, p: z3.ArithRef) -> z3.BoolRef:
        """The choice: sids(p) is the sentinel or a valid pair that lands at p ..."""
        s = self.sids(p)
        return z3.Or(s == self.tk, z3.And(self.valid(s), self.pos(s) == p))

    def sids_choice(self, i: z3.ArithRef) -> z3.BoolRef:
        """... and it is not the sentinel where some valid pair lands."""
        return z3.Implies(self.valid(i), self.sids(self.pos(i)) != self.tk)

    def rank_pair_def(self, e: z3.ArithRef, r: z3.ArithRef, i: z3.ArithRef) -> z3.BoolRef:
        """The choice: if pair i is the r-th (from 0) of expert e, rinv(e, r) is such a pair."""
        j = self.rank_pair(e, r)
        return z3.Implies(z3.And(self.valid(i), self.ids(i) == e, self.count(i, e) == r),
                          z3.And(self.valid(j), self.ids(j) == e, self.count(j, e) == r))

    def ends_zero(self, x: z3.ArithRef) -> z3.BoolRef:
        return self.ends(0, x) == 0

    def ends_step(self, e: z3.ArithRef, x: z3.ArithRef) -> z3.BoolRef:
        return z3.Implies(z3.And(0 <= e, e < self.experts), self.ends(e + 1, x) == self.ends(
            e, x) + z3.If(self.off(e + 1) <= x, 1, 0))

    def be_def(self, b: z3.ArithRef) -> z3.BoolRef:
        row = b * self.block
        return self.be(b) == z3.If(row >= self.total, -1, self.ends(self.experts, row))

    def valid_below_zero(self, e: z3.ArithRef) -> z3.BoolRef:
        return self.valid_below(0, e) == 0

    def valid_below_step(self, i: z3.ArithRef, e: z3.ArithRef) -> z3.BoolRef:
        hit = z3.And(0 <= self.ids(i), self.ids(i) < e)
        return z3.Implies(z3.And(0 <= i, i < self.tk), self.valid_below(i + 1, e) ==
                          self.valid_below(i, e) + z3.If(hit, 1, 0))

    def dsum_step(self, e: z3.ArithRef) -> z3.BoolRef:
        return z3.And(self.dsum(0) == 0, z3.Implies(
            z3.And(0 <= e, e < self.experts), self.dsum(e + 1) == self.dsum(e) + self.cnt(e)))


