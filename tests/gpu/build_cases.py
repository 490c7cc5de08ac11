"""Build the GPU differential-test cases on the host (needs the full tilesafe install).

    python tests/gpu/build_cases.py OUT_DIR [--only good,codegen,bad,big,cluster] [--seeds 3]

* good:    every corpus/good kernel at every size of tests/corpus_refs.CASES (non-powers of
           two and ragged edges wherever `where` allows) x seeds, inputs from
           `random_inputs`, expected = the interpreter's tensors;
* codegen: corpus/codegen kernels (every construct) at the sizes their `// sizes:` header
           lists, with adversarial inputs (NaN, +-0, +-inf, subnormals, huge values,
           full-range integers), expected = the interpreter's tensors;
* cluster: every corpus/cluster kernel (thread-block clusters: DSMEM, multicast TMA, the
           cluster barrier; launched with cuLaunchKernelEx and the cluster dimension) at
           the sizes of tests/cluster_refs.CASES x seeds, expected = the interpreter's
           tensors, which must equal the NumPy reference bit for bit before a case is saved;
* bad:     every corpus/bad kernel that compiles with --unverified, at small sizes its
           `where` allows: what the hardware does is recorded ("observe");
* fuzz:    random scalar programs (tests/gpu/fuzz_kernels.py) on adversarial inputs;
* big:     the pipelined TMA copy at 65536 x 40960 f16 (5 GiB a tensor, byte offsets past
           2^32), inputs synthesised on the GPU machine, checked with numpy.

The output folder is what `python -m tilesafe.gpu.cases run` reads on the GPU machine.
"""

from __future__ import annotations

import argparse
import itertools
import re
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from cluster_refs import CASES as CLUSTER_CASES  # noqa: E402
from corpus_refs import CASES  # noqa: E402

from tilesafe.api import checked_program as load_program  # noqa: E402
from tilesafe.codegen.compile import compile_kernel, unverified_banner  # noqa: E402
from tilesafe.codegen.plan import bind  # noqa: E402
from tilesafe.frontend import ir  # noqa: E402
from tilesafe.frontend.diagnostics import DiagnosticError  # noqa: E402
from tilesafe.gpu.cases import Case, save_case  # noqa: E402
from tilesafe.semantics.expr import fp  # noqa: E402
from tilesafe.semantics.interpreter.interp import InterpError, run_kernel  # noqa: E402
from tilesafe.semantics.interpreter.interp_io import (  # noqa: E402
    check_where,
    random_inputs,
    tensor_shapes,
    tensor_usage,
)
from tilesafe.semantics.value import spec_eval  # noqa: E402
from tilesafe.semantics.value.spec_inputs import value_inputs  # noqa: E402

SIZES_RE = re.compile(r"^//\s*sizes:\s*(.+)$", re.M)


def _tag(sizes: dict[str, int]) -> str:
    return "x".join(f"{k}{v}" for k, v in sizes.items()) or "nosize"


def header_sizes(path: Path) -> list[dict[str, int]]:
    """`// sizes: M=16 | M=48,N=8` -> [{"M": 16}, {"M": 48, "N": 8}]."""
    m = SIZES_RE.search(path.read_text())
    if m is None:
        return []
    out = []
    for alt in m.group(1).split("|"):
        if alt.strip() == "none":  # a kernel without sizes: one launch
            out.append({})
            continue
        items = [p.split("=") for p in alt.strip().split(",") if p.strip()]
        out.append({k.strip(): int(v) for k, v in items})
    return out


