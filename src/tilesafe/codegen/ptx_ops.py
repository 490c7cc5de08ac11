"""LIR operations -> PTX: integer arithmetic in the width of the result, floor division and
modulo, bit operations, `.rn` float arithmetic, comparisons (`!=` unordered on floats),
conversions and roundings, selects and address arithmetic.

Why separate: an operation computes one register from others and knows nothing of the
statement around it; its spelling (which instruction, which width, which fix-up after a
truncating division) is the instruction-selection half of the printer, statements and
control flow (ptx.py) the other.
"""

from __future__ import annotations

from tilesafe.codegen import lir
from tilesafe.codegen.lir import Imm, Reg, Ty
from tilesafe.codegen.ptx_emit import Emitter, int_suffix

_CMP = {"eq": "eq", "ne": "ne", "lt": "lt", "le": "le", "gt": "gt", "ge": "ge"}
_FCMP = {"eq": "eq", "ne": "neu", "lt": "lt", "le": "le", "gt": "gt", "ge": "ge"}
_FARITH = {"f32.add": "add.rn.f32", "f32.sub": "sub.rn.f32", "f32.mul": "mul.rn.f32",
           "f32.div": "div.rn.f32", "f32.min": "min.f32", "f32.max": "max.f32",
           "f32.abs": "abs.f32", "f32.neg": "neg.f32"}


