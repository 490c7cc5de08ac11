"""IEEE equality of pointwise value terms (semantics/value/value_fp.py): a right spec spelled
otherwise than the kernel computes is proved, a wrong one never is.

Checked on kernels `y[i] = K(x[i], w[i])` with spec `y[i] == S(x[i], w[i])`: identities that
hold bit for bit are proved (x * 2 and x + x, max's operands swapped, a TMA kernel's f16
values doubled either way); near-identities that fail on special values are not (x + 0.0
at -0, (x * 0.5) * 2.0 at subnormals, x / x at 0 and inf); and a hypothesis family of random
expression pairs: every pair the value checker proves must agree with the interpreter on
plain, special and corner inputs.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tilesafe.checkers import value
from tilesafe.checkers.obligation import Verdict
from tilesafe.checkers.registry import CheckOptions
from tilesafe.frontend.load import compile_source
from tilesafe.semantics.value import spec_run
from tilesafe.semantics.value.spec_inputs import Profile

KERNEL = """kernel k(x: in global {dt}[N], w: in global {dt}[N], y: out global {out}[N])
  where N > 0, N <= 1048576
  grid ((N + 255) / 256) block 256
  ensures y[i] == {spec}
{{
  let i = block.x * 256 + thread
  if i < N {{
    y[i] = {body}
  }}
}}
"""


def _verdict(body: str, spec: str, dt: str = "f32", out: str = "f32"):
    src = KERNEL.format(dt=dt, out=out, body=body.replace("X", "x[i]").replace("W", "w[i]"),
                        spec=spec.replace("X", "x[i]").replace("W", "w[i]"))
    k = compile_source(src, "t.tsk").kernels[0]
    (o,) = value.check(k, CheckOptions())
    return k, o


@pytest.mark.parametrize("body,spec,dt,out", [
    ("X * 2.0", "X + X", "f32", "f32"),
    ("max(X, 0.0)", "max(0.0, X)", "f32", "f32"),
    ("min(X, W)", "min(W, X)", "f16", "f32"),
    ("X * 2.0", "X + X", "f16", "f16"),
    ("max(X, W)", "-min(-X, -W)", "f32", "f32"),  # NaN and zeros too (PTX max/min)
    ("abs(-X)", "abs(X)", "bf16", "f32"),
    ("X * W + W * X", "(X * W) * 2.0", "f32", "f32"),
])
def test_ieee_identities_are_proved(body: str, spec: str, dt: str, out: str):
    _, o = _verdict(body, spec, dt, out)
    assert o.verdict is Verdict.PROVED, o.message


@pytest.mark.parametrize("body,spec", [
    ("X", "X + 0.0"),  # -0 + 0 = +0
    ("X", "(X * 0.5) * 2.0"),  # the smallest subnormal halves to 0
    ("1.0", "X / X"),  # NaN at 0 and inf
    ("X * W", "W * X + 0.0 * X"),  # NaN where X is infinite
    ("-(X - W)", "W - X"),  # X == W: -(+0) is -0, W - X is +0
])
def test_near_identities_are_not_proved(body: str, spec: str):
    k, o = _verdict(body, spec)
    assert o.verdict is not Verdict.PROVED, o.message
    if o.verdict is Verdict.REFUTED:
        assert o.code == "TS802"


def test_a_tma_kernels_values_through_a_fill_test():
    """The TMA load's in-bounds test (a case split below the multiply) is lifted first."""
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    text = (root / "corpus" / "good" / "ragged_tma.tsk").read_text(encoding="utf-8")
    text = text.replace("ensures dst[i, j] == src[i, j] * 2.0",
                        "ensures dst[i, j] == src[i, j] + src[i, j]", 1)
    k = compile_source(text, "t.tsk").kernels[0]
    assert all(o.verdict is Verdict.PROVED for o in value.check(k, CheckOptions()))


# ---- random pairs against the interpreter -------------------------------------------------

LEAVES = ["X", "W", "0.0", "1.0", "2.0", "0.5", "-1.0"]
OPS = ["+", "-", "*", "/", "max", "min", "neg", "abs"]


@st.composite
def expr(draw, depth: int = 3) -> str:
    if depth == 0 or draw(st.integers(0, 3)) == 0:
        return draw(st.sampled_from(LEAVES))
    op = draw(st.sampled_from(OPS))
    a = draw(expr(depth - 1))
    if op == "neg":
        return f"-({a})"
    if op == "abs":
        return f"abs({a})"
    b = draw(expr(depth - 1))
    return f"{op}({a}, {b})" if op in ("max", "min") else f"({a} {op} {b})"


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(body=expr(), spec=expr(), dt=st.sampled_from(["f32", "f16"]))
def test_a_proved_pair_agrees_with_the_interpreter(body: str, spec: str, dt: str):
    if "X" not in body + spec:
        body = f"({body} + X)"
    k, o = _verdict(body, spec, dt=dt)
    if o.verdict is not Verdict.PROVED:
        return
    for profile, seeds in ((Profile.PLAIN, (0,)), (Profile.SPECIAL, (0, 1)),
                           (Profile.EDGES, range(5))):
        for seed in seeds:
            (run,) = spec_run.check(k, [{"N": 33}], seed=seed, profile=profile)
            assert run.mismatch is None, (body, spec, dt, run.mismatch.describe())


