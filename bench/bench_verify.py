"""Verification time per corpus kernel and per checker, measured in one run.

Prints a table: for each good kernel, the wall time of each registered checker (first run,
cold caches, and a warm re-run), the number of obligations, and the slowest single
obligation, plus the share of obligations under the 0.5 s target. Run from the repository
root:  python bench/bench_verify.py [--repeat N]
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
    print(f"{'kernel':24s} " + " ".join(f"{n:>10s}" for n in names)
          + f" {'total':>8s} {'oblig':>6s} {'slowest':>8s}")
    all_obligations = []
    totals = []
    for path in args.files:
        for kernel in load_program(path).kernels:
            row, total, count, slowest = [], 0.0, 0, 0.0
            for name in names:
                check = registry.load(name)
                times = []
                for _ in range(1 + args.repeat):
                    start = time.perf_counter()
                    obs = check(kernel, CheckOptions())
                    times.append(time.perf_counter() - start)
                warm = statistics.median(times[1:]) if len(times) > 1 else times[0]
                row.append(f"{warm:9.3f}s")
                total += warm
                count += len(obs)
                slowest = max([slowest] + [o.seconds for o in obs])
                all_obligations.extend(obs)
            totals.append(total)
            print(f"{kernel.name:24s} " + " ".join(f"{c:>10s}" for c in row)
                  + f" {total:7.3f}s {count:6d} {slowest:7.3f}s")
    under = sum(1 for o in all_obligations if o.seconds < TARGET_SECONDS)
    print(f"\n{len(all_obligations)} obligations (last warm run of each), {under} under "
          f"{TARGET_SECONDS} s ({100 * under / max(1, len(all_obligations)):.1f}%); "
          f"slowest kernel {max(totals):.3f} s, median kernel {statistics.median(totals):.3f} s "
          f"(warm medians of {args.repeat})")


if __name__ == "__main__":
    main()
