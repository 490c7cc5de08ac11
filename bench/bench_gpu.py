"""Bandwidth of tilesafe-generated kernels on the GPU, against torch in the same run.

Two steps, because the code generator needs ISL and z3 and the GPU machine has neither:

    python bench/bench_gpu.py build DIR      # host: compile + bind every benchmark
    python bench/bench_gpu.py run DIR        # GPU machine: numpy, cuda-python, torch

`run` times each kernel with CUDA events (median of many launches after warm-up, inputs
synthesised on the device machine), checks its output against numpy, times the torch
operation it competes with on tensors of the same shape, and prints one table: TB/s
counting each tensor read once and written once, and the ratio to torch.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Bench:
    name: str
    kernel: str  # corpus file, relative to the repository root
    sizes: dict[str, int]
    check: str  # "copy" | "transpose" | "rowsum"
    torch: str  # the torch operation it is compared with
    src: str = "src"
    dst: str = "dst"


def _mn(m: int, n: int) -> dict[str, int]:
    return {"M": m, "N": n}


def _copy(name: str, kernel: str) -> list[Bench]:
    return [Bench(f"copy f16 {m}^2: {name}", kernel, _mn(m, m), "copy", "copy")
            for m in (4096, 16384)]


def _flat(name: str, kernel: str) -> list[Bench]:
    """The same bytes as an m x m f16 matrix, seen as rows of 256 elements."""
    return [Bench(f"copy f16 {m}^2: {name}", kernel, {"L": m * m // 256}, "copy", "copy")
            for m in (4096, 16384)]


BENCHES = [
    *_flat("tma_copy_ring (corpus)", "corpus/good/tma_copy_ring.tsk"),
    *_copy("copy_oneshot", "bench/kernels/copy_oneshot.tsk"),
    *_flat("copy_roles", "bench/kernels/copy_roles.tsk"),
    *_copy("pipeline2 (corpus)", "corpus/good/pipeline2.tsk"),
    Bench("transpose f16 4096^2: transpose_tma (corpus)", "corpus/good/transpose_tma.tsk",
          _mn(4096, 4096), "transpose", "transpose"),
    Bench("transpose f16 16384^2: transpose_tma (corpus)", "corpus/good/transpose_tma.tsk",
          _mn(16384, 16384), "transpose", "transpose"),
    Bench("transpose f16 4096^2: transpose_ring", "bench/kernels/transpose_ring.tsk",
          _mn(4096, 4096), "transpose", "transpose"),
    Bench("transpose f32 8192^2: transpose_swizzled (corpus)",
          "corpus/good/transpose_swizzled.tsk", _mn(8192, 8192), "transpose", "transpose"),
    Bench("row sums f32 8192^2: row_sum_ilp (corpus)", "corpus/good/row_sum_ilp.tsk",
          _mn(8192, 8192), "rowsum", "sum", "x", "out"),
    Bench("row sums f32 4096x16384: row_sum_ilp (corpus)", "corpus/good/row_sum_ilp.tsk",
          _mn(4096, 16384), "rowsum", "sum", "x", "out"),
    Bench("row sums f32 8192^2: row_sum_ilp8", "bench/kernels/row_sum_ilp8.tsk",
          _mn(8192, 8192), "rowsum", "sum", "x", "out"),
    Bench("row sums f32 4096x16384: row_sum_ilp8", "bench/kernels/row_sum_ilp8.tsk",
          _mn(4096, 16384), "rowsum", "sum", "x", "out"),
    Bench("row sums f32 8192^2: row_reduce (corpus)", "corpus/good/row_reduce.tsk",
          _mn(8192, 8192), "rowsum", "sum", "x", "out"),
    Bench("row sums f32 4096x16384: row_reduce (corpus)", "corpus/good/row_reduce.tsk",
          _mn(4096, 16384), "rowsum", "sum", "x", "out"),
]


def build(folder: Path) -> None:
    from tilesafe.api import checked_program
    from tilesafe.codegen.compile import compile_kernel
    from tilesafe.codegen.plan import bind

    folder.mkdir(parents=True, exist_ok=True)
    for i, b in enumerate(BENCHES):
        kernel = checked_program(ROOT / b.kernel).kernels[0]
        spec = bind(kernel, compile_kernel(kernel, b.kernel), b.sizes)
        (folder / f"bench{i:02d}.json").write_text(json.dumps(
            {"bench": b.__dict__, "spec": spec.to_json()}))
        print(f"built {b.name}")


def _inputs(spec: object, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Written tensors poisoned with NaN; read ones a non-zero pattern of multiples of 1/4
    in [-2, 2] (cheap to make at 2^28 elements; never zeros, per the device method)."""
    from tilesafe.gpu.launcher import NUMPY

    out = {}
    salt = np.uint32(rng.integers(1, 2**31))
    for p in spec.params:  # type: ignore[attr-defined]
        if p["kind"] != "tensor":
            continue
        dt = NUMPY[p["dtype"]]
        if p["name"] in spec.written:  # type: ignore[attr-defined]
            out[p["name"]] = np.full(p["shape"], np.nan, dt)
            continue
        n = int(np.prod(p["shape"]))
        h = (np.arange(n, dtype=np.uint32) * np.uint32(2654435761) + salt) >> np.uint32(20)
        vals = ((h % np.uint32(17)).astype(np.float32) - 8.0) / 4.0
        out[p["name"]] = vals.astype(dt).reshape(p["shape"])
    return out


