"""A thin layer over cuda-python's driver API: one context, modules, memory, tensor maps,
launches, events.

Why a module of its own: the launcher, the GPU tests and the benchmarks all need the same
plumbing, and it must import nothing but numpy and `cuda.bindings` (imported lazily, so
this module can be imported — and its users' tests collected and skipped — on machines
without a GPU). Every driver call is checked; a failure raises DriverError naming the call
and the CUDA error.
"""

from __future__ import annotations

import ctypes
import math
import os
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from tilesafe.semantics.hw.tma_rules import TensorMapSpec

DTYPE_NAMES = {
    "u8": "UINT8", "u16": "UINT16", "u32": "UINT32", "i32": "INT32", "u64": "UINT64",
    "i64": "INT64", "f16": "FLOAT16", "f32": "FLOAT32", "f64": "FLOAT64", "bf16": "BFLOAT16",
    "f32_ftz": "FLOAT32_FTZ", "tf32": "TFLOAT32", "tf32_ftz": "TFLOAT32_FTZ",
}
_PREFIX = "CU_TENSOR_MAP_"
_INTERLEAVE = {"none": "NONE", "16B": "16B", "32B": "32B"}
_SWIZZLE = {"none": "NONE", "32B": "32B", "64B": "64B", "128B": "128B"}
_L2 = {"none": "NONE", "64B": "L2_64B", "128B": "L2_128B", "256B": "L2_256B"}
_OOB = {"zero": "NONE", "nan": "NAN_REQUEST_ZERO_FMA"}


class DriverError(RuntimeError):
    """A CUDA driver call failed; `error` is the CUresult name (CUDA_ERROR_...)."""

    def __init__(self, call: str, error: str) -> None:
        super().__init__(f"{call} failed: {error}")
        self.call = call
        self.error = error


def _cu() -> Any:
    from cuda.bindings import driver

    return driver


def check(call: str, result: Any) -> Any:
    """Unwrap a cuda-bindings (err, value...) tuple, raising DriverError on any error."""
    cu = _cu()
    err = result[0] if isinstance(result, tuple) else result
    if err != cu.CUresult.CUDA_SUCCESS:
        raise DriverError(call, err.name)
    if not isinstance(result, tuple) or len(result) == 1:
        return None
    return result[1] if len(result) == 2 else result[1:]


def unavailable_reason() -> str | None:
    """Why no Hopper GPU can be used here (None when one can)."""
    try:
        cu = _cu()
    except ImportError:
        return "cuda-python (cuda.bindings) is not installed"
    try:
        (err,) = cu.cuInit(0)
    except Exception as exc:  # no driver library at all: cuda-bindings raises
        return f"no NVIDIA driver: {type(exc).__name__}"
    if err != cu.CUresult.CUDA_SUCCESS:
        return f"cuInit failed: {err.name}"
    err, count = cu.cuDeviceGetCount()
    if err != cu.CUresult.CUDA_SUCCESS or count < 1:
        return "no CUDA device"
    _, dev = cu.cuDeviceGet(0)
    attr = cu.CUdevice_attribute
    _, major = cu.cuDeviceGetAttribute(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev)
    _, minor = cu.cuDeviceGetAttribute(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev)
    if (major, minor) != (9, 0):
        return f"device 0 is compute capability {major}.{minor}; sm_90a code needs 9.0"
    return None


def find_ptxas() -> str | None:
    found = shutil.which("ptxas")
    if found:
        return found
    for root in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if root and (Path(root) / "bin" / "ptxas").is_file():
            return str(Path(root) / "bin" / "ptxas")
    return None


