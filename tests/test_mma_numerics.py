"""The reference MMA (semantics/hw/mma.py): its documented order, exactness where hardware must
agree, integer wrapping, tf32 truncation, and the fragment gather/scatter."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from tilesafe.frontend import fragments as fr
from tilesafe.frontend import ir
from tilesafe.semantics.hw import mma


def test_small_integers_give_the_exact_product():
    """Every partial sum exact: the result is the float64 product, bit for bit."""
    rng = np.random.default_rng(0)
    a = rng.integers(-8, 9, (64, 16)).astype(np.float32)
    b = rng.integers(-8, 9, (16, 128)).astype(np.float32)
    acc = rng.integers(-100, 100, (64, 128)).astype(np.float32)
    got = mma.mma(acc, a, b, ir.DType.BF16, scale_d=True)
    want = acc.astype(np.float64) + a.astype(np.float64) @ b.astype(np.float64)
    assert (got == want).all()
    zero = mma.mma(acc, a, b, ir.DType.BF16, scale_d=False)
    assert (zero == a.astype(np.float64) @ b.astype(np.float64)).all()


def test_the_order_is_k_ascending_with_f32_rounding():
    """1 + 2^-24 ... : adding in order k = 0 .. K-1 rounds at each step (documented)."""
    a = np.zeros((64, 16), np.float32)
    b = np.zeros((16, 8), np.float32)
    a[0, :3] = [1.0, 2.0 ** -24, 2.0 ** -24]
    b[:3, 0] = 1.0
    got = mma.mma(np.zeros((64, 8), np.float32), a, b, ir.DType.F16, True)
    assert got[0, 0] == np.float32(1.0)  # each tiny addend lost in turn, never summed first


def test_u8_wraps_like_s32():
    a = np.full((64, 32), 255, np.int64)
    b = np.full((32, 8), 255, np.int64)
    acc = np.full((64, 8), 2**31 - 1, np.int32)
    got = mma.mma(acc, a, b, ir.DType.U8, True)
    want = ((2**31 - 1 + 32 * 255 * 255 + 2**31) % 2**32) - 2**31
    assert (got == want).all() and got.dtype == np.int32


def test_tf32_drops_the_low_13_bits():
    x = np.array([1.0 + 2.0 ** -10, 1.0 + 2.0 ** -11, -3.0, np.inf, np.nan], np.float32)
    got = mma.tf32(x)
    assert got[0] == np.float32(1.0 + 2.0 ** -10) and got[1] == 1.0
    assert got[2] == -3.0 and np.isinf(got[3]) and np.isnan(got[4])


@settings(max_examples=20, deadline=None)
@given(n=st.sampled_from(fr.N_CHOICES), seed=st.integers(0, 1000))
def test_gather_inverts_scatter(n, seed):
    tile = np.random.default_rng(seed).standard_normal((64, n)).astype(np.float32)
    regs = mma.scatter(tile)
    assert regs.shape == (128, n // 2)
    assert (mma.gather(regs, n) == tile).all()
    t, r = seed % 128, seed % (n // 2)
    i, j = int(mma.fragment_index(n)[0][t, r]), int(mma.fragment_index(n)[1][t, r])
    assert fr.owner(i, j) == (t, r)
