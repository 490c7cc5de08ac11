"""The argument for every size of a loop nest: a tile loop around a k-loop, both with
size-dependent trip counts (docs/temporal.md §15).

Why: §4's argument takes one parametric loop per class; persistent GEMMs run a k-loop of
ceil(K / 64) steps inside each tile of a tile loop with a block-dependent trip count, the
ring and the epilogue's named barriers and TMA stores carried from tile to tile. Here:

1. z3 (nest_terms.py): both loops' trip-count groups; the two loops read disjoint sizes and
   `where` does not tie them; every synchronising term periodic in each loop's iteration
   far from its end; terms that name objects periodic everywhere; the inner loop's terms
   independent of the tile; the other regions read the loops' sizes through T mod L at
   most.
2. Classes (nest_classes.py): per loop, each small trip count and each residue of the large
   ones, and per class one size assignment per end shape (z3 blocking enumeration).
3. Runs (nest_runs.py): every pair of an outer and an inner representative explored level
   by level (linear positions, nest.py), levels shared through a memo keyed by what the
   classes read, the periodic middles of the inner loop (every tile) and of the outer loop
   skipped. A large class's representative must skip in every tile (inner) or once
   (outer): its run then stands for every trip count of its class past the threshold the
   skips need, congruent modulo their periods; thresholds and periods grow until every
   run's needs are met.
Proved only when all of that holds and no run finds anything; a run that finds a
violation is re-found by a plain exploration from the start (a counterexample); anything
else is UNKNOWN with the reason.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from tilesafe.semantics.temporal.budget import Budget
from tilesafe.semantics.temporal.events import Model
from tilesafe.semantics.temporal.explore import Machine
from tilesafe.semantics.temporal.nest import Misplaced, Nest, find
from tilesafe.semantics.temporal.nest_classes import LoopClass, Shapes
from tilesafe.semantics.temporal.nest_runs import Memo, Run, Stop
from tilesafe.semantics.temporal.nest_terms import LoopFacts, NestFacts, NestTerms
from tilesafe.semantics.temporal.param_outcome import Config

if TYPE_CHECKING:
    from tilesafe.semantics.temporal.parametric import Argument

ROUNDS = 4  # rounds of growing thresholds and periods
SMALL_RUN = 256  # tiles x k-steps of a run small enough to explore plainly
MAX_RUNS = 4096  # pairs of representatives: more is UNKNOWN


@dataclass
class Context:
    """What every run of one nested argument shares."""

    model: Model
    nest: Nest
    facts: NestFacts
    template: Machine
    memo: Memo
    por: bool
    budget: Budget
    states: int = 0
    transitions: int = 0
    # (kind, class, pc, inner counters, point class) -> the value of a read far from both
    # loops' ends (nest_runs.Run.desc): one evaluation for every run
    far: dict = field(default_factory=dict)
    # the same for reads near an end, by what they depend on (nest_runs.Run._near_key)
    near: dict = field(default_factory=dict)


class NestArgument:
    """Runs the nested argument for the parametric argument `arg` (its outcome, budget and
    size searches)."""

    def __init__(self, arg: Argument) -> None:
        self.arg = arg
        self.model = arg.model
        self.out = arg.out
        self.runs: dict[tuple, Run] = {}

    def applies(self) -> Nest | None:
        nest = find(self.model)
        return None if isinstance(nest, str) else nest

    def run(self, nest: Nest) -> None:
        self.nest = nest
        out = self.out
        if self.model.symmetric:
            out.complete = False
            out.reason = "the symmetry reduction is not combined with the nested argument"
            return
        facts = NestTerms(self.model, nest, self.arg.cond, out.queries, self.arg._ms).facts()
        if isinstance(facts, str):
            self.arg._fallback(facts)
            return
        out.argument.update({"kind": "nested loops (docs/temporal.md §15)",
                             "outer": facts.outer.evidence(), "inner": facts.inner.evidence(),
                             "regions": {r: list(d) for r, d in facts.dep.items()}})
        # A plain exploration of the smallest sizes first: a complete run for the evidence,
        # and most bugs show there.
        small = self.arg.sizes.some([])
        if small is not None:
            self.arg._explore(Config(small, None, "full"))
            # A candidate (semantics/temporal/witness.py) may be a false alarm: it does not
            # make the argument moot.
            if any(not f.detail.get("candidate") for f, _, _ in out.findings):
                out.complete = False
                out.reason = "refuted at the smallest sizes; the nested argument was skipped"
                return
        template = self._template(facts)
        if isinstance(template, str):
            self._unknown(template)
            return
        ctx = Context(self.model, nest, facts, template, Memo(), self.arg.por,
                      self.arg.budget)
        try:
            self._rounds(ctx)
        except (Stop, Misplaced) as exc:
            self._unknown(str(exc))
        finally:
            out.states += ctx.states
            out.transitions += ctx.transitions
            out.explorations.append({"trip": None, "kind": "nested runs", "sizes": {},
                                     "states": ctx.states, "complete": out.complete})
            out.argument.update({"runs": len(self.runs), "levels explored": ctx.memo.explored,
                                 "levels shared": ctx.memo.hits})

    def _template(self, facts: NestFacts) -> Machine | str:
        """A machine whose enumerations cover every start and residue of both loops: its
        atoms, tables and futures serve every run (nest_terms: object names periodic)."""
        o, n = facts.outer, facts.inner
        need = [(o, o.start + o.period + 1 - min(o.offsets.values())),
                (n, n.start + n.period + 1 - min(n.offsets.values()))]
        sizes = self.arg.sizes.some([lambda enc, lf=lf, v=v: enc.term(lf.t_expr) >= v
                                     for lf, v in need])
        if sizes is None:
            return "no size assignment runs both loops through a whole period"
        caps = {}
        for na in self.nest.agents.values():
            caps[na.outer.var.uid] = o.start + o.period
            caps[na.inner.var.uid] = n.start + n.period
        return Machine(self.model, sizes, loop_caps=caps)

    def _rounds(self, ctx: Context) -> None:
        o, n = ctx.facts.outer, ctx.facts.inner
        shapes = Shapes(self.model, ctx.nest, ctx.facts,
                        NestTerms(self.model, ctx.nest, self.arg.cond, self.out.queries,
                                  self.arg._ms),
                        self.arg.sizes, self.out.queries, self.arg._ms)
        need = {"outer": [o.period, o.start + o.eff + o.period + 1],
                "inner": [n.period, n.start + n.eff + n.period + 1]}
        for _ in range(ROUNDS):
            reps = {}
            for lf in (o, n):
                got = self._reps(shapes, lf, *need[lf.name])
                if isinstance(got, str):
                    self._unknown(got)
                    return
                reps[lf.name] = got
            if len(reps["outer"]) * len(reps["inner"]) > MAX_RUNS:
                self._unknown(f"more than {MAX_RUNS} runs (outer x inner representatives)")
                return
            grown = {k: list(v) for k, v in need.items()}
            for co, so in reps["outer"]:
                for ci, si in reps["inner"]:
                    run = self._run(ctx, so, si)
                    if run.found:
                        self._refute(run, (co, ci), ctx.facts)
                        return
                    why = self._needs(run, co, ci, grown)
                    if why:
                        self._unknown(why)
                        return
            if grown == need:
                self.out.argument.update({
                    "classes": {lf: [c.text() for c, _ in reps[lf]] for lf in reps},
                    "periods": {k: v[0] for k, v in need.items()},
                    "thresholds": {k: v[1] for k, v in need.items()},
                    "covers": "every size assignment allowed by 'where'"})
                return
            need = grown
        self._unknown("the thresholds and periods of the runs did not settle")

    def _reps(self, shapes: Shapes, lf: LoopFacts, period: int, thr: int
              ) -> list[tuple[LoopClass, dict[str, int]]] | str:
        classes = shapes.classes(lf, thr, period)
        if isinstance(classes, str):
            return classes
        out = []
        for cls in classes:
            got = shapes.reps(lf, cls)
            if isinstance(got, str):
                return got
            out += [(cls, {k: v for k, v in s.items() if k in lf.sizes}) for s in got]
        return out

    def _run(self, ctx: Context, so: dict[str, int], si: dict[str, int]) -> Run:
        sizes = {**so, **si}
        key = tuple(sorted(sizes.items()))
        run = self.runs.get(key)
        if run is None:
            t_o = self.arg.sizes.eval_t(ctx.facts.outer.t_expr, sizes)
            t_i = self.arg.sizes.eval_t(ctx.facts.inner.t_expr, sizes)
            run = self.runs[key] = Run(ctx, sizes, t_o, t_i)
            run.run()
        return run

    @staticmethod
    def _needs(run: Run, co: LoopClass, ci: LoopClass, grown: dict[str, list[int]]
               ) -> str | None:
        """What a large class's run needs of the class's threshold and period; why it
        cannot stand for its class at all."""
        for cls, loop in ((co, "outer"), (ci, "inner")):
            if cls.kind != "large":
                continue
            jumps = [j for j in run.jumps if j.loop == loop]
            if loop == "inner" and not run.inner_ok():
                return (f"the inner loop of a tile does not repeat within the run at sizes "
                        f"{run.sizes} (no periodic level structure)")
            if loop == "outer" and not jumps:
                return (f"the tiles do not repeat within the run at sizes {run.sizes} (no "
                        "periodic level structure of the outer loop)")
            for j in jumps:
                grown[loop][0] = math.lcm(grown[loop][0], j.period)
                grown[loop][1] = max(grown[loop][1], j.need)
        return None

    def _refute(self, run: Run, classes: tuple[LoopClass, LoopClass], facts: NestFacts
                ) -> None:
        """A run found a violation: show it from the start of the kernel, by a plain
        exploration of the run's sizes when they are small, else of the smallest trip
        counts of its classes (the same violation there, when the shape agrees)."""
        f = run.found[0]
        self.out.complete = False
        tries = [dict(run.sizes)] if run.t_o * max(run.t_i, 1) <= SMALL_RUN else []
        small = dict(run.sizes)
        for cls, lf in zip(classes, (facts.outer, facts.inner), strict=True):
            if cls.kind != "large":
                continue
            t = cls.thr + (cls.value - cls.thr) % cls.period
            keep = {n: v for n, v in small.items() if n not in lf.sizes}
            got = self.arg.sizes.some([lambda enc, lf=lf, t=t: enc.term(lf.t_expr) == t] +
                                      [lambda enc, n=n, v=v: enc.sizes[n] == v
                                       for n, v in keep.items()])
            if got is not None:
                small = got
        if small != run.sizes:
            tries.append(small)
        for sizes in tries:
            self.arg._explore(Config(sizes, None, "full"))
            if any(not g.detail.get("candidate") for g, _, _ in self.out.findings):
                self.out.reason = (f"refuted by the nested argument ({f.code}) at sizes "
                                   f"{run.sizes}")
                return
            if self.out.findings:
                self.out.reason = (f"the nested argument found a possible {f.code} at sizes "
                                   f"{run.sizes}, to be confirmed on exact footprints")
                return
        self.out.reason = (f"the nested argument found {f.code} ({f.message}) at sizes "
                           f"{run.sizes}; a plain exploration of small sizes did not reach it")

    def _unknown(self, why: str) -> None:
        self.out.complete = False
        if not self.out.reason:
            self.out.reason = why


def nested(arg: Argument) -> bool:
    """Run the nested argument when the model is a nest (True), else nothing (False)."""
    na = NestArgument(arg)
    nest = na.applies()
    if nest is None:
        return False
    na.run(nest)
    return True


__all__ = ["NestArgument", "nested"]
