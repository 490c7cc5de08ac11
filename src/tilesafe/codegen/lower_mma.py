"""Lowering the tensor-core constructs: fragments as fixed registers, loops over fragment
registers unrolled, `wgmma` with matrix descriptors computed from the proved layout, and the
async-group statements.

Why here: a register is named in the instruction, so `acc[r]` needs a constant r -- a loop
whose body indexes a fragment by its variable is unrolled (each copy an lir.Unrolled, so
readers and the translation validator know which iteration it is). The descriptors are the
ones the mma checker proved (semantics/mma_rules.descriptor on the same access relations):
mode, LBO and SBO are constants; the start address is the swizzle of the shared address
of the tile's first element, computed at run time like any shared address (the swizzle is
an involution on address bits, docs/wgmma.md).
"""

from __future__ import annotations

from typing import Any

import islpy as isl

from tilesafe.codegen import lir
from tilesafe.codegen.lir import Imm, Reg, Ty
from tilesafe.codegen.lower_expr import CodegenError, IntVal, Scope, imm_val
from tilesafe.frontend import ir, walk
from tilesafe.frontend.span import Span
from tilesafe.semantics.access.access import collect
from tilesafe.semantics.hw import mma_rules as mr
from tilesafe.semantics.hw import wgmma_desc as wd

NOT_CONSTANT = "TS706"  # a fragment register index that is not a compile-time constant
NO_DESCRIPTOR = "TS707"  # a wgmma operand without a descriptor (only with --unverified)
MAX_UNROLL = 4096  # loop copies one unrolled loop may produce


