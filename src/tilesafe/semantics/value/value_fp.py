"""Equality of two pointwise value terms as IEEE arithmetic, decided by z3's floating-point
theory: `src * 2.0` and `src + src`, `max(x, 0.0)` and `max(0.0, x)`, a kernel and a spec that
compute the same bits by different operations.

Why: the value proof compares terms operator by operator (semantics/value/value_compare.py),
which is exact but only sees the identities it was told. A right spec spelled otherwise than
the kernel computes failed verification (TS890, an error). When both terms are *pointwise* --
operations of semantics/expr/evaluate.py over input elements and constants, no sums, no
unresolved shared reads -- the question "equal bits for every input value" is a quantifier-
free formula over IEEE binary32 numbers, which z3 decides exactly.

The encoding, so that it means what the interpreter computes:

* each input element read (a `Glob`) is a variable of its tensor's format (f16, bf16, f32),
  widened to f32 exactly; two reads are one variable when ISL proves their indices equal on
  the instances compared, else two independent variables -- sound for a proof, since
  independent values include equal ones (and such a query never refutes: failing is only
  "not proved");
* + - * / round to nearest even (PTX `.rn`, subnormals kept); min/max are PTX's (a NaN
  operand yields the other, -0 below +0: fp.fmin / fp.fmax written out, since SMT-LIB
  leaves max(-0, +0) open); a store into f16/bf16 rounds to nearest even;
* a value chosen by a condition on data (`select(c, a, b)`, value_exec.py: an `if x[i] >
  0.0` whose branches store to one element or assign one variable) is z3's `If`, the
  condition's comparisons ordered (false on NaN; `!=` true on NaN) as evaluate.py's;
* equal means equal bits, every NaN equal to every NaN (payloads are not modelled), so
  +0 and -0 differ.

z3 runs under a time limit; past it the answer is "not proved", never "equal".
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import islpy as isl
import z3

from tilesafe.frontend import ir
from tilesafe.semantics.value.value_space import NotProved, ValueSpace
from tilesafe.semantics.value.value_terms import (
    Choice,
    Glob,
    IntV,
    Ite,
    Lit,
    Op,
    Round,
    Term,
    walk,
)

TIMEOUT_MS = 2000
_F32 = z3.Float32()
_SORTS = {ir.DType.F32: _F32, ir.DType.F16: z3.Float16(), ir.DType.BF16: z3.FPSort(8, 8)}
_RNE = z3.RNE()
_BINARY: dict[str, Callable[[z3.FPRef, z3.FPRef], z3.FPRef]] = {
    "f32.add": lambda a, b: z3.fpAdd(_RNE, a, b),
    "f32.sub": lambda a, b: z3.fpSub(_RNE, a, b),
    "f32.mul": lambda a, b: z3.fpMul(_RNE, a, b),
    "f32.div": lambda a, b: z3.fpDiv(_RNE, a, b),
}


class _Unsupported(Exception):
    """A term outside the pointwise fragment."""


def pointwise(t: Term) -> bool:
    """Only operations, input elements and constants this module encodes."""
    return all(isinstance(x, (Glob, Lit, Round)) or _constant(x)
               or (isinstance(x, Op) and (x.name in _BINARY or x.name in _UNARY
                                          or x.name in _LOGIC or x.name == SELECT
                                          or (x.name == "cvt.f32" and _constant(x.args[0]))))
               for x in walk(t))


def _constant(t: Term) -> bool:
    """An integer constant (converted to f32 where a condition compares it with data)."""
    return isinstance(t, IntV) and isinstance(t.expr, ir.IntConst)


def equal(space: ValueSpace, kernel: ir.Kernel, k: Term, s: Term, ctx: isl.Set,
          out_dtype: ir.DType | None = None) -> bool:
    """Do k and s have equal bits (NaN = NaN) for every value of the input elements they
    read, on the instances of ctx? With `out_dtype` (f16/bf16), compared after the store's
    rounding. False also when it cannot tell (outside the fragment, z3's time limit)."""
    if not (pointwise(k) and pointwise(s)):
        return False
    enc = _Encoder(space, kernel, ctx)
    try:
        a, b = enc.term(k), enc.term(s)
    except _Unsupported:
        return False
    if out_dtype in (ir.DType.F16, ir.DType.BF16):
        a, b = _round(a, out_dtype), _round(b, out_dtype)
    solver = z3.Solver()
    solver.set("timeout", TIMEOUT_MS)
    solver.add(z3.Not(same_bits(a, b)))
    return solver.check() == z3.unsat


def equal_by_cases(cmp: Any, k: Term, s: Term, ctx: isl.Set,
                   out_dtype: ir.DType | None) -> bool:
    """`equal` with the case splits below an operation lifted first -- a TMA load's
    in-bounds test (an Ite), a resolved shared read (a Choice) -- each case on its own
    instances. `cmp` is the value_compare.Compare at work (its space, and `fixed` for the
    writer coordinates of a link)."""
    if ctx.is_empty():
        return True
    case = _first_case(k) or _first_case(s)
    if case is None:
        return equal(cmp.s, cmp.s.k, k, s, ctx, out_dtype)
    try:
        if isinstance(case, Ite):
            cond = ir.UnOp(case.cond.span, ir.ScalarType.BOOL, "!", case.cond)
            parts = ((ctx & cmp.s.cond(case.cond, case.inst), case.then),
                     (ctx & cmp.s.cond(cond, case.inst), case.orelse))
            return all(equal_by_cases(cmp, _substitute(k, case, v), _substitute(s, case, v),
                                      part, out_dtype) for part, v in parts)
        for link, v in case.options:
            with cmp.fixed(link.writer):
                if not equal_by_cases(cmp, _substitute(k, case, v), _substitute(s, case, v),
                                      ctx & cmp.s.link(link), out_dtype):
                    return False
        return True
    except (NotProved, isl.Error):
        return False


def _first_case(t: Term) -> Ite | Choice | None:
    """An Ite or Choice below the pointwise operations of t (Op, Round), if any."""
    if isinstance(t, (Ite, Choice)):
        return t
    if isinstance(t, Op):
        return next((c for c in map(_first_case, t.args) if c is not None), None)
    if isinstance(t, Round):
        return _first_case(t.arg)
    return None


def _substitute(t: Term, old: Term, new: Term) -> Term:
    """t with the node `old` (by identity, below Op and Round) replaced by `new`."""
    if t is old:
        return new
    if isinstance(t, Op):
        return Op(t.name, tuple(_substitute(a, old, new) for a in t.args))
    if isinstance(t, Round):
        return Round(t.dtype, _substitute(t.arg, old, new))
    return t


def same_bits(a: z3.FPRef, b: z3.FPRef) -> z3.BoolRef:
    """Bit equality of two f32 values with every NaN equal to every NaN."""
    return z3.Or(z3.And(z3.fpIsNaN(a), z3.fpIsNaN(b)),
                 z3.And(z3.fpEQ(a, b), z3.fpIsNegative(a) == z3.fpIsNegative(b)))


def fmin(a: z3.FPRef, b: z3.FPRef) -> z3.FPRef:
    """fp.fmin: a NaN operand yields the other operand; -0 below +0."""
    return z3.If(z3.fpIsNaN(a), b, z3.If(z3.fpIsNaN(b), a, z3.If(
        z3.fpEQ(a, b), z3.If(z3.fpIsNegative(a), a, b), z3.If(z3.fpLT(a, b), a, b))))


def fmax(a: z3.FPRef, b: z3.FPRef) -> z3.FPRef:
    """fp.fmax: a NaN operand yields the other operand; +0 above -0."""
    return z3.If(z3.fpIsNaN(a), b, z3.If(z3.fpIsNaN(b), a, z3.If(
        z3.fpEQ(a, b), z3.If(z3.fpIsNegative(a), b, a), z3.If(z3.fpGT(a, b), a, b))))


_UNARY: dict[str, Callable[[z3.FPRef], z3.FPRef]] = {
    "f32.neg": z3.fpNeg,
    "f32.abs": z3.fpAbs,
}
_MINMAX = {"f32.min": fmin, "f32.max": fmax}
_BINARY.update(_MINMAX)
SELECT = "select"  # value_exec.SELECT: a value chosen by a condition on data
# Conditions on data (value_exec.ConditionTerms): ordered comparisons are false on NaN, !=
# is true on NaN, as evaluate.py's numpy operations.
_LOGIC: dict[str, Callable[..., z3.BoolRef]] = {
    "f32.lt": z3.fpLT, "f32.le": z3.fpLEQ, "f32.gt": z3.fpGT, "f32.ge": z3.fpGEQ,
    "f32.eq": z3.fpEQ, "f32.ne": lambda a, b: z3.Not(z3.fpEQ(a, b)),
    "and": z3.And, "or": z3.Or, "not": z3.Not,
}


def _round(a: z3.FPRef, dtype: ir.DType) -> z3.FPRef:
    """Round an f32 to f16/bf16 (nearest even) and widen it back, as a store does."""
    return z3.fpFPToFP(_RNE, z3.fpFPToFP(_RNE, a, _SORTS[dtype]), _F32)


class _Encoder:
    def __init__(self, space: ValueSpace, kernel: ir.Kernel, ctx: isl.Set) -> None:
        self.space, self.kernel, self.ctx = space, kernel, ctx
        self.leaves: list[tuple[Glob, z3.FPRef]] = []

    def term(self, t: Term) -> z3.ExprRef:
        if isinstance(t, Lit):
            return z3.fpBVToFP(z3.BitVecVal(t.bits, 32), _F32)
        if isinstance(t, Glob):
            return self.leaf(t)
        if isinstance(t, Round):
            if t.dtype not in (ir.DType.F16, ir.DType.BF16):
                raise _Unsupported(t.dtype.value)
            return _round(self.term(t.arg), t.dtype)
        if isinstance(t, Op) and t.name == "cvt.f32" and _constant(t.args[0]):
            value = t.args[0].expr.value  # type: ignore[attr-defined]
            if abs(value) > 1 << 24:
                raise _Unsupported("an integer constant f32 does not hold exactly")
            return z3.FPVal(float(value), _F32)
        if isinstance(t, Op):
            args = [self.term(a) for a in t.args]
            if t.name in _UNARY and len(args) == 1:
                return _UNARY[t.name](args[0])
            if t.name in _BINARY and len(args) == 2:
                return _BINARY[t.name](args[0], args[1])
            if t.name in _LOGIC:
                return _LOGIC[t.name](*args)
            if t.name == SELECT and len(args) == 3:
                return z3.If(args[0], args[1], args[2])
        raise _Unsupported(type(t).__name__)

    def leaf(self, g: Glob) -> z3.FPRef:
        for other, var in self.leaves:
            if self.same_element(g, other):
                return var
        dtype = self.kernel.tensor(g.tensor).dtype
        if dtype not in _SORTS:
            raise _Unsupported(f"an element of {dtype.value} tensor {g.tensor}")
        raw = z3.FP(f"{g.tensor}_{len(self.leaves)}", _SORTS[dtype])
        var = raw if dtype is ir.DType.F32 else z3.fpFPToFP(_RNE, raw, _F32)  # exact
        self.leaves.append((g, var))
        return var

    def same_element(self, a: Glob, b: Glob) -> bool:
        """ISL: the two reads name the same element on every instance of ctx."""
        if a.tensor != b.tensor or len(a.indices) != len(b.indices):
            return False
        for x, y in zip(a.indices, b.indices, strict=True):
            differ = self.ctx & self.space.term(x, a.inst).ne_set(self.space.term(y, b.inst))
            if not differ.is_empty():
                return False
        return True
