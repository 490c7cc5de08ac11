"""Benchmark of the temporal checkers (barrier protocol + ownership).

For every corpus kernel: the wall time of `barrier` + `ownership` (fresh, as `verify` runs
them), and the states each exploration visits with and without partial-order reduction
(barrier semantics alone, and with permissions). Then a four-stage ring with two consumer
roles is proved for every trip count. Prints a table; run `python bench/bench_temporal.py`.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

from tilesafe.checkers import barrier, ownership, temporal
from tilesafe.checkers.obligation import Severity, Verdict
from tilesafe.checkers.registry import CheckOptions
from tilesafe.frontend.load import compile_source, load_program
from tilesafe.semantics.temporal import reduce
from tilesafe.semantics.temporal.events import build_model
from tilesafe.semantics.temporal.parametric import explore_all

ROOT = Path(__file__).resolve().parent.parent

FOUR_STAGE_TWO_CONSUMERS = """
kernel ring4x2(src: global f16[M, N], dst: global f16[M, N], dst2: global f16[M, N])
  where M % 64 == 0, N % 64 == 0, M > 0, N > 0, M <= 1048576, N <= 1048576
  grid (M / 64) block 288
{
  const STAGES = 4
  tensormap tin = tiled(src, box [64, 64], swizzle 128B)
  shared buf: f16[STAGES, 64, 64] layout swizzle128B(row_major) align 1024
  mbarrier full[STAGES] count 1 guards buf[i]
  mbarrier empty[STAGES] count 8 guards buf[i]

  if thread == 0 { init full; init empty; fence mbarrier_init }
  sync

  role producer = warp 0, elect one {
    for k in 0 .. N / 64 {
      let s = k % STAGES
      wait empty[s] parity (k / STAGES + 1) % 2
      arrive full[s], expect_tx bytes(buf[s])
      tma_load buf[s] <- tin[block.x * 64, k * 64] signal full[s]
    }
  }
  role consumer_a = warps 1 .. 5 {
    for k in 0 .. N / 64 {
      let s = k % STAGES
      wait full[s] parity (k / STAGES) % 2
      for e in 0 .. 32 {
        let idx = e * 128 + (thread - 32)
        dst[block.x * 64 + idx / 64, k * 64 + idx % 64] = buf[s, idx / 64, idx % 64]
      }
      arrive empty[s], one per warp
    }
  }
  role consumer_b = warps 5 .. 9 {
    for k in 0 .. N / 64 {
      let s = k % STAGES
      wait full[s] parity (k / STAGES) % 2
      for e in 0 .. 32 {
        let idx = e * 128 + (thread - 160)
        dst2[block.x * 64 + idx / 64, k * 64 + idx % 64] = buf[s, idx / 64, idx % 64]
      }
      arrive empty[s], one per warp
    }
  }
}
"""


def verdict(obs) -> str:
    errors = sorted({o.code for o in obs if o.verdict is not Verdict.PROVED
                     and o.severity is Severity.ERROR})
    if errors:
        return ",".join(c or "?" for c in errors)
    if all(o.verdict is Verdict.PROVED for o in obs):
        return "proved"
    # Not proved, but no error of its own: the kernel is refuted by the other checker.
    return "moot" if all(o.severity is not Severity.ERROR for o in obs
                         if o.verdict is not Verdict.PROVED) else "unknown"


def states(kernel, ownership_mode: bool, por: bool, options: CheckOptions) -> str:
    try:
        out = explore_all(build_model(kernel, ownership_mode), por, options.max_states,
                          options.timeout_ms)
    except Exception as exc:  # noqa: BLE001 - a benchmark reports, it does not stop
        return f"({type(exc).__name__})"
    return str(out.states) + ("" if out.complete or out.findings else "*")


def row(name: str, kernel, options: CheckOptions, no_por: bool) -> list[str]:
    temporal._CACHE.clear()
    temporal._STATIC.clear()
    t0 = time.perf_counter()
    b = barrier.check(kernel, options)
    o = ownership.check(kernel, options)
    seconds = time.perf_counter() - t0
    arg = b[0].evidence.get("argument", {}) if b and b[0].evidence else {}
    shape = (f"L={arg['L']} P={arg.get('P', '-')} m0={arg.get('m0', '-')} D={arg.get('D', '-')}"
             if "L" in arg else "-")
    cells = [name, verdict(b), verdict(o), f"{seconds:.2f}",
             states(kernel, False, True, options)]
    cells.append(states(kernel, False, False, options) if no_por else "-")
    cells.append(states(kernel, True, True, options))
    cells.append(states(kernel, True, False, options) if no_por else "-")
    cells.append(shape)
    return cells


def table(rows: list[list[str]]) -> str:
    head = ["kernel", "barrier", "ownership", "time s", "states POR", "no POR",
            "own. POR", "own. no POR", "periodicity"]
    widths = [max(len(r[i]) for r in rows + [head]) for i in range(len(head))]
    lines = ["  ".join(h.ljust(w) for h, w in zip(head, widths, strict=True)),
             "  ".join("-" * w for w in widths)]
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in rows]
    return "\n".join(lines)


def scale_kernel(roles: int, stages: int) -> str:
    """A producer warp and `roles` consumer roles (4 warps each up to 4 roles, else 2) over
    a ring of `stages`: the generator of tests/test_reductions.py."""
    sys.path.insert(0, str(ROOT / "tests"))
    from test_reductions import ring_kernel  # noqa: PLC0415 - the tests' own generator

    return ring_kernel(roles, stages, warps=4 if roles <= 4 else 2)


def scale_row(roles: int, stages: int, reduced: bool, seconds: float) -> dict:
    """One verification (barrier + ownership) in this process: verdict, seconds, states,
    peak resident MB. Run in a fresh process per row (bench's --scale)."""
    reduce.ENABLED = reduced
    kernel = compile_source(scale_kernel(roles, stages), "scale.tsk").kernels[0]
    options = CheckOptions(max_seconds=seconds)
    t0 = time.perf_counter()
    obs = barrier.check(kernel, options) + ownership.check(kernel, options)
    dt = time.perf_counter() - t0
    run = temporal.explore(kernel, True, options)
    states = run.outcome.states if run.outcome is not None else 0
    return {"verdict": verdict(obs), "seconds": dt, "states": states,
            "mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024}


def scale_table(seconds: float, unreduced: bool) -> str:
    """Roles x stages, each row in its own process (peak memory is per process)."""
    lines = [f"{'roles':>5} {'stages':>6}  {'before (unreduced)':<34}  {'after (reduced)':<30}",
             "-" * 80]
    for roles in (1, 2, 4, 8):
        for stages in (2, 4, 8):
            cells = []
            for red in ((False, True) if unreduced else (True,)):
                out = subprocess.run(
                    [sys.executable, __file__, "--scale-row", str(roles), str(stages),
                     str(int(red)), str(seconds)], capture_output=True, text=True,
                    timeout=seconds * 3 + 120, check=False)
                try:
                    r = json.loads(out.stdout.strip().splitlines()[-1])
                    cells.append(f"{r['verdict']:<8} {r['seconds']:7.2f} s {r['states']:>8} st "
                                 f"{r['mb']:>5} MB")
                except (ValueError, IndexError):
                    cells.append("(failed)")
            if not unreduced:
                cells.insert(0, "-")
            lines.append(f"{roles:>5} {stages:>6}  {cells[0]:<34}  {cells[1]:<30}")
            print(lines[-1], file=sys.stderr)
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    if argv is None and len(sys.argv) > 1 and sys.argv[1] == "--scale-row":
        r, s, red, sec = sys.argv[2:6]
        print(json.dumps(scale_row(int(r), int(s), red == "1", float(sec))))
        return 0
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--scale", action="store_true",
                    help="only the roles x stages table (reduced; with --unreduced also the "
                         "unreduced search, --seconds each)")
    ap.add_argument("--unreduced", action="store_true")
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--no-por", action="store_true", default=True,
                    help="also count states without partial-order reduction (default)")
    ap.add_argument("--skip-no-por", action="store_true", help="skip the no-POR counts")
    ap.add_argument("files", nargs="*", type=Path)
    args = ap.parse_args(argv)
    if args.scale:
        print(scale_table(args.seconds, args.unreduced))
        return 0
    options = CheckOptions()
    files = args.files or (sorted((ROOT / "corpus" / "good").glob("*.tsk"))
                           + sorted((ROOT / "corpus" / "bad").glob("ts[34]*.tsk")))
    rows = []
    for path in files:
        kernel = load_program(path).kernels[0]
        rows.append(row(path.stem, kernel, options, not args.skip_no_por))
        print(" ".join(rows[-1][:4]), file=sys.stderr)
    ring = compile_source(FOUR_STAGE_TWO_CONSUMERS, "ring4x2.tsk").kernels[0]
    rows.append(row("ring4x2 (4 stages, 2 consumer roles)", ring, options,
                    not args.skip_no_por))
    print(table(rows))
    temporal._CACHE.clear()
    b = barrier.check(ring, options)
    arg = b[0].evidence["argument"]
    print()
    print("ring4x2:", verdict(b), "for", arg.get("covers"), f"(T = {arg.get('T')}, "
          f"L = {arg.get('L')}, {arg.get('parity symmetry')}, m0 = {arg.get('m0')}, "
          f"P = {arg.get('P')}, D = {arg.get('D')}, K = {arg.get('K')}; trip counts explored "
          f"outright {arg.get('full trip counts')}, tails from level sets for "
          f"{arg.get('tail trip counts')})")
    print("states marked * : exploration incomplete (limit or unsupported), no findings")
    print("moot: not settled because the kernel is refuted by the other checker (a note)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
