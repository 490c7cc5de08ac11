"""Step 3 of the argument for every trip count (docs/temporal.md §4): the level sets of the
system with one huge trip count, computed one by one until they repeat.

Why its own module: the level of a state (the least iteration the classes with a parametric
loop have reached) never decreases and rises by at most one per step, so the states of
level m+1 are a function of those of level m. Normalised (iterations relative to m, and
with the parity symmetry, parity bits relative to the half periods passed), the sequence
becomes periodic: this module finds m0 and P, the largest drift D between classes, and
shifts a level set to another trip count for its tail (parametric.py).
"""

from __future__ import annotations

from tilesafe.semantics.temporal.budget import Budget, BudgetExceeded
from tilesafe.semantics.temporal.explore import (
    Finding,
    Machine,
    classify_deadlock,
    exit_violation,
    finding_key,
    finished,
    rank,
)
from tilesafe.semantics.temporal.explore.state import BarRec, State, bar_rec, moved
from tilesafe.semantics.temporal.instrs import End
from tilesafe.semantics.temporal.param_terms import Group, Periodicity

HUGE_TRIP = 1_000_000
MAX_DRIFT = 64
MAX_LEVELS = 200


class Levels:
    """Level-by-level exploration of the system with one huge trip count."""

    def __init__(self, mach: Machine, group: Group, per: Periodicity, por: bool,
                 budget: Budget) -> None:
        self.m = mach
        self.group = group
        self.per = per
        self.por = por
        self.budget = budget
        self.period = per.sym or per.period  # the step in which level sets may repeat
        self.flip = per.sym is not None
        self.sets: list[set] = []
        self.norms: list[frozenset] = []
        self.findings: dict[str, Finding] = {}
        self.finding_level: dict[str, int] = {}
        self.states = 0
        self.transitions = 0
        self.drift = 0
        self.m0 = self.p = -1
        self.parent_of: dict = {}
        self.root = mach.initial()
        self.param = {a: ag.param_loop for a, ag in enumerate(mach.agents)
                      if ag.param_loop is not None}
        self.t_far = 0
        self.stop = False  # a violation was found: the argument is moot
        self.spent = False  # the verification budget ran out

    def progress(self, state: State, a: int) -> int:
        enter, nxt, depth, _ = self.param[a]
        pc, ctrs = state.agents[a]
        if pc < enter:
            return 0
        if pc > nxt or isinstance(self.m.agents[a].code[pc], End):
            return HUGE_TRIP * 4
        return ctrs[depth]

    def level(self, state: State) -> tuple[int, int]:
        ps = [self.progress(state, a) for a in self.param]
        return min(ps), max(ps) - min(ps)

    def normal(self, state: State, m: int) -> State:
        """Iterations relative to the level; with the parity symmetry, parity bits relative
        to the number of half periods passed."""
        agents = list(state.agents)
        for a, (enter, nxt, depth, _) in self.param.items():
            pc, ctrs = agents[a]
            if enter < pc < nxt:
                agents[a] = (pc, ctrs[:depth] + (ctrs[depth] - m,) + ctrs[depth + 1:])
        bars = state.bars
        if self.flip and (m // self.period) % 2:
            bars = flip(bars)
        return moved(state, tuple(agents), bars)

    def path_to(self, st: tuple) -> tuple:
        out = []
        while self.parent_of.get(st) is not None:
            st, mv = self.parent_of[st]
            out.append(mv)
        return tuple(reversed(out))

    def run(self) -> tuple[bool, str]:
        m = self.m
        por = self.por
        frontier = [self.root]
        self.parent_of[self.root] = None
        for lvl in range(MAX_LEVELS):
            current: set = set(frontier)
            queue = list(frontier)
            nxt: list = []
            while queue:
                if self.stop:
                    return False, f"refuted at level {lvl} of the far system"
                st = queue.pop()
                self.states += 1
                try:
                    self.budget.charge()
                except BudgetExceeded as exc:
                    self.spent = True
                    return False, exc.reason
                if finished(m, st):
                    bad = exit_violation(m, st)
                    if bad is not None:
                        self._find(Finding(bad[0], bad[1], bad[2], self.path_to(st),
                                           self.root, False, {"state": st}), lvl)
                        continue
                succ, enabled, _ = m.successors(st, por)
                if not enabled:
                    if not finished(m, st) or st.copies:
                        code, why = classify_deadlock(m, st)
                        self._find(Finding(code, why, None, self.path_to(st), self.root, False,
                                           {"state": st}), lvl)
                    continue
                for mv, new, info in succ:
                    self.transitions += 1
                    if new is None:
                        self._find(Finding(info.code, info.message, info.span,
                                           self.path_to(st) + (mv,), self.root, False,
                                           {"state": st, **info.detail}), lvl)
                        continue
                    if info is not None:
                        self._find(Finding(info.code, info.message, info.span,
                                           self.path_to(st) + (mv,), self.root, True,
                                           {"state": st, **info.detail}), lvl)
                    if new in self.parent_of:
                        continue
                    self.parent_of[new] = (st, mv)
                    lv, drift = self.level(new)
                    if drift > MAX_DRIFT:
                        return False, ("the agents drift apart without bound (more than "
                                       f"{MAX_DRIFT} iterations); explored small trip counts "
                                       "only")
                    self.drift = max(self.drift, drift)
                    if lv + drift + 2 * (self.per.margin or 0) + 4 >= self.t_far:
                        return False, "the far trip count is too small for the level argument"
                    if lv == lvl:
                        current.add(new)
                        queue.append(new)
                    else:
                        nxt.append(new)
            if self.stop:
                return False, f"refuted at level {lvl} of the far system"
            self.sets.append(current)
            self.norms.append(frozenset(self.normal(s, lvl) for s in current)
                              | {("level mod", lvl % self.period)})
            if not nxt:
                return False, "every run ends within the explored levels (trip count too small?)"
            frontier = nxt
            for p in range(self.period, min(lvl, 8 * self.period) + 1, self.period):
                # From the start margin on, the step from one level to the next is the same
                # function of the level set (and of the level mod L): only then may it repeat.
                if lvl - p >= self.per.start and self.norms[lvl] == self.norms[lvl - p]:
                    self.m0, self.p = lvl - p, p
                    return True, ""
        return False, f"no periodic level structure within {MAX_LEVELS} levels"

    def shift(self, state: State, delta: int) -> State:
        """The same state with every parametric loop `delta` iterations further on (and,
        with the parity symmetry, parity bits flipped once per half period)."""
        if delta == 0:
            return state
        agents = list(state.agents)
        for a, (enter, nxt, depth, _) in self.param.items():
            pc, ctrs = agents[a]
            if enter < pc < nxt:
                agents[a] = (pc, ctrs[:depth] + (ctrs[depth] + delta,) + ctrs[depth + 1:])
        bars = state.bars
        if self.flip and (delta // self.period) % 2:
            bars = flip(bars)
        return moved(state, tuple(agents), bars)

    def _find(self, f: Finding, lvl: int) -> None:
        key = finding_key(f)
        old = self.findings.get(key)
        if old is None or rank(f) < rank(old):
            self.findings[key] = f
            self.finding_level[key] = lvl
        if not f.detail.get("candidate"):
            self.stop = True


def flip(bars: tuple[BarRec, ...]) -> tuple[BarRec, ...]:
    return tuple(bar_rec(b.st._replace(parity=b.st.parity ^ 1), b.init_by, b.fenced, b.phases)
                 if b.st.initialized else b for b in bars)


def prefix(f: Finding, levels: Levels) -> Finding:
    """Extend a path that starts at a level-set state back to the initial state."""
    path = levels.path_to(f.root)
    return Finding(f.code, f.message, f.span, path + f.path, levels.root, f.soft, f.detail)


def share_atoms(dst: Machine, src: Machine) -> None:
    """Tails continue states of the big system: use its atoms and waiter sets."""
    dst.atoms, dst.waiters = src.atoms, src.waiters
    dst._ev.clear()
    dst._static_cache.clear()
    dst._por_cache.clear()
    dst.rebuild_static()
