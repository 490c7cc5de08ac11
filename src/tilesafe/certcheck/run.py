"""Walk a certificate directory: each file is checked by what its format asks."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tilesafe.certcheck.graph import check_graph
from tilesafe.certcheck.smt import declared_status, solve


@dataclass
class Result:
    """One certificate file, what it claims and what the check found."""

    file: str
    format: str
    expect: str
    ok: bool
    detail: str
    seconds: float
    obligations: list[int] = field(default_factory=list)

    def record(self) -> dict[str, Any]:
        return {"file": self.file, "format": self.format, "expect": self.expect,
                "ok": self.ok, "detail": self.detail, "seconds": round(self.seconds, 4),
                "obligations": self.obligations}

    def line(self) -> str:
        verdict = "ok" if self.ok else "FAILED"
        return f"{self.file}: {verdict} ({self.format}, expects {self.expect}): {self.detail}"


def _check_smt(text: str, expect: str, timeout_s: float) -> tuple[bool, str]:
    if expect not in ("sat", "unsat"):
        return False, f"nothing to check: expected answer {expect!r}"
    declared = declared_status(text)
    if declared != expect:
        return False, f"the script declares :status {declared}, the manifest {expect}"
    try:
        got = solve(text, timeout_s)
    except ValueError as err:
        return False, f"cvc5 rejected the script: {err}"
    if got == expect:
        return True, f"cvc5: {got}"
    return False, f"cvc5 answers {got}, the certificate claims {expect}"


def _check_file(root: Path, f: dict[str, Any], timeout_s: float) -> tuple[bool, str]:
    path = root / f["file"]
    if not path.resolve().is_relative_to(root.resolve()):
        return False, "file outside the certificate directory"
    text = path.read_text(encoding="utf-8")
    if f["format"] == "smt2":
        return _check_smt(text, f["expect"], timeout_s)
    if f["format"] == "state-graph":
        problems = check_graph(json.loads(text), f["expect"])
        doc_size = text.count("]],") or 0
        if problems:
            return False, "; ".join(problems[:5])
        return True, f"every edge a legal mbarrier step ({doc_size} records)" + (
            "; no deadlock, no load in flight at exit" if f["expect"] == "safe" else "")
    if f["format"] in ("isl", "facts"):
        return True, "informational (its question is checked in the smt2 beside it)" \
            if f["format"] == "isl" else "informational (checked by the smt2 queries)"
    return False, f"unknown format {f['format']!r}"


def _expectation_consistent(ob: dict[str, Any], f: dict[str, Any]) -> str | None:
    """A Presburger query must ask what the verdict claims: unsat for proved."""
    if f.get("role") != "ISL question re-encoded as QF_LIA":
        return None
    want = "unsat" if ob["verdict"] == "proved" else "sat"
    return None if f["expect"] == want else (f"verdict {ob['verdict']} needs {want}, the "
                                              f"certificate expects {f['expect']}")


def check_directory(directory: str | Path, timeout_s: float = 60.0) -> list[Result]:
    """Check every certificate file the manifest lists (a file shared by several
    obligations is checked once)."""
    root = Path(directory)
    doc = json.loads((root / "manifest.json").read_text(encoding="utf-8"))
    if doc.get("kind") != "tilesafe-certificates":
        raise ValueError("manifest.json is not a tilesafe certificate manifest")
    results: dict[str, Result] = {}
    for ob in doc["obligations"]:
        for f in ob.get("files", []):
            key = f["file"]
            if key in results:
                results[key].obligations.append(ob["id"])
                continue
            t0 = time.perf_counter()
            bad = _expectation_consistent(ob, f)
            if bad:
                ok, detail = False, bad
            else:
                try:
                    ok, detail = _check_file(root, f, timeout_s)
                except (OSError, ValueError, KeyError, TypeError) as err:
                    ok, detail = False, f"unreadable: {err}"
            results[key] = Result(key, f["format"], f["expect"], ok, detail,
                                  time.perf_counter() - t0, [ob["id"]])
    return list(results.values())
