"""Obligations and diagnostics -> text lines, JSON records, and a SARIF 2.1.0 log.

Pure functions returning strings and plain data: the CLI decides where they go. SARIF is
the OASIS Static Analysis Results Interchange Format, version 2.1.0: one `fail` result per
diagnostic and per obligation that is not proved (an unknown verdict fails verification, so
it fails here too; a warning keeps level `warning` unless --warnings-as-errors); proved
obligations are not results (code-scanning UIs list results as alerts).
"""

from __future__ import annotations

import enum
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from tilesafe.checkers.obligation import Obligation, Severity, Verdict
from tilesafe.frontend.diagnostics import Diagnostic
from tilesafe.proofs.codes import CODES, describe

SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"


@dataclass(frozen=True)
class Entry:
    """One obligation with where it came from (the file and kernel it was checked for)."""

    path: str
    kernel: str
    obligation: Obligation


# ---- text ----------------------------------------------------------------------------------


def _seconds(s: float) -> str:
    if s < 1e-3:
        return f"{s * 1e6:.0f}us"
    if s < 1.0:
        return f"{s * 1e3:.1f}ms"
    return f"{s:.2f}s"


def _where(entry: Entry) -> str:
    span = entry.obligation.span
    if span is None or span.line <= 0:
        return entry.path
    return f"{span.path}:{span.line}:{span.col}"


def _value_text(value: object) -> str:
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{k}={_value_text(v)}" for k, v in value.items()) + "}"
    if isinstance(value, (list, tuple)):
        return "(" + ", ".join(_value_text(v) for v in value) + ")"
    return str(value)


def counterexample_text(cex: Mapping[str, object]) -> str:
    return ", ".join(f"{k}={_value_text(v)}" for k, v in cex.items())


def obligation_lines(entry: Entry) -> list[str]:
    """`path:line:col: name — verdict (method, time)`, then for a failure the code and
    message, and the counterexample on a line of its own."""
    o = entry.obligation
    head = f"{_where(entry)}: {o.name} — {o.verdict.value} ({o.method}, {_seconds(o.seconds)})"
    if o.verdict is not Verdict.PROVED:
        detail = " ".join(x for x in (o.code, o.severity.value + ":", o.message) if x)
        head += f": {detail}"
    lines = [head]
    if o.verdict is Verdict.REFUTED and o.counterexample:
        lines.append(f"    counterexample: {counterexample_text(o.counterexample)}")
    return lines


TEMPORAL_CHECKERS = ("barrier", "ownership")


def failing(o: Obligation, strict: bool = False) -> bool:
    """Whether an obligation fails the run: `failed`, or with `strict`
    (--warnings-as-errors) any warning or note that is not proved."""
    return o.failed or (strict and o.verdict is not Verdict.PROVED)


def _exploration_key(entry: Entry) -> tuple | None:
    """Obligations decided by one temporal exploration share this key: both temporal
    checkers report every property of the kernel from the same search (same method, same
    time), so they are one proof, not one proof each."""
    o = entry.obligation
    if o.checker not in TEMPORAL_CHECKERS or "explorations" not in o.evidence:
        return None
    return (entry.path, entry.kernel, o.method, round(o.seconds, 9))


def exploration_groups(entries: Sequence[Entry]) -> list[list[Entry]]:
    """Entries in report order, those sharing one temporal exploration in one group (every
    other entry alone)."""
    groups: list[list[Entry]] = []
    index: dict[tuple, int] = {}
    for e in entries:
        key = _exploration_key(e)
        if key is None:
            groups.append([e])
        elif key in index:
            groups[index[key]].append(e)
        else:
            index[key] = len(groups)
            groups.append([e])
    return groups


def _short_name(entry: Entry) -> str:
    prefix = f"{entry.kernel}: "
    name = entry.obligation.name
    return name[len(prefix):] if name.startswith(prefix) else name


def group_line(group: Sequence[Entry]) -> str:
    """One line for the proved properties of one temporal exploration."""
    first = group[0]
    o = first.obligation
    names = ", ".join(_short_name(e) for e in group)
    return (f"{_where(first)}: {first.kernel}: {len(group)} temporal properties proved by one "
            f"exploration ({o.method}, {_seconds(o.seconds)}): {names}")


def text_lines(entries: Sequence[Entry], verbose: bool = False,
               strict: bool = False) -> list[str]:
    """What `verify` prints: every obligation that is not proved (failures and warnings);
    with `verbose` also the proved ones, those of one temporal exploration on one line."""
    lines: list[str] = []
    for group in exploration_groups(entries):
        proved = [e for e in group if e.obligation.verdict is Verdict.PROVED]
        for e in group:
            if e.obligation.verdict is not Verdict.PROVED:
                lines.extend(obligation_lines(e))
        if not verbose or not proved:
            continue
        if len(proved) > 1:
            lines.append(group_line(proved))
        else:
            lines.extend(obligation_lines(proved[0]))
    return lines


