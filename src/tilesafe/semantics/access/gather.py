"""Gathered values as unknowns of an ISL space, constrained by the `requires` clauses.

Why: a gather `x[ids[t], c]` or a scatter `y[ids[t], c] = ...` indexes through a value read
from memory, which no Presburger term denotes. The value is data, not a function of the
instance the provers know -- but it is an integer that the launch guarantees things about.
So each read of an index tensor an access uses (a *key*, semantics/access/gather_keys.py) becomes
one more coordinate of the access's instance space, and this module adds the facts that
hold of it for every launch the `requires` clauses allow:

* its dtype's range (an i32 is in -2^31 .. 2^31 - 1);
* functional consistency (Ackermann): two reads of one index tensor at equal indices give
  equal values (an index tensor is `in`, never written during the launch);
* every universal clause, instantiated on the keys present: `requires ids[p] < M` gives
  `g < M` for the coordinate g of the key `ids[t]`, with p bound to t; a clause of several
  reads (`p == q || ids[p] != ids[q]`, `ids[p] >= T || topk[ids[p]] == be[p / 64]`) is
  instantiated for every assignment of its reads to the keys of the same tensor. An
  instance is `not exists vars: reads match the keys && the direct reads are in bounds &&
  !cond` -- exact Presburger, because every read in it is a coordinate.

Instantiating fewer clauses than hold only weakens the assumptions, so a proof on these
sets holds for every launch whose index tensors satisfy the clauses. The converse is not
automatic: a point of a refutation assigns values to the keys it involves, and data with
those values must exist (semantics/requires_synth.py confirms refutations on the
interpreter's side).

The predicates `injective`/`permutation`/`sorted` are universal clauses of two variables;
a `permutation` also says every value of its range is taken (`Onto`), an existential fact
only the coverage of a scatter needs (checkers/access.py, `gather_coverage`).
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

import islpy as isl

from tilesafe.frontend import ir
from tilesafe.frontend.ir_text import expr_text
from tilesafe.frontend.span import Span
from tilesafe.semantics.access.gather_keys import canonical, reads_in, substitute
from tilesafe.semantics.expr.affine import AffineEnv, NotAffine, condition, constant, term

INT = ir.ScalarType.INT
BOOL = ir.ScalarType.BOOL
MAX_INSTANCES = 64  # clause instantiations per query (beyond: fewer facts, still sound)
_RANGES = {ir.DType.I32: (-(2**31), 2**31 - 1), ir.DType.U8: (0, 255)}


@dataclass(frozen=True)
class GatherDim:
    """One gathered value: the set dim `pos` holds the value of the read `key`, whose
    indices `env` evaluates (over the same space)."""

    pos: int
    key: ir.Load
    env: AffineEnv


@dataclass(frozen=True)
class Clause:
    """`for every value of vars at which the direct reads are in bounds: cond`."""

    vars: tuple[ir.LoopVar, ...]
    cond: ir.Expr
    span: Span
    text: str
    predicate: bool = False  # from injective/permutation/sorted (two points of one tensor)


@dataclass(frozen=True)
class Onto:
    """Every v in vlo .. vhi is value(p) for some p in lo .. hi (a permutation's range)."""

    var: ir.LoopVar
    lo: ir.Expr
    hi: ir.Expr
    value: ir.Expr
    vlo: ir.Expr
    vhi: ir.Expr
    span: Span


# ---- the clauses ----------------------------------------------------------------------------


def _b(span: Span, op: str, a: ir.Expr, b: ir.Expr) -> ir.Expr:
    return ir.BinOp(span, BOOL, op, a, b)


def _any(span: Span, parts: Sequence[ir.Expr]) -> ir.Expr:
    out = parts[0]
    for p in parts[1:]:
        out = _b(span, "||", out, p)
    return out


def _other(r: ir.Requires) -> ir.LoopVar:
    """A second variable for a two-point predicate (a uid no resolver hands out)."""
    v = r.vars[0]
    return ir.LoopVar(v.span, INT, v.name + "'", -v.uid - 1)


def clauses(kernel: ir.Kernel) -> tuple[Clause, ...]:
    """Every `requires` of the kernel as universal clauses (the predicates expanded)."""
    return _clauses(kernel.requires)


@lru_cache(maxsize=64)
def _clauses(requires: tuple[ir.Requires, ...]) -> tuple[Clause, ...]:
    out = []
    for r in requires:
        text = _text(r)
        if r.kind is ir.RequireKind.ALL:
            assert r.cond is not None
            out.append(Clause(r.vars, r.cond, r.span, text))
            continue
        assert r.lo is not None and r.hi is not None and r.value is not None
        p, q = r.vars[0], _other(r)
        ep, eq = r.value, substitute(r.value, loops={p.uid: q})
        s = r.span
        outside = [_b(s, "<", p, r.lo), _b(s, ">=", p, r.hi), _b(s, "<", q, r.lo),
                   _b(s, ">=", q, r.hi)]
        if r.kind is ir.RequireKind.SORTED:
            cond = _any(s, outside + [_b(s, ">", p, q), _b(s, "<=", ep, eq)])
        else:
            parts = outside + [_b(s, "==", p, q), _b(s, "!=", ep, eq)]
            if r.vlo is not None and r.vhi is not None:
                parts += [_b(s, "<", ep, r.vlo), _b(s, ">=", ep, r.vhi)]
            cond = _any(s, parts)
        out.append(Clause((p, q), cond, s, text, predicate=True))
    return tuple(out)


def onto_clauses(kernel: ir.Kernel) -> tuple[Onto, ...]:
    out = []
    for r in kernel.requires:
        if r.kind is ir.RequireKind.PERMUTATION:
            assert r.lo is not None and r.hi is not None and r.value is not None
            assert r.vlo is not None and r.vhi is not None
            out.append(Onto(r.vars[0], r.lo, r.hi, r.value, r.vlo, r.vhi, r.span))
    return tuple(out)


def _text(r: ir.Requires) -> str:
    if r.kind is ir.RequireKind.ALL:
        assert r.cond is not None
        return expr_text(r.cond)
    assert r.lo is not None and r.hi is not None and r.value is not None
    rng = "" if r.vlo is None or r.vhi is None else (
        f", {expr_text(r.vlo)} .. {expr_text(r.vhi)}")
    return (f"{r.kind.value}({r.vars[0].name} in {expr_text(r.lo)} .. {expr_text(r.hi)}: "
            f"{expr_text(r.value)}{rng})")


def value_range(kernel: ir.Kernel, tensor: str) -> tuple[int, int]:
    return _RANGES.get(kernel.tensor(tensor).dtype, _RANGES[ir.DType.I32])


# ---- envs over a wider space ---------------------------------------------------------------


def rebased(env: AffineEnv, space: isl.Space, offset: int = 0) -> AffineEnv:
    """`env` over `space`, whose dims from `offset` on are env's own (a pair of instances
    wrapped into one set, or a space with dims appended)."""
    if offset == 0:
        return dataclasses.replace(env, space=space)
    return AffineEnv(space, {u: p + offset for u, p in env.loops.items()},
                     tuple(b + offset for b in env.blocks),
                     None if env.thread is None else env.thread + offset, env.lets,
                     {k: p + offset for k, p in env.gathers.items()})


def shifted(d: GatherDim, space: isl.Space, offset: int) -> GatherDim:
    return GatherDim(d.pos + offset, d.key, rebased(d.env, space, offset))


def _index(d: GatherDim, env_space: isl.Space) -> list[isl.PwAff]:
    env = rebased(d.env, env_space)
    return [term(i, env) for i in d.key.indices]


# ---- the facts ------------------------------------------------------------------------------


def constraints(kernel: ir.Kernel, universe: isl.Set, dims: Sequence[GatherDim],
                predicates: bool = True) -> isl.Set:
    """The facts about `dims` (see the module doc) as a subset of `universe` (a set over
    the space the dims live in; the universe, or the set the caller will intersect them
    with anyway).

    Why a caller passes its own set rather than the universe: each clause instance is a
    complement, a union of pieces, and intersecting many of them over the universe
    multiplies the pieces (a pair of scatter instances under five clauses ran out of ISL's
    budget); intersected into a set that already pins the instances, most pieces are empty
    at once. Each fact is intersected and coalesced in turn.

    `predicates=False` leaves out the instances of injective/permutation/sorted: a caller
    that does not need them (the value proof: two positions of a scatter never write one
    element, which the access checker proves) saves their pieces, which multiply with the
    number of reads of the tensor (fewer facts: weaker assumptions, still sound)."""
    s = universe
    if not dims:
        return s
    space = universe.get_space()
    for d in dims:
        lo, hi = value_range(kernel, d.key.tensor)
        v = _dim(space, d.pos)
        env = AffineEnv(space)
        s = s & v.ge_set(constant(env, lo)) & v.le_set(constant(env, hi))
    for a, b in itertools.combinations(dims, 2):
        if a.key.tensor == b.key.tensor:
            s = s & _consistent(space, a, b)
    count = 0
    for clause in clauses(kernel):
        if clause.predicate and not predicates:
            continue
        for inst in _instances(clause, dims):
            if count >= MAX_INSTANCES:
                return s
            count += 1
            fact = _instantiate(kernel, space, clause, inst)
            if fact is not None:
                s = (s & fact).coalesce()
    return s.coalesce()


def _dim(space: isl.Space, pos: int) -> isl.PwAff:
    return isl.PwAff.var_on_domain(isl.LocalSpace.from_space(space), isl.dim_type.set, pos)


def _consistent(space: isl.Space, a: GatherDim, b: GatherDim) -> isl.Set:
    """indices equal => values equal."""
    same = isl.Set.universe(space)
    for x, y in zip(_index(a, space), _index(b, space), strict=True):
        same = same & x.eq_set(y)
    differ = _dim(space, a.pos).ne_set(_dim(space, b.pos))
    return isl.Set.universe(space).subtract(same & differ)


def _clause_reads(clause: Clause) -> list[ir.Load]:
    return list(dict.fromkeys(canonical(ld) for ld in reads_in(clause.cond)))


def _instances(clause: Clause, dims: Sequence[GatherDim]):
    """Assignments of the clause's reads to dims of the same tensor (every read matched)."""
    reads = _clause_reads(clause)
    options = [[d for d in dims if d.key.tensor == r.tensor
                and len(d.key.indices) == len(r.indices)] for r in reads]
    if not reads or any(not o for o in options):
        return
    for choice in itertools.product(*options):
        yield dict(zip(reads, choice, strict=True))


def _instantiate(kernel: ir.Kernel, space: isl.Space, clause: Clause,
                 match: dict[ir.Load, GatherDim]) -> isl.Set | None:
    """not exists vars: the clause's reads are the matched dims' reads, its direct reads in
    bounds, and cond false."""
    n = space.dim(isl.dim_type.set)
    names = [f"rq{k}" for k in range(len(clause.vars))]
    ext = space.add_dims(isl.dim_type.set, len(names))
    for k, name in enumerate(names):
        ext = ext.set_dim_name(isl.dim_type.set, n + k, name)
    if space.has_tuple_name(isl.dim_type.set):  # add_dims drops the tuple's name
        ext = ext.set_tuple_name(isl.dim_type.set, space.get_tuple_name(isl.dim_type.set))
    env = AffineEnv(ext, {v.uid: n + k for k, v in enumerate(clause.vars)},
                    gathers={r: d.pos for r, d in match.items()})
    try:
        bad = isl.Set.universe(ext)
        for r, d in match.items():
            for x, y in zip(r.indices, _index(d, ext), strict=True):
                bad = bad & term(x, env).eq_set(y)
        for r in _direct(clause):
            t = kernel.tensor(r.tensor)
            for x, extent in zip(r.indices, t.shape, strict=True):
                i = term(x, env)
                bad = bad & i.ge_set(constant(env, 0)) & i.lt_set(term(extent, env))
        cond = condition(clause.cond, env)
    except NotAffine:
        return None
    if not cond.exact:
        return None
    bad = bad & cond.over.complement()
    if bad.is_empty():
        return None
    bad = bad.project_out(isl.dim_type.set, n, len(names))
    if space.has_tuple_name(isl.dim_type.set):  # and so does project_out
        bad = bad.set_tuple_name(space.get_tuple_name(isl.dim_type.set))
    return isl.Set.universe(space).subtract(bad)


def _direct(clause: Clause) -> list[ir.Load]:
    return [canonical(ld) for ld in reads_in(clause.cond)
            if not any(isinstance(x, ir.Load) for i in ld.indices for x in reads_in(i))]


def describe(dims: Sequence[GatherDim], space: isl.Space, params: dict[str, int],
             coords: Sequence[int]) -> dict[str, int]:
    """{'ids[37]': -1, ...}: each gathered read at a point (sizes, coordinates) of the
    dims' space, its index evaluated (for counterexamples: the offending index and the value
    it held)."""
    point = isl.Point.zero(space)
    ctx = space.get_ctx()
    for i in range(space.dim(isl.dim_type.param)):
        value = params.get(space.get_dim_name(isl.dim_type.param, i), 0)
        point = point.set_coordinate_val(isl.dim_type.param, i, isl.Val.int_from_si(ctx, value))
    for i, value in enumerate(coords):
        point = point.set_coordinate_val(isl.dim_type.set, i, isl.Val.int_from_si(ctx, value))
    out: dict[str, int] = {}
    for d in dims:
        try:
            idx = [int(pa.eval(point).to_python()) for pa in _index(d, space)]
        except (NotAffine, isl.Error):
            continue
        value = int(point.get_coordinate_val(isl.dim_type.set, d.pos).to_python())
        out[f"{d.key.tensor}[{', '.join(map(str, idx))}]"] = value
    return out


def pair_facts(kernel: ir.Kernel, a: Sequence[GatherDim], b: Sequence[GatherDim],
               space: isl.Space, within: isl.Map | None = None) -> isl.Map:
    """The facts about the gathered values of two instances, as a map over `space`
    (a-instance -> b-instance): both instances' dims, consistent with each other (the
    same element of an index tensor read by two threads holds one value) and the
    clauses instantiated across them (an injective index gives two threads different
    rows). With `within` (pairs over `space`), the facts restricted to it (constraints())."""
    wrapped = space.wrap()
    base = isl.Set.universe(wrapped) if within is None else within.wrap()
    flat_set = base.flatten()
    flat = flat_set.get_space()
    na = space.dim(isl.dim_type.in_)
    dims = [shifted(d, flat, 0) for d in a] + [shifted(d, flat, na) for d in b]
    facts = constraints(kernel, flat_set, dims)
    return facts.reset_space(wrapped).unwrap()
