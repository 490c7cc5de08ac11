"""The global-memory checker: races on out/inout tensors (TS217), kernels with no effect
(TS218), unused inputs (TS219).

Every verdict is checked on small kernels, and the race verdict against brute force: a
hypothesis family of generated index expressions (a write x[w] and a read x[r], w and r
quasi-affine in thread, block and a loop variable, with or without `sync`s between them)
is enumerated at small sizes -- every block, thread and iteration -- and "proved" must
mean that no size tried has a race, "refuted" must come with a counterexample that is a
race when evaluated concretely. The bad corpus kernels' races are also shown on the
reference interpreter: different schedules give different outputs.
"""

from __future__ import annotations

import functools
from pathlib import Path

import islpy as isl
import numpy as np
import pytest
from access_family import Family, families
from hypothesis import given, settings

from tilesafe.checkers import global_memory
from tilesafe.checkers.obligation import Obligation, Severity, Verdict
from tilesafe.checkers.registry import CHECKERS, CheckOptions, run_all
from tilesafe.frontend.load import compile_source, load_program
from tilesafe.semantics.interpreter.interp import random_inputs, run_kernel

ROOT = Path(__file__).resolve().parent.parent
BAD = ROOT / "corpus" / "bad"
GOOD = ROOT / "corpus" / "good"
OPTIONS = CheckOptions()


@functools.cache
def _kernel(src: str):
    return compile_source(src, "t.tsk").kernels[0]


def _obligations(src: str, options: CheckOptions = OPTIONS) -> list[Obligation]:
    return global_memory.check(_kernel(src), options)


def _race(src: str, tensor: str = "x", options: CheckOptions = OPTIONS) -> Obligation:
    [o] = [o for o in _obligations(src, options) if o.name.endswith(f" of {tensor}")]
    return o


ONE_D = """kernel k(x: {role} global f32[N], y: out global f32[N])
  where N % 256 == 0, N > 0, N <= 1073741824
  grid (N / 256) block 256
{{
  let i = block.x * 256 + thread
{body}
}}
"""


def one_d(body: str, role: str = "inout") -> str:
    return ONE_D.format(role=role, body=body)


# ---- TS217: verdicts ------------------------------------------------------------------------


def test_registered_after_access():
    names = list(CHECKERS)
    assert CHECKERS["global"] == "tilesafe.checkers.global_memory"
    assert names.index("global") == names.index("access") + 1


def test_own_element_in_place_is_proved():
    o = _race(one_d("  x[i] = x[i] * 2.0\n  y[i] = x[i]"))
    assert o.verdict is Verdict.PROVED and o.code is None


def test_in_place_stencil_is_refuted_with_a_concrete_pair():
    o = _race(one_d("  x[i] = x[i] + x[min(i + 1, N - 1)]\n  y[i] = 0.0"))
    assert o.verdict is Verdict.REFUTED and o.code == "TS217"
    cex = o.counterexample
    w, r = cex["writer"], cex["reader"]
    n = cex["sizes"]["N"]
    wi = w["block"][0] * 256 + w["thread"]
    ri = r["block"][0] * 256 + r["thread"]
    assert cex["element"] == [wi] == [min(ri + 1, n - 1)]  # one element, both touch it
    assert (w["block"], w["thread"]) != (r["block"], r["thread"])
    assert o.span.line == 6 and "line 6" in o.message


def test_read_of_another_blocks_output_is_refuted():
    src = one_d("  y[i] = x[i]\n  if block.x > 0 {\n    x[i] = y[i - 256]\n  } else {\n"
                "    x[i] = 0.0\n  }", role="out")
    o = _race(src, "y")
    assert o.verdict is Verdict.REFUTED and o.code == "TS217"
    assert o.counterexample["cross_block"] is True
    assert "never ordered" in o.message


