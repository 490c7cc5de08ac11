"""Verdicts for EVERY trip count: explicit exploration plus a periodicity argument.

Why: a pipelined loop `for k in 0 .. N / 64` has a trip count T that is unbounded, so no
single exploration covers all sizes. The argument implemented here (docs/temporal.md gives
the full statement and its soundness conditions):

1. Trip-count group (z3). Every loop that synchronises and whose bounds depend on the sizes
   (a "parametric loop") is at the top of its agent's program (not nested in a kept loop),
   at most one per agent, and all their trip counts equal T + c_r for ONE quasi-affine
   T(sizes) and constants c_r, for every size assignment the `where` clause allows.
2. Periodic, far-field terms (z3). Every synchronising term (barrier index, parity, byte
   count, branch condition, TMA slice, shared-memory index for ownership) at iteration i of a
   parametric loop depends only on (i mod L, T - i), and only on i mod L once T - i >= G;
   terms before the loops only on T once T >= G; terms after them only on T mod L. These
   are universally quantified queries over two copies of the sizes; unsat proves them.
3. Level sets (explicit). The level of a state is the least iteration reached by the agents
   with a parametric loop. Levels never decrease and rise by at most one per step, so the
   set of reachable states at level m+1 is a function of the set at level m. For one huge
   trip count the level sets are computed one by one, normalised (iterations relative to m,
   plus m mod L); once the set at m0+P equals the set at m0 (P a multiple of L) the whole
   sequence is periodic, and the largest drift D between agents is known.
4. Window. A system with trip count T agrees with the huge one on every level up to
   M_T = T - K, K = D + max(G, 2 - min c_r). So: small T (M_T < 0) are explored in full;
   larger T need only the tail from the level set at M_T, and tails repeat with period P
   once M_T >= m0. The union covers every T the `where` clause allows.
Anything outside these conditions gives UNKNOWN (never PROVED), with the reason.

The parts, one job each: param_smt.py (z3 encoding and proofs), param_sizes.py (size
assignments), param_terms.py (conditions 1-2), param_levels.py (step 3), this module (the
order of the explorations and what they add up to: step 4 and the fallbacks), and
param_outcome.py (the records the checkers read).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from fractions import Fraction

import z3

from tilesafe.semantics.temporal.budget import Budget, BudgetExceeded
from tilesafe.semantics.temporal.events import Model, free_vars
from tilesafe.semantics.temporal.explore import (
    Machine,
    SearchResult,
    Stats,
    finding_key,
    path_to,
    search,
)
from tilesafe.semantics.temporal.explore.state import CLASS, order_key
from tilesafe.semantics.temporal.nest_argument import nested
from tilesafe.semantics.temporal.param_levels import (
    HUGE_TRIP,
    Levels,
    prefix,
    share_atoms,
)
from tilesafe.semantics.temporal.param_outcome import Config, Outcome
from tilesafe.semantics.temporal.param_sizes import SizeSearch
from tilesafe.semantics.temporal.param_smt import Enc, Timeout, smt2_with_status
from tilesafe.semantics.temporal.param_terms import Group, TermConditions


class Argument:
    """Builds the explorations for one model and combines them into one Outcome."""

    def __init__(self, model: Model, por: bool, max_states: int, timeout_ms: int,
                 budget: Budget | None = None) -> None:
        self.model = model
        self.k = model.kernel
        self.por = por
        # One budget for every search of this argument (and, when the checker passes its
        # own, of the whole verification): max_states bounds their sum, not each one.
        self.budget = budget if budget is not None else Budget(max_states=max_states)
        self.max_states = max_states if budget is None else (budget.max_states or max_states)
        self.timeout_ms = timeout_ms
        self.out = Outcome(True, "")
        self.sizes = SizeSearch(model, self._ms)
        self.cond = TermConditions(model, self.out, self._ms, self.sizes)
        self._point_budget = 1500
        self._done_full: set[int] = set()

    # -- entry -------------------------------------------------------------------------------

    def run(self) -> Outcome:
        t0 = time.perf_counter()
        try:
            self._run()
        except Timeout as exc:
            self.out.complete = False
            self.out.reason = f"solver gave up: {exc} (raise --query-timeout)"
            try:
                self.budget.check()
            except BudgetExceeded as spent:  # the query was cut short by the budget
                self._spent(spent.reason)
        except BudgetExceeded as exc:
            self._spent(exc.reason)
        if not self.out.complete and not self.out.budget:
            try:  # a query cut short by the time left reads as "unknown" elsewhere too
                self.budget.check()
            except BudgetExceeded as exc:
                self._spent(exc.reason)
        self.out.seconds = time.perf_counter() - t0
        return self.out

    def _spent(self, reason: str) -> None:
        self.out.complete = False
        self.out.reason = reason
        self.out.budget = True

    def _ms(self) -> int:
        """A solver query's timeout: the per-query one, capped by the time budget left."""
        return self.budget.remaining_ms(self.timeout_ms)

    def _run(self) -> None:
        sym = self.model.sym_loops
        if not sym:
            self._no_loops()
            return
        group, why = self.cond.group()
        if group is None:
            # A size-dependent loop inside another synchronising one: the nested argument
            # (docs/temporal.md §15) when the model is a nest of two such loops.
            if any(sl.nested for sl in sym) and nested(self):
                return
            self._fallback(why)
            return
        argument_ok, why = self.cond.terms(group)
        if not argument_ok:
            self._fallback(why, group)
            return
        # Small trip counts first: a bug usually shows within a few iterations, and a buggy
        # protocol can make the level sets huge. Once refuted, the argument is moot.
        if self._window_first(group):
            self.out.complete = False
            self.out.reason = ("refuted at a small trip count; the argument for every trip "
                               "count was skipped")
            return
        self._periodic(group)

    # -- kernels whose synchronisation has no size-dependent loop -------------------------------

    def _no_loops(self) -> None:
        exprs = [e for a, ag in enumerate(self.model.agents) for ins in ag.code
                 for e in ins.sync_exprs]
        sized = [e for e in exprs if any(v.startswith("size:") for v in
                                         free_vars(e, self.model.lets))]
        sizes = self.sizes.some([])
        if sizes is None:
            self.out.complete = False
            self.out.reason = "no sizes satisfy the 'where' clause"
            return
        if sized:
            ok = self.cond.size_independent(sized)
            if not ok:
                self.out.complete = False
                self.out.reason = (f"a synchronising term (line {sized[0].span.line}) depends "
                                   "on the sizes; explored one size assignment only")
        self.out.argument = {"kind": "no parametric loop: one exploration covers all sizes",
                             "sizes": sizes}
        self._explore(Config(sizes, None, "full"))

    # -- 3 + 4. level sets and the window ---------------------------------------------------

    def _periodic(self, group: Group) -> None:
        lo, hi = self.sizes.min_trip(group.t_expr), self.sizes.max_trip(group.t_expr)
        if lo is None:
            self.out.complete = False
            self.out.reason = "no sizes satisfy the 'where' clause"
            return
        if hi is not None and hi - lo <= 24:
            self._bounded(group, lo, hi)  # few trip counts: explore each one outright
            return
        t_far = HUGE_TRIP if hi is None else min(hi, HUGE_TRIP)
        big = self.sizes.for_trip(group.t_expr, t_far)
        if big is None:
            self._fallback("no size assignment reaches a large trip count", group)
            return
        per = self.cond.per
        t_big = self.sizes.eval_t(group.t_expr, big)
        mach = Machine(self.model, big, period=per.period + per.start)
        levels = Levels(mach, group, per, self.por, self.budget)
        levels.t_far = t_big + min(group.offsets.values())
        ok, why = levels.run()
        self.out.budget = self.out.budget or levels.spent
        self.out.states += levels.states
        self.out.transitions += levels.transitions
        for f in levels.findings.values():
            lvl = levels.finding_level.get(finding_key(f), 0)
            self.out.findings.append((f, Config(big, t_big, f"level {lvl}"), mach))
        if not ok:
            self.out.complete = False
            self.out.reason = why
            self._window_only(group)
            return
        m0, period, drift = levels.m0, levels.p, levels.drift
        c_min = min(group.offsets.values())
        k = drift + max(per.margin, 2 - c_min)
        self.out.argument.update({"m0": m0, "P": period, "D": drift, "K": k,
                                  "levels": len(levels.sets),
                                  "level sizes": [len(x) for x in levels.sets]})
        hi_full = k - 1
        explored = []
        # Small trip counts: full explorations.
        lo_eff = max(lo, -max(group.offsets.values())) if lo is not None else None
        if lo is None:
            lo_eff = -max(group.offsets.values())
        if lo is not None and lo < lo_eff:  # every loop empty: one representative
            sizes = self.sizes.some([lambda enc: enc.term(group.t_expr) <= lo_eff])
            if sizes is not None:
                explored.append(self.sizes.eval_t(group.t_expr, sizes))
                self._explore(Config(sizes, explored[-1], "full"))
        for t in range(lo_eff, hi_full + 1):
            sizes = self.sizes.for_trip(group.t_expr, t)
            if sizes is None:
                continue
            explored.append(t)
            if t not in self._done_full:
                self._explore(Config(sizes, t, "full"))
        # Larger trip counts: tails from the level set at M_T = T - K. Past the pre-periodic
        # levels a tail stands for its whole residue class mod P: explore it for any allowed
        # member of the class, from the level set shifted there.
        tails = []
        for t in range(k, k + m0 + period):
            mt = t - k
            if mt < m0:
                sizes = self.sizes.for_trip(group.t_expr, t)
            else:
                sizes = self.sizes.some([lambda enc, t=t: enc.term(group.t_expr) >= t,
                                         lambda enc, t=t: (enc.term(group.t_expr) - t)
                                         % period == 0])
            if sizes is None:
                continue
            real_t = self.sizes.eval_t(group.t_expr, sizes)
            if real_t in self._done_full and sizes == self.sizes.for_trip(group.t_expr, real_t):
                # Explored in full already (the small trip counts tried first): every state
                # of this system was reached from its initial state, which is more than the
                # tail from level M_T would cover (issue 19: the same states twice).
                explored.append(real_t)
                continue
            shift = real_t - t
            tmach = Machine(self.model, sizes, period=per.period + per.start)
            share_atoms(tmach, mach)
            roots = sorted((levels.shift(st, shift) for st in levels.sets[mt]), key=order_key)
            res = search(tmach, roots, self.por, self.max_states, budget=self.budget)
            self._absorb(res, Config(sizes, real_t, f"tail from level {mt + shift}"), tmach,
                         levels=levels if shift == 0 else None)
            tails.append(real_t)
        self.out.argument.update({"full trip counts": explored, "tail trip counts": tails,
                                  "covers": "every trip count allowed by 'where'"})
        self.out.argument["big T"] = t_big

    def _bounded(self, group: Group, lo: int, hi: int) -> None:
        explored = []
        for t in range(lo, hi + 1):
            sizes = self.sizes.for_trip(group.t_expr, t)
            if sizes is not None:
                explored.append(t)
                if t not in self._done_full:
                    self._explore(Config(sizes, t, "full"))
        self.out.argument.update({"kind": "every allowed trip count explored",
                                  "full trip counts": explored})

    def _window_first(self, group: Group, width: int = 4) -> bool:
        """Explore the smallest allowed trip counts; True when something was found."""
        lo = self.sizes.min_trip(group.t_expr)
        if lo is None:
            return False
        lo = max(lo, -max(group.offsets.values()))
        for t in range(lo, lo + width):
            sizes = self.sizes.for_trip(group.t_expr, t)
            if sizes is not None:
                self._explore(Config(sizes, t, "full"))
                self._done_full.add(t)
                # A candidate (semantics/temporal/witness.py) may be a false alarm: it does not
                # make the argument for every trip count moot.
                if any(not f.detail.get("candidate") for f, _, _ in self.out.findings):
                    return True
        return False

    def _window_only(self, group: Group, width: int = 8) -> None:
        """Explore small trip counts for counterexamples (no proof)."""
        lo = self.sizes.min_trip(group.t_expr)
        lo = max(lo if lo is not None else 0, 0)
        for t in range(lo, lo + width):
            sizes = self.sizes.for_trip(group.t_expr, t)
            if sizes is not None and t not in self._done_full:
                self._explore(Config(sizes, t, "full"))

    def _fallback(self, why: str, group: Group | None = None) -> None:
        self.out.complete = False
        self.out.reason = why
        if group is not None:
            self._window_only(group)
            return
        # Sample a few size assignments, smallest first, for counterexamples; then a few
        # with every size scaled up, so that the size-dependent loops run longer than the
        # smallest sizes let them (a ring deadlocks only once it wraps around).
        seen: list[dict] = []
        for _ in range(4):
            excl = [lambda enc, d=d: z3.Or([enc.sizes[n] != v for n, v in d.items()])
                    for d in seen if d]
            sizes = self.sizes.some(excl)
            if sizes is None:
                break
            seen.append(sizes)
            self._explore(Config(sizes, None, "full"))
            if not sizes:
                return
        if not seen or self.out.findings:
            return
        for factor in (4, 16):
            grow = [lambda enc, n=n, v=v * factor: enc.sizes[n] >= v
                    for n, v in seen[0].items() if v > 0]
            sizes = self.sizes.some(grow)
            if sizes is None or sizes in seen:
                continue
            seen.append(sizes)
            self._explore(Config(sizes, None, "full"))
            if self.out.findings:
                return

    # -- explorations ------------------------------------------------------------------------

    def _explore(self, cfg: Config) -> None:
        mach = Machine(self.model, cfg.sizes, period=None)
        res = search(mach, [mach.initial()], self.por, self.max_states, budget=self.budget)
        self._absorb(res, cfg, mach)

    def _absorb(self, res: SearchResult, cfg: Config, mach: Machine,
                levels: Levels | None = None) -> None:
        absorb(self.out, res, cfg, mach, levels)
        if mach.ownership and self._point_budget > 0:
            self._point_budget = points(self.out, mach, res.visited, self._point_budget)


