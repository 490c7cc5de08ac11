"""LIR operations -> C++ statements for the HIP printer, with exactly the meaning the PTX
printer gives them (codegen/ptx_ops.py) and the interpreter computes (semantics/expr/evaluate.py).

Why this much care in C++: signed overflow, shifts of negative values, out-of-range
float -> int conversions and contraction of `a * b + c` are undefined or compiler-chosen in
C++, where PTX spells them exactly. So `+ - * neg shl` wrap through unsigned arithmetic
(the lowering chose widths in which the exact value fits; wrapping is what the PTX does
when an operand was truncated), `/ %` are the prelude's floor operations (or a shift / mask
/ unsigned division where the PTX printer uses one), f32 arithmetic goes through the
prelude's non-contracting functions, `min`/`max`/`abs`/`i32()` and the f16/bf16 roundings
are the prelude's ports of semantics/expr/fp.py. Registers are C++ locals named by the printer
(hip.py): `int`/`long long` for s32/s64, `unsigned` for shared-memory offsets,
`const unsigned char *` for global addresses, `bool`, `float`.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Callable

from tilesafe.codegen import lir
from tilesafe.codegen.lir import Imm, Reg, Ty

CTYPE = {Ty.PRED: "bool", Ty.S32: "int", Ty.S64: "long long", Ty.U32: "unsigned",
         Ty.U64: "const unsigned char *", Ty.F32: "float"}
_UNSIGNED = {32: "unsigned", 64: "unsigned long long"}
_SIGNED = {32: "int", 64: "long long"}
_ICMP = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}
_FARITH = {"f32.add": "ts_fadd", "f32.sub": "ts_fsub", "f32.mul": "ts_fmul",
           "f32.div": "ts_fdiv", "f32.min": "ts_fmin", "f32.max": "ts_fmax"}


def reg_name(r: Reg) -> str:
    return f"r{r.id}"


def int_literal(v: int, bits: int) -> str:
    """An integer constant of a `bits`-wide signed type (INT_MIN spelled so that it parses
    as a literal of that type)."""
    if bits == 32 and -(2**31) <= v < 2**31:
        return str(v) if v != -(2**31) else "(-2147483647 - 1)"
    if v == -(2**63):
        return "(-9223372036854775807LL - 1)"
    return f"{v}LL"


def float_literal(x: float) -> str:
    """An f32 constant, exactly: a hexadecimal float literal, or its bits for NaN/inf."""
    x = struct.unpack("<f", struct.pack("<f", x))[0]
    if math.isnan(x) or math.isinf(x):
        bits = struct.unpack("<I", struct.pack("<f", x))[0]
        return f"ts_float(0x{bits:08x}u)"
    if x == 0.0:
        return "-0.0f" if math.copysign(1.0, x) < 0 else "0.0f"
    return f"{x.hex()}f"


class HipOps:
    """`op_<name>` (dots as underscores) for each LIR operation; each returns the C++
    expression whose value the destination register gets."""

    def __init__(self, emit: Callable[[str], None]) -> None:
        self.emit = emit

    # -- operands ---------------------------------------------------------------------------

    def val(self, v: lir.Value, bits: int | None = None) -> str:
        """An operand; an integer as a `bits`-wide signed value when given (sign-extended
        from a narrower register, as the LIR says)."""
        if isinstance(v, Imm):
            if v.ty is Ty.F32:
                return float_literal(float(v.value))
            if v.ty is Ty.PRED:
                return "true" if v.value else "false"
            return int_literal(int(v.value), bits or v.ty.bits)
        if bits is not None and v.ty.is_int and v.ty.bits < bits:
            return f"(({_SIGNED[bits]}){reg_name(v)})"
        return reg_name(v)

    def uval(self, v: lir.Value, bits: int) -> str:
        """An integer operand as a `bits`-wide unsigned value (for wrapping arithmetic)."""
        return f"(({_UNSIGNED[bits]}){self.val(v, bits)})"

    # -- dispatch ---------------------------------------------------------------------------

    def op(self, i: lir.Op) -> None:
        d = reg_name(i.dst)
        self.emit(f"{d} = {self.expr(i)};")

    def expr(self, i: lir.Op) -> str:
        name = i.name
        if name in _FARITH:
            a, b = i.args
            return f"{_FARITH[name]}({self.val(a)}, {self.val(b)})"
        family, _, op = name.partition(".")
        if family in ("int", "f32") and op in _ICMP:
            return self.compare(i, family == "f32", op)
        method = getattr(self, "op_" + name.replace(".", "_"), None)
        if method is None:
            raise NotImplementedError(f"the HIP printer has no spelling for LIR op {name!r}")
        return method(i, i.dst.ty)

    def compare(self, i: lir.Op, is_float: bool, op: str) -> str:
        a, b = i.args
        if is_float:  # C++ ordered comparisons; `!=` is true on NaN, as PTX setp.neu
            return f"({self.val(a)} {_ICMP[op]} {self.val(b)})"
        bits = 64 if any(x.ty.bits == 64 or isinstance(x, Imm) and not
                         -(2**31) <= int(x.value) < 2**31 for x in (a, b)) else 32
        return f"({self.val(a, bits)} {_ICMP[op]} {self.val(b, bits)})"

    def _wrap(self, i: lir.Op, ty: Ty, sym: str) -> str:
        a, b = i.args
        w = ty.bits
        return f"(({_SIGNED[w]})({self.uval(a, w)} {sym} {self.uval(b, w)}))"

    # -- integers ---------------------------------------------------------------------------

    def op_int_add(self, i: lir.Op, ty: Ty) -> str:
        return self._wrap(i, ty, "+")

    def op_int_sub(self, i: lir.Op, ty: Ty) -> str:
        return self._wrap(i, ty, "-")

    def op_int_mul(self, i: lir.Op, ty: Ty) -> str:
        return self._wrap(i, ty, "*")

    def op_int_neg(self, i: lir.Op, ty: Ty) -> str:
        w = ty.bits
        return f"(({_SIGNED[w]})(0u - {self.uval(i.args[0], w)}))"

    def op_int_abs(self, i: lir.Op, ty: Ty) -> str:
        w, a = ty.bits, i.args[0]
        return f"({self.val(a, w)} < 0 ? {self.op_int_neg(i, ty)} : {self.val(a, w)})"

    def op_int_min(self, i: lir.Op, ty: Ty) -> str:
        a, b = (self.val(x, ty.bits) for x in i.args)
        return f"({a} < {b} ? {a} : {b})"

    def op_int_max(self, i: lir.Op, ty: Ty) -> str:
        a, b = (self.val(x, ty.bits) for x in i.args)
        return f"({a} > {b} ? {a} : {b})"

    def op_int_div(self, i: lir.Op, ty: Ty) -> str:
        return self._floor(i, ty, quotient=True)

    def op_int_mod(self, i: lir.Op, ty: Ty) -> str:
        return self._floor(i, ty, quotient=False)

    def _floor(self, i: lir.Op, ty: Ty, quotient: bool) -> str:
        a, b = i.args
        w = ty.bits
        av = self.val(a, w)
        if isinstance(b, Imm) and int(b.value) > 0:
            c = int(b.value)
            if c & (c - 1) == 0:  # a power of two: an arithmetic shift, a mask
                return f"({av} >> {c.bit_length() - 1})" if quotient else (
                    f"({av} & {int_literal(c - 1, w)})")
            if i.hint == "nonneg":
                op = "/" if quotient else "%"
                return f"(({_SIGNED[w]})({self.uval(a, w)} {op} {c}u))"
        fn = ("ts_div" if quotient else "ts_mod") + str(w)
        return f"{fn}({av}, {self.val(b, w)})"

    def op_bit_xor(self, i: lir.Op, ty: Ty) -> str:
        a, b = (self.val(x, ty.bits) for x in i.args)
        return f"({a} ^ {b})"

    def op_bit_and(self, i: lir.Op, ty: Ty) -> str:
        a, b = (self.val(x, ty.bits) for x in i.args)
        return f"({a} & {b})"

    def op_bit_or(self, i: lir.Op, ty: Ty) -> str:
        a, b = (self.val(x, ty.bits) for x in i.args)
        return f"({a} | {b})"

    def op_bit_shr(self, i: lir.Op, ty: Ty) -> str:  # arithmetic, as PTX shr.s
        a, b = i.args
        return f"({self.val(a, ty.bits)} >> {self.val(b)})"

    def op_bit_shl(self, i: lir.Op, ty: Ty) -> str:
        a, b = i.args
        w = ty.bits
        return f"(({_SIGNED[w]})({self.uval(a, w)} << {self.val(b)}))"

    def op_cvt_s64(self, i: lir.Op, ty: Ty) -> str:
        return f"((long long){self.val(i.args[0])})"

    def op_cvt_s32(self, i: lir.Op, ty: Ty) -> str:  # the low 32 bits
        return f"((int)(unsigned){self.uval(i.args[0], 64)})"

    def op_wrap_u8(self, i: lir.Op, ty: Ty) -> str:
        return f"({self.val(i.args[0], 32)} & 255)"

    # -- floats and conversions -------------------------------------------------------------

    def op_f32_abs(self, i: lir.Op, ty: Ty) -> str:
        return f"ts_fabs({self.val(i.args[0])})"

    def op_f32_neg(self, i: lir.Op, ty: Ty) -> str:
        return f"(-{self.val(i.args[0])})"

    def op_cvt_f32(self, i: lir.Op, ty: Ty) -> str:  # nearest even, from s32 or s64
        return f"((float){self.val(i.args[0])})"

    def op_cvt_i32(self, i: lir.Op, ty: Ty) -> str:
        return f"ts_f2i({self.val(i.args[0])})"

    def op_round_f16(self, i: lir.Op, ty: Ty) -> str:
        return f"ts_f16_to_f32(ts_f32_to_f16({self.val(i.args[0])}))"

    def op_round_bf16(self, i: lir.Op, ty: Ty) -> str:
        return f"ts_bf16_to_f32(ts_f32_to_bf16({self.val(i.args[0])}))"

    # -- predicates, moves, selects, addresses ----------------------------------------------

    def op_not(self, i: lir.Op, ty: Ty) -> str:
        return f"(!{self.val(i.args[0])})"

    def op_and(self, i: lir.Op, ty: Ty) -> str:
        a, b = i.args
        return f"({self.val(a)} && {self.val(b)})"

    def op_or(self, i: lir.Op, ty: Ty) -> str:
        a, b = i.args
        return f"({self.val(a)} || {self.val(b)})"

    def op_mov(self, i: lir.Op, ty: Ty) -> str:
        return self.val(i.args[0], ty.bits if ty.is_int and ty is not Ty.U64 else None)

    def op_select(self, i: lir.Op, ty: Ty) -> str:
        p, a, b = i.args
        bits = ty.bits if ty in (Ty.S32, Ty.S64) else None
        return f"({self.val(p)} ? {self.val(a, bits)} : {self.val(b, bits)})"

    def op_addr_global(self, i: lir.Op, ty: Ty) -> str:
        base, flat, size = i.args
        return f"({self.val(base)} + {self.val(flat, 64)} * {int(size.value)})"  # type: ignore

    def op_addr_shared(self, i: lir.Op, ty: Ty) -> str:
        base, start, off, size = i.args
        first, nbytes = int(start.value), int(size.value)  # type: ignore[union-attr]
        return (f"({self.val(base)} + {first}u + (unsigned){self.uval(off, 64)} * "
                f"{nbytes}u)")
