"""The explorer's state: immutable named records that hash and compare as plain tuples.

Why named tuples: a state is hashed as a whole (reachable states are enumerated), so it
must be immutable and cheap to hash; naming its parts lets every reader say `state.bars`
instead of `state[1]`. A NamedTuple hashes and compares exactly as the tuple of its fields,
so two states are equal (and the searches count them) exactly as before the names.

State
  agents   per class: where it is (`Pos`: pc, loop counters); pc always points at a
           visible instruction
  bars     per barrier instance: `BarRec` (the mbarrier, who initialised it, fenced, phases
           completed capped at 2 -- only a first wait needs it)
  obs      per (class, instance), flattened class-major: phases completed that the class
           has not yet observed with a wait (0, 1, 2 = two or more), -1 before its first
  copies   sorted in-flight copies: `LoadCopy` and `StoreCopy` (tag first: loads sort
           before stores)
  perms    ownership only, per atom of shared memory: `Perm` (holders with their shares in
           integer units of the atom, unfenced generic writers)
  defined  ownership only, per atom: NEVER_WRITTEN, MAYBE_DEFINED, DEFINED, or a cover
           (>= COVER: written if launch-constant conditions held for the writers)
  lflags   per barrier instance: LOAD_IN_PHASE / LOAD_UNOBSERVED (exit: TS430)
  sages    per class: bulk-group ages of TMA stores no wait_group covered (exit: TS307)
  wins     ownership only, per class: `Window` (interned thread maps of its accesses not
           yet ordered among its threads, semantics/temporal/footprint.py)
  named    per named-barrier id in use: bit mask of the classes arrived in the current phase
  mma      per class: `MmaRec` (its wgmma groups no `wgmma_wait` covered yet, each with the
           fragments its MMAs write, and the fragments whose registers it accessed since its
           last `wgmma_fence`); ((), 0) in a kernel without fragments

Every record prints as the plain tuple of its fields (`__repr__ = tuple.__repr__`): a
state prints, fast, exactly as the tuple encoding did, and `order_key` is that text.

The small parts that a state holds many of -- positions, windows, unfenced writers and the
permission holders (`FREE`, held by a class, pooled in a barrier phase, earmarked for a
waiter, given back by a TMA store, named-barrier pools) -- stay plain tuples with named
constructors below. Why: CPython's cyclic collector stops tracking an exact tuple of
untracked items, never a tuple subclass nor a tuple holding one; hundreds of thousands of
explored states made of named records cost every collection a walk over all of them.
Holders keep a one-letter tag first: it orders holders of different kinds (messages list
them sorted) and keeps their hashes -- and so every iteration order -- as they were.
"""

from __future__ import annotations

from typing import NamedTuple

from tilesafe.semantics.hw import mbarrier as mb

# Per barrier instance (State.lflags): a TMA load was issued during the current phase; a
# phase with a load completed and no wait on the instance has passed since. A block that
# exits with either bit set exits with a load nobody is ordered after (TS430).
LOAD_IN_PHASE, LOAD_UNOBSERVED = 1, 2
# Per atom (State.defined): nothing wrote it / some write may have covered it / it was
# certainly written (a certain write of a thread, a TMA load landing) / from COVER on: it
# was written certainly *if* launch-constant conditions held for the writing threads (an
# interned cover, ops/ownership.py), which covers later reads under the same conditions.
NEVER_WRITTEN, MAYBE_DEFINED, DEFINED, COVER = 0, 1, 2, 3

_new = tuple.__new__  # a record from its fields without the generated __new__ (hot paths)


# Where a class is: (pc, the counters of the kept loops around it).
Pos = tuple[int, tuple[int, ...]]


class BarRec(NamedTuple):
    """One mbarrier instance as the explorer tracks it."""

    st: mb.MbarrierState
    init_by: int  # the class that initialised it, -1 before init
    fenced: bool  # its init was followed by `fence mbarrier_init` of that class
    phases: int  # phases completed, capped at 2 (forgotten once every waiter has waited)

    __repr__ = tuple.__repr__