# Rewrites of one expression tree at its root, valid (the same bits) and not: pairs the
# checker often proves, so that the cross-check meets many proofs, not only failures.
def _rewrite(t, which: int):
    op = t[0] if isinstance(t, tuple) else None
    a, b = (t[1], t[2]) if op in ("+", "-", "*", "/", "max", "min") else (None, None)
    rules = {
        0: op in ("+", "*", "max", "min") and (op, b, a),  # commute (valid)
        1: op == "-" and ("+", a, ("neg", b)),  # a - b = a + (-b) (valid)
        2: op == "-" and ("neg", ("-", b, a)),  # not valid: a == b gives -0 and +0
        3: ("+", t, "0.0"),  # not valid at -0
        4: ("*", t, "1.0"),  # valid
        5: ("neg", ("neg", t)),  # valid
        6: ("+", t, t) if True else None,  # is t * 2 below
        7: op == "*" and b == "2.0" and ("+", a, a),  # valid
    }
    new = rules.get(which)
    if which == 6:
        return ("*", t, "2.0"), ("+", t, t)  # valid both ways
    return (t, new) if new else (t, t)


def _text(t) -> str:
    if not isinstance(t, tuple):
        return t
    op = t[0]
    if op == "neg":
        return f"-({_text(t[1])})"
    if op == "abs":
        return f"abs({_text(t[1])})"
    if op in ("max", "min"):
        return f"{op}({_text(t[1])}, {_text(t[2])})"
    return f"({_text(t[1])} {op} {_text(t[2])})"


@st.composite
def tree(draw, depth: int = 3):
    if depth == 0 or draw(st.integers(0, 3)) == 0:
        return draw(st.sampled_from(LEAVES))
    op = draw(st.sampled_from(OPS))
    if op in ("neg", "abs"):
        return (op, draw(tree(depth - 1)))
    return (op, draw(tree(depth - 1)), draw(tree(depth - 1)))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(t=tree(), which=st.integers(0, 7), dt=st.sampled_from(["f32", "bf16"]))
def test_rewritten_expressions_against_the_interpreter(t, which: int, dt: str):
    t = ("+", t, "X")
    left, right = _rewrite(t, which)
    body, spec = _text(left), _text(right)
    k, o = _verdict(body, spec, dt=dt)
    if o.verdict is not Verdict.PROVED:
        return
    for profile, seeds in ((Profile.PLAIN, (0,)), (Profile.SPECIAL, (0, 1)),
                           (Profile.EDGES, range(5))):
        for seed in seeds:
            (run,) = spec_run.check(k, [{"N": 33}], seed=seed, profile=profile)
            assert run.mismatch is None, (body, spec, dt, run.mismatch.describe())


# ---- values chosen by a condition on data (value_exec.py: select) ----------------------------

BRANCH = """kernel k(x: in global f32[N], y: out global f32[N])
  where N > 0, N <= 1048576
  grid ((N + 255) / 256) block 256
  ensures y[i] == {spec}
{{
  let i = block.x * 256 + thread
  if i < N {{
{body}
  }}
}}
"""
STORES = """    if x[i] {cmp} 0.0 {{
      y[i] = x[i]
    }} else {{
      y[i] = 0.0
    }}"""
VAR = """    var v: f32 = 0.0
    if x[i] {cmp} 0 {{
      v = x[i]
    }}
    y[i] = v"""


@pytest.mark.parametrize("body", [STORES, VAR], ids=["stores", "var"])
def test_relu_written_with_an_if_is_proved_against_max(body: str):
    """x > 0 picks x, else 0.0: max(x, 0.0) exactly, NaN (-> 0.0) and -0 (-> +0) too."""
    k = compile_source(BRANCH.format(spec="max(x[i], 0.0)", body=body.format(cmp=">")),
                       "t.tsk").kernels[0]
    (o,) = value.check(k, CheckOptions())
    assert o.verdict is Verdict.PROVED, o.message


@pytest.mark.parametrize("body", [STORES, VAR], ids=["stores", "var"])
def test_relu_with_ge_is_refuted_at_minus_zero(body: str):
    """x >= 0 picks -0 itself: not max(x, 0.0), which is +0 there."""
    k = compile_source(BRANCH.format(spec="max(x[i], 0.0)", body=body.format(cmp=">=")),
                       "t.tsk").kernels[0]
    (o,) = value.check(k, CheckOptions())
    assert o.verdict is Verdict.REFUTED and o.code == "TS802", o.message
    assert o.counterexample["got"] == -0.0 and o.counterexample["want"] == 0.0
