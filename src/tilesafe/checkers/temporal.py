"""What the two temporal checkers (barrier, ownership) share: run the parametric
exploration of semantics/temporal/parametric.py and turn its findings into Obligations with a
replayable counterexample (the interleaving, then who waits on what, barrier by barrier).

Why one module: both checkers explore the same event model (the ownership one adds
permissions to the state) and report the same way; each checker only names its properties.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from fractions import Fraction
from typing import Any

import z3

from tilesafe.checkers import followon
from tilesafe.checkers.obligation import Obligation, Severity, Verdict
from tilesafe.checkers.registry import CheckOptions
from tilesafe.frontend import ir
from tilesafe.frontend.ir import describe_threads
from tilesafe.frontend.walk import statements
from tilesafe.semantics.hw import mbarrier as mb
from tilesafe.semantics.interpreter.interp_error import InterpError
from tilesafe.semantics.interpreter.interp_io import check_where
from tilesafe.semantics.interpreter.schedule import Guide
from tilesafe.semantics.temporal import blockparam, cluster_view, reduce, witness
from tilesafe.semantics.temporal.budget import BUDGET_CODE, Budget
from tilesafe.semantics.temporal.events import (
    Lets,
    Model,
    Unsupported,
    build_model,
    free_vars,
)
from tilesafe.semantics.temporal.explore import (
    Finding,
    Machine,
    replay,
    trace_lines,
)
from tilesafe.semantics.temporal.explore.state import LoadCopy, State, StoreCopy
from tilesafe.semantics.temporal.guide import guide_for
from tilesafe.semantics.temporal.happens_before import happens_before, reads_after_writes
from tilesafe.semantics.temporal.instrs import Access, Arrive, End
from tilesafe.semantics.temporal.parametric import (
    Config,
    Enc,
    Outcome,
    explore_all,
    smt2_with_status,
)

UNKNOWN_CODE = "TS490"
NO_POR_BUDGET = 600  # states: below this, also count the search without the reduction


@dataclass(frozen=True)
class Prop:
    """One property a checker reports: its name, the codes that refute it, what it says."""

    name: str
    codes: tuple[str, ...]
    claim: str


@dataclass
class Run:
    model: Model | None
    outcome: Outcome | None
    error: Unsupported | None
    seconds: float
    states_no_por: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    budget: Budget | None = None


_CACHE: dict[tuple[int, bool, CheckOptions], tuple[ir.Kernel, Run]] = {}


def budget_for(kernel: ir.Kernel, options: CheckOptions) -> Budget:
    """The one budget every temporal search of this kernel draws from (both checkers, both
    semantics, replays), so the limits bound the verification of the kernel as a whole:
    that of the kernel's other exploration when it is still cached (the same
    verification), else a fresh one (its clock starts now)."""
    for ownership in (True, False):
        hit = _CACHE.get((id(kernel), ownership, options))
        if hit is not None and hit[0] is kernel and hit[1].budget is not None:
            return hit[1].budget
    return Budget(options.max_states, options.max_seconds, options.max_memory_mb)


def explore_barrier(kernel: ir.Kernel, options: CheckOptions) -> Run:
    """The run the barrier checker judges by. The ownership exploration runs the same
    barrier semantics with permissions added; when it covered every size and found nothing
    at all (so no run was cut short), every barrier-protocol run is one of its runs, and it
    settles the barrier properties too. Otherwise the barrier semantics is explored alone."""
    own = explore(kernel, True, options)
    if own.outcome is not None and own.outcome.complete and not own.outcome.findings:
        return own
    if kernel.cluster is not None:
        # A cluster's lifetimes are also broken by distributed shared-memory accesses,
        # which only the ownership semantics has (semantics/temporal/explore/ops/cluster.py).
        return own
    return explore(kernel, False, options)


def explore(kernel: ir.Kernel, ownership: bool, options: CheckOptions,
            compare_por: bool = True) -> Run:
    """Build the model and run the parametric exploration (memoised per kernel object)."""
    key = (id(kernel), ownership, options)
    hit = _CACHE.get(key)
    if hit is not None and hit[0] is kernel:
        return hit[1]
    t0 = time.perf_counter()
    budget = budget_for(kernel, options)
    try:
        # A cluster is explored as one block (semantics/temporal/cluster_view.py).
        cluster = cluster_view.info(kernel)
        # A persistent kernel's tile schedule makes trip counts depend on the block: the
        # block index becomes a size of the one-block model (semantics/temporal/blockparam.py).
        lifted = blockparam.lift(cluster_view.view(kernel))
        model = build_model(lifted, ownership, cluster)
        # A reduced system that proves the kernel (semantics/temporal/reduce.py); else as before.
        # A cluster is projected onto its stages before the view (stage s of every CTA).
        reduced = (reduce.prove(lifted, model, options.timeout_ms, budget) if cluster is None
                   else reduce.by_ring(kernel, ownership, options.timeout_ms, budget,
                                       cluster=cluster))
        if reduced is not None:
            model, outcome = reduced
        else:
            outcome = explore_all(model, True, options.max_states, options.timeout_ms, budget)
    except Unsupported as exc:
        run = Run(None, None, exc, time.perf_counter() - t0, budget=budget)
        _CACHE[key] = (kernel, run)
        return run
    witness.resolve(model, outcome, budget)  # candidates: confirmed on one block, or unknown
    run = Run(model, outcome, None, time.perf_counter() - t0, budget=budget)
    if compare_por and outcome.states <= NO_POR_BUDGET and budget.exceeded is None:
        # Evidence only (how much the reduction saves): its own small budget, so that it
        # never decides a verdict nor spends the kernel's.
        try:
            plain = explore_all(model, False, options.max_states, options.timeout_ms,
                                Budget(max_states=4 * NO_POR_BUDGET + 64))
            run.states_no_por = plain.states
        except Unsupported:
            run.states_no_por = None
    if len(_CACHE) > 64:
        _CACHE.clear()
    _CACHE[key] = (kernel, run)
    return run


# ---- counterexamples --------------------------------------------------------------------------


def concretize(run: Run, finding: Finding, cfg: Config, mach: Machine
               ) -> tuple[Machine, Finding, Config]:
    """The finding's run from the beginning of the kernel (semantics/temporal/witness.py)."""
    assert run.model is not None and run.outcome is not None
    return witness.from_start(run.model, run.outcome, finding, cfg, mach, run.budget)


