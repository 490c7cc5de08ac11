"""CuTe layout algebra: known results from the CuTe docs, and algebraic laws checked
pointwise on random small layouts."""

from __future__ import annotations

import os

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from tilesafe.semantics.cute import (
    ComposedLayout,
    Layout,
    Swizzle,
    coalesce,
    complement,
    compose_any,
    composition,
    left_inverse,
    logical_divide,
    logical_product,
    make_layout,
    parse_cute,
    right_inverse,
    zipped_divide,
)
from tilesafe.semantics.inttuple import (
    crd2idx,
    flatten,
    format_int_tuple,
    idx2crd,
    parse_int_tuple,
    prefix_product,
    product,
)

# LAYOUT_EXAMPLES=300 pytest ... runs a longer soak of the same properties
SCALE = int(os.environ.get("LAYOUT_EXAMPLES", "0"))
SETTINGS = settings(max_examples=SCALE or 60, deadline=None)

# --- strategies --------------------------------------------------------------------------

leaf_shape = st.integers(1, 4)


@st.composite
def shapes(draw: st.DrawFn, max_leaves: int = 4) -> object:
    """Nested shape of depth <= 2 with at most `max_leaves` leaves."""
    n_modes = draw(st.integers(1, 3))
    modes = []
    budget = max_leaves
    for _ in range(n_modes):
        if budget <= 0:
            break
        if budget >= 2 and draw(st.booleans()):
            k = draw(st.integers(2, min(3, budget)))
            modes.append(tuple(draw(leaf_shape) for _ in range(k)))
            budget -= k
        else:
            modes.append(draw(leaf_shape))
            budget -= 1
    return modes[0] if len(modes) == 1 and draw(st.booleans()) else tuple(modes)


def _with_strides(shape: object, strides: list[int]) -> object:
    it = iter(strides)

    def go(s: object) -> object:
        if isinstance(s, int):
            return next(it)
        return tuple(go(x) for x in s)  # type: ignore[union-attr]

    return go(shape)


@st.composite
def layouts(draw: st.DrawFn, max_stride: int = 12) -> Layout:
    shape = draw(shapes())
    n = len(flatten(shape))
    strides = draw(st.lists(st.integers(0, max_stride), min_size=n, max_size=n))
    return Layout(shape, _with_strides(shape, strides))


@st.composite
def injective_layouts(draw: st.DrawFn) -> Layout:
    """Leaves laid out in a random order with random gaps: injective and complementable."""
    shape = draw(shapes())
    leaves = flatten(shape)
    order = draw(st.permutations(range(len(leaves))))
    strides = [0] * len(leaves)
    cur = 1
    for j in order:
        cur *= draw(st.sampled_from([1, 1, 2, 3]))
        strides[j] = cur
        cur *= leaves[j]
    return Layout(shape, _with_strides(shape, strides))


@st.composite
def pow2_layouts(draw: st.DrawFn, max_leaves: int = 3) -> Layout:
    """Power-of-two shapes and strides: compositions of these are usually admissible."""
    n = draw(st.integers(1, max_leaves))
    shp = tuple(draw(st.sampled_from([1, 2, 4])) for _ in range(n))
    std = tuple(draw(st.sampled_from([0, 1, 2, 4, 8, 16])) for _ in range(n))
    return Layout(shp, std) if n > 1 else Layout(shp[0], std[0])


def image(layout: Layout) -> list[int]:
    return [layout(i) for i in range(layout.size())]


# --- int tuples --------------------------------------------------------------------------


@SETTINGS
@given(shapes(), st.data())
def test_idx2crd_crd2idx_roundtrip(shape: object, data: st.DataObject) -> None:
    i = data.draw(st.integers(0, product(shape) - 1))  # type: ignore[arg-type]
    crd = idx2crd(i, shape)  # type: ignore[arg-type]
    assert crd2idx(crd, shape) == i  # type: ignore[arg-type]
    assert parse_int_tuple(format_int_tuple(shape)) == shape  # type: ignore[arg-type]


def test_colex_order_and_prefix_product() -> None:
    assert prefix_product(((2, 4), 3)) == ((1, 2), 8)
    assert idx2crd(5, (2, 3)) == (1, 2)
    assert crd2idx((1, 2), (2, 3)) == 5
    assert crd2idx(7, (2, 3)) == 7  # past the end: the last mode extends


# --- parsing / printing -----------------------------------------------------------------


