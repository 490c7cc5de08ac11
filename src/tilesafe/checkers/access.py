"""Checker "access": every access in bounds, every output element written exactly once.

Each access is an ISL relation from statement instances to elements (semantics/access/access.py),
parametric in the sizes, so each property below is one emptiness or inclusion query that
holds for every size the `where` clause allows:

* in bounds (TS201 global, TS202 shared): the relation minus the tensor's index box is
  empty. The global side of a TMA copy is exempt: the copy engine fills out-of-bounds box
  elements on loads and skips them on stores, so its relation is already clipped.
* written at most once (TS211): for every pair of writers (W_i, W_j) of one global tensor,
  W_i . W_j^-1 relates two instances that write one element; it must be empty once the
  identity (i = j) and pairs that took opposite branches of one `if` at the same instance
  are removed.
* a launchable grid: every grid dimension is at least 1 (TS213: the driver rejects an
  empty launch) and at most the hardware's maximum, 2^31 - 1 for x and 65535 for y and z
  (TS214), for every allowed size; a `where` clause that leaves a size unbounded allows a
  grid too large to launch.
* written at least once (TS212): the union of the writers' ranges contains the tensor's
  whole index box, at every allowed size whose grid launches (TS213/TS214 report the
  others). The parameter's role decides which tensors are outputs (docs/language.md):
  every `out` and `inout` tensor has this obligation and the one above, also when no
  statement writes it at all (a deleted store is an unwritten output, not an input).
* inputs never written (TS215): no instance of any store or TMA store writes an element of
  an `in` tensor, for any allowed size (a write under a guard that never holds is fine).
* declared roles (TS216, a warning): a parameter without a role got one inferred from the
  body (written -> out, written and read -> inout, else in), which cannot catch a deleted
  store; the warning asks the file to say what it means.

Guards without a Presburger form are handled soundly: bounds and "at most once" are proved
on the over-approximated domains, coverage on the under-approximated ones; a refutation
is only reported when it also holds on the under-approximation, otherwise the verdict is
UNKNOWN (TS291). ISL runs under an operation budget scaled from `timeout_ms`; running past
it (or any ISL error) gives UNKNOWN (TS290), never a proof.

Coverage speaks of runs that finish: a thread that deadlocks never reaches its stores, and
that is the barrier checker's business, not this one's.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import islpy as isl

from tilesafe.checkers.obligation import Obligation, Severity, Verdict
from tilesafe.checkers.registry import CheckOptions
from tilesafe.frontend import ir
from tilesafe.frontend.limits import GRID_LIMITS
from tilesafe.frontend.span import Span
from tilesafe.semantics.access import coverage, gather, gather_coverage
from tilesafe.semantics.access.access import (
    AccessRelation,
    ClusterRef,
    Kind,
    cluster_refs,
    collect,
    params_env,
    point_values,
    valid_indices,
    where_params,
)
from tilesafe.semantics.access.branch_cover import written_by_branch_pairs
from tilesafe.semantics.access.gather_witness import Witness, witness
from tilesafe.semantics.expr.affine import CondSets, NotAffine, constant, eval_sizes, term

CHECKER = "access"
METHOD = "isl"

GLOBAL_OOB = "TS201"  # a global load/store index outside the tensor for some allowed size
SHARED_OOB = "TS202"  # a shared-buffer index (or TMA slice) outside the buffer
WRITTEN_TWICE = "TS211"  # two instances write one element of an output tensor
UNWRITTEN = "TS212"  # an element of an output tensor no instance writes
EMPTY_GRID = "TS213"  # a grid dimension below 1 for some allowed size: nothing launches
GRID_TOO_LARGE = "TS214"  # a grid dimension beyond the hardware's maximum for some size
GRID_NOT_CLUSTERS = "TS221"  # a grid dimension not a multiple of the cluster's for some size
BAD_RANK = "TS434"  # a CTA rank or multicast mask outside the cluster for some instance
INPUT_WRITTEN = "TS215"  # an element of an `in` tensor is written
ROLE_UNDECLARED = "TS216"  # a parameter with an inferred role (warning)
ISL_LIMIT = "TS290"  # ISL ran past its operation budget or failed: verdict unknown
INEXACT = "TS291"  # a guard or index without Presburger form left the verdict open

OPS_PER_MS = 1000  # measured: about a million ISL operations per second


@dataclass(frozen=True)
class _Result:
    """What one query decided, before it becomes an Obligation."""

    verdict: Verdict
    message: str
    code: str | None = None
    counterexample: Mapping[str, object] | None = None
    evidence: Mapping[str, object] = field(default_factory=dict)


def check(kernel: ir.Kernel, options: CheckOptions) -> list[Obligation]:
    ctx = isl.Context()
    ctx.set_max_operations(max(1000, options.timeout_ms * OPS_PER_MS))
    start = time.perf_counter()
    try:
        accesses = collect(kernel, ctx)
        ranks = cluster_refs(kernel, ctx)
        where = where_params(kernel, ctx)
    except (isl.Error, NotAffine) as err:
        return [Obligation(CHECKER, f"{kernel.name}: access relations", Verdict.UNKNOWN,
                           METHOD, kernel.span, ISL_LIMIT, f"cannot build access relations: "
                           f"{_isl_reason(err)}", seconds=time.perf_counter() - start)]
    setup = time.perf_counter() - start
    results = []
    for axis, g, limit in zip("xyz", kernel.grid, GRID_LIMITS, strict=False):
        results.append(_run(ctx, f"{kernel.name}: grid dimension {axis} at least 1", g.span,
                            setup, lambda g=g: _grid_nonempty(kernel, ctx, g, where)))
        results.append(_run(ctx, f"{kernel.name}: grid dimension {axis} at most {limit}",
                            g.span, setup,
                            lambda g=g, limit=limit: _grid_fits(kernel, ctx, g, limit, where)))
        d = kernel.cluster["xyz".index(axis)] if kernel.cluster is not None else 1
        if d > 1:
            results.append(_run(ctx, f"{kernel.name}: grid dimension {axis} a multiple of the "
                                f"cluster's {d}", g.span, setup,
                                lambda g=g, d=d: _grid_clusters(kernel, ctx, g, d, where)))
    results.extend(_role_declared(kernel, t) for t in kernel.params if not t.role_declared)
    for a in accesses:
        if a.clipped:
            continue
        what = "global" if a.space is ir.Space.GLOBAL else "shared"
        name = f"{kernel.name}: {what} {a.kind.value} of {a.tensor} at {_at(a.span)} in bounds"
        results.append(_run(ctx, name, a.span, setup, lambda a=a: _in_bounds(kernel, ctx, a)))
    for r in ranks:
        name = f"{kernel.name}: {r.what} at {_at(r.access.span)} inside the cluster"
        results.append(_run(ctx, name, r.access.span, setup,
                            lambda r=r: _in_cluster(kernel, ctx, r)))
    writers = _writers(accesses)
    for t in kernel.params:
        ws = writers.get(t.name, [])
        span = ws[0].span if ws else t.span
        if not t.role.written:
            results.append(_run(ctx, f"{kernel.name}: input {t.name} never written", span,
                                setup, lambda t=t, w=ws: _never_written(kernel, t, w)))
            continue
        results.append(_run(ctx, f"{kernel.name}: {t.name} written at most once", span, setup,
                            lambda t=t, w=ws: _at_most_once(kernel, t.name, w)))
        results.append(_run(ctx, f"{kernel.name}: {t.name} written at least once", span, setup,
                            lambda t=t, w=ws: _at_least_once(kernel, ctx, t, w, where)))
    return results


def _writers(accesses: Sequence[AccessRelation]) -> dict[str, list[AccessRelation]]:
    out: dict[str, list[AccessRelation]] = {}
    for a in accesses:
        if a.space is ir.Space.GLOBAL and a.kind is Kind.WRITE:
            out.setdefault(a.tensor, []).append(a)
    return out


def _run(ctx: isl.Context, name: str, span: Span, setup: float,
         query: Callable[[], _Result]) -> Obligation:
    """Run one query under a fresh operation budget; ISL failure -> UNKNOWN."""
    ctx.reset_operations()
    start = time.perf_counter()
    try:
        r = query()
    except isl.Error as err:
        r = _Result(Verdict.UNKNOWN, f"ISL gave up: {_isl_reason(err)}", ISL_LIMIT)
    seconds = time.perf_counter() - start
    evidence = {**r.evidence, "setup_seconds": round(setup, 4)}
    return Obligation(CHECKER, name, r.verdict, METHOD, span, r.code, r.message,
                      seconds=seconds, counterexample=r.counterexample, evidence=evidence)


def _isl_reason(err: Exception) -> str:
    text = str(err)
    if "maximal number of operations" in text:
        return "operation budget exceeded (raise --query-timeout)"
    return text.splitlines()[0] if text else type(err).__name__


# ---- in bounds ----------------------------------------------------------------------------


def _grid_nonempty(kernel: ir.Kernel, ctx: isl.Context, extent: ir.Expr,
                   where: CondSets) -> _Result:
    """A launch with a zero grid dimension is rejected by the driver and writes nothing."""
    env = params_env(kernel, ctx)
    value = term(extent, env)
    empty = value.lt_set(constant(env, 1)).params().intersect(where.under)
    evidence = {"extent": str(value), "where": str(where.under), "violations": str(empty)}
    if empty.is_empty():
        inexact = value.lt_set(constant(env, 1)).params().intersect(where.over)
        if not inexact.is_empty():
            return _Result(Verdict.UNKNOWN, "the grid may be empty where an unmodelled "
                           "'where' atom holds", INEXACT, evidence=evidence)
        return _Result(Verdict.PROVED, "at least one block for every allowed size",
                       evidence=evidence)
    sizes, _ = _smallest(empty)
    return _Result(Verdict.REFUTED, f"at {_sizes(sizes)} the grid extent is "
                   f"{eval_sizes(extent, sizes)}: no block runs (and the launch is invalid)",
                   EMPTY_GRID, {"sizes": sizes}, evidence)


def _grid_fits(kernel: ir.Kernel, ctx: isl.Context, extent: ir.Expr, limit: int,
               where: CondSets) -> _Result:
    """The driver refuses a launch whose grid dimension exceeds the hardware's maximum, so a
    `where` clause that leaves a size unbounded allows sizes at which nothing runs."""
    env = params_env(kernel, ctx)
    value = term(extent, env)
    too_big = value.gt_set(constant(env, limit)).params()
    bad = too_big.intersect(where.under)
    evidence = {"extent": str(value), "limit": limit, "where": str(where.under),
                "violations": str(bad)}
    if bad.is_empty():
        if not too_big.intersect(where.over).is_empty():
            return _Result(Verdict.UNKNOWN, f"the grid may exceed {limit} blocks where an "
                           "unmodelled 'where' atom holds", INEXACT, evidence=evidence)
        return _Result(Verdict.PROVED, f"at most {limit} blocks for every allowed size",
                       evidence=evidence)
    sizes, _ = _smallest(bad)
    return _Result(Verdict.REFUTED, f"at {_sizes(sizes)} the grid extent is "
                   f"{eval_sizes(extent, sizes)}, more than the hardware's {limit}: the launch "
                   "fails (bound the sizes in 'where')", GRID_TOO_LARGE, {"sizes": sizes},
                   evidence)


def _grid_clusters(kernel: ir.Kernel, ctx: isl.Context, extent: ir.Expr, d: int,
                   where: CondSets) -> _Result:
    """A launch of clusters of d CTAs along an axis needs a grid that is a multiple of d
    there (cuLaunchKernelEx refuses it otherwise)."""
    env = params_env(kernel, ctx)
    value = term(extent, env)
    rest = value.mod_val(isl.Val.int_from_si(ctx, d))
    bad = rest.ne_set(constant(env, 0)).params()
    violations = bad.intersect(where.under)
    evidence = {"extent": str(value), "cluster": d, "violations": str(violations)}
    if violations.is_empty():
        if not bad.intersect(where.over).is_empty():
            return _Result(Verdict.UNKNOWN, "the grid may not be made of clusters where an "
                           "unmodelled 'where' atom holds", INEXACT, evidence=evidence)
        return _Result(Verdict.PROVED, f"a whole number of clusters of {d} for every allowed "
                       "size", evidence=evidence)
    sizes, _ = _smallest(violations)
    return _Result(Verdict.REFUTED, f"at {_sizes(sizes)} the grid extent is "
                   f"{eval_sizes(extent, sizes)}, not a multiple of the cluster's {d}: the "
                   "launch fails", GRID_NOT_CLUSTERS, {"sizes": sizes}, evidence)


def _launchable(kernel: ir.Kernel, ctx: isl.Context) -> isl.Set:
    """Sizes at which every grid dimension is in 1 .. its hardware maximum (a valid launch)."""
    env = params_env(kernel, ctx)
    result = env.universe().params()
    for extent, limit in zip(kernel.grid, GRID_LIMITS, strict=False):
        value = term(extent, env)
        result = result.intersect(value.ge_set(constant(env, 1)).params())
        result = result.intersect(value.le_set(constant(env, limit)).params())
    return result


# ---- roles --------------------------------------------------------------------------------


def _role_declared(kernel: ir.Kernel, t: ir.GlobalTensor) -> Obligation:
    """A warning, decided by the text alone: the role was inferred from the body."""
    role = t.role.value
    return Obligation(
        CHECKER, f"{kernel.name}: {t.name} declares its role", Verdict.REFUTED, "syntax",
        t.span, ROLE_UNDECLARED,
        f"parameter '{t.name}' declares no role, so it is taken as '{role}' because of what "
        f"the body does with it; write '{t.name}: {role} global ...' so that a deleted store "
        "or a store into an input is caught", severity=Severity.WARNING)


def _never_written(kernel: ir.Kernel, t: ir.GlobalTensor,
                   writers: Sequence[AccessRelation]) -> _Result:
    """No instance of any write statement touches an element of the input `t`. A TMA
    store's relation is clipped to the tensor, so a box wholly outside it writes nothing; a
    plain store whose index has no affine form counts by its domain (it writes something)."""
    if not writers:
        return _Result(Verdict.PROVED, f"no statement writes {t.name}",
                       evidence={"writes": {}})
    evidence: dict[str, object] = {
        "writes": {f"{w.name}@{_at(w.span)}": str(w.relation if w.relation is not None
                                                  else w.domain) for w in writers},
        "query": "is_empty(W) for every writer W of the input",
    }
    open_writer = None
    for w in writers:
        over = w.relation if w.relation is not None else w.domain
        if over.is_empty():
            continue
        under = w.relation_under if w.relation_under is not None else w.domain_under
        if under.is_empty():
            open_writer = open_writer or w
            continue
        return _input_written(kernel, t, w, under, evidence)
    if open_writer is not None:
        w = open_writer
        reasons = "; ".join(w.dropped) or w.error or "an unmodelled guard"
        return _Result(Verdict.UNKNOWN, f"the {w.via.value} at {_at(w.span)} writes input "
                       f"{t.name} unless an unmodelled guard prevents it: {reasons}", INEXACT,
                       evidence=evidence)
    return _Result(Verdict.PROVED, f"no write into {t.name} runs for any allowed size",
                   evidence=evidence)


def _input_written(kernel: ir.Kernel, t: ir.GlobalTensor, w: AccessRelation,
                   under: isl.Map | isl.Set, evidence: dict[str, object]) -> _Result:
    params, coords = _sample(kernel, under.wrap() if isinstance(under, isl.Map) else under)
    n = len(w.dims)
    cex = _instance(kernel, w, params, coords[:n])
    element = coords[n:]
    cex["element"] = element
    where = f"{t.name}[{', '.join(map(str, element))}]" if element else t.name
    message = (f"{t.name} is declared 'in' but the {w.via.value} at {_at(w.span)} writes "
               f"{where} at {_describe(cex)} (declare it 'inout' if the kernel updates it)")
    return _Result(Verdict.REFUTED, message, INPUT_WRITTEN, cex, evidence)


def _in_bounds(kernel: ir.Kernel, ctx: isl.Context, a: AccessRelation) -> _Result:
    code = GLOBAL_OOB if a.space is ir.Space.GLOBAL else SHARED_OOB
    if a.relation is None or a.relation_under is None:
        return _Result(Verdict.UNKNOWN, f"cannot model the access: {a.error}", INEXACT)
    valid = valid_indices(kernel, ctx, a.tensor, a.space)
    over = a.relation.subtract_range(valid)
    evidence: dict[str, object] = {
        "domain": str(a.domain), "relation": str(a.relation), "valid": str(valid),
        "query": "is_empty(relation.subtract_range(valid))",
    }
    if a.dropped:
        evidence["dropped_guards"] = list(a.dropped)
    if over.is_empty():
        return _Result(Verdict.PROVED, f"{a.tensor} index in bounds for every allowed size",
                       evidence=evidence)
    evidence["violations"] = str(over)
    under = a.relation_under.subtract_range(valid)
    if under.is_empty():
        return _Result(Verdict.UNKNOWN, "an out-of-bounds index is possible only if the "
                       f"unmodelled guard allows it: {'; '.join(a.dropped)}", INEXACT,
                       evidence=evidence)
    n = len(a.dims)
    found = _realised(kernel, under.wrap(), bool(a.gathers),
                      lambda params, coords: [_instance(kernel, a, params, coords[:n])])
    if isinstance(found, str):
        return _Result(Verdict.UNKNOWN, f"an out-of-bounds {a.kind.value} of {a.tensor} is "
                       f"possible under the clauses instantiated on its reads, but {found}",
                       INEXACT, evidence=evidence)
    params, coords = found
    cex = _instance(kernel, a, params, coords[:n])
    index = coords[n:]
    shape = _shape(kernel, a, params)
    cex.update(index=index, shape=shape)
    where = "tensor" if a.space is ir.Space.GLOBAL else "shared buffer"
    message = (f"{a.kind.value} of {a.tensor}[{', '.join(map(str, index))}] is outside the "
               f"{where} (shape [{', '.join(map(str, shape))}]) at {_describe(cex)}")
    return _Result(Verdict.REFUTED, message, code, cex, evidence)


def _in_cluster(kernel: ir.Kernel, ctx: isl.Context, r: ClusterRef) -> _Result:
    """Every rank in 0 .. C - 1, every mask in 1 .. 2^C - 1 (C CTAs per cluster): the
    value relation minus that range is empty."""
    a = r.access
    if a.relation is None or a.relation_under is None:
        return _Result(Verdict.UNKNOWN, f"cannot model the value: {a.error}", INEXACT)
    size = kernel.cluster_size
    lo, hi = (1, (1 << size) - 1) if r.mask else (0, size - 1)
    valid = isl.Set.read_from_str(ctx, f"{{ {a.tensor}[i0] : {lo} <= i0 <= {hi} }}")
    valid = valid.align_params(a.relation.get_space().params())
    over = a.relation.subtract_range(valid)
    evidence: dict[str, object] = {
        "domain": str(a.domain), "relation": str(a.relation), "valid": str(valid),
        "query": "is_empty(relation.subtract_range(valid))",
    }
    what = "mask" if r.mask else "rank"
    if a.dropped:
        evidence["dropped_guards"] = list(a.dropped)
    if over.is_empty():
        return _Result(Verdict.PROVED, f"every {what} in {lo} .. {hi} for every allowed size",
                       evidence=evidence)
    evidence["violations"] = str(over)
    under = a.relation_under.subtract_range(valid)
    if under.is_empty():
        return _Result(Verdict.UNKNOWN, f"a {what} outside the cluster is possible only if "
                       f"the unmodelled guard allows it: {'; '.join(a.dropped)}", INEXACT,
                       evidence=evidence)
    params, coords = _sample(kernel, under.wrap())
    n = len(a.dims)
    cex = _instance(kernel, a, params, coords[:n])
    value = coords[n]
    cex[what] = value
    named = ("names no CTA or one outside the cluster" if r.mask else
             "is outside the cluster")
    message = (f"{r.what}: {what} {value} {named} (the cluster has {size} CTAs, ranks 0 .. "
               f"{size - 1}) at {_describe(cex)}")
    return _Result(Verdict.REFUTED, message, BAD_RANK, cex, evidence)


def _shape(kernel: ir.Kernel, a: AccessRelation, sizes: Mapping[str, int]) -> list[int]:
    if a.space is ir.Space.SHARED:
        return list(kernel.buffer(a.tensor).shape)
    return [eval_sizes(e, sizes) for e in kernel.tensor(a.tensor).shape]


# ---- written at most once -----------------------------------------------------------------


def _conflicts(kernel: ir.Kernel, a: AccessRelation, b: AccessRelation,
               under: bool) -> isl.Map:
    """{ a-instance -> b-instance : both write one element }, minus the same instance and
    instances that took opposite branches of one `if`."""
    wa = a.relation_under if under else a.relation
    wb = b.relation_under if under else b.relation
    assert wa is not None and wb is not None
    pairs = wa.apply_range(wb.reverse())
    if a.gathers or b.gathers:  # scatters: the values read by the two instances
        pairs = gather.pair_facts(kernel, a.gathers, b.gathers, pairs.get_space(), pairs)
    if a.index == b.index:
        pairs = pairs.subtract(isl.Map.identity(pairs.get_space()))
    for ba in a.branches:
        for bb in b.branches:
            if ba.if_id == bb.if_id and ba.then != bb.then:
                same = pairs
                for k in range(ba.prefix):
                    same = same.equate(isl.dim_type.in_, k, isl.dim_type.out, k)
                pairs = pairs.subtract(same)
    return pairs


def _at_most_once(kernel: ir.Kernel, tensor: str,
                  writers: Sequence[AccessRelation]) -> _Result:
    modelled = [w for w in writers if w.relation is not None]
    evidence: dict[str, object] = {
        "writes": {f"{w.name}@{_at(w.span)}": str(w.relation) for w in modelled},
        "query": "for each pair of writers i <= j: is_empty(W_i . W_j^-1 minus identity "
                 "(i = j) minus same-instance pairs of opposite if-branches)",
    }
    dropped = [g for w in writers for g in w.dropped]
    if dropped:
        evidence["dropped_guards"] = dropped
    conflicts: dict[str, str] = {}
    evidence["conflicts"] = conflicts
    open_pairs = []
    for i, a in enumerate(modelled):
        for b in modelled[i:]:
            over = _conflicts(kernel, a, b, under=False)
            if over.is_empty():
                continue
            conflicts[f"{a.name},{b.name}"] = str(over)
            under = _conflicts(kernel, a, b, under=True)
            if under.is_empty():
                open_pairs.append((a, b))
                continue
            return _twice(kernel, a, b, under, evidence)
    unmodelled = [w for w in writers if w.relation is None]
    if unmodelled:
        return _Result(Verdict.UNKNOWN, f"cannot model a write: {unmodelled[0].error}",
                       INEXACT, evidence=evidence)
    if open_pairs:
        a, b = open_pairs[0]
        reasons = "; ".join(a.dropped + b.dropped)
        return _Result(Verdict.UNKNOWN, f"{tensor}: writers at {_at(a.span)} and {_at(b.span)} "
                       f"may collide unless an unmodelled guard prevents it: {reasons}",
                       INEXACT, evidence=evidence)
    return _Result(Verdict.PROVED, f"no element of {tensor} is written twice", evidence=evidence)


def _twice(kernel: ir.Kernel, a: AccessRelation, b: AccessRelation, pairs: isl.Map,
           evidence: dict[str, object]) -> _Result:
    assert a.relation_under is not None and b.relation_under is not None
    both = a.relation_under.reverse().range_product(b.relation_under.reverse())
    both = both.intersect_range(pairs.wrap())  # element -> [a-instance -> b-instance]
    rank = len(kernel.tensor(a.tensor).shape)

    def writers(params: Mapping[str, int], coords: list[int]) -> list[dict[str, object]]:
        return [_instance(kernel, a, params, coords[rank:rank + len(a.dims)]),
                _instance(kernel, b, params, coords[rank + len(a.dims):])]

    found = _realised(kernel, both.wrap(), bool(a.gathers or b.gathers), writers)
    if isinstance(found, str):
        return _Result(Verdict.UNKNOWN, f"two writes of one element of {a.tensor} are "
                       f"possible under the clauses instantiated on their reads, but {found}",
                       INEXACT, evidence=evidence)
    params, coords = found
    element = coords[:rank]
    first = _instance(kernel, a, params, coords[rank:rank + len(a.dims)])
    second = _instance(kernel, b, params, coords[rank + len(a.dims):])
    cex = {"sizes": params, "element": element, "writer1": first, "writer2": second}
    message = (f"{a.tensor}[{', '.join(map(str, element))}] is written twice at sizes "
               f"{_sizes(params)}: by {_describe(first, sizes=False)} (line {a.span.line}) "
               f"and by {_describe(second, sizes=False)} (line {b.span.line})")
    return _Result(Verdict.REFUTED, message, WRITTEN_TWICE, cex, evidence)


# ---- written at least once ----------------------------------------------------------------


def _at_least_once(kernel: ir.Kernel, ctx: isl.Context, t: ir.GlobalTensor,
                   writers: Sequence[AccessRelation], where: CondSets) -> _Result:
    tensor = t.name
    valid = valid_indices(kernel, ctx, tensor, ir.Space.GLOBAL)
    launch = _launchable(kernel, ctx)  # an empty grid is TS213's finding, not coverage's
    target_over = valid.intersect_params(where.over.intersect(launch))
    target_under = valid.intersect_params(where.under.intersect(launch))
    written_under = isl.Set.empty(valid.get_space())
    written_over = isl.Set.empty(valid.get_space())
    methods: dict[str, str] = {}
    scatters = [w for w in writers if w.gathers]
    if scatters:  # what they write whatever the data is (semantics/access/gather_coverage.py)
        written_under = gather_coverage.surely_written(kernel, scatters, valid)
    for w in writers:
        if w.gathers:
            methods[f"{w.name}@{_at(w.span)}"] = "gathered"
            if w.relation is not None:
                written_over = written_over.union(w.relation.range().intersect(valid))
            continue
        if w.relation_under is not None:
            under = coverage.image(w, valid, under=True)
            written_under = written_under.union(under.elements)
            methods[f"{w.name}@{_at(w.span)}"] = under.method
        if w.relation is not None:
            over = under if w.exact else coverage.image(w, valid)
            written_over = written_over.union(over.elements)
    for pair in written_by_branch_pairs(writers):  # both branches of a data-dependent if
        written_under = written_under.union(pair.range().intersect(valid))
        methods["if/else"] = "both branches of one data-dependent if"
    missing = target_over.subtract(written_under)
    evidence: dict[str, object] = {
        "target": str(target_over), "written": str(written_under.coalesce()),
        "query": "is_empty(target.subtract(union of writer ranges))",
        # how each range was computed: "tiles" = tile origins (+) in-tile offsets
        # (semantics/access/coverage.py), "range" = ISL's projection of the relation
        "ranges": methods,
    }
    dropped = [g for w in writers for g in w.dropped]
    if dropped:
        evidence["dropped_guards"] = dropped
    if missing.is_empty():
        return _Result(Verdict.PROVED, f"every element of {tensor} is written for every "
                       "allowed size", evidence=evidence)
    evidence["unwritten"] = str(missing.coalesce())
    surely = target_under.subtract(written_over)
    if surely.is_empty():
        reasons = [r for w in writers for r in w.dropped] + [
            w.error for w in writers if w.error]
        return _Result(Verdict.UNKNOWN, f"{tensor} is fully written only if unmodelled "
                       f"guards allow it: {'; '.join(reasons) or 'where clause'}", INEXACT,
                       evidence=evidence)
    params, element = _sample(kernel, surely)
    cex = {"sizes": params, "element": element,
           "shape": [eval_sizes(e, params) for e in kernel.tensor(tensor).shape]}
    message = (f"{tensor}[{', '.join(map(str, element))}] is never written at sizes "
               f"{_sizes(params)} (shape [{', '.join(map(str, cex['shape']))}])")
    if not writers:
        message = (f"{tensor} is declared '{t.role.value}' but no statement writes it: "
                   + message)
    return _Result(Verdict.REFUTED, message, UNWRITTEN, cex, evidence)


# ---- counterexample formatting ------------------------------------------------------------


def _sample(kernel: ir.Kernel, violations: isl.Set, tighten: bool = False
            ) -> tuple[dict[str, int], list[int]]:
    """(sizes, coordinates) of a point of a non-empty set, preferring sizes whose grid
    launches (an empty or oversized grid is a launch error of its own, and a counterexample
    that can be run is more useful). With `tighten` (an access through index tensors),
    each size is also made as small as it can be on its own: the counterexample's data must
    be drawn (semantics/access/requires_synth.py), which small index tensors make cheap."""
    points = _launchable_points(kernel, violations)
    return _smallest(_tightened(points) if tighten else points)


def _launchable_points(kernel: ir.Kernel, violations: isl.Set) -> isl.Set:
    """The points of `violations` at sizes whose grid launches (all of them if none)."""
    env = params_env(kernel, violations.get_ctx())
    launchable = env.universe()
    for g, limit in zip(kernel.grid, GRID_LIMITS, strict=False):
        try:
            value = term(g, env)
        except NotAffine:
            continue
        launchable = launchable.intersect(value.ge_set(constant(env, 1)))
        launchable = launchable.intersect(value.le_set(constant(env, limit)))
    preferred = violations.intersect_params(launchable.params())
    return violations if preferred.is_empty() else preferred


# Bounds tried, smallest first, on every size when looking for a small counterexample.
_SMALL_SIZES = (1, 2, 4, 8, 16, 64, 256, 1024, 4096, 65536, 2**20, 2**31)


def _smallest(points: isl.Set) -> tuple[dict[str, int], list[int]]:
    """(sizes, coordinates) of a point with small sizes: a counterexample at M=9 is one a
    person can run and read, one at M=69440 is not (ISL's sample_point picks any point).
    The sizes are boxed by growing bounds and a point sampled from the first non-empty box
    (lexmin would give the smallest, but on sets with divisions it can run for minutes
    without ISL's operation budget noticing)."""
    nparam = points.dim(isl.dim_type.param)
    if nparam:
        for bound in _SMALL_SIZES:
            box = isl.Set.universe(points.get_space().params())
            for i in range(nparam):
                box = box.lower_bound_val(isl.dim_type.param, i,
                                          isl.Val.int_from_si(points.get_ctx(), -bound))
                box = box.upper_bound_val(isl.dim_type.param, i,
                                          isl.Val.int_from_si(points.get_ctx(), bound))
            small = points.intersect_params(box)
            if not small.is_empty():
                return point_values(small.sample_point())
    return point_values(points.sample_point())


WITNESS_TRIES = 8  # sizes grown, one at a time, past an impossible gathered refutation


def _realised(kernel: ir.Kernel, points: isl.Set, gathered: bool,
              instances: Callable[[Mapping[str, int], list[int]], list[dict[str, object]]]
              ) -> tuple[dict[str, int], list[int]] | str:
    """A point of `points` whose gathered values some data the clauses allow holds
    (semantics/access/gather_witness.py). The first point tried has every size as small as
    it can be; when the data it needs cannot exist (an expert id -1 in a routing with no
    room for an empty block), each size in turn is made larger than there (the others kept
    within twice their least values). Returns the point, or why none was found."""
    if not gathered:
        return _sample(kernel, points)
    preferred = _launchable_points(kernel, points)
    least = _least_sizes(preferred)
    ctx = preferred.get_ctx()
    nparam = preferred.dim(isl.dim_type.param)
    boxes = [_bounded(preferred, least, 1)]
    grown = False
    why = ""
    while boxes:
        box = boxes.pop(0)
        if box.is_empty():
            continue
        params, coords = _smallest(box)
        found, why = witness(kernel, params, [i.get("gathered", {})
                                              for i in instances(params, coords)])
        if found is not Witness.IMPOSSIBLE:
            return params, coords  # drawn, or undecided: the point satisfies every fact
        if grown:
            continue
        grown = True
        wider = _bounded(preferred, least, 2)
        for i in range(min(nparam, WITNESS_TRIES)):
            name = preferred.get_space().get_dim_name(isl.dim_type.param, i)
            boxes.append(wider.lower_bound_val(isl.dim_type.param, i,
                                               isl.Val.int_from_si(ctx, params[name] + 1)))
    return (f"no data satisfying every requires clause holds the values read at the "
            f"points tried ({why})")


def _bounded(points: isl.Set, least: list[int], grow: int) -> isl.Set:
    for i, bound in enumerate(least):
        points = points.upper_bound_val(isl.dim_type.param, i,
                                        isl.Val.int_from_si(points.get_ctx(), bound * grow))
    return points


def _least_sizes(points: isl.Set) -> list[int]:
    """Per size, the least bound of _SMALL_SIZES under which `points` stays non-empty, each
    size bounded in turn with the earlier ones kept (_tightened)."""
    out = []
    for i in range(points.dim(isl.dim_type.param)):
        for bound in _SMALL_SIZES:
            small = points.upper_bound_val(isl.dim_type.param, i,
                                           isl.Val.int_from_si(points.get_ctx(), bound))
            if not small.is_empty():
                points = small
                out.append(bound)
                break
        else:
            out.append(_SMALL_SIZES[-1])
    return out


def _tightened(points: isl.Set) -> isl.Set:
    """`points` with each size in turn bounded by the least of _SMALL_SIZES that keeps the
    set non-empty."""
    least = _least_sizes(points)
    for i, bound in enumerate(least):
        points = points.upper_bound_val(isl.dim_type.param, i,
                                        isl.Val.int_from_si(points.get_ctx(), bound))
    return points


def _instance(kernel: ir.Kernel, a: AccessRelation, params: Mapping[str, int],
              coords: Sequence[int]) -> dict[str, object]:
    nblock = len(kernel.grid)
    loops = {name: coords[a.dims.index(name)] for name in a.loop_dims}
    out = {"sizes": dict(params), "block": list(coords[:nblock]), "thread": coords[nblock],
           "loops": loops, "statement": f"{a.name} at {_at(a.span)}"}
    if a.gathers:  # the index-tensor elements read and the values they held
        out["gathered"] = gather.describe(a.gathers, a.domain.get_space(), dict(params),
                                          coords[:len(a.dims)])
    return out


def _sizes(params: Mapping[str, int]) -> str:
    return ", ".join(f"{k}={v}" for k, v in params.items()) or "(no sizes)"


def _describe(inst: Mapping[str, object], sizes: bool = True) -> str:
    block = inst["block"]
    parts = []
    if sizes:
        parts.append(f"sizes {_sizes(inst['sizes'])}")  # type: ignore[arg-type]
    parts.append(f"block ({', '.join(map(str, block))})")  # type: ignore[call-overload]
    parts.append(f"thread {inst['thread']}")
    loops = inst["loops"]
    if loops:
        parts.append(", ".join(f"{k}={v}" for k, v in loops.items()))  # type: ignore[union-attr]
    gathered = inst.get("gathered")
    if gathered:
        parts.append("reading " + ", ".join(
            f"{k} = {v}" for k, v in gathered.items()))  # type: ignore[union-attr]
    return ", ".join(parts)


def _at(span: Span) -> str:
    return f"{span.line}:{span.col}"