def counterexample(run: Run, finding: Finding, cfg: Config, mach: Machine) -> dict[str, Any]:
    mach, finding, cfg = concretize(run, finding, cfg, mach)
    steps, last, phases = replay(mach, finding.root, finding.path)
    launch, fixed = blockparam.split(mach.k, cfg.sizes)
    out: dict[str, Any] = {"sizes": launch}
    if fixed:  # a persistent kernel: the run is that of this block
        out["block"] = list(blockparam.block_of(mach.k, cfg.sizes, len(mach.k.grid)))
    if cfg.trip is not None:
        out["trip count"] = cfg.trip
    out["trace"] = trace_lines(steps)
    if finding.detail.get("state") is not None and finding.code in DEADLOCKS:
        out["blocked"] = mach.blocked_lines(last, phases)
    else:
        out["at"] = mach.blocked_lines(last, phases) or ["every agent finished"]
    out["barriers"] = [mach.bar_text(last, i, phases) for i in range(mach.ninst)]
    if mach.ownership:
        out["permissions"] = permission_lines(mach, last)
    hb = happens_before(tuple(steps))
    out["happens-before"] = {"events": hb.number_of_nodes(), "edges": hb.number_of_edges()}
    if "atom" in finding.detail:
        out["region"] = finding.detail["atom"]
    return out


