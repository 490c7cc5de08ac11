"""Tests for tilesafe.semantics.hw.tma_rules: descriptor rules and the copy engine's arrangement.

Rule tests flip exactly one rule on a known-good spec and expect exactly its code. The
`DRIVER_VERDICTS` table holds verdicts that cuTensorMapEncodeTiled itself returned on an H100
(driver 580.159.04; docs/hardware-rules.md), so it is evidence, not a restatement.
"""

from __future__ import annotations

import dataclasses
import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tilesafe.semantics.hw import tma_rules as T

GOOD = T.TensorMapSpec.from_row_major("f16", (4096, 4096), (64, 64), swizzle="128B")


def codes(spec: T.TensorMapSpec, **kw: object) -> set[str]:
    return {v.code for v in T.admissibility(spec, **kw)}  # type: ignore[arg-type]


def test_good_spec_is_admissible() -> None:
    assert GOOD.global_dims == (4096, 4096)
    assert GOOD.global_strides_bytes == (8192,)
    assert T.admissibility(GOOD, smem_base_alignment=1024) == ()
    assert T.box_bytes(GOOD) == 64 * 64 * 2


R = dataclasses.replace
RANK6 = R(
    GOOD,
    rank=6,
    global_dims=(64,) * 6,
    global_strides_bytes=(128,) * 5,
    box_dims=(64,) + (1,) * 5,
    element_strides=(1,) * 6,
)
IL3 = T.TensorMapSpec(
    "f16", 2, 3, (64, 64, 64), (128, 8192), (16, 8, 8), (1, 1, 1), interleave="16B"
)

ONE_RULE_BROKEN = [
    ("TS501", RANK6, {}),
    (
        "TS501",
        R(GOOD, rank=0, global_dims=(), global_strides_bytes=(), box_dims=(), element_strides=()),
        {},
    ),
    ("TS502", R(GOOD, box_dims=(64, 257)), {}),
    ("TS502", R(GOOD, box_dims=(64, 0)), {}),
    ("TS503", R(GOOD, box_dims=(60, 64)), {}),
    ("TS503", R(IL3, box_dims=(12, 8, 8)), {}),
    ("TS504", R(GOOD, dtype="f32", elem_bytes=4, global_strides_bytes=(16384,)), {}),
    ("TS504", R(GOOD, box_dims=(32, 64), swizzle="32B"), {}),
    ("TS505", R(GOOD, global_strides_bytes=(8200,)), {}),
    ("TS505", R(GOOD, global_strides_bytes=(2**40,)), {}),
    ("TS505", R(IL3, interleave="32B", swizzle="32B", global_strides_bytes=(144, 8192)), {}),
    ("TS506", R(GOOD, global_address_alignment=8), {}),
    ("TS506", R(IL3, interleave="32B", swizzle="32B", global_address_alignment=16), {}),
    ("TS507", R(GOOD, element_strides=(1, 9)), {}),
    ("TS507", R(GOOD, element_strides=(0, 1)), {}),
    ("TS508", R(GOOD, elem_bytes=4, swizzle="none"), {}),
    ("TS508", R(GOOD, dtype="i8", elem_bytes=1), {}),
    ("TS508", R(GOOD, dtype="16u4_align8b"), {}),
    (
        "TS509",
        R(
            IL3,
            rank=2,
            global_dims=(64, 64),
            global_strides_bytes=(128,),
            box_dims=(16, 8),
            element_strides=(1, 1),
        ),
        {},
    ),
    ("TS509", R(IL3, interleave="32B", swizzle="64B"), {}),
    ("TS510", GOOD, {"smem_base_alignment": 64}),
    ("TS511", R(GOOD, global_dims=(0, 4096)), {}),
    ("TS511", R(GOOD, global_dims=(4096, 2**32 + 1)), {}),
    ("TS512", R(GOOD, dtype="u16", oob_fill="nan"), {}),
    ("TS513", R(GOOD, swizzle="256B"), {}),
    ("TS513", R(GOOD, l2_promotion="512B"), {}),
    ("TS514", R(GOOD, global_strides_bytes=(8192, 8192)), {}),
    ("TS515", T.TensorMapSpec.from_row_major("u8", (4096, 4096, 4096), (4, 256, 256)), {}),
]


