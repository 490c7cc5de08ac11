"""LEGO-style hierarchical tilings: GroupBy (split dims into tiles) and OrderBy (permute).

After the LEGO layout-expression idea (GroupBy/OrderBy; reference not re-checked here,
see docs/layouts.md): a logical index space of shape
(e0, ..., en-1) is first *grouped* -- each dimension i is split into factors
(f_i0, ..., f_ik) from outermost to innermost, with product e_i (a reshape) -- and the
resulting sub-dimensions are then *ordered*: OrderBy lists every sub-dimension (i, level)
once, outermost first, and the offset is the row-major (mixed-radix) index over that order.
So a LegoLayout is a bijection of [0, size) and is quasi-affine (div/mod by constants), which
is what makes it exactly representable in ISL.

Layouts compose with `then`: the offset of one stage, read row-major as a coordinate of the
next stage's shape, feeds the next stage (a hierarchy of regular permutations).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from tilesafe.semantics.layout.inttuple import suffix_product

SubDim = tuple[int, int]  # (logical dim, level): level 0 is the outermost factor


@dataclass(frozen=True)
class GroupBy:
    """Split logical dim i into `factors[i]` (outermost first; product = extent)."""

    factors: tuple[tuple[int, ...], ...]

    def __post_init__(self) -> None:
        fac = tuple(tuple(int(f) for f in fs) for fs in self.factors)
        for i, fs in enumerate(fac):
            if not fs or any(f < 1 for f in fs):
                raise ValueError(f"GroupBy: dim {i} needs positive factors, got {fs}")
        object.__setattr__(self, "factors", fac)

    def sub_dims(self) -> tuple[SubDim, ...]:
        return tuple((i, l) for i, fs in enumerate(self.factors) for l in range(len(fs)))

    def factor(self, sd: SubDim) -> int:
        return self.factors[sd[0]][sd[1]]

    def inner(self, sd: SubDim) -> int:
        """Product of the factors finer than `sd` in its own dimension (its divisor)."""
        i, l = sd
        p = 1
        for f in self.factors[i][l + 1:]:
            p *= f
        return p


@dataclass(frozen=True)
class OrderBy:
    """Physical order of the sub-dimensions, outermost first."""

    order: tuple[SubDim, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "order", tuple((int(i), int(l)) for i, l in self.order))


@dataclass(frozen=True)
class LegoLayout:
    """GroupBy then OrderBy over a logical shape: coordinate -> offset in [0, size)."""

    shape: tuple[int, ...]
    group: GroupBy
    order: OrderBy

    def __post_init__(self) -> None:
        shape = tuple(int(e) for e in self.shape)
        object.__setattr__(self, "shape", shape)
        if len(self.group.factors) != len(shape):
            raise ValueError(
                f"GroupBy has {len(self.group.factors)} dims, shape {shape} has {len(shape)}"
            )
        for i, (e, fs) in enumerate(zip(shape, self.group.factors, strict=False)):
            p = 1
            for f in fs:
                p *= f
            if p != e:
                raise ValueError(f"GroupBy: factors {fs} of dim {i} multiply to {p}, not {e}")
        if sorted(self.order.order) != sorted(self.group.sub_dims()):
            raise ValueError(
                f"OrderBy {self.order.order} is not a permutation of {self.group.sub_dims()}"
            )

    def size(self) -> int:
        p = 1
        for e in self.shape:
            p *= e
        return p

    def cosize(self) -> int:
        return self.size()

    def weights(self) -> dict[SubDim, int]:
        """Offset stride of each sub-dimension (row-major over the order)."""
        radices = [self.group.factor(sd) for sd in self.order.order]
        return dict(zip(self.order.order, suffix_product(tuple(radices)), strict=False))

    def __call__(self, coord: Sequence[int]) -> int:
        if len(coord) != len(self.shape) or any(
            not 0 <= c < e for c, e in zip(coord, self.shape, strict=False)
        ):
            raise ValueError(f"coordinate {tuple(coord)} outside shape {self.shape}")
        return self.offset_of(coord)

    def offset_of(self, coord: Sequence) -> object:
        """The offset without range checks, written with operators only, so it evaluates
        ints, numpy arrays of coordinates, or symbolic terms alike."""
        w = self.weights()
        return sum(
            w[sd] * ((coord[sd[0]] // self.group.inner(sd)) % self.group.factor(sd))
            for sd in self.order.order
        )

    def then(self, nxt: LegoLayout | LegoChain) -> LegoChain:
        """Feed this layout's offset (row-major over nxt's shape) into `nxt`."""
        rest = nxt.stages if isinstance(nxt, LegoChain) else (nxt,)
        return LegoChain((self, *rest))

    def __str__(self) -> str:
        names = [f"d{i}.{l}:{self.group.factor((i, l))}" for i, l in self.order.order]
        return f"OrderBy[{', '.join(names)}](GroupBy{self.group.factors} of {self.shape})"


@dataclass(frozen=True)
class LegoChain:
    """Stages applied in sequence; stage k's offset is delinearised row-major into stage
    k+1's shape. Every stage must have the same size."""

    stages: tuple[LegoLayout, ...]

    def __post_init__(self) -> None:
        if not self.stages:
            raise ValueError("empty LegoChain")
        sizes = {s.size() for s in self.stages}
        if len(sizes) != 1:
            raise ValueError(f"LegoChain stages have different sizes {sorted(sizes)}")

    @property
    def shape(self) -> tuple[int, ...]:
        return self.stages[0].shape

    def size(self) -> int:
        return self.stages[0].size()

    def cosize(self) -> int:
        return self.size()

    def __call__(self, coord: Sequence[int]) -> int:
        off = self.stages[0](coord)
        for st in self.stages[1:]:
            off = st(delinearize(off, st.shape))
        return off

    def then(self, nxt: LegoLayout | LegoChain) -> LegoChain:
        rest = nxt.stages if isinstance(nxt, LegoChain) else (nxt,)
        return LegoChain((*self.stages, *rest))

    def __str__(self) -> str:
        return " ; ".join(str(s) for s in self.stages)


def delinearize(index: int, shape: Sequence[int]) -> tuple[int, ...]:
    """Row-major coordinate of `index` in `shape` (last dim fastest)."""
    out = []
    for s in reversed(shape):
        out.append(index % s)
        index //= s
    return tuple(reversed(out))


def row_major(shape: Sequence[int]) -> LegoLayout:
    """The identity tiling: one factor per dim, natural order."""
    shape = tuple(shape)
    return LegoLayout(shape, GroupBy(tuple((e,) for e in shape)),
                      OrderBy(tuple((i, 0) for i in range(len(shape)))))


def tile_major(shape: Sequence[int], tile: Sequence[int]) -> LegoLayout:
    """Split every dim into (extent/tile, tile); tiles row-major, each tile row-major."""
    shape, tile = tuple(shape), tuple(tile)
    if len(shape) != len(tile) or any(e % t for e, t in zip(shape, tile, strict=False)):
        raise ValueError(f"tile {tile} does not divide shape {shape}")
    group = GroupBy(tuple((e // t, t) for e, t in zip(shape, tile, strict=False)))
    n = len(shape)
    order = OrderBy(tuple((i, 0) for i in range(n)) + tuple((i, 1) for i in range(n)))
    return LegoLayout(shape, group, order)