class MmaLowering:
    """Mixin of codegen/lower.py's _Lowering (it shares the instruction list, registers,
    scopes and address arithmetic)."""

    # -- fragments --------------------------------------------------------------------------

    def frag_regs(self, name: str) -> tuple[Reg, ...]:
        cache = self.__dict__.setdefault("_frag_regs", {})
        if name not in cache:
            frag = self.k.fragment(name)
            ty = Ty.F32 if frag.dtype.is_float else Ty.S32
            cache[name] = tuple(self.reg(ty) for _ in range(frag.regs))
        return cache[name]

    def frag_reg(self, name: str, reg: ir.Expr, scope: Scope, span: Span) -> Reg:
        v = self.int_expr(reg, scope)
        if not isinstance(v.value, Imm):
            raise CodegenError(NOT_CONSTANT, f"register index of fragment '{name}' is not a "
                               "compile-time constant: a loop over it must have constant "
                               "bounds (it is unrolled)", span)
        regs = self.frag_regs(name)
        r = int(v.value.value)
        if not 0 <= r < len(regs):
            raise CodegenError(NOT_CONSTANT, f"register {r} of fragment '{name}' is outside "
                               f"0 .. {len(regs) - 1}", span)
        return regs[r]

    def frag_load(self, e: ir.FragLoad, scope: Scope) -> Any:
        r = self.frag_reg(e.fragment, e.reg, scope, e.span)
        return IntVal(r, _s32()) if r.ty is Ty.S32 else r

    def s_FragStore(self, s: ir.FragStore, scope: Scope) -> Scope:
        r = self.frag_reg(s.fragment, s.reg, scope, s.span)
        self._assign(r, self.k.fragment(s.fragment).dtype, self.value(s.value, scope))
        return scope

    # -- unrolling ----------------------------------------------------------------------------

    def needs_unroll(self, s: ir.For) -> bool:
        """Does a fragment register index in the body depend on the loop variable -- directly,
        or through the bounds of an inner loop that must unroll (`for h in 0 .. 2 { for r in
        h * 64 .. h * 64 + 64 { ... acc[r] } }`: r's copies exist only once h is a constant)?"""
        lets = {x.uid: x.value for x in walk.statements(s.body) if isinstance(x, ir.Let)}
        for x in walk.statements(s.body):
            if isinstance(x, ir.For) and (_mentions(x.lo, s.var.uid, lets)
                                          or _mentions(x.hi, s.var.uid, lets)) \
                    and self.needs_unroll(x):
                return True
            regs = [x.reg] if isinstance(x, ir.FragStore) else []
            for e in walk.own_exprs(x):
                regs += [y.reg for y in walk.subexprs(e) if isinstance(y, ir.FragLoad)]
            if any(_mentions(r, s.var.uid, lets) for r in regs):
                return True
        return False

    def unroll(self, s: ir.For, scope: Scope) -> Scope:
        lo, hi = self.int_expr(s.lo, scope), self.int_expr(s.hi, scope)
        if not (isinstance(lo.value, Imm) and isinstance(hi.value, Imm)):
            raise CodegenError(NOT_CONSTANT, f"loop '{s.var.name}' indexes fragment registers "
                               "but its bounds are not constants: it cannot be unrolled",
                               s.span)
        values = range(int(lo.value.value), int(hi.value.value), s.step)
        if len(values) > MAX_UNROLL:
            raise CodegenError(NOT_CONSTANT, f"loop '{s.var.name}' would unroll into "
                               f"{len(values)} copies (at most {MAX_UNROLL})", s.span)
        for index, v in enumerate(values):
            body = self.block_of(s.body, scope.bind(s.var.uid, imm_val(v)))
            self.emit(lir.Unrolled(f"{s.var.name} (uid {s.var.uid})", s.var.uid, index, v,
                                   body, s.span))
        return scope

    # -- the MMA ------------------------------------------------------------------------------

    def descriptors(self, s: ir.Wgmma) -> tuple[wd.Descriptor, wd.Descriptor]:
        cache = self.__dict__.setdefault("_descriptors", {})
        if not cache:
            for op in mr.operands(collect(self.k, isl.Context())):
                found = mr.descriptor(self.k, op)
                cache[(id(op.stmt), op.which)] = (found.found.descriptor if found.found
                                                  else None)
        out = []
        for which in ("A", "B"):
            d = cache.get((id(s), which))
            if d is None:
                raise CodegenError(NO_DESCRIPTOR, f"no matrix descriptor reads operand "
                                   f"{which} of this wgmma (TS530)", s.span)
            out.append(d)
        return out[0], out[1]

    def s_Wgmma(self, s: ir.Wgmma, scope: Scope) -> Scope:
        da, db = self.descriptors(s)
        frag = self.k.fragment(s.acc)
        desc_a = self.descriptor_value(s.a, da, scope, s.span)
        desc_b = self.descriptor_value(s.b, db, scope, s.span)
        if s.scale_d is not None:
            scale = self.cond(s.scale_d, scope)
        else:
            scale = self.reg(Ty.PRED)
            self.emit(lir.Op(scale, "int.eq" if s.accumulate else "int.ne",
                             (Imm(0, Ty.S32), Imm(0, Ty.S32))))
        dtype = self.k.buffer(s.a.buffer).dtype
        self.emit(lir.Wgmma(self.frag_regs(s.acc), desc_a, desc_b, scale, frag.shape[1], s.k,
                            dtype, frag.dtype, int(da.major is wd.Major.MN),
                            int(db.major is wd.Major.MN), s.span))
        return scope

    def descriptor_value(self, tile: ir.MmaTile, d: wd.Descriptor, scope: Scope,
                         span: Span) -> lir.Value:
        """The 64-bit descriptor: the swizzle of the first element's shared address, >> 4,
        in bits 0-13, with the constant LBO, SBO and mode fields above it."""
        addr = self.address(tile.buffer, ir.Space.SHARED, tuple(i.start for i in tile.index),
                            scope, span)
        if d.mode.bits:
            mask = ((1 << d.mode.bits) - 1) << 4
            t = self.reg(Ty.U32)
            self.emit(lir.Op(t, "bit.shr", (addr, Imm(3, Ty.S32))))
            self.emit(lir.Op(t, "bit.and", (t, Imm(mask, Ty.S32))))
            start = self.reg(Ty.U32)
            self.emit(lir.Op(start, "bit.xor", (addr, t)))
            addr = start
        field = self.reg(Ty.U32)
        self.emit(lir.Op(field, "bit.shr", (addr, Imm(4, Ty.S32))))
        self.emit(lir.Op(field, "bit.and", (field, Imm(0x3FFF, Ty.S32))))
        wide = self.reg(Ty.S64)
        self.emit(lir.Op(wide, "cvt.s64", (field,)))
        high = d.encode(0)
        high = high - (1 << 64) if high >= 1 << 63 else high
        desc = self.reg(Ty.S64)
        self.emit(lir.Op(desc, "bit.or", (wide, Imm(high, Ty.S64))))
        return desc

    def s_WgmmaFence(self, s: ir.WgmmaFence, scope: Scope) -> Scope:
        self.emit(lir.WgmmaFence(s.span))
        return scope

    def s_WgmmaCommit(self, s: ir.WgmmaCommit, scope: Scope) -> Scope:
        self.emit(lir.WgmmaCommit(s.span))
        return scope

    def s_WgmmaWait(self, s: ir.WgmmaWait, scope: Scope) -> Scope:
        self.emit(lir.WgmmaWait(s.pending, s.span))
        return scope

    def s_SetMaxNReg(self, s: ir.SetMaxNReg, scope: Scope) -> Scope:
        self.emit(lir.SetMaxNReg(s.inc, s.count, s.span))
        return scope


def _s32():
    from tilesafe.codegen.ranges import Interval

    return Interval(-(2**31), 2**31 - 1)


def _mentions(e: ir.Expr, uid: int, lets: dict[int, ir.Expr], depth: int = 0) -> bool:
    for x in walk.subexprs(e):
        if isinstance(x, ir.LoopVar) and x.uid == uid:
            return True
        if isinstance(x, ir.LocalRef) and x.uid in lets and depth < 32 and _mentions(
                lets[x.uid], uid, lets, depth + 1):
            return True
    return False
