"""A run of the nested argument: one size assignment explored level by level (nest.py's
linear levels), sharing levels with every other run through a memo, and skipping the
periodic middle of the inner loop in each tile and of the outer loop.

Why: a level's explored states depend only on its entry states (normalised) and on what
the classes read during the level (nest_level.py). So a level is explored once per
(normalised entries, values of what it read): the memo keeps, per set of entries, the reads
of the exploration and their values (nest_reads.py), and any later level with the same
entries and the same values at those reads has the same result.

Skipping (docs/temporal.md §15): when the frontier (every entry set still to explore,
relative to the level) repeats at levels lam0 < lam1 of one run, and every position read
since lam0 lies where the descriptors are periodic -- the far middle of one tile's inner
loop (k >= H, at least G from its end), or tiles past the outer loop's start margin and far
from its end, with lam1 - lam0 a multiple of the period -- then the frontier repeats every
lam1 - lam0 levels until it gets near that end; the run continues from the last repetition
that keeps every read position in the periodic region.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tilesafe.semantics.temporal.nest import INF, C, I
from tilesafe.semantics.temporal.nest_level import Found, explore_level
from tilesafe.semantics.temporal.nest_reads import ReadValues

MAX_LEVELS = 20_000  # levels one run may process (after skipping): else UNKNOWN


@dataclass(frozen=True)
class LevelResult:
    outputs: tuple[tuple[int, int], ...]  # (offset of a later level, entry part id)
    found: tuple[Found, ...]
    states: int
    transitions: int
    reach: int  # the largest offset read (INF excluded)


@dataclass
class Memo:
    """Levels explored so far, shared by every run of one nested argument."""

    parts: dict[frozenset, int] = field(default_factory=dict)
    part_list: list[frozenset] = field(default_factory=list)
    levels: dict[tuple[int, ...], list[tuple[tuple, tuple, LevelResult]]] = field(
        default_factory=dict)
    explored: int = 0  # levels explored (memo misses)
    hits: int = 0

    def part(self, states: frozenset) -> int:
        pid = self.parts.get(states)
        if pid is None:
            pid = self.parts[states] = len(self.part_list)
            self.part_list.append(states)
        return pid


@dataclass
class Jump:
    loop: str  # "inner" or "outer"
    start: int  # k1 (inner) or t1 (outer): where the repetition was recognised
    period: int  # lam1 - lam0 in k-steps (inner) or tiles (outer)
    end: int  # distance to the loop's end at the landing (T - k or T - t)
    need: int  # the least trip count of a run this one stands for (with T = this T mod period)


class Stop(Exception):
    """The run cannot go on within the argument (why)."""


class Run(ReadValues):
    """One size assignment (trip counts T_o, T_i) of the nest, explored level by level."""

    def __init__(self, ctx: Any, sizes: dict[str, int], t_outer: int, t_inner: int) -> None:
        super().__init__(ctx, sizes, t_outer, t_inner)
        self.jumps: list[Jump] = []
        self.found: list[Found] = []
        self.states = 0
        self.tiles_inner: set[int] = set()  # tiles whose inner loop levels were explored
        self.jumped: set[int] = set()  # tiles whose inner loop was skipped through
        self.continued: dict[int, int] = {}  # a tile left mid-loop by an outer skip -> where

    # -- the run ----------------------------------------------------------------------------

    def run(self) -> None:
        memo: Memo = self.ctx.memo
        lin = self.lin
        init = self.machine.initial()
        lam0 = lin.level(init)
        pending: dict[int, set[int]] = {lam0: {memo.part(frozenset({lin.normalise(init,
                                                                                 lam0)}))}}
        history: dict[tuple, list[int]] = {}
        processed: list[tuple[int, int]] = []  # (lam, reach) in order
        for _ in range(MAX_LEVELS):
            if not pending:
                return
            lam = min(pending)
            node = tuple(sorted((lv - lam if lv < INF else INF, tuple(sorted(ps)))
                                for lv, ps in pending.items()))
            shift = self._skip(node, lam, history, processed, pending)
            if shift:
                pending = {lv + shift if lv < INF else lv: ps for lv, ps in pending.items()}
                continue
            history.setdefault(node, []).append(lam)
            region, t, _ = lin.where(lam)
            if region == I:
                self.tiles_inner.add(t)
            res = self._level(lam, tuple(sorted(pending.pop(lam))))
            if res.found:
                self.found.extend(res.found)
                return
            processed.append((lam, res.reach))
            for off, pid in res.outputs:
                lv = INF if off >= INF else lam + off
                pending.setdefault(lv, set()).add(pid)
        raise Stop(f"more than {MAX_LEVELS} levels in one run")

    def inner_ok(self) -> bool:
        """Every tile whose inner loop the run explored was skipped through: the run stands
        for every inner trip count of its class (nest_argument.py)."""
        def ok(t: int) -> bool:
            return t in self.jumped or (t in self.continued and ok(self.continued[t]))

        return all(ok(t) for t in self.tiles_inner)

    def _level(self, lam: int, parts: tuple[int, ...]) -> LevelResult:
        memo: Memo = self.ctx.memo
        for reads, descs, res in memo.levels.get(parts, ()):
            if tuple(self.desc(r, lam) for r in reads) == descs:
                memo.hits += 1
                return res
        entries = [self.lin.denormalise(s, lam) for p in parts for s in memo.part_list[p]]
        ex = explore_level(self.machine, self.lin, entries, lam, self.ctx.por, self.ctx.budget)
        memo.explored += 1
        self.states += ex.states
        self.ctx.states += ex.states
        self.ctx.transitions += ex.transitions
        outs = []
        for lv, states in ex.outputs.items():
            pid = memo.part(frozenset(self.lin.normalise(s, lv) for s in states))
            outs.append((INF if lv >= INF else lv - lam, pid))
        reads = tuple(sorted({self.norm_read(r, lam) for r in ex.reads}, key=repr))
        reach = max((r[3][0] for r in reads if r[1] in self.ctx.nest.agents
                     and isinstance(r[3][0], int)), default=0)
        res = LevelResult(tuple(sorted(outs)), tuple(ex.found), ex.states, ex.transitions,
                          reach)
        if not ex.found:
            memo.levels.setdefault(parts, []).append(
                (reads, tuple(self.desc(r, lam) for r in reads), res))
        return res

    def _skip(self, node: tuple, lam1: int, history: dict, processed: list,
              pending: dict) -> int:
        """The levels to skip at a repeated frontier (0: none)."""
        o, n = self.facts.outer, self.facts.inner
        lin = self.lin
        r1, t1, k1 = lin.where(lam1)
        top_pending = max((lv for lv in pending if lv < INF), default=lam1) - lam1
        for lam0 in reversed(history.get(node, ())):
            delta = lam1 - lam0
            reach = max([top_pending] + [r + lv - lam1 for lv, r in processed if lv >= lam0])
            r0, t0, k0 = lin.where(lam0)
            if (r0 == r1 == I and t0 == t1 and k0 >= n.start and delta % n.period == 0):
                last = lin.where(lam1 + reach)
                if last[0] != I or last[1] != t1:
                    continue
                far_k = self.t_i - n.eff  # the last k-step at least eff from the end
                count = (far_k - last[2]) // delta
                if count >= 1:
                    # Reads of this tile so far must be far from the end in a run this one
                    # stands for, too: the least trip count covers them.
                    top = max([lam1 + reach] + [lv + r for lv, r in processed
                                                if lin.where(lv)[1] == t1])
                    end = self.t_i - (k1 + count * delta)
                    need = max(k1 + end, lin.where(top)[2] + n.eff)
                    self.jumps.append(Jump("inner", k1, delta, end, need))
                    self.jumped.add(t1)
                    return count * delta
            if (r0 == r1 and k0 == k1 and t1 > t0 and t0 >= o.start
                    and (t1 - t0) % o.period == 0 and delta == (t1 - t0) * lin.lam):
                tiles = t1 - t0
                top_tile = lin.where(lam1 + reach)[1] if lam1 + reach < INF else -1
                if top_tile < 0:
                    continue
                count = (self.t_o - o.eff - top_tile) // tiles
                if count >= 1:
                    read = max([top_tile] + [lin.where(lv + r)[1] for lv, r in processed
                                             if lv + r < INF])
                    end = self.t_o - (t1 + count * tiles)
                    self.jumps.append(Jump("outer", t1, tiles, end,
                                           max(t1 + end, read + o.eff)))
                    landing = t1 + count * tiles
                    if r1 in (I, C) and t1 in self.jumped:  # the landing tile's inner loop
                        self.jumped.add(landing)  # so far is tile t1's, skipped through
                    elif r1 == I:  # tile t1's inner loop goes on in the landing tile
                        self.continued[t1] = landing
                    return count * tiles * lin.lam
        return 0


__all__ = ["Jump", "Memo", "Run", "Stop"]
