"""Parameter roles (`in`, `out`, `inout`): syntax, formatting, inference for files without
them, what `tilesafe run` feeds each role, and the obligations verify derives from them
(docs/language.md section 2, docs/access.md)."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from tilesafe import api
from tilesafe.checkers import access as checker
from tilesafe.checkers.obligation import Severity, Verdict
from tilesafe.checkers.registry import CheckOptions
from tilesafe.frontend import ast, ir
from tilesafe.frontend.diagnostics import DiagnosticError
from tilesafe.frontend.fmt import format_source
from tilesafe.frontend.load import compile_source
from tilesafe.frontend.parser import parse
from tilesafe.semantics.interpreter.interp_io import random_inputs

ROOT = Path(__file__).resolve().parent.parent
CORPUS = sorted((ROOT / "corpus").glob("*/*.tsk"))
DOCS = [ROOT / "README.md", ROOT / "docs" / "language.md"]

SCALE = """kernel scale(x: {x}global f32[N], s: {s}global f32[1], y: {y}global f32[N])
  where N > 0, N <= 4096
  grid ((N + 63) / 64) block 64
{{
  let i = block.x * 64 + thread
  if i < N {{
    y[i] = x[i] * s[0]
  }}
}}
"""


def scale(x: str = "in ", s: str = "in ", y: str = "out ") -> str:
    return SCALE.format(x=x, s=s, y=y)


def obligations(text: str) -> dict[str, object]:
    kernel = compile_source(text, "r.tsk").kernels[0]
    return {o.name.split(": ", 1)[1]: o for o in checker.check(kernel, CheckOptions())}


# ---- syntax and formatting ------------------------------------------------------------------


def test_roles_parse_into_ast_and_ir():
    module = parse(scale(s="", y="inout "), "r.tsk")
    assert [p.role for p in module.kernels[0].params] == ["in", None, "inout"]
    params = compile_source(scale(), "r.tsk").kernels[0].params
    assert [(t.name, t.role, t.role_declared) for t in params] == [
        ("x", ir.ParamRole.IN, True), ("s", ir.ParamRole.IN, True),
        ("y", ir.ParamRole.OUT, True)]


def test_role_words_stay_usable_as_names():
    """`in`, `out` and `inout` are keywords only after a parameter's colon."""
    text = """kernel k(in: in global f32[N], out: out global f32[N])
  where N > 0, N <= 64
  grid 1 block 64
{
  let inout = thread
  for i in 0 .. 1 {
    if inout < N {
      out[inout] = in[inout]
    }
  }
}
"""
    params = compile_source(text, "r.tsk").kernels[0].params
    assert [(t.name, t.role.value) for t in params] == [("in", "in"), ("out", "out")]


def test_misspelt_role_is_a_syntax_error_naming_the_roles():
    with pytest.raises(DiagnosticError) as err:
        compile_source(scale(x="input "), "r.tsk")
    (d,) = err.value.diagnostics
    assert d.code == "TS001" and (d.span.line, d.span.col) == (1, 17)
    assert "a role (in, out, inout)" in d.message and "'global'" in d.message


def test_fmt_prints_roles_canonically_and_round_trips():
    ugly = ("kernel scale(x:in   global f32[N],s :global f32[1], y:  inout global f32[N]) "
            "where N > 0, N <= 4096 grid ((N+63)/64) block 64 {\n let i = block.x*64+thread\n"
            " if i < N { y[i] = x[i] * s[0] } }\n")
    out = format_source(ugly, "r.tsk")
    assert out.splitlines()[0] == ("kernel scale(x: in global f32[N], s: global f32[1], "
                                   "y: inout global f32[N])")
    assert format_source(out, "r.tsk") == out
    before = compile_source(ugly, "r.tsk").kernels[0].params
    after = compile_source(out, "r.tsk").kernels[0].params
    assert [(t.role, t.role_declared) for t in before] == [(t.role, t.role_declared)
                                                         for t in after]


# ---- inference for files without roles --------------------------------------------------------


def test_undeclared_roles_are_inferred_from_the_body():
    text = """kernel k(a: global f32[N], b: global f32[N], c: global f32[N], d: global f32[N])
  where N > 0, N <= 64
  grid 1 block 64
{
  if thread < N {
    b[thread] = a[thread]
    c[thread] = c[thread] + 1.0
  }
}
"""
    params = compile_source(text, "r.tsk").kernels[0].params
    assert [(t.name, t.role.value, t.role_declared) for t in params] == [
        ("a", "in", False), ("b", "out", False), ("c", "inout", False), ("d", "in", False)]


def test_tma_store_makes_an_undeclared_tensor_an_output():
    text = (ROOT / "corpus" / "good" / "smem_fence_tma_store.tsk").read_text()
    text = text.replace("src: in global", "src: global").replace("dst: out global",
                                                                 "dst: global")
    params = compile_source(text, "r.tsk").kernels[0].params
    assert [(t.role.value, t.role_declared) for t in params] == [("in", False),
                                                                ("out", False)]


