"""Benchmark of the argument for a loop nest (docs/temporal.md §15): the persistent GEMMs.

For each kernel, in a fresh process (as `tilesafe verify --only barrier,ownership` runs
it): CPU and wall seconds, peak memory, the verdicts, the states the ownership exploration
visited, and what the nested argument did (runs, levels explored and shared, the classes,
thresholds and periods). Run `python bench/bench_nested.py [FILE ...]`.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
KERNELS = ("corpus/wgmma/gemm_persistent.tsk", "corpus/wgmma/gemm.tsk")


def one(path: str) -> dict:
    """Verify one file's temporal obligations in this process and summarise them."""
    from tilesafe import api

    t0, c0 = time.perf_counter(), time.process_time()
    obligations = api.verify(ROOT / path, only=("barrier", "ownership"))
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    own = next(o.evidence for o in obligations if o.checker == "ownership")
    arg = own.get("argument", {})
    return {"file": path, "cpu s": round(cpu, 1), "wall s": round(wall, 1),
            "peak MB": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024,
            "verdicts": sorted({o.verdict.value for o in obligations}),
            "states": own.get("states explored (with partial-order reduction)"),
            "runs": arg.get("runs"), "levels explored": arg.get("levels explored"),
            "levels shared": arg.get("levels shared"),
            "classes": {k: len(v) for k, v in arg.get("classes", {}).items()},
            "thresholds": arg.get("thresholds"), "periods": arg.get("periods")}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("files", nargs="*", default=list(KERNELS))
    p.add_argument("--one", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.one:
        print(json.dumps(one(args.one)))
        return 0
    for path in args.files:
        out = subprocess.run([sys.executable, __file__, "--one", path], capture_output=True,
                             text=True, check=True)
        print(out.stdout.strip().splitlines()[-1])
    return 0


if __name__ == "__main__":
    sys.exit(main())
