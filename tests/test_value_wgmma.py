"""The value proof through tensor-core MMAs (semantics/value/value_mma.py, value_frag.py): a
fragment register is the last write that sets it (a wgmma with scale-d false, a store) plus
the products of every wgmma in between, compared with the spec's order-free sum as a
multiset. Every corpus/wgmma kernel is proved for every size; the planted bugs of
corpus/bad/ts803_wgmma_* are not proved and the interpreter refutes them; generated variants
are cross-checked against the interpreter in both directions."""

from __future__ import annotations

import sys
from pathlib import Path

import islpy as isl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tilesafe.checkers import value
from tilesafe.checkers.obligation import Verdict
from tilesafe.checkers.registry import CheckOptions
from tilesafe.frontend.load import compile_source, load_program
from tilesafe.semantics.value import spec_run, valueflow
from tilesafe.semantics.value.spec_inputs import Profile, choose_sizes
from tilesafe.semantics.value.value_exec import Unsupported
from tilesafe.semantics.value.value_space import subtract

sys.path.insert(0, str(Path(__file__).resolve().parent))
from value_checks import agrees  # noqa: E402
from value_checks import proved as is_proved  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
WGMMA = sorted((ROOT / "corpus" / "wgmma").glob("*.tsk"))
BAD = sorted((ROOT / "corpus" / "bad").glob("ts803_wgmma_*.tsk"))


def prove(src: str) -> valueflow.Proof:
    k = compile_source(src, "k.tsk").kernels[0]
    return valueflow.prove(k, k.ensures[0])


def why_not(src: str) -> str:
    with pytest.raises((valueflow.NotProved, Unsupported)) as err:
        prove(src)
    return str(err.value)


# ---- the corpus ------------------------------------------------------------------------------


@pytest.mark.parametrize("path", WGMMA, ids=[p.stem for p in WGMMA])
def test_every_wgmma_kernel_is_proved_and_agrees(path: Path):
    """Proved for every size, through the fragment and the operand stages; and, since a
    proved clause is not run in `verify`, the interpreter agrees at the refuting half's
    first launches (plain and special-value inputs)."""
    k = load_program(path).kernels[0]
    (ob,) = value.check(k, CheckOptions())
    assert ob.verdict is Verdict.PROVED, ob.message
    assert "acc" in ob.evidence["shared_buffers_resolved"]
    assert any(d.startswith("TS308") for d in ob.evidence["depends_on"])
    for sizes, profile in ((choose_sizes(k)[:2], Profile.PLAIN),
                           (choose_sizes(k)[:1], Profile.SPECIAL)):
        for run in spec_run.check(k, sizes, profile=profile):
            assert run.runs, run.skipped
            assert run.mismatch is None, run.mismatch.describe()


@pytest.mark.parametrize("path", BAD, ids=[p.stem for p in BAD])
def test_planted_mma_bugs_are_not_proved(path: Path):
    """The prover stops on each (the full refutation is tests/test_corpus.py's)."""
    k = load_program(path).kernels[0]
    with pytest.raises(valueflow.NotProved):
        valueflow.prove(k, k.ensures[0])


def test_poisoned_accumulator_is_a_sum_bug_not_a_fill():
    """The interpreter's NaN poison in a never-zeroed accumulator reaches the output; no
    tensormap fills NaN, so it is TS803 (the sum has a garbage addend), not TS804."""
    path = ROOT / "corpus" / "bad" / "ts803_wgmma_accumulator_never_zeroed.tsk"
    k = load_program(path).kernels[0]
    (ob,) = value.check(k, CheckOptions())
    assert ob.verdict is Verdict.REFUTED and ob.code == "TS803", ob.message
    assert ob.counterexample["got"] == "NaN"


# ---- generated variants against the interpreter ----------------------------------------------

