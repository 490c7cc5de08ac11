"""One launch of a compiled kernel at concrete sizes, as plain data (JSON).

Why a module of its own, importing nothing heavy: it is the contract between the host that
compiled the kernel (codegen/plan.py builds it, with the IR, ISL and the checkers at hand)
and the GPU side (gpu/launcher.py), which must run where only numpy and cuda-python exist.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class LaunchSpec:
    """One launch at concrete sizes. `params` lists, in the kernel's parameter order, dicts
    with "kind" tensor (name, dtype, shape), size (name, value) or tensormap (name, tensor,
    spec: the TensorMapSpec fields for cuTensorMapEncodeTiled). `written`: tensors the
    kernel may write (the others are its inputs)."""

    kernel: str
    ptx: str
    grid: tuple[int, int, int]
    block: int
    smem_bytes: int
    params: tuple[dict[str, Any], ...]
    written: tuple[str, ...]
    # CTAs per cluster: the launch is cuLaunchKernelEx with the cluster-dimension
    # attribute (None: an ordinary launch)
    cluster: tuple[int, int, int] | None = None
    # the kernel's `requires` clauses as plain data (semantics/access/requires_form.py):
    # the launcher checks the index tensors against them before the launch
    requires: tuple[dict[str, Any], ...] = ()

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @staticmethod
    def from_json(data: Mapping[str, Any]) -> LaunchSpec:
        cluster = data.get("cluster")
        return LaunchSpec(data["kernel"], data["ptx"], tuple(data["grid"]), data["block"],
                          data["smem_bytes"], tuple(data["params"]), tuple(data["written"]),
                          tuple(cluster) if cluster else None,
                          tuple(data.get("requires", ())))

    def sizes(self) -> dict[str, int]:
        return {p["name"]: int(p["value"]) for p in self.params if p["kind"] == "size"}
