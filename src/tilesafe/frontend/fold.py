"""One walk over IR expressions, many meanings: `fold(e, algebra)`.

Why: tilesafe gives every expression several meanings -- a concrete value, an ISL term, a
z3 term, a value term of the specification proof, a code generator's register. Written as
separate recursions, each decided again what an operator node is and in which order its
operands go, and one of them (the z3 encoding) once read `/` as Euclidean division where
the language means floor division. Here the walk is written once: an operator node is
classified by frontend/ops.typed_op, its operands are folded (`operands`), the int operands
a float operation converts are passed through `to_float`, and the algebra's table gives
the result for the operation's name. A leaf (constant, size, loop variable, builtin,
local, load, ...) is the algebra's `leaf`. An algebra that has no meaning for an operation
raises NoForm naming it -- never a silent default.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, ClassVar, Generic, TypeVar

from tilesafe.frontend import ir
from tilesafe.frontend.ops import typed_op
from tilesafe.frontend.walk import operands

V = TypeVar("V")
OPERATORS = (ir.BinOp, ir.UnOp, ir.Call)


class NoForm(Exception):
    """The algebra has no meaning for this node (an operation outside its table, a leaf
    it does not know)."""

    def __init__(self, what: str, expr: ir.Expr) -> None:
        super().__init__(what)
        self.what = what
        self.expr = expr


class Algebra(Generic[V]):
    """A meaning of IR expressions. Subclasses give `leaf`, `to_float` (an int operand of
    a float operation) and OPS: operation name -> f(algebra, node, *operand values); and
    may take a sub-expression whole (`whole`, asked before its operands are folded: value
    terms keep an integer term without loads as one ISL-comparable leaf)."""

    OPS: ClassVar[Mapping[str, Callable[..., Any]]] = {}

    def whole(self, e: ir.Expr) -> V | None:
        return None

    def leaf(self, e: ir.Expr) -> V:
        raise NoForm(f"'{type(e).__name__}' has no meaning here", e)

    def to_float(self, x: V, e: ir.Expr) -> V:
        raise NoForm("an int -> f32 conversion has no meaning here", e)

    def op(self, name: str, e: ir.Expr, args: list[V]) -> V:
        impl = self.OPS.get(name)
        if impl is None:
            raise NoForm(f"operation '{name}' has no meaning here", e)
        return impl(self, e, *args)


def fold(e: ir.Expr, algebra: Algebra[V]) -> V:
    """The meaning of `e` in `algebra` (operands left to right)."""
    taken = algebra.whole(e)
    if taken is not None:
        return taken
    if isinstance(e, OPERATORS):
        t = typed_op(e)
        args = []
        for x, conv in zip(operands(e), t.to_float, strict=True):
            v = fold(x, algebra)
            args.append(algebra.to_float(v, x) if conv else v)  # each operand, then its cast
        return algebra.op(t.name, e, args)
    return algebra.leaf(e)