def adversarial_inputs(kernel: ir.Kernel, sizes: dict[str, int], seed: int
                       ) -> dict[str, np.ndarray]:
    """Inputs that exercise rounding and special values: a quarter ordinary values, the
    rest drawn from NaN, +-0, +-inf, subnormals, values near the f16 range's edge and far
    beyond it, integers of every magnitude. Written-only tensors are poisoned as usual."""
    rng = np.random.default_rng(1000 + seed)
    base = random_inputs(kernel, sizes, rng)
    _, written = tensor_usage(kernel)
    specials = np.array([np.nan, 0.0, -0.0, np.inf, -np.inf, 1e-40, -3e-39, 65504.0,
                         65520.0, -70000.0, 3.4e38, 1.0000001, 0.1, 1.0 / 3.0, 2.0**24 + 1,
                         -(2.0**31), 2.0**31, 1e30], dtype=np.float32)
    out = {}
    for t in kernel.params:
        a = base[t.name]
        if t.name in written:
            out[t.name] = a
            continue
        n = a.size
        if t.dtype.is_float:
            vals = (rng.standard_normal(n) * 10.0 ** rng.uniform(-4, 4, n)).astype(np.float32)
            pick = rng.random(n)
            vals = np.where(pick < 0.25, rng.choice(specials, n), vals)
            vals = np.where((pick >= 0.25) & (pick < 0.5),
                            (rng.integers(-8, 9, n) / 4).astype(np.float32), vals)
            vals = vals.astype(np.float32).reshape(a.shape)
            if t.dtype is ir.DType.BF16:
                out[t.name] = fp.f32_array_to_bf16(vals)
            elif t.dtype is ir.DType.F16:
                out[t.name] = vals.astype(np.float16)
            else:
                out[t.name] = vals
        elif t.dtype is ir.DType.I32:
            big = rng.integers(-(2**31), 2**31, n, dtype=np.int64)
            small = rng.integers(-20, 21, n)
            out[t.name] = np.where(rng.random(n) < 0.5, big, small).astype(np.int32).reshape(
                a.shape)
        else:
            out[t.name] = rng.integers(0, 256, n).astype(np.uint8).reshape(a.shape)
    return out


def _interp_case(name: str, kernel: ir.Kernel, compiled, sizes: dict[str, int],
                 inputs: dict[str, np.ndarray], seed: int, expect: str,
                 meta: dict) -> Case:
    spec = bind(kernel, compiled, sizes)
    try:
        ref = run_kernel(kernel, sizes, inputs, seed=seed)
    except InterpError as err:
        if expect == "interp":
            raise
        meta = {**meta, "interp": f"{err.code} {err.message}"[:300]}
        return Case(name, spec, inputs, expect, {}, meta)
    return Case(name, spec, inputs, expect, dict(ref.tensors), meta)


def good_cases(seeds: int, only: set[str] | None = None) -> Iterator[Case]:
    for kname in sorted(CASES):
        if only is not None and kname not in only:
            continue
        path = ROOT / "corpus" / "good" / f"{kname}.tsk"
        kernel = load_program(path).kernels[0]
        compiled = compile_kernel(kernel, str(path))
        for sizes, seed in itertools.product(CASES[kname].sizes, range(seeds)):
            inputs = random_inputs(kernel, sizes, np.random.default_rng(seed))
            yield _interp_case(f"good-{kname}-{_tag(sizes)}-s{seed}", kernel, compiled,
                               dict(sizes), inputs, seed, "interp",
                               {"kernel": kname, "sizes": sizes, "seed": seed})


def codegen_cases(seeds: int) -> Iterator[Case]:
    for path in sorted((ROOT / "corpus" / "codegen").glob("*.tsk")):
        kernel = load_program(path).kernels[0]
        compiled = compile_kernel(kernel, str(path))
        for sizes, seed in itertools.product(header_sizes(path), range(seeds)):
            inputs = adversarial_inputs(kernel, sizes, seed)
            yield _interp_case(f"codegen-{path.stem}-{_tag(sizes)}-s{seed}", kernel,
                               compiled, sizes, inputs, seed, "interp",
                               {"kernel": path.stem, "sizes": sizes, "seed": seed})


