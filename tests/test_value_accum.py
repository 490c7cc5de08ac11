"""Accumulation in shared memory (`hist[e] = hist[e] + body` across loop iterations): the
value proof sums the last plain write of the element and every step between it and the read
(semantics/value/valueflow.py, `Accum`). Cross-checked against the interpreter on generated
variants: a "proved" must never meet a launch that disagrees with the spec, and on this
family every variant the launches agree on is proved."""

from __future__ import annotations

import sys
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parent))
from value_checks import agrees as launches_agree  # noqa: E402
from value_checks import proved  # noqa: E402

TEMPLATE = """kernel h(src: in global f32[M, N], dst: out global f32[M, 4])
  where M % 32 == 0, N % 32 == 0, M > 0, N > 0, M <= 4096, N <= 4096
  grid (M / 32) block 32
  ensures dst[i, s] == sum(j in 32 * s .. {hi}: src[i, j])
{{
  shared hist: f32[4, 33]
  let row = block.x * 32 + lane
  for j in 0 .. {init} {{
    hist[j, lane] = 0.0
  }}
  for k in {first} .. N / 32 {{
    var s: f32 = 0.0
    for c in 0 .. 32 {{
      s += src[row, k * 32 + c]
    }}
    hist[{slot}, {owner}] = hist[{slot2}, {owner}] + {body}
{sync}  }}
  for j in 0 .. 4 {{
    dst[row, j] = hist[j, lane]
  }}
}}
"""
RIGHT = dict(hi="min(N, 32 * s + 32 + 1048576 * (s / 3))", init="4", first="0",
             slot="min(k, 3)", owner="lane", slot2="min(k, 3)", body="s", sync="    sync\n")


def agrees(src: str) -> bool:
    return launches_agree(src, ({"M": 32, "N": 160}, {"M": 64, "N": 64}))


def test_the_running_sum_kernel_is_proved_and_agrees():
    src = TEMPLATE.format(**RIGHT)
    assert proved(src) and agrees(src)


@settings(max_examples=20, deadline=None, suppress_health_check=list(HealthCheck))
@given(hi=st.sampled_from([RIGHT["hi"], "min(N, 32 * s + 32)", "min(N, 32 * s + 31 + "
                           "1048576 * (s / 3))"]),
       init=st.sampled_from(["4", "3"]), first=st.sampled_from(["0", "1"]),
       slot2=st.sampled_from(["min(k, 3)", "min(k, 2)"]),
       owner=st.sampled_from(["lane", "0"]),
       body=st.sampled_from(["s", "s * 2.0", "s + 0.0"]),
       sync=st.sampled_from(["    sync\n", ""]))
def test_proved_accumulations_agree_with_the_interpreter(hi, init, first, slot2, owner, body,
                                                         sync):
    src = TEMPLATE.format(hi=hi, init=init, first=first, slot="min(k, 3)", slot2=slot2,
                          owner=owner, body=body, sync=sync)
    # sound (proved => the launches agree) and, on this family, complete -- but for a body
    # ending in `+ 0.0`: IEEE `x + 0.0` is not `x` (it turns -0 into +0), so the prover no
    # longer strips it, and the chain of updates through it is left open (TS890, known gap)
    if body == "s + 0.0":
        assert not proved(src) or agrees(src), src
    else:
        assert proved(src) == agrees(src), src


def test_unordered_updates_are_not_proved():
    """Every lane updates the same element: the writes race, nothing is proved."""
    src = TEMPLATE.format(**{**RIGHT, "owner": "0"})
    assert not proved(src)


def test_a_missing_initial_write_is_not_proved():
    src = TEMPLATE.format(**{**RIGHT, "init": "3"})
    assert not proved(src)
