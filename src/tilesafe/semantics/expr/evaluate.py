"""The one meaning of IR expressions: how each operator computes, written once.

Why a module of its own: the interpreter, the event model, the banks checker and the size
evaluation all need to evaluate IR expressions, and code generation needs to know exactly
which operation each node stands for (is `i / 3` floor division on integers or a binary32
division? is the int operand of `x * 2` converted first?). Each used to carry its own
evaluator; they now share this one, so a rule (floor division, the int -> f32 conversion of
a mixed operation, PTX `min.f32` on NaN) has a single definition.

Two layers:

* `typed_op(e)` classifies an operator node: the operation it performs (`int.div`,
  `f32.add`, `f32.lt`, ...) and which operands are converted from int to f32 first. This is
  the part code generation shares: it lowers the *same* operation names.
* `compile_expr(e, leaf)` builds a closure `env -> value` using `CONCRETE`, the concrete
  meaning of every operation name. The caller says what the leaves mean (sizes, thread,
  block, loop variables, locals, memory loads) through `leaf`, so the environment can be a
  thread of the interpreter, a dict of the event model, or numpy arrays of many threads at
  once (integer and boolean operations work elementwise on arrays).

Integers are mathematical (Python ints, or numpy int64 arrays) with floor division and floor
modulo; floats are numpy float32 scalars (see semantics/expr/fp.py for the rounding rules).
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

import numpy as np

from tilesafe.frontend import ir
from tilesafe.frontend.ops import (  # noqa: F401 - re-exported: the API of this module
    _CMP_NAMES,
    CMP_SYMBOLS,
    TypedOp,
    assign_op,
    typed_op,
)
from tilesafe.frontend.span import Span
from tilesafe.semantics.expr import fp
from tilesafe.semantics.interpreter.interp_error import DIV_ZERO

Fn = Callable[[Any], Any]
Leaf = Callable[[ir.Expr], Fn]


class EvalError(Exception):
    """An expression that has no value (integer division by zero)."""

    def __init__(self, code: str, message: str, span: Span) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.span = span


# ---- which operation a node performs: frontend/ops.py (re-exported) ----------------------

# ---- what each operation computes ----------------------------------------------------------


def _is_array(x: Any) -> bool:
    return isinstance(x, np.ndarray)


def _floor_div(a: Any, b: Any) -> Any:
    if (b == 0).any() if _is_array(b) else b == 0:
        raise ZeroDivisionError
    return a // b


def _floor_mod(a: Any, b: Any) -> Any:
    if (b == 0).any() if _is_array(b) else b == 0:
        raise ZeroDivisionError
    return a % b


def _int_min(a: Any, b: Any) -> Any:
    return np.minimum(a, b) if _is_array(a) or _is_array(b) else min(a, b)


def _int_max(a: Any, b: Any) -> Any:
    return np.maximum(a, b) if _is_array(a) or _is_array(b) else max(a, b)


def _not(a: Any) -> Any:
    return np.logical_not(a) if _is_array(a) else not a


# The concrete meaning of every operation name. Integer entries accept Python ints or numpy
# integer arrays; f32 entries take numpy float32 scalars (IEEE binary32, round to nearest
# even, subnormals kept: what PTX's .rn operations without .ftz do).
CONCRETE: dict[str, Callable[..., Any]] = {
    "int.add": operator.add, "int.sub": operator.sub, "int.mul": operator.mul,
    "int.div": _floor_div, "int.mod": _floor_mod,
    "int.eq": operator.eq, "int.ne": operator.ne, "int.lt": operator.lt,
    "int.le": operator.le, "int.gt": operator.gt, "int.ge": operator.ge,
    "int.neg": operator.neg, "int.min": _int_min, "int.max": _int_max, "int.abs": abs,
    "f32.add": operator.add, "f32.sub": operator.sub, "f32.mul": operator.mul,
    "f32.div": operator.truediv,
    # Ordered comparisons are false on NaN; != is true on NaN (numpy agrees).
    "f32.eq": operator.eq, "f32.ne": operator.ne, "f32.lt": operator.lt,
    "f32.le": operator.le, "f32.gt": operator.gt, "f32.ge": operator.ge,
    "f32.neg": operator.neg, "f32.min": fp.fmin, "f32.max": fp.fmax, "f32.abs": fp.fabs,
    "cvt.f32": fp.int_to_f32, "cvt.i32": fp.f32_to_i32, "id": lambda a: a,
    "not": _not,
}


# ---- closures -------------------------------------------------------------------------------


def compile_expr(e: ir.Expr, leaf: Leaf) -> Fn:
    """A closure computing `e` in an environment; `leaf(e)` gives the closure of every node
    that is not a constant or an operator (sizes, builtins, loop variables, locals, loads).

    `&&` and `||` short-circuit on scalars (a load in the right operand is guarded by the
    left one, as docs/semantics.md says) and work elementwise on arrays."""
    if isinstance(e, ir.IntConst):
        v = e.value
        return lambda env: v
    if isinstance(e, ir.FloatConst):
        f = np.float32(e.value)
        return lambda env: f
    if isinstance(e, (ir.BinOp, ir.UnOp, ir.Call)):
        return _compile_op(e, leaf)
    return leaf(e)


def _compile_op(e: ir.BinOp | ir.UnOp | ir.Call, leaf: Leaf) -> Fn:
    op = typed_op(e)
    operands = ((e.lhs, e.rhs) if isinstance(e, ir.BinOp)
                else (e.operand,) if isinstance(e, ir.UnOp) else e.args)
    fns = [compile_expr(a, leaf) for a in operands]
    fns = [_converted(f) if conv else f for f, conv in zip(fns, op.to_float, strict=True)]
    if op.name in ("and", "or"):
        return _logic(op.name, fns[0], fns[1])
    if op.name in ("int.div", "int.mod"):
        return _divmod(op.name, fns[0], fns[1], e)
    impl = CONCRETE[op.name]
    if op.name.startswith("f32.") and op.name[4:] in _CMP_NAMES.values():
        return _bool(impl, fns[0], fns[1])
    if len(fns) == 1:
        (f0,) = fns
        return lambda env: impl(f0(env))
    f0, f1 = fns
    return lambda env: impl(f0(env), f1(env))


def _converted(f: Fn) -> Fn:
    conv = fp.int_to_f32
    return lambda env: conv(f(env))


def _bool(impl: Callable[[Any, Any], Any], f0: Fn, f1: Fn) -> Fn:
    return lambda env: bool(impl(f0(env), f1(env)))


def _logic(name: str, f0: Fn, f1: Fn) -> Fn:
    if name == "and":
        def land(env: Any) -> Any:
            a = f0(env)
            if _is_array(a):
                return np.logical_and(a, f1(env))
            if not a:
                return False
            b = f1(env)  # a scalar left side (`cta_rank == 0`) and a per-lane right side
            return b if _is_array(b) else bool(b)

        return land

    def lor(env: Any) -> Any:
        a = f0(env)
        if _is_array(a):
            return np.logical_or(a, f1(env))
        if a:
            return True
        b = f1(env)
        return b if _is_array(b) else bool(b)

    return lor


def _divmod(name: str, f0: Fn, f1: Fn, e: ir.Expr) -> Fn:
    rhs = e.rhs if isinstance(e, ir.BinOp) else None
    if isinstance(rhs, ir.IntConst) and rhs.value > 0:
        c = rhs.value  # the common case: no zero check needed
        return (lambda env: f0(env) // c) if name == "int.div" else (lambda env: f0(env) % c)
    impl, span, sym = CONCRETE[name], e.span, "/" if name == "int.div" else "%"

    def checked(env: Any) -> Any:
        try:
            return impl(f0(env), f1(env))
        except ZeroDivisionError:
            raise EvalError(DIV_ZERO, f"integer '{sym}' by zero", span) from None

    return checked


# ---- common leaf sets ----------------------------------------------------------------------


class NoValue(Exception):
    """A leaf the chosen environment does not define (e.g. a load in a size expression)."""

    def __init__(self, expr: ir.Expr) -> None:
        super().__init__(f"{type(expr).__name__} has no value here")
        self.expr = expr


def size_leaf(e: ir.Expr) -> Fn:
    """Leaves of expressions over sizes only (where, grid, shapes): env maps size names."""
    if isinstance(e, ir.SizeVar):
        name = e.name
        return lambda env: env[name]
    raise NoValue(e)


_SIZE_FNS: dict[int, tuple[ir.Expr, Fn]] = {}


def eval_sizes(e: ir.Expr, sizes: Any) -> Any:
    """Value of an expression over size parameters at concrete sizes (KeyError for a size
    that has no value, NoValue for anything that is not a size). The closure is compiled
    once per expression object: searches over candidate sizes evaluate the same `where`,
    grid and shape terms hundreds of thousands of times."""
    hit = _SIZE_FNS.get(id(e))
    if hit is None or hit[0] is not e:
        if len(_SIZE_FNS) > 4096:
            _SIZE_FNS.clear()
        hit = _SIZE_FNS[id(e)] = (e, compile_expr(e, size_leaf))
    return hit[1](sizes)
