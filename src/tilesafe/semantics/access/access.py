"""Every memory access of a kernel as a parametric ISL relation: instance -> element.

An *instance* of a statement is one execution of it: a point (block coordinates, thread,
values of the enclosing loop variables). Its domain is the set of instances that run, for
every size the `where` clause allows: the grid, the block, the enclosing role (narrowed to
its lowest thread under `elect one`), the enclosing `if` conditions and loop ranges (a
stepped loop `lo .. hi step s` keeps v with (v - lo) mod s = 0). The relation maps each
instance to the tensor or buffer element(s) it touches: one element for a load or store, a
whole box for a TMA copy (the global side is clipped to the tensor, because the copy engine
fills out-of-bounds elements on loads and skips them on stores; docs/semantics.md).

A guard with no Presburger form is kept twice: `domain` over-approximates the instances
(the guard dropped), `domain_under` under-approximates them (the guarded part empty). Both
are equal when `dropped` is empty. Conditions evaluate `&&` and `||` left to right with
short-circuit, so a load in the right operand is guarded by the left one.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from enum import Enum

import islpy as isl

from tilesafe.frontend import ir
from tilesafe.frontend.span import Span
from tilesafe.semantics.access.gather import GatherDim, constraints
from tilesafe.semantics.access.gather_keys import keys_in
from tilesafe.semantics.expr.affine import (
    PARAM,
    AffineEnv,
    CondSets,
    NotAffine,
    condition,
    constant,
    exact_set,
    make_space,
    term,
)

OUT = isl.dim_type.out
_ISL_WORDS = frozenset({"and", "or", "not", "mod", "floor", "ceil", "min", "max", "exists",
                        "true", "false", "infty", "NaN", "implies", "xor", "cst", "rat"})


class Kind(str, Enum):
    READ = "read"
    WRITE = "write"


class Via(str, Enum):
    LOAD = "load"
    STORE = "store"
    TMA_LOAD = "tma_load"  # global side read, shared side written by the copy engine
    TMA_STORE = "tma_store"  # shared side read, global side written by the copy engine
    WGMMA = "wgmma"  # an MMA operand tile, read from shared memory by the tensor cores


@dataclass(frozen=True)
class Branch:
    """The access sits in one branch of `if` number `if_id`, whose condition is evaluated
    once per instance of its first `prefix` dims: two accesses in opposite branches never
    both run for one such instance."""

    if_id: int
    then: bool
    prefix: int
    cond: Span | None = None  # the condition's text (which dropped guards are its parts)


@dataclass(frozen=True)
class AccessRelation:
    """One access statement (or load expression) as ISL objects; see the module doc."""

    index: int  # discovery order; the domain tuple is named S{index}
    tensor: str
    space: ir.Space
    kind: Kind
    via: Via
    dims: tuple[str, ...]  # names of the instance dims (block_x.., thread, loop vars)
    loop_dims: tuple[str, ...]  # the loop-variable subset of `dims`, outermost first
    domain: isl.Set
    domain_under: isl.Set
    relation: isl.Map | None  # domain -> element; None when an index is not affine
    relation_under: isl.Map | None
    span: Span
    node: object  # the ir.Load / ir.Store / ir.TmaLoad / ir.TmaStore
    clipped: bool  # TMA global side: out-of-bounds box elements are legal and not accessed
    dropped: tuple[str, ...] = ()  # guards without a Presburger form
    branches: tuple[Branch, ...] = ()
    error: str | None = None  # why `relation` is None
    # TMA global side and MMA tiles only: instance -> the box's start coordinates, before
    # clipping (the copy engine needs the innermost start 16-byte aligned whether or not it
    # is in bounds; a wgmma descriptor is synthesised for each tile origin)
    origin: isl.Map | None = None
    origin_under: isl.Map | None = None
    # The index terms over the instance space, before the domain is applied (None when
    # one has no affine form): a load's or store's indices, a TMA copy's box start on the
    # global side, a buffer slice's prefix. semantics/access/coverage.py reads the relation's tile
    # structure from them.
    terms: tuple[isl.PwAff, ...] | None = None
    # A TMA copy's global side: the box at `terms`; a buffer slice: the whole trailing dims
    # after the prefix `terms`; () for a load or store.
    box: tuple[int, ...] = ()
    # The reads of index tensors the indices and guards use, each a dim of the instance
    # space after the loops (semantics/access/gather.py): gathers and scatters
    gathers: tuple[GatherDim, ...] = ()

    @property
    def name(self) -> str:
        return f"S{self.index}"

    @property
    def exact(self) -> bool:
        return not self.dropped and self.error is None


@dataclass(frozen=True)
class _Scope:
    """What encloses a statement: instance dims, loops, lets, role and guards."""

    dims: tuple[str, ...]
    blocks: tuple[int, ...]
    thread: int
    loops: tuple[tuple[ir.For, int], ...] = ()
    lets: Mapping[int, ir.Expr] = field(default_factory=dict)
    role: ir.Role | None = None
    guards: tuple[tuple[ir.Expr, bool], ...] = ()
    branches: tuple[Branch, ...] = ()

    def env(self, space: isl.Space) -> AffineEnv:
        return AffineEnv(space, {f.var.uid: pos for f, pos in self.loops}, self.blocks,
                         self.thread, self.lets)


def instance_dims(kernel: ir.Kernel) -> tuple[str, ...]:
    return tuple(f"block_{'xyz'[i]}" for i in range(len(kernel.grid))) + ("thread",)


def params_env(kernel: ir.Kernel, ctx: isl.Context, dims: tuple[str, ...] = (),
               name: str | None = None) -> AffineEnv:
    """An env whose only leaves are sizes (shapes, the grid, `where`)."""
    return AffineEnv(make_space(ctx, kernel.sizes, dims, name))


def where_sets(kernel: ir.Kernel, env: AffineEnv) -> CondSets:
    result = exact_set(env.universe())
    for constraint in kernel.where:
        result = result & condition(constraint, env)
    return result


def where_params(kernel: ir.Kernel, ctx: isl.Context) -> CondSets:
    """The sizes `where` allows, as parameter sets."""
    sets = where_sets(kernel, params_env(kernel, ctx))
    return CondSets(sets.over.params(), sets.under.params(), sets.dropped)


def valid_indices(kernel: ir.Kernel, ctx: isl.Context, tensor: str,
                  space: ir.Space) -> isl.Set:
    """{ tensor[i0, ..] : 0 <= i_k < extent_k } (extents affine in the sizes)."""
    if space is ir.Space.GLOBAL:
        extents: tuple[ir.Expr | int, ...] = kernel.tensor(tensor).shape
    else:
        extents = kernel.buffer(tensor).shape
    names = tuple(f"i{k}" for k in range(len(extents)))
    env = params_env(kernel, ctx, names, tensor)
    result = env.universe()
    for k, extent in enumerate(extents):
        i = isl.PwAff.var_on_domain(env.local_space(), isl.dim_type.set, k)
        bound = term(extent, env) if isinstance(extent, ir.Expr) else constant(env, extent)
        result = result.intersect(i.ge_set(constant(env, 0))).intersect(i.lt_set(bound))
    return result


def collect(kernel: ir.Kernel, ctx: isl.Context) -> tuple[AccessRelation, ...]:
    """All accesses of the kernel, in source order."""
    return tuple(_Collector(kernel, ctx).run())


@dataclass(frozen=True)
class ClusterRef:
    """A CTA rank (`part@r[i]`, `arrive full@r[s]`) or a multicast mask as a relation from
    the instances that evaluate it to its value, a one-dim tuple named CTA_RANK or
    CTA_MASK (`access.relation`); the checker proves every value names CTAs of the
    cluster."""

    access: AccessRelation
    mask: bool
    what: str  # "a read of part@r", "an arrive on full@r", "a multicast mask"


CTA_RANK = "cta"
CTA_MASK = "mask"


def cluster_refs(kernel: ir.Kernel, ctx: isl.Context) -> tuple[ClusterRef, ...]:
    """Every CTA rank and multicast mask of a cluster kernel, in source order."""
    if kernel.cluster is None:
        return ()
    return tuple(r for r in _RankCollector(kernel, ctx).run() if r is not None)


class _Collector:
    def __init__(self, kernel: ir.Kernel, ctx: isl.Context):
        self.k = kernel
        self.ctx = ctx
        self.count = 0
        self.ifs = 0

    def run(self) -> Iterator[AccessRelation]:
        dims = instance_dims(self.k)
        scope = _Scope(dims, tuple(range(len(dims) - 1)), len(dims) - 1)
        yield from self.stmts(self.k.body, scope)

    # ---- statements ------------------------------------------------------------------------

    def stmts(self, stmts: tuple[ir.Stmt, ...], scope: _Scope) -> Iterator[AccessRelation]:
        for s in stmts:
            yield from self.stmt(s, scope)
            if isinstance(s, ir.Let) and s.value.type is ir.ScalarType.INT:
                scope = replace(scope, lets={**scope.lets, s.uid: s.value})

    def stmt(self, s: ir.Stmt, scope: _Scope) -> Iterator[AccessRelation]:
        if isinstance(s, (ir.Let, ir.VarDecl, ir.Assign)):
            yield from self.loads(s.value, scope)
        elif isinstance(s, ir.Store):
            for e in s.indices:
                yield from self.loads(e, scope)
            yield from self.loads(s.value, scope)
            yield self.access(scope, s.tensor, s.space, Kind.WRITE, Via.STORE, s, s.span,
                              indices=s.indices)
        elif isinstance(s, ir.For):
            yield from self.loads(s.lo, scope)
            yield from self.loads(s.hi, scope)
            name = s.var.name
            if name in scope.dims or name in self.k.sizes or name in _ISL_WORDS:
                name = f"{name}_{s.var.uid}"
            inner = replace(scope, dims=scope.dims + (name,),
                            loops=scope.loops + ((s, len(scope.dims)),))
            yield from self.stmts(s.body, inner)
        elif isinstance(s, ir.If):
            yield from self.loads(s.cond, scope)
            self.ifs += 1
            prefix = len(scope.dims)
            for then, body in ((True, s.then), (False, s.orelse)):
                inner = replace(scope, guards=scope.guards + ((s.cond, then),),
                                branches=scope.branches + (Branch(self.ifs, then, prefix,
                                                                  s.cond.span),))
                yield from self.stmts(body, inner)
        elif isinstance(s, ir.Role):
            yield from self.stmts(s.body, replace(scope, role=s))
        elif isinstance(s, ir.TmaLoad):
            tmap = self.k.tensormap(s.tensormap)
            yield self.access(scope, tmap.tensor, ir.Space.GLOBAL, Kind.READ, Via.TMA_LOAD, s,
                              s.span, coords=s.coords, box=tmap.box)
            yield self.slice_access(scope, s.dst, Kind.WRITE, Via.TMA_LOAD, s)
        elif isinstance(s, ir.TmaStore):
            tmap = self.k.tensormap(s.tensormap)
            yield self.slice_access(scope, s.src, Kind.READ, Via.TMA_STORE, s)
            yield self.access(scope, tmap.tensor, ir.Space.GLOBAL, Kind.WRITE, Via.TMA_STORE,
                              s, s.span, coords=s.coords, box=tmap.box)
        elif isinstance(s, ir.Wgmma):
            for tile in (s.a, s.b):
                yield self.access(scope, tile.buffer, ir.Space.SHARED, Kind.READ, Via.WGMMA, s,
                                  tile.span, indices=tuple(i.start for i in tile.index),
                                  tile=tuple(i.extent or 1 for i in tile.index))
        # Barrier, fence, sync and bulk-group statements touch no tensor or buffer element.

    def loads(self, expr: ir.Expr, scope: _Scope) -> Iterator[AccessRelation]:
        """Loads inside an expression; `a && b` and `a || b` guard b's loads by a."""
        if isinstance(expr, ir.Load):
            for e in expr.indices:
                yield from self.loads(e, scope)
            yield self.access(scope, expr.tensor, expr.space, Kind.READ, Via.LOAD, expr,
                              expr.span, indices=expr.indices)
        elif isinstance(expr, ir.BinOp):
            yield from self.loads(expr.lhs, scope)
            if expr.op in ("&&", "||"):
                scope = replace(scope, guards=scope.guards + ((expr.lhs, expr.op == "&&"),))
            yield from self.loads(expr.rhs, scope)
        elif isinstance(expr, ir.UnOp):
            yield from self.loads(expr.operand, scope)
        elif isinstance(expr, ir.Call):
            for a in expr.args:
                yield from self.loads(a, scope)

    def slice_access(self, scope: _Scope, sl: ir.BufferSlice, kind: Kind, via: Via,
                     node: ir.Stmt) -> AccessRelation:
        buf = self.k.buffer(sl.buffer)
        box = buf.shape[len(sl.prefix):]
        return self.access(scope, sl.buffer, ir.Space.SHARED, kind, via, node, sl.span,
                           indices=sl.prefix, box=box, box_from_zero=True)

    # ---- one access ------------------------------------------------------------------------

    def access(self, scope: _Scope, tensor: str, space: ir.Space, kind: Kind, via: Via,
               node: object, span: Span, indices: tuple[ir.Expr, ...] = (),
               coords: tuple[ir.Expr, ...] = (), box: tuple[int, ...] = (),
               box_from_zero: bool = False, tile: tuple[int, ...] = ()) -> AccessRelation:
        self.count += 1
        name = f"S{self.count}"
        keys = keys_in(self.k, tuple(indices) + tuple(coords) + tuple(g for g, _ in scope.guards),
                       scope.lets)
        gdims = tuple(f"g{k}_{key.tensor}" for k, key in enumerate(keys))
        dims = scope.dims + gdims
        env = scope.env(make_space(self.ctx, self.k.sizes, dims, name))
        if keys:
            env = replace(env, gathers={key: len(scope.dims) + k for k, key in enumerate(keys)})
        gathers = tuple(GatherDim(env.gathers[key], key, env) for key in keys)
        dom = self.domain(scope, env)
        if gathers:
            facts = constraints(self.k, env.universe(), gathers)
            dom = CondSets(dom.over & facts, dom.under & facts, dom.dropped)
        clipped = bool(coords)
        relation = relation_under = origin = origin_under = None
        error = None
        terms = None
        try:
            terms = tuple(term(e, env) for e in (coords or indices))
            if coords:  # TMA global side: the box at coords, clipped to the tensor
                start = _points(env, terms, tensor)
                origin, origin_under = start.intersect_domain(dom.over), start.intersect_domain(
                    dom.under)
                rel = box_map(terms, box, tensor)
                rel = rel.intersect_range(valid_indices(self.k, self.ctx, tensor, space))
            elif tile:  # an MMA tile: `tile` elements from each start, never clipped
                start = _points(env, terms, tensor)
                origin, origin_under = start.intersect_domain(dom.over), start.intersect_domain(
                    dom.under)
                rel = box_map(terms, tile, tensor)
                box = tile
            else:  # a point (load/store) or a buffer slice: prefix indices then whole dims
                rel = _points(env, terms, tensor)
                if box_from_zero:
                    rel = _append_box(rel, box, tensor)
            relation = rel.intersect_domain(dom.over)
            relation_under = rel.intersect_domain(dom.under)
        except NotAffine as why:
            error = f"index at {why.expr.span.line}:{why.expr.span.col}: {why.reason}"
        return AccessRelation(
            self.count, tensor, space, kind, via, dims,
            tuple(scope.dims[pos] for _, pos in scope.loops), dom.over, dom.under,
            relation, relation_under, span, node, clipped, dom.dropped, scope.branches, error,
            origin, origin_under, terms if error is None else None, tuple(box), gathers)

    def domain(self, scope: _Scope, env: AffineEnv) -> CondSets:
        sets = where_sets(self.k, env)
        ls = env.local_space()
        zero = constant(env, 0)
        for axis, pos in enumerate(scope.blocks):
            b = isl.PwAff.var_on_domain(ls, isl.dim_type.set, pos)
            sets = sets & _guarded(lambda g=self.k.grid[axis], b=b: b.ge_set(zero).intersect(
                b.lt_set(term(g, env))), env, self.k.grid[axis])
        t = isl.PwAff.var_on_domain(ls, isl.dim_type.set, scope.thread)
        lo, hi = 0, self.k.block
        if scope.role is not None:
            lo, hi = scope.role.threads.lo, scope.role.threads.hi
            if scope.role.elect_one:
                hi = lo + 1
        sets = sets & exact_set(t.ge_set(constant(env, lo)).intersect(t.lt_set(constant(env, hi))))
        for loop, pos in scope.loops:
            v = isl.PwAff.var_on_domain(ls, isl.dim_type.set, pos)

            def bounds(loop: ir.For = loop, v: isl.PwAff = v) -> isl.Set:
                start = term(loop.lo, env)
                s = v.ge_set(start).intersect(v.lt_set(term(loop.hi, env)))
                if loop.step > 1:
                    s = s.intersect(v.sub(start).mod_val(isl.Val.int_from_si(
                        env.ctx, loop.step)).eq_set(zero))
                return s

            sets = sets & _guarded(bounds, env, loop.lo)
        for cond, positive in scope.guards:
            c = condition(cond, env)
            sets = sets & (c if positive else c.negate())
        return sets


