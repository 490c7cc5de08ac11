"""ISL sets and maps as quantifier-free linear integer arithmetic, in SMT-LIB 2.

Why: a Presburger verdict of ISL ("this set is empty") is re-checked by another solver
(cvc5, in tilesafe/certcheck) that knows nothing of ISL. Each basic set becomes a
conjunction of its (in)equalities; each of ISL's integer divisions `floor(f / d)` becomes a
fresh integer variable q with `d*q <= f <= d*q + d - 1`; a union becomes a disjunction.
Since a certificate asks whether a conjunction of such formulas is satisfiable, the fresh
variables are free (existential) and the formula stays quantifier-free.

Only the writer of certificates uses this module (it needs islpy); the checker reads the
SMT-LIB text it produces.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field
from fractions import Fraction

import islpy as isl


def _num(v: isl.Val) -> Fraction:
    return Fraction(str(v))


def _sym(name: str) -> str:
    """An SMT-LIB simple symbol for an ISL name (quoted when it is not one)."""
    ok = name and all(c.isalnum() or c in "_.$" for c in name) and not name[0].isdigit()
    return name if ok else "|" + name.replace("|", "_") + "|"


def _int(k: int) -> str:
    return str(k) if k >= 0 else f"(- {-k})"


def _linear(terms: Sequence[tuple[int, str]], const: int) -> str:
    parts = [v if c == 1 else f"(* {_int(c)} {v})" for c, v in terms if c != 0]
    if const != 0 or not parts:
        parts.append(_int(const))
    return parts[0] if len(parts) == 1 else "(+ " + " ".join(parts) + ")"


@dataclass
class Encoder:
    """Collects the declarations of every variable the formulas use (sizes, tuple
    variables, and the fresh ones of integer divisions)."""

    prefix: str = "d"
    decls: dict[str, str] = field(default_factory=dict)
    _fresh: itertools.count = field(default_factory=itertools.count)

    def var(self, name: str) -> str:
        sym = _sym(name)
        self.decls.setdefault(sym, f"(declare-const {sym} Int)")
        return sym

    def fresh(self) -> str:
        return self.var(f"{self.prefix}{next(self._fresh)}")

    def params(self, space: isl.Space) -> list[str]:
        return [self.var("p_" + space.get_dim_name(isl.dim_type.param, i))
                for i in range(space.dim(isl.dim_type.param))]

    # -- sets ------------------------------------------------------------------------------

    def basic_set(self, bs: isl.BasicSet, dims: Sequence[str]) -> str:
        """One basic set over the tuple variables `dims` (SMT symbols, declared by the
        caller) as a conjunction."""
        space = bs.get_space()
        pvars = self.params(space)
        n_div = bs.dim(isl.dim_type.div)
        divs = [self.fresh() for _ in range(n_div)]
        cols = {isl.dim_type.param: pvars, isl.dim_type.set: list(dims),
                isl.dim_type.div: divs}
        conj: list[str] = []
        for k in range(n_div):  # q = floor(aff): d*q <= num <= d*q + d - 1
            aff = bs.get_div(k)
            den = _num(aff.get_denominator_val())
            terms: list[tuple[int, str]] = []
            for kind, names in ((isl.dim_type.param, pvars), (isl.dim_type.in_, list(dims)),
                                (isl.dim_type.div, divs)):
                for i, name in enumerate(names):
                    c = _num(aff.get_coefficient_val(kind, i)) * den
                    if c:
                        terms.append((int(c), name))
            const = int(_num(aff.get_constant_val()) * den)
            num = _linear(terms, const)
            d = int(den)
            conj.append(f"(<= (* {d} {divs[k]}) {num})")
            conj.append(f"(<= {num} (+ (* {d} {divs[k]}) {d - 1}))")
        for c in bs.get_constraints():
            terms = []
            for kind, names in cols.items():
                for i, name in enumerate(names):
                    v = int(_num(c.get_coefficient_val(kind, i)))
                    if v:
                        terms.append((v, name))
            expr = _linear(terms, int(_num(c.get_constant_val())))
            conj.append(f"(= {expr} 0)" if c.is_equality() else f"(>= {expr} 0)")
        if not conj:
            return "true"
        return conj[0] if len(conj) == 1 else "(and " + " ".join(conj) + ")"

    def set(self, s: isl.Set, dims: Sequence[str]) -> str:
        """A (union of basic) set as a disjunction over the tuple variables `dims`."""
        if s.dim(isl.dim_type.set) != len(dims):
            raise ValueError(f"set of {s.dim(isl.dim_type.set)} dims, {len(dims)} names")
        parts = [self.basic_set(bs, dims) for bs in s.get_basic_sets()]
        if not parts:
            return "false"
        return parts[0] if len(parts) == 1 else "(or " + " ".join(parts) + ")"

    def map(self, m: isl.Map, ins: Sequence[str], outs: Sequence[str]) -> str:
        return self.set(m.wrap(), [*ins, *outs])

    def tuple_vars(self, stem: str, n: int) -> list[str]:
        return [self.var(f"{stem}{i}") for i in range(n)]


def script(enc: Encoder, assertions: Sequence[str], status: str, comment: str = "") -> str:
    """A complete SMT-LIB 2 script: QF_LIA, the declarations, the assertions, the expected
    answer as `:status`."""
    head = "".join(f"; {line}\n" for line in comment.splitlines())
    body = "\n".join(enc.decls.values())
    asserts = "\n".join(f"(assert {a})" for a in assertions)
    return (f"{head}(set-info :smt-lib-version 2.6)\n(set-logic QF_LIA)\n"
            f"(set-info :status {status})\n{body}\n{asserts}\n(check-sat)\n(exit)\n")


def distinct_tuples(xs: Sequence[str], ys: Sequence[str]) -> str:
    """Two tuples differ somewhere (quantifier-free: a disjunction of strict orders)."""
    parts = [f"(not (= {x} {y}))" for x, y in zip(xs, ys, strict=True)]
    return parts[0] if len(parts) == 1 else "(or " + " ".join(parts) + ")"
