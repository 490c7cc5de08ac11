"""Reading corpus files the way tests/test_corpus.py does: a bad kernel's second line may say
`// target: gfx942` (docs/corpus.md), and the bug is one of that machine only -- on sm_90a the
same kernel is proved. Every test that loads a corpus file loads it for its target."""

from __future__ import annotations

import re
from pathlib import Path

from tilesafe.frontend import ir
from tilesafe.frontend.load import load_program

TARGET = re.compile(r"//\s*target:\s*(\S+)\s*$")


def target_of(path: Path) -> str | None:
    """The target a corpus file names on its second line (None: the default, sm_90a)."""
    lines = Path(path).read_text(encoding="utf-8").splitlines()[1:2]
    m = TARGET.match(lines[0].strip()) if lines else None
    return m.group(1) if m else None


def load_corpus(path: Path) -> ir.Program:
    """The program of a corpus file, resolved for the target it names."""
    return load_program(path, target=target_of(path))
