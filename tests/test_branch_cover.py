"""Coverage through both branches of a data-dependent `if` (semantics/access/branch_cover.py).

`if x[r, c] > 0.0 { y[r, c] = x[r, c] } else { y[r, c] = 0.0 }` writes every y[r, c]
whatever x holds; each branch alone writes nothing surely (its guard has no Presburger
form), so coverage (TS212) used to be unknown (TS291) on a correct kernel. Proved now,
checked on the interpreter on random and special data; and never proved when the branches
write different elements, when one branch writes nothing, or when another data-dependent
guard encloses only one of them.
"""

from __future__ import annotations

import numpy as np
import pytest

from tilesafe.checkers import access
from tilesafe.checkers.obligation import Verdict
from tilesafe.checkers.registry import CheckOptions
from tilesafe.frontend.load import compile_source
from tilesafe.semantics.interpreter.interp import random_inputs, run_kernel
from tilesafe.semantics.value.spec_inputs import Profile, value_inputs

RELU = """kernel relu(x: in global f32[M, N], y: out global f32[M, N])
  where M > 0, N > 0, M <= 65536, N <= 65536
  grid ((M + 15) / 16, (N + 15) / 16) block 256
{{
  let r = block.x * 16 + thread / 16
  let c = block.y * 16 + thread % 16
  if r < M && c < N {{
    if x[r, c] > 0.0 {{
      y[r, c] = x[r, c]
    }} else {{
      {other}
    }}
  }}
}}
"""


def _coverage(src: str):
    k = compile_source(src, "t.tsk").kernels[0]
    [o] = [o for o in access.check(k, CheckOptions()) if o.name.endswith("written at least once")]
    return k, o


def test_both_branches_write_every_element():
    k, o = _coverage(RELU.format(other="y[r, c] = 0.0"))
    assert o.verdict is Verdict.PROVED, o.message
    assert "if/else" in o.evidence["ranges"]
    # on the interpreter, every output element is written whatever the data (the
    # poisoned initial contents never survive)
    sizes = {"M": 20, "N": 33}
    for arrays in (random_inputs(k, sizes, 0),
                   value_inputs(k, sizes, 1, False, Profile.SPECIAL)):
        before = np.array(arrays["y"], copy=True)
        with np.errstate(all="ignore"):
            y = run_kernel(k, sizes, arrays).tensors["y"]
        assert not np.any(y.view(np.uint32) == before.view(np.uint32))


@pytest.mark.parametrize("other", [
    "y[r, min(c + 1, N - 1)] = 0.0",  # the else branch writes another element
    "let z = 0.0",  # the else branch writes nothing
    "if x[r, c] < -1.0 {\n        y[r, c] = 0.0\n      }",  # another data guard inside
])
def test_never_proved_when_the_branches_do_not_cover(other: str):
    _, o = _coverage(RELU.format(other=other))
    assert o.verdict is not Verdict.PROVED, o.message
