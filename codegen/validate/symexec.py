"""Symbolic execution of one PTX kernel over its control-flow graph.

Every register holds a term of its real width (terms.py); every memory or synchronisation
instruction becomes an `Event` with the path condition under which it runs and its operand
terms. The walk visits blocks in an order without back edges and merges the states of
converging paths with if-then-else terms, so the work is linear in the program.

Loops (natural loops of cfg.py) are summarised at their head:

* an *induction register* (one definition in the loop, `r = r + c`, executed once per
  iteration, defined before the loop) holds `init + c * n` for a fresh iteration counter
  n >= 0; the head's path condition adds that the register has not yet wrapped
  (`init + c * n` fits the register as an integer) -- justified by the loop obligation that
  proves the increment never wraps while the loop runs;
* every other register the loop writes holds a fresh value (`h:L<id>:<reg>`) about which
  nothing is known;
* after the loop (one exit target required) the path condition is the one at the loop's
  entry -- a counted loop ends (the loop obligation), a spin loop ends when its wait does
  (the barrier checker proved there is no deadlock) -- and the registers the loop wrote
  hold fresh values again.

An instruction outside the supported subset is recorded as `Unknown` and its destination
gets a fresh value, so one unfamiliar instruction costs a verdict, never a crash.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from tilesafe.codegen.validate import terms as T
from tilesafe.codegen.validate.cfg import Cfg, CfgError
from tilesafe.codegen.validate.ptx_parse import (
    Addr,
    Imm,
    Instr,
    Module,
    Neg,
    Operand,
    Reg,
    Sink,
    Sym,
    Vec,
)
from tilesafe.codegen.validate.terms import BOOL, LeafInfo, Term

SPECIAL = {"%tid.x": "tid.x", "%ctaid.x": "ctaid.x", "%ctaid.y": "ctaid.y",
           "%ctaid.z": "ctaid.z"}

_TYPE = re.compile(r"^(s|u|b|f|bf)(8|16|32|64)$")


class Unsupported(Exception):
    """An instruction (or operand form) outside the subset the executor models."""


@dataclass
class Event:
    """A memory or synchronisation instruction as executed: `pc` is the condition under
    which it runs; `ops` its operands as terms; `loops` the ids of the loops around it."""

    instr: Instr
    kind: str
    pc: Term
    loops: tuple[int, ...]
    block: int
    ops: dict[str, object] = field(default_factory=dict)
    result: Term | None = None  # the loaded value / the wait's answer


@dataclass
class LoopInfo:
    id: int
    header: int
    counter: Term | None
    ivs: dict[str, tuple[Term, int, int]]  # reg -> (value at entry, step, width)
    pc0: Term
    region: Term
    modified: set[str]
    latch_pc: Term = T.FALSE
    exit_conds: list[tuple[int, Term]] = field(default_factory=list)  # (block, pc at exit)
    # top-tested: the only exits leave from the head and every back edge is unconditional,
    # so iteration n's body runs exactly when the head's test passes at n (the summary at
    # the head is then exact once the loop obligation holds)
    top_tested: bool = True


@dataclass
class Unknown:
    instr: Instr
    reason: str


@dataclass
class ExecResult:
    events: list[Event]
    loops: dict[int, LoopInfo]
    unknowns: list[Unknown]
    undefined: list[tuple[Instr, str]]


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


def _ty(suffix: str) -> tuple[str, int]:
    m = _TYPE.match(suffix)
    if m is None:
        raise Unsupported(f"type .{suffix}")
    return m.group(1), int(m.group(2))


def dest_regs(ins: Instr) -> list[str]:
    """Registers an instruction writes."""
    base = ins.parts[0]
    if base in ("st", "bra", "ret", "exit", "trap", "bar", "barrier", "fence", "cp"):
        return []
    if ins.opcode.startswith(("mbarrier.init", "mbarrier.expect_tx")):
        return []
    if ins.operands and isinstance(ins.operands[0], Reg) \
            and not ins.operands[0].name.startswith(("%tid", "%ctaid")):
        return [ins.operands[0].name]
    return []


class Executor:
    def __init__(self, mod: Module, cfg: Cfg) -> None:
        self.mod = mod
        self.cfg = cfg
        self.events: list[Event] = []
        self.unknowns: list[Unknown] = []
        self.undefined: list[tuple[Instr, str]] = []
        self.loops: dict[int, LoopInfo] = {}
        self.params = {p.name: p for p in mod.params}
        self.shared_names = {d[0] for d in mod.shared_decls}
        self.block_id = 0
        # register -> defining instructions, per block
        self.defs: dict[int, list[tuple[Instr, str]]] = {}
        for b in cfg.blocks:
            self.defs[b.id] = [(i, r) for i in b.instrs for r in dest_regs(i)]

    # -- driver ---------------------------------------------------------------------------

    def run(self) -> ExecResult:
        cfg = self.cfg
        out_state: dict[int, tuple[Term, dict[str, Term]]] = {}
        post: dict[int, tuple[Term, dict[str, Term]]] = {}
        header_of = {lp.header: lp for lp in cfg.loops}
        for bid in cfg.rpo:
            block = cfg.blocks[bid]
            contribs: list[tuple[Term, dict[str, Term]]] = []
            seen_loops: set[int] = set()
            for p in sorted(set(block.preds)):
                if (p, bid) in cfg.back_edges or p not in out_state:
                    continue
                exited = [lid for lid in cfg.loop_of[p] if lid not in cfg.loop_of[bid]]
                if exited:
                    outer = exited[0]
                    if outer not in seen_loops:
                        seen_loops.add(outer)
                        contribs.append(post[outer])
                    continue
                pc_end, regs_end = out_state[p]
                for t, guard, negated in cfg.blocks[p].succs:
                    if t == bid:
                        contribs.append((T.and_(pc_end, self._cond(guard, negated, regs_end)),
                                         regs_end))
            if bid == 0:
                contribs.append((T.TRUE, {}))
            if not contribs:
                continue
            pc, regs = self._merge(contribs)
            lp = header_of.get(bid)
            if lp is not None:
                pc, regs, post[lp.id] = self._enter_loop(lp.id, pc, regs)
            self.block_id = bid
            for ins in block.instrs:
                pc, regs = self.step(ins, pc, regs, cfg.loop_of[bid])
            out_state[bid] = (pc, regs)
            for t, guard, negated in block.succs:
                if (bid, t) in cfg.back_edges:
                    info = self.loops[header_of[t].id]
                    info.latch_pc = T.or_(info.latch_pc,
                                          T.and_(pc, self._cond(guard, negated, regs)))
                for lid in cfg.loop_of[bid]:
                    if lid not in cfg.loop_of[t] and lid in self.loops:
                        self.loops[lid].exit_conds.append(
                            (bid, T.and_(pc, self._cond(guard, negated, regs))))
        for lp in cfg.loops:
            targets = {t for _, t in lp.exits
                       if not any(lp.body <= o.body and t not in o.body for o in cfg.loops
                                  if o is not lp and lp.body < o.body)}
            if len(targets) > 1:
                raise CfgError(f"loop at block {lp.header} leaves to {len(targets)} places")
        return ExecResult(self.events, self.loops, self.unknowns, self.undefined)

    def _cond(self, guard: Reg | None, negated: bool, regs: dict[str, Term]) -> Term:
        if guard is None:
            return T.TRUE
        v = self.read(guard, regs, BOOL)
        return T.not_(v) if negated else v

    def _merge(self, contribs: list[tuple[Term, dict[str, Term]]]
               ) -> tuple[Term, dict[str, Term]]:
        if len(contribs) == 1:
            return contribs[0][0], dict(contribs[0][1])
        pc = contribs[0][0]
        for c, _ in contribs[1:]:
            pc = T.merge_or(pc, c)
        conj = [set(map(id, c.args)) if c.op == "and_" else {id(c)} for c, _ in contribs]
        common = set.intersection(*conj)
        resid = []
        for c, _ in contribs:
            parts = list(c.args) if c.op == "and_" else [c]
            resid.append(T.and_(*[x for x in parts if id(x) not in common]))
        names: set[str] = set()
        for _, r in contribs:
            names.update(r)
        regs: dict[str, Term] = {}
        for name in sorted(names):
            vals = [r.get(name) for _, r in contribs]
            if all(v is vals[0] for v in vals):
                regs[name] = vals[0]  # type: ignore[assignment]
                continue
            w = next(v.w for v in vals if v is not None)
            vals = [v if v is not None else self._undef(name, w) for v in vals]
            acc = vals[-1]
            for cond, v in zip(reversed(resid[:-1]), reversed(vals[:-1]), strict=True):
                acc = T.ite(cond, v, acc)
            regs[name] = acc
        return pc, regs

    def _undef(self, name: str, w: int) -> Term:
        return T.leaf(f"undef:{name}", w, LeafInfo("nondet", note="never written"))

    def _enter_loop(self, lid: int, pc0: Term, regs0: dict[str, Term]
                    ) -> tuple[Term, dict[str, Term], tuple[Term, dict[str, Term]]]:
        lp = self.cfg.loops[lid]
        modified: set[str] = set()
        defs: dict[str, list[tuple[Instr, int]]] = {}
        for b in lp.body:
            for ins, r in self.defs[b]:
                modified.add(r)
                defs.setdefault(r, []).append((ins, b))
        counter = T.leaf(f"n:L{lid}", 64, LeafInfo("int", signed=False, lo=0, hi=2**64 - 1,
                                                   note=f"iteration of loop L{lid}"))
        ivs: dict[str, tuple[Term, int, int]] = {}
        for r in sorted(modified):
            step = self._induction_step(lp, r, defs[r], regs0)
            if step is not None:
                ivs[r] = (regs0[r], step, self.width(r))
        regs = dict(regs0)
        region_parts = []
        for r in sorted(modified):
            if r in ivs:
                init, step, w = ivs[r]
                n = T.trunc(counter, w) if w < 64 else counter
                regs[r] = T.add(init, T.mul(n, T.bv(step, w)))
                bound = T.iadd(T.sint(init), T.imul(T.uint(counter), T.const_int(step)))
                lim = 2 ** (w - 1) - 1 if step > 0 else -(2 ** (w - 1))
                region_parts.append(T.ile(bound, T.const_int(lim)) if step > 0
                                    else T.ile(T.const_int(lim), bound))
            else:
                regs[r] = T.leaf(f"h:L{lid}:{r}", self.width(r),
                                 LeafInfo("nondet", note=f"{r} at the head of loop L{lid}"))
        region = T.and_(*region_parts)
        info = LoopInfo(lid, lp.header, counter if ivs else None, ivs, pc0, region, modified)
        blocks = self.cfg.blocks
        info.top_tested = all(b == lp.header for b, _ in lp.exits) and all(
            g is None for latch in lp.latches for t, g, _ in blocks[latch].succs
            if t == lp.header)
        self.loops[lid] = info
        after = dict(regs0)
        for r in modified:
            after[r] = T.leaf(f"x:L{lid}:{r}", self.width(r),
                              LeafInfo("nondet", note=f"{r} after loop L{lid}"))
        return T.and_(pc0, region), regs, (pc0, after)

    def _induction_step(self, lp, r: str, defs: list[tuple[Instr, int]],
                        regs0: dict[str, Term]) -> int | None:
        if len(defs) != 1 or r not in regs0:
            return None
        ins, b = defs[0]
        if ins.guard is not None or ins.parts[0] not in ("add", "sub") or len(ins.parts) != 2:
            return None
        if self.cfg.loop_of[b][-1:] != [lp.id]:
            return None  # inside an inner loop: not once per iteration
        if not all(self.cfg.dominates(b, latch) for latch in lp.latches):
            return None
        d, a, c = ins.operands
        w = self.width(r)
        if isinstance(a, Reg) and a.name == r and isinstance(c, Imm) and c.bits is None:
            step = T.signed(c.value, w)
        elif ins.parts[0] == "add" and isinstance(c, Reg) and c.name == r \
                and isinstance(a, Imm) and a.bits is None:
            step = T.signed(a.value, w)
        else:
            return None
        if ins.parts[1][1:] != str(w):
            return None
        step = -step if ins.parts[0] == "sub" else step
        return step if step != 0 else None

    def width(self, name: str) -> int:
        return reg_width(self.mod, name)

    # -- operands -------------------------------------------------------------------------

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
                    v = self._undef(op.name, self.width(op.name))
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
            value = T.ite(guard, value, old if old is not None else self._undef(d.name, w))
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

    # -- instructions ---------------------------------------------------------------------

    def step(self, ins: Instr, pc: Term, regs: dict[str, Term], loops: list[int]
             ) -> tuple[Term, dict[str, Term]]:
        regs = dict(regs)
        guard = T.TRUE
        if ins.guard is not None and ins.opcode not in ("bra", "bra.uni", "ret", "exit", "trap"):
            g = self.read(ins.guard, regs, BOOL, ins)
            guard = T.not_(g) if ins.guard_negated else g
        try:
            self.semantics(ins, regs, T.and_(pc, guard), guard, tuple(loops))
        except Unsupported as err:
            self.unknowns.append(Unknown(ins, str(err)))
            for r in dest_regs(ins):
                try:
                    w = self.width(r)
                except Unsupported:
                    continue
                regs[r] = T.leaf(f"u:{ins.index}:{r}", w,
                                 LeafInfo("nondet", note=f"result of '{ins.text}'"))
        return pc, regs

    def event(self, ins: Instr, kind: str, pc: Term, loops: tuple[int, ...], **ops: object
              ) -> Event:
        ev = Event(ins, kind, pc, loops, self.block_id, dict(ops))
        self.events.append(ev)
        return ev

    def semantics(self, ins: Instr, regs: dict[str, Term], pc: Term, guard: Term,
                  loops: tuple[int, ...]) -> None:
        p = ins.parts
        base = p[0]
        o = ins.operands
        if base in ("bra", "ret", "exit", "trap"):
            return
        handler = getattr(self, "op_" + base, None)
        if handler is None:
            raise Unsupported(f"instruction {ins.opcode}")
        handler(ins, p, o, regs, pc, guard, loops)

    # integer and predicate arithmetic

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
        kind, w = _ty(p[1])
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
        kind, w = _ty(p[2])
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
        kind, w = _ty(p[2])
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
        kind, w = _ty(p[-1])
        if kind == "f":
            return self._float(ins, o, regs, guard)
        if kind != "s" or len(p) != 2:
            raise Unsupported(f"instruction {ins.opcode}")
        self.write(ins, regs, T.neg(self.read(o[1], regs, w, ins)), guard)

    def op_abs(self, ins, p, o, regs, pc, guard, loops):
        kind, w = _ty(p[-1])
        if kind == "f":
            return self._float(ins, o, regs, guard)
        if kind != "s" or len(p) != 2:
            raise Unsupported(f"instruction {ins.opcode}")
        self.write(ins, regs, T.babs(self.read(o[1], regs, w, ins)), guard)

    def op_not(self, ins, p, o, regs, pc, guard, loops):
        if p[1:] == ("pred",):
            return self.write(ins, regs, T.not_(self.read(o[1], regs, BOOL, ins)), guard)
        kind, w = _ty(p[-1])
        if kind != "b" or len(p) != 2:
            raise Unsupported(f"instruction {ins.opcode}")
        self.write(ins, regs, T.bnot(self.read(o[1], regs, w, ins)), guard)

    def _logic(self, ins, p, o, regs, guard, bvfn, predfn):
        if p[1:] == ("pred",):
            a = self.read(o[1], regs, BOOL, ins)
            b = self.read(o[2], regs, BOOL, ins)
            return self.write(ins, regs, predfn(a, b), guard)
        kind, w = _ty(p[-1])
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
        _, w = _ty(p[1])
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
        kind, w = _ty(p[-1])
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
        kind, w = _ty(p[-1])
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
        kind, w = _ty(p[1])
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
        _, w = _ty(p[1])
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
        kind, w = _ty(ty)
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
        dk, dw = _ty(tys[0])
        sk, sw = _ty(tys[1])
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

    def op_ld(self, ins, p, o, regs, pc, guard, loops):
        if len(o) != 2:
            raise Unsupported(f"instruction {ins.opcode}")
        if p[1] == "param":
            if len(p) != 3 or not isinstance(o[1], Addr) or not isinstance(o[1].base, Sym):
                raise Unsupported(f"instruction {ins.opcode}")
            prm = self.params.get(o[1].base.name)
            if prm is None or prm.array is not None or o[1].offset:
                raise Unsupported(f"load of parameter {o[1].base.name}")
            _, w = _ty(p[2])
            pk, pw = _ty(prm.type)
            if pw != w:
                raise Unsupported(f"{w}-bit load of the {pw}-bit parameter {prm.name}")
            return self.write(ins, regs, T.leaf(f"param:{prm.name}", w), guard)
        space, nc, rest = self._space(p)
        if len(rest) != 1:
            raise Unsupported(f"instruction {ins.opcode}")
        kind, w = _ty(rest[0])
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
        raise Unsupported(f"state space .{p[1]}")

    def op_st(self, ins, p, o, regs, pc, guard, loops):
        space, nc, rest = self._space(p)
        if nc or len(rest) != 1 or len(o) != 2:
            raise Unsupported(f"instruction {ins.opcode}")
        kind, w = _ty(rest[0])
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
        shared = "shared::cta" in mods or "shared" in mods
        if not shared or "b64" not in mods:
            raise Unsupported(f"instruction {ins.opcode}")
        if op == "init" and mods <= {"shared::cta", "shared", "b64"}:
            if len(o) != 2:
                raise Unsupported("mbarrier.init operands")
            self.event(ins, "mbar.init", pc, loops, addr=self.address(o[0], regs, ins),
                       count=self.read(o[1], regs, 32, ins))
        elif op == "arrive" and mods <= {"expect_tx", "release", "cta", "shared::cta",
                                         "shared", "b64"}:
            tx = "expect_tx" in mods
            if len(o) != (3 if tx else 2) or not isinstance(o[0], (Sink, Reg)):
                raise Unsupported("mbarrier.arrive operands")
            ops: dict[str, object] = {"addr": self.address(o[1], regs, ins)}
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
                and mods <= {"parity", "acquire", "cta", "shared::cta", "shared", "b64"}:
            if len(o) != 3 or not isinstance(o[0], Reg):
                raise Unsupported("mbarrier.try_wait operands")
            res = T.leaf(f"waitres:{ins.index}", BOOL,
                         LeafInfo("nondet", note=f"answer of '{ins.text}'"))
            ev = self.event(ins, "mbar.wait", pc, loops, addr=self.address(o[1], regs, ins),
                            parity=self.read(o[2], regs, 32, ins), test=op)
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
        if rest == "shared::cluster.global.tile.mbarrier::complete_tx::bytes" and len(o) == 3:
            smem, tensor, bar = o
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
        self.event(ins, kind, pc, loops, **ops)


def execute(mod: Module, cfg: Cfg) -> ExecResult:
    return Executor(mod, cfg).run()


__all__ = ["Event", "ExecResult", "Executor", "LoopInfo", "Unknown", "Unsupported",
           "execute", "Vec"]
