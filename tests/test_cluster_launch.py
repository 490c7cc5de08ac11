"""A cluster kernel's launch as plain data (codegen/plan.py -> gpu/launcher.py): the cluster
dimension travels in the LaunchSpec (JSON) to cuLaunchKernelEx's attribute, and a grid that
is not made of clusters is refused before anything runs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tilesafe.codegen.compile import compile_kernel
from tilesafe.codegen.launch_spec import LaunchSpec
from tilesafe.codegen.plan import ContractError, bind
from tilesafe.frontend.load import compile_source, load_program

ROOT = Path(__file__).resolve().parent.parent


def test_cluster_dimension_travels_in_the_launch_spec():
    k = load_program(ROOT / "corpus" / "cluster" / "multicast_copy.tsk").kernels[0]
    spec = bind(k, compile_kernel(k), {"M": 128, "N": 64})
    assert spec.cluster == (2, 1, 1) and spec.grid == (4, 1, 1)
    again = LaunchSpec.from_json(json.loads(json.dumps(spec.to_json())))
    assert again == spec


def test_ordinary_launch_spec_has_no_cluster():
    k = load_program(ROOT / "corpus" / "good" / "elementwise.tsk").kernels[0]
    spec = bind(k, compile_kernel(k), {"N": 256})
    assert spec.cluster is None
    data = spec.to_json()
    del data["cluster"]  # a spec written before clusters existed still reads
    assert LaunchSpec.from_json(data) == spec


def test_grid_not_made_of_clusters_is_refused():
    k = compile_source("""kernel k(x: in global f32[N], y: out global f32[N])
  where N % 128 == 0, N > 0, N <= 4096
  grid (N / 128) block 128 cluster 2
{
  cluster_sync
  y[block.x * 128 + thread] = x[block.x * 128 + thread]
}
""", "k.tsk").kernels[0]
    with pytest.raises(ContractError):
        bind(k, compile_kernel(k), {"N": 384})
    assert bind(k, compile_kernel(k), {"N": 512}).cluster == (2, 1, 1)
