"""setmaxnreg rules (checkers/mma.py, semantics/hw/mma_rules.py): whole warpgroups (TS536) and
the register file (TS537), cross-checked against the arithmetic of the allocation."""

from __future__ import annotations

from pathlib import Path

import pytest

from tilesafe.api import checked_program
from tilesafe.checkers import mma
from tilesafe.checkers.registry import CheckOptions
from tilesafe.semantics.hw import mma_rules as mr

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("block, regs", [(128, 255), (256, 255), (384, 168), (512, 128),
                                         (1024, 64), (96, 255), (416, 152)])
def test_launch_registers_is_the_file_shared_in_units_of_eight(block, regs):
    assert mr.launch_registers(block) == regs
    warps = -(-block // 32)
    assert warps * 32 * regs <= mr.REGISTER_FILE and (regs % 8 == 0 or regs == 255)


def codes(path: str) -> dict[str, list[str]]:
    k = checked_program(ROOT / path).kernels[0]
    out: dict[str, list[str]] = {}
    for o in mma.check(k, CheckOptions()):
        out.setdefault(o.code or "proved", []).append(o.message)
    return out


def test_the_gemm_budgets_fit_exactly_as_counted():
    c = codes("corpus/wgmma/gemm.tsk")
    assert "TS536" not in c and "TS537" not in c
    assert any("64512 of 65536" in m for m in c["proved"])


@pytest.mark.parametrize("path, code", [
    ("corpus/bad/ts536_producer_shrinks_one_thread.tsk", "TS536"),
    ("corpus/bad/ts537_consumers_ask_too_much.tsk", "TS537"),
])
def test_bad_budgets_are_refuted(path, code):
    c = codes(path)
    assert set(c) - {"proved"} == {code}


def test_a_role_that_is_not_whole_warpgroups_is_refuted(tmp_path: Path):
    src = (ROOT / "corpus/wgmma/gemm_ws.tsk").read_text().replace(
        "role producer = warps 0 .. 4 {", "role producer = warps 0 .. 2 {").replace(
        "role consumers = warps 4 .. 12 {", "role consumers = warps 2 .. 12 {")
    path = tmp_path / "k.tsk"
    path.write_text(src)
    k = checked_program(path).kernels[0]
    msgs = [o.message for o in mma.check(k, CheckOptions()) if o.code == "TS536"]
    assert msgs and all("not whole warpgroups" in m for m in msgs)
