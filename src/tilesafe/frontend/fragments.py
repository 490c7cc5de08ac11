"""Where the elements of a wgmma accumulator live: which thread of the warpgroup and which of
its registers holds element (i, j) of a [64, N] fragment.

Why in the frontend: the layout is part of the language's meaning (`row(acc, r)` and
`col(acc, r)` name it), and writing it once as IR integer terms makes every stage agree --
ISL proves epilogue accesses in bounds and exactly once with it, the interpreter evaluates
it, code generation emits it. The layout is the PTX ISA's for `wgmma.mma_async.m64nNk16`
with an f32/s32 accumulator ("Matrix fragments for wgmma", accumulator D): warp w of the
warpgroup owns rows 16 w .. 16 w + 15; in each 8-column block, lane l holds columns
2 (l % 4) and 2 (l % 4) + 1 of rows l / 4 and l / 4 + 8; register r walks the pairs (r % 2
the column, (r / 2) % 2 the row half) and then the 8-column blocks (r / 4).
"""

from __future__ import annotations

from tilesafe.frontend import ir
from tilesafe.frontend.ir_build import add, floordiv, mod, mul
from tilesafe.frontend.span import Span

WARPGROUP = 128  # threads that execute one wgmma together (4 consecutive warps)
M = 64  # rows of every wgmma tile
N_CHOICES = tuple(range(8, 257, 8))  # the n of m64nNk16
K_OF = {ir.DType.F16: 16, ir.DType.BF16: 16, ir.DType.U8: 32, ir.DType.F32: 8}
ACC_OF = {ir.DType.F16: ir.DType.F32, ir.DType.BF16: ir.DType.F32, ir.DType.F32: ir.DType.F32,
          ir.DType.U8: ir.DType.I32}


def thread_in_warpgroup(span: Span) -> ir.Expr:
    return mod(ir.Builtin(span, ir.ScalarType.INT, ir.BuiltinKind.THREAD), WARPGROUP)


def acc_row(reg: ir.Expr, span: Span) -> ir.Expr:
    """Row of register `reg` of the executing thread: 16 w + l / 4 + 8 ((r / 2) % 2)."""
    t = thread_in_warpgroup(span)
    warp = floordiv(t, 32)
    lane = mod(t, 32)
    half = mod(floordiv(reg, 2), 2)
    return add(add(mul(warp, 16), floordiv(lane, 4)), mul(half, 8))


def acc_col(reg: ir.Expr, span: Span) -> ir.Expr:
    """Column of register `reg` of the executing thread: 8 (r / 4) + 2 (l % 4) + r % 2."""
    lane = mod(thread_in_warpgroup(span), 32)
    return add(add(mul(floordiv(reg, 4), 8), mul(mod(lane, 4), 2)), mod(reg, 2))


def owner(i: int, j: int) -> tuple[int, int]:
    """(thread in the warpgroup, register) holding element (i, j): the inverse of the
    layout, for the interpreter and the tests."""
    warp, row = divmod(i, 16)
    half, gid = divmod(row, 8)
    block, within = divmod(j, 8)
    tig, low = divmod(within, 2)
    return warp * 32 + gid * 4 + tig, block * 4 + half * 2 + low
