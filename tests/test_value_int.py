"""Integer outputs in the value proof: integers read from memory become terms (loads and
integer operations, exact as the language's integers are; a store wraps into the output's
type, an i32 or u8 shared buffer wraps its elements). Cross-checked against the
interpreter on generated variants: a "proved" never meets a launch that disagrees."""

from __future__ import annotations

import sys
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parent))
from value_checks import agrees as launches_agree  # noqa: E402
from value_checks import proved  # noqa: E402

TEMPLATE = """kernel k(x: in global i32[N], y: out global {out}[N])
  where N % 128 == 0, N > 0, N <= 1048576
  grid (N / 128) block 128
  ensures y[i] == {spec}
{{
  shared t: {buf}[128]
  let i = block.x * 128 + thread
  t[thread] = {stage}
  sync
  let v = t[{read}]
  y[i] = {out_expr}
}}
"""
EXPRS = ["x[i]", "x[i] * 3", "x[i] + i", "x[i] * 3 + i", "x[i] - 7", "i - x[i]"]


def build(**kw) -> str:
    return TEMPLATE.format(**kw)


def agrees(src: str) -> bool:
    return launches_agree(src, ({"N": 128}, {"N": 384}))


def test_an_integer_pipeline_through_shared_memory_is_proved():
    src = build(out="i32", buf="i32", spec="x[i] * 3 + i", stage="x[i] * 3",
                read="thread", out_expr="v + i")
    assert proved(src) and agrees(src)


def test_a_u8_stage_wraps_and_is_not_taken_for_the_exact_value():
    """x[i] + 200 through a u8 buffer wraps at 256: the spec without the wrap is never
    proved, and the interpreter shows the difference."""
    src = build(out="i32", buf="u8", spec="x[i] + 200", stage="x[i] + 200", read="thread",
                out_expr="v")
    assert not proved(src)
    assert not agrees(src)


@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(spec=st.sampled_from(EXPRS), stage=st.sampled_from(EXPRS),
       read=st.sampled_from(["thread", "127 - thread"]),
       out_expr=st.sampled_from(["v", "v + 0", "v * 1"]),
       buf=st.sampled_from(["i32", "u8"]), out=st.sampled_from(["i32", "u8"]))
def test_proved_integer_kernels_agree_with_the_interpreter(spec, stage, read, out_expr, buf,
                                                           out):
    src = build(out=out, buf=buf, spec=spec, stage=stage, read=read, out_expr=out_expr)
    if proved(src):
        assert agrees(src), src
