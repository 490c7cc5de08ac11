"""Shared fixtures for the CLI, formatter and corpus tests."""

from __future__ import annotations

import io
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "corpus"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """A test marked `slow` runs only with TILESAFE_SLOW=1 (the nightly job: `TILESAFE_SLOW=1
    python -m pytest -m slow`). Why one rule here rather than a skipif beside each mark: a
    mark alone used to run in CI anyway, and CI must stay under ~15 minutes on 2 cores."""
    if os.environ.get("TILESAFE_SLOW"):
        return
    skip = pytest.mark.skip(reason="slow: TILESAFE_SLOW=1 runs it")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)


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