class LoadCopy(NamedTuple):
    """A TMA load in flight: lands on `atoms`, then complete_tx(nbytes) on `inst`."""

    tag: str  # "L"
    inst: int
    nbytes: int
    fresh: bool  # issued in the barrier's current phase
    atoms: tuple[int, ...]

    __repr__ = tuple.__repr__


class StoreCopy(NamedTuple):
    """A TMA store in flight, reading `atoms` with the issuer's `share` of each."""

    tag: str  # "S"
    cls: int  # the issuing class
    age: int  # its bulk group: 0 = still open, n = committed n groups ago
    atoms: tuple[int, ...]
    share: int

    __repr__ = tuple.__repr__


def load_copy(inst: int, nbytes: int, fresh: bool, atoms: tuple[int, ...]) -> LoadCopy:
    return _new(LoadCopy, ("L", inst, nbytes, fresh, atoms))


def store_copy(cls: int, age: int, atoms: tuple[int, ...], share: int) -> StoreCopy:
    return _new(StoreCopy, ("S", cls, age, atoms, share))


# A generic-proxy write of a class no `fence proxy_async` covered yet: (class, published --
# an arrive or `sync` came after it, so a later fence no longer covers it).
Unfenced = tuple[int, bool]


class Perm(NamedTuple):
    """One atom's permissions: holders -> integer shares (Machine.unit = the whole atom)."""

    holders: frozenset
    unfenced: tuple[Unfenced, ...]

    __repr__ = tuple.__repr__


# A class's accesses not yet ordered among its threads (interned thread maps,
# semantics/temporal/footprint.py): (opened since its last release, released but not acquired,
# released and acquired -- only possibly ordered: mbarriers may or may not order them).
Window = tuple[int, int, int]
NO_WINDOW: Window = (0, 0, 0)


# ---- permission holders -------------------------------------------------------------------
# The keys of Perm.holders: plain tuples, a one-letter tag first, built only here.

FREE = ("F",)  # claimable by anyone: after init and after every `sync`
CLASS = "A"  # (CLASS, class): held by a class
POOL = "P"  # (POOL, inst): deposited by arrives into the current phase of a barrier instance
EARMARK = "E"  # (EARMARK, inst, class): a completed phase's share for a waiting class
GIVEN_BACK = "G"  # (GIVEN_BACK, class, age): a finished TMA store's share, until wait_group
NAMED_POOL = "N"  # (NAMED_POOL, index): released by the arrivers of a named barrier's phase
NAMED_CLAIM = "Q"  # (NAMED_CLAIM, index, mask): a completed phase's, claimable by `mask`
MMA = "M"  # (MMA, class, age): read by MMAs of a class's wgmma group until a wgmma_wait
# Clusters (semantics/temporal/explore/ops/cluster.py):
REMOTE_POOL = "R"  # (REMOTE_POOL, inst): deposited by arrivers of another CTA (cluster release)
REMOTE_MARK = "D"  # (REMOTE_MARK, inst, class): a completed phase's share of a remote pool for
#                    a waiting class, taken only by a wait that acquires at cluster scope
STRANDED = "X"  # (STRANDED, class, why, inst): what a class gave up with a release nobody
#                 can acquire (a relaxed arrive, a `.cta` arrive on a peer's barrier)
# why: the arrive on `inst` was relaxed / a .cta release to another CTA / a relaxed
# cluster_arrive (inst -1)
RELAXED_ARRIVE, CTA_SCOPE_ARRIVE, RELAXED_CLUSTER_ARRIVE = 0, 1, 2


def by_class(a: int) -> tuple:
    return (CLASS, a)


def pooled(inst: int) -> tuple:
    return (POOL, inst)


def earmarked(inst: int, cls: int) -> tuple:
    return (EARMARK, inst, cls)


def given_back(cls: int, age: int) -> tuple:
    return (GIVEN_BACK, cls, age)


def named_pool(index: int) -> tuple:
    return (NAMED_POOL, index)


def named_claim(index: int, mask: int) -> tuple:
    return (NAMED_CLAIM, index, mask)


def mma_held(cls: int, age: int) -> tuple:
    return (MMA, cls, age)


def remote_pooled(inst: int) -> tuple:
    return (REMOTE_POOL, inst)