def wgmma_cases(seeds: int) -> Iterator[Case]:
    """Tensor-core kernels (corpus/wgmma) at the sizes of their header. The scalar
    interpreter does not run them yet, so what to expect is the specification on inputs
    that make it exact: small integers (every product and partial sum of the f32
    accumulator is an integer below 2^24, so any summation order gives the same bits) and
    full-range u8. A wrong descriptor, swizzle, fragment map or k-step permutes or drops
    products and shows as a different integer."""
    paths = sorted((ROOT / "corpus" / "wgmma").glob("*.tsk")) + [
        ROOT / "corpus" / "cluster" / "mma_multicast.tsk",  # tensor cores in clusters
        ROOT / "bench" / "kernels" / "gemm_multicast.tsk"]
    for path in paths:
        kernel = load_program(path).kernels[0]
        compiled = compile_kernel(kernel, str(path), unverified_banner(
            ["TS538 the temporal model does not cover wgmma yet"]))
        for sizes, seed in itertools.product(header_sizes(path), range(seeds)):
            inputs = value_inputs(kernel, sizes, 500 + seed, True)
            shapes = tensor_shapes(kernel, sizes)
            want = {e.tensor: spec_eval.expected(kernel, e, sizes, inputs, shapes)
                    for e in kernel.ensures}
            want = {t: a.astype(inputs[t].dtype) for t, a in want.items()}
            yield Case(f"wgmma-{path.stem}-{_tag(sizes)}-s{seed}", bind(kernel, compiled, sizes),
                       inputs, "interp", want,
                       {"kernel": path.stem, "sizes": sizes, "seed": seed,
                        "expected": "specification, exact inputs"})


def cluster_cases(seeds: int) -> Iterator[Case]:
    for kname in sorted(CLUSTER_CASES):
        ref, all_sizes = CLUSTER_CASES[kname]
        path = ROOT / "corpus" / "cluster" / f"{kname}.tsk"
        kernel = load_program(path).kernels[0]
        compiled = compile_kernel(kernel, str(path))
        for sizes, seed in itertools.product(all_sizes, range(seeds)):
            inputs = random_inputs(kernel, sizes, np.random.default_rng(seed))
            case = _interp_case(f"cluster-{kname}-{_tag(sizes)}-s{seed}", kernel, compiled,
                                dict(sizes), inputs, seed, "interp",
                                {"kernel": kname, "sizes": sizes, "seed": seed,
                                 "cluster": list(kernel.cluster or ())})
            for name, want in ref(sizes, inputs).items():
                got = case.expected[name]
                if not np.array_equal(got.view(np.uint8), np.asarray(want).view(np.uint8)):
                    raise SystemExit(f"{case.name}: the interpreter's {name} differs from the "
                                     "NumPy reference")
            yield case


def small_sizes(kernel: ir.Kernel) -> dict[str, int] | None:
    """Small sizes the kernel's `where` allows (the first of a few typical values)."""
    cands = (64, 128, 192, 32, 100, 72, 16, 8, 1, 256, 320)
    for combo in itertools.product(cands, repeat=len(kernel.sizes)):
        sizes = dict(zip(kernel.sizes, combo, strict=True))
        try:
            check_where(kernel, sizes)
            shapes = tensor_shapes(kernel, sizes)
        except InterpError:
            continue
        if sum(int(np.prod(s)) for s in shapes.values()) <= 200_000:
            return sizes
    return None


def counterexample(kernel: ir.Kernel, code: str) -> tuple[dict[str, int], dict] | None:
    """The sizes of the checkers' counterexample for `code`, when it names small ones, and
    the counterexample: the bug then shows at the sizes where it was refuted (a descriptor
    rule broken for some N is not broken at every N; a value bug shows on the inputs the
    value checker built to expose it, not necessarily on others)."""
    from tilesafe.api import verify_kernel

    for o in verify_kernel(kernel):
        cex = o.counterexample or {}
        sizes = cex.get("sizes") if isinstance(cex, dict) else None
        if o.code == code and isinstance(sizes, dict) and sizes:
            try:
                sizes = {k: int(v) for k, v in sizes.items()}
                check_where(kernel, sizes)
                shapes = tensor_shapes(kernel, sizes)
            except (InterpError, TypeError, ValueError):
                continue
            if sum(int(np.prod(sh)) for sh in shapes.values()) <= 3_000_000:
                return sizes, dict(cex)
    return None


