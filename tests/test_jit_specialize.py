"""`specialize` clauses and the variant pass (docs/jit.md): syntax, what the pass folds and
removes (each decision an ISL question over every launch and instance), the portfolio's
choice at call time for each key, each variant proved on its own, and the variants
cross-checked against the general kernel on the interpreter.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tilesafe
from tilesafe import api
from tilesafe.frontend import ir, walk
from tilesafe.frontend.fmt import format_source
from tilesafe.frontend.specialize import specialize, variants
from tilesafe.semantics.interpreter import interp

ROOT = Path(__file__).resolve().parent.parent
SCALE_BIAS = ROOT / "examples" / "kernels" / "scale_bias.tsk"


def _load(text: str, name: str = "<spec>") -> ir.Kernel:
    return api.select_kernel(api.checked_program(name, text), None)


def _ifs(kernel: ir.Kernel) -> list[ir.If]:
    return [s for s in walk.statements(kernel.body) if isinstance(s, ir.If)]


@pytest.fixture(scope="module")
def sb() -> ir.Kernel:
    return api.select_kernel(api.checked_program(SCALE_BIAS), None)


@pytest.fixture(scope="module")
def jitted(tmp_path_factory):
    return tilesafe.jit(SCALE_BIAS, device="interp", cache=tmp_path_factory.mktemp("c"))


# ---- syntax ------------------------------------------------------------------------------


def test_clauses_resolve_in_order(sb):
    facts = [[api_text(f) for f in clause] for clause in sb.specializations]
    assert facts == [["M % 64 == 0", "N % 64 == 0"], ["N <= 64"]]


def api_text(e: ir.Expr) -> str:
    from tilesafe.frontend.ir_text import expr_text

    return expr_text(e, brief=True)


def test_fmt_prints_the_clause_and_is_a_fixed_point():
    text = SCALE_BIAS.read_text().replace("  specialize N <= 64", "   specialize   N<=64")
    out = format_source(text)
    assert "\n  specialize N <= 64\n" in out and "\n  specialize M % 64 == 0, N % 64 == 0\n" in out
    assert format_source(out) == out


def test_bad_facts_are_diagnostics():
    for path, code in (("ts010_specialize_unknown_size.tsk", "TS010"),
                       ("ts025_specialize_product.tsk", "TS025")):
        diags = api.lint(ROOT / "corpus" / "bad" / path)
        assert [d.code for d in diags] == [code]


# ---- the pass ----------------------------------------------------------------------------


def test_aligned_variant_removes_the_tail_guard(sb):
    v = variants(sb)[0]
    assert v.guards_removed == 2 and not _ifs(v.kernel) and not v.empty
    assert v.kernel.where == sb.where + sb.specializations[0]
    assert v.kernel.specializations == () and v.kernel.params == sb.params


def test_narrow_variant_folds_the_chunk_loop(sb):
    v = variants(sb)[1]
    loop = v.kernel.body[0]
    assert isinstance(loop, ir.For) and loop.hi == ir.IntConst(loop.hi.span, ir.ScalarType.INT, 1)
    assert v.folded == 1 and v.guards_removed == 0 and len(_ifs(v.kernel)) == 1


BRANCHY = """
kernel branchy(x: in global f32[N], y: out global f32[N])
  where N > 0, N <= 4096
  specialize N == 128
  specialize N <= 64
  specialize N > 8192
  grid ((N + 63) / 64) block 64
{
  let i = block.x * 64 + thread
  if N > 64 {
    if i < N {
      y[i] = x[i] * 2.0
    }
  } else {
    if i < N {
      y[i] = x[i] + 1.0
    }
  }
}
"""


def test_constants_dead_branches_and_empty_variants():
    k = _load(BRANCHY)
    exact, small, never = variants(k)
    # N == 128: the grid is 2 blocks, `N > 64` always holds (its else is dropped), and
    # every thread of the 2 x 64 is in range
    assert [g.value for g in exact.kernel.grid] == [2]
    assert exact.guards_removed == 2 and not _ifs(exact.kernel)
    store = exact.kernel.body[-1]
    assert isinstance(store, ir.Store) and isinstance(store.value, ir.BinOp)
    assert store.value.op == "*"
    # N <= 64: one block; `N > 64` never holds, the else branch is what remains
    assert small.branches_removed == 1 and [g.value for g in small.kernel.grid] == [1]
    (guard,) = _ifs(small.kernel)
    assert api_text(guard.cond) == "i < N"
    # N > 8192 contradicts `where`: never selected, nothing folded
    assert never.empty and not never.holds({"N": 9000})


def test_a_guard_reading_memory_is_left_alone():
    text = """
