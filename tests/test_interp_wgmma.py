"""The reference interpreter's tensor cores (semantics/interpreter/interp_mma.py, interp_tensor.py):
fragments, warpgroup-collective asynchronous MMAs performed by the copy engine, wgmma
groups, and their errors.

Outputs are compared with numpy: small-integer inputs make every float partial sum exact,
so float64 products must agree bit for bit; where the order of additions matters (inputs
that round), the reference is semantics/hw/mma.py's documented order, chained over the k steps.
Schedules: seeded random and PCT runs of a correct kernel all give the reference; each
racy variant gives another output (or its error) under some schedule, and the two
deterministic test schedulers below pin the outcome down."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tilesafe.frontend import ir
from tilesafe.frontend.load import compile_source, load_program
from tilesafe.semantics.expr import fp
from tilesafe.semantics.hw import mma
from tilesafe.semantics.interpreter.interp import InterpError, random_inputs, run_kernel
from tilesafe.semantics.interpreter.interp_io import I32_SENTINEL, as_float


def kernel_of(src: str) -> ir.Kernel:
    return compile_source(src, "<test>").kernels[0]


class Lazy:
    """Threads first (the lowest that can move); the copy engine only when no thread can --
    an MMA performs as late as the kernel lets it. `loads_first`: among copies, TMA loads
    before MMAs (a refill overtakes the MMA still reading the stage)."""

    def __init__(self, loads_first: bool = False) -> None:
        self.loads_first = loads_first

    def start(self, blk: Any) -> None:
        pass

    def choose(self, blk: Any, ready: list[int], passable: list[int]) -> int:
        movable = ready + passable
        if movable:
            return min(movable)
        kinds = [c.kind for c in blk.copies]
        if self.loads_first and "load" in kinds:
            return blk.nthreads + kinds.index("load")
        return blk.nthreads


class Eager:
    """The copy engine first (oldest operation): an MMA performs as soon as it is issued."""

    def start(self, blk: Any) -> None:
        pass

    def choose(self, blk: Any, ready: list[int], passable: list[int]) -> int:
        return blk.nthreads if blk.copies else min(ready + passable)


class NewestCopy(Eager):
    """Copies first, the newest one; records that no warpgroup ever has two MMAs
    eligible at once (they accumulate into the same registers: issue order)."""

    def __init__(self) -> None:
        self.max_per_warpgroup = 0

    def choose(self, blk: Any, ready: list[int], passable: list[int]) -> int:
        wgs = [c.wg for c in blk.copies if c.kind == "mma"]
        if wgs:
            self.max_per_warpgroup = max(self.max_per_warpgroup,
                                         max(wgs.count(w) for w in set(wgs)))
        return blk.nthreads + len(blk.copies) - 1 if blk.copies else min(ready + passable)


def values(k: ir.Kernel, inputs: dict[str, np.ndarray], name: str) -> np.ndarray:
    return as_float(inputs[name], k.tensor(name).dtype)


def swizzled(cols: int, eb: int) -> str:
    """A layout for a [*, cols] operand buffer: the swizzle matching its row bytes (the
    interpreter reads through any layout; these are the ones a descriptor exists for)."""
    return {128: "swizzle128B(row_major)", 64: "swizzle64B(row_major)",
            32: "swizzle32B(row_major)"}.get(cols * eb, "row_major")


# ---- the single-warpgroup tile MMA (docs/language.md, section 12) and its variants -------

TILE = """kernel tile_mma(a: in global {dt}[64, 64], b: in global {dt}[{bshape}],{params}
                c: out global {acc}[64, {n}])
  grid 1 block 128
{{
  shared sa: {dt}[64, 64] layout {alay} align 1024
  shared sb: {dt}[{bshape}] layout {blay} align 1024
  fragment acc: {acc}[64, {n}]
  for i in 0 .. 32 {{
    let e = i * 128 + thread
    sa[e / 64, e % 64] = a[e / 64, e % 64]
  }}
  for i in 0 .. {biters} {{
    let e = i * 128 + thread
    sb[e / {bcols}, e % {bcols}] = b[e / {bcols}, e % {bcols}]
  }}
{preload}  fence proxy_async
  sync
  wgmma_fence
  for kk in 0 .. {ksteps} {{
    wgmma acc {op} sa[0 : 64, kk * {k} : {k}] @ {btile}{scale}
  }}
  wgmma_commit
  {wait}wgmma_wait 0
{epilogue}}}
"""
EPILOGUE = """  for r in 0 .. {regs} {{
    c[row(acc, r), col(acc, r)] = acc[r]
  }}
