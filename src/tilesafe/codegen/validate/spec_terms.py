"""IR expressions as validator terms: the translation validator's algebra of
frontend/fold.py.

Why: the specification side (codegen/validate/spec.py) reads every operand from the IR alone
-- integers in exact arithmetic with the language's floor division and modulo, floats as
uninterpreted PTX operations (each named by the instruction that performs exactly it), loads
as events of the spec. The fold gives the operations in the one typed vocabulary; this table
says what each means here. `&&`, `||` and `!` are taken whole (conditions, with loads on the
right side evaluated only when the left side does not decide), and a division by a
variable records the condition that it is not zero.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from tilesafe.codegen.validate import terms as T
from tilesafe.codegen.validate.terms import BOOL, Term
from tilesafe.frontend import ir
from tilesafe.frontend.fold import Algebra

if TYPE_CHECKING:
    from tilesafe.codegen.validate.spec import Spec

# The float vocabulary: IEEE binary32 operations named by the PTX instruction that performs
# exactly them (round to nearest even, no contraction, no flush to zero).
FLOAT_OPS = {"f32.add": "add.rn.f32", "f32.sub": "sub.rn.f32", "f32.mul": "mul.rn.f32",
             "f32.div": "div.rn.f32", "f32.min": "min.f32", "f32.max": "max.f32",
             "f32.abs": "abs.f32", "f32.neg": "neg.f32"}
FLOAT_CMP = {"f32.eq": "setp.eq.f32", "f32.ne": "setp.neu.f32", "f32.lt": "setp.lt.f32",
             "f32.le": "setp.le.f32", "f32.gt": "setp.gt.f32", "f32.ge": "setp.ge.f32"}
INT_TO_F32 = "cvt.rn.f32.int"
F32_TO_I32 = "cvt.rzi.s32.f32"


class SpecUnsupported(ValueError):
    """An IR construct the specification side does not model."""



class SmtTerms(Algebra[Term]):
    def __init__(self, spec: Spec, ctx: Any, conds: list[Term]) -> None:
        self.spec, self.ctx, self.conds = spec, ctx, conds

    def whole(self, e: ir.Expr) -> Term | None:
        if (isinstance(e, ir.BinOp) and e.op in ("&&", "||")) or (
                isinstance(e, ir.UnOp) and e.op == "!"):
            return self.spec.cond(e, self.ctx, self.conds)[0]
        return None

    def leaf(self, e: ir.Expr) -> Term:
        from tilesafe.codegen.validate.spec import size_leaf

        ctx = self.ctx
        if isinstance(e, ir.IntConst):
            return T.const_int(e.value)
        if isinstance(e, ir.FloatConst):
            bits = int(np.float32(e.value).view(np.uint32))
            return T.bv(bits, 32)
        if isinstance(e, ir.SizeVar):
            return T.sint(size_leaf(e.name))
        if isinstance(e, ir.Builtin):
            return builtin(e)
        if isinstance(e, (ir.LoopVar, ir.LocalRef)):
            if e.uid in ctx.env:
                return ctx.env[e.uid]
            if isinstance(e, ir.LocalRef) and e.mutable:
                raise SpecUnsupported("mutable variable without a binding")
            raise SpecUnsupported(f"unbound {e.name}")
        if isinstance(e, ir.Load):
            return self.spec.load(e, ctx, self.conds)
        if isinstance(e, ir.FragLoad):
            return self.spec.frag_read(e, ctx, self.conds)
        raise SpecUnsupported(f"expression {type(e).__name__}")

    def to_float(self, x: Term, e: ir.Expr) -> Term:
        return T.uf(INT_TO_F32, 32, x)

    def op(self, name: str, e: ir.Expr, vals: list[Term]) -> Term:
        if name == "id":
            return vals[0]
        if name == "cvt.f32":
            return T.uf(INT_TO_F32, 32, vals[0])
        if name == "cvt.i32":
            return T.sint(T.uf(F32_TO_I32, 32, vals[0]))
        if name in FLOAT_OPS:
            return T.uf(FLOAT_OPS[name], 32, *vals)
        if name in FLOAT_CMP:
            return T.uf(FLOAT_CMP[name], BOOL, *vals)
        a = vals[0]
        b = vals[1] if len(vals) > 1 else None
        if name == "int.neg":
            return T.ineg(a)
        if name == "int.abs":
            return T.iabs(a)
        assert b is not None
        if name in ("int.div", "int.mod"):
            from tilesafe.codegen.validate.spec import _may_be_zero

            if not b.is_const and _may_be_zero(b):
                self.conds.append(T.not_(T.eq(b, T.const_int(0))))
            elif b.val == 0:
                raise SpecUnsupported("division by the constant 0")
            return T.ifdiv(a, b) if name == "int.div" else T.ifmod(a, b)
        fn = {"int.add": T.iadd, "int.sub": T.isub, "int.mul": T.imul, "int.min": T.imin,
              "int.max": T.imax}.get(name)
        if fn is not None:
            return fn(a, b)
        cmp = {"int.eq": lambda: T.eq(a, b), "int.ne": lambda: T.not_(T.eq(a, b)),
               "int.lt": lambda: T.ilt(a, b), "int.le": lambda: T.ile(a, b),
               "int.gt": lambda: T.ilt(b, a), "int.ge": lambda: T.ile(b, a)}.get(name)
        if cmp is not None:
            return cmp()
        raise SpecUnsupported(f"operation {name}")


def builtin(e: ir.Builtin) -> Term:
    """Block coordinates are the PTX's ctaid leaves; lane and warp_id derive from tid.x."""
    from tilesafe.codegen.validate.spec import thread

    k = e.kind
    if k in (ir.BuiltinKind.BLOCK_X, ir.BuiltinKind.BLOCK_Y, ir.BuiltinKind.BLOCK_Z):
        return T.uint(T.leaf(f"ctaid.{k.value[-1]}", 32))
    t = thread()
    if k is ir.BuiltinKind.THREAD:
        return t
    if k is ir.BuiltinKind.LANE:
        return T.ifmod(t, T.const_int(32))
    return T.ifdiv(t, T.const_int(32))
