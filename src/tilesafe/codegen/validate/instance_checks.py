"""Per IR statement: its operands equal the IR's for every instance that runs (TS721,
TS724, TS725, TS729), and the PTX runs its instructions for exactly the IR's instances, at
most once each (TS722); a statement that runs has instructions at all (TS720).

Why separate: these are the obligations about one matched statement at a time, and the
only ones whose verdict depends on the loop obligations (`gate`: inside a PTX loop whose
TS727 did not hold, the summary at its head is no longer exact). Which statements execute
as in the IR is passed on to the order obligation (order_checks.py).
"""

from __future__ import annotations

import time

from tilesafe.checkers.obligation import Verdict
from tilesafe.codegen.validate import terms as T
from tilesafe.codegen.validate.context import Context
from tilesafe.codegen.validate.matching import Match
from tilesafe.codegen.validate.operand_claims import OperandClaims
from tilesafe.codegen.validate.reporting import (
    ADDRESS,
    EXECUTION,
    MBARRIER,
    STRUCTURE,
    SYNC,
    TENSOR,
    TMA,
)
from tilesafe.codegen.validate.solve import PROVED, REFUTED, UNKNOWN, Outcome
from tilesafe.codegen.validate.spec import SpecEvent
from tilesafe.codegen.validate.terms import Term

OPERAND_CODE = {"ld": ADDRESS, "st": ADDRESS, "mbar.init": MBARRIER, "mbar.arrive": MBARRIER,
                "mbar.expect_tx": MBARRIER, "mbar.wait": MBARRIER, "tma.load": TMA,
                "tma.store": TMA, "converge": SYNC, "bar.sync": SYNC, "bar.arrive": SYNC,
                "wait_group": SYNC, "wgmma": TENSOR, "setmaxnreg": TENSOR}
ONCE_KINDS = {"st", "mbar.init", "mbar.arrive", "mbar.expect_tx", "bar.sync", "bar.arrive",
              "converge",
              "tma.load", "tma.store", "commit", "wait_group", "wgmma", "wgmma.fence",
              "wgmma.commit", "wgmma.wait", "setmaxnreg", "frag.write", "cluster.arrive",
              "cluster.wait"}
_MEMORY_OPS = {"ld", "st", "atom", "red", "mbarrier", "cp", "bar", "barrier", "fence", "membar",
               "elect", "prefetch", "tensormap", "wgmma", "setmaxnreg"}


def gate(out: Outcome, exact: bool, keep: str | None = None) -> Outcome:
    """Inside a loop whose obligation did not hold, the summary at the loop head is
    neither an over- nor an under-approximation of the PTX's iterations any more (the
    no-wrap assumption is unproved): only a verdict that does not depend on it (`keep`:
    an IR instance the PTX cannot run at all) survives; the rest becomes unknown."""
    if exact or out.verdict == keep or out.verdict == UNKNOWN:
        return out
    return Outcome(UNKNOWN, "inside a PTX loop whose loop obligation does not hold, the "
                   "PTX's iterations are not known exactly")