DEADLOCKS = ("TS406", "TS407", "TS408", "TS410", "TS420", "TS421")


def permission_lines(mach: Machine, state: State) -> list[str]:
    """Who holds each atom of shared memory (and which copies are in flight)."""
    lines = []
    for x, (holders, unfenced) in enumerate(state.perms):
        parts = []
        for k, v in sorted(holders):
            parts.append(f"{mach.describe_holder(k)} {Fraction(v, mach.unit)}")
        for c in state.copies:
            if isinstance(c, LoadCopy) and x in c.atoms:
                parts.append("in-flight TMA load 1")
            elif isinstance(c, StoreCopy) and x in c.atoms:
                parts.append(f"in-flight TMA store {Fraction(c.share, mach.unit)}")
        if unfenced:
            parts.append("unfenced generic writes by " + ", ".join(
                sorted({mach.agents[c].cls.name for c, _ in unfenced})))
        lines.append(f"{mach.atom_label(x)}: " + ", ".join(parts))
    return lines


# ---- obligations ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Primary:
    """The violation a kernel is refuted by: the first one reached (fewest steps) in the
    ownership exploration, which runs the barrier protocol and the permissions together;
    a byte count outside the tx range for some size comes first of all."""

    code: str
    finding: Finding | None
    cfg: Config | None
    mach: Machine | None
    run: Run | None
    static: Obligation | None = None


def primary(kernel: ir.Kernel, options: CheckOptions) -> Primary | None:
    static = tx_range_static(kernel, options)
    if static is not None:
        return Primary("TS404", None, None, None, None, static)
    best = None
    for ownership in (True, False):
        run = explore(kernel, ownership, options)
        if run.outcome is None:
            continue
        for f, cfg, mach in run.outcome.findings:
            if not ownership and f.code.startswith("TS3"):
                continue
            depth = _depth(f, mach)
            key = (depth, PRIORITY.index(f.code) if f.code in PRIORITY else 99)
            if best is None or key < best[0]:
                best = (key, Primary(f.code, f, cfg, mach, run))
        if best is not None:
            return best[1]
    return None


# Tie-break between violations reached in equally many steps.
PRIORITY = ("TS433", "TS432", "TS402", "TS405", "TS401", "TS409", "TS404", "TS414", "TS413",
            "TS412", "TS403", "TS407", "TS408", "TS534", "TS309", "TS301", "TS303", "TS305",
            "TS302", "TS304", "TS308", "TS406", "TS420", "TS421", "TS410", "TS307", "TS430",
            "TS431")


def _depth(f: Finding, mach: Machine) -> int:
    """Steps from the start of the kernel (accesses that only claim free permission do
    not count, so that the two explorations measure runs alike)."""
    if f.root != mach.initial():
        return 10**6 + len(f.path)
    n = 0
    st = f.root
    for mv in f.path:
        if not (mv[0] == "a" and isinstance(mach.instr(st, mv[1]), Access)):
            n += 1
        try:
            st, _ = mach.apply(st, mv)
        except Exception:  # noqa: BLE001 - the last move is the failing one
            break
    return n


