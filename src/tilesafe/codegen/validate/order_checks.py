"""Obligations about the module as a whole rather than one statement: `ld.global.nc` reads
only tensors the kernel never writes (TS723), and memory and synchronisation instructions
come in the IR's program order on the control flow (TS726).

Why separate: both look at every matched instruction at once (the written tensors; pairs
of instructions on the CFG without back edges) and neither needs a loop summary; the order
obligation trusts a reversed pair only where both statements' execution obligations held.
"""

from __future__ import annotations

import time

from tilesafe.checkers.obligation import Verdict
from tilesafe.codegen.validate.context import Context
from tilesafe.codegen.validate.matching import Match
from tilesafe.codegen.validate.reporting import NONCOHERENT, ORDER
from tilesafe.codegen.validate.solve import PROVED, REFUTED, UNKNOWN, Outcome
from tilesafe.codegen.validate.symexec import Event


class OrderChecks:
    """`noncoherent()` (TS723) and `order()` (TS726) over all matched instructions."""

    def __init__(self, cx: Context, matches: list[Match], exec_ok: dict[int, bool]) -> None:
        self.cx = cx
        self.k = cx.kernel
        self.spec = cx.spec
        self.rep = cx.rep
        self.matches = matches
        self.exec_ok = exec_ok

    # -- ld.global.nc -----------------------------------------------------------------------

    def noncoherent(self) -> None:
        t0 = time.monotonic()
        bad = []
        for m in self.matches:
            for ev in m.ptx:
                if ev.kind == "ld" and ev.ops.get("nc"):
                    tensor = m.spec.ops["tensor"]
                    if tensor in self.spec.written:
                        bad.append((ev, m.spec))
        if not bad:
            self.rep.ob("ld.global.nc reads only tensors the kernel never writes",
                        Verdict.PROVED, NONCOHERENT,
                        f"written tensors: {sorted(self.spec.written) or 'none'}",
                        self.k.span, seconds=time.monotonic() - t0, method="structural")
            return
        for ev, e in bad:
            cex = self.rep.witness(ev, **{"tensor written by":
                                          self._writer(str(e.ops["tensor"]))})
            self.rep.ob(f"PTX line {ev.instr.line}: {ev.instr.text}", Verdict.REFUTED,
                        NONCOHERENT, f"non-coherent load from '{e.ops['tensor']}', which the "
                        "kernel writes: the read-only cache may return stale data", e.span,
                        cex, seconds=time.monotonic() - t0, method="structural + z3")

    def _writer(self, tensor: str) -> str:
        for e in self.spec.events:
            if e.kind in ("st", "tma.store") and (e.ops.get("tensor") == tensor or (
                    e.kind == "tma.store" and self.k.tensormap(str(e.ops["tmap"])[3:]).tensor
                    == tensor)):
                return f"{e.what} at {e.span.line}:{e.span.col}"
        return "?"

    # -- order ------------------------------------------------------------------------------

    def order(self) -> None:
        t0 = time.monotonic()
        cfg = self.cx.cfg
        # reachability without back edges; a loop's latch reaches its exit targets
        succ: dict[int, set[int]] = {b.id: set() for b in cfg.blocks}
        for b in cfg.blocks:
            for t, _, _ in b.succs:
                if (b.id, t) not in cfg.back_edges:
                    succ[b.id].add(t)
        for lp in cfg.loops:
            targets = {t for _, t in lp.exits}
            for latch in lp.latches:
                succ[latch] |= targets
        reach: dict[int, set[int]] = {}
        for bid in reversed(cfg.rpo):
            r = {bid}
            for t in succ[bid]:
                r |= reach.get(t, {t})
            reach[bid] = r
        pos = {ins.index: i for b in cfg.blocks for i, ins in enumerate(b.instrs)}
        evs = [(m.spec, ev) for m in self.matches for ev in m.ptx]

        def before(a: Event, b: Event) -> bool:
            """Can `a` run and then `b` in one pass (no back edge)?"""
            if a.block == b.block:
                return pos[a.instr.index] < pos[b.instr.index]
            return b.block in reach.get(a.block, set())

        violations = []
        for e1, p1 in evs:
            for e2, p2 in evs:
                if e1.order < e2.order and p1 is not p2 and before(p2, p1) \
                        and not before(p1, p2):
                    violations.append((e1, p1, e2, p2))
        for e1, p1, e2, p2 in violations:
            out = self.cx.prover.satisfiable(self.spec.assumptions + [e1.cond, e2.cond])
            if out.verdict == PROVED:
                continue
            if not (self.exec_ok.get(id(e1)) and self.exec_ok.get(id(e2))):
                out = Outcome(UNKNOWN, "their execution conditions did not verify")
            cex = self.rep.describe(out.values) if out.verdict == REFUTED else {}
            cex.update({"first in the IR": f"{e1.what} at {e1.span.line}:{e1.span.col}",
                        "first in the PTX": p2.instr.text})
            verdict = Verdict.REFUTED if out.verdict == REFUTED else Verdict.UNKNOWN
            self.rep.ob(f"order of {e1.what} ({e1.span.line}:{e1.span.col}) and {e2.what} "
                        f"({e2.span.line}:{e2.span.col})", verdict, ORDER,
                        f"PTX line {p2.instr.line} comes before PTX line {p1.instr.line} on "
                        "the control flow, the IR has them the other way round for one "
                        "thread", e1.span, cex, seconds=time.monotonic() - t0)
            return
        self.rep.ob("order of memory and synchronisation operations", Verdict.PROVED, ORDER,
                    f"for {len(evs)} instructions: whenever two run for one thread in one "
                    "iteration, the PTX control flow has them in the IR's program order",
                    self.k.span, seconds=time.monotonic() - t0,
                    method="CFG reachability + z3")
