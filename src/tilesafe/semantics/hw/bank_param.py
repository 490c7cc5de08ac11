"""Bank conflicts for every size: when one evaluated warp access stands for all of them.

Why: the banks checker (checkers/banks.py) counts wavefronts of concrete warp accesses at a
representative size assignment and a few blocks. When the address depends on the sizes or
the block, that is evidence, not a proof for every launch. It becomes one when the access is
*translation invariant*: the NVIDIA cost (semantics/hw/banks.py) depends only on which 4-byte
words the lanes touch, and shifting every lane's address by the same multiple of 4 bytes
moves every word to another bank by the same amount, a permutation of the banks, so the
number of wavefronts is unchanged. Hence if, for every lane l of a warp,

    addr(32w + l, ctx) - addr(32w, ctx)  does not depend on (w, ctx)      and
    addr(32w, ctx) mod 4                 does not depend on (w, ctx)

for every size assignment `where` allows, every block of the grid, every warp of the
statement's threads and every iteration of the enclosing loops (ctx), then every warp
access costs what the first one evaluated costs. Guards are ignored here (all 32 lanes):
lanes a guard shuts out can only remove words, never add a wavefront, so the evaluated
bound (which counts them) stays an upper bound.

The address is base + bytes * sum(stride_d * index_d): the layout must be affine on the
buffer's coordinates (checked on every element: row-major, padded, CuTe shape:stride);
swizzles and F2 layouts are not, and stay "at representative sizes". The indices are
quasi-affine terms; z3 decides the two conditions (unsat of their negation over two copies
of the context), with a time limit -- a timeout is "not shown", never a proof.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import z3

from tilesafe.frontend import ir
from tilesafe.semantics.interpreter.smem import Placement


def affine_strides(place: Placement) -> tuple[int, ...] | None:
    """Element strides per logical dim when the layout is affine on the whole buffer."""
    shape = place.buffer.shape
    slots = np.asarray(place.slots, dtype=np.int64).reshape(shape)
    origin = int(slots.flat[0])
    strides = []
    for d, n in enumerate(shape):
        if n == 1:
            strides.append(0)
            continue
        idx = [0] * len(shape)
        idx[d] = 1
        strides.append(int(slots[tuple(idx)]) - origin)
    grids = np.indices(shape, dtype=np.int64)
    expect = origin + sum(s * g for s, g in zip(strides, grids, strict=True))
    return tuple(strides) if np.array_equal(expect, slots) else None


def invariant(kernel: ir.Kernel, indices: tuple[ir.Expr, ...], loops: tuple[ir.For, ...],
              role: ir.Role | None, lets: Mapping[int, ir.Expr], place: Placement,
              timeout_ms: int, lanes: int = 32) -> tuple[bool, str]:
    """(True, how) when every warp access of the site costs what one does; else (False,
    why not). `lanes`: of the target's warp (64 for a CDNA3 wavefront; the argument is the
    same: its banks are words mod 32 as well, and a uniform shift keeps which lanes share a
    word or an address)."""
    from tilesafe.semantics.temporal.param_smt import Enc

    strides = affine_strides(place)
    if strides is None:
        return False, f"the layout of {place.buffer.name} is not affine (a swizzle?)"
    holder = type("M", (), {"lets": type("L", (), {"table": dict(lets)})()})()
    lo_t, hi_t = (role.threads.lo, role.threads.hi) if role is not None else (0, kernel.block)
    try:
        copies = []
        for suffix in ("", "_2"):
            shared: dict = {}
            enc = Enc(kernel, holder, suffix, shared)  # type: ignore[arg-type]
            w, lane = z3.Int("w" + suffix), z3.Int("lane")
            # the lane's thread runs the statement (a partial warp or wavefront -- a block
            # of 32 threads on a 64-lane target, a role not aligned to warps -- included:
            # asking for whole warps only made those queries vacuous); the warp's first
            # thread is a term, whether or not it runs
            cons = [*enc.where(), lane >= 0, lane < lanes, w >= 0, lanes * w + lane >= lo_t,
                    lanes * w + lane < hi_t]
            for axis, n in zip(("x", "y", "z"), kernel.grid, strict=False):
                b = z3.Int(f"block.{axis}{suffix}")
                shared[f"block.{axis}"] = b
                cons += [b >= 0, b < enc.term(n)]
            for lp in loops:
                v = z3.Int(f"loop{lp.var.uid}{suffix}")
                enc.loops[lp.var.uid] = v
                cons += [v >= enc.term(lp.lo), v < enc.term(lp.hi)]
                if lp.step != 1:
                    cons.append((v - enc.term(lp.lo)) % lp.step == 0)

            def addr(thread, enc=enc, shared=shared):
                shared["thread"] = thread
                return place.elem_bytes * sum(s * enc.term(i)
                                              for s, i in zip(strides, indices, strict=True))

            a0, al = addr(lanes * w), addr(lanes * w + lane)
            copies.append((cons, a0, al))
    except (ValueError, KeyError):
        return False, "an index has no quasi-affine form (it reads memory or a variable)"
    (c1, a1, l1), (c2, a2, l2) = copies
    s = z3.SolverFor("QF_NIA")
    s.set("timeout", timeout_ms)
    s.add(*c1, *c2, z3.Or(l1 - a1 != l2 - a2, a1 % 4 != a2 % 4))
    res = s.check()
    if res == z3.unsat:
        return True, ("every warp access costs the same: lane offsets and word alignment "
                      "do not depend on the sizes, the block, the warp or the iteration "
                      "(z3; semantics/hw/bank_param.py)")
    if res == z3.sat:
        return False, ("the lane offsets or the word alignment depend on the sizes, the "
                       "block, the warp or the iteration")
    return False, "z3 gave up on the translation-invariance query"
