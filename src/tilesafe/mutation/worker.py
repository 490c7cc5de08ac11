"""Classify one mutant, inside a worker process (pool.py bounds its wall-clock time).

    killed      verification refuted some error obligation of the mutant
    unknown     nothing refuted, but something not proved either (a budget, an
                unsupported form), or the runs that should decide a survivor ran out of time
    missed      everything proved, yet the mutant behaves differently from the original on
                the interpreter: kind runtime / race / unwritten / value / step-limit
                (differential.py)
    equivalent  everything proved and every run bit-identical ("likely": runs are samples)
    error       tilesafe itself raised an exception on the mutant (a bug in tilesafe)

Why verify the mutant in a fresh file: it goes through exactly `tilesafe.api.verify`, the
path a user's kernel takes, with the budgets the campaign asks for.
"""

from __future__ import annotations

import dataclasses
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from tilesafe.frontend import ir

_TMP: str | None = None
_PROGRAMS: dict[str, ir.Program] = {}


@dataclasses.dataclass(frozen=True)
class Settings:
    """The budgets of a campaign (all bounded; the pool adds the hard wall-clock kill)."""

    timeout_s: float = 300.0  # per mutant, verify + runs (the pool kills past it)
    query_timeout_ms: int = 10_000  # per solver / ISL query
    max_states: int = 200_000  # explicit-state search
    verify_seconds: float = 120.0  # temporal searches, where the checkers take a budget
    sizes: int = 3  # sizes per survivor
    seeds: int = 3  # schedules per size: random seed 0, then PCT seeds (differential.py)


def check_options(settings: Settings) -> Any:
    """The checkers' CheckOptions with every budget this installation knows about set
    (the fields differ between versions: timeout_ms/max_states on main; max_seconds and
    max_memory_mb where the temporal budgets have landed)."""
    from tilesafe.checkers.registry import CheckOptions

    names = {f.name for f in dataclasses.fields(CheckOptions)}
    wanted = {"timeout_ms": settings.query_timeout_ms, "max_states": settings.max_states,
              "max_seconds": settings.verify_seconds}
    return CheckOptions(**{k: v for k, v in wanted.items() if k in names})


def _scratch(name: str, text: str) -> str:
    global _TMP
    if _TMP is None:
        _TMP = tempfile.mkdtemp(prefix="tilesafe-mutate-")
    path = os.path.join(_TMP, name)
    Path(path).write_text(text, encoding="utf-8")
    return path


def _program(path: str) -> ir.Program:
    from tilesafe import api

    if path not in _PROGRAMS:
        _PROGRAMS[path] = api.checked_program(path)
    return _PROGRAMS[path]


def _obligation_record(o: Any) -> dict[str, Any]:
    return {"checker": o.checker, "name": o.name, "code": o.code, "verdict": o.verdict.value,
            "line": o.span.line if o.span else None, "message": (o.message or "")[:240]}


def verify_summary(obligations: list[Any], seconds: float) -> dict[str, Any]:
    from tilesafe.checkers.obligation import Verdict

    failing = [o for o in obligations if o.failed]
    refuted = [o for o in failing if o.verdict is Verdict.REFUTED]
    unknown = [o for o in failing if o.verdict is Verdict.UNKNOWN]
    return {"seconds": round(seconds, 3), "obligations": len(obligations),
            "refuted": [_obligation_record(o) for o in refuted[:6]],
            "refuted_codes": sorted({o.code or "-" for o in refuted}),
            "unknown": [_obligation_record(o) for o in unknown[:6]],
            "unknown_codes": sorted({o.code or "-" for o in unknown}),
            "n_refuted": len(refuted), "n_unknown": len(unknown)}


def verify_original(task: dict[str, Any], progress: Any) -> dict[str, Any]:
    """Verify an original file (a campaign refuses files that do not verify)."""
    from tilesafe import api

    settings = Settings(**task["settings"])
    t0 = time.monotonic()
    obligations = api.verify(task["path"], check_options(settings))
    return verify_summary(obligations, time.monotonic() - t0)


