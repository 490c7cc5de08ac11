"""wgmma matrix descriptors: the eight canonical shared-memory layouts a descriptor can
describe, and the descriptor (if any) that describes where an operand tile really is.

Why: `wgmma.mma_async` does not read its shared-memory operands through the kernel's layout;
it reads them through a 64-bit descriptor (start address, leading and stride byte offsets,
a swizzle mode) that names one of a few *canonical* arrangements of 8 x 16-byte core
matrices. A layout that is a perfectly good bijection can have no descriptor, and a
descriptor with a wrong stride reads the wrong elements silently. So the tile's elements, at
the byte addresses the kernel's layout and the buffer's placement give them, must be exactly
the addresses the descriptor produces -- this module computes both and compares them.

The canonical addresses (PTX ISA, "Shared memory matrix layout" and "Matrix descriptor";
docs/wgmma.md gives our reading, checked on the H100). An operand is indexed (mn, k): for A,
mn is the row (M) and k the column; for B, mn is the column (N) and k the row. T = 16 / elem
bytes elements make one 16-byte chunk; a swizzle mode of width W (1 none, 2 for 32B, 4 for
64B, 8 for 128B) puts a "row" of W chunks at 16 W bytes. Before swizzling, element (mn, k) is
at

  K-major  (k contiguous):  start + 16 W (mn % 8) + SBO (mn / 8) + step_k (k / T) + e (k % T)
           with step_k = 16 for a swizzle mode and LBO for none;
  MN-major (mn contiguous): swizzled:   start + e (mn % TW) + LBO (mn / TW) + 16 W (k % 8)
                                         + SBO (k / 8)
                            none:       start + e (mn % T) + SBO (mn / T) + 16 (k % 8)
                                         + LBO (k / 8)

(e = element bytes), and the swizzle XORs address bits [4, 4 + log2 W) with bits
[7, 7 + log2 W) of the *absolute* shared address (the descriptor's base offset is 0; a
1024-byte aligned buffer is what the 128-byte mode needs, as for TMA). The swizzle is an
involution, so the start address of a tile is the swizzle of its first element's address.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum

import numpy as np

from tilesafe.frontend import ir


class Major(str, Enum):
    K = "K"  # k (the reduction dim) contiguous: the PTX "no transpose"
    MN = "MN"  # m or n contiguous: "transpose" (16-bit types only)


class Mode(Enum):
    """Swizzle modes by width in 16-byte chunks, with the descriptor's 2-bit code."""

    NONE = (1, 0)
    B32 = (2, 3)
    B64 = (4, 2)
    B128 = (8, 1)

    @property
    def width(self) -> int:
        return self.value[0]

    @property
    def code(self) -> int:
        return self.value[1]

    @property
    def bits(self) -> int:
        return self.width.bit_length() - 1


CORE_ROWS = 8  # rows of a core matrix (each 16 bytes)
FIELD_LIMIT = 1 << 18  # addresses and offsets are stored >> 4 in 14 bits


def swizzle(addr: np.ndarray | int, mode: Mode) -> np.ndarray | int:
    """The mode's XOR of address bits [4, 4 + b) with bits [7, 7 + b) (an involution)."""
    if mode.bits == 0:
        return addr
    mask = (1 << mode.bits) - 1
    return addr ^ (((addr >> 7) & mask) << 4)


