"""Clusters in the reference interpreter (docs/semantics.md, "Clusters"): the CTAs of a
cluster share a schedule, distributed shared memory, remote arrivals, multicast delivery
and the cluster barrier. The corpus/cluster kernels reproduce their NumPy references bit
for bit under random and adversarial (PCT) schedules, and every misuse the interpreter
can see is its error: a CTA used after it exited (TS432), before the cluster met (TS433),
a rank or mask outside the cluster (TS434), a grid that is not made of clusters (TS221)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

from tilesafe.frontend.load import compile_source, load_program
from tilesafe.semantics.interpreter.interp import InterpError, random_inputs, run_kernel

HERE = Path(__file__).resolve().parent
CLUSTER = HERE.parent / "corpus" / "cluster"


def _refs():
    spec = importlib.util.spec_from_file_location("cluster_refs", HERE / "cluster_refs.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("cluster_refs", module)
    spec.loader.exec_module(module)
    return module.CASES


CASES = _refs()


def kernel_of(name: str):
    return load_program(CLUSTER / f"{name}.tsk").kernels[0]


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize(("policy", "seed"), [("random", 0), ("pct", 1), ("pct", 2)])
def test_bit_exact(name: str, policy: str, seed: int):
    ref, sizes = CASES[name]
    k = kernel_of(name)
    size = sizes[0] if policy == "random" else sizes[-1]
    inputs = random_inputs(k, size, seed)
    got = run_kernel(k, size, inputs, seed=seed, policy=policy)
    assert got.engine == "scalar"
    for out, want in ref(size, inputs).items():
        np.testing.assert_array_equal(got.tensors[out], want, err_msg=f"{name}.{out} {size}")


def test_auto_engine_falls_back_to_scalar():
    k = kernel_of("multicast_copy")
    size = {"M": 64, "N": 64}
    got = run_kernel(k, size, random_inputs(k, size, 0))
    assert got.engine == "scalar" and "cluster" in got.fallback


def test_schedule_replays():
    k = kernel_of("cluster_row_sum")
    size = {"M": 2}
    inputs = random_inputs(k, size, 3)
    first = run_kernel(k, size, inputs, seed=3, policy="pct")
    again = run_kernel(k, size, inputs, schedule=first.schedule)
    np.testing.assert_array_equal(first.tensors["y"], again.tensors["y"])


HEAD = """kernel k(x: in global f32[N], y: out global f32[N])
  where N % 256 == 0, N > 0, N <= 4096
  grid (N / 128) block 128 cluster 2
{
  shared part: f32[128]
  mbarrier ready count 128
"""


def run_body(body: str, head: str = HEAD, n: int = 256, policy: str = "pct", seed: int = 0):
    text = head + "".join(f"  {line}\n" for line in body.splitlines()) + "}\n"
    k = compile_source(text, "k.tsk").kernels[0]
    size = {"N": n}
    return run_kernel(k, size, random_inputs(k, size, seed), seed=seed, policy=policy)


def code_of(body: str, **kw) -> str:
    with pytest.raises(InterpError) as err:
        run_body(body, **kw)
    return err.value.code


EXCHANGE = """part[thread] = x[block.x * 128 + thread]
cluster_sync
y[block.x * 128 + thread] = part@(1 - cta_rank)[thread]
"""


def test_exchange_through_dsmem_needs_the_trailing_cluster_barrier():
    """Each CTA reads its peer's partials: without a cluster barrier before exit the
    peer's memory may be gone (TS432 under some schedule); with it every run is exact."""
    for seed in range(6):
        out = run_body(EXCHANGE + "cluster_sync", seed=seed)
        x = out.tensors["x"].reshape(-1, 2, 128)
        np.testing.assert_array_equal(out.tensors["y"].reshape(-1, 2, 128), x[:, ::-1])
    codes = set()
    for seed in range(6):
        try:
            run_body(EXCHANGE, seed=seed)
        except InterpError as err:
            codes.add(err.code)
    assert codes == {"TS432"}


def test_peer_before_the_cluster_met():
    assert code_of("part@1[thread] = 1.0\ny[block.x * 128 + thread] = 0.0") == "TS433"


def test_rank_outside_the_cluster():
    body = ("cluster_sync\nlet r = cta_rank + 1\ny[block.x * 128 + thread] = part@r[thread]\n"
            "cluster_sync")
    assert code_of(body, policy="random") == "TS434"


def test_grid_not_a_multiple_of_the_cluster():
    head = HEAD.replace("grid (N / 128)", "grid (N / 128 + 1)")
    assert code_of("cluster_sync", head=head) == "TS221"


REMOTE = """if thread == 0 {
  init ready
  fence mbarrier_init
}
cluster_sync
if cta_rank == 1 {
  part@0[thread] = x[block.x * 128 + thread]
  arrive ready@0, scope cluster
}
if cta_rank == 0 {
  wait ready parity 0, scope cluster
  y[block.x * 128 + 128 + thread] = part[thread]
  y[block.x * 128 + thread] = x[block.x * 128 + thread]
}
"""


def test_remote_arrive_hands_over_dsmem_writes():
    """CTA 1 writes its slice into CTA 0's shared memory and arrives on CTA 0's barrier;
    CTA 0 waits and stores both slices: y == x under every schedule."""
    for policy, seed in (("random", 0), ("pct", 1), ("pct", 4)):
        out = run_body(REMOTE, policy=policy, seed=seed, n=512)
        np.testing.assert_array_equal(out.tensors["y"], out.tensors["x"])


def test_remote_arrive_on_an_unpublished_init():
    body = REMOTE.replace("  fence mbarrier_init\n", "").replace(
        "cluster_sync\n", "cluster_arrive relaxed\ncluster_wait\n", 1)
    assert code_of(body, policy="random") == "TS405"


def test_mma_multicast_equals_its_specification():
    """corpus/cluster/mma_multicast.tsk on exact inputs (small integers: every partial sum
    exact in f32) at two sizes: its `ensures` is checked by testing, here and on the GPU."""
    from tilesafe.semantics.interpreter.interp_io import tensor_shapes
    from tilesafe.semantics.value import spec_eval
    from tilesafe.semantics.value.spec_inputs import value_inputs

    k = kernel_of("mma_multicast")
    for sizes in ({"M": 128, "N": 128, "K": 64}, {"M": 256, "N": 256, "K": 320}):
        inputs = value_inputs(k, sizes, 500, True)
        for policy, seed in (("random", 0), ("pct", 1)):
            got = run_kernel(k, sizes, inputs, seed=seed, policy=policy).tensors["c"]
            want = spec_eval.expected(k, k.ensures[0], sizes, inputs, tensor_shapes(k, sizes))
            np.testing.assert_array_equal(got, want.astype(got.dtype))


@pytest.mark.slow
def test_multicast_gemm_equals_its_specification():
    """bench/kernels/gemm_multicast.tsk (clusters of two 384-thread CTAs, B multicast,
    wgmma) on exact inputs (small integers: every partial sum exact in f32), a ragged size
    whose odd row-tile count leaves CTA 1 of the last cluster past M (about 20 s)."""
    from tilesafe.semantics.interpreter.interp_io import tensor_shapes
    from tilesafe.semantics.value import spec_eval
    from tilesafe.semantics.value.spec_inputs import value_inputs

    k = load_program(HERE.parent / "bench" / "kernels" / "gemm_multicast.tsk").kernels[0]
    sizes = {"M": 200, "N": 264, "K": 136}
    inputs = value_inputs(k, sizes, 500, True)
    got = run_kernel(k, sizes, inputs, seed=0).tensors["c"]
    want = spec_eval.expected(k, k.ensures[0], sizes, inputs, tensor_shapes(k, sizes))
    np.testing.assert_array_equal(got.view(np.uint16), want.astype(got.dtype).view(np.uint16))
