"""Read, parse and resolve a .tsk file: the one entry point later stages start from."""

from __future__ import annotations

from pathlib import Path

from tilesafe.frontend import diagnostics as dg
from tilesafe.frontend.diagnostics import Diagnostic, DiagnosticError
from tilesafe.frontend.ir import Program
from tilesafe.frontend.parser import parse
from tilesafe.frontend.resolve import resolve
from tilesafe.frontend.span import Span
from tilesafe.frontend.target import Target, lookup
from tilesafe.frontend.target_rules import unsupported


def read_source(path: str | Path) -> str:
    """File text, or a TS004 diagnostic (missing file, directory, not UTF-8)."""
    try:
        return Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        reason = err.strerror if isinstance(err, OSError) and err.strerror else str(err)
        raise DiagnosticError(
            [Diagnostic(dg.IO_ERROR, f"cannot read file: {reason}", Span(str(path), 1, 1, 1, 1))]
        ) from None


def compile_source(text: str, path: str = "<input>",
                   target: str | Target | None = None) -> Program:
    """Parse and resolve for `target` (frontend/target.py; None: sm_90a), refusing the
    constructs it does not have (TS036)."""
    tgt = lookup(target)
    program = resolve(parse(text, path), tgt)
    refused = [d for k in program.kernels for d in unsupported(k, tgt)]
    if refused:
        raise DiagnosticError(refused)
    return program


def load_program(path: str | Path, text: str | None = None,
                 target: str | Target | None = None) -> Program:
    """Parse and resolve `path` for `target` (None: sm_90a); `text`, when given, is its
    contents (standard input has no file to read again)."""
    return compile_source(read_source(path) if text is None else text, str(path), target)