@dataclass(frozen=True)
class Descriptor:
    """A descriptor without its start address (which varies with the stage and k-step)."""

    major: Major
    mode: Mode
    lbo: int  # bytes
    sbo: int  # bytes
    elem_bytes: int

    def addresses(self, start: int, mn: int, k: int) -> np.ndarray:
        """[mn, k] byte addresses the hardware reads for a tile starting at `start`."""
        e, w = self.elem_bytes, self.mode.width
        t = 16 // e
        i = np.arange(mn, dtype=np.int64)[:, None]
        j = np.arange(k, dtype=np.int64)[None, :]
        if self.major is Major.K:
            step = 16 if self.mode is not Mode.NONE else self.lbo
            raw = start + 16 * w * (i % 8) + self.sbo * (i // 8) + step * (j // t) + e * (j % t)
        elif self.mode is Mode.NONE:
            raw = start + e * (i % t) + self.sbo * (i // t) + 16 * (j % 8) + self.lbo * (j // 8)
        else:
            raw = (start + e * (i % (t * w)) + self.lbo * (i // (t * w)) + 16 * w * (j % 8)
                   + self.sbo * (j // 8))
        return swizzle(raw, self.mode)

    def encode(self, start: int) -> int:
        """The 64-bit descriptor: start >> 4 in bits 0-13, LBO >> 4 in 16-29, SBO >> 4 in
        32-45, base offset 0 in 49-51, the mode in 62-63."""
        return ((start >> 4) & 0x3FFF) | (((self.lbo >> 4) & 0x3FFF) << 16) | (
            ((self.sbo >> 4) & 0x3FFF) << 32) | (self.mode.code << 62)

    def describe(self) -> str:
        return (f"{self.major.value}-major, {self.mode.name.lower()} swizzle, LBO {self.lbo} B, "
                f"SBO {self.sbo} B")


@dataclass(frozen=True)
class Found:
    """The descriptor that describes every placement of the tile, and the start address of
    each (in the order given)."""

    descriptor: Descriptor
    starts: tuple[int, ...]


@dataclass(frozen=True)
class NotFound:
    """Why no descriptor fits: for each form tried, the first disagreement."""

    reasons: tuple[str, ...]

    def describe(self) -> str:
        return "; ".join(self.reasons)


def legal_majors(dtype: ir.DType) -> tuple[Major, ...]:
    """MN-major (transposed) operands exist only for 16-bit types (PTX: imm-trans-a/b)."""
    return (Major.K, Major.MN) if dtype.nbytes == 2 else (Major.K,)


def synthesize(tiles: Sequence[np.ndarray], dtype: ir.DType) -> Found | NotFound:
    """The descriptor whose canonical addresses equal `tiles` (each an [mn, k] array of the
    byte addresses one placement of the operand occupies), one start address per tile.
    Forms are tried widest swizzle first, K-major first; strides come from the first
    tile and are then checked on every element of every tile."""
    e = dtype.nbytes
    reasons = []
    for major in legal_majors(dtype):
        for mode in (Mode.B128, Mode.B64, Mode.B32, Mode.NONE):
            found = _try(tiles, major, mode, e)
            if isinstance(found, Found):
                return found
            reasons.append(f"{major.value}-major {mode.name.lower()}: {found}")
    return NotFound(tuple(reasons))


def _try(tiles: Sequence[np.ndarray], major: Major, mode: Mode, e: int) -> Found | str:
    first = tiles[0]
    mn, k = first.shape
    t, w = 16 // e, mode.width
    start0 = int(swizzle(int(first[0, 0]), mode))
    raw = swizzle(first.astype(np.int64), mode)  # the tile's addresses before swizzling

    def gap(i: int, j: int) -> int:
        return int(raw[i, j]) - start0 if i < mn and j < k else 0

    if major is Major.K:
        sbo = gap(8, 0)
        lbo = gap(0, t) if mode is Mode.NONE else 16
    elif mode is Mode.NONE:
        sbo, lbo = gap(t, 0), gap(0, 8)
    else:
        lbo, sbo = gap(t * w, 0), gap(0, 8)
    desc = Descriptor(major, mode, lbo, sbo, e)
    for name, v in (("LBO", lbo), ("SBO", sbo)):
        if v < 0 or v % 16 or v >= FIELD_LIMIT:
            return f"{name} {v} B is not a non-negative multiple of 16 below 2^18"
    starts = []
    for n, tile in enumerate(tiles):
        start = int(swizzle(int(tile[0, 0]), mode))
        if start % 16 or not 0 <= start < FIELD_LIMIT:
            return f"start address {start} (placement {n}) is not 16-byte aligned in 2^18"
        want = desc.addresses(start, mn, k)
        bad = np.argwhere(want != tile)
        if len(bad):
            i, j = (int(x) for x in bad[0])
            return (f"element (mn {i}, k {j}) of placement {n} is at byte {int(tile[i, j])}, "
                    f"the descriptor would read byte {int(want[i, j])}")
        starts.append(start)
    return Found(desc, tuple(starts))
