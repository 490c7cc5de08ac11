"""Mutants of a file: apply every operator at every site, print each edit with the canonical
formatter, keep the ones that lint clean, drop repeats, and name each one stably.

Why print and lint: a mutant is judged by the same pipeline a user's kernel goes through,
so it must be a real .tsk text; an edit the frontend rejects (a non-power-of-two alignment,
a deleted `let` still in use) is a type error, not a bug the checkers should find.

Comments are not carried into mutants: they would have to be re-placed around moved and
deleted statements, and they do not change a verdict. The original is printed the same way,
so "identical text" means "identical kernel".

Ids are `stem:operator:line.col-line.col:slug` -- the file, the operator, where in the
original file the edited text is, and what the edit did -- so the same file and operators
give the same ids in every run, on every machine, in every shard.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tilesafe.frontend import ast
from tilesafe.frontend.fmt import format_expr, format_module
from tilesafe.frontend.load import read_source
from tilesafe.frontend.parser import parse
from tilesafe.frontend.span import Span
from tilesafe.mutation import operators as ops
from tilesafe.mutation.sites import Path as TreePath
from tilesafe.mutation.sites import Site, get_at, replace_at, walk


@dataclass(frozen=True)
class Mutant:
    """One lint-clean single-edit variant of a kernel file."""

    id: str
    path: str  # the original file
    kernel: str  # the kernel the edit is in
    operator: str
    edit: str  # the change, node-level
    line: int
    col: int
    before: str  # the statement (or header line) as it was
    after: str  # ... and as the mutant has it ("" when deleted)
    text: str  # the whole mutant, canonical

    @property
    def sha(self) -> str:
        return text_sha(self.text)


def text_sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


@dataclass
class Generated:
    """The mutants of one file and what was dropped on the way."""

    path: str
    original: str  # canonical text of the original, comments removed
    mutants: list[Mutant]
    proposed: int = 0
    noop: int = 0  # printed the same as the original
    duplicate: int = 0  # printed the same as an earlier mutant
    lint_rejected: dict[str, int] = field(default_factory=dict)  # operator -> count


def canonical(module: ast.Module, source: str) -> str:
    """The module printed canonically without its comments."""
    return format_module(dataclasses.replace(module, comments=()), source)


def _header(kernel: ast.Kernel, where: bool) -> str:
    if where:
        return "where " + ", ".join(format_expr(w) for w in kernel.where)
    grid = ", ".join(format_expr(g) for g in kernel.grid)
    return f"grid ({grid}) block {format_expr(kernel.block_dim)}"


def _statement_texts(module: ast.Module, mutant: ast.Module, site: Site,
                     edit: ops.Edit) -> tuple[str, str]:
    if edit.before is not None and edit.after is not None:
        return edit.before, edit.after
    stmt_path: TreePath | None = None
    for i in range(len(site.path), 0, -1):
        if isinstance(get_at(module, site.path[:i]), ast.Stmt):
            stmt_path = site.path[:i]
            break
    if stmt_path is None:
        in_where = any(step[0] == "where" for step in site.path) or \
            isinstance(site.node, ast.Kernel)
        kpath = site.path[:1]
        return (_header(get_at(module, kpath), in_where),  # type: ignore[arg-type]
                _header(get_at(mutant, kpath), in_where))  # type: ignore[arg-type]
    before = get_at(module, stmt_path)
    after = get_at(mutant, stmt_path)
    return ops.stmt_head(before), ops.stmt_head(after)  # type: ignore[arg-type]


def _span_id(span: Span) -> str:
    return f"{span.line}.{span.col}-{span.end_line}.{span.end_col}"


@dataclass(frozen=True)
class Candidate:
    """A printed edit before linting."""

    id: str
    kernel: str
    operator: str
    edit: str
    line: int
    col: int
    before: str
    after: str
    text: str


def propose(path: str | Path, selectors: tuple[str, ...] | None = None,
            stem: str | None = None) -> tuple[str, list[Candidate], int, int, int]:
    """Every printed edit of a file, in operator order, without repeats.

    Returns (canonical original, candidates, proposed, noops, duplicates). Raises
    DiagnosticError when the file does not parse."""
    source = read_source(path)
    module = parse(source, str(path))
    original = canonical(module, source)
    stem = stem or Path(path).stem
    seen_text = {original}
    seen_id: set[str] = set()
    out: list[Candidate] = []
    proposed = noop = dup = 0
    sites = list(walk(module))
    for _family, operator in ops.OPERATORS:
        for site in sites:
            for edit in operator(site):
                if not ops.selected(edit.operator, selectors):
                    continue
                proposed += 1
                mutant_module = replace_at(module, site.path, edit.new)
                try:
                    text = canonical(mutant_module, source)  # type: ignore[arg-type]
                except (TypeError, ValueError, AssertionError):
                    continue  # a tree the printer cannot print is not a mutant
                if text == original:
                    noop += 1
                    continue
                if text in seen_text:
                    dup += 1
                    continue
                seen_text.add(text)
                span = edit.span or getattr(site.node, "span", None) or site.kernel.span
                mid = f"{stem}:{edit.operator}:{_span_id(span)}:{edit.slug}"
                n = 2
                base = mid
                while mid in seen_id:
                    mid = f"{base}#{n}"
                    n += 1
                seen_id.add(mid)
                before, after = _statement_texts(module, mutant_module, site, edit)  # type: ignore[arg-type]
                out.append(Candidate(mid, site.kernel.name, edit.operator, edit.edit,
                                     span.line, span.col, before, after, text))
    return original, out, proposed, noop, dup


# ---- linting ---------------------------------------------------------------------------------

_LINT_DIR: str | None = None


def _lint_one(text: str, name: str = "mutant.tsk") -> bool:
    """Does this text lint clean? (`tilesafe.api.lint` on a scratch file, exactly what the
    user's `tilesafe lint` does.)"""
    global _LINT_DIR
    from tilesafe import api

    if _LINT_DIR is None:
        _LINT_DIR = tempfile.mkdtemp(prefix="tilesafe-mutate-lint-")
    path = os.path.join(_LINT_DIR, name)
    Path(path).write_text(text, encoding="utf-8")
    return not [d for d in api.lint(path) if d.severity == "error"]


def _lint_many(texts: Sequence[str], jobs: int) -> list[bool]:
    if jobs <= 1 or len(texts) < 16:
        return [_lint_one(t) for t in texts]
    from tilesafe.mutation.pool import map_simple

    return map_simple(_lint_one, list(texts), jobs)


def generate(path: str | Path, selectors: tuple[str, ...] | None = None, jobs: int = 1,
             stem: str | None = None) -> Generated:
    """The lint-clean mutants of one file (raises DiagnosticError if the file itself does
    not parse)."""
    original, cands, proposed, noop, dup = propose(path, selectors, stem)
    clean = _lint_many([c.text for c in cands], jobs)
    gen = Generated(str(path), original, [], proposed, noop, dup)
    for c, ok in zip(cands, clean, strict=True):
        if not ok:
            gen.lint_rejected[c.operator] = gen.lint_rejected.get(c.operator, 0) + 1
            continue
        gen.mutants.append(Mutant(c.id, str(path), c.kernel, c.operator, c.edit, c.line,
                                  c.col, c.before, c.after, c.text))
    return gen
