"""The lemmas about the inspector's output, each proved from the definitions of
tilesafe/moe/align_theory.py (see its docstring for the plan).

A lemma is a statement over a few integer variables, the E-matching patterns that let a
later query use it, and its proof: a list of *cases*, each a z3 query "these ground facts
imply this goal" over fresh constants. Induction on n is two cases, the base (n at its
least value) and the step (the statement at n implies it at n + 1); a lemma's cases may use
the definitions' ground instances and earlier lemmas' (`use`), never a lemma not yet
proved. The order of `LEMMAS` is the proof order.

Why ground instances and not quantified definitions: the recursions (C(i + 1, e) from
C(i, e)) would loop under E-matching; each case names the instances it needs, so every
query is quantifier-free (linear integer arithmetic with uninterpreted functions, which z3
decides) and answers quickly and deterministically.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import z3

from tilesafe.moe.align_theory import RLIMIT, Defs

X = z3.ArithRef
Facts = list[z3.BoolRef]
Case = tuple[Facts, z3.BoolRef]


@dataclass(frozen=True)
class Proof:
    """The queries of a proof, and what they establish about the lemma's variables (a
    last query checks that this implies the lemma's statement)."""

    cases: list[Case]
    establishes: z3.BoolRef


@dataclass(frozen=True)
class Lemma:
    """`statement(d, *xs)`; `patterns(d, *xs)` lists single terms or tuples (multi-patterns);
    `proof(d, use, *xs)` gives the proof, `use(name, *args)` an earlier lemma's instance."""

    name: str
    arity: int
    statement: Callable[..., z3.BoolRef]
    patterns: Callable[..., list[z3.ExprRef | tuple[z3.ExprRef, ...]]]
    proof: Callable[..., Proof]


@dataclass(frozen=True)
class LemmaResult:
    name: str
    proved: bool
    detail: str  # "" when proved; else the case and z3's answer


def induction(d: Defs, stmt: Callable[[X], z3.BoolRef], lo: X, hi: X, n: X,
              step_facts: Facts, base_facts: Facts | None = None) -> Proof:
    """stmt(lo), and stmt(n) => stmt(n + 1) for lo <= n < hi: then stmt(n) for every n in
    lo .. hi (the variable n stands for any of them in what the proof establishes)."""
    return Proof([(d.base() + (base_facts or []), stmt(lo)),
                  (d.base() + [lo <= n, n < hi, stmt(n)] + step_facts, stmt(n + 1))],
                 z3.Implies(z3.And(lo <= n, n <= hi), stmt(n)))


def direct(facts: Facts, goal: z3.BoolRef) -> Proof:
    return Proof([(facts, goal)], goal)


def _count_nonneg(d: Defs, use: Callable[..., z3.BoolRef], i: X, e: X) -> Proof:
    return induction(d, lambda k: d.count(k, e) >= 0, z3.IntVal(0), d.tk, i,
                     [d.count_step(i, e)], [d.count_zero(e)])


def _count_mono(d: Defs, use: Callable[..., z3.BoolRef], i: X, j: X, e: X) -> Proof:
    stmt: Callable[[X], z3.BoolRef] = lambda k: d.count(i, e) <= d.count(k, e)  # noqa: E731
    return induction(d, stmt, i, d.tk, j, [d.count_step(j, e), 0 <= i])


def _pad_bounds(d: Defs, use: Callable[..., z3.BoolRef], e: X) -> Proof:
    return direct(d.base() + [0 <= e, e < d.experts, use("count_nonneg", d.tk, e)],
                  _pad_stmt(d, e))


def _pad_stmt(d: Defs, e: X) -> z3.BoolRef:
    b = d.block
    return z3.Implies(z3.And(0 <= e, e < d.experts), z3.And(
        d.cnt(e) <= d.pad(e), d.pad(e) <= d.cnt(e) + (b - 1), d.pad(e) % b == 0,
        d.cnt(e) >= 0))


def _off_mono(d: Defs, use: Callable[..., z3.BoolRef], a: X, c: X) -> Proof:
    stmt: Callable[[X], z3.BoolRef] = lambda k: d.off(a) <= d.off(k)  # noqa: E731
    return induction(d, stmt, a, d.experts, c,
                     [d.off_step(c), use("pad_bounds", c), 0 <= a])


