"""Everything around a reference-interpreter run that is not execution: evaluating sizes
(`where`, grid, tensor shapes), making random inputs, and summarising outputs.

`tensor_usage` (which tensors the body reads and writes) lives in frontend/walk.py and is
re-exported here for the interpreter.

Why separate from interp.py: the CLI and the GPU differential tester need these without the
scheduler, and they only read the IR's size expressions.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from tilesafe.frontend import ir
from tilesafe.frontend.limits import MAX_SHARED_BYTES, grid_problem
from tilesafe.frontend.walk import tensor_usage as tensor_usage  # re-exported
from tilesafe.semantics.expr import evaluate, fp
from tilesafe.semantics.hw import tma_rules
from tilesafe.semantics.interpreter.interp_error import (
    GRID_TOO_LARGE,
    NO_ROUTING,
    REQUIRES,
    SMEM_CAPACITY,
    WHERE,
    InterpError,
)
from tilesafe.semantics.interpreter.smem import NUMPY_DTYPE, plan_shared

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


def check_requires(kernel: ir.Kernel, sizes: Mapping[str, int],
                   arrays: Mapping[str, Any]) -> None:
    """The index tensors against the `requires` clauses (TS205 naming the clause, the
    element and its value; semantics/access/requires_eval.py): the proofs say nothing about
    a launch outside them, so the interpreter, like every launcher, refuses it."""
    if not kernel.requires:
        return
    from tilesafe.semantics.access import requires_eval, requires_form

    try:
        v = requires_eval.first_violation(requires_form.encode(kernel), sizes, arrays)
    except requires_eval.TooLarge as err:
        raise InterpError(REQUIRES, str(err), kernel.requires[err.index].span) from None
    if v is not None:
        raise InterpError(REQUIRES, v.message(), kernel.requires[v.index].span,
                          {"clause": v.text, "at": dict(v.at), "reads": dict(v.reads)})


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
    problem = grid_problem(grid)
    if problem is not None:
        axis, why = problem
        # An empty grid is a size that does not fit (TS200, as before); one beyond the
        # hardware is a launch the kernel's `where` should have excluded (TS214).
        code = WHERE if grid[axis] < 1 else GRID_TOO_LARGE
        raise InterpError(code, why, kernel.grid[axis].span, {"grid": list(grid)})
    return grid


# The most tensor memory (all parameters together) a reference run allocates, and the most
# threads it steps. The interpreter steps every thread in Python, so a run this large
# already takes minutes; past it `where` may allow the sizes but the machine would not
# (MemoryError, exit 3) or the run would not end in hours.
MAX_RUN_BYTES = 1 << 28
MAX_RUN_THREADS = 1 << 22


def check_memory(kernel: ir.Kernel, shapes: Mapping[str, tuple[int, ...]],
                 grid: tuple[int, ...] | None = None) -> None:
    """Refuse, before allocating anything: tensors of more than MAX_RUN_BYTES or a launch
    of more than MAX_RUN_THREADS threads (TS200: choose smaller sizes), and shared buffers
    whose layouts spread past a block's shared memory (TS103, as verify reports it)."""
    need = sum(math.prod(shapes[t.name]) * t.dtype.nbytes for t in kernel.params)
    if need > MAX_RUN_BYTES:
        largest = max(kernel.params, key=lambda t: math.prod(shapes[t.name]) * t.dtype.nbytes)
        raise InterpError(WHERE, f"at these sizes the tensors need {_bytes(need)} "
                          f"('{largest.name}' is {_describe(largest, shapes)}); the reference "
                          f"interpreter runs at most {_bytes(MAX_RUN_BYTES)}: choose smaller "
                          "sizes", kernel.span, {"bytes": need, "limit": MAX_RUN_BYTES})
    threads = math.prod(grid or ()) * kernel.block
    if threads > MAX_RUN_THREADS:
        raise InterpError(WHERE, f"at these sizes the launch has {threads} threads "
                          f"(grid {list(grid or ())} x {kernel.block}); the reference "
                          f"interpreter runs at most {MAX_RUN_THREADS}: choose smaller sizes",
                          kernel.span, {"threads": threads, "limit": MAX_RUN_THREADS})
    if kernel.shared:
        plan = plan_shared(kernel.shared)
        used = max(p.base + p.nbytes for p in plan.placements.values()) - min(
            p.base for p in plan.placements.values())
        most = min(MAX_SHARED_BYTES, kernel.target.max_shared)  # gfx942: 64 KiB of LDS
        if used > most:
            raise InterpError(SMEM_CAPACITY, f"the buffers need {used} bytes of shared memory; "
                              f"a block may use at most {most} on {kernel.target.name}",
                              kernel.span, {"bytes": used})


