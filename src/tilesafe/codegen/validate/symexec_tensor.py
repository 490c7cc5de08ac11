"""Instruction semantics of the symbolic executor, part three: the tensor-core instructions
-- `wgmma.mma_async`, `wgmma.fence`, `wgmma.commit_group`, `wgmma.wait_group` and
`setmaxnreg` -- each recorded as an `Event` for the obligations.

Why separate: an MMA is neither a memory access nor a register computation the validator can
state. Its operands (the two 64-bit matrix descriptors, the scale-d predicate, the shape,
types and immediates) are what the obligations compare with the IR's; its effect on the
accumulator registers is opaque (the hardware's arithmetic), so each accumulator register
gets a fresh value named after the instruction -- which register holds which fragment
element is decided by its *position* in the instruction's list, and that is what
fragment_checks.py checks reads and writes against.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from tilesafe.codegen.validate import terms as T
from tilesafe.codegen.validate.ptx_parse import Imm, Module, Reg, Vec
from tilesafe.codegen.validate.symexec_operands import Operands, Unsupported, undef
from tilesafe.codegen.validate.terms import BOOL, LeafInfo

_SHAPE = re.compile(r"^m(\d+)n(\d+)k(\d+)$")
# accumulator type -> the input types the executor models with it
_TYPES = {"f32": ("bf16", "f16", "tf32"), "s32": ("u8", "s8")}
SYNC_ALIGNED = ("sync", "aligned")


def accumulator_registers(mod: Module) -> frozenset[str]:
    """Every register some `wgmma.mma_async` of the module accumulates into."""
    out: set[str] = set()
    for ins in mod.instrs:
        if ins.opcode.startswith("wgmma.mma_async") and ins.operands \
                and isinstance(ins.operands[0], Vec):
            out.update(r.name for r in ins.operands[0].items if isinstance(r, Reg))
    return frozenset(out)


class TensorOps:
    """`op_wgmma` and `op_setmaxnreg`."""

    def __init__(self, ops: Operands, event: Callable[..., object]) -> None:
        self.read = ops.read
        self.width = ops.width
        self.event = event

    def op_wgmma(self, ins, p, o, regs, pc, guard, loops):
        what = p[1] if len(p) > 1 else ""
        if p[2:] == SYNC_ALIGNED and what == "fence" and not o:
            self.event(ins, "wgmma.fence", pc, loops)
        elif p[2:] == SYNC_ALIGNED and what == "commit_group" and not o:
            self.event(ins, "wgmma.commit", pc, loops)
        elif p[2:] == SYNC_ALIGNED and what == "wait_group" and len(o) == 1:
            if not isinstance(o[0], Imm) or o[0].bits is not None:
                raise Unsupported("wgmma.wait_group count")
            self.event(ins, "wgmma.wait", pc, loops, pending=o[0].value)
        elif what == "mma_async" and p[2:4] == SYNC_ALIGNED and len(p) == 8:
            self._mma(ins, p, o, regs, pc, guard, loops)
        else:
            raise Unsupported(f"instruction {ins.opcode}")

    def _mma(self, ins, p, o, regs, pc, guard, loops):
        shape = _SHAPE.match(p[4])
        dtype, atype, btype = p[5], p[6], p[7]
        if shape is None or dtype not in _TYPES or atype not in _TYPES[dtype] \
                or btype != atype:
            raise Unsupported(f"instruction {ins.opcode}")
        if len(o) < 4 or not isinstance(o[0], Vec):
            raise Unsupported("wgmma operands")
        if isinstance(o[1], Vec):
            raise Unsupported("wgmma with A in registers")
        acc = []
        for r in o[0].items:
            if not isinstance(r, Reg) or self.width(r.name) != 32:
                raise Unsupported(f"accumulator {r} is not a 32-bit register")
            acc.append(r.name)
        imms = []
        for x in o[4:]:
            if not isinstance(x, Imm) or x.bits is not None:
                raise Unsupported("wgmma immediate operand")
            imms.append(int(x.value))
        ops = {"m": int(shape.group(1)), "n": int(shape.group(2)), "k": int(shape.group(3)),
               "dtype": dtype, "atype": atype, "acc": tuple(acc),
               "desc_a": self.read(o[1], regs, 64, ins), "desc_b": self.read(o[2], regs, 64, ins),
               "scale": self.read(o[3], regs, BOOL, ins), "imm": tuple(imms)}
        self.event(ins, "wgmma", pc, loops, **ops)
        for name in acc:
            value = T.leaf(f"mma:{ins.index}:{name}", 32,
                           LeafInfo("nondet", note=f"{name} after '{ins.text[:60]}'"))
            if guard is not T.TRUE:
                value = T.ite(guard, value, regs.get(name, undef(name, 32)))
            regs[name] = value

    def op_setmaxnreg(self, ins, p, o, regs, pc, guard, loops):
        if len(p) != 5 or p[1] not in ("inc", "dec") or p[2:] != ("sync", "aligned", "u32") \
                or len(o) != 1 or not isinstance(o[0], Imm) or o[0].bits is not None:
            raise Unsupported(f"instruction {ins.opcode}")
        self.event(ins, "setmaxnreg", pc, loops, inc=p[1] == "inc", count=o[0].value)