def _off_aligned(d: Defs, use: Callable[..., z3.BoolRef], e: X) -> Proof:
    return induction(d, lambda k: d.off(k) % d.block == 0, z3.IntVal(0), d.experts, e,
                     [d.off_step(e), use("pad_bounds", e)])


def _off_segment(d: Defs, use: Callable[..., z3.BoolRef], e: X) -> Proof:
    return direct(d.base() + [d.off_step(e), use("pad_bounds", e)], _segment_stmt(d, e))


def _segment_stmt(d: Defs, e: X) -> z3.BoolRef:
    return z3.Implies(z3.And(0 <= e, e < d.experts), z3.And(
        d.off(e) + d.cnt(e) <= d.off(e + 1), d.off(e + 1) == d.off(e) + d.pad(e)))


def _pos_stmt(d: Defs, i: X) -> z3.BoolRef:
    e = d.ids(i)
    c = d.count(i, e)
    return z3.Implies(d.valid(i), z3.And(
        d.pos(i) == d.off(e) + c, 0 <= c, c < d.cnt(e), d.off(e) <= d.pos(i),
        d.pos(i) < d.off(e + 1)))


def _pos_range(d: Defs, use: Callable[..., z3.BoolRef], i: X) -> Proof:
    e = d.ids(i)
    return direct(d.base() + [d.pos_def(i), d.count_step(i, e),
                              use("count_mono", i + 1, d.tk, e), use("count_nonneg", i, e),
                              use("off_segment", e)], _pos_stmt(d, i))


def _injective_stmt(d: Defs, i: X, j: X) -> z3.BoolRef:
    return z3.Implies(z3.And(d.valid(i), d.valid(j), d.pos(i) == d.pos(j)), i == j)


def _pos_injective(d: Defs, use: Callable[..., z3.BoolRef], i: X, j: X) -> Proof:
    ei, ej = d.ids(i), d.ids(j)
    facts = d.base() + [
        use("pos_range", i), use("pos_range", j), d.count_step(i, ei), d.count_step(j, ej),
        use("count_mono", i + 1, j, ei), use("count_mono", j + 1, i, ej),
        use("off_mono", ei + 1, ej), use("off_mono", ej + 1, ei)]
    return direct(facts, _injective_stmt(d, i, j))


def _sids_stmt(d: Defs, i: X) -> z3.BoolRef:
    return z3.Implies(d.valid(i), d.sids(d.pos(i)) == i)


def _sids_at_pos(d: Defs, use: Callable[..., z3.BoolRef], i: X) -> Proof:
    s = d.sids(d.pos(i))
    return direct(d.base() + [d.sids_choice(i), d.sids_def(d.pos(i)),
                              use("pos_injective", i, s)], _sids_stmt(d, i))


def _rank_stmt(d: Defs, e: X, r: X, n: X) -> z3.BoolRef:
    j = d.rank_pair(e, r)
    return z3.Implies(z3.And(0 <= e, e < d.experts, 0 <= r, r < d.count(n, e)), z3.And(
        d.valid(j), d.ids(j) == e, d.count(j, e) == r, j < n))


def _rank_onto(d: Defs, use: Callable[..., z3.BoolRef], e: X, r: X, n: X) -> Proof:
    """Every rank below cnt(e) is some pair's: induction over the pairs 0 .. n-1 (the r-th
    pair of e is unique, so the chosen one is the new pair when the rank is new)."""
    j = d.rank_pair(e, r)
    step = [d.count_step(n, e), d.rank_pair_def(e, r, n), d.count_step(j, e),
            use("count_mono", j + 1, n, e), use("count_mono", n + 1, j, e),
            use("count_nonneg", n, e)]
    return induction(d, lambda k: _rank_stmt(d, e, r, k), z3.IntVal(0), d.tk, n, step,
                     [d.count_zero(e)])


def _real_stmt(d: Defs, e: X, p: X) -> z3.BoolRef:
    return z3.Implies(z3.And(0 <= e, e < d.experts, d.off(e) <= p, p < d.off(e) + d.cnt(e)),
                      z3.And(d.sids(p) != d.tk, d.ids(d.sids(p)) == e))