@pytest.mark.parametrize(("code", "spec", "kw"), ONE_RULE_BROKEN)
def test_each_rule_alone(code: str, spec: T.TensorMapSpec, kw: dict[str, int]) -> None:
    got = T.admissibility(spec, **kw)  # type: ignore[arg-type]
    assert {v.code for v in got} == {code}, got
    assert all(v.citation and v.rule and v.message for v in got)
    assert code in T.RULES


def test_interleave_base_spec_is_good() -> None:
    assert T.admissibility(IL3) == ()
    assert T.admissibility(R(IL3, interleave="32B", swizzle="32B")) == ()


# (spec, driver accepted?) -- each row is a cuTensorMapEncodeTiled verdict seen on an H100
# (driver 580.159.04) for exactly these arguments; base addresses were >= 256-byte aligned.
def _spec(dtype: str, dims, strides, box, es=None, **kw: object) -> T.TensorMapSpec:
    return T.TensorMapSpec(
        dtype,
        T.DTYPES[dtype][0],
        len(box),
        tuple(dims),
        tuple(strides),
        tuple(box),
        tuple(es or (1,) * len(box)),
        **kw,  # type: ignore[arg-type]
    )


def _q(**kw: object) -> T.TensorMapSpec:
    """The probe's 2-D u16 base case: 256x256, row stride 512 B, box 64x64."""
    args: dict[str, object] = dict(dims=(256, 256), strides=(512,), box=(64, 64))
    args.update(kw)
    dtype = str(args.pop("dtype", "u16"))
    return _spec(dtype, **args)  # type: ignore[arg-type]


def _big(dtype: str, box, es=None, **kw: object) -> T.TensorMapSpec:
    eb = T.DTYPES[dtype][0]
    r = len(box)
    return _spec(dtype, (4096,) * r, [eb * 4096 ** (k + 1) for k in range(r - 1)], box, es, **kw)


def _mid(dtype: str, box, es=None, **kw: object) -> T.TensorMapSpec:
    eb = T.DTYPES[dtype][0]
    r = len(box)
    return _spec(dtype, (300,) * r, [eb * 304 * 300**k for k in range(r - 1)], box, es, **kw)


def _il(d0: int, b0: int, il: str, sw: str) -> T.TensorMapSpec:
    w = max(d0, 16)
    return _spec("u16", (d0, 64, 64), (128 * w, 8192 * w), (b0, 8, 8), interleave=il, swizzle=sw)


DRIVER_VERDICTS = [
    (_q(es=(9, 1)), False),  # the stride of dim 0 is ignored by the copy but still checked
    (_q(es=(0, 1)), False),
    (_q(dims=(64, 4, 4), strides=(1024, 128), box=(64, 4, 4)), True),  # strides need not grow
    (_q(strides=(256,)), True),  # rows may overlap
    (_q(dims=(2**32, 1), strides=(2**33,), box=(64, 1)), True),
    (_q(dims=(2**32 + 1, 1), strides=(2**34,), box=(64, 1)), False),
    (_q(strides=(2**40 - 16,)), True),
    (_q(strides=(2**40,)), False),
    (_q(oob_fill="nan"), False),
    (_q(dtype="f16", oob_fill="nan"), True),
    (_q(dims=(12, 256, 256), strides=(32, 8192), box=(12, 8, 8), interleave="16B"), False),
    (
        _q(
            dims=(256, 16, 16),
            strides=(512, 8192),
            box=(256, 8, 8),
            interleave="16B",
            swizzle="128B",
        ),
        True,
    ),  # the swizzle-span rule holds without interleave only
    (
        _q(dims=(16, 16, 16), strides=(64, 1024), box=(16, 8, 8), interleave="32B", swizzle="32B"),
        True,
    ),
    (
        _q(dims=(64, 16, 16), strides=(128, 2048), box=(64, 8, 8), es=(2, 1, 1), interleave="16B"),
        True,
    ),
    (_q(swizzle="128B", global_address_alignment=16), True),
    (_q(global_address_alignment=8), False),
    (_q(box=(4, 64)), False),  # 8-byte inner row
    (_q(l2_promotion="256B"), True),
    (_big("u8", (256, 228, 4)), True),  # 233472 bytes: exactly shared memory per SM
    (_big("u8", (256, 229, 4)), False),
    (_big("u8", (48, 139, 35)), False),  # 233520 bytes
    (_big("f32", (64, 228, 4)), True),
    (_big("f64", (256, 114, 1)), True),
    (_big("u8", (32, 256, 28), swizzle="128B"), True),  # padded footprint is not counted
    (_big("u8", (32, 256, 32), swizzle="128B"), False),
    (_big("u8", (256, 256, 4), (1, 1, 2)), True),
    (_mid("u8", (256, 256, 7), (1, 1, 2)), True),  # floor(7/2) = 3 -> 196608
    (_mid("u8", (256, 230, 4), (2, 1, 1)), True),  # the size check divides dim 0 too
    (_mid("u8", (256, 230, 4)), False),
    (_mid("u8", (256, 230, 4), interleave="16B"), False),
    (_mid("u8", (256, 228, 4), interleave="16B"), True),
    (_il(12, 12, "16B", "none"), False),  # 24-byte inner row under interleave
    (_il(16, 12, "16B", "none"), False),
    (_il(12, 16, "16B", "none"), True),
    (_il(8, 8, "32B", "32B"), True),
    (_il(8, 8, "16B", "none"), True),
]


