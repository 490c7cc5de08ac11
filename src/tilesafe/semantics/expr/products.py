"""Products of sizes: facts that make a non-linear term like `M * N` decidable.

Why: a row-major rank-3 tensor `x[B, M, N]` has the outer byte stride 2 * M * N, a product
of two symbolic sizes, which is not Presburger: ISL cannot take it, and the TMA rules on
strides (a multiple of 16, below 2^40, at least ...) were UNKNOWN (TS590). A product of
extents is bounded and divisible by what each factor is: if every factor e_i lies in
[lo_i, hi_i] and is a multiple of d_i for every size `where` allows (each a linear question,
answered exactly by z3 over the Presburger `where`), then the product P lies in
[prod lo_i, prod hi_i] and is a multiple of prod d_i. These *facts* over-approximate the
values P takes, so a rule they imply holds for every size (PROVED). When they do not imply
it, z3 looks for sizes that violate the rule itself (non-linear, with a time limit): found,
the rule is REFUTED at those sizes; not found, it stays UNKNOWN -- never PROVED.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import z3

from tilesafe.frontend import ir

MAX_POW2 = 40


@dataclass(frozen=True)
class Factor:
    text: str
    lo: int
    hi: int | None  # None: unbounded above
    divisor: int  # the largest power of two dividing it for every allowed size


@dataclass(frozen=True)
class Facts:
    """scale * product of the factors: its range and a divisor, for every allowed size."""

    scale: int
    factors: tuple[Factor, ...]

    @property
    def lo(self) -> int:
        return self.scale * math.prod(f.lo for f in self.factors)

    @property
    def hi(self) -> int | None:
        if any(f.hi is None for f in self.factors):
            return None
        return self.scale * math.prod(f.hi for f in self.factors)  # type: ignore[misc]

    @property
    def divisor(self) -> int:
        return self.scale * math.prod(f.divisor for f in self.factors)

    def evidence(self) -> dict:
        return {"product": " * ".join([str(self.scale)] + [f.text for f in self.factors]),
                "factors": {f.text: {"range": [f.lo, f.hi], "multiple of": f.divisor}
                            for f in self.factors},
                "range": [self.lo, self.hi], "multiple of": self.divisor}


class _Env:
    """param_smt.Enc over one copy of the sizes, without a model (no lets are needed)."""

    def __init__(self, kernel: ir.Kernel) -> None:
        from tilesafe.semantics.temporal.events import Lets
        from tilesafe.semantics.temporal.param_smt import Enc

        holder = type("M", (), {"lets": Lets()})()
        self.enc = Enc(kernel, holder, "", {})  # type: ignore[arg-type]
        self.where = self.enc.where()


def facts(kernel: ir.Kernel, scale: int, extents: tuple[ir.Expr, ...],
          timeout_ms: int) -> Facts | None:
    """The facts of scale * prod(extents); None if a factor's bounds are not decided or a
    factor may be negative (then the product's range is not the product of the ranges)."""
    env = _Env(kernel)
    out = []
    for e in extents:
        t = env.enc.term(e)
        lo = _opt(env.where, t, True, timeout_ms)
        if lo is None or lo < 0:
            return None
        hi = _opt(env.where, t, False, timeout_ms)
        div = 1
        for k in range(MAX_POW2, 0, -1):
            s = z3.Solver()
            s.set("timeout", timeout_ms)
            s.add(*env.where, t % (1 << k) != 0)
            if s.check() == z3.unsat:
                div = 1 << k
                break
        out.append(Factor(_text(e), lo, hi, div))
    return Facts(scale, tuple(out))


def _opt(where: list, t, minimize: bool, timeout_ms: int) -> int | None:
    o = z3.Optimize()
    o.set("timeout", timeout_ms)
    o.add(*where)
    h = o.minimize(t) if minimize else o.maximize(t)
    if o.check() != z3.sat:
        return None
    v = (o.lower(h) if minimize else o.upper(h))
    if not z3.is_int_value(v):
        return None  # unbounded (oo) or not decided
    return v.as_long()


def violation(kernel: ir.Kernel, scale: int, extents: tuple[ir.Expr, ...],
              minimum: int | None, maximum: int | None, multiple_of: int,
              timeout_ms: int) -> dict[str, int] | None:
    """Sizes `where` allows at which scale * prod(extents) breaks the rule (non-linear
    search; None when none is found in time)."""
    env = _Env(kernel)
    v = z3.IntVal(scale)
    for e in extents:
        v = v * env.enc.term(e)
    bad = []
    if minimum is not None:
        bad.append(v < minimum)
    if maximum is not None:
        bad.append(v > maximum)
    if multiple_of > 1:
        bad.append(v % multiple_of != 0)
    if not bad:
        return None
    s = z3.SolverFor("QF_NIA")
    s.set("timeout", timeout_ms)
    s.add(*env.where, z3.Or(bad))
    if s.check() != z3.sat:
        return None
    m = s.model()
    return {n: m.eval(x, model_completion=True).as_long() for n, x in env.enc.sizes.items()}


def _text(e: ir.Expr) -> str:
    if isinstance(e, ir.SizeVar):
        return e.name
    if isinstance(e, ir.IntConst):
        return str(e.value)
    return type(e).__name__
