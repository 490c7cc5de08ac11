"""The layout facade: every head realised over concrete shapes, checked against explicit
formulas, against its own ISL map, and against the TMA swizzle tables; bad terms must raise
LayoutError and nothing else."""

from __future__ import annotations

import itertools
import os
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from tilesafe.semantics.layout import layout_isl as LI
from tilesafe.semantics.layout.cute import Swizzle
from tilesafe.semantics.layout.layouts import (
    HEADS,
    LayoutError,
    LayoutTerm,
    RealLayout,
    flat_offsets,
    realize,
)

T = LayoutTerm
SCALE = int(os.environ.get("LAYOUT_EXAMPLES", "0"))
SETTINGS = settings(max_examples=SCALE or 25, deadline=None)
ROW = T("row_major")


def coords(shape: tuple[int, ...]) -> list[tuple[int, ...]]:
    return list(itertools.product(*(range(e) for e in shape)))


def check_isl_pointwise(real: RealLayout) -> None:
    m = real.to_isl()
    assert m.domain().count_val().to_python() == real.size
    for c in coords(real.shape):
        assert LI.eval_map(m, c) == (real.offset(c),), c


# --- each head -----------------------------------------------------------------------------


def test_row_and_col_major() -> None:
    r = realize(ROW, (3, 4, 5), 4)
    c = realize(T("col_major"), (3, 4, 5), 4)
    for i, j, k in coords((3, 4, 5)):
        assert r.offset((i, j, k)) == i * 20 + j * 5 + k
        assert c.offset((i, j, k)) == i + 3 * j + 12 * k
    assert r.cosize == c.cosize == 60
    assert r.byte_offset((1, 0, 0)) == 80
    check_isl_pointwise(r)
    check_isl_pointwise(c)


def test_cute_literal_mode_wise_and_linear() -> None:
    lay = realize(T("cute", ((64, 64), (64, 1))), (64, 64), 2)
    assert lay.offset((3, 5)) == 3 * 64 + 5
    nested = realize(T("cute", (((2, 4), 3), ((1, 8), 2))), (8, 3), 4)
    # coordinate 5 of mode (2,4):(1,8) splits colexicographically into (1, 2)
    assert nested.offset((5, 2)) == 1 + 2 * 8 + 2 * 2
    check_isl_pointwise(nested)
    flat = realize(T("cute", ("((2,4),3):((1,8),2)",)), (24,), 4)
    assert [flat.offset((i,)) for i in range(3)] == [0, 1, 8]
    check_isl_pointwise(flat)
    linear = realize(T("cute", ((4, 8), (8, 1))), (2, 4, 4), 4)  # ranks differ: row-major index
    assert linear.offset((1, 0, 3)) == (19 % 4) * 8 + 19 // 4
    check_isl_pointwise(linear)
    sw = realize(T("cute", ("Sw<3,3,3> o (64,64):(64,1)",)), (64, 64), 2)
    assert sw.offset((1, 0)) == 64 + 8


def test_swizzle128b_f16_table() -> None:
    """128B swizzle, f16 64x64: row r, 16-byte chunk c lands at chunk c ^ (r % 8)."""
    lay = realize(T("swizzle128B", (ROW,)), (64, 64), 2)
    for r, c in coords((64, 64)):
        off = lay.offset((r, c))
        assert off // 64 == r and off % 8 == c % 8
        assert (off % 64) // 8 == (c // 8) ^ (r % 8)
    assert lay.cosize == 4096
    assert "Sw<3,3,3>" in lay.describe()


