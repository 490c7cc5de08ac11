"""Obligations and diagnostics -> text lines, JSON records, and a SARIF 2.1.0 log.

Pure functions returning strings and plain data: the CLI decides where they go. SARIF is
the OASIS Static Analysis Results Interchange Format, version 2.1.0: one `fail` result per
diagnostic and per obligation that is not proved (an unknown verdict fails verification, so
it fails here too; a warning keeps level `warning` unless --warnings-as-errors); proved
obligations are not results (code-scanning UIs list results as alerts).

Follow-ons (checkers/followon.py: what a refutation cut short or ran into after it) are not
findings of their own: every format prints them under the refutation they follow from --
the text output counts them (-v lists them), JSON nests their records in its record,
SARIF keeps them in its one result (relatedLocations and the property bag).
"""

from __future__ import annotations

import enum
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

from tilesafe.checkers import followon
from tilesafe.checkers.obligation import Obligation, Severity, Verdict
from tilesafe.frontend.diagnostics import Diagnostic
from tilesafe.proofs.codes import CODES, describe

SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"


@dataclass(frozen=True)
class Entry:
    """One obligation with where it came from (the file and kernel it was checked for), and
    the follow-ons attached to it when it is a refutation (`nest`)."""

    path: str
    kernel: str
    obligation: Obligation
    follow_ons: tuple[Entry, ...] = ()


def nest(entries: Sequence[Entry]) -> list[Entry]:
    """The entries as reports show them: each follow-on under the refutation of its kernel
    it follows from, in the order they came; a follow-on whose cause is not among the
    entries stays where it is (checkers/followon.settle makes that one fail on its own)."""
    causes: dict[tuple[str, str, str], int] = {}
    for i, e in enumerate(entries):
        o = e.obligation
        if o.code is not None and followon.is_cause(o, o.code):
            causes.setdefault((e.path, e.kernel, o.code), i)
    attached: dict[int, list[Entry]] = {}
    top: list[int] = []
    for i, e in enumerate(entries):
        cause = followon.cause_of(e.obligation)
        at = causes.get((e.path, e.kernel, cause)) if cause is not None else None
        if at is None:
            top.append(i)
        else:
            attached.setdefault(at, []).append(e)
    return [replace(entries[i], follow_ons=entries[i].follow_ons + tuple(attached.get(i, ())))
            for i in top]


def _unsettled(e: Entry) -> bool:
    return e.obligation.verdict is Verdict.UNKNOWN


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


COMPACT_LIMIT = 80  # characters: a longer counterexample value is left to -v / JSON / report
ALWAYS_SHOWN = ("replay",)  # a command that reproduces the finding: one line, always printed


def counterexample_text(cex: Mapping[str, object], full: bool = True) -> str:
    """`key=value, ...`; unless `full`, values longer than COMPACT_LIMIT (a trace, the
    barriers' states, a warp's 32 lanes) are only named, with their length: the default
    output stays one screen per finding, and -v, JSON and the report keep everything."""
    if full:
        return ", ".join(f"{k}={_value_text(v)}" for k, v in cex.items())
    kept, left = [], []
    for k, v in cex.items():
        text = _value_text(v)
        if len(text) <= COMPACT_LIMIT or k in ALWAYS_SHOWN:
            kept.append(f"{k}={text}")
        elif isinstance(v, (list, tuple)):
            left.append(f"{k} ({len(v)} {'steps' if k == 'trace' else 'items'})")
        else:
            left.append(str(k))
    if not left:
        return ", ".join(kept)
    return ", ".join(kept) + ("; " if kept else "") + f"-v adds {', '.join(left)}"


def obligation_lines(entry: Entry, verbose: bool = False) -> list[str]:
    """`path:line:col: name — verdict (method, time)`, then for a failure the code and
    message, and the counterexample on a line of its own (in full with `verbose`); then
    its follow-ons: counted on one line, or with `verbose` each under it."""
    o = entry.obligation
    head = f"{_where(entry)}: {o.name} — {o.verdict.value} ({o.method}, {_seconds(o.seconds)})"
    if o.verdict is not Verdict.PROVED:
        detail = " ".join(x for x in (o.code, o.severity.value + ":", o.message) if x)
        head += f": {detail}"
    lines = [head]
    if o.verdict is Verdict.REFUTED and o.counterexample:
        lines.append(f"    counterexample: {counterexample_text(o.counterexample, verbose)}")
    if entry.follow_ons:
        lines.extend(follow_on_lines(entry, verbose))
    return lines


def follow_on_lines(entry: Entry, verbose: bool = False) -> list[str]:
    """The follow-ons of a refutation, indented under it: by default one line that counts
    them and names the refuted ones; with `verbose` each refuted one with its message and
    counterexample, and the names of those the cut search did not settle."""
    code = entry.obligation.code
    refuted = [f for f in entry.follow_ons if not _unsettled(f)]
    unsettled = [f for f in entry.follow_ons if _unsettled(f)]
    if not verbose:
        parts = []
        if refuted:
            parts.append(f"{len(refuted)} refuted after it (" + ", ".join(
                f"{followon.own_code(f.obligation) or '-'} {_short_name(f)}" for f in refuted)
                + ")")
        if unsettled:
            parts.append(f"{len(unsettled)} not settled (the search stopped at {code})")
        n = len(entry.follow_ons)
        return [f"    + {n} follow-on{'s' if n != 1 else ''} of this refutation: "
                + "; ".join(parts) + " -- -v lists them"]
    lines = []
    for f in refuted:
        o = f.obligation
        lines.append(f"    follow-on: {_where(f)}: {_short_name(f)} — {o.verdict.value}: "
                     f"{followon.own_code(o) or '-'} {o.message}")
        if o.counterexample:
            lines.append(f"        counterexample: {counterexample_text(o.counterexample)}")
    if unsettled:
        lines.append(f"    follow-on: not settled (the search stopped at {code}): "
                     + ", ".join(_short_name(f) for f in unsettled))
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
    """What `verify` prints: every obligation that is not proved (failures and warnings),
    follow-ons under their refutation; with `verbose` also the proved ones, those of one
    temporal exploration on one line."""
    lines: list[str] = []
    for group in exploration_groups(nest(entries)):
        proved = [e for e in group if e.obligation.verdict is Verdict.PROVED]
        for e in group:
            if e.obligation.verdict is not Verdict.PROVED:
                lines.extend(obligation_lines(e, verbose))
        if not verbose or not proved:
            continue
        if len(proved) > 1:
            lines.append(group_line(proved))
        else:
            lines.extend(obligation_lines(proved[0], verbose))
    return lines


