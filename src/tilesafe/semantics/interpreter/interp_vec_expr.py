"""Expressions of the lockstep (vector) interpreter: one evaluation per group of threads.

Why: the scalar interpreter (semantics/interpreter/interp.py) evaluates an expression once per
thread through semantics/expr/evaluate.py's closures; the vector engine
(semantics/interpreter/interp_vec.py) evaluates it once per *group* of threads, over numpy arrays
holding one value per thread. Each operation keeps the meaning evaluate.CONCRETE gives it: the
integer operations are evaluate's own (they are elementwise on int64 arrays, with its zero-divisor
check), and the float rules evaluate/fp write for scalars -- PTX min/max on NaN and signed zeros,
cvt.rzi.s32.f32, the single rounding of int -> f32, f16/bf16 rounding of `var`s, i32/u8
wrapping -- are written here for arrays (tests/test_interp_vec.py checks each against the
scalar rule on random bit patterns).

Integers are int64 arrays, exact only while no value leaves int64; `int_bound_problem`
decides that before a run, by interval arithmetic over the launch's concrete sizes, thread
and block ranges, loop bounds and the integer dtypes read from memory. A kernel whose
integers it cannot bound below 2**62 runs on the scalar engine (unbounded Python ints).

`&&` and `||` short-circuit per thread: the right operand is evaluated only on the threads
the left one leaves undecided (a guarded load is never performed, and so never out of
bounds, on the others), as evaluate.py does for one thread.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from tilesafe.frontend import ir
from tilesafe.frontend.walk import operands, own_exprs, statements
from tilesafe.semantics.expr import evaluate, fp
from tilesafe.semantics.expr.evaluate import EvalError
from tilesafe.semantics.interpreter.interp_error import DIV_ZERO

Fn = Callable[[Any], Any]
INT_LIMIT = 1 << 62  # every integer value of a vector run stays below this magnitude


# ---- the float rules, for arrays -----------------------------------------------------------


def _scalar(x: Any) -> bool:
    return np.ndim(x) == 0


def int_to_f32(v: Any) -> Any:
    """The f32 nearest to each integer (one rounding, ties to even). numpy's int64 -> float32
    cast rounds once (tests check it against fp.int_to_f32)."""
    if _scalar(v):
        return fp.int_to_f32(int(v))
    return np.asarray(v, dtype=np.int64).astype(np.float32)


def f32_to_i32(x: Any) -> Any:
    """PTX cvt.rzi.s32.f32: toward zero, NaN -> 0, saturating (fp.f32_to_i32)."""
    if _scalar(x):
        return fp.f32_to_i32(np.float32(x))
    out = np.zeros(x.shape, dtype=np.int64)
    big, small = x >= 2147483648.0, x <= -2147483648.0
    mid = ~(np.isnan(x) | big | small)
    out[mid] = np.trunc(x[mid]).astype(np.int64)
    out[big] = fp.I32_MAX
    out[small] = fp.I32_MIN
    return out


def fmin(a: Any, b: Any) -> Any:
    """PTX min.f32 (fp.fmin): a NaN operand yields the other; -0 below +0."""
    if _scalar(a) and _scalar(b):
        return fp.fmin(np.float32(a), np.float32(b))
    r = np.where(a < b, a, b)
    r = np.where(a == b, np.where(np.signbit(a), a, b), r)
    r = np.where(np.isnan(b), a, r)
    return np.where(np.isnan(a), b, r).astype(np.float32, copy=False)


def fmax(a: Any, b: Any) -> Any:
    if _scalar(a) and _scalar(b):
        return fp.fmax(np.float32(a), np.float32(b))
    r = np.where(a > b, a, b)
    r = np.where(a == b, np.where(np.signbit(a), b, a), r)
    r = np.where(np.isnan(b), a, r)
    return np.where(np.isnan(a), b, r).astype(np.float32, copy=False)


def fabs(a: Any) -> Any:
    return fp.fabs(np.float32(a)) if _scalar(a) else np.abs(a)


def f16_bits(x: np.ndarray) -> np.ndarray:
    """f32 -> f16 patterns, nearest even, overflow to inf, NaN -> 0x7FFF (codec's rule)."""
    with np.errstate(over="ignore", invalid="ignore"):
        bits = np.asarray(x, dtype=np.float32).astype(np.float16).view(np.uint16)
    return np.where(np.isnan(x), np.uint16(fp.F16_NAN_BITS), bits)


def round_f16(x: Any) -> Any:
    if _scalar(x):
        return fp.round_to_f16(np.float32(x))
    return f16_bits(x).view(np.float16).astype(np.float32)


def round_bf16(x: Any) -> Any:
    if _scalar(x):
        return fp.round_to_bf16(np.float32(x))
    return fp.bf16_array_to_f32(fp.f32_array_to_bf16(x))


def wrap_i32(v: Any) -> Any:
    if _scalar(v):
        return fp.wrap_i32(int(v))
    return ((v + (1 << 31)) & 0xFFFFFFFF) - (1 << 31)


def wrap_u8(v: Any) -> Any:
    return fp.wrap_u8(int(v)) if _scalar(v) else v & 0xFF


VAR_CONVERT: dict[ir.DType, Fn] = {
    ir.DType.F32: lambda x: x,
    ir.DType.F16: round_f16,
    ir.DType.BF16: round_bf16,
    ir.DType.I32: wrap_i32,
    ir.DType.U8: wrap_u8,
}

# evaluate.CONCRETE, with the scalar-only float rules replaced by the ones above (integer
# operations, + - * / and comparisons are elementwise already).
VECTOR: dict[str, Callable[..., Any]] = {
    **evaluate.CONCRETE,
    "f32.min": fmin, "f32.max": fmax, "f32.abs": fabs,
    "cvt.f32": int_to_f32, "cvt.i32": f32_to_i32,
}


# ---- closures -------------------------------------------------------------------------------


def compile_vexpr(e: ir.Expr, leaf: Callable[[ir.Expr], Fn]) -> Fn:
    """A closure `group -> value` (an array over the group's threads, or a scalar when the
    value is the same for all of them); `leaf` compiles sizes, builtins, registers, loads."""
    if isinstance(e, ir.IntConst):
        v = e.value
        return lambda env: v
    if isinstance(e, ir.FloatConst):
        f = np.float32(e.value)
        return lambda env: f
    if isinstance(e, (ir.BinOp, ir.UnOp, ir.Call)):
        return _compile_op(e, leaf)
    return leaf(e)


def _compile_op(e: ir.BinOp | ir.UnOp | ir.Call, leaf: Callable[[ir.Expr], Fn]) -> Fn:
    op = evaluate.typed_op(e)
    fns = [compile_vexpr(a, leaf) for a in operands(e)]
    fns = [_to_f32(f) if conv else f for f, conv in zip(fns, op.to_float, strict=True)]
    if op.name in ("and", "or"):
        assert isinstance(e, ir.BinOp)
        return _logic(op.name == "and", fns[0], fns[1], total(e.rhs))
    if op.name in ("int.div", "int.mod"):
        return _divmod(op.name, fns[0], fns[1], e)
    impl = VECTOR[op.name]
    if len(fns) == 1:
        (f0,) = fns
        return lambda env: impl(f0(env))
    f0, f1 = fns
    return lambda env: impl(f0(env), f1(env))


def _to_f32(f: Fn) -> Fn:
    return lambda env: int_to_f32(f(env))


def mask_of(v: Any, n: int) -> np.ndarray:
    """A boolean value as an array over n threads."""
    if _scalar(v):
        return np.full(n, bool(v))
    return np.asarray(v, dtype=bool)


def _logic(is_and: bool, f0: Fn, f1: Fn, rhs_total: bool) -> Fn:
    """`a && b` / `a || b`: b only where a leaves the answer open. When b can neither fail
    nor read memory (`total`), evaluating it everywhere is the same and cheaper."""

    def logic(env: Any) -> Any:
        a = f0(env)
        if _scalar(a):
            if bool(a) != is_and:
                return bool(a)
            b = f1(env)
            return bool(b) if _scalar(b) else np.asarray(b, dtype=bool)
        a = np.asarray(a, dtype=bool)
        if rhs_total:
            b = mask_of(f1(env), env.n)
            return (a & b) if is_and else (a | b)
        open_ = a if is_and else ~a
        out = a.copy()
        if open_.any():
            out[open_] = mask_of(f1(env.sub(open_)), int(open_.sum()))
        return out

    return logic


def _divmod(name: str, f0: Fn, f1: Fn, e: ir.Expr) -> Fn:
    rhs = e.rhs if isinstance(e, ir.BinOp) else None
    if isinstance(rhs, ir.IntConst) and rhs.value > 0:
        c = rhs.value
        return (lambda env: f0(env) // c) if name == "int.div" else (lambda env: f0(env) % c)
    impl, span, sym = evaluate.CONCRETE[name], e.span, "/" if name == "int.div" else "%"

    def checked(env: Any) -> Any:
        try:
            return impl(f0(env), f1(env))
        except ZeroDivisionError:
            raise EvalError(DIV_ZERO, f"integer '{sym}' by zero", span) from None

    return checked


def total(e: ir.Expr) -> bool:
    """Can `e` be evaluated on any thread without failing or touching memory (no load, no
    division by something that is not a positive constant)?"""
    if isinstance(e, ir.Load):
        return False
    if isinstance(e, ir.BinOp) and e.op in ("/", "%") and e.type is ir.ScalarType.INT:
        if not (isinstance(e.rhs, ir.IntConst) and e.rhs.value > 0):
            return False
    return all(total(c) for c in operands(e))


# ---- integer ranges -------------------------------------------------------------------------


_DTYPE_BOUND = {ir.DType.I32: 1 << 31, ir.DType.U8: 255}


class _Bounds:
    """Magnitude bounds of every integer expression of a kernel at concrete sizes."""

    def __init__(self, kernel: ir.Kernel, sizes: Mapping[str, int],
                 grid: tuple[int, ...]) -> None:
        self.sizes = sizes
        self.builtin = {ir.BuiltinKind.THREAD: kernel.block, ir.BuiltinKind.LANE: 31,
                        ir.BuiltinKind.WARP_ID: kernel.block // 32}
        for axis, kind in enumerate((ir.BuiltinKind.BLOCK_X, ir.BuiltinKind.BLOCK_Y,
                                     ir.BuiltinKind.BLOCK_Z)):
            self.builtin[kind] = grid[axis] if axis < len(grid) else 0
        self.dtypes = {t.name: t.dtype for t in kernel.params}
        self.dtypes.update({b.name: b.dtype for b in kernel.shared})
        self.uids: dict[int, int] = {}
        self.worst: tuple[int, ir.Expr] | None = None

    def of(self, e: ir.Expr) -> int:
        """Bound on |e| for an integer e (0 for others), recording the largest seen."""
        kids = [self.of(c) for c in operands(e)]
        b = self._node(e, kids)
        if e.type is ir.ScalarType.INT:
            self.note(b, e)
        return b

    def note(self, b: int, e: ir.Expr) -> None:
        if self.worst is None or b > self.worst[0]:
            self.worst = (b, e)

    def _node(self, e: ir.Expr, kids: list[int]) -> int:
        if e.type is not ir.ScalarType.INT:
            return 0
        if isinstance(e, ir.IntConst):
            return abs(e.value)
        if isinstance(e, ir.SizeVar):
            return abs(int(self.sizes[e.name]))
        if isinstance(e, ir.Builtin):
            return self.builtin[e.kind]
        if isinstance(e, (ir.LoopVar, ir.LocalRef)):
            return self.uids.get(e.uid, INT_LIMIT)
        if isinstance(e, ir.Load):
            return _DTYPE_BOUND.get(self.dtypes[e.tensor], INT_LIMIT)
        if isinstance(e, ir.BinOp):
            a, b = kids
            return {"+": a + b, "-": a + b, "*": a * b, "/": a, "%": b}[e.op]
        if isinstance(e, ir.Call) and e.func == "i32" and e.args[0].type is ir.ScalarType.FLOAT:
            return 1 << 31
        return max(kids, default=0)  # neg, abs, min, max, i32(int)


def int_bound_problem(kernel: ir.Kernel, sizes: Mapping[str, int],
                      grid: tuple[int, ...]) -> str | None:
    """None when every integer of the kernel stays below 2**62 at these sizes; else why not."""
    bounds = _Bounds(kernel, sizes, grid)
    for s in statements(kernel.body):
        if isinstance(s, ir.For):
            lo, hi = bounds.of(s.lo), bounds.of(s.hi)
            bounds.uids[s.var.uid] = max(lo, hi) + s.step
        elif isinstance(s, ir.Let):
            bounds.uids[s.uid] = bounds.of(s.value)
        elif isinstance(s, ir.VarDecl):
            bounds.of(s.value)
            bounds.uids[s.uid] = _DTYPE_BOUND.get(s.dtype, 0)
        elif isinstance(s, ir.Assign):
            v, x = bounds.of(s.value), bounds.uids.get(s.uid, 0)
            bounds.note(x * v if s.op == "*" else x + v, s.value)
        else:
            for e in own_exprs(s):
                bounds.of(e)
    if bounds.worst is not None and bounds.worst[0] >= INT_LIMIT:
        e = bounds.worst[1]
        return f"an integer at {e.span} may exceed 2**62 at these sizes (int64 is not exact)"
    return None


__all__ = ["VAR_CONVERT", "VECTOR", "compile_vexpr", "int_bound_problem", "mask_of", "total"]
