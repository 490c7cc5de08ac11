"""Reference interpreter: exact scalar semantics, memory, mbarriers, TMA, errors, replay."""

from __future__ import annotations

import struct

import numpy as np
import pytest

from tilesafe.frontend import ir
from tilesafe.frontend.load import compile_source
from tilesafe.semantics.expr import fp
from tilesafe.semantics.interpreter.interp import (
    InterpError,
    check_where,
    random_inputs,
    run_kernel,
    summarize,
)


def kernel_of(src: str) -> ir.Kernel:
    return compile_source(src, "<test>").kernels[0]


# ---- exact scalar rules ---------------------------------------------------------------------


def _f16_bits_reference(x: np.float32) -> int:
    """f32 -> f16 via Python's correctly rounded struct 'e' packing (the value is exact in
    binary64, so this is a single rounding)."""
    if np.isnan(x):
        return 0x7FFF
    try:
        return struct.unpack("<H", struct.pack("<e", float(x)))[0]
    except OverflowError:
        return 0xFC00 if x < 0 else 0x7C00


def test_f16_rounding_matches_single_rounding_reference() -> None:
    rng = np.random.default_rng(7)
    bits = rng.integers(0, 2**32, size=4000, dtype=np.uint64).astype(np.uint32)
    # Bias towards the f16 range, including subnormals and ties.
    near = (rng.integers(0x33000000, 0x47800000, size=4000, dtype=np.uint64)).astype(np.uint32)
    ties = np.array([0x3F801000, 0x3F803000, 0x477FF000, 0x477FEFFF, 0x33000000, 0x33000001],
                    dtype=np.uint32)
    for b in np.concatenate([bits, near, ties]):
        x = np.asarray(b, dtype=np.uint32).view(np.float32)[()]
        assert fp.f32_to_f16_bits(x) == _f16_bits_reference(x), hex(int(b))


def test_bf16_hand_checked_cases() -> None:
    one = np.float32(1.0)
    assert fp.f32_to_bf16_bits(one) == 0x3F80
    # 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties to even -> 1.0
    assert fp.f32_to_bf16_bits(np.float32(1 + 2**-8)) == 0x3F80
    # 1 + 3*2^-8 is halfway between 1 + 2^-7 (odd) and 1 + 2^-6 (even) -> 1 + 2^-6
    assert fp.f32_to_bf16_bits(np.float32(1 + 3 * 2**-8)) == 0x3F82
    # just above the tie rounds up
    assert fp.f32_to_bf16_bits(np.float32(1 + 2**-8 + 2**-20)) == 0x3F81
    assert fp.f32_to_bf16_bits(np.float32(-1 - 2**-8 - 2**-20)) == 0xBF81
    # the largest finite f32 overflows to +inf; NaN becomes the canonical NaN
    assert fp.f32_to_bf16_bits(np.float32(3.4028235e38)) == 0x7F80
    assert fp.f32_to_bf16_bits(np.float32(np.nan)) == 0x7FFF
    assert fp.bf16_bits_to_f32(0x3F82) == np.float32(1.015625)
    arr = np.array([1 + 2**-8, 1 + 3 * 2**-8, np.nan], dtype=np.float32)
    assert fp.f32_array_to_bf16(arr).tolist() == [0x3F80, 0x3F82, 0x7FFF]


def test_int_to_f32_rounds_once_to_nearest_even() -> None:
    assert fp.int_to_f32(2**24 + 1) == np.float32(2**24)  # tie -> even
    assert fp.int_to_f32(2**24 + 3) == np.float32(2**24 + 4)  # tie -> even (up)
    assert fp.int_to_f32(-(2**24 + 3)) == np.float32(-(2**24 + 4))
    # 2^60 + 2^36 + 1: above the tie at 2^36 of a 2^37 ulp, so it rounds up. Going through
    # binary64 first would round to 2^60 + 2^36 (a tie) and then to 2^60: double rounding.
    assert fp.int_to_f32(2**60 + 2**36 + 1) == np.float32(2**60 + 2**37)
    assert np.isinf(fp.int_to_f32(2**128))
    assert fp.f32_to_i32(np.float32(-2.5)) == -2
    assert fp.f32_to_i32(np.float32(np.nan)) == 0
    assert fp.f32_to_i32(np.float32(3e9)) == 2**31 - 1
    assert fp.wrap_i32(2**31) == -(2**31) and fp.wrap_u8(-1) == 255