def _rows_real(d: Defs, use: Callable[..., z3.BoolRef], e: X, p: X) -> Proof:
    """Row off(e) + r of a segment holds the r-th pair of e while r < cnt(e)."""
    i = d.rank_pair(e, p - d.off(e))
    return direct(d.base() + [use("rank_onto", e, p - d.off(e), d.tk), d.pos_def(i),
                              use("sids_at_pos", i)], _real_stmt(d, e, p))


def _pad_rows_stmt(d: Defs, e: X, p: X) -> z3.BoolRef:
    return z3.Implies(z3.And(0 <= e, e < d.experts, d.off(e) + d.cnt(e) <= p,
                             p < d.off(e + 1)), d.sids(p) == d.tk)


def _pad_rows(d: Defs, use: Callable[..., z3.BoolRef], e: X, p: X) -> Proof:
    """The rest of a segment is padding: a pair there would lie in its own segment."""
    s = d.sids(p)
    es = d.ids(s)
    return direct(d.base() + [d.sids_def(p), use("pos_range", s), use("off_mono", e + 1, es),
                              use("off_mono", es + 1, e), use("count_nonneg", d.tk, e)],
                  _pad_rows_stmt(d, e, p))


def _ends_stmt(d: Defs, e: X, x: X) -> z3.BoolRef:
    g = d.ends(e, x)
    return z3.Implies(z3.And(0 <= x, 0 <= e, e <= d.experts), z3.And(
        0 <= g, g <= e, d.off(g) <= x, z3.Implies(g < e, x < d.off(g + 1))))


def _ends_inv(d: Defs, use: Callable[..., z3.BoolRef], e: X, x: X) -> Proof:
    g = d.ends(e, x)
    return induction(d, lambda k: _ends_stmt(d, k, x), z3.IntVal(0), d.experts, e,
                     [d.ends_step(e, x), use("off_mono", g + 1, e + 1)], [d.ends_zero(x)])


def _row_stmt(d: Defs, p: X) -> z3.BoolRef:
    g = d.ends(d.experts, p)
    return z3.Implies(z3.And(0 <= p, p < d.total), z3.And(
        0 <= g, g < d.experts, d.off(g) <= p, p < d.off(g + 1)))


def _row_segment(d: Defs, use: Callable[..., z3.BoolRef], p: X) -> Proof:
    """Every row before `total` lies in one expert's segment (the one `be` names)."""
    return direct(d.base() + [use("ends_inv", d.experts, p)], _row_stmt(d, p))


def _be_stmt(d: Defs, b: X) -> z3.BoolRef:
    row = b * d.block
    v = d.be(b)
    return z3.Implies(0 <= b, z3.Or(
        z3.And(row >= d.total, v == -1),
        z3.And(row < d.total, 0 <= v, v < d.experts, d.off(v) <= row, row < d.off(v + 1))))


def _be_range(d: Defs, use: Callable[..., z3.BoolRef], b: X) -> Proof:
    return direct(d.base() + [d.be_def(b), use("ends_inv", d.experts, b * d.block)],
                  _be_stmt(d, b))


def _vb_split(d: Defs, use: Callable[..., z3.BoolRef], i: X, e: X) -> Proof:
    stmt: Callable[[X], z3.BoolRef] = lambda k: d.valid_below(k, e + 1) == (  # noqa: E731
        d.valid_below(k, e) + d.count(k, e))
    return induction(d, stmt, z3.IntVal(0), d.tk, i, [
        d.valid_below_step(i, e + 1), d.valid_below_step(i, e), d.count_step(i, e), e >= 0],
        [d.valid_below_zero(e), d.valid_below_zero(e + 1), d.count_zero(e)])


def _vb_bounds(d: Defs, use: Callable[..., z3.BoolRef], i: X, e: X) -> Proof:
    stmt: Callable[[X], z3.BoolRef] = lambda k: z3.And(  # noqa: E731
        d.valid_below(k, e) <= k, d.valid_below(k, 0) == 0)
    return induction(d, stmt, z3.IntVal(0), d.tk, i, [
        d.valid_below_step(i, e), d.valid_below_step(i, z3.IntVal(0))],
        [d.valid_below_zero(e), d.valid_below_zero(z3.IntVal(0))])