def summary_line(entries: Sequence[Entry], strict: bool = False) -> str:
    """`N obligations, P proved, R refuted, U unknown[, F follow-ons (...)]; K failing...`:
    follow-ons are counted apart from the verdicts (they ride with their refutation)."""
    top = nest(entries)
    counts = {v: 0 for v in Verdict}
    for e in top:
        counts[e.obligation.verdict] += 1
    n_failing = sum(1 for e in top if failing(e.obligation, strict))
    warnings = sum(1 for e in top
                   if e.obligation.verdict is not Verdict.PROVED
                   and e.obligation.severity is not Severity.ERROR)
    parts = [f"{len(entries)} obligation{'s' if len(entries) != 1 else ''}",
             f"{counts[Verdict.PROVED]} proved", f"{counts[Verdict.REFUTED]} refuted",
             f"{counts[Verdict.UNKNOWN]} unknown"]
    follow = [f for e in top for f in e.follow_ons]
    if follow:
        unsettled = sum(1 for f in follow if _unsettled(f))
        parts.append(f"{len(follow)} follow-on{'s' if len(follow) != 1 else ''} of "
                     f"refutations ({len(follow) - unsettled} refuted, {unsettled} not "
                     "settled)")
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
    """One obligation as JSON; a refutation's follow-ons (`nest`) as records inside it."""
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
        "follows_from": followon.cause_of(o),
        "follow_ons": [obligation_record(f) for f in entry.follow_ons],
    }


def obligation_records(entries: Sequence[Entry]) -> list[dict[str, object]]:
    """The JSON records of `verify`: one per obligation, follow-ons inside their cause's."""
    return [obligation_record(e) for e in nest(entries)]


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


def rule_id(o: Obligation) -> str:
    """The SARIF ruleId of an obligation: its TS code (a follow-on's own one; TS490, no
    verdict, for an unknown that names none) -- always a code of the catalogue."""
    return followon.own_code(o) or followon.UNSETTLED_CODE


def _sarif_follow_on(entry: Entry) -> dict[str, object]:
    o = entry.obligation
    span = o.span
    return {"name": o.name, "checker": o.checker, "verdict": o.verdict.value,
            "code": followon.own_code(o), "message": o.message,
            "line": span.line if span is not None else None,
            "counterexample": json_safe(o.counterexample) if o.counterexample else None}


def _sarif_obligation(entry: Entry, strict: bool) -> dict[str, object]:
    o = entry.obligation
    text = f"{o.name}: {o.verdict.value} ({o.method})"
    if o.message:
        text += f" — {o.message}"
    if o.verdict is Verdict.REFUTED and o.counterexample:
        text += f"; counterexample: {counterexample_text(o.counterexample)}"
    if entry.follow_ons:
        n = len(entry.follow_ons)
        text += (f"; {n} follow-on{'s' if n != 1 else ''} of this refutation (properties "
                 "the search could not settle past it, or violations it ran into after it)")
    span = o.span
    region = _region(span.line, span.col, span.end_line, span.end_col) if span else None
    properties: dict[str, object] = {
        "kernel": entry.kernel, "checker": o.checker, "verdict": o.verdict.value,
        "method": o.method, "seconds": o.seconds}
    result: dict[str, object] = {
        "ruleId": rule_id(o),
        "kind": "fail",
        "level": "error" if failing(o, strict) else _level(o.severity.value),
        "message": {"text": text},
        "locations": [_location(span.path if span else entry.path, region)],
        "properties": properties,
    }
    if o.counterexample:
        properties["counterexample"] = json_safe(o.counterexample)
    if entry.follow_ons:
        properties["followOns"] = [_sarif_follow_on(f) for f in entry.follow_ons]
        related = []
        for f in entry.follow_ons:
            fs = f.obligation.span
            if _unsettled(f) or fs is None:
                continue
            loc = _location(fs.path, _region(fs.line, fs.col, fs.end_line, fs.end_col))
            loc["id"] = len(related) + 1
            loc["message"] = {"text": f"follow-on {f.obligation.verdict.value}: "
                                      f"{followon.own_code(f.obligation) or ''} "
                                      f"{f.obligation.message}"}
            related.append(loc)
        if related:
            result["relatedLocations"] = related
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


def _rule(code: str) -> dict[str, object]:
    return {"id": code, "shortDescription": {"text": describe(code) or code}}


def sarif_log(entries: Iterable[Entry], diagnostics: Iterable[Diagnostic] = (),
              version: str = "0.1.0", strict: bool = False) -> dict[str, object]:
    """One SARIF run: a result per diagnostic and per obligation that is not proved (a
    proved obligation is not a finding); the driver's rules list every code tilesafe
    has, so a code-scanning UI can explain any of them."""
    results = [_sarif_diagnostic(d) for d in diagnostics]
    results += [_sarif_obligation(e, strict) for e in nest(list(entries))
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
