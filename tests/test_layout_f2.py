"""F2 linear layouts: linearity, rank-based injectivity/surjectivity against enumeration,
composition and inversion laws, and agreement with CuTe swizzles (which are F2-linear)."""

from __future__ import annotations

import itertools
import os

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from tilesafe.semantics.layout.cute import ComposedLayout, Layout, Swizzle
from tilesafe.semantics.layout.linear_layout import LinearLayout, gf2_rank

# LAYOUT_EXAMPLES=300 pytest ... runs a longer soak of the same properties
SCALE = int(os.environ.get("LAYOUT_EXAMPLES", "0"))
SETTINGS = settings(max_examples=SCALE or 60, deadline=None)


@st.composite
def linear_layouts(draw: st.DrawFn, max_in_bits: int = 5, square: bool = False) -> LinearLayout:
    n_in = draw(st.integers(1, 2))
    in_bits = [draw(st.integers(0, 3)) for _ in range(n_in)]
    assume(sum(in_bits) <= max_in_bits)
    n_out = draw(st.integers(1, 2))
    if square:
        total = sum(in_bits)
        if n_out == 1:
            out_bits = [total]
        else:
            k = draw(st.integers(0, total))
            out_bits = [k, total - k]
    else:
        out_bits = [draw(st.integers(0, 4)) for _ in range(n_out)]
    in_dims = []
    for k, nb in enumerate(in_bits):
        bases = tuple(
            tuple(draw(st.integers(0, (1 << ob) - 1)) for ob in out_bits) for _ in range(nb)
        )
        in_dims.append((f"in{k}", bases))
    out_dims = tuple((f"out{j}", 1 << ob) for j, ob in enumerate(out_bits))
    return LinearLayout(tuple(in_dims), out_dims)


def all_inputs(ll: LinearLayout) -> list[tuple[int, ...]]:
    return list(itertools.product(*(range(1 << len(bs)) for _, bs in ll.in_dims)))


def flat_in(ll: LinearLayout, x: tuple[int, ...]) -> int:
    acc, shift = 0, 0
    for v, (_, bs) in zip(x, ll.in_dims, strict=True):
        acc |= v << shift
        shift += len(bs)
    return acc


@SETTINGS
@given(linear_layouts(), st.data())
def test_apply_is_xor_linear(ll: LinearLayout, data: st.DataObject) -> None:
    xs = all_inputs(ll)
    a, b = data.draw(st.sampled_from(xs)), data.draw(st.sampled_from(xs))
    ab = tuple(x ^ y for x, y in zip(a, b, strict=True))
    fa, fb, fab = ll.apply(a), ll.apply(b), ll.apply(ab)
    assert fab == tuple(x ^ y for x, y in zip(fa, fb, strict=True))


@SETTINGS
@given(linear_layouts())
def test_rank_predicates_match_enumeration(ll: LinearLayout) -> None:
    images = [ll.apply(x) for x in all_inputs(ll)]
    assert ll.is_injective() == (len(set(images)) == len(images))
    assert ll.is_surjective() == (len(set(images)) == ll.total_out_size())
    assert ll.max_output() == max(ll._flatten_out(v) for v in images)
    for k in ll.kernel():
        assert any(k) and all(v == 0 for v in ll.apply(k))


@SETTINGS
@given(linear_layouts(square=True))
def test_invert_is_two_sided_inverse(ll: LinearLayout) -> None:
    if not ll.is_bijective():
        with pytest.raises(ValueError):
            ll.invert()
        return
    inv = ll.invert()
    for x in all_inputs(ll):
        assert inv.apply(ll.apply(x)) == x
    for y in all_inputs(inv):
        assert ll.apply(inv.apply(y)) == y
    ident = inv.compose(ll)
    assert all(ident.apply(x) == x for x in all_inputs(ll))


@SETTINGS
@given(linear_layouts(square=True), st.data())
def test_compose_pointwise(inner: LinearLayout, data: st.DataObject) -> None:
    # an outer layout whose inputs are exactly inner's outputs
    outer_in = []
    for name, size in inner.out_dims:
        nb = size.bit_length() - 1
        outer_in.append((name, tuple((data.draw(st.integers(0, 15)),) for _ in range(nb))))
    outer = LinearLayout(tuple(outer_in), (("z", 16),))
    comp = outer.compose(inner)
    for x in all_inputs(inner):
        assert comp.apply(x) == outer.apply(inner.apply(x))


def test_gf2_rank_small() -> None:
    assert gf2_rank([1, 2, 3]) == 2
    assert gf2_rank([0b101, 0b011, 0b110]) == 2
    assert gf2_rank([1, 2, 4, 8]) == 4
    assert gf2_rank([]) == 0


def test_identity_and_errors() -> None:
    ident = LinearLayout.identity(16, "x")
    assert all(ident.apply((i,)) == (i,) for i in range(16))
    assert ident.invert().apply((5,)) == (5,)
    with pytest.raises(ValueError):
        LinearLayout((("x", ((3,),)),), (("y", 3),))  # out size not a power of two
    with pytest.raises(ValueError):
        LinearLayout((("x", ((4,),)),), (("y", 4),))  # basis out of range
    bad = LinearLayout((("x", ((1,), (1,))),), (("y", 4),))
    assert not bad.is_injective() and bad.kernel() == [(3,)]
    with pytest.raises(ValueError):
        bad.invert()
    with pytest.raises(ValueError):
        ident.compose(bad)  # dims do not line up


@pytest.mark.parametrize(
    "sw,rows,cols",
    [(Swizzle(3, 3, 3), 64, 64), (Swizzle(2, 2, 3), 16, 32), (Swizzle(1, 0, 2), 8, 8),
     (Swizzle(2, 1, -2), 8, 16)],
)
def test_swizzled_row_major_is_f2_linear(sw: Swizzle, rows: int, cols: int) -> None:
    """A swizzle of a power-of-two row-major tile equals the F2 layout read off its bases."""
    cl = ComposedLayout(sw, Layout((rows, cols), (cols, 1)))
    ll = LinearLayout.from_callable(
        {"r": rows, "c": cols}, {"off": rows * cols}, lambda d: (cl((d["r"], d["c"])),)
    )
    for r in range(rows):
        for c in range(cols):
            assert ll.apply((r, c)) == (cl((r, c)),)
    assert ll.is_bijective()
    inv = ll.invert()
    assert inv.apply((cl((3 % rows, 5 % cols)),)) == (3 % rows, 5 % cols)


def test_triton_style_blocked_layout() -> None:
    """A 16x16 tile held by 32 lanes x 8 registers (2 regs contiguous in a row)."""
    ll = LinearLayout.from_bases(
        {
            "register": [(0, 1), (8, 0), (0, 8)],
            "lane": [(0, 2), (0, 4), (1, 0), (2, 0), (4, 0)],
        },
        {"row": 16, "col": 16},
    )
    assert ll.is_bijective()
    seen = {ll.apply({"register": r, "lane": l}) for r in range(8) for l in range(32)}
    assert len(seen) == 256
    assert ll.apply({"register": 1, "lane": 1}) == (0, 3)