def obligations(checker: str, family: str, props: tuple[Prop, ...], run: Run,
                kernel: ir.Kernel, evidence: Mapping[str, Any], options: CheckOptions
                ) -> list[Obligation]:
    """One obligation per property: REFUTED with the first finding of one of its codes,
    PROVED when the exploration covered every allowed size, else UNKNOWN (TS490).

    Only the kernel's primary violation (see `primary`) is an error; other refutations
    are warnings that follow from it, and properties left unsettled in a refuted kernel
    are notes (the kernel already fails)."""
    if run.error is not None:
        msg = (f"outside the temporal model: {run.error.message}; no verdict on "
               f"{', '.join(p.name for p in props)}")
        return [Obligation(checker, f"{kernel.name}: temporal model", Verdict.UNKNOWN,
                           "event model",
                           run.error.span or kernel.span, UNKNOWN_CODE, msg,
                           seconds=run.seconds)]
    out = run.outcome
    assert out is not None
    found: dict[str, tuple[Finding, Config, Machine]] = {}
    for f, cfg, mach in out.findings:
        if f.code.startswith(family) or f.code in DEADLOCKS or not f.code.startswith("TS3"):
            if f.code not in found or len(f.path) < len(found[f.code][0].path):
                found[f.code] = (f, cfg, mach)
    if family == "TS3":
        found = {c: v for c, v in found.items() if c.startswith("TS3")}
    else:
        found = {c: v for c, v in found.items() if not c.startswith("TS3")}
    # A hard finding of any family cuts runs short: what lies past it is unexplored, so
    # this checker's other properties are unsettled -- consequences of that refutation,
    # not unknowns of their own.
    cut = [c for c, _ in out_codes(out) if c not in DEADLOCKS]
    complete = out.complete and not cut
    static = tx_range_static(kernel, options) if family == "TS4" else None
    clean = complete and not out.findings and static is None and not out.unsettled
    first = None if clean else primary(kernel, options)
    if first is not None and first.code.startswith(family) and first.finding is not None:
        found[first.code] = (first.finding, first.cfg, first.mach)
    method = _method(out)
    base_ev = {**evidence, **_stats(run)}
    results = []
    for prop in props:
        name = f"{kernel.name}: {prop.name}"
        if first is not None and first.static is not None and first.code in prop.codes:
            results.append(replace(first.static, name=name))
            continue
        codes = prop.codes
        if first is not None and first.code in codes:
            codes = (first.code,) + tuple(c for c in codes if c != first.code)
        hit = next((found[c] for c in codes if c in found), None)
        if hit is not None:
            f, cfg, mach = hit
            owner = first.run if (first is not None and first.finding is f) else run
            cex = counterexample(owner or run, f, cfg, mach)
            span = f.span or _deadlock_span(mach, f) or kernel.span
            message = f.message
            if "blocked" in cex:
                message += ": " + "; ".join(cex["blocked"])
            severity, code, ev = Severity.ERROR, f.code, base_ev
            if first is not None and f.code != first.code:
                # A consequence of the primary violation: reported under it, not as a
                # second error (the corpus contract: one planted bug, one reported code);
                # its own code is kept in the evidence (checkers/followon.py).
                severity, code = Severity.WARNING, None
                ev = {**base_ev, **followon.mark(first.code, f.code)}
            results.append(Obligation(checker, name, Verdict.REFUTED, method, span,
                                      code, message, severity, run.seconds, cex, ev))
        elif any(c in out.unsettled for c in prop.codes) and first is None:
            why = next(out.unsettled[c] for c in prop.codes if c in out.unsettled)
            results.append(Obligation(checker, name, Verdict.UNKNOWN, method, kernel.span,
                                      witness.UNSETTLED_CODE, f"{prop.claim}: not established "
                                      f"(possible violation: {why})", seconds=run.seconds,
                                      evidence=base_ev))
        elif complete and not any(c in out.unsettled for c in prop.codes):
            results.append(Obligation(checker, name, Verdict.PROVED, method, kernel.span,
                                      None, prop.claim, seconds=run.seconds,
                                      evidence=base_ev))
        elif first is not None:
            # Left unsettled because the refutation cut the search: a follow-on of it.
            results.append(Obligation(checker, name, Verdict.UNKNOWN, method, kernel.span,
                                      None, f"{prop.claim}: not settled (the search stopped "
                                      f"at {first.code})", Severity.NOTE, run.seconds,
                                      evidence={**base_ev, **followon.mark(first.code)}))
        else:
            why = out.reason or ("the exploration stopped at an error (" + ", ".join(sorted(cut))
                                 + ") before covering every run")
            code = BUDGET_CODE if out.budget else UNKNOWN_CODE
            results.append(Obligation(checker, name, Verdict.UNKNOWN, method, kernel.span,
                                      code, f"{prop.claim}: not established ({why})",
                                      seconds=run.seconds, evidence=base_ev))
    return results


