"""Named barriers (`bar_sync ID, COUNT` / `bar_arrive ID, COUNT`, PTX bar.sync / bar.arrive):
the language (parse, fmt, diagnostics), the interpreter, the event model's verdicts, and
code generation with the translation validator."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tilesafe.checkers import barrier, ownership
from tilesafe.checkers.obligation import Severity, Verdict
from tilesafe.checkers.registry import CheckOptions
from tilesafe.codegen.compile import compile_kernel
from tilesafe.codegen.validate import validate_ptx
from tilesafe.frontend import ir
from tilesafe.frontend.diagnostics import DiagnosticError
from tilesafe.frontend.fmt import format_source
from tilesafe.frontend.load import compile_source, load_program
from tilesafe.semantics.interpreter.interp import InterpError, random_inputs, run_kernel
from tilesafe.semantics.temporal import symmetry
from tilesafe.semantics.temporal.events import build_model

ROOT = Path(__file__).resolve().parent.parent
HANDOFF = ROOT / "corpus" / "good" / "named_handoff.tsk"
OPTS = CheckOptions()

AHEAD = """kernel ahead(x: in global f32[N], y: out global f32[N])
  where N % 128 == 0, N > 0, N <= 65536
  grid 1 block 256
{
  role producer = warps 0 .. 4 {
    for k in 0 .. N / 128 {
      bar_arrive 1, 256
    }
  }
  role consumer = warps 4 .. 8 {
    for k in 0 .. N / 128 {
      bar_sync 1, 256
      y[k * 128 + thread - 128] = x[k * 128 + thread - 128]
    }
  }
}
"""


def kernel_of(text: str) -> ir.Kernel:
    return compile_source(text, "named.tsk").kernels[0]


def errors(obs):
    return {o.code for o in obs if o.verdict is not Verdict.PROVED
            and o.severity is Severity.ERROR}


# ---- language -----------------------------------------------------------------------------


def test_parse_and_ir():
    k = load_program(HANDOFF).kernels[0]
    from tilesafe.frontend.walk import statements
    named = [s for s in statements(k.body) if isinstance(s, ir.NamedBar)]
    assert [(s.arrive, s.bar_id, s.count) for s in named] == [
        (False, 2, 256), (True, 1, 256), (False, 1, 256), (True, 2, 256)]


def test_fmt_round_trip():
    text = HANDOFF.read_text()
    assert format_source(text, str(HANDOFF)) == text
    squeezed = text.replace("bar_sync 2, 256", "bar_sync 2,256")
    assert format_source(squeezed, "x.tsk") == text


@pytest.mark.parametrize("stmt,code", [
    ("bar_sync 16, 256", "TS026"),     # 16 hardware barriers: ids 0 .. 15
    ("bar_sync -1, 256", "TS026"),
    ("bar_sync 1, 0", "TS026"),
    ("bar_sync thread, 256", "TS024"),  # the id is a constant
    ("bar_arrive 1, N", "TS024"),
    ("bar_sync 1", "TS001"),
])
def test_malformed_named_barriers_are_diagnosed(stmt: str, code: str):
    text = HANDOFF.read_text().replace("bar_sync 2, 256", stmt)
    with pytest.raises(DiagnosticError) as info:
        kernel_of(text)
    assert code in {d.code for d in info.value.diagnostics}, [
        d.headline() for d in info.value.diagnostics]


# ---- interpreter --------------------------------------------------------------------------


def test_interpreter_runs_the_handoff():
    k = load_program(HANDOFF).kernels[0]
    sizes = {"M": 2, "N": 384}
    inputs = random_inputs(k, sizes, 1)
    for seed in range(3):
        out = run_kernel(k, sizes, inputs, seed=seed, policy="pct")
        y = out.outputs["y"] if hasattr(out, "outputs") else out.tensors["y"]
        assert (y == 2 * inputs["x"]).all()


def _interp_code(k: ir.Kernel, sizes: dict) -> set[str]:
    inputs = random_inputs(k, sizes, 1)
    codes = set()
    for seed in range(6):
        for policy in ("pct", "random"):
            try:
                run_kernel(k, sizes, inputs, seed=seed, policy=policy)
            except InterpError as exc:
                codes.add(exc.code)
    return codes


def test_interpreter_deadlock_at_a_named_barrier():
    k = load_program(ROOT / "corpus" / "bad" / "ts421_named_barrier_counts_producer.tsk"
                     ).kernels[0]
    assert _interp_code(k, {"M": 64, "N": 64}) == {"TS421"}


def test_interpreter_count_not_whole_warps():
    k = load_program(ROOT / "corpus" / "bad" / "ts414_named_barrier_count_not_warps.tsk"
                     ).kernels[0]
    assert _interp_code(k, {"M": 64, "N": 64}) == {"TS414"}


def test_arrive_a_phase_ahead():
    """A bar_arrive in a loop with nothing holding it back arrives twice in one phase."""
    k = kernel_of(AHEAD)
    assert errors(barrier.check(k, OPTS)) == {"TS412"}
    assert "TS412" in _interp_code(k, {"N": 512})


# ---- the checkers -------------------------------------------------------------------------


def test_handoff_proved_for_every_trip_count():
    k = load_program(HANDOFF).kernels[0]
    obs = barrier.check(k, OPTS) + ownership.check(k, OPTS)
    assert all(o.verdict is Verdict.PROVED for o in obs), [
        (o.name, o.message) for o in obs if o.verdict is not Verdict.PROVED]
    assert obs[0].evidence["argument"]["covers"] == "every trip count allowed by 'where'"


def test_no_symmetry_reduction_with_named_barriers():
    k = load_program(ROOT / "corpus" / "good" / "named_epilogue.tsk").kernels[0]
    model = build_model(k, True)
    assert symmetry.groups(model.agents) == ()


@pytest.mark.parametrize("old,new,code", [
    ("      bar_arrive 1, 256\n", "", "TS421"),             # consumer waits forever
    ("bar_arrive 2, 256", "bar_arrive 2, 128", "TS413"),    # two counts on one id
    ("bar_arrive 1, 256", "bar_arrive 1, 250", "TS414"),    # not whole warps
    ("      bar_sync 1, 256\n", "", "TS302"),               # consumer reads unordered
])
def test_handoff_mutants_refuted(old: str, new: str, code: str):
    text = HANDOFF.read_text()
    assert old in text
    k = kernel_of(text.replace(old, new, 1))
    assert errors(barrier.check(k, OPTS) + ownership.check(k, OPTS)) == {code}


# ---- code generation ----------------------------------------------------------------------


def test_ptx_and_validator():
    k = load_program(HANDOFF).kernels[0]
    ptx = compile_kernel(k, str(HANDOFF)).ptx
    assert "bar.sync 2, 256;" in ptx and "bar.arrive 1, 256;" in ptx
    assert "bar.sync 1, 256;" in ptx and "bar.arrive 2, 256;" in ptx
    obs = validate_ptx(k, ptx)
    assert all(o.verdict is Verdict.PROVED for o in obs), [
        (o.code, o.name, o.message) for o in obs if o.verdict is not Verdict.PROVED]
    for old, new in (("bar.sync 1, 256;", "bar.sync 3, 256;"),
                     ("bar.arrive 1, 256;", "bar.arrive 1, 128;"),
                     ("bar.arrive 2, 256;", "bar.sync 2, 256;"),
                     ("bar.sync 2, 256;", "bar.sync 2;")):
        bad = validate_ptx(k, ptx.replace(old, new, 1))
        assert any(o.verdict is Verdict.REFUTED for o in bad), (old, new)


@pytest.mark.skipif(shutil.which("ptxas") is None, reason="ptxas not installed")
def test_ptx_assembles(tmp_path: Path):
    for name in ("named_handoff", "named_epilogue"):
        path = ROOT / "corpus" / "good" / f"{name}.tsk"
        ptx = compile_kernel(load_program(path).kernels[0], str(path)).ptx
        src = tmp_path / f"{name}.ptx"
        src.write_text(ptx)
        r = subprocess.run(["ptxas", "-arch=sm_90a", str(src), "-o",
                            str(tmp_path / f"{name}.cubin")], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
