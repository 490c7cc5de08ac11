"""An `ensures` clause evaluated for many output elements at once (numpy arrays).

Why: semantics/value/spec_eval.py evaluates a spec one output element at a time through
evaluate.py's scalar closures -- about 0.15 M loads a second, so the expected output of a
256 x 512 product with K = 192 took a minute. Here the output elements are the lanes of the
vector interpreter's expressions (semantics/interp_vec_expr.compile_vexpr: the same
operator table, evaluate.CONCRETE with the float rules written for arrays), so a spec means
exactly what it means in spec_eval:

* a load widens exactly (interp_vec_state.vector_codec, the interpreter's own codec);
* `sum` adds in increasing order of its variable, one f32 rounding per term, each lane
  only over its own range (a lane whose range has ended takes no further term, and its
  body is never evaluated there: a ragged sum cannot read out of bounds on such a lane);
* the result is written through the output's codec, an integer spec into a float output
  converted with the single int -> f32 rounding.

Integers are int64: when interval bounds (interp_vec_expr's) cannot keep every integer of
the spec below 2**62 at these sizes, `expected` falls back to the scalar evaluator (Python
integers), as the interpreter does.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tilesafe.frontend import ir
from tilesafe.frontend.walk import operands
from tilesafe.semantics.expr import evaluate
from tilesafe.semantics.interpreter.interp_vec_expr import (
    INT_LIMIT,
    VECTOR,
    Fn,
    _Bounds,
    compile_vexpr,
    int_to_f32,
)
from tilesafe.semantics.interpreter.interp_vec_state import vector_codec
from tilesafe.semantics.interpreter.smem import NUMPY_DTYPE
from tilesafe.semantics.value.spec_eval import SpecOutOfBounds

CHUNK = 1 << 18  # output elements evaluated together (bounds the arrays of one step)


@dataclass
class _Lanes:
    """Output elements being evaluated: their index/sum variables (uid -> array or scalar)."""

    n: int
    vars: dict[int, Any] = field(default_factory=dict)

    def sub(self, keep: np.ndarray) -> _Lanes:
        return _Lanes(int(keep.sum()), {u: (v if np.ndim(v) == 0 else v[keep])
                                        for u, v in self.vars.items()})


class _Compiler:
    """Leaves of a spec over lanes: sizes, variables, loads, order-free sums."""

    def __init__(self, kernel: ir.Kernel, sizes: Mapping[str, int],
                 arrays: Mapping[str, np.ndarray], shapes: Mapping[str, tuple[int, ...]]):
        self.sizes, self.shapes = sizes, shapes
        self.read = {}
        for t in kernel.params:
            raw = np.ascontiguousarray(arrays[t.name]).view(np.uint8).reshape(-1)
            self.read[t.name] = vector_codec(t.dtype, raw)[0]

    def compile(self, e: ir.Expr) -> Fn:
        return compile_vexpr(e, self.leaf)

    def leaf(self, e: ir.Expr) -> Fn:
        if isinstance(e, ir.SizeVar):
            v = int(self.sizes[e.name])
            return lambda lanes: v
        if isinstance(e, ir.LoopVar):
            uid = e.uid
            return lambda lanes: lanes.vars[uid]
        if isinstance(e, ir.Load):
            return self._load(e)
        if isinstance(e, ir.Reduce):
            return self._reduce(e)
        raise evaluate.NoValue(e)

    def _load(self, e: ir.Load) -> Fn:
        tensor, shape, read = e.tensor, self.shapes[e.tensor], self.read[e.tensor]
        idx = [self.compile(i) for i in e.indices]

        def load(lanes: _Lanes) -> Any:
            parts = [np.broadcast_to(np.asarray(f(lanes), dtype=np.int64), (lanes.n,))
                     for f in idx]
            outside = np.zeros(lanes.n, dtype=bool)
            for p, extent in zip(parts, shape, strict=True):
                outside |= (p < 0) | (p >= extent)
            if outside.any():
                lane = int(np.argmax(outside))
                raise SpecOutOfBounds(tensor, tuple(int(p[lane]) for p in parts))
            flat = np.zeros(lanes.n, dtype=np.int64)
            for p, extent in zip(parts, shape, strict=True):
                flat = flat * extent + p
            return read(flat)

        return load

    def _reduce(self, e: ir.Reduce) -> Fn:
        lo, hi, body, uid = self.compile(e.lo), self.compile(e.hi), self.compile(e.body), \
            e.var.uid
        add = VECTOR["f32.add"]
        to_f32 = e.body.type is ir.ScalarType.INT

        def reduce(lanes: _Lanes) -> Any:
            acc = np.zeros(lanes.n, dtype=np.float32)
            a = np.broadcast_to(np.asarray(lo(lanes), dtype=np.int64), (lanes.n,))
            b = np.broadcast_to(np.asarray(hi(lanes), dtype=np.int64), (lanes.n,))
            if lanes.n == 0:
                return acc
            for j in range(int(a.min()), int(b.max())):
                live = (a <= j) & (j < b)
                if live.all():
                    lanes.vars[uid] = j
                    term = body(lanes)
                    acc = add(acc, int_to_f32(term) if to_f32 else term)
                elif live.any():
                    sub = lanes.sub(live)
                    sub.vars[uid] = j
                    term = body(sub)
                    acc[live] = add(acc[live], int_to_f32(term) if to_f32 else term)
            lanes.vars.pop(uid, None)
            return acc

        return reduce


def _int_bound(spec: ir.Ensures, sizes: Mapping[str, int],
               shapes: Mapping[str, tuple[int, ...]], kernel: ir.Kernel) -> int:
    """A bound on every integer of the spec at these sizes (interp_vec_expr's intervals)."""
    bounds = _Bounds(kernel, sizes, (0, 0, 0))
    for var, extent in zip(spec.index_vars, shapes[spec.tensor], strict=True):
        bounds.uids[var.uid] = extent
    stack: list[ir.Expr] = [spec.rhs]
    reduces: list[ir.Reduce] = []
    while stack:  # sum variables first, outermost first (their bounds feed inner ones)
        e = stack.pop()
        if isinstance(e, ir.Reduce):
            reduces.append(e)
        stack.extend(operands(e))
        if isinstance(e, ir.Reduce):
            stack.extend((e.lo, e.hi, e.body))
    for r in reduces:
        bounds.uids[r.var.uid] = max(bounds.of(r.lo), bounds.of(r.hi))
    bounds.of(spec.rhs)
    return bounds.worst[0] if bounds.worst is not None else 0


def expected(kernel: ir.Kernel, spec: ir.Ensures, sizes: Mapping[str, int],
             arrays: Mapping[str, np.ndarray], shapes: Mapping[str, tuple[int, ...]]
             ) -> np.ndarray | None:
    """spec_eval.expected over arrays, or None when int64 may not be exact here."""
    if _int_bound(spec, sizes, shapes, kernel) >= INT_LIMIT:
        return None
    out = kernel.tensor(spec.tensor)
    shape = shapes[out.name]
    n = int(np.prod(shape, dtype=np.int64))
    raw = np.zeros(n * out.dtype.nbytes, np.uint8)
    write = vector_codec(out.dtype, raw)[1]
    try:
        rhs = _Compiler(kernel, sizes, arrays, shapes).compile(spec.rhs)
    except evaluate.NoValue:
        return None
    to_float = out.dtype.is_float and spec.rhs.type is ir.ScalarType.INT
    with np.errstate(all="ignore"):  # inf * 0 is NaN here, as on the GPU: not a warning
        for start in range(0, n, CHUNK):
            flat = np.arange(start, min(n, start + CHUNK), dtype=np.int64)
            lanes = _Lanes(len(flat))
            rest = flat
            for var, extent in reversed(list(zip(spec.index_vars, shape, strict=True))):
                lanes.vars[var.uid] = rest % extent
                rest = rest // extent
            value = np.broadcast_to(np.asarray(rhs(lanes)), (lanes.n,))
            write(flat, int_to_f32(value) if to_float else value)
    return raw.view(NUMPY_DTYPE[out.dtype]).reshape(shape)


__all__ = ["expected"]