def test_sync_orders_a_read_of_another_threads_write():
    body = "  y[i] = x[i] * 2.0\n{sync}  x[i] = y[i + 1 - 2 * (thread % 2)]"
    proved = _race(one_d(body.format(sync="  sync\n"), role="out"), "y")
    assert proved.verdict is Verdict.PROVED
    refuted = _race(one_d(body.format(sync=""), role="out"), "y")
    assert refuted.verdict is Verdict.REFUTED and refuted.code == "TS217"
    assert refuted.counterexample["cross_block"] is False
    assert "same number of `sync`s" in refuted.message


def test_read_before_the_write_is_ordered_by_sync_too():
    body = "  let v = x[i + 1 - 2 * (thread % 2)]\n  sync\n  x[i] = v * 2.0\n  y[i] = 0.0"
    assert _race(one_d(body)).verdict is Verdict.PROVED


def test_same_thread_reads_its_own_earlier_write():
    body = "  y[i] = x[i] * 2.0\n  x[i] = y[i] + 1.0"
    assert _race(one_d(body, role="out"), "y").verdict is Verdict.PROVED


def test_sync_epochs_follow_loops():
    """Iteration k writes y[.., k] and, after a `sync`, reads another thread's element of
    the same column; without the `sync` the read races with the write."""
    src = """kernel k(x: in global f32[N, 4], y: out global f32[N, 4], z: out global f32[N, 4])
  where N % 64 == 0, N > 0, N <= 1048576
  grid (N / 64) block 64
{{
  let i = block.x * 64 + thread
  for c in 0 .. 4 {{
    y[i, c] = x[i, c] + 1.0
{sync}    z[i, c] = y[block.x * 64 + 63 - thread, c]
  }}
}}
"""
    assert _race(src.format(sync="    sync\n"), "y").verdict is Verdict.PROVED
    o = _race(src.format(sync=""), "y")
    assert o.verdict is Verdict.REFUTED and "c" in o.counterexample["writer"]["loops"]


def test_named_barrier_hand_off_is_proved_and_never_refuted():
    src = """kernel k(x: in global f32[N], y: out global f32[N], z: out global f32[N])
  where N % 32 == 0, N > 0, N <= 1048576
  grid (N / 32) block 64
{{
  role first = warp 0 {{
    y[block.x * 32 + lane] = x[block.x * 32 + lane] * 2.0
    bar_arrive 1, 64
  }}
  role second = warp 1 {{
{before}    bar_sync 1, 64
{after}  }}
}}
"""
    read = "    z[block.x * 32 + lane] = y[block.x * 32 + 31 - lane]\n"
    assert _race(src.format(before="", after=read), "y").verdict is Verdict.PROVED
    # read before the barrier: a race, but the model does not claim to know every ordering
    # a hand-off can give, so it says unknown rather than refuted
    o = _race(src.format(before=read, after=""), "y")
    assert o.verdict is Verdict.UNKNOWN and o.code == "TS292"


TMA_INPLACE = """kernel k(x: inout global f16[M, N])
  where M % 64 == 0, N % 64 == 0, M > 0, N > 0, M <= 1048576, N <= 1048576
  grid ({grid}, N / 64) block 128
{{
  tensormap tx = tiled(x, box [64, 64], swizzle 128B)
  shared tile: f16[64, 64] layout swizzle128B(row_major) align 1024
  mbarrier ready count 1 guards tile
  if thread == 0 {{
    init ready
    fence mbarrier_init
  }}
  sync
  role leader = warp 0, elect one {{
    arrive ready, expect_tx bytes(tile)
    tma_load tile <- tx[block.x * {step}, block.y * 64] signal ready
  }}
  wait ready parity 0
  fence proxy_async
  sync
  role storer = warp 0, elect one {{
    tma_store tx[block.x * {step}, block.y * 64] <- tile
    commit_group
    wait_group 0
  }}
}}
"""


