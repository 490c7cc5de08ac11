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
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import z3

from tilesafe.frontend import ir
from tilesafe.frontend.fold import NoForm, fold
from tilesafe.semantics.expr.z3_terms import Z3Terms
from tilesafe.semantics.temporal.budget import Budget, BudgetExceeded
from tilesafe.semantics.temporal.events import Model, compile_expr, free_vars
from tilesafe.semantics.temporal.explore import (
    Finding,
    Machine,
    SearchResult,
    Stats,
    classify_deadlock,
    exit_violation,
    finding_key,
    finished,
    path_to,
    rank,
    search,
)
from tilesafe.semantics.temporal.explore.state import (
    CLASS,
    BarRec,
    State,
    bar_rec,
    moved,
    order_key,
)
from tilesafe.semantics.temporal.instrs import End, Wait

HUGE_TRIP = 1_000_000
MAX_DRIFT = 64
MAX_LEVELS = 200
G_CANDIDATES = (0, 1, 2, 3, 4, 6, 8, 12, 16, 24, 32)
# Start margins H: terms may depend on the iteration itself below H (a warm-up such as a
# producer's `if k >= STAGES { wait empty[s] ... }`), and only on (i mod L, T - i) from H on.
H_CANDIDATES = (0, 1, 2, 3, 4, 6, 8, 12, 16)
_TERMS: dict[tuple[int, bool], tuple[ir.Kernel, tuple]] = {}  # Argument._terms, memoised


@dataclass
class Config:
    sizes: dict[str, int]
    trip: int | None  # the parameter T, when there is one
    kind: str  # "full", "tail", "level"


@dataclass
class Outcome:
    """Everything the checkers report: verdict material, findings, and the evidence."""

    complete: bool  # every allowed size is covered (no state limit, argument applies)
    reason: str  # why not, when not complete
    findings: list[tuple[Finding, Config, Machine]] = field(default_factory=list)
    states: int = 0
    transitions: int = 0
    explorations: list[dict[str, Any]] = field(default_factory=list)
    argument: dict[str, Any] = field(default_factory=dict)
    queries: list[str] = field(default_factory=list)  # SMT-LIB of the z3 proofs
    seconds: float = 0.0
    finals: list[tuple[tuple, Machine, tuple, tuple]] = field(default_factory=list)
    # ownership: "class @ line N (op)" -> the distinct shares it holds there
    points: dict[str, set[str]] = field(default_factory=dict)
    budget: bool = False  # incomplete because the verification budget is spent (TS491)
    # code -> why: candidate violations that exact footprints did not confirm (TS492)
    unsettled: dict[str, str] = field(default_factory=dict)


class Timeout(Exception):
    pass


# ---- z3 encoding ------------------------------------------------------------------------------


class Enc:
    """IR terms as z3 terms, over one copy of the sizes (suffix) and shared other vars."""

    def __init__(self, kernel: ir.Kernel, model: Model, suffix: str, shared: dict) -> None:
        self.k = kernel
        self.lets = model.lets.table
        self.sizes = {n: z3.Int(n + suffix) for n in kernel.sizes}
        self.shared = shared  # "thread", "loop:<uid>", "block.x" -> z3 Int (shared copies)
        self.loops: dict[int, Any] = {}  # overrides of loop variables for this copy

    def var(self, key: str) -> Any:
        if key not in self.shared:
            self.shared[key] = z3.Int(key)
        return self.shared[key]

    def term(self, e: ir.Expr) -> Any:
        """`e` as a z3 term over this copy's leaves, through the one z3 algebra
        (semantics/expr/z3_terms.py: the language's floor division and modulo)."""
        try:
            return fold(e, Z3Terms(self))
        except NoForm as err:
            raise ValueError(str(err)) from None

    def where(self) -> list:
        return [self.term(w) for w in self.k.where]


def _solver(timeout_ms: int) -> z3.Solver:
    s = z3.Solver()
    s.set("timeout", timeout_ms)
    return s


def smt2_with_status(s: z3.Solver, res: z3.CheckSatResult) -> str:
    """The solver's SMT-LIB 2 text with the answer z3 gave as its `:status`, so a certificate
    checker (another solver) knows what to confirm."""
    status = "sat" if res == z3.sat else "unsat" if res == z3.unsat else "unknown"
    return s.to_smt2().replace("(set-info :status unknown)", f"(set-info :status {status})", 1)


