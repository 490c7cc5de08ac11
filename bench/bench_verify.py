"""`tilesafe verify` time per corpus kernel, cold, one process per file, in one run.

Method (issue 19, item 1): each file is verified by its own child process running exactly
what a user runs -- `tilesafe verify --format json FILE`: every checker, the
value proof and, for a clause it does not prove, the interpreter's refuting search -- so
every figure is *cold*: interpreter start, imports, the first ISL context, nothing cached
from another file. The figure that counts is the child's **CPU time** (user + system, from
`os.wait4`), not wall time: the development machine has two cores shared with other
engineers, and wall time there measures them too. Wall time is printed beside it.

The child is this script's `--child FILE` mode: it wraps each registered checker in a CPU
timer (time.process_time, so a checker's first call includes its module imports) and then
calls `tilesafe.cli.main(["verify", "--format", "json", FILE])`, the CLI's own entry point.
Before measuring, the package's bytecode is compiled (`compileall`), as `pip install` does:
with PYTHONDONTWRITEBYTECODE set (as on the development machine) every cold run would
otherwise compile ~40,000 lines of source, which no installed copy pays.

Per file the table shows each checker's CPU seconds, `start` (interpreter start, the CLI's
imports, loading and everything outside the checkers: the process's CPU less theirs), the
child's CPU and wall seconds, its exit code and its verdicts (proved / refuted / unknown);
then the median and maximum CPU seconds over the files and whether the targets hold:
median < 1 s and every file < 5 s (`--median-target`, `--max-target`). The exit code
of a good kernel must stay 0 (`--expect-proved`, the default for corpus/good; a refuted
warning such as a bank-conflict finding does not change it): a row with another code is
marked and makes the script exit 1.

`--before REV` measures git revision REV too (`git archive` into a temporary directory,
byte-compiled, run with PYTHONPATH pointing there), on the same files, for a before/after
table from one run. Unless `--no-cliff`, a last table measures item 3: transpose_swizzled
with its 32 x 32 tile under swizzle(5, 0, 5) and the one-number edit to 32 x 33, `verify`
and `run` each.

Run from the repository root (PYTHONPATH=src or an installed tilesafe):

    python bench/bench_verify.py                      # corpus/good, the issue's target set
    python bench/bench_verify.py --before 55789ee     # and the state before this work
    python bench/bench_verify.py corpus/wgmma/*.tsk   # any files (targets still printed)
"""

from __future__ import annotations

import argparse
import compileall
import glob
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

MARK = "bench_verify checker cpu: "
CHECKERS = ("layout", "access", "global", "barrier", "ownership", "tma", "mma", "banks",
            "value")


def measure(cli_args: list[str], pythonpath: str | None = None) -> dict:
    """Run `tilesafe CLI_ARGS` in a fresh child process (with `pythonpath`: that copy of
    tilesafe); its CPU and wall seconds, exit code, each checker's CPU seconds and the
    verdict counts of a JSON verify."""
    cmd = [sys.executable, __file__, "--child", json.dumps(cli_args)]
    env = dict(os.environ)
    if pythonpath is not None:
        env["PYTHONPATH"] = pythonpath
    start = time.perf_counter()
    with tempfile.TemporaryFile("w+") as errfile:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=errfile, text=True,
                                env=env)
        out, rc, cpu = _reap(proc)
        wall = time.perf_counter() - start
        errfile.seek(0)
        err = errfile.read()
    per: dict[str, float] = dict.fromkeys(CHECKERS, 0.0)
    records = []
    for line in err.splitlines():
        if line.startswith(MARK):
            per.update(json.loads(line[len(MARK):]))
    try:
        records = json.loads(out)
    except json.JSONDecodeError:
        pass
    verdicts = {"proved": 0, "refuted": 0, "unknown": 0}
    for r in records if isinstance(records, list) else []:
        if isinstance(r, dict) and r.get("kind") == "obligation":
            verdicts[r["verdict"]] = verdicts.get(r["verdict"], 0) + 1
    err = "\n".join(x for x in err.splitlines() if not x.startswith(MARK))
    return {"cpu": cpu, "wall": wall, "rc": rc, "checkers": per, "verdicts": verdicts,
            "stderr": err[-400:]}