def tx_range_static(kernel: ir.Kernel, options: CheckOptions) -> Obligation | None:
    """A byte count that depends only on the sizes is checked for every size at once: an
    allowed size that takes it outside 0 .. 2^20-1 refutes the tx-range property (TS404)."""
    key = (id(kernel), "tx")
    hit = _STATIC.get(key)
    if hit is not None and hit[0] is kernel:
        return hit[1]
    t0 = time.perf_counter()
    lets = Lets({s.uid: s.value for s in statements(kernel.body) if isinstance(s, ir.Let)})
    result = None
    for s in statements(kernel.body):
        expr = s.tx_bytes if isinstance(s, ir.Arrive) else (
            s.nbytes if isinstance(s, ir.ExpectTx) else None)
        if expr is None:
            continue
        fv = free_vars(expr, lets)
        if not any(v.startswith("size:") for v in fv) or fv - {f"size:{n}" for n in
                                                                kernel.sizes}:
            continue
        enc = Enc(kernel, _LetsOnly(kernel, lets), "", {})
        solver = z3.Solver()
        solver.set("timeout", options.timeout_ms)
        solver.add(*enc.where())
        e = enc.term(expr)
        solver.add(z3.Or(e > mb.TX_MAX, e < 0))
        if solver.check() == z3.sat:
            m = solver.model()
            sizes = {n: m.eval(v, model_completion=True).as_long()
                     for n, v in enc.sizes.items()}
            value = m.eval(e, model_completion=True).as_long()
            result = Obligation(
                "barrier", "tx-range", Verdict.REFUTED, "z3 over the sizes", expr.span, "TS404",
                f"expect_tx of {value} bytes for sizes {sizes}: outside the tx-count range "
                f"0..{mb.TX_MAX} (the PTX mbarrier tx-count has 20 bits)",
                seconds=time.perf_counter() - t0,
                counterexample={"sizes": sizes, "bytes": value},
                evidence={"smt-lib": smt2_with_status(solver, z3.sat)})
            break
    _STATIC[key] = (kernel, result)
    return result


_STATIC: dict = {}


class _LetsOnly:
    """What param_smt.Enc reads of a model: the kernel and its lets."""

    def __init__(self, kernel: ir.Kernel, lets: Lets) -> None:
        self.kernel = kernel
        self.lets = lets


def out_codes(out: Outcome) -> list[tuple[str, Finding]]:
    """Hard findings of a run (they cut it short: what lies past them is unexplored)."""
    return [(f.code, f) for f, _, _ in out.findings if not f.soft]


def _deadlock_span(mach: Machine, f: Finding):
    st = f.detail.get("state")
    if st is None:
        return None
    for a in range(mach.n):
        ins = mach.instr(st, a)
        if not isinstance(ins, End) and ins.stmt is not None:
            return ins.stmt.span
    return None


def _method(out: Outcome) -> str:
    arg = out.argument
    text = "explicit-state search with partial-order reduction"
    if "m0" in arg:
        text += " + periodicity argument (z3) covering every trip count"
    if "ring" in arg:
        text += (f", on the stage projection of a {arg['ring']['stages']}-stage ring (z3; "
                 "docs/temporal.md §10)")
    if arg.get("symmetry") or arg.get("ring", {}).get("symmetry"):
        text += ", up to renaming identical classes (§9)"
    return text


