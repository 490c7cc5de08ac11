"""Checker "global": races on global memory, kernels with no effect, unused parameters.

* no global race (TS217): for every `out`/`inout` tensor, no element is written by one
  thread and read by another (a thread of another block, or of the same block with no
  `sync` or named-barrier phase between the two) -- for every size `where` allows. Writes
  are stores and the global side of TMA stores, reads are loads and the global side of TMA
  loads. Two writes of one element are TS211's business (exactly once), not repeated here.
  The relations and the happens-before they are checked against are
  semantics/access/global_races.py's; a refutation holds on the under-approximated instance sets
  and names the sizes, both instances (block, thread, loop values), the element and both
  lines. A pair that only an ordering outside the model could order (a TMA copy in the
  same block, an mbarrier or named-barrier hand-off, a `sync` count that is not affine) is
  UNKNOWN (TS292), never refuted; an unmodelled guard or index leaves it UNKNOWN (TS291).
* reads of an `out` tensor see a write (TS220): every element of an `out` tensor the kernel
  reads has a write of it ordered before the read (program order in one thread, a `sync`
  epoch, a named-barrier phase) -- its contents before the launch are undefined, so a read
  of one nothing wrote yet (an `out` that should have been `inout`) computes with garbage
  on every schedule (semantics/access/global_reads.py). Where TS217 already refutes the
  tensor, a read left unwritten is reported under that race (a follow-on), not beside it.
* an effect (TS218): a kernel none of whose parameters is `out` or `inout` must still write
  some global tensor for some allowed size, or it does nothing. (With an `out` or `inout`
  parameter, TS212 already says when nothing writes it.)
* every input used (TS219, a warning): an `in` parameter that no statement of the body reads
  (by a load or through a tensormap's TMA load). A tensor only the `ensures` clause names
  counts as unused: the kernel's result cannot depend on it. Unused `out`/`inout`
  parameters are TS212's (an error).

ISL runs under the access checker's operation budget; running past it gives UNKNOWN (TS290).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import islpy as isl

from tilesafe.checkers import followon
from tilesafe.checkers.access import (
    INEXACT,
    ISL_LIMIT,
    OPS_PER_MS,
    _at,
    _describe,
    _instance,
    _isl_reason,
    _sample,
    _sizes,
)
from tilesafe.checkers.obligation import Obligation, Severity, Verdict
from tilesafe.checkers.registry import CheckOptions
from tilesafe.frontend import ir, walk
from tilesafe.frontend.span import Span
from tilesafe.semantics.access.access import AccessRelation, Kind, collect
from tilesafe.semantics.access.global_races import (
    Finding,
    NoPlace,
    Orders,
    Outcome,
    find_race,
    global_sides,
    places,
)
from tilesafe.semantics.access.global_reads import Reads, unwritten_reads
from tilesafe.semantics.expr.affine import NotAffine

CHECKER = "global"
METHOD = "isl"

GLOBAL_RACE = "TS217"  # an out/inout element written by one thread, read by another unordered
UNWRITTEN_READ = "TS220"  # an out element read with no write of it ordered before the read
NO_EFFECT = "TS218"  # a kernel with no out/inout parameter that writes no global tensor
UNUSED_INPUT = "TS219"  # an `in` parameter the body never reads (warning)
UNORDERED = "TS292"  # a candidate race only an ordering outside the model could rule out

_MIN_OPERATIONS = 1000  # the budget's floor, as the access checker's



@dataclass(frozen=True)
class _Result:
    """What one query decided, before it becomes an Obligation; `span`: the access it is
    about, when that is not the obligation's default place."""

    verdict: Verdict
    message: str
    code: str | None = None
    counterexample: Mapping[str, object] | None = None
    evidence: Mapping[str, object] = field(default_factory=dict)
    span: Span | None = None
    method: str = METHOD


def check(kernel: ir.Kernel, options: CheckOptions) -> list[Obligation]:
    results = [_used(kernel, t) for t in kernel.params if not t.role.written]
    ctx = isl.Context()
    ctx.set_max_operations(max(_MIN_OPERATIONS, options.timeout_ms * OPS_PER_MS))
    start = time.perf_counter()
    try:
        accesses = collect(kernel, ctx)
        orders = Orders(kernel, places(kernel))
    except (isl.Error, NotAffine) as err:
        return results + [Obligation(
            CHECKER, f"{kernel.name}: global accesses", Verdict.UNKNOWN, METHOD, kernel.span,
            ISL_LIMIT, f"cannot build access relations: {_isl_reason(err)}",
            seconds=time.perf_counter() - start)]
    if not any(t.role.written for t in kernel.params):
        results.append(_run(ctx, f"{kernel.name}: writes a global tensor", kernel.span,
                            lambda: _effect(accesses)))
    for t in kernel.params:
        if t.role.written:
            readers = [a for a in accesses if _global(a, t.name, Kind.READ)]
            span = readers[0].span if readers else t.span
            race = _run(ctx, f"{kernel.name}: no unordered write and read of {t.name}",
                        span, lambda t=t: _race(kernel, orders, accesses, t))
            results.append(race)
            if t.role is ir.ParamRole.OUT and readers:
                read = _run(ctx, f"{kernel.name}: every read of {t.name} sees a write",
                            span, lambda t=t: _reads_written(kernel, orders, accesses, t))
                results.append(_under_race(read, race))
    return results


