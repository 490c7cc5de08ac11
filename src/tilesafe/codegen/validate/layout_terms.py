"""A shared buffer's layout as an integer term, read off its ISL map.

Why ISL and not the layout's own offset function: the code generator evaluates
`RealLayout.offset_of` symbolically to produce its address arithmetic, so reusing that
function here would compare the printer with itself. The ISL map (`realize(...).to_isl()`)
is the description the layout checker proves things about; it is turned into a
piecewise quasi-affine function (`PwMultiAff.from_map`) and each piece into a term:
an aff's value is sum(coef * in) + sum(coef_div * floor(div)) + const with rational
coefficients, so every division is rewritten over the lcm of the denominators as an exact
floor division of integers.
"""

from __future__ import annotations

import functools
import math

import islpy as isl

from tilesafe.codegen.validate import terms as T
from tilesafe.codegen.validate.terms import Term
from tilesafe.frontend import ir
from tilesafe.semantics.layout import layouts


class LayoutUnsupported(ValueError):
    """A layout whose ISL form could not be turned into a term."""


def _rat(v: isl.Val) -> tuple[int, int]:
    return int(v.get_num_si()), int(v.get_den_val().to_python())


class _AffBuilder:
    def __init__(self, coords: list[Term]) -> None:
        self.coords = coords

    def value(self, aff: isl.Aff, exact: bool) -> Term:
        """floor(aff) (or aff itself when exact: the caller knows it is integral)."""
        parts: list[tuple[int, int, Term | None]] = []
        num, den = _rat(aff.get_constant_val())
        parts.append((num, den, None))
        for i in range(aff.dim(isl.dim_type.in_)):
            num, den = _rat(aff.get_coefficient_val(isl.dim_type.in_, i))
            if num:
                parts.append((num, den, self.coords[i]))
        divs: dict[int, Term] = {}
        for d in range(aff.dim(isl.dim_type.div)):
            num, den = _rat(aff.get_coefficient_val(isl.dim_type.div, d))
            if num:
                if d not in divs:
                    divs[d] = self.value(aff.get_div(d), exact=False)
                parts.append((num, den, divs[d]))
        lcm = 1
        for _, den, _ in parts:
            lcm = lcm * den // math.gcd(lcm, den)
        acc = T.const_int(0)
        for num, den, x in parts:
            c = T.const_int(num * (lcm // den))
            acc = T.iadd(acc, c if x is None else T.imul(x, c))
        return T.ifdiv(acc, T.const_int(lcm))


def _constraint_term(c: isl.Constraint, b: _AffBuilder) -> Term:
    aff = c.get_aff()
    v = b.value(aff, exact=True)
    return T.eq(v, T.const_int(0)) if c.is_equality() else T.ile(T.const_int(0), v)


def _pieces_of(m: isl.Map, name: str) -> tuple[tuple[isl.Set, isl.MultiAff], ...]:
    key = str(m)
    if key not in _PIECES:
        _PIECES[key] = _compute_pieces(m, name)
    return _PIECES[key]


_PIECES: dict[str, tuple[tuple[isl.Set, isl.MultiAff], ...]] = {}


def _compute_pieces(m: isl.Map, name: str) -> tuple[tuple[isl.Set, isl.MultiAff], ...]:
    pma = isl.PwMultiAff.from_map(m)
    pieces: list[tuple[isl.Set, isl.MultiAff]] = []
    pma.foreach_piece(lambda s, ma: pieces.append((s, ma)))
    box = m.domain()
    union = pieces[0][0] if pieces else None
    for s, _ in pieces[1:]:
        union = union.union(s)  # type: ignore[union-attr]
    if union is None or not box.is_subset(union):
        raise LayoutUnsupported(f"the ISL pieces of '{name}' do not cover its shape")
    return tuple(pieces)


@functools.lru_cache(maxsize=256)
def _real(buf: ir.SharedBuffer) -> layouts.RealLayout:
    return layouts.realize(buf.layout, buf.shape, buf.dtype.nbytes)


def offset(buf: ir.SharedBuffer, coords: list[Term]) -> Term:
    """Element offset of `buf[coords]` (coordinates assumed inside the shape).

    Two layout kinds are bitwise by definition and are encoded as such, because proving a
    PTX `xor` equal to ISL's floor/modulo rendering of the same bits is hard for a solver
    (parity against carries) while the definitions are small: a swizzle is its inner
    layout's ISL map followed by CuTe's Swizzle<B,M,S>, x ^ ((x & yyy_mask) >> S); an F2
    layout is the exclusive or of the bases of the coordinates' set bits. Every other
    layout is its ISL map. (tests/test_validate.py compares every encoding with the
    interpreter's slot table on every element.)"""
    try:
        real = _real(buf)
        split = real.isl_swizzle_split()
        f2 = real.f2_layout()
    except (isl.Error, layouts.LayoutError) as err:  # pragma: no cover - lint rejects these
        raise LayoutUnsupported(str(err)) from err
    if f2 is not None:
        return _f2(f2, coords)
    if split is not None:
        inner, sw, _ = split
        return _swizzle(sw, _isl_offset(inner, coords, buf.name))
    return _isl_offset(real.to_isl(), coords, buf.name)


def _swizzle(sw, x: Term) -> Term:
    """CuTe Swizzle<B, M, S> applied to x >= 0: x ^ ((x & yyy_mask) >> S)."""
    if sw.bits == 0:
        return x
    low = sw.base + max(0, sw.shift)  # lowest bit of yyy_mask
    field = T.ifmod(T.ifdiv(x, T.const_int(1 << low)), T.const_int(1 << sw.bits))
    target = sw.base - min(0, sw.shift)  # lowest bit of zzz_mask
    return T.ixor(x, T.imul(field, T.const_int(1 << target)))


def _f2(ll, coords: list[Term]) -> Term:
    """XOR of the offsets of the set bits of every coordinate."""
    acc = T.const_int(0)
    for (_, bases), c in zip(ll.in_dims, coords, strict=True):
        for bit, basis in enumerate(bases):
            if basis[0] == 0:
                continue
            b = T.ifmod(T.ifdiv(c, T.const_int(1 << bit)), T.const_int(2))
            acc = T.ixor(acc, T.imul(b, T.const_int(basis[0])))
    return acc


def _isl_offset(m: isl.Map, coords: list[Term], name: str) -> Term:
    try:
        pieces = _pieces_of(m, name)
    except isl.Error as err:  # pragma: no cover
        raise LayoutUnsupported(str(err)) from err
    b = _AffBuilder(coords)
    values = []
    for s, ma in pieces:
        if ma.dim(isl.dim_type.out) != 1:
            raise LayoutUnsupported(f"layout of '{name}' has {ma.dim(isl.dim_type.out)} "
                                    "outputs")
        values.append((s, b.value(ma.get_aff(0), exact=True)))
    acc = values[-1][1]
    for s, v in reversed(values[:-1]):
        acc = T.ite(_set_term(s, b), v, acc)
    return acc


def _set_term(s: isl.Set, b: _AffBuilder) -> Term:
    alts = []
    for bs in s.get_basic_sets():
        if bs.dim(isl.dim_type.div):
            raise LayoutUnsupported("a piece's domain has local variables")
        alts.append(T.and_(*[_constraint_term(c, b) for c in bs.get_constraints()]))
    return T.or_(*alts)
