"""The tensor-core constructs in the language: parsing, resolution, diagnostics, fmt, and the
accumulator fragment layout (frontend/fragments.py) against its definition.
"""

from __future__ import annotations

import pytest

from tilesafe.frontend import fragments as fr
from tilesafe.frontend import ir, walk
from tilesafe.frontend.diagnostics import DiagnosticError
from tilesafe.frontend.fmt import format_source
from tilesafe.frontend.load import compile_source
from tilesafe.semantics.expr import evaluate

KERNEL = """kernel tile_mma(a: in global bf16[64, 64], b: in global bf16[128, 64],
                c: out global f32[64, 128])
  grid 1 block 128
{{
  shared sa: bf16[64, 64] layout swizzle128B(row_major) align 1024
  shared sb: bf16[128, 64] layout swizzle128B(row_major) align 1024
  {frag}
  wgmma_fence
  for kk in 0 .. 4 {{
    {mma}
  }}
  wgmma_commit
  wgmma_wait 0
  for r in 0 .. 64 {{
    c[row(acc, r), col(acc, r)] = acc[r]
  }}
}}
"""
FRAG = "fragment acc: f32[64, 128]"
MMA = "wgmma acc += sa[0 : 64, kk * 16 : 16] @ sb[0 : 128, kk * 16 : 16].T, scale_d kk > 0"


def resolve(frag: str = FRAG, mma: str = MMA) -> ir.Kernel:
    return compile_source(KERNEL.format(frag=frag, mma=mma), "t.tsk").kernels[0]


def code(frag: str = FRAG, mma: str = MMA) -> str:
    try:
        resolve(frag, mma)
    except DiagnosticError as err:
        return err.diagnostics[0].code
    return "ok"


def test_the_mma_resolves():
    k = resolve()
    (frag,) = k.fragments
    assert frag.shape == (64, 128) and frag.regs == 64 and frag.dtype is ir.DType.F32
    (mma,) = [s for s in walk.statements(k.body) if isinstance(s, ir.Wgmma)]
    assert mma.a.shape == (64, 16) and mma.b.shape == (16, 128) and mma.k == 16
    assert mma.b.transposed and mma.b.ranged == (1, 0) and mma.a.ranged == (0, 1)
    assert mma.accumulate and mma.scale_d is not None
    kinds = {type(s).__name__ for s in walk.statements(k.body)}
    assert {"WgmmaFence", "WgmmaCommit", "WgmmaWait"} <= kinds


@pytest.mark.parametrize("frag, mma, want", [
    (FRAG, MMA, "ok"),
    (FRAG, "wgmma acc = sa[0 : 64, kk * 16 : 16] @ sb[0 : 128, kk * 16 : 16].T", "ok"),
    ("fragment acc: f32[64, 100]", MMA, "TS035"),  # N not a multiple of 8
    ("fragment acc: f32[128, 128]", MMA, "TS035"),  # M is 64
    ("fragment acc: f16[64, 128]", MMA, "TS035"),  # the accumulator is f32 or i32
    ("fragment acc: i32[64, 128]", MMA, "TS034"),  # bf16 accumulates into f32
    (FRAG, "wgmma acc += sa[0 : 64, kk * 16 : 32] @ sb[0 : 128, kk * 16 : 32].T", "TS034"),
    (FRAG, "wgmma acc += sa[0 : 64, kk * 16 : 16] @ sb[0 : 128, kk * 16 : 16]", "TS034"),
    (FRAG, "wgmma acc += sa[0 : 64, kk * 16 : 16] @ sb[0, kk * 16 : 16].T", "TS034"),
    (FRAG, "wgmma acc -= sa[0 : 64, kk * 16 : 16] @ sb[0 : 128, kk * 16 : 16].T", "TS034"),
    (FRAG, "wgmma acc = sa[0 : 64, kk * 16 : 16] @ sb[0 : 128, kk * 16 : 16].T, scale_d kk > 0",
     "TS034"),
    (FRAG, "wgmma sa += sa[0 : 64, kk * 16 : 16] @ sb[0 : 128, kk * 16 : 16].T", "TS012"),
    (FRAG, "wgmma acc += a[0 : 64, kk * 16 : 16] @ sb[0 : 128, kk * 16 : 16].T", "TS012"),
    (FRAG, "wgmma acc += sa[0 : 64, kk * 16 : 16, 0] @ sb[0 : 128, kk * 16 : 16].T", "TS020"),
    (FRAG, "wgmma acc += sa[0 : 64, kk * kk : 16] @ sb[0 : 128, kk * 16 : 16].T", "TS023"),
    (FRAG, "wgmma acc += sa[0 : 64, kk * 16 : 16] @ sb[0 : 128, kk * 16 : 16].T, scale_d kk",
     "TS021"),
])
def test_mma_diagnostics(frag: str, mma: str, want: str):
    assert code(frag, mma) == want