def _check(s: z3.Solver, queries: list[str]) -> z3.CheckSatResult:
    res = s.check()
    queries.append(smt2_with_status(s, res))
    if res == z3.unknown:
        raise Timeout(s.reason_unknown())
    return res


PORTFOLIO = (None, "QF_NIA", "LIA")


def _prove_unsat(assertions: list, timeout_ms: int, queries: list[str]) -> bool:
    """True when the assertions are unsatisfiable. Quantifier-free div/mod arithmetic can
    send one z3 strategy into a long search that another finishes at once, so a few are
    tried with a share of the budget; any 'unsat' is a proof, any 'sat' a refutation."""
    share = max(200, timeout_ms // len(PORTFOLIO))
    for logic in PORTFOLIO:
        s = z3.SolverFor(logic) if logic else z3.Solver()
        s.set("timeout", share)
        s.add(*assertions)
        res = s.check()
        if res == z3.unsat:
            queries.append(smt2_with_status(s, res))
            return True
        if res == z3.sat:
            return False
    raise Timeout("periodicity query")


def _trip_expr(loop: ir.For) -> ir.Expr:
    """ceil((hi - lo) / step) as an IR term (without the max with 0)."""
    sp = loop.span
    diff = ir.BinOp(sp, ir.ScalarType.INT, "-", loop.hi, loop.lo)
    if loop.step == 1:
        return diff
    num = ir.BinOp(sp, ir.ScalarType.INT, "+", diff, ir.IntConst(sp, ir.ScalarType.INT,
                                                                   loop.step - 1))
    return ir.BinOp(sp, ir.ScalarType.INT, "/", num, ir.IntConst(sp, ir.ScalarType.INT,
                                                                  loop.step))


# ---- the argument -----------------------------------------------------------------------------


@dataclass
class Group:
    t_expr: ir.Expr  # T(sizes)
    offsets: dict[int, int]  # agent -> c_r
    loops: dict[int, ir.For]


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
        self._base: z3.Solver | None = None
        self._enc0: Enc | None = None
        self._sizes_cache: dict[int, dict[str, int] | None] = {}
        self._point_budget = 1500
        self._done_full: set[int] = set()
        self.start = 0  # H: the start margin (module docstring, step 2)

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
        group, why = self._group()
        if group is None:
            self._fallback(why)
            return
        argument_ok, why = self._terms(group)
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
        sizes = self._some_sizes([])
        if sizes is None:
            self.out.complete = False
            self.out.reason = "no sizes satisfy the 'where' clause"
            return
        if sized:
            ok = self._size_independent(sized)
            if not ok:
                self.out.complete = False
                self.out.reason = (f"a synchronising term (line {sized[0].span.line}) depends "
                                   "on the sizes; explored one size assignment only")
        self.out.argument = {"kind": "no parametric loop: one exploration covers all sizes",
                             "sizes": sizes}
        self._explore(Config(sizes, None, "full"))

    def _size_independent(self, exprs: list[ir.Expr]) -> bool:
        shared: dict = {}
        a = Enc(self.k, self.model, "", shared)
        b = Enc(self.k, self.model, "_2", shared)
        s = _solver(self._ms())
        s.add(*a.where(), *b.where())
        self._thread_range(s, shared)
        s.add(z3.Or([a.term(e) != b.term(e) for e in exprs]))
        return _check(s, self.out.queries) == z3.unsat

    def _thread_range(self, s: z3.Solver, shared: dict) -> None:
        if "thread" in shared:
            s.add(shared["thread"] >= 0, shared["thread"] < self.k.block)

    def _some_sizes(self, extra: list, small: bool = True) -> dict[str, int] | None:
        """A size assignment satisfying `where` and `extra`; with `small`, one whose sizes
        are small (for readable counterexamples): bounds on |size| doubled until sat."""
        if self._base is None:
            self._enc0 = Enc(self.k, self.model, "", {})
            self._base = _solver(self._ms())
            self._base.add(*self._enc0.where())
        enc, s = self._enc0, self._base
        s.push()
        try:
            for c in extra:
                s.add(c(enc))
            if not small or not enc.sizes:
                res = s.check()
                if res == z3.unknown:
                    raise Timeout("size search")
                return self._model_sizes(s, enc) if res == z3.sat else None
            bound = 256
            while bound <= (1 << 44):
                s.push()
                s.add(*[z3.And(v <= bound, v >= -bound) for v in enc.sizes.values()])
                res = s.check()
                if res == z3.sat:
                    out = self._model_sizes(s, enc)
                    s.pop()
                    return out
                s.pop()
                bound *= 16
            res = s.check()
            if res == z3.unknown:
                raise Timeout("size search")
            return self._model_sizes(s, enc) if res == z3.sat else None
        finally:
            s.pop()

    @staticmethod
    def _model_sizes(s: z3.Solver, enc: Enc) -> dict[str, int]:
        mdl = s.model()
        return {n: mdl.eval(v, model_completion=True).as_long() for n, v in enc.sizes.items()}

    # -- 1. the trip-count group -------------------------------------------------------------

    def _group(self) -> tuple[Group | None, str]:
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
        t_expr = _trip_expr(ref)
        offsets: dict[int, int] = {}
        for a, loop in loops.items():
            for e in (loop.lo, loop.hi):
                if free_vars(e, self.model.lets) - {f"size:{n}" for n in self.k.sizes}:
                    return None, (f"the bounds of the loop at line {loop.span.line} depend on "
                                  "more than the sizes")
            c = self._offset(t_expr, _trip_expr(loop))
            if c is None:
                return None, (f"the trip counts of the loops at lines {ref.span.line} and "
                              f"{loop.span.line} do not differ by a constant")
            offsets[a] = c
        return Group(t_expr, offsets, loops), ""

    def _offset(self, t_ref: ir.Expr, t_other: ir.Expr) -> int | None:
        if _shape(t_ref) == _shape(t_other):
            return 0
        sizes = self._some_sizes([])
        if sizes is None:
            return None
        c = (compile_expr(t_other, self.model.lets)(sizes)
             - compile_expr(t_ref, self.model.lets)(sizes))
        enc = Enc(self.k, self.model, "", {})
        s = _solver(self._ms())
        s.add(*enc.where())
        s.add(enc.term(t_other) - enc.term(t_ref) != c)
        return int(c) if _check(s, self.out.queries) == z3.unsat else None

    # -- 2. periodic and far-field terms -----------------------------------------------------

    def _positions(self, group: Group) -> dict[str, list[tuple[int, ir.Expr]]]:
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

    def _terms(self, group: Group) -> tuple[bool, str]:
        """Condition 2, memoised per kernel and semantics: a reduced search of the kernel
        (semantics/temporal/reduce.py) and the unreduced one ask the same z3 questions."""
        key = (id(self.k), self.model.ownership)
        hit = _TERMS.get(key)
        if hit is not None and hit[0] is self.k:
            ok, why, self.period, self.margin, self.start, self.sym, arg = hit[1]
            self.out.argument.update(arg)
            return ok, why
        ok, why = self._terms_uncached(group)
        if len(_TERMS) > 64:
            _TERMS.clear()
        _TERMS[key] = (self.k, (ok, why, getattr(self, "period", None),
                                getattr(self, "margin", None), self.start,
                                getattr(self, "sym", None), dict(self.out.argument)))
        return ok, why

    def _terms_uncached(self, group: Group) -> tuple[bool, str]:
        pos = self._positions(group)
        lets = self.model.lets
        for where_ in ("in", "pre", "post"):
            for _, e in pos[where_]:
                if free_vars(e, lets) & {"data", "block"}:
                    return False, (f"a synchronising term at line {e.span.line} depends on "
                                   "memory or the block index")
        l0 = 1
        for a, e in pos["in"]:
            l0 = math.lcm(l0, _divisor_product(e, group.loops[a].var.uid, lets))
        for _, e in pos["post"]:
            l0 = math.lcm(l0, _divisor_product(e, None, lets))
        l0 = min(l0, 1 << 12)
        period = None
        # The least period that z3 accepts (any accepted one is sound; a smaller one means
        # fewer levels and tails, e.g. a stage projection's (8k / 8) % 2 has period 2).
        for cand in sorted(_divisors(l0)):
            if not self._query_post(group, pos["post"], cand):
                continue
            self.start = H_CANDIDATES[-1]  # with the largest margin first: one query per L
            try:
                if not self._query_in(group, pos["in"], cand, None):
                    continue
            except Timeout:
                continue
            for h in H_CANDIDATES:
                self.start = h
                try:
                    if self._query_in(group, pos["in"], cand, None):
                        period = cand
                        break
                except Timeout:  # not shown for this (L, H): try the next, never assume it
                    if h == 0:
                        raise
                    continue
            if period is not None:
                break
        if period is None:
            self.start = 0
            return False, ("a synchronising term is not periodic in the loop iteration (tried "
                           f"periods dividing {l0})")
        margin = None
        for g in G_CANDIDATES:
            if self._query_in(group, pos["in"], period, g) and \
                    self._query_pre(group, pos["pre"], g):
                margin = g
                break
        if margin is None:
            return False, "a synchronising term depends on the trip count even far from the end"
        self.period, self.margin = period, margin
        self.sym: int | None = self._symmetry(group, pos, period)
        self.out.argument.update({"L": period, "G": margin, "H": self.start,
                                  "T": _show(group.t_expr),
                                  "parity symmetry": (f"shift by {self.sym} + flip every "
                                                      "parity bit" if self.sym else None),
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
        if not self._query_in(group, other_in, half, None):
            return None
        if not self._query_in(group, other_in, half, self.margin):
            return None
        if not self._query_post(group, other_post, half):
            return None
        for a, e in par_in:
            loop = group.loops[a]
            x = Enc(self.k, self.model, "", {})
            y = Enc(self.k, self.model, "", x.shared)
            i = z3.Int("i")
            x.loops[loop.var.uid] = x.term(loop.lo) + loop.step * i
            y.loops[loop.var.uid] = y.term(loop.lo) + loop.step * (i + half)
            cons = [i >= self.start, y.term(e) != 1 - x.term(e)]
            if not _prove_unsat(cons, self._ms(), self.out.queries):
                return None
        for _, e in par_post:
            shared: dict = {}
            x, y = Enc(self.k, self.model, "", shared), Enc(self.k, self.model, "_2", shared)
            tx, ty = x.term(group.t_expr), y.term(group.t_expr)
            cons = [*x.where(), *y.where(), ty - tx == half, y.term(e) != 1 - x.term(e)]
            if not _prove_unsat(cons, self._ms(), self.out.queries):
                return None
        return half

    def _query_in(self, group: Group, items: list, period: int, far: int | None) -> bool:
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
        h = self.start
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
        return _prove_unsat(cons + [diff], self._ms(), self.out.queries)

    def _query_pre(self, group: Group, items: list, far: int) -> bool:
        if not items:
            return True
        shared: dict = {}
        x, y = Enc(self.k, self.model, "", shared), Enc(self.k, self.model, "_2", shared)
        s = _solver(self._ms())
        s.add(*x.where(), *y.where(), x.term(group.t_expr) >= far,
              y.term(group.t_expr) >= far)
        diffs = [x.term(e) != y.term(e) for _, e in items]
        self._thread_range(s, shared)
        s.add(z3.Or(diffs))
        return _check(s, self.out.queries) == z3.unsat

    def _query_post(self, group: Group, items: list, period: int) -> bool:
        if not items:
            return True
        shared: dict = {}
        x, y = Enc(self.k, self.model, "", shared), Enc(self.k, self.model, "_2", shared)
        s = _solver(self._ms())
        tx, ty = x.term(group.t_expr), y.term(group.t_expr)
        s.add(*x.where(), *y.where(), (tx - ty) % period == 0)
        diffs = [x.term(e) != y.term(e) for _, e in items]
        self._thread_range(s, shared)
        s.add(z3.Or(diffs))
        return _check(s, self.out.queries) == z3.unsat

    # -- 3 + 4. level sets and the window ---------------------------------------------------

    def _sizes_for(self, group: Group, trip: int) -> dict[str, int] | None:
        if trip not in self._sizes_cache:
            self._sizes_cache[trip] = self._some_sizes(
                [lambda enc: enc.term(group.t_expr) == trip])
        return self._sizes_cache[trip]

    def _periodic(self, group: Group) -> None:
        lo, hi = self._min_trip(group), self._max_trip(group)
        if lo is None:
            self.out.complete = False
            self.out.reason = "no sizes satisfy the 'where' clause"
            return
        if hi is not None and hi - lo <= 24:
            self._bounded(group, lo, hi)  # few trip counts: explore each one outright
            return
        t_far = HUGE_TRIP if hi is None else min(hi, HUGE_TRIP)
        big = self._sizes_for(group, t_far)
        if big is None:
            self._fallback("no size assignment reaches a large trip count", group)
            return
        t_big = int(self._eval_t(group, big))
        mach = Machine(self.model, big, period=self.period + self.start)
        levels = _Levels(self, mach, group)
        levels.t_far = t_big + min(group.offsets.values())
        ok, why = levels.run()
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
        k = drift + max(self.margin, 2 - c_min)
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
            sizes = self._some_sizes([lambda enc: enc.term(group.t_expr) <= lo_eff])
            if sizes is not None:
                explored.append(int(self._eval_t(group, sizes)))
                self._explore(Config(sizes, explored[-1], "full"))
        for t in range(lo_eff, hi_full + 1):
            sizes = self._sizes_for(group, t)
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
                sizes = self._sizes_for(group, t)
            else:
                sizes = self._some_sizes([lambda enc, t=t: enc.term(group.t_expr) >= t,
                                          lambda enc, t=t: (enc.term(group.t_expr) - t)
                                          % period == 0])
            if sizes is None:
                continue
            real_t = int(self._eval_t(group, sizes))
            if real_t in self._done_full and sizes == self._sizes_for(group, real_t):
                # Explored in full already (the small trip counts tried first): every state
                # of this system was reached from its initial state, which is more than the
                # tail from level M_T would cover (issue 19: the same states twice).
                explored.append(real_t)
                continue
            shift = real_t - t
            tmach = Machine(self.model, sizes, period=self.period + self.start)
            _share_atoms(tmach, mach)
            roots = sorted((levels.shift(st, shift) for st in levels.sets[mt]), key=order_key)
            res = search(tmach, roots, self.por, self.max_states, budget=self.budget)
            self._absorb(res, Config(sizes, real_t, f"tail from level {mt + shift}"), tmach,
                         levels=levels if shift == 0 else None)
            tails.append(real_t)
        self.out.argument.update({"full trip counts": explored, "tail trip counts": tails,
                                  "covers": "every trip count allowed by 'where'"})
        self.out.argument["big T"] = t_big

    def _eval_t(self, group: Group, sizes: Mapping[str, int]) -> int:
        return int(compile_expr(group.t_expr, self.model.lets)(sizes))

    def _min_trip(self, group: Group) -> int | None:
        enc = Enc(self.k, self.model, "", {})
        s = z3.Optimize()
        s.set("timeout", self._ms())
        s.add(*enc.where())
        t = enc.term(group.t_expr)
        s.add(t >= -(1 << 20))
        h = s.minimize(t)
        res = s.check()
        if res == z3.unknown:
            raise Timeout("smallest trip count")
        if res != z3.sat:
            return None
        return s.lower(h).as_long()

    def _max_trip(self, group: Group) -> int | None:
        """The largest allowed trip count, or None when it is unbounded (above 2**40)."""
        enc = Enc(self.k, self.model, "", {})
        s = z3.Optimize()
        s.set("timeout", self._ms())
        s.add(*enc.where())
        t = enc.term(group.t_expr)
        s.add(t <= (1 << 40))
        h = s.maximize(t)
        if s.check() != z3.sat:
            return None
        value = s.upper(h).as_long()
        return None if value >= (1 << 40) else value

    def _bounded(self, group: Group, lo: int, hi: int) -> None:
        explored = []
        for t in range(lo, hi + 1):
            sizes = self._sizes_for(group, t)
            if sizes is not None:
                explored.append(t)
                if t not in self._done_full:
                    self._explore(Config(sizes, t, "full"))
        self.out.argument.update({"kind": "every allowed trip count explored",
                                  "full trip counts": explored})

    def _window_first(self, group: Group, width: int = 4) -> bool:
        """Explore the smallest allowed trip counts; True when something was found."""
        lo = self._min_trip(group)
        if lo is None:
            return False
        lo = max(lo, -max(group.offsets.values()))
        for t in range(lo, lo + width):
            sizes = self._sizes_for(group, t)
            if sizes is not None:
                self._explore(Config(sizes, t, "full"))
                self._done_full.add(t)
                # A candidate (semantics/temporal/witness.py) may be a false alarm: it does not make
                # the argument for every trip count moot.
                if any(not f.detail.get("candidate") for f, _, _ in self.out.findings):
                    return True
        return False

    def _window_only(self, group: Group, width: int = 8) -> None:
        """Explore small trip counts for counterexamples (no proof)."""
        lo = self._min_trip(group)
        lo = max(lo if lo is not None else 0, 0)
        for t in range(lo, lo + width):
            sizes = self._sizes_for(group, t)
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
            sizes = self._some_sizes(excl)
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
            sizes = self._some_sizes(grow)
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

    def _points(self, mach: Machine, states) -> None:
        """The permission state at each program point (part of the evidence): for each
        class and instruction, the distinct shares it holds there (a sample of states)."""
        labels = {x: mach.atom_label(x) for x in range(len(mach.atoms))}
        for st in states:
            self._point_budget -= 1
            if self._point_budget < 0:
                return
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
                seen = self.out.points.setdefault(key, set())
                if len(seen) < 6:
                    seen.add("{" + ", ".join(held.get(a, [])) + "}")

    def _absorb(self, res: SearchResult, cfg: Config, mach: Machine, levels=None) -> None:
        self.out.states += res.stats.states
        self.out.transitions += res.stats.transitions
        self.out.explorations.append({"trip": cfg.trip, "kind": cfg.kind, "sizes": cfg.sizes,
                                      "states": res.stats.states,
                                      "complete": res.stats.complete})
        if not res.stats.complete:
            self.out.complete = False
            self.out.reason = res.stats.reason
            self.out.budget = self.out.budget or res.stats.budget
        if res.first_final is not None and (not self.out.finals or cfg.kind == "full"):
            self.out.finals.clear()
            root, path = path_to(res.parents, res.first_final)
            self.out.finals.append((res.first_final, mach, root, path))
        if mach.ownership and self._point_budget > 0:
            self._points(mach, res.visited)
        for f in res.findings.values():
            if levels is not None and f.root in levels.parent_of:
                f = _prefix(f, levels)
            self.out.findings.append((f, cfg, mach))


def _share_atoms(dst: Machine, src: Machine) -> None:
    """Tails continue states of the big system: use its atoms and waiter sets."""
    dst.atoms, dst.waiters = src.atoms, src.waiters
    dst._ev.clear()
    dst._static_cache.clear()
    dst._por_cache.clear()
    dst.rebuild_static()


def _prefix(f: Finding, levels: _Levels) -> Finding:
    """Extend a path that starts at a level-set state back to the initial state."""
    path = levels.path_to(f.root)
    return Finding(f.code, f.message, f.span, path + f.path, levels.root, f.soft, f.detail)


class _Levels:
    """Level-by-level exploration of the system with one huge trip count."""

    def __init__(self, arg: Argument, mach: Machine, group: Group) -> None:
        self.arg = arg
        self.m = mach
        self.group = group
        self.period = arg.sym or arg.period  # the step in which level sets may repeat
        self.flip = arg.sym is not None
        self.sets: list[set] = []
        self.norms: list[frozenset] = []
        self.findings: dict[str, Finding] = {}
        self.finding_level: dict[str, int] = {}
        self.states = 0
        self.transitions = 0
        self.drift = 0
        self.m0 = self.p = -1
        self.parent_of: dict = {}
        self.root = mach.initial()
        self.param = {a: ag.param_loop for a, ag in enumerate(mach.agents)
                      if ag.param_loop is not None}
        self.t_far = 0
        self.stop = False  # a violation was found: the argument is moot

    def progress(self, state: State, a: int) -> int:
        enter, nxt, depth, _ = self.param[a]
        pc, ctrs = state.agents[a]
        if pc < enter:
            return 0
        if pc > nxt or isinstance(self.m.agents[a].code[pc], End):
            return HUGE_TRIP * 4
        return ctrs[depth]

    def level(self, state: State) -> tuple[int, int]:
        ps = [self.progress(state, a) for a in self.param]
        return min(ps), max(ps) - min(ps)

    def normal(self, state: State, m: int) -> State:
        """Iterations relative to the level; with the parity symmetry, parity bits relative
        to the number of half periods passed."""
        agents = list(state.agents)
        for a, (enter, nxt, depth, _) in self.param.items():
            pc, ctrs = agents[a]
            if enter < pc < nxt:
                agents[a] = (pc, ctrs[:depth] + (ctrs[depth] - m,) + ctrs[depth + 1:])
        bars = state.bars
        if self.flip and (m // self.period) % 2:
            bars = _flip(bars)
        return moved(state, tuple(agents), bars)

    def path_to(self, st: tuple) -> tuple:
        out = []
        while self.parent_of.get(st) is not None:
            st, mv = self.parent_of[st]
            out.append(mv)
        return tuple(reversed(out))

    def run(self) -> tuple[bool, str]:
        m = self.m
        por = self.arg.por
        frontier = [self.root]
        self.parent_of[self.root] = None
        for lvl in range(MAX_LEVELS):
            current: set = set(frontier)
            queue = list(frontier)
            nxt: list = []
            while queue:
                if self.stop:
                    return False, f"refuted at level {lvl} of the far system"
                st = queue.pop()
                self.states += 1
                try:
                    self.arg.budget.charge()
                except BudgetExceeded as exc:
                    self.arg.out.budget = True
                    return False, exc.reason
                if finished(m, st):
                    bad = exit_violation(m, st)
                    if bad is not None:
                        self._find(Finding(bad[0], bad[1], bad[2], self.path_to(st),
                                           self.root, False, {"state": st}), lvl)
                        continue
                succ, enabled, _ = m.successors(st, por)
                if not enabled:
                    if not finished(m, st) or st.copies:
                        code, why = classify_deadlock(m, st)
                        self._find(Finding(code, why, None, self.path_to(st), self.root, False,
                                           {"state": st}), lvl)
                    continue
                for mv, new, info in succ:
                    self.transitions += 1
                    if new is None:
                        self._find(Finding(info.code, info.message, info.span,
                                           self.path_to(st) + (mv,), self.root, False,
                                           {"state": st, **info.detail}), lvl)
                        continue
                    if info is not None:
                        self._find(Finding(info.code, info.message, info.span,
                                           self.path_to(st) + (mv,), self.root, True,
                                           {"state": st, **info.detail}), lvl)
                    if new in self.parent_of:
                        continue
                    self.parent_of[new] = (st, mv)
                    lv, drift = self.level(new)
                    if drift > MAX_DRIFT:
                        return False, ("the agents drift apart without bound (more than "
                                       f"{MAX_DRIFT} iterations); explored small trip counts "
                                       "only")
                    self.drift = max(self.drift, drift)
                    if lv + drift + 2 * self.arg.margin + 4 >= self.t_far:
                        return False, "the far trip count is too small for the level argument"
                    if lv == lvl:
                        current.add(new)
                        queue.append(new)
                    else:
                        nxt.append(new)
            if self.stop:
                return False, f"refuted at level {lvl} of the far system"
            self.sets.append(current)
            self.norms.append(frozenset(self.normal(s, lvl) for s in current)
                              | {("level mod", lvl % self.period)})
            if not nxt:
                return False, "every run ends within the explored levels (trip count too small?)"
            frontier = nxt
            for p in range(self.period, min(lvl, 8 * self.period) + 1, self.period):
                # From the start margin on, the step from one level to the next is the same
                # function of the level set (and of the level mod L): only then may it repeat.
                if lvl - p >= self.arg.start and self.norms[lvl] == self.norms[lvl - p]:
                    self.m0, self.p = lvl - p, p
                    return True, ""
        return False, f"no periodic level structure within {MAX_LEVELS} levels"

    def shift(self, state: State, delta: int) -> State:
        """The same state with every parametric loop `delta` iterations further on (and,
        with the parity symmetry, parity bits flipped once per half period)."""
        if delta == 0:
            return state
        agents = list(state.agents)
        for a, (enter, nxt, depth, _) in self.param.items():
            pc, ctrs = agents[a]
            if enter < pc < nxt:
                agents[a] = (pc, ctrs[:depth] + (ctrs[depth] + delta,) + ctrs[depth + 1:])
        bars = state.bars
        if self.flip and (delta // self.period) % 2:
            bars = _flip(bars)
        return moved(state, tuple(agents), bars)

    def _find(self, f: Finding, lvl: int) -> None:
        key = finding_key(f)
        old = self.findings.get(key)
        if old is None or rank(f) < rank(old):
            self.findings[key] = f
            self.finding_level[key] = lvl
        if not f.detail.get("candidate"):
            self.stop = True


def _shape(e: Any) -> Any:
    """A term without its spans (structural equality)."""
    if isinstance(e, ir.Expr):
        return (type(e).__name__,) + tuple(_shape(getattr(e, f)) for f in e.__dataclass_fields__
                                           if f not in ("span", "type"))
    if isinstance(e, tuple):
        return tuple(_shape(x) for x in e)
    return e


def _flip(bars: tuple[BarRec, ...]) -> tuple[BarRec, ...]:
    return tuple(bar_rec(b.st._replace(parity=b.st.parity ^ 1), b.init_by, b.fenced, b.phases)
                 if b.st.initialized else b for b in bars)


def _divisors(n: int) -> list[int]:
    return sorted({d for i in range(1, int(n ** 0.5) + 1) if n % i == 0 for d in (i, n // i)})


def _divisor_product(e: ir.Expr, uid: int | None, lets: Any) -> int:
    """Product of the divisors of / and % nodes whose operand depends on the loop variable
    (or, with uid None, on the sizes): a period candidate."""
    prod = 1
    stack = [e]
    while stack:
        x = stack.pop()
        if isinstance(x, ir.LocalRef) and not x.mutable and x.uid in lets.table:
            stack.append(lets.table[x.uid])
        elif isinstance(x, ir.BinOp):
            if x.op in ("/", "%") and isinstance(x.rhs, ir.IntConst):
                fv = free_vars(x.lhs, lets)
                hit = (f"loop:{uid}" in fv) if uid is not None else any(
                    v.startswith("size:") for v in fv)
                if hit:
                    prod *= x.rhs.value
            stack.extend((x.lhs, x.rhs))
        elif isinstance(x, ir.UnOp):
            stack.append(x.operand)
        elif isinstance(x, ir.Call):
            stack.extend(x.args)
    return max(1, prod)


def _show(e: ir.Expr) -> str:
    if isinstance(e, ir.IntConst):
        return str(e.value)
    if isinstance(e, ir.SizeVar):
        return e.name
    if isinstance(e, ir.LoopVar):
        return e.name
    if isinstance(e, ir.LocalRef):
        return e.name
    if isinstance(e, ir.BinOp):
        return f"({_show(e.lhs)} {e.op} {_show(e.rhs)})"
    return "..."


def sample_sizes(model: Model, timeout_ms: int = 2000,
                 floors: tuple[int, ...] = (32, 100, 1000)) -> list[dict[str, int]]:
    """A few allowed size assignments with every size at least each floor in turn (where
    `where` allows): launches large enough for guards on sizes to let every thread of a
    block through, for witnesses that the smallest sizes do not show."""
    arg = Argument(model, True, 1, timeout_ms)
    out: list[dict[str, int]] = []
    for floor in floors:
        try:
            sizes = arg._some_sizes([lambda enc, f=floor: z3.And(
                [v >= f for v in enc.sizes.values()] or [z3.BoolVal(True)])])
        except Timeout:
            break
        if sizes is not None and sizes not in out:
            out.append(sizes)
    return out


def sizes_for_trip(model: Model, trip: int, timeout_ms: int = 5000) -> dict[str, int] | None:
    """An allowed size assignment whose parametric loops run `trip` times (None if none)."""
    arg = Argument(model, True, 1000, timeout_ms)
    group, _ = arg._group()
    if group is None:
        return None
    return arg._sizes_for(group, trip)


def explore_all(model: Model, por: bool, max_states: int, timeout_ms: int,
                budget: Budget | None = None) -> Outcome:
    """The verdict material for a model: see the module docstring. Without `budget`, the
    searches share one of `max_states` states in all."""
    return Argument(model, por, max_states, timeout_ms, budget).run()


__all__ = ["Config", "Outcome", "explore_all", "sample_sizes", "sizes_for_trip",
           "Stats"]