@pytest.mark.parametrize(("spec", "accepted"), DRIVER_VERDICTS)
def test_agrees_with_recorded_driver_verdicts(spec: T.TensorMapSpec, accepted: bool) -> None:
    assert (T.admissibility(spec) == ()) is accepted, T.admissibility(spec)


def test_documented_interleave_swizzle_rule_is_stricter_than_driver() -> None:
    # The driver (580) accepted 32B interleave with 64B swizzle; the documentation forbids it.
    spec = _q(
        dims=(16, 16, 16), strides=(64, 1024), box=(16, 8, 8), interleave="32B", swizzle="64B"
    )
    assert {v.rule for v in T.admissibility(spec)} == {"interleave-swizzle"}


def test_operand_rules_are_the_run_time_part() -> None:
    rules = T.operand_rules(GOOD)
    assert [(r.field, r.index) for r in rules] == [
        ("global_dim", 0),
        ("global_dim", 1),
        ("global_stride", 0),
        ("global_address", 0),
    ]
    stride = rules[2]
    assert stride.holds(16) and stride.holds(2**40 - 16)
    assert not stride.holds(8) and not stride.holds(2**40)
    dim = rules[0]
    assert dim.holds(1) and dim.holds(2**32) and not dim.holds(0) and not dim.holds(2**32 + 1)
    il32 = T.operand_rules(R(IL3, interleave="32B", swizzle="32B"))
    assert {r.multiple_of for r in il32 if r.field != "global_dim"} == {32}
    assert "multiple of 16" in stride.describe()


@settings(max_examples=150, deadline=None)
@given(
    dims=st.tuples(st.integers(0, 2**33), st.integers(0, 2**33)),
    stride=st.integers(0, 2**41),
    align=st.sampled_from([1, 2, 4, 8, 16, 32, 64, 256]),
)
def test_admissibility_is_static_plus_operand_rules(
    dims: tuple[int, int], stride: int, align: int
) -> None:
    spec = R(GOOD, global_dims=dims, global_strides_bytes=(stride,), global_address_alignment=align)
    values = {"global_dim": dims, "global_stride": (stride,), "global_address": (align,)}
    expected = {v.code for v in T.static_violations(spec)} | {
        r.code for r in T.operand_rules(spec) if not r.holds(values[r.field][r.index])
    }
    assert codes(spec) == expected
    # and the operand facts restated plainly
    plain = set()
    if not all(1 <= d <= 2**32 for d in dims):
        plain.add("TS511")
    if stride % 16 or stride >= 2**40:
        plain.add("TS505")
    if align % 16:
        plain.add("TS506")
    assert codes(spec) == plain


specs = st.builds(
    lambda dtype, rank, box, es, sw, il: T.TensorMapSpec(
        dtype,
        T.DTYPES[dtype][0],
        rank,
        (512,) * rank,
        tuple(T.DTYPES[dtype][0] * 512 * 512**k for k in range(rank - 1)),
        tuple(box[:rank]),
        tuple(es[:rank]),
        il,
        sw,
    ),
    st.sampled_from(sorted(T.DTYPES)),
    st.integers(1, 5),
    st.lists(st.integers(1, 300), min_size=5, max_size=5),
    st.lists(st.integers(1, 8), min_size=5, max_size=5),
    st.sampled_from(T.SWIZZLES),
    st.sampled_from(["none", "none", "16B"]),
)
SIZE_CODES = {"TS502", "TS504", "TS515"}