RING = """kernel k(a: in global bf16[M, K], b: in global bf16[N, K], c: out global f32[M, N])
  where M % 64 == 0, N % 128 == 0, K % 64 == 0, M > 0, N > 0, K > 0, M <= 65536,
    N <= 65536, K <= 65536
  grid (M / 64, N / 128) block 256
  ensures c[i, j] == sum(k in 0 .. K: f32(a[i, k]) * f32(b[j, k]))
{{
  const STAGES = 2
  tensormap ta = tiled(a, box [64, 64], swizzle 128B)
  tensormap tb = tiled(b, box [128, 64], swizzle 128B)
  shared sa: bf16[STAGES, 64, 64] layout swizzle128B(row_major) align 1024
  shared sb: bf16[STAGES, 128, 64] layout swizzle128B(row_major) align 1024
  mbarrier full[STAGES] count 1 guards sa[i], sb[i]
  mbarrier empty[STAGES] count 4 guards sa[i], sb[i]
  fragment acc: f32[64, 128]

  if thread == 0 {{
    init full
    init empty
    fence mbarrier_init
  }}
  sync

  role producer = warps 0 .. 4, elect one {{
    for kt in 0 .. K / 64 {{
      let s = kt % STAGES
      wait empty[s] parity (kt / STAGES + 1) % 2
      arrive full[s], expect_tx bytes(sa[s]) + bytes(sb[s])
      tma_load sa[s] <- ta[block.x * 64, kt * 64] signal full[s]
      tma_load sb[s] <- tb[block.y * 128, kt * 64] signal full[s]
    }}
  }}
  role consumer = warps 4 .. 8 {{
{zero}    for kt in 0 .. K / 64 {{
      let s = kt % STAGES
      wait full[s] parity (kt / STAGES) % 2
      wgmma_fence
      for kk in 0 .. {kk} {{
        wgmma acc += sa[s, 0 : 64, {ak} : 16] @ sb[s, 0 : 128, {bk} : 16].T{scale}
      }}
      wgmma_commit
      wgmma_wait 0
      arrive empty[s], one per warp
    }}
    for r in 0 .. 64 {{
      c[block.x * 64 + row(acc, r), block.y * 128 + {col}] = acc[r]
    }}
  }}
}}
"""
ZERO = "    for r in 0 .. 64 {\n      acc[r] = 0.0\n    }\n"
LAUNCHES = ({"M": 64, "N": 128, "K": 128}, {"M": 128, "N": 256, "K": 192})


@settings(max_examples=14, deadline=None, suppress_health_check=list(HealthCheck))
@given(zero=st.sampled_from(["", ZERO]), kk=st.sampled_from(["4", "3"]),
       ak=st.sampled_from(["kk * 16", "(kk + 1) % 4 * 16"]),
       bk=st.sampled_from(["kk * 16", "(kk + 1) % 4 * 16", "(3 - kk) * 16"]),
       scale=st.sampled_from([", scale_d kt > 0 || kk > 0", ", scale_d kk > 0",
                              ", scale_d kt > 0", ", scale_d kt > 0 || kk > 1", ""]),
       col=st.sampled_from(["col(acc, r)", "(col(acc, r) + 8) % 128"]))
def test_ring_variants_proved_exactly_when_the_interpreter_agrees(zero, kk, ak, bk, scale,
                                                                  col):
    """Every variant is safe; the prover says proved exactly on those the interpreter
    computes right at two launches (several k-tiles, several blocks): sound, and complete
    on this family (a dropped k-step, a reset too many, a missing zero, a misaligned B,
    a permuted epilogue are each caught)."""
    src = RING.format(zero=zero, kk=kk, ak=ak, bk=bk, scale=scale, col=col)
    assert is_proved(src) == agrees(src, LAUNCHES), src


# ---- what the rule needs ---------------------------------------------------------------------

TILE = """kernel k(a: in global {dt}[64, {K}], b: in global {dt}[128, {K}],
           c: out global {acc}[64, 128])
  grid 1 block 128
  ensures c[i, j] == {spec}
{{
  shared sa: {dt}[64, {K}] layout row_major
  shared sb: {dt}[128, {K}] layout row_major
  fragment acc: {acc}[64, 128]
{pre}  for e in 0 .. 64 * {K} / 128 {{
    let x = e * 128 + thread
    sa[x / {K}, x % {K}] = a[x / {K}, x % {K}]
  }}
  for e in 0 .. 128 * {K} / 128 {{
    let x = e * 128 + thread
    sb[x / {K}, x % {K}] = b[x / {K}, x % {K}]
  }}
  fence proxy_async
  sync
  wgmma_fence
  {mma}
  wgmma_commit
  wgmma_wait 0
  for r in 0 .. 64 {{
    c[row(acc, r), col(acc, r)] = {out}
  }}
}}
"""
BF16 = dict(dt="bf16", K="16", acc="f32", pre="", out="acc[r]",
            spec="sum(k in 0 .. 16: f32(a[i, k]) * f32(b[j, k]))")


def tile(**kw: str) -> str:
    return TILE.format(**{**BF16, **kw})


def test_an_overwriting_mma_is_the_whole_sum():
    """`wgmma acc = ...` sets every register to its products (scale-d 0)."""
    src = tile(mma="wgmma acc = sa[0 : 64, 0 : 16] @ sb[0 : 128, 0 : 16].T")
    assert is_proved(src) and agrees(src, [{}])


