"""Per class and program point: the objects it may still read and write before its next
`sync` (its *future*), for the partial-order reduction (por.py).

Why: a step of one class commutes with everything another class may still do unless one
writes an object the other touches. The future of a pc is the union over every evaluation
of every instruction reachable from it, propagated backwards over the control-flow graph
(a fixpoint). It ends at the next `sync`: nothing after it can happen before every agent
-- the one whose step is being reordered included -- gets there.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tilesafe.semantics.temporal.explore import objects as obj
from tilesafe.semantics.temporal.explore.ops import cluster
from tilesafe.semantics.temporal.explore.ops.base import Summary
from tilesafe.semantics.temporal.instrs import Branch, End, Enter, Instr, Jump, Next, Sync

if TYPE_CHECKING:
    from tilesafe.semantics.temporal.explore.machine import Machine

Future = tuple[frozenset, frozenset]  # (reads, writes)


def futures(m: Machine) -> tuple[list[tuple[Future, ...]], list[tuple[frozenset, ...]]]:
    """(per class, per pc: its future) and (per class, per pc: the objects its own step
    writes whatever its operands -- fences, bulk groups, `sync`)."""
    fut: list[tuple[Future, ...]] = []
    static_w: list[tuple[frozenset, ...]] = []
    for a, ag in enumerate(m.agents):
        code = ag.code
        summary = Summary()
        reads: list[set] = []
        wrs: list[set] = []
        for ins in code:
            r: set = set()
            w: set = set()
            op = m.hooks.ops.get(type(ins))
            if op is not None and op.enumerated:
                for ctrs in m.envs(a, ins):
                    ev = m.evaluate_safe(a, ins, m.env(a, ins, ctrs))
                    if ev is None:
                        continue
                    rr, ww = op.future(a, ins, ev)
                    r.update(rr)
                    r.update(cluster.foreign(m, a, set(rr) | set(ww)))
                    w.update(ww)
                    op.summarize(a, ins, ev, ww, summary)
            if op is not None:
                w.update(op.static_writes(a, ins))
            ct = cluster.tables(m)
            if ct is not None:  # every step of a CTA may be its last (ops/cluster.py)
                w.add(obj.alive(ct.class_cta[a]))
            reads.append(r)
            wrs.append(w)
        for pc, ins in enumerate(code):
            op = m.hooks.ops.get(type(ins))
            if op is not None:
                wrs[pc] |= set(op.late_writes(summary))
        static_w.append(tuple(frozenset(w) for w in wrs))
        succ = [_successors(pc, ins) for pc, ins in enumerate(code)]
        fr = [set(x) for x in reads]
        fw = [set(x) for x in wrs]
        changed = True
        while changed:
            changed = False
            for pc in range(len(code) - 1, -1, -1):
                for q in succ[pc]:
                    if not (fr[q] <= fr[pc] and fw[q] <= fw[pc]):
                        fr[pc] |= fr[q]
                        fw[pc] |= fw[q]
                        changed = True
        fut.append(tuple((frozenset(x), frozenset(y)) for x, y in zip(fr, fw, strict=True)))
    return fut, static_w


def _successors(pc: int, ins: Instr) -> tuple[int, ...]:
    if isinstance(ins, (End, Sync)):
        return ()
    if isinstance(ins, Jump):
        return (ins.target,)
    if isinstance(ins, (Enter, Branch, Next)):
        return (pc + 1, ins.target)
    return (pc + 1,)