def test_verify_warns_about_each_undeclared_role():
    obs = obligations(scale(x="", s=""))
    warned = sorted(n for n, o in obs.items() if o.code == checker.ROLE_UNDECLARED)
    assert warned == ["s declares its role", "x declares its role"]
    o = obs["x declares its role"]
    assert o.severity is Severity.WARNING and not o.failed
    assert "'x: in global ...'" in o.message
    assert not [o for o in obs.values() if o.failed]  # an old file still verifies


# ---- what verify proves from roles ------------------------------------------------------------


def test_output_without_any_store_is_unwritten():
    text = scale().replace("    y[i] = x[i] * s[0]\n", "    let v = x[i] * s[0]\n")
    obs = obligations(text)
    o = obs["y written at least once"]
    assert o.verdict is Verdict.REFUTED and o.code == checker.UNWRITTEN
    assert o.counterexample == {"sizes": {"N": 1}, "element": [0], "shape": [1]}
    assert "no statement writes it" in o.message
    assert o.span.line == 1  # the parameter: there is no store to point at
    assert obs["y written at most once"].verdict is Verdict.PROVED


def test_same_file_without_roles_still_passes():
    """What roles add: with y undeclared, deleting its store makes it an input."""
    text = scale(y="").replace("    y[i] = x[i] * s[0]\n", "    let v = x[i] * s[0]\n")
    obs = obligations(text)
    assert obs["input y never written"].verdict is Verdict.PROVED
    assert not [o for o in obs.values() if o.failed]


def test_store_into_input_is_refuted_with_the_smallest_instance():
    text = scale().replace("    y[i] = x[i] * s[0]\n",
                           "    y[i] = x[i] * s[0]\n    x[i] = 0.0\n")
    o = obligations(text)["input x never written"]
    assert o.verdict is Verdict.REFUTED and o.code == checker.INPUT_WRITTEN
    cex = o.counterexample
    assert (cex["sizes"], cex["block"], cex["thread"], cex["element"]) == (
        {"N": 1}, [0], 0, [0])


def test_store_into_input_under_a_dead_guard_is_proved():
    text = scale().replace("    y[i] = x[i] * s[0]\n",
                           "    y[i] = x[i] * s[0]\n    if N > 4096 { x[i] = 0.0 }\n")
    assert obligations(text)["input x never written"].verdict is Verdict.PROVED


def test_inout_tensor_must_be_fully_written():
    text = scale(y="inout ").replace("if i < N {", "if i < N - 1 {")
    o = obligations(text)["y written at least once"]
    assert o.verdict is Verdict.REFUTED and o.counterexample["element"] == [0]


# ---- what `tilesafe run` feeds each role -----------------------------------------------------


def test_random_inputs_poison_only_out_tensors():
    kernel = compile_source(scale(s="", y="inout "), "r.tsk").kernels[0]
    ins = random_inputs(kernel, {"N": 64}, 0)
    assert not np.isnan(ins["x"]).any() and not np.isnan(ins["s"]).any()
    assert not np.isnan(ins["y"]).any()  # inout: its contents are inputs too
    kernel = compile_source(scale(), "r.tsk").kernels[0]
    assert np.isnan(random_inputs(kernel, {"N": 64}, 0)["y"]).all()


# ---- the corpus and the docs say what they mean ------------------------------------------------


def _params(text: str) -> list[ast.Param]:
    """Parameters of every kernel, from the AST (also for files that do not resolve)."""
    try:
        return [p for k in parse(text, "x.tsk").kernels for p in k.params]
    except DiagnosticError:  # a syntax-error case: read the header
        header = re.search(r"kernel\s+\w+\((.*?)\)\s*\n", text, re.S)
        assert header, "no kernel header"
        return [ast.Param(None, m.group(1), "", (), m.group(2))  # type: ignore[arg-type]
                for m in re.finditer(r"(\w+):\s*(in|out|inout)?\s*global", header.group(1))]


@pytest.mark.parametrize("path", CORPUS, ids=[f"{p.parent.name}/{p.name}" for p in CORPUS])
def test_corpus_declares_every_role(path: Path):
    params = _params(path.read_text(encoding="utf-8"))
    assert params
    assert [p.name for p in params if p.role is None] == []


def _doc_kernels() -> list[str]:
    blocks = []
    for doc in DOCS:
        blocks += re.findall(r"```tsk\n(.*?)```", doc.read_text(encoding="utf-8"), re.S)
    return [b for b in blocks if b.lstrip().startswith(("kernel", "//"))]


@pytest.mark.parametrize("text", _doc_kernels())
def test_doc_examples_declare_roles_and_pass_the_access_checker(text: str, tsk):
    kernels = api.load(tsk(text)).kernels
    for k in kernels:
        assert all(t.role_declared for t in k.params), k.name
        failed = [f"{o.code} {o.message}" for o in checker.check(k, CheckOptions())
                  if o.verdict is not Verdict.PROVED]
        assert failed == []
