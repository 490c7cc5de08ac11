"""The report as one self-contained HTML page: inline CSS and SVG, no script, no request
to the network (tests check that no `src=`/`href=` leaves the file)."""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

from tilesafe.frontend.diagnostics import Diagnostic
from tilesafe.proofs.codes import describe
from tilesafe.report.model import KernelView, Row

CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,sans-serif;margin:1.5em;color:#222;
max-width:1500px}
h1{font-size:22px}h2{font-size:18px;border-bottom:1px solid #ccc;margin-top:2em}
h3{font-size:14px;margin:1em 0 .3em}
table{border-collapse:collapse;font-size:12px;margin:.5em 0}
th,td{border:1px solid #ddd;padding:2px 6px;text-align:left;vertical-align:top}
th{background:#f3f3f3}
.proved{color:#1a7f37}.refuted{color:#cf222e;font-weight:600}
.unknown{color:#9a6700;font-weight:600}
tr.v-refuted{background:#fff0f0}tr.v-unknown{background:#fff8e5}
tr.follow-on{background:#fafafa;color:#555}tr.follow-on td:nth-child(2){padding-left:1.5em}
pre.src{font-size:12px;line-height:1.35;background:#fafafa;border:1px solid #e5e5e5;
padding:.5em;overflow-x:auto}
.ln{color:#999;display:inline-block;width:3.2em;text-align:right;margin-right:.6em;user-select:none}
.mk{display:inline-block;width:1.2em;text-decoration:none}
.mk-proved{color:#1a7f37}.mk-refuted{color:#cf222e}.mk-unknown{color:#9a6700}.mk-warning{color:#bf8700}
.line-refuted{background:#ffe3e3}.line-unknown{background:#fff3d6}
.pics{display:flex;flex-wrap:wrap;gap:14px;margin:.4em 0 1em}.pair{display:flex;gap:14px}
svg.pic{border:1px solid #e3e3e3;background:#fff}
.cex td:first-child{font-weight:600}.summary{font-size:14px}
details>summary{cursor:pointer;color:#555}
.k{color:#8250df}.kd{color:#cf222e}.kp{color:#0550ae;font-weight:600}.kt{color:#953800}
.c{color:#6e7781;font-style:italic}.m{color:#0a3069}.nc{color:#116329}.nb{color:#8250df}.nf{color:#6639ba;font-weight:600}
"""

_TOKEN_CLASS = {"Keyword.Declaration": "kd", "Keyword.Pseudo": "kp", "Keyword.Type": "kt",
                "Keyword": "k", "Comment": "c", "Number": "m", "Name.Constant": "nc",
                "Name.Builtin": "nb", "Name.Function": "nf"}


def _highlight_lines(source: str) -> list[str]:
    """The source as HTML, one string per line, coloured with the .tsk Pygments lexer
    (plain text when Pygments is missing)."""
    try:
        from tilesafe.report.lexer import TskLexer
    except ModuleNotFoundError:
        return [escape(x) for x in source.split("\n")]
    lines, cur = [], []
    for tok, text in TskLexer().get_tokens(source):
        name = str(tok).removeprefix("Token.")
        cls = next((c for k, c in _TOKEN_CLASS.items() if name == k or name.startswith(k + ".")),
                   None)
        parts = text.split("\n")
        for i, part in enumerate(parts):
            if i:
                lines.append("".join(cur))
                cur = []
            if part:
                cur.append(f'<span class="{cls}">{escape(part)}</span>' if cls else escape(part))
    lines.append("".join(cur))
    return lines


def _marker(rows: Sequence[Row]) -> tuple[str, str]:
    """The marker of a source line: the worst verdict of its obligations."""
    verdicts = {r.verdict for r in rows}
    if "refuted" in verdicts:
        kind = "warning" if all(r.severity != "error" for r in rows if r.verdict == "refuted") \
            else "refuted"
        return ("✗" if kind == "refuted" else "!"), kind
    if "unknown" in verdicts:
        return "?", "unknown"
    return "✓", "proved"


def _source(view: KernelView) -> str:
    by_line: dict[int, list[Row]] = {}
    for r in view.rows:
        if r.follows and r.verdict == "unknown":
            continue  # left open by a cut search: marked at the refutation, not the kernel
        if r.line:
            by_line.setdefault(r.line, []).append(r)
    out = []
    for n, text in enumerate(_highlight_lines(view.source.rstrip("\n")), start=1):
        rows = by_line.get(n, [])
        if rows:
            sym, kind = _marker(rows)
            tip = escape("; ".join(f"{r.name}: {r.verdict}" for r in rows))
            mark = (f'<a class="mk mk-{kind}" href="#{rows[0].anchor}" title="{tip}" '
                    f'data-verdict="{kind}">{sym}</a>')
            cls = f' class="line-{kind}"' if kind in ("refuted", "unknown") else ""
        else:
            mark, cls = '<span class="mk"></span>', ""
        out.append(f'<span{cls}><span class="ln">{n}</span>{mark}{text}</span>')
    return '<pre class="src">' + "\n".join(out) + "</pre>"


def _table(view: KernelView) -> str:
    head = ("<tr><th>line</th><th>obligation</th><th>verdict</th><th>method</th>"
            "<th>time</th><th>code</th></tr>")
    body = []
    for r in view.rows:
        name = escape(r.name)
        if r.members:
            name += ("<details><summary>properties</summary>"
                     + escape(", ".join(r.members)) + "</details>")
        if r.message and r.verdict != "proved":
            name += f"<br><small>{escape(r.message)}</small>"
        code = (f'<abbr title="{escape(describe(r.code))}">{escape(r.code)}</abbr>'
                if r.code else "")
        verdict = r.verdict + (" (warning)" if r.severity != "error" and
                               r.verdict != "proved" and not r.follows else "")
        cls = f"v-{r.verdict}"
        if r.follows:
            verdict += f" (follow-on of {r.follows})"
            name = "↳ " + name
            cls += " follow-on"
        body.append(f'<tr id="{r.anchor}" class="{cls}"><td>{r.line or ""}</td>'
                    f"<td>{name}</td><td class=\"{r.verdict}\">{escape(verdict)}</td>"
                    f"<td>{escape(r.method)}</td><td>{r.seconds * 1000:.1f} ms</td>"
                    f"<td>{code}</td></tr>")
    return f'<table class="obligations">{head}{"".join(body)}</table>'


def _counterexamples(view: KernelView) -> str:
    out = []
    for r in view.rows:
        if not r.counterexample and not r.pictures:
            continue
        out.append(f'<h3>{escape(r.code or "")} {escape(r.name)} '
                   f'<a href="#{r.anchor}">↑</a></h3>')
        if r.counterexample:
            cells = "".join(f"<tr><td>{escape(k)}</td><td>{escape(v)}</td></tr>"
                            for k, v in r.counterexample)
            out.append(f'<table class="cex">{cells}</table>')
        if r.pictures:
            out.append('<div class="pics">' + "".join(r.pictures) + "</div>")
    return "".join(out)


def _follow_ons(n: int) -> str:
    return f", {n} follow-on{'s' if n != 1 else ''} of refutations" if n else ""


def render(views: Sequence[KernelView], diags: Sequence[Diagnostic], version: str) -> str:
    total = {"proved": 0, "refuted": 0, "unknown": 0, "follow-ons": 0}
    for v in views:
        for k, n in v.counts.items():
            total[k] += n
    parts = [f"<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">"
             f"<title>tilesafe report</title><style>{CSS}</style></head><body>",
             f"<h1>tilesafe {escape(version)} — proof report</h1>",
             f'<p class="summary">{len(views)} kernel(s): {total["proved"]} proved, '
             f'{total["refuted"]} refuted, {total["unknown"]} unknown'
             f'{_follow_ons(total["follow-ons"])}'
             f"{f', {len(diags)} diagnostic(s)' if diags else ''}.</p>"]
    if diags:
        items = "".join(f"<li><code>{escape(d.span.path)}:{d.span.line}:{d.span.col}</code> "
                        f"{escape(d.code)} {escape(d.message)}</li>" for d in diags)
        parts.append(f'<h2>Files that do not load</h2><ul class="diags">{items}</ul>')
    parts.append("<ul>" + "".join(
        f'<li><a href="#k{i}">{escape(v.path)}: {escape(v.kernel)}</a> — '
        f'{v.counts["proved"]} proved, {v.counts["refuted"]} refuted, '
        f'{v.counts["unknown"]} unknown{_follow_ons(v.counts["follow-ons"])}</li>'
        for i, v in enumerate(views)) + "</ul>")
    for i, v in enumerate(views):
        parts.append(f'<section class="kernel" id="k{i}" data-kernel="{escape(v.kernel)}">'
                     f"<h2>{escape(v.kernel)} <small>({escape(v.path)})</small></h2>")
        parts.append(_source(v))
        parts.append("<h3>Obligations</h3>" + _table(v))
        cex = _counterexamples(v)
        if cex:
            parts.append("<h3>Counterexamples</h3>" + cex)
        if v.layouts:
            parts.append('<h3>Shared-memory layouts</h3><div class="pics">'
                         + "".join(v.layouts) + "</div>")
        parts.append("</section>")
    parts.append("</body></html>\n")
    return "".join(parts)