def test_tma_in_place_tile_is_left_open_not_refuted():
    """A TMA load and a TMA store of the same tile in one block: what orders the copies
    (the mbarrier, wait_group) is outside the model, so the verdict is unknown."""
    o = _race(TMA_INPLACE.format(grid="M / 64", step=64))
    assert o.verdict is Verdict.UNKNOWN and o.code == "TS292" and "asynchronous" in o.message


def test_tma_tiles_overlapping_between_blocks_are_refuted():
    o = _race(TMA_INPLACE.format(grid="M / 64", step=32))
    assert o.verdict is Verdict.REFUTED and o.code == "TS217"
    assert o.counterexample["cross_block"] is True


def test_unmodelled_guard_leaves_a_candidate_open():
    """The racing read sits under a guard that reads memory: dropped, the pair exists on
    the over-approximation only, so no refutation (TS291)."""
    body = "  y[i] = x[i]\n  if x[i] > 0.0 {\n    x[i] = y[i + 1 - 2 * (thread % 2)]\n  }"
    o = _race(one_d(body, role="inout"), "y")
    assert o.verdict is Verdict.UNKNOWN and o.code == "TS291"


def test_isl_budget_gives_unknown_never_a_verdict(monkeypatch):
    k = load_program(BAD / "ts217_halo_tiles_overlap.tsk").kernels[0]
    monkeypatch.setattr(global_memory, "OPS_PER_MS", 0)
    monkeypatch.setattr(global_memory, "_MIN_OPERATIONS", 1)  # the relations past it
    [o] = global_memory.check(k, OPTIONS)
    assert o.verdict is Verdict.UNKNOWN and o.code == "TS290"
    assert "operation budget" in o.message
    # the relations built, the race query itself past its budget
    monkeypatch.setattr(global_memory, "_MIN_OPERATIONS", 10**7)
    monkeypatch.setattr(isl.Context, "reset_operations",
                        lambda self: self.set_max_operations(1))
    [o] = global_memory.check(k, OPTIONS)
    assert o.name.endswith("read of x") and o.verdict is Verdict.UNKNOWN
    assert o.code == "TS290" and "operation budget" in o.message


# ---- TS218 / TS219 ----------------------------------------------------------------------------

NO_OUT = """kernel k(x: {role}global f32[N], b: {role}global f32[N])
  where N > 0, N <= 1073741824
  grid ((N + 255) / 256) block 256
{{
  let i = block.x * 256 + thread
  if i < N {{
{body}
  }}
}}
"""


def _effect(src: str) -> Obligation:
    [o] = [o for o in _obligations(src) if o.name.endswith("writes a global tensor")]
    return o


def test_kernel_without_any_write_has_no_effect():
    o = _effect(NO_OUT.format(role="in ", body="    let v = x[i] + b[i]"))
    assert o.verdict is Verdict.REFUTED and o.code == "TS218" and o.severity is Severity.ERROR


def test_write_that_never_runs_has_no_effect():
    o = _effect(NO_OUT.format(role="in ", body="    let v = x[i] + b[i]\n"
                              "    if N < 0 {\n      x[i] = v\n    }"))
    assert o.verdict is Verdict.REFUTED and o.code == "TS218" and o.method == "isl"


def test_written_input_is_an_effect_and_ts215s_business():
    o = _effect(NO_OUT.format(role="in ", body="    x[i] = b[i]"))
    assert o.verdict is Verdict.PROVED


def test_undeclared_roles_deleted_store_is_ts218_beside_ts216():
    """The issue's case: roles inferred (all `in`: nothing is written), the only store
    deleted -- it used to verify with only the TS216 warnings."""
    k = _kernel(NO_OUT.format(role="", body="    let v = x[i] + b[i]"))
    failing = {(o.code, o.severity) for o in run_all(k, OPTIONS, only=("access", "global"))
               if o.verdict is not Verdict.PROVED}
    assert failing == {("TS216", Severity.WARNING), ("TS218", Severity.ERROR)}


