"""The documentation points at things that exist (issue 18): every module path the docs and
the README name (`semantics/value/valueflow.py`, `src/tilesafe/checkers/registry.py`,
`tilesafe.semantics.temporal.explore`), every test, bench script and corpus file they name
by its file name, and every code of the catalogue has a line in some documentation table
or text. A file moved or renamed without its docs fails here, not in a reader's hands."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tilesafe.proofs.codes import CODES

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "src" / "tilesafe"
DOCS = sorted((ROOT / "docs").glob("*.md")) + [ROOT / "README.md"]
SUBPACKAGES = "|".join(sorted(p.name for p in PACKAGE.iterdir()
                              if p.is_dir() and p.name != "__pycache__"))
MODULE = re.compile(r"(?<![\w/.-])((?:src/tilesafe/|tilesafe/)?(?:" + SUBPACKAGES
                    + r")/[\w/]*\w+\.(?:py|lark))")
DOTTED = re.compile(r"\btilesafe\.((?:" + SUBPACKAGES + r")(?:\.\w+)*)")
REPO_FILE = re.compile(r"(?<![\w/.-])((?:tests|bench|corpus|examples)/[\w/.-]*\.(?:py|tsk|sh))")


def _texts() -> list[tuple[str, str]]:
    return [(p.name, p.read_text(encoding="utf-8")) for p in DOCS]


def test_the_patterns_find_paths():
    """The scan is not vacuous: the docs name many modules, dotted names and files."""
    text = "\n".join(t for _, t in _texts())
    assert len(set(MODULE.findall(text))) > 60
    assert len(set(DOTTED.findall(text))) > 3
    assert len(set(REPO_FILE.findall(text))) > 50


@pytest.mark.parametrize("name,text", _texts(), ids=[p.name for p in DOCS])
def test_module_paths_exist(name: str, text: str):
    missing = sorted({p for p in MODULE.findall(text)
                      if not (PACKAGE / p.removeprefix("src/tilesafe/")
                              .removeprefix("tilesafe/")).exists()})
    assert not missing, f"{name} names modules that do not exist: {missing}"


@pytest.mark.parametrize("name,text", _texts(), ids=[p.name for p in DOCS])
def test_dotted_module_names_exist(name: str, text: str):
    missing = []
    for dotted in set(DOTTED.findall(text)):
        parts = dotted.split(".")
        # a module, a package, or an attribute of one (tilesafe.jit.JitKernel)
        if not any((PACKAGE.joinpath(*parts[:i]).with_suffix(".py")).exists()
                   or PACKAGE.joinpath(*parts[:i]).is_dir() for i in range(len(parts), 0, -1)):
            missing.append(f"tilesafe.{dotted}")
    assert not missing, f"{name} names modules that do not exist: {sorted(missing)}"


@pytest.mark.parametrize("name,text", _texts(), ids=[p.name for p in DOCS])
def test_repository_files_exist(name: str, text: str):
    missing = sorted({p for p in REPO_FILE.findall(text) if not (ROOT / p).exists()})
    assert not missing, f"{name} names files that do not exist: {missing}"


def test_every_code_is_documented():
    text = "\n".join(t for _, t in _texts())
    missing = [c for c in CODES if c not in text]
    assert not missing, f"codes with no line in docs/ or README.md: {missing}"
