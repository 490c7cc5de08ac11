"""`verify --jobs N` (files in worker processes) and the progress line on a terminal.

The parallel run must give exactly the sequential run's records, in the inputs' order
(only the timings differ), and the progress line must appear on a terminal only.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

from tilesafe.cli import main

ROOT = Path(__file__).resolve().parent.parent
FILES = [str(ROOT / "corpus" / "good" / n) for n in
         ("elementwise.tsk", "ragged_tail.tsk", "transpose_swizzled.tsk")] + [
    str(ROOT / "corpus" / "bad" / "ts201_guard_le.tsk"),
    str(ROOT / "corpus" / "bad" / "ts001_missing_bracket.tsk")]


def _records(*extra: str) -> tuple[int, list[dict]]:
    buf = io.StringIO()
    code = main(["verify", "--only", "layout,access,value", "--format", "json", *extra,
                 *FILES], stdout=buf, stderr=io.StringIO())
    records = json.loads(buf.getvalue())
    for r in records:
        r.pop("seconds", None)
        r.get("evidence", {}).pop("seconds", None)
    return code, records


def test_parallel_verify_equals_sequential():
    seq = _records()
    par = _records("--jobs", "2")
    assert seq[0] == par[0] == 2  # a syntax error among the inputs
    assert [(r.get("path"), r.get("name"), r.get("verdict"), r.get("code")) for r in par[1]] \
        == [(r.get("path"), r.get("name"), r.get("verdict"), r.get("code")) for r in seq[1]]
    assert any(r.get("verdict") == "refuted" for r in par[1])


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_only_on_a_terminal():
    tty, piped = _Tty(), io.StringIO()
    files = FILES[:3]
    assert main(["verify", "--only", "layout", *files], stdout=io.StringIO(), stderr=tty) == 0
    assert main(["verify", "--only", "layout", *files], stdout=io.StringIO(),
                stderr=piped) == 0
    shown = tty.getvalue()
    assert "[1/3]" in shown and "[3/3]" in shown and "elementwise.tsk" in shown
    assert piped.getvalue() == ""


def test_jobs_must_be_positive():
    err = io.StringIO()
    assert main(["verify", "--jobs", "0", FILES[0]], stdout=io.StringIO(), stderr=err) == 2
    assert "--jobs must be at least 1" in err.getvalue()
