"""The elements an access touches, computed through its tile structure.

Why: the coverage query ("every output element is written", TS212) subtracts the union of
the writers' ranges from the tensor's index box. ISL's range of an access relation keeps
the instance dims as existentials, and when an index is a sum of divisions of the thread and
loop counters -- a CuTe hierarchical layout walked in storage order, e.g.
`dst[by * 64 + (idx / 512) * 8 + (idx / 8) % 8, bx * 64 + ((idx / 64) % 8) * 8 + idx % 8]`
-- the subtraction must eliminate them together with the block coordinates and the sizes:
ISL ran past its operation budget (TS290; 38 s at ten times the budget) on a 64x64 blocked
column-major transpose that is plainly correct (corpus/good/cute_blocked_colmajor.tsk).

Almost every kernel indexes as *tile origin + offset inside the tile*. When each index term
splits as g(outer dims, sizes) + h(inner dims), and the inner dims (the thread, loops of
constant bounds) range over a set that depends neither on the sizes nor on the outer dims
(the instance domain is a product), the range is a Minkowski sum:

    range = { g(o) : o in D_outer }  (+)  { h(i) : i in D_inner }.

The second set is finite and parameter-free. It is usually exactly a box, which counting
its points shows (ISL enumerates it), and then the subtraction only sees affine tile
origins plus a box: 0.1 s for that transpose. Every step is an identity (the product is
checked, the split is checked to add up to the term), so the set returned is always the
relation's range within the tensor (coverage asks about nothing else). A domain that is not
a product because a guard couples the thread with the block (a ragged edge tile) is handled
when the guard only clips the tiles to the tensor; a term that mixes inner and outer dims
inside one division gets ISL's plain range.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass

import islpy as isl

from tilesafe.semantics.access.access import AccessRelation, box_map, point_map

SET = isl.dim_type.set
PARAM = isl.dim_type.param
IN = isl.dim_type.in_
DIV = isl.dim_type.div

# Most points of an in-tile offset set counted to show that it is a box.
COUNT_LIMIT = 1 << 16
# Most boxes of an exact cover of an in-tile offset set that is not one box.
BOX_LIMIT = 64
# Most combinations of pieces of the index terms (min/max make pieces) decomposed.
PIECE_LIMIT = 16


@dataclass(frozen=True)
class Image:
    """The elements of a tensor an access touches over its whole domain. `method` says how
    it was computed: "tiles" (tile origins (+) in-tile offsets) or "range" (ISL's
    projection of the relation)."""

    elements: isl.Set
    method: str


@dataclass(frozen=True)
class _Split:
    """One index term as outer + inner: `outer` reads no inner dim, `inner` reads only
    inner dims (no size)."""

    outer: isl.Aff
    inner: isl.Aff


@dataclass(frozen=True)
class _Product:
    """A domain as the product of its outer and inner parts, each over the whole instance
    space (the other part's dims unconstrained; `inner` free of sizes)."""

    outer: isl.Set
    inner: isl.Set


def image(a: AccessRelation, valid: isl.Set, under: bool = False) -> Image:
    """The elements of the tensor's index box `valid` that `a.relation` (`a.relation_under`
    with `under`) touches -- its range within the tensor, which is all coverage asks about
    -- as a set that later set operations handle well where the tile structure allows."""
    rel = a.relation_under if under else a.relation
    dom = a.domain_under if under else a.domain
    assert rel is not None
    if a.terms and not (a.box and not a.clipped):  # (a buffer slice is never an output)
        bounded = [j for j in _candidates(a, dom) if _bounded_alone(dom, j)]
        tiled = _exact(a, dom, bounded)
        if tiled is None:
            tiled = _clipped(a, dom, valid, bounded)
        if tiled is not None:
            return Image(tiled.intersect(valid).coalesce(), "tiles")
    return Image(rel.range().intersect(valid), "range")


def _exact(a: AccessRelation, dom: isl.Set, bounded: list[int]) -> isl.Set | None:
    """Origins (+) offsets over a domain that is a product of its outer and inner dims,
    the inner ones being those whose range depends on nothing else."""
    inner = [j for j in bounded if _product(dom, [j]) is not None]
    return _origins_plus_offsets(a, dom, inner, bounded) if inner else None


def _clipped(a: AccessRelation, dom: isl.Set, valid: isl.Set,
             bounded: list[int]) -> isl.Set | None:
    """Where the domain is not a product because a guard couples inner and outer dims --
    `if i < N && j < M { dst[i, j] = ... }` in a ragged tile -- the guard may only clip the
    tiles to the tensor. With `hull` the product of the domain's projections (D <= hull)
    and E = hull - D the instances the guards remove, W(hull) = W(D) | W(E), so

        W(D) & valid = W(hull) & valid   when W(E) & valid is empty:

    an emptiness question of a relation (no projection). None when it fails or the tiles do
    not decompose; the caller intersects with `valid`."""
    inner = bounded
    if not inner:
        return None
    hull = _hull(dom, inner)
    whole_domain = hull.outer.intersect(hull.inner)
    tiles = _origins_plus_offsets(a, whole_domain, inner, bounded)
    if tiles is None:
        return None
    assert a.terms is not None
    whole = box_map(a.terms, a.box, a.tensor) if a.clipped else point_map(a.terms, a.tensor)
    removed = whole_domain.subtract(dom)
    if not whole.intersect_domain(removed).intersect_range(valid).is_empty():
        return None
    return tiles


def _candidates(a: AccessRelation, dom: isl.Set) -> list[int]:
    """The instance dims that may be inner: every one but the block coordinates."""
    first = sum(1 for d in a.dims if d.startswith("block_"))
    return list(range(first, dom.dim(SET)))


def _bounded_alone(dom: isl.Set, j: int) -> bool:
    """Dim j ranges over a bounded set for all sizes and all other dims together."""
    return _projection(dom, [j]).is_bounded()


def _origins_plus_offsets(a: AccessRelation, dom: isl.Set, inner: list[int],
                          bounded: list[int]) -> isl.Set | None:
    """The range over `dom` as a union (over the pieces of the index terms) of Minkowski
    sums, or None where a piece does not decompose -- or decomposes uselessly: an origin
    that divides a bounded dim (the thread, when a guard kept it outer) leaves the
    projection that is the point of all this inside the origins."""
    assert a.terms is not None
    pieces = [t.get_pieces() for t in a.terms]
    combos = list(itertools.islice(itertools.product(*pieces), PIECE_LIMIT + 1))
    if len(combos) > PIECE_LIMIT:
        return None
    result = None
    for combo in combos:
        part = dom
        splits = []
        for where, aff in combo:
            part = part.intersect(where)
            split = _split(aff, inner)
            if split is None or _divides(split.outer, bounded):
                return None
            splits.append(split)
        if part.is_empty():
            continue
        piece = _minkowski(part, inner, splits, a.box)
        if piece is None:
            return None
        result = piece if result is None else result.union(piece)
    if result is None:
        return None
    for k in range(result.dim(SET)):
        result = result.set_dim_name(SET, k, f"i{k}")
    return result.set_tuple_name(a.tensor)


def _split(aff: isl.Aff, inner: list[int]) -> _Split | None:
    """aff = outer + inner, term by term: a variable, a size or a division goes to the side
    of the dims it reads; a division reading both sides cannot be split (None)."""
    if not aff.get_denominator_val().is_one():
        return None
    ls = aff.get_domain_local_space()
    n, nparam = aff.dim(IN), aff.dim(PARAM)
    outer = isl.Aff.zero_on_domain(ls).add_constant_val(aff.get_constant_val())
    in_part = isl.Aff.zero_on_domain(ls)
    for j in range(n):
        c = aff.get_coefficient_val(IN, j)
        if not c.is_zero():
            term = isl.Aff.var_on_domain(ls, SET, j).scale_val(c)
            if j in inner:
                in_part = in_part.add(term)
            else:
                outer = outer.add(term)
    for j in range(nparam):
        c = aff.get_coefficient_val(PARAM, j)
        if not c.is_zero():
            outer = outer.add(isl.Aff.var_on_domain(ls, PARAM, j).scale_val(c))
    for m in range(aff.dim(DIV)):
        c = aff.get_coefficient_val(DIV, m)
        if c.is_zero():
            continue
        div = aff.get_div(m).floor()
        reads_inner = any(div.involves_dims(IN, j, 1) for j in inner)
        reads_outer = (nparam > 0 and div.involves_dims(PARAM, 0, nparam)) or any(
            div.involves_dims(IN, j, 1) for j in range(n) if j not in inner)
        if reads_inner and reads_outer:
            return None
        if reads_inner:
            in_part = in_part.add(div.scale_val(c))
        else:
            outer = outer.add(div.scale_val(c))
    total = outer.add(in_part)
    if not aff.sub(total).plain_is_zero() and not aff.ne_set(total).is_empty():
        return None  # never expected: the parts must add up to the term itself
    return _Split(outer, in_part)


def _divides(aff: isl.Aff, dims: list[int]) -> bool:
    """Does a division of `aff` read one of `dims`?"""
    for m in range(aff.dim(DIV)):
        if not aff.get_coefficient_val(DIV, m).is_zero():
            div = aff.get_div(m)
            if any(div.involves_dims(IN, j, 1) for j in dims):
                return True
    return False


def _product(dom: isl.Set, inner: list[int]) -> _Product | None:
    """dom as (its projection on the other dims and the sizes) x (its projection on
    `inner`, for all sizes), or None when dom is not that product: the inner dims' range
    depends on a size or on another dim (a persistent loop's counter, a ragged guard)."""
    hull = _hull(dom, inner)
    if not hull.outer.intersect(hull.inner).is_subset(dom):
        return None  # (the other inclusion holds: both are projections of dom)
    return hull


def _hull(dom: isl.Set, inner: list[int]) -> _Product:
    """The product of dom's projections on the outer dims (with the sizes) and on the
    inner dims (for all sizes): the smallest product that contains dom."""
    outer = [j for j in range(dom.dim(SET)) if j not in inner]
    outer_part = dom
    for j in reversed(inner):
        outer_part = outer_part.project_out(SET, j, 1)
    return _Product(_spread(outer_part, outer, dom),
                    _spread(_projection(dom, inner), inner, dom))


def _projection(dom: isl.Set, dims: list[int]) -> isl.Set:
    """dom's projection on `dims`, for all sizes: { x_dims : some sizes and other dims
    extend it to a point of dom } (no parameters)."""
    part = dom
    for j in reversed([j for j in range(dom.dim(SET)) if j not in dims]):
        part = part.project_out(SET, j, 1)
    return part.project_out(PARAM, 0, part.dim(PARAM))


def _spread(part: isl.Set, positions: list[int], like: isl.Set) -> isl.Set:
    """`part` (dims at `positions` of `like`'s dims, in order) in `like`'s space, the other
    dims unconstrained."""
    out = part
    for j in range(like.dim(SET)):
        if j not in positions:
            out = out.insert_dims(SET, j, 1)
    out = out.align_params(like.get_space())
    for j in range(like.dim(SET)):
        out = out.set_dim_name(SET, j, like.get_dim_name(SET, j))
    name = like.get_tuple_name()
    return out.set_tuple_name(name) if name else out


def _minkowski(part: isl.Set, inner: list[int], splits: list[_Split],
               box: tuple[int, ...]) -> isl.Set | None:
    """{ origin(o) : o in outer part } (+) { offset(i) (+ box) : i in inner part }."""
    prod = _product(part, inner)
    if prod is None:
        return None
    origins = _apply([s.outer for s in splits], prod.outer)
    offsets = _apply([s.inner for s in splits], prod.inner)
    if box:
        extents = isl.Set.universe(offsets.get_space())
        for k, extent in enumerate(box):
            extents = extents.lower_bound_val(SET, k, isl.Val.int_from_si(extents.get_ctx(), 0))
            extents = extents.upper_bound_val(SET, k, isl.Val.int_from_si(extents.get_ctx(),
                                                                          extent - 1))
        offsets = offsets.sum(extents)
    offsets = _as_boxes(offsets, lambda: _offset_points(prod.inner, inner, splits, box))
    lattice = _lattice([s.outer for s in splits], offsets)
    if lattice is None:
        return origins.sum(offsets)
    return _periodic(origins, offsets, lattice)


@dataclass(frozen=True)
class _Lattice:
    """Every origin's coordinate k is = residue[k] (mod period[k]) (period 0: it is
    residue[k]), and every offset's lies in low[k] .. low[k] + period[k] - 1."""

    period: tuple[int, ...]
    residue: tuple[int, ...]
    low: tuple[int, ...]


def _lattice(origins: list[isl.Aff], offsets: isl.Set) -> _Lattice | None:
    """The tile lattice of origin (+) offset, when the offsets fit between two origins: the
    period of coordinate k is the gcd of the coefficients of its origin term (tile origins
    are multiples of the tile size), the residue its constant."""
    if offsets.is_empty() or not offsets.is_bounded():
        return None
    free = offsets.project_out(PARAM, 0, offsets.dim(PARAM))
    period, residue, low = [], [], []
    for k, aff in enumerate(origins):
        if not aff.get_denominator_val().is_one():
            return None
        g = 0
        for kind in (IN, PARAM, DIV):
            for j in range(aff.dim(kind)):
                g = math.gcd(g, abs(aff.get_coefficient_val(kind, j).to_python()))
        lo, hi = free.dim_min_val(k).to_python(), free.dim_max_val(k).to_python()
        if g and hi - lo >= g:
            return None  # offsets of two origins overlap: no unique decomposition
        c = aff.get_constant_val().to_python()
        period.append(g)
        residue.append(c % g if g else c)
        low.append(lo)
    return _Lattice(tuple(period), tuple(residue), tuple(low))


def _periodic(origins: isl.Set, offsets: isl.Set, lattice: _Lattice) -> isl.Set:
    """origins (+) offsets as { x : origin(x) in origins, x - origin(x) in offsets } with
    origin(x)_k = p * floor((x_k - r - lo) / p) + r: the decomposition is unique on the
    lattice, and the set has explicit divisions where the sum has existentials (whose
    complement, in the coverage subtraction, is what ran past ISL's budget)."""
    ls = isl.LocalSpace.from_space(origins.get_space())
    origin_of, offset_of = None, None
    for k, (p, r, lo) in enumerate(zip(lattice.period, lattice.residue, lattice.low,
                                       strict=True)):
        x = isl.Aff.var_on_domain(ls, SET, k)
        if p:
            q = x.add_constant_val(_val(ls, -(r + lo))).scale_down_val(_val(ls, p)).floor()
            o = q.scale_val(_val(ls, p)).add_constant_val(_val(ls, r))
        else:
            o = isl.Aff.zero_on_domain(ls).add_constant_val(_val(ls, r))
        origin_of = _extend(origin_of, o)
        offset_of = _extend(offset_of, x.sub(o))
    assert origin_of is not None and offset_of is not None
    on_lattice = origin_of.intersect_range(origins).domain()
    return on_lattice.intersect(offset_of.intersect_range(offsets).domain())


def _extend(m: isl.Map | None, aff: isl.Aff) -> isl.Map:
    part = isl.Map.from_aff(aff)
    return part if m is None else m.flat_range_product(part)


def _val(ls: isl.LocalSpace, v: int) -> isl.Val:
    return isl.Val.int_from_si(ls.get_ctx(), v)


def _apply(affs: list[isl.Aff], domain: isl.Set) -> isl.Set:
    """{ (aff_0(x), aff_1(x), ..) : x in domain }."""
    m = isl.Map.from_aff(affs[0])
    for aff in affs[1:]:
        m = m.flat_range_product(isl.Map.from_aff(aff))
    return m.intersect_domain(domain).range()


def _offset_points(inner_part: isl.Set, inner: list[int], splits: list[_Split],
                   box: tuple[int, ...]) -> set[tuple[int, ...]] | None:
    """The in-tile offsets { offset(i) (+ box) : i in inner part } as points, computed by
    evaluating the offset terms on the points of the inner part, or None (too many, or a
    term reads something but the inner dims). Why: the offset set itself has the inner
    dims as existentials, and ISL counts or enumerates a wgmma fragment's 8,192 offsets
    that way in ~2.5 s; the inner part is a plain box of threads and register loops."""
    n, nparam = inner_part.dim(SET), inner_part.dim(PARAM)
    others = [j for j in range(n) if j not in inner]
    if box and len(box) != len(splits):
        return None
    for s in splits:
        if (nparam and s.inner.involves_dims(PARAM, 0, nparam)) or any(
                s.inner.involves_dims(IN, j, 1) for j in others):
            return None
    # the inner part constrains neither the other dims nor the sizes: fix them to 0
    at = inner_part
    for j in others:
        at = at.fix_val(SET, j, isl.Val.zero(at.get_ctx()))
    for j in range(nparam):
        at = at.fix_val(PARAM, j, isl.Val.zero(at.get_ctx()))
    if at.is_empty() or not at.is_bounded():
        return None
    lows = [at.dim_min_val(j).to_python() for j in inner]
    highs = [at.dim_max_val(j).to_python() for j in inner]
    room = math.prod(hi - lo + 1 for lo, hi in zip(lows, highs, strict=True))
    if room * math.prod(box) > COUNT_LIMIT:
        return None
    points: set[tuple[int, ...]] = set()

    def add(p: isl.Point) -> None:
        base = tuple(s.inner.eval(p).to_python() for s in splits)
        if not box:
            points.add(base)
            return
        for extra in itertools.product(*(range(e) for e in box)):
            points.add(tuple(b + e for b, e in zip(base, extra, strict=True)))

    at.foreach_point(add)
    return points


def _as_boxes(offsets: isl.Set,
              points: Callable[[], set[tuple[int, ...]] | None] | None = None) -> isl.Set:
    """The offsets as a union of boxes (a set without divisions or existentials, which the
    later subtraction handles cheaply) when they are few enough to enumerate: one box
    when they fill their bounding box (counted), else the boxes of an exact cover (a tile
    walked one sweep short is two boxes); otherwise as they are. `points`: the caller's
    way to list the offsets (_offset_points), asked when the set has existentials, which
    ISL counts slowly."""
    offsets = offsets.coalesce()
    if offsets.is_empty() or not offsets.is_bounded():
        return offsets
    free = offsets.project_out(PARAM, 0, offsets.dim(PARAM))
    known = points() if points is not None and _has_existentials(free) else None
    lows, highs = [], []
    if known:
        for k in range(free.dim(SET)):
            lows.append(min(p[k] for p in known))
            highs.append(max(p[k] for p in known))
    else:
        for k in range(free.dim(SET)):
            lows.append(free.dim_min_val(k).to_python())
            highs.append(free.dim_max_val(k).to_python())
    size = 1
    for lo, hi in zip(lows, highs, strict=True):
        size *= hi - lo + 1
    if size > COUNT_LIMIT:
        return offsets
    count = len(known) if known else free.count_val().to_python()
    if count == size:
        boxes = [tuple(zip(lows, highs, strict=True))]
    else:
        points: list[tuple[int, ...]] = list(known or ())
        if not known:
            free.foreach_point(lambda p: points.append(tuple(
                p.get_coordinate_val(SET, k).to_python() for k in range(free.dim(SET)))))
        boxes = _cover(sorted(points))
        if len(boxes) > BOX_LIMIT:
            return offsets
    out = isl.Set.empty(free.get_space())
    for box in boxes:
        part = isl.Set.universe(free.get_space())
        for k, (lo, hi) in enumerate(box):
            part = part.lower_bound_val(SET, k, isl.Val.int_from_si(part.get_ctx(), lo))
            part = part.upper_bound_val(SET, k, isl.Val.int_from_si(part.get_ctx(), hi))
        out = out.union(part)
    return out.align_params(offsets.get_space())


def _has_existentials(s: isl.Set) -> bool:
    pieces: list[isl.BasicSet] = []
    s.foreach_basic_set(pieces.append)
    return any(b.dim(DIV) for b in pieces)


Box = tuple[tuple[int, int], ...]  # inclusive bounds per dim


def _cover(points: list[tuple[int, ...]]) -> list[Box]:
    """Disjoint boxes whose union is exactly `points` (sorted, distinct): runs along the
    last dim, merged across consecutive values of each earlier dim where the rest agrees."""
    if not points[0]:
        return [()]
    rest: dict[int, list[tuple[int, ...]]] = {}
    for p in points:
        rest.setdefault(p[0], []).append(p[1:])
    out: list[Box] = []
    run: tuple[int, int, list[Box]] | None = None  # (first value, last value, cover)
    for v in sorted(rest):
        cover = _cover(rest[v])
        if run is not None and run[1] == v - 1 and run[2] == cover:
            run = (run[0], v, cover)
            continue
        if run is not None:
            out += [((run[0], run[1]),) + b for b in run[2]]
        run = (v, v, cover)
    assert run is not None
    return out + [((run[0], run[1]),) + b for b in run[2]]
