"""The reference interpreter shows what the temporal checkers refute.

Every TS3xx/TS4xx bad kernel's counterexample is replayed in the interpreter (the checker's run
followed class move by class move: semantics/temporal/guide.py, semantics/interpreter/schedule.py),
then the adversarial PCT scheduler goes on; plain PCT runs are tried too. Some run of a fixed,
seeded set must fail: an interpreter error (deadlock, proxy fence, a copy in flight at exit, ...) or
an output that differs from the NumPy reference. Everything is seeded, so the test is
deterministic."""

from __future__ import annotations

import functools
import re
import sys
from pathlib import Path

import numpy as np
import pytest

from tilesafe.checkers import temporal
from tilesafe.checkers.registry import CheckOptions
from tilesafe.semantics.expr import fp
from tilesafe.semantics.interpreter.interp import InterpError, random_inputs, run_kernel
from tilesafe.semantics.interpreter.schedule import Guide, GuidedPolicy, make_policy

sys.path.insert(0, str(Path(__file__).resolve().parent))
import corpus_refs as R  # noqa: E402
from corpus_files import SLOW_BAD, load_corpus
from schedules import failure, shows_failure  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
# Cluster kernels are not replayed from the checker's run here (the run is over the cluster's
# view, docs/temporal.md §16): tests/test_cluster_temporal.py::test_interpreter_shows_it runs
# the lifetime bugs under PCT schedules, and TS309 (a scope) is not observable on the
# sequentially consistent interpreter. TS434 is the access checker's.
CLUSTER_CLAUSE = re.compile(r"^\s*grid .* block .* cluster\b", re.MULTILINE)
BAD = sorted(p for p in (ROOT / "corpus" / "bad").glob("ts[34]*.tsk")
             if not CLUSTER_CLAUSE.search(p.read_text()))
OPTS = CheckOptions()


