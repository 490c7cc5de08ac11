"""What a `wgmma` and a fragment store write, as value terms: the executor's half of the value
proof through tensor cores (semantics/value/value_frag.py resolves the reads).

Why registers, not a tile: a fragment is per-thread registers (docs/semantics.md, "Tensor
cores"); register r of thread t holds element (row(acc, r), col(acc, r)) of its warpgroup's
[64, N] tile (frontend/fragments.py). Writing every access as an access of register
(thread, r) makes all of them program-ordered within one thread, so the value proof's
happens-before (program order) and last-writer machinery apply unchanged: a read `acc[r]`
sees the last write that *sets* the register (a store `acc[r] = v`, or a wgmma with
scale-d false, which sets it to 0) plus the products of every wgmma between that write and
the read -- an accumulation like a shared `buf[e] = buf[e] + body`, compared as an
order-free multiset, which is exactly what the MMA's unspecified accumulation order allows.

One wgmma instance of thread t is therefore, for each register r of t (m = row, n = col):

* when scale-d may be false, a *plain* write of 0 to (t, r), guarded by `!scale_d`, placed
  just before the products in the thread's program order;
* K *steps* (k = 0 .. K-1, the instruction's K): (t, r) += A[m, k] * B[k, n], the operands
  read from the shared tiles at the instance's origins (`Shr` reads with the waits in
  effect, resolved like any shared read: a TMA ring, thread stores).

The products are f32 products of the 16-bit inputs (exactly what semantics/hw/mma.py
computes) or exact integer products of u8 inputs (an s32 accumulator, wrapping; the read
is wrapped into i32). tf32 MMAs are not handled (the inputs lose their low significand
bits, which no spec operation denotes): the executor raises Unsupported.

Relied on, proved elsewhere: the 128 threads of a warpgroup agree on the tiles and scale-d
(TS531) and run the MMA whole (TS532), so the per-thread reading of origins and scale-d is
the warpgroup's; the MMA has completed before a register is read or rewritten and its
operand stages are not overwritten before it performs (the temporal checkers' model of
wgmma's async groups).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from tilesafe.frontend import fragments as fr
from tilesafe.frontend import ir
from tilesafe.frontend.ir_build import add
from tilesafe.frontend.ir_build import const as _int
from tilesafe.semantics.value.value_terms import Inst, Lit, LoopInfo, Op, Shr, Term

Waits = tuple[tuple[str, ir.Expr | None, Inst], ...]


@dataclass(frozen=True)
class FragWrite:
    """A write of register `indices` = (thread, register) of fragment `target` by `inst`:
    `step` False sets it to `value`; `step` True adds `value` to it (one product of a
    wgmma)."""

    target: str
    indices: tuple[ir.Expr, ...]
    value: Term
    inst: Inst
    span: object
    step: bool


def thread(span) -> ir.Expr:
    return ir.Builtin(span, ir.ScalarType.INT, ir.BuiltinKind.THREAD)


def tile_element(tile: ir.MmaTile, i: ir.Expr, j: ir.Expr) -> tuple[ir.Expr, ...]:
    """The buffer indices of logical element (i, j) of an operand tile (after `.T`): the
    origin, plus i along the tile's row dim and j along its column dim."""
    rdim, cdim = tile.ranged
    out = []
    for d, ix in enumerate(tile.index):
        e = ix.start
        if d == rdim:
            e = add(e, i)
        elif d == cdim:
            e = add(e, j)
        out.append(e)
    return tuple(out)


def mma_writes(kernel: ir.Kernel, s: ir.Wgmma, inst: Inst, waits: Waits,
               fresh: Callable[[str, object], ir.LoopVar]) -> list[FragWrite]:
    """The register writes of one wgmma statement at `inst` (the issuing thread's
    instance): the zeroing when scale-d may be false, then the products."""
    frag = kernel.fragment(s.acc)
    span = s.span
    reg, kv = fresh("r", span), fresh("k", span)
    rloop = LoopInfo(reg.uid, _int(0, span), _int(frag.regs, span), 1)
    kloop = LoopInfo(kv.uid, _int(0, span), _int(s.k, span), 1)
    m, n = fr.acc_row(reg, span), fr.acc_col(reg, span)
    at = (thread(span), reg)
    writes = []
    zero_guard: tuple[ir.Expr, ...] | None = None
    if not s.accumulate:
        zero_guard = ()
    elif s.scale_d is not None:
        zero_guard = (ir.UnOp(span, ir.ScalarType.BOOL, "!", s.scale_d),)
    if zero_guard is not None:
        zinst = replace(inst, loops=inst.loops + (rloop,), guards=inst.guards + zero_guard,
                        sched=inst.sched + (_int(0, span),))
        # the accumulator type's zero (+0.0, or integer 0 for s32: the same bits)
        writes.append(FragWrite(s.acc, at, Lit(0, 0.0), zinst, span, False))
    sinst = replace(inst, loops=inst.loops + (rloop, kloop), sched=inst.sched + (_int(1, span),))
    a = Shr(s.a.buffer, tile_element(s.a, m, kv), sinst, waits)
    b = Shr(s.b.buffer, tile_element(s.b, kv, n), sinst, waits)
    mul = "int.mul" if frag.dtype is ir.DType.I32 else "f32.mul"
    writes.append(FragWrite(s.acc, at, Op(mul, (a, b)), sinst, span, True))
    return writes


def store_write(s: ir.FragStore, value: Term, inst: Inst) -> FragWrite:
    """`acc[r] = v` by the executing thread: sets register (thread, r)."""
    return FragWrite(s.fragment, (thread(s.span), s.reg), value, inst, s.span, False)
