"""The HIP code generator's entry point: IR kernel -> HIP C++ module for gfx942 (+ its
launch signature), from the same lowering as the PTX (codegen/lower.py).

Why a record of its own: a `CompiledKernel` carries PTX, which the translation validator
and the CUDA launcher read; a HIP module is C++ source that still has to go through a
compiler (hipcc for AMD, nvcc for the HIP-on-CUDA runs of tests/gpu/build_hip_cases.py),
and no validator reads it (docs/codegen.md, "HIP for AMD", says what is and is not checked).
"""

from __future__ import annotations

from dataclasses import dataclass

from tilesafe.codegen import lir
from tilesafe.codegen.hip import print_hip
from tilesafe.codegen.lower import lower
from tilesafe.frontend import ir


@dataclass(frozen=True)
class HipKernel:
    """A kernel as HIP C++ plus the signature a launcher must fill (parameters in order:
    tensors as device pointers, sizes as 64-bit integers)."""

    name: str
    hip: str
    params: tuple[lir.KernelParam, ...]
    block: int
    smem_bytes: int
    target: str


def compile_hip(kernel: ir.Kernel, source: str = "", banner: str = "") -> HipKernel:
    """Lower and print one kernel resolved for an AMD target (raises CodegenError, a
    DiagnosticError: TS036 for what AMD lacks, TS70x as for PTX)."""
    if not kernel.target.is_amd:
        raise ValueError(f"kernel {kernel.name} was resolved for {kernel.target.name}; load "
                         "it with target='gfx942' (its lanes and limits differ)")
    fn = lower(kernel)
    text = banner + print_hip(fn, source, kernel.target.name)
    return HipKernel(fn.name, text, fn.params, fn.block, fn.smem_bytes, kernel.target.name)
