"""Diagnostics: `path:line:col: TSnnn message`, a caret excerpt, and a JSON record.

Every failure a user can cause is one of these; the frontend raises `DiagnosticError`
carrying them, and only the CLI renders them.
"""

from __future__ import annotations

from dataclasses import dataclass

from tilesafe.frontend.span import Span

# Frontend codes (TS0xx). Later stages own their own ranges (see DESIGN.md).
SYNTAX = "TS001"  # unexpected token
BAD_CHAR = "TS002"  # character no token starts with
EARLY_EOF = "TS003"  # input ended inside a construct
IO_ERROR = "TS004"  # file cannot be read / not UTF-8
TOO_DEEP = "TS005"  # blocks and expressions nested deeper than the tools support
UNKNOWN_NAME = "TS010"
DUPLICATE_NAME = "TS011"
WRONG_KIND = "TS012"  # a name used as something it is not (barrier as tensor, ...)
MISPLACED = "TS013"  # a declaration or statement where it is not allowed
RANK_MISMATCH = "TS020"
DTYPE_MISMATCH = "TS021"
NOT_INTEGER = "TS022"
NOT_AFFINE = "TS023"
NOT_CONSTANT = "TS024"
NOT_PRESBURGER = "TS025"
BAD_VALUE = "TS026"  # a constant out of its allowed range (block 0, box of 0, ...)
BAD_CALL = "TS027"  # unknown function or wrong number of arguments
BAD_LAYOUT = "TS030"
BAD_TENSORMAP = "TS031"
BAD_THREADS = "TS032"  # role thread range outside the block


@dataclass(frozen=True)
class Diagnostic:
    code: str
    message: str
    span: Span
    severity: str = "error"
    hint: str | None = None

    def headline(self) -> str:
        return f"{self.span}: {self.code} {self.message}"

    def to_record(self) -> dict[str, object]:
        return {
            "path": self.span.path,
            "line": self.span.line,
            "col": self.span.col,
            "end_line": self.span.end_line,
            "end_col": self.span.end_col,
            "code": self.code,
            "severity": self.severity,
            "message": self.message,
            "hint": self.hint,
        }


class DiagnosticError(Exception):
    """Raised by a frontend stage with every diagnostic it collected (at least one)."""

    def __init__(self, diagnostics: list[Diagnostic]):
        super().__init__("; ".join(d.headline() for d in diagnostics))
        self.diagnostics = tuple(diagnostics)


def caret_excerpt(diag: Diagnostic, source: str | None) -> str:
    """The source line with a caret run under the span (first line of it only)."""
    if source is None or diag.span.line <= 0:
        return ""
    lines = source.splitlines()
    if diag.span.line > len(lines):
        return ""
    text = lines[diag.span.line - 1].expandtabs(4)
    start = max(diag.span.col - 1, 0)
    if diag.span.end_line == diag.span.line and diag.span.end_col > diag.span.col:
        width = diag.span.end_col - diag.span.col
    else:
        width = 1
    width = max(1, min(width, max(len(text) - start, 1)))
    gutter = f"{diag.span.line:>4} | "
    return f"{gutter}{text}\n{' ' * len(gutter)}{' ' * start}{'^' * width}"


def render(diag: Diagnostic, source: str | None) -> str:
    parts = [diag.headline()]
    excerpt = caret_excerpt(diag, source)
    if excerpt:
        parts.append(excerpt)
    if diag.hint:
        parts.append(f"     = {diag.hint}")
    return "\n".join(parts)
