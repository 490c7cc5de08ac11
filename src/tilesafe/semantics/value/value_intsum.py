"""When a spec's f32 sum of integers is an exact integer sum: the bridge between an integer
accumulation in the kernel (a u8 x u8 -> s32 wgmma) and a spec written in the language's
only sum, the f32 one (`i32(sum(k in 0 .. K: f32(a[i, k]) * f32(b[j, k])))`).

Why it is sound: if every contribution is an integer whose f32 evaluation is exact (each
leaf, product and partial result at most 2^24 in magnitude) and the number of contributions
times the largest magnitude is at most 2^24, then every partial sum, in whatever order the
f32 additions happen, is an integer of magnitude at most 2^24, so exact in f32: the f32 sum
is the exact integer sum, and `i32(...)` of it is that integer. The spec then means the
integer sum of the same contributions computed with integer operations, which the
multiset comparison matches against the kernel's integer products. The magnitudes come
from the loads' dtypes (u8: 0 .. 255); the number of contributions is bounded with ISL over
the output elements and sizes `where` allows (u8_mma's `K <= 256`).
"""

from __future__ import annotations

import islpy as isl

from tilesafe.frontend import ir
from tilesafe.semantics.expr import affine
from tilesafe.semantics.expr.affine import AffineEnv
from tilesafe.semantics.value.value_space import NotProved, ValueSpace
from tilesafe.semantics.value.value_terms import Glob, Op, SpecSum, Term, show

EXACT = 1 << 24  # every integer of at most this magnitude is exact in f32
RANGE = {ir.DType.U8: (0, 255), ir.DType.I32: (-(1 << 31), (1 << 31) - 1)}
INT_OF = {"f32.add": "int.add", "f32.sub": "int.sub", "f32.mul": "int.mul"}


def integer_sum(space: ValueSpace, s: SpecSum, ctx: isl.Set) -> SpecSum:
    """The integer sum `s` equals on ctx (NotProved with the reason when it is not exact)."""
    body, lo, hi = _integer(space.k, s.body)
    largest = max(abs(lo), abs(hi))
    lp = s.inst.loops[-1]
    count = space.term(lp.hi, s.inst).sub(space.term(lp.lo, s.inst))
    limit = EXACT // max(1, largest)
    bad = ctx & space.domain(s.inst) & count.gt_set(
        affine.constant(AffineEnv(space.space), limit))
    if not bad.is_empty():
        raise NotProved(f"the spec's f32 sum of {show(s.body)} may not be exact: more than "
                        f"{limit} contributions of magnitude up to {largest} (the kernel "
                        "adds integers exactly)", space.point(bad))
    return SpecSum(False, s.inst, body)


def _integer(kernel: ir.Kernel, t: Term) -> tuple[Term, int, int]:
    """t (f32 operations over converted integer loads) as integer operations, with bounds
    on its value; NotProved when some step is not exact in f32."""
    if isinstance(t, Op) and t.name == "cvt.f32" and isinstance(t.args[0], Glob):
        dtype = kernel.tensor(t.args[0].tensor).dtype
        if dtype not in RANGE:
            raise NotProved(f"{show(t)} is not an integer load")
        out: tuple[Term, int, int] = (t.args[0], *RANGE[dtype])
    elif isinstance(t, Op) and t.name in INT_OF and len(t.args) == 2:
        (a, alo, ahi), (b, blo, bhi) = (_integer(kernel, x) for x in t.args)
        if t.name == "f32.mul":
            corners = [alo * blo, alo * bhi, ahi * blo, ahi * bhi]
            lo, hi = min(corners), max(corners)
        elif t.name == "f32.add":
            lo, hi = alo + blo, ahi + bhi
        else:
            lo, hi = alo - bhi, ahi - blo
        out = (Op(INT_OF[t.name], (a, b)), lo, hi)
    else:
        raise NotProved(f"the spec's sum term {show(t)} is not built from integer loads by "
                        "+, - and *: its f32 sum is not an integer sum")
    if max(abs(out[1]), abs(out[2])) > EXACT:
        raise NotProved(f"{show(t)} may exceed 2^24 in magnitude: not exact in f32")
    return out