@settings(max_examples=200, deadline=None)
@given(spec=specs, data=st.data())
def test_shrinking_a_box_never_creates_size_violations(spec: T.TensorMapSpec, data) -> None:
    smaller = tuple(data.draw(st.integers(1, b)) for b in spec.box_dims)
    shrunk = R(spec, box_dims=smaller)
    assert codes(shrunk) & SIZE_CODES <= codes(spec) & SIZE_CODES


@settings(max_examples=100, deadline=None)
@given(spec=specs, k=st.integers(0, 8))
def test_more_address_alignment_never_hurts(spec: T.TensorMapSpec, k: int) -> None:
    lo = R(spec, global_address_alignment=2**k)
    hi = R(spec, global_address_alignment=2 ** (k + 1))
    assert codes(hi) <= codes(lo)


# ---------------------------------------------------------------- arrangement
def test_worked_example_f16_64x64_128B() -> None:
    # Row r of a 64x64 f16 tile is one 128-byte line; logical 16-byte chunk c of that row is
    # stored at chunk c ^ (r % 8) when the buffer is 1024-byte aligned (PTX 5.5.7 table).
    ptx_table = [[c ^ r for c in range(8)] for r in range(8)]
    for r, c in itertools.product(range(64), range(8)):
        off = T.tma_box_byte_offset((r, 8 * c), (64, 64), 2, "128B", 0)
        assert off // 128 == r
        assert (off % 128) // 16 == ptx_table[r % 8][c]


@pytest.mark.parametrize("k", range(8))
def test_unaligned_base_shifts_the_pattern(k: int) -> None:
    # Programming guide: offset = (base / 128) % 8 is added to the row before the XOR.
    base = 4096 + 128 * k
    for r, c in itertools.product(range(16), range(8)):
        off = T.tma_box_byte_offset((r, 8 * c), (16, 64), 2, "128B", base)
        assert (off % 128) // 16 == ((r + k) % 8) ^ c


def cute_swizzle(b: int, m: int, s: int):
    """CuTe's Swizzle<B,M,S> on byte offsets, written from its definition."""
    yyy = ((1 << b) - 1) << (m + s)
    return lambda o: o ^ ((o & yyy) >> s)


@pytest.mark.parametrize(("mode", "bits"), [("32B", 1), ("64B", 2), ("128B", 3)])
def test_matches_cute_swizzle_b_4_3(mode: str, bits: int) -> None:
    sw = cute_swizzle(bits, 4, 3)
    assert all(T.swizzle_address(a, mode) == sw(a) for a in range(0, 1 << 14, 2))


@pytest.mark.parametrize("mode", ["32B", "64B", "128B"])
def test_swizzle_is_a_bijection_on_each_period(mode: str) -> None:
    period = T.swizzle_period(mode)
    for block in range(4):
        lo = block * period
        image = {T.swizzle_address(a, mode) for a in range(lo, lo + period)}
        assert image == set(range(lo, lo + period))
    assert all(T.swizzle_address(T.swizzle_address(a, mode), mode) == a for a in range(4096))


boxes = st.tuples(
    st.sampled_from(T.SWIZZLES),
    st.sampled_from([1, 2, 4, 8]),
    st.integers(1, 3),
    st.integers(1, 12),
    st.integers(1, 16),
    st.integers(0, 7),
)


