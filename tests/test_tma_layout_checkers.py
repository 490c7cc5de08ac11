"""The layout and TMA checkers against independent evidence: the interpreter's actual copy,
brute-force enumeration of offsets, and planted bugs."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tilesafe.checkers import layout, tma
from tilesafe.checkers.obligation import Verdict
from tilesafe.checkers.registry import CheckOptions
from tilesafe.frontend.load import compile_source
from tilesafe.semantics.interpreter.interp import run_kernel

COPY = """
kernel copy(src: global f16[M, N], dst: global f16[M, N])
  where M % {rows} == 0, N % {cols} == 0, M > 0, N > 0, M <= 4096, N <= 4096
  grid (M / {rows}, N / {cols}) block {block}
{{
  tensormap tin = tiled(src, box [{rows}, {cols}], swizzle {swizzle})
  shared tile: f16[{rows}, {cols}] layout {layout} align {align}
  mbarrier ready count 1
  if thread == 0 {{ init ready; fence mbarrier_init }}
  sync
  role leader = warp 0, elect one {{
    arrive ready, expect_tx bytes(tile)
    tma_load tile <- tin[block.x * {rows}, block.y * {cols}] signal ready
  }}
  wait ready parity 0
  for r in 0 .. {rows} {{
    if thread < {cols} {{
      dst[block.x * {rows} + r, block.y * {cols} + thread] = tile[r, thread]
    }}
  }}
}}
"""

CASES = [
    (8, 32, "none", "row_major", 128),
    (8, 32, "none", "swizzle64B(row_major)", 1024),
    (8, 32, "64B", "swizzle64B(row_major)", 1024),
    (8, 32, "64B", "row_major", 1024),
    (8, 32, "64B", "swizzle128B(row_major)", 1024),
    (16, 16, "32B", "swizzle32B(row_major)", 1024),
    (16, 16, "32B", "swizzle32B(row_major)", 128),
    (16, 16, "32B", "swizzle64B(row_major)", 1024),
    (8, 64, "128B", "swizzle128B(row_major)", 1024),
    (8, 64, "128B", "swizzle128B(row_major)", 256),
    (8, 64, "128B", "col_major", 1024),
]


def _kernel(rows, cols, swizzle, layout_text, align):
    src = COPY.format(rows=rows, cols=cols, swizzle=swizzle, layout=layout_text, align=align,
                      block=max(cols, 32))
    return compile_source(src, "copy.tsk").kernels[0]


def _arrangement(kernel):
    obs = [o for o in tma.check(kernel, CheckOptions()) if "arrangement" in o.name]
    assert len(obs) == 1
    return obs[0]


@pytest.mark.parametrize("rows,cols,swizzle,layout_text,align", CASES)
def test_arrangement_verdict_matches_what_the_copy_does(rows, cols, swizzle, layout_text,
                                                        align):
    """Proved exactly when the interpreter's copy reproduces src through the declared
    layout, at a placement the alignment allows (the interpreter places the buffer at a
    1024-aligned base, so a refutation that needs another placement is checked there by
    the message, not by the run)."""
    kernel = _kernel(rows, cols, swizzle, layout_text, align)
    ob = _arrangement(kernel)
    rng = np.random.default_rng(0)
    src = rng.integers(-8, 8, size=(rows, cols)).astype(np.float16)
    dst = np.full((rows, cols), np.nan, dtype=np.float16)
    out = run_kernel(kernel, {"M": rows, "N": cols}, {"src": src, "dst": dst}).tensors["dst"]
    copied = np.array_equal(out, src)
    if ob.verdict is Verdict.PROVED:
        assert copied
    else:
        assert ob.verdict is Verdict.REFUTED and ob.code == "TS520"
        placement_only = ob.counterexample["buffer_base_mod_period"] != 0
        assert copied == placement_only, ob.message


def test_refutation_suggests_the_fitting_swizzle():
    ob = _arrangement(_kernel(8, 32, "64B", "row_major", 1024))
    assert "swizzle none" in ob.message


def test_misaligned_placement_is_named():
    ob = _arrangement(_kernel(8, 64, "128B", "swizzle128B(row_major)", 256))
    assert ob.verdict is Verdict.REFUTED and "align 1024" in ob.message


def test_operand_rules_need_bounds_and_16_byte_strides():
    unbounded = COPY.format(rows=8, cols=64, swizzle="128B", layout="swizzle128B(row_major)",
                            align=1024, block=64).replace(", M <= 4096, N <= 4096", "")
    codes = {o.code for o in tma.check(compile_source(unbounded, "u.tsk").kernels[0],
                                       CheckOptions()) if o.verdict is Verdict.REFUTED}
    assert codes == {"TS511", "TS505"}
    odd = unbounded.replace("N % 64 == 0, ", "").replace("M > 0, N > 0",
                                                        "M > 0, N > 0, M <= 4096, N <= 4096")
    obs = tma.check(compile_source(odd, "o.tsk").kernels[0], CheckOptions())
    stride = [o for o in obs if "stride" in o.name][0]
    assert stride.verdict is Verdict.REFUTED and stride.code == "TS505"
    assert stride.counterexample["value"] % 16 != 0


LAYOUT_KERNEL = """
kernel k(x: global f32[M])
  where M == 1
  grid 1 block 32
{{
  shared b: f32[{a}, {b}] layout ({a},{b}):({s0},{s1})
  b[0, 0] = 1.0
}}
"""


@settings(max_examples=40, deadline=None)
@given(a=st.integers(1, 8), b=st.integers(1, 8), s0=st.integers(-9, 9), s1=st.integers(-9, 9))
def test_layout_verdicts_agree_with_enumeration(a, b, s0, s1):
    kernel = compile_source(LAYOUT_KERNEL.format(a=a, b=b, s0=s0, s1=s1), "l.tsk").kernels[0]
    obs = {o.name.split()[-1]: o for o in layout.check(kernel, CheckOptions())
           if "injective" in o.name or "non-negative" in o.name}
    offsets = [i * s0 + j * s1 for i in range(a) for j in range(b)]
    inj = next(o for o in obs.values() if "injective" in o.name)
    neg = next(o for o in obs.values() if "non-negative" in o.name)
    assert (inj.verdict is Verdict.PROVED) == (len(set(offsets)) == len(offsets))
    assert (neg.verdict is Verdict.PROVED) == (min(offsets) >= 0)
    if inj.verdict is Verdict.REFUTED:
        ca, cb = inj.counterexample["coord_a"], inj.counterexample["coord_b"]
        assert ca != cb and ca[0] * s0 + ca[1] * s1 == cb[0] * s0 + cb[1] * s1


def test_shared_memory_capacity_is_checked():
    # 128 KiB of f32 (the frontend refuses more than 227 KiB of elements outright, TS026),
    # spread by the layout's row stride of 512 over 256 KiB of shared memory
    big = LAYOUT_KERNEL.format(a=128, b=256, s0=512, s1=1)
    obs = layout.check(compile_source(big, "big.tsk").kernels[0], CheckOptions())
    cap = [o for o in obs if "shared memory" in o.name][0]
    assert cap.verdict is Verdict.REFUTED and cap.code == "TS103"
