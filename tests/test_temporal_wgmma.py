"""The temporal checkers on tensor-core kernels (semantics/temporal/explore/ops/wgmma.py).

A wgmma's MMA reads its tiles asynchronously until a `wgmma_wait` of its threads covers its
group: the tiles stay held (a stage released before the wait is refilled under it, TS303),
the accumulator registers are not ready (TS308), the block must not exit before (TS431),
thread-written operands need `fence proxy_async` (TS301) and the registers a `wgmma_fence`
(TS534). Each corpus kernel is proved; each planted bug is refuted with its code and a trace
through the MMAs, and its fix is proved; the interpreter shows the refuted runs; and on
random sequences of MMAs, commits and waits the checker's verdict agrees with what the
interpreter observes when the tensor cores are as fast or as slow as they can be."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tilesafe import api
from tilesafe.checkers import temporal
from tilesafe.checkers.obligation import Verdict
from tilesafe.checkers.registry import CheckOptions
from tilesafe.frontend.load import compile_source, load_program
from tilesafe.semantics.interpreter.interp import InterpError, random_inputs, run_kernel
from tilesafe.semantics.temporal.events import build_model
from tilesafe.semantics.temporal.explore import Machine, search

sys.path.insert(0, str(Path(__file__).resolve().parent))
import corpus_refs as R  # noqa: E402
from schedules import shows_failure  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
WGMMA = ROOT / "corpus" / "wgmma"
BAD = ROOT / "corpus" / "bad"
OPTS = CheckOptions()
TEMPORAL = ("barrier", "ownership")

# gemm_persistent and gemm (a k-loop inside the tile loop) are proved by the nested argument
# (docs/temporal.md §15): tests/test_nested.py.
PROVED = ("tile_mma", "tma_ring_mma", "two_consumers_mma", "mn_major_b_mma", "u8_mma",
          "gemm_ws", "gemm_tma_epi")


def kernel(src: str):
    return compile_source(src, "t.tsk").kernels[0]


def failing(obligations) -> list:
    return [o for o in obligations if o.verdict is not Verdict.PROVED]


def states(obligations) -> int:
    return max(o.evidence.get("states explored (with partial-order reduction)", 0)
               for o in obligations if o.evidence)


def ref_gemm_bt(s: dict, x: dict) -> dict:
    a, b = R.f32(x["a"]).astype(np.float64), R.f32(x["b"]).astype(np.float64)
    return {"c": (a @ b.T).astype(np.float32)}


# ---- the corpus ---------------------------------------------------------------------------


@pytest.mark.parametrize("name", PROVED)
def test_corpus_wgmma_kernel_proves_every_temporal_obligation(name):
    obligations = api.verify(WGMMA / f"{name}.tsk", only=TEMPORAL + ("mma",))
    assert not failing(obligations), [(o.code, o.name, o.message) for o in failing(obligations)]
    names = {o.name.split(": ", 1)[1] for o in obligations}
    assert {"fragments-ready", "mmas-done-at-exit", "wgmma-fenced"} <= names
    assert states(obligations) < 20_000  # the 8-warp consumers + producer stay small


# Each planted bug, the edit that fixes it, and the line of its reported code.
FIXES: dict[str, list[tuple[str, str]]] = {
    "ts301_mma_operand_not_proxy_fenced": [("  sync\n", "  fence proxy_async\n  sync\n")],
    "ts303_stage_released_before_wgmma_wait": [
        ("      arrive empty[s], one per warp\n      wgmma_wait 0\n",
         "      wgmma_wait 0\n      arrive empty[s], one per warp\n")],
    "ts303_wgmma_wait_1_releases_current_stage": [
        ("      wgmma_wait 1\n      arrive empty[s], one per warp\n    }\n    wgmma_wait 0\n",
         "      wgmma_wait 1\n      if kt > 0 {\n        arrive empty[(kt - 1) % STAGES], one per "
         "warp\n      }\n    }\n    wgmma_wait 0\n    arrive empty[(K / 64 - 1) % STAGES], one "
         "per warp\n")],
    "ts308_accumulator_read_before_wgmma_wait": [
        ("  wgmma_wait 0\n", ""), ("  wgmma_commit\n", "  wgmma_commit\n  wgmma_wait 0\n")],
    "ts308_wgmma_never_committed": [("  wgmma_wait 0\n", "  wgmma_commit\n  wgmma_wait 0\n")],
    "ts308_persistent_epilogue_overlaps_next_tile": [
        ("        if kt == 0 && t > block.x {\n          for r in 0 .. 64 {\n            c[(t - "
         "GRID) * 64 + row(acc, r), col(acc, r)] = acc[r]\n          }\n        }\n", ""),
        ("      if t + GRID >= M / 64 {\n        for r", "      if t >= 0 {\n        for r")],
    "ts431_peeled_mma_after_epilogue": [
        ("  wgmma_fence\n  wgmma acc += sa[0 : 64, 48 : 16] @ sb[0 : 64, 48 : 16].T\n"
         "  wgmma_commit\n", ""),
        ("  wgmma_commit\n  wgmma_wait 0\n", "  wgmma_commit\n  wgmma_fence\n  wgmma acc += sa["
         "0 : 64, 48 : 16] @ sb[0 : 64, 48 : 16].T\n  wgmma_commit\n  wgmma_wait 0\n")],
    "ts534_wgmma_fence_hoisted_out_of_tile_loop": [
        ("    wgmma_fence\n    for t", "    for t"),
        ("        wait full[s] parity (g / STAGES) % 2\n",
         "        wait full[s] parity (g / STAGES) % 2\n        wgmma_fence\n")],
}


def bad_case(name: str) -> tuple[str, str]:
    text = (BAD / f"{name}.tsk").read_text()
    return text, text.splitlines()[0].split()[2]


@pytest.mark.parametrize("name", sorted(FIXES))
def test_planted_bug_is_refuted_with_a_trace_through_the_mmas(name):
    text, code = bad_case(name)
    obligations = api.verify(BAD / f"{name}.tsk", only=TEMPORAL)
    errors = [o for o in failing(obligations) if o.code is not None]
    assert {o.code for o in errors} == {code}, [(o.code, o.message) for o in errors]
    (refuted,) = [o for o in errors if o.verdict is Verdict.REFUTED]
    trace = refuted.counterexample["trace"]
    assert any("wgmma" in line for line in trace), trace


@pytest.mark.parametrize("name", sorted(FIXES))
def test_the_fixed_kernel_is_proved(name):
    text, _ = bad_case(name)
    for old, new in FIXES[name]:
        assert old in text, (name, old)
        text = text.replace(old, new, 1)
    obligations = api.verify_kernel(kernel(text), only=TEMPORAL)
    assert not failing(obligations), [(o.code, o.name, o.message) for o in failing(obligations)]


def test_exit_with_a_pending_mma_is_found_by_the_barrier_semantics_alone():
    """TS431 is a barrier-protocol property: the exploration without permissions finds it
    (and does not report the ownership-only TS308)."""
    k = load_program(BAD / "ts431_peeled_mma_after_epilogue.tsk").kernels[0]
    run = temporal.explore(k, False, OPTS)
    assert {f.code for f, _, _ in run.outcome.findings} == {"TS431"}
    k = load_program(BAD / "ts308_accumulator_read_before_wgmma_wait.tsk").kernels[0]
    run = temporal.explore(k, False, OPTS)
    assert not run.outcome.findings and run.outcome.complete


# ---- warpgroups split over classes, identical consumers, partial-order reduction ----------

# One consumer warpgroup; thread 128 alone issues the TMA stores of the epilogue.
SPLIT = """kernel mma_tma_epilogue(a: in global bf16[M, K], b: in global bf16[N, K],
                          c: out global f32[M, N])
  where M % 64 == 0, N % 64 == 0, K % 64 == 0, M > 0, N > 0, K > 0, M <= 65536,
    N <= 65536, K <= 65536
  grid (M / 64, N / 64) block 256
{
  const STAGES = 2
  tensormap ta = tiled(a, box [64, 64], swizzle 128B)
  tensormap tb = tiled(b, box [64, 64], swizzle 128B)
  tensormap tc = tiled(c, box [64, 32])
  shared sa: bf16[STAGES, 64, 64] layout swizzle128B(row_major) align 1024
  shared sb: bf16[STAGES, 64, 64] layout swizzle128B(row_major) align 1024
  shared so: f32[2, 64, 32] align 1024
  mbarrier full[STAGES] count 1 guards sa[i], sb[i]
  mbarrier empty[STAGES] count 4 guards sa[i], sb[i]
  fragment acc: f32[64, 64]

  if thread == 0 {
    init full
    init empty
    fence mbarrier_init
  }
  sync

  role producer = warps 0 .. 4, elect one {
    for kt in 0 .. K / 64 {
      let s = kt % STAGES
      wait empty[s] parity (kt / STAGES + 1) % 2
      arrive full[s], expect_tx bytes(sa[s]) + bytes(sb[s])
      tma_load sa[s] <- ta[block.x * 64, kt * 64] signal full[s]
      tma_load sb[s] <- tb[block.y * 64, kt * 64] signal full[s]
    }
  }
  role consumer = warps 4 .. 8 {
    for kt in 0 .. K / 64 {
      let s = kt % STAGES
      wait full[s] parity (kt / STAGES) % 2
      wgmma_fence
      for kk in 0 .. 4 {
        wgmma acc += sa[s, 0 : 64, kk * 16 : 16] @ sb[s, 0 : 64, kk * 16 : 16].T,
          scale_d kt > 0 || kk > 0
      }
      wgmma_commit
      wgmma_wait 0
      arrive empty[s], one per warp
    }
    for r in 0 .. 32 {
      so[col(acc, r) / 32, row(acc, r), col(acc, r) % 32] = acc[r]
    }
    fence proxy_async
    bar_sync 1, 128
    if thread == 128 {
      for j in 0 .. 2 {
        tma_store tc[block.x * 64, block.y * 64 + j * 32] <- so[j]
      }
      commit_group
      wait_group 0 read
    }
  }
}
"""
EARLY = ("      wgmma_commit\n      wgmma_wait 0\n      arrive empty[s], one per warp\n",
         "      wgmma_commit\n      arrive empty[s], one per warp\n      wgmma_wait 0\n")


def test_a_warpgroup_split_over_classes_issues_its_mma_jointly():
    """`if thread == 128` (the TMA-store thread) splits the consumer warpgroup into two
    classes: the wgmma is one joint step of both, proved; released early, the stage is
    refilled under the MMA (TS303), and the interpreter, following the counterexample,
    computes a wrong product."""
    src = SPLIT
    k = kernel(src)
    model = build_model(k, True)
    joint = [ins for ag in model.agents for ins in ag.code if ins.op == "wgmma"]
    assert len(joint) == 2 and all(ins.joint for ins in joint)
    assert not failing(api.verify_kernel(k, only=TEMPORAL))
    bad = kernel(src.replace(*EARLY))
    codes = {o.code for o in failing(api.verify_kernel(bad, only=TEMPORAL)) if o.code}
    assert codes == {"TS303"}
    sizes = {"M": 64, "N": 64, "K": 256}
    guide = temporal.interpreter_guide(bad, OPTS, "TS303", sizes)
    assert guide is not None
    shown = shows_failure(bad, sizes, ref_gemm_bt, guide[1])
    assert shown is not None and shown[0].startswith("counterexample replay"), shown


# Two consumer warpgroups computing the same product (for two outputs).
TWIN = """kernel twin_consumers(a: in global bf16[M, K], b: in global bf16[128, K],
                      c0: out global f32[M, 128], c1: out global f32[M, 128])
  where M % 64 == 0, K % 64 == 0, M > 0, K > 0, M <= 65536, K <= 65536
  grid (M / 64) block 384
{
  const STAGES = 2
  tensormap ta = tiled(a, box [64, 64], swizzle 128B)
  tensormap tb = tiled(b, box [128, 64], swizzle 128B)
  shared sa: bf16[STAGES, 64, 64] layout swizzle128B(row_major) align 1024
  shared sb: bf16[STAGES, 128, 64] layout swizzle128B(row_major) align 1024
  mbarrier full[STAGES] count 1 guards sa[i], sb[i]
  mbarrier empty[STAGES] count 8 guards sa[i], sb[i]
  fragment acc: f32[64, 128]

  if thread == 0 {
    init full
    init empty
    fence mbarrier_init
  }
  sync

  role producer = warps 0 .. 4, elect one {
    for kt in 0 .. K / 64 {
      let s = kt % STAGES
      wait empty[s] parity (kt / STAGES + 1) % 2
      arrive full[s], expect_tx bytes(sa[s]) + bytes(sb[s])
      tma_load sa[s] <- ta[block.x * 64, kt * 64] signal full[s]
      tma_load sb[s] <- tb[0, kt * 64] signal full[s]
    }
  }
  role first = warps 4 .. 8 {
    for kt in 0 .. K / 64 {
      let s = kt % STAGES
      wait full[s] parity (kt / STAGES) % 2
      wgmma_fence
      for kk in 0 .. 4 {
        wgmma acc += sa[s, 0 : 64, kk * 16 : 16] @ sb[s, 0 : 128, kk * 16 : 16].T,
          scale_d kt > 0 || kk > 0
      }
      wgmma_commit
      wgmma_wait 0
      arrive empty[s], one per warp
    }
    for r in 0 .. 64 {
      c0[block.x * 64 + row(acc, r), col(acc, r)] = acc[r]
    }
  }
  role second = warps 8 .. 12 {
    for kt in 0 .. K / 64 {
      let s = kt % STAGES
      wait full[s] parity (kt / STAGES) % 2
      wgmma_fence
      for kk in 0 .. 4 {
        wgmma acc += sa[s, 0 : 64, kk * 16 : 16] @ sb[s, 0 : 128, kk * 16 : 16].T,
          scale_d kt > 0 || kk > 0
      }
      wgmma_commit
      wgmma_wait 0
      arrive empty[s], one per warp
    }
    for r in 0 .. 64 {
      c1[block.x * 64 + row(acc, r), col(acc, r)] = acc[r]
    }
  }
}
"""


def test_identical_consumer_warpgroups_are_proved_up_to_symmetry():
    """Two consumer roles that run the same MMAs on the same stages: the search up to
    renaming them proves the kernel (fewer states); with one or both releasing the stage
    before their wgmma_wait, TS303 from the unreduced search."""
    src = TWIN
    run = temporal.explore(kernel(src), True, OPTS)
    assert run.outcome.complete and not run.outcome.findings
    # up to symmetry, inside the stage projection when the ring has one (ring.py: each
    # iteration commits and waits for its MMAs)
    arg = run.outcome.argument
    assert (arg.get("symmetry") or arg.get("ring", {}).get("symmetry")) == [["first", "second"]]
    model = build_model(kernel(src), True)
    m = Machine(model, {"M": 64, "K": 256})
    plain = search(m, [m.initial()], True, 200_000)
    assert not plain.findings and plain.stats.complete
    both = src.replace(*EARLY)
    one = src.replace(*EARLY, 1)
    for variant in (both, one):
        run = temporal.explore(kernel(variant), True, OPTS)
        assert {f.code for f, _, _ in run.outcome.findings} == {"TS303"}
        assert "symmetry" not in run.outcome.argument


@pytest.mark.parametrize("name", ["ts303_stage_released_before_wgmma_wait",
                                  "ts308_wgmma_never_committed",
                                  "ts431_peeled_mma_after_epilogue", "ts301_mma_operand_"
                                  "not_proxy_fenced"])
def test_partial_order_reduction_keeps_the_verdicts(name):
    k = load_program(BAD / f"{name}.tsk").kernels[0]
    sizes = {s: 64 for s in k.sizes}
    sizes.update({"N": 128, "K": 256} if "K" in sizes else {})
    for own in (False, True):
        m = Machine(build_model(k, own), sizes)
        full = search(m, [m.initial()], False, 200_000)
        red = search(m, [m.initial()], True, 200_000)
        assert red.stats.states <= full.stats.states
        assert set(red.findings) == set(full.findings), (name, own)


# ---- against the interpreter --------------------------------------------------------------

TILE = """kernel gen(a: in global bf16[64, 64], b: in global bf16[64, 64],
           c: out global f32[64, 64])
  grid 1 block 128
{{
  shared sa: bf16[64, 64] layout swizzle128B(row_major) align 1024
  shared sb: bf16[64, 64] layout swizzle128B(row_major) align 1024
  fragment acc: f32[64, 64]
  for i in 0 .. 32 {{
    let e = i * 128 + thread
    sa[e / 64, e % 64] = a[e / 64, e % 64]
    sb[e / 64, e % 64] = b[e / 64, e % 64]
  }}
  fence proxy_async
  sync
  wgmma_fence
{body}  for r in 0 .. 32 {{
    c[row(acc, r), col(acc, r)] = acc[r]
  }}
}}
"""


class Lazy:
    """Threads first; the tensor cores only when no thread can move."""

    def start(self, blk: Any) -> None:
        pass

    def choose(self, blk: Any, ready: list[int], passable: list[int]) -> int:
        movable = ready + passable
        return min(movable) if movable else blk.nthreads


class Eager:
    """The tensor cores first: an MMA performs as soon as it is issued."""

    def start(self, blk: Any) -> None:
        pass

    def choose(self, blk: Any, ready: list[int], passable: list[int]) -> int:
        return blk.nthreads if blk.copies else min(ready + passable)


def program(ops: list[str]) -> str:
    body, first = [], True
    for op in ops:
        if op == "mma":
            k = len([x for x in body if "wgmma acc" in x]) % 4 * 16
            body.append(f"  wgmma acc {'=' if first else '+='} sa[0 : 64, {k} : 16] @ "
                        f"sb[0 : 64, {k} : 16].T\n")
            first = False
        elif op == "commit":
            body.append("  wgmma_commit\n")
        else:
            body.append(f"  wgmma_wait {op[-1]}\n")
    return TILE.format(body="".join(body))


def observed(k, inputs) -> bool:
    """Does the result depend on when the MMAs perform (or do they outlive the block)?"""
    outs = []
    for policy in (Eager(), Lazy()):
        try:
            outs.append(run_kernel(k, {}, inputs, policy=policy).tensors["c"])
        except InterpError as exc:
            assert exc.code == "TS431"
            return True
    return not np.array_equal(outs[0], outs[1], equal_nan=True)


@settings(max_examples=25, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(["mma", "commit", "wait0", "wait1", "wait2"]), min_size=1,
                max_size=7).filter(lambda ops: "mma" in ops), st.booleans())
@example(["mma", "commit", "wait0"], False)  # proved
@example(["mma", "commit", "mma", "commit", "wait1"], False)  # the newest group pending
@example(["mma", "commit", "mma", "wait0"], False)  # the second MMA never committed
@example(["mma", "commit", "wait2", "mma", "commit", "wait1"], False)  # the second pending
@example(["mma", "commit", "commit", "wait1"], False)  # an empty group: the MMA's may pend
def test_checker_agrees_with_the_interpreter_on_random_group_sequences(ops, drain):
    """MMAs, commits and `wgmma_wait N` in any order (`drain`: then a commit and
    `wgmma_wait 0`), then the epilogue reads the accumulator: refuted (TS308) exactly when
    the output depends on whether the tensor cores run first or last, or an MMA outlives
    the block (the interpreter's TS431)."""
    ops = ops + ["commit", "wait0"] if drain else ops
    k = kernel(program(ops))
    codes = {o.code for o in failing(api.verify_kernel(k, only=TEMPORAL)) if o.code}
    assert codes <= {"TS308"}, (ops, codes)
    assert bool(codes) == observed(k, random_inputs(k, {}, 5)), ops
    if drain:  # every MMA committed and covered before the epilogue
        assert not codes, ops
