"""Typed memory for the reference interpreter: where shared buffers live, and how one element
of any dtype is read or written in a byte array.

Why: a shared buffer is bytes at an absolute address (the copy engine swizzles absolute
addresses), while kernels index it logically through its layout. Placing the buffers once
(declaration order, each at the next multiple of its alignment, the first at a multiple of
1024) and tabulating `logical index -> element slot` makes every access a list lookup, and
makes a layout that disagrees with the copy engine read wrong data, as hardware would.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from tilesafe.frontend import ir
from tilesafe.semantics.expr import fp
from tilesafe.semantics.interpreter.interp_error import InterpError

SMEM_BASE = 1024  # absolute address of the first shared buffer (a multiple of 1024)
SMEM_POISON = 0xFF  # shared memory starts as 0xFF bytes: NaN in every float type

NUMPY_DTYPE: dict[ir.DType, type] = {
    ir.DType.F16: np.float16,
    ir.DType.BF16: np.uint16,  # bf16 tensors are arrays of 16-bit patterns
    ir.DType.F32: np.float32,
    ir.DType.I32: np.int32,
    ir.DType.U8: np.uint8,
}
_BITS_DTYPE = {1: np.uint8, 2: np.uint16, 4: np.uint32}
NAN_BITS = {ir.DType.F16: fp.F16_NAN_BITS, ir.DType.BF16: fp.BF16_NAN_BITS,
            ir.DType.F32: fp.F32_NAN_BITS}


@dataclass(frozen=True)
class Placement:
    """One shared buffer: absolute base address, region size, and its element slots.

    `slots[k]` is the absolute element index (address / elem_bytes) of the k-th logical
    coordinate in row-major order; `strides` linearise a logical coordinate to k.
    """

    buffer: ir.SharedBuffer
    base: int
    nbytes: int
    slots: tuple[int, ...]
    strides: tuple[int, ...]

    @property
    def elem_bytes(self) -> int:
        return self.buffer.dtype.nbytes

    def address(self, coord: tuple[int, ...]) -> int:
        """Absolute byte address of a logical coordinate (assumed in the shape)."""
        k = sum(c * s for c, s in zip(coord, self.strides, strict=True))
        return self.slots[k] * self.elem_bytes


@dataclass(frozen=True)
class SmemPlan:
    placements: dict[str, Placement]
    total: int  # bytes of the block's shared-memory array (addresses 0 .. total-1)


def _row_major_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    out, acc = [], 1
    for d in reversed(shape):
        out.append(acc)
        acc *= d
    return tuple(reversed(out))


@functools.lru_cache(maxsize=128)
def realize_offsets(buf: ir.SharedBuffer) -> tuple[tuple[int, ...], int]:
    """Element offset of every logical coordinate (row-major order) and the layout cosize."""
    from tilesafe.semantics.layout import layouts

    try:
        real = layouts.realize(buf.layout, buf.shape, buf.dtype.nbytes)
        offsets = tuple(int(o) for o in layouts.flat_offsets(real))
        cosize = int(real.cosize)
    except (ValueError, TypeError) as err:
        raise InterpError("TS100", f"layout of shared buffer '{buf.name}' cannot be realised:"
                          f" {err}", buf.span) from err
    if offsets and min(offsets) < 0:
        raise InterpError("TS202", f"layout of '{buf.name}' maps an element to a negative "
                          "offset", buf.span)
    return offsets, max(cosize, max(offsets, default=-1) + 1)


@functools.lru_cache(maxsize=64)
def plan_shared(shared: tuple[ir.SharedBuffer, ...]) -> SmemPlan:
    """Place buffers in declaration order, each at the next multiple of its alignment."""
    addr = SMEM_BASE
    placements = {}
    for buf in shared:
        addr = -(-addr // buf.align) * buf.align
        eb = buf.dtype.nbytes
        offsets, cosize = realize_offsets(buf)
        nbytes = cosize * eb
        slots = tuple(addr // eb + o for o in offsets)
        placements[buf.name] = Placement(buf, addr, nbytes, slots, _row_major_strides(buf.shape))
        addr += nbytes
    total = -(-(addr + 1024) // 1024) * 1024  # slack so a stray swizzled byte stays in range
    return SmemPlan(placements, total)


# ---- element codecs -----------------------------------------------------------------------

Reader = Callable[[int], Any]
Writer = Callable[[int, Any], None]


def bits_view(raw: np.ndarray, nbytes: int) -> np.ndarray:
    """The byte array seen as unsigned patterns of `nbytes` bytes (1, 2 or 4)."""
    return raw.view(_BITS_DTYPE[nbytes])


def codec(dtype: ir.DType, raw: np.ndarray) -> tuple[Reader, Writer]:
    """Element reader/writer over a flat uint8 array, indexed in elements of `dtype`.

    Readers widen exactly (f16/bf16 -> f32 scalar, ints -> Python int); writers round to
    nearest even into the float type or wrap integers, per docs/semantics.md.
    """
    if dtype is ir.DType.F32:
        view = raw.view(np.float32)

        def write_f32(i: int, x: Any) -> None:
            view[i] = x

        return view.__getitem__, write_f32
    if dtype is ir.DType.F16:
        hv, bv = raw.view(np.float16), raw.view(np.uint16)
        f32 = np.float32

        def write_f16(i: int, x: Any) -> None:
            if x != x:
                bv[i] = fp.F16_NAN_BITS
            else:
                hv[i] = x  # numpy's float32 -> float16 cast: round to nearest even

        return (lambda i: f32(hv[i])), write_f16
    if dtype is ir.DType.BF16:
        bv = raw.view(np.uint16)
        widen = fp.bf16_bits_to_f32

        def write_bf16(i: int, x: Any) -> None:
            bv[i] = fp.f32_to_bf16_bits(x)

        return (lambda i: widen(int(bv[i]))), write_bf16
    if dtype is ir.DType.I32:
        iv = raw.view(np.int32)

        def write_i32(i: int, v: Any) -> None:
            iv[i] = fp.wrap_i32(v)

        return (lambda i: int(iv[i])), write_i32

    def write_u8(i: int, v: Any) -> None:
        raw[i] = v & 0xFF

    return (lambda i: int(raw[i])), write_u8