def test_no_effect_obligation_only_without_outputs():
    src = one_d("  x[i] = 1.0", role="out")
    assert not [o for o in _obligations(src) if o.name.endswith("writes a global tensor")]


UNUSED = """kernel k(x: in global f32[N], b: in global f32[N], y: {yrole} global f32[N])
  where N > 0, N <= 1073741824
  grid ((N + 255) / 256) block 256
  {ensures}
{{
  let i = block.x * 256 + thread
  if i < N {{
    {body}
  }}
}}
"""


def _unused(src: str) -> dict[str, Obligation]:
    return {o.name.split()[2]: o for o in _obligations(src) if " input " in o.name}


def test_unused_input_is_a_warning():
    obs = _unused(UNUSED.format(yrole="out", ensures="", body="y[i] = x[i]"))
    assert obs["x"].verdict is Verdict.PROVED
    b = obs["b"]
    assert b.verdict is Verdict.REFUTED and b.code == "TS219"
    assert b.severity is Severity.WARNING and not b.failed and b.span.line == 1


def test_input_read_only_in_a_guard_or_a_bound_is_used():
    obs = _unused(UNUSED.format(yrole="out", ensures="",
                                body="if b[i] > 0.0 {\n      y[i] = x[i]\n    } else {\n"
                                     "      y[i] = 0.0\n    }"))
    assert all(o.verdict is Verdict.PROVED for o in obs.values())


def test_input_named_only_by_the_spec_is_unused():
    obs = _unused(UNUSED.format(yrole="out", ensures="ensures y[i] == x[i] + b[i]",
                                body="y[i] = x[i]"))
    assert obs["b"].code == "TS219" and "only the 'ensures' clause" in obs["b"].message


def test_unused_output_is_not_ts219():
    """An unused `out` parameter is TS212's error (unwritten), not also a warning."""
    obs = _obligations(UNUSED.format(yrole="out", ensures="", body="let v = x[i] + b[i]"))
    assert sorted(o.name for o in obs if " input " in o.name) == ["k: input b is read",
                                                                  "k: input x is read"]
    assert not [o for o in obs if o.code == "TS219"]


# ---- the corpus -------------------------------------------------------------------------------


def test_good_corpus_has_no_finding():
    for path in sorted(GOOD.glob("*.tsk")):
        k = load_program(path).kernels[0]
        bad = [o for o in global_memory.check(k, OPTIONS) if o.verdict is not Verdict.PROVED]
        assert not bad, f"{path.name}: {bad[0].message}"


def test_good_corpus_reads_an_output_somewhere():
    """So that the corpus exercises the proof, not only its trivial case."""
    proved = [o for p in sorted(GOOD.glob("*.tsk"))
              for o in global_memory.check(load_program(p).kernels[0], OPTIONS)
              if o.code is None and "ordered with every read" in o.message]
    assert len(proved) >= 2


def _outputs(path: Path, sizes: dict[str, int], seeds: range) -> set[bytes]:
    k = load_program(path).kernels[0]
    inputs = random_inputs(k, sizes, 1)
    outs = set()
    for seed in seeds:
        res = run_kernel(k, sizes, {n: np.array(a, copy=True) for n, a in inputs.items()},
                         seed=seed, policy="pct")
        outs.add(b"".join(np.ascontiguousarray(res.tensors[t.name]).tobytes()
                          for t in k.params if t.role.written))
    return outs


def test_the_bad_races_are_real_on_the_interpreter():
    """Schedules of the reference interpreter disagree on the racing kernels' outputs,
    and agree on the good in-place one."""
    assert len(_outputs(BAD / "ts217_inplace_stencil.tsk", {"N": 8}, range(6))) > 1
    assert len(_outputs(BAD / "ts217_missing_sync_pair_sums.tsk", {"N": 256}, range(4))) > 1
    assert len(_outputs(GOOD / "scale_inplace.tsk", {"N": 8}, range(6))) == 1
    assert len(_outputs(GOOD / "pair_sums.tsk", {"N": 256}, range(4))) == 1


