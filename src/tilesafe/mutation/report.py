"""A campaign's results as text (one line per mutant, then the scores), JSON (the results
document itself) or a self-contained HTML page (inline styles, no scripts, no network)."""

from __future__ import annotations

import html
import json
from collections.abc import Sequence
from typing import Any

from tilesafe.mutation.campaign import Result, soundness_holes, summarize


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.1f}%"


def verdict_label(rec: dict[str, Any]) -> str:
    if rec["verdict"] == "missed":
        return f"missed ({rec.get('kind', 'value')})"
    if rec["verdict"] == "equivalent":
        return "likely equivalent"
    return rec["verdict"]


def score_lines(summary: dict[str, Any]) -> list[str]:
    o = summary["overall"]
    kinds = ", ".join(f"{k} {v}" for k, v in sorted(o["missed_kinds"].items())) or "none"
    return [
        f"{o['total']} mutants: {o['killed']} killed, {o['missed']} missed ({kinds}), "
        f"{o['equivalent']} likely equivalent, {o['unknown']} unknown, {o['error']} error",
        f"score {_pct(o['score'])} = killed / (killed + missed) = {o['killed']} / "
        f"{o['killed'] + o['missed']}",
        f"in-scope score {_pct(o['in_scope_score'])} = killed / (killed + missed failing, "
        f"racing or leaving outputs unwritten) = {o['killed']} / "
        f"{o['killed'] + o['missed_in_scope']}; value bugs "
        f"(issue 10): {o['missed_value']}",
    ]


def _table(title: str, rows: dict[str, dict[str, Any]]) -> list[str]:
    out = [title, f"  {'':28} {'killed':>6} {'missed':>6} {'in-sc.':>6} {'equiv':>6} "
           f"{'unkn':>5} {'err':>4}  {'score':>6}  {'in-scope':>8}"]
    for name, c in rows.items():
        out.append(f"  {name:28} {c['killed']:6} {c['missed']:6} {c['missed_in_scope']:6} "
                   f"{c['equivalent']:6} {c['unknown']:5} {c['error']:4}  "
                   f"{_pct(c['score']):>6}  {_pct(c['in_scope_score']):>8}")
    return out


def text(result: Result, per_mutant: bool = True) -> str:
    lines: list[str] = []
    recs = result.records
    if per_mutant:
        for r in recs:
            lines.append(f"{r['id']}  {r['operator']}  {r['edit']}  {verdict_label(r)}")
    summary = summarize(recs)
    h = result.header
    lines.append("")
    sample = f", stratified sample of {h['sample']}" if h.get("sample") else ""
    shard = h.get("shard", [0, 1])
    shard_text = f", shard {shard[0]}/{shard[1]}" if shard != [0, 1] else ""
    lines.append(f"campaign: {len(h['files'])} file(s), population {h['population']} "
                 f"mutants{sample}{shard_text}, seed {h['seed']}; {result.seconds:.0f} s")
    lines.extend(score_lines(summary))
    holes = soundness_holes(recs)
    if holes:
        lines.append("")
        lines.append(f"SOUNDNESS: {len(holes)} mutant(s) verified clean but fail, race or "
                     "leave outputs unwritten on the interpreter:")
        for r in holes:
            lines.append(f"  {r['id']}: {r['edit']} -- {r.get('reason', '')}")
    missed = [r for r in recs if r["verdict"] == "missed" and r not in holes]
    if missed:
        lines.append("")
        lines.append("missed (value):")
        for r in missed:
            lines.append(f"  {r['id']}: {r['edit']} -- {r.get('reason', '')}")
    errors = [r for r in recs if r["verdict"] == "error"]
    if errors:
        lines.append("")
        lines.append("errors (tilesafe failed on the mutant):")
        for r in errors:
            lines.append(f"  {r['id']}: {r.get('reason', '')}")
    lines.append("")
    lines.extend(_table("per operator:", summary["operators"]))
    lines.append("")
    lines.extend(_table("per kernel:", summary["kernels"]))
    return "\n".join(lines) + "\n"


def to_json(result: Result) -> str:
    return json.dumps({"kind": "mutation-campaign", **result.to_json()}, indent=1) + "\n"


_CSS = """
body{font-family:system-ui,sans-serif;margin:1.5em;color:#222}
table{border-collapse:collapse;margin:1em 0;font-size:13px}
th,td{border:1px solid #ccc;padding:3px 6px;text-align:left;vertical-align:top}
th{background:#f0f0f0}
td.n{text-align:right}
code{font-family:ui-monospace,monospace;font-size:12px}
.killed{background:#e6f4e6}.missed{background:#fbe3e3}.equivalent{background:#f4f4f4}
.unknown{background:#fff6d9}.error{background:#f2d9fb}
"""


def _e(x: object) -> str:
    return html.escape(str(x))


def _html_table(head: Sequence[str], rows: list[list[str]], classes: list[str] | None = None
                ) -> str:
    out = ["<table><tr>" + "".join(f"<th>{_e(h)}</th>" for h in head) + "</tr>"]
    for i, row in enumerate(rows):
        cls = f' class="{classes[i]}"' if classes else ""
        out.append(f"<tr{cls}>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>")
    out.append("</table>")
    return "\n".join(out)


def _score_rows(rows: dict[str, dict[str, Any]]) -> list[list[str]]:
    return [[_e(k), *(f"{c[f]}" for f in ("killed", "missed", "missed_in_scope", "equivalent",
                                          "unknown", "error")),
             _pct(c["score"]), _pct(c["in_scope_score"])] for k, c in rows.items()]


def to_html(result: Result) -> str:
    summary = summarize(result.records)
    head = ["", "killed", "missed", "in scope", "equivalent", "unknown", "error", "score",
            "in-scope score"]
    parts = ["<!DOCTYPE html><html><head><meta charset='utf-8'>",
             "<title>tilesafe mutation campaign</title>", f"<style>{_CSS}</style></head><body>",
             "<h1>tilesafe mutation campaign</h1>"]
    parts += [f"<p>{_e(line)}</p>" for line in score_lines(summary)]
    parts.append("<h2>Per operator</h2>")
    parts.append(_html_table(head, _score_rows(summary["operators"])))
    parts.append("<h2>Per kernel</h2>")
    parts.append(_html_table(head, _score_rows(summary["kernels"])))
    parts.append("<h2>Mutants</h2>")
    rows, classes = [], []
    for r in result.records:
        change = (f"<code>{_e(r.get('before', ''))}</code><br>&rarr; "
                  f"<code>{_e(r.get('after', '')) or '(deleted)'}</code>")
        rows.append([f"<code>{_e(r['id'])}</code>", _e(r["operator"]), _e(r["edit"]), change,
                     _e(verdict_label(r)), _e(r.get("reason", ""))])
        classes.append(r["verdict"])
    parts.append(_html_table(["id", "operator", "edit", "statement", "verdict", "why"], rows,
                             classes))
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


def render(result: Result, fmt: str) -> str:
    if fmt == "json":
        return to_json(result)
    if fmt == "html":
        return to_html(result)
    return text(result)