class _RankCollector(_Collector):
    """The collector's walk (instance dims, loops, guards, roles), yielding a ClusterRef for
    each rank or mask instead of the accesses (None for an access without one)."""

    def stmt(self, s: ir.Stmt, scope: _Scope) -> Iterator:
        for a in super().stmt(s, scope):
            if a is not None:
                yield a
        barrier = getattr(s, "barrier", None)
        if isinstance(barrier, ir.BarrierRef) and barrier.cta is not None:
            verb = "an arrive on" if isinstance(s, ir.Arrive) else "a use of"
            yield self.ref(scope, barrier.cta, False, f"{verb} {barrier.name}@r", s,
                           barrier.span)
        if isinstance(s, ir.TmaLoad) and s.multicast is not None:
            yield self.ref(scope, s.multicast, True, "a multicast mask", s, s.multicast.span)

    def access(self, scope: _Scope, tensor: str, space: ir.Space, kind: Kind, via: Via,
               node: object, span: Span, **_: object) -> ClusterRef | None:  # type: ignore[override]
        cta = getattr(node, "cta", None)
        if not isinstance(node, (ir.Load, ir.Store)) or cta is None:
            return None
        verb = "a read of" if kind is Kind.READ else "a store into"
        return self.ref(scope, cta, False, f"{verb} {tensor}@r", node, span)

    def ref(self, scope: _Scope, value: ir.Expr, mask: bool, what: str, node: object,
            span: Span) -> ClusterRef:
        name = CTA_MASK if mask else CTA_RANK
        a = super().access(scope, name, ir.Space.SHARED, Kind.READ, Via.LOAD, node, span,
                           indices=(value,))
        return ClusterRef(a, mask, what)