def classify(task: dict[str, Any], progress: Any) -> dict[str, Any]:
    """The task of one mutant: verify it, and run it against the original if it survives."""
    from tilesafe import api
    from tilesafe.frontend.diagnostics import DiagnosticError
    from tilesafe.mutation import differential, sizes

    if task.get("kind") == "original":
        return verify_original(task, progress)
    settings = Settings(**task["settings"])
    start = time.monotonic()
    deadline = start + 0.85 * settings.timeout_s
    m = task["mutant"]
    path = _scratch(Path(m["path"]).name, m["text"])
    out: dict[str, Any] = {"id": m["id"]}
    t0 = time.monotonic()
    try:
        obligations = api.verify(path, check_options(settings))
    except DiagnosticError as err:
        out.update(verdict="error", reason="the mutant no longer lints: "
                   + "; ".join(f"{d.code} {d.message}" for d in err.diagnostics)[:300])
        return out
    summary = verify_summary(obligations, time.monotonic() - t0)
    out["verify"] = summary
    progress({"phase": "verified", "verify": summary})
    if summary["n_refuted"]:
        out.update(verdict="killed", reason="refuted: " + ", ".join(summary["refuted_codes"]))
        return out
    original = api.select_kernel(_program(m["path"]), m["kernel"])
    mutant = api.select_kernel(api.checked_program(path), m["kernel"])
    both, only = sizes.choose(m["path"], original, mutant, settings.sizes)
    runs, complete = differential.compare(m["path"], original, mutant, both, only,
                                          settings.seeds, deadline)
    out["runs"] = [r.to_record() for r in runs]
    evidence = _evidence(runs)
    out["evidence"] = evidence
    if evidence == "internal":
        out.update(verdict="error", reason=next(r.detail for r in runs if r.status == "internal"))
    elif summary["n_unknown"]:
        out.update(verdict="unknown", reason="not proved: " + ", ".join(summary["unknown_codes"])
                   + (f"; the runs show {evidence}" if evidence != "same" else ""))
    elif evidence in ("runtime", "race", "unwritten", "value", "step-limit"):
        out.update(verdict="missed", kind=evidence, reason=_first_difference(runs))
    elif not complete:
        out.update(verdict="unknown", reason="the runs deciding this survivor ran out of time "
                   f"after {len(runs)} runs")
    elif not any(r.status == "same" for r in runs):
        skipped = [r.detail for r in runs if r.status == "skipped"]
        why = skipped[0] if skipped else "no launchable sizes satisfy both kernels' where"
        out.update(verdict="unknown", reason=f"nothing to compare: {why}")
    else:
        n = sum(r.status == "same" for r in runs)
        nsizes = len({tuple(sorted(r.sizes.items())) for r in runs if r.status == "same"})
        out.update(verdict="equivalent", reason=f"bit-identical in {n} runs at {nsizes} sizes"
                   + (f"; ran fine at {len(only)} sizes only it allows" if only else ""))
    return out


def _evidence(runs: list[Any]) -> str:
    from tilesafe.mutation.differential import racy

    statuses = {r.status for r in runs}
    if "internal" in statuses:
        return "internal"
    if "runtime" in statuses:
        return "runtime"
    if racy(runs):
        return "race"
    if "unwritten" in statuses:
        return "unwritten"
    if "differs" in statuses:
        return "value"
    if "step-limit" in statuses:
        return "step-limit"
    return "same"


def _first_difference(runs: list[Any]) -> str:
    order = ("runtime", "unwritten", "differs", "step-limit")
    for status in order:
        for r in runs:
            if r.status == status:
                where = ", ".join(f"{k}={v}" for k, v in r.sizes.items())
                return f"{where} ({r.policy} seed {r.seed}): {r.detail}"
    return ""
