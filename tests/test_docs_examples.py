"""The documentation's examples are real code (issue 17): every ```tsk block of the language
and layout pages (and the README) lints clean, and so does every `shared ... layout ...`
declaration their other examples show, so that a documented form the grammar refuses (a
quoted `cute("...")`) cannot come back."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tilesafe import api

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "docs" / "layouts.md", ROOT / "docs" / "language.md", ROOT / "README.md"]
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)
SHARED = re.compile(r"^\s*(shared\s+\w+\s*:.*\blayout\b.*)$", re.M)


def blocks(page: Path, lang: str | None = None) -> list[tuple[int, str, str]]:
    """(line, language, text) of every fenced block of a page."""
    text = page.read_text(encoding="utf-8")
    return [(text[:m.start()].count("\n") + 1, m.group(1), m.group(2))
            for m in FENCE.finditer(text) if lang is None or m.group(1) == lang]


TSK = [(page, line, body) for page in PAGES for line, _, body in blocks(page, "tsk")]
LAYOUTS = [(page, line, decl) for page in PAGES[:2] for line, _, body in blocks(page)
           for decl in SHARED.findall(body)]


def _lint(tmp_path: Path, text: str) -> list[str]:
    path = tmp_path / "example.tsk"
    path.write_text(text, encoding="utf-8")
    return [d.headline() for d in api.lint(path) if d.severity == "error"]


@pytest.mark.parametrize(("page", "line", "body"), TSK,
                         ids=[f"{p.name}:{n}" for p, n, _ in TSK])
def test_tsk_block_lints_clean(tmp_path, page, line, body):
    assert "kernel" in body, f"{page.name}:{line}: a tsk block is a whole kernel"
    assert _lint(tmp_path, body) == []


@pytest.mark.parametrize(("page", "line", "decl"), LAYOUTS,
                         ids=[f"{p.name}:{n}:{d.split(':')[0]}" for p, n, d in LAYOUTS])
def test_documented_layout_declaration_lints_clean(tmp_path, page, line, decl):
    kernel = ("kernel doc_example(x: in global f32[1])\n  grid (1) block 32\n{\n"
              f"  const STAGES = 2\n  {decl.strip()}\n}}\n")
    assert _lint(tmp_path, kernel) == [], f"{page.name}:{line}: {decl.strip()}"


def test_the_pages_show_every_layout_head():
    """The examples cover every head the facade knows (semantics/layout/layouts.py HEADS)."""
    from tilesafe.semantics.layout.layouts import HEADS

    shown = "\n".join(d for _, _, d in LAYOUTS)
    aliases = {h for h in HEADS if h + "B" in HEADS}  # swizzle128 for swizzle128B
    literal = {"cute", "composed"}  # `(64,64):(64,1)` and `Sw<3,3,3> o ...`, below
    missing = [h for h in HEADS if h not in aliases | literal and not re.search(rf"\b{h}\b", shown)]
    assert missing == []
    assert re.search(r"layout \(\S+\):\(", shown) and "Sw<" in shown  # the CuTe forms


def test_the_spec_examples_are_the_corpus_kernels_own():
    """language.md quotes `ensures` clauses of corpus kernels, each followed by a comment
    naming its kernel (`// transpose_swizzled`)."""
    quoted = [ln for _, _, body in blocks(PAGES[1]) for ln in body.splitlines()
              if re.match(r"ensures .*//\s*[a-z][a-z0-9_]*(\s|$)", ln)]
    assert len(quoted) >= 5
    for ln in quoted:
        clause, name = (x.strip() for x in ln.split("//", 1))
        kernel = ROOT / "corpus" / "good" / f"{name.split()[0]}.tsk"
        assert kernel.exists() and clause in kernel.read_text(encoding="utf-8"), ln


def test_a_quoted_cute_literal_is_refused_as_documented(tmp_path):
    kernel = ('kernel k(x: in global f32[1])\n  grid (1) block 32\n{\n'
              '  shared t: f16[64, 64] layout cute("(64,64):(64,1)")\n}\n')
    assert [h.split()[1] for h in _lint(tmp_path, kernel)] == ["TS002"]
    assert 'cute("(64,64):(64,1)")` is a syntax error, TS002' in PAGES[0].read_text()
