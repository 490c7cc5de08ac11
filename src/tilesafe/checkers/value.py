"""Value checker: every `ensures` clause holds (docs/semantics.md, "Specifications").

Thin: the proving half compares value terms with ISL for every size
(semantics/value/valueflow.py); only a clause it does not prove is searched for a refuting launch
(semantics/value/spec_refute.py: interpreter runs on inputs built to expose value bugs, special
IEEE values and f16-overflowing integers included). A kernel without `ensures` gets no
obligation from here.

Verdicts, per clause:
* proved -- for every size; the proof relies on facts the other checkers prove (each
  element of the output written exactly once, TS211/TS212; no shared read of unwritten
  memory and no race, TS302-TS306; the TMA arrangement equals the buffer layout, TS520;
  mbarrier phases and byte counts, TS404/TS407; no named barrier arrived at twice in one
  phase, TS412; with tensor cores: no register touched under a pending MMA, TS308, and
  one tile per warpgroup, TS531/TS532), so it holds when they are proved too, which
  `verify` requires anyway. The
  interpreter is not run on a proved clause (the tests cross-check proofs against it);
* refuted (TS801-TS804) -- a launch where an output element differs from the spec, with
  sizes, seed, input profile, the element, what it holds, what the spec asks for and which
  input element arrived; `tilesafe run` on those sizes with that seed replays it;
* unknown (TS890) -- neither: the reason says where the prover stopped, the evidence lists
  the launches that agreed. A specification the user wrote and nothing proved is an
  *error*: a kernel that may be wrong must not pass a gate. `ensures tested ...` accepts a
  clause checked by testing only, and makes this a warning.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

import islpy as isl

from tilesafe.checkers.obligation import Obligation, Severity, Verdict
from tilesafe.checkers.registry import CheckOptions
from tilesafe.frontend import ir
from tilesafe.frontend.walk import first_tensor_core
from tilesafe.semantics.temporal import cluster_view
from tilesafe.semantics.temporal.event_terms import Unsupported as ViewUnsupported
from tilesafe.semantics.value import valueflow
from tilesafe.semantics.value.value_exec import Unsupported

if TYPE_CHECKING:
    from tilesafe.semantics.value import spec_refute

CHECKER = "value"
NOT_PROVED = "TS890"
DEPENDS_ON = ("TS211/TS212 every output element written exactly once (access)",
              "TS217 no global element written by one thread and read by another without "
              "an ordering (global)",
              "TS302-TS306 no race, no read of unwritten shared memory (ownership)",
              "TS520 TMA arrangement equals the buffer layout (tma)",
              "TS404/TS407 each wait waits for its phase, byte counts match (barrier)",
              "TS412 no class arrives twice in one phase of a named barrier (barrier)")
# A kernel with tensor cores: fragment registers are read as the MMAs left them, each MMA
# reads its stages while the ring still holds them, one tile and scale-d per warpgroup.
MMA_DEPENDS_ON = ("TS308 no fragment register read or written while a wgmma into it may "
                  "be pending (ownership)",
                  "TS303/TS305 no stage refilled or released while a wgmma may still read it "
                  "(ownership)",
                  "TS301 thread-written wgmma operands fenced for the async proxy (ownership)",
                  "TS531/TS532 one tile and scale-d per warpgroup, run by whole warpgroups "
                  "(mma)")


def check(kernel: ir.Kernel, options: CheckOptions) -> list[Obligation]:
    if not kernel.ensures:
        return []
    attempts = [_attempt(kernel, spec) for spec in kernel.ensures]
    open_ = [i for i, a in enumerate(attempts) if not isinstance(a, valueflow.Proof)]
    start = time.perf_counter()
    outcomes = []
    if open_:  # the interpreter (and its imports) only for a clause the proof left open
        from tilesafe.semantics.value import spec_refute

        outcomes = spec_refute.search(
            kernel, [kernel.ensures[i] for i in open_],
            {k: attempts[i].point for k, i in enumerate(open_) if attempts[i].point})
    share = (time.perf_counter() - start) / max(1, len(open_))
    found = dict(zip(open_, outcomes, strict=True))
    out = []
    for i, (spec, attempt) in enumerate(zip(kernel.ensures, attempts, strict=True)):
        if isinstance(attempt, valueflow.Proof):
            out.append(_proved(kernel, spec, attempt))
        else:
            out.append(_unproved(kernel, spec, attempt, found[i], share))
    return out


@dataclass(frozen=True)
class _Failure:
    """Why the proof of one clause stopped, where (an ISL point, when it names one), and
    how long it took."""

    reason: str
    point: dict[str, int] | None
    seconds: float


def _attempt(kernel: ir.Kernel, spec: ir.Ensures) -> valueflow.Proof | _Failure:
    start = time.perf_counter()
    try:
        # A cluster is proved as its view as one block, where a peer's shared memory is
        # shared memory and `cluster_sync` the block's barrier (cluster_view.view).
        proof = valueflow.prove(cluster_view.view(kernel, values=True), spec)
    except (valueflow.NotProved, Unsupported, ViewUnsupported, isl.Error,
            RecursionError) as err:
        reason = getattr(err, "reason", None) or (
            "the prover's ISL operation budget ran out" if "maximal number of operations"
            in str(err) else f"the prover stopped ({type(err).__name__}: {err})")
        return _Failure(reason, getattr(err, "point", None), time.perf_counter() - start)
    return dataclasses.replace(proof, seconds=time.perf_counter() - start)


def _name(kernel: ir.Kernel, spec: ir.Ensures) -> str:
    return f"{kernel.name}: ensures {spec.tensor}"


def _proved(kernel: ir.Kernel, spec: ir.Ensures, proof: valueflow.Proof) -> Obligation:
    depends = DEPENDS_ON + (MMA_DEPENDS_ON if first_tensor_core(kernel) else ())
    evidence = {"writes_compared": proof.writes, "shared_buffers_resolved":
                list(proof.buffers), "value_terms": list(proof.terms),
                "depends_on": list(depends)}
    return Obligation(CHECKER, _name(kernel, spec), Verdict.PROVED,
                      "value flow (ISL, every size)", spec.span, seconds=proof.seconds,
                      evidence=evidence)


def _unproved(kernel: ir.Kernel, spec: ir.Ensures, failure: _Failure,
              outcome: spec_refute.Outcome, share: float) -> Obligation:
    seconds = failure.seconds + share
    m = outcome.mismatch
    if m is not None:
        return Obligation(CHECKER, _name(kernel, spec), Verdict.REFUTED,
                          "interpreter against the spec", spec.span, m.code, m.describe(),
                          seconds=seconds, counterexample=m.as_counterexample(
                              spec.span.path, kernel.name),
                          evidence={"launches_agreed": outcome.agreed,
                                    "proof_stopped": failure.reason})
    evidence: dict[str, object] = {"reason": failure.reason,
                                   "launches_agreed": outcome.agreed,
                                   "launches_skipped": outcome.skipped}
    if failure.point:
        evidence["isl_point"] = failure.point
    profiles = sorted({str(a["inputs"]) for a in outcome.agreed})
    tested = ("; accepted as tested only (`ensures tested`)" if spec.tested else
              "; a specification nothing proved fails verification: fix the kernel or the "
              "spec, or write `ensures tested ...` to accept it checked by testing only")
    return Obligation(
        CHECKER, _name(kernel, spec), Verdict.UNKNOWN, "value flow (ISL) + interpreter",
        spec.span, NOT_PROVED, f"not proved for every size: {failure.reason}; no refuting "
        f"launch among {len(outcome.agreed)} the interpreter ran (inputs: "
        f"{', '.join(profiles) or 'none'}){tested}",
        Severity.WARNING if spec.tested else Severity.ERROR, seconds, evidence=evidence)
