"""What a launch needs, as plain data: the compiled module and, for concrete sizes, the grid,
the tensors' shapes and the tensor-map descriptors.

Why plain data: the GPU side (gpu/launcher.py) must run where only numpy and cuda-python are
installed (the lent H100 has neither ISL nor z3), so everything that needs the IR is decided
here, on the host that compiled the kernel, and a LaunchSpec travels as JSON.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tilesafe.codegen import lir
from tilesafe.codegen.launch_spec import LaunchSpec
from tilesafe.codegen.ranges import MAX_ELEMENTS
from tilesafe.frontend import ir
from tilesafe.frontend.limits import grid_problem
from tilesafe.semantics.interpreter.interp_io import (
    check_where,
    tensor_shapes,
    tensor_usage,
    tensormap_spec,
)


@dataclass(frozen=True)
class CompiledKernel:
    """A kernel as PTX plus the signature a launcher must fill."""

    name: str
    ptx: str
    params: tuple[lir.KernelParam, ...]
    block: int
    smem_bytes: int


class ContractError(ValueError):
    """Sizes outside the launch contract the code was compiled under."""


def _plain(fields: dict[str, Any]) -> dict[str, Any]:
    """Tuples as lists: the spec is the same value before and after its JSON round trip to
    the GPU machine (a LaunchSpec read back must equal the one written)."""
    return {k: list(v) if isinstance(v, tuple) else v for k, v in fields.items()}


def bind(kernel: ir.Kernel, compiled: CompiledKernel, sizes: Mapping[str, int]) -> LaunchSpec:
    """The launch of `compiled` at `sizes` (InterpError TS200 if `where` refuses them,
    ContractError outside the launch contract of codegen/ranges.py)."""
    grid = check_where(kernel, sizes)
    shapes = tensor_shapes(kernel, sizes)
    for name, shape in shapes.items():
        if math.prod(shape) >= MAX_ELEMENTS:
            raise ContractError(f"tensor '{name}' would have {math.prod(shape)} elements; the "
                                f"code was compiled for fewer than {MAX_ELEMENTS}")
    problem = grid_problem(grid)
    if problem is not None:
        raise ContractError(problem[1])
    params: list[dict[str, Any]] = []
    for p in compiled.params:
        if p.kind is lir.ParamKind.TENSOR:
            t = kernel.tensor(p.source)
            params.append({"kind": "tensor", "name": p.source, "dtype": t.dtype.value,
                           "shape": list(shapes[p.source])})
        elif p.kind is lir.ParamKind.SIZE:
            params.append({"kind": "size", "name": p.source, "value": int(sizes[p.source])})
        else:
            tm = kernel.tensormap(p.source)
            spec = tensormap_spec(kernel, tm, shapes[tm.tensor])
            params.append({"kind": "tensormap", "name": p.source, "tensor": tm.tensor,
                           "spec": _plain(dataclasses.asdict(spec))})
    full = tuple(grid) + (1,) * (3 - len(grid))
    if kernel.cluster is not None and any(g % c for g, c in zip(full, kernel.cluster,
                                                               strict=True)):
        raise ContractError(f"grid {list(full)} is not made of clusters of "
                            f"{list(kernel.cluster)} CTAs")
    from tilesafe.semantics.access.requires_form import encode

    return LaunchSpec(compiled.name, compiled.ptx, full, compiled.block,  # type: ignore[arg-type]
                      compiled.smem_bytes, tuple(params), tuple(sorted(tensor_usage(kernel)[1])),
                      kernel.cluster, encode(kernel))
