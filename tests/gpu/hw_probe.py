"""Host side of the hardware tests: find the toolchain, build the probe kernels, encode tensor
maps through the driver and launch the probes (tests/gpu/hw_kernels.cu).

Why a module of its own: test_hw_tma.py says *what* is compared with tilesafe's semantics;
this file holds the cuda-python plumbing. `cuda.bindings` is imported only inside functions,
so pytest can collect the tests (and skip them) on machines without cuda-python or a GPU.
"""

from __future__ import annotations

import ctypes
import dataclasses
import json
import math
import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from tilesafe.gpu.driver import encode_call
from tilesafe.semantics.hw.tma_rules import DTYPES, TensorMapSpec, box_bytes

KERNEL_SOURCE = Path(__file__).with_name("hw_kernels.cu")
NVCC_ARCH = "-gencode=arch=compute_90a,code=sm_90a"
SENTINEL = 0xAB  # what the probe writes into shared memory before the copy
DUMP_BYTES = 32768  # shared-memory window the tile probe fills, loads into and dumps
REQUIRE_ENV = "TILESAFE_REQUIRE_GPU"  # set to 1 to turn "skipped" into "failed"

# Opcodes of mbarrier_program (must match enum MbarrierOp in hw_kernels.cu).
OP_NOP, OP_INIT, OP_ARRIVE, OP_EXPECT_TX, OP_COMPLETE_TX = 0, 1, 2, 3, 4
OP_ARRIVE_EXPECT_TX, OP_TEST_WAIT_PARITY, OP_TRY_WAIT_PARITY, OP_INVAL = 5, 6, 7, 8

def find_nvcc() -> str | None:
    """nvcc on PATH, else under $CUDA_HOME / $CUDA_PATH / /usr/local/cuda."""
    found = shutil.which("nvcc")
    if found:
        return found
    for root in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if root and (Path(root) / "bin" / "nvcc").is_file():
            return str(Path(root) / "bin" / "nvcc")
    return None


def unavailable_reason() -> str | None:
    """Why the hardware tests cannot run here (None when they can).

    Checks, in order: cuda-python, nvcc, a working driver with at least one device, and
    compute capability 9.0 (the probes are built for sm_90a only).
    """
    try:
        from cuda.bindings import driver as cu
    except ImportError:
        return "cuda-python (cuda.bindings) is not installed"
    if find_nvcc() is None:
        return "nvcc not found (PATH, CUDA_HOME, /usr/local/cuda)"
    try:
        (err,) = cu.cuInit(0)
    except Exception as exc:  # no driver library at all: cuda-bindings raises, not returns
        return f"no NVIDIA driver: {type(exc).__name__}"
    if err != cu.CUresult.CUDA_SUCCESS:
        return f"cuInit failed: {err.name}"
    err, count = cu.cuDeviceGetCount()
    if err != cu.CUresult.CUDA_SUCCESS or count < 1:
        return "no CUDA device"
    err, dev = cu.cuDeviceGet(0)
    attr = cu.CUdevice_attribute
    _, major = cu.cuDeviceGetAttribute(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev)
    _, minor = cu.cuDeviceGetAttribute(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev)
    if (major, minor) != (9, 0):
        return f"device 0 is compute capability {major}.{minor}; the probes need 9.0 (Hopper)"
    return None


def build_cubin(out_dir: Path) -> Path:
    """Compile hw_kernels.cu for sm_90a; raises RuntimeError with nvcc's output on failure."""
    nvcc = find_nvcc()
    if nvcc is None:
        raise RuntimeError("nvcc not found")
    out = out_dir / "hw_kernels.cubin"
    cmd = [nvcc, "-cubin", NVCC_ARCH, "-O2", "-o", str(out), str(KERNEL_SOURCE)]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{proc.stdout}\n{proc.stderr}")
    return out


def _check(result: Any) -> Any:
    """Unwrap a cuda-bindings (err, value...) tuple, raising on any error."""
    from cuda.bindings import driver as cu

    err = result[0] if isinstance(result, tuple) else result
    if err != cu.CUresult.CUDA_SUCCESS:
        raise RuntimeError(f"CUDA driver call failed: {err.name}")
    if not isinstance(result, tuple) or len(result) == 1:
        return None
    return result[1] if len(result) == 2 else result[1:]


@dataclass(frozen=True)
class EncodeResult:
    """The driver's verdict on one descriptor; `tensor_map` is the CUtensorMap when accepted."""

    accepted: bool
    error: str
    tensor_map: Any


@dataclass(frozen=True)
class TileLoadResult:
    """What one tile_load_probe launch saw: the dumped window and the barrier observations."""

    dump: np.ndarray  # uint8, DUMP_BYTES; byte i is shared memory at base + i
    smem_base: int  # absolute shared address of the 1024-aligned point
    parity1_after_init: bool
    parity0_after_init: bool
    completed: bool
    parity1_after: bool
    parity0_after: bool