def test_parse_cute_forms() -> None:
    assert parse_cute("((2,4),3):((1,8),2)") == Layout(((2, 4), 3), ((1, 8), 2))
    assert parse_cute("(64,64):(64,1)") == Layout((64, 64), (64, 1))
    assert parse_cute("8:1") == Layout(8, 1)
    assert parse_cute("(_8,_64):(_64,_1)") == Layout((8, 64), (64, 1))
    assert parse_cute("(4,8)") == Layout((4, 8), (1, 4))
    sw = parse_cute("Sw<3,4,3> o _0 o (8,64):(64,1)")
    assert sw == ComposedLayout(Swizzle(3, 4, 3), Layout((8, 64), (64, 1)))
    assert parse_cute("Sw<2,0,-2> o (4,4):(4,1)") == ComposedLayout(
        Swizzle(2, 0, -2), Layout((4, 4), (4, 1))
    )
    with pytest.raises(ValueError):
        parse_cute("(2,4):(1,2,3)")
    with pytest.raises(ValueError):
        parse_cute("(2,4:(1,2)")


@SETTINGS
@given(layouts())
def test_str_parse_roundtrip(layout: Layout) -> None:
    assert parse_cute(str(layout)) == layout


# --- known results (CuTe documentation examples) -----------------------------------------


def test_docs_composition_examples() -> None:
    a, b = parse_cute("(6,2):(8,2)"), parse_cute("(4,3):(3,1)")
    assert str(composition(a, b)) == "((2,2),3):((24,2),8)"
    a, b = parse_cute("(10,2):(16,4)"), parse_cute("(5,4):(1,5)")
    assert str(composition(a, b)) == "(5,(2,2)):(16,(80,4))"
    # by-mode tiler (a tuple of layouts)
    a = parse_cute("(12,(4,8)):(59,(13,1))")
    r = composition(a, (parse_cute("3:4"), parse_cute("8:2")))
    assert str(r) == "(3,(2,4)):(236,(26,1))"


def test_docs_complement_examples() -> None:
    assert str(complement(parse_cute("4:1"), 24)) == "6:4"
    assert str(complement(parse_cute("6:4"), 24)) == "4:1"
    assert str(complement(parse_cute("(4,6):(1,4)"), 24)) == "1:0"
    assert str(complement(parse_cute("4:2"), 24)) == "(2,3):(1,8)"
    assert str(complement(parse_cute("(2,4):(1,6)"), 24)) == "3:2"
    assert str(complement(parse_cute("(2,2):(1,6)"), 24)) == "(3,2):(2,12)"


def test_docs_divide_and_product_examples() -> None:
    a = parse_cute("(4,2,3):(2,1,8)")
    assert str(logical_divide(a, parse_cute("4:2"))) == "((2,2),(2,3)):((4,1),(2,8))"
    a = parse_cute("(2,2):(4,1)")
    assert str(logical_product(a, parse_cute("6:1"))) == "((2,2),(2,3)):((4,1),(2,8))"
    assert str(logical_product(a, parse_cute("(4,2):(2,1)"))) == "((2,2),(4,2)):((4,1),(8,2))"
    z = zipped_divide(parse_cute("(8,8):(8,1)"), (parse_cute("4:1"), parse_cute("2:1")))
    assert str(z) == "((4,2),(2,4)):((8,1),(32,2))"


def test_composition_rejects_inadmissible() -> None:
    with pytest.raises(ValueError):
        composition(parse_cute("(6,2):(1,7)"), parse_cute("3:4"))  # 4 vs 6
    with pytest.raises(ValueError):
        complement(parse_cute("(2,2):(1,1)"))  # overlapping images
    with pytest.raises(ValueError):
        left_inverse(parse_cute("(2,2):(1,0)"))
    with pytest.raises(ValueError):
        left_inverse(parse_cute("(3,2):(2,3)"))  # injective but strides do not nest


# --- laws --------------------------------------------------------------------------------


@SETTINGS
@given(layouts())
def test_coalesce_preserves_function(layout: Layout) -> None:
    c = coalesce(layout)
    assert c.size() == layout.size()
    assert image(c) == image(layout)
    assert len(flatten(c.shape)) <= len(flatten(layout.shape))


@SETTINGS
@given(layouts(), layouts())
def test_composition_pointwise(a: Layout, b: Layout) -> None:
    try:
        r = composition(a, b)
    except ValueError:
        assume(False)
        return
    assert r.size() == b.size()
    for i in range(b.size()):
        assert r(i) == a(b(i)), (str(a), str(b), str(r), i)


@SETTINGS
@given(pow2_layouts(), pow2_layouts(), pow2_layouts())
def test_composition_associative(a: Layout, b: Layout, c: Layout) -> None:
    # the law holds on the domain: C's offsets must be coordinates of B
    assume(all(c(i) < b.size() for i in range(c.size())))
    try:
        left = composition(composition(a, b), c)
        right = composition(a, composition(b, c))
    except ValueError:
        assume(False)
        return
    for i in range(c.size()):
        assert left(i) == right(i) == a(b(c(i)))


