"""Translation validation time per corpus kernel (good and codegen corpora).

For each kernel: PTX lines, the validator's wall time on its first call in this process
(what `tilesafe compile` pays on top of code generation), the median of re-runs, the number
of obligations and of z3 queries, the slowest obligation, and the verdicts. Run from the
repository root:  python bench/bench_validate.py [--repeat N] [FILE...]
"""

from __future__ import annotations

import argparse
import glob
import statistics
import time
from collections import Counter

from tilesafe.api import checked_program
from tilesafe.codegen.compile import compile_kernel
from tilesafe.codegen.validate import obligations


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=2, help="warm repetitions (median)")
    parser.add_argument("files", nargs="*", default=sorted(
        glob.glob("corpus/good/*.tsk") + glob.glob("corpus/codegen/*.tsk")))
    args = parser.parse_args()
    print(f"{'kernel':22s} {'PTX lines':>9s} {'cold s':>7s} {'warm s':>7s} {'oblig':>6s} "
          f"{'queries':>7s} {'slowest':>8s}  verdicts")
    colds = []
    for path in args.files:
        for kernel in checked_program(path).kernels:
            ptx = compile_kernel(kernel, path).ptx
            runs, obs, queries = [], [], 0
            for _ in range(1 + args.repeat):
                budget = obligations.Budget(120.0, 10000)
                v = obligations._Validator(kernel, ptx, budget)
                t0 = time.perf_counter()
                obligations.T.reset()
                obs = v.run()
                runs.append(time.perf_counter() - t0)
                queries = budget.queries
            colds.append(runs[0])
            verdicts = Counter(o.verdict.value for o in obs)
            slowest = max((o.seconds for o in obs), default=0.0)
            warm = statistics.median(runs[1:]) if len(runs) > 1 else runs[0]
            print(f"{kernel.name:22s} {len(ptx.splitlines()):9d} {runs[0]:7.2f} {warm:7.2f} "
                  f"{len(obs):6d} {queries:7d} {slowest:8.2f}  "
                  + ", ".join(f"{n} {k}" for k, n in sorted(verdicts.items())))
    print(f"\n{len(colds)} kernels: slowest {max(colds):.2f} s, median "
          f"{statistics.median(colds):.2f} s, total {sum(colds):.2f} s (cold)")


if __name__ == "__main__":
    main()
