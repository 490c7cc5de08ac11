"""Registers and operands of the symbolic executor: what a PTX operand reads as a term of
the instruction's width, how a result is written back under a guard, what an address
operand names.

Why separate: PTX's operand rules (a wider register read for a narrower operand uses its
low bits; a guarded write keeps the old value where the guard is false; `[tsmem+16]`, `%tid.x`,
a register never written) are the same for every instruction family (symexec_arith.py,
symexec_memory.py) and for the driver's branch conditions (symexec.py); they live here
once, with the list of registers read before they are written (the interface obligation
reports them).
"""

from __future__ import annotations

import re

from tilesafe.codegen.validate import terms as T
from tilesafe.codegen.validate.ptx_parse import Addr, Imm, Instr, Module, Neg, Operand, Reg, Sym
from tilesafe.codegen.validate.terms import BOOL, LeafInfo, Term

SPECIAL = {"%tid.x": "tid.x", "%ctaid.x": "ctaid.x", "%ctaid.y": "ctaid.y",
           "%ctaid.z": "ctaid.z"}

_TYPE = re.compile(r"^(s|u|b|f|bf)(8|16|32|64)$")


class Unsupported(Exception):
    """An instruction (or operand form) outside the subset the executor models."""


def reg_width(mod: Module, name: str) -> int:
    """Width of a declared register (BOOL for predicates)."""
    m = re.match(r"^(%[A-Za-z_]+?)(\d+)$", name)
    prefix = m.group(1) if m else name
    decl = mod.regs.get(prefix)
    if decl is None:
        raise Unsupported(f"register {name} is not declared")
    ty = decl[0]
    if ty == "pred":
        return BOOL
    tm = _TYPE.match(ty)
    if tm is None:
        raise Unsupported(f"register type .{ty}")
    return int(tm.group(2))


def type_of(suffix: str) -> tuple[str, int]:
    """A type suffix (`s32`, `b64`, `f32`, ...) as (kind letter(s), bits)."""
    m = _TYPE.match(suffix)
    if m is None:
        raise Unsupported(f"type .{suffix}")
    return m.group(1), int(m.group(2))


def undef(name: str, w: int) -> Term:
    """The value of a register on a path that never wrote it."""
    return T.leaf(f"undef:{name}", w, LeafInfo("nondet", note="never written"))


class Operands:
    """Operand reads and register writes of one module (its declarations, parameters
    and shared symbols), collecting the registers read before they are written."""

    def __init__(self, mod: Module) -> None:
        self.mod = mod
        self.params = {p.name: p for p in mod.params}
        self.shared_names = {d[0] for d in mod.shared_decls}
        self.undefined: list[tuple[Instr, str]] = []

    def width(self, name: str) -> int:
        return reg_width(self.mod, name)

    def read(self, op: Operand, regs: dict[str, Term], w: int, ins: Instr | None = None
             ) -> Term:
        """An operand as a term of width w (BOOL for predicates)."""
        if isinstance(op, Reg):
            if op.name in SPECIAL:
                v = T.leaf(SPECIAL[op.name], 32)
            elif op.name.startswith("%") and not re.match(r"^%[A-Za-z_]+\d+$", op.name):
                raise Unsupported(f"special register {op.name}")
            else:
                v = regs.get(op.name)
                if v is None:
                    v = undef(op.name, self.width(op.name))
                    if ins is not None:
                        self.undefined.append((ins, op.name))
            return self._fit(v, w)
        if isinstance(op, Neg):
            return T.not_(self.read(op.reg, regs, BOOL, ins))
        if isinstance(op, Imm):
            if w == BOOL:
                raise Unsupported("an immediate predicate")
            if op.bits is not None and op.bits != w:
                raise Unsupported(f"a {op.bits}-bit float immediate as a {w}-bit operand")
            return T.bv(op.value, w)
        raise Unsupported(f"operand {op}")

    @staticmethod
    def _fit(v: Term, w: int) -> Term:
        """A register read at the instruction's operand width (PTX allows a wider register
        for a narrower operand: its low bits are used)."""
        if v.w == w:
            return v
        if w == BOOL or v.w == BOOL:
            raise Unsupported("a predicate where a number is expected (or back)")
        if v.w > w:
            return T.trunc(v, w)
        raise Unsupported(f"a {v.w}-bit register where {w} bits are expected")

    def write(self, ins: Instr, regs: dict[str, Term], value: Term, guard: Term) -> None:
        d = ins.operands[0]
        if not isinstance(d, Reg):
            raise Unsupported("destination is not a register")
        w = self.width(d.name)
        if value.w != w:
            if w == BOOL or value.w == BOOL or value.w > w:
                raise Unsupported(f"{value.w}-bit result into {d.name}")
            value = T.zext(value, w)
        old = regs.get(d.name)
        if guard is not T.TRUE:
            value = T.ite(guard, value, old if old is not None else undef(d.name, w))
        regs[d.name] = value

    def address(self, op: Operand, regs: dict[str, Term], ins: Instr) -> Term:
        if not isinstance(op, Addr) or op.coords is not None:
            raise Unsupported("expected a memory operand [addr]")
        if isinstance(op.base, Reg):
            w = self.width(op.base.name)
            base = self.read(op.base, regs, w, ins)
        elif isinstance(op.base, Sym) and op.base.name in self.shared_names:
            base = T.leaf("tsmem", 32)
        else:
            raise Unsupported(f"address base {op.base}")
        return T.add(base, T.bv(op.offset, base.w)) if op.offset else base
