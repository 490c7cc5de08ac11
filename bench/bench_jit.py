"""What a `specialize` variant buys on a ragged kernel: the general kernel and its variant
at the same sizes, on the GPU, in one run (docs/jit.md).

Two steps, as bench/bench_gemm.py (verification and code generation need ISL and z3, the
GPU machine has neither):

    python bench/bench_jit.py build DIR     # host: tilesafe.jit builds (verified), bound
    python bench/bench_jit.py run DIR       # GPU machine: numpy, cuda-python (torch optional)

The kernel is examples/kernels/scale_bias.tsk (y = x * scale + bias per column, any M, N).
At sizes where a variant's facts hold, `build` writes the launch of the general kernel and
of the variant the portfolio picks (each proved and translation-validated on its own). `run`
launches both on the same inputs, checks that they write the same bits and that the bits
are numpy's (x * scale rounded to f32, then + bias: exact, no tolerance), and times each
with CUDA events (median of 50 launches after 5 warm-up launches); with torch present, the
same expression in torch on the same tensors is timed beside them. It prints GB/s (x and y
moved once) and the variant's speed-up over the general kernel.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
KERNEL = ROOT / "examples" / "kernels" / "scale_bias.tsk"
# (M, N): multiples of 64 (the guard-free variant); N <= 64 (the one-chunk variant)
SHAPES = [(8192, 8192), (4096, 16384), (16384, 1024), (1 << 20, 64), (1 << 20, 48),
          (65536, 40)]


def build(folder: Path) -> None:
    import tilesafe
    from tilesafe.codegen.plan import bind

    folder.mkdir(parents=True, exist_ok=True)
    k = tilesafe.jit(KERNEL, device="interp")
    for m, n in SHAPES:
        sizes = {"M": m, "N": n}
        variant, b = k.select(sizes)
        if variant is None:
            print(f"{m} x {n}: no variant holds; skipped")
            continue
        runs = {"general": bind(k.general.kernel, k.general.compiled, sizes),
                "variant": bind(b.kernel, b.compiled, sizes)}
        (folder / f"jit_{m}x{n}.json").write_text(json.dumps({
            "sizes": sizes, "variant": variant.describe(),
            "specs": {name: spec.to_json() for name, spec in runs.items()}}))
        print(f"built {m} x {n}: general and `specialize {variant.describe()}`")


def _time_torch(fn: object) -> float:
    import torch

    for _ in range(5):
        fn()  # type: ignore[operator]
    torch.cuda.synchronize()
    times = []
    for _ in range(50):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        fn()  # type: ignore[operator]
        e.record()
        e.synchronize()
        times.append(s.elapsed_time(e))
    return float(np.median(times))


def run(folder: Path) -> None:
    from tilesafe.codegen.launch_spec import LaunchSpec
    from tilesafe.gpu import driver, launcher

    try:
        import torch
    except ImportError:
        torch = None
    dev = driver.Device()
    print(f"{'M x N':>14} {'variant':28} {'check':6} {'general ms':>10} {'GB/s':>7} "
          f"{'variant ms':>10} {'GB/s':>7} {'speed-up':>8} {'torch ms':>9}")
    for path in sorted(folder.glob("jit_*.json")):
        data = json.loads(path.read_text())
        m, n = data["sizes"]["M"], data["sizes"]["N"]
        rng = np.random.default_rng(m + n)
        x = (rng.integers(-8, 9, (m, n)) / 4).astype(np.float32)
        scale = (rng.integers(-8, 9, n) / 4).astype(np.float32)
        bias = (rng.integers(-8, 9, n) / 4).astype(np.float32)
        want = (x * scale).astype(np.float32) + bias
        arrays = {"x": x, "scale": scale, "bias": bias,
                  "y": np.full((m, n), np.nan, np.float32)}
        ms, outs, status = {}, {}, []
        for name in ("general", "variant"):
            spec = LaunchSpec.from_json(data["specs"][name])
            res = launcher.run(spec, arrays, repeat=50, warmup=5, device=dev)
            status.append(res.status if res.status != "ok" else "")
            ms[name] = res.ms or float("nan")
            outs[name] = res.tensors.get("y")
        ok = all(o is not None and np.array_equal(o, want) for o in outs.values())
        check = "exact" if ok else ("WRONG" if not any(status) else "/".join(status))
        torch_ms = float("nan")
        if torch is not None:
            tx, ts, tb = (torch.from_numpy(a).cuda() for a in (x, scale, bias))
            torch_ms = _time_torch(lambda tx=tx, ts=ts, tb=tb: tx * ts + tb)
        gb = 2 * m * n * 4 / 1e6  # x read, y written (scale, bias negligible)
        print(f"{f'{m} x {n}':>14} {data['variant'][:28]:28} {check:6} {ms['general']:10.4f} "
              f"{gb / ms['general']:7.0f} {ms['variant']:10.4f} {gb / ms['variant']:7.0f} "
              f"{ms['general'] / ms['variant']:8.2f} {torch_ms:9.4f}")
    dev.close()


if __name__ == "__main__":
    cmd, where = sys.argv[1], Path(sys.argv[2])
    build(where) if cmd == "build" else run(where)
