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
  `Machine.settle`) and raises `SymmetryBroken` on the first difference; the reduced search
  is then abandoned (the checker explores without the reduction). Writes whose definedness
  depends on the writing threads (covers) break it too: they are thread-specific.

The representative of a state sorts the classes of each group by their local state (program
point, counters, observed phases, bulk groups, unordered accesses) and renames every
reference to a class consistently: the initialising class of a barrier, the holder keys of
permissions ("A", "E", "G"), unfenced writers, TMA stores in flight. Any fixed choice of
representative is sound (it only merges states of one orbit); sorting makes most orbits
meet. Persistent sets are computed on the representative itself, where they are persistent
in the unreduced system too, so deadlocks and violating steps reachable in the unreduced
system are reachable, up to the renaming, in the reduced one.

Paths of a reduced search name the classes of the representatives, not of one run: a reduced
search is used to PROVE only; anything it finds is re-found by the unreduced search.
"""

from __future__ import annotations

from tilesafe.semantics.events import Agent, Unsupported


class SymmetryBroken(Unsupported):
    """Two classes assumed identical differ somewhere: the reduction does not apply."""


def signature(ag: Agent) -> tuple | None:
    """What must be equal for two classes to be candidates (None: never symmetric)."""
    out: list = [ag.cls.size, len({t // 32 for t in ag.cls.threads}),
                 None if ag.param_loop is None else ag.param_loop[:3]]
    for ins in ag.code:
        if ins.per_warp and len(ins.group) > 1:
            return None
        out.append((ins.op, ins.bar, ins.count, ins.per_warp, ins.pending, ins.nbytes,
                    ins.buffer, ins.target, len(ins.ctx), ins.idx is None,
                    ins.parity is None, ins.tx is None, len(ins.prefix), len(ins.access)))
    return tuple(out)


def groups(agents: tuple[Agent, ...]) -> tuple[tuple[int, ...], ...]:
    """Classes with equal signatures, in groups of two or more. None in a kernel with named
    barriers: their state names classes (bit masks) that the renaming does not follow."""
    if any(ins.op in ("narrive", "nwait") for ag in agents for ins in ag.code):
        return ()
    by: dict[tuple, list[int]] = {}
    for a, ag in enumerate(agents):
        sig = signature(ag)
        if sig is not None:
            by.setdefault(sig, []).append(a)
    return tuple(tuple(g) for g in by.values() if len(g) > 1)


def same_event(ea: tuple, eb: tuple) -> bool:
    """Equal events of two classes (the footprint object itself is not compared: its
    relative thread map, atoms and definedness are)."""
    if ea[0] == "err" or eb[0] == "err":
        return ea[0] == eb[0] and ea[1].code == eb[1].code
    if len(ea) == 9:  # an access: (ok, reads, writes, exact, touch, exposed, must, covers, fp)
        if ea[7] or eb[7]:
            return False
        return ea[:8] == eb[:8]
    return ea == eb


def canon(state: tuple, grps: tuple[tuple[int, ...], ...], ninst: int) -> tuple:
    """The representative of the state's orbit: see the module docstring."""
    agents, bars, obs, copies, perms, defined, lflags, sages, wins = state[:9]
    mp: dict[int, int] = {}
    for g in grps:
        keys = sorted((agents[a], obs[a * ninst:(a + 1) * ninst], sages[a],
                       wins[a] if wins else 0, a) for a in g)
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
    for old, new in mp.items():
        new_agents[new] = agents[old]
        new_obs[new * ninst:(new + 1) * ninst] = obs[old * ninst:(old + 1) * ninst]
        new_sages[new] = sages[old]
        if wins:
            new_wins[new] = wins[old]
    new_bars = tuple(b if b[1] not in mp else (b[0], mp[b[1]], b[2], b[3]) for b in bars)
    new_copies = tuple(sorted(c if c[0] != "S" else (c[0], r(c[1])) + c[2:] for c in copies))
    new_perms = tuple(_perm(p, r) for p in perms) if perms else perms
    return (tuple(new_agents), new_bars, tuple(new_obs), new_copies, new_perms, defined,
            lflags, tuple(new_sages), tuple(new_wins)) + state[9:]


def _perm(p: tuple, r) -> tuple:
    holders, unfenced = p
    hh = frozenset((_key(k, r), v) for k, v in holders)
    return (hh, tuple(sorted((r(c), pub) for c, pub in unfenced)))


def _key(k: tuple, r) -> tuple:
    if k[0] == "A":
        return ("A", r(k[1]))
    if k[0] == "E":
        return ("E", k[1], r(k[2]))
    if k[0] == "G":
        return ("G", r(k[1]), k[2])
    return k
