"""Which operation an IR operator node performs: the language's typing rules in one place.

Why in the frontend: every meaning of expressions -- concrete values (semantics/expr/evaluate.py),
ISL terms, z3 and SMT terms, value terms, the code generator's operations -- keys its table
by these names (`int.div`, `f32.add`, `cvt.f32`, ...), so one classification decides, for
all of them at once, whether `i / 3` is floor division on integers or a binary32 division
and whether the int operand of `x * 2` is converted first. frontend/fold.py walks an
expression with it.
"""

from __future__ import annotations

from dataclasses import dataclass

from tilesafe.frontend import ir

_ARITH_NAMES = {"+": "add", "-": "sub", "*": "mul", "/": "div", "%": "mod"}
_CMP_NAMES = {"==": "eq", "!=": "ne", "<": "lt", "<=": "le", ">": "gt", ">=": "ge"}
CMP_SYMBOLS = {v: k for k, v in _CMP_NAMES.items()}


@dataclass(frozen=True)
class TypedOp:
    """The operation of a BinOp/UnOp/Call node: `name` keys CONCRETE (and the code
    generator's table); `to_float[i]` says operand i is an int converted to f32 first."""

    name: str
    to_float: tuple[bool, ...]


def typed_op(e: ir.BinOp | ir.UnOp | ir.Call) -> TypedOp:
    """Classify an operator node (the typing rules of docs/language.md, section 7)."""
    if isinstance(e, ir.UnOp):
        if e.op == "!":
            return TypedOp("not", (False,))
        return TypedOp("f32.neg" if e.type is ir.ScalarType.FLOAT else "int.neg", (False,))
    if isinstance(e, ir.BinOp):
        if e.op in ("&&", "||"):
            return TypedOp("and" if e.op == "&&" else "or", (False, False))
        is_float = ir.ScalarType.FLOAT in (e.lhs.type, e.rhs.type)
        conv = tuple(is_float and a.type is ir.ScalarType.INT for a in (e.lhs, e.rhs))
        family = "f32" if is_float else "int"
        name = _CMP_NAMES.get(e.op) or _ARITH_NAMES[e.op]
        return TypedOp(f"{family}.{name}", conv)
    # Call
    if e.func == "f32":
        arg = e.args[0]
        return TypedOp("cvt.f32" if arg.type is ir.ScalarType.INT else "id", (False,))
    if e.func == "i32":
        arg = e.args[0]
        return TypedOp("cvt.i32" if arg.type is ir.ScalarType.FLOAT else "id", (False,))
    is_float = e.type is ir.ScalarType.FLOAT
    conv = tuple(is_float and a.type is ir.ScalarType.INT for a in e.args)
    return TypedOp(f"{'f32' if is_float else 'int'}.{e.func}", conv)


def assign_op(op: str, scalar: ir.ScalarType) -> str | None:
    """The operation `x op= v` performs before the result is stored back into the `var`
    (rounded or wrapped to its dtype); None for a plain `x = v`. The resolver has already
    converted `v` to the variable's scalar type."""
    if op == "=":
        return None
    family = "f32" if scalar is ir.ScalarType.FLOAT else "int"
    return f"{family}.{_ARITH_NAMES[op]}"