"""

K_STEP = {"bf16": 16, "f16": 16, "u8": 32, "f32": 8}


def tile_kernel(dt: str = "bf16", n: int = 128, mn_major: bool = False, op: str = "+=",
                scale: str = ", scale_d kk > 0", preload: bool = False, flag: bool = False,
                **edits: str) -> ir.Kernel:
    """The section-12 kernel for one input type, N, B's major-ness and update: `op` "="
    overwrites at every k step, "+=" accumulates (`scale` the scale_d clause); `preload`
    fills the accumulator from `cin` first; `flag` adds an input `flag: i32[1]`."""
    eb = ir.DType(dt).nbytes
    k = K_STEP[dt]
    acc = "i32" if dt == "u8" else "f32"
    bshape, bcols = ((f"64, {n}", n) if mn_major else (f"{n}, 64", 64))
    btile = f"sb[kk * {k} : {k}, 0 : {n}]" if mn_major else f"sb[0 : {n}, kk * {k} : {k}].T"
    params = ""
    if preload:
        params += f"\n                cin: in global {acc}[64, {n}],"
    if flag:
        params += "\n                flag: in global i32[1],"
    fields = dict(dt=dt, n=n, acc=acc, bshape=bshape, bcols=bcols, biters=64 * n // 128,
                  alay=swizzled(64, eb), blay=swizzled(bcols, eb), ksteps=64 // k, k=k,
                  op=op, btile=btile, scale=scale if op == "+=" else "", regs=n // 2,
                  params=params, wait="", epilogue=EPILOGUE.format(regs=n // 2),
                  preload=(f"  for r in 0 .. {n // 2} {{\n    acc[r] = cin[row(acc, r), "
                           "col(acc, r)]\n  }\n") if preload else "")
    return kernel_of(TILE.format(**{**fields, **edits}))


def reference(k: ir.Kernel, inputs: dict[str, np.ndarray], mn_major: bool, op: str,
              preload: bool, accumulate_first: bool) -> np.ndarray:
    """The exact product (float64 or int64) of the kernel's update, for small inputs."""
    a, b = values(k, inputs, "a"), values(k, inputs, "b")
    b = b if mn_major else b.T  # [64(K), N]
    kstep = K_STEP[k.tensor("a").dtype.value]
    if op == "=":
        a, b = a[:, -kstep:], b[-kstep:, :]  # every step overwrites: the last one stays
    c = a @ b
    if preload and accumulate_first:
        c = c + values(k, inputs, "cin")
    return c


CASES = [  # (dtype, N, B MN-major, op)
    ("bf16", 128, False, "+="),  # docs/language.md section 12 as written
    ("bf16", 64, False, "+="),
    ("bf16", 256, False, "+="),
    ("f16", 128, False, "+="),
    ("f16", 64, True, "+="),  # B stored [K, N]: MN-major, no .T
    ("bf16", 128, True, "+="),
    ("bf16", 64, False, "="),
    ("u8", 64, False, "+="),  # u8 into an i32 fragment
    ("u8", 128, True, "+="),
    ("f32", 64, False, "+="),  # tf32 (small integers: exact)
]


@pytest.mark.parametrize("dt, n, mn_major, op", CASES)
def test_tile_mma_matches_numpy(dt, n, mn_major, op):
    k = tile_kernel(dt, n, mn_major, op)
    inputs = random_inputs(k, {}, 3)
    got = run_kernel(k, {}, inputs, seed=0).tensors["c"]
    want = reference(k, inputs, mn_major, op, False, False)
    assert got.dtype == (np.int32 if dt == "u8" else np.float32)
    np.testing.assert_array_equal(got.astype(np.float64), want)


