"""Tensor-core GEMMs written in tilesafe, against cuBLAS (torch.matmul) in the same run.

Two steps, as bench/bench_gpu.py (the code generator needs ISL and z3, the GPU machine has
neither):

    python bench/bench_gemm.py build DIR [--only gemm,gemm_multicast]
                                             # host: compile + bind the benchmarks
    python bench/bench_gemm.py run DIR       # GPU machine: numpy, cuda-python, torch

`gemm_multicast` is `gemm` in clusters of two CTAs sharing each B tile by TMA multicast
(bench/kernels/gemm_multicast.tsk: a benchmark kernel, its proof unknown), launched with
cuLaunchKernelEx and the cluster dimension: the same table shows what the multicast buys
over `gemm` at every shape.

`run` synthesises A and B on the device machine from multiples of 1/4 in [-2, 2]: every
product and partial sum is then exact in f32 (|sum| <= 4 K with granularity 1/16 stays below
2^24 for K <= 2^16), so a correct kernel's output equals the float64 product rounded once
into bf16/f16, bit for bit, at every element -- ragged tails included: the check is exact,
not a tolerance. It times each kernel with CUDA events (median of 20 launches after 3
warm-up launches) and torch.matmul(A, B.T) (cuBLAS) on the same tensors, and prints TFLOP/s
(2 M N K per launch) and the ratio to cuBLAS. A second launch on random normal inputs gives
the normwise relative error max |C - C64| / max |C64| against the float64 product, beside
cuBLAS's own on the same inputs.
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
    dtype: str = "bf16"  # the input dtype: the kernel's bf16 replaced by f16 for "f16"


def _mnk(m: int, n: int, k: int) -> dict[str, int]:
    return {"M": m, "N": n, "K": k}


SHAPES = [(4096, 4096, 4096), (8192, 8192, 8192), (8192, 8192, 2048), (4000, 4000, 4000),
          (8192, 8192, 1000)]
LADDER = [("gemm_multicast", "bench/kernels/gemm_multicast.tsk"),
          ("gemm", "corpus/wgmma/gemm.tsk"),
          ("gemm_halves", "bench/kernels/gemm_halves.tsk"),
          ("gemm_persistent", "corpus/wgmma/gemm_persistent.tsk"),
          ("gemm_tma_epi", "corpus/wgmma/gemm_tma_epi.tsk"),
          ("gemm_ws", "corpus/wgmma/gemm_ws.tsk"),
          ("two_consumers_mma", "corpus/wgmma/two_consumers_mma.tsk"),
          ("tma_ring_mma", "corpus/wgmma/tma_ring_mma.tsk"),
          ("mma_multicast", "corpus/cluster/mma_multicast.tsk")]
BENCHES = [Gemm(f"{m}x{n}x{k} {name}", path, _mnk(m, n, k))
           for (m, n, k) in SHAPES for name, path in LADDER] + \
          [Gemm(f"{m}x{n}x{k} {name} f16", path, _mnk(m, n, k), "f16")
           for (m, n, k) in SHAPES for name, path in LADDER[:2]]


def source(b: Gemm) -> str:
    """The kernel's text; the f16 variant is the same kernel with every bf16 made f16 (the
    language has no dtype parameters; the checks and the code generator see a new kernel)."""
    text = (ROOT / b.kernel).read_text()
    return text if b.dtype == "bf16" else text.replace("bf16", b.dtype)


def build(folder: Path, only: set[str] | None = None) -> None:
    from tilesafe.api import checked_program
    from tilesafe.codegen.compile import compile_kernel, unverified_banner
    from tilesafe.codegen.plan import bind
    from tilesafe.semantics.interpreter.interp import InterpError
    from tilesafe.semantics.interpreter.interp_io import check_where

    folder.mkdir(parents=True, exist_ok=True)
    compiled = {}
    for i, b in enumerate(BENCHES):
        if only is not None and b.name.split()[1] not in only:
            continue
        key = (b.kernel, b.dtype)
        if key not in compiled:
            kernel = checked_program(ROOT / b.kernel, source(b)).kernels[0]
            compiled[key] = kernel, compile_kernel(kernel, b.kernel, unverified_banner(
                ["(the benchmark build does not run the checkers: `tilesafe verify` does)"]))
        kernel, code = compiled[key]
        try:
            check_where(kernel, b.sizes)
        except InterpError:
            continue  # the kernel does not take this shape (a ladder step before ragged edges)
        spec = bind(kernel, code, b.sizes)
        (folder / f"gemm{i:02d}.json").write_text(json.dumps(
            {"bench": b.__dict__, "spec": spec.to_json()}))
        print(f"built {b.name}")


def _quarters(rows: int, k: int, rng: np.random.Generator) -> np.ndarray:
    """Multiples of 1/4 in [-2, 2] as f32 (exact in bf16 and f16)."""
    return rng.integers(-8, 9, size=(rows, k)).astype(np.float32) / 4.0


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


class _Reference:
    """Per shape and dtype: the operands (exact and random), what they must give, cuBLAS."""

    def __init__(self, m: int, n: int, k: int, dtype: str) -> None:
        import torch

        self.torch_dtype = torch.bfloat16 if dtype == "bf16" else torch.float16
        rng = np.random.default_rng(m + n + k)
        exact = [torch.from_numpy(_quarters(r, k, rng)).cuda().to(self.torch_dtype)
                 for r in (m, n)]
        # every partial sum of quarters is exact in f32 and float64 alike
        self.exact_f32 = (exact[0].double() @ exact[1].double().T).float()
        self.exact = [self._bits(x) for x in exact]
        self.want_bits = self._bits(self.exact_f32.to(self.torch_dtype))
        self.torch_ms = _time_torch(lambda: torch.matmul(exact[0], exact[1].T))
        rand = [torch.randn(r, k, device="cuda", dtype=torch.float32).to(self.torch_dtype)
                for r in (m, n)]
        self.rand = [self._bits(x) for x in rand]
        self.rand_f64 = rand[0].double() @ rand[1].double().T
        self.cublas_err = self.error(torch.matmul(rand[0], rand[1].T))

    @staticmethod
    def _bits(x: object) -> np.ndarray:
        import torch

        return x.contiguous().view(torch.int16).cpu().numpy().view(np.uint16)  # type: ignore

    def error(self, c: object) -> float:
        """Normwise relative error against the float64 product: max |C - ref| / max |ref|."""
        ref = self.rand_f64
        return float((c.double() - ref).abs().max() / ref.abs().max())  # type: ignore


def run(folder: Path) -> None:
    import torch

    from tilesafe.codegen.launch_spec import LaunchSpec
    from tilesafe.gpu import driver, launcher

    dev = driver.Device()
    rows = []
    refs: dict[tuple[int, int, int, str], _Reference] = {}
    for path in sorted(folder.glob("gemm*.json")):
        data = json.loads(path.read_text())
        b = Gemm(**data["bench"])
        spec = LaunchSpec.from_json(data["spec"])
        m, n, k = b.sizes["M"], b.sizes["N"], b.sizes["K"]
        key = (m, n, k, b.dtype)
        if key not in refs:
            refs.clear()  # one shape's operands on the device at a time
            torch.cuda.empty_cache()
            refs[key] = _Reference(m, n, k, b.dtype)
        ref = refs[key]
        tensors = {p["name"]: p["dtype"] for p in spec.params if p["kind"] == "tensor"}
        as_in = launcher.NUMPY[tensors["a"]]
        out_f32 = tensors["c"] == "f32"
        poison = np.full((m, n), np.nan, np.float32) if out_f32 else \
            np.full((m, n), 0x7FFF, np.uint16).view(launcher.NUMPY[tensors["c"]])
        res = launcher.run(spec, {"a": ref.exact[0].view(as_in), "b": ref.exact[1].view(as_in),
                                  "c": poison}, repeat=20, warmup=3, device=dev)
        if res.status != "ok":
            rows.append((b, res.status, 0.0, ref, float("nan"), res.error[:80]))
            continue
        got = res.tensors["c"]
        if out_f32:
            ok = np.array_equal(got, ref.exact_f32.cpu().numpy())
        else:
            ok = np.array_equal(got.view(np.uint16), ref.want_bits)
        rand = launcher.run(spec, {"a": ref.rand[0].view(as_in), "b": ref.rand[1].view(as_in),
                                   "c": poison}, device=dev)
        err = float("nan")
        if rand.status == "ok":
            c = rand.tensors["c"]
            err = ref.error(torch.from_numpy(c).cuda() if out_f32 else
                            torch.from_numpy(c.view(np.int16)).cuda().view(ref.torch_dtype))
        rows.append((b, "exact" if ok else "WRONG", res.ms, ref, err, ""))
    dev.close()
    print(f"{'gemm (f32 accumulate)':32} {'in':4} {'check':6} {'ms':>7} {'TFLOP/s':>8} "
          f"{'cuBLAS ms':>9} {'cuBLAS':>7} {'ratio':>6} {'rel.err':>8} {'cuBLAS err':>10}")
    for b, ok, ms, ref, err, note in rows:
        m, n, k = b.sizes["M"], b.sizes["N"], b.sizes["K"]
        flops = 2.0 * m * n * k
        tf = flops / ms / 1e9 if ms else 0.0
        ttf = flops / ref.torch_ms / 1e9
        print(f"{b.name.replace(' f16', ''):32} {b.dtype:4} {ok:6} {ms:7.3f} {tf:8.1f} "
              f"{ref.torch_ms:9.3f} {ttf:7.1f} {tf / ttf:6.2f} {err:8.1e} "
              f"{ref.cublas_err:10.1e}" + (f"  {note}" if note else ""))


if __name__ == "__main__":
    cmd, where = sys.argv[1], Path(sys.argv[2])
    pick = set(sys.argv[4].split(",")) if len(sys.argv) > 4 and sys.argv[3] == "--only" else None
    build(where, pick) if cmd == "build" else run(where)
