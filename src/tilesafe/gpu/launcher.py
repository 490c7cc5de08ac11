"""Run a compiled kernel on the GPU: upload the tensors, encode the tensor maps, launch,
download; optionally time it, optionally in a child process that may hang.

Why the child process: a kernel that deadlocks (a bad kernel compiled with --unverified,
say) never returns, and a kernel that traps poisons its CUDA context. Run in a child with a
timeout, either is reported ("hang", "trap: CUDA_ERROR_...") and the caller goes on.

Only numpy, cuda-python and tilesafe's numpy-only modules are imported: this is what runs
on the lent H100, which has no ISL or z3.
"""

from __future__ import annotations

import dataclasses
import json
import math
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from tilesafe.codegen.launch_spec import LaunchSpec
from tilesafe.gpu import driver as drv
from tilesafe.semantics.hw.tma_rules import TensorMapSpec

NUMPY = {"f16": np.float16, "bf16": np.uint16, "f32": np.float32, "i32": np.int32,
         "u8": np.uint8}
ELEM_BYTES = {"f16": 2, "bf16": 2, "f32": 4, "i32": 4, "u8": 1}
_TRAPS = ("ILLEGAL", "MISALIGNED", "LAUNCH_FAILED", "ASSERT", "HARDWARE_STACK",
          "INVALID_PC", "EXCEPTION")


@dataclass
class GpuRun:
    """What one launch did. status: "ok", "hang" (timed out), "trap" (the kernel faulted),
    "error" (could not be built or launched). `tensors`: every tensor after the run (empty
    unless ok). `ms`: median kernel time over the timed repetitions (None if not timed)."""

    status: str  # "ok", "hang", "trap", "error", or "refused" (a `requires` clause fails)
    error: str = ""
    tensors: dict[str, np.ndarray] = field(default_factory=dict)
    ms: float | None = None
    ptxas: str = ""


def _image(spec: LaunchSpec) -> tuple[bytes, str]:
    if drv.find_ptxas() is not None:
        return drv.assemble(spec.ptx)
    return spec.ptx.encode() + b"\0", "(driver JIT)"


def run(spec: LaunchSpec, arrays: Mapping[str, np.ndarray], *, repeat: int = 0,
        warmup: int = 3, device: drv.Device | None = None) -> GpuRun:
    """Launch once (plus `warmup` + `repeat` timed launches when repeat > 0) in this process.
    `arrays` holds every tensor (outputs too: their initial contents) in tilesafe's numpy
    dtypes (bf16 as uint16). Status "refused" (nothing launched) when the index tensors
    violate the kernel's `requires` clauses."""
    refused = refusal(spec, arrays)
    if refused is not None:
        return GpuRun("refused", refused)
    own = device is None
    try:
        dev = device or drv.Device()
    except drv.DriverError as exc:
        return GpuRun("error", str(exc))
    try:
        return _run(dev, spec, arrays, repeat, warmup)
    finally:
        if own:
            try:
                dev.close()
            except Exception:  # a trapped context cannot be torn down cleanly
                pass


def _launch(dev: drv.Device, fn: Any, spec: LaunchSpec, args: Any, types: Any) -> None:
    """One launch; a cluster kernel's with its cluster dimension (cuLaunchKernelEx)."""
    extra = {"cluster": spec.cluster} if spec.cluster else {}
    dev.launch(fn, spec.grid, spec.block, spec.smem_bytes, args, types, **extra)


def _run(dev: drv.Device, spec: LaunchSpec, arrays: Mapping[str, np.ndarray], repeat: int,
         warmup: int) -> GpuRun:
    try:
        image, report = _image(spec)
    except RuntimeError as exc:
        return GpuRun("error", str(exc))
    try:
        fn = dev.function(image, spec.kernel, spec.smem_bytes)
        args, types, buffers = _arguments(dev, spec, arrays)
    except drv.DriverError as exc:
        return GpuRun("error", str(exc), ptxas=report)
    try:
        _launch(dev, fn, spec, args, types)
        dev.synchronize()
    except drv.DriverError as exc:
        status = "trap" if any(t in exc.error for t in _TRAPS) else "error"
        return GpuRun(status, exc.error, ptxas=report)
    out: dict[str, np.ndarray] = {}
    for name, (address, like) in buffers.items():
        host = np.empty_like(like)
        dev.download_into(host, address)
        out[name] = host
    ms = None
    if repeat > 0:
        ms = _time(dev, fn, spec, args, types, repeat, warmup)
    for address, _ in buffers.values():
        dev.free(address)
    return GpuRun("ok", "", out, ms, report)