def _off_le_dsum(d: Defs, use: Callable[..., z3.BoolRef], e: X) -> Proof:
    b = d.block
    stmt: Callable[[X], z3.BoolRef] = lambda k: z3.And(  # noqa: E731
        d.off(k) <= d.dsum(k) + k * (b - 1), d.dsum(k) == d.valid_below(d.tk, k))
    return induction(d, stmt, z3.IntVal(0), d.experts, e, [
        d.off_step(e), d.dsum_step(e), use("pad_bounds", e), use("vb_split", d.tk, e)],
        [d.dsum_step(z3.IntVal(0)), use("vb_bounds", d.tk, z3.IntVal(0))])


def _total_stmt(d: Defs) -> z3.BoolRef:
    b = d.block
    return z3.And(0 <= d.total, d.total % b == 0, d.total <= d.tk + d.experts * (b - 1))


def _total_bound(d: Defs, use: Callable[..., z3.BoolRef]) -> Proof:
    return direct(d.base() + [use("off_le_dsum", d.experts),
                              use("vb_bounds", d.tk, d.experts), use("off_aligned", d.experts),
                              use("off_mono", z3.IntVal(0), d.experts)], _total_stmt(d))


def _in(lo: X | int, x: X, hi: X) -> z3.BoolRef:
    return z3.And(lo <= x, x <= hi)


LEMMAS: tuple[Lemma, ...] = (
    Lemma("count_nonneg", 2, lambda d, i, e: z3.Implies(_in(0, i, d.tk), d.count(i, e) >= 0),
          lambda d, i, e: [d.count(i, e)], _count_nonneg),
    Lemma("count_mono", 3, lambda d, i, j, e: z3.Implies(
        z3.And(0 <= i, i <= j, j <= d.tk), d.count(i, e) <= d.count(j, e)),
        lambda d, i, j, e: [(d.count(i, e), d.count(j, e))], _count_mono),
    Lemma("pad_bounds", 1, _pad_stmt, lambda d, e: [d.cnt(e)], _pad_bounds),
    Lemma("off_mono", 2, lambda d, a, c: z3.Implies(
        z3.And(0 <= a, a <= c, c <= d.experts), d.off(a) <= d.off(c)),
        lambda d, a, c: [(d.off(a), d.off(c))], _off_mono),
    Lemma("off_aligned", 1, lambda d, e: z3.Implies(_in(0, e, d.experts),
                                                   d.off(e) % d.block == 0),
          lambda d, e: [d.off(e)], _off_aligned),
    Lemma("off_segment", 1, _segment_stmt, lambda d, e: [d.cnt(e)], _off_segment),
    Lemma("pos_range", 1, _pos_stmt, lambda d, i: [d.pos(i)], _pos_range),
    Lemma("pos_injective", 2, _injective_stmt, lambda d, i, j: [(d.pos(i), d.pos(j))],
          _pos_injective),
    Lemma("sids_at_pos", 1, _sids_stmt, lambda d, i: [d.pos(i)], _sids_at_pos),
    Lemma("rank_onto", 3, lambda d, e, r, n: z3.Implies(_in(0, n, d.tk), _rank_stmt(d, e, r, n)),
          lambda d, e, r, n: [d.rank_pair(e, r), d.count(n, e)], _rank_onto),
    Lemma("rows_real", 2, _real_stmt, lambda d, e, p: [(d.off(e), d.sids(p))], _rows_real),
    Lemma("pad_rows", 2, _pad_rows_stmt, lambda d, e, p: [(d.off(e), d.sids(p))], _pad_rows),
    Lemma("ends_inv", 2, _ends_stmt, lambda d, e, x: [d.ends(e, x)], _ends_inv),
    Lemma("row_segment", 1, _row_stmt, lambda d, p: [d.sids(p)], _row_segment),
    Lemma("be_range", 1, _be_stmt, lambda d, b: [d.be(b)], _be_range),
    Lemma("vb_split", 2, lambda d, i, e: z3.Implies(z3.And(_in(0, i, d.tk), e >= 0),
                                                   d.valid_below(i, e + 1) == d.valid_below(
                                                       i, e) + d.count(i, e)),
          lambda d, i, e: [d.valid_below(i, e)], _vb_split),
    Lemma("vb_bounds", 2, lambda d, i, e: z3.Implies(_in(0, i, d.tk), z3.And(
        d.valid_below(i, e) <= i, d.valid_below(i, 0) == 0)),
        lambda d, i, e: [d.valid_below(i, e)], _vb_bounds),
    Lemma("off_le_dsum", 1, lambda d, e: z3.Implies(_in(0, e, d.experts), z3.And(
        d.off(e) <= d.dsum(e) + e * (d.block - 1), d.dsum(e) == d.valid_below(d.tk, e))),
        lambda d, e: [d.dsum(e)], _off_le_dsum),
    Lemma("total_bound", 0, lambda d: _total_stmt(d), lambda d: [], _total_bound),
)

