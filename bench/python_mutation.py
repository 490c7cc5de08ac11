"""Mutation testing of tilesafe's own Python (issue 12, part 4) with cosmic-ray.

    pip install cosmic-ray
    python bench/python_mutation.py --workdir /tmp/tilesafe-cr [--sample 40] [--seed 0]

cosmic-ray mutates a module's file in place, runs a test command, and restores the file.
Never do that in a checkout other processes import from (a running `tilesafe mutate`
campaign would pick the mutated checker up): this script exports HEAD into --workdir and
runs there, importing tilesafe from that copy's src/ (PYTHONPATH).

Each module gets a targeted test command: the tests that exercise it directly and run in
seconds. A full run of every module's every mutant against the whole suite would take
days on the 2-core machine (a suite run is minutes; a module has hundreds of mutants), so
a seeded sample of each module's mutants is run and the rest are marked skipped in the
session; the report says how many of how many.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# module -> targeted tests (pytest arguments). The first run (docs/mutation.md) used these
# without tests/test_mutation_found_gaps.py, whose tests were written from its survivors.
GAPS = "tests/test_mutation_found_gaps.py"
TARGETS: dict[str, list[str]] = {
    "semantics/hw/mbarrier.py": ["tests/test_mbarrier_model.py", GAPS, "-k",
                              "not fp and not layout"],
    "semantics/expr/fp.py": ["tests/test_interp.py", GAPS, "-k",
                        "f16 or bf16 or int_to_f32 or elementwise or floor_division or min_max "
                        "or i32_conversion"],
    "checkers/obligation.py": ["tests/test_cli.py", GAPS, "-k", "verify or obligation or failed"],
    "checkers/layout.py": ["tests/test_tma_layout_checkers.py", "tests/test_corpus.py", GAPS,
                           "-k", "layout_verdicts or capacity or ts101 or ts030 or good or "
                           "exhaustive"],
}


def export(workdir: Path) -> None:
    """HEAD's files into workdir (once)."""
    if not (workdir / "pyproject.toml").exists():
        workdir.mkdir(parents=True, exist_ok=True)
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", "HEAD"], check=True,
                                 capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(workdir)], input=archive, check=True)


def shim_env(workdir: Path) -> dict[str, str]:
    """The test commands' environment: the copy's src/ first on the path (ahead of the
    editable install's .pth entry) and no implicit current directory."""
    return dict(os.environ, PYTHONPATH=str(workdir / "src"), PYTHONSAFEPATH="1")


def check_imports(workdir: Path, modules: list[str]) -> None:
    """Refuse to run unless the tests would import the modules from the exported copy."""
    names = ["tilesafe." + m.removesuffix(".py").replace("/", ".") for m in modules]
    code = ("import importlib, sys\n"
            f"for n in {names!r}: print(importlib.import_module(n).__file__)\n")
    env = shim_env(workdir)
    out = subprocess.run([sys.executable, "-c", code], cwd=workdir, env=env, check=True,
                         capture_output=True, text=True).stdout.split()
    wrong = [f for f in out if not Path(f).resolve().is_relative_to(workdir.resolve())]
    if wrong:
        raise SystemExit(f"the tests would import {', '.join(wrong)}, not the copy in "
                         f"{workdir}: mutants there would all survive")


def cosmic_ray_command() -> str:
    """The cosmic-ray next to this interpreter (a virtual environment not on PATH), else
    the one on PATH."""
    beside = Path(sys.executable).parent / "cosmic-ray"
    return str(beside) if beside.exists() else "cosmic-ray"


def run_module(workdir: Path, module: str, tests: list[str], sample: int, seed: int,
               timeout: float) -> dict[str, object]:
    from cosmic_ray.work_db import WorkDB, use_db
    from cosmic_ray.work_item import WorkerOutcome, WorkResult

    name = Path(module).stem
    cfg = workdir / f"cr-{name}.toml"
    session = workdir / f"cr-{name}.sqlite"
    command = " ".join([sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider",
                        *[f'"{t}"' if " " in t else t for t in tests]])
    cfg.write_text(f'[cosmic-ray]\nmodule-path = "src/tilesafe/{module}"\ntimeout = {timeout}\n'
                   f'excluded-modules = []\ntest-command = {json.dumps(command)}\n\n'
                   '[cosmic-ray.distributor]\nname = "local"\n')
    env = shim_env(workdir)
    # The tests must pass on the unmutated copy: a test that fails anyway would "kill"
    # every mutant.
    clean = subprocess.run(command, shell=True, cwd=workdir, env=env, capture_output=True,
                           text=True, timeout=timeout * 4)
    if clean.returncode != 0:
        raise SystemExit(f"{module}: the targeted tests fail on the unmutated copy:\n"
                         + clean.stdout[-2000:])
    if session.exists():
        session.unlink()
    subprocess.run([cosmic_ray_command(), "init", str(cfg), str(session)], cwd=workdir, env=env,
                   check=True, capture_output=True)
    with use_db(str(session), WorkDB.Mode.open) as db:
        ids = sorted(item.job_id for item in db.work_items)
        random.Random(f"{seed}:{module}").shuffle(ids)
        for job in ids[sample:]:
            db.set_result(job, WorkResult(worker_outcome=WorkerOutcome.SKIPPED))
    subprocess.run([cosmic_ray_command(), "exec", str(cfg), str(session)], cwd=workdir, env=env,
                   check=True, capture_output=True)
    counts: dict[str, int] = {}
    survivors = []
    with use_db(str(session), WorkDB.Mode.open) as db:
        for item, result in db.completed_work_items:
            if result.worker_outcome is WorkerOutcome.SKIPPED:
                continue
            key = (result.test_outcome.value if result.test_outcome is not None
                   else result.worker_outcome.value)
            counts[key] = counts.get(key, 0) + 1
            if key == "survived":
                m = item.mutations[0]
                survivors.append(f"{module}:{m.start_pos[0]} {m.operator_name} "
                                 f"(occurrence {m.occurrence}) in {m.definition_name}")
    ran = sum(counts.values())
    killed = counts.get("killed", 0)
    return {"module": module, "tests": " ".join(tests), "mutants": len(ids), "ran": ran,
            "counts": counts, "score": round(killed / ran, 3) if ran else None,
            "survivors": sorted(survivors)}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--workdir", required=True, type=Path,
                   help="scratch folder for the exported copy (never this checkout)")
    p.add_argument("--sample", type=int, default=40, help="mutants per module (default 40)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--timeout", type=float, default=120.0, help="per test run, seconds")
    p.add_argument("--modules", nargs="*", default=list(TARGETS))
    args = p.parse_args()
    if args.workdir.resolve() == ROOT:
        p.error("--workdir must not be this checkout: cosmic-ray edits files in place")
    try:
        import cosmic_ray  # noqa: F401
    except ImportError:
        p.error("cosmic-ray is not installed: pip install cosmic-ray")
    unknown = [m for m in args.modules if m not in TARGETS]
    if unknown:
        p.error(f"no targeted tests known for {', '.join(unknown)}")
    export(args.workdir)
    check_imports(args.workdir, args.modules)
    results = [run_module(args.workdir, m, TARGETS[m], args.sample, args.seed, args.timeout)
               for m in args.modules]
    print(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