def _global(a: AccessRelation, tensor: str, kind: Kind) -> bool:
    return a.space is ir.Space.GLOBAL and a.tensor == tensor and a.kind is kind


def _run(ctx: isl.Context, name: str, span: Span, query: Callable[[], _Result]) -> Obligation:
    """One query under a fresh operation budget; ISL failure -> UNKNOWN (TS290)."""
    ctx.reset_operations()
    start = time.perf_counter()
    try:
        r = query()
    except isl.Error as err:
        r = _Result(Verdict.UNKNOWN, f"ISL gave up: {_isl_reason(err)}", ISL_LIMIT)
    except NoPlace as err:
        r = _Result(Verdict.UNKNOWN, str(err), UNORDERED)
    return Obligation(CHECKER, name, r.verdict, r.method, r.span or span, r.code, r.message,
                      seconds=time.perf_counter() - start, counterexample=r.counterexample,
                      evidence=r.evidence)


# ---- TS217 ----------------------------------------------------------------------------------


def _race(kernel: ir.Kernel, orders: Orders, accesses: Sequence[AccessRelation],
          t: ir.GlobalTensor) -> _Result:
    writers = global_sides(orders, accesses, t.name, Kind.WRITE)
    readers = global_sides(orders, accesses, t.name, Kind.READ)
    if not readers:
        return _Result(Verdict.PROVED, f"no statement reads {t.name}", evidence={"reads": {}},
                       method="syntax")
    found = find_race(orders, writers, readers)
    if found.outcome is Outcome.NONE:
        return _Result(Verdict.PROVED, f"every write of {t.name} is ordered with every read "
                       "of the element by another thread, for every allowed size",
                       evidence=found.evidence)
    assert found.reader is not None and found.writer is not None
    if found.outcome is Outcome.OPEN:
        return _Result(Verdict.UNKNOWN, f"{t.name}: the write at {_at(found.writer.span)} "
                       f"and the read at {_at(found.reader.span)} may race: {found.reason}",
                       INEXACT if found.inexact else UNORDERED, evidence=found.evidence,
                       span=found.reader.span)
    cex, message = _witness(kernel, t, found)
    return _Result(Verdict.REFUTED, message, GLOBAL_RACE, cex, found.evidence,
                   found.reader.span)


def _witness(kernel: ir.Kernel, t: ir.GlobalTensor, found: Finding) -> tuple[dict, str]:
    w, r, pairs = found.writer, found.reader, found.pairs
    assert w is not None and r is not None and pairs is not None
    assert w.relation_under is not None and r.relation_under is not None
    both = w.relation_under.reverse().range_product(r.relation_under.reverse())
    both = both.intersect_range(pairs.wrap())  # element -> [writer -> reader]
    params, coords = _sample(kernel, both.wrap())
    rank = len(t.shape)
    element = coords[:rank]
    writer = _instance(kernel, w, params, coords[rank:rank + len(w.dims)])
    reader = _instance(kernel, r, params, coords[rank + len(w.dims):])
    cross = writer["block"] != reader["block"]
    cex = {"sizes": params, "element": element, "writer": writer, "reader": reader,
           "cross_block": cross}
    why = ("blocks of one launch are never ordered" if cross else
           "both threads passed the same number of `sync`s and nothing else orders them")
    message = (f"{t.name}[{', '.join(map(str, element))}] is written by "
               f"{_describe(writer, sizes=False)} (line {w.span.line}) and read by "
               f"{_describe(reader, sizes=False)} (line {r.span.line}) at sizes "
               f"{_sizes(params)}: {why}, so the value read depends on the schedule")
    return cex, message


# ---- TS220 ----------------------------------------------------------------------------------


def _reads_written(kernel: ir.Kernel, orders: Orders, accesses: Sequence[AccessRelation],
                   t: ir.GlobalTensor) -> _Result:
    writers = global_sides(orders, accesses, t.name, Kind.WRITE)
    readers = global_sides(orders, accesses, t.name, Kind.READ)
    found = unwritten_reads(orders, writers, readers)
    if found.outcome is Reads.WRITTEN:
        return _Result(Verdict.PROVED, f"every element of {t.name} the kernel reads is "
                       "written before the read, for every allowed size",
                       evidence=found.evidence)
    assert found.reader is not None
    r = found.reader
    if found.outcome is Reads.OPEN:
        return _Result(Verdict.UNKNOWN, f"{t.name}: the read at {_at(r.span)} may come before "
                       f"every write of its element: {found.reason}", UNORDERED,
                       evidence=found.evidence, span=r.span)
    assert found.unwritten is not None
    params, coords = _sample(kernel, found.unwritten.wrap())
    inst = _instance(kernel, r, params, coords[:len(r.dims)])
    element = coords[len(r.dims):]
    cex = {"sizes": params, "element": element, "reader": inst}
    message = (f"{t.name}[{', '.join(map(str, element))}] is read by "
               f"{_describe(inst, sizes=False)} (line {r.span.line}) at sizes "
               f"{_sizes(params)} before any write of it is ordered before the read: an "
               f"'out' tensor's contents before the launch are undefined, so the read sees "
               f"garbage (declare {t.name} 'inout' if the kernel updates it, or write the "
               "element first)")
    return _Result(Verdict.REFUTED, message, UNWRITTEN_READ, cex, found.evidence, r.span)


