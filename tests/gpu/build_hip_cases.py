"""Build the HIP-on-CUDA differential cases on the host (issue 25, item 5): the HIP C++ that
`tilesafe compile --target gfx942` emits, compiled with nvcc through the prelude's CUDA
branch, run on an NVIDIA GPU against the reference interpreter's gfx942 semantics.

    python tests/gpu/build_hip_cases.py OUT_DIR [--seeds 3]

What it checks, and what it cannot: the printer's arithmetic (widths, wrapping, floor
division, the f16/bf16/i32 conversions and min/max of the prelude, which are the very
integer C++ an AMD GPU would run), its addressing of global memory and of every layout in
LDS, its loops, guards and barriers -- on hardware, bit for bit against the interpreter
running the kernel with 64-lane `lane`/`warp_id`/roles (the emitted code computes them from
the thread index, so an NVIDIA GPU runs the same meaning). Not checked: AMD's own f32
arithmetic, LDS, wavefront scheduling and barrier; nothing here has run on an AMD GPU.

Every kernel of the AMD subset that verifies for gfx942 (tests/test_hip_amd.py's PROVED):
corpus/good at the sizes of tests/corpus_refs.CASES with random inputs, corpus/codegen at
its `// sizes:` with adversarial inputs (NaN, +-0, +-inf, subnormals, huge values,
full-range integers), corpus/amd at the sizes below with random inputs. Case names start
with `hip-`. The output folder is what `python -m tilesafe.gpu.cases run` reads on the GPU
machine (numpy and cuda-python only): `python3 -P -m tilesafe.gpu.cases run DIR --only hip-`
(tests/gpu/device_run.sh step `hip`).
"""

from __future__ import annotations

import argparse
import itertools
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from build_cases import _tag, adversarial_inputs, header_sizes  # noqa: E402
from corpus_refs import CASES  # noqa: E402

from tilesafe.api import checked_program, verify_kernel  # noqa: E402
from tilesafe.codegen import hip_toolchain  # noqa: E402
from tilesafe.codegen.hip_compile import compile_hip  # noqa: E402
from tilesafe.codegen.plan import CompiledKernel, bind  # noqa: E402
from tilesafe.frontend import ir  # noqa: E402
from tilesafe.frontend.diagnostics import DiagnosticError  # noqa: E402
from tilesafe.gpu.cases import Case, save_case  # noqa: E402
from tilesafe.semantics.interpreter.interp import run_kernel  # noqa: E402
from tilesafe.semantics.interpreter.interp_io import random_inputs  # noqa: E402

AMD_SIZES = {"row_reduce64": [{"M": 1, "N": 1}, {"M": 9, "N": 65}, {"M": 37, "N": 200}],
             "transpose64": [{"M": 64, "N": 64}, {"M": 192, "N": 128}]}


def subset(only: set[str] | None = None) -> Iterator[tuple[Path, ir.Kernel, str]]:
    """(file, kernel resolved for gfx942, inputs kind) of every kernel of the AMD subset that
    verifies for gfx942 (those named in `only`, when given)."""
    folders = (("good", "random"), ("codegen", "adversarial"), ("amd", "random"))
    for folder, kind in folders:
        for path in sorted((ROOT / "corpus" / folder).glob("*.tsk")):
            if only is not None and path.stem not in only:
                continue
            try:
                kernel = checked_program(path, target="gfx942").kernels[0]
            except DiagnosticError:
                continue  # TMA, mbarriers, roles past the block: not in the AMD subset
            failing = [o for o in verify_kernel(kernel) if o.failed]
            if failing:
                print(f"skip {path.stem}: not proved for gfx942 "
                      f"({', '.join(sorted({o.code or '-' for o in failing}))})",
                      file=sys.stderr)
                continue
            yield path, kernel, kind


def sizes_of(path: Path) -> list[dict[str, int]]:
    if path.parent.name == "good":
        return [dict(s) for s in CASES[path.stem].sizes] if path.stem in CASES else []
    if path.parent.name == "codegen":
        return header_sizes(path)
    return AMD_SIZES.get(path.stem, [])


def hip_cases(seeds: int, nvcc: str, only: set[str] | None = None) -> Iterator[Case]:
    for path, kernel, kind in subset(only):
        hip = compile_hip(kernel, str(path.relative_to(ROOT)))
        ptx = hip_toolchain.compile_cuda(hip.hip, nvcc)
        compiled = CompiledKernel(hip.name, ptx, hip.params, hip.block, hip.smem_bytes)
        for sizes, seed in itertools.product(sizes_of(path), range(seeds)):
            if kind == "adversarial":
                inputs = adversarial_inputs(kernel, sizes, seed)
            else:
                inputs = random_inputs(kernel, sizes, np.random.default_rng(seed))
            ref = run_kernel(kernel, sizes, inputs, seed=seed)
            yield Case(f"hip-{path.stem}-{_tag(sizes)}-s{seed}", bind(kernel, compiled, sizes),
                       inputs, "interp", dict(ref.tensors),
                       {"kernel": path.stem, "sizes": sizes, "seed": seed, "target": "gfx942",
                        "source": "HIP C++ through nvcc (HIP on CUDA)"})


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("out")
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--kernels", default=None, help="kernels to build, comma-separated")
    a = p.parse_args(argv)
    nvcc = hip_toolchain.find_nvcc()
    if nvcc is None:
        print("nvcc not on PATH: the HIP modules cannot be compiled for CUDA", file=sys.stderr)
        return 2
    n = 0
    only = set(a.kernels.split(",")) if a.kernels else None
    for case in hip_cases(a.seeds, nvcc, only):
        save_case(Path(a.out), case)
        n += 1
        print(case.name, flush=True)
    print(f"{n} cases in {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
