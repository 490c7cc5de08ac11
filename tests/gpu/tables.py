"""Markdown tables for docs/hardware-runs.md from a device run's JSON files.

    python tests/gpu/tables.py RUN_DIR          # bad.json + sanitize.json -> the table
    python tests/gpu/tables.py RUN_DIR --differential   # good/codegen/fuzz/big -> counts

One row per bad kernel: the code tilesafe reports, what the interpreter does with it, what
the GPU did when the compiled (--unverified) kernel ran plainly, and what each
compute-sanitizer tool reported; then the counts.
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict
from pathlib import Path

TOOLS = ("racecheck", "synccheck", "memcheck", "initcheck")


def _gpu(row: dict) -> str:
    v = row["verdict"]
    if v == "no visible effect":
        return "same output as the interpreter"
    if v == "wrong output":
        return "output differs from the interpreter's run"
    if v == "ran":
        return "finished (no reference: the interpreter stops)"
    if v in ("trap", "error"):
        return f"{v}: {row['detail'].split(':')[-1].strip()}"
    return v


def _tool(r: dict | None) -> str:
    if r is None:
        return "-"
    if r["result"] == "clean":
        return "clean"
    if r["result"] == "hang":
        return "hang"
    first = r.get("first", "")
    kind = ("race" if "Race" in first else "barrier" if "Barrier" in first
            else "invalid access" if "Invalid" in first
            else "launch failed" if "LAUNCH_FAILED" in first or "Program hit" in first
            else "reported")
    return f"**{r['errors']} ({kind})**"


def table(run: Path) -> str:
    bad = json.loads((run / "bad.json").read_text())
    san: dict[str, dict[str, dict]] = defaultdict(dict)
    if (run / "sanitize.json").exists():
        for r in json.loads((run / "sanitize.json").read_text()):
            san[r["case"]][r["tool"]] = r
    lines = ["| kernel | tilesafe | interpreter | GPU (plain run) | GPU vs `ensures` | "
             + " | ".join(TOOLS) + " |",
             "| --- | --- | --- | --- | --- | " + " | ".join("---" for _ in TOOLS) + " |"]
    found = {t: 0 for t in TOOLS}
    any_tool = 0
    visible = 0
    only_spec = 0  # ran with nothing else visible, yet the output breaks the spec
    for row in sorted(bad, key=lambda r: r["name"]):
        name = row["name"].removeprefix("bad-")
        meta = row["meta"]
        interp = meta.get("interp", "finishes").split(" (")[0][:60]
        tools = [san[row["name"]].get(t) for t in TOOLS]
        hits = [t for t, r in zip(TOOLS, tools, strict=True)
                if r is not None and r["result"] not in ("clean", "hang")]
        for t in hits:
            found[t] += 1
        any_tool += bool(hits)
        shown = row["verdict"] in ("wrong output", "hang", "trap", "error")
        visible += shown
        spec = row.get("spec", "")
        only_spec += spec.startswith("violated") and not shown and not hits
        lines.append(f"| {name} | {meta.get('code', '?')} | {interp} | {_gpu(row)} | "
                     f"{_spec(spec)} | " + " | ".join(_tool(r) for r in tools) + " |")
    n = len(bad)
    lines.append("")
    lines.append(f"{n} bad kernels compiled with --unverified ran on the GPU (at the sizes of "
                 f"tilesafe's counterexample where it names small ones); tilesafe refutes all "
                 f"{n} before they run. "
                 f"Something was visible on the plain run (trap, hang, error, or output "
                 f"different from the interpreter's) for {visible}; at least one "
                 f"compute-sanitizer tool reported {any_tool} of {n} (" + ", ".join(
                     f"{t} {found[t]}" for t in TOOLS) + "). "
                 f"{only_spec} ran clean under every tool with the interpreter's output, "
                 "yet that output breaks the kernel's `ensures`.")
    return "\n".join(lines)


def _spec(spec: str) -> str:
    if not spec:
        return "-"
    if spec == "holds":
        return "holds"
    return "**violated** (" + spec.removeprefix("violated: ").split(";")[0][:40] + ")"


def differential(run: Path) -> str:
    """One row per kind of differential case: kernels, sizes, seeds and verdicts.

    A row counts what the JSON says, so a case that did not come back bit-exact shows up as
    its own verdict rather than disappearing from a total."""
    lines = ["| cases | kernels | size points | seeds | verdicts |",
             "| --- | --- | --- | --- | --- |"]
    for kind in ("good", "codegen", "fuzz", "big"):
        path = run / f"{kind}.json"
        if not path.exists():
            continue
        rows = json.loads(path.read_text())
        kernels = {r["meta"].get("kernel", r["name"]) for r in rows}
        points = {(r["meta"].get("kernel"), tuple(sorted(r["meta"].get("sizes", {}).items())))
                  for r in rows}
        seeds = {r["meta"].get("seed") for r in rows}
        verdicts: dict[str, int] = defaultdict(int)
        for r in rows:
            verdicts[r["verdict"]] += 1
        told = ", ".join(f"{v} {n}" for v, n in sorted(verdicts.items()))
        lines.append(f"| {kind} ({len(rows)}) | {len(kernels)} | {len(points)} | "
                     f"{len(seeds - {None})} | {told} |")
    return "\n".join(lines)


if __name__ == "__main__":
    run_dir = Path(sys.argv[1])
    print(differential(run_dir) if "--differential" in sys.argv else table(run_dir))