def _guarded(build, env: AffineEnv, expr: ir.Expr) -> CondSets:
    """An exact constraint, or (when a term has no affine form) a dropped one."""
    try:
        return exact_set(build())
    except NotAffine as why:
        where = f"{expr.span.line}:{expr.span.col}"
        return CondSets(env.universe(), env.empty(), (f"bound at {where}: {why.reason}",))


def _points(env: AffineEnv, terms: tuple[isl.PwAff, ...], tensor: str) -> isl.Map:
    """{ S[..] -> tensor[e0, ..] } for index terms e_k (a rank-0 map for an empty prefix)."""
    if terms:
        return point_map(terms, tensor)
    return _name_out(isl.Map.from_domain(env.universe()), tensor)


def point_map(terms: tuple[isl.PwAff, ...], tensor: str) -> isl.Map:
    """{ S[..] -> tensor[e0, ..] } over every instance, for at least one index term."""
    rel = isl.Map.from_pw_aff(terms[0])
    for t in terms[1:]:
        rel = rel.flat_range_product(isl.Map.from_pw_aff(t))
    return _name_out(rel, tensor)


def box_map(coords: tuple[isl.PwAff, ...], box: tuple[int, ...], tensor: str) -> isl.Map:
    """{ S[..] -> tensor[x0, ..] : c_k <= x_k < c_k + box_k } over every instance (a TMA
    copy's global side before the domain and the clipping are applied)."""
    rel = None
    for c, extent in zip(coords, box, strict=True):
        widen = isl.Map.read_from_str(c.get_ctx(), f"{{ [y] -> [x] : y <= x < y + {extent} }}")
        m = isl.Map.from_pw_aff(c).apply_range(widen)
        rel = m if rel is None else rel.flat_range_product(m)
    assert rel is not None
    return _name_out(rel, tensor)


def _append_box(rel: isl.Map, box: tuple[int, ...], tensor: str) -> isl.Map:
    """Extend { S -> buf[p..] } with whole trailing dims 0 <= o_k < box_k."""
    for extent in box:
        whole = isl.Map.read_from_str(rel.get_ctx(), f"{{ [] -> [o] : 0 <= o < {extent} }}")
        dom = isl.Map.from_domain(rel.domain()).apply_range(whole)  # S -> [o]
        rel = rel.flat_range_product(dom)
    return _name_out(rel, tensor)


def _name_out(rel: isl.Map, tensor: str) -> isl.Map:
    for k in range(rel.dim(OUT)):
        rel = rel.set_dim_name(OUT, k, f"i{k}")
    return rel.set_tuple_name(OUT, tensor)


def point_values(point: isl.Point) -> tuple[dict[str, int], list[int]]:
    """(params by name, set coordinates in order) of an ISL point."""
    space = point.get_space()
    params = {space.get_dim_name(PARAM, i): point.get_coordinate_val(PARAM, i).to_python()
              for i in range(space.dim(PARAM))}
    coords = [point.get_coordinate_val(isl.dim_type.set, i).to_python()
              for i in range(space.dim(isl.dim_type.set))]
    return params, coords