@SETTINGS
@given(injective_layouts(), st.integers(1, 3))
def test_complement_disjoint_and_covering(layout: Layout, extra: int) -> None:
    cot = layout.cosize() * extra
    comp = complement(layout, cot)
    whole = make_layout(layout, comp)
    assert whole.size() >= cot
    assert sorted(image(whole)) == list(range(whole.size()))  # a bijection onto [0, size)
    assert not set(image(layout)) & {comp(j) for j in range(1, comp.size())}


@SETTINGS
@given(layouts())
def test_right_inverse(layout: Layout) -> None:
    r = right_inverse(layout)
    for i in range(r.size()):
        assert layout(r(i)) == i


@SETTINGS
@given(injective_layouts())
def test_left_inverse(layout: Layout) -> None:
    li = left_inverse(layout)
    for i in range(layout.size()):
        assert li(layout(i)) == i


@SETTINGS
@given(st.data())
def test_right_inverse_of_bijection_is_full(data: st.DataObject) -> None:
    shape = data.draw(shapes())
    leaves = flatten(shape)
    order = data.draw(st.permutations(range(len(leaves))))
    strides = [0] * len(leaves)
    cur = 1
    for j in order:
        strides[j] = cur
        cur *= leaves[j]
    layout = Layout(shape, _with_strides(shape, strides))
    r = right_inverse(layout)
    assert r.size() == layout.size()
    for i in range(layout.size()):
        assert r(layout(i)) == i and layout(r(i)) == i


@SETTINGS
@given(st.integers(0, 3), injective_layouts())
def test_logical_divide_permutes_compact_layout(k: int, tile: Layout) -> None:
    n = tile.cosize() * (k + 1)
    comp = complement(tile, n)
    assume(make_layout(tile, comp).size() == n)
    a = Layout(n, 1)
    d = logical_divide(a, tile)
    assert d.size() == n
    assert sorted(image(d)) == list(range(n))
    for i in range(tile.size()):
        assert d((i, 0)) == tile(i)


@SETTINGS
@given(injective_layouts(), pow2_layouts(2))
def test_logical_product_first_mode_is_a(a: Layout, b: Layout) -> None:
    try:
        p = logical_product(a, b)
    except ValueError:
        assume(False)
        return
    assert p.size() == a.size() * b.size()
    for i in range(a.size()):
        assert p((i, 0)) == a(i)


# --- swizzles ----------------------------------------------------------------------------


@SETTINGS
@given(st.integers(0, 3), st.integers(0, 4), st.integers(-6, 6), st.integers(0, 1 << 12))
def test_swizzle_bit_semantics(b: int, m: int, s: int, x: int) -> None:
    assume(abs(s) >= b)
    if s < 0:
        assume(m + s >= 0)
    sw = Swizzle(b, m, s)
    expected = x
    for i in range(b):
        src = m + max(0, s) + i
        dst = m - min(0, s) + i
        expected ^= ((x >> src) & 1) << dst
    assert sw(x) == expected
    assert sw(sw(x)) == x  # an involution


def test_swizzle_is_a_permutation_of_each_period() -> None:
    for sw in (Swizzle(3, 4, 3), Swizzle(2, 3, 3), Swizzle(1, 4, 3), Swizzle(2, 0, -2)):
        p = sw.period
        assert sorted(sw(x) for x in range(2 * p)) == list(range(2 * p))


def test_swizzle_128b_f16_table() -> None:
    """Row r of a 64x64 f16 tile: 16-byte chunk c lands at chunk c ^ (r % 8)."""
    lay = ComposedLayout(Swizzle(3, 3, 3), Layout((64, 64), (64, 1)))
    for r in range(64):
        for c in range(64):
            off = lay((r, c))
            assert off // 64 == r
            assert (off % 64) // 8 == (c // 8) ^ (r % 8)
            assert off % 8 == c % 8
    assert lay.cosize() == 4096


def test_compose_any_with_swizzle() -> None:
    base = Layout((8, 64), (64, 1))
    sl = compose_any(Swizzle(3, 3, 3), base)
    tiler = Layout(8, 1)  # column 0 of every row (colexicographic index r + 8*c)
    col = compose_any(sl, tiler)
    assert isinstance(col, ComposedLayout)
    assert [col(i) for i in range(8)] == [sl((i, 0)) for i in range(8)]
    assert str(sl) == "Sw<3,3,3> o 0 o (8,64):(64,1)"
    assert parse_cute(str(sl)) == sl
