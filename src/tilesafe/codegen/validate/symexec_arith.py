"""Instruction semantics of the symbolic executor, part one: integer, predicate and float
arithmetic, moves, selects, comparisons and conversions -- the instructions that only
compute register values.

Why separate: these handlers read operands and write one register and touch nothing else
(no event, no path condition), so each is a small pure rule of PTX's meaning; the ones
that emit memory and synchronisation events are in symexec_memory.py. Every handler takes
(instruction, opcode parts, operands, registers, path condition, guard, loops) and raises
Unsupported outside the modelled subset. Floats are uninterpreted functions named by
their PTX mnemonic.
"""

from __future__ import annotations

from tilesafe.codegen.validate import terms as T
from tilesafe.codegen.validate.ptx_parse import Instr, Reg, Sym
from tilesafe.codegen.validate.symexec_operands import SPECIAL, Operands, Unsupported, type_of
from tilesafe.codegen.validate.terms import BOOL, LeafInfo, Term


class ArithmeticOps:
    """`op_<base>` for each arithmetic base opcode (`add`, `mul`, `setp`, `cvt`, ...)."""

    def __init__(self, ops: Operands) -> None:
        self.read = ops.read
        self.write = ops.write
        self.params = ops.params
        self.shared_names = ops.shared_names

    def _binary(self, ins, o, regs, guard, w, fn):
        if len(o) != 3:
            raise Unsupported("expected three operands")
        a = self.read(o[1], regs, w, ins)
        b = self.read(o[2], regs, w, ins)
        self.write(ins, regs, fn(a, b), guard)

    def op_add(self, ins, p, o, regs, pc, guard, loops):
        self._arith(ins, p, o, regs, guard, T.add)

    def op_sub(self, ins, p, o, regs, pc, guard, loops):
        self._arith(ins, p, o, regs, guard, T.sub)

    def _arith(self, ins, p, o, regs, guard, fn):
        if len(p) == 3 and p[1] in ("rn", "rz", "rm", "rp") and p[2] == "f32":
            return self._float(ins, o, regs, guard)
        if len(p) == 2 and p[1] == "f32":
            return self._float(ins, o, regs, guard)
        if len(p) != 2:
            raise Unsupported(f"instruction {ins.opcode}")
        kind, w = type_of(p[1])
        if kind == "f":
            raise Unsupported(f"instruction {ins.opcode}")
        self._binary(ins, o, regs, guard, w, fn)

    def _float(self, ins, o, regs, guard):
        args = [self.read(x, regs, 32, ins) for x in o[1:]]
        self.write(ins, regs, T.uf(ins.opcode, 32, *args), guard)

    def op_mul(self, ins, p, o, regs, pc, guard, loops):
        if p[-1] == "f32" and (len(p) == 2 or p[1] in ("rn", "rz", "rm", "rp")):
            return self._float(ins, o, regs, guard)
        if len(p) != 3 or p[1] not in ("lo", "wide"):
            raise Unsupported(f"instruction {ins.opcode}")
        kind, w = type_of(p[2])
        if p[1] == "lo":
            return self._binary(ins, o, regs, guard, w, T.mul)
        if kind not in ("s", "u") or w != 32:
            raise Unsupported(f"instruction {ins.opcode}")
        ext = T.sext if kind == "s" else T.zext
        a, b = self.read(o[1], regs, 32, ins), self.read(o[2], regs, 32, ins)
        self.write(ins, regs, T.mul(ext(a, 64), ext(b, 64)), guard)

    def op_mad(self, ins, p, o, regs, pc, guard, loops):
        if len(p) != 3 or p[1] not in ("lo", "wide") or len(o) != 4:
            raise Unsupported(f"instruction {ins.opcode}")
        kind, w = type_of(p[2])
        if kind == "f":
            raise Unsupported(f"instruction {ins.opcode}")
        if p[1] == "lo":
            a, b, c = (self.read(x, regs, w, ins) for x in o[1:])
            return self.write(ins, regs, T.add(T.mul(a, b), c), guard)
        if w != 32:
            raise Unsupported(f"instruction {ins.opcode}")
        ext = T.sext if kind == "s" else T.zext
        a, b = self.read(o[1], regs, 32, ins), self.read(o[2], regs, 32, ins)
        c = self.read(o[3], regs, 64, ins)
        self.write(ins, regs, T.add(T.mul(ext(a, 64), ext(b, 64)), c), guard)

    def op_neg(self, ins, p, o, regs, pc, guard, loops):
        kind, w = type_of(p[-1])
        if kind == "f":
            return self._float(ins, o, regs, guard)
        if kind != "s" or len(p) != 2:
            raise Unsupported(f"instruction {ins.opcode}")
        self.write(ins, regs, T.neg(self.read(o[1], regs, w, ins)), guard)

    def op_abs(self, ins, p, o, regs, pc, guard, loops):
        kind, w = type_of(p[-1])
        if kind == "f":
            return self._float(ins, o, regs, guard)
        if kind != "s" or len(p) != 2:
            raise Unsupported(f"instruction {ins.opcode}")
        self.write(ins, regs, T.babs(self.read(o[1], regs, w, ins)), guard)

    def op_not(self, ins, p, o, regs, pc, guard, loops):
        if p[1:] == ("pred",):
            return self.write(ins, regs, T.not_(self.read(o[1], regs, BOOL, ins)), guard)
        kind, w = type_of(p[-1])
        if kind != "b" or len(p) != 2:
            raise Unsupported(f"instruction {ins.opcode}")
        self.write(ins, regs, T.bnot(self.read(o[1], regs, w, ins)), guard)

    def _logic(self, ins, p, o, regs, guard, bvfn, predfn):
        if p[1:] == ("pred",):
            a = self.read(o[1], regs, BOOL, ins)
            b = self.read(o[2], regs, BOOL, ins)
            return self.write(ins, regs, predfn(a, b), guard)
        kind, w = type_of(p[-1])
        if kind != "b" or len(p) != 2:
            raise Unsupported(f"instruction {ins.opcode}")
        self._binary(ins, o, regs, guard, w, bvfn)

    def op_and(self, ins, p, o, regs, pc, guard, loops):
        self._logic(ins, p, o, regs, guard, T.band, T.and_)

    def op_or(self, ins, p, o, regs, pc, guard, loops):
        self._logic(ins, p, o, regs, guard, T.bor, T.or_)

    def op_xor(self, ins, p, o, regs, pc, guard, loops):
        self._logic(ins, p, o, regs, guard, T.bxor, T.xor_)

    def _shift(self, ins, p, o, regs, guard, fn):
        if len(p) != 2:
            raise Unsupported(f"instruction {ins.opcode}")
        _, w = type_of(p[1])
        a = self.read(o[1], regs, w, ins)
        n = self.read(o[2], regs, 32, ins)
        n = T.zext(n, w) if w > 32 else T.trunc(n, w) if w < 32 else n
        self.write(ins, regs, fn(a, n), guard)

    def op_shl(self, ins, p, o, regs, pc, guard, loops):
        if p[1][0] != "b":
            raise Unsupported(f"instruction {ins.opcode}")
        self._shift(ins, p, o, regs, guard, T.shl)

    def op_shr(self, ins, p, o, regs, pc, guard, loops):
        kind = p[1][0] if len(p) == 2 else ""
        if kind not in ("s", "u", "b"):
            raise Unsupported(f"instruction {ins.opcode}")
        self._shift(ins, p, o, regs, guard, T.ashr if kind == "s" else T.lshr)

    def _minmax(self, ins, p, o, regs, guard, smaller):
        kind, w = type_of(p[-1])
        if kind == "f":
            return self._float(ins, o, regs, guard)
        if len(p) != 2 or kind not in ("s", "u"):
            raise Unsupported(f"instruction {ins.opcode}")
        if smaller:
            fn = T.smin if kind == "s" else T.umin
        else:
            fn = T.smax if kind == "s" else T.umax
        self._binary(ins, o, regs, guard, w, fn)

    def op_min(self, ins, p, o, regs, pc, guard, loops):
        self._minmax(ins, p, o, regs, guard, True)

    def op_max(self, ins, p, o, regs, pc, guard, loops):
        self._minmax(ins, p, o, regs, guard, False)

    def _divrem(self, ins, p, o, regs, guard, rem):
        kind, w = type_of(p[-1])
        if kind == "f" and not rem:
            return self._float(ins, o, regs, guard)
        if len(p) != 2 or kind not in ("s", "u"):
            raise Unsupported(f"instruction {ins.opcode}")
        op = ("s" if kind == "s" else "u") + ("rem" if rem else "div")
        zero = T.leaf(f"divzero:{ins.index}", w,
                      LeafInfo("nondet", note=f"'{ins.text}' by zero (unspecified)"))
        self._binary(ins, o, regs, guard, w, lambda a, b: T.divide(op, a, b, zero))

    def op_div(self, ins, p, o, regs, pc, guard, loops):
        self._divrem(ins, p, o, regs, guard, False)

    def op_rem(self, ins, p, o, regs, pc, guard, loops):
        self._divrem(ins, p, o, regs, guard, True)

    def op_fma(self, ins, p, o, regs, pc, guard, loops):
        if p[-1] != "f32":
            raise Unsupported(f"instruction {ins.opcode}")
        self._float(ins, o, regs, guard)

    def op_mov(self, ins, p, o, regs, pc, guard, loops):
        if len(p) != 2 or len(o) != 2:
            raise Unsupported(f"instruction {ins.opcode}")
        src = o[1]
        if p[1] == "pred":
            return self.write(ins, regs, self.read(src, regs, BOOL, ins), guard)
        kind, w = type_of(p[1])
        if isinstance(src, Sym):
            if src.name in self.shared_names and w == 32 and kind in ("u", "b"):
                v = T.leaf("tsmem", 32)
            elif src.name in self.params and w == 64 and kind in ("u", "b"):
                v = T.leaf(f"param_addr:{src.name}", 64)
            else:
                raise Unsupported(f"mov of symbol {src.name}")
            return self.write(ins, regs, v, guard)
        if isinstance(src, Reg) and src.name in SPECIAL and w != 32:
            raise Unsupported(f"{src.name} read as {w} bits")
        self.write(ins, regs, self.read(src, regs, w, ins), guard)

    def op_selp(self, ins, p, o, regs, pc, guard, loops):
        if len(p) != 2 or len(o) != 4:
            raise Unsupported(f"instruction {ins.opcode}")
        _, w = type_of(p[1])
        a, b = self.read(o[1], regs, w, ins), self.read(o[2], regs, w, ins)
        c = self.read(o[3], regs, BOOL, ins)
        self.write(ins, regs, T.ite(c, a, b), guard)

    _INT_CMP = {"eq": "eq", "ne": "ne", "lt": "lt", "le": "le", "gt": "gt", "ge": "ge",
                "lo": "ult", "ls": "ule", "hi": "ugt", "hs": "uge"}

    def op_setp(self, ins, p, o, regs, pc, guard, loops):
        if len(p) not in (3, 4) or len(o) != (3 if len(p) == 3 else 4):
            raise Unsupported(f"instruction {ins.opcode}")
        cmp, ty = p[1], p[-1]
        combine = p[2] if len(p) == 4 else None
        if combine not in (None, "and", "or", "xor"):
            raise Unsupported(f"instruction {ins.opcode}")
        kind, w = type_of(ty)
        a, b = self.read(o[1], regs, w, ins), self.read(o[2], regs, w, ins)
        if kind == "f":
            r = T.uf(f"setp.{cmp}.{ty}", BOOL, a, b)
        else:
            r = self._int_cmp(cmp, kind, a, b, ins)
        if combine is not None:
            c = self.read(o[3], regs, BOOL, ins)
            r = {"and": T.and_, "or": T.or_, "xor": T.xor_}[combine](r, c)
        self.write(ins, regs, r, guard)

    def _int_cmp(self, cmp: str, kind: str, a: Term, b: Term, ins: Instr) -> Term:
        if cmp in ("eq", "ne"):
            r = T.eq(a, b)
            return T.not_(r) if cmp == "ne" else r
        if kind == "b":
            raise Unsupported(f"instruction {ins.opcode}")
        unsigned = kind == "u" or cmp in ("lo", "ls", "hi", "hs")
        lt, le = (T.ult, T.ule) if unsigned else (T.slt, T.sle)
        base = {"lt": "lt", "lo": "lt", "le": "le", "ls": "le", "gt": "gt", "hi": "gt",
                "ge": "ge", "hs": "ge"}.get(cmp)
        if base is None:
            raise Unsupported(f"instruction {ins.opcode}")
        return {"lt": lambda: lt(a, b), "le": lambda: le(a, b), "gt": lambda: lt(b, a),
                "ge": lambda: le(b, a)}[base]()

    def op_cvt(self, ins, p, o, regs, pc, guard, loops):
        mods = [x for x in p[1:] if x in ("rn", "rz", "rm", "rp", "rni", "rzi", "rmi", "rpi")]
        tys = [x for x in p[1:] if x not in mods]
        if len(tys) != 2 or len(mods) > 1 or "sat" in tys or "ftz" in tys:
            raise Unsupported(f"instruction {ins.opcode}")
        dk, dw = type_of(tys[0])
        sk, sw = type_of(tys[1])
        a = self.read(o[1], regs, sw, ins)
        if dk in ("s", "u", "b") and sk in ("s", "u", "b"):
            if mods:
                raise Unsupported(f"instruction {ins.opcode}")
            if dw > sw:
                v = T.sext(a, dw) if sk == "s" else T.zext(a, dw)
            elif dw < sw:
                v = T.trunc(a, dw)
            else:
                v = a
            return self.write(ins, regs, v, guard)
        if dk == "f" and sk in ("s", "u"):
            value = T.sint(a) if sk == "s" else T.uint(a)
            name = f"cvt.{mods[0] if mods else 'rn'}.f{dw}.int"
            return self.write(ins, regs, T.uf(name, dw, value), guard)
        self.write(ins, regs, T.uf(ins.opcode, dw, a), guard)