kernel relu(x: in global f32[N], y: out global f32[N])
  where N > 0, N <= 4096
  specialize N % 64 == 0
  grid ((N + 63) / 64) block 64
{
  let i = block.x * 64 + thread
  if i < N && x[i] > 0.0 {
    y[i] = x[i]
  }
  if i < N && !(x[i] > 0.0) {
    y[i] = 0.0
  }
}
"""
    (v,) = variants(_load(text))
    conds = [api_text(s.cond) for s in _ifs(v.kernel)]
    assert v.guards_removed == 2 and len(conds) == 2 and all("i < N" not in c for c in conds)


def test_a_wrong_rewrite_is_refuted_by_the_variant_proof(sb):
    """The pass is trusted only through the variant's own proof: drop the tail guard
    where it does NOT always hold (under `N <= 64` alone) and verification refutes it."""
    v = specialize(sb, sb.specializations[1])
    loop = v.kernel.body[0]
    inner = loop.body[0]
    guard = next(s for s in inner.body if isinstance(s, ir.If))
    body = tuple(s for s in inner.body if s is not guard) + guard.then
    broken = dataclasses.replace(v.kernel, body=(dataclasses.replace(
        loop, body=(dataclasses.replace(inner, body=body),)),))
    obligations = api.verify_kernel(broken, only=["access"])
    assert any(o.code == "TS201" and o.verdict.value == "refuted" for o in obligations)
    assert all(not o.failed for o in api.verify_kernel(v.kernel, only=["access"]))


# ---- the portfolio -----------------------------------------------------------------------


@pytest.mark.parametrize(("m", "n", "chosen"), [
    (128, 128, 0),  # both multiples of 64: the guard-free variant
    (64, 64, 0),  # both clauses hold: the first one wins
    (100, 50, 1),  # N <= 64: the folded loop
    (130, 100, None),  # neither: the general kernel
    (64, 100, None),
])
def test_the_first_variant_whose_facts_hold_runs(jitted, m, n, chosen):
    rng = np.random.default_rng(m * 1000 + n)
    x = rng.integers(-8, 9, (m, n)).astype(np.float32) / 4
    scale = rng.integers(-8, 9, n).astype(np.float32) / 4
    bias = rng.integers(-8, 9, n).astype(np.float32) / 4
    y = jitted(x, scale, bias)
    got = None if jitted.last_variant is None else jitted.last_variant.index
    assert got == chosen
    assert np.array_equal(y, (x * scale).astype(np.float32) + bias)


def test_each_variant_is_proved_and_cached_on_its_own(jitted):
    for v in jitted.variants:
        b = jitted._build(v)
        assert b is not None and b.proof.verified and b.proof.obligations > 0
        assert b.kernel.where[-len(v.facts):] == v.facts
        assert b.compiled.ptx != jitted.ptx
    assert set(jitted.cache) == {"general", "specialize M % 64 == 0, N % 64 == 0",
                                 "specialize N <= 64"}


@settings(max_examples=12, deadline=None)
@given(m=st.integers(1, 3).map(lambda k: 64 * k), n=st.integers(1, 3).map(lambda k: 64 * k),
       narrow=st.integers(1, 64), seed=st.integers(0, 2**16))
def test_variants_compute_what_the_general_kernel_computes(sb, m, n, narrow, seed):
    """Cross-check on the interpreter: every variant, at sizes its facts allow, writes
    exactly what the general kernel writes."""
    vs = variants(sb)
    for v, sizes in ((vs[0], {"M": m, "N": n}), (vs[1], {"M": m + narrow, "N": narrow})):
        assert v.holds(sizes)
        inputs = interp.random_inputs(sb, sizes, np.random.default_rng(seed))
        want = interp.run_kernel(sb, sizes, inputs).tensors["y"]
        got = interp.run_kernel(v.kernel, sizes, inputs).tensors["y"]
        assert np.array_equal(want, got)
