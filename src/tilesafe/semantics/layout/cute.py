"""CuTe layouts: (shape : stride) functions from coordinates to offsets, and their algebra.

A layout maps a coordinate (an int linear index, or a nested tuple congruent with -- or
coarser than -- the shape) to an integer offset. The operations (coalesce, composition,
complement, logical/zipped/tiled divide and product, slicing, inverses) follow the CuTe
layout algebra as documented in CUTLASS (include/cute/layout.hpp, python/pycute) and the
paper "Categorical Foundations for CuTe Layouts" (arXiv 2601.05972). The code is our own;
where CuTe leaves a case undefined or computes something that is not A(B(c)) (e.g. a
composition whose strides do not divide, or a mode-by-mode composition whose B modes
overlap) we raise ValueError rather than return something silently wrong.

`Swizzle(B, M, S)` is CuTe's XOR swizzle (include/cute/swizzle.hpp): the B bits starting at
bit M + max(0, S) are XOR-ed into the B bits starting at bit M - min(0, S); a positive S
moves the source bits down. `ComposedLayout(sw, L, offset)` is c -> sw(offset + L(c)).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from tilesafe.semantics.layout.inttuple import (
    IntTuple,
    ceil_div,
    check_int_tuple,
    congruent,
    crd2idx,
    flatten,
    format_int_tuple,
    is_int,
    is_tuple,
    parse_int_tuple,
    prefix_product,
    product,
    weakly_congruent,
)
from tilesafe.semantics.layout.inttuple import depth as _depth
from tilesafe.semantics.layout.inttuple import rank as _rank


def _leaves(layout: Layout) -> list[tuple[int, int]]:
    """(extent, stride) of every leaf mode."""
    return list(zip(flatten(layout.shape), flatten(layout.stride), strict=True))


@dataclass(frozen=True)
class Layout:
    """A CuTe layout. `stride=None` means the compact colexicographic (column-major) strides."""

    shape: IntTuple
    stride: IntTuple = field(default=None)  # type: ignore[assignment]

    def __post_init__(self) -> None:
        shape = check_int_tuple(self.shape)
        stride = prefix_product(shape) if self.stride is None else check_int_tuple(self.stride)
        if not congruent(shape, stride):
            raise ValueError(
                f"shape {format_int_tuple(shape)} and stride {format_int_tuple(stride)} "
                "are not congruent"
            )
        if any(s < 1 for s in flatten(shape)):
            raise ValueError(f"shape extents must be >= 1: {format_int_tuple(shape)}")
        object.__setattr__(self, "shape", shape)
        object.__setattr__(self, "stride", stride)

    # --- basic queries -------------------------------------------------------------------
    def size(self) -> int:
        """Number of coordinates in the domain."""
        return product(self.shape)

    def cosize(self) -> int:
        """One past the largest offset (for non-negative strides this is CuTe's L(size-1)+1)."""
        hi = sum((s - 1) * d for s, d in _leaves(self) if d > 0)
        return hi + 1

    def rank(self) -> int:
        return _rank(self.shape)

    def depth(self) -> int:
        return _depth(self.shape)

    def __len__(self) -> int:
        return self.rank()

    def __getitem__(self, i: int) -> Layout:
        """The i-th top-level mode as a layout."""
        if is_int(self.shape):
            if i != 0:
                raise IndexError(i)
            return self
        return Layout(self.shape[i], self.stride[i])  # type: ignore[index]

    def modes(self) -> tuple[Layout, ...]:
        return tuple(self[i] for i in range(self.rank()))

    def flat(self) -> Layout:
        """Same function, one mode per leaf."""
        fs, fd = flatten(self.shape), flatten(self.stride)
        if len(fs) == 1:
            return Layout(fs[0], fd[0])
        return Layout(fs, fd)

    def __call__(self, coord: IntTuple) -> int:
        """Offset of a linear index or a (possibly coarser) nested coordinate."""
        coord = check_int_tuple(coord)
        if not weakly_congruent(coord, self.shape):
            raise ValueError(
                f"coordinate {format_int_tuple(coord)} does not fit shape "
                f"{format_int_tuple(self.shape)}"
            )
        return crd2idx(coord, self.shape, self.stride)

    def is_injective(self) -> bool:
        """Brute force: distinct offsets for all coordinates (use for small layouts/tests)."""
        seen = {self(i) for i in range(self.size())}
        return len(seen) == self.size()

    def __str__(self) -> str:
        return f"{format_int_tuple(self.shape)}:{format_int_tuple(self.stride)}"


def make_layout(*layouts: Layout | Iterable[Layout]) -> Layout:
    """Concatenate layouts as the modes of a new layout: make_layout(A, B) = (A, B)."""
    items: list[Layout]
    if len(layouts) == 1 and not isinstance(layouts[0], Layout):
        items = list(layouts[0])  # type: ignore[arg-type]
    else:
        items = list(layouts)  # type: ignore[arg-type]
    return Layout(tuple(x.shape for x in items), tuple(x.stride for x in items))


def _from_lists(shapes: list[int], strides: list[int]) -> Layout:
    if not shapes:
        return Layout(1, 0)
    if len(shapes) == 1:
        return Layout(shapes[0], strides[0])
    return Layout(tuple(shapes), tuple(strides))


def coalesce(layout: Layout) -> Layout:
    """Fewest flat modes computing the same function on the linear index domain."""
    shapes: list[int] = []
    strides: list[int] = []
    for s, d in _leaves(layout):
        if s == 1:
            continue
        if shapes and shapes[-1] * strides[-1] == d:
            shapes[-1] *= s
        else:
            shapes.append(s)
            strides.append(d)
    return _from_lists(shapes, strides)


def _coalesce_keep_tail(layout: Layout) -> tuple[list[int], list[int]]:
    """Coalesced leaves, except that the last leaf's stride survives even if its extent is
    1: it is the stride that indices past size(layout) extend along."""
    leaves = _leaves(layout)
    front = coalesce(_from_lists([s for s, _ in leaves[:-1]], [d for _, d in leaves[:-1]]))
    shapes = [s for s in flatten(front.shape)] if len(leaves) > 1 else []
    strides = [d for d in flatten(front.stride)] if len(leaves) > 1 else []
    if shapes == [1]:
        shapes, strides = [], []
    s_last, d_last = leaves[-1]
    if shapes and shapes[-1] * strides[-1] == d_last:
        shapes[-1] *= s_last
    else:
        shapes.append(s_last)
        strides.append(d_last)
    return shapes, strides


def filter_zeros(layout: Layout) -> Layout:
    """Drop stride-0 and size-1 modes (the 'image-relevant' part), then coalesce."""
    pairs = [
        (s, d) for s, d in _leaves(layout) if s != 1 and d != 0
    ]
    return coalesce(_from_lists([s for s, _ in pairs], [d for _, d in pairs]))




def _as_layout(b: Layout | int) -> Layout:
    return b if isinstance(b, Layout) else Layout(b, 1)


CARRY_CHECK_MAX = 1 << 16
"""`_carry_free` enumerates each top-level mode of B; beyond this size it gives up (False)."""


def _carry_free(a: Layout, b: Layout) -> bool:
    """Adding one offset of each top-level mode of B never carries between A's modes.

    Write an offset x in A's mixed radix (coalesced extents s_0, s_1, ...; the last mode
    takes the rest): A(x) = sum_j d_j digit_j(x). If, at every digit j but the last, the
    largest digits of the modes' offsets sum to at most s_j - 1, the digits of a sum are the
    sums of the digits, so A(sum_k B_k(c_k)) = sum_k A(B_k(c_k)): composing mode by mode is
    exact. A sufficient condition, decided by enumerating each mode (not their product)."""
    radices = _coalesce_keep_tail(a)[0][:-1]
    if not radices:
        return True
    total = [0] * len(radices)
    for m in b.modes():
        if m.size() > CARRY_CHECK_MAX:
            return False
        top = [0] * len(radices)
        for i in range(m.size()):
            x = m(i)
            if x < 0:
                return False
            for j, r in enumerate(radices):
                x, digit = divmod(x, r)
                top[j] = max(top[j], digit)
        total = [t + u for t, u in zip(total, top, strict=True)]
    return all(t < r for t, r in zip(total, radices, strict=True))


def _compose_on_linear_image(a: Layout, b: Layout) -> Layout | None:
    """A o B when A is linear on B's offsets, else None.

    B's offsets are multiples of g (the gcd of its live strides) up to `top`; if
    A(g*y) == e*y for every y <= top/g (A o (top/g + 1):g coalesces to one mode e), then A
    is additive there and A(B(c)) is B with every stride d replaced by (d/g)*e -- which is
    also what composing mode by mode gives. Covers a linear A (any B, even overlapping
    modes) and B whose strides skip A's non-linear modes (`(2,5):(8,3) o (3,5):(12,6)`)."""
    live = [(s, d) for s, d in _leaves(b) if s != 1 and d != 0]
    if any(d < 0 for _, d in live):
        return None
    g, e = 1, 0
    if live:
        g = math.gcd(*(d for _, d in live))
        top = sum((s - 1) * d for s, d in live)
        try:
            line = coalesce(_compose(a, Layout(top // g + 1, g), strict=False))
        except ValueError:
            return None
        if not is_int(line.shape):
            return None
        e = line.stride  # type: ignore[assignment]

    def scale(shape: IntTuple, stride: IntTuple) -> tuple[IntTuple, IntTuple]:
        if is_int(shape):
            return shape, 0 if shape == 1 else stride // g * e  # type: ignore[operator]
        parts = [scale(x, y) for x, y in zip(shape, stride, strict=True)]  # type: ignore[arg-type]
        return tuple(x for x, _ in parts), tuple(y for _, y in parts)

    return Layout(*scale(b.shape, b.stride))


def _nests(layout: Layout) -> bool:
    """The non-trivial leaves, sorted by stride, each start where the previous one ends or
    at a multiple of that (every stride is a multiple of the span below it)."""
    current = 1
    for d, s in sorted((d, s) for s, d in _leaves(layout) if s != 1 and d != 0):
        if d < 0 or d % current:
            return False
        current = s * d
    return True


def composition(a: Layout, b: object) -> Layout:
    """R = A o B with R(c) == A(B(c)) for every coordinate c of B (CuTe composition).

    Offsets B(c) past size(A) are read with A's last mode extended (CuTe's convention for
    integer indices beyond the size). A multi-mode B is composed mode by mode, as CuTe does,
    which equals A(B(c)) only when A is additive on B's offsets. That is established by one
    of: B's non-broadcast modes nest and each meets A's extents by divisibility; A is linear
    on B's offsets (`_compose_on_linear_image`; e.g. any B when A coalesces to one mode, even
    overlapping modes); adding the modes' offsets never carries between A's modes
    (`_carry_free`). Other multi-mode B are rejected: `(2,2):(1,10) o (2,2):(1,1)` would
    otherwise give a wrong answer.

    `b` is a Layout, an int n (meaning n:1), or a tuple of those (None keeps A's mode): a
    tuple applies mode-by-mode to A's top-level modes. The result has B's profile. A
    single-mode B is admissible when, at each of A's (coalesced) modes it reaches, its
    stride and the mode's extent divide each other (CuTe's rule), or when its remaining
    offsets all fall inside that mode (`(6,2):(1,7) o 2:4 = 2:4`); else ValueError.
    """
    return _compose(a, b, strict=False)


def _compose(a: Layout, b: object, strict: bool) -> Layout:
    if b is None:
        return a
    if isinstance(b, tuple):
        if len(b) > a.rank():
            raise ValueError(f"tiler of rank {len(b)} longer than layout rank {a.rank()}")
        parts = [_compose(a[i], b[i], strict) for i in range(len(b))]
        parts += [a[i] for i in range(len(b), a.rank())]
        return make_layout(parts)
    b = _as_layout(b)  # type: ignore[arg-type]
    if is_tuple(b.shape):
        if _nests(filter_zeros(b)):
            # nested modes meeting A by divisibility: mode by mode is exact
            try:
                return make_layout([_compose(a, m, strict=True) for m in b.modes()])
            except ValueError:
                pass
        scaled = _compose_on_linear_image(a, b)
        if scaled is not None:
            return scaled
        if _carry_free(a, b):
            return make_layout([_compose(a, m, strict=False) for m in b.modes()])
        raise ValueError(
            f"composition {a} o {b}: the modes of B overlap, interleave or do not meet "
            "A's extents, and adding their offsets carries between A's modes, so composing "
            "mode by mode would not equal A(B(c))"
        )
    bs, bd = b.shape, b.stride
    if bd == 0:  # type: ignore[comparison-overlap]
        return Layout(bs, 0)
    if bd < 0:  # type: ignore[operator]
        raise ValueError(f"composition with a negative stride is not supported: {b}")
    a_shapes, a_strides = _coalesce_keep_tail(a)
    shapes: list[int] = []
    strides: list[int] = []
    rest_shape, rest_stride = bs, bd
    for s, d in zip(a_shapes[:-1], a_strides[:-1], strict=False):
        if rest_shape == 1:  # type: ignore[comparison-overlap]
            break
        if rest_stride % s == 0:  # type: ignore[operator]
            rest_stride //= s  # type: ignore[operator]
            continue
        if s % rest_stride != 0:  # type: ignore[operator]
            if not strict and rest_stride * (rest_shape - 1) < s:  # type: ignore[operator]
                # every remaining offset lies inside this mode: no carry into the next one
                shapes.append(rest_shape)  # type: ignore[arg-type]
                strides.append(rest_stride * d)  # type: ignore[operator]
                rest_shape = 1
                break
            raise ValueError(
                f"composition {a} o {b}: stride {rest_stride} and mode extent {s} "
                "do not divide each other"
            )
        avail = s // rest_stride  # type: ignore[operator]
        take = min(avail, rest_shape)  # type: ignore[type-var]
        if take < rest_shape and rest_shape % take != 0:  # type: ignore[operator]
            raise ValueError(
                f"composition {a} o {b}: remaining extent {rest_shape} is not a multiple "
                f"of {take}"
            )
        shapes.append(take)  # type: ignore[arg-type]
        strides.append(rest_stride * d)  # type: ignore[operator]
        rest_shape //= take  # type: ignore[operator]
        rest_stride = 1
    if rest_shape != 1 or not shapes:  # type: ignore[comparison-overlap]
        shapes.append(rest_shape)  # type: ignore[arg-type]
        strides.append(rest_stride * a_strides[-1])  # type: ignore[operator]
    return coalesce(_from_lists(shapes, strides))


def complement(layout: Layout, cotarget: int | None = None) -> Layout:
    """CuTe's complement: C, increasing, whose offsets other than C(0) = 0 avoid layout's,
    with (layout, C) injective and reaching about `cotarget` (default: cosize(layout)).

    Leaves are taken by increasing stride; each leaves a gap of stride // current below it
    (current: the span so far). When the strides nest (each a multiple of the span below
    it) the gaps are exact and (layout, C) is a bijection onto [0, size(layout)*size(C)),
    with that size >= cotarget. Otherwise CuTe floor-divides the gaps, as done here: the
    guarantees above still hold, but (layout, C) skips some offsets. Raises ValueError when
    a stride is below the span so far (the layout's images overlap or interleave: CuTe's
    "non-injective layout") or negative.
    """
    if cotarget is None:
        cotarget = layout.cosize()
    pairs = sorted(
        (d, s) for s, d in _leaves(layout) if s != 1 and d != 0
    )
    if any(d < 0 for d, _ in pairs):
        raise ValueError(f"complement of a layout with negative strides: {layout}")
    shapes: list[int] = []
    strides: list[int] = []
    current = 1
    for d, s in pairs:
        if d < current:
            raise ValueError(
                f"complement({layout}): stride {d} lies inside the span {current} of the "
                "smaller strides; the layout's images overlap or interleave"
            )
        shapes.append(d // current)
        strides.append(current)
        current = s * d
    shapes.append(ceil_div(cotarget, current))
    strides.append(current)
    return coalesce(_from_lists(shapes, strides))


def logical_divide(a: Layout, b: object) -> Layout:
    """Split A into (tile, rest): A o (B, complement(B, size(A))). A tuple tiler goes
    mode-by-mode (nested tuples recurse), None keeps that mode whole (CuTe's `_`)."""
    if b is None:
        return a
    if isinstance(b, tuple):
        if len(b) > a.rank():
            raise ValueError(f"tiler of rank {len(b)} longer than layout rank {a.rank()}")
        parts = [logical_divide(a[i], b[i]) for i in range(len(b))]
        parts += [a[i] for i in range(len(b), a.rank())]
        return make_layout(parts)
    b = _as_layout(b)  # type: ignore[arg-type]
    return composition(a, make_layout(b, complement(b, a.size())))


def logical_product(a: Layout, b: object) -> Layout:
    """Repeat A over B: (A, complement(A, size(A)*cosize(B)) o B). A tuple goes mode-by-mode,
    None keeps that mode as it is."""
    if b is None:
        return a
    if isinstance(b, tuple):
        if len(b) > a.rank():
            raise ValueError(f"tiler of rank {len(b)} longer than layout rank {a.rank()}")
        parts = [logical_product(a[i], b[i]) for i in range(len(b))]
        parts += [a[i] for i in range(len(b), a.rank())]
        return make_layout(parts)
    b = _as_layout(b)  # type: ignore[arg-type]
    return make_layout(a, composition(complement(a, a.size() * b.cosize()), b))


def _unzip(split: Callable[[Layout, object], Layout], a: Layout, b: object) -> Layout:
    """Split A by B mode-by-mode and gather the parts into ((firsts...), (seconds...)).

    `split(A_i, B_i)` returns a rank-2 (first, second) layout. A None in B yields the empty
    tile 1:0 and keeps A_i whole among the seconds; A's modes past B's rank join the seconds;
    a nested tuple in B recurses (CuTe's hierarchical unzip)."""
    if b is None:
        return make_layout(Layout(1, 0), a)
    if isinstance(b, tuple):
        if len(b) > a.rank():
            raise ValueError(f"tiler of rank {len(b)} longer than layout rank {a.rank()}")
        parts = [_unzip(split, a[i], b[i]) for i in range(len(b))]
        firsts = [p[0] for p in parts]
        seconds = [p[1] for p in parts] + [a[i] for i in range(len(b), a.rank())]
        return make_layout(make_layout(firsts), make_layout(seconds))
    return split(a, b)


def _tiled(zipped: Layout) -> Layout:
    """(tiles, (r0, r1, ...)) -> (tiles, r0, r1, ...)."""
    return make_layout([zipped[0], *zipped[1].modes()])


def zipped_divide(a: Layout, b: object) -> Layout:
    """logical_divide by modes, then gather ((tiles...), (rests...)); None keeps a mode
    whole (its tile is 1:0, the mode joins the rests)."""
    return _unzip(logical_divide, a, b)


def tiled_divide(a: Layout, b: object) -> Layout:
    """zipped_divide with the rest modes as top-level modes: (tiles, rest0, rest1, ...)."""
    return _tiled(zipped_divide(a, b))


def zipped_product(a: Layout, b: object) -> Layout:
    """logical_product by modes, then gather ((A's modes...), (repetitions...))."""
    return _unzip(logical_product, a, b)


def tiled_product(a: Layout, b: object) -> Layout:
    """zipped_product with the repetition modes as top-level modes."""
    return _tiled(zipped_product(a, b))


def right_inverse(layout: Layout) -> Layout:
    """The largest R (CuTe right_inverse) with layout(R(i)) == i for all i < size(R).

    R always exists (it may be trivial, size 1); its result values are linear indices into
    `layout`'s domain.
    """
    fs, fd = flatten(layout.shape), flatten(layout.stride)
    colex = flatten(prefix_product(layout.shape))
    shapes: list[int] = []
    strides: list[int] = []
    used = [False] * len(fs)
    current = 1
    while True:
        for j, (s, d) in enumerate(zip(fs, fd, strict=False)):
            if not used[j] and s > 1 and d == current:
                used[j] = True
                shapes.append(s)
                strides.append(colex[j])
                current = s * d
                break
        else:
            break
    return coalesce(_from_lists(shapes, strides))


def left_inverse(layout: Layout) -> Layout:
    """L with L(layout(i)) == i for every i < size(layout); ValueError if none is a layout.

    Exists when the layout is injective and its strides nest (it has a complement).
    """
    if any(s > 1 and d == 0 for s, d in _leaves(layout)):
        raise ValueError(f"left_inverse({layout}): a stride-0 mode makes it non-injective")
    try:
        whole = make_layout(layout, complement(layout))
    except ValueError as exc:
        raise ValueError(f"left_inverse({layout}) does not exist: {exc}") from exc
    inv = right_inverse(whole)
    if inv.size() < whole.size():
        raise ValueError(f"left_inverse({layout}) does not exist: the layout is not invertible")
    return inv


# --- swizzles ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Swizzle:
    """CuTe Swizzle<B, M, S>: offset ^ ((offset & yyy_mask) >> S), S < 0 shifting left."""

    bits: int
    base: int
    shift: int

    def __post_init__(self) -> None:
        if self.bits < 0 or self.base < 0:
            raise ValueError(f"Swizzle<{self.bits},{self.base},{self.shift}>: B, M must be >= 0")
        if abs(self.shift) < self.bits:
            raise ValueError(
                f"Swizzle<{self.bits},{self.base},{self.shift}>: |S| must be >= B "
                "(else the XOR is not an involution)"
            )

    @property
    def yyy_mask(self) -> int:
        """Source bits (read)."""
        return ((1 << self.bits) - 1) << (self.base + max(0, self.shift))

    @property
    def zzz_mask(self) -> int:
        """Target bits (flipped)."""
        return ((1 << self.bits) - 1) << (self.base - min(0, self.shift))

    @property
    def period(self) -> int:
        """The pattern repeats every `period` offsets: 2**(highest touched bit + 1)."""
        top = self.base + max(0, self.shift) + self.bits if self.shift >= 0 else (
            self.base - self.shift + self.bits
        )
        return 1 << top if self.bits else 1

    def is_identity(self) -> bool:
        return self.bits == 0

    def __call__(self, offset: int) -> int:
        moved = offset & self.yyy_mask
        moved = moved >> self.shift if self.shift >= 0 else moved << -self.shift
        return offset ^ moved

    def __str__(self) -> str:
        return f"Sw<{self.bits},{self.base},{self.shift}>"


@dataclass(frozen=True)
class ComposedLayout:
    """swizzle o offset o layout: c -> swizzle(offset + layout(c))."""

    swizzle: Swizzle
    layout: Layout
    offset: int = 0

    @property
    def shape(self) -> IntTuple:
        return self.layout.shape

    def size(self) -> int:
        return self.layout.size()

    def rank(self) -> int:
        return self.layout.rank()

    def cosize(self) -> int:
        """One past the largest swizzled offset."""
        inner = self.offset + self.layout.cosize()
        if self.offset == 0 and inner % self.swizzle.period == 0 and all(
            d >= 0 for d in flatten(self.layout.stride)
        ):
            return inner  # a whole number of periods maps onto itself
        return max(self(i) for i in range(self.size())) + 1

    def __call__(self, coord: IntTuple) -> int:
        return self.swizzle(self.offset + self.layout(coord))

    def __getitem__(self, i: int) -> ComposedLayout:
        return ComposedLayout(self.swizzle, self.layout[i], self.offset)

    def __str__(self) -> str:
        return f"{self.swizzle} o {self.offset} o {self.layout}"


def compose_any(a: Layout | ComposedLayout | Swizzle, b: object) -> Layout | ComposedLayout:
    """Composition that also accepts a swizzled outer layout or a bare Swizzle on the left."""
    if isinstance(a, Swizzle):
        return ComposedLayout(a, _as_layout(b) if not isinstance(b, Layout) else b)
    if isinstance(a, ComposedLayout):
        return ComposedLayout(a.swizzle, composition(a.layout, b), a.offset)
    return composition(a, b)


# --- slicing -----------------------------------------------------------------------------


def _sliced(crd: object, target: IntTuple) -> tuple[IntTuple, ...]:
    """The parts of `target` (a shape or a stride) that `crd` leaves open: each None keeps
    its whole sub-tree as one mode, an int drops it, and a tuple concatenates its modes'
    parts (so each tuple level of `crd` flattens one level, as CuTe's slice does)."""
    if isinstance(crd, tuple):
        pairs = zip(crd, target, strict=True)  # type: ignore[arg-type]
        return tuple(x for c, t in pairs for x in _sliced(c, t))
    return (target,) if crd is None else ()


def _fixed(crd: object, shape: IntTuple) -> IntTuple:
    """`crd` with None read as 0, checked against `shape` (ValueError with what is wrong)."""
    if crd is None:
        return 0
    if isinstance(crd, tuple):
        if not is_tuple(shape) or len(crd) != len(shape):  # type: ignore[arg-type]
            raise ValueError(f"slice coordinate {crd!r} does not fit shape "
                             f"{format_int_tuple(shape)}")
        pairs = zip(crd, shape, strict=True)  # type: ignore[arg-type]
        return tuple(_fixed(c, t) for c, t in pairs)
    if not is_int(crd):
        raise ValueError(f"slice coordinate entries are ints or None, not {crd!r}")
    if not 0 <= crd < product(shape):  # type: ignore[operator]
        raise ValueError(f"slice coordinate {crd} outside the mode {format_int_tuple(shape)}")
    return crd  # type: ignore[return-value]


def slice_and_offset(crd: object, layout: Layout | ComposedLayout
                     ) -> tuple[Layout | ComposedLayout, int]:
    """CuTe's `slice_and_offset(crd, layout)`, i.e. `layout(_, 3)` with None for `_`.

    Returns (sub, offset) with layout(c) == offset + sub(open coordinates of c) for every
    completion c of the None positions; sub's modes are the open sub-trees in order. A
    swizzled layout is not additive, so its offset moves inside: (sw o (off + o) o sub, 0).
    """
    if isinstance(layout, ComposedLayout):
        sub, off = slice_and_offset(crd, layout.layout)
        return ComposedLayout(layout.swizzle, sub, layout.offset + off), 0  # type: ignore[arg-type]
    fixed = _fixed(crd, layout.shape)
    sub = Layout(_sliced(crd, layout.shape), _sliced(crd, layout.stride))
    return sub, crd2idx(fixed, layout.shape, layout.stride)


def slice_layout(crd: object, layout: Layout | ComposedLayout) -> Layout | ComposedLayout:
    """The sub-layout of `slice_and_offset` (CuTe's `slice`; its offset is dropped)."""
    return slice_and_offset(crd, layout)[0]


# --- parsing -----------------------------------------------------------------------------

_SWZ = re.compile(r"^\s*Sw\s*<\s*(-?\d+)\s*,\s*(-?\d+)\s*,\s*(-?\d+)\s*>\s*o\s*(.*)$", re.S)


def parse_cute(text: str) -> Layout | ComposedLayout:
    """Parse CuTe's printed syntax.

    Accepts `((2,4),3):((1,8),2)`, `(64,64):(64,1)`, `8:1`, a bare shape `(4,8)` (compact
    strides), static-int underscores `(_8,_64):(_64,_1)`, and swizzled layouts
    `Sw<3,4,3> o (8,64):(64,1)` or `Sw<3,4,3> o _0 o (8,64):(64,1)`.
    """
    m = _SWZ.match(text)
    if m:
        sw = Swizzle(int(m.group(1)), int(m.group(2)), int(m.group(3)))
        rest = m.group(4).strip()
        offset = 0
        parts = [p.strip() for p in rest.split(" o ")]
        if len(parts) == 2:
            offset = int(parts[0].lstrip("_"))
            rest = parts[1]
        elif len(parts) != 1:
            raise ValueError(f"cannot parse composed layout {text!r}")
        inner = parse_cute(rest)
        if not isinstance(inner, Layout):
            raise ValueError(f"nested swizzles are not supported: {text!r}")
        return ComposedLayout(sw, inner, offset)
    body = text.strip()
    if ":" in body:
        shape_txt, stride_txt = body.split(":", 1)
        return Layout(parse_int_tuple(shape_txt), parse_int_tuple(stride_txt))
    return Layout(parse_int_tuple(body))
