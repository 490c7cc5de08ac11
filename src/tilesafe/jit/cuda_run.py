"""A jit call on the GPU through cuda-python: modules loaded once per device, tensor maps
encoded at the tensors' real addresses, the launch on the caller's stream.

Why not gpu/launcher.run: that runs one launch from a LaunchSpec in a context of its own
(upload, launch, synchronise, download, free) -- right for `tilesafe run --device gpu`,
wrong for a call on torch tensors, which must use the tensors' memory where it is and
launch on torch's current stream without synchronising. The pieces are the same
(gpu/driver.py: checked driver calls, the one TensorMapSpec -> cuTensorMapEncodeTiled
translation), so the descriptors are the ones the GPU runs were checked with.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Mapping
from typing import Any

import numpy as np

from tilesafe.codegen.launch_spec import LaunchSpec
from tilesafe.gpu import driver as drv
from tilesafe.semantics.hw.tma_rules import TensorMapSpec


class CudaRunner:
    """Primary contexts retained per device, functions loaded per (device, PTX)."""

    def __init__(self) -> None:
        self._contexts: dict[int, Any] = {}
        self._functions: dict[tuple[int, str], Any] = {}

    def _context(self, index: int) -> Any:
        cu = drv._cu()
        if index not in self._contexts:
            drv.check("cuInit", cu.cuInit(0))
            dev = drv.check("cuDeviceGet", cu.cuDeviceGet(index))
            self._contexts[index] = drv.check("cuDevicePrimaryCtxRetain",
                                              cu.cuDevicePrimaryCtxRetain(dev))
        ctx = self._contexts[index]
        drv.check("cuCtxSetCurrent", cu.cuCtxSetCurrent(ctx))
        return ctx

    def function(self, spec: LaunchSpec, index: int) -> Any:
        key = (index, hashlib.sha256(spec.ptx.encode()).hexdigest())
        if key not in self._functions:
            cu = drv._cu()
            self._context(index)
            if drv.find_ptxas() is not None:
                image, _ = drv.assemble(spec.ptx)
            else:
                image = spec.ptx.encode() + b"\0"
            module = drv.check("cuModuleLoadData", cu.cuModuleLoadData(image))
            fn = drv.check("cuModuleGetFunction",
                           cu.cuModuleGetFunction(module, spec.kernel.encode()))
            attr = cu.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
            drv.check("cuFuncSetAttribute", cu.cuFuncSetAttribute(fn, attr, spec.smem_bytes))
            self._functions[key] = fn
        return self._functions[key]

    def launch(self, spec: LaunchSpec, pointers: Mapping[str, int], index: int,
               stream: int = 0) -> None:
        """Launch at these device addresses on `stream` (a CUstream handle; 0: the legacy
        default stream). Asynchronous: nothing here waits for the kernel. Raises
        DriverError (or RuntimeError from ptxas); the caller names the kernel."""
        cu = drv._cu()
        fn = self.function(spec, index)
        self._context(index)
        args, types = arguments(spec, pointers)
        drv.launch(fn, spec.grid, spec.block, spec.smem_bytes, (tuple(args), tuple(types)),
                   cu.CUstream(stream), spec.cluster)

    def run_host(self, spec: LaunchSpec, arrays: Mapping[str, np.ndarray],
                 upload: set[str], index: int = 0) -> dict[str, np.ndarray]:
        """Host arrays: copy in, launch, wait, copy the written tensors out, free."""
        cu = drv._cu()
        self._context(index)
        owned: dict[str, Any] = {}
        try:
            for p in spec.params:
                if p["kind"] != "tensor":
                    continue
                host = np.ascontiguousarray(arrays[p["name"]])
                ptr = drv.check("cuMemAlloc", cu.cuMemAlloc(max(host.nbytes, 1)))
                owned[p["name"]] = ptr
                if p["name"] in upload:
                    drv.check("cuMemcpyHtoD", cu.cuMemcpyHtoD(ptr, host.ctypes.data,
                                                              host.nbytes))
            self.launch(spec, {n: int(p) for n, p in owned.items()}, index)
            drv.check("cuCtxSynchronize", cu.cuCtxSynchronize())
            out = {}
            for name in spec.written:
                host = np.empty_like(np.asarray(arrays[name]))
                drv.check("cuMemcpyDtoH", cu.cuMemcpyDtoH(host.ctypes.data, owned[name],
                                                          host.nbytes))
                out[name] = host
            return out
        finally:
            for ptr in owned.values():
                cu.cuMemFree(ptr)


def arguments(spec: LaunchSpec, pointers: Mapping[str, int]) -> tuple[list[Any], list[Any]]:
    """The kernel's parameters in order: tensor addresses, sizes, and each tensor map
    encoded for its tensor's address (the alignment the driver is told is the address's)."""
    args: list[Any] = []
    types: list[Any] = []
    for p in spec.params:
        if p["kind"] == "tensor":
            args.append(int(pointers[p["name"]]))
            types.append(drv.POINTER)
        elif p["kind"] == "size":
            args.append(int(p["value"]))
            types.append(drv.INT64)
        else:
            address = int(pointers[p["tensor"]])
            fields = {k: tuple(v) if isinstance(v, list) else v for k, v in p["spec"].items()}
            tm = dataclasses.replace(TensorMapSpec(**fields),
                                     global_address_alignment=address & -address)
            args.append(drv.check("cuTensorMapEncodeTiled", drv.encode_call(tm, address)))
            types.append(drv.BY_VALUE)
    return args, types
