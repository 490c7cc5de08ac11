"""The code generator's entry point: IR kernel -> PTX module (+ its launch signature).

The verification gate (refuse unless every error obligation is proved) and the translation
validation of the output are steps of `tilesafe.api.compile`, which calls this; this module
only generates.
"""

from __future__ import annotations

from tilesafe.codegen.lower import lower
from tilesafe.codegen.plan import CompiledKernel
from tilesafe.codegen.ptx import print_module
from tilesafe.frontend import ir


def unverified_banner(failing: list[str]) -> str:
    lines = ["// UNVERIFIED: compiled with --unverified although these obligations are not",
             "// proved; the code may race, deadlock, trap or compute garbage:"]
    lines += [f"//   {f}" for f in failing] or ["//   (verification was not run)"]
    return "\n".join(lines) + "\n"


def compile_kernel(kernel: ir.Kernel, source: str = "", banner: str = "") -> CompiledKernel:
    """Lower and print one kernel (raises CodegenError, a DiagnosticError, with a TS7xx
    code when no exact code exists: an integer beyond 64 bits, shared memory too large)."""
    fn = lower(kernel)
    ptx = banner + print_module(fn, source)
    return CompiledKernel(fn.name, ptx, fn.params, fn.block, fn.smem_bytes)
