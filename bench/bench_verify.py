"""Verification time per corpus kernel and per checker, measured in one run.

Each kernel is verified in a fresh process (`python -m ... --one FILE`), so every figure is
*cold*: imports, the first ISL context, nothing cached from another kernel -- what one
`tilesafe verify FILE` pays. Prints, per kernel, the wall time of each registered checker,
the total, the CPU time of the process, the number of obligations and the slowest one; then
the median and maximum over the kernels and the share of obligations under 0.5 s.
`--in-process` runs everything in this process instead (the older, warm-biased figure).
Run from the repository root:  python bench/bench_verify.py [FILES...]
"""

from __future__ import annotations

import argparse
import glob
import json
import statistics
import subprocess
import sys
import time

TARGET_SECONDS = 0.5


def one(path: str) -> dict:
    """Verify every kernel of `path` here; per checker wall seconds, obligations."""
    from tilesafe.checkers import registry
    from tilesafe.checkers.registry import CheckOptions
    from tilesafe.frontend.load import load_program

    start = time.perf_counter()
    cpu = time.process_time()
    rows = []
    for kernel in load_program(path).kernels:
        per = {}
        seconds = []
        for name in registry.CHECKERS:
            t = time.perf_counter()
            obs = registry.load(name)(kernel, CheckOptions())
            per[name] = time.perf_counter() - t
            seconds += [o.seconds for o in obs]
        rows.append({"kernel": kernel.name, "checkers": per, "obligations": len(seconds),
                     "slowest": max(seconds, default=0.0), "seconds": seconds})
    return {"rows": rows, "total": time.perf_counter() - start,
            "cpu": time.process_time() - cpu}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("files", nargs="*", default=sorted(glob.glob("corpus/good/*.tsk")))
    parser.add_argument("--one", help=argparse.SUPPRESS)
    parser.add_argument("--in-process", action="store_true")
    args = parser.parse_args()
    if args.one:
        print(json.dumps(one(args.one)))
        return
    from tilesafe.checkers import registry

    names = list(registry.CHECKERS)
    print(f"{'kernel (cold s)':24s} " + " ".join(f"{n[:9]:>9s}" for n in names)
          + f" {'total':>7s} {'process':>8s} {'cpu':>7s} {'oblig':>6s} {'slowest':>8s}")
    totals, everything = [], []
    for path in args.files:
        t = time.perf_counter()
        if args.in_process:
            result = one(path)
        else:
            out = subprocess.run([sys.executable, __file__, "--one", path], check=True,
                                 capture_output=True, text=True).stdout
            result = json.loads(out)
        wall = time.perf_counter() - t
        for row in result["rows"]:
            cells = " ".join(f"{row['checkers'].get(n, 0.0):8.3f}s" for n in names)
            total = sum(row["checkers"].values())
            totals.append(wall)
            everything += row["seconds"]
            print(f"{row['kernel']:24s} {cells} {total:6.3f}s {wall:7.3f}s "
                  f"{result['cpu']:6.3f}s {row['obligations']:6d} {row['slowest']:7.3f}s",
                  flush=True)
    under = sum(1 for s in everything if s < TARGET_SECONDS)
    print(f"\n{len(everything)} obligations, {under} under {TARGET_SECONDS} s "
          f"({100 * under / max(1, len(everything)):.1f}%); per kernel, whole process (cold): "
          f"median {statistics.median(totals):.3f} s, max {max(totals):.3f} s")


if __name__ == "__main__":
    main()
