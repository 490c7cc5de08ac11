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
BAD_SPEC = "TS040"  # a malformed `ensures` clause (not an out tensor, shared memory in it, ...)
BAD_MMA = "TS034"  # a wgmma whose tiles, dtypes or accumulator are not an MMA shape
BAD_FRAGMENT = "TS035"  # a fragment no wgmma can accumulate into (shape, dtype)
BAD_REQUIRES = "TS042"  # a malformed `requires` clause (not an index tensor, an unbound var)
SPEC_OUTSIDE = "TS041"  # an `ensures` clause that reads outside a tensor for some size
BAD_CLUSTER = "TS043"  # a cluster construct that does not fit the kernel's cluster


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


BOM = "\ufeff"  # a UTF-8 byte-order mark: the parser reads it as a space (same columns)
MAX_EXCERPT = 200  # display columns of source shown in an excerpt
_CONTEXT = 60  # columns kept left of the caret when a long line is cut


def _display(line: str) -> tuple[str, list[int]]:
    """The line as printed, and for each character (plus one past the end) the display
    column it starts at. Tabs go to the next multiple of 4; a character that is not
    printable (control characters, bidirectional overrides, a stray BOM) is shown escaped,
    `\\x1b`, `\\u202e`, so an excerpt can never drive the terminal or hide text."""
    out: list[str] = []
    cols: list[int] = []
    width = 0
    for ch in line:
        cols.append(width)
        if ch == "\t":
            piece = " " * (4 - width % 4)
        elif ch.isprintable():
            piece = ch
        else:
            piece = ch.encode("unicode_escape").decode("ascii")
        out.append(piece)
        width += len(piece)
    cols.append(width)
    return "".join(out), cols


def caret_excerpt(diag: Diagnostic, source: str | None) -> str:
    """The source line with a caret run under the span (first line of it only). Lines are
    counted by newlines, as the parser counts them; a line longer than MAX_EXCERPT columns
    is cut to a window around the caret, marked with `...` on the cut sides."""
    if source is None or diag.span.line <= 0:
        return ""
    if source.startswith(BOM):
        source = " " + source[1:]
    lines = source.split("\n")
    if diag.span.line > len(lines):
        return ""
    raw = lines[diag.span.line - 1].removesuffix("\r")
    text, cols = _display(raw)
    start_char = min(max(diag.span.col - 1, 0), len(raw))
    if diag.span.end_line == diag.span.line and diag.span.end_col > diag.span.col:
        end_char = min(diag.span.end_col - 1, len(raw))
    else:
        end_char = start_char + 1
    start = cols[start_char]
    width = max(1, (cols[end_char] if end_char <= len(raw) else len(text)) - start)
    width = max(1, min(width, max(len(text) - start, 1)))
    if len(text) > MAX_EXCERPT:
        lo = max(0, min(start - _CONTEXT, len(text) - MAX_EXCERPT))
        hi = lo + MAX_EXCERPT
        text = ("..." if lo else "") + text[lo:hi] + ("..." if hi < len(text) else "")
        start = start - lo + (3 if lo else 0)
        width = max(1, min(width, MAX_EXCERPT - (start - (3 if lo else 0))))
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