def _arguments(dev: drv.Device, spec: LaunchSpec, arrays: Mapping[str, np.ndarray]
               ) -> tuple[list[Any], list[Any], dict[str, tuple[int, np.ndarray]]]:
    args: list[Any] = []
    types: list[Any] = []
    buffers: dict[str, tuple[int, np.ndarray]] = {}
    for p in spec.params:
        if p["kind"] == "tensor":
            want = np.dtype(NUMPY[p["dtype"]])
            host = np.ascontiguousarray(arrays[p["name"]])
            if host.dtype != want or list(host.shape) != list(p["shape"]):
                raise drv.DriverError("upload", f"tensor '{p['name']}' must be {want.name}"
                                      f"{p['shape']}, got {host.dtype.name}{list(host.shape)}")
            address = dev.alloc(host.nbytes)
            dev.upload(address, host)
            buffers[p["name"]] = (address, host)
            args.append(address)
            types.append(drv.POINTER)
        elif p["kind"] == "size":
            args.append(int(p["value"]))
            types.append(drv.INT64)
        else:
            address = buffers[p["tensor"]][0]
            fields = dict(p["spec"])
            fields = {k: tuple(v) if isinstance(v, list) else v for k, v in fields.items()}
            tm_spec = TensorMapSpec(**fields)
            tm_spec = dataclasses.replace(tm_spec, global_address_alignment=address & -address)
            args.append(dev.encode(tm_spec, address))
            types.append(drv.BY_VALUE)
    return args, types, buffers


def _time(dev: drv.Device, fn: Any, spec: LaunchSpec, args: list[Any], types: list[Any],
          repeat: int, warmup: int) -> float:
    for _ in range(warmup):
        _launch(dev, fn, spec, args, types)
    dev.synchronize()
    times = []
    start, end = dev.event(), dev.event()
    for _ in range(repeat):
        dev.record(start)
        _launch(dev, fn, spec, args, types)
        dev.record(end)
        times.append(dev.elapsed_ms(start, end))
    return float(np.median(times))


# ---- in a child process ---------------------------------------------------------------------


def refusal(spec: LaunchSpec, arrays: Mapping[str, np.ndarray]) -> str | None:
    """Why the launch must not run (TS205: the index tensors violate one of the kernel's
    `requires` clauses, or one is too large to check), or None. Checked before anything
    touches the GPU, here where only numpy is (semantics/access/requires_eval.py)."""
    if not spec.requires:
        return None
    from tilesafe.semantics.access import requires_eval

    try:
        v = requires_eval.first_violation(spec.requires, spec.sizes(), arrays)
    except requires_eval.TooLarge as err:
        return f"TS205 {err}"
    return None if v is None else f"TS205 {v.message()}"


def run_isolated(spec: LaunchSpec, arrays: Mapping[str, np.ndarray], *,
                 timeout: float = 60.0, repeat: int = 0) -> GpuRun:
    """`run` in a fresh process: a hang is killed after `timeout` seconds and reported, a
    trap cannot poison the caller's context."""
    with tempfile.TemporaryDirectory(prefix="tilesafe-gpu-") as tmp:
        d = Path(tmp)
        (d / "spec.json").write_text(json.dumps({"spec": spec.to_json(), "repeat": repeat}))
        np.savez(d / "in.npz", **{k: np.asarray(v) for k, v in arrays.items()})
        try:
            # cwd: the child must import the installed tilesafe, not a checkout's folder
            # that happens to be the caller's working directory.
            proc = subprocess.run([sys.executable, "-m", "tilesafe.gpu.launcher", str(d)],
                                  capture_output=True, text=True, timeout=timeout, check=False,
                                  cwd=d)
        except subprocess.TimeoutExpired:
            return GpuRun("hang", f"no completion within {timeout:g} s (killed)")
        status_file = d / "status.json"
        if not status_file.exists():
            tail = (proc.stderr or proc.stdout)[-2000:]
            return GpuRun("error", f"child exited {proc.returncode}: {tail}")
        status = json.loads(status_file.read_text())
        tensors = {}
        if status["status"] == "ok":
            with np.load(d / "out.npz") as z:
                tensors = {k: z[k] for k in z.files}
        return GpuRun(status["status"], status["error"], tensors, status.get("ms"),
                      status.get("ptxas", ""))


def _child(folder: str) -> None:
    d = Path(folder)
    req = json.loads((d / "spec.json").read_text())
    spec = LaunchSpec.from_json(req["spec"])
    with np.load(d / "in.npz") as z:
        arrays = {k: z[k] for k in z.files}
    res = run(spec, arrays, repeat=int(req.get("repeat", 0)))
    if res.status == "ok":
        np.savez(d / "out.npz", **res.tensors)
    (d / "status.json").write_text(json.dumps({"status": res.status, "error": res.error,
                                               "ms": res.ms, "ptxas": res.ptxas}))


def bytes_moved(spec: LaunchSpec) -> int:
    """Every tensor's size in bytes (a lower bound on the traffic: each read or written once;
    for bandwidth figures)."""
    return sum(math.prod(p["shape"]) * ELEM_BYTES[p["dtype"]] for p in spec.params
               if p["kind"] == "tensor")


if __name__ == "__main__":
    _child(sys.argv[1])