def test_an_accumulating_mma_after_zeroing_stores():
    """`acc[r] = 0.0` for every register, then `+=`: the stores are the setting writes."""
    pre = "  for r in 0 .. 64 {\n    acc[r] = 0.0\n  }\n"
    src = tile(pre=pre, mma="wgmma acc += sa[0 : 64, 0 : 16] @ sb[0 : 128, 0 : 16].T")
    assert is_proved(src) and agrees(src, [{}])


def test_a_register_read_before_anything_sets_it_is_poison():
    src = tile(mma="wgmma acc += sa[0 : 64, 0 : 16] @ sb[0 : 128, 0 : 16].T")
    assert "poison" in why_not(src)
    assert not agrees(src, [{}])


def test_a_zeroing_store_in_only_some_registers_leaves_poison_in_the_others():
    pre = "  for r in 0 .. 32 {\n    acc[r] = 0.0\n  }\n"
    src = tile(pre=pre, mma="wgmma acc += sa[0 : 64, 0 : 16] @ sb[0 : 128, 0 : 16].T")
    assert "poison" in why_not(src)
    assert not agrees(src, [{}])


def test_an_epilogue_that_scales_the_sum_is_compared_operator_by_operator():
    """acc[r] * 2.0 is proved against `sum(...) * 2.0` (an alpha scaling) and refused
    against the bare sum."""
    mma = "wgmma acc = sa[0 : 64, 0 : 16] @ sb[0 : 128, 0 : 16].T"
    scaled = tile(mma=mma, out="acc[r] * 2.0", spec=BF16["spec"] + " * 2.0")
    assert is_proved(scaled) and agrees(scaled, [{}])
    src = tile(mma=mma, out="acc[r] * 2.0")
    assert not is_proved(src)
    assert not agrees(src, [{}])


def test_tf32_mmas_are_not_handled():
    """tf32 drops the inputs' low significand bits, which no spec operation denotes."""
    src = tile(dt="f32", K="8", mma="wgmma acc = sa[0 : 64, 0 : 8] @ sb[0 : 128, 0 : 8].T",
               spec="sum(k in 0 .. 8: a[i, k] * b[j, k])")
    assert "tf32" in why_not(src)


U8 = dict(dt="u8", K="32", acc="i32", mma="wgmma acc = sa[0 : 64, 0 : 32] @ sb[0 : 128, 0 : 32].T",
          spec="i32(sum(k in 0 .. 32: f32(a[i, k]) * f32(b[j, k])))")


def test_an_integer_mma_matches_an_exact_f32_sum():
    """u8 x u8 -> s32: the spec's f32 sum of 32 products below 2^16 is exact, so it is the
    integer sum the MMA computes."""
    src = tile(**U8)
    assert is_proved(src) and agrees(src, [{}])


def test_an_integer_mma_against_an_f32_sum_that_may_round_is_not_proved():
    """With K up to 512 the spec's f32 sum of u8 products may exceed 2^24 and round; the
    integer MMA does not: the bridge refuses."""
    path = ROOT / "corpus" / "wgmma" / "u8_mma.tsk"
    src = path.read_text().replace("K <= 256", "K <= 512")
    assert "may not be exact" in why_not(src)
    assert is_proved(path.read_text())


def test_a_sum_through_a_staging_tile_keeps_the_writer_coordinates():
    """Regression: the output is read from a shared tile that the fragment's epilogue
    wrote (a Choice); below it, the writer's coordinates must not be pinned to 0 when the
    sum's images are taken (that emptied both images and "proved" any sum)."""
    path = ROOT / "corpus" / "wgmma" / "gemm_tma_epi.tsk"
    good = path.read_text()
    bad = good.replace("sa[s, wg * 64 : 64, kk * 16 : 16]", "sa[s, 0 : 64, kk * 16 : 16]")
    assert bad != good
    assert is_proved(good)
    assert "does not" in why_not(bad)


def test_subtract_one_piece_at_a_time_is_the_set_difference():
    ctx = isl.Context()
    a = isl.Set.read_from_str(ctx, "[n] -> { [x, y] : 0 <= x < n and 0 <= y < 64 }")
    b = isl.Set.read_from_str(ctx, "[n] -> { [x, y] : exists (e : x = 4e + y % 8) or "
                                   "(y = 2x and x > 3) or x = n - 1 }")
    assert subtract(a, b).is_equal(a.subtract(b))
    assert subtract(a, a).is_empty()
