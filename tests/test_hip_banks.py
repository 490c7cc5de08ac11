"""LDS bank conflicts as a proof under `--target gfx942` (issue 25, item 3): the CDNA3 model
of semantics/hw/bank_model.py in the banks checker -- 64-lane wavefronts, proved with the
documented merges only (and for 1-/2-byte accesses the worse of one 64-lane phase and two
32-lane phases), refuted only with every dword merge, unknown (TS690) in between -- and
the verdicts that differ from sm_90a's on the same source."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from tilesafe.checkers.banks import check_kernel
from tilesafe.checkers.obligation import Verdict
from tilesafe.frontend.load import compile_source
from tilesafe.semantics.hw import bank_model, banks


def verdicts(src: str, target: str | None) -> list[tuple[Verdict, str | None, str]]:
    kernel = compile_source(src, target=target).kernels[0]
    return [(o.verdict, o.code, o.message) for o in check_kernel(kernel, suggest=False)]


F16_PAIRS = """
kernel k(x: in global f16[N], y: out global f16[N])
  where N % 64 == 0, N > 0, N <= 1048576
  grid (N / 64) block 64
{
  shared h: f16[128]
  h[thread * 2] = x[block.x * 64 + thread]
  sync
  y[block.x * 64 + thread] = h[thread * 2]
}
"""

# The pitch is 33 words for the first 32 rows only: rows 32..63 (lanes a 32-lane warp never
# has) are 32 words apart, all in one bank.
PAST_32 = """
kernel k(x: in global f32[N], y: out global f32[N])
  where N % 64 == 0, N > 0, N <= 1048576
  grid (N / 64) block 64
{
  shared s: f32[2112]
  role w = warp 0 {
    s[lane * 33 - max(lane - 32, 0)] = x[block.x * 64 + lane]
  }
  sync
  y[block.x * 64 + thread] = x[block.x * 64 + thread]
}
"""

STRIDE1 = """
kernel k(x: in global f32[M, N], y: out global f32[M, N])
  where N % 256 == 0, M > 0, N > 0, M <= 4096, N <= 4096
  grid (M, N / 256) block 256
{
  shared s: f32[256]
  s[thread] = x[block.x, block.y * 256 + thread]
  sync
  y[block.x, block.y * 256 + thread] = s[255 - thread]
}
"""


def test_f16_lanes_32_apart_are_undecided_on_amd_only():
    nv = verdicts(F16_PAIRS, None)
    amd = verdicts(F16_PAIRS, "gfx942")
    assert [v for v, _, _ in nv] == [Verdict.PROVED, Verdict.PROVED]
    assert {(v, c) for v, c, _ in amd} == {(Verdict.UNKNOWN, "TS690")}
    assert all("does not document" in m for _, _, m in amd)


def test_a_conflict_only_64_lane_wavefronts_reach_is_refuted():
    nv = verdicts(PAST_32, None)
    amd = verdicts(PAST_32, "gfx942")
    assert [(v, c) for v, c, _ in nv] == [(Verdict.PROVED, None)]
    assert [(v, c) for v, c, _ in amd] == [(Verdict.REFUTED, "TS601")]
    assert "32-way bank conflict: wavefront 0 (threads 0..63)" in amd[0][2]


def test_stride_one_is_proved_for_every_size_on_both():
    for target in (None, "gfx942"):
        got = verdicts(STRIDE1, target)
        assert [v for v, _, _ in got] == [Verdict.PROVED, Verdict.PROVED]
    kernel = compile_source(STRIDE1, target="gfx942").kernels[0]
    ob = check_kernel(kernel, suggest=False)[0]
    assert ob.evidence["target"] == "gfx942" and "CDNA3" in str(ob.evidence["model"])
    assert "amd_lds" not in ob.evidence  # the estimate is for NVIDIA kernels only


lane_addr = st.one_of(st.none(), st.integers(0, 4095))


@settings(max_examples=300, deadline=None)
@given(st.lists(lane_addr, min_size=64, max_size=64), st.sampled_from([1, 2, 4]),
       st.sampled_from(["read", "write"]))
def test_cdna3_bounds_bracket_each_other(addrs, width, op):
    """The refutation count never exceeds the proof count, so a refuted access is never
    one the proof count calls conflict-free; NVIDIA's two counts are one."""
    a = tuple(None if x is None else x - x % width for x in addrs)
    m = bank_model.CDNA3
    assert m.cost_merged(a, width, op).max_way <= m.cost(a, width, op).max_way
    n = bank_model.NVIDIA
    assert n.cost(a[:32], width, op) == n.cost_merged(a[:32], width, op)


def test_narrow_accesses_count_the_single_phase():
    """Lanes l and l + 32 reading different words of one bank: no conflict in two 32-lane
    phases, a 2-way one if the 64 lanes of a 2-byte access are served in one phase."""
    a = tuple(4 * lane for lane in range(64))
    assert banks.wavefronts_amd_lds(a, 2, "read").max_way == 1
    assert bank_model.CDNA3.cost(a, 2, "read").max_way == 2
    assert bank_model.CDNA3.cost_merged(a, 2, "read").max_way == 1
    assert bank_model.CDNA3.cost(a, 4, "read").max_way == 1


PARTIAL_WAVE = """
kernel k(x: in global f32[N], y: out global f32[N])
  where N % 32 == 0, N > 0, N <= 1048576
  grid (N / 32) block 32
{
  shared s: f32[64]
  s[thread * 2 - min(thread, block.x % 32)] = x[block.x * 32 + thread]
  sync
  y[block.x * 32 + thread] = x[block.x * 32 + thread]
}
"""


def test_translation_invariance_is_asked_of_partial_wavefronts():
    """A 32-thread block is half a gfx942 wavefront: the invariance query must still range
    over its lanes (asking for whole wavefronts made it vacuous, i.e. 'invariant'). Here the
    lane offsets depend on the block, so it is not invariant."""
    from tilesafe.frontend import ir
    from tilesafe.semantics.hw.bank_param import invariant
    from tilesafe.semantics.interpreter.smem import plan_shared

    kernel = compile_source(PARTIAL_WAVE, target="gfx942").kernels[0]
    store = next(s for s in kernel.body if isinstance(s, ir.Store))
    place = plan_shared(kernel.shared).placements["s"]
    ok, why = invariant(kernel, store.indices, (), None, {}, place, 10_000, lanes=64)
    assert not ok and "depend" in why
