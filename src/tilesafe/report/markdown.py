"""The report as GitHub-flavoured Markdown, for a CI comment: a summary table per kernel
and every obligation that is not proved, with its counterexample (no pictures)."""

from __future__ import annotations

from collections.abc import Sequence

from tilesafe.frontend.diagnostics import Diagnostic
from tilesafe.report.model import KernelView

_ICON = {"proved": "✅", "refuted": "❌", "unknown": "❔"}


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render(views: Sequence[KernelView], diags: Sequence[Diagnostic], version: str) -> str:
    out = [f"## tilesafe {version} proof report", ""]
    if diags:
        out += ["**Files that do not load:**", ""]
        out += [f"- `{d.span.path}:{d.span.line}:{d.span.col}` {d.code} {_cell(d.message)}"
                for d in diags]
        out.append("")
    out += ["| kernel | proved | refuted | unknown | follow-ons |",
            "| --- | ---: | ---: | ---: | ---: |"]
    for v in views:
        c = v.counts
        out.append(f"| `{v.kernel}` ({v.path}) | {c['proved']} | {c['refuted']} | "
                   f"{c['unknown']} | {c['follow-ons']} |")
    for v in views:
        failing = [r for r in v.rows if r.verdict != "proved"]
        if not failing:
            continue
        out += ["", f"### `{v.kernel}` ({v.path})", "",
                "| line | obligation | verdict | method | code |",
                "| ---: | --- | --- | --- | --- |"]
        for r in failing:
            verdict = f"{_ICON[r.verdict]} {r.verdict}" + (
                f" (follow-on of {r.follows})" if r.follows else
                " (warning)" if r.severity != "error" else "")
            name = ("↳ " if r.follows else "") + _cell(r.name)
            out.append(f"| {r.line or ''} | {name} | {verdict} | {_cell(r.method)} | "
                       f"{r.code or ''} |")
        for r in failing:
            if r.counterexample:
                out += ["", f"<details><summary>{r.code or ''} {_cell(r.name)}: "
                        "counterexample</summary>", "", "```text"]
                out += [f"{k}: {v}" for k, v in r.counterexample]
                out += ["```", "</details>"]
    out.append("")
    return "\n".join(out)
