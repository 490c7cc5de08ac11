"""What one wgmma computes, in the reference interpreter's numbers.

Why a module of its own: the interpreter (scalar and vector engines), the tests and the GPU
comparison need one definition of the MMA's arithmetic, and the PTX ISA does not give one --
"the order of the accumulation and the rounding of intermediate results are unspecified".
So tilesafe fixes its own, documented order, and says where hardware must agree bit for bit:

* 16-bit inputs (f16, bf16) into f32: each product a[m, k] * b[k, n] is exact in f32 (an
  11-bit by 11-bit significand fits 24 bits, and the exponent range of f32 holds it); the
  products of one wgmma are added to the accumulator in order k = 0 .. K - 1, each addition
  rounded to nearest even in f32. Hardware agrees bit for bit whenever every partial sum is
  exact in f32 (small integers, for instance); otherwise the GPU comparison uses a relative
  bound against a float64 reference (docs/wgmma.md).
* f32 inputs (tf32): each input keeps its sign, exponent and top 10 significand bits (the
  low 13 bits are dropped, as the tensor core reads tf32), then as above.
* u8 inputs into s32: exact integer products and sums, wrapping modulo 2^32 as the s32
  accumulator does.

The fragment conversions map the per-thread registers of a warpgroup (thread t of the
warpgroup, register r) to the logical [64, N] tile and back (frontend/fragments.py's
layout, vectorised).
"""

from __future__ import annotations

import numpy as np

from tilesafe.frontend import fragments as fr
from tilesafe.frontend import ir


def tf32(x: np.ndarray) -> np.ndarray:
    """f32 values as the tensor core reads them for tf32: the low 13 significand bits
    cleared (NaN and infinities kept)."""
    bits = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    kept = np.where(np.isfinite(x), bits & np.uint32(0xFFFFE000), bits)
    return kept.astype(np.uint32).view(np.float32)


def mma(acc: np.ndarray, a: np.ndarray, b: np.ndarray, dtype: ir.DType,
        scale_d: bool) -> np.ndarray:
    """acc' = (acc if scale_d else 0) + a @ b for one wgmma: a is [64, K], b is [K, N], both
    widened to float32 (or int64 for u8); acc is [64, N] float32 (int32 for u8)."""
    if dtype is ir.DType.U8:
        d = acc.astype(np.int64) if scale_d else np.zeros(acc.shape, np.int64)
        d = d + a.astype(np.int64) @ b.astype(np.int64)
        return ((d + (1 << 31)) % (1 << 32) - (1 << 31)).astype(np.int32)
    a32 = np.asarray(a, np.float32)
    b32 = np.asarray(b, np.float32)
    if dtype is ir.DType.F32:
        a32, b32 = tf32(a32), tf32(b32)
    d = np.asarray(acc, np.float32).copy() if scale_d else np.zeros(acc.shape, np.float32)
    with np.errstate(all="ignore"):
        for k in range(a32.shape[1]):
            d = (d + np.outer(a32[:, k], b32[k, :]).astype(np.float32)).astype(np.float32)
    return d


def fragment_index(n: int) -> tuple[np.ndarray, np.ndarray]:
    """(rows, cols): arrays [128, N/2] giving the element of the [64, N] tile that register
    r of thread t (of the warpgroup) holds."""
    regs = fr.M * n // fr.WARPGROUP
    t = np.arange(fr.WARPGROUP)[:, None]
    r = np.arange(regs)[None, :]
    rows = 16 * (t // 32) + (t % 32) // 4 + 8 * ((r // 2) % 2)
    cols = 8 * (r // 4) + 2 * (t % 4) + r % 2
    return rows, cols


def gather(registers: np.ndarray, n: int) -> np.ndarray:
    """The logical [64, N] tile from the warpgroup's registers [128, N/2]."""
    rows, cols = fragment_index(n)
    tile = np.empty((fr.M, n), registers.dtype)
    tile[rows, cols] = registers
    return tile


def scatter(tile: np.ndarray) -> np.ndarray:
    """The warpgroup's registers [128, N/2] holding a logical [64, N] tile."""
    rows, cols = fragment_index(tile.shape[1])
    return tile[rows, cols]
