"""Compiling the HIP modules with the compilers this machine can get, and reading back what
they produced: a gfx942 code object (clang, no ROCm) and PTX for sm_90a (nvcc, HIP on CUDA).

Why clang from Debian and not llvmlite: the module to check is the HIP C++ a user would
build, and `clang -x hip --offload-arch=gfx942 -nogpulib -nogpuinc --cuda-device-only`
compiles exactly that text (with the prelude's bare-AMDGPU branch in place of the ROCm
headers); llvmlite would need a third printer, to LLVM IR, and would check that instead.
Debian bookworm ships clang-19 and lld-19 (`apt-get install clang-19 lld-19`), whose AMDGPU
backend knows gfx942. Nothing here runs a GPU.

What the disassembly is read for (`LdsReport`): the bank proof counted one LDS instruction
per element access, of the element's width (ds_read_b32 / ds_write_b32 for f32 and i32,
ds_read_u16 / ds_write_b16 for f16 and bf16, ds_read_u8 / ds_write_b8 for u8); a compiler
that merged accesses (ds_read2_b32, ds_read_b64, ds_read_b128, ...) would make the count
wrong, and scratch memory (spills, stack) would be memory traffic the model does not have.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

CLANG_NAMES = ("clang-19", "clang-20", "clang-21", "clang-22", "clang")
_LDS_OP = re.compile(r"^\s+(ds_[a-z0-9_]+)\b", re.M)
_MEMOP = re.compile(r"^\s+((?:scratch|buffer|global|flat)_[a-z0-9_]+)\b", re.M)
# LDS instructions by the element width (bytes) they move per lane.
LDS_WIDTH = {"ds_read_b32": 4, "ds_write_b32": 4, "ds_read_u16": 2, "ds_read_i16": 2,
             "ds_write_b16": 2, "ds_read_u8": 1, "ds_read_i8": 1, "ds_write_b8": 1,
             "ds_read_u16_d16": 2, "ds_read_u8_d16": 1}


def find_clang() -> str | None:
    """A clang whose AMDGPU backend knows gfx942 (None: none installed)."""
    for name in CLANG_NAMES:
        path = shutil.which(name)
        if path is None:
            continue
        out = subprocess.run([path, "-print-targets"], capture_output=True, text=True)
        if "amdgcn" in out.stdout:
            return path
    return None


def find_objdump(clang: str) -> str | None:
    """llvm-objdump of the same LLVM as `clang` (beside it, or versioned on PATH)."""
    beside = Path(clang).resolve().parent / "llvm-objdump"
    if beside.exists():
        return str(beside)
    m = re.search(r"clang-(\d+)$", clang)
    return shutil.which(f"llvm-objdump-{m.group(1)}" if m else "llvm-objdump")


@dataclass(frozen=True)
class CodeObject:
    """A gfx942 code object and what its disassembly and metadata say."""

    disassembly: str
    metadata: str

    @property
    def lds_ops(self) -> list[str]:
        return _LDS_OP.findall(self.disassembly)

    @property
    def memory_ops(self) -> list[str]:
        return _MEMOP.findall(self.disassembly)

    def field(self, key: str) -> int | None:
        """A number of the code object's metadata (`vgpr_spill_count`, ...)."""
        m = re.search(rf"\.{re.escape(key)}:\s+(\d+)", self.metadata)
        return int(m.group(1)) if m else None

    def descriptor(self, key: str) -> int | None:
        """A field of the kernel descriptor (`.amdhsa_float_denorm_mode_32`, ...)."""
        m = re.search(rf"\.amdhsa_{re.escape(key)}\s+(\d+)", self.disassembly)
        return int(m.group(1)) if m else None


def compile_gfx942(source: str, clang: str, objdump: str) -> CodeObject:
    """Compile one HIP module to a gfx942 code object (raises CalledProcessError with the
    compiler's message)."""
    with tempfile.TemporaryDirectory() as tmp:
        src, obj = Path(tmp) / "k.hip", Path(tmp) / "k.o"
        src.write_text(source)
        subprocess.run([clang, "-x", "hip", "--offload-arch=gfx942", "-nogpulib", "-nogpuinc",
                        "--cuda-device-only", "--no-gpu-bundle-output", "-O3", "-Werror",
                        "-c", str(src), "-o", str(obj)], check=True, capture_output=True,
                       text=True)
        dis = subprocess.run([objdump, "-D", "--mcpu=gfx942", str(obj)], check=True,
                             capture_output=True, text=True).stdout
        readelf = Path(objdump).with_name(Path(objdump).name.replace("objdump", "readelf"))
        meta = subprocess.run([str(readelf) if readelf.exists() else "llvm-readelf",
                               "--notes", str(obj)], capture_output=True, text=True).stdout
    return CodeObject(dis, meta)


def find_nvcc() -> str | None:
    return shutil.which("nvcc")


def compile_cuda(source: str, nvcc: str, arch: str = "sm_90a") -> str:
    """The HIP module compiled with nvcc through the prelude's HIP-on-CUDA branch: PTX text
    (raises CalledProcessError with nvcc's message)."""
    with tempfile.TemporaryDirectory() as tmp:
        src, out = Path(tmp) / "k.cu", Path(tmp) / "k.ptx"
        src.write_text(source)
        subprocess.run([nvcc, "-x", "cu", f"-arch={arch}", "-ptx", "-Werror", "all-warnings",
                        "-diag-suppress", "550", str(src), "-o", str(out)], check=True,
                       capture_output=True, text=True)
        return out.read_text()
