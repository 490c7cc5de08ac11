"""Shared fixtures for the CLI, formatter and corpus tests."""

from __future__ import annotations

import io
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "corpus"


@dataclass(frozen=True)
class CliResult:
    code: int
    out: str
    err: str


@pytest.fixture
def tsk(tmp_path: Path) -> Callable[..., Path]:
    """Write a .tsk file into the test's temporary folder and return its path."""

    def write(text: str, name: str = "k.tsk") -> Path:
        path = tmp_path / name
        path.write_text(text, encoding="utf-8")
        return path

    return write


@pytest.fixture
def cli() -> Callable[..., CliResult]:
    """Run `tilesafe ARGS` in-process; returns the exit code and both output streams."""
    from tilesafe.cli import main

    def call(*args: object) -> CliResult:
        out, err = io.StringIO(), io.StringIO()
        code = main([str(a) for a in args], stdout=out, stderr=err)
        return CliResult(code, out.getvalue(), err.getvalue())

    return call