class Hopper:
    """One context on device 0 with the probe module loaded. Call `close()` when done."""

    def __init__(self, cubin: Path) -> None:
        from cuda.bindings import driver as cu

        self._cu = cu
        self.cubin = cubin
        _check(cu.cuInit(0))
        self.device = _check(cu.cuDeviceGet(0))
        self._ctx = _check(cu.cuDevicePrimaryCtxRetain(self.device))
        _check(cu.cuCtxSetCurrent(self._ctx))
        self._module = _check(cu.cuModuleLoadData(cubin.read_bytes()))
        self._tile = _check(cu.cuModuleGetFunction(self._module, b"tile_load_probe"))
        self._mbar = _check(cu.cuModuleGetFunction(self._module, b"mbarrier_program"))
        smem_attr = cu.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
        _check(cu.cuFuncSetAttribute(self._tile, smem_attr, DUMP_BYTES + 2048))
        self._allocs: list[Any] = []

    # -- device facts ------------------------------------------------------------------------
    def name(self) -> str:
        raw = _check(self._cu.cuDeviceGetName(64, self.device))
        return raw.split(b"\0", 1)[0].decode()

    def driver_version(self) -> int:
        return int(_check(self._cu.cuDriverGetVersion()))

    def shared_memory_per_sm(self) -> int:
        attr = self._cu.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR
        return int(_check(self._cu.cuDeviceGetAttribute(attr, self.device)))

    # -- memory ------------------------------------------------------------------------------
    def alloc(self, nbytes: int) -> int:
        ptr = _check(self._cu.cuMemAlloc(nbytes))
        self._allocs.append(ptr)
        return int(ptr)

    def upload(self, address: int, data: np.ndarray) -> None:
        buf = np.ascontiguousarray(data)
        _check(self._cu.cuMemcpyHtoD(address, buf.ctypes.data, buf.nbytes))

    def download(self, address: int, nbytes: int) -> np.ndarray:
        out = np.empty(nbytes, dtype=np.uint8)
        _check(self._cu.cuMemcpyDtoH(out.ctypes.data, address, nbytes))
        return out

    def memset(self, address: int, value: int, nbytes: int) -> None:
        _check(self._cu.cuMemsetD8(address, value, nbytes))

    # -- tensor maps -------------------------------------------------------------------------
    def encode(self, spec: TensorMapSpec, address: int) -> EncodeResult:
        """Ask cuTensorMapEncodeTiled about `spec` at `address` (must be consistent with
        spec.global_address_alignment; that is the caller's business)."""
        cu = self._cu
        try:
            err, tmap = encode_call(spec, address)
        except ValueError as exc:
            if spec.rank <= 5:
                raise
            # cuda-bindings itself refuses arrays longer than 5 before the driver sees them.
            return EncodeResult(False, f"binding: {exc}", None)
        ok = err == cu.CUresult.CUDA_SUCCESS
        return EncodeResult(ok, "" if ok else err.name, tmap if ok else None)

    # -- launches ----------------------------------------------------------------------------
    def tile_load(
        self,
        tensor_map: Any,
        coords_innermost_first: Sequence[int],
        *,
        smem_offset: int,
        tx_bytes: int,
        timeout_cycles: int = 200_000_000,
    ) -> TileLoadResult:
        """One TMA tile load to `smem_offset` past a 1024-aligned point, then dump the window."""
        if not 1 <= len(coords_innermost_first) <= 3:
            raise ValueError("the probe issues 1-, 2- and 3-D loads only")
        cu = self._cu
        out = self.alloc(DUMP_BYTES)
        flags = self.alloc(64)
        self.memset(flags, 0, 64)
        coords = [*coords_innermost_first, 0, 0][:3]
        args = (
            tensor_map,
            out,
            flags,
            smem_offset,
            tx_bytes,
            DUMP_BYTES,
            len(coords_innermost_first),
            *coords,
            timeout_cycles,
        )
        types = (
            None,  # CUtensorMap: cuda-bindings passes the 128-byte object by value
            ctypes.c_void_p,
            ctypes.c_void_p,
            *([ctypes.c_int] * 7),
            ctypes.c_longlong,
        )
        smem = DUMP_BYTES + 1024 + 64  # window + alignment pad + barrier
        _check(cu.cuLaunchKernel(self._tile, 1, 1, 1, 128, 1, 1, smem, 0, (args, types), 0))
        _check(cu.cuCtxSynchronize())
        dump = self.download(out, DUMP_BYTES)
        f = self.download(flags, 64).view(np.int32)
        if int(f[6]) != len(coords_innermost_first):
            raise RuntimeError("probe did not issue the copy")
        self._free(out, flags)
        return TileLoadResult(
            dump=dump,
            smem_base=int(f[5]) & 0xFFFFFFFF,
            parity1_after_init=bool(f[0]),
            parity0_after_init=bool(f[1]),
            completed=bool(f[2]),
            parity1_after=bool(f[3]),
            parity0_after=bool(f[4]),
        )

    def mbarrier_programs(
        self, programs: Sequence[Sequence[tuple[int, int, int]]]
    ) -> list[list[int]]:
        """Run each program (list of (opcode, barrier, argument)) in its own block; return each
        op's result (0/1 for waits, -1 otherwise), program by program."""
        cu = self._cu
        n = max(len(p) for p in programs)
        ops = np.zeros((len(programs), n, 3), dtype=np.int32)  # padding is OP_NOP
        for i, prog in enumerate(programs):
            if prog:
                ops[i, : len(prog)] = np.asarray(prog, dtype=np.int32)
        d_ops = self.alloc(ops.nbytes)
        d_res = self.alloc(len(programs) * n * 4)
        self.upload(d_ops, ops)
        args = (d_ops, n, d_res)
        types = (ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p)
        _check(cu.cuLaunchKernel(self._mbar, len(programs), 1, 1, 32, 1, 1, 0, 0, (args, types), 0))
        _check(cu.cuCtxSynchronize())
        res = self.download(d_res, len(programs) * n * 4).view(np.int32).reshape(len(programs), n)
        self._free(d_ops, d_res)
        return [[int(v) for v in res[i, : len(p)]] for i, p in enumerate(programs)]

    # -- teardown ----------------------------------------------------------------------------
    def _free(self, *ptrs: int) -> None:
        for p in ptrs:
            for a in self._allocs:
                if int(a) == p:
                    _check(self._cu.cuMemFree(a))
                    self._allocs.remove(a)
                    break

    def close(self) -> None:
        cu = self._cu
        for a in self._allocs:
            cu.cuMemFree(a)
        self._allocs.clear()
        cu.cuModuleUnload(self._module)
        cu.cuDevicePrimaryCtxRelease(self.device)


