"""Tensor-core GEMMs written in tilesafe, against cuBLAS (torch.matmul) in the same run.

Two steps, as bench/bench_gpu.py (the code generator needs ISL and z3, the GPU machine has
neither):

    python bench/bench_gemm.py build DIR     # host: compile + bind every benchmark
    python bench/bench_gemm.py run DIR       # GPU machine: numpy, cuda-python, torch

`run` synthesises A and B on the device machine from multiples of 1/4 in [-2, 2]: every
product and partial sum is then exact in f32 (|sum| <= 4 K with granularity 1/16 stays below
2^24 for K <= 2^16), so a correct kernel's f32 output equals the float64 product bit for bit
and its bf16 output equals that product rounded once -- the check is exact, not a tolerance.
It times each kernel with CUDA events (median of 20 launches after 3 warm-up launches),
times torch.matmul(A, B.T) in bf16 (cuBLAS) on the same tensors, and prints TFLOP/s
(2 M N K per launch) and the ratio to cuBLAS.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Gemm:
    name: str
    kernel: str  # corpus file, relative to the repository root
    sizes: dict[str, int]


def _mnk(m: int, n: int, k: int) -> dict[str, int]:
    return {"M": m, "N": n, "K": k}


SHAPES = [(4096, 4096, 4096), (8192, 8192, 8192), (8192, 8192, 2048)]
KERNELS = [("gemm_persistent", "corpus/wgmma/gemm_persistent.tsk"),
           ("gemm_tma_epi", "corpus/wgmma/gemm_tma_epi.tsk"),
           ("gemm_ws", "corpus/wgmma/gemm_ws.tsk"),
           ("two_consumers_mma", "corpus/wgmma/two_consumers_mma.tsk"),
           ("tma_ring_mma", "corpus/wgmma/tma_ring_mma.tsk")]
BENCHES = [Gemm(f"{m}x{n}x{k} {name}", path, _mnk(m, n, k))
           for (m, n, k) in SHAPES for name, path in KERNELS]


def build(folder: Path) -> None:
    from tilesafe.api import checked_program
    from tilesafe.codegen.compile import compile_kernel, unverified_banner
    from tilesafe.codegen.plan import bind

    folder.mkdir(parents=True, exist_ok=True)
    compiled = {}
    for i, b in enumerate(BENCHES):
        if b.kernel not in compiled:
            kernel = checked_program(ROOT / b.kernel).kernels[0]
            compiled[b.kernel] = kernel, compile_kernel(kernel, b.kernel, unverified_banner(
                ["TS538 the temporal model does not cover wgmma yet"]))
        kernel, code = compiled[b.kernel]
        spec = bind(kernel, code, b.sizes)
        (folder / f"gemm{i:02d}.json").write_text(json.dumps(
            {"bench": b.__dict__, "spec": spec.to_json()}))
        print(f"built {b.name}")


def _operands(m: int, n: int, k: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """bf16 bit patterns of multiples of 1/4 in [-2, 2] (exact in bf16)."""
    rng = np.random.default_rng(seed)
    out = []
    for rows in (m, n):
        q = rng.integers(-8, 9, size=(rows, k)).astype(np.float32) / 4.0
        out.append((q.view(np.uint32) >> 16).astype(np.uint16))
    return out[0], out[1]


def _time_torch(fn: object) -> float:
    import torch

    for _ in range(3):
        fn()  # type: ignore[operator]
    torch.cuda.synchronize()
    times = []
    for _ in range(20):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        fn()  # type: ignore[operator]
        e.record()
        e.synchronize()
        times.append(s.elapsed_time(e))
    return float(np.median(times))


def run(folder: Path) -> None:
    import torch

    from tilesafe.codegen.launch_spec import LaunchSpec
    from tilesafe.gpu import driver, launcher

    dev = driver.Device()
    rows = []
    reference: dict[tuple[int, int, int], tuple] = {}
    for path in sorted(folder.glob("gemm*.json")):
        data = json.loads(path.read_text())
        b = Gemm(**data["bench"])
        spec = LaunchSpec.from_json(data["spec"])
        m, n, k = b.sizes["M"], b.sizes["N"], b.sizes["K"]
        if (m, n, k) not in reference:
            a_bits, b_bits = _operands(m, n, k, m + n + k)
            ta = torch.from_numpy(a_bits.view(np.int16)).cuda().view(torch.bfloat16)
            tb = torch.from_numpy(b_bits.view(np.int16)).cuda().view(torch.bfloat16)
            exact = (ta.double() @ tb.double().T)  # every partial sum exact (see above)
            ms = _time_torch(lambda ta=ta, tb=tb: torch.matmul(ta, tb.T))
            reference[(m, n, k)] = (a_bits, b_bits, exact.float().cpu().numpy(), ms)
            del exact
        a_bits, b_bits, want32, torch_ms = reference[(m, n, k)]
        out = next(p for p in spec.params if p["kind"] == "tensor" and p["name"] == "c")
        poison = np.full((m, n), np.nan, np.float32)
        c0 = poison if out["dtype"] == "f32" else np.full((m, n), 0x7FFF, np.uint16)
        res = launcher.run(spec, {"a": a_bits, "b": b_bits, "c": c0}, repeat=20, warmup=3,
                           device=dev)
        if res.status != "ok":
            rows.append((b.name, res.status, 0.0, 0.0, torch_ms, res.error[:80]))
            continue
        got = res.tensors["c"]
        if out["dtype"] == "f32":
            ok = np.array_equal(got.view(np.uint32), want32.view(np.uint32))
        else:
            rounded = torch.from_numpy(want32).to(torch.bfloat16).view(torch.int16).numpy()
            ok = np.array_equal(got.view(np.int16), rounded)
        flops = 2.0 * m * n * k
        rows.append((b.name, "exact" if ok else "WRONG", res.ms, flops / res.ms / 1e9,
                     torch_ms, ""))
    dev.close()
    print(f"{'gemm (bf16 in, f32 accumulate)':36} {'check':6} {'ms':>8} {'TFLOP/s':>8} "
          f"{'cuBLAS ms':>9} {'cuBLAS TFLOP/s':>14} {'ratio':>6}")
    for name, ok, ms, tflops, tms, err in rows:
        m, n, k = (int(x) for x in name.split()[0].split("x"))
        ttf = 2.0 * m * n * k / tms / 1e9
        ratio = tflops / ttf if ttf else 0.0
        print(f"{name:36} {ok:6} {ms:8.3f} {tflops:8.1f} {tms:9.3f} {ttf:14.1f} {ratio:6.2f}"
              + (f"  {err}" if err else ""))


if __name__ == "__main__":
    cmd, where = sys.argv[1], Path(sys.argv[2])
    build(where) if cmd == "build" else run(where)
