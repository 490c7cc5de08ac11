"""Bank-conflict models: known cases from the cited docs, plus properties checked by hypothesis."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tilesafe.semantics.hw.banks import (
    AMD_WAVE,
    NVIDIA_WARP,
    phases_amd,
    phases_nvidia,
    wavefronts_amd_lds,
    wavefronts_nvidia,
)

F32 = 4

# ---------------------------------------------------------------------------------------------
# NVIDIA: known cases
# ---------------------------------------------------------------------------------------------


def test_transpose_column_read_is_32_way() -> None:
    # 32x32 f32 row-major: lane l reads element (l, 5); every lane hits bank 5, 32 words.
    rep = wavefronts_nvidia([l * 32 * F32 + 5 * F32 for l in range(32)], 4)
    assert (rep.wavefronts, rep.ideal, rep.degree, rep.max_way) == (32, 1, 32.0, 32)
    assert rep.worst is not None
    assert rep.worst.bank == 5 and rep.worst.lanes == tuple(range(32))
    assert rep.worst.addrs == tuple(l * 128 + 20 for l in range(32))
    assert not rep.conflict_free


def test_padding_by_one_word_makes_column_read_conflict_free() -> None:
    rep = wavefronts_nvidia([l * 33 * F32 + 5 * F32 for l in range(32)], 4)
    assert (rep.wavefronts, rep.ideal) == (1, 1) and rep.conflict_free


def test_row_read_is_one_wavefront() -> None:
    rep = wavefronts_nvidia([7 * 128 + l * F32 for l in range(32)], 4)
    assert (rep.wavefronts, rep.ideal, rep.degree) == (1, 1, 1.0)


def test_stride_two_words_is_two_way() -> None:
    rep = wavefronts_nvidia([l * 8 for l in range(32)], 4)
    assert (rep.wavefronts, rep.max_way) == (2, 2)
    assert rep.worst is not None and rep.worst.lanes == (0, 16)


def test_16_byte_consecutive_is_four_wavefronts_ideal_four() -> None:
    rep = wavefronts_nvidia([l * 16 for l in range(32)], 16)
    assert (rep.wavefronts, rep.ideal, rep.per_phase) == (4, 4, (1, 1, 1, 1))
    assert rep.conflict_free


def test_8_byte_consecutive_is_two_wavefronts() -> None:
    rep = wavefronts_nvidia([l * 8 for l in range(32)], 8)
    assert (rep.wavefronts, rep.ideal) == (2, 2)
    # 8-byte accesses at a 16-byte stride: each half-warp spans 256 B -> 2-way per half.
    rep = wavefronts_nvidia([l * 16 for l in range(32)], 8)
    assert (rep.wavefronts, rep.ideal, rep.per_phase) == (4, 2, (2, 2))


def test_all_lanes_same_word_is_broadcast() -> None:
    assert wavefronts_nvidia([64] * 32, 4).wavefronts == 1
    # Different bytes of one word are one word too.
    assert wavefronts_nvidia([64 + (l % 4) for l in range(32)], 1).wavefronts == 1
    assert wavefronts_nvidia([64 + 2 * (l % 2) for l in range(32)], 2).wavefronts == 1
    # Broadcast is per word, not all-or-nothing: 16 lanes on word 0, 16 on word 32 -> 2.
    assert wavefronts_nvidia([0 if l % 2 else 128 for l in range(32)], 4).wavefronts == 2


def test_f16_64x64_ldmatrix_like_read_is_8_way_and_128b_swizzle_fixes_it() -> None:
    # f16 64x64 tile (128 B rows); lane l reads the 16-byte chunk 0 of row l.
    addrs = [l * 128 for l in range(32)]
    rep = wavefronts_nvidia(addrs, 16)
    assert (rep.wavefronts, rep.ideal, rep.degree, rep.max_way) == (32, 4, 8.0, 8)

    def swizzle_128b(off: int) -> int:  # Swizzle<3,4,3> on bytes: chunk ^= row % 8
        return off ^ ((off >> 3) & 0x70)

    rep = wavefronts_nvidia([swizzle_128b(a) for a in addrs], 16)
    assert (rep.wavefronts, rep.ideal, rep.degree) == (4, 4, 1.0)


def test_inactive_lanes() -> None:
    rep = wavefronts_nvidia([None] * 32, 4)
    assert (rep.wavefronts, rep.ideal, rep.degree, rep.worst) == (0, 0, 1.0, None)
    # Only one quarter-warp active with 16-byte accesses: ideal is 1, not 4.
    rep = wavefronts_nvidia([l * 16 for l in range(8)], 16)
    assert (rep.wavefronts, rep.ideal, rep.per_phase) == (1, 1, (1, 0, 0, 0))
    # A short list means the remaining lanes are inactive.
    assert wavefronts_nvidia([0, 128], 4).wavefronts == 2


def test_bad_inputs_are_rejected() -> None:
    with pytest.raises(ValueError, match="aligned"):
        wavefronts_nvidia([8] + [None] * 31, 16)
    with pytest.raises(ValueError, match="width"):
        wavefronts_nvidia([0] * 32, 32)
    with pytest.raises(ValueError, match="at most 32"):
        wavefronts_nvidia([0] * 33, 4)
    with pytest.raises(ValueError, match="non-negative"):
        wavefronts_nvidia([-4] * 32, 4)


def test_phase_tables_partition_the_warp() -> None:
    for w, n in ((1, 1), (2, 1), (4, 1), (8, 2), (16, 4)):
        phases = phases_nvidia(w)
        assert len(phases) == n
        assert sorted(l for p in phases for l in p) == list(range(NVIDIA_WARP))
    for arch in ("cdna3", "cdna4"):
        for w in (1, 2, 4, 8, 16):
            ops = ("read", "write") if arch == "cdna3" else ("read",)
            for op in ops:
                phases = phases_amd(w, op, arch)  # type: ignore[arg-type]
                assert sorted(l for p in phases for l in p) == list(range(AMD_WAVE))
                banks = 32 if arch == "cdna3" else 64
                # each phase moves at most one word per bank
                assert all(len(p) * max(w, 4) <= banks * 4 for p in phases)


# ---------------------------------------------------------------------------------------------
# NVIDIA: properties
# ---------------------------------------------------------------------------------------------

WIDTHS = st.sampled_from([1, 2, 4, 8, 16])


@st.composite
def warp_access(draw: st.DrawFn, lanes: int = NVIDIA_WARP) -> tuple[int, list[int | None]]:
    width = draw(WIDTHS)
    slots = draw(st.integers(1, 96))  # small address space -> plenty of collisions
    addrs = draw(
        st.lists(
            st.one_of(st.none(), st.integers(0, slots - 1).map(lambda s: s * width)),
            min_size=lanes,
            max_size=lanes,
        )
    )
    return width, addrs


def _oracle_nvidia(addrs: list[int | None], width: int) -> int:
    """Independent formulation: per phase, the most distinct aligned blocks in one bank group."""
    unit = max(width, 4)
    per_phase = 32 * 4 // unit if width > 4 else 32
    total = 0
    for start in range(0, 32, per_phase):
        blocks: dict[int, set[int]] = {}
        for a in addrs[start : start + per_phase]:
            if a is not None:
                block = a // unit
                blocks.setdefault(block % (128 // unit), set()).add(block)
        total += max((len(b) for b in blocks.values()), default=0)
    return total


@settings(max_examples=100, deadline=None)
@given(warp_access())
def test_nvidia_matches_independent_oracle_and_bounds(case: tuple[int, list[int | None]]) -> None:
    width, addrs = case
    rep = wavefronts_nvidia(addrs, width)
    assert rep.wavefronts == _oracle_nvidia(addrs, width)
    assert rep.wavefronts >= rep.ideal
    assert rep.ideal <= len(phases_nvidia(width))
    assert rep.wavefronts <= sum(a is not None for a in addrs)
    assert rep.degree >= 1.0


@settings(max_examples=100, deadline=None)
@given(warp_access(), st.randoms(use_true_random=False))
def test_permuting_lanes_within_phases_keeps_the_count(
    case: tuple[int, list[int | None]], rnd: object
) -> None:
    width, addrs = case
    permuted = list(addrs)
    for phase in phases_nvidia(width):  # for width <= 4 this is the whole warp
        idx = list(phase)
        vals = [addrs[i] for i in idx]
        rnd.shuffle(vals)  # type: ignore[attr-defined]
        for i, v in zip(idx, vals, strict=True):
            permuted[i] = v
    assert (
        wavefronts_nvidia(permuted, width).wavefronts == wavefronts_nvidia(addrs, width).wavefronts
    )


def test_permuting_lanes_across_phases_can_change_the_count() -> None:
    # 16-byte accesses: phases are quarter-warps, so moving a lane between quarters matters.
    addrs: list[int | None] = [l * 16 for l in range(32)]
    assert wavefronts_nvidia(addrs, 16).wavefronts == 4
    swapped = list(addrs)
    swapped[1], swapped[8] = swapped[8], swapped[1]  # lane 8's chunk (128 B) joins quarter 0
    assert wavefronts_nvidia(swapped, 16).wavefronts == 6


@settings(max_examples=100, deadline=None)
@given(warp_access(), st.integers(0, 31), st.integers(0, 95))
def test_adding_a_lane_never_decreases_the_count(
    case: tuple[int, list[int | None]], lane: int, slot: int
) -> None:
    width, addrs = case
    more = list(addrs)
    if more[lane] is not None:
        more[lane] = None
        addrs, more = more, addrs  # `addrs` now has the lane inactive, `more` has it active
    else:
        more[lane] = slot * width
    before, after = wavefronts_nvidia(addrs, width), wavefronts_nvidia(more, width)
    assert after.wavefronts >= before.wavefronts
    assert after.ideal >= before.ideal


# ---------------------------------------------------------------------------------------------
# AMD CDNA LDS
# ---------------------------------------------------------------------------------------------


def _amd_with(pairs: dict[int, int], filler: int = 16) -> list[int | None]:
    """64 lanes, lane l at l*16 (conflict-free for b128), overridden by `pairs`."""
    addrs: list[int | None] = [l * filler for l in range(AMD_WAVE)]
    for lane, addr in pairs.items():
        addrs[lane] = addr
    return addrs


def test_amd_b128_consecutive_is_conflict_free_for_read_and_write() -> None:
    for op in ("read", "write"):
        rep = wavefronts_amd_lds([l * 16 for l in range(64)], 16, op)  # type: ignore[arg-type]
        assert (rep.wavefronts, rep.ideal) == (8, 8)


def _sparse(active: dict[int, int]) -> list[int | None]:
    return [active.get(l) for l in range(AMD_WAVE)]


def test_amd_ds_read_b128_documented_phases() -> None:
    # Lanes 0 and 20 share a ds_read_b128 phase (0-3 + 20-23): a clash between them costs.
    rep = wavefronts_amd_lds(_amd_with({20: 1024}), 16, "read")  # 1024 B: bank group 0
    assert (rep.wavefronts, rep.ideal, rep.max_way) == (9, 8, 2)
    assert rep.worst is not None and set(rep.worst.lanes) == {0, 20}
    # Two active lanes on bank group 0 with different addresses:
    pair_0_20, pair_0_4 = _sparse({0: 0, 20: 1024}), _sparse({0: 0, 4: 1024})
    read = [wavefronts_amd_lds(a, 16, "read") for a in (pair_0_20, pair_0_4)]
    assert [(r.wavefronts, r.ideal) for r in read] == [(2, 1), (2, 2)]  # 0/20 clash, 0/4 don't
    # ds_write_b128 uses contiguous groups of 8: there lanes 0 and 4 meet, 0 and 20 don't.
    write = [wavefronts_amd_lds(a, 16, "write") for a in (pair_0_20, pair_0_4)]
    assert [(r.wavefronts, r.ideal) for r in write] == [(2, 2), (2, 1)]
    # Every documented read group, and no other pair of groups, can clash.
    groups = [(0, 20), (4, 16), (8, 28), (12, 24), (32, 52), (36, 48), (40, 60), (44, 56)]
    for a, b in groups:
        assert wavefronts_amd_lds(_sparse({a: 0, b: 1024}), 16).ideal == 1
    assert wavefronts_amd_lds(_sparse({0: 0, 32: 1024}), 16).ideal == 2


def test_amd_vertical_b128_read_and_ck_xor_preshuffle() -> None:
    # f16 tile with 64-element (128 B) rows; lane l reads the 8-element chunk 0 of row l.
    addrs = [l * 128 for l in range(64)]
    rep = wavefronts_amd_lds(addrs, 16, "read")
    assert (rep.wavefronts, rep.ideal, rep.max_way) == (64, 8, 8)
    # CK's XOR preshuffle: chunk' = (row % (KPerBlock / KPack)) ^ chunk with 64/8 = 8 chunks.
    shuffled = [l * 128 + ((l % 8) ^ 0) * 16 for l in range(64)]  # logical chunk 0
    rep = wavefronts_amd_lds(shuffled, 16, "read")
    assert (rep.wavefronts, rep.ideal) == (8, 8)


def test_amd_b64_and_b32_phases() -> None:
    # ds_read_b64: 4 phases of 16 contiguous lanes; consecutive 8-byte reads are free.
    assert wavefronts_amd_lds([l * 8 for l in range(64)], 8).wavefronts == 4
    # Lanes 0 and 16 are in different b64 phases; lanes 0 and 15 are in the same one.
    apart = [l * 8 for l in range(64)]
    apart[16] = 2048
    assert wavefronts_amd_lds(apart, 8).wavefronts == 4
    apart = [l * 8 for l in range(64)]
    apart[15] = 2048
    assert wavefronts_amd_lds(apart, 8).wavefronts == 5
    # ds_read_b32: two phases of 32 lanes; a 128-byte stride is 32-way in each.
    rep = wavefronts_amd_lds([l * 128 for l in range(64)], 4)
    assert (rep.wavefronts, rep.ideal, rep.per_phase) == (64, 2, (32, 32))


def test_amd_cdna4_has_64_banks() -> None:
    # One b32 phase of 64 lanes over 64 banks.
    assert wavefronts_amd_lds([l * 4 for l in range(64)], 4, arch="cdna4").wavefronts == 1
    # A 128-byte stride now alternates between banks 0 and 32: 32-way instead of 2 x 32.
    rep = wavefronts_amd_lds([l * 128 for l in range(64)], 4, arch="cdna4")
    assert (rep.wavefronts, rep.ideal) == (32, 1)
    # b128 read: 4 phases of 16 (0-3, 12-15, 20-23, 24-27 together).
    clash = _amd_with({12: 4096})
    assert wavefronts_amd_lds(clash, 16, arch="cdna4").wavefronts == 5
    with pytest.raises(ValueError, match="not publicly documented"):
        wavefronts_amd_lds([0] * 64, 16, "write", arch="cdna4")


def test_amd_broadcast_only_for_reads_of_the_same_address() -> None:
    same = [256] * 64
    assert wavefronts_amd_lds(same, 4, "read").wavefronts == 2  # 1 per phase
    # Writes to one dword are not documented as merged: counted as serialised (conservative).
    assert wavefronts_amd_lds(same, 4, "write").wavefronts == 64
    # Reads of different bytes of one dword: only identical addresses are merged.
    assert wavefronts_amd_lds([256 + (l % 2) * 2 for l in range(64)], 2, "read").wavefronts == 4


@settings(max_examples=80, deadline=None)
@given(
    warp_access(lanes=AMD_WAVE),
    st.sampled_from(["read", "write"]),
    st.integers(0, 63),
)
def test_amd_properties(case: tuple[int, list[int | None]], op: str, lane: int) -> None:
    width, addrs = case
    rep = wavefronts_amd_lds(addrs, width, op)  # type: ignore[arg-type]
    assert rep.wavefronts >= rep.ideal
    assert rep.ideal == sum(
        any(addrs[l] is not None for l in p)
        for p in phases_amd(width, op)  # type: ignore[arg-type]
    )
    fewer = list(addrs)
    fewer[lane] = None
    assert wavefronts_amd_lds(fewer, width, op).wavefronts <= rep.wavefronts  # type: ignore[arg-type]