def child(cli_args: list[str]) -> int:
    """`tilesafe CLI_ARGS` through the CLI's entry point, each checker's CPU seconds written
    to standard error on one line after MARK."""
    from tilesafe import cli
    from tilesafe.checkers import registry

    spent: dict[str, float] = {}
    load = registry.load

    def timed_load(name: str) -> registry.CheckFn:
        start = time.process_time()
        fn = load(name)
        spent[name] = spent.get(name, 0.0) + time.process_time() - start

        def run(kernel, options):  # type: ignore[no-untyped-def]
            t = time.process_time()
            try:
                return fn(kernel, options)
            finally:
                spent[name] += time.process_time() - t
        return run

    registry.load = timed_load  # run_all looks `load` up in the module at each call
    rc = cli.main(cli_args)
    print(MARK + json.dumps(spent), file=sys.stderr)
    return rc


def _reap(proc: subprocess.Popen) -> tuple[str, int, float]:
    """Read the child's output, then reap it with os.wait4 for its own resource usage:
    user + system CPU of that process alone, not of anything else on the machine."""
    assert proc.stdout is not None
    out = proc.stdout.read()
    proc.stdout.close()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = rc = os.waitstatus_to_exitcode(status)
    return out, rc, usage.ru_utime + usage.ru_stime


def verify_args(path: str) -> list[str]:
    return ["verify", "--format", "json", path]


def checkout(rev: str, into: str) -> str:
    """The sources of git revision `rev` under `into`, byte-compiled; the PYTHONPATH that
    imports that copy of tilesafe (src/ since the package moved there, else the root)."""
    archive = subprocess.run(["git", "archive", rev], check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", into], input=archive, check=True)
    root = os.path.join(into, "src") if os.path.isdir(os.path.join(into, "src")) else into
    compileall.compile_dir(os.path.join(root, "tilesafe"), quiet=1)
    return root


def cliff(before: str | None) -> list[str]:
    """Item 3: transpose_swizzled with its f32[32, 32] tile under swizzle(5, 0, 5) and the
    one-number edit to f32[32, 33]: `verify` and `run` (M = N = 256) CPU seconds of each;
    the ragged case passes when it costs at most twice the power-of-two one."""
    text = open("corpus/good/transpose_swizzled.tsk", encoding="utf-8").read()
    pow2 = "shared t: f32[32, 32] layout swizzle(5, 0, 5, row_major)"
    assert pow2 in text
    lines = [f"{'tile':10s} {'verify cpu s':>12s} {'rc':>3s} {'run cpu s':>10s} {'rc':>3s}"
             + (f" {'before: verify':>14s} {'run':>7s}" if before else "")]
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        costs = {}
        for shape in ("32, 32", "32, 33"):
            path = os.path.join(tmp, f"transpose_{shape.replace(', ', 'x')}.tsk")
            with open(path, "w", encoding="utf-8") as f:
                f.write(text.replace(pow2, pow2.replace("32, 32", shape)))
            runs = ["run", "--size", "M=256,N=256", path]
            v, r = measure(verify_args(path)), measure(runs)
            costs[shape] = (v["cpu"], r["cpu"])
            row = (f"{'f32[' + shape + ']':10s} {v['cpu']:12.2f} {v['rc']:3d} "
                   f"{r['cpu']:10.2f} {r['rc']:3d}")
            if before:
                bv, br = measure(verify_args(path), before), measure(runs, before)
                row += f" {bv['cpu']:14.2f} {br['cpu']:7.2f}"
            lines.append(row)
        for i, what in enumerate(("verify", "run")):
            ratio = costs["32, 33"][i] / max(costs["32, 32"][i], 1e-9)
            ok = ok and ratio <= 2.0
            lines.append(f"{what}: 32 x 33 costs {ratio:.2f}x the 32 x 32 case")
    lines.append(f"target ragged within 2x of the power-of-two case: {'PASS' if ok else 'FAIL'}")
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("files", nargs="*", help="default: corpus/good/*.tsk")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--before", metavar="REV",
                        help="also measure git revision REV (its own sources, same files): "
                             "a before/after table from one run")
    parser.add_argument("--median-target", type=float, default=1.0, metavar="S")
    parser.add_argument("--max-target", type=float, default=5.0, metavar="S")
    parser.add_argument("--expect-proved", action="store_true",
                        help="mark files whose exit code is not 0 (default when no files are "
                             "given)")
    parser.add_argument("--no-cliff", action="store_true",
                        help="leave out the 32 x 33 swizzle table (item 3)")
    args = parser.parse_args()
    if args.child:
        return child(json.loads(args.child))
    import tilesafe

    compileall.compile_dir(os.path.dirname(tilesafe.__file__), quiet=1)
    with tempfile.TemporaryDirectory() as tmp:
        before = checkout(args.before, tmp) if args.before else None
        return report(args, before)


