"""Everything around a reference-interpreter run that is not execution: evaluating sizes
(`where`, grid, tensor shapes), making random inputs, and summarising outputs.

Why separate from interp.py: the CLI and the GPU differential tester need these without the
scheduler, and they only read the IR's size expressions.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

import numpy as np

from tilesafe.frontend import ir
from tilesafe.frontend.walk import loads, own_exprs, statements
from tilesafe.semantics import evaluate, fp, tma_rules
from tilesafe.semantics.interp_error import WHERE, InterpError
from tilesafe.semantics.smem import NUMPY_DTYPE

I32_SENTINEL = -559038737  # 0xDEADBEEF as i32: "never written"
U8_SENTINEL = 0xA5


def eval_size_expr(e: ir.Expr, sizes: Mapping[str, int]) -> Any:
    """Evaluate an expression over size parameters only (where, grid, shapes)."""
    try:
        return evaluate.eval_sizes(e, {k: int(v) for k, v in sizes.items()})
    except KeyError as err:
        raise InterpError(WHERE, f"no value given for size '{err.args[0]}'", e.span) from None
    except evaluate.NoValue as err:
        raise InterpError(WHERE, "not a size expression", err.expr.span) from None
    except evaluate.EvalError as err:
        raise InterpError(WHERE, "division by zero in a size expression", err.span) from None


def check_where(kernel: ir.Kernel, sizes: Mapping[str, int]) -> tuple[int, ...]:
    """Check the sizes against `where` (TS200 naming the violated constraint); return the grid."""
    unknown = sorted(set(sizes) - set(kernel.sizes))
    if unknown:
        raise InterpError(WHERE, f"kernel '{kernel.name}' has no size parameter "
                          f"{', '.join(repr(u) for u in unknown)} (sizes: "
                          f"{', '.join(kernel.sizes) or 'none'})", kernel.span)
    for name in kernel.sizes:
        if name not in sizes:
            raise InterpError(WHERE, f"no value given for size '{name}'", kernel.span)
    for cond in kernel.where:
        if not eval_size_expr(cond, sizes):
            given = ", ".join(f"{k}={sizes[k]}" for k in kernel.sizes)
            raise InterpError(WHERE, f"sizes {given} violate the where constraint at "
                              f"{cond.span}", cond.span, {"sizes": dict(sizes)})
    grid = tuple(int(eval_size_expr(g, sizes)) for g in kernel.grid)
    for g, e in zip(grid, kernel.grid, strict=True):
        if g < 1:
            raise InterpError(WHERE, f"grid dimension evaluates to {g}", e.span)
    return grid


def tensor_shapes(kernel: ir.Kernel, sizes: Mapping[str, int]) -> dict[str, tuple[int, ...]]:
    out = {}
    for t in kernel.params:
        shape = tuple(int(eval_size_expr(d, sizes)) for d in t.shape)
        if any(d < 1 for d in shape):
            raise InterpError(WHERE, f"tensor '{t.name}' would have shape {list(shape)}", t.span)
        out[t.name] = shape
    return out


def tensormap_spec(kernel: ir.Kernel, tm: ir.TensorMap,
                   shape: tuple[int, ...]) -> tma_rules.TensorMapSpec:
    """The descriptor `cuTensorMapEncodeTiled` is given for a tensor map over a tensor of
    `shape`: one constructor for the TMA checker (which passes the box as a stand-in
    shape), the interpreter and the GPU launcher, so all three mean the same descriptor."""
    tensor = kernel.tensor(tm.tensor)
    return tma_rules.TensorMapSpec.from_row_major(
        tensor.dtype.value, list(shape), list(tm.box), swizzle=tm.swizzle, oob_fill=tm.oob_fill)


# ---- which tensors a kernel reads and writes ----------------------------------------------


def tensor_usage(kernel: ir.Kernel) -> tuple[frozenset[str], frozenset[str]]:
    """(global tensors read, global tensors written), by generic accesses or TMA."""
    read: set[str] = set()
    written: set[str] = set()
    for s in statements(kernel.body):
        if isinstance(s, ir.Store) and s.space is ir.Space.GLOBAL:
            written.add(s.tensor)
        elif isinstance(s, ir.TmaLoad):
            read.add(kernel.tensormap(s.tensormap).tensor)
        elif isinstance(s, ir.TmaStore):
            written.add(kernel.tensormap(s.tensormap).tensor)
        for e in own_exprs(s):
            read.update(ld.tensor for ld in loads(e) if ld.space is ir.Space.GLOBAL)
    return frozenset(read), frozenset(written)


# ---- inputs and summaries -----------------------------------------------------------------


def random_inputs(
    kernel: ir.Kernel, sizes: Mapping[str, int], rng: np.random.Generator | int | None = None
) -> dict[str, np.ndarray]:
    """Random arrays for every global tensor; write-only tensors are poisoned.

    Floats are multiples of 1/4 in [-2, 2] (exact in f16, bf16 and f32, and sums of a few
    stay exact); i32 in [-100, 100]; u8 in [0, 255]. Poison: NaN for floats, 0xDEADBEEF for
    i32, 0xA5 for u8. bf16 arrays hold uint16 bit patterns.
    """
    gen = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
    shapes = tensor_shapes(kernel, sizes)
    read, written = tensor_usage(kernel)
    out: dict[str, np.ndarray] = {}
    for t in kernel.params:
        shape = shapes[t.name]
        poison = t.name in written and t.name not in read
        if t.dtype.is_float:
            vals = (np.full(shape, np.nan, np.float32) if poison
                    else (gen.integers(-8, 9, size=shape) / 4).astype(np.float32))
            if t.dtype is ir.DType.BF16:
                out[t.name] = fp.f32_array_to_bf16(vals)
            else:
                out[t.name] = vals.astype(NUMPY_DTYPE[t.dtype])
        elif t.dtype is ir.DType.I32:
            out[t.name] = (np.full(shape, I32_SENTINEL, np.int32) if poison
                           else gen.integers(-100, 101, size=shape).astype(np.int32))
        else:
            out[t.name] = (np.full(shape, U8_SENTINEL, np.uint8) if poison
                           else gen.integers(0, 256, size=shape).astype(np.uint8))
    return out


def as_float(array: np.ndarray, dtype: ir.DType) -> np.ndarray:
    """A tensor's values as float64 (bf16 patterns widened), for comparisons and stats."""
    if dtype is ir.DType.BF16:
        return fp.bf16_array_to_f32(array).astype(np.float64)
    return array.astype(np.float64)


def summarize_tensor(array: np.ndarray, dtype: ir.DType) -> dict[str, Any]:
    vals = as_float(array, dtype)
    finite = vals[np.isfinite(vals)]
    return {
        "dtype": dtype.value,
        "shape": list(array.shape),
        "checksum": hashlib.sha256(np.ascontiguousarray(array).tobytes()).hexdigest()[:16],
        "sum": float(finite.sum()) if finite.size else 0.0,
        "min": float(finite.min()) if finite.size else None,
        "max": float(finite.max()) if finite.size else None,
        "nan": int(np.isnan(vals).sum()),
        "inf": int(np.isinf(vals).sum()),
    }
