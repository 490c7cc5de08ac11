"""How the reference interpreter picks the agent that moves next: uniformly at random,
adversarially (PCT), or along a checker counterexample.

Why: the interpreter is the oracle that must *show* what the checkers refute. A uniform
random choice among the movable agents rarely produces the schedules that break a kernel:
with 160 threads and one copy in flight, the copy engine runs as soon as the threads block,
and no thread ever runs far ahead of the others. Two policies make failures reachable:

* `PctPolicy` -- probabilistic concurrency testing (Burckhardt, Kothari, Musuvathi,
  Nagarakatte, ASPLOS 2010): every thread gets a random distinct priority and the
  highest-priority movable agent always moves, so one thread runs as far as it can before
  any other (a thread of a class runs ahead of its classmates: races between them show);
  copy-engine operations get priorities below every thread (the copy engine is slow: a
  load lands, a store reads shared memory, only when no thread can move), in a random order
  among themselves, except that in half the runs (by seed) every store comes after every
  load (a store reads shared memory as late as the kernel lets it: a `wait_group` one too
  loose shows), and in a third of the runs the copy engine is fast instead (copies rank
  among the threads: a load lands while a slow thread still reads what it overwrites);
  at `depth - 1` random steps the moving agent drops below every other of its kind (the
  priority-change points that let bugs of depth d show with probability
  >= 1/(n k^(d-1))).
* `GuidedPolicy` -- replays a checker counterexample (a `Guide`: semantics/temporal/guide.py builds
it
  from an explored run): each move of a lockstep class lets every thread of the class
  complete its next *units* (the statements the event model has as instructions), each
  copy move completes the matching copy-engine operation, nothing else moves; then the
  fallback policy (PCT) goes on, so the consequences of the violation (wrong data, a
  deadlock, an error) play out. With an odd seed the violating threads go on last (below
  the copy engine too): a violation "this access may come after the region was handed
  on" shows when everybody else, refills included, goes first. A guide the run cannot
  follow (the interpreter's threads are not in lockstep) is abandoned for the fallback.

Every choice is recorded in `RunResult.schedule` as before, so any run replays exactly.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

POLICIES = ("random", "pct")


# ---- guides -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class GuideStep:
    """One move of a counterexample. `advance`: thread -> units it completes (a class move,
    or a joint one: `sync`, a per-warp arrive); `copy`: a copy-engine operation that
    completes: ("load", barrier, index) or ("store", issuing threads, bulk-group age)."""

    advance: Mapping[int, int] = field(default_factory=dict)
    copy: tuple | None = None


@dataclass(frozen=True)
class Guide:
    """A counterexample for one block. `units[t]`: ids of the statements that are units of
    thread t (in any order); `unit_of[t]`: statement id -> id of the innermost unit
    statement containing it, for every statement inside a unit."""

    block: tuple[int, ...]
    units: Mapping[int, frozenset[int]]
    unit_of: Mapping[int, Mapping[int, int]]
    steps: tuple[GuideStep, ...]
    violator: frozenset[int] = frozenset()  # the threads whose move is the violation


# ---- policies -----------------------------------------------------------------------------------


class RandomPolicy:
    """Uniform among the movable agents (the interpreter's original behaviour)."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng

    def start(self, blk: Any) -> None:
        pass

    def choose(self, blk: Any, ready: list[int], passable: list[int]) -> int:
        k = self.rng.randrange(len(ready) + len(passable) + len(blk.copies))
        if k < len(ready):
            return ready[k]
        k -= len(ready)
        if k < len(passable):
            return passable[k]
        return blk.nthreads + k - len(passable)


class PctPolicy:
    """Highest priority first; see the module docstring."""

    COPY_BAND = 1 << 20  # copies: priorities below every thread's

    def __init__(self, rng: random.Random, depth: int = 3) -> None:
        self.rng = rng
        self.depth = depth
        self.prio: list[int] = []
        self.changes: set[int] = set()
        self.steps = 0
        self.low = 0

    def start(self, blk: Any) -> None:
        n = blk.nthreads
        order = list(range(n))
        self.rng.shuffle(order)
        self.prio = [0] * n
        for rank, t in enumerate(order):
            self.prio[t] = 2 * self.COPY_BAND + rank
        horizon = max(64, 48 * n)
        self.changes = {self.rng.randrange(horizon) for _ in range(max(0, self.depth - 1))}
        self.steps = 0
        self.low = 0
        self.lazy_stores = self.rng.random() < 0.5
        # In a third of the runs the copy engine is fast: copies rank among the threads, so
        # a load may land while a slow thread still reads the stage it overwrites.
        self.fast_copies = self.rng.random() < 1 / 3

    def rank(self, blk: Any, agent: int) -> int:
        if agent < blk.nthreads:
            return self.prio[agent]
        c = blk.copies[agent - blk.nthreads]
        if c.prio is None:
            if self.fast_copies:
                n = blk.nthreads
                c.prio = 2 * self.COPY_BAND - n + self.rng.randrange(2 * n)
            elif self.lazy_stores:  # stores in the lower half of the copy band
                half = self.COPY_BAND // 2
                c.prio = (0 if c.kind == "store" else half) + self.rng.randrange(half)
            else:
                c.prio = self.rng.randrange(self.COPY_BAND)
        return c.prio

    def choose(self, blk: Any, ready: list[int], passable: list[int]) -> int:
        agents = ready + passable + [blk.nthreads + j for j in range(len(blk.copies))]
        best = max(agents, key=lambda a: self.rank(blk, a))
        self.steps += 1
        if self.steps in self.changes:
            # A priority-change point: the agent drops below every other of its kind (a
            # thread stays above the copy engine, which moves only when no thread can).
            self.low += 1
            if best < blk.nthreads:
                self.prio[best] = 2 * self.COPY_BAND - self.low
            else:
                blk.copies[best - blk.nthreads].prio = -self.low
        return best


class GuidedPolicy:
    """Follow a Guide in its block, then (and in every other block) the fallback."""

    def __init__(self, guide: Guide, fallback: RandomPolicy | PctPolicy,
                 violator_last: bool = False) -> None:
        self.guide = guide
        self.fallback = fallback
        self.last = violator_last
        self.active = False
        self.k = 0
        self.opened = False
        self.target: dict[int, int] = {}
        self.copy_obj: Any = None
        self.abandoned: str | None = None  # why the guide was left (None: followed)
        self.followed = 0  # guide steps completed

    def start(self, blk: Any) -> None:
        self.fallback.start(blk)
        self.active = tuple(blk.block_idx) == tuple(self.guide.block)
        if self.active:
            for t in blk.threads:
                t.allowed = 0

    def choose(self, blk: Any, ready: list[int], passable: list[int]) -> int:
        while self.active and self.k < len(self.guide.steps):
            step = self.guide.steps[self.k]
            if not self.opened:
                self._open(blk, step)
            if self._complete(blk, step):
                self.k += 1
                self.followed += 1
                self.opened = False
                continue
            agent = self._next(blk, step, ready, passable)
            if agent is not None:
                return agent
            self._abandon(blk, f"step {self.k + 1} of the counterexample cannot move")
        if self.active:
            self._release(blk)
        return self.fallback.choose(blk, ready, passable)

    def _violator_last(self) -> None:
        if self.last and isinstance(self.fallback, PctPolicy):
            for t in self.guide.violator:
                self.fallback.prio[t] = -1 - t

    # -- steps ----------------------------------------------------------------------------

    def _open(self, blk: Any, step: GuideStep) -> None:
        self.opened = True
        self.copy_obj = None
        self.target = {}
        for t, n in step.advance.items():
            th = blk.threads[t]
            th.allowed += n
            self.target[t] = th.allowed

    def _complete(self, blk: Any, step: GuideStep) -> bool:
        if step.copy is not None:
            return self.copy_obj is not None and self.copy_obj not in blk.copies
        for t, goal in self.target.items():
            th = blk.threads[t]
            if th.done or th.unit > goal or (th.unit == goal and (not in_unit(th)
                                                                   or at_named(th))):
                continue
            return False
        return True

    def _next(self, blk: Any, step: GuideStep, ready: list[int], passable: list[int]
              ) -> int | None:
        if step.copy is not None:
            if self.copy_obj is None:
                self.copy_obj = match_copy(blk, step.copy)
            if self.copy_obj is None or self.copy_obj not in blk.copies:
                return None
            return blk.nthreads + blk.copies.index(self.copy_obj)
        movable = set(ready) | set(passable)
        cands = [t for t in self.target if t in movable and may_run(blk.threads[t])]
        if not cands:
            return None
        rank = getattr(self.fallback, "rank", None)
        return max(cands, key=lambda t: rank(blk, t)) if rank else min(cands)

    def _abandon(self, blk: Any, why: str) -> None:
        self.abandoned = why
        self._release(blk)

    def _release(self, blk: Any) -> None:
        """Past the guide every thread runs freely."""
        self.active = False
        for t in blk.threads:
            t.allowed = 1 << 60
        self._violator_last()


def in_unit(th: Any) -> bool:
    """Is the thread's next statement part of the unit it last entered?"""
    p = th.pending
    if p is None or th.unit_stmt is None:
        return False
    stmt = p.stmt if hasattr(p, "ready") else p  # a blocker, or the statement itself
    return th.unit_of.get(id(stmt)) == th.unit_stmt


def at_named(th: Any) -> bool:
    """Has the thread arrived at a named barrier (bar_sync) and waits there? The event
    model's arrive is done; its wait is a step of its own (semantics/temporal/guide.py)."""
    p = th.pending
    return hasattr(p, "ready") and type(p.stmt).__name__ == "NamedBar"


def may_run(th: Any) -> bool:
    """May the thread execute its next statement under the guide: it is free (outside every
    unit) or in a unit the guide has opened for it."""
    return not in_unit(th) or th.unit <= th.allowed


def match_copy(blk: Any, spec: tuple) -> Any:
    """The copy-engine operation of this block a counterexample's copy move stands for."""
    if spec[0] == "load":
        for c in blk.copies:
            if c.kind == "load" and c.bar == (spec[1], spec[2]):
                return c
        return None
    threads, age = spec[1], spec[2]
    fallback = None
    for c in blk.copies:
        if c.kind != "store" or c.tid not in threads:
            continue
        fallback = fallback or c
        th = blk.threads[c.tid]
        if any(c is x for x in th.open_group):
            c_age = 0
        else:
            c_age = next((len(th.groups) - i for i, g in enumerate(th.groups)
                          if any(c is x for x in g)), -1)
        if c_age == age:
            return c
    return fallback


def make_policy(name: str, seed: int, guide: Guide | None = None
                ) -> RandomPolicy | PctPolicy | GuidedPolicy:
    """A policy by name ("random" or "pct"); with a guide, that policy after the guide."""
    if name not in POLICIES:
        raise ValueError(f"unknown scheduling policy {name!r} (known: {', '.join(POLICIES)})")
    rng = random.Random(seed)
    base: RandomPolicy | PctPolicy = PctPolicy(rng) if name == "pct" else RandomPolicy(rng)
    return GuidedPolicy(guide, base, seed % 2 == 1) if guide is not None else base
