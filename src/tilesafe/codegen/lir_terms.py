"""IR expressions as LIR values: the code generator's algebra of frontend/fold.py.

Why an algebra: the lowering used to walk expressions three times -- as integers (with their
value ranges, which pick register widths), as floats, as predicates -- each deciding again
what an operator node is. Here one fold does it with the shared typed operations: an
integer operation goes through ExprLowering.int_op (range analysis, 32 or 64 bits, no silent
wrap), a float one is an f32 Op, a comparison a predicate whose operands are fitted to one
width; `&&`/`||` are taken whole, because their right side must run only when the left side
lets it (a load or a division by a variable there may fault).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from tilesafe.codegen import lir
from tilesafe.codegen.lir import Imm, Ty
from tilesafe.codegen.ranges import dtype_interval
from tilesafe.frontend import ir
from tilesafe.frontend.fold import Algebra, fold

if TYPE_CHECKING:
    from tilesafe.codegen.lower_expr import ExprLowering, Scope

INT, FLOAT = ir.ScalarType.INT, ir.ScalarType.FLOAT


class LirTerms(Algebra[Any]):
    """Values: an IntVal for an integer, a lir.Value (f32) for a float, a predicate Reg for
    a condition."""

    def __init__(self, low: ExprLowering, scope: Scope) -> None:
        self.low, self.scope = low, scope

    def whole(self, e: ir.Expr) -> Any | None:
        if isinstance(e, ir.BinOp) and e.op in ("&&", "||"):
            return self._connective(e)
        return None

    def leaf(self, e: ir.Expr) -> Any:
        from tilesafe.codegen.lower_expr import IntVal, VarSlot, imm_val

        low = self.low
        if isinstance(e, ir.IntConst):
            return imm_val(e.value, e.span)
        if isinstance(e, ir.FloatConst):
            return Imm(float(np.float32(e.value)), Ty.F32)
        if isinstance(e, ir.SizeVar):
            return low.size(e.name)
        if isinstance(e, ir.Builtin):
            return low.builtin(e, self.scope)
        if isinstance(e, (ir.LoopVar, ir.LocalRef)):
            v = self.scope.values[e.uid]
            if isinstance(v, VarSlot):
                return IntVal(v.reg, dtype_interval(v.dtype)) if e.type is INT else v.reg
            return v
        if isinstance(e, ir.FragLoad):
            return low.frag_load(e, self.scope)
        if isinstance(e, ir.Load):
            reg = low.load(e, self.scope)
            return IntVal(reg, dtype_interval(low._dtype_of(e))) if e.type is INT else reg
        raise AssertionError(f"no lowering for {type(e).__name__}")

    def to_float(self, x: Any, e: ir.Expr) -> Any:
        return self.low._to_f32(x)

    def op(self, name: str, e: ir.Expr, args: list[Any]) -> Any:
        from tilesafe.codegen.lower_expr import IntVal

        low = self.low
        if name == "id":
            return args[0]
        if name == "cvt.f32":
            return low._to_f32(args[0])
        if name == "cvt.i32":
            dst = low.reg(Ty.S32)
            low.emit(lir.Op(dst, "cvt.i32", (args[0],)))
            return IntVal(dst, dtype_interval(ir.DType.I32))
        if name == "not":
            dst = low.reg(Ty.PRED)
            low.emit(lir.Op(dst, "not", (args[0],)))
            return dst
        if e.type is ir.ScalarType.BOOL:  # a comparison
            vals = tuple(args)
            if name.startswith("int."):
                a, b = args
                ty = Ty.S64 if Ty.S64 in (a.value.ty, b.value.ty) else Ty.S32
                vals = (low._fit(a, ty), low._fit(b, ty))
            dst = low.reg(Ty.PRED)
            low.emit(lir.Op(dst, name, vals))
            return dst
        if name.startswith("int."):
            return low.int_op(name, args[0], args[1] if len(args) > 1 else None, e.span)
        dst = low.reg(Ty.F32)
        low.emit(lir.Op(dst, name, tuple(args)))
        return dst

    def _connective(self, e: ir.BinOp) -> Any:
        """`a && b` / `a || b`: b is evaluated only when a lets it, if it may fault."""
        from tilesafe.codegen.lower_expr import _may_fault

        low = self.low
        name = "and" if e.op == "&&" else "or"
        a = fold(e.lhs, self)
        if not _may_fault(e.rhs):
            b = fold(e.rhs, self)
            dst = low.reg(Ty.PRED)
            low.emit(lir.Op(dst, name, (a, b)))
            return dst
        dst = low.reg(Ty.PRED)
        low.emit(lir.Op(dst, "mov", (a,)))
        with low.nested() as rhs:
            b = fold(e.rhs, self)
            low.emit(lir.Op(dst, "mov", (b,)))
        low.emit(lir.If(dst, tuple(rhs), ()) if name == "and" else lir.If(dst, (), tuple(rhs)))
        return dst
