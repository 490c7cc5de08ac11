"""The PTX printer's output buffer: instruction lines with their source comments, virtual
registers named by type, fresh temporaries and labels, and the `.reg` declarations they
need.

Why separate: how a register is spelled (`%r7`, `%rd7`, `%p7`, `%f7`, `%h7`), which
prefixes a module must declare and how an operand is widened to an instruction's integer
type are the same for statements (ptx.py) and operations (ptx_ops.py); both write through
one emitter so temporaries and labels never collide.
"""

from __future__ import annotations

import struct

from tilesafe.codegen import lir
from tilesafe.codegen.lir import Imm, Reg, Ty
from tilesafe.frontend.span import Span

_PREFIX = {Ty.PRED: "%p", Ty.S32: "%r", Ty.U32: "%r", Ty.S64: "%rd", Ty.U64: "%rd",
           Ty.F32: "%f"}
_DECL = (("%p", ".pred"), ("%r", ".b32"), ("%rd", ".b64"), ("%f", ".f32"), ("%h", ".b16"))


def immediate(v: Imm) -> str:
    """An immediate operand: an integer, or a float as its exact bits (`0f3F800000`)."""
    if v.ty is Ty.F32:
        return "0f" + struct.pack(">f", float(v.value)).hex().upper()
    return str(int(v.value))


def int_suffix(ty: Ty) -> str:
    """The signed integer type suffix of a width."""
    return "s64" if ty.bits == 64 else "s32"


class Emitter:
    """The lines of one kernel's body; temporaries are numbered after the LIR's registers
    (`first_temp`), and `used` tracks the highest number per prefix for `.reg`."""

    def __init__(self, first_temp: int) -> None:
        self.lines: list[str] = []
        self.next_reg = first_temp
        self.used: dict[str, int] = {}
        self.labels = 0

    def name(self, r: Reg) -> str:
        prefix = _PREFIX[r.ty]
        self.used[prefix] = max(self.used.get(prefix, 0), r.id + 1)
        return f"{prefix}{r.id}"

    def temp(self, ty: Ty | str) -> str:
        self.next_reg += 1
        if ty == "b16":
            self.used["%h"] = max(self.used.get("%h", 0), self.next_reg + 1)
            return f"%h{self.next_reg}"
        return self.name(Reg(self.next_reg, ty))  # type: ignore[arg-type]

    def val(self, v: lir.Value, ty: Ty | None = None) -> str:
        """An operand of an instruction of integer type `ty` (sign-extended if narrower)."""
        if isinstance(v, Imm):
            return immediate(v)
        if ty is not None and ty.is_int and v.ty.is_int and v.ty.bits < ty.bits:
            t = self.temp(Ty.S64)
            self.ins(f"cvt.s64.s32 {t}, {self.name(v)};")
            return t
        return self.name(v)

    def ins(self, text: str, origin: Span | None = None, what: str = "") -> None:
        note = f"  // {origin.line}:{origin.col} {what}".rstrip() if origin is not None else ""
        self.lines.append(f"\t{text}{note}")

    def label(self, stem: str) -> str:
        self.labels += 1
        return f"$L{stem}{self.labels}"

    def declarations(self) -> list[str]:
        """`.reg` lines for every register prefix used, sized past its highest number."""
        return [f"\t.reg {ty} {prefix}<{self.used[prefix]}>;" for prefix, ty in _DECL
                if prefix in self.used]
