"""NumPy references for the kernels of corpus/good/: what each output tensor must hold.

Why: the reference interpreter (semantics/interpreter/interp.py) is differential-tested against
these, and later the H100 runs are too. Each reference computes the way the kernel does -- f32
arithmetic, one rounding per operation, no FMA contraction, stores rounded to nearest-even into the
output type, reductions in the kernel's exact summation order -- so results must agree bit for bit
(no tolerance anywhere).

`CASES[name]` gives the reference `ref(sizes, inputs) -> {output: array}` and the sizes to
test at (several per kernel, non-powers of two wherever the kernel's `where` allows them).
Inputs may hold f16 as float16, f32 as float32, and bf16 either as float32 values that are
bf16-representable or as raw uint16 bit patterns; `f32` below accepts all of them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

Sizes = dict[str, int]
Arrays = dict[str, np.ndarray]

F32 = np.float32


def f32(a: np.ndarray) -> np.ndarray:
    """Widen an input to float32 exactly (bf16 given as uint16 bits is reinterpreted)."""
    a = np.asarray(a)
    if a.dtype == np.uint16:  # bf16 bit patterns
        return (a.astype(np.uint32) << 16).view(np.float32)
    return a.astype(np.float32)


def to_f16(a: np.ndarray) -> np.ndarray:
    """float32 -> float16, round to nearest even (NumPy's cast is IEEE-correct)."""
    return np.asarray(a, dtype=np.float32).astype(np.float16)


# ---- references, one per kernel ---------------------------------------------------------


def ref_copy(s: Sizes, x: Arrays) -> Arrays:
    """tma_copy_single, pipeline2: dst = src (bit copy)."""
    return {"dst": np.array(x["src"], copy=True)}


def ref_widen(s: Sizes, x: Arrays) -> Arrays:
    """pipeline3: dst = f32(src) for bf16 src (exact)."""
    return {"dst": f32(x["src"])}


def ref_matvec(s: Sizes, x: Arrays) -> Arrays:
    """warp_specialized: y = A x. Partial q (= column quarter of every 64-column tile) is a
    sequential f32 sum over tiles k, then j = 0..15; y = ((p0 + p1) + p2) + p3."""
    a, v = f32(x["a"]), f32(x["x"])
    m, n = s["M"], s["N"]
    acc = np.zeros((m, 4), F32)
    quarters = np.arange(4) * 16
    for k in range(n // 64):
        for j in range(16):
            cols = k * 64 + quarters + j
            acc = acc + a[:, cols] * v[cols]
    y = ((acc[:, 0] + acc[:, 1]) + acc[:, 2]) + acc[:, 3]
    return {"y": y.astype(F32)}


def ref_matvec_512(s: Sizes, x: Arrays) -> Arrays:
    """persistent_gemv: warp_specialized's y = A x with K = 512 (8 tiles per row block)."""
    return ref_matvec({"M": s["M"], "N": 512}, x)


def ref_rowdot(s: Sizes, x: Arrays) -> Arrays:
    """ring_two_operands: y[m] = sum_n a[m, n] * b[m, n]. Partial h (= column half of every
    64-column tile) is a sequential f32 sum over tiles k, then j = 0..31; y = p0 + p1."""
    a, b = f32(x["a"]), f32(x["b"])
    m, n = s["M"], s["N"]
    acc = np.zeros((m, 2), F32)
    halves = np.arange(2) * 32
    for k in range(n // 64):
        for j in range(32):
            cols = k * 64 + halves + j
            acc = acc + a[:, cols] * b[:, cols]
    return {"y": (acc[:, 0] + acc[:, 1]).astype(F32)}


def ref_history(s: Sizes, x: Arrays) -> Arrays:
    """tile_history: per row, the f32 sum of each 32-column tile (sequential from 0.0); tile k
    is added into slot min(k, 7) in increasing k, slots start at 0."""
    src = f32(x["src"])
    m, n = s["M"], s["N"]
    hist = np.zeros((m, 8), F32)
    for k in range(n // 32):
        acc = np.zeros(m, F32)
        for c in range(32):
            acc = acc + src[:, k * 32 + c]
        j = min(k, 7)
        hist[:, j] = hist[:, j] + acc
    return {"dst": hist}


def ref_transpose(s: Sizes, x: Arrays) -> Arrays:
    """transpose_swizzled, transpose_ragged, cute_colmajor, cute_blocked_*: dst = src^T."""
    return {"dst": np.ascontiguousarray(np.asarray(x["src"]).T)}


def ref_bias(s: Sizes, x: Arrays) -> Arrays:
    """ragged_tail: y = x + bias[col]."""
    return {"y": f32(x["x"]) + f32(x["bias"])[None, :]}


def ref_ragged_tma(s: Sizes, x: Arrays) -> Arrays:
    """ragged_tma: dst = f16(2 * src); rowsum[r, b] = sequential f32 sum of the 64 columns
    of box b of row r, where columns past N read the TMA's zero fill."""
    m, n = s["M"], s["N"]
    src = f32(x["src"])
    nb = (n + 63) // 64
    padded = np.zeros((m, nb * 64), F32)
    padded[:, :n] = src
    rowsum = np.zeros((m, nb), F32)
    for b in range(nb):
        acc = np.zeros(m, F32)
        for j in range(64):
            acc = acc + padded[:, b * 64 + j]
        rowsum[:, b] = acc
    return {"dst": to_f16(src * F32(2.0)), "rowsum": rowsum}


def ref_row_reduce(s: Sizes, x: Arrays) -> Arrays:
    """row_reduce: lane l sums columns l, l+32, ... in order; then the halving tree
    p[l] += p[l + h] for h = 16, 8, 4, 2, 1."""
    m, n = s["M"], s["N"]
    a = f32(x["x"])
    part = np.zeros((m, 32), F32)
    for j in range((n + 31) // 32):
        cols = j * 32 + np.arange(32)
        ok = cols < n
        part[:, ok] = part[:, ok] + a[:, cols[ok]]
    for h in (16, 8, 4, 2, 1):
        part[:, :h] = part[:, :h] + part[:, h : 2 * h]
    return {"out": part[:, 0].copy()}


def ref_row_sum_ilp(s: Sizes, x: Arrays) -> Arrays:
    """row_sum_ilp: lane l keeps four partials, q = 0..3, each summing columns
    128 j + 32 q + l in order j = 0, 1, ...; the lane's value is (a0 + a1) + (a2 + a3), then
    the halving tree p[l] += p[l + h] for h = 16, 8, 4, 2, 1."""
    m, n = s["M"], s["N"]
    a = f32(x["x"])
    acc = np.zeros((m, 4, 32), F32)
    for j in range(n // 128):
        acc = acc + a[:, j * 128:(j + 1) * 128].reshape(m, 4, 32)
    part = (acc[:, 0] + acc[:, 1]) + (acc[:, 2] + acc[:, 3])
    for h in (16, 8, 4, 2, 1):
        part[:, :h] = part[:, :h] + part[:, h : 2 * h]
    return {"out": part[:, 0].copy()}


def ref_double_f16(s: Sizes, x: Arrays) -> Arrays:
    """persistent_tma_store, persistent_strided: dst = f16(2 * f32(src))."""
    return {"dst": to_f16(F32(2.0) * f32(x["src"]))}


def ref_affine_f16(s: Sizes, x: Arrays) -> Arrays:
    """smem_fence_tma_store, tma_store_pipeline: dst = f16(f32(src) * 0.5 + 1.0)."""
    return {"dst": to_f16(f32(x["src"]) * F32(0.5) + F32(1.0))}


def ref_double(s: Sizes, x: Arrays) -> Arrays:
    """named_handoff: y = 2 x (f32)."""
    return {"y": (F32(2.0) * f32(x["x"])).astype(F32)}


def ref_saxpy(s: Sizes, x: Arrays) -> Arrays:
    """elementwise: z = (a * x) + y, each operation rounded to f32."""
    prod = f32(x["a"])[0] * f32(x["x"])
    return {"z": (prod.astype(F32) + f32(x["y"])).astype(F32)}


def ref_blocked(s: Sizes, x: Arrays) -> Arrays:
    """cute_layout: dst[R, C, i * 8 + j] = src[8R + i, 8C + j]."""
    m, n = s["M"], s["N"]
    src = np.asarray(x["src"])
    blocks = src.reshape(m // 8, 8, n // 8, 8).transpose(0, 2, 1, 3)
    return {"dst": np.ascontiguousarray(blocks.reshape(m // 8, n // 8, 64))}


def ref_scale_inplace(s: Sizes, x: Arrays) -> Arrays:
    """scale_inplace: x = x * s[0] (f32), in place."""
    return {"x": (f32(x["x"]) * f32(x["s"])[0]).astype(F32)}


def ref_pair_sums(s: Sizes, x: Arrays) -> Arrays:
    """pair_sums: h = 2 x; g[i] = h[i] + h[i ^ 1] (f32)."""
    h = (F32(2.0) * f32(x["x"])).astype(F32)
    partner = np.arange(s["N"]) ^ 1
    return {"h": h, "g": (h + h[partner]).astype(F32)}


# ---- the table the tests walk ---------------------------------------------------------


@dataclass(frozen=True)
class Case:
    """`quick` runs in the default test pass (one size, chosen to exercise the pattern: ring
    wrap-around, ragged edges, non-power-of-two extents); `more` only in the full sweep
    (TILESAFE_SLOW=1), since the interpreter needs ~0.3-3 s per run."""

    ref: Callable[[Sizes, Arrays], Arrays]
    quick: Sizes
    more: tuple[Sizes, ...] = ()

    @property
    def sizes(self) -> tuple[Sizes, ...]:
        return (self.quick, *self.more)


def _mn(m: int, n: int) -> Sizes:
    return {"M": m, "N": n}


def _mns(*pairs: tuple[int, int]) -> tuple[Sizes, ...]:
    return tuple(_mn(m, n) for m, n in pairs)


CASES: dict[str, Case] = {
    "tma_copy_single": Case(ref_copy, _mn(192, 64), _mns((64, 64), (192, 128), (64, 320))),
    # 11 tiles: the last slot accumulates tiles 7..10
    "tile_history": Case(ref_history, _mn(64, 352), _mns((32, 32), (96, 256))),
    # rank 3: three batches of a 2x3 tile grid
    "batched_copy": Case(ref_copy, {"B": 3, "M": 128, "N": 192},
                         ({"B": 1, "M": 64, "N": 64}, {"B": 2, "M": 192, "N": 64})),
    # 3 tiles through 2 stages: the ring wraps with an odd tail
    "pipeline2": Case(ref_copy, _mn(64, 192), _mns((64, 64), (128, 192), (64, 320),
                                                   (192, 128))),
    # 4 tiles through 3 stages
    "pipeline3": Case(ref_widen, _mn(128, 256), _mns((128, 64), (128, 320), (256, 192))),
    # 7 tiles through 3 stages: the producer's skipped first pass, then two wraps
    "ring_skip_first_pass": Case(ref_copy, _mn(64, 448), _mns((64, 64), (128, 384),
                                                              (64, 832))),
    # two operand buffers per stage; 5 tiles through 4 stages
    "ring_two_operands": Case(ref_rowdot, _mn(64, 320), _mns((64, 64), (128, 576))),
    # 5 tiles through 4 stages
    "warp_specialized": Case(ref_matvec, _mn(64, 320), _mns((64, 64), (192, 128),
                                                            (128, 576))),
    # persistent: 6 tiles over a grid of 4 (blocks 0, 1 take two tiles, 2, 3 one); the ring
    # of 3 stages wraps inside a tile (4 boxes each) and carries its phase across tiles
    "persistent_ring": Case(ref_copy, {"M": 384}, ({"M": 64}, {"M": 1024})),
    # the warp_specialized ring with a named-barrier epilogue among the consumers
    "named_epilogue": Case(ref_matvec, _mn(64, 320), _mns((64, 64), (128, 576))),
    # 3 segments through the one-buffer ping-pong of two named barriers
    "named_handoff": Case(ref_double, _mn(2, 384), _mns((1, 128), (3, 640))),
    # 10 row tiles over a persistent grid of 8: blocks 0, 1 take two, the ring of 4
    # stages carries 8 boxes per tile; the epilogue's partials are reused per tile
    "persistent_gemv": Case(ref_matvec_512, {"M": 640}, ({"M": 64}, {"M": 1152})),
    # 5 strips over a persistent grid of 8 (blocks 5..7 idle); 4 boxes per strip through 3
    # stages; every box staged and stored with TMA
    "persistent_tma_store": Case(ref_double_f16, {"M": 320}, ({"M": 64}, {"M": 1152})),
    # 7 strips over a grid of 4 (blocks 0..2 take two, block 3 one); the local tile counter
    # carries the ring of 3 stages across strips (4 boxes each)
    "persistent_strided": Case(ref_double_f16, {"N": 448}, ({"N": 256}, {"N": 1344})),
    "transpose_swizzled": Case(ref_transpose, _mn(64, 96), _mns((32, 32), (96, 160),
                                                                (64, 32))),
    "transpose_ragged": Case(ref_transpose, _mn(33, 65), _mns((1, 1), (100, 7), (64, 64))),
    "ragged_tail": Case(ref_bias, _mn(65, 100), _mns((1, 1), (100, 65), (130, 3))),
    "ragged_tma": Case(ref_ragged_tma, _mn(65, 72), _mns((1, 8), (100, 136), (64, 64))),
    "row_reduce": Case(ref_row_reduce, _mn(20, 100), _mns((1, 1), (9, 33), (16, 64))),
    "smem_fence_tma_store": Case(ref_affine_f16, _mn(100, 72), _mns((64, 64), (1, 8),
                                                                    (130, 200))),
    "elementwise": Case(ref_saxpy, {"N": 1000}, ({"N": 1}, {"N": 255}, {"N": 256})),
    "cute_layout": Case(ref_blocked, _mn(64, 64), _mns((64, 192), (192, 128))),
    "cute_colmajor": Case(ref_transpose, _mn(64, 64), _mns((64, 192), (192, 128))),
    # the blocked column-major tile walked in storage order; ragged: partial edge tiles
    "cute_blocked_colmajor": Case(ref_transpose, _mn(64, 128), _mns((64, 64), (192, 128))),
    "cute_blocked_ragged": Case(ref_transpose, _mn(65, 100), _mns((1, 1), (64, 64),
                                                                  (130, 7))),
    # 3 tiles: both the input ring and the output staging wrap
    "tma_store_pipeline": Case(ref_affine_f16, _mn(64, 192), _mns((64, 64), (64, 320),
                                                                  (192, 128))),
    # two blocks; the ring of six stages wraps within the eight boxes of each
    "tma_copy_ring": Case(ref_copy, {"L": 512}, ({"L": 256}, {"L": 768})),
    "transpose_tma": Case(ref_transpose, _mn(64, 128), _mns((64, 64), (192, 64), (128, 320))),
    "row_sum_ilp": Case(ref_row_sum_ilp, _mn(20, 256), _mns((9, 128), (16, 384), (1, 128))),
    # in place: the ragged last block's overhang must leave nothing behind
    "scale_inplace": Case(ref_scale_inplace, {"N": 1000}, ({"N": 1}, {"N": 255})),
    # three blocks: every pair lies inside one, the reads follow the `sync`
    "pair_sums": Case(ref_pair_sums, {"N": 768}, ({"N": 256},)),
}
