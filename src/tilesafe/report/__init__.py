"""`tilesafe report`: verification results as a page people read (HTML) or a CI comment
(Markdown). model.py gathers what to show from the obligation records, pictures.py and
svg.py draw, html.py and markdown.py lay it out; nothing here prints."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tilesafe.frontend.diagnostics import Diagnostic


def build_report(entries: Sequence[Any], diags: Sequence[Diagnostic], fmt: str = "html",
                 version: str = "", sources: dict[str, str] | None = None) -> str:
    """The report text for `entries` (proofs/report.Entry) and the files' diagnostics."""
    from tilesafe.report import html, markdown
    from tilesafe.report.model import gather

    views = gather(entries, sources)
    if fmt == "markdown":
        return markdown.render(views, diags, version)
    return html.render(views, diags, version)
