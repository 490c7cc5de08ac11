"""wgmma descriptors (semantics/hw/wgmma_desc.py): the canonical forms against an independent
reading, and synthesis from buffers laid out by our own layout algebra.

The independent reading: CUTLASS states each canonical form as a CuTe layout in units of
16-byte chunks, e.g. K-major 128B: Swizzle<3,4,3> o ((8,m),2):((8,SBO),1) (chunks), with
the swizzle on byte addresses. Here the same forms are written as CuTe layouts over *bytes*
with our cute module and evaluated point by point, then compared with Descriptor.addresses.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tilesafe.frontend import ir
from tilesafe.semantics.hw.wgmma_desc import (
    Descriptor,
    Found,
    Major,
    Mode,
    NotFound,
    swizzle,
    synthesize,
)
from tilesafe.semantics.layout import layouts
from tilesafe.semantics.layout.cute import Layout, Swizzle

T_BF16 = 8
ROW = ir.LayoutTerm("row_major", ())


def cute_bytes(major: Major, mode: Mode, lbo: int, sbo: int, e: int, mn: int, k: int
               ) -> np.ndarray:
    """The canonical form as CUTLASS writes it, in bytes: chunk strides times 16, the element
    within a chunk times e, Swizzle<b,4,3> on the byte address."""
    t, w = 16 // e, mode.width
    if major is Major.K:
        lead = lbo if mode is Mode.NONE else 16
        # ((t, 8, mn/8), (k/t)) : ((e, 16w, sbo), lead)
        lay = Layout(((t, 2), (8, mn // 8)), ((e, lead), (16 * w, sbo)))
        coord = lambda i, j: ((j % t, j // t), (i % 8, i // 8))  # noqa: E731
    elif mode is Mode.NONE:
        lay = Layout(((t, mn // t), (8, max(1, k // 8))), ((e, sbo), (16, lbo)))
        coord = lambda i, j: ((i % t, i // t), (j % 8, j // 8))  # noqa: E731
    else:
        lay = Layout(((t * w, max(1, mn // (t * w))), (8, max(1, k // 8))),
                     ((e, lbo), (16 * w, sbo)))
        coord = lambda i, j: ((i % (t * w), i // (t * w)), (j % 8, j // 8))  # noqa: E731
    sw = Swizzle(mode.bits, 4, 3)
    out = np.zeros((mn, k), np.int64)
    for i, j in itertools.product(range(mn), range(k)):
        out[i, j] = sw(lay(coord(i, j)))
    return out


@pytest.mark.parametrize("major, mode, mn, k, lbo, sbo", [
    (Major.K, Mode.B128, 64, 16, 16, 1024), (Major.K, Mode.B64, 64, 16, 16, 512),
    (Major.K, Mode.B32, 64, 16, 16, 256), (Major.K, Mode.NONE, 64, 16, 128, 256),
    (Major.MN, Mode.B128, 64, 16, 8192, 1024), (Major.MN, Mode.B64, 64, 16, 2048, 512),
    (Major.MN, Mode.B32, 32, 16, 1024, 256), (Major.MN, Mode.NONE, 64, 16, 2048, 128),
])
def test_canonical_forms_agree_with_the_cute_reading(major, mode, mn, k, lbo, sbo):
    d = Descriptor(major, mode, lbo, sbo, 2)
    assert (d.addresses(0, mn, k) == cute_bytes(major, mode, lbo, sbo, 2, mn, k)).all()


def test_swizzle_is_an_involution():
    a = np.arange(1 << 14, dtype=np.int64)
    for mode in Mode:
        assert (swizzle(swizzle(a, mode), mode) == a).all()


def test_encoding():
    d = Descriptor(Major.K, Mode.B128, 16, 1024, 2)
    enc = d.encode(0x1400)
    assert enc & 0x3FFF == 0x1400 >> 4
    assert (enc >> 16) & 0x3FFF == 1 and (enc >> 32) & 0x3FFF == 64
    assert enc >> 62 == 1 and (enc >> 49) & 7 == 0


def addresses(layout, shape, dtype, base, mn, k, coord) -> np.ndarray:
    real = layouts.realize(layout, shape, dtype.nbytes)
    out = np.zeros((mn, k), np.int64)
    for i, j in itertools.product(range(mn), range(k)):
        out[i, j] = base + dtype.nbytes * real.offset(coord(i, j))
    return out


@pytest.mark.parametrize("head, mode, sbo", [("swizzle128B", Mode.B128, 1024),
                                            ("swizzle64B", Mode.B64, 512),
                                            ("swizzle32B", Mode.B32, 256)])
def test_tma_swizzled_k_major_tiles_get_their_descriptor(head, mode, sbo):
    """A [rows, W*8] bf16 buffer in a TMA swizzle mode, read in k-steps of 16: K-major in
    that mode, SBO = 8 rows, start = the unswizzled address of (0, k0)."""
    cols = mode.width * T_BF16
    lay = ir.LayoutTerm(head, (ROW,))
    tiles = [addresses(lay, (64, cols), ir.DType.BF16, 2048, 64, 16,
                       lambda i, j, k0=k0: (i, k0 + j)) for k0 in range(0, cols, 16)]
    found = synthesize(tiles, ir.DType.BF16)
    assert isinstance(found, Found), found
    assert found.descriptor == Descriptor(Major.K, mode, 16, sbo, 2)
    assert found.starts == tuple(2048 + 2 * k0 for k0 in range(0, cols, 16))


def test_mn_major_b_operand():
    """B stored [K, N] with N contiguous in 128-byte rows (swizzle128B): MN-major B128."""
    lay = ir.LayoutTerm("swizzle128B", (ROW,))
    tiles = [addresses(lay, (64, 64), ir.DType.BF16, 1024, 64, 16,
                       lambda i, j, k0=k0: (k0 + j, i)) for k0 in range(0, 64, 16)]
    found = synthesize(tiles, ir.DType.BF16)
    assert isinstance(found, Found), found
    assert found.descriptor.major is Major.MN and found.descriptor.mode is Mode.B128
    assert found.descriptor.sbo == 1024
    # f32 (tf32) operands may not be MN-major: the same arrangement has no descriptor
    assert isinstance(synthesize([t * 2 for t in tiles], ir.DType.F32), NotFound)


def test_row_major_without_swizzle_is_not_canonical():
    """Plain row-major 64 x 64 bf16 (128-byte rows, no swizzle) is a fine layout, but no
    descriptor reads it: K-major needs 8-row core matrices 16 bytes apart (interleaved)."""
    tiles = [addresses(ROW, (64, 64), ir.DType.BF16, 1024, 64, 16, lambda i, j: (i, j))]
    found = synthesize(tiles, ir.DType.BF16)
    assert isinstance(found, NotFound)
    assert "K-major b128" in found.describe()


def test_a_swizzle_narrower_than_the_rows_has_no_descriptor():
    """128-byte rows under the 64-byte TMA swizzle: a bijection the copy engine can write,
    but no canonical form: rows are 128 bytes apart while a 64-byte swizzle atom's rows are
    64 bytes apart."""
    lay = ir.LayoutTerm("swizzle64B", (ROW,))
    tiles = [addresses(lay, (64, 64), ir.DType.BF16, 1024, 64, 16, lambda i, j: (i, j))]
    found = synthesize(tiles, ir.DType.BF16)
    assert isinstance(found, NotFound), found
    assert "placement 0 is at byte" in found.describe()


@settings(max_examples=40, deadline=None)
@given(major=st.sampled_from(list(Major)), mode=st.sampled_from(list(Mode)),
       mblocks=st.integers(1, 8), lbo16=st.integers(1, 64), sbo16=st.integers(1, 64),
       start16=st.integers(0, 64))
def test_synthesis_recovers_any_canonical_tile(major, mode, mblocks, lbo16, sbo16, start16):
    """Addresses generated from a descriptor are recognised as that descriptor (or one
    that reads exactly the same bytes)."""
    mn = 8 * mblocks * (1 if major is Major.K else 2)
    d = Descriptor(major, mode, 16 * lbo16 if (major is Major.MN or mode is Mode.NONE) else 16,
                   16 * sbo16, 2)
    start = 1024 * start16
    tile = d.addresses(start, mn, 16)
    found = synthesize([tile], ir.DType.BF16)
    if isinstance(found, Found):
        got = found.descriptor.addresses(found.starts[0], mn, 16)
        assert (got == tile).all()
    else:  # only when the generated tile overlaps itself (not a bijection onto bytes)
        assert len(set(tile.ravel().tolist())) < tile.size