def _under_race(read: Obligation, race: Obligation) -> Obligation:
    """A read left unwritten because another thread's write races with it is the race's
    finding (TS217): report it under that refutation (checkers/followon.py)."""
    if read.verdict is Verdict.PROVED or not followon.is_cause(race, GLOBAL_RACE):
        return read
    own = read.code if read.verdict is Verdict.REFUTED else None
    severity = Severity.WARNING if read.verdict is Verdict.REFUTED else Severity.NOTE
    return dataclasses.replace(read, code=None, severity=severity,
                               evidence={**read.evidence, **followon.mark(GLOBAL_RACE, own)})


# ---- TS218 and TS219 -------------------------------------------------------------------------


def _effect(accesses: Sequence[AccessRelation]) -> _Result:
    """Some write of a global tensor runs for some allowed size. A TMA store's relation is
    clipped to the tensor (a box wholly outside writes nothing); a store whose index has no
    affine form counts by its domain."""
    writers = [a for a in accesses if a.space is ir.Space.GLOBAL and a.kind is Kind.WRITE]
    if not writers:
        return _Result(Verdict.REFUTED, "no statement writes a global tensor and no "
                       "parameter is 'out' or 'inout': the kernel has no effect (declare the "
                       "result tensor 'out' and store to it)", NO_EFFECT,
                       evidence={"writes": {}}, method="syntax")
    evidence: dict[str, object] = {
        "writes": {f"{w.name}@{_at(w.span)}": str(_over(w)) for w in writers},
        "query": "is_empty(W) for every global write W"}
    if any(not _under(w).is_empty() for w in writers):
        return _Result(Verdict.PROVED, "a global write runs for some allowed size",
                       evidence=evidence)
    if all(_over(w).is_empty() for w in writers):
        return _Result(Verdict.REFUTED, "no global write runs for any allowed size (each "
                       "one's guards or loop bounds never hold): the kernel has no effect",
                       NO_EFFECT, evidence=evidence)
    reasons = "; ".join(g for w in writers for g in w.dropped) or "an unmodelled guard"
    return _Result(Verdict.UNKNOWN, f"whether any global write runs depends on {reasons}",
                   INEXACT, evidence=evidence)


def _over(a: AccessRelation) -> isl.Map | isl.Set:
    return a.relation if a.relation is not None else a.domain


def _under(a: AccessRelation) -> isl.Map | isl.Set:
    return a.relation_under if a.relation_under is not None else a.domain_under


def _used(kernel: ir.Kernel, t: ir.GlobalTensor) -> Obligation:
    """A warning decided by the text: an input no statement reads."""
    read, _ = walk.tensor_usage(kernel)
    name = f"{kernel.name}: input {t.name} is read"
    if t.name in read:
        return Obligation(CHECKER, name, Verdict.PROVED, "syntax", t.span,
                          message=f"the body reads {t.name}", severity=Severity.WARNING)
    clauses = [r for r in kernel.requires if t.name in _requires_tensors(r)]
    if clauses:  # the launch reads it: the clauses tie it to what the body reads
        return Obligation(CHECKER, name, Verdict.PROVED, "syntax", t.span,
                          message=f"the body does not read {t.name}, but its `requires` "
                          f"clause(s) at line(s) {', '.join(str(r.span.line) for r in clauses)}"
                          " constrain it, and every launch checks them on the data",
                          severity=Severity.WARNING)
    spec = any(c.tensor != t.name and t.name in _spec_tensors(c) for c in kernel.ensures)
    note = " (only the 'ensures' clause names it)" if spec else ""
    return Obligation(
        CHECKER, name, Verdict.REFUTED, "syntax", t.span, UNUSED_INPUT,
        f"parameter '{t.name}' is never read by the kernel{note}: the result cannot depend "
        "on it; remove it, or use it where it was meant to be used",
        severity=Severity.WARNING)


def _requires_tensors(r: ir.Requires) -> set[str]:
    exprs = [e for e in (r.cond, r.value) if e is not None]
    return {x.tensor for e in exprs for x in walk.subexprs(e) if isinstance(x, ir.Load)}


def _spec_tensors(c: ir.Ensures) -> set[str]:
    return {x.tensor for x in walk.subexprs(c.rhs) if isinstance(x, ir.Load)}