# ---- generic execution -------------------------------------------------------------------------

ELEMENTWISE = """
kernel axpy(a: global f32[N], b: global f32[N], out: global f32[N])
  where N % 64 == 0, N > 0
  grid (N / 64) block 64
{
  let i = block.x * 64 + thread
  out[i] = a[i] * b[i] + 1.5
}
"""


def test_elementwise_is_exact_f32() -> None:
    k = kernel_of(ELEMENTWISE)
    rng = np.random.default_rng(1)
    inputs = {"a": rng.standard_normal(128).astype(np.float32),
              "b": rng.standard_normal(128).astype(np.float32),
              "out": np.full(128, np.nan, np.float32)}
    r = run_kernel(k, {"N": 128}, inputs)
    want = inputs["a"] * inputs["b"] + np.float32(1.5)  # float32 ops, one rounding each
    assert r.tensors["out"].tobytes() == want.tobytes()
    assert np.isnan(inputs["out"]).all()  # inputs are copied, not modified
    assert summarize(r)["out"]["nan"] == 0


LOOPS = """
kernel rowsum(a: global f32[R, C], out: global f16[R], big: global f32[R])
  where R == 32, C == 8
  grid 1 block 32
{
  var acc: f32 = 0.0
  for k in 0 .. C {
    let w = a[thread, k]
    acc += w * 0.1
  }
  var n: i32 = 0
  for k in 0 .. 10 step 3 { n += k }
  if acc > 0.0 {
    out[thread] = acc
  } else {
    out[thread] = -acc * 2.0
  }
  big[thread] = f32(16777216 + n - 17) + 0.25
}
"""


def test_loops_vars_if_else() -> None:
    k = kernel_of(LOOPS)
    rng = np.random.default_rng(2)
    a = rng.standard_normal((32, 8)).astype(np.float32)
    r = run_kernel(k, {"R": 32, "C": 8}, {"a": a, "out": np.zeros(32, np.float16),
                                          "big": np.zeros(32, np.float32)})
    for row in range(32):
        acc = np.float32(0.0)
        for kk in range(8):
            acc = acc + a[row, kk] * np.float32(0.1)
        want = acc if acc > 0 else -acc * np.float32(2.0)
        assert r.tensors["out"][row] == np.float16(want)
    # n = 0+3+6+9 = 18; 16777216 + 1 = 2^24 + 1 rounds to 2^24 in f32; + 0.25 is lost too
    assert (r.tensors["big"] == np.float32(16777216)).all()


INTS = """
kernel ints(x: global i32[N], q: global i32[N], m: global i32[N], t: global i32[N],
            w: global u8[N], h: global i32[N])
  where N == 32
  grid 1 block 32
{
  let v = x[thread]
  q[thread] = v / 3
  m[thread] = v % 3
  t[thread] = i32(f32(v) / 2.0)
  w[thread] = v
  h[thread] = (thread - 16) / 5 + v * 1000000000
}
"""