def summary_line(entries: Sequence[Entry], strict: bool = False) -> str:
    counts = {v: 0 for v in Verdict}
    for e in entries:
        counts[e.obligation.verdict] += 1
    n_failing = sum(1 for e in entries if failing(e.obligation, strict))
    warnings = sum(1 for e in entries
                   if e.obligation.verdict is not Verdict.PROVED
                   and e.obligation.severity is not Severity.ERROR)
    parts = [f"{len(entries)} obligation{'s' if len(entries) != 1 else ''}",
             f"{counts[Verdict.PROVED]} proved", f"{counts[Verdict.REFUTED]} refuted",
             f"{counts[Verdict.UNKNOWN]} unknown"]
    tail = f"; {n_failing} failing" + (f", {warnings} warning(s)" if warnings else "")
    shared = [g for g in exploration_groups(entries) if len(g) > 1]
    if shared:
        n = sum(len(g) for g in shared)
        tail += (f"; {n} of them decided by {len(shared)} temporal exploration"
                 f"{'s' if len(shared) != 1 else ''}")
    return ", ".join(parts) + tail


# ---- JSON ----------------------------------------------------------------------------------


def json_safe(value: object) -> object:
    """Plain JSON data for any value a checker may put in a counterexample or evidence."""
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, enum.Enum):
        return json_safe(value.value)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, Mapping):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        items = sorted(value, key=repr) if isinstance(value, (set, frozenset)) else value
        return [json_safe(v) for v in items]
    item = getattr(value, "item", None)  # numpy scalars
    if callable(item):
        try:
            return json_safe(item())
        except (TypeError, ValueError):
            pass
    return str(value)


def obligation_record(entry: Entry) -> dict[str, object]:
    o = entry.obligation
    span = o.span
    return {
        "kind": "obligation",
        "path": span.path if span is not None else entry.path,
        "line": span.line if span is not None else None,
        "col": span.col if span is not None else None,
        "end_line": span.end_line if span is not None else None,
        "end_col": span.end_col if span is not None else None,
        "kernel": entry.kernel,
        "checker": o.checker,
        "name": o.name,
        "verdict": o.verdict.value,
        "method": o.method,
        "code": o.code,
        "severity": o.severity.value,
        "message": o.message,
        "seconds": o.seconds,
        "failed": o.failed,
        "counterexample": json_safe(o.counterexample) if o.counterexample else None,
        "evidence": json_safe(dict(o.evidence)),
    }


def diagnostic_record(diag: Diagnostic) -> dict[str, object]:
    return {"kind": "diagnostic", **diag.to_record()}


# ---- SARIF ---------------------------------------------------------------------------------


def _region(line: int | None, col: int | None, end_line: int | None,
            end_col: int | None) -> dict[str, int] | None:
    if not line or line <= 0:
        return None
    region = {"startLine": line, "startColumn": max(col or 1, 1)}
    if end_line and end_line >= line:
        region["endLine"] = end_line
        if end_col and (end_line > line or end_col > region["startColumn"]):
            region["endColumn"] = end_col
    return region


def _location(path: str, region: dict[str, int] | None) -> dict[str, object]:
    physical: dict[str, object] = {"artifactLocation": {"uri": path}}
    if region:
        physical["region"] = region
    return {"physicalLocation": physical}


def _level(severity: str) -> str:
    return severity if severity in ("error", "warning", "note") else "error"


def _sarif_obligation(entry: Entry, strict: bool) -> dict[str, object]:
    o = entry.obligation
    text = f"{o.name}: {o.verdict.value} ({o.method})"
    if o.message:
        text += f" — {o.message}"
    if o.verdict is Verdict.REFUTED and o.counterexample:
        text += f"; counterexample: {counterexample_text(o.counterexample)}"
    span = o.span
    region = _region(span.line, span.col, span.end_line, span.end_col) if span else None
    result: dict[str, object] = {
        "ruleId": o.code or o.checker,
        "kind": "fail",
        "level": "error" if failing(o, strict) else _level(o.severity.value),
        "message": {"text": text},
        "locations": [_location(span.path if span else entry.path, region)],
        "properties": {"kernel": entry.kernel, "checker": o.checker, "verdict": o.verdict.value,
                       "method": o.method, "seconds": o.seconds},
    }
    if o.counterexample:
        result["properties"]["counterexample"] = json_safe(o.counterexample)  # type: ignore[index]
    return result


def _sarif_diagnostic(diag: Diagnostic) -> dict[str, object]:
    s = diag.span
    text = diag.message + (f" ({diag.hint})" if diag.hint else "")
    return {
        "ruleId": diag.code,
        "kind": "fail",
        "level": _level(diag.severity),
        "message": {"text": text},
        "locations": [_location(s.path, _region(s.line, s.col, s.end_line, s.end_col))],
    }


def _rule(rule_id: str) -> dict[str, object]:
    text = describe(rule_id) or f"obligations of the {rule_id} checker without a code"
    return {"id": rule_id, "shortDescription": {"text": text}}


def sarif_log(entries: Iterable[Entry], diagnostics: Iterable[Diagnostic] = (),
              version: str = "0.1.0", strict: bool = False) -> dict[str, object]:
    """One SARIF run: a result per diagnostic and per obligation that is not proved (a
    proved obligation is not a finding); the driver's rules list every code tilesafe
    has, so a code-scanning UI can explain any of them."""
    results = [_sarif_diagnostic(d) for d in diagnostics]
    results += [_sarif_obligation(e, strict) for e in entries
                if e.obligation.verdict is not Verdict.PROVED]
    rule_ids = sorted(set(CODES) | {str(r["ruleId"]) for r in results})
    return {
        "$schema": SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {
                "name": "tilesafe",
                "version": version,
                "rules": [_rule(r) for r in rule_ids],
            }},
            "results": results,
        }],
    }
