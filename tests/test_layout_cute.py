"""CuTe layout algebra: known results from the CuTe docs, and algebraic laws checked
pointwise on random small layouts."""

from __future__ import annotations

import os

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from tilesafe.semantics.layout.cute import (
    ComposedLayout,
    Layout,
    Swizzle,
    coalesce,
    complement,
    compose_any,
    composition,
    filter_zeros,
    left_inverse,
    logical_divide,
    logical_product,
    make_layout,
    parse_cute,
    right_inverse,
    slice_and_offset,
    slice_layout,
    tiled_divide,
    tiled_product,
    zipped_divide,
    zipped_product,
)
from tilesafe.semantics.layout.inttuple import (
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


# --- None in tilers, zipped/tiled divide and product (issue 8, items 11-12) ----------------


def test_none_in_a_tiler_keeps_the_mode_whole() -> None:
    a = parse_cute("(8,8):(8,1)")
    assert str(logical_divide(a, (None, Layout(2, 1)))) == "(8,(2,4)):(8,(1,2))"
    # pycute's meaning: the None mode contributes the empty tile 1:0 and stays whole
    assert str(zipped_divide(a, (None, Layout(2, 1)))) == "((1,2),(8,4)):((0,1),(8,2))"
    assert str(zipped_divide(a, None)) == "(1,(8,8)):(0,(8,1))"
    assert str(tiled_divide(a, (Layout(4, 1), None))) == "((4,1),2,8):((8,0),32,1)"
    assert logical_product(a, (None, Layout(2, 1)))[0] == a[0]
    assert str(zipped_product(a, (None, 2))) == "((1,8),(8,2)):((0,1),(8,8))"


def test_tiled_and_product_known_results() -> None:
    a = parse_cute("(8,8):(8,1)")
    z = zipped_divide(a, (Layout(4, 1), Layout(2, 1)))
    assert str(z) == "((4,2),(2,4)):((8,1),(32,2))"
    assert str(tiled_divide(a, (Layout(4, 1), Layout(2, 1)))) == "((4,2),2,4):((8,1),32,2)"
    b = parse_cute("(2,2):(4,1)")
    assert str(zipped_product(b, parse_cute("6:1"))) == "((2,2),(2,3)):((4,1),(2,8))"
    assert str(tiled_product(b, parse_cute("6:1"))) == "((2,2),2,3):((4,1),2,8)"
    # a hierarchical tiler recurses into the mode it names
    h = parse_cute("((4,2),8):((1,4),8)")
    assert str(zipped_divide(h, ((2, None), 4))) == "(((2,1),4),((2,2),2)):(((1,0),8),((2,4),32))"


tiler_entry = st.one_of(st.none(), st.integers(1, 4),
                        st.builds(Layout, st.integers(1, 4), st.integers(0, 3)))


def _split_coords(a: Layout, tiler: tuple, split: Layout) -> list[tuple[object, object]]:
    """For every coordinate of `split` (a logical divide/product by modes): the matching
    coordinate of the zipped form ((firsts...), (seconds...))."""
    out = []
    sizes = tuple(split[i].size() for i in range(split.rank()))
    for idx in range(split.size()):
        crd = idx2crd(idx, sizes)
        firsts, seconds = [], []
        for i, t in enumerate(tiler):
            if t is None:
                firsts.append(0)
                seconds.append(crd[i])
            else:
                n = split[i][0].size()
                firsts.append(crd[i] % n)
                seconds.append(crd[i] // n)
        seconds += list(crd[len(tiler):])
        out.append((crd, (tuple(firsts), tuple(seconds))))
    return out


@SETTINGS
@given(layouts(), st.data())
def test_zipped_divide_and_product_permute_the_logical_modes(a: Layout,
                                                              data: st.DataObject) -> None:
    k = data.draw(st.integers(1, a.rank()))
    tiler = tuple(data.draw(tiler_entry) for _ in range(k))
    for logical, zipped, tiled in ((logical_divide, zipped_divide, tiled_divide),
                                   (logical_product, zipped_product, tiled_product)):
        try:
            split = logical(a, tiler)
        except ValueError:
            continue
        z, t = zipped(a, tiler), tiled(a, tiler)
        assert z.size() == split.size()
        for crd, zcrd in _split_coords(a, tiler, split):
            assert z(zcrd) == split(crd), (str(a), tiler, str(split), str(z))
        # tiled = zipped with the second mode's modes brought to the top level
        assert t[0] == z[0] and t.rank() == 1 + z[1].rank()
        assert all(t[1 + j] == z[1][j] for j in range(z[1].rank()))


# --- slicing -----------------------------------------------------------------------------


def test_slice_known_results() -> None:
    a = parse_cute("(8,8):(8,1)")
    sub, off = slice_and_offset((None, 3), a)  # CuTe: a(_, 3)
    assert (str(sub), off) == ("(8):(8)", 3)
    sub, off = slice_and_offset((2, None), a)
    assert (str(sub), off) == ("(8):(1)", 16)
    h = parse_cute("((2,3),4):((1,2),6)")
    assert slice_and_offset(((None, 1), None), h) == (parse_cute("(2,4):(1,6)"), 2)
    assert slice_and_offset((None, None), h) == (h, 0)
    assert slice_and_offset((5, 3), h) == (Layout((), ()), h((5, 3)))
    assert slice_layout((None, 3), a) == parse_cute("(8):(8)")
    sw = ComposedLayout(Swizzle(3, 3, 3), parse_cute("(64,64):(64,1)"))
    sub, off = slice_and_offset((5, None), sw)  # the offset moves inside the swizzle
    assert off == 0 and sub == ComposedLayout(Swizzle(3, 3, 3), Layout((64,), (1,)), 320)
    for bad in ((None,), (8, None), (None, "x"), ((1, 2), None)):
        with pytest.raises(ValueError):
            slice_and_offset(bad, a)


@st.composite
def slice_coords(draw: st.DrawFn, shape: object) -> object:
    """None, an int index of the sub-tree, or (for a tuple) one entry per mode."""
    kind = draw(st.sampled_from(["none", "int", "deep"]))
    if kind == "none":
        return None
    if kind == "int" or isinstance(shape, int):
        return draw(st.integers(0, product(shape) - 1))  # type: ignore[arg-type]
    return tuple(draw(slice_coords(s)) for s in shape)  # type: ignore[union-attr]


def _fill(crd: object, vals: list[int]) -> object:
    """Replace the Nones of `crd`, in order, by the values popped from the front of vals."""
    if crd is None:
        return vals.pop(0)
    if isinstance(crd, tuple):
        return tuple(_fill(c, vals) for c in crd)
    return crd


@SETTINGS
@given(layouts(), st.data())
def test_slice_plus_offset_evaluates_the_full_layout(a: Layout, data: st.DataObject) -> None:
    crd = data.draw(slice_coords(a.shape))
    sub, off = slice_and_offset(crd, a)
    swz = ComposedLayout(Swizzle(2, 0, 3), a, 5)
    ssub, soff = slice_and_offset(crd, swz)
    sizes = tuple(product(s) for s in sub.shape) if isinstance(sub.shape, tuple) else ()
    for j in range(sub.size()):
        open_crd = idx2crd(j, sizes) if sizes else ()
        vals = list(open_crd) if isinstance(open_crd, tuple) else [open_crd]
        full = _fill(crd, vals)
        assert a(full) == off + sub(open_crd), (str(a), crd, str(sub), off)
        assert swz(full) == ssub(open_crd) and soff == 0


# --- widened composition and complement (issue 8, item 12) -------------------------------


def test_composition_accepts_what_cute_computes_exactly() -> None:
    a = parse_cute("(6,2):(1,7)")
    r = composition(a, parse_cute("2:4"))  # 4 and 6 do not divide, but 0, 4 stay in mode 0
    assert str(r) == "2:4" and [r(i) for i in range(2)] == [a(0), a(4)]
    # a linear A is additive: any B composes, even one whose modes overlap
    r = composition(parse_cute("8:3"), parse_cute("(2,2):(1,1)"))
    assert str(r) == "(2,2):(3,3)"
    assert str(composition(parse_cute("(2,4):(1,2)"), parse_cute("(2,2):(1,1)"))) == (
        "(2,2):(1,1)")
    # A is linear on B's offsets (all multiples of 2, and A(2y) = 3y for y <= 6)
    a, b = parse_cute("(2,5):(8,3)"), parse_cute("(3,5):(12,6)")
    r = composition(a, b)
    assert str(r) == "(3,5):(18,9)" and all(r(i) == a(b(i)) for i in range(b.size()))
    # B's modes overlap, but their offsets' digits in A's radix (4, rest) never carry
    a, b = parse_cute("(4,3):(7,6)"), parse_cute("(4,4):(2,4)")
    r = composition(a, b)
    assert str(r) == "((2,2),4):((14,6),6)" and all(r(i) == a(b(i)) for i in range(b.size()))


def test_composition_still_refuses_wrong_answers() -> None:
    with pytest.raises(ValueError):  # overlapping modes of B on a non-linear A
        composition(parse_cute("(2,2):(1,10)"), parse_cute("(2,2):(1,1)"))
    # B's modes nest, but 1 + 2 carries out of A's first mode of 3: mode by mode would
    # give 3 where A(3) = 100, so the second mode must meet A by divisibility
    a, b = parse_cute("(3,10):(1,100)"), parse_cute("(2,2):(1,2)")
    assert a(b((1, 1))) == 100
    with pytest.raises(ValueError):
        composition(a, b)
    with pytest.raises(ValueError):  # offsets 0, 4, 8 leave mode 0 of extent 6
        composition(parse_cute("(6,2):(1,7)"), parse_cute("3:4"))


def test_complement_of_non_nesting_strides_follows_cute() -> None:
    # CuTe floor-divides the gap below stride 3 (span 2 so far): one mode 2:6 remains
    assert str(complement(parse_cute("(2,2):(1,3)"), 12)) == "2:6"
    assert str(complement(parse_cute("(2,3):(5,1)"), 30)) == "3:10"  # gaps 1 and 5 // 3
    with pytest.raises(ValueError):  # stride 2 inside the span 3 of 3:1: interleaved
        complement(parse_cute("(3,2):(1,2)"))


@SETTINGS
@given(layouts())
def test_complement_guarantees(layout: Layout) -> None:
    try:
        comp = complement(layout, layout.cosize() + 3)
    except ValueError:
        assume(False)
        return
    # success means the non-broadcast part of L is injective, and so is (L, C) on L's image
    live = filter_zeros(layout)
    assert len(set(image(live))) == live.size()
    img = image(layout)
    assert len(set(image(make_layout(layout, comp)))) == len(set(img)) * comp.size()
    assert all(comp(i - 1) < comp(i) for i in range(1, comp.size()))
    assert not set(img) & {comp(j) for j in range(1, comp.size())}
