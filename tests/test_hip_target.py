"""Targets (issue 25): what `--target gfx942` changes in a kernel's meaning -- 64-lane
`lane`/`warp_id`/roles, the LDS and block limits, the refusal of what AMD lacks -- checked
on the resolved IR, on the interpreter, through the CLI, and on the corpus's gfx942 bad
kernels, which must be proved for sm_90a (the bug is the 64-lane wavefront's)."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from tilesafe import api
from tilesafe.cli import main
from tilesafe.codegen.hip import print_hip
from tilesafe.codegen.lower import lower
from tilesafe.frontend import ir
from tilesafe.frontend.diagnostics import DiagnosticError
from tilesafe.frontend.load import compile_source
from tilesafe.frontend.target import GFX942, SM90A, UnknownTarget, lookup
from tilesafe.semantics.interpreter.interp import run_kernel

ROOT = Path(__file__).resolve().parent.parent
GFX_BAD = [p for p in sorted((ROOT / "corpus" / "bad").glob("*.tsk"))
           if re.search(r"^//\s*target:\s*gfx942", p.read_text(), re.M)]

LANES = """
kernel lanes(out: out global i32[N, 3])
  where N % 256 == 0, N > 0, N <= 4096
  grid (N / 256) block 256
{
  let t = block.x * 256 + thread
  out[t, 0] = lane
  out[t, 1] = warp_id
  role w1 = warp 1 {
    out[t, 2] = 1
  }
  role rest = threads 0 .. 256 {
    if thread < 32 || thread >= 64 {
      out[t, 2] = 0
    }
  }
}
"""


def test_lookup():
    assert lookup(None) is SM90A and lookup("gfx942") is GFX942 and lookup(GFX942) is GFX942
    with pytest.raises(UnknownTarget, match="known: sm_90a, gfx942"):
        lookup("gfx90a")


def test_lane_warp_id_and_roles_mean_the_targets_warp():
    nv = compile_source(LANES).kernels[0]
    amd = compile_source(LANES, target="gfx942").kernels[0]
    assert nv.target is SM90A and amd.target is GFX942
    roles = [s for s in amd.body if isinstance(s, ir.Role)]
    assert (roles[0].threads.lo, roles[0].threads.hi) == (64, 128)
    # lane / warp_id are thread % 64 / thread / 64 in the IR (no 32-lane builtin left)
    text = repr(amd.body)
    assert "BuiltinKind.LANE" not in text and "BuiltinKind.WARP_ID" not in text
    nv_roles = [s for s in nv.body if isinstance(s, ir.Role)]
    assert (nv_roles[0].threads.lo, nv_roles[0].threads.hi) == (32, 64)


def test_the_interpreter_runs_the_targets_lanes():
    """Not the same kernel on the two targets: the interpreter runs each meaning (and on
    gfx942 the warp-1 role is threads 64..127, overlapping the `rest` guard's threads)."""
    amd = compile_source(LANES, target="gfx942").kernels[0]
    t = np.arange(256)
    res = run_kernel(amd, {"N": 256}, {"out": np.zeros((256, 3), np.int32)})
    out = res.tensors["out"]
    assert np.array_equal(out[:, 0], t % 64) and np.array_equal(out[:, 1], t // 64)
    nv = compile_source(LANES).kernels[0]
    res = run_kernel(nv, {"N": 256}, {"out": np.zeros((256, 3), np.int32)})
    assert np.array_equal(res.tensors["out"][:, 0], t % 32)
    assert np.array_equal(res.tensors["out"][:, 2], ((t >= 32) & (t < 64)).astype(np.int32))


def test_limits_of_the_target():
    big = """
kernel k(x: in global f32[N], y: out global f32[N])
  where N % 256 == 0, N > 0, N <= 4096
  grid (N / 256) block 256
{
  shared s: f32[20000]
  s[thread] = x[block.x * 256 + thread]
  sync
  y[block.x * 256 + thread] = s[thread]
}
"""
    compile_source(big)  # 80000 bytes fit Hopper's 227 KiB
    with pytest.raises(DiagnosticError, match="at most 65536 on gfx942"):
        compile_source(big, target="gfx942")


def test_refused_constructs_are_named():
    src = (ROOT / "corpus" / "good" / "tma_copy_single.tsk").read_text()
    with pytest.raises(DiagnosticError) as err:
        compile_source(src, target="gfx942")
    codes = {d.code for d in err.value.diagnostics}
    text = " ".join(d.message for d in err.value.diagnostics)
    assert codes == {"TS036"}
    for what in ("tensormap", "mbarrier", "tma_load", "no Tensor Memory Accelerator"):
        assert what in text


def test_the_printer_refuses_lir_amd_cannot_run():
    """The frontend refuses first; the printer refuses again if handed such LIR."""
    k = api.checked_program(ROOT / "corpus" / "good" / "tma_copy_single.tsk").kernels[0]
    with pytest.raises(DiagnosticError, match="TS036|not available on gfx942"):
        print_hip(lower(k))


@pytest.mark.parametrize("path", GFX_BAD, ids=[p.name for p in GFX_BAD])
def test_gfx942_bad_kernels_are_fine_on_sm90a(path: Path):
    """Each is a bug of the 64-lane target only: on sm_90a it lints and verifies clean."""
    assert api.lint(path) == []
    failing = [o for o in api.verify(path) if o.failed]
    assert failing == [], [f"{o.code} {o.name}" for o in failing]


def test_corpus_has_wave64_bad_kernels():
    codes = {p.name[:5] for p in GFX_BAD}
    assert {"ts036", "ts202", "ts302"} <= codes


def test_cli_target(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    good = str(ROOT / "corpus" / "good" / "elementwise.tsk")
    out = tmp_path / "k.hip"
    assert main(["compile", "--target", "gfx942", good, "-o", str(out)]) == 0
    assert "TS_KERNEL(256) void elementwise(" in out.read_text()
    bad = str(ROOT / "corpus" / "bad" / "ts202_lane_indexes_warp_row.tsk")
    assert main(["verify", bad]) == 0
    assert main(["verify", "--target", "gfx942", bad]) == 1
    assert "TS202" in capsys.readouterr().out
    assert main(["compile", "--target", "gfx942", bad]) == 1  # the gate refuses
    tma = str(ROOT / "corpus" / "good" / "tma_copy_single.tsk")
    assert main(["lint", "--target", "gfx942", tma]) == 2
    assert "TS036" in capsys.readouterr().out
    assert main(["run", "--target", "gfx942", good, "--size", "N=256"]) == 0
