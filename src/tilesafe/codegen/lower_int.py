"""Integer operations of the lowering with exact semantics: floor division and modulo,
bit operations on non-negative values, constants folded, and every result in the
narrowest width (32 or 64 bits) its range always fits -- a range beyond 64 bits refuses
compilation (TS701) instead of wrapping.

Why separate: this is the lowering's arithmetic -- range analysis and width choice --
which expressions (lir_terms.py), addresses (lower_addr.py) and statements (lower.py) all
go through; it is a mixin of ExprLowering because it writes into the same LIR stream with
the same register counter (`reg`, `emit`, which ExprLowering provides).
"""

from __future__ import annotations

from tilesafe.codegen import lir
from tilesafe.codegen.lir import Imm, Reg, Ty
from tilesafe.codegen.lower_values import IntVal, imm_val, ty_for, value_ty
from tilesafe.codegen.ranges import Interval
from tilesafe.frontend.span import Span
from tilesafe.semantics.expr import evaluate


class IntegerOps:
    """int_op, narrow and their helpers, over the host's `reg(ty)` and `emit(instr)`."""

    def int_op(self, name: str, a: IntVal, b: IntVal | None, span: Span,
               known: Interval | None = None) -> IntVal:
        """One integer operation with exact semantics (floor / and %; bit operations on
        non-negative values), in the width its result range needs. `known` is a range the
        result is proved to lie in by other means (the flat index of an in-bounds access)."""
        if isinstance(a.value, Imm) and (b is None or isinstance(b.value, Imm)):
            return self._fold(name, a, b)
        rng = self._range(name, a.rng, b.rng if b is not None else None)
        if known is not None:
            rng = rng.meet(known)
        ty = ty_for(rng, span)
        args = (a, b) if b is not None else (a,)
        if name in ("int.div", "int.mod", "int.min", "int.max", "int.abs"):
            # Not homomorphic under wrapping: operate in the widest operand width.
            for x in args:
                ty = Ty.S64 if value_ty(x.value) is Ty.S64 else ty
        vals = tuple(self._fit(x, ty) for x in args)
        if name in ("int.div", "int.mod") and b is not None and not isinstance(b.value, Imm):
            if b.rng.lo <= 0 <= b.rng.hi:
                self._trap_if_zero(b, span)
        hint = "nonneg" if all(x.rng.nonneg for x in args) else ""
        dst = self.reg(ty)
        self.emit(lir.Op(dst, name, vals, hint))
        return IntVal(dst, rng)

    def _fold(self, name: str, a: IntVal, b: IntVal | None) -> IntVal:
        x = int(a.value.value)
        y = int(b.value.value) if b is not None else 0
        table = {"bit.xor": lambda: x ^ y, "bit.and": lambda: x & y, "bit.or": lambda: x | y,
                 "bit.shr": lambda: x >> y, "bit.shl": lambda: x << y}
        if name in table:
            return imm_val(table[name]())
        impl = evaluate.CONCRETE[name]
        return imm_val(int(impl(x, y) if b is not None else impl(x)))

    @staticmethod
    def _range(name: str, a: Interval, b: Interval | None) -> Interval:
        if b is None:
            return {"int.neg": lambda: -a, "int.abs": a.absolute}[name]()
        if name == "int.add":
            return a + b
        if name == "int.sub":
            return a - b
        if name == "int.mul":
            return a * b
        if name == "int.div":
            return a.floordiv(b)
        if name == "int.mod":
            return a.floormod(b)
        if name == "int.min":
            return a.minimum(b)
        if name == "int.max":
            return a.maximum(b)
        if name in ("bit.xor", "bit.or"):
            return a.bitwise(b)
        if name == "bit.and":  # a mask of a non-negative value never exceeds either
            if a.lo >= 0 and b.lo >= 0:
                return Interval(0, min(a.hi, b.hi))
            if a.lo >= 0 or b.lo >= 0:
                return Interval(0, a.hi if a.lo >= 0 else b.hi)
            return a.bitwise(b)
        if name in ("bit.shr", "bit.shl"):  # shift amounts are never negative here
            lo, hi = max(b.lo, 0), max(b.hi, 0)
            scale = Interval(1 << lo, 1 << hi)
            return a.floordiv(scale) if name == "bit.shr" else a * scale
        raise AssertionError(name)

    def _fit(self, v: IntVal, ty: Ty) -> lir.Value:
        """v in a register of type ty: narrower operands are sign-extended by the printer;
        a wider one is truncated here, which is exact because the operation's result range
        fits ty and +, -, * commute with wrapping."""
        if isinstance(v.value, Imm):
            return Imm(v.value.value, ty)
        if v.value.ty.bits > ty.bits:
            dst = self.reg(ty)
            self.emit(lir.Op(dst, "cvt.s32", (v.value,)))
            return dst
        return v.value

    def _trap_if_zero(self, b: IntVal, span: Span) -> None:
        p = self.reg(Ty.PRED)
        self.emit(lir.Op(p, "int.eq", (b.value, Imm(0, value_ty(b.value)))))
        self.emit(lir.If(p, (lir.Trap(span),), (), span))

    def narrow(self, v: IntVal, rng: Interval) -> IntVal:
        """v known (by a proof elsewhere) to lie in rng: use that range from here on."""
        r = v.rng.meet(rng)
        if r.lo > r.hi:
            r = rng
        if isinstance(v.value, Reg) and v.value.ty is Ty.S64 and r.width() == 32:
            return IntVal(self._fit(IntVal(v.value, r), Ty.S32), r)
        return IntVal(v.value, r)