def assemble(ptx: str, arch: str = "sm_90a") -> tuple[bytes, str]:
    """ptxas -> (cubin, ptxas's resource report). Raises RuntimeError with its output."""
    ptxas = find_ptxas()
    if ptxas is None:
        raise RuntimeError("ptxas not found (PATH, CUDA_HOME, /usr/local/cuda)")
    with tempfile.TemporaryDirectory() as tmp:
        src, out = Path(tmp) / "k.ptx", Path(tmp) / "k.cubin"
        src.write_text(ptx)
        proc = subprocess.run([ptxas, f"-arch={arch}", "-v", str(src), "-o", str(out)],
                              capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            raise RuntimeError(f"ptxas failed:\n{proc.stderr}")
        return out.read_bytes(), proc.stderr


class Device:
    """Device 0's primary context. Call `close()` when done (frees what was allocated)."""

    def __init__(self) -> None:
        cu = _cu()
        self.cu = cu
        check("cuInit", cu.cuInit(0))
        self.device = check("cuDeviceGet", cu.cuDeviceGet(0))
        self.ctx = check("cuDevicePrimaryCtxRetain", cu.cuDevicePrimaryCtxRetain(self.device))
        check("cuCtxSetCurrent", cu.cuCtxSetCurrent(self.ctx))
        self._allocs: list[Any] = []
        self._modules: list[Any] = []

    def name(self) -> str:
        raw = check("cuDeviceGetName", self.cu.cuDeviceGetName(64, self.device))
        return raw.split(b"\0", 1)[0].decode()

    def driver_version(self) -> int:
        return int(check("cuDriverGetVersion", self.cu.cuDriverGetVersion()))

    # -- modules ----------------------------------------------------------------------------
    def function(self, image: bytes, entry: str, smem_bytes: int) -> Any:
        """Load a cubin (or NUL-terminated PTX) and return `entry`, with its dynamic
        shared-memory limit raised to `smem_bytes` (needed above 48 KiB)."""
        cu = self.cu
        module = check("cuModuleLoadData", cu.cuModuleLoadData(image))
        self._modules.append(module)
        fn = check("cuModuleGetFunction", cu.cuModuleGetFunction(module, entry.encode()))
        attr = cu.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
        check("cuFuncSetAttribute", cu.cuFuncSetAttribute(fn, attr, max(smem_bytes, 0)))
        return fn

    # -- memory -----------------------------------------------------------------------------
    def alloc(self, nbytes: int) -> int:
        ptr = check("cuMemAlloc", self.cu.cuMemAlloc(max(nbytes, 1)))
        self._allocs.append(ptr)
        return int(ptr)

    def upload(self, address: int, data: np.ndarray) -> None:
        buf = np.ascontiguousarray(data)
        check("cuMemcpyHtoD", self.cu.cuMemcpyHtoD(address, buf.ctypes.data, buf.nbytes))

    def download_into(self, out: np.ndarray, address: int) -> None:
        check("cuMemcpyDtoH", self.cu.cuMemcpyDtoH(out.ctypes.data, address, out.nbytes))

    def free(self, address: int) -> None:
        for a in self._allocs:
            if int(a) == address:
                check("cuMemFree", self.cu.cuMemFree(a))
                self._allocs.remove(a)
                return

    # -- tensor maps ------------------------------------------------------------------------
    def encode(self, spec: TensorMapSpec, address: int) -> Any:
        """cuTensorMapEncodeTiled for `spec` at `address` (DriverError if refused)."""
        return check("cuTensorMapEncodeTiled", encode_call(spec, address))

    # -- launches ---------------------------------------------------------------------------
    def launch(self, fn: Any, grid: Sequence[int], block: int, smem_bytes: int,
               args: Sequence[Any], types: Sequence[Any], stream: Any = 0,
               cluster: Sequence[int] | None = None) -> None:
        launch(fn, grid, block, smem_bytes, (tuple(args), tuple(types)), stream, cluster)

    def synchronize(self) -> None:
        check("cuCtxSynchronize", self.cu.cuCtxSynchronize())

    def event(self) -> Any:
        return check("cuEventCreate", self.cu.cuEventCreate(0))

    def record(self, event: Any) -> None:
        check("cuEventRecord", self.cu.cuEventRecord(event, 0))

    def elapsed_ms(self, start: Any, end: Any) -> float:
        check("cuEventSynchronize", self.cu.cuEventSynchronize(end))
        return float(check("cuEventElapsedTime", self.cu.cuEventElapsedTime(start, end)))

    def close(self) -> None:
        cu = self.cu
        for a in self._allocs:
            cu.cuMemFree(a)
        self._allocs.clear()
        for m in self._modules:
            cu.cuModuleUnload(m)
        self._modules.clear()
        cu.cuDevicePrimaryCtxRelease(self.device)


def launch(fn: Any, grid: Sequence[int], block: int, smem_bytes: int, params: Any,
           stream: Any = 0, cluster: Sequence[int] | None = None) -> None:
    """cuLaunchKernel; with `cluster`, cuLaunchKernelEx with the cluster-dimension
    attribute (thread-block clusters of cluster[0] x cluster[1] x cluster[2] CTAs; the
    kernel's .reqnctapercluster says the same)."""
    cu = _cu()
    if cluster is None:
        check("cuLaunchKernel", cu.cuLaunchKernel(fn, *grid, block, 1, 1, smem_bytes, stream,
                                                  params, 0))
        return
    attr = cu.CUlaunchAttribute()
    attr.id = cu.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
    attr.value.clusterDim.x, attr.value.clusterDim.y, attr.value.clusterDim.z = cluster
    cfg = cu.CUlaunchConfig()
    cfg.gridDimX, cfg.gridDimY, cfg.gridDimZ = grid
    cfg.blockDimX, cfg.blockDimY, cfg.blockDimZ = block, 1, 1
    cfg.sharedMemBytes = smem_bytes
    cfg.hStream = stream if isinstance(stream, cu.CUstream) else cu.CUstream(int(stream))
    cfg.attrs = [attr]
    cfg.numAttrs = 1
    check("cuLaunchKernelEx", cu.cuLaunchKernelEx(cfg, fn, params, 0))


def encode_call(spec: TensorMapSpec, address: int) -> tuple[Any, Any]:
    """The raw (CUresult, CUtensorMap) of cuTensorMapEncodeTiled for `spec` at `address`:
    the one place that turns a TensorMapSpec into the driver's arguments (the hardware
    tests use it to see refusals; the launcher through Device.encode)."""
    cu = _cu()
    strides = list(spec.global_strides_bytes)
    if spec.rank == 1 and not strides:
        # The binding passes an empty list as NULL, which the driver refuses even for
        # rank 1 (docs/hardware-rules.md); give it one ignored, valid entry.
        strides = [16 * max(1, math.ceil(spec.global_dims[0] * spec.elem_bytes / 16))]
    return cu.cuTensorMapEncodeTiled(
        getattr(cu.CUtensorMapDataType, _PREFIX + "DATA_TYPE_" + DTYPE_NAMES[spec.dtype]),
        spec.rank,
        address,
        [cu.cuuint64_t(v) for v in spec.global_dims],
        [cu.cuuint64_t(v) for v in strides],
        [cu.cuuint32_t(v) for v in spec.box_dims],
        [cu.cuuint32_t(v) for v in spec.element_strides],
        getattr(cu.CUtensorMapInterleave, _PREFIX + "INTERLEAVE_" + _INTERLEAVE[spec.interleave]),
        getattr(cu.CUtensorMapSwizzle, _PREFIX + "SWIZZLE_" + _SWIZZLE[spec.swizzle]),
        getattr(cu.CUtensorMapL2promotion, _PREFIX + "L2_PROMOTION_" + _L2[spec.l2_promotion]),
        getattr(cu.CUtensorMapFloatOOBfill, _PREFIX + "FLOAT_OOB_FILL_" + _OOB[spec.oob_fill]),
    )


POINTER = ctypes.c_void_p
INT64 = ctypes.c_int64
BY_VALUE = None  # cuda-bindings passes a CUtensorMap object (128 bytes) by value