def _stats(run: Run) -> dict[str, Any]:
    out = run.outcome
    assert out is not None
    ev: dict[str, Any] = {
        "states explored (with partial-order reduction)": out.states,
        "transitions": out.transitions,
        "explorations": [{k: v for k, v in e.items() if k != "sizes"}
                         for e in out.explorations][:40],
        "argument": {k: v for k, v in out.argument.items() if k != "level sizes"},
        "smt-lib": list(out.queries),
        "seconds": round(run.seconds, 3),
    }
    if run.states_no_por is not None:
        ev["states explored (without partial-order reduction)"] = run.states_no_por
    model = run.model
    if model is not None:
        ev["agents"] = [f"{a.cls.name}: {describe_threads(a.cls.threads)}" for a in model.agents]
    if out.finals:
        st, mach, root, path = out.finals[0]
        ev["final state"] = {"barriers": [mach.bar_text(st, i) for i in range(mach.ninst)]}
        if root == mach.initial():
            steps, _, _ = replay(mach, root, path)
            hb = happens_before(tuple(steps))
            good, bad = reads_after_writes(tuple(steps), hb)
            ev["happens-before (one complete run)"] = {
                "steps": len(steps), "edges": hb.number_of_edges(),
                "reads ordered after the write they read": good, "unordered": bad[:5]}
    return ev


def arrival_table(model: Model) -> list[str]:
    """Arrivals per phase contributed by each arrive statement, per class (exact)."""
    rows = []
    for ag in model.agents:
        for ins in ag.code:
            if isinstance(ins, Arrive) and ins.stmt is not None:
                bar = model.kernel.barrier(ins.bar)
                mode = ins.stmt.mode.value
                rows.append(f"line {ins.stmt.span.line}: {ag.cls.name} "
                            f"({ag.cls.size} threads, mode {mode}) -> {ins.count} arrival(s) on "
                            f"{ins.bar} (count {bar.count})")
    return rows


# ---- replay in the reference interpreter ------------------------------------------------------


def interpreter_guide(kernel: ir.Kernel, options: CheckOptions, code: str | None = None,
                      sizes: Mapping[str, int] | None = None
                      ) -> tuple[dict[str, int], Guide] | None:
    """The kernel's primary refutation (or the first one of `code`) as a schedule the
    reference interpreter follows (semantics/temporal/guide.py): the launch sizes and the Guide for
    the witness block (block 0 when the violation does not depend on the block). With
    `sizes`, the run is followed in that launch instead, when it is a run of it too (a
    longer trip count leaves room for the consequences of an early violation)."""
    hit = None
    if kernel.cluster is not None:
        return None  # a cluster's run is its view's: not mapped back to the CTAs' threads yet
    if code is None:
        first = primary(kernel, options)
        if first is not None and first.finding is not None:
            hit = (first.finding, first.cfg, first.mach, first.run)
    else:
        for ownership in (True, False):
            run = explore(kernel, ownership, options)
            if run.outcome is None:
                continue
            for f, cfg, mach in run.outcome.findings:
                if f.code == code:
                    hit = (f, cfg, mach, run)
                    break
            if hit is not None:
                break
    if hit is None:
        return None
    f, cfg, mach, run = hit
    mach, f, cfg = concretize(run, f, cfg, mach)
    w = f.detail.get("witness")
    block = tuple(w["block"]) if w else (0,) * len(kernel.grid)
    lk = run.model.kernel
    launch, fixed = blockparam.split(lk, cfg.sizes)
    block = blockparam.block_of(lk, cfg.sizes, len(kernel.grid), block)
    if sizes is not None and dict(sizes) != launch:
        # A persistent kernel's run is one block's: the same block of the other launch.
        full = {**dict(sizes), **{blockparam.AXES[a]: v for a, v in fixed.items()}}
        try:
            check_where(lk, full)
        except InterpError:
            return None
        other = Machine(run.model, full)
        steps, _, _ = replay(other, other.initial(), f.path)
        if len(steps) != len(f.path):
            return None
        f = replace(f, root=other.initial())
        return dict(sizes), guide_for(run.model, other, f, block)
    return launch, guide_for(run.model, mach, f, block)
