"""Check a recorded state graph of the temporal checkers with the checker's own rules.

Each edge must be a legal step: the recorded barrier operations, replayed by
certcheck/mbarrier.py on the source state, give the target's barriers (up to the renaming
of identical instances the explorer's symmetry reduction applies), and the copies in
flight change exactly by the loads issued and completed (a completion's bytes are the
load's). With expectation "safe" (a proved protocol) every state must moreover be
well formed, every explored state without a successor must be final (no deadlock), and
no final state may leave a TMA load in flight.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from tilesafe.certcheck.mbarrier import Illegal, step, well_formed


def check_graph(doc: dict[str, Any], expect: str) -> list[str]:
    """Problems found (empty: the certificate holds)."""
    if doc.get("kind") != "mbarrier-state-graph":
        return ["not a state graph"]
    states, edges = doc["states"], doc["edges"]
    n = len(states)
    problems: list[str] = []
    if not doc.get("complete", False):
        problems.append("the graph was not recorded completely")
    out_degree = [0] * n
    for k, edge in enumerate(edges):
        if len(problems) > 20:
            break
        src, dst, label, ops, raw_bars, raw_loads, issued, done = edge
        if not (0 <= src < n and 0 <= dst < n):
            problems.append(f"edge {k}: endpoint outside the graph")
            continue
        out_degree[src] += 1
        bars = [list(b) for b in states[src]["bars"]]
        try:
            for inst, op, *args in ops:
                step(bars[inst], op, list(args))
        except (Illegal, IndexError, ValueError, TypeError) as err:
            problems.append(f"edge {k} ({label}): illegal step: {err}")
            continue
        if bars != raw_bars:
            problems.append(f"edge {k} ({label}): the operations give {bars}, the graph "
                            f"says {raw_bars}")
            continue
        if sorted(map(tuple, raw_bars)) != sorted(map(tuple, states[dst]["bars"])):
            problems.append(f"edge {k} ({label}): target state's barriers differ")
            continue
        src_loads = Counter(tuple(x) for x in states[src]["loads"])
        for inst, nbytes in done:
            if src_loads[(inst, nbytes)] <= 0:
                problems.append(f"edge {k}: completes a load ({inst}, {nbytes}) not in flight")
            src_loads[(inst, nbytes)] -= 1
            if [inst, "complete_tx", nbytes] not in [list(o) for o in ops]:
                problems.append(f"edge {k}: load completion without its complete_tx")
        after = Counter(inst for (inst, _), c in src_loads.items() for _ in range(max(c, 0)))
        after.update(i for (i,) in issued)
        if after != Counter(inst for inst, _ in raw_loads):
            problems.append(f"edge {k} ({label}): copies in flight do not follow")
        elif sorted(b for _, b in raw_loads) != sorted(b for _, b in states[dst]["loads"]):
            problems.append(f"edge {k} ({label}): target state's copies differ")
    if expect != "safe":
        return problems
    for i, s in enumerate(states):
        if len(problems) > 20:
            break
        for b in s["bars"]:
            why = well_formed(list(b))
            if why:
                problems.append(f"state {i}: {why}")
        if s["final"] and s["loads"]:
            problems.append(f"state {i}: the block exits with TMA loads in flight")
        if not s.get("visited"):
            problems.append(f"state {i}: reached but never explored")
        elif out_degree[i] == 0 and not s["final"]:
            problems.append(f"state {i}: no successor and not final (a deadlock)")
    return problems
