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

This module is the walk and the loop summaries; what each instruction means is in
symexec_arith.py (register values) and symexec_memory.py (events), how operands read and
write in symexec_operands.py.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tilesafe.codegen.validate import terms as T
from tilesafe.codegen.validate.cfg import Cfg, CfgError
from tilesafe.codegen.validate.ptx_parse import Imm, Instr, Module, Reg, Vec
from tilesafe.codegen.validate.symexec_arith import ArithmeticOps
from tilesafe.codegen.validate.symexec_memory import MemoryOps
from tilesafe.codegen.validate.symexec_operands import (  # noqa: F401 - re-exported
    SPECIAL,
    Operands,
    Unsupported,
    reg_width,
    undef,
)
from tilesafe.codegen.validate.symexec_tensor import TensorOps, accumulator_registers
from tilesafe.codegen.validate.terms import BOOL, LeafInfo, Term


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
    # the registers just before the instruction (read-only): what a fragment register
    # holds where a store reads it (fragment_checks.py)
    state: dict[str, Term] = field(default_factory=dict, repr=False)


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


def dest_regs(ins: Instr) -> list[str]:
    """Registers an instruction writes (a wgmma: its accumulator registers)."""
    base = ins.parts[0]
    if ins.opcode.startswith("wgmma.mma_async") and ins.operands \
            and isinstance(ins.operands[0], Vec):
        return [r.name for r in ins.operands[0].items if isinstance(r, Reg)]
    if base in ("st", "bra", "ret", "exit", "trap", "bar", "barrier", "fence", "cp"):
        return []
    if ins.opcode.startswith(("mbarrier.init", "mbarrier.expect_tx")):
        return []
    if ins.operands and isinstance(ins.operands[0], Reg) \
            and not ins.operands[0].name.startswith(("%tid", "%ctaid")):
        return [ins.operands[0].name]
    return []


class Executor:
    """The walk over the CFG in an order without back edges: merges at joins, summaries at
    loop heads, one instruction at a time through its family's handler."""

    def __init__(self, mod: Module, cfg: Cfg) -> None:
        self.mod = mod
        self.cfg = cfg
        self.events: list[Event] = []
        self.unknowns: list[Unknown] = []
        self.loops: dict[int, LoopInfo] = {}
        self.operands = Operands(mod)
        self.read = self.operands.read
        self.width = self.operands.width
        self.block_id = 0
        # base opcode -> handler(ins, parts, operands, regs, pc, guard, loops)
        self.handlers = {name[3:]: getattr(family, name)
                         for family in (ArithmeticOps(self.operands),
                                        MemoryOps(self.operands, self.event),
                                        TensorOps(self.operands, self.event))
                         for name in dir(family) if name.startswith("op_")}
        # every wgmma's accumulator registers: any other write to one is a fragment write
        self.frag_regs = accumulator_registers(mod)
        self.state: dict[str, Term] = {}  # the registers before the current instruction
        # register -> defining instructions, per block
        self.defs: dict[int, list[tuple[Instr, str]]] = {}
        for b in cfg.blocks:
            self.defs[b.id] = [(i, r) for i in b.instrs for r in dest_regs(i)]

    @property
    def undefined(self) -> list[tuple[Instr, str]]:
        return self.operands.undefined

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
            vals = [v if v is not None else undef(name, w) for v in vals]
            acc = vals[-1]
            for cond, v in zip(reversed(resid[:-1]), reversed(vals[:-1]), strict=True):
                acc = T.ite(cond, v, acc)
            regs[name] = acc
        return pc, regs

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

    # -- instructions ---------------------------------------------------------------------

    def step(self, ins: Instr, pc: Term, regs: dict[str, Term], loops: list[int]
             ) -> tuple[Term, dict[str, Term]]:
        # `regs` is never written again once a step returned it (each step copies), so it
        # is the state before this instruction for the events that keep it
        self.state = regs
        regs = dict(regs)
        guard = T.TRUE
        if ins.guard is not None and ins.opcode not in ("bra", "bra.uni", "ret", "exit", "trap"):
            g = self.read(ins.guard, regs, BOOL, ins)
            guard = T.not_(g) if ins.guard_negated else g
        try:
            self.semantics(ins, regs, T.and_(pc, guard), guard, tuple(loops))
            if ins.parts[0] != "wgmma":
                for r in dest_regs(ins):
                    if r in self.frag_regs:
                        self.event(ins, "frag.write", T.and_(pc, guard), tuple(loops), reg=r,
                                   value=regs[r])
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
        ev = Event(ins, kind, pc, loops, self.block_id, dict(ops), state=self.state)
        self.events.append(ev)
        return ev

    def semantics(self, ins: Instr, regs: dict[str, Term], pc: Term, guard: Term,
                  loops: tuple[int, ...]) -> None:
        p = ins.parts
        base = p[0]
        o = ins.operands
        if base in ("bra", "ret", "exit", "trap"):
            return
        handler = self.handlers.get(base)
        if handler is None:
            raise Unsupported(f"instruction {ins.opcode}")
        handler(ins, p, o, regs, pc, guard, loops)


def execute(mod: Module, cfg: Cfg) -> ExecResult:
    return Executor(mod, cfg).run()


__all__ = ["Event", "ExecResult", "Executor", "LoopInfo", "Unknown", "Unsupported",
           "execute", "Vec"]