def remote_marked(inst: int, cls: int) -> tuple:
    return (REMOTE_MARK, inst, cls)


def stranded(cls: int, why: int, inst: int) -> tuple:
    return (STRANDED, cls, why, inst)


def claimable_by(k: tuple, a: int) -> bool:
    """Is holder `k` a completed named-barrier phase's pool that class `a` may claim?"""
    return k[0] == NAMED_CLAIM and bool((k[2] >> a) & 1)


def perm(holders: frozenset, writers: tuple) -> Perm:
    return _new(Perm, (holders, writers))


def bar_rec(st: mb.MbarrierState, init_by: int, fenced: bool, phases: int) -> BarRec:
    return _new(BarRec, (st, init_by, fenced, phases))


def unfenced(cls: int, published: bool) -> Unfenced:
    return (cls, published)


class HolderKeys:
    """The holder keys of one machine, built once (permission updates run for every atom of
    every move; building a key there would cost more than the update)."""

    def __init__(self, n: int, ninst: int) -> None:
        self.cls = tuple(by_class(a) for a in range(n))
        self.pool = tuple(pooled(i) for i in range(ninst))
        self.earmark = tuple(tuple(earmarked(i, a) for a in range(n)) for i in range(ninst))
        self.rpool = tuple(remote_pooled(i) for i in range(ninst))
        self.rmark = tuple(tuple(remote_marked(i, a) for a in range(n)) for i in range(ninst))
        self.written = tuple(unfenced(a, False) for a in range(n))  # Unfenced, unpublished
        self.published = tuple(unfenced(a, True) for a in range(n))


# ---- wgmma groups ---------------------------------------------------------------------------
# Per class (State.mma), plain tuples like positions: (groups, touched). `groups`: the wgmma
# groups of the class that hold MMAs no `wgmma_wait` covered yet, as (age, fragments) sorted
# by age -- age 0 the open group (never waited for: PTX waits for committed groups only), n
# committed n groups ago -- with `fragments` a bit mask (bit i: the kernel's i-th fragment)
# of what their MMAs write. `touched`: the fragments whose registers the class accessed
# since its last `wgmma_fence` (every bit before its first one).
MmaGroup = tuple[int, int]
MmaRec = tuple[tuple[MmaGroup, ...], int]


def mma_rec(groups: tuple[MmaGroup, ...], touched: int) -> MmaRec:
    return (groups, touched)


# ---- the state ----------------------------------------------------------------------------


class State(NamedTuple):
    """One state of one block (the fields: see the module docstring)."""

    agents: tuple[Pos, ...]
    bars: tuple[BarRec, ...]
    obs: tuple[int, ...]
    copies: tuple[LoadCopy | StoreCopy, ...]
    perms: tuple[Perm, ...]
    defined: tuple[int, ...]
    lflags: tuple[int, ...]
    sages: tuple[tuple[int, ...], ...]
    wins: tuple[Window, ...]
    named: tuple[int, ...]
    mma: tuple[MmaRec, ...]

    __repr__ = tuple.__repr__


def moved(state: State, agents: tuple[Pos, ...], bars: tuple[BarRec, ...]) -> State:
    """The state with other positions and barriers, every other part as it is (the level
    shifts of semantics/temporal/parametric.py)."""
    return _new(State, (agents, bars) + state[2:])


def order_key(state: tuple) -> str:
    """A fixed order of states (the roots of a tail search, semantics/temporal/parametric.py): the
    state printed as plain tuples. Any fixed order would do; this is the one the explorer
    always used, so that searches -- which finding of a code comes first -- are reproducible
    across versions."""
    return repr(state)


# ---- moves ----------------------------------------------------------------------------------
# A move is a class's step ("a", class), a copy completing ("c", index into State.copies) or
# the block-wide `sync` of every class ("sync",). Plain tuples: they are printed into the
# recorded state graphs (proofs/certificates.py) as they are.

SYNC_MOVE = ("sync",)


def agent_move(a: int) -> tuple[str, int]:
    return ("a", a)


def copy_move(j: int) -> tuple[str, int]:
    return ("c", j)
