"""Every verdict tilesafe gives on the corpus and the mutation gate, as one canonical record.

Why: a restructuring (issue 18: the explorer as a package, expressions folded through one
table, the src/ layout) must not change a single verdict. This tool writes, for every file
of corpus/good, corpus/bad and corpus/codegen and every gate mutant of corpus/mutants, each
obligation's checker, name, verdict, code and severity, plus the state counts of the
temporal explorations (with and without partial-order reduction) -- or the lint
diagnostics' codes when the file does not lint. Timings and messages are left out (they
change run to run). Run before and after, then compare:

    python bench/verdict_snapshot.py write before.json
    python bench/verdict_snapshot.py write after.json
    python bench/verdict_snapshot.py compare before.json after.json
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
STATE_KEYS = ("states explored (with partial-order reduction)",
              "states explored (without partial-order reduction)", "transitions")


def record(path: Path, only: tuple[str, ...] | None = None) -> dict:
    from tilesafe import api
    from tilesafe.frontend.diagnostics import DiagnosticError

    try:
        obligations = api.verify(path, only=only)
    except DiagnosticError as err:
        return {"lint": sorted({d.code for d in err.diagnostics})}
    rows = []
    for o in obligations:
        row = {"checker": o.checker, "name": o.name, "verdict": o.verdict.value,
               "code": o.code, "severity": o.severity.value}
        states = {k: o.evidence[k] for k in STATE_KEYS if k in (o.evidence or {})}
        if states:
            row["states"] = states
        rows.append(row)
    rows.sort(key=lambda r: (r["checker"], r["name"]))
    return {"obligations": rows}


def gate_mutants() -> list[tuple[str, str]]:
    """(id, text) of every gate mutant of the baseline, regenerated."""
    from tilesafe.mutation import baseline
    from tilesafe.mutation.generate import propose

    entries = [e for e in baseline.load(ROOT / "corpus" / "mutants") if e.gate]
    out = []
    by_kernel: dict[str, list] = {}
    for e in entries:
        by_kernel.setdefault(e.kernel, []).append(e)
    for kernel, es in sorted(by_kernel.items()):
        _, cands, *_ = propose(ROOT / kernel, tuple(sorted({e.operator for e in es})))
        by_id = {c.id: c for c in cands}
        for e in es:
            if e.id in by_id:
                out.append((e.id, by_id[e.id].text))
    return out


def write(out: Path, only: tuple[str, ...] | None = None,
          files: list[Path] | None = None, mutants: bool = True) -> None:
    snapshot: dict[str, dict] = {}
    files = files or sorted((ROOT / "corpus").glob("*/*.tsk"))
    for i, path in enumerate(files):
        snapshot[str(path.resolve().relative_to(ROOT))] = record(path, only)
        print(f"[{i + 1}/{len(files)}] {path.name}", file=sys.stderr, flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        for mid, text in gate_mutants() if mutants else ():
            target = Path(tmp) / f"{mid.split(':')[0].replace('/', '_')}.tsk"
            target.write_text(text, encoding="utf-8")
            snapshot[f"mutant {mid}"] = record(target, only)
            print(f"mutant {mid}", file=sys.stderr, flush=True)
    out.write_text(json.dumps(snapshot, indent=1, sort_keys=True), encoding="utf-8")


def compare(a: Path, b: Path) -> int:
    before = json.loads(a.read_text(encoding="utf-8"))
    after = json.loads(b.read_text(encoding="utf-8"))
    differ = 0
    for key in sorted(set(before) | set(after)):
        if before.get(key) != after.get(key):
            differ += 1
            print(f"DIFFERS: {key}")
            x, y = before.get(key) or {}, after.get(key) or {}
            xs = {json.dumps(r, sort_keys=True) for r in x.get("obligations", [])}
            ys = {json.dumps(r, sort_keys=True) for r in y.get("obligations", [])}
            for r in sorted(xs - ys):
                print(f"  - {r}")
            for r in sorted(ys - xs):
                print(f"  + {r}")
            if x.get("lint") != y.get("lint"):
                print(f"  lint {x.get('lint')} -> {y.get('lint')}")
    n = sum(len(v.get("obligations", [])) for v in after.values())
    print(f"{len(after)} files and mutants, {n} obligations; {differ} differ")
    return 1 if differ else 0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__)
    sub = p.add_subparsers(dest="cmd", required=True)
    w = sub.add_parser("write")
    w.add_argument("out")
    w.add_argument("--only", help="checkers, comma-separated (default: all)")
    w.add_argument("files", nargs="*", type=Path, help="default: every corpus file")
    w.add_argument("--no-mutants", action="store_true",
                   help="leave the gate mutants out (a snapshot of the files alone)")
    c = sub.add_parser("compare")
    c.add_argument("before")
    c.add_argument("after")
    args = p.parse_args()
    if args.cmd == "write":
        write(Path(args.out), tuple(args.only.split(",")) if args.only else None,
              args.files or None, not args.no_mutants)
        return 0
    return compare(Path(args.before), Path(args.after))


if __name__ == "__main__":
    sys.exit(main())
