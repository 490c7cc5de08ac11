"""TS727, loops: each IR `for` has a PTX loop that runs exactly its iterations -- same start,
same step, the same exit test at every iteration -- and whose induction registers never
wrap around while it runs.

Why separate: the loop summaries of symexec.py (`init + c * n` at the head, with the
no-wrap assumption) are only exact where this obligation holds, so its answer -- which PTX
loops are exact -- decides whether the instance obligations (instance_checks.py) may trust
a verdict inside a loop.
"""

from __future__ import annotations

import time

from tilesafe.checkers.obligation import Verdict
from tilesafe.codegen.validate import spec as specmod
from tilesafe.codegen.validate import terms as T
from tilesafe.codegen.validate.context import Context
from tilesafe.codegen.validate.reporting import LOOP
from tilesafe.codegen.validate.solve import PROVED, REFUTED, Outcome
from tilesafe.codegen.validate.symexec import LoopInfo
from tilesafe.codegen.validate.terms import Term
from tilesafe.frontend import ir


class LoopChecks:
    """One TS727 obligation per IR `for`; `run` returns which PTX loops are exact."""

    def __init__(self, cx: Context, for_to_loop: dict[int, int]) -> None:
        self.spec = cx.spec
        self.res = cx.res
        self.prover = cx.prover
        self.p = cx.p
        self.rep = cx.rep
        self.for_to_loop = for_to_loop
        self.loop_exact: dict[int, bool] = {}  # PTX loop id -> its loop obligation holds

    def run(self) -> dict[int, bool]:
        """One obligation per IR `for`; returns which PTX loops are summarised exactly."""
        hyps0 = self.spec.assumptions
        for uid, sl in self.spec.loops.items():
            f = sl.node
            name = f"loop for {f.var.name} at {f.span.line}:{f.span.col}"
            t0 = time.monotonic()
            var = T.iadd(sl.lo, T.imul(T.uint(sl.counter), T.const_int(sl.step)))
            runs = T.and_(sl.cond, T.ilt(var, sl.hi))
            lid = self.for_to_loop.get(uid)
            if lid is None:
                out = self.prover.satisfiable(hyps0 + [runs])
                if out.verdict == PROVED:
                    self.rep.ob(name, Verdict.PROVED, LOOP, "never runs for any allowed size; "
                                "no PTX loop needed", f.span, seconds=time.monotonic() - t0)
                elif out.verdict == REFUTED and not self._has_events(f):
                    self.rep.ob(name, Verdict.UNKNOWN, LOOP, "a loop without memory or "
                                "synchronisation that no PTX loop is annotated as", f.span)
                else:
                    self.rep.report(name, out, LOOP, f.span, "", "the loop can run but has "
                                    "no PTX loop", t0)
                continue
            info = self.res.loops[lid]
            if not info.top_tested:
                self.loop_exact[lid] = False
                self.rep.ob(name, Verdict.UNKNOWN, LOOP, f"PTX loop L{lid} leaves from "
                            "elsewhere than its head or has a conditional back edge: only "
                            "top-tested loops are summarised exactly", f.span,
                            seconds=time.monotonic() - t0)
                continue
            self._summarised(name, sl, lid, info, var, t0)
        return self.loop_exact

    def _summarised(self, name: str, sl: specmod.SpecLoop, lid: int, info: LoopInfo,
                    var: Term, t0: float) -> None:
        """A top-tested PTX loop against its `for`: the same iterations (the first
        difference, if any), no wrap-around, and the primary register's start and step."""
        hyps0 = self.spec.assumptions
        f = sl.node
        pc0, region, latch = self.p(info.pc0), self.p(info.region), self.p(info.latch_pc)
        n = specmod.counter(f)
        prev = T.ilt(T.iadd(sl.lo, T.imul(T.isub(T.uint(n), T.const_int(1)),
                                          T.const_int(sl.step))), sl.hi)
        # reached: iteration 0, or the IR ran iteration n - 1 (a counterexample at the
        # first difference is then a real execution; see docs/codegen.md)
        reached = T.or_(T.eq(T.uint(n), T.const_int(0)), prev)
        results: list[tuple[str, Outcome]] = []
        # iteration n completes exactly when lo + step*n < hi (for the IR's loop)
        it = self.first_difference(hyps0 + [pc0, sl.cond, region, reached],
                                   T.eq(latch, T.ilt(var, sl.hi)),
                                   {"PTX continues": latch,
                                    "IR continues": T.ilt(var, sl.hi)}, n)
        results.append(("the PTX loop and the IR's for run different iterations", it))
        primary = [r for r, (init, _, w) in info.ivs.items()
                   if self._mentions(info.latch_pc, self.exe_value(info, r))]
        for r, (init, step, w) in info.ivs.items():
            after = T.iadd(T.sint(self.p(init)),
                           T.imul(T.iadd(T.uint(n), T.const_int(1)), T.const_int(step)))
            lim = T.ile(after, T.const_int(2 ** (w - 1) - 1)) if step > 0 \
                else T.ile(T.const_int(-(2 ** (w - 1))), after)
            results.append((f"induction register {r} can wrap around", self.prover.prove(
                hyps0 + [pc0, region, latch, reached, sl.cond], lim,
                {f"{r} after the step": after})))
        note = ""
        if len(primary) == 1:
            r = primary[0]
            init, step, w = info.ivs[r]
            if step != sl.step:
                results.append((f"{r} steps by {step}, the IR by {sl.step}", Outcome(
                    REFUTED, "", {}, {"PTX step": step, "IR step": sl.step})))
            results.append((f"{r} does not start at the IR's lower bound", self.prover.prove(
                hyps0 + [pc0, sl.cond], T.eq(T.sint(self.p(init)), sl.lo),
                {"PTX start": T.sint(self.p(init)), "IR start": sl.lo})))
            note = f"induction register {r}, step {step}"
        else:
            note = "no single induction register decides the exit; checked by the " \
                   "iteration equivalence"
        self.loop_exact[lid] = all(o.verdict == PROVED for _, o in results)
        self.rep.combine(name, results, LOOP, f.span, t0,
                         f"PTX loop L{lid} runs iteration n exactly when {f.var.name} = lo + "
                         f"{sl.step}n < hi, without wrap-around ({note})")

    def first_difference(self, hyps: list[Term], claim: Term, show: dict[str, Term],
                         n: Term) -> Outcome:
        """A refutation at the smallest iteration the solver can find (a few rounds): the
        first iteration where PTX and IR differ is the one a real run reaches."""
        out = self.prover.prove(hyps, claim, show)
        name = str(n.val)
        for _ in range(6):
            if out.verdict != REFUTED or not out.values.get(name):
                break
            smaller = self.prover.prove(hyps + [T.ilt(T.uint(n),
                                                      T.const_int(out.values[name]))],
                                        claim, show)
            if smaller.verdict != REFUTED:
                break
            out = smaller
        return out

    @staticmethod
    def exe_value(info: LoopInfo, r: str) -> Term:
        init, step, w = info.ivs[r]
        n = T.trunc(info.counter, w) if w < 64 else info.counter
        return T.add(init, T.mul(n, T.bv(step, w)))

    @staticmethod
    def _mentions(t: Term, sub: Term) -> bool:
        return any(x is sub for x in T.postorder([t]))

    def _has_events(self, f: ir.For) -> bool:
        return any(f in e.fors for e in self.spec.events)