@pytest.mark.parametrize("dt", ["bf16", "u8"])
def test_preloaded_accumulator_plus_product(dt):
    """`acc[r] = v` writes registers (the fragment layout through row/col); `+=` without
    scale_d adds every step to them."""
    k = tile_kernel(dt, 64, preload=True, scale="")
    inputs = random_inputs(k, {}, 5)
    got = run_kernel(k, {}, inputs, seed=1).tensors["c"].astype(np.float64)
    np.testing.assert_array_equal(got, reference(k, inputs, False, "+=", True, True))


@pytest.mark.parametrize("flag", [0, 1, 7])
def test_scale_d_decided_at_run_time(flag):
    """`scale_d flag[0] > 0 || kk > 0`: the first step keeps the preloaded accumulator only
    when the input flag says so."""
    k = tile_kernel("bf16", 64, preload=True, flag=True, scale=", scale_d flag[0] > 0 || kk > 0")
    inputs = random_inputs(k, {}, 6)
    inputs["flag"] = np.array([flag], np.int32)
    got = run_kernel(k, {}, inputs, seed=2).tensors["c"].astype(np.float64)
    np.testing.assert_array_equal(got, reference(k, inputs, False, "+=", True, flag > 0))


def test_i32_accumulator_wraps_like_the_s32_register():
    """Preloaded near 2**31, the u8 products carry the sum past it: modulo 2**32."""
    k = tile_kernel("u8", 64, preload=True, scale="")
    inputs = random_inputs(k, {}, 8)
    inputs["cin"] = np.full((64, 64), 2**31 - 5, np.int32)
    got = run_kernel(k, {}, inputs, seed=0).tensors["c"]
    exact = reference(k, inputs, False, "+=", True, True).astype(np.int64)
    assert (exact > 2**31 - 1).any()
    np.testing.assert_array_equal(got, ((exact + 2**31) % 2**32 - 2**31).astype(np.int32))