@pytest.mark.parametrize("stmt, want", [
    ("wgmma_wait 8", "TS026"), ("setmaxnreg inc 240", "ok"), ("setmaxnreg dec 20", "TS026"),
    ("setmaxnreg inc 241", "TS026"), ("acc[0] = 1.0", "ok"), ("acc[0, 1] = 1.0", "TS020"),
    ("acc[thread * thread] = 1.0", "TS023"), ("c[0, 0] = row(sa, 0)", "TS027"),
])
def test_async_and_register_statements(stmt: str, want: str):
    assert code(FRAG, MMA + "\n    " + stmt) == want


def test_fmt_round_trips_the_tensor_core_constructs():
    src = KERNEL.format(frag=FRAG, mma=MMA).replace("wgmma_commit", "wgmma_commit\n  "
                                                    "setmaxnreg dec 40")
    ugly = src.replace(" : 64", ":64").replace(" @ ", "@")
    out = format_source(ugly, "t.tsk")
    assert out == format_source(out, "t.tsk")
    assert MMA in out and "setmaxnreg dec 40" in out and FRAG in out


def test_fragment_layout_is_a_bijection_with_its_inverse():
    """Every (thread, register) of a warpgroup holds a distinct element of the 64 x N tile,
    every element is held, and `owner` inverts the layout -- for every N."""
    for n in fr.N_CHOICES:
        regs = 64 * n // 128
        seen = set()
        for t in range(128):
            for r in range(regs):
                i, j = _row(t, r), _col(t, r)
                assert 0 <= i < 64 and 0 <= j < n
                assert fr.owner(i, j) == (t, r)
                seen.add((i, j))
        assert len(seen) == 64 * n


def test_row_and_col_are_the_layout_for_any_warpgroup_of_the_block():
    """`row(acc, r)` resolves to an integer term over the thread: thread t of the block is
    thread t % 128 of its warpgroup."""
    k = resolve()
    store = next(s for s in walk.statements(k.body)
                 if isinstance(s, ir.Store) and s.tensor == "c")
    row_e, col_e = store.indices
    reg = store.value.reg
    for t in (0, 5, 37, 127, 128, 300):
        for r in (0, 1, 2, 3, 4, 63):
            env = {"thread": t, "r": r}
            assert _eval(row_e, env, reg) == _row(t % 128, r)
            assert _eval(col_e, env, reg) == _col(t % 128, r)


def _row(t: int, r: int) -> int:
    """The PTX ISA's accumulator layout, written out independently of fragments.py."""
    return 16 * (t // 32) + (t % 32) // 4 + 8 * ((r // 2) % 2)


def _col(t: int, r: int) -> int:
    return 8 * (r // 4) + 2 * (t % 4) + r % 2


def _eval(e: ir.Expr, env: dict, reg: ir.Expr) -> int:
    def leaf(x: ir.Expr):
        if isinstance(x, ir.Builtin) and x.kind is ir.BuiltinKind.THREAD:
            return lambda _: env["thread"]
        if isinstance(x, ir.LoopVar) and x.uid == reg.uid:
            return lambda _: env["r"]
        raise evaluate.NoValue(x)

    return evaluate.compile_expr(e, leaf)(None)