class OpPrinter:
    """`op_<name>` (dots as underscores) for each LIR operation name."""

    def __init__(self, em: Emitter) -> None:
        self.name = em.name
        self.temp = em.temp
        self.val = em.val
        self.ins = em.ins

    def op(self, i: lir.Op) -> None:
        """One LIR operation: float arithmetic, a comparison, or its `op_<name>` method."""
        name, d, ty = i.name, i.dst, i.dst.ty
        if name in _FARITH:
            args = ", ".join(self.val(a) for a in i.args)
            self.ins(f"{_FARITH[name]} {self.name(d)}, {args};")
            return
        family, _, op = name.partition(".")
        if family in ("int", "f32") and op in _CMP:
            self.compare(i, family == "f32", op)
            return
        getattr(self, "op_" + name.replace(".", "_"))(i, self.name(d), ty)

    def compare(self, i: lir.Op, is_float: bool, op: str) -> None:
        a, b = i.args
        if is_float:
            self.ins(f"setp.{_FCMP[op]}.f32 {self.name(i.dst)}, {self.val(a)}, {self.val(b)};")
            return
        # The width of the comparison is the widest operand's, immediates included: ptxas
        # silently truncates an immediate that does not fit a .s32 comparison (found by the
        # translation validator: `thread < 4294967297` compared with 1).
        ty = Ty.S64 if any(x.ty.bits == 64 or isinstance(x, Imm)
                           and not -(2**31) <= int(x.value) < 2**31 for x in (a, b)) else Ty.S32
        self.ins(f"setp.{_CMP[op]}.{int_suffix(ty)} {self.name(i.dst)}, {self.val(a, ty)}, "
                 f"{self.val(b, ty)};")

    def _bin(self, i: lir.Op, d: str, ty: Ty, mnemonic: str) -> None:
        a, b = i.args
        self.ins(f"{mnemonic} {d}, {self.val(a, ty)}, {self.val(b, ty)};")

    def op_int_add(self, i: lir.Op, d: str, ty: Ty) -> None:
        self._bin(i, d, ty, f"add.{int_suffix(ty)}")

    def op_int_sub(self, i: lir.Op, d: str, ty: Ty) -> None:
        self._bin(i, d, ty, f"sub.{int_suffix(ty)}")

    def op_int_mul(self, i: lir.Op, d: str, ty: Ty) -> None:
        a, b = i.args
        narrow = all(isinstance(x, Imm) and -(2**31) <= int(x.value) < 2**31
                     or isinstance(x, Reg) and x.ty.bits == 32 for x in (a, b))
        if ty.bits == 64 and narrow:
            self.ins(f"mul.wide.s32 {d}, {self.val(a)}, {self.val(b)};")
        else:
            self._bin(i, d, ty, f"mul.lo.{int_suffix(ty)}")

    def op_int_neg(self, i: lir.Op, d: str, ty: Ty) -> None:
        self.ins(f"neg.{int_suffix(ty)} {d}, {self.val(i.args[0], ty)};")

    def op_int_abs(self, i: lir.Op, d: str, ty: Ty) -> None:
        self.ins(f"abs.{int_suffix(ty)} {d}, {self.val(i.args[0], ty)};")

    def op_int_min(self, i: lir.Op, d: str, ty: Ty) -> None:
        self._bin(i, d, ty, f"min.{int_suffix(ty)}")

    def op_int_max(self, i: lir.Op, d: str, ty: Ty) -> None:
        self._bin(i, d, ty, f"max.{int_suffix(ty)}")

    def op_int_div(self, i: lir.Op, d: str, ty: Ty) -> None:
        self._floor(i, d, ty, want_quotient=True)

    def op_int_mod(self, i: lir.Op, d: str, ty: Ty) -> None:
        self._floor(i, d, ty, want_quotient=False)

    def _floor(self, i: lir.Op, d: str, ty: Ty, want_quotient: bool) -> None:
        a, b = i.args
        w, sfx = ty.bits, int_suffix(ty)
        av = self.val(a, ty)
        if isinstance(b, Imm) and int(b.value) > 0:
            c = int(b.value)
            if c & (c - 1) == 0:  # floor by a power of two: exact on two's complement
                if want_quotient:
                    self.ins(f"shr.s{w} {d}, {av}, {c.bit_length() - 1};")
                else:
                    self.ins(f"and.b{w} {d}, {av}, {c - 1};")
                return
            if i.hint == "nonneg":
                self.ins(f"{'div' if want_quotient else 'rem'}.u{w} {d}, {av}, {c};")
                return
        bv = self.val(b, ty)
        q, r = (d, self.temp(ty)) if want_quotient else (self.temp(ty), d)
        self.ins(f"div.{sfx} {q}, {av}, {bv};")
        self.ins(f"rem.{sfx} {r}, {av}, {bv};")
        # Truncation -> floor: when the remainder is non-zero and its sign differs from the
        # divisor's, step the quotient down and the remainder up by the divisor.
        p1, p2, t = self.temp(Ty.PRED), self.temp(Ty.PRED), self.temp(ty)
        self.ins(f"setp.ne.{sfx} {p1}, {r}, 0;")
        self.ins(f"xor.b{w} {t}, {r}, {bv};")
        self.ins(f"setp.lt.and.{sfx} {p2}, {t}, 0, {p1};")
        self.ins(f"@{p2} sub.{sfx} {q}, {q}, 1;" if want_quotient
                 else f"@{p2} add.{sfx} {r}, {r}, {bv};")

    def op_bit_xor(self, i: lir.Op, d: str, ty: Ty) -> None:
        self._bin(i, d, ty, f"xor.b{ty.bits}")

    def op_bit_and(self, i: lir.Op, d: str, ty: Ty) -> None:
        self._bin(i, d, ty, f"and.b{ty.bits}")

    def op_bit_or(self, i: lir.Op, d: str, ty: Ty) -> None:
        self._bin(i, d, ty, f"or.b{ty.bits}")

    def op_bit_shr(self, i: lir.Op, d: str, ty: Ty) -> None:
        a, b = i.args
        self.ins(f"shr.s{ty.bits} {d}, {self.val(a, ty)}, {self.val(b)};")

    def op_bit_shl(self, i: lir.Op, d: str, ty: Ty) -> None:
        a, b = i.args
        amount = self.val(b) if isinstance(b, Imm) or b.ty.bits == 32 else self._low(b)
        self.ins(f"shl.b{ty.bits} {d}, {self.val(a, ty)}, {amount};")

    def _low(self, v: Reg) -> str:
        t = self.temp(Ty.S32)
        self.ins(f"cvt.u32.u64 {t}, {self.name(v)};")
        return t

    def op_cvt_s64(self, i: lir.Op, d: str, ty: Ty) -> None:
        self.ins(f"cvt.s64.s32 {d}, {self.val(i.args[0])};")

    def op_cvt_s32(self, i: lir.Op, d: str, ty: Ty) -> None:
        a = i.args[0]
        if isinstance(a, Reg) and a.ty.bits == 64:
            self.ins(f"cvt.u32.u64 {d}, {self.name(a)};")  # the low 32 bits
        else:
            self.ins(f"mov.b32 {d}, {self.val(a)};")

    def op_cvt_f32(self, i: lir.Op, d: str, ty: Ty) -> None:
        a = i.args[0]
        src = "s64" if isinstance(a, Reg) and a.ty.bits == 64 else "s32"
        self.ins(f"cvt.rn.f32.{src} {d}, {self.val(a)};")

    def op_cvt_i32(self, i: lir.Op, d: str, ty: Ty) -> None:
        self.ins(f"cvt.rzi.s32.f32 {d}, {self.val(i.args[0])};")

    def op_wrap_u8(self, i: lir.Op, d: str, ty: Ty) -> None:
        self.ins(f"and.b32 {d}, {self.val(i.args[0], Ty.S32)}, 255;")

    def op_round_f16(self, i: lir.Op, d: str, ty: Ty) -> None:
        h = self.temp("b16")
        self.ins(f"cvt.rn.f16.f32 {h}, {self.val(i.args[0])};")
        self.ins(f"cvt.f32.f16 {d}, {h};")

    def op_round_bf16(self, i: lir.Op, d: str, ty: Ty) -> None:
        h = self.temp("b16")
        self.ins(f"cvt.rn.bf16.f32 {h}, {self.val(i.args[0])};")
        self.ins(f"cvt.f32.bf16 {d}, {h};")

    def op_not(self, i: lir.Op, d: str, ty: Ty) -> None:
        self.ins(f"not.pred {d}, {self.val(i.args[0])};")

    def op_and(self, i: lir.Op, d: str, ty: Ty) -> None:
        self._bin(i, d, ty, "and.pred")

    def op_or(self, i: lir.Op, d: str, ty: Ty) -> None:
        self._bin(i, d, ty, "or.pred")

    def op_mov(self, i: lir.Op, d: str, ty: Ty) -> None:
        kind = {Ty.PRED: "pred", Ty.F32: "f32"}.get(ty, f"b{ty.bits}")
        self.ins(f"mov.{kind} {d}, {self.val(i.args[0], ty)};")

    def op_select(self, i: lir.Op, d: str, ty: Ty) -> None:
        p, a, b = i.args
        kind = "f32" if ty is Ty.F32 else f"b{ty.bits}"
        self.ins(f"selp.{kind} {d}, {self.val(a, ty)}, {self.val(b, ty)}, {self.val(p)};")

    def op_addr_global(self, i: lir.Op, d: str, ty: Ty) -> None:
        base, flat, size = i.args
        nbytes = int(size.value)  # type: ignore[union-attr]
        off = self.temp(Ty.S64)
        if isinstance(flat, Imm):
            self.ins(f"add.s64 {d}, {self.val(base)}, {int(flat.value) * nbytes};")
            return
        if flat.ty.bits == 32:
            self.ins(f"mul.wide.s32 {off}, {self.name(flat)}, {nbytes};")
        else:
            self.ins(f"mul.lo.s64 {off}, {self.name(flat)}, {nbytes};")
        self.ins(f"add.s64 {d}, {self.val(base)}, {off};")

    def op_addr_shared(self, i: lir.Op, d: str, ty: Ty) -> None:
        base, start, off, size = i.args
        nbytes, first = int(size.value), int(start.value)  # type: ignore[union-attr]
        if isinstance(off, Imm):
            self.ins(f"add.u32 {d}, {self.val(base)}, {first + int(off.value) * nbytes};")
            return
        o = self.name(off) if off.ty.bits == 32 else self._low(off)
        self.ins(f"mad.lo.s32 {d}, {o}, {nbytes}, {self.val(base)};")
        if first:
            self.ins(f"add.u32 {d}, {d}, {first};")