class InstanceChecks:
    """Operand and execution obligations per matched statement; `run` returns which
    statements execute exactly as in the IR."""

    def __init__(self, cx: Context, bad_nesting: set[int], loop_exact: dict[int, bool]
                 ) -> None:
        self.cx = cx
        self.spec = cx.spec
        self.prover = cx.prover
        self.p = cx.p
        self.rep = cx.rep
        self.claims = OperandClaims(cx)
        self.bad_nesting = bad_nesting
        self.loop_exact = loop_exact
        self.exec_ok: dict[int, bool] = {}  # id(spec event) -> executes as in the IR

    def run(self, matches: list[Match]) -> dict[int, bool]:
        for m in matches:
            self.check_event(m)
        return self.exec_ok

    def check_event(self, m: Match) -> None:
        e = m.spec
        span = e.span
        label = f"{e.what}{' ' + str(e.ops['tensor']) if 'tensor' in e.ops else ''} at " \
                f"{span.line}:{span.col}{self.spec.copy_label(e.copies)}"
        hyps0 = self.spec.assumptions
        ptx = [ev for ev in m.ptx if ev.instr.index not in self.bad_nesting]
        t0 = time.monotonic()
        if len(ptx) != len(m.ptx):
            self.rep.ob(f"{label}: executes as in the IR", Verdict.UNKNOWN, EXECUTION,
                        "an instruction of this statement is in the wrong loops (see "
                        "structure)", span)
            return
        if not m.ptx:
            out = self.prover.satisfiable(hyps0 + [e.cond])
            if out.verdict == REFUTED and self.opaque_memory(e):
                out = Outcome(UNKNOWN, "an instruction the validator does not understand may "
                              "implement it")
            if out.verdict == PROVED:
                self.rep.ob(f"{label}: has its instructions", Verdict.PROVED, STRUCTURE,
                            "never runs for any allowed size: no instruction needed", span,
                            seconds=time.monotonic() - t0)
            else:
                self.rep.report(f"{label}: has its instructions", out, STRUCTURE, span, "",
                                "no PTX instruction implements this statement, which runs",
                                t0)
            return
        # operands, per instruction
        code = OPERAND_CODE.get(e.kind)
        if code is not None:
            for ev in ptx:
                t1 = time.monotonic()
                why = self.claims.undecidable(e)
                if why:
                    self.rep.ob(f"{label}: operands of PTX line {ev.instr.line}",
                                Verdict.UNKNOWN, code, why, span)
                    continue
                hyps = hyps0 + [self.p(ev.pc), e.cond, e.inbounds]
                claim, shown = self.claims.operands(e, ev, hyps)
                exact = all(self.loop_exact.get(lid, False) for lid in self.cx.counted(ev))
                out = gate(self.prover.prove(hyps, claim, shown), exact)
                self.rep.report(f"{label}: operands of PTX line {ev.instr.line}", out, code,
                                span, self._ok_text(e), self._bad_text(e), t1,
                                {"instruction": ev.instr.text})
        self._execution(m, ptx, label)

    def _execution(self, m: Match, ptx: list, label: str) -> None:
        """The PTX runs the statement's instructions for exactly the IR's instances (the
        element, for an mbarrier array's init), each at most once per instance."""
        e = m.spec
        hyps0 = self.spec.assumptions
        elem = e.ops.get("elem")
        t1 = time.monotonic()
        exact = all(self.loop_exact.get(lid, False) for ev in ptx
                    for lid in self.cx.counted(ev))
        pcs = [self.p(ev.pc) for ev in ptx]
        if isinstance(elem, Term):
            cover = T.or_(*[T.and_(pc, T.eq(T.uint(self.p(ev.ops["addr"])),  # type: ignore
                                           e.ops["addr"])) for pc, ev in zip(pcs, ptx,
                                                                             strict=True)])
            ir_to_ptx = self.prover.prove(hyps0 + [e.cond, e.inbounds], cover,
                                          {"IR runs": e.cond, "PTX runs": cover})
        else:
            ir_to_ptx = self.prover.prove(hyps0 + [e.cond], T.or_(*pcs),
                                          {"IR runs": e.cond, "PTX runs": T.or_(*pcs)})
        results = [("the IR runs it but the PTX does not", gate(ir_to_ptx, exact,
                                                                 keep=REFUTED))]
        for ev, pc in zip(ptx, pcs, strict=True):
            results.append((f"PTX line {ev.instr.line} runs where the IR does not",
                            gate(self.prover.prove(hyps0 + [pc], e.cond,
                                                   {"IR runs": e.cond, "PTX runs": pc}),
                                 exact)))
        if e.kind in ONCE_KINDS and len(ptx) > 1:
            for i in range(len(ptx)):
                for j in range(i + 1, len(ptx)):
                    both = [pcs[i], pcs[j]]
                    if isinstance(elem, Term):
                        both.append(T.eq(self.p(ptx[i].ops["addr"]),  # type: ignore
                                         self.p(ptx[j].ops["addr"])))  # type: ignore
                    results.append((f"PTX lines {ptx[i].instr.line} and {ptx[j].instr.line} "
                                    "both run for one instance",
                                    gate(self.prover.prove(hyps0 + both, T.FALSE), exact)))
        self.exec_ok[id(e)] = all(o.verdict == PROVED for _, o in results)
        self.rep.combine(f"{label}: executes exactly when the IR does", results, EXECUTION,
                         e.span, t1, f"{len(ptx)} instruction(s) run for exactly the IR's "
                         "instances, once each")

    def opaque_memory(self, e: SpecEvent) -> bool:
        """Could a not-understood instruction be this statement's implementation? (yes when
        it claims the statement, or is an unannotated memory/synchronisation opcode)"""
        for u in self.cx.res.unknowns:
            a = u.instr.annotation
            if a is not None and (a.line, a.col) == (e.span.line, e.span.col):
                return True
            if a is None and u.instr.parts[0] in _MEMORY_OPS:
                return True
        return False

    @staticmethod
    def _ok_text(e: SpecEvent) -> str:
        return "operands equal the IR's for every instance that runs"

    @staticmethod
    def _bad_text(e: SpecEvent) -> str:
        return {"ld": "the load's address differs from the IR's",
                "st": "the store's address differs from the IR's",
                "wgmma": "a wgmma operand (matrix descriptor, scale-d or immediate) differs "
                         "from the IR's"}.get(
            e.kind, "an operand differs from the IR's")
