"""Instruction semantics of the symbolic executor, part two: loads and stores, state-space
conversions, mbarriers, fences, barriers and the bulk (TMA) copies -- every instruction
that becomes an `Event` for the obligations.

Why separate: these handlers are where PTX meets the memory model the validator checks
(the operands of each event are what obligations compare with the IR's); symexec_arith.py
holds the instructions that only compute register values. A handler records its event
through `event(ins, kind, pc, loops, **operands)`, which the executor owns.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from tilesafe.codegen.validate import terms as T
from tilesafe.codegen.validate.ptx_parse import Addr, Imm, Reg, Sink, Sym
from tilesafe.codegen.validate.symexec_operands import Operands, Unsupported, type_of
from tilesafe.codegen.validate.terms import BOOL, LeafInfo

# `mapa`'s opaque result (operand_claims.py reads its two operands back)
MAPA = "mapa.shared::cluster"
# barrier.cluster instructions: (event kind, memory semantics)
CLUSTER_BARRIER = {
    "barrier.cluster.arrive": ("cluster.arrive", "release"),
    "barrier.cluster.arrive.release": ("cluster.arrive", "release"),
    "barrier.cluster.arrive.relaxed": ("cluster.arrive", "relaxed"),
    "barrier.cluster.wait": ("cluster.wait", "acquire"),
    "barrier.cluster.wait.acquire": ("cluster.wait", "acquire"),
}


class MemoryOps:
    """`op_<base>` for each memory or synchronisation base opcode (`ld`, `mbarrier`, ...)."""

    def __init__(self, ops: Operands, event: Callable[..., object]) -> None:
        self.read = ops.read
        self.write = ops.write
        self.address = ops.address
        self.width = ops.width
        self.params = ops.params
        self.event = event

    def op_ld(self, ins, p, o, regs, pc, guard, loops):
        if len(o) != 2:
            raise Unsupported(f"instruction {ins.opcode}")
        if p[1] == "param":
            if len(p) != 3 or not isinstance(o[1], Addr) or not isinstance(o[1].base, Sym):
                raise Unsupported(f"instruction {ins.opcode}")
            prm = self.params.get(o[1].base.name)
            if prm is None or prm.array is not None or o[1].offset:
                raise Unsupported(f"load of parameter {o[1].base.name}")
            _, w = type_of(p[2])
            pk, pw = type_of(prm.type)
            if pw != w:
                raise Unsupported(f"{w}-bit load of the {pw}-bit parameter {prm.name}")
            return self.write(ins, regs, T.leaf(f"param:{prm.name}", w), guard)
        space, nc, rest = self._space(p)
        if len(rest) != 1:
            raise Unsupported(f"instruction {ins.opcode}")
        kind, w = type_of(rest[0])
        addr = self.address(o[1], regs, ins)
        data = T.leaf(f"data:{ins.index}", w,
                      LeafInfo("nondet", note=f"value loaded by '{ins.text}'"))
        ev = self.event(ins, "ld", pc, loops, addr=addr, space=space, nc=nc, nbytes=w // 8,
                        type=rest[0])
        ev.result = data
        d = o[0]
        if not isinstance(d, Reg):
            raise Unsupported("load destination")
        dw = self.width(d.name)
        value = data if dw == w else (T.sext(data, dw) if kind == "s" else T.zext(data, dw))
        self.write(ins, regs, value, guard)

    def _space(self, p: tuple[str, ...]) -> tuple[str, bool, tuple[str, ...]]:
        if p[1] == "global":
            if len(p) > 2 and p[2] == "nc":
                return "global", True, p[3:]
            return "global", False, p[2:]
        if p[1] in ("shared", "shared::cta"):
            return "shared", False, p[2:]
        if p[1] == "shared::cluster":  # a peer CTA's shared memory, at a `mapa` address
            return "shared::cluster", False, p[2:]
        raise Unsupported(f"state space .{p[1]}")

    def op_mapa(self, ins, p, o, regs, pc, guard, loops):
        """`mapa.shared::cluster.u32 d, a, r`: the address a in CTA r's shared memory --
        an opaque pair of its operands (operand_claims.py takes it apart)."""
        if p[1:] != ("shared::cluster", "u32") or len(o) != 3:
            raise Unsupported(f"instruction {ins.opcode}")
        self.write(ins, regs, T.uf(MAPA, 32, self.read(o[1], regs, 32, ins),
                                   self.read(o[2], regs, 32, ins)), guard)

    def op_st(self, ins, p, o, regs, pc, guard, loops):
        space, nc, rest = self._space(p)
        if nc or len(rest) != 1 or len(o) != 2:
            raise Unsupported(f"instruction {ins.opcode}")
        kind, w = type_of(rest[0])
        addr = self.address(o[0], regs, ins)
        src = o[1]
        if isinstance(src, Reg):
            rw = self.width(src.name)
            value = self.read(src, regs, rw, ins)
            value = T.trunc(value, w) if rw > w else value
        else:
            value = self.read(src, regs, w, ins)
        self.event(ins, "st", pc, loops, addr=addr, space=space, nbytes=w // 8,
                   type=rest[0], value=value)

    def op_cvta(self, ins, p, o, regs, pc, guard, loops):
        if len(o) != 2 or p[-1] != "u64":
            raise Unsupported(f"instruction {ins.opcode}")
        a = self.read(o[1], regs, 64, ins)
        if p[1:] == ("to", "global", "u64"):
            if a.op == "leaf" and str(a.val).startswith("param:"):
                v = T.leaf("gbase:" + str(a.val)[6:], 64)
            else:
                v = T.uf("cvta.to.global", 64, a)
        elif p[1:] == ("param", "u64"):
            if a.op == "leaf" and str(a.val).startswith("param_addr:"):
                v = T.leaf("tmap:" + str(a.val)[11:], 64)
            else:
                v = T.uf("cvta.param", 64, a)
        else:
            raise Unsupported(f"instruction {ins.opcode}")
        self.write(ins, regs, v, guard)

    # synchronisation

    def op_mbarrier(self, ins, p, o, regs, pc, guard, loops):
        op = p[1]
        mods = set(p[2:])
        shared = "shared::cta" in mods or "shared" in mods or (
            op == "arrive" and "shared::cluster" in mods)
        if not shared or "b64" not in mods:
            raise Unsupported(f"instruction {ins.opcode}")
        scope = "cluster" if "cluster" in mods else "cta"
        if op == "init" and mods <= {"shared::cta", "shared", "b64"}:
            if len(o) != 2:
                raise Unsupported("mbarrier.init operands")
            self.event(ins, "mbar.init", pc, loops, addr=self.address(o[0], regs, ins),
                       count=self.read(o[1], regs, 32, ins))
        elif op == "arrive" and mods <= {"expect_tx", "release", "relaxed", "cta", "cluster",
                                         "shared::cta", "shared::cluster", "shared", "b64"}:
            tx = "expect_tx" in mods
            if len(o) != (3 if tx else 2) or not isinstance(o[0], (Sink, Reg)):
                raise Unsupported("mbarrier.arrive operands")
            sem = "relaxed" if "relaxed" in mods else "release"
            ops: dict[str, object] = {
                "addr": self.address(o[1], regs, ins), "sem": f"{sem}.{scope}",
                "space": "shared::cluster" if "shared::cluster" in mods else "shared"}
            if tx:
                ops["tx"] = self.read(o[2], regs, 32, ins)
            self.event(ins, "mbar.arrive", pc, loops, **ops)
            if isinstance(o[0], Reg):
                self.write(ins, regs, T.leaf(f"state:{ins.index}", 64), guard)
        elif op == "expect_tx" and mods <= {"relaxed", "cta", "shared::cta", "shared", "b64"}:
            if len(o) != 2:
                raise Unsupported("mbarrier.expect_tx operands")
            self.event(ins, "mbar.expect_tx", pc, loops, addr=self.address(o[0], regs, ins),
                       tx=self.read(o[1], regs, 32, ins))
        elif op in ("try_wait", "test_wait") and "parity" in mods \
                and mods <= {"parity", "acquire", "relaxed", "cta", "cluster", "shared::cta",
                             "shared", "b64"}:
            if len(o) != 3 or not isinstance(o[0], Reg):
                raise Unsupported("mbarrier.try_wait operands")
            res = T.leaf(f"waitres:{ins.index}", BOOL,
                         LeafInfo("nondet", note=f"answer of '{ins.text}'"))
            sem = "relaxed" if "relaxed" in mods else "acquire"
            ev = self.event(ins, "mbar.wait", pc, loops, addr=self.address(o[1], regs, ins),
                            parity=self.read(o[2], regs, 32, ins), test=op,
                            sem=f"{sem}.{scope}")
            ev.result = res
            self.write(ins, regs, res, guard)
        else:
            raise Unsupported(f"instruction {ins.opcode}")

    def op_fence(self, ins, p, o, regs, pc, guard, loops):
        if ins.opcode == "fence.mbarrier_init.release.cluster" and not o:
            self.event(ins, "fence.mbarrier_init", pc, loops)
        elif ins.opcode in ("fence.proxy.async.shared::cta", "fence.proxy.async") and not o:
            self.event(ins, "fence.proxy_async", pc, loops)
        else:
            raise Unsupported(f"instruction {ins.opcode}")

    def op_bar(self, ins, p, o, regs, pc, guard, loops):
        if p[1:] == ("sync",) and len(o) in (1, 2):
            ops = {"id": self.read(o[0], regs, 32, ins)}
            if len(o) == 2:
                ops["count"] = self.read(o[1], regs, 32, ins)
            self.event(ins, "bar.sync", pc, loops, **ops)
        elif p[1:] == ("arrive",) and len(o) == 2:
            self.event(ins, "bar.arrive", pc, loops, id=self.read(o[0], regs, 32, ins),
                       count=self.read(o[1], regs, 32, ins))
        elif p[1:] == ("warp", "sync") and len(o) == 1:
            self.event(ins, "bar.warp.sync", pc, loops, mask=self.read(o[0], regs, 32, ins))
        elif p[1:2] == ("cluster",) and not o and ins.opcode in CLUSTER_BARRIER:
            kind, sem = CLUSTER_BARRIER[ins.opcode]
            self.event(ins, kind, pc, loops, sem=sem)
        else:
            raise Unsupported(f"instruction {ins.opcode}")

    op_barrier = op_bar

    def op_cp(self, ins, p, o, regs, pc, guard, loops):
        op = ins.opcode
        if op == "cp.async.bulk.commit_group" and not o:
            self.event(ins, "commit", pc, loops)
            return
        if op in ("cp.async.bulk.wait_group", "cp.async.bulk.wait_group.read") and len(o) == 1:
            if not isinstance(o[0], Imm):
                raise Unsupported("wait_group count")
            self.event(ins, "wait_group", pc, loops, pending=o[0].value,
                       read=op.endswith(".read"))
            return
        m = re.match(r"^cp\.async\.bulk\.tensor\.([1-5])d\.(.*)$", op)
        if m is None:
            raise Unsupported(f"instruction {op}")
        dims, rest = int(m.group(1)), m.group(2)
        mask = None
        if rest == "shared::cluster.global.tile.mbarrier::complete_tx::bytes" and len(o) == 3:
            smem, tensor, bar = o
            kind = "tma.load"
        elif rest == ("shared::cluster.global.tile.mbarrier::complete_tx::bytes."
                      "multicast::cluster") and len(o) == 4:
            smem, tensor, bar, mask = o  # the CTA mask: a 16-bit operand
            kind = "tma.load"
        elif rest == "global.shared::cta.tile.bulk_group" and len(o) == 2:
            tensor, smem = o
            bar = None
            kind = "tma.store"
        else:
            raise Unsupported(f"instruction {op}")
        if not isinstance(tensor, Addr) or tensor.coords is None \
                or not isinstance(tensor.base, Reg) or tensor.offset:
            raise Unsupported("tensor operand")
        coords = tuple(self.read(c, regs, 32, ins) for c in tensor.coords.items)
        ops: dict[str, object] = {
            "dims": dims, "smem": self.address(smem, regs, ins),
            "tmap": self.read(tensor.base, regs, 64, ins), "coords": coords}
        if bar is not None:
            ops["bar"] = self.address(bar, regs, ins)
        if mask is not None:
            ops["mask"] = self.read(mask, regs, 16, ins)
        self.event(ins, kind, pc, loops, **ops)