@pytest.mark.parametrize("mode,bits", [("swizzle32B", 1), ("swizzle64B", 2), ("swizzle128B", 3)])
@pytest.mark.parametrize("eb", [1, 2, 4, 8])
def test_tma_swizzles_act_on_byte_addresses(mode: str, bits: int, eb: int) -> None:
    """Byte address of every element = Swizzle<bits,4,3>(row-major byte address)."""
    span = 16 << bits
    shape = (16, span // eb)  # one swizzle span per row, two pattern periods
    lay = realize(T(mode, (ROW,)), shape, eb)
    sw = Swizzle(bits, 4, 3)
    for r, c in coords(shape):
        assert lay.byte_offset((r, c)) == sw((r * shape[1] + c) * eb)


def test_tma_swizzle_row_patterns() -> None:
    """64B: rows come in pairs (chunk ^ (r/2)%4); 32B: groups of four (chunk ^ (r/4)%2)."""
    s64 = realize(T("swizzle64B", (ROW,)), (8, 32), 2)
    assert [[s64.offset((r, c)) % 32 // 8 for c in range(0, 32, 8)] for r in range(0, 8, 2)] \
        == [[0, 1, 2, 3], [1, 0, 3, 2], [2, 3, 0, 1], [3, 2, 1, 0]]
    s32 = realize(T("swizzle32B", (ROW,)), (8, 16), 2)
    assert [[s32.offset((r, c)) % 16 // 8 for c in (0, 8)] for r in range(8)] \
        == [[0, 1]] * 4 + [[1, 0]] * 4


def test_generic_swizzle_equals_tma_mode_and_cute_literal() -> None:
    a = realize(T("swizzle128B", (ROW,)), (32, 64), 2)
    b = realize(T("swizzle", (3, 3, 3, ROW)), (32, 64), 2)
    c = realize(T("cute", ("Sw<3,3,3> o ((8,4),64):((64,512),1)",)), (32, 64), 2)
    assert LI.equivalent(a, b).ok and LI.equivalent(a, c).ok
    res = LI.equivalent(a, realize(T("swizzle64B", (ROW,)), (32, 64), 2))
    assert res.refuted
    w = res.witness["coord"]
    assert a.offset(w) == res.witness["offset_a"] != res.witness["offset_b"]


def test_padded() -> None:
    lay = realize(T("padded", (ROW, 8)), (64, 64), 2)
    for r, c in [(0, 0), (1, 0), (63, 63), (5, 7)]:
        assert lay.offset((r, c)) == r * 72 + c
    assert lay.cosize == 63 * 72 + 64
    assert LI.injective(lay).ok
    assert LI.in_bounds(lay, lo=0, hi=lay.cosize).ok
    assert LI.in_bounds(lay, lo=0, hi=lay.cosize - 1).refuted
    assert LI.covers(lay, codomain=lay.cosize).refuted  # the pads are never addressed
    check_isl_pointwise(realize(T("padded", (T("swizzle", (1, 0, 2, ROW)), 2)), (4, 6), 4))


def test_linear() -> None:
    lay = realize(T("linear", ((1, 2, 4), (8, 16))), (8, 4), 2)
    assert lay.offset((5, 3)) == 1 ^ 4 ^ 8 ^ 16
    xor = realize(T("linear", (((1, 2), (2, 1)),)), (4, 4), 4)  # one tuple-of-tuples argument
    assert xor.offset((1, 1)) == 3 and xor.offset((3, 3)) == 0
    assert LI.injective(xor).refuted
    assert xor.cosize == 4
    check_isl_pointwise(lay)
    with pytest.raises(LayoutError, match="extent"):
        realize(T("linear", ((1, 2), (4,))), (8, 2), 2)


def test_tiled_and_lego_agree() -> None:
    tiled = realize(T("tiled", ((8, 8), ROW)), (16, 32), 2)
    for r, c in [(0, 0), (0, 8), (8, 0), (9, 17)]:
        tile = (r // 8) * 4 + c // 8
        assert tiled.offset((r, c)) == tile * 64 + (r % 8) * 8 + c % 8
    lego = realize(T("lego", (((2, 8), (4, 8)), ((0, 0), (1, 0), (0, 1), (1, 1)))), (16, 32), 2)
    assert LI.equivalent(tiled, lego).ok
    check_isl_pointwise(tiled)
    check_isl_pointwise(lego)
    inner = realize(T("tiled", ((8, 64), T("swizzle128B", (ROW,)))), (16, 128), 2)
    assert inner.offset((8, 0)) == 2 * 512
    assert inner.offset((1, 64)) == 512 + 64 + 8  # tile 1, row 1: chunk 0 -> chunk 1
    assert LI.injective(inner).ok and LI.covers(inner, codomain=inner.cosize).ok


def test_structured_paths_for_checkers() -> None:
    """Deciding on the RealLayout (not its map) lets injective/covers use the swizzle
    structure; both paths must agree."""
    lay = realize(T("swizzle128B", (ROW,)), (64, 64), 2)
    assert LI.injective(lay).ok and LI.injective(lay.to_isl()).ok
    assert LI.covers(lay, codomain=4096).ok and LI.covers(lay.to_isl(), codomain=4096).ok
    assert "lemma" in LI.injective(lay).evidence
    typo = realize(T("swizzle128B", (T("cute", ((64, 64), (63, 1))),)), (64, 64), 2)
    res = LI.injective(typo)
    assert res.refuted
    assert typo.offset(res.witness["coord_a"]) == typo.offset(res.witness["coord_b"])


# --- errors ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "term,shape,eb",
    [
        (T("diagonal"), (4, 4), 2),
        (T("row_major", (1,)), (4, 4), 2),
        (T("cute", ((8, 8), (8, 1))), (8, 4), 2),  # size mismatch
        (T("cute", ((4, 8), (8, 1))), (8, 4), 2),  # mode sizes differ from the extents
        (T("cute", ((4, 8), (8, 1, 2))), (4, 8), 2),  # stride not congruent
        (T("cute", ("(4,8:(1,4)",)), (4, 8), 2),
        (T("swizzle", (3, 3, 2, ROW)), (8, 8), 2),  # |S| < B
        (T("swizzle", (3, 3, 3)), (8, 8), 2),
        (T("swizzle", (3, 3, 3, 7)), (8, 8), 2),  # inner not a layout
        (T("swizzle128B", (ROW,)), (8, 8), 3),  # element size not a power of two
        (T("swizzle128B", (ROW,)), (8, 8), 32),
        (T("padded", (ROW, -1)), (8, 8), 2),
        (T("tiled", ((3, 8), ROW)), (8, 8), 2),
        (T("tiled", ((8,), ROW)), (8, 8), 2),
        (T("lego", (((2, 3), (8,)), ((0, 0), (0, 1), (1, 0)))), (8, 8), 2),
        (T("lego", (((2, 4), (8,)), ((0, 0), (1, 0)))), (8, 8), 2),  # order misses (0, 1)
        (T("linear", ((1, 2),)), (8,), 2),
        (ROW, (0, 4), 2),
        (ROW, (4, 4), 0),
    ],
)
def test_bad_terms_raise_layout_error(term: LayoutTerm, shape: tuple[int, ...], eb: int) -> None:
    with pytest.raises(LayoutError):
        realize(term, shape, eb)


def test_offset_outside_shape_and_not_a_term() -> None:
    lay = realize(ROW, (4, 4), 2)
    with pytest.raises(LayoutError):
        lay.offset((4, 0))
    with pytest.raises(LayoutError):
        lay.offset((1,))
    with pytest.raises(LayoutError):
        realize("row_major", (4, 4), 2)  # type: ignore[arg-type]


junk = st.recursive(
    st.integers(-3, 9) | st.text(max_size=3),
    lambda inner: st.tuples(inner) | st.tuples(inner, inner) | st.builds(
        T, st.sampled_from(HEADS + ("nope",)), st.lists(inner, max_size=3).map(tuple)),
    max_leaves=6,
)


@SETTINGS
@given(st.sampled_from(HEADS + ("nope",)), st.lists(junk, max_size=4).map(tuple),
       st.sampled_from([(4, 4), (8,), (2, 4, 8)]), st.sampled_from([1, 2, 4]))
def test_fuzzed_terms_never_crash(head: str, args: tuple, shape: tuple, eb: int) -> None:
    try:
        real = realize(T(head, args), shape, eb)
    except LayoutError:
        return
    for c in coords(shape):
        real.offset(c)


# --- random well-formed terms: ISL map, cosize and verdicts vs enumeration ---------------


@st.composite
def terms(draw: st.DrawFn, shape: tuple[int, ...], depth: int = 2) -> LayoutTerm:
    kinds = ["row_major", "col_major", "padded"]
    if all(e & (e - 1) == 0 for e in shape):
        kinds.append("linear")
    if depth > 0:
        kinds += ["swizzle", "tma", "tiled"]
    kind = draw(st.sampled_from(kinds))
    if kind in ("row_major", "col_major"):
        return T(kind)
    if kind == "padded":
        pad = draw(st.integers(0, 3))
        return T("padded", (draw(terms(shape[:-1] + (shape[-1] + pad,), 0)), pad))
    if kind == "linear":
        bases = tuple(
            tuple(draw(st.integers(0, 63)) for _ in range(e.bit_length() - 1)) for e in shape
        )
        return T("linear", bases)
    if kind == "swizzle":
        b = draw(st.integers(0, 2))
        s = draw(st.integers(max(b, 1), 3))
        return T("swizzle", (b, draw(st.integers(0, 2)), s, draw(terms(shape, depth - 1))))
    if kind == "tma":
        return T(draw(st.sampled_from(["swizzle32B", "swizzle64B", "swizzle128B"])),
                 (draw(terms(shape, depth - 1)),))
    tile = tuple(draw(st.sampled_from([t for t in (1, 2, 4) if e % t == 0])) for e in shape)
    return T("tiled", (tile, draw(terms(tile, depth - 1))))


shapes_st = st.sampled_from([(4, 4), (2, 8), (8, 4), (4, 2, 2)])


@SETTINGS
@given(shapes_st.flatmap(lambda s: st.tuples(st.just(s), terms(s))), st.sampled_from([1, 2, 4]))
# F2 bases whose XORs exhaust ISL's subtract on 32 elements: decided by enumeration instead
@example(((8, 4), T("padded", (T("linear", ((17, 0, 25), (9, 17))), 0))), 1)
def test_random_terms_against_enumeration(st_term: tuple[Any, LayoutTerm], eb: int) -> None:
    shape, term = st_term
    real = realize(term, shape, eb)
    offs = flat_offsets(real)
    # One offset function evaluated two ways: on every coordinate at once (numpy arrays,
    # as the interpreter's slot table does) and point by point (Python ints).
    assert offs == [real.offset(c) for c in coords(shape)]
    assert real.cosize == max(offs) + 1
    # the implementation's own cosize argument (ISL's lexmax, CuTe's cosize) agrees with
    # the enumeration RealLayout.cosize uses for buffers of every realistic size
    assert real.impl.cosize() == max(offs) + 1
    check_isl_pointwise(real)
    inj = LI.injective(real)
    assert not inj.unknown and inj.ok == (len(set(offs)) == len(offs))
    assert LI.injective(real.to_isl()).ok == inj.ok
    cov = LI.covers(real, codomain=real.cosize)
    assert not cov.unknown and cov.ok == (set(offs) == set(range(real.cosize)))


@pytest.mark.parametrize("shape, swizzle", [((8, 9), (3, 0, 3)), ((16, 17), (4, 0, 4)),
                                            ((6, 10), (2, 1, 3)), ((32, 33), (5, 0, 5))])
def test_swizzle_over_a_ragged_extent_realises_without_a_cliff(shape, swizzle) -> None:
    """A swizzle over a non-power-of-two extent: the cosize is enumerated (the ISL lexmax
    took 27 s for 32 x 33), and equals the largest offset plus one; the layout checks then
    decide it (injective, and every offset inside the cosize)."""
    real = realize(T("swizzle", (*swizzle, ROW)), shape, 4)
    offs = flat_offsets(real)
    assert real.cosize == max(offs) + 1 >= len(offs)
    if len(offs) <= 200:
        assert real.impl.cosize() == real.cosize
    assert LI.injective(real).ok == (len(set(offs)) == len(offs))


def test_layout_term_str() -> None:
    assert str(T("cute", ((64, 64), (64, 1)))) == "(64,64):(64,1)"
    assert str(T("swizzle128B", (ROW,))) == "swizzle128B(row_major)"
    assert str(T("tiled", ((8, 8), ROW))) == "tiled((8,8), row_major)"
