"""Reference interpreter throughput, scalar engine against vector engine, in one run.

The scalar engine (semantics/interpreter/interp.py) steps every thread through a Python generator;
the vector engine (semantics/interpreter/interp_vec.py) executes a statement for a whole group of
threads as numpy operations. Both run the same launches here: elementwise from 10^5 to 10^7, the
pipelined TMA kernels (pipeline2, pipeline3, tma_copy_ring) and a reduction (row_reduce)
up to a few 10^6 elements.

Elements: all elements of all global tensors of the launch, inputs and outputs (elementwise
at N has 3N + 1). Seconds: CPU time (time.process_time: user + system of this process, so
other jobs on the shared 2-core development machine do not count; numpy runs these
operations on one thread) of `run_kernel` (input copies included): the scalar engine's one
run, the vector engine's best of --repeat, after one untimed vector run of each kernel
(module imports, cached TMA box arrangements).
The last lines say whether issue 19's targets hold (item 2): at least 10 M elements/s on
elementwise at its largest size, at least 1 M elements/s on every launch of the pipelined
TMA kernels (pipeline2, pipeline3, tma_copy_ring).
The scalar engine runs only where the launch has at most --scalar-limit elements (it would
take minutes beyond); there the table says whether the two engines' outputs are
bit-identical. Run from the repository root:  python bench/bench_interp.py
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

from tilesafe.frontend import ir
from tilesafe.frontend.load import load_program
from tilesafe.semantics.expr import fp
from tilesafe.semantics.interpreter.interp import run_kernel, tensor_shapes
from tilesafe.semantics.interpreter.smem import NUMPY_DTYPE

CASES: list[tuple[str, dict[str, int]]] = [
    ("elementwise", {"N": 10**5}),
    ("elementwise", {"N": 10**6}),
    ("elementwise", {"N": 10**7}),
    ("pipeline2", {"M": 512, "N": 512}),
    ("pipeline2", {"M": 1024, "N": 1024}),
    ("pipeline2", {"M": 2048, "N": 1024}),
    ("pipeline3", {"M": 512, "N": 512}),
    ("pipeline3", {"M": 1024, "N": 1024}),
    ("pipeline3", {"M": 2048, "N": 1024}),
    ("tma_copy_ring", {"L": 1024}),
    ("tma_copy_ring", {"L": 8192}),
    ("row_reduce", {"M": 512, "N": 512}),
    ("row_reduce", {"M": 4096, "N": 512}),
    ("row_reduce", {"M": 8192, "N": 512}),
]


def inputs(kernel: ir.Kernel, sizes: dict[str, int], seed: int) -> dict[str, np.ndarray]:
    """interp_io.random_inputs' values (quarter-integers in [-2, 2], NaN-poisoned outputs)
    without its thread limit, which guards the scalar engine, not these launches."""
    rng = np.random.default_rng(seed)
    out = {}
    for t in kernel.params:
        shape = tensor_shapes(kernel, sizes)[t.name]
        vals = (np.full(shape, np.nan, np.float32) if not t.role.defined_on_entry
                else (rng.integers(-8, 9, size=shape) / 4).astype(np.float32))
        out[t.name] = (fp.f32_array_to_bf16(vals) if t.dtype is ir.DType.BF16
                       else vals.astype(NUMPY_DTYPE[t.dtype]))
    return out


def timed(kernel: ir.Kernel, sizes: dict[str, int], data: dict[str, np.ndarray],
          engine: str) -> tuple[float, dict[str, np.ndarray]]:
    t0 = time.process_time()
    res = run_kernel(kernel, sizes, data, engine=engine)
    return time.process_time() - t0, res.tensors


ELEMENTWISE_TARGET = 10.0  # M elements/s
PIPELINED_TARGET = 1.0
PIPELINED = ("pipeline2", "pipeline3", "tma_copy_ring")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--scalar-limit", type=int, default=700_000,
                        help="run the scalar engine up to this many elements (default 700000)")
    parser.add_argument("--repeat", type=int, default=3,
                        help="vector runs per launch, the fastest reported (default 3)")
    parser.add_argument("--quick", action="store_true", help="the smallest size of each kernel")
    args = parser.parse_args()
    cases = CASES
    if args.quick:
        cases = [c for i, c in enumerate(CASES) if i == 0 or CASES[i - 1][0] != c[0]]
    head = (f"{'kernel':14s} {'sizes':>16s} {'elements':>10s} {'scalar s':>9s} "
            f"{'M el/s':>7s} {'vector s':>9s} {'M el/s':>7s} {'speed-up':>8s}  same")
    print("seconds are CPU seconds of this process (time.process_time); M el/s = million "
          "elements of the launch's global tensors per CPU second")
    print(head)
    print("-" * len(head))
    warm: set[str] = set()
    rates: dict[str, list[float]] = {}
    for name, sizes in cases:
        kernel = load_program(f"corpus/good/{name}.tsk").kernels[0]
        data = inputs(kernel, sizes, 0)
        if name not in warm:  # imports and per-process caches (TMA box arrangements)
            warm.add(name)
            timed(kernel, sizes, data, "vector")
        elements = sum(a.size for a in data.values())
        runs = [timed(kernel, sizes, data, "vector") for _ in range(max(1, args.repeat))]
        vs, vout = min(runs, key=lambda r: r[0])
        rates.setdefault(name, []).append(elements / vs / 1e6)
        text = ",".join(f"{k}={v}" for k, v in sizes.items())
        row = f"{name:14s} {text:>16s} {elements:10d} "
        if elements <= args.scalar_limit:
            ss, sout = timed(kernel, sizes, data, "scalar")
            same = all(np.array_equal(vout[n].view(f"u{vout[n].itemsize}"),
                                      sout[n].view(f"u{sout[n].itemsize}")) for n in vout)
            row += (f"{ss:9.2f} {elements / ss / 1e6:7.2f} {vs:9.3f} "
                    f"{elements / vs / 1e6:7.2f} {ss / vs:7.0f}x  {'yes' if same else 'NO'}")
        else:
            row += f"{'-':>9s} {'-':>7s} {vs:9.3f} {elements / vs / 1e6:7.2f} {'-':>8s}  -"
        print(row, flush=True)
    return targets(rates)


def targets(rates: dict[str, list[float]]) -> int:
    """Issue 19, item 2, on the vector engine's rates (M elements/s, CPU)."""
    ok = True
    if "elementwise" in rates:
        r = rates["elementwise"][-1]
        ok = ok and r >= ELEMENTWISE_TARGET
        print(f"\ntarget elementwise >= {ELEMENTWISE_TARGET:g} M el/s at its largest size: "
              f"{r:.1f} -- {'PASS' if r >= ELEMENTWISE_TARGET else 'FAIL'}")
    tma = [(n, min(rates[n])) for n in PIPELINED if n in rates]
    if tma:
        worst = min(r for _, r in tma)
        ok = ok and worst >= PIPELINED_TARGET
        print(f"target pipelined TMA kernels >= {PIPELINED_TARGET:g} M el/s on every launch: "
              + ", ".join(f"{n} {r:.1f}" for n, r in tma)
              + f" -- {'PASS' if worst >= PIPELINED_TARGET else 'FAIL'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
