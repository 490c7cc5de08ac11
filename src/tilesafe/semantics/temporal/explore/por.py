"""Partial-order reduction: which moves are enabled, and a persistent subset of them.

Why: interleavings of independent steps reach the same states; exploring one
representative order suffices. Persistent sets are computed from conflicting "future
objects" (futures.py: the barriers, buffers, bulk-group state and `sync` an agent may
still touch); the state graph is acyclic (every step moves a program counter forward or
retires a copy), so persistent sets without a cycle proviso preserve every reachable
deadlock and every reachable error step.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tilesafe.semantics.temporal.explore import objects as obj
from tilesafe.semantics.temporal.explore.operands import AT_END, AT_SYNC, FAILS
from tilesafe.semantics.temporal.explore.state import SYNC_MOVE, State, agent_move, copy_move

if TYPE_CHECKING:
    from tilesafe.semantics.temporal.explore.machine import Machine


_EMPTY: frozenset = frozenset()
_BLOCK = frozenset({obj.BLOCK})


def analyse(m: Machine, state: State) -> tuple[list, dict]:
    """Enabled moves, and for every agent and copy: (enabled, reads, writes) of its next
    step. Keys ("a", i), ("c", j); the joint `sync` is ("sync",)."""
    agents = state.agents
    info: dict = {}
    enabled: list = []
    at_sync = live = 0
    for a in range(m.n):
        pc, ctrs = agents[a]
        step = m.step_of(a, pc, ctrs)
        kind = step.kind
        if kind == AT_END:
            continue
        live += 1
        mv = ("a", a)  # agent_move(a), built inline: this loop runs for every state
        if kind == AT_SYNC:
            at_sync += 1
            info[mv] = (False, _EMPTY, _BLOCK)
            continue
        if kind == FAILS:
            info[mv] = (True, _EMPTY, _EMPTY)
            enabled.append(mv)
            continue
        ok, r, w = True, step.reads, step.writes
        if step.gated:
            ok, r, w = step.op.gate(state, a, step.ins, step.ev, r, w)
        info[mv] = (ok, r, w)
        if ok:
            enabled.append(mv)
    if at_sync and at_sync == m.n and live == m.n:
        enabled.append(SYNC_MOVE)
    copies = state.copies
    for j, c in enumerate(copies):
        if j and copies[j - 1] == c:
            continue  # identical copies: completing either gives the same state
        info[copy_move(j)] = (True, _EMPTY, m.copy_objects(c))
        enabled.append(copy_move(j))
    return enabled, info


def persistent(m: Machine, state: State, enabled: list, info: dict) -> list:
    """A persistent subset of the enabled moves (smallest over the seeds tried).

    Closure rule: with an agent (or copy) in the set, every other one whose future
    objects conflict with its next step (a write meets any access, a read meets a
    write) joins, whether that step is enabled or blocked (a blocked step's objects are
    what could unblock it); a blocked joint step pulls in the classes it converges
    with; `sync` meets everyone."""
    if len(enabled) <= 1 or SYNC_MOVE in enabled:
        return enabled
    # The choice depends only on each agent's pc (futures), on what the next steps touch
    # and whether they are enabled: memoise on exactly that.
    agents = state.agents
    sig = (tuple((k, v[0], v[1], v[2], agents[k[1]][0] if k[0] == "a" else 0)
                 for k, v in info.items()), len(enabled))
    hit = m._por_cache.get(sig)
    if hit is None:
        hit = _persistent(m, state, enabled, info)
        m._por_cache[sig] = hit
    return hit


def _persistent(m: Machine, state: State, enabled: list, info: dict) -> list:
    agents = state.agents
    for mv in enabled:  # a step that touches nothing shared commutes with everything
        if mv[0] == "a":
            _, r, w = info[mv]
            if not r and not w:
                return [mv]
    keys = list(info)
    nk = len(keys)
    futs = []
    blocked: list = []
    for k in keys:
        if k[0] == "a":
            futs.append(m.fut[k[1]][agents[k[1]][0]])
            ok, r, _ = info[k]
            ins = m.instr(state, k[1])
            blocked.append(m.hooks.ops[type(ins)].blocked_on(ins, r) if not ok and r
                           else None)
        else:
            futs.append((_EMPTY, info[k][2]))
            blocked.append(None)
    index = {k: i for i, k in enumerate(keys)}
    # Who could write each blocking object (and so unblock the wait).
    writers = {}
    for i, o in enumerate(blocked):
        if o is not None and o not in writers:
            writers[o] = [j for j in range(nk) if j != i and o in futs[j][1]]

    allf = [fr | fw for fr, fw in futs]
    steps_all = [info[k] for k in keys]
    step_all = [r | w for _, r, w in steps_all]

    enabled_idx = {index[mv] for mv in enabled}

    def closure(start: int, limit: int) -> set[int] | None:
        """The closed set from one seed, or None as soon as it holds `limit` enabled
        moves: it cannot beat the best set found (and a cut-off set is not closed, so
        it is never used)."""
        chosen = {start}
        _, reads, writes = steps_all[start]
        changed = True
        while changed:
            if len(chosen & enabled_idx) >= limit:
                return None
            changed = False
            if obj.BLOCK in writes:
                return set(range(nk))
            for j in range(nk):
                if j in chosen:
                    continue
                if blocked[j] is not None and all(x in chosen for x in writers[blocked[j]]):
                    # Blocked until some step of the set runs: only its next step counts.
                    fw, fa = steps_all[j][2], step_all[j]
                else:
                    fw, fa = futs[j][1], allf[j]
                if (writes and not writes.isdisjoint(fa)) or (
                        reads and not reads.isdisjoint(fw)):
                    chosen.add(j)
                    _, r, w = steps_all[j]
                    reads, writes = reads | r, writes | w
                    changed = True
            for i in list(chosen):
                k = keys[i]
                if k[0] == "a" and not info[k][0]:
                    ins = m.instr(state, k[1])
                    for g in m.hooks.ops[type(ins)].converges(ins):
                        gi = index.get(agent_move(g))
                        if gi is not None and gi not in chosen:
                            chosen.add(gi)
                            _, r, w = steps_all[gi]
                            reads, writes = reads | r, writes | w
                            changed = True
        return chosen

    best = enabled
    for seed in enabled:
        seen = closure(index[seed], len(best))
        if seen is None:
            continue
        subset = [mv for mv in enabled if index[mv] in seen]
        if len(subset) < len(best):
            best = subset
            if len(best) == 1:
                break
    return best