@settings(max_examples=150, deadline=None)
@given(boxes)
def test_arrangement_is_injective_chunk_preserving_and_fits(box) -> None:
    mode, eb, outer, rows, chunks, phase = box
    span = T.SWIZZLE_SPAN[mode]
    if span:
        chunks = min(chunks, span // 16)
    inner = chunks * 16 // eb
    dims = (outer, rows, inner)
    base = 1 << 16 | phase * 128
    offs = T.box_arrangement(dims, eb, mode, base)
    assert len(set(offs)) == len(offs)
    footprint = T.box_smem_bytes(dims, eb, mode)
    assert all(0 <= o < footprint for o in offs)
    for c, o in zip(itertools.product(*(range(d) for d in dims)), offs, strict=True):
        assert o % 16 == (c[-1] * eb) % 16  # whole 16-byte chunks move, bytes inside stay


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(1, 9), min_size=1, max_size=3), st.sampled_from([1, 2, 4, 8]))
def test_no_swizzle_is_plain_row_major(dims: list[int], eb: int) -> None:
    inner = 16 // eb * dims[-1]
    box = (*dims[:-1], inner)
    for c in itertools.product(*(range(d) for d in box)):
        linear = 0
        for ci, di in zip(c, box, strict=True):
            linear = linear * di + ci
        assert T.tma_box_byte_offset(c, box, eb, "none", 128) == linear * eb


def test_narrow_rows_take_the_full_span() -> None:
    # Seen on an H100: 64-byte rows under the 128B swizzle sit 128 bytes apart.
    assert T.box_row_pitch(64, "128B") == 128
    assert T.box_row_pitch(48, "none") == 48
    assert T.box_smem_bytes((16, 32), 2, "128B") == 2048
    assert T.tma_box_byte_offset((1, 0), (16, 32), 2, "128B") == 128 ^ 16


def test_offset_preconditions() -> None:
    with pytest.raises(ValueError):
        T.tma_box_byte_offset((0, 0), (8, 8), 2, "128B", 64)
    with pytest.raises(ValueError):
        T.tma_box_byte_offset((8, 0), (8, 8), 2, "128B", 0)
    assert T.smem_alignment("128B") == T.smem_alignment("none") == 128
    assert [T.swizzle_period(m) for m in ("32B", "64B", "128B")] == [256, 512, 1024]


def test_traversed_box_ignores_dim0_stride_without_interleave() -> None:
    # Seen on an H100: box (8 rows, 64) with element strides (rows 1, inner 2) moved 1024 B.
    spec = T.TensorMapSpec.from_row_major("u16", (256, 256), (8, 64), traversal_strides=(1, 2))
    assert T.traversed_box(spec) == (64, 8)
    assert T.box_bytes(spec) == 1024
    rows2 = T.TensorMapSpec.from_row_major("u16", (256, 256), (8, 64), traversal_strides=(2, 1))
    assert T.box_bytes(rows2) == 512


# ---------------------------------------------------------------- synthesis
@pytest.mark.parametrize(
    ("box", "eb", "mode"),
    [
        ((64, 64), 2, "128B"),
        ((16, 32), 2, "64B"),
        ((16, 16), 2, "32B"),
        ((8, 24), 2, "none"),
        ((16, 32), 2, "128B"),
    ],
)
def test_synthesize_recovers_the_mode(box: tuple[int, int], eb: int, mode: str) -> None:
    def fn(c: tuple[int, ...]) -> int:
        return T.tma_box_byte_offset(c, box, eb, mode)

    got = T.synthesize(fn, box, eb, offset_unit="bytes")
    assert isinstance(got, T.SwizzleChoice)
    assert mode in (got.swizzle, *got.alternatives)


def test_synthesize_from_cute_layout() -> None:
    sw = cute_swizzle(3, 4, 3)
    got = T.synthesize(lambda c: sw((c[0] * 64 + c[1]) * 2), (64, 64), 2, offset_unit="bytes")
    assert got == T.SwizzleChoice("128B")
    row_major = T.synthesize(lambda c: c[0] * 64 + c[1], (64, 64), 2)
    assert row_major == T.SwizzleChoice("none")


def test_synthesize_reports_why_nothing_fits() -> None:
    got = T.synthesize(lambda c: c[1] * 64 + c[0], (64, 64), 2)  # transposed
    assert isinstance(got, T.NoSwizzleFits)
    assert len(got.reasons) == 4
    by_mode = {r.split(":")[0]: r for r in got.reasons}
    assert "TS504" in by_mode["32B"] and "TS504" in by_mode["64B"]  # 128-byte rows
    assert "element (0, 1)" in by_mode["none"] and "element" in by_mode["128B"]
    wide = T.synthesize(lambda c: c[1], (1, 128), 2)  # 256-byte rows: only 'none' admissible
    assert wide == T.SwizzleChoice("none")
