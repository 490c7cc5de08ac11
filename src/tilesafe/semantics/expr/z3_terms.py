"""Integer and boolean IR terms as z3 terms: the z3 algebra of frontend/fold.py.

Why its own table: z3's integer `/` and `%` are *Euclidean* (the remainder is never
negative), the language's are *floor* division and modulo (semantics/expr/evaluate.py, ISL's
floor/mod). They agree when the divisor is positive and differ when it is negative
(-7 / -2 is 3 Euclidean, 4 floor... and 7 % -2 is 1 Euclidean, -1 floor), so the table
states floor division explicitly: q = a div b for b > 0, (-a) div (-b) for b < 0 (floor of
a / b in both cases), and a % b = a - b * q. The leaves (sizes, the thread, loop variables,
immutable lets) come from the encoder that owns the variables (semantics/temporal/param_smt.py).
"""

from __future__ import annotations

from typing import Any, Protocol

import z3

from tilesafe.frontend import ir
from tilesafe.frontend.fold import Algebra, NoForm, fold


class Leaves(Protocol):
    """What a z3 encoder provides: sizes, shared variables, loop overrides, lets."""

    sizes: dict[str, Any]
    loops: dict[int, Any]
    lets: dict[int, ir.Expr]

    def var(self, key: str) -> Any: ...


def floor_div(a: Any, b: Any) -> Any:
    """floor(a / b) for z3 integers (b != 0), from z3's Euclidean division."""
    if z3.is_int_value(b):
        v = b.as_long()
        return a / b if v > 0 else (-a) / (-b)
    return z3.If(b > 0, a / b, (-a) / (-b))


def floor_mod(a: Any, b: Any) -> Any:
    """a - b * floor(a / b): the sign of the divisor, as the language's % (z3's own % for a
    positive constant divisor, where the two agree: the same term the queries always had)."""
    if z3.is_int_value(b) and b.as_long() > 0:
        return a % b
    return a - b * floor_div(a, b)


class Z3Terms(Algebra[Any]):
    def __init__(self, leaves: Leaves) -> None:
        self.leaves = leaves

    def leaf(self, e: ir.Expr) -> Any:
        lv = self.leaves
        if isinstance(e, ir.IntConst):
            return z3.IntVal(e.value)
        if isinstance(e, ir.SizeVar):
            return lv.sizes[e.name]
        if isinstance(e, ir.Builtin):
            if e.kind is ir.BuiltinKind.THREAD:
                return lv.var("thread")
            if e.kind is ir.BuiltinKind.LANE:
                return floor_mod(lv.var("thread"), z3.IntVal(32))
            if e.kind is ir.BuiltinKind.WARP_ID:
                return floor_div(lv.var("thread"), z3.IntVal(32))
            return lv.var(e.kind.value)
        if isinstance(e, ir.LoopVar):
            if e.uid in lv.loops:
                return lv.loops[e.uid]
            return lv.var(f"loop:{e.uid}")
        if isinstance(e, ir.LocalRef) and not e.mutable and e.uid in lv.lets:
            return fold(lv.lets[e.uid], self)
        raise NoForm(f"no z3 form for {type(e).__name__}", e)

    OPS = {
        "int.add": lambda s, e, a, b: a + b,
        "int.sub": lambda s, e, a, b: a - b,
        "int.mul": lambda s, e, a, b: a * b,
        "int.div": lambda s, e, a, b: floor_div(a, b),
        "int.mod": lambda s, e, a, b: floor_mod(a, b),
        "int.neg": lambda s, e, a: -a,
        "int.min": lambda s, e, a, b: z3.If(a <= b, a, b),
        "int.max": lambda s, e, a, b: z3.If(a >= b, a, b),
        "int.abs": lambda s, e, a: z3.If(a >= 0, a, -a),
        "int.eq": lambda s, e, a, b: a == b,
        "int.ne": lambda s, e, a, b: a != b,
        "int.lt": lambda s, e, a, b: a < b,
        "int.le": lambda s, e, a, b: a <= b,
        "int.gt": lambda s, e, a, b: a > b,
        "int.ge": lambda s, e, a, b: a >= b,
        "and": lambda s, e, a, b: z3.And(a, b),
        "or": lambda s, e, a, b: z3.Or(a, b),
        "not": lambda s, e, a: z3.Not(a),
    }


class SizeTerms:
    """Leaves for terms over the sizes only (a kernel's `where`, tensor shapes) -- no
    thread, loop or let -- and `fold`, the term of one such expression."""

    def __init__(self, sizes: dict[str, Any]) -> None:
        self.sizes: dict[str, Any] = sizes
        self.loops: dict[int, Any] = {}
        self.lets: dict[int, ir.Expr] = {}

    def var(self, key: str) -> Any:
        raise KeyError(f"`{key}` in a term over the sizes")

    def fold(self, e: ir.Expr) -> Any:
        return fold(e, Z3Terms(self))