def _describe(t: ir.GlobalTensor, shapes: Mapping[str, tuple[int, ...]]) -> str:
    return f"{t.dtype.value}{list(shapes[t.name])}"


def _bytes(n: int) -> str:
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} bytes"


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


# ---- inputs and summaries -----------------------------------------------------------------


def random_inputs(
    kernel: ir.Kernel, sizes: Mapping[str, int], rng: np.random.Generator | int | None = None
) -> dict[str, np.ndarray]:
    """Random arrays for every global tensor; `out` tensors are poisoned (their contents
    before the launch are undefined, so reading one before writing it shows in the output).

    Floats are multiples of 1/4 in [-2, 2] (exact in f16, bf16 and f32, and sums of a few
    stay exact); i32 in [-100, 100]; u8 in [0, 255]. Poison: NaN for floats, 0xDEADBEEF for
    i32, 0xA5 for u8. bf16 arrays hold uint16 bit patterns.
    """
    gen = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
    shapes = tensor_shapes(kernel, sizes)
    check_memory(kernel, shapes, check_where(kernel, sizes))
    out: dict[str, np.ndarray] = {}
    for t in kernel.params:
        shape = shapes[t.name]
        if not t.role.defined_on_entry:
            out[t.name] = poisoned(t, shape)
        elif t.dtype.is_float:
            vals = (gen.integers(-8, 9, size=shape) / 4).astype(np.float32)
            if t.dtype is ir.DType.BF16:
                out[t.name] = fp.f32_array_to_bf16(vals)
            else:
                out[t.name] = vals.astype(NUMPY_DTYPE[t.dtype])
        elif t.dtype is ir.DType.I32:
            out[t.name] = gen.integers(-100, 101, size=shape).astype(np.int32)
        else:
            out[t.name] = gen.integers(0, 256, size=shape).astype(np.uint8)
    if kernel.requires:  # index tensors the clauses allow (random-looking, by search)
        out.update(satisfying_index_tensors(kernel, sizes, shapes, gen))
    return out


def poisoned(t: ir.GlobalTensor, shape: tuple[int, ...]) -> np.ndarray:
    """An `out` tensor's contents before the launch: NaN for floats, 0xDEADBEEF for i32,
    0xA5 for u8 (bf16 as its uint16 bit patterns)."""
    if t.dtype.is_float:
        vals = np.full(shape, np.nan, np.float32)
        return (fp.f32_array_to_bf16(vals) if t.dtype is ir.DType.BF16
                else vals.astype(NUMPY_DTYPE[t.dtype]))
    if t.dtype is ir.DType.I32:
        return np.full(shape, I32_SENTINEL, np.int32)
    return np.full(shape, U8_SENTINEL, np.uint8)


def satisfying_index_tensors(kernel: ir.Kernel, sizes: Mapping[str, int],
                             shapes: Mapping[str, tuple[int, ...]], rng: np.random.Generator,
                             fixed: Mapping[str, Mapping[tuple[int, ...], int]] | None = None
                             ) -> dict[str, np.ndarray]:
    """Contents for the tensors a kernel's `requires` clauses read that satisfy them
    (semantics/access/requires_synth.py); TS206 when the bounded search finds none."""
    from tilesafe.semantics.access import requires_synth

    try:
        return requires_synth.draw(kernel, sizes, shapes, rng, fixed)
    except requires_synth.NoSolution as err:
        given = ", ".join(f"{k}={sizes[k]}" for k in kernel.sizes)
        raise InterpError(NO_ROUTING, f"no contents of the index tensors satisfying the "
                          f"`requires` clauses at {given}: {err}",
                          kernel.requires[err.clause].span
                          ) from None


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
