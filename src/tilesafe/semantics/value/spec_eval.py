"""What an `ensures` clause says an output holds, at concrete sizes on concrete inputs.

Why a module of its own: the value check (semantics/value/spec_run.py), `tilesafe equiv` and the
tests all need the spec's meaning as numbers, and it must be the *same* arithmetic the kernel
is judged by: every operator goes through semantics/expr/evaluate.py (f32 rounding, floor
division, int -> f32 conversion), loads widen exactly as the interpreter's do, and the
result is rounded into the output's dtype by the interpreter's own store codec. A spec
therefore claims bit-exact values, and `sum` (order free) is evaluated sequentially: the
value check feeds such specs exactly representable integers, on which every order agrees.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from tilesafe.frontend import ir
from tilesafe.semantics.expr import evaluate, fp
from tilesafe.semantics.interpreter.smem import NUMPY_DTYPE, codec

Arrays = Mapping[str, np.ndarray]


@dataclass(frozen=True)
class SpecEnv:
    """Leaves of a spec: sizes, the index and sum variables (by uid), input tensors."""

    sizes: Mapping[str, int]
    vars: dict[int, int]
    read: Mapping[str, Callable[[int], Any]]  # tensor -> reader of a flat element
    shapes: Mapping[str, tuple[int, ...]]


def readers(kernel: ir.Kernel, arrays: Arrays) -> dict[str, Callable[[int], Any]]:
    """Exact element readers over the launch's input arrays (bf16 patterns widened)."""
    out = {}
    for t in kernel.params:
        raw = np.ascontiguousarray(arrays[t.name]).view(np.uint8).reshape(-1)
        out[t.name] = codec(t.dtype, raw)[0]
    return out


def compile_spec(e: ir.Expr) -> Callable[[SpecEnv], Any]:
    """A closure computing a spec expression in a SpecEnv."""
    return evaluate.compile_expr(e, _leaf)


def _leaf(e: ir.Expr) -> Callable[[SpecEnv], Any]:
    if isinstance(e, ir.SizeVar):
        name = e.name
        return lambda env: env.sizes[name]
    if isinstance(e, ir.LoopVar):
        uid = e.uid
        return lambda env: env.vars[uid]
    if isinstance(e, ir.Load):
        tensor = e.tensor
        idx = [compile_spec(i) for i in e.indices]

        def load(env: SpecEnv) -> Any:
            shape = env.shapes[tensor]
            flat = 0
            for f, extent in zip(idx, shape, strict=True):
                v = int(f(env))
                if not 0 <= v < extent:
                    raise SpecOutOfBounds(tensor, tuple(int(g(env)) for g in idx))
                flat = flat * extent + v
            return env.read[tensor](flat)

        return load
    if isinstance(e, ir.Reduce):
        lo, hi, body, uid = compile_spec(e.lo), compile_spec(e.hi), compile_spec(e.body), \
            e.var.uid
        add = evaluate.CONCRETE["f32.add"]

        def reduce(env: SpecEnv) -> Any:
            acc = np.float32(0.0)
            for j in range(int(lo(env)), int(hi(env))):
                env.vars[uid] = j
                acc = add(acc, body(env))
            env.vars.pop(uid, None)
            return acc

        return reduce
    raise evaluate.NoValue(e)


class SpecOutOfBounds(Exception):
    """The spec itself reads outside an input (a spec bug, reported as such)."""

    def __init__(self, tensor: str, index: tuple[int, ...]) -> None:
        super().__init__(f"the spec reads {tensor}{list(index)}, outside the tensor")
        self.tensor = tensor
        self.index = index


def expected(kernel: ir.Kernel, spec: ir.Ensures, sizes: Mapping[str, int],
             arrays: Arrays, shapes: Mapping[str, tuple[int, ...]]) -> np.ndarray:
    """The output array the spec asks for (numpy dtype of smem.NUMPY_DTYPE), every element
    rounded into the output's dtype exactly as a store would. All elements at once
    (semantics/value/spec_vec.py) unless int64 may not hold the spec's integers there."""
    from tilesafe.semantics.value import spec_vec

    fast = spec_vec.expected(kernel, spec, sizes, arrays, shapes)
    return fast if fast is not None else expected_scalar(kernel, spec, sizes, arrays, shapes)


def expected_scalar(kernel: ir.Kernel, spec: ir.Ensures, sizes: Mapping[str, int],
                    arrays: Arrays, shapes: Mapping[str, tuple[int, ...]]) -> np.ndarray:
    """`expected` one element at a time through evaluate.py (Python integers: exact at
    any magnitude); the definition spec_vec is tested against."""
    out = kernel.tensor(spec.tensor)
    shape = shapes[out.name]
    n = int(np.prod(shape, dtype=np.int64))
    raw = np.zeros(n * out.dtype.nbytes, np.uint8)
    write = codec(out.dtype, raw)[1]
    rhs = compile_spec(spec.rhs)
    env = SpecEnv(sizes, {}, readers(kernel, arrays), shapes)
    to_float = out.dtype.is_float and spec.rhs.type is ir.ScalarType.INT
    with np.errstate(all="ignore"):  # inf * 0 is NaN here, as on the GPU: not a warning
        for flat, index in enumerate(indices(shape)):
            for var, v in zip(spec.index_vars, index, strict=True):
                env.vars[var.uid] = v
            value = rhs(env)
            write(flat, fp.int_to_f32(int(value)) if to_float else value)
    return raw.view(NUMPY_DTYPE[out.dtype]).reshape(shape)


def indices(shape: tuple[int, ...]) -> Iterator[tuple[int, ...]]:
    return itertools.product(*(range(d) for d in shape))


def plain_load(e: ir.Expr) -> ir.Load | None:
    """The global load a spec moves unchanged (through exact widenings), if it is one."""
    while isinstance(e, ir.Call) and e.func == "f32" and len(e.args) == 1:
        e = e.args[0]
    return e if isinstance(e, ir.Load) else None


def load_index(load: ir.Load, spec: ir.Ensures, element: tuple[int, ...],
               sizes: Mapping[str, int]) -> tuple[int, ...]:
    """The input index a plain-load spec names for one output element."""
    env = SpecEnv(sizes, {v.uid: i for v, i in zip(spec.index_vars, element, strict=True)},
                  {}, {})
    return tuple(int(compile_spec(i)(env)) for i in load.indices)


def has_free_sum(e: ir.Expr) -> bool:
    """Does the spec contain an order-free `sum` (whose check needs exact inputs)?"""
    if isinstance(e, ir.Reduce):
        return not e.ordered or has_free_sum(e.body)
    children: tuple[ir.Expr, ...] = ()
    if isinstance(e, ir.BinOp):
        children = (e.lhs, e.rhs)
    elif isinstance(e, ir.UnOp):
        children = (e.operand,)
    elif isinstance(e, ir.Call):
        children = e.args
    elif isinstance(e, ir.Load):
        children = e.indices
    return any(has_free_sum(c) for c in children)
