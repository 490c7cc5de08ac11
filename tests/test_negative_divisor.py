"""Integer `/` and `%` mean floor division and floor modulo everywhere, negative divisors
included: the interpreter, z3 (whose own `/` and `%` are Euclidean), ISL (which only takes
positive constant divisors, and must refuse others rather than guess) and the PTX the code
generator emits (proved by the translation validator, and run on the interpreter)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import z3

from tilesafe import api
from tilesafe.frontend import ir
from tilesafe.frontend.diagnostics import DiagnosticError
from tilesafe.frontend.load import compile_source
from tilesafe.semantics.expr import affine, evaluate
from tilesafe.semantics.expr.z3_terms import floor_div, floor_mod
from tilesafe.semantics.interpreter.interp import run_kernel

PAIRS = [(a, b) for a in range(-20, 21) for b in range(-7, 8) if b != 0]


def floor_pair(a: int, b: int) -> tuple[int, int]:
    q = math.floor(a / b)
    return q, a - b * q


def test_the_interpreter_floors():
    for a, b in PAIRS:
        assert (evaluate.CONCRETE["int.div"](a, b), evaluate.CONCRETE["int.mod"](a, b)) \
            == floor_pair(a, b)


def test_z3_terms_floor_for_every_sign():
    for a, b in PAIRS:
        q = z3.simplify(floor_div(z3.IntVal(a), z3.IntVal(b))).as_long()
        r = z3.simplify(floor_mod(z3.IntVal(a), z3.IntVal(b))).as_long()
        assert (q, r) == floor_pair(a, b), (a, b)
    # and symbolically: for every a and b != 0, q and r are the floor quotient/remainder
    a, b = z3.Ints("a b")
    q, r = floor_div(a, b), floor_mod(a, b)
    floor_spec = z3.And(a == b * q + r, z3.Or(r == 0, (r > 0) == (b > 0)),
                        z3.If(r >= 0, r, -r) < z3.If(b >= 0, b, -b))
    s = z3.Solver()
    s.add(b != 0, z3.Not(floor_spec))
    assert s.check() == z3.unsat
    # z3's own operators are Euclidean: they differ for a negative divisor
    assert z3.simplify(z3.IntVal(-7) / z3.IntVal(-2)).as_long() == 4
    assert floor_pair(-7, -2) == (3, -1)


def test_isl_floors_for_positive_divisors_and_refuses_negative_ones():
    k = compile_source(SRC.format(div="i / 3"), "t.tsk").kernels[0]
    env = affine.AffineEnv(affine.make_space(__import__("islpy").Context(), (), ("i",)),
                           {LOOP_UID(k): 0})
    expr = _index_expr(k)
    pa = affine.term(expr, env)
    for i in range(-20, 21):
        point = pa.eval(_point(pa, i)).to_python()
        assert point == math.floor(i / 3)
    neg = ir.BinOp(expr.span, ir.ScalarType.INT, "/", expr.lhs,
                   ir.IntConst(expr.span, ir.ScalarType.INT, -3))
    with pytest.raises(affine.NotAffine, match="positive constant"):
        affine.term(neg, env)


def test_the_language_refuses_a_negative_constant_divisor():
    with pytest.raises(DiagnosticError) as err:
        compile_source(SRC.format(div="i / (0 - 3)"), "t.tsk")
    assert err.value.diagnostics[0].code == "TS026"


DIVK = """kernel divmod(a: in global i32[N], b: in global i32[N], q: out global i32[N],
              r: out global i32[N])
  where N > 0, N <= 1048576
  grid ((N + 255) / 256) block 256
  ensures q[i] == a[i] / b[i]
  ensures r[i] == a[i] % b[i]
{
  let i = block.x * 256 + thread
  if i < N {
    q[i] = a[i] / b[i]
    r[i] = a[i] % b[i]
  }
}
"""


def test_runtime_divisors_of_every_sign(tmp_path: Path):
    """Data divided by data: the interpreter floors, the spec says so and is proved, and
    the compiled PTX is proved by the translation validator to compute the same (the
    emitted code corrects the hardware's truncating div/rem when the signs differ)."""
    path = tmp_path / "divk.tsk"
    path.write_text(DIVK)
    k = api.load(path).kernels[0]
    n = len(PAIRS)
    arrays = {"a": np.array([p[0] for p in PAIRS], np.int32),
              "b": np.array([p[1] for p in PAIRS], np.int32),
              "q": np.zeros(n, np.int32), "r": np.zeros(n, np.int32)}
    res = run_kernel(k, {"N": n}, arrays)
    want = np.array([floor_pair(a, b) for a, b in PAIRS])
    assert (res.tensors["q"] == want[:, 0]).all() and (res.tensors["r"] == want[:, 1]).all()
    obs = api.verify(path, only=("value",))
    assert [o.verdict.value for o in obs] == ["proved", "proved"]
    compiled = api.compile_kernel(api.checked_program(path))
    assert not compiled.refused, [o.name for o in compiled.failing]
    assert compiled.validation and all(o.verdict.value == "proved" for o in compiled.validation)
    assert "rem.s32" in compiled.compiled.ptx  # the hardware's truncating remainder, corrected


SRC = """kernel k(x: out global f32[N])
  where N > 0, N <= 64
  grid 1 block 1
{{
  for i in 0 .. N {{
    x[{div}] = 1.0
  }}
}}
"""


def LOOP_UID(k: ir.Kernel) -> int:  # noqa: N802 - a lookup, named like the constant it is
    return k.body[0].var.uid


def _index_expr(k: ir.Kernel) -> ir.BinOp:
    return k.body[0].body[0].indices[0]


def _point(pa, i: int):
    import islpy as isl

    space = pa.get_domain_space()
    p = isl.Point.zero(space)
    return p.set_coordinate_val(isl.dim_type.set, 0, isl.Val.int_from_si(space.get_ctx(), i))
