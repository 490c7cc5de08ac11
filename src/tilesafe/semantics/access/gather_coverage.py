"""The elements a scatter surely writes: coverage through gathered values.

Why: coverage (TS212) needs an *under*-approximation of what a writer writes. For an access
indexed through values read from an index tensor (semantics/access/gather.py), the access
relation's range is not one: its gather coordinates are unknowns, and the range takes every
value they may have, while a launch has one. An element is surely written only if it is
written whatever the data is, among the data the `requires` clauses allow:

* without more facts: some instance writes it for *every* value of its gathered reads
  consistent with the facts (`forall g: facts => writes`), e.g. a guard on a gathered value
  the facts decide, or an index the value does not move;
* through a permutation (`requires permutation(p in lo .. hi: ids[p], vlo .. vhi)`): every
  value r of the range is read at some position q -- which one is data. The element is
  surely written if, for some r, the instances that read position q write it when the read
  gives r, for *every* q in lo .. hi (then also for the one that holds r). This is how a
  scatter `y[ids[t], c] = ...` through a permutation covers y.

Both are exact ISL operations (complements of projections); what they return is a subset of
what every allowed launch writes, so coverage proved on it holds.
"""

from __future__ import annotations

from collections.abc import Sequence

import islpy as isl

from tilesafe.frontend import ir
from tilesafe.semantics.access.access import AccessRelation
from tilesafe.semantics.access.gather import GatherDim, Onto, constraints, onto_clauses, rebased
from tilesafe.semantics.expr.affine import AffineEnv, NotAffine, term

SET = isl.dim_type.set
IN = isl.dim_type.in_


def surely_written(kernel: ir.Kernel, writers: Sequence[AccessRelation],
                   valid: isl.Set) -> isl.Set:
    """The elements of `valid` that the writers write in every launch the clauses allow.

    Writers in one scope (the same instance dims and the same gathered reads, e.g. the two
    branches of `if r >= 0`) are taken together: their instances with equal coordinates
    read equal values, so an element one writes for some values and the other for the rest
    is written for all."""
    out = isl.Set.empty(valid.get_space())
    groups: dict[tuple, list[AccessRelation]] = {}
    for w in writers:
        if w.relation_under is not None:
            groups.setdefault((w.dims, tuple(d.key for d in w.gathers)), []).append(w)
    for group in groups.values():
        rel = None
        for w in group:
            r = w.relation_under.set_tuple_name(isl.dim_type.in_, "W")
            rel = r if rel is None else rel.union(r)
        assert rel is not None
        rel = rel.intersect_range(valid)
        space = rel.get_space().domain()
        dims = tuple(GatherDim(d.pos, d.key, rebased(d.env, space)) for d in group[0].gathers)
        out = out.union(_surely(kernel, rel, dims))
    return out.coalesce()


def _surely(kernel: ir.Kernel, rel: isl.Map, dims: tuple[GatherDim, ...]) -> isl.Set:
    facts = constraints(kernel, isl.Set.universe(rel.get_space().domain()), dims)
    out = _forall(rel, facts, [d.pos for d in dims]).range()
    for onto in onto_clauses(kernel):
        for d in dims:
            if _reads_at_var(onto, d):
                part = _through(rel, facts, dims, d, onto)
                if part is not None:
                    out = out.union(part)
    return out


def _forall(rel: isl.Map, facts: isl.Set, gpos: list[int]) -> isl.Map:
    """{ instance -> element : written for every value of the dims `gpos` consistent with
    the facts } (those dims left unconstrained)."""
    everything = isl.Map.from_domain_and_range(facts, rel.range())
    bad = everything.subtract(rel)
    kept = rel
    for pos in gpos:
        bad = bad.eliminate(IN, pos, 1)
        kept = kept.eliminate(IN, pos, 1)
    return kept.subtract(bad)


def _reads_at_var(onto: Onto, d: GatherDim) -> bool:
    """The permutation speaks of exactly this tensor read at its variable (`ids[p]`)."""
    v = onto.value
    return (isinstance(v, ir.Load) and v.tensor == d.key.tensor and len(v.indices) == 1
            and isinstance(v.indices[0], ir.LoopVar) and v.indices[0].uid == onto.var.uid
            and len(d.key.indices) == 1)


def _through(rel: isl.Map, facts: isl.Set, dims: tuple[GatherDim, ...], d: GatherDim,
             onto: Onto) -> isl.Set | None:
    """The elements written through the permutation `onto` at the read `d` (module doc)."""
    space = rel.get_space().domain()
    good = _forall(rel, facts, [g.pos for g in dims if g.pos != d.pos])
    try:
        position = term(d.key.indices[0], d.env)
    except NotAffine:
        return None
    value = isl.PwAff.var_on_domain(isl.LocalSpace.from_space(space), SET, d.pos)
    qr = isl.Map.from_pw_aff(position).flat_range_product(isl.Map.from_pw_aff(value))
    written = qr.reverse().apply_range(good)  # [q, r] -> element
    pair = written.get_space().domain()
    env = AffineEnv(pair)
    try:
        lo, hi = term(onto.lo, env), term(onto.hi, env)
        vlo, vhi = term(onto.vlo, env), term(onto.vhi, env)
    except NotAffine:
        return None
    ls = isl.LocalSpace.from_space(pair)
    q = isl.PwAff.var_on_domain(ls, SET, 0)
    r = isl.PwAff.var_on_domain(ls, SET, 1)
    bounds = q.ge_set(lo) & q.lt_set(hi) & r.ge_set(vlo) & r.lt_set(vhi)
    elements = written.range()
    need = isl.Map.from_domain_and_range(bounds, elements)
    have = written.intersect_domain(bounds)
    missing = need.subtract(have)  # q does not write the element when it reads r
    # (r, element) written at some q, minus those missing at some q: written at every q
    have_re = have.eliminate(IN, 0, 1)
    missing_re = missing.eliminate(IN, 0, 1)
    covered = have_re.subtract(missing_re)
    if covered.is_empty():
        return None
    return covered.range()