# ---- brute force ------------------------------------------------------------------------------


def races(f: Family, n: int) -> list[tuple]:
    writes: dict[int, list] = {}
    reads: dict[int, list] = {}
    for kind, b, t, k, _, epoch, e in f.accesses(n):
        (writes if kind == "w" else reads).setdefault(e, []).append((b, t, k, epoch))
    return [(w, r, e) for e, ws in writes.items() for w in ws for r in reads.get(e, ())
            if is_race(w, r)]


def is_race(w: tuple, r: tuple) -> bool:
    """Two accesses of one element, a write and a read: a race unless one thread ran both
    or a `sync` separates them in one block."""
    (bw, tw, _, ew), (br, tr, _, er) = w, r
    if (bw, tw) == (br, tr):
        return False
    return bw != br or ew == er


family = families()


@settings(max_examples=80, deadline=None)
@given(family)
def test_race_verdict_agrees_with_brute_force(f: Family):
    o = _race(f.source())
    assert o.verdict in (Verdict.PROVED, Verdict.REFUTED), o.message
    found = {n: races(f, n) for n in range(1, 10)}
    if o.verdict is Verdict.PROVED:
        assert not any(found.values()), (f.source(), found)
        return
    cex = o.counterexample
    n = cex["sizes"]["N"]
    w, r = cex["writer"], cex["reader"]
    wk, rk = w["loops"]["k"], r["loops"]["k"]
    [e] = cex["element"]
    assert 0 <= e < n
    assert f.w.at(w["thread"], w["block"][0], wk) == e == f.r.at(r["thread"], r["block"][0], rk)
    wins = [a for a in f.accesses(n) if a[0] == "w" and a[1:4] == (w["block"][0], w["thread"], wk)]
    rins = [a for a in f.accesses(n) if a[0] == "r" and a[1:4] == (r["block"][0], r["thread"], rk)]
    assert wins and rins
    assert is_race(wins[0][1:4] + wins[0][5:6], rins[0][1:4] + rins[0][5:6])


# ---- shapes a held-out tester writes (issue 17, item 2) ------------------------------------