def report(args: argparse.Namespace, before: str | None) -> int:
    files = args.files or sorted(glob.glob("corpus/good/*.tsk"))
    expect = args.expect_proved or not args.files
    head = (f"{'file (cold, cpu s)':22s} " + " ".join(f"{c[:7]:>7s}" for c in CHECKERS)
            + f" {'start':>7s} {'cpu s':>7s} {'wall s':>7s} {'rc':>3s} {'verdicts p/r/u':>14s}"
            + (f" {'before s':>9s} {'rc':>3s}" if before else ""))
    print(head)
    print("-" * len(head), flush=True)
    rows, olds = [], []
    for path in files:
        row = measure(verify_args(path))
        rows.append(row)
        v = row["verdicts"]
        bad = row["rc"] != 0 if expect else row["rc"] not in (0, 1)
        name = os.path.splitext(os.path.basename(path))[0]
        line = (f"{name[:22]:22s} "
                + " ".join(f"{row['checkers'].get(c, 0.0):7.2f}" for c in CHECKERS)
                + f" {row['cpu'] - sum(row['checkers'].values()):7.2f} {row['cpu']:7.2f} "
                f"{row['wall']:7.2f} {row['rc']:3d} "
                f"{v['proved']:>6d}/{v['refuted']}/{v['unknown']}")
        if before:
            old = measure(verify_args(path), before)
            olds.append(old)
            line += f" {old['cpu']:9.2f} {old['rc']:3d}"
            bad = bad or old["rc"] != row["rc"]
        print(line + ("  <-- unexpected" if bad else ""), flush=True)
        if row["rc"] not in (0, 1):
            print(f"   stderr: {row['stderr'].strip()}", flush=True)
    cpus = [r["cpu"] for r in rows]
    med, top = statistics.median(cpus), max(cpus)
    slowest = files[cpus.index(top)]
    ok_med, ok_max = med < args.median_target, top < args.max_target
    print(f"\n{len(rows)} files, CPU seconds per file (user + sys of its process): "
          f"median {med:.2f} s, max {top:.2f} s ({os.path.basename(slowest)}), "
          f"total {sum(cpus):.1f} s; wall total {sum(r['wall'] for r in rows):.1f} s")
    if olds:
        ocpus = [r["cpu"] for r in olds]
        same = all(a["rc"] == b["rc"] for a, b in zip(rows, olds, strict=True))
        print(f"before ({args.before}): median {statistics.median(ocpus):.2f} s, max "
              f"{max(ocpus):.2f} s ({os.path.basename(files[ocpus.index(max(ocpus))])}), "
              f"total {sum(ocpus):.1f} s; exit codes "
              f"{'identical' if same else 'DIFFER'}")
    print(f"target median < {args.median_target:g} s: {'PASS' if ok_med else 'FAIL'}; "
          f"target every file < {args.max_target:g} s: {'PASS' if ok_max else 'FAIL'}")
    unexpected = [p for p, r in zip(files, rows, strict=True)
                  if (r["rc"] != 0 if expect else r["rc"] not in (0, 1))]
    if unexpected:
        print(f"unexpected exit codes: {', '.join(unexpected)}")
    ok_cliff = True
    if not args.no_cliff:
        print("\nItem 3, a ragged tile under a swizzle (corpus/good/transpose_swizzled.tsk "
              "and its 32 x 33 edit):")
        lines = cliff(before)
        print("\n".join(lines), flush=True)
        ok_cliff = lines[-1].endswith("PASS")
    return 0 if ok_med and ok_max and ok_cliff and not unexpected else 1


if __name__ == "__main__":
    sys.exit(main())