def absorb(out: Outcome, res: SearchResult, cfg: Config, mach: Machine,
           levels: Levels | None = None) -> None:
    """One exploration's states, completeness, first complete run and findings into the
    outcome (findings of a tail get the path from the initial state through the levels)."""
    out.states += res.stats.states
    out.transitions += res.stats.transitions
    out.explorations.append({"trip": cfg.trip, "kind": cfg.kind, "sizes": cfg.sizes,
                             "states": res.stats.states, "complete": res.stats.complete})
    if not res.stats.complete:
        out.complete = False
        out.reason = res.stats.reason
        out.budget = out.budget or res.stats.budget
    if res.first_final is not None and (not out.finals or cfg.kind == "full"):
        out.finals.clear()
        root, path = path_to(res.parents, res.first_final)
        out.finals.append((res.first_final, mach, root, path))
    for f in res.findings.values():
        if levels is not None and f.root in levels.parent_of:
            f = prefix(f, levels)
        out.findings.append((f, cfg, mach))


def points(out: Outcome, mach: Machine, states, budget: int) -> int:
    """The permission state at each program point (part of the evidence): for each
    class and instruction, the distinct shares it holds there (a sample of states).
    Returns the sample budget left."""
    labels = {x: mach.atom_label(x) for x in range(len(mach.atoms))}
    for st in states:
        budget -= 1
        if budget < 0:
            return budget
        held: dict[int, list[str]] = {}
        for x, (holders, _) in enumerate(st.perms):
            for k, v in holders:
                if k[0] == CLASS:
                    held.setdefault(k[1], []).append(
                        f"{labels[x]}: {Fraction(v, mach.unit)}")
        for a, (pc, _) in enumerate(st.agents):
            ins = mach.agents[a].code[pc]
            if ins.stmt is None:
                continue
            key = f"{mach.agents[a].cls.name} @ line {ins.stmt.span.line} ({ins.op})"
            seen = out.points.setdefault(key, set())
            if len(seen) < 6:
                seen.add("{" + ", ".join(held.get(a, [])) + "}")
    return budget


