"""Value ranges of integer terms, so every integer gets the narrowest register that is exact.

Why: the language's integers are mathematical (no overflow), PTX registers are 32 or 64 bits
wide. Code generation must pick, for every integer operation, a width in which the exact
value always fits — for every size `where` allows — or refuse to compile (TS701). Guessing
32 bits is the classic source of wrong addresses past 2^31 elements; always using 64 bits
doubles the cost of every index computation. Intervals decide it soundly.

Where the bounds come from:

* sizes: the `where` clause plus the *launch contract* below, projected with ISL;
* `thread`, `lane`, `warp_id`: the block (narrowed to the enclosing role);
* `block.x/y/z`: the grid expression's range, capped by the hardware's grid limits;
* loop variables: their bounds; `let`s: their value; `var`s, loads and `i32(...)`: their
  dtype's range.

The launch contract is what the launcher enforces before it launches (gpu/launcher.py
refuses other sizes): every tensor has between 1 and MAX_ELEMENTS elements in every
dimension, and the grid is within the hardware limits. The translation validator assumes
the same facts, so a width chosen here is re-proved there in the registers' real widths.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import islpy as isl

from tilesafe.frontend import ir
from tilesafe.frontend.limits import GRID_LIMITS
from tilesafe.semantics.expr import affine

MAX_ELEMENTS = 2**40  # launch contract: every extent below this (1 TiB of u8)
S32 = (-(2**31), 2**31 - 1)
S64 = (-(2**63), 2**63 - 1)
DTYPE_RANGE = {ir.DType.I32: S32, ir.DType.U8: (0, 255)}


@dataclass(frozen=True)
class Interval:
    """The closed range lo .. hi of an integer value (Python ints, unbounded)."""

    lo: int
    hi: int

    @staticmethod
    def point(v: int) -> Interval:
        return Interval(v, v)

    def __add__(self, o: Interval) -> Interval:
        return Interval(self.lo + o.lo, self.hi + o.hi)

    def __sub__(self, o: Interval) -> Interval:
        return Interval(self.lo - o.hi, self.hi - o.lo)

    def __neg__(self) -> Interval:
        return Interval(-self.hi, -self.lo)

    def __mul__(self, o: Interval) -> Interval:
        c = (self.lo * o.lo, self.lo * o.hi, self.hi * o.lo, self.hi * o.hi)
        return Interval(min(c), max(c))

    def floordiv(self, o: Interval) -> Interval:
        """Floor quotient; a divisor range containing 0 is split around it (the zero case
        itself traps at run time, as in the interpreter)."""
        parts = [d for d in (Interval(o.lo, min(o.hi, -1)), Interval(max(o.lo, 1), o.hi))
                 if d.lo <= d.hi]
        if not parts:
            return Interval(0, 0)
        qs = [a // b for d in parts for a in (self.lo, self.hi) for b in (d.lo, d.hi)]
        return Interval(min(qs), max(qs))

    def floormod(self, o: Interval) -> Interval:
        """Floor remainder: has the divisor's sign, |r| < |divisor|."""
        top = max(abs(o.lo), abs(o.hi)) - 1
        lo = -top if o.lo < 0 else 0
        hi = top if o.hi > 0 else 0
        if o.lo == o.hi and o.lo > 0 and 0 <= self.lo and self.hi < o.lo:
            return self  # already reduced
        return Interval(lo, hi)

    def join(self, o: Interval) -> Interval:
        return Interval(min(self.lo, o.lo), max(self.hi, o.hi))

    def meet(self, o: Interval) -> Interval:
        return Interval(max(self.lo, o.lo), min(self.hi, o.hi))

    def minimum(self, o: Interval) -> Interval:
        return Interval(min(self.lo, o.lo), min(self.hi, o.hi))

    def maximum(self, o: Interval) -> Interval:
        return Interval(max(self.lo, o.lo), max(self.hi, o.hi))

    def absolute(self) -> Interval:
        if self.lo >= 0:
            return self
        if self.hi <= 0:
            return -self
        return Interval(0, max(-self.lo, self.hi))

    def bitwise(self, o: Interval) -> Interval:
        """XOR / OR of two non-negative values stays below the next power of two."""
        if self.lo < 0 or o.lo < 0:
            return Interval(*S64)
        top = max(self.hi, o.hi)
        return Interval(0, (1 << top.bit_length()) - 1)

    def width(self) -> int | None:
        """32 or 64: the narrowest signed register that holds every value; None if none."""
        if S32[0] <= self.lo and self.hi <= S32[1]:
            return 32
        if S64[0] <= self.lo and self.hi <= S64[1]:
            return 64
        return None

    @property
    def nonneg(self) -> bool:
        return self.lo >= 0


def dtype_interval(dtype: ir.DType) -> Interval:
    return Interval(*DTYPE_RANGE.get(dtype, S32))


class SizeBounds:
    """Ranges of size expressions over every size the `where` clause and the launch contract
    allow (ISL projections; an unbounded side is clipped to the s64 range, which makes any
    product overflow and compilation refuse it rather than guess)."""

    def __init__(self, kernel: ir.Kernel) -> None:
        self.kernel = kernel
        self.ctx = isl.Context()
        self.env = affine.AffineEnv(affine.make_space(self.ctx, kernel.sizes, ()))
        allowed = self.env.universe()
        for cond in kernel.where:
            allowed = allowed.intersect(affine.condition(cond, self.env).over)
        for extent in self._extents():
            pa = affine.term(extent, self.env)
            allowed = allowed.intersect(pa.ge_set(affine.constant(self.env, 1)))
            allowed = allowed.intersect(pa.le_set(affine.constant(self.env, MAX_ELEMENTS - 1)))
        for g, limit in zip(kernel.grid, GRID_LIMITS, strict=False):
            pa = affine.term(g, self.env)
            allowed = allowed.intersect(pa.ge_set(affine.constant(self.env, 1)))
            allowed = allowed.intersect(pa.le_set(affine.constant(self.env, limit)))
        self.allowed = allowed.params()
        self._memo: dict[ir.Expr, Interval] = {}

    def _extents(self) -> Iterable[ir.Expr]:
        for t in self.kernel.params:
            yield from t.shape

    def of(self, e: ir.Expr) -> Interval:
        """The range of a quasi-affine expression over sizes."""
        if e not in self._memo:
            lo, hi = affine.bounds(affine.term(e, self.env).intersect_params(self.allowed))
            self._memo[e] = Interval(_val(lo, S64[0]), _val(hi, S64[1]))
        return self._memo[e]

    def is_empty(self) -> bool:
        return bool(self.allowed.is_empty())


def _val(v: isl.Val, clip: int) -> int:
    if v.is_infty() or v.is_neginfty() or v.is_nan():
        return clip
    return max(S64[0], min(S64[1], v.to_python()))