def bad_cases() -> Iterator[Case]:
    for path in sorted((ROOT / "corpus" / "bad").glob("*.tsk")):
        code = path.read_text().splitlines()[0].split("expect:")[-1].split()[0]
        try:
            kernel = load_program(path).kernels[0]
            compiled = compile_kernel(kernel, str(path), unverified_banner([code]))
        except DiagnosticError:
            continue  # a frontend error: nothing to compile
        found = counterexample(kernel, code)
        sizes = found[0] if found else small_sizes(kernel)
        if sizes is None:
            continue
        inputs = random_inputs(kernel, sizes, np.random.default_rng(0))
        if found and "seed" in found[1] and "inputs" in found[1]:  # a value refutation's
            inputs = value_inputs(kernel, sizes, int(found[1]["seed"]),
                                  found[1]["inputs"] == "small integers")
        try:
            case = _interp_case(f"bad-{path.stem}", kernel, compiled, sizes, inputs, 0,
                                "observe", {"kernel": path.stem, "code": code, "sizes": sizes})
        except InterpError:
            continue
        shapes = tensor_shapes(kernel, sizes)
        case.spec_expected = {e.tensor: spec_eval.expected(kernel, e, sizes, inputs, shapes)
                              for e in kernel.ensures}
        yield case


def fuzz_cases(count: int) -> Iterator[Case]:
    """Random scalar programs (tests/gpu/fuzz_kernels.py) that verify and compile, at the
    sizes of their header, on adversarial inputs. Kernels the gate or the code generator
    refuses (e.g. TS701: a product of data values beyond 64 bits) are reported and skipped."""
    import tempfile

    from fuzz_kernels import Gen

    from tilesafe.api import verify_kernel

    with tempfile.TemporaryDirectory() as tmp:
        for n in range(count):
            path = Path(tmp) / f"fuzz{n:04d}.tsk"
            path.write_text(Gen(n).kernel(path.stem))
            try:
                kernel = load_program(path).kernels[0]
                if any(o.failed for o in verify_kernel(kernel)):
                    print(f"skip {path.stem}: not proved", file=sys.stderr)
                    continue
                compiled = compile_kernel(kernel, path.name)
            except DiagnosticError as err:
                print(f"skip {path.stem}: {err.diagnostics[0].code}", file=sys.stderr)
                continue
            for sizes in header_sizes(path):
                inputs = adversarial_inputs(kernel, sizes, n)
                yield _interp_case(f"fuzz-{path.stem}-{_tag(sizes)}", kernel, compiled,
                                   sizes, inputs, n, "interp",
                                   {"kernel": path.stem, "sizes": sizes, "seed": n,
                                    "source": path.read_text()})


def big_cases() -> Iterator[Case]:
    path = ROOT / "corpus" / "good" / "pipeline2.tsk"
    kernel = load_program(path).kernels[0]
    compiled = compile_kernel(kernel, str(path))
    sizes = {"M": 65536, "N": 40960}
    spec = bind(kernel, compiled, sizes)
    yield Case("big-pipeline2-M65536xN40960", spec, {}, "copy", {},
               {"kernel": "pipeline2", "sizes": sizes, "copy": ["src", "dst"],
                "bytes_per_tensor": 65536 * 40960 * 2})


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("out")
    p.add_argument("--only", default="good,codegen,bad,big,fuzz")
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--fuzz", type=int, default=150, help="random scalar programs")
    p.add_argument("--kernels", default=None,
                   help="good kernels to build, comma-separated (default: all)")
    a = p.parse_args(argv)
    only = set(a.kernels.split(",")) if a.kernels else None
    out = Path(a.out)
    kinds = a.only.split(",")
    makers = {"good": lambda: good_cases(a.seeds, only), "codegen": lambda: codegen_cases(a.seeds),
              "bad": bad_cases, "big": big_cases, "fuzz": lambda: fuzz_cases(a.fuzz),
              "wgmma": lambda: wgmma_cases(a.seeds), "cluster": lambda: cluster_cases(a.seeds)}
    n = 0
    for kind in kinds:
        for case in makers[kind]():
            save_case(out, case)
            n += 1
            print(f"{case.name}", flush=True)
    print(f"{n} cases in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