def sample_sizes(model: Model, timeout_ms: int = 2000,
                 floors: tuple[int, ...] = (32, 100, 1000)) -> list[dict[str, int]]:
    """A few allowed size assignments with every size at least each floor in turn (where
    `where` allows): launches large enough for guards on sizes to let every thread of a
    block through, for witnesses that the smallest sizes do not show."""
    arg = Argument(model, True, 1, timeout_ms)
    out: list[dict[str, int]] = []
    for floor in floors:
        try:
            sizes = arg.sizes.some([lambda enc, f=floor: z3.And(
                [v >= f for v in enc.sizes.values()] or [z3.BoolVal(True)])])
        except Timeout:
            break
        if sizes is not None and sizes not in out:
            out.append(sizes)
    return out


def sizes_for_trip(model: Model, trip: int, timeout_ms: int = 5000) -> dict[str, int] | None:
    """An allowed size assignment whose parametric loops run `trip` times (None if none)."""
    arg = Argument(model, True, 1000, timeout_ms)
    group, _ = arg.cond.group()
    if group is None:
        return None
    return arg.sizes.for_trip(group.t_expr, trip)


@contextmanager
def fresh_z3_context() -> Iterator[None]:
    """Every z3 term of one argument in a context of its own. Why: z3 numbers its terms in
    creation order and its heuristics follow those numbers, so the same query in a process
    that has built other terms before can take 100x as long -- a periodicity query that
    answers at once alone timed out (10 s) after another kernel's argument in the same
    test process. The argument's terms never leave it (queries are kept as SMT-LIB text),
    so z3's default context is swapped for a fresh one and put back afterwards."""
    saved = z3.z3._main_ctx
    z3.z3._main_ctx = z3.Context()
    try:
        yield
    finally:
        z3.z3._main_ctx = saved


def explore_all(model: Model, por: bool, max_states: int, timeout_ms: int,
                budget: Budget | None = None) -> Outcome:
    """The verdict material for a model: see the module docstring. Without `budget`, the
    searches share one of `max_states` states in all."""
    with fresh_z3_context():
        return Argument(model, por, max_states, timeout_ms, budget).run()


__all__ = ["Config", "Enc", "Outcome", "Timeout", "explore_all", "sample_sizes",
           "sizes_for_trip", "smt2_with_status", "Stats"]