def _chained(k: ir.Kernel, inputs: dict[str, np.ndarray], dt: ir.DType) -> np.ndarray:
    """semantics/hw/mma.py's order: one mma per k step, accumulating from poison (scale 0)."""
    a, b = values(k, inputs, "a").astype(np.float32), values(k, inputs, "b").T
    step = K_STEP[dt.value]
    acc = np.full((64, b.shape[1]), np.nan, np.float32)
    for kk in range(64 // step):
        cols = slice(kk * step, (kk + 1) * step)
        acc = mma.mma(acc, a[:, cols], b[cols, :].astype(np.float32), dt, kk > 0)
    return acc


@pytest.mark.parametrize("dt", ["bf16", "f32"])
def test_rounding_is_semantics_mma_order_bit_for_bit(dt):
    """Inputs whose products and sums round (bf16 normals; f32 with low significand bits,
    which tf32 drops): the interpreter is semantics/hw/mma.py chained, bit for bit, and differs
    from a float64 product (so the test is not vacuous)."""
    k = tile_kernel(dt, 64)
    rng = np.random.default_rng(11)
    inputs = random_inputs(k, {}, 11)
    for name in ("a", "b"):
        x = rng.standard_normal(inputs[name].shape).astype(np.float32)
        inputs[name] = fp.f32_array_to_bf16(x) if dt == "bf16" else x
    got = run_kernel(k, {}, inputs, seed=0).tensors["c"]
    want = _chained(k, inputs, ir.DType(dt))
    assert np.array_equal(got.view(np.uint32), want.view(np.uint32))
    exact = values(k, inputs, "a") @ values(k, inputs, "b").T
    assert not np.array_equal(got.astype(np.float64), exact)
    assert np.allclose(got, exact, rtol=1e-2, atol=1e-2)


def test_registers_start_as_poison():
    """A fragment nothing wrote reads NaN (f32) / 0xDEADBEEF (i32)."""
    for dt, poison in (("bf16", None), ("u8", I32_SENTINEL)):
        k = tile_kernel(dt, 64, ksteps="0")
        got = run_kernel(k, {}, random_inputs(k, {}, 0), seed=0).tensors["c"]
        assert np.isnan(got).all() if poison is None else (got == poison).all()


# ---- operand tiles through layouts at any origin (property test) --------------------------

ORIGINS = """kernel origins(a: in global bf16[{ashape}], b: in global bf16[{bshape}],
                c: out global f32[64, 32])
  grid 1 block 128
{{
  shared sa: bf16[{ashape}] layout {alay}
  shared sb: bf16[{bshape}] layout {blay}
  fragment acc: f32[64, 32]
  for i in 0 .. {aiters} {{
    let e = i * 128 + thread
    let i0 = e / {asz}
    let i1 = e / {acols} % {arows}
    sa[i0, i1, e % {acols}] = a[i0, i1, e % {acols}]
  }}
  for i in 0 .. {biters} {{
    let e = i * 128 + thread
    sb[e / {bcols}, e % {bcols}] = b[e / {bcols}, e % {bcols}]
  }}
  fence proxy_async
  sync
  wgmma_fence
  wgmma acc = {atile} @ {btile}
  wgmma_commit
  wgmma_wait 0
  for r in 0 .. 16 {{
    c[row(acc, r), col(acc, r)] = acc[r]
  }}
}}
"""
LAYOUTS = ["row_major", "col_major", "padded(row_major, 8)", "swizzle128B(row_major)",
           "swizzle(3, 3, 3, row_major)"]


@settings(max_examples=12, deadline=None, derandomize=True)
@given(st.sampled_from(LAYOUTS), st.sampled_from(LAYOUTS), st.booleans(), st.booleans(),
       st.integers(0, 1), st.integers(0, 64), st.integers(0, 48), st.integers(0, 32),
       st.integers(0, 48))
def test_operand_tiles_read_through_any_layout_at_any_origin(alay, blay, a_t, b_t, s, r0, c0,
                                                             n0, k0):
    """A tile at any origin of a 3-D (staged) or 2-D buffer, either orientation (`.T` or
    not), any layout: the MMA reads the logical elements numpy slices out of the inputs."""
    arows, acols = (64, 128) if a_t else (128, 64)  # A stored [K-ish, M] when transposed
    atile = (f"sa[{s}, {c0} : 16, {r0} : 64].T" if a_t else f"sa[{s}, {r0} : 64, {c0} : 16]")
    btile = (f"sb[{n0} : 32, {k0} : 16].T" if b_t else f"sb[{k0} : 16, {n0} : 32]")
    src = ORIGINS.format(ashape=f"2, {arows}, {acols}", bshape="64, 64", alay=alay,
                         blay=blay, aiters=2 * arows * acols // 128, asz=arows * acols,
                         arows=arows, acols=acols, biters=32, bcols=64,
                         atile=atile, btile=btile)
    k = kernel_of(src)
    inputs = random_inputs(k, {}, 13)
    a, b = values(k, inputs, "a")[s], values(k, inputs, "b")
    at = a[c0:c0 + 16, r0:r0 + 64].T if a_t else a[r0:r0 + 64, c0:c0 + 16]
    bt = b[n0:n0 + 32, k0:k0 + 16].T if b_t else b[k0:k0 + 16, n0:n0 + 32]
    got = run_kernel(k, {}, inputs, seed=s).tensors["c"]
    np.testing.assert_array_equal(got.astype(np.float64), at @ bt)


def test_wgmma_wait_n_leaves_exactly_the_newest_groups_pending():
    """One group per k step, `wgmma_wait 1`, then the epilogue, then `wgmma_wait 0`: with the
    copy engine as slow as allowed, the epilogue sees the first three steps' sum (MMAs
    perform in issue order, the wait lets the newest group be)."""
    src = TILE.format(**{**_fields(), "wait": "wgmma_wait 1\n" + EPILOGUE.format(regs=32)})
    src = src.replace("scale_d kk > 0\n  }\n  wgmma_commit",
                      "scale_d kk > 0\n    wgmma_commit\n  }")
    k = kernel_of(src)
    inputs = random_inputs(k, {}, 12)
    a, b = values(k, inputs, "a"), values(k, inputs, "b")
    got = run_kernel(k, {}, inputs, policy=Lazy()).tensors["c"].astype(np.float64)
    np.testing.assert_array_equal(got, a[:, :48] @ b[:, :48].T)
    got = run_kernel(k, {}, inputs, policy=Eager()).tensors["c"].astype(np.float64)
    np.testing.assert_array_equal(got, a @ b.T)


# ---- two warpgroups, roles, a TMA pipeline ------------------------------------------------

PIPE = """kernel wgmma_pipe(a: in global bf16[128, K], b: in global bf16[64, K],
                  c: out global f32[128, 64])
  where K % 64 == 0, K > 0, K <= 1024
  grid 1 block 384
{{
  const STAGES = 2
  tensormap ta = tiled(a, box [128, 64], swizzle 128B)
  tensormap tb = tiled(b, box [64, 64], swizzle 128B)
  shared sa: bf16[STAGES, 128, 64] layout swizzle128B(row_major) align 1024
  shared sb: bf16[STAGES, 64, 64] layout swizzle128B(row_major) align 1024
  mbarrier full[STAGES] count 1 guards sa[i], sb[i]
  mbarrier empty[STAGES] count 8 guards sa[i], sb[i]
  fragment acc: f32[64, 64]

  if thread == 0 {{
    init full
    init empty
    fence mbarrier_init
  }}
  sync

  role producer = warps 0 .. 4, elect one {{
    for k in 0 .. K / 64 {{
      let s = k % STAGES
      wait empty[s] parity (k / STAGES + 1) % 2
      arrive full[s], expect_tx bytes(sa[s]) + bytes(sb[s])
      tma_load sa[s] <- ta[0, k * 64] signal full[s]
      tma_load sb[s] <- tb[0, k * 64] signal full[s]
    }}
  }}
  role consumers = warps 4 .. 12 {{
    let wg = thread / 128 - 1
    let m0 = wg * 64
    for k in 0 .. K / 64 {{
      let s = k % STAGES
      wait full[s] parity (k / STAGES) % 2
      wgmma_fence
      for kk in 0 .. 4 {{
        let k0 = kk * 16
        wgmma acc += sa[s, m0 : 64, k0 : 16] @ sb[s, 0 : 64, k0 : 16].T, scale_d k + kk > 0
      }}
      wgmma_commit
      {release_early}wgmma_wait 0
      {release}
    }}
    for r in 0 .. 32 {{
      c[wg * 64 + row(acc, r), col(acc, r)] = acc[r]
    }}
  }}
}}
"""
RELEASE = "arrive empty[s], one per warp"


def pipe_kernel(early: bool = False) -> ir.Kernel:
    return kernel_of(PIPE.format(release_early=RELEASE + "\n      " if early else "",
                                 release="" if early else RELEASE))


def pipe_reference(inputs: dict[str, np.ndarray]) -> np.ndarray:
    a, b = fp.bf16_array_to_f32(inputs["a"]), fp.bf16_array_to_f32(inputs["b"])
    return a.astype(np.float64) @ b.astype(np.float64).T


SCHEDULES = ([dict(seed=s) for s in range(4)] + [dict(seed=s, policy="pct") for s in range(6)])
# Fewer for the 384-thread pipeline: a PCT step ranks every thread.
PIPE_SCHEDULES = SCHEDULES[:2] + SCHEDULES[4:7]


def outcome(k: ir.Kernel, sizes: dict[str, int], inputs: dict[str, np.ndarray], want, **how):
    """'ok', 'wrong', or the error code of one run (`want` None: any output is 'ok')."""
    try:
        got = run_kernel(k, sizes, inputs, **how).tensors["c"]
    except InterpError as exc:
        return exc.code
    if want is None:
        return "ok"
    return "ok" if np.array_equal(got.astype(np.float64), want) else "wrong"


def test_two_consumer_warpgroups_in_a_tma_pipeline_agree_under_every_schedule():
    """A producer warpgroup streams K tiles through two stages; two consumer warpgroups
    (a role of 8 warps) each multiply their own 64 rows. Correct under the seeded random
    and PCT schedules and both deterministic extremes."""
    k = pipe_kernel()
    sizes = {"K": 192}
    inputs = random_inputs(k, sizes, 4)
    want = pipe_reference(inputs)
    runs = PIPE_SCHEDULES + [dict(policy=Lazy(loads_first=True)), dict(policy=Eager())]
    assert [outcome(k, sizes, inputs, want, **how) for how in runs] == ["ok"] * len(runs)


def test_releasing_a_stage_before_wgmma_wait_is_observable():
    """The consumers arrive on `empty` before waiting for their MMAs: the producer refills
    the stage an MMA still has to read. Some seeded schedule shows it; the scheduler that
    lands loads before MMAs always does, the eager one never."""
    k = pipe_kernel(early=True)
    sizes = {"K": 192}
    inputs = random_inputs(k, sizes, 4)
    want = pipe_reference(inputs)
    seen = {outcome(k, sizes, inputs, want, **how) for how in PIPE_SCHEDULES}
    assert "wrong" in seen, seen
    assert outcome(k, sizes, inputs, want, policy=Lazy(loads_first=True)) == "wrong"
    assert outcome(k, sizes, inputs, want, policy=Eager()) == "ok"


TWO_WG = """kernel two_wg(a: in global bf16[128, 64], b: in global bf16[64, 64],
              c: out global f32[128, 64])
  grid 1 block 256
{
  shared sa: bf16[128, 64] layout swizzle128B(row_major) align 1024
  shared sb: bf16[64, 64] layout swizzle128B(row_major) align 1024
  fragment acc: f32[64, 64]
  for i in 0 .. 32 {
    let e = i * 256 + thread
    sa[e / 64, e % 64] = a[e / 64, e % 64]
  }
  for i in 0 .. 16 {
    let e = i * 256 + thread
    sb[e / 64, e % 64] = b[e / 64, e % 64]
  }
  fence proxy_async
  sync
  let m0 = (thread / 128) * 64
  wgmma_fence
  for kk in 0 .. 4 {
    wgmma acc += sa[m0 : 64, kk * 16 : 16] @ sb[0 : 64, kk * 16 : 16].T, scale_d kk > 0
    wgmma_commit
  }
  wgmma_wait 0
  for r in 0 .. 32 {
    c[(thread / 128) * 64 + row(acc, r), col(acc, r)] = acc[r]
  }
}
"""


def test_two_warpgroups_issue_one_mma_each_per_statement_in_issue_order():
    """Block of two warpgroups, no roles, a group per MMA: each warpgroup's four MMAs are
    performed once each (8 in the trace), in issue order even when the scheduler prefers
    the newest copy, and the output is right."""
    k = kernel_of(TWO_WG)
    inputs = random_inputs(k, {}, 9)
    want = values(k, inputs, "a") @ values(k, inputs, "b").T
    policy = NewestCopy()
    res = run_kernel(k, {}, inputs, policy=policy, record_trace=True)
    np.testing.assert_array_equal(res.tensors["c"].astype(np.float64), want)
    performed = [ev for ev in res.trace if ev.kind == "wgmma.perform"]
    assert len(performed) == 8
    assert policy.max_per_warpgroup == 1
    replay = run_kernel(k, {}, inputs, schedule=res.schedule)
    np.testing.assert_array_equal(replay.tensors["c"], res.tensors["c"])
    assert replay.steps == res.steps


# ---- corpus/wgmma: the kernels code generation compiles ------------------------------------

CORPUS = Path(__file__).resolve().parent.parent / "corpus" / "wgmma"
CORPUS_SIZES = {  # the smallest launch of each, and whether B is stored [N, K] (C = A B^T)
    "tile_mma": ({}, True),
    "mn_major_b_mma": ({"M": 64, "N": 64, "K": 128}, False),
    "tma_ring_mma": ({"M": 64, "N": 128, "K": 256}, True),  # K / 64 > STAGES: the ring wraps
    "two_consumers_mma": ({"M": 128, "N": 256, "K": 64}, True),
    "u8_mma": ({"M": 64, "N": 128, "K": 128}, True),
    # the GEMMs of bench/bench_gemm.py: C rounded to bf16 (exact sums round once)
    "gemm": ({"M": 200, "N": 264, "K": 136}, True),  # ragged: zero fill and clipped stores
    "gemm_tma_epi": ({"M": 128, "N": 256, "K": 64}, True),
    "gemm_ws": ({"M": 128, "N": 256, "K": 64}, True),
    "gemm_persistent": ({"M": 128, "N": 512, "K": 512}, True),
}


@pytest.mark.parametrize("name", sorted(CORPUS_SIZES))
def test_corpus_wgmma_kernels_match_numpy(name):
    """The tensor-core corpus (written for code generation) computes C = A B (or A B^T) in
    the interpreter, under the default and a PCT schedule."""
    sizes, b_t = CORPUS_SIZES[name]
    k = load_program(CORPUS / f"{name}.tsk").kernels[0]
    inputs = random_inputs(k, sizes, 1)
    a, b = values(k, inputs, "a"), values(k, inputs, "b")
    want = a @ (b.T if b_t else b)
    out = k.tensor("c").dtype
    for how in (dict(), dict(seed=3, policy="pct")):
        got = run_kernel(k, sizes, inputs, **how).tensors["c"]
        if out is ir.DType.BF16:  # the exact f32 sum, rounded once to bf16
            np.testing.assert_array_equal(got, fp.f32_array_to_bf16(want.astype(np.float32)))
        else:
            np.testing.assert_array_equal(got.astype(np.float64), want)


def test_every_corpus_wgmma_kernel_is_tested():
    assert {p.stem for p in CORPUS.glob("*.tsk")} == set(CORPUS_SIZES)


# ---- races on the registers ---------------------------------------------------------------


def test_correct_kernel_is_schedule_independent():
    k = tile_kernel("bf16", 64)
    inputs = random_inputs(k, {}, 2)
    want = reference(k, inputs, False, "+=", False, False)
    runs = SCHEDULES + [dict(policy=Lazy()), dict(policy=Eager())]
    assert {outcome(k, {}, inputs, want, **how) for how in runs} == {"ok"}


def test_reading_the_accumulator_before_wgmma_wait_is_observable():
    """The epilogue moved above `wgmma_wait 0`: whether it reads poison, a partial sum or the
    product depends on when the copy engine performs the MMAs."""
    k = tile_kernel("bf16", 64, wait=EPILOGUE.format(regs=32).lstrip(), epilogue="")
    inputs = random_inputs(k, {}, 2)
    want = reference(k, inputs, False, "+=", False, False)
    seen = {outcome(k, {}, inputs, want, **how) for how in SCHEDULES}
    assert "wrong" in seen, seen
    assert outcome(k, {}, inputs, want, policy=Eager()) == "ok"
    got = run_kernel(k, {}, inputs, policy=Lazy()).tensors["c"]
    assert np.isnan(got).all()  # every register read before any MMA performed


def test_register_write_races_with_a_pending_mma():
    """`acc[r] = 0.0` between the MMAs' issue and their wait: the MMA overwrites it or not."""
    k = tile_kernel("bf16", 64, wait="for r in 0 .. 32 {\n    acc[r] = 0.0\n  }\n  ")
    inputs = random_inputs(k, {}, 2)
    want = reference(k, inputs, False, "+=", False, False)
    assert outcome(k, {}, inputs, want, policy=Eager()) == "wrong"  # zeros written last
    assert outcome(k, {}, inputs, want, policy=Lazy()) == "ok"  # the MMAs write last


# ---- errors -------------------------------------------------------------------------------


def test_exit_with_a_pending_mma_is_ts431():
    """No wgmma_wait at all: when the copy engine is slow, every thread finishes first."""
    k = kernel_of(TILE.format(**_fields()).replace("  wgmma_wait 0\n", ""))
    k_fixed = kernel_of(TILE.format(**_fields()))
    inputs = random_inputs(k, {}, 0)
    with pytest.raises(InterpError) as exc:
        run_kernel(k, {}, inputs, policy=Lazy())
    assert exc.value.code == "TS431" and "wgmma_wait" in exc.value.message
    codes = {outcome(k, {}, inputs, None, **how) for how in SCHEDULES}
    assert "TS431" in codes
    assert {outcome(k_fixed, {}, inputs, None, **how) for how in SCHEDULES} == {"ok"}


def test_an_uncommitted_mma_is_never_waited_for():
    """PTX: wgmma.wait_group waits for committed groups only -- without the commit,
    `wgmma_wait 0` passes at once and the MMA is still pending at exit."""
    k = kernel_of(TILE.format(**{**_fields(), "wait": ""}).replace("  wgmma_commit\n", ""))
    with pytest.raises(InterpError) as exc:
        run_kernel(k, {}, random_inputs(k, {}, 0), policy=Lazy())
    assert exc.value.code == "TS431" and "never committed" in exc.value.message


def _fields() -> dict[str, Any]:
    return dict(dt="bf16", n=64, acc="f32", bshape="64, 64", bcols=64, biters=32,
                alay="swizzle128B(row_major)", blay="swizzle128B(row_major)", ksteps=4, k=16,
                op="+=", btile="sb[0 : 64, kk * 16 : 16].T", scale=", scale_d kk > 0",
                regs=32, params="", wait="", epilogue="", preload="")


def test_half_a_warpgroup_at_the_wgmma_deadlocks():
    """`if thread < 64 { wgmma ... }`: the 64 threads wait for the other 64, who never come."""
    src = TILE.format(**_fields()).replace(
        "    wgmma acc", "    if thread < 64 {\n      wgmma acc").replace(
        "scale_d kk > 0\n  }", "scale_d kk > 0\n    }\n  }")
    k = kernel_of(src)
    with pytest.raises(InterpError) as exc:
        run_kernel(k, {}, random_inputs(k, {}, 0), seed=0)
    assert exc.value.code == "TS410"
    assert "converge at wgmma" in exc.value.message and "64 of 128" in exc.value.message


def test_a_role_holding_part_of_a_warpgroup_is_ts532():
    src = TILE.format(**_fields()).replace(
        "  for kk in 0 .. 4 {\n    wgmma", "  role half = warps 0 .. 2 {\n  for kk in 0 .. 4 {\n"
        "    wgmma").replace("scale_d kk > 0\n  }", "scale_d kk > 0\n  }\n  }")
    k = kernel_of(src)
    with pytest.raises(InterpError) as exc:
        run_kernel(k, {}, random_inputs(k, {}, 0), seed=0)
    assert exc.value.code == "TS532" and "64 of the 128 threads" in exc.value.message


@pytest.mark.parametrize("edit", [
    ("sa[0 : 64, kk * 16 : 16]", "sa[0 : 64, (kk + thread / 64) % 4 * 16 : 16]"),
    ("scale_d kk > 0", "scale_d kk > 0 || thread < 64"),
])
def test_threads_disagreeing_on_the_operands_is_ts531(edit):
    k = kernel_of(TILE.format(**_fields()).replace(*edit))
    with pytest.raises(InterpError) as exc:
        run_kernel(k, {}, random_inputs(k, {}, 0), seed=0)
    assert exc.value.code == "TS531" and "one MMA of a warpgroup" in exc.value.message


def test_a_register_index_past_the_fragment_is_ts204():
    src = TILE.format(**{**_fields(), "epilogue": EPILOGUE.format(regs=32)}).replace(
        "= acc[r]", "= acc[r + 1]")
    k = kernel_of(src)
    with pytest.raises(InterpError) as exc:
        run_kernel(k, {}, random_inputs(k, {}, 0), seed=0)
    assert exc.value.code == "TS204" and "acc[32]" in exc.value.message


def test_a_tile_outside_its_buffer_is_ts202():
    src = TILE.format(**{**_fields(), "ksteps": 5})
    k = kernel_of(src)
    with pytest.raises(InterpError) as exc:
        run_kernel(k, {}, random_inputs(k, {}, 0), seed=0)
    assert exc.value.code == "TS202" and "wgmma tile" in exc.value.message


def test_operands_written_without_a_proxy_fence_are_ts301():
    """The MMA reads shared memory through the async proxy, like a TMA store."""
    k = kernel_of(TILE.format(**_fields()).replace("  fence proxy_async\n", ""))
    with pytest.raises(InterpError) as exc:
        run_kernel(k, {}, random_inputs(k, {}, 0), seed=0)
    assert exc.value.code == "TS301" and "wgmma reads operand A" in exc.value.message


# ---- engines ------------------------------------------------------------------------------


def test_run_kernel_falls_back_to_the_scalar_engine_and_says_why():
    k = tile_kernel("bf16", 64)
    inputs = random_inputs(k, {}, 1)
    res = run_kernel(k, {}, inputs)
    assert res.engine == "scalar" and "tensor-core statements" in res.fallback
    np.testing.assert_array_equal(res.tensors["c"].astype(np.float64),
                                  reference(k, inputs, False, "+=", False, False))