def ref_tile_row_sums(s, x):
    """ts306 (fixed): rowsum[r, b] = sequential f32 sum of the 32 columns of tile b of row
    r, the overhang counting 0."""
    m, n = s["M"], s["N"]
    a = R.f32(x["x"])
    out = np.zeros((m, (n + 31) // 32), np.float32)
    for b in range(out.shape[1]):
        acc = np.zeros(m, np.float32)
        for j in range(32):
            col = b * 32 + j
            acc = acc + (a[:, col] if col < n else np.float32(0.0))
        out[:, b] = acc
    return {"rowsum": out}


def ref_sum(s, x):
    return {"dst": R.to_f16(R.f32(x["a"]) + R.f32(x["b"]))}


def ref_matvec_halves(s, x):
    """ts413 (fixed): the warp_specialized partials, y0 = p0 + p1, y1 = p2 + p3."""
    a, v = R.f32(x["a"]), R.f32(x["x"])
    acc = np.zeros((s["M"], 4), np.float32)
    quarters = np.arange(4) * 16
    for k in range(s["N"] // 64):
        for j in range(16):
            cols = k * 64 + quarters + j
            acc = acc + a[:, cols] * v[cols]
    return {"y0": acc[:, 0] + acc[:, 1], "y1": acc[:, 2] + acc[:, 3]}


def ref_gemm_bt(s, x):
    """The tensor-core kernels: C = A B^T of bf16 operands (exact in f32 on these inputs)."""
    a, b = R.f32(x["a"]).astype(np.float64), R.f32(x["b"]).astype(np.float64)
    return {"c": (a @ b.T).astype(np.float32)}


def ref_gemm_bf16(s, x):
    """corpus/wgmma/gemm.tsk (fixed): C = A B^T, the exact sum rounded once to bf16."""
    a, b = R.f32(x["a"]).astype(np.float64), R.f32(x["b"]).astype(np.float64)
    return {"c": fp.f32_array_to_bf16((a @ b.T).astype(np.float32))}


def ref_xy_copy(s, x):
    """ts302_warp_stride (fixed): y = x, bit for bit."""
    return {"y": np.array(x["x"], copy=True)}


COPY = ({"M": 64, "N": 256}, R.ref_copy)
REFS = {  # bad kernel -> (sizes, reference of the kernel its bug was planted in)
    # wgmma (first: more specific than the ts3xx prefixes below); rings that wrap
    # the persistent GEMM's nested loops (docs/temporal.md §15): the launches of the
    # counterexamples, two tiles of block (0, 0) or one tile with K / 64 > STAGES
    "ts408_gemm": ({"M": 1, "N": 1032, "K": 8}, ref_gemm_bf16),
    "ts303_gemm": ({"M": 1, "N": 8, "K": 264}, ref_gemm_bf16),
    "ts302_gemm": ({"M": 1, "N": 1032, "K": 8}, ref_gemm_bf16),
    "ts301_mma": ({"M": 64, "N": 64}, ref_gemm_bt),
    "ts303_stage_released_before_wgmma": ({"M": 64, "N": 128, "K": 256}, ref_gemm_bt),
    "ts303_wgmma_wait_1": ({"M": 64, "N": 128, "K": 320}, ref_gemm_bt),
    "ts308_persistent": ({"M": 320}, ref_gemm_bt),
    "ts308": ({"M": 64, "N": 64}, ref_gemm_bt),
    "ts431_peeled_mma": ({"M": 64, "N": 64}, ref_gemm_bt),
    "ts301": ({"M": 64, "N": 64}, R.ref_affine_f16),
    "ts302_warp_stride": ({"N": 256}, ref_xy_copy),  # gfx942: 64-lane wavefronts
    "ts302_reduction": ({"M": 8, "N": 32}, R.ref_row_reduce),
    "ts302_tile": ({"M": 32, "N": 96}, R.ref_transpose),
    "ts302_store": ({"M": 64, "N": 256}, R.ref_affine_f16),
    "ts304_transpose": ({"M": 32, "N": 32}, R.ref_transpose),
    "ts306_tma_store": ({"M": 64, "N": 64}, R.ref_affine_f16),
    "ts306": ({"M": 40, "N": 70}, ref_tile_row_sums),
    "ts307": ({"M": 64, "N": 64}, R.ref_affine_f16),
    "ts404": ({"M": 256, "N": 128}, R.ref_copy),
    "ts407": ({"M": 64, "N": 256}, ref_sum),
    "ts430": ({"M": 64, "N": 64}, R.ref_affine_f16),
    "ts303_stage_operand": ({"M": 64, "N": 576}, R.ref_rowdot),
    "ts408_persistent": ({"M": 384}, R.ref_copy),
    "ts414_named": ({"M": 64, "N": 320}, R.ref_matvec),
    "ts413_named_barrier_id_shared": ({"M": 64, "N": 320}, ref_matvec_halves),
    "ts413_named_barrier_id_zero": ({"M": 64, "N": 320}, R.ref_matvec),
    "ts302_named": ({"M": 2, "N": 384}, R.ref_double),
    "ts421_named": ({"M": 64, "N": 320}, R.ref_matvec),
}


def reference(path: Path):
    for prefix, case in REFS.items():
        if path.stem.startswith(prefix):
            return case
    return COPY


def expected(path: Path) -> str:
    return re.match(r"//\s*expect:\s*(TS\d{3})", path.read_text().splitlines()[0]).group(1)


@functools.cache
def kernel_of(path: Path):
    return load_corpus(path).kernels[0]


def witness(path: Path) -> tuple[str, str] | None:
    """The first failing run of the fixed set (tests/schedules.py): (how, what failed)."""
    k = kernel_of(path)
    sizes, ref = reference(path)
    g = temporal.interpreter_guide(k, OPTS, expected(path), sizes)
    if g is None:  # the run does not fit these sizes: follow it in its own launch
        g = temporal.interpreter_guide(k, OPTS, expected(path))
        assert g is not None, "no counterexample to replay"
        sizes = g[0]
    return shows_failure(k, sizes, ref, g[1])


@pytest.mark.parametrize("path", [pytest.param(p, id=p.name, marks=pytest.mark.slow if p.name in
                                               SLOW_BAD else ()) for p in BAD])
def test_refuted_kernel_fails_in_the_interpreter(path: Path):
    shown = witness(path)
    assert shown is not None, f"{path.name}: no run of the interpreter shows the failure"


def test_counterexample_replay_is_followed():
    """The guide of a pipeline's counterexample is followed to its end (the interpreter's
    threads complete each class move; copies land when the run says so)."""
    path = ROOT / "corpus" / "bad" / "ts430_prefetch_past_last_tile.tsk"
    k = kernel_of(path)
    sizes, guide = temporal.interpreter_guide(k, OPTS)
    assert isinstance(guide, Guide) and guide.steps
    policy = make_policy("pct", 0, guide)
    assert isinstance(policy, GuidedPolicy)
    inputs = random_inputs(k, sizes, 1)
    with pytest.raises(InterpError) as info:
        run_kernel(k, sizes, inputs, policy=policy)
    assert info.value.code == "TS430"
    # Every move was followed; the error is raised as the last one ends the last thread.
    assert policy.abandoned is None and policy.followed >= len(guide.steps) - 1


def test_pct_is_deterministic():
    k = kernel_of(ROOT / "corpus" / "good" / "pipeline2.tsk")
    sizes = {"M": 64, "N": 192}
    inputs = random_inputs(k, sizes, 1)
    a = run_kernel(k, sizes, inputs, seed=3, policy="pct")
    b = run_kernel(k, sizes, inputs, seed=3, policy="pct")
    assert a.schedule == b.schedule
    c = run_kernel(k, sizes, inputs, schedule=a.schedule)  # and replays exactly
    assert c.schedule[:len(a.schedule)] == a.schedule


@pytest.mark.parametrize("name", ["pipeline2", "transpose_swizzled", "tma_store_pipeline",
                                  "row_reduce", "warp_specialized"])
def test_good_kernels_are_correct_under_pct(name: str):
    case = R.CASES[name]
    k = kernel_of(ROOT / "corpus" / "good" / f"{name}.tsk")
    inputs = random_inputs(k, case.quick, 1)
    want = case.ref(case.quick, inputs)
    for seed in range(2):
        assert failure(k, case.quick, inputs, want, seed=seed, policy="pct") is None
