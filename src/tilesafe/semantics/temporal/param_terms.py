"""Conditions 1 and 2 of the argument for every trip count (docs/temporal.md §4), by z3:
the trip-count group, and the synchronising terms periodic in the iteration and independent
of the trip count far from the loop's end.

Why its own module: these are the facts the explorations rely on and cannot check
themselves -- that one explored system stands for every size assignment with the same
trip count class. They are universally quantified questions over two copies of the sizes
(param_smt.py); only `unsat` proves one, and every proof is kept as SMT-LIB.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import z3

from tilesafe.frontend import ir
from tilesafe.semantics.temporal.events import Model, compile_expr, free_vars
from tilesafe.semantics.temporal.instrs import Wait
from tilesafe.semantics.temporal.param_outcome import Outcome
from tilesafe.semantics.temporal.param_sizes import SizeSearch
from tilesafe.semantics.temporal.param_smt import (
    Enc,
    Timeout,
    check,
    divisor_product,
    divisors,
    prove_unsat,
    shape,
    show,
    solver,
    trip_expr,
)

G_CANDIDATES = (0, 1, 2, 3, 4, 6, 8, 12, 16, 24, 32)
# Start margins H: terms may depend on the iteration itself below H (a warm-up such as a
# producer's `if k >= STAGES { wait empty[s] ... }`), and only on (i mod L, T - i) from H on.
H_CANDIDATES = (0, 1, 2, 3, 4, 6, 8, 12, 16)
_TERMS: dict[tuple[int, bool], tuple[ir.Kernel, tuple]] = {}  # TermConditions.terms, memoised


@dataclass
class Group:
    t_expr: ir.Expr  # T(sizes)
    offsets: dict[int, int]  # agent -> c_r
    loops: dict[int, ir.For]


@dataclass
class Periodicity:
    """What condition 2 established: period L, far margin G, start margin H, and the half
    period of the parity symmetry (None without it)."""

    period: int | None = None
    margin: int | None = None
    start: int = 0
    sym: int | None = None


class TermConditions:
    """The z3 conditions of one model; results land in `out` (queries, argument)."""

    def __init__(self, model: Model, out: Outcome, ms: Callable[[], int],
                 sizes: SizeSearch) -> None:
        self.model = model
        self.k = model.kernel
        self.out = out
        self.ms = ms
        self.sizes = sizes
        self.per = Periodicity()

    # -- kernels without parametric loops ----------------------------------------------------

    def size_independent(self, exprs: list[ir.Expr]) -> bool:
        shared: dict = {}
        a = Enc(self.k, self.model, "", shared)
        b = Enc(self.k, self.model, "_2", shared)
        s = solver(self.ms())
        s.add(*a.where(), *b.where())
        self.thread_range(s, shared)
        s.add(z3.Or([a.term(e) != b.term(e) for e in exprs]))
        return check(s, self.out.queries) == z3.unsat

    def thread_range(self, s: z3.Solver, shared: dict) -> None:
        if "thread" in shared:
            s.add(shared["thread"] >= 0, shared["thread"] < self.k.block)

    # -- 1. the trip-count group -------------------------------------------------------------

    def group(self) -> tuple[Group | None, str]:
        per_agent: dict[int, list] = {}
        for sl in self.model.sym_loops:
            if sl.nested:
                return None, (f"the loop at line {sl.stmt.span.line} has a size-dependent trip "
                              "count and sits inside another loop that synchronises")
            per_agent.setdefault(sl.agent, []).append(sl.stmt)
        for a, loops in per_agent.items():
            if len({id(x) for x in loops}) > 1:
                return None, (f"{self.model.agents[a].name} runs several loops with "
                              "size-dependent trip counts")
        loops = {a: ls[0] for a, ls in per_agent.items()}
        ref = next(iter(loops.values()))
        t_expr = trip_expr(ref)
        offsets: dict[int, int] = {}
        for a, loop in loops.items():
            for e in (loop.lo, loop.hi):
                if free_vars(e, self.model.lets) - {f"size:{n}" for n in self.k.sizes}:
                    return None, (f"the bounds of the loop at line {loop.span.line} depend on "
                                  "more than the sizes")
            c = self.offset(t_expr, trip_expr(loop))
            if c is None:
                return None, (f"the trip counts of the loops at lines {ref.span.line} and "
                              f"{loop.span.line} do not differ by a constant")
            offsets[a] = c
        return Group(t_expr, offsets, loops), ""

    def offset(self, t_ref: ir.Expr, t_other: ir.Expr) -> int | None:
        if shape(t_ref) == shape(t_other):
            return 0
        sizes = self.sizes.some([])
        if sizes is None:
            return None
        c = (compile_expr(t_other, self.model.lets)(sizes)
             - compile_expr(t_ref, self.model.lets)(sizes))
        enc = Enc(self.k, self.model, "", {})
        s = solver(self.ms())
        s.add(*enc.where())
        s.add(enc.term(t_other) - enc.term(t_ref) != c)
        return int(c) if check(s, self.out.queries) == z3.unsat else None

    # -- 2. periodic and far-field terms -----------------------------------------------------

    def positions(self) -> dict[str, list[tuple[int, ir.Expr]]]:
        out: dict[str, list] = {"in": [], "pre": [], "post": []}
        for a, ag in enumerate(self.model.agents):
            p = ag.param_loop
            for pc, ins in enumerate(ag.code):
                if p is not None and pc in (p[0], p[1]):
                    continue
                if not ins.sync_exprs:
                    continue
                if p is None or pc < p[0]:
                    pos = "pre"
                elif pc > p[1]:
                    pos = "post"
                else:
                    pos = "in"
                for e in ins.sync_exprs:
                    out[pos].append((a, e))
        return out

    def terms(self, group: Group) -> tuple[bool, str]:
        """Condition 2, memoised per kernel and semantics: a reduced search of the kernel
        (semantics/temporal/reduce.py) and the unreduced one ask the same z3 questions."""
        key = (id(self.k), self.model.ownership)
        hit = _TERMS.get(key)
        if hit is not None and hit[0] is self.k:
            ok, why, per, arg = hit[1]
            self.per = Periodicity(per.period, per.margin, per.start, per.sym)
            self.out.argument.update(arg)
            return ok, why
        ok, why = self._terms_uncached(group)
        if len(_TERMS) > 64:
            _TERMS.clear()
        _TERMS[key] = (self.k, (ok, why, Periodicity(self.per.period, self.per.margin,
                                                      self.per.start, self.per.sym),
                                dict(self.out.argument)))
        return ok, why

    def _terms_uncached(self, group: Group) -> tuple[bool, str]:
        pos = self.positions()
        lets = self.model.lets
        for where_ in ("in", "pre", "post"):
            for _, e in pos[where_]:
                if free_vars(e, lets) & {"data", "block"}:
                    return False, (f"a synchronising term at line {e.span.line} depends on "
                                   "memory or the block index")
        l0 = 1
        for a, e in pos["in"]:
            l0 = math.lcm(l0, divisor_product(e, group.loops[a].var.uid, lets))
        for _, e in pos["post"]:
            l0 = math.lcm(l0, divisor_product(e, None, lets))
        l0 = min(l0, 1 << 12)
        period = None
        # The least period that z3 accepts (any accepted one is sound; a smaller one means
        # fewer levels and tails, e.g. a stage projection's (8k / 8) % 2 has period 2).
        for cand in sorted(divisors(l0)):
            if not self.query_post(group, pos["post"], cand):
                continue
            self.per.start = H_CANDIDATES[-1]  # with the largest margin first: one query per L
            try:
                if not self.query_in(group, pos["in"], cand, None):
                    continue
            except Timeout:
                continue
            for h in H_CANDIDATES:
                self.per.start = h
                try:
                    if self.query_in(group, pos["in"], cand, None):
                        period = cand
                        break
                except Timeout:  # not shown for this (L, H): try the next, never assume it
                    if h == 0:
                        raise
                    continue
            if period is not None:
                break
        if period is None:
            self.per.start = 0
            return False, ("a synchronising term is not periodic in the loop iteration (tried "
                           f"periods dividing {l0})")
        margin = None
        for g in G_CANDIDATES:
            if self.query_in(group, pos["in"], period, g) and \
                    self.query_pre(group, pos["pre"], g):
                margin = g
                break
        if margin is None:
            return False, "a synchronising term depends on the trip count even far from the end"
        self.per.period, self.per.margin = period, margin
        self.per.sym = self._symmetry(group, pos, period)
        self.out.argument.update({"L": period, "G": margin, "H": self.per.start,
                                  "T": show(group.t_expr),
                                  "parity symmetry": (f"shift by {self.per.sym} + flip every "
                                                      "parity bit" if self.per.sym else None),
                                  "offsets": {self.model.agents[a].name: c
                                              for a, c in group.offsets.items()}})
        return True, ""

    def _symmetry(self, group: Group, pos: dict, period: int) -> int | None:
        """Half a period, when shifting the loops by it and flipping every barrier's parity
        bit maps the system onto itself: every wait parity in or after the loops is
        anti-periodic with period/2 and every other synchronising term periodic with it."""
        if period % 2:
            return None
        half = period // 2
        parities = {id(ins.stmt.parity) for ag in self.model.agents for ins in ag.code
                    if isinstance(ins, Wait)}
        lets = self.model.lets
        par_in = [(a, e) for a, e in pos["in"] if id(e) in parities]
        other_in = [(a, e) for a, e in pos["in"] if id(e) not in parities]
        par_post = [(a, e) for a, e in pos["post"] if id(e) in parities]
        other_post = [(a, e) for a, e in pos["post"] if id(e) not in parities]
        if any(any(v.startswith("size:") for v in free_vars(e, lets)) for _, e in par_in):
            return None
        if not par_in:
            return None
        if not self.query_in(group, other_in, half, None):
            return None
        if not self.query_in(group, other_in, half, self.per.margin):
            return None
        if not self.query_post(group, other_post, half):
            return None
        for a, e in par_in:
            loop = group.loops[a]
            x = Enc(self.k, self.model, "", {})
            y = Enc(self.k, self.model, "", x.shared)
            i = z3.Int("i")
            x.loops[loop.var.uid] = x.term(loop.lo) + loop.step * i
            y.loops[loop.var.uid] = y.term(loop.lo) + loop.step * (i + half)
            cons = [i >= self.per.start, y.term(e) != 1 - x.term(e)]
            if not prove_unsat(cons, self.ms(), self.out.queries):
                return None
        for _, e in par_post:
            shared: dict = {}
            x, y = Enc(self.k, self.model, "", shared), Enc(self.k, self.model, "_2", shared)
            tx, ty = x.term(group.t_expr), y.term(group.t_expr)
            cons = [*x.where(), *y.where(), ty - tx == half, y.term(e) != 1 - x.term(e)]
            if not prove_unsat(cons, self.ms(), self.out.queries):
                return None
        return half

    def query_in(self, group: Group, items: list, period: int, far: int | None) -> bool:
        """Terms inside the parametric loops depend on (i mod L, T - i) only (far None),
        or on i mod L only once T - i >= far. Terms without sizes need no sizes in the
        query (one small query per agent); each size-dependent term gets its own query."""
        lets = self.model.lets
        by_agent: dict[int, list[ir.Expr]] = {}
        sized: list[tuple[int, ir.Expr]] = []
        for a, e in items:
            if any(v.startswith("size:") for v in free_vars(e, lets)):
                sized.append((a, e))
            else:
                by_agent.setdefault(a, []).append(e)
        if far is None:
            for a, exprs in by_agent.items():
                if not self._in_query(group, a, exprs, period, None, with_sizes=False):
                    return False
        for a, e in sized:
            if not self._in_query(group, a, [e], period, far, with_sizes=True):
                return False
        return True

    def _in_query(self, group: Group, a: int, exprs: list[ir.Expr], period: int,
                  far: int | None, with_sizes: bool) -> bool:
        loop = group.loops[a]
        shared: dict = {}
        x, y = Enc(self.k, self.model, "", shared), Enc(self.k, self.model, "_2", shared)
        i, q = z3.Int("i"), z3.Int("q")
        j = i + period * q
        x.loops[loop.var.uid] = x.term(loop.lo) + loop.step * i
        y.loops[loop.var.uid] = y.term(loop.lo) + loop.step * j
        cons = [i >= 0, j >= 0]
        h = self.per.start
        if far is None:
            cons += [i >= h, j >= h]  # below the start margin the iteration itself may matter
        else:  # the same iteration in two trip counts, or two periodic ones past the start
            cons += [z3.Or(q == 0, z3.And(i >= h, j >= h))]
        if with_sizes:
            tx, ty = x.term(group.t_expr), y.term(group.t_expr)
            c = group.offsets[a]
            cons += [*x.where(), *y.where(), i < tx + c, j < ty + c]
            cons += [tx - i == ty - j] if far is None else [tx - i >= far, ty - j >= far]
        diff = z3.Or([x.term(e) != y.term(e) for e in exprs])
        if "thread" in shared:
            cons += [shared["thread"] >= 0, shared["thread"] < self.k.block]
        return prove_unsat(cons + [diff], self.ms(), self.out.queries)

    def query_pre(self, group: Group, items: list, far: int) -> bool:
        if not items:
            return True
        shared: dict = {}
        x, y = Enc(self.k, self.model, "", shared), Enc(self.k, self.model, "_2", shared)
        s = solver(self.ms())
        s.add(*x.where(), *y.where(), x.term(group.t_expr) >= far,
              y.term(group.t_expr) >= far)
        diffs = [x.term(e) != y.term(e) for _, e in items]
        self.thread_range(s, shared)
        s.add(z3.Or(diffs))
        return check(s, self.out.queries) == z3.unsat

    def query_post(self, group: Group, items: list, period: int) -> bool:
        if not items:
            return True
        shared: dict = {}
        x, y = Enc(self.k, self.model, "", shared), Enc(self.k, self.model, "_2", shared)
        s = solver(self.ms())
        tx, ty = x.term(group.t_expr), y.term(group.t_expr)
        s.add(*x.where(), *y.where(), (tx - ty) % period == 0)
        diffs = [x.term(e) != y.term(e) for _, e in items]
        self.thread_range(s, shared)
        s.add(z3.Or(diffs))
        return check(s, self.out.queries) == z3.unsat