# -- loads that may trap ---------------------------------------------------------------------
# A copy the hardware rejects at run time raises CUDA_ERROR_ILLEGAL_INSTRUCTION, which poisons
# the whole context; such loads therefore run in a child process of their own.


def isolated_tile_load(
    cubin: Path,
    dtype: str,
    shape: Sequence[int],
    box: Sequence[int],
    coords: Sequence[int],
    swizzle: str = "none",
) -> tuple[str, bool]:
    """One tile load (row-major shape/box/coords) in a fresh process and context.

    Returns (status, completed): status is 'CUDA_SUCCESS', a CUDA error name such as
    'CUDA_ERROR_ILLEGAL_INSTRUCTION', or 'ENCODE_REFUSED <error>'.
    """
    request = {
        "dtype": dtype,
        "shape": list(shape),
        "box": list(box),
        "coords": list(coords),
        "swizzle": swizzle,
    }
    proc = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), str(cubin), json.dumps(request)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    lines = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or not lines or not lines[-1].startswith("RESULT "):
        raise RuntimeError(f"isolated load crashed ({proc.returncode}):\n{proc.stderr[-2000:]}")
    _, status, completed = lines[-1].split(" ", 2)
    return status, completed == "1"


def _isolated_main(cubin: str, request_json: str) -> str:
    req = json.loads(request_json)
    eb = DTYPES[req["dtype"]][0]
    hw = Hopper(Path(cubin))
    try:
        address = hw.alloc(math.prod(req["shape"]) * eb + 256)
        spec = TensorMapSpec.from_row_major(
            req["dtype"], req["shape"], req["box"], swizzle=req["swizzle"]
        )
        spec = dataclasses.replace(spec, global_address_alignment=address & -address)
        enc = hw.encode(spec, address)
        if not enc.accepted:
            return f"RESULT ENCODE_REFUSED:{enc.error} 0"
        try:
            res = hw.tile_load(
                enc.tensor_map,
                req["coords"][::-1],
                smem_offset=0,
                tx_bytes=box_bytes(spec),
                timeout_cycles=20_000_000,
            )
        except RuntimeError as exc:
            return f"RESULT {str(exc).rsplit(' ', 1)[-1]} 0"
        return f"RESULT CUDA_SUCCESS {int(res.completed)}"
    finally:
        try:
            hw.close()
        except Exception:  # the context may be poisoned; the process ends anyway
            pass


if __name__ == "__main__":
    sys.stdout.write(_isolated_main(sys.argv[1], sys.argv[2]) + "\n")
