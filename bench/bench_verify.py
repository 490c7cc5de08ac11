"""Verification time per corpus kernel and per checker, measured in one run.

Prints a table: for each good kernel, the wall time of each registered checker on its
first (cold) call in this process — what `tilesafe verify` pays — then the kernel's cold
total, its warm total (median of re-runs: checkers may cache per kernel), the number of
obligations and the slowest single obligation; last, the share of obligations under the
0.5 s target. Run from the repository root:  python bench/bench_verify.py [--repeat N]
"""

from __future__ import annotations

import argparse
import glob
import statistics
import time

from tilesafe.checkers import registry
from tilesafe.checkers.registry import CheckOptions
from tilesafe.frontend.load import load_program

TARGET_SECONDS = 0.5


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=3, help="warm repetitions (median)")
    parser.add_argument("files", nargs="*", default=sorted(glob.glob("corpus/good/*.tsk")))
    args = parser.parse_args()
    names = list(registry.CHECKERS)
    print(f"{'kernel (cold s)':24s} " + " ".join(f"{n:>9s}" for n in names)
          + f" {'cold':>7s} {'warm':>7s} {'oblig':>6s} {'slowest':>8s}")
    all_obligations = []
    totals = []
    for path in args.files:
        for kernel in load_program(path).kernels:
            row, total, warm_total, count, slowest = [], 0.0, 0.0, 0, 0.0
            for name in names:
                check = registry.load(name)
                times = []
                for _ in range(1 + args.repeat):
                    start = time.perf_counter()
                    obs = check(kernel, CheckOptions())
                    times.append(time.perf_counter() - start)
                    if len(times) == 1:
                        first = obs
                warm = statistics.median(times[1:]) if len(times) > 1 else times[0]
                row.append(f"{times[0]:8.3f}s")
                total += times[0]
                warm_total += warm
                count += len(first)
                slowest = max([slowest] + [o.seconds for o in first])
                all_obligations.extend(first)
            totals.append(total)
            print(f"{kernel.name:24s} " + " ".join(f"{c:>9s}" for c in row)
                  + f" {total:6.3f}s {warm_total:6.3f}s {count:6d} {slowest:7.3f}s")
    under = sum(1 for o in all_obligations if o.seconds < TARGET_SECONDS)
    print(f"\n{len(all_obligations)} obligations, {under} under {TARGET_SECONDS} s "
          f"({100 * under / max(1, len(all_obligations)):.1f}%); cold: slowest kernel "
          f"{max(totals):.3f} s, median kernel {statistics.median(totals):.3f} s")


if __name__ == "__main__":
    main()