# What an obligation about an executor's clause may use: the definitions' non-recursive
# facts and the lemmas whose patterns cannot chain (no recursion through `+ 1`).
FOR_OBLIGATIONS = ("count_nonneg", "count_mono", "pad_bounds", "off_mono", "off_aligned",
                   "off_segment", "pos_range", "pos_injective", "sids_at_pos", "be_range",
                   "total_bound", "rows_real", "pad_rows", "row_segment")


def check(facts: Sequence[z3.BoolRef], goal: z3.BoolRef, rlimit: int = RLIMIT,
          vacuity: bool = True) -> str:
    """z3's answer to "facts and not goal": "unsat" means the goal follows. Facts that
    contradict each other would make every goal follow, so (`vacuity`, for quantifier-free
    facts, where z3 decides it) they are asked first: facts that are not satisfiable answer
    "vacuous", never "unsat"."""
    s = z3.Solver()
    s.set("rlimit", rlimit)
    s.add(*facts)
    alone = s.check() if vacuity else z3.sat
    if alone != z3.sat:
        return "vacuous" if alone == z3.unsat else f"facts {alone}"
    s.add(z3.Not(goal))
    answer = s.check()
    if answer != z3.unknown:
        return str(answer)
    # E-matching over quantified facts depends on the order z3 numbered the terms in
    # (the process's history) and on its version: the same query, read back from its text
    # into a context of its own, with more resources and model-based instantiation, is
    # the second try -- its answer is as trustworthy as the first's
    return _fresh(s.to_smt2(), rlimit * RETRY)


RETRY = 10  # the second try's resources, as a multiple of the first's


def _fresh(smt2: str, rlimit: int) -> str:
    ctx = z3.Context()
    s = z3.Solver(ctx=ctx)
    s.set("rlimit", rlimit)
    s.set("smt.mbqi", True)
    s.from_string(smt2)
    return str(s.check())


def prove_lemmas(d: Defs) -> list[LemmaResult]:
    """Every lemma, in order; a lemma whose proof fails makes the later ones that use it
    fail too (a `use` of an unproved lemma is refused)."""
    proved: set[str] = set()
    by_name = {lem.name: lem for lem in LEMMAS}
    results = []
    for lem in LEMMAS:
        missing: list[str] = []

        def use(name: str, *args: X, missing: list[str] = missing) -> z3.BoolRef:
            if name not in proved:
                missing.append(name)
                return z3.BoolVal(True)
            return by_name[name].statement(d, *args)

        xs = [z3.Int(f"{lem.name}_{k}") for k in range(lem.arity)]
        detail = ""
        proof = lem.proof(d, use, *xs)
        closing = (d.base() + [proof.establishes], lem.statement(d, *xs))
        for n, (facts, goal) in enumerate(proof.cases + [closing]):
            answer = check(facts, goal)
            if missing:
                detail = f"uses unproved {', '.join(sorted(set(missing)))}"
                break
            if answer != "unsat":
                detail = f"case {n + 1}: z3 answered {answer}"
                break
        if not detail:
            proved.add(lem.name)
        results.append(LemmaResult(lem.name, not detail, detail))
    return results


def quantified(d: Defs, name: str) -> z3.BoolRef:
    """A proved lemma as a fact for a later query: universally quantified, with patterns."""
    lem = next(lem for lem in LEMMAS if lem.name == name)
    if lem.arity == 0:
        return lem.statement(d)
    xs = [z3.Int(f"q_{name}_{k}") for k in range(lem.arity)]
    pats = [z3.MultiPattern(*p) if isinstance(p, tuple) else p
            for p in lem.patterns(d, *xs)]
    return z3.ForAll(xs, lem.statement(d, *xs), patterns=pats)
