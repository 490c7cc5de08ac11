"""Facade: turn the frontend's layout terms into concrete layouts over a buffer shape.

The frontend hands a `LayoutTerm(head, args)`; `realize(term, shape, elem_bytes)` returns a
`RealLayout` (element offset of every logical coordinate of a buffer of that shape, its
cosize, and its ISL map { [c0, ..., c_{n-1}] -> [off] }). Argument conventions:

  row_major()                  last coordinate fastest (strides suffix products)
  col_major()                  first coordinate fastest
  cute(shape, stride)          a CuTe literal `(64,64):(64,1)`; a single string argument in
                               CuTe syntax is also accepted (incl. `Sw<B,M,S> o ...`). When
                               its top-level rank equals the buffer rank, coordinate i feeds
                               mode i (a nested mode splits it colexicographically) and each
                               mode's size must equal extent i; otherwise only the total size
                               must match and the coordinate is first linearised row-major.
  composed(B, M, S, off, L)    CuTe's ComposedLayout `Sw<B,M,S> o off o L` for a CuTe literal
                               L (the DSL's `Sw<3,3,3> o (64,64):(64,1)` is this term with
                               off = 0): offset Swizzle<B,M,S>(off + L(c)), L realised as in
                               cute(...)
  swizzle(B, M, S, inner)      CuTe Swizzle<B,M,S> applied to inner's element offsets
  swizzle32B(inner)            TMA swizzle modes. They act on BYTE addresses as
  swizzle64B(inner)            Swizzle<b,4,3> with b = 1, 2, 3 (16-byte chunks; the XOR
  swizzle128B(inner)           source is address bits 7.., i.e. the 128-byte line index;
                               pattern period 256/512/1024 bytes). On element offsets that is
                               Swizzle<b, 4 - log2(elem_bytes), 3>. Aliases: swizzle32/64/128.
  padded(inner, pad)           inner realised over the shape with the last extent widened by
                               `pad` (for row_major: row stride = last extent + pad); only the
                               unpadded coordinates are in the domain
  linear(bases_0, ..., bases_{n-1})
                               F2 layout: bases_i lists the offset contributed by each bit of
                               coordinate i (so extent i must be 2**len(bases_i)); offsets of
                               the set bits are XOR-ed. One tuple-of-tuples argument also works.
  tiled(tile_shape, inner)     tiles of `tile_shape` (each dividing the extent) in row-major
                               tile order, each occupying inner.cosize consecutive elements;
                               inside a tile, `inner` realised over tile_shape
  lego(factors, order)         LEGO GroupBy/OrderBy: factors[i] splits dim i (outermost
                               first); order lists every (dim, level) pair, outermost first

A RealLayout can be handed straight to the decision procedures of layout_isl
(`injective(real)`, `covers(real, codomain=real.cosize)`, ...): besides `to_isl()` it exposes
its structure (`isl_swizzle_split()`, `f2_layout()`, `isl_range()`, `isl_cute_image()`),
which those procedures use for exact shortcuts; passing `real.to_isl()` instead always runs
plain ISL.

Unknown heads or bad arguments raise LayoutError (the frontend turns it into a TS1xx
diagnostic). Sources for the swizzle modes: CUTLASS include/cute/swizzle.hpp,
include/cute/atom/mma_traits_sm90_gmma.hpp (Layout_K_SW32/64/128_Atom_Bits use
Swizzle<1|2|3,4,3>) and include/cute/atom/copy_traits_sm90_tma_swizzle.hpp (which maps
Swizzle<B,4,3> to the TMA swizzle modes); see docs/layouts.md.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import islpy as isl
import numpy as np

from tilesafe.frontend.ir import LayoutTerm
from tilesafe.semantics.layout import layout_isl as LI
from tilesafe.semantics.layout.cute import ComposedLayout, Layout, Swizzle, parse_cute
from tilesafe.semantics.layout.inttuple import (
    IntTuple,
    crd2idx,
    format_int_tuple,
    is_int,
    product,
    suffix_product,
)
from tilesafe.semantics.layout.lego import GroupBy, LegoLayout, OrderBy
from tilesafe.semantics.layout.linear_layout import LinearLayout


class LayoutError(ValueError):
    """A layout term that cannot be realised (unknown head, wrong arguments, size mismatch)."""


# --- implementations (one per layout kind) ----------------------------------------------


class _Impl(Protocol):
    shape: tuple[int, ...]

    def offset_of(self, coord: tuple) -> Any: ...

    def cosize(self) -> int: ...

    def to_isl(self) -> isl.Map: ...

    def describe(self) -> str: ...


ENUMERATE_COSIZE = 1 << 22  # elements; see RealLayout.cosize


def _box_coords(shape: tuple[int, ...]) -> Any:
    import itertools

    return itertools.product(*(range(e) for e in shape))


def _cosize_by_isl(m: isl.Map) -> int:
    top = m.range().lexmax()
    if top.is_empty():
        return 0
    return top.sample_point().get_coordinate_val(isl.dim_type.set, 0).to_python() + 1


@dataclass(frozen=True)
class _CuteImpl:
    shape: tuple[int, ...]
    layout: Layout | ComposedLayout
    mode_wise: bool

    def offset_of(self, coord: tuple) -> Any:
        if self.mode_wise:
            crd: Any = coord if len(coord) > 1 else coord[0]
        else:
            crd = sum(c * s for c, s in zip(coord, suffix_product(self.shape), strict=False))
        lay = self.layout
        if isinstance(lay, ComposedLayout):
            return lay.swizzle(lay.offset + crd2idx(crd, lay.layout.shape, lay.layout.stride))
        return crd2idx(crd, lay.shape, lay.stride)

    def cosize(self) -> int:
        return self.layout.cosize()

    def to_isl(self) -> isl.Map:
        if self.mode_wise:
            return LI.to_isl(self.layout)
        return LI.linearize_map(self.shape).apply_range(LI.to_isl(self.layout, linear=True))

    def describe(self) -> str:
        how = "mode-wise" if self.mode_wise else "row-major linear index"
        return f"CuTe {self.layout} ({how})"


@dataclass(frozen=True)
class _SwizzleImpl:
    shape: tuple[int, ...]
    inner: _Impl
    swizzle: Swizzle
    note: str = ""

    def offset_of(self, coord: tuple) -> Any:
        return self.swizzle(self.inner.offset_of(coord))

    def cosize(self) -> int:
        inner = self.inner.cosize()
        if isinstance(self.inner, _CuteImpl) and inner == product(self.shape) and (
            inner % self.swizzle.period == 0
        ):
            return inner  # a compact image made of whole periods maps onto itself
        return _cosize_by_isl(self.to_isl())

    def to_isl(self) -> isl.Map:
        return self.inner.to_isl().apply_range(LI.swizzle_map(self.swizzle))

    def describe(self) -> str:
        extra = f" [{self.note}]" if self.note else ""
        return f"{self.swizzle}{extra} o {self.inner.describe()}"


@dataclass(frozen=True)
class _RestrictImpl:
    """`inner` realised on a larger shape, restricted to the coordinates of `shape`."""

    shape: tuple[int, ...]
    inner: _Impl
    note: str

    def offset_of(self, coord: tuple) -> Any:
        return self.inner.offset_of(coord)

    def cosize(self) -> int:
        return _cosize_by_isl(self.to_isl())

    def to_isl(self) -> isl.Map:
        return self.inner.to_isl().intersect_domain(LI.box_set(list(self.shape)))

    def describe(self) -> str:
        return f"{self.note} of {self.inner.describe()}"


@dataclass(frozen=True)
class _LinearImpl:
    shape: tuple[int, ...]
    ll: LinearLayout

    def offset_of(self, coord: tuple) -> Any:
        return self.ll.combine(coord)[0]

    def cosize(self) -> int:
        return self.ll.max_output() + 1

    def to_isl(self) -> isl.Map:
        return LI.linear_layout_map(self.ll)

    def describe(self) -> str:
        return f"F2 {self.ll}"


@dataclass(frozen=True)
class _TiledImpl:
    shape: tuple[int, ...]
    tile: tuple[int, ...]
    inner: _Impl

    @property
    def grid(self) -> tuple[int, ...]:
        return tuple(e // t for e, t in zip(self.shape, self.tile, strict=False))

    def offset_of(self, coord: tuple) -> Any:
        q = tuple(c // t for c, t in zip(coord, self.tile, strict=False))
        r = tuple(c % t for c, t in zip(coord, self.tile, strict=False))
        lin = sum(a * s for a, s in zip(q, suffix_product(self.grid), strict=False))
        return lin * self.inner.cosize() + self.inner.offset_of(r)

    def cosize(self) -> int:
        return product(self.grid) * self.inner.cosize()

    def to_isl(self) -> isl.Map:
        n = len(self.shape)
        cs = LI.coord_names(n)
        qs = [f"q{i}" for i in range(n)]
        rs = [f"r{i}" for i in range(n)]
        split = LI.read_map(
            f"{{ [{', '.join(cs)}] -> [{', '.join(qs + rs)}] : "
            + " and ".join(
                f"{c} = {t}*{q} + {r} and 0 <= {r} < {t} and 0 <= {q} < {g}"
                for c, q, r, t, g in zip(cs, qs, rs, self.tile, self.grid, strict=False)
            )
            + " }"
        )
        grid_id = LI.read_map(f"{{ [{', '.join(qs)}] -> [{', '.join(qs)}] }}")
        both = grid_id.flat_product(self.inner.to_isl())  # [q.., r..] -> [q.., inner(r)]
        cos = self.inner.cosize()
        strides = suffix_product(self.grid)
        lin = " + ".join(f"{s * cos}*{q}" for q, s in zip(qs, strides, strict=True))
        combine = LI.read_map(f"{{ [{', '.join(qs)}, w] -> [o] : o = {lin} + w }}")
        return split.apply_range(both).apply_range(combine)

    def describe(self) -> str:
        return (f"tiles {format_int_tuple(self.tile)} in a row-major grid "
                f"{format_int_tuple(self.grid)}, each tile: {self.inner.describe()}")


@dataclass(frozen=True)
class _LegoImpl:
    shape: tuple[int, ...]
    lego: LegoLayout

    def offset_of(self, coord: tuple) -> Any:
        return self.lego.offset_of(coord)

    def cosize(self) -> int:
        return self.lego.cosize()

    def to_isl(self) -> isl.Map:
        return LI.lego_map(self.lego)

    def describe(self) -> str:
        return f"LEGO {self.lego}"


# --- the public object ------------------------------------------------------------------


@dataclass(frozen=True)
class RealLayout:
    """A layout term realised over a concrete buffer shape and element size."""

    term: LayoutTerm
    shape: tuple[int, ...]
    elem_bytes: int
    impl: _Impl = field(repr=False, compare=False)

    @property
    def size(self) -> int:
        return product(self.shape)

    @functools.cached_property
    def cosize(self) -> int:
        """One past the largest element offset. A buffer of at most ENUMERATE_COSIZE
        elements (every shared-memory buffer: 228 KiB holds at most 2^18 bytes) is
        enumerated with numpy through the one offset function; past that, the
        implementation's own argument (ISL's lexmax), whose cost is not tied to the size but
        can be steep for a swizzle over a non-power-of-two extent (a 32 x 33 buffer under
        swizzle(5, 0, 5): 27 s through ISL, 1 ms enumerated)."""
        if self.size <= ENUMERATE_COSIZE:
            return max(flat_offsets(self), default=-1) + 1
        return self.impl.cosize()

    def offset(self, coord: Sequence[int]) -> int:
        """Element offset of a logical coordinate (LayoutError if out of the shape)."""
        c = tuple(int(x) for x in coord)
        if len(c) != len(self.shape) or any(
            not 0 <= x < e for x, e in zip(c, self.shape, strict=True)
        ):
            raise LayoutError(f"coordinate {c} outside shape {self.shape}")
        return int(self.impl.offset_of(c))

    def offset_of(self, coord: Sequence[Any]) -> Any:
        """The offset function itself, without range checks: one definition, written with
        operators only (+, *, //, %, ^, &, >>, <<), evaluated on ints, on numpy arrays of
        coordinates (all offsets at once), or on symbolic terms (code generation). The
        coordinates must lie in the shape."""
        return self.impl.offset_of(tuple(coord))

    def byte_offset(self, coord: Sequence[int]) -> int:
        return self.offset(coord) * self.elem_bytes

    def coords(self) -> Any:
        """All coordinates, row-major (for enumeration on small shapes)."""
        return _box_coords(self.shape)

    def to_isl(self) -> isl.Map:
        """{ [c0, ..., c_{n-1}] -> [off] } on 0 <= c_i < shape_i."""
        return self.impl.to_isl().intersect_domain(LI.box_set(list(self.shape)))

    def isl_range(self) -> isl.Set:
        """The offsets produced (a swizzle is applied to its inner range, which is fast)."""
        split = self.isl_swizzle_split()
        if split is None:
            return self.to_isl().range()
        inner, sw, _ = split
        return inner.range().apply(LI.swizzle_map(sw))

    def f2_layout(self) -> LinearLayout | None:
        """The F2 layout when this is `linear(...)` (lets decisions use GF(2) algebra)."""
        return self.impl.ll if isinstance(self.impl, _LinearImpl) else None

    def isl_swizzle_split(self) -> tuple[isl.Map, Swizzle, int] | None:
        """(inner map, swizzle, offset) when this layout is swizzle(offset + inner) (see
        injective and covers): a swizzle of another layout, or a CuTe `Sw<B,M,S> o ...`."""
        box = LI.box_set(list(self.shape))
        if isinstance(self.impl, _SwizzleImpl):
            return self.impl.inner.to_isl().intersect_domain(box), self.impl.swizzle, 0
        if isinstance(self.impl, _CuteImpl) and isinstance(self.impl.layout, ComposedLayout):
            cl = self.impl.layout
            if self.impl.mode_wise:
                inner = LI.to_isl(cl.layout)
            else:
                inner = LI.linearize_map(self.shape).apply_range(
                    LI.to_isl(cl.layout, linear=True))
            return inner.intersect_domain(box), cl.swizzle, cl.offset
        return None

    def isl_cute_image(self) -> tuple[Layout, Swizzle | None, int] | None:
        """(L, swizzle, offset) when this layout's image is swizzle(offset + image(L)) for a
        CuTe layout L (see layout_isl.range_set): a CuTe term realised mode-wise or on the
        row-major index, optionally under one swizzle. Its size equals the buffer's, so every
        index of L is reached; ISL then projects L's leaf form instead of the nested map."""
        impl, sw = self.impl, None
        if isinstance(impl, _SwizzleImpl):
            impl, sw = impl.inner, impl.swizzle
        if not isinstance(impl, _CuteImpl):
            return None
        if isinstance(impl.layout, ComposedLayout):
            if sw is not None:
                return None
            return impl.layout.layout, impl.layout.swizzle, impl.layout.offset
        return impl.layout, sw, 0

    def describe(self) -> str:
        dims = ",".join(map(str, self.shape))
        return (f"{self.term} over [{dims}] x {self.elem_bytes} B: {self.impl.describe()}; "
                f"cosize {self.cosize}")


# --- realize ----------------------------------------------------------------------------

_TMA_SWIZZLE = {"swizzle32B": 1, "swizzle64B": 2, "swizzle128B": 3,
                "swizzle32": 1, "swizzle64": 2, "swizzle128": 3}

HEADS = ("row_major", "col_major", "cute", "composed", "swizzle", *sorted(_TMA_SWIZZLE),
         "padded", "linear", "tiled", "lego")


def _want_int(x: Any, what: str) -> int:
    if not is_int(x):
        raise LayoutError(f"{what} must be an integer, got {x!r}")
    return int(x)


def _want_term(x: Any, what: str) -> LayoutTerm:
    if not isinstance(x, LayoutTerm):
        raise LayoutError(f"{what} must be a layout, got {x!r}")
    return x


def _want_ints(x: Any, what: str, n: int | None = None) -> tuple[int, ...]:
    if is_int(x):
        x = (x,)
    if not isinstance(x, tuple) or not all(is_int(v) for v in x):
        raise LayoutError(f"{what} must be a tuple of integers, got {x!r}")
    if n is not None and len(x) != n:
        raise LayoutError(f"{what} must have {n} entries, got {len(x)}")
    return tuple(int(v) for v in x)


def _arity(term: LayoutTerm, n: int) -> None:
    if len(term.args) != n:
        raise LayoutError(f"{term.head} takes {n} argument(s), got {len(term.args)}")


def _cute_impl(shape: tuple[int, ...], lay: Layout | ComposedLayout) -> _CuteImpl:
    if lay.size() != product(shape):
        raise LayoutError(
            f"CuTe layout {lay} has size {lay.size()}, the buffer {list(shape)} has "
            f"{product(shape)} elements"
        )
    if lay.rank() == len(shape):
        sizes = tuple(m.size() for m in (lay.layout if isinstance(lay, ComposedLayout)
                                         else lay).modes())
        if sizes != shape:
            raise LayoutError(
                f"CuTe layout {lay} has mode sizes {list(sizes)}, buffer shape is {list(shape)}"
            )
        return _CuteImpl(shape, lay, True)
    return _CuteImpl(shape, lay, False)


def _realize(term: LayoutTerm, shape: tuple[int, ...], eb: int) -> _Impl:
    h, a = term.head, term.args
    if h == "row_major":
        _arity(term, 0)
        return _CuteImpl(shape, Layout(shape, suffix_product(shape)), True)
    if h == "col_major":
        _arity(term, 0)
        return _CuteImpl(shape, Layout(shape), True)
    if h == "cute":
        return _cute_impl(shape, _cute_literal(term))
    if h == "composed":
        _arity(term, 5)
        sw = Swizzle(*_swizzle_params(a[:3], "Sw<{},{},{}>"))
        off = _want_int(a[3], "swizzle offset")
        inner = _want_term(a[4], "composed inner")
        lay = _cute_literal(inner) if inner.head == "cute" else None
        if not isinstance(lay, Layout):
            raise LayoutError(f"{sw} o ... composes a swizzle with a CuTe literal "
                              f"SHAPE:STRIDE, not {inner}")
        return _cute_impl(shape, ComposedLayout(sw, lay, off))
    if h == "swizzle":
        _arity(term, 4)
        sw = Swizzle(*_swizzle_params(a[:3]))
        return _swizzled(shape, _realize(_want_term(a[3], "swizzle inner"), shape, eb), sw)
    if h in _TMA_SWIZZLE:
        _arity(term, 1)
        if eb < 1 or eb > 16 or eb & (eb - 1):
            raise LayoutError(f"{h} needs an element size of 1, 2, 4, 8 or 16 bytes, not {eb}")
        b = _TMA_SWIZZLE[h]
        sw = Swizzle(b, 4 - (eb.bit_length() - 1), 3)
        note = f"TMA {16 << b}B swizzle = Sw<{b},4,3> on bytes"
        return _swizzled(shape, _realize(_want_term(a[0], f"{h} inner"), shape, eb), sw, note)
    if h == "padded":
        _arity(term, 2)
        pad = _want_int(a[1], "padding")
        if pad < 0:
            raise LayoutError(f"padding must be >= 0, got {pad}")
        wide = shape[:-1] + (shape[-1] + pad,)
        inner = _realize(_want_term(a[0], "padded inner"), wide, eb)
        return _RestrictImpl(shape, inner, f"padded by {pad} (last extent {wide[-1]})")
    if h == "linear":
        dims = a
        if len(a) == 1 and isinstance(a[0], tuple) and len(a[0]) == len(shape) and all(
            isinstance(x, tuple) for x in a[0]
        ):
            dims = a[0]  # one tuple-of-tuples argument
        if len(dims) != len(shape):
            raise LayoutError(f"linear needs one basis tuple per dimension ({len(shape)}), "
                              f"got {len(dims)}")
        bases: dict[str, list[tuple[int]]] = {}
        for i, (bs, e) in enumerate(zip(dims, shape, strict=False)):
            vals = _want_ints(bs, f"linear bases of dim {i}") if bs != () else ()
            if 1 << len(vals) != e:
                raise LayoutError(f"linear: dim {i} has extent {e}, but {len(vals)} bases "
                                  f"describe 2**{len(vals)} = {1 << len(vals)} values")
            if any(v < 0 for v in vals):
                raise LayoutError("linear: basis offsets must be >= 0")
            bases[f"c{i}"] = [(v,) for v in vals]
        return _LinearImpl(shape, LinearLayout.from_bases(bases, ["off"]))
    if h == "tiled":
        _arity(term, 2)
        tile = _want_ints(a[0], "tile shape", len(shape))
        if any(t < 1 or e % t for e, t in zip(shape, tile, strict=False)):
            raise LayoutError(f"tile {list(tile)} does not divide shape {list(shape)}")
        return _TiledImpl(shape, tile, _realize(_want_term(a[1], "tiled inner"), tile, eb))
    if h == "lego":
        _arity(term, 2)
        factors = tuple(_want_ints(f, f"lego factors of dim {i}")
                        for i, f in enumerate(_tuple(a[0], "lego factors")))
        order = tuple(_want_ints(p, "lego order entry", 2) for p in _tuple(a[1], "lego order"))
        return _LegoImpl(shape, LegoLayout(shape, GroupBy(factors), OrderBy(order)))
    raise LayoutError(f"unknown layout {h!r}; known: {', '.join(HEADS)}")


# Shared memory holds at most 227 KiB, so an element offset has fewer than 18 bits; a
# swizzle reading or writing a bit above that is meaningless, and deciding one with
# parameters like 2^31 made ISL work on 2^(2^31)-sized constants (seconds to forever).
MAX_SWIZZLE_BIT = 18


def _swizzle_params(args: tuple, spelled: str = "swizzle({}, {}, {})") -> tuple[int, int, int]:
    """B, M, S of `swizzle(B, M, S, L)` (or `Sw<B,M,S> o ...`), range-checked before
    anything is built."""
    b, m, s = (_want_int(x, "swizzle parameter") for x in args)
    name = spelled.format(b, m, s)
    if b < 0 or m < 0:
        raise LayoutError(f"{name}: B and M must be >= 0")
    if m + abs(s) + b > MAX_SWIZZLE_BIT:
        raise LayoutError(f"{name} reads or writes offset bit "
                          f"{m + abs(s) + b - 1}, but shared-memory element offsets have "
                          f"{MAX_SWIZZLE_BIT} bits (M + |S| + B must be at most "
                          f"{MAX_SWIZZLE_BIT})")
    return b, m, s


def _cute_literal(term: LayoutTerm) -> Layout | ComposedLayout:
    """The layout of a `cute` term: (shape, stride), or one string in CuTe syntax."""
    a = term.args
    if len(a) == 1 and isinstance(a[0], str):
        return parse_cute(a[0])
    _arity(term, 2)
    return Layout(_nested(a[0], "cute shape"), _nested(a[1], "cute stride"))


def _swizzled(shape: tuple[int, ...], inner: _Impl, sw: Swizzle, note: str = "") -> _Impl:
    """A swizzle is GF(2)-linear on offsets (sw(a ^ b) = sw(a) ^ sw(b)), so a swizzled F2
    layout is again an F2 layout: its bases are the swizzled bases. Keeping it F2 keeps its
    decisions on GF(2) algebra instead of ISL projections of XOR bits."""
    if isinstance(inner, _LinearImpl):
        bases = {n: [(sw(b[0]),) for b in bs] for n, bs in inner.ll.in_dims}
        return _LinearImpl(shape, LinearLayout.from_bases(bases, ["off"]))
    return _SwizzleImpl(shape, inner, sw, note)


def _tuple(x: Any, what: str) -> tuple[Any, ...]:
    if not isinstance(x, tuple):
        raise LayoutError(f"{what} must be a tuple, got {x!r}")
    return x


def _nested(x: Any, what: str) -> IntTuple:
    if is_int(x):
        return int(x)
    if isinstance(x, tuple) and x:
        return tuple(_nested(v, what) for v in x)
    raise LayoutError(f"{what} must be an int or a nested tuple of ints, got {x!r}")


def realize(term: LayoutTerm, shape: Sequence[int], elem_bytes: int) -> RealLayout:
    """Realise `term` over a buffer of `shape` with elements of `elem_bytes` bytes."""
    shp = tuple(shape)
    if not shp or not all(is_int(e) and e >= 1 for e in shp):
        raise LayoutError(f"buffer shape must be positive integers, got {list(shape)}")
    if not is_int(elem_bytes) or elem_bytes < 1:
        raise LayoutError(f"element size must be a positive integer, got {elem_bytes!r}")
    if not isinstance(term, LayoutTerm):
        raise LayoutError(f"not a layout term: {term!r}")
    try:
        impl = _realize(term, shp, int(elem_bytes))
    except LayoutError:
        raise
    except (ValueError, TypeError) as exc:
        raise LayoutError(f"{term}: {exc}") from exc
    return RealLayout(term, shp, int(elem_bytes), impl)


def flat_offsets(layout: RealLayout) -> list[int]:
    """Offsets of all coordinates in row-major coordinate order, evaluated on numpy arrays
    of every coordinate at once (the same offset function as everywhere else)."""
    grid = np.indices(layout.shape, dtype=np.int64).reshape(len(layout.shape), -1)
    offs = np.broadcast_to(np.asarray(layout.offset_of(tuple(grid)), dtype=np.int64),
                           (grid.shape[1],))
    return [int(o) for o in offs]
