"""Value checker: every `ensures` clause holds (docs/semantics.md, "Specifications").

Thin: the refuting half runs the kernel against the spec on small launches
(semantics/spec_run.py), the proving half compares value terms with ISL for every size
(semantics/valueflow.py). A kernel without `ensures` gets no obligation from here.

Verdicts, per clause:
* refuted (TS801-TS804) -- a launch where an output element differs from the spec, with
  sizes, seed, the element, what it holds, what the spec asks for and which input element
  arrived; `tilesafe run` on those sizes with that seed replays it;
* proved -- for every size; the proof relies on facts the other checkers prove (each
  element of the output written exactly once, TS211/TS212; no shared read of unwritten
  memory and no race, TS302-TS306; the TMA arrangement equals the buffer layout, TS520;
  mbarrier phases and byte counts, TS404/TS407; no named barrier arrived at twice in one
  phase, TS412), so it holds when they are proved too, which `verify` requires anyway;
* unknown (TS890, a warning) -- the launches agreed but the value flow is outside what the
  prover handles (the reason says where); the evidence lists the launches checked.
"""

from __future__ import annotations

import time

import islpy as isl

from tilesafe.checkers.obligation import Obligation, Severity, Verdict
from tilesafe.checkers.registry import CheckOptions
from tilesafe.frontend import ir
from tilesafe.semantics import spec_run, valueflow
from tilesafe.semantics.spec_inputs import MAX_ELEMENTS, _cost
from tilesafe.semantics.value_exec import Unsupported

CHECKER = "value"
NOT_PROVED = "TS890"
DEPENDS_ON = ("TS211/TS212 every output element written exactly once (access)",
              "TS302-TS306 no race, no read of unwritten shared memory (ownership)",
              "TS520 TMA arrangement equals the buffer layout (tma)",
              "TS404/TS407 each wait waits for its phase, byte counts match (barrier)",
              "TS412 no class arrives twice in one phase of a named barrier (barrier)")


def check(kernel: ir.Kernel, options: CheckOptions) -> list[Obligation]:
    if not kernel.ensures:
        return []
    start = time.perf_counter()
    runs = spec_run.check(kernel)
    out = []
    for spec, run in zip(kernel.ensures, runs, strict=True):
        out.append(_clause(kernel, spec, run, start))
        start = time.perf_counter()
    return out


def _clause(kernel: ir.Kernel, spec: ir.Ensures, run: spec_run.ValueCheck,
            start: float) -> Obligation:
    name = f"{kernel.name}: ensures {spec.tensor}"
    launches = [dict(s) for s in run.runs]
    if run.mismatch is not None:
        return _refuted(name, spec, run.mismatch, start, launches)
    try:
        proof = valueflow.prove(kernel, spec)
    except (valueflow.NotProved, Unsupported, isl.Error, RecursionError) as err:
        reason = getattr(err, "reason", None) or (
            "the prover's ISL operation budget ran out" if "maximal number of operations"
            in str(err) else f"the prover stopped ({type(err).__name__}: {err})")
        point = getattr(err, "point", None)
        replay = _replay_point(kernel, point)
        if replay is not None:
            return _refuted(name, spec, replay, start, launches)
        evidence = {"reason": reason, "launches_agreed": launches,
                    "launches_skipped": list(run.skipped)}
        if point:
            evidence["isl_point"] = point
        return Obligation(
            CHECKER, name, Verdict.UNKNOWN, "value flow (ISL) + interpreter", spec.span,
            NOT_PROVED, f"not proved for every size: {reason}; the interpreter agrees with "
            f"the spec on {len(launches)} launch(es)", Severity.WARNING,
            time.perf_counter() - start, evidence=evidence)
    evidence = {"writes_compared": proof.writes, "shared_buffers_resolved":
                list(proof.buffers), "value_terms": list(proof.terms),
                "depends_on": list(DEPENDS_ON), "launches_agreed": launches}
    return Obligation(CHECKER, name, Verdict.PROVED, "value flow (ISL, every size)", spec.span,
                      seconds=time.perf_counter() - start, evidence=evidence)


def _refuted(name: str, spec: ir.Ensures, m: spec_run.Mismatch, start: float,
             launches: list) -> Obligation:
    return Obligation(CHECKER, name, Verdict.REFUTED, "interpreter against the spec",
                      spec.span, m.code, m.describe(), seconds=time.perf_counter() - start,
                      counterexample=m.as_counterexample(),
                      evidence={"launches_agreed": launches})


def _replay_point(kernel: ir.Kernel, point: dict[str, int] | None
                  ) -> spec_run.Mismatch | None:
    """Run the sizes of an ISL point where the value proof failed, if they are small: a
    mismatch there is a concrete refutation."""
    if not point:
        return None
    sizes = {n: point[n] for n in kernel.sizes if n in point}
    cost = _cost(kernel, sizes) if len(sizes) == len(kernel.sizes) else None
    if cost is None or cost[0] > MAX_ELEMENTS:
        return None
    found = [r.mismatch for r in spec_run.check(kernel, [sizes]) if r.mismatch is not None]
    return found[0] if found else None
