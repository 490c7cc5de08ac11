"""Where the GEMM's time goes: ablations timed in one run, and single launches for ncu.

    python bench/profile_gemm.py build DIR          # host: compile gemm and its ablations
    python bench/profile_gemm.py run DIR            # GPU: time them (CUDA events)
    python bench/profile_gemm.py once DIR NAME      # GPU: launch one case once (for ncu)

Without hardware counters in every runtime, the device method is to time variants that leave
one stage out and take differences (METHOD.md). The ablations of corpus/wgmma/gemm.tsk:

* `gemm`        the kernel;
* `no-epilogue` the text between its `// epilogue: begin` and `// epilogue: end` markers
                removed: the accumulator is never stored (the output is wrong; only the time
                matters), so gemm - no-epilogue is what the epilogue costs where it does not
                overlap with anything;
* `one-wave`    gemm at M = 128 x 132 / 4 rows: one tile per block, so the pipeline fill and
                one epilogue are the whole kernel (a per-tile fixed cost).

`once` exists for `ncu --clock-control none -k regex:gemm python3 bench/profile_gemm.py once
DIR NAME`: one launch, no warm-up, so the profiler sees exactly one kernel of ours.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
KERNEL = ROOT / "corpus" / "wgmma" / "gemm.tsk"
SHAPES = [(8192, 8192, 1000), (8192, 8192, 8192), (4096, 4096, 4096)]


def variants() -> dict[str, str]:
    text = KERNEL.read_text()
    cut = re.sub(r"\n *// epilogue: begin.*?// epilogue: end[^\n]*", "", text, flags=re.S)
    assert cut != text, "gemm.tsk lost its epilogue markers"
    return {"gemm": text, "no-epilogue": cut}


def build(folder: Path) -> None:
    from tilesafe.api import checked_program
    from tilesafe.codegen.compile import compile_kernel, unverified_banner
    from tilesafe.codegen.plan import bind

    folder.mkdir(parents=True, exist_ok=True)
    for name, text in variants().items():
        kernel = checked_program(KERNEL, text).kernels[0]
        code = compile_kernel(kernel, str(KERNEL), unverified_banner(["ablation, not verified"]))
        for m, n, k in SHAPES + ([(128 * 33, 1024, 8192)] if name == "gemm" else []):
            tag = f"{name}-{m}x{n}x{k}"
            spec = bind(kernel, code, {"M": m, "N": n, "K": k})
            (folder / f"{tag}.json").write_text(json.dumps({"name": tag, "spec": spec.to_json()}))
            print("built", tag)


def _arrays(spec: object) -> dict[str, np.ndarray]:
    out = {}
    for p in spec.params:  # type: ignore[attr-defined]
        if p["kind"] == "tensor":
            out[p["name"]] = np.full(p["shape"], 0x3C00, np.uint16)  # bf16 1.0 pattern
    return out


def run(folder: Path, only: str | None = None, repeat: int = 20) -> None:
    from tilesafe.codegen.launch_spec import LaunchSpec
    from tilesafe.gpu import driver, launcher

    dev = driver.Device()
    print(f"{'case':32} {'ms':>8} {'TFLOP/s':>8}")
    for path in sorted(folder.glob("*.json")):
        data = json.loads(path.read_text())
        if only is not None and data["name"] != only:
            continue
        spec = LaunchSpec.from_json(data["spec"])
        m, n, k = (int(x) for x in data["name"].rsplit("-", 1)[1].split("x"))
        res = launcher.run(spec, _arrays(spec), repeat=repeat, warmup=0 if only else 3,
                           device=dev)
        ms = res.ms if res.ms is not None else float("nan")
        print(f"{data['name']:32} {ms:8.3f} {2.0 * m * n * k / ms / 1e9:8.1f}  {res.status}")
    dev.close()


if __name__ == "__main__":
    cmd, where = sys.argv[1], Path(sys.argv[2])
    if cmd == "build":
        build(where)
    elif cmd == "once":
        run(where, only=sys.argv[3], repeat=1)
    else:
        run(where)
