"""Run each bad-kernel case under compute-sanitizer's tools and tabulate what each reports.

    python tests/gpu/sanitize.py CASES_DIR [--tools racecheck,synccheck,memcheck,initcheck]
                                           [--jobs 4] [--timeout 90] [--json OUT]

Runs on the GPU machine with numpy and cuda-python only: each case runs in the launcher's
child-process form (`python -m tilesafe.gpu.launcher DIR`) under
`compute-sanitizer --tool T`, and the tool's "ERROR SUMMARY" plus its first reported
hazard are recorded. A run that does not finish in time is reported as "hang".
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

import numpy as np

from tilesafe.gpu.cases import case_files, load_case

SUMMARY = re.compile(r"(?:ERROR|RACECHECK) SUMMARY: (\d+) (?:error|hazard)")
FIRST = re.compile(r"^=+ ((?:Invalid|Race|Barrier|Uninitialized|Error|Warning|Program hit|"
                   r"Misaligned|Out of bounds|Malformed)[^\n]*)", re.M)


def sanitize(case_path: Path, tool: str, timeout: float) -> dict:
    case = load_case(case_path)
    with tempfile.TemporaryDirectory(prefix="tilesafe-san-") as tmp:
        d = Path(tmp)
        (d / "spec.json").write_text(json.dumps({"spec": case.spec.to_json(), "repeat": 0}))
        np.savez(d / "in.npz", **case.inputs)
        cmd = ["compute-sanitizer", "--tool", tool, "--print-limit", "5",
               sys.executable, "-m", "tilesafe.gpu.launcher", str(d)]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                                  check=False, cwd=d)
        except subprocess.TimeoutExpired:
            return {"case": case.name, "tool": tool, "result": "hang", "first": ""}
        text = proc.stdout + proc.stderr
        status = json.loads((d / "status.json").read_text())["status"] \
            if (d / "status.json").exists() else "crashed"
    m = SUMMARY.search(text)
    errors = int(m.group(1)) if m else -1
    first = FIRST.search(text)
    return {"case": case.name, "tool": tool, "errors": errors, "run": status,
            "result": "clean" if errors == 0 else f"{errors} reported" if errors > 0
            else "no summary",
            "first": first.group(1).strip()[:160] if first else ""}


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("folder")
    p.add_argument("--tools", default="racecheck,synccheck,memcheck,initcheck")
    p.add_argument("--jobs", type=int, default=4)
    p.add_argument("--timeout", type=float, default=90.0)
    p.add_argument("--only", default="bad-")
    p.add_argument("--json")
    a = p.parse_args(argv)
    if shutil.which("compute-sanitizer") is None:
        print("compute-sanitizer not found")
        return 2
    jobs = [(path, tool) for path in case_files(Path(a.folder)) if a.only in path.stem
            for tool in a.tools.split(",")]
    rows = []
    with ThreadPoolExecutor(a.jobs) as pool:
        futures = [pool.submit(sanitize, path, tool, a.timeout) for path, tool in jobs]
        for fut in as_completed(futures):  # print as they finish: a cut-off run keeps rows
            r = fut.result()
            rows.append(r)
            print(f"{r['case']:44} {r['tool']:10} {r['result']:14} {r.get('first', '')[:90]}",
                  flush=True)
            if a.json:
                Path(a.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
