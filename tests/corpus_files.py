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


# Bad kernels whose verification takes tens of seconds each (the persistent GEMM's nested
# loops, docs/temporal.md §15): every test that runs the checkers over the bad corpus marks
# them slow (TILESAFE_SLOW=1 runs them; tests/conftest.py).
SLOW_BAD = frozenset({"ts302_gemm_epilogue_box_reused_across_tiles.tsk",
                      "ts303_gemm_stage_released_early_on_last_tile.tsk",
                      "ts408_gemm_ring_restarted_per_tile.tsk",
                      "ts408_gemm_ring_rounded_to_stages.tsk"})
