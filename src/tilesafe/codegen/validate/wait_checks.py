"""TS729, waits: every `mbarrier.try_wait` sits in a spin loop of its own whose only way
out is the try_wait answering true, so the code after it runs only once the phase
completed.

Why separate: the symbolic executor summarises a spin loop like any other loop (its exit
conditions, the wait's answer as a fresh value); this obligation is the one place that
reads those exits as "the hardware may answer false" and must not go on.
"""

from __future__ import annotations

import time

from tilesafe.checkers.obligation import Verdict
from tilesafe.codegen.validate import terms as T
from tilesafe.codegen.validate.context import Context
from tilesafe.codegen.validate.matching import Match
from tilesafe.codegen.validate.reporting import SYNC
from tilesafe.codegen.validate.solve import PROVED, REFUTED, UNKNOWN, Outcome


def check_waits(cx: Context, matches: list[Match]) -> None:
    rep, prover = cx.rep, cx.prover
    for m in matches:
        for ev in m.ptx:
            if ev.kind != "mbar.wait":
                continue
            t0 = time.monotonic()
            name = f"wait at {m.spec.span.line}:{m.spec.span.col} (PTX line " \
                   f"{ev.instr.line}) spins until the phase completes"
            spin = [lid for lid in ev.loops if lid not in cx.counted(ev)]
            inner = ev.loops[-1] if ev.loops else None
            if inner is None or inner not in spin:
                rep.ob(name, Verdict.REFUTED, SYNC, "the try_wait is not inside a loop "
                       "of its own: the code goes on whether or not the phase completed",
                       m.spec.span, rep.witness(ev), seconds=time.monotonic() - t0)
                continue
            info = cx.res.loops[inner]
            lp = cx.cfg.loops[inner]
            others = [x for x in cx.res.events if inner in x.loops and x is not ev]
            problems = []
            if others:
                problems.append(f"the spin loop also runs '{others[0].instr.text}'")
            for b, _ in info.exit_conds:
                if not cx.cfg.dominates(ev.block, b):
                    problems.append(f"the loop can exit from block {b} without the wait")
            if problems:
                rep.ob(name, Verdict.REFUTED, SYNC, "; ".join(problems), m.spec.span,
                       rep.witness(ev), seconds=time.monotonic() - t0)
                continue
            assert ev.result is not None
            outs = []
            for _, raw in info.exit_conds:
                pc = cx.p(raw)
                out = prover.prove([pc], ev.result)
                if out.verdict == UNKNOWN and all(
                        x is ev.result or T.leaf_info(str(x.val)).kind == "int"
                        for x in T.leaves([pc])):
                    # the only free value is the try_wait's answer, and the hardware
                    # may answer false: the loop can exit before the phase completed
                    w = prover.exists([pc, T.not_(ev.result)])
                    if w.verdict == REFUTED:
                        out = Outcome(REFUTED, "when the try_wait answers false", w.values)
                outs.append(out)
            bad = next((o for o in outs if o.verdict != PROVED), None)
            if bad is None:
                rep.ob(name, Verdict.PROVED, SYNC, f"the only way out of spin loop "
                       f"L{lp.id} is the try_wait answering true", m.spec.span,
                       seconds=time.monotonic() - t0)
            else:
                rep.report(name, bad, SYNC, m.spec.span, "", "the spin loop can exit "
                           "while the try_wait answered false", t0)
