"""Deciding one validity question: do the hypotheses imply the claim, for every value of
every leaf?

`prove` answers PROVED (no counterexample exists), REFUTED (with concrete values of every
chosen leaf -- sizes, block, thread, loop iterations, shared-memory address -- confirmed by
evaluating the question with the exact semantics, products included, for *every* value of
the data the program loads or carries), or UNKNOWN (solver timeout, budget spent, or a
violation that depends on loaded data, where the abstraction cannot tell).

A solver model is never trusted by itself: products are uninterpreted in the fast encoding,
so a model may be an artefact; it is re-evaluated concretely and, when it does not survive,
the question is asked again with exact multiplication.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from dataclasses import dataclass, field

import z3

from tilesafe.codegen.validate import encode
from tilesafe.codegen.validate import terms as T
from tilesafe.codegen.validate.terms import Term

_DEBUG = bool(os.environ.get("TILESAFE_VALIDATE_DEBUG"))
PROVED, REFUTED, UNKNOWN = "proved", "refuted", "unknown"


@dataclass
class Outcome:
    verdict: str
    note: str = ""
    values: dict[str, int] = field(default_factory=dict)  # chosen leaf -> value
    shown: dict[str, object] = field(default_factory=dict)  # caller's terms, evaluated
    queries: int = 0


class Budget:
    """Total solver time for one kernel; when spent, every further question is unknown."""

    def __init__(self, seconds: float, per_query_ms: int) -> None:
        self.deadline = time.monotonic() + seconds
        self.per_query_ms = per_query_ms
        self.queries = 0

    def left_ms(self) -> int:
        return int((self.deadline - time.monotonic()) * 1000)


class Prover:
    def __init__(self, budget: Budget, extra_real: list[Term] | None = None) -> None:
        self.budget = budget
        self.extra_real = extra_real or []
        self.cache: dict[int, tuple[Term, Outcome]] = {}

    def prove(self, hyps: list[Term], claim: Term, show: Mapping[str, Term] | None = None
              ) -> Outcome:
        bad = T.and_(*hyps, T.not_(claim))
        hit = self.cache.get(id(bad))
        if hit is not None and hit[0] is bad:
            out = hit[1]
        else:
            out = self._decide(bad)
            self.cache[id(bad)] = (bad, out)
        if out.verdict == REFUTED and show:
            out = Outcome(out.verdict, out.note, out.values, self._show(out.values, show),
                          out.queries)
        return out

    def satisfiable(self, hyps: list[Term]) -> Outcome:
        """Is there an instance where all hypotheses hold? (REFUTED = yes, with it)."""
        return self.prove(hyps, T.FALSE)

    def exists(self, hyps: list[Term]) -> Outcome:
        """Is there an instance *and* some value of the opaque leaves (a loaded value, the
        answer of a try_wait) for which all hypotheses hold? REFUTED = yes, with the chosen
        integer leaves; used where the program really can see any such value."""
        f = T.and_(*hyps)
        if f is T.FALSE:
            return Outcome(PROVED)
        verdict, model = self._check(f, real=False)
        if verdict != "sat":
            return verdict_outcome(verdict)
        assert model is not None
        values = self._int_values(f, model)
        rest = T.substitute([f], {id(leaf): c for leaf, c in values.values()})[0]
        if rest is T.FALSE:
            return Outcome(UNKNOWN, "the solver's witness did not survive exact evaluation")
        if rest is not T.TRUE and self._check(rest, real=False)[0] != "sat":
            return Outcome(UNKNOWN, "could not confirm the witness")
        return Outcome(REFUTED, "", {k: _value(c) for k, (_, c) in values.items()})

    # -- the decision -----------------------------------------------------------------------

    def _decide(self, bad: Term) -> Outcome:
        if bad is T.FALSE:
            return Outcome(PROVED, "holds by construction")
        mine = {id(x) for x in T.leaves([bad])}
        extra = [x for x in self.extra_real if all(id(y) in mine for y in T.leaves([x]))]
        verdict, model = self._check(bad, real=False)
        if verdict != "sat":
            return verdict_outcome(verdict)
        for attempt in range(2):
            assert model is not None
            values = self._int_values(bad, model)
            rest = T.substitute([T.and_(bad, *extra)],
                                {id(leaf): c for leaf, c in values.values()})[0]
            if rest is T.TRUE:
                return Outcome(REFUTED, "", {k: _value(c) for k, (_, c) in values.items()})
            if rest is not T.FALSE:
                v2, _ = self._check(T.not_(rest), real=False)
                if v2 == "unsat":
                    return Outcome(REFUTED, "for every value of the loaded data",
                                   {k: _value(c) for k, (_, c) in values.items()})
                return Outcome(UNKNOWN, "a violation exists only for some values of data the "
                               "program loads or carries across iterations (not modelled)")
            if attempt == 1:
                break
            verdict, model = self._check(T.and_(bad, *extra), real=True)
            if verdict != "sat":
                return verdict_outcome(verdict)
        return Outcome(UNKNOWN, "the solver's counterexample did not survive exact evaluation")

    def _check(self, bad: Term, real: bool) -> tuple[str, z3.ModelRef | None]:
        left = self.budget.left_ms()
        if left <= 0:
            return "budget", None
        roots = [bad]
        width = encode.width_for(roots)
        enc = encode.Encoder(width, real_products=real, ranges=encode.intervals(roots))
        formula = [enc(bad), *enc.lemmas, *encode.leaf_constraints(enc, roots)]
        timeout = max(1, min(self.budget.per_query_ms, left))
        self.budget.queries += 1
        t0 = time.monotonic()
        s, r = None, z3.unknown
        for make in (_fast_solver, _plain_solver):
            s = make()
            s.set("timeout", timeout)
            s.add(*formula)
            try:
                r = s.check()
            except z3.Z3Exception:
                continue
            if r != z3.unknown or time.monotonic() - t0 > timeout / 1000:
                break
        if _DEBUG:
            _debug(s, r, width, real, bad, time.monotonic() - t0)
        if r == z3.unsat:
            return "unsat", None
        if r == z3.sat:
            self._enc = enc
            return "sat", s.model()
        return "timeout", None

    def _int_values(self, bad: Term, model: z3.ModelRef) -> dict[str, tuple[Term, Term]]:
        out: dict[str, tuple[Term, Term]] = {}
        for leaf in T.leaves([bad]):
            if leaf.w <= 0 or T.leaf_info(str(leaf.val)).kind != "int":
                continue
            z = self._enc.leaves.get(str(leaf.val))
            v = model.eval(z, model_completion=True) if z is not None else None
            out[str(leaf.val)] = (leaf, T.bv(v.as_long() if v is not None else 0, leaf.w))
        return out

    def _show(self, values: dict[str, int], show: Mapping[str, Term]) -> dict[str, object]:
        mapping = {}
        for t in T.leaves(list(show.values())):
            name = str(t.val)
            info = T.leaf_info(name)
            if name in values and t.w > 0:
                mapping[id(t)] = T.bv(values[name], t.w)
            elif info.kind == "int" and t.w > 0:
                # not in the violated formula: any allowed value is a witness
                lo = info.lo if info.lo is not None and info.lo > 0 else 0
                lo = -(-lo // info.align) * info.align
                values[name] = lo
                mapping[id(t)] = T.bv(lo, t.w)
        out: dict[str, object] = {}
        for k, term in show.items():
            v = T.substitute([term], mapping)[0]
            out[k] = _value(v) if v.is_const else T.show(v, 4)
        return out


def _fast_solver() -> z3.Solver:
    """Word-level simplification, then bit-blasting: equalities of address arithmetic
    mostly vanish in the first steps (several times faster than the default solver here)."""
    return z3.Then(z3.With("simplify", mul2concat=True, elim_and=True), "propagate-values",
                   "solve-eqs", "elim-uncnstr", "ackermannize_bv", "bit-blast", "sat").solver()


def _plain_solver() -> z3.Solver:
    return z3.SolverFor("QF_UFBV")


def _debug(s: z3.Solver, r: z3.CheckSatResult, width: int, real: bool, bad: Term,
           secs: float) -> None:
    """TILESAFE_VALIDATE_DEBUG=1 prints every query; TILESAFE_VALIDATE_DUMP=DIR also writes
    those slower than TILESAFE_VALIDATE_SLOW seconds (default 0.5) as SMT-LIB files;
    TILESAFE_VALIDATE_DEPTH / _CHARS widen the printed excerpt of the question."""
    depth = int(os.environ.get("TILESAFE_VALIDATE_DEPTH", "3"))
    chars = int(os.environ.get("TILESAFE_VALIDATE_CHARS", "150"))
    print(f"    query w={width} real={real} {r} {secs:.3f}s {T.show(bad, depth)[:chars]}")
    folder = os.environ.get("TILESAFE_VALIDATE_DUMP")
    if folder and secs > float(os.environ.get("TILESAFE_VALIDATE_SLOW", "0.5")):
        with open(os.path.join(folder, f"q{id(bad)}.smt2"), "w") as fh:
            fh.write(s.to_smt2())


def verdict_outcome(verdict: str) -> Outcome:
    if verdict == "unsat":
        return Outcome(PROVED)
    if verdict == "budget":
        return Outcome(UNKNOWN, "the validation's time budget is spent")
    return Outcome(UNKNOWN, "solver timeout")


def _value(t: Term) -> int:
    if t.w == T.INT:
        return int(t.val)  # type: ignore[arg-type]
    if t.w == T.BOOL:
        return int(bool(t.val))
    return int(t.val)  # type: ignore[arg-type]