def test_integer_floor_division_truncation_and_wrap() -> None:
    k = kernel_of(INTS)
    x = np.arange(-16, 16, dtype=np.int32) * 7
    inputs = {"x": x, **{n: np.zeros(32, np.int32) for n in "qmth"},
              "w": np.zeros(32, np.uint8)}
    r = run_kernel(k, {"N": 32}, inputs)
    xs = [int(v) for v in x]
    assert r.tensors["q"].tolist() == [v // 3 for v in xs]  # floor: -7 / 3 == -3
    assert r.tensors["m"].tolist() == [v % 3 for v in xs]  # floor mod: -7 % 3 == 2
    assert r.tensors["q"][15] == -3 and r.tensors["m"][15] == 2
    assert r.tensors["t"].tolist() == [int(v / 2) for v in xs]  # toward zero: -3.5 -> -3
    assert r.tensors["w"].tolist() == [v % 256 for v in xs]
    assert r.tensors["h"].tolist() == [fp.wrap_i32((i - 16) // 5 + v * 10**9)
                                       for i, v in enumerate(xs)]


CONVERT = """
kernel convert(x: global f32[N], h: global f16[N], b: global bf16[N])
  where N == 64
  grid 1 block 64
{
  h[thread] = x[thread] * 1.0
  b[thread] = x[thread]
}
"""


def test_f16_bf16_stores_round_to_nearest_even() -> None:
    k = kernel_of(CONVERT)
    vals = np.array([1 + 2**-8, 1 + 3 * 2**-8, 1 + 2**-8 + 2**-20, 1 + 2**-11, 1 + 3 * 2**-11,
                     65504.0, 65520.0, 2**-25, 2**-24 * 1.5, -0.0, np.inf, np.nan]
                    + list(np.linspace(-3, 3, 52)), dtype=np.float32)
    inputs = {"x": vals, "h": np.zeros(64, np.float16), "b": np.zeros(64, np.uint16)}
    r = run_kernel(k, {"N": 64}, inputs)
    want_h = np.array([_f16_bits_reference(v) for v in vals], dtype=np.uint16)
    assert r.tensors["h"].view(np.uint16).tolist() == want_h.tolist()
    assert r.tensors["b"][:3].tolist() == [0x3F80, 0x3F82, 0x3F81]
    assert r.tensors["b"][11] == 0x7FFF  # NaN -> canonical NaN
    assert r.tensors["h"][6] == np.inf  # 65520 rounds (tie to even) up to inf in f16
    assert summarize(r)["b"]["nan"] == 1


def test_global_out_of_bounds_is_ts201() -> None:
    src = ELEMENTWISE.replace("out[i] = a[i] * b[i] + 1.5", "out[i] = a[i + 1]")
    k = kernel_of(src)
    inputs = random_inputs(k, {"N": 64}, 0)
    with pytest.raises(InterpError) as info:
        run_kernel(k, {"N": 64}, inputs)
    err = info.value
    assert err.code == "TS201"
    assert err.detail["tensor"] == "a" and err.detail["index"] == [64]
    assert err.detail["thread"] == 63 and err.detail["block"] == (0,)
    assert "a[64]" in err.message and "[64]" in err.message and err.span.line == 7


def test_where_clause_and_random_inputs() -> None:
    k = kernel_of(ELEMENTWISE)
    assert check_where(k, {"N": 256}) == (4,)
    with pytest.raises(InterpError) as info:
        check_where(k, {"N": 100})
    assert info.value.code == "TS200" and "N=100" in info.value.message
    with pytest.raises(InterpError):
        check_where(k, {})
    ins = random_inputs(k, {"N": 64}, np.random.default_rng(0))
    assert ins["a"].dtype == np.float32 and ins["a"].shape == (64,)
    assert np.isnan(ins["out"]).all() and not np.isnan(ins["a"]).any()
    assert np.all(ins["a"] * 4 == np.round(ins["a"] * 4)) and np.abs(ins["a"]).max() <= 2


# ---- TMA, mbarriers ------------------------------------------------------------------------

TMA_COPY = """
kernel tile_copy(src: global f16[64, 64], dst: global f16[64, 64])
  grid 1 block 64
{
  tensormap tin = tiled(src, box [64, 64], swizzle 128B)
  shared s: f16[64, 64] layout LAYOUT align 1024
  mbarrier bar count 1
  if thread == 0 { init bar; fence mbarrier_init }
  sync
  if thread == 0 {
    arrive bar, expect_tx bytes(s)
    tma_load s <- tin[0, 0] signal bar
  }
  wait bar parity 0
  for e in 0 .. 64 {
    dst[e, thread] = s[e, thread]
  }
}
"""


def _tile_inputs() -> dict[str, np.ndarray]:
    return {"src": np.arange(64 * 64, dtype=np.float16).reshape(64, 64) / np.float16(8),
            "dst": np.full((64, 64), np.nan, np.float16)}


def test_tma_copy_with_matching_swizzle_layout_is_identity() -> None:
    k = kernel_of(TMA_COPY.replace("LAYOUT", "swizzle128B(row_major)"))
    ins = _tile_inputs()
    r = run_kernel(k, {}, ins, seed=3)
    assert np.array_equal(r.tensors["dst"], ins["src"])


def test_tma_copy_read_through_wrong_layout_gives_wrong_data() -> None:
    k = kernel_of(TMA_COPY.replace("LAYOUT", "row_major"))
    ins = _tile_inputs()
    r = run_kernel(k, {}, ins, seed=3)
    got, want = r.tensors["dst"], ins["src"]
    assert not np.array_equal(got, want)
    assert np.array_equal(got[0], want[0])  # row 0 is not swizzled (XOR with line 0)
    assert np.array_equal(np.sort(got.ravel()), np.sort(want.ravel()))  # same data, permuted


def test_tma_out_of_bounds_box_is_filled() -> None:
    src = TMA_COPY.replace("LAYOUT", "swizzle128B(row_major)").replace(
        "f16[64, 64], dst", "f16[40, 64], dst").replace("tin[0, 0]", "tin[8, 0]")
    k = kernel_of(src)
    ins = {"src": np.ones((40, 64), np.float16), "dst": np.full((64, 64), 7, np.float16)}
    r = run_kernel(k, {}, ins)
    assert (r.tensors["dst"][:32] == 1).all() and (r.tensors["dst"][32:] == 0).all()
    nan = run_kernel(kernel_of(src.replace("swizzle 128B)", "swizzle 128B, oob nan)")), {}, ins)
    assert np.isnan(nan.tensors["dst"][32:]).all() and (nan.tensors["dst"][:32] == 1).all()


# The DESIGN.md example: a two-stage TMA pipeline (warp 0 produces, warps 1..4 consume).
PIPELINE = """
// Two-stage TMA pipeline
kernel pipelined_copy(src: global f16[M, N], dst: global f16[M, N])
  where M % 64 == 0, N % 64 == 0, M > 0, N > 0
  grid (M / 64) block 160
{
  const STAGES = 2
  tensormap tin = tiled(src, box [64, 64], swizzle 128B)
  shared buf: f16[STAGES, 64, 64] layout swizzle128B(row_major) align 1024
  shared c: f16[64, 64] layout ((8,8),64):((64,512),1)
  mbarrier full[STAGES] count 1 guards buf[i]
  mbarrier empty[STAGES] count 4 guards buf[i]

  if thread == 0 { init full; init empty; fence mbarrier_init }
  sync

  role producer = warp 0, elect one {
    for k in 0 .. N / 64 {
      let s = k % STAGES
      wait empty[s] parity (k / STAGES + 1) % 2
      arrive full[s], expect_tx bytes(buf[s])
      tma_load buf[s] <- tin[block.x * 64, k * 64] signal full[s]
    }
  }
  role consumer = warps 1 .. 5 {
    for k in 0..N / 64 {
      let s = k % STAGES
      wait full[s] parity (k / STAGES) % 2
      for e in 0 .. 32 {
        let idx = e * 128 + (thread - 32)
        dst[block.x * 64 + idx / 64, k * 64 + idx % 64] = buf[s, idx / 64, idx % 64]
      }
      arrive empty[s], one per warp
    }
  }
}
"""


def _pipeline(replace: tuple[str, str] | None = None) -> ir.Kernel:
    text = PIPELINE
    if replace is not None:
        assert replace[0] in text
        text = text.replace(*replace)
    return compile_source(text, "pipeline.tsk").kernels[0]


def test_design_pipeline_same_result_under_every_seed() -> None:
    k = _pipeline()
    for sizes in ({"M": 64, "N": 192}, {"M": 128, "N": 128}):
        ins = random_inputs(k, sizes, 5)
        schedules = set()
        for seed in (0, 1, 2):
            r = run_kernel(k, sizes, ins, seed=seed)
            assert np.array_equal(r.tensors["dst"], ins["src"])
            schedules.add(r.schedule)
        assert len(schedules) == 3


def test_replay_reproduces_the_exact_trace() -> None:
    k = _pipeline()
    sizes = {"M": 64, "N": 128}
    ins = random_inputs(k, sizes, 1)
    a = run_kernel(k, sizes, ins, seed=11, record_trace=True)
    b = run_kernel(k, sizes, ins, seed=99, schedule=a.schedule, record_trace=True)
    assert a.trace == b.trace and a.schedule == b.schedule and a.trace
    assert any(ev.kind == "tma_load.land" for ev in a.trace)
    assert any(ev.kind == "Wait.pass" for ev in a.trace)
    c = run_kernel(k, sizes, ins, seed=12, record_trace=True)
    assert c.trace != a.trace


EARLY = """
kernel early(src: global f32[8, 32], dst: global f32[8, 32]) grid 1 block 64 {
  tensormap tin = tiled(src, box [8, 32])
  shared s: f32[8, 32]
  mbarrier full count 1
  if thread == 0 { init full; fence mbarrier_init }
  sync
  role producer = warp 0, elect one {
    arrive full, expect_tx bytes(s)
    tma_load s <- tin[0, 0] signal full
  }
  role consumer = warp 1, elect one {
    wait full parity PARITY
    for r in 0 .. 8 { for c in 0 .. 32 { dst[r, c] = s[r, c] } }
  }
}
"""


def test_wrong_parity_lets_a_consumer_read_before_data_lands() -> None:
    ins = {"src": np.arange(256, dtype=np.float32).reshape(8, 32),
           "dst": np.zeros((8, 32), np.float32)}
    good = kernel_of(EARLY.replace("PARITY", "0"))
    for seed in range(6):
        assert np.array_equal(run_kernel(good, {}, ins, seed=seed).tensors["dst"], ins["src"])
    bad = kernel_of(EARLY.replace("PARITY", "1"))
    outcomes = []
    for seed in range(6):
        try:
            r = run_kernel(bad, {}, ins, seed=seed)
            outcomes.append("ok" if np.array_equal(r.tensors["dst"], ins["src"]) else "wrong")
        except InterpError as err:  # the phase completed first: parity 1 now never passes
            assert err.code == "TS410" and "consumer thread 32 wait full parity 1" in err.message
            outcomes.append("deadlock")
    assert "wrong" in outcomes, outcomes


def test_producer_waiting_on_full_deadlocks() -> None:
    k = _pipeline(("wait empty[s] parity (k / STAGES + 1) % 2", "wait full[s] parity 0"))
    sizes = {"M": 64, "N": 128}
    with pytest.raises(InterpError) as info:
        run_kernel(k, sizes, random_inputs(k, sizes, 0))
    err = info.value
    assert err.code == "TS410"
    assert "producer thread 0 wait full[0] parity 0" in err.message
    assert "consumer threads 32-159 wait full[0] parity 0" in err.message
    assert "pending 1/1, tx 0" in err.message
    assert err.detail["barriers"]["empty[0]"].startswith("empty[0]: phase 0")
    # the schedule up to the deadlock replays to the same deadlock
    with pytest.raises(InterpError) as again:
        run_kernel(k, sizes, random_inputs(k, sizes, 0), seed=5, schedule=err.schedule)
    assert again.value.code == "TS410" and again.value.schedule == err.schedule


def test_reinit_is_ts402_and_missing_fence_is_ts405() -> None:
    k = _pipeline(("init full; init empty;", "init full; init empty; init full;"))
    sizes = {"M": 64, "N": 64}
    with pytest.raises(InterpError) as info:
        run_kernel(k, sizes, random_inputs(k, sizes, 0))
    assert info.value.code == "TS402" and "full[0]" in info.value.message
    k = _pipeline(("fence mbarrier_init", ""))
    with pytest.raises(InterpError) as info:
        run_kernel(k, sizes, random_inputs(k, sizes, 0))
    assert info.value.code == "TS405"


def test_uninitialised_wait_and_over_arrival() -> None:
    k = _pipeline(("if thread == 0 { init full; init empty; fence mbarrier_init }", ""))
    sizes = {"M": 64, "N": 64}
    with pytest.raises(InterpError) as info:
        run_kernel(k, sizes, random_inputs(k, sizes, 0))
    assert info.value.code == "TS401"
    over = """
    kernel over(x: global f32[1]) grid 1 block 2 {
      mbarrier b count 1
      if thread == 0 { init b }
      sync
      if thread == 0 { arrive b, expect_tx 16 }
      sync
      if thread == 1 { arrive b }
    }
    """
    with pytest.raises(InterpError) as info:
        run_kernel(kernel_of(over), {}, {"x": np.zeros(1, np.float32)})
    assert info.value.code == "TS403" and info.value.detail["thread"] == 1


def test_sync_inside_a_role_deadlocks_at_sync() -> None:
    src = """
    kernel s(x: global f32[64]) grid 1 block 64 {
      role a = warp 0 { sync }
      role b = warp 1 { x[thread] = 1.0 }
    }
    """
    with pytest.raises(InterpError) as info:
        run_kernel(kernel_of(src), {}, {"x": np.zeros(64, np.float32)})
    assert info.value.code == "TS420"
    assert "a threads 0-31 wait at sync" in info.value.message
    assert "threads 32-63 finished" in info.value.message


TMA_STORE = """
kernel tile_store(dst: global f32[16, 32])
  grid 1 block 32
{
  tensormap tout = tiled(dst, box [16, 32])
  shared c: f32[16, 32]
  for r in 0 .. 16 { c[r, thread] = f32(r * 32 + thread) }
  FENCE
  sync
  if thread == 0 {
    tma_store tout[0, 0] <- c
    commit_group
    wait_group 0 read
  }
}
"""


def test_tma_store_needs_fence_proxy_async() -> None:
    good = kernel_of(TMA_STORE.replace("FENCE", "fence proxy_async"))
    ins = {"dst": np.full((16, 32), np.nan, np.float32)}
    for seed in range(3):
        r = run_kernel(good, {}, ins, seed=seed)
        assert np.array_equal(r.tensors["dst"], np.arange(512, dtype=np.float32).reshape(16, 32))
    bad = kernel_of(TMA_STORE.replace("FENCE", ""))
    with pytest.raises(InterpError) as info:
        run_kernel(bad, {}, ins)
    assert info.value.code == "TS301"
    late = kernel_of(TMA_STORE.replace("FENCE\n  sync", "sync\n  fence proxy_async"))
    with pytest.raises(InterpError) as info:  # a fence after the sync does not count
        run_kernel(late, {}, ins)
    assert info.value.code == "TS301"


def test_tx_range_shared_oob_and_bad_replay() -> None:
    tx = """
    kernel tx(x: global f32[1]) grid 1 block 1 {
      mbarrier b count 1
      init b
      expect_tx b, 1048576
    }
    """
    with pytest.raises(InterpError) as info:
        run_kernel(kernel_of(tx), {}, {"x": np.zeros(1, np.float32)})
    assert info.value.code == "TS404"
    oob = """
    kernel oob(x: global f32[32]) grid 1 block 32 {
      shared s: f32[32]
      s[thread] = 1.0
      sync
      x[thread] = s[(thread + 1) % 33]
    }
    """
    with pytest.raises(InterpError) as info:
        run_kernel(kernel_of(oob), {}, {"x": np.zeros(32, np.float32)})
    assert info.value.code == "TS202" and info.value.detail["index"] == [32]
    k = kernel_of(ELEMENTWISE)
    with pytest.raises(InterpError) as info:
        run_kernel(k, {"N": 64}, random_inputs(k, {"N": 64}, 0), schedule=[64])
    assert info.value.code == "TS498"


def test_in_place_update_reads_global_written_by_the_kernel() -> None:
    src = """
    kernel inc(x: global bf16[N]) where N == 64 grid 1 block 64 {
      x[thread] = x[thread] + 1.0
      sync
      if thread == 0 { x[0] = x[63] * 3.0 }
    }
    """
    k = kernel_of(src)
    ins = random_inputs(k, {"N": 64}, 3)
    assert ins["x"].dtype == np.uint16
    r = run_kernel(k, {"N": 64}, ins)
    vals = fp.bf16_array_to_f32(ins["x"]) + np.float32(1.0)
    want = fp.f32_array_to_bf16(vals)
    want[0] = fp.f32_to_bf16_bits(fp.bf16_bits_to_f32(int(want[63])) * np.float32(3.0))
    assert r.tensors["x"].tolist() == want.tolist()