def _check(b: Bench, inputs: dict[str, np.ndarray], got: dict[str, np.ndarray]) -> str:
    src, dst = inputs[b.src], got[b.dst]
    if b.check == "copy":
        return "ok" if np.array_equal(src.view(np.uint16), dst.view(np.uint16)) else "WRONG"
    if b.check == "transpose":
        return "ok" if np.array_equal(src.T, dst) else "WRONG"
    want = src.astype(np.float64).sum(axis=1)
    return "ok" if np.allclose(dst, want, rtol=1e-5, atol=1e-3) else "WRONG"


def _torch_ms(b: Bench, inputs: dict[str, np.ndarray]) -> float:
    import torch

    x = torch.from_numpy(inputs[b.src]).cuda()
    if b.torch == "copy":
        y = torch.empty_like(x)
        fn = lambda: y.copy_(x)  # noqa: E731
    elif b.torch == "transpose":
        y = torch.empty((x.shape[1], x.shape[0]), dtype=x.dtype, device="cuda")
        fn = lambda: y.copy_(x.t())  # noqa: E731
    else:
        fn = lambda: x.sum(dim=1)  # noqa: E731
    for _ in range(5):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(50):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        fn()
        e.record()
        e.synchronize()
        times.append(s.elapsed_time(e))
    return float(np.median(times))


def run(folder: Path) -> None:
    from tilesafe.codegen.launch_spec import LaunchSpec
    from tilesafe.gpu import driver, launcher

    dev = driver.Device()
    rng = np.random.default_rng(0)
    rows = []
    for path in sorted(folder.glob("bench*.json")):
        data = json.loads(path.read_text())
        b = Bench(**data["bench"])
        spec = LaunchSpec.from_json(data["spec"])
        inputs = _inputs(spec, rng)
        tms = _torch_ms(b, inputs)
        res = launcher.run(spec, inputs, repeat=50, warmup=5, device=dev)
        if res.status != "ok":
            rows.append((b.name, res.status, 0.0, 0.0, 0.0, 0.0, res.error))
            continue
        ok = _check(b, inputs, res.tensors)
        nbytes = sum(a.nbytes for a in inputs.values())
        tb = nbytes / (res.ms * 1e-3) / 1e12
        ttb = nbytes / (tms * 1e-3) / 1e12
        rows.append((b.name, ok, res.ms, tb, tms, ttb, ""))
    dev.close()
    print(f"{'benchmark':44} {'check':6} {'ms':>8} {'TB/s':>6} {'torch ms':>9} "
          f"{'torch TB/s':>10} {'ratio':>6}")
    for name, ok, ms, tb, tms, ttb, err in rows:
        ratio = tb / ttb if ttb else 0.0
        print(f"{name:44} {ok:6} {ms:8.3f} {tb:6.2f} {tms:9.3f} {ttb:10.2f} {ratio:6.2f}"
              + (f"  {err}" if err else ""))


if __name__ == "__main__":
    cmd, where = sys.argv[1], Path(sys.argv[2])
    build(where) if cmd == "build" else run(where)
