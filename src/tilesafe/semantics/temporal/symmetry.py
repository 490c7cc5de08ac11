"""Symmetry reduction over identical thread classes (docs/temporal.md §9).

Why: production kernels have several consumer roles that run the same protocol (two or more
warpgroups reading one ring). Their classes are interchangeable: a state in which consumer
A is at step x and consumer B at step y behaves exactly like the state with the two swapped.
The explorer's state space grows like (positions)^roles; keeping one representative per
orbit of the permutations of identical classes makes it grow like a multiset instead.

What makes two classes *identical* (an automorphism of the transition system, not a guess):

* statically, their instruction lists have the same shape (`signature`): the same ops, barrier
  names, arrival counts, targets, loop structure and class size, and neither takes part in a
  per-warp convergence with another class;
* dynamically, every instruction evaluates to the same event for both at every (pc, loop
  counters) the search meets: the same barrier instances, parities, byte counts, atoms, and
  the same thread map *relative to the class's first thread* (threads of a class are only
  compared with threads of the same class, so a translation is invisible to every check).
  The explorer checks this for every evaluation it performs (`Machine.event`,
  `Machine.settle`, semantics/temporal/explore/machine.py) and raises `SymmetryBroken` on the first
  difference; the reduced search is then abandoned (the checker explores without the
  reduction). Writes whose definedness depends on the writing threads (covers) break it
  too: they are thread-specific.

The representative of a state sorts the classes of each group by their local state (program
point, counters, observed phases, bulk groups, unordered accesses) and renames every
reference to a class consistently: the initialising class of a barrier, the holder keys of
permissions (held by a class, earmarked for one, given back by its TMA store, read by its
pending MMAs), unfenced writers, TMA stores in flight, its wgmma groups
(semantics/temporal/explore/state.py). Any fixed choice of
representative is sound (it only merges states of one orbit); sorting makes most orbits
meet. Persistent sets are computed on the representative itself, where they are persistent
in the unreduced system too, so deadlocks and violating steps reachable in the unreduced
system are reachable, up to the renaming, in the reduced one.

Paths of a reduced search name the classes of the representatives, not of one run: a reduced
search is used to PROVE only; anything it finds is re-found by the unreduced search.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tilesafe.semantics.temporal.events import Agent, Unsupported
from tilesafe.semantics.temporal.explore.operands import AccessOperands, Err
from tilesafe.semantics.temporal.explore.state import (
    CLASS,
    EARMARK,
    GIVEN_BACK,
    MMA,
    Perm,
    State,
    StoreCopy,
    bar_rec,
    by_class,
    earmarked,
    given_back,
    mma_held,
    perm,
    store_copy,
    unfenced,
)
from tilesafe.semantics.temporal.instrs import Arrive, NamedArrive, NamedWait, Wgmma


class SymmetryBroken(Unsupported):
    """Two classes assumed identical differ somewhere: the reduction does not apply."""


def signature(ag: Agent) -> tuple | None:
    """What must be equal for two classes to be candidates (None: never symmetric)."""
    out: list = [ag.cls.size, len({t // 32 for t in ag.cls.threads}),
                 None if ag.param_loop is None else ag.param_loop[:3]]
    for ins in ag.code:
        if isinstance(ins, (Arrive, Wgmma)) and ins.joint:
            return None
        out.append(ins.shape())
    return tuple(out)


def groups(agents: tuple[Agent, ...]) -> tuple[tuple[int, ...], ...]:
    """Classes with equal signatures, in groups of two or more. None in a kernel with named
    barriers: their state names classes (bit masks) that the renaming does not follow."""
    if any(isinstance(ins, (NamedArrive, NamedWait)) or isinstance(ins, Arrive)
           and not ins.release for ag in agents for ins in ag.code):
        return ()  # (a relaxed arrive's stranded shares name the class too)
    by: dict[tuple, list[int]] = {}
    for a, ag in enumerate(agents):
        sig = signature(ag)
        if sig is not None:
            by.setdefault(sig, []).append(a)
    return tuple(tuple(g) for g in by.values() if len(g) > 1)


def same_event(ea: Any, eb: Any) -> bool:
    """Equal events of two classes (the footprint object itself is not compared: its
    relative thread map, atoms and definedness are)."""
    if isinstance(ea, Err) or isinstance(eb, Err):
        return type(ea) is type(eb) and ea.error.code == eb.error.code
    if type(ea) is not type(eb):
        return False
    if isinstance(ea, AccessOperands):
        if ea.covers or eb.covers:
            return False
        return ea[:7] == eb[:7]
    return ea == eb


def canon(state: State, grps: tuple[tuple[int, ...], ...], ninst: int) -> State:
    """The representative of the state's orbit: see the module docstring."""
    agents, obs, sages, wins, mma = state.agents, state.obs, state.sages, state.wins, state.mma
    mp: dict[int, int] = {}
    for g in grps:
        keys = sorted((agents[a], obs[a * ninst:(a + 1) * ninst], sages[a],
                       wins[a] if wins else 0, mma[a], a) for a in g)
        for slot, key in zip(g, keys, strict=True):
            if key[-1] != slot:
                mp[key[-1]] = slot
    if not mp:
        return state

    def r(c: int) -> int:
        return mp.get(c, c)

    new_agents = list(agents)
    new_obs = list(obs)
    new_sages = list(sages)
    new_wins = list(wins)
    new_mma = list(mma)
    for old, new in mp.items():
        new_agents[new] = agents[old]
        new_obs[new * ninst:(new + 1) * ninst] = obs[old * ninst:(old + 1) * ninst]
        new_sages[new] = sages[old]
        if wins:
            new_wins[new] = wins[old]
        new_mma[new] = mma[old]
    bars = tuple(b if b.init_by not in mp else bar_rec(b.st, mp[b.init_by], b.fenced, b.phases)
                 for b in state.bars)
    copies = tuple(sorted(store_copy(r(c.cls), c.age, c.atoms, c.share)
                          if isinstance(c, StoreCopy) else c for c in state.copies))
    perms = tuple(_perm(p, r) for p in state.perms) if state.perms else state.perms
    return state._replace(agents=tuple(new_agents), bars=bars, obs=tuple(new_obs),
                          copies=copies, perms=perms, sages=tuple(new_sages),
                          wins=tuple(new_wins), mma=tuple(new_mma))


def _perm(p: Perm, r: Callable[[int], int]) -> Perm:
    hh = frozenset((_key(k, r), v) for k, v in p.holders)
    return perm(hh, tuple(sorted(unfenced(r(c), published) for c, published in p.unfenced)))


def _key(k: tuple, r: Callable[[int], int]) -> tuple:
    if k[0] == CLASS:
        return by_class(r(k[1]))
    if k[0] == EARMARK:
        return earmarked(k[1], r(k[2]))
    if k[0] == GIVEN_BACK:
        return given_back(r(k[1]), k[2])
    if k[0] == MMA:
        return mma_held(r(k[1]), k[2])
    return k
