"""How a translation obligation is written down: its code, its verdict from the solver's
outcome, and its counterexample in the kernel's own words.

Why separate: every obligation family (interface, matching, loops, instances, order, waits,
shared memory; obligations.py runs them) reports the same way -- a verdict, a TS72x code
only when not proved, a counterexample naming sizes, `thread`, `block.x`, `iteration of k
(36:5)` rather than solver leaves -- and one reporter keeps those rules in one place and
owns the list of obligations in the order they were found.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from tilesafe.checkers.obligation import Obligation, Verdict
from tilesafe.codegen.validate import terms as T
from tilesafe.codegen.validate.solve import PROVED, REFUTED, UNKNOWN, Outcome, Prover
from tilesafe.codegen.validate.spec import Spec
from tilesafe.codegen.validate.symexec import Event
from tilesafe.codegen.validate.terms import Term
from tilesafe.frontend import ir
from tilesafe.frontend.span import Span

CHECKER = "translation"
METHOD = "z3 symbolic execution"

STRUCTURE, ADDRESS, EXECUTION, NONCOHERENT = "TS720", "TS721", "TS722", "TS723"
MBARRIER, TMA, ORDER, LOOP, SMEM, SYNC = "TS724", "TS725", "TS726", "TS727", "TS728", "TS729"
TENSOR, FRAGMENT = "TS730", "TS731"
CODES = {
    STRUCTURE: "PTX structure: interface, annotations, missing or unknown instructions",
    ADDRESS: "address of a global or shared load/store differs from the IR's",
    EXECUTION: "an instruction runs for other instances than its IR statement (or twice)",
    NONCOHERENT: "ld.global.nc on a tensor the kernel writes",
    MBARRIER: "mbarrier operand (address, count, tx bytes, parity) differs from the IR's",
    TMA: "TMA operand (shared address, tensor map, coordinates, mbarrier) differs",
    ORDER: "memory/synchronisation operations in a different order than the IR's",
    LOOP: "loop start, step, exit test or wrap-around differs from the IR's for",
    SMEM: "shared-memory base or extent differs from the layout contract",
    SYNC: "other synchronisation operand (bar.sync, warp mask, wait_group, spin loop)",
    TENSOR: "wgmma operand (matrix descriptor, scale-d, immediates) or setmaxnreg differs",
    FRAGMENT: "fragment registers: an accumulator list, or an acc[r] read or written "
              "through another register than the IR's",
}


def obligation(name: str, verdict: Verdict, code: str | None, message: str = "",
               span: Span | None = None, cex: dict | None = None,
               evidence: dict | None = None, seconds: float = 0.0,
               method: str = METHOD) -> Obligation:
    """One translation obligation; a proved one carries no code (codes name failures)."""
    return Obligation(CHECKER, name, verdict, method, span, code if verdict
                      is not Verdict.PROVED else None, message, seconds=seconds,
                      counterexample=cex, evidence=evidence or {})


class Reporter:
    """Appends obligations to `out`; turns solver outcomes and models into verdicts and
    counterexamples. `p` renames a PTX term to the IR's names (context.Renaming)."""

    def __init__(self, kernel: ir.Kernel, spec: Spec, prover: Prover,
                 p: Callable[[Term], Term], out: list[Obligation]) -> None:
        self.k = kernel
        self.spec = spec
        self.prover = prover
        self.p = p
        self.out = out

    def ob(self, name: str, verdict: Verdict, code: str | None, message: str = "",
           span: Span | None = None, cex: dict | None = None, evidence: dict | None = None,
           seconds: float = 0.0, method: str = METHOD) -> Obligation:
        o = obligation(name, verdict, code, message, span, cex, evidence, seconds, method)
        self.out.append(o)
        return o

    def span(self, ins) -> Span:
        """Where an instruction's annotation points in the source (else the kernel)."""
        a = ins.annotation
        if a is not None:
            return Span(self.k.span.path, a.line, a.col, a.line, a.col)
        return self.k.span

    def report(self, name: str, outcome: Outcome, code: str, span: Span | None,
               ok: str, bad: str, t0: float, evidence: dict | None = None) -> Obligation:
        secs = time.monotonic() - t0
        if outcome.verdict == PROVED:
            return self.ob(name, Verdict.PROVED, code, ok, span, seconds=secs,
                           evidence=evidence)
        if outcome.verdict == REFUTED:
            cex = self.describe(outcome.values)
            cex.update(outcome.shown)
            if outcome.note:
                cex["data"] = outcome.note
            return self.ob(name, Verdict.REFUTED, code, bad, span, cex, evidence, secs)
        return self.ob(name, Verdict.UNKNOWN, code, f"{bad} could not be decided: "
                       f"{outcome.note}", span, evidence=evidence, seconds=secs)

    def combine(self, name: str, results: list[tuple[str, Outcome]], code: str,
                span: Span | None, t0: float, ok: str) -> None:
        """One obligation from several questions: the first refutation, else every
        undecided one, else proved."""
        secs = time.monotonic() - t0
        for what, out in results:
            if out.verdict == REFUTED:
                cex = self.describe(out.values)
                cex.update(out.shown)
                self.ob(name, Verdict.REFUTED, code, what, span, cex, seconds=secs)
                return
        unknown = [(w, o) for w, o in results if o.verdict == UNKNOWN]
        if unknown:
            self.ob(name, Verdict.UNKNOWN, code, "; ".join(
                f"could not decide whether {w}: {o.note}" for w, o in unknown), span,
                seconds=secs)
            return
        self.ob(name, Verdict.PROVED, code, ok, span, seconds=secs)

    def describe(self, values: dict[str, int]) -> dict[str, object]:
        """A model's leaves under the names a person knows them by."""
        out: dict[str, object] = {}
        fors = {f"n:F{lp.node.var.uid}": lp.node for lp in self.spec.loops.values()}
        for name, v in sorted(values.items()):
            if name.startswith("param:s_"):
                out[name[8:]] = T.signed(v, 64)
            elif name == "tid.x":
                out["thread"] = v
            elif name.startswith("ctaid."):
                out["block." + name[6:]] = v
            elif name in fors:
                f = fors[name]
                out[f"iteration of {f.var.name} ({f.span.line}:{f.span.col})"] = v
            elif name.startswith("n:L"):
                out[f"iteration of PTX loop {name[2:]}"] = v
            elif name == "tsmem":
                out["tsmem (shared address of the dynamic array)"] = v
            elif name.startswith("e:"):
                out["barrier element"] = v
            elif name.startswith("gbase:p_"):
                out[f"global address of {name[8:]}"] = hex(v)
            elif name.startswith("tmap:"):
                out[f"generic address of {name[5:]}"] = hex(v)
            elif name.startswith("param_addr:"):
                out[f"param-space address of {name[11:]}"] = hex(v)
            elif name.startswith("param:"):
                out[f"parameter {name[6:]}"] = hex(v)
            else:
                out[name] = v
        return out

    def witness(self, ev: Event, **extra: object) -> dict[str, object]:
        """A concrete instance (sizes, block, thread, iterations) in which the PTX runs the
        instruction, for structural refutations."""
        out = self.prover.satisfiable(self.spec.assumptions + [self.p(ev.pc)])
        cex = self.describe(out.values) if out.verdict == REFUTED else {}
        cex.update({"instruction": ev.instr.text, "PTX line": ev.instr.line}, **extra)
        return cex