HELD_OUT = {
    # x[i] += x[i - 1]: the left neighbour, not the right one of the bad corpus
    "left_neighbour": ("""kernel k(x: inout global f32[N])
  where N > 1, N <= 1048576
  grid ((N + 127) / 128) block 128
{
  let i = block.x * 128 + thread
  if i > 0 && i < N {
    x[i] = x[i] + x[i - 1]
  }
}
""", "x", "TS217"),
    # a square matrix transposed in place: every element read by the thread that
    # overwrites its mirror image, across blocks
    "transpose_in_place": ("""kernel k(x: inout global f32[N, N])
  where N % 32 == 0, N > 0, N <= 4096
  grid (N / 32, N / 32) block 32
{
  for r in 0 .. 32 {
    x[block.y * 32 + r, block.x * 32 + thread] = x[block.x * 32 + thread, block.y * 32 + r]
  }
}
""", "x", "TS217"),
    # a gathered read of what another thread writes
    "gathered": ("""kernel k(ids: in global i32[N], x: inout global f32[N])
  where N > 0, N <= 65536
  grid ((N + 127) / 128) block 128
  requires 0 <= ids[t] && ids[t] < N
{
  let i = block.x * 128 + thread
  if i < N {
    x[i] = x[ids[i]] * 2.0
  }
}
""", "x", "TS217"),
    # a TMA store's tile read back by the block of the next tile
    "tma_store_read_by_next_block": ("""kernel k(src: in global f16[M, N],
         dst: out global f16[M, N], z: out global f16[M, N])
  where M % 64 == 0, N % 64 == 0, M > 0, N > 0, M <= 4096, N <= 4096
  grid (M / 64, N / 64) block 128
{
  tensormap tout = tiled(dst, box [64, 64], swizzle 128B)
  shared tile: f16[64, 64] layout swizzle128B(row_major) align 1024

  for e in 0 .. 32 {
    let r = e * 2 + thread / 64
    tile[r, thread % 64] = src[block.x * 64 + r, block.y * 64 + thread % 64]
  }
  fence proxy_async
  sync
  role storer = warp 0, elect one {
    tma_store tout[block.x * 64, block.y * 64] <- tile
    commit_group
    wait_group 0
  }
  sync
  for e in 0 .. 32 {
    let r = e * 2 + thread / 64
    z[block.x * 64 + r, block.y * 64 + thread % 64] =
      dst[min(block.x * 64 + r + 64, M - 1), block.y * 64 + thread % 64]
  }
}
""", "dst", "TS217"),
    # an inout tile TMA-loaded by the block before the one that rewrites it
    "tma_load_of_an_inout_tile": ("""kernel k(x: inout global f16[M, N])
  where M % 64 == 0, N % 64 == 0, M > 64, N > 0, M <= 4096, N <= 4096
  grid (M / 64, N / 64) block 128
{
  tensormap tin = tiled(x, box [64, 64], swizzle 128B)
  shared tile: f16[64, 64] layout swizzle128B(row_major) align 1024
  mbarrier ready count 1 guards tile

  if thread == 0 {
    init ready
    fence mbarrier_init
  }
  sync
  if thread == 0 {
    arrive ready, expect_tx bytes(tile)
    tma_load tile <- tin[min(block.x * 64 + 64, M - 64), block.y * 64] signal ready
  }
  wait ready parity 0
  for e in 0 .. 32 {
    let r = e * 2 + thread / 64
    x[block.x * 64 + r, block.y * 64 + thread % 64] = tile[r, thread % 64]
  }
}
""", "x", "TS217"),
}
ROLES = """kernel k(x: in global f32[N], y: out global f32[N], z: out global f32[N])
  where N % 32 == 0, N > 0, N <= 1048576
  grid (N / 32) block 64
{{
{prologue}  role writer = warp 0 {{
    y[block.x * 32 + lane] = x[block.x * 32 + lane] * 2.0
{after_write}  }}
{between}  role reader = warp 1 {{
{before_read}    z[block.x * 32 + lane] = y[block.x * 32 + (lane + 1) % 32]
  }}
}}
"""
MBARRIER = dict(prologue="  mbarrier done count 32\n\n  if thread == 0 {\n    init done\n"
                         "    fence mbarrier_init\n  }\n  sync\n",
                after_write="    arrive done\n", between="", before_read="    wait done parity 0\n")


@pytest.mark.parametrize("name", sorted(HELD_OUT))
def test_held_out_race_shapes_are_refuted(name: str):
    src, tensor, code = HELD_OUT[name]
    o = _race(src, tensor)
    assert o.verdict is Verdict.REFUTED and o.code == code, o.message


@pytest.mark.parametrize("fill,verdict,code", [
    # a sync between the roles orders the write before the read
    (dict(prologue="", after_write="", between="  sync\n", before_read=""), Verdict.PROVED,
     None),
    # a named-barrier hand-off too (its phases are participation counts)
    (dict(prologue="", after_write="    bar_arrive 1, 64\n", between="",
          before_read="    bar_sync 1, 64\n"), Verdict.PROVED, None),
    # nothing between them: a race inside the block
    (dict(prologue="", after_write="", between="", before_read=""), Verdict.REFUTED, "TS217"),
    # an mbarrier hand-off orders them, but the model does not follow mbarrier phases for
    # global memory: left open (TS292), never a false refutation and never a false proof
    (MBARRIER, Verdict.UNKNOWN, "TS292"),
])
def test_writes_in_one_role_read_in_another(fill: dict, verdict: Verdict, code: str | None):
    o = _race(ROLES.format(**fill), "y")
    assert o.verdict is verdict and o.code == code, o.message
