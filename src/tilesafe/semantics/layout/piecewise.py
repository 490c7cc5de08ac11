"""Piecewise (guarded) quasi-affine layouts, for ragged and non-power-of-two extents.

A layout over symbolic sizes (parameters such as M, N) is a list of pieces: each piece has
a guard (a conjunction of comparisons) and a tuple of output expressions. Expressions are
quasi-affine -- sums of constant multiples of coordinates, parameters, floor-divisions and
remainders by constants -- because that is exactly what Presburger arithmetic (and so ISL)
can decide. A product of two variables (e.g. row * N) is rejected at construction: with a
symbolic N it has no exact ISL form, so a layout that needs it must use a constant stride or
multi-dimensional offsets (tile index, offset in tile).

The domain is the box 0 <= c_i < extent_i where each extent is an expression in the
parameters. Pieces must be pairwise disjoint and cover the domain;
`layout_isl.check_pieces` proves that for all parameter values (or gives a witness).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

Env = Mapping[str, int]


class Expr:
    """Quasi-affine integer expression (immutable; build with + - * // % on ints)."""

    def eval(self, env: Env) -> int:
        raise NotImplementedError

    def isl(self) -> str:
        raise NotImplementedError

    def names(self) -> frozenset[str]:
        raise NotImplementedError

    def __add__(self, other: object) -> Expr:
        return Add(self, lift(other))

    def __radd__(self, other: object) -> Expr:
        return Add(lift(other), self)

    def __sub__(self, other: object) -> Expr:
        return Add(self, Scale(-1, lift(other)))

    def __rsub__(self, other: object) -> Expr:
        return Add(lift(other), Scale(-1, self))

    def __neg__(self) -> Expr:
        return Scale(-1, self)

    def __mul__(self, other: object) -> Expr:
        if isinstance(other, Const):
            other = other.value
        if not isinstance(other, int):
            raise ValueError(f"non-affine product ({self}) * ({other}): only constants scale")
        return Scale(other, self)

    def __rmul__(self, other: object) -> Expr:
        return self.__mul__(other)

    def __floordiv__(self, k: object) -> Expr:
        if not isinstance(k, int) or k <= 0:
            raise ValueError(f"floor division only by a positive constant, got {k!r}")
        return FloorDiv(self, k)

    def __mod__(self, k: object) -> Expr:
        if not isinstance(k, int) or k <= 0:
            raise ValueError(f"remainder only by a positive constant, got {k!r}")
        return Mod(self, k)

    # comparisons build guard atoms (== stays structural equality)
    def lt(self, other: object) -> Cmp:
        return Cmp(self, "<", lift(other))

    def le(self, other: object) -> Cmp:
        return Cmp(self, "<=", lift(other))

    def ge(self, other: object) -> Cmp:
        return Cmp(self, ">=", lift(other))

    def gt(self, other: object) -> Cmp:
        return Cmp(self, ">", lift(other))

    def eq(self, other: object) -> Cmp:
        return Cmp(self, "=", lift(other))

    def __str__(self) -> str:
        return self.isl()


def lift(x: object) -> Expr:
    if isinstance(x, Expr):
        return x
    if isinstance(x, int) and not isinstance(x, bool):
        return Const(x)
    raise ValueError(f"not an affine expression: {x!r}")


@dataclass(frozen=True, eq=True)
class Var(Expr):
    name: str

    def eval(self, env: Env) -> int:
        return int(env[self.name])

    def isl(self) -> str:
        return self.name

    def names(self) -> frozenset[str]:
        return frozenset({self.name})


@dataclass(frozen=True, eq=True)
class Const(Expr):
    value: int

    def eval(self, env: Env) -> int:
        return self.value

    def isl(self) -> str:
        return f"({self.value})" if self.value < 0 else str(self.value)

    def names(self) -> frozenset[str]:
        return frozenset()


@dataclass(frozen=True, eq=True)
class Add(Expr):
    a: Expr
    b: Expr

    def eval(self, env: Env) -> int:
        return self.a.eval(env) + self.b.eval(env)

    def isl(self) -> str:
        return f"({self.a.isl()} + {self.b.isl()})"

    def names(self) -> frozenset[str]:
        return self.a.names() | self.b.names()


@dataclass(frozen=True, eq=True)
class Scale(Expr):
    k: int
    e: Expr

    def eval(self, env: Env) -> int:
        return self.k * self.e.eval(env)

    def isl(self) -> str:
        k = f"({self.k})" if self.k < 0 else str(self.k)
        return f"{k}*{self.e.isl()}"

    def names(self) -> frozenset[str]:
        return self.e.names()


@dataclass(frozen=True, eq=True)
class FloorDiv(Expr):
    e: Expr
    k: int

    def eval(self, env: Env) -> int:
        return self.e.eval(env) // self.k

    def isl(self) -> str:
        return f"floor(({self.e.isl()})/{self.k})"

    def names(self) -> frozenset[str]:
        return self.e.names()


@dataclass(frozen=True, eq=True)
class Mod(Expr):
    e: Expr
    k: int

    def eval(self, env: Env) -> int:
        return self.e.eval(env) % self.k

    def isl(self) -> str:
        return f"(({self.e.isl()}) mod {self.k})"

    def names(self) -> frozenset[str]:
        return self.e.names()


_OPS = {
    "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b,
    "=": lambda a, b: a == b,
    ">=": lambda a, b: a >= b,
    ">": lambda a, b: a > b,
}


@dataclass(frozen=True)
class Cmp:
    """One comparison atom of a guard."""

    lhs: Expr
    op: str
    rhs: Expr

    def __post_init__(self) -> None:
        if self.op not in _OPS:
            raise ValueError(f"unknown comparison {self.op!r}")

    def eval(self, env: Env) -> bool:
        return bool(_OPS[self.op](self.lhs.eval(env), self.rhs.eval(env)))

    def isl(self) -> str:
        return f"{self.lhs.isl()} {self.op} {self.rhs.isl()}"

    def names(self) -> frozenset[str]:
        return self.lhs.names() | self.rhs.names()


Guard = tuple[Cmp, ...]


def guard_isl(guard: Guard) -> str:
    return " and ".join(c.isl() for c in guard) if guard else "true"


@dataclass(frozen=True)
class Piece:
    """Where `guard` holds, the offset is `out` (one expression per output dimension)."""

    name: str
    guard: Guard
    out: tuple[Expr, ...]


@dataclass(frozen=True)
class PiecewiseLayout:
    """Guarded quasi-affine map from coordinates (box of parametric extents) to offsets."""

    coords: tuple[str, ...]
    params: tuple[str, ...]
    extents: tuple[Expr, ...]
    pieces: tuple[Piece, ...]
    context: Guard = ()
    out_names: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if len(self.extents) != len(self.coords):
            raise ValueError("one extent per coordinate is required")
        if not self.pieces:
            raise ValueError("a piecewise layout needs at least one piece")
        n_out = len(self.pieces[0].out)
        if any(len(p.out) != n_out for p in self.pieces):
            raise ValueError("all pieces must have the same number of outputs")
        if not self.out_names:
            object.__setattr__(self, "out_names", tuple(f"o{j}" for j in range(n_out)))
        elif len(self.out_names) != n_out:
            raise ValueError("out_names length differs from the pieces' outputs")
        known = set(self.coords) | set(self.params)
        for p in self.pieces:
            used = frozenset().union(*(e.names() for e in p.out), *(c.names() for c in p.guard))
            if used - known:
                raise ValueError(f"piece {p.name!r} uses unknown names {sorted(used - known)}")
        for e in self.extents:
            if e.names() - set(self.params):
                raise ValueError(f"extent {e} may only use parameters")

    @property
    def n_out(self) -> int:
        return len(self.out_names)

    def shape(self, params: Env) -> tuple[int, ...]:
        return tuple(e.eval(params) for e in self.extents)

    def context_holds(self, params: Env) -> bool:
        return all(c.eval(params) for c in self.context)

    def matching_pieces(self, coord: Sequence[int], params: Env) -> list[Piece]:
        env = dict(params)
        env.update(zip(self.coords, coord, strict=False))
        return [p for p in self.pieces if all(c.eval(env) for c in p.guard)]

    def offset(self, coord: Sequence[int], params: Env) -> tuple[int, ...]:
        """Concrete offset tuple; the first matching piece wins (check_pieces proves there
        is exactly one)."""
        shape = self.shape(params)
        if len(coord) != len(shape) or any(
            not 0 <= c < e for c, e in zip(coord, shape, strict=True)
        ):
            raise ValueError(f"coordinate {tuple(coord)} outside the domain {shape}")
        env = dict(params)
        env.update(zip(self.coords, coord, strict=False))
        for p in self.pieces:
            if all(c.eval(env) for c in p.guard):
                return tuple(e.eval(env) for e in p.out)
        raise ValueError(f"no piece covers {tuple(coord)} with {dict(params)}")

    # --- ISL text (parsed by layout_isl) -------------------------------------------------
    def _prefix(self) -> str:
        return f"[{', '.join(self.params)}] -> " if self.params else ""

    def domain_isl(self) -> str:
        box = [f"0 <= {c} < {e.isl()}" for c, e in zip(self.coords, self.extents, strict=False)]
        return " and ".join(box + [c.isl() for c in self.context]) or "true"

    def domain_set_isl(self) -> str:
        return f"{self._prefix()}{{ [{', '.join(self.coords)}] : {self.domain_isl()} }}"

    def piece_set_isl(self, piece: Piece) -> str:
        """The coordinates where `piece`'s guard holds, inside the domain."""
        return (
            f"{self._prefix()}{{ [{', '.join(self.coords)}] : {self.domain_isl()} and "
            f"{guard_isl(piece.guard)} }}"
        )

    def piece_map_isl(self, piece: Piece) -> str:
        pairs = zip(self.out_names, piece.out, strict=True)
        eqs = " and ".join(f"{o} = {e.isl()}" for o, e in pairs)
        return (
            f"{self._prefix()}{{ [{', '.join(self.coords)}] -> [{', '.join(self.out_names)}] : "
            f"{self.domain_isl()} and {guard_isl(piece.guard)} and {eqs} }}"
        )

    def __str__(self) -> str:
        lines = [f"piecewise [{', '.join(self.coords)}] over {self.params}:"]
        for p in self.pieces:
            out = ", ".join(e.isl() for e in p.out)
            lines.append(f"  {p.name}: {guard_isl(p.guard)} -> ({out})")
        return "\n".join(lines)


def ragged_tiles(tile_m: int, tile_n: int, m: str = "M", n: str = "N") -> PiecewiseLayout:
    """A symbolic m x n matrix cut into tile_m x tile_n tiles, the last tile row/column
    partial. Offsets are (tile row, tile column, offset in tile). Full tiles and tiles cut
    only at the bottom are row-major in their tile slot; tiles cut on the right are stored
    column-major so that their `n mod tile_n` valid columns are contiguous at the start of
    the slot (the corner tile, cut both ways, is row-major). Four guarded pieces."""
    r, c = Var("r"), Var("c")
    mm, nn = Var(m), Var(n)
    full_rows = (mm // tile_m) * tile_m
    full_cols = (nn // tile_n) * tile_n
    tr, tc = r // tile_m, c // tile_n
    row_major = (r % tile_m) * tile_n + (c % tile_n)
    col_major = (c % tile_n) * tile_m + (r % tile_m)
    pieces = (
        Piece("core", (r.lt(full_rows), c.lt(full_cols)), (tr, tc, row_major)),
        Piece("right_tail", (r.lt(full_rows), c.ge(full_cols)), (tr, tc, col_major)),
        Piece("bottom_tail", (r.ge(full_rows), c.lt(full_cols)), (tr, tc, row_major)),
        Piece("corner", (r.ge(full_rows), c.ge(full_cols)), (tr, tc, row_major)),
    )
    return PiecewiseLayout(
        coords=("r", "c"),
        params=(m, n),
        extents=(mm, nn),
        pieces=pieces,
        context=(mm.gt(0), nn.gt(0)),
        out_names=("tile_r", "tile_c", "intra"),
    )
