"""Checker "banks": shared-memory bank conflicts of every ordinary load and store (a lint).

Thin: the sites and their dependences are semantics/hw/bank_sites.py, the enumeration and the
wavefront counts semantics/hw/bank_eval.py, the layout suggestion semantics/hw/bank_suggest.py;
this module turns their results into obligations.

Every shared-memory `Load` and `Store` of the generic proxy gets one obligation, "this access
is free of bank conflicts", with severity WARNING: a conflict costs time, never correctness,
so these obligations never make `verify` fail. TMA copies are done by the copy engine, not by
a warp, and are not checked here.

How an access is evaluated (all concrete, checked against `semantics/hw/banks.py`):

* Threads: the statement's thread set is the block narrowed by its role; a role with
  `elect one` runs on one thread, and one thread cannot conflict with itself (PROVED at
  once). Warps are threads 32w .. 32w+31 of the block; lane = thread % 32 -- on an AMD
  target (`--target gfx942`) 64-lane wavefronts, threads 64w .. 64w+63.
* Guards: an `if` condition (or the left side of `&&`/`||` guarding a load on its right)
  that depends only on the thread, loop variables and constants is evaluated per lane.
  Every other guard is assumed true in the "bound" evaluation, which decides PROVED: adding
  lanes can only add distinct words per bank, so it over-approximates every block and every
  outcome of the guard. Guards on sizes or block coordinates are also evaluated concretely
  (the "concrete" evaluation, which decides REFUTED); guards that read memory or use
  mutable/float values cannot be evaluated at all.
* Sizes: indices and loop bounds are evaluated at one representative size assignment that
  satisfies `where` (a small search, largest-first, so tiles are full and pipelined loops
  wrap their rings), reported in the evidence. Block coordinates: block (0, 0, 0) when
  nothing depends on them, otherwise blocks {0, 1, last} in each grid dimension.
* Loop iterations: for each enclosing loop variable v, a syntactic argument decides how
  many iterations must be looked at, independently of the sizes: if nothing that shapes the
  warp access (indices, evaluated guards, bounds of inner loops) depends on v, one
  iteration; if it depends on v only through terms periodic in v (`v % c`, `(a*v + t) % c`,
  sums/products/min/max of periodic terms), one period; otherwise every iteration at the
  representative sizes, up to LOOP_CAP. Lanes of one warp execute iteration i of a loop
  together (lock-step), so instances are keyed by iteration *indices*.
* Address: the absolute byte address of each lane's element from `semantics/interpreter/smem.py`'s
  `plan_shared`, exactly as the reference interpreter places the buffer; width = element
  bytes. Cost: `banks.wavefronts_nvidia` per warp instance; on gfx942 the CDNA3 LDS model
  (semantics/hw/bank_model.py): lane phases per access width and read/write, PROVED with the
  documented merges only, REFUTED only with every lane pair touching one dword merged, and
  UNKNOWN (TS690) in between, naming the undocumented merge rule.

Verdicts:

* PROVED when the bound evaluation finds one wavefront per phase in every instance.
* REFUTED (TS601, "k-way bank conflict", k = worst per-phase wavefronts) when the concrete
  evaluation has a conflicting instance and no data-dependent guard encloses the access. If
  only the bound evaluation conflicts (a size/block guard shuts the lanes out at the
  representative sizes, e.g. the else-branch of a ragged-tail guard), a few more size
  assignments, ragged ones first, and the corner blocks are searched for a witness. The
  counterexample names sizes, block, warp, iteration, the colliding lanes, their indices and
  addresses.
  The message adds a layout fix. For buffers not touched by TMA: `swizzle_synth.synthesize`
  on the buffer's last two dims, counterexample-guided: start from the worst warp instance
  of every access of the buffer, recount *every* instance of every access of the buffer
  under the answer, add those still conflicting and ask again (up to SYNTH_ROUNDS). CuTe
  family first, then the row-XOR family, written as an F2 `linear` layout. The synthesiser
  speaks of CuTe `Swizzle<B,Mb,S>` on BYTE offsets; our `swizzle(B, M, S, inner)` acts on
  ELEMENT offsets, so the suggestion is `swizzle(B, Mb - log2(elem_bytes), S, row_major)`.
  The recount re-places the buffers with the new layout through `plan_shared` (which
  realises it with `semantics/layouts.realize`, as the interpreter does), requires it to
  permute the buffer's elements, and only a layout whose recount agrees is suggested. For
  TMA buffers the copy engine fixes the arrangement, so only the TMA swizzle modes that fit
  the row are recounted.
* UNKNOWN (TS690) when an index reads memory (or any value that cannot be evaluated), when a
  conflict needs lanes that only a data-dependent guard could admit, when a conflict is only
  seen with size/block guards assumed true and no checked size/block activates it, or when a
  non-periodic loop was cut at LOOP_CAP iterations without finding a conflict.

Evidence of an NVIDIA kernel also carries an AMD CDNA LDS estimate (64-lane wavefronts made
of warps 2w and 2w+1, `banks.wavefronts_amd_lds`, CDNA3 always, CDNA4 for reads):
information only; `--target gfx942` proves the AMD model instead.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping, Sequence
from typing import Any

from tilesafe.checkers.obligation import Obligation, Severity, Verdict
from tilesafe.checkers.registry import CheckOptions
from tilesafe.frontend import ir
from tilesafe.semantics.hw import bank_model, bank_param, banks
from tilesafe.semantics.hw.bank_eval import (
    Cost,
    SiteEval,
    Unevaluable,
    amd_estimate,
    costs,
    evaluate_site,
    recount_real,
    representative_sizes,
    where,
    worst_cost,
)
from tilesafe.semantics.hw.bank_sites import Site, compile_expr, period_in, sites
from tilesafe.semantics.hw.bank_suggest import Suggester, Suggestion
from tilesafe.semantics.interpreter.interp_error import InterpError
from tilesafe.semantics.interpreter.smem import Placement, plan_shared

__all__ = ["check", "check_kernel", "compile_expr", "period_in", "sites", "Suggestion"]

CHECKER = "banks"
CONFLICT = "TS601"  # some warp instance needs more wavefronts than the ideal
UNDECIDED = "TS690"  # the addresses (or the lanes that run) depend on data, or coverage cut

# For witnesses of guarded conflicts: ragged sizes early, so that partial tiles show up.
WITNESS_CANDIDATES = (768, 100, 65, 33, 7, 384, 1, 512, 256, 192, 128, 96, 64, 48, 32, 24,
                      16, 12, 8, 5, 4, 3, 2)
WITNESS_SIZES = 8  # size assignments tried when looking for a witness block

def check(kernel: ir.Kernel, options: CheckOptions) -> list[Obligation]:
    """The registry entry point: one obligation per shared load/store, all WARNING."""
    return check_kernel(kernel, options)


def check_kernel(kernel: ir.Kernel, options: CheckOptions | None = None,
                 suggest: bool = True) -> list[Obligation]:
    """`check`, optionally without the (z3) layout suggestion for refuted accesses."""
    options = options or CheckOptions()
    start = time.perf_counter()
    all_sites, lets = sites(kernel)
    if not all_sites:
        return []
    reps = representative_sizes(kernel)
    try:
        plan = plan_shared(kernel.shared)
    except InterpError as err:  # a layout that cannot be realised: the layout lint's case
        return [Obligation(CHECKER, _Checker.name_of(kernel, site), Verdict.UNKNOWN,
                           "enumeration", site.span, UNDECIDED, f"cannot place the shared "
                           f"buffers: {err}", Severity.WARNING) for site in all_sites]
    evals: dict[int, SiteEval | str] = {}
    for k, site in enumerate(all_sites):
        if site.scope.role is not None and site.scope.role.elect_one:
            evals[k] = "elect"
        elif not reps:
            evals[k] = "no size assignment satisfying `where` was found"
        else:
            try:
                evals[k] = evaluate_site(kernel, site, lets, reps[0][0], reps[0][1])
            except Unevaluable as why:
                evals[k] = why.reason
            except (ArithmeticError, KeyError, TypeError, ValueError) as err:
                evals[k] = f"evaluation failed ({type(err).__name__}: {err})"
    setup = time.perf_counter() - start
    ctx = _Checker(kernel, options, all_sites, lets, plan, evals, reps, suggest)
    out = []
    for k in range(len(all_sites)):
        t0 = time.perf_counter()
        ob = ctx.obligation(k)
        out.append(dataclasses.replace(ob, seconds=time.perf_counter() - t0 + setup))
    return out


def _sized_bounds(loop: ir.For, lets: Mapping[int, ir.Expr]) -> bool:
    """A loop whose trip count reads the sizes or the block (enumerated for one only)."""
    from tilesafe.semantics.temporal.events import Lets, free_vars

    table = Lets(dict(lets))
    return any(v.startswith("size:") or v == "block"
               for e in (loop.lo, loop.hi) for v in free_vars(e, table))


class _Checker:
    def __init__(self, kernel: ir.Kernel, options: CheckOptions, all_sites: tuple[Site, ...],
                 lets: Mapping[int, ir.Expr], plan: Any, evals: Mapping[int, SiteEval | str],
                 reps: list[tuple[dict[str, int], tuple[int, ...]]], suggest: bool) -> None:
        self.kernel, self.options, self.sites, self.lets = kernel, options, all_sites, lets
        self.plan, self.evals, self.reps, self.want_suggestion = plan, evals, reps, suggest
        self.suggester = Suggester(kernel, all_sites, evals, plan.placements,
                                   options.timeout_ms)
        self.model = bank_model.for_target(kernel.target)

    @staticmethod
    def name_of(kernel: ir.Kernel, site: Site) -> str:
        return (f"{kernel.name}: shared {site.op} of {site.buffer} at {where(site.span)} "
                "free of bank conflicts")

    def name(self, site: Site) -> str:
        return self.name_of(self.kernel, site)

    def obligation(self, k: int) -> Obligation:
        site, ev = self.sites[k], self.evals[k]
        name = self.name(site)
        if ev == "elect":
            return Obligation(CHECKER, name, Verdict.PROVED, "trivial", site.span,
                              message="conflict-free: one thread (elect one) runs it",
                              severity=Severity.WARNING, evidence={"threads": 1})
        if isinstance(ev, str):
            return Obligation(CHECKER, name, Verdict.UNKNOWN, "enumeration", site.span,
                              UNDECIDED, f"cannot evaluate the lane addresses: {ev}",
                              Severity.WARNING, evidence={"reason": ev})
        place = self.plan.placements[site.buffer]
        bound = costs(ev, place, concrete=False)
        evidence = self.evidence(ev, place, bound)
        worst_bound = worst_cost(bound)
        if worst_bound is None or worst_bound.report.max_way <= 1:
            return self.proved(name, ev, bound, evidence)
        # Without size/block guards the concrete evaluation is the bound one. A refutation
        # counts with every dword merge (the model's lower bound; NVIDIA's only count).
        concrete = bool(ev.context_guards)
        worst = worst_cost(costs(ev, place, concrete=concrete, merged=True))
        if worst is not None and worst.report.max_way > 1:
            if ev.data_guards:
                return self.conditional(name, ev, worst, evidence, concrete=True)
            return self.refuted(name, ev, worst, place, evidence)
        witness = self.witness(ev, worst_bound)
        if witness is not None:
            ev2, cost = witness
            return self.refuted(name, ev2, cost, place, evidence, witnessed=True)
        if not self.model.exact_merge:
            upper = worst_cost(costs(ev, place, concrete=concrete))
            if upper is not None and upper.report.max_way > 1:
                return self.merge_unknown(name, ev, upper, evidence)
        return self.conditional(name, ev, worst_bound, evidence, concrete=False)

    # -- evidence and messages --

    def evidence(self, ev: SiteEval, place: Placement, bound: Sequence[Cost]) -> dict[str, object]:
        worst = worst_cost(bound)
        trips = {}
        for lp in ev.loops:
            name = lp.loop.var.name
            if name in ev.truncated:
                n, trip = ev.truncated[name]
                trips[name] = f"first {n} of {trip} iterations ({lp.why}; the rest unchecked)"
            elif lp.checks is None:
                trips[name] = f"every iteration ({lp.why})"
            else:
                trips[name] = f"first {lp.checks} iteration(s) of each run ({lp.why})"
        out = {
            "model": self.model.describe,
            "target": self.kernel.target.name,
            "buffer": place.buffer.name,
            "layout": str(place.buffer.layout),
            "base_address": place.base,
            "width_bytes": place.elem_bytes,
            "op": ev.site.op,
            "sizes": dict(ev.contexts[0].sizes) if ev.contexts else {},
            "size_dependent_index": ev.size_dependent,
            "blocks_checked": [list(c.block) for c in ev.contexts],
            "iterations": trips,
            "warp_accesses": len(bound),
            "wavefronts": sum(c.report.wavefronts for c in bound),
            "ideal": sum(c.report.ideal for c in bound),
            "worst_way": worst.report.max_way if worst else 0,
            "assumed_true_guards": ev.data_guards + ev.context_guards,
            "data_guards": ev.data_guards,
            "out_of_bounds_lanes": ev.out_of_bounds,
        }
        if self.model is bank_model.NVIDIA:
            out["amd_lds"] = amd_estimate(ev, place)
        return out

    def proved(self, name: str, ev: SiteEval, bound: Sequence[Cost],
               evidence: dict[str, object]) -> Obligation:
        site = ev.site
        total = sum(c.report.wavefronts for c in bound)
        ideal = sum(c.report.ideal for c in bound)
        scope = f"{len(bound)} warp accesses"
        if ev.truncated:
            cut = ", ".join(f"{v}: {n} of {t}" for v, (n, t) in ev.truncated.items())
            return Obligation(CHECKER, name, Verdict.UNKNOWN, "enumeration", site.span,
                              UNDECIDED, f"no conflict in the iterations checked, but loop "
                              f"iterations were cut ({cut}) and the address is not periodic "
                              "in them", Severity.WARNING, evidence=evidence)
        msg = f"conflict-free: {total} wavefronts, ideal {ideal} ({scope}"
        method = "enumeration"
        # Counted at representative sizes: the address reads the sizes or the block, or a
        # non-periodic loop was enumerated for the trip count of those sizes only.
        partial = (ev.size_dependent or ev.block_dependent
                   or any(lp.checks is None and _sized_bounds(lp.loop, self.lets)
                          for lp in ev.loops))
        if partial:
            ok, how = bank_param.invariant(
                self.kernel, site.indices, site.scope.loops,
                site.scope.role, self.lets, self.plan.placements[site.buffer],
                self.options.timeout_ms, self.model.lanes)
            evidence["scope"] = ("every size and block (parametric: " + how + ")" if ok else
                                 "the representative sizes and blocks only: " + how)
            if ok:
                method = "enumeration + z3 (translation invariance, every size)"
                msg += "; for every size and block: the lane offsets do not depend on them"
            else:
                where = (f"at sizes {_sizes(ev.contexts[0].sizes)}" if ev.contexts else
                         "at the representative sizes")
                return Obligation(CHECKER, name, Verdict.UNKNOWN, "enumeration", site.span,
                                  UNDECIDED, f"conflict-free in the {len(bound)} warp accesses "
                                  f"counted ({total} wavefronts, ideal {ideal}; {where}), but "
                                  f"not shown for every size and block: {how}",
                                  Severity.WARNING, evidence=evidence)
        else:
            evidence["scope"] = ("every size and block (the address depends on neither, and "
                                 "every loop is periodic in it)")
        if partial and method == "enumeration":
            if ev.size_dependent:
                msg += f"; at sizes {_sizes(ev.contexts[0].sizes)}"
            if ev.block_dependent:
                msg += f"; blocks {', '.join(str(c.block) for c in ev.contexts)}"
        if ev.data_guards:
            msg += "; data-dependent guards assumed true, which can only over-count"
        return Obligation(CHECKER, name, Verdict.PROVED, method, site.span,
                          message=msg + ")", severity=Severity.WARNING, evidence=evidence)

    def counterexample(self, ev: SiteEval, cost: Cost, place: Placement,
                       concrete: bool) -> dict[str, object]:
        # the real addresses, not a shifted copy
        cost = recount_real(cost, place, concrete, self.model, ev.site.op)
        inst, rep = cost.inst, cost.report
        worst = rep.worst
        assert worst is not None
        lanes = list(worst.lanes)
        first = inst.lanes[lanes[0]]
        names = [lp.loop.var.name for lp in ev.loops]
        return {
            "sizes": dict(ev.contexts[inst.context].sizes),
            "block": list(ev.contexts[inst.context].block),
            "warp": inst.warp,
            "threads": [inst.warp * self.model.lanes, inst.warp * self.model.lanes
                        + self.model.lanes - 1],
            "iteration": dict(zip(names, first.values, strict=True)),
            "iteration_index": dict(zip(names, inst.iteration, strict=True)),
            "degree": rep.max_way,
            "wavefronts": rep.wavefronts,
            "ideal": rep.ideal,
            "bank": worst.bank,
            "lanes": lanes,
            "indices": [list(inst.lanes[ln].coord) for ln in lanes],
            "addresses": list(worst.addrs),
            "words": sorted({a // banks.WORD_BYTES for a in worst.addrs}),
        }

    def refuted(self, name: str, ev: SiteEval, cost: Cost, place: Placement,
                evidence: dict[str, object], witnessed: bool = False) -> Obligation:
        site = ev.site
        cex = self.counterexample(ev, cost, place, concrete=True)
        lanes = cex["lanes"]
        assert isinstance(lanes, list)
        verb = "read" if site.op == "read" else "write"
        iteration = cex["iteration"]
        where = (f"{self.model.unit} {cex['warp']} (threads {cex['threads'][0]}.."
                 f"{cex['threads'][1]})")
        if iteration:
            where += " at " + ", ".join(f"{k}={v}" for k, v in iteration.items())
        if ev.block_dependent:
            where += f", block {tuple(cex['block'])}"
        if cex["sizes"] and (ev.size_dependent or witnessed):
            where += f", sizes {_sizes(cex['sizes'])}"
        addrs = cex["addresses"]
        assert isinstance(addrs, list)
        shown = ", ".join(f"lane {ln} @{a}" for ln, a in list(zip(lanes, addrs, strict=True))[:6])
        more = ", ..." if len(lanes) > 6 else ""
        msg = (f"{cex['degree']}-way bank conflict: {where}: {len(lanes)} lanes {verb} "
               f"{len(cex['words'])} distinct words of bank {cex['bank']} ({shown}{more}); "
               f"{cex['wavefronts']} wavefronts, ideal {cex['ideal']}. ")
        suggestion, text = self.suggest(site.buffer)
        msg += text
        evidence = dict(evidence)
        if suggestion is not None:
            evidence["suggestion"] = dataclasses.asdict(suggestion)
        evidence["suggestion_text"] = text
        return Obligation(CHECKER, name, Verdict.REFUTED, "enumeration", site.span, CONFLICT, msg,
                          Severity.WARNING, counterexample=cex, evidence=evidence)

    def conditional(self, name: str, ev: SiteEval, cost: Cost, evidence: dict[str, object],
                    concrete: bool) -> Obligation:
        site = ev.site
        place = self.plan.placements[site.buffer]
        cex = self.counterexample(ev, cost, place, concrete)
        guards = ", ".join(ev.data_guards or ev.context_guards)
        lanes = cex["lanes"]
        assert isinstance(lanes, list)
        shown = ", ".join(map(str, lanes[:8])) + (", ..." if len(lanes) > 8 else "")
        what = ("reads memory or a mutable/float value" if ev.data_guards else
                "admits them for no size and block tried")
        msg = (f"a {cex['degree']}-way bank conflict ({self.model.unit} {cex['warp']}, "
               f"lanes {shown}) "
               f"happens only if these lanes all pass the {guards}, which {what}; undecided")
        return Obligation(CHECKER, name, Verdict.UNKNOWN, "enumeration", site.span, UNDECIDED,
                          msg, Severity.WARNING, counterexample=cex, evidence=evidence)

    def witness(self, ev: SiteEval, cost: Cost) -> tuple[SiteEval, Cost] | None:
        """A conflict seen only with size/block guards assumed true: look for sizes and a
        block where the guards really admit it (a few size assignments, corner blocks)."""
        if ev.data_guards:
            return None
        place = self.plan.placements[ev.site.buffer]
        for sizes, grid in representative_sizes(self.kernel, WITNESS_SIZES, WITNESS_CANDIDATES):
            try:
                ev2 = evaluate_site(self.kernel, ev.site, self.lets, sizes, grid, all_corners=True)
            except (Unevaluable, ArithmeticError, KeyError, TypeError, ValueError):
                return None
            if ev2.truncated:
                continue
            worst = worst_cost(costs(ev2, place, concrete=True, merged=True))
            if worst is not None and worst.report.max_way > 1:
                return ev2, worst
        return None

    def merge_unknown(self, name: str, ev: SiteEval, cost: Cost,
                      evidence: dict[str, object]) -> Obligation:
        """Conflicting only if the hardware does not serve lanes touching one dword together
        (CDNA3 documents that only for reads of one address): undecided, and why."""
        site = ev.site
        cex = self.counterexample(ev, cost, self.plan.placements[site.buffer], False)
        lanes = cex["lanes"]
        assert isinstance(lanes, list)
        shown = ", ".join(map(str, lanes[:8])) + (", ..." if len(lanes) > 8 else "")
        what = ("read different bytes of one dword" if site.op == "read" else
                "write one dword")
        msg = (f"a {cex['degree']}-way LDS bank conflict ({self.model.unit} {cex['warp']}, "
               f"lanes {shown}) unless {self.kernel.target.name} serves lanes that {what} "
               "together, which AMD does not document (docs/banks.md); undecided")
        return Obligation(CHECKER, name, Verdict.UNKNOWN, "enumeration", site.span, UNDECIDED,
                          msg, Severity.WARNING, counterexample=cex, evidence=evidence)

    def suggest(self, buffer: str) -> tuple[Suggestion | None, str]:
        if not self.want_suggestion:
            return None, "(layout suggestion not requested)"
        return self.suggester.suggest(buffer)


def _sizes(sizes: Mapping[str, object]) -> str:
    return ", ".join(f"{k}={v}" for k, v in sizes.items())
