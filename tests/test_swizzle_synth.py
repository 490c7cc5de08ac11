"""Swizzle synthesis: every answer is re-checked here by brute force, never trusted from z3."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import z3
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tilesafe.semantics.hw.banks import wavefronts_amd_lds, wavefronts_nvidia
from tilesafe.semantics.layout.swizzle_synth import (
    AccessPattern,
    CuteSwizzle,
    RowXorSwizzle,
    Swizzle,
    Tile,
    cute_permutes,
    evaluate,
    is_bijection,
    synthesize,
    worst_degree,
)


def _recheck_smt2(query: str) -> str:
    """Run an exported query in a fresh z3 context (as another solver would)."""
    ctx = z3.Context()
    return z3.Z3_eval_smtlib2_string(ctx.ref(), query).strip()


def _is_permutation(tile: Tile, swizzle: Swizzle) -> bool:
    """Independent of is_bijection: sort the image."""
    return sorted(swizzle.apply(x) for x in range(tile.nbytes)) == list(range(tile.nbytes))


def _check_nvidia_by_hand(tile: Tile, pat: AccessPattern, swizzle: Swizzle, degree: int) -> None:
    """Recount every instance with wavefronts_nvidia on swizzled addresses."""
    for it in range(pat.iters):
        addrs: list[int | None] = []
        for lane in range(32):
            rc = pat.coords(lane, it)
            addrs.append(None if rc is None else swizzle.apply(tile.offset(*rc)))
        rep = wavefronts_nvidia(addrs, pat.width_bytes)
        assert rep.max_way <= degree, (it, rep)
        if degree == 1:
            assert rep.conflict_free and rep.wavefronts == rep.ideal


# ---------------------------------------------------------------------------------------------
# Swizzle objects
# ---------------------------------------------------------------------------------------------


def test_cute_128b_swizzle_is_chunk_xor_row_mod_8() -> None:
    sw = CuteSwizzle(3, 4, 3)
    tile = Tile(64, 64, 2)  # f16, 128-byte rows, 16-byte chunks
    for row in range(64):
        for chunk in range(8):
            for byte in (0, 6, 15):
                off = row * 128 + chunk * 16 + byte
                assert sw.apply(off) == row * 128 + (chunk ^ (row % 8)) * 16 + byte
    assert is_bijection(tile, sw) and _is_permutation(tile, sw)


def _np_permutes(nbytes: int, b: int, m: int, sh: int) -> bool:
    xs = np.arange(nbytes)
    return bool(np.array_equal(np.sort(xs ^ ((xs >> sh) & (((1 << b) - 1) << m))), xs))


def test_exact_cute_bijection_formula_matches_brute_force() -> None:
    for n_bytes in range(1, 150):
        bits = max(n_bytes - 1, 1).bit_length()
        for b, m, sh in itertools.product(range(1, 5), range(bits + 1), range(1, bits + 2)):
            if sh >= b:
                expect = _np_permutes(n_bytes, b, m, sh)
                assert cute_permutes(n_bytes, CuteSwizzle(b, m, sh)) == expect, (n_bytes, b, m, sh)
    # "2^(M+B) divides N" is sufficient, not necessary: on 260 bytes Swizzle<1,2,5> permutes.
    assert cute_permutes(260, CuteSwizzle(1, 2, 5)) and 260 % 8 != 0


def test_xor_constant_permutes_a_range_iff_below_its_2_adic_part() -> None:
    # The lemma behind cute_permutes and the rowxor family's output width.
    for r in range(1, 130):
        v2 = (r & -r).bit_length() - 1
        for c in range(260):
            permutes = sorted(x ^ c for x in range(r)) == list(range(r))
            assert permutes == (c < 1 << v2), (r, c)


def test_rowxor_swizzle_is_a_bijection() -> None:
    tile = Tile(8, 16, 4)
    sw = RowXorSwizzle(3, 64, (5, 3, 7))
    assert is_bijection(tile, sw) and _is_permutation(tile, sw)
    # 96-byte rows: 4-byte chunks, K = 24, so only the low v2(24) = 3 chunk bits may be XOR-ed.
    tile = Tile(4, 24, 4)
    assert is_bijection(tile, RowXorSwizzle(2, 96, (7, 5)))
    assert not is_bijection(tile, RowXorSwizzle(2, 96, (8, 0)))


# ---------------------------------------------------------------------------------------------
# Known cases
# ---------------------------------------------------------------------------------------------

TRANSPOSE = AccessPattern("transpose", lambda lane, c: (lane, 3 * c), 4, iters=8)  # column 3c


def test_ldmatrix_like_f16_pattern_swizzle_128b() -> None:
    tile = Tile(64, 64, 2)
    # lane l reads 16 bytes of row (l + 32*(it//8)), chunk it%8
    pat = AccessPattern("ldm", lambda l, it: (l + 32 * (it // 8), 8 * (it % 8)), 16, iters=16)
    assert worst_degree(evaluate(tile, [pat], None)) == 8
    reports = evaluate(tile, [pat], CuteSwizzle(3, 4, 3))
    assert all(r.report.conflict_free for r in reports)
    _check_nvidia_by_hand(tile, pat, CuteSwizzle(3, 4, 3), 1)


@pytest.mark.parametrize("family", ["cute", "rowxor"])
def test_synthesis_makes_transpose_read_conflict_free(family: str) -> None:
    tile = Tile(32, 32, 4)
    res = synthesize(tile, [TRANSPOSE], family=family)  # type: ignore[arg-type]
    assert res.status == "found" and res.baseline_degree == 32 and res.degree == 1
    assert res.swizzle is not None
    assert _is_permutation(tile, res.swizzle)
    _check_nvidia_by_hand(tile, TRANSPOSE, res.swizzle, 1)


def test_synthesis_handles_row_and_column_reads_together() -> None:
    tile = Tile(32, 32, 4)
    rows = AccessPattern("rows", lambda lane, r: (3 * r, lane), 4, iters=8)
    res = synthesize(tile, [TRANSPOSE, rows])
    assert res.status == "found" and res.degree == 1 and res.swizzle is not None
    _check_nvidia_by_hand(tile, TRANSPOSE, res.swizzle, 1)
    _check_nvidia_by_hand(tile, rows, res.swizzle, 1)
    assert _is_permutation(tile, res.swizzle)


@pytest.mark.parametrize("family", ["cute", "rowxor"])
def test_synthesis_finds_a_128b_style_swizzle_for_ldmatrix_rows(family: str) -> None:
    tile = Tile(64, 64, 2)
    pat = AccessPattern("ldm", lambda l, it: (l + 32 * (it // 8), 8 * (it % 8)), 16, iters=16)
    res = synthesize(tile, [pat], family=family)  # type: ignore[arg-type]
    assert res.status == "found" and res.degree == 1 and res.baseline_degree == 8
    assert res.swizzle is not None and _is_permutation(tile, res.swizzle)
    _check_nvidia_by_hand(tile, pat, res.swizzle, 1)
    if family == "cute":  # fewest bits first: 3 bits are needed for 8 rows
        assert isinstance(res.swizzle, CuteSwizzle) and res.swizzle.bits == 3
    assert _recheck_smt2(res.smt2) == "sat"


SPREAD_ROWS = (0, 1, 4, 5, 16, 17, 20, 21)  # row bits 0, 2, 4 = byte-offset bits 7, 9, 11


def test_synthesis_reports_minimum_when_degree_one_is_impossible() -> None:
    # Each quarter-warp reads 16 B from rows that differ in offset bits 7, 9 and 11. A CuTe
    # swizzle moves one *contiguous* window of bits onto the 3 bank-group bits (4..6), so it
    # can separate only two of the three: 2-way is the best of that family ...
    tile = Tile(32, 32, 4)
    pat = AccessPattern("spread", lambda l, it: (SPREAD_ROWS[l % 8], 20 * it), 16, iters=2)
    res = synthesize(tile, [pat])
    assert res.status == "found" and res.baseline_degree == 8 and res.degree == 2
    assert "degree 1 is unsat" in res.reason
    assert res.swizzle is not None and _is_permutation(tile, res.swizzle)
    _check_nvidia_by_hand(tile, pat, res.swizzle, 2)
    assert _cute_brute_force_min(tile, [pat]) == 2
    # ... while a general F2 matrix on the row bits reaches 1.
    res = synthesize(tile, [pat], family="rowxor")
    assert res.status == "found" and res.degree == 1 and res.swizzle is not None
    _check_nvidia_by_hand(tile, pat, res.swizzle, 1)
    assert _is_permutation(tile, res.swizzle)


def test_no_cute_swizzle_when_the_tile_size_forbids_it() -> None:
    # 1 x 33 f32 = 132 bytes. Lanes read words 0 and 32 (bytes 0 and 128): only a swizzle
    # feeding offset bit 7 into bits 2..6 separates them, and every such swizzle would push
    # part of the 4-byte tail [128, 132) out of the tile.
    tile = Tile(1, 33, 4)
    pat = AccessPattern("two_words", lambda l, it: (0, 32 * (l % 2)), 4)
    res = synthesize(tile, [pat])
    assert res.status == "none" and res.swizzle is None and res.baseline_degree == 2
    assert "unsat core" in res.reason and "bijection on the 132-byte tile" in res.reason
    assert "two_words[it=0] phase 0" in res.reason
    assert _cute_brute_force_min(tile, [pat]) == 2
    assert _recheck_smt2(res.smt2) == "unsat"


def test_exact_bijection_admits_swizzles_on_ragged_tiles() -> None:
    # Same pattern on 1 x 65 f32 = 260 bytes: 2^(M+B) cannot divide 260 for M >= 2, B >= 1,
    # yet some swizzles still permute it, and one of them fixes the conflict.
    tile = Tile(1, 65, 4)
    pat = AccessPattern("two_words", lambda l, it: (0, 32 * (l % 2)), 4)
    res = synthesize(tile, [pat])
    assert res.status == "found" and res.degree == 1 and res.swizzle is not None
    assert _is_permutation(tile, res.swizzle)
    _check_nvidia_by_hand(tile, pat, res.swizzle, 1)


def test_no_rowxor_swizzle_for_conflicts_inside_one_row() -> None:
    # Lanes read words c and c+32 of the same 256-byte row: XOR-ing a per-row constant into
    # the chunk index keeps their bank difference, so the row family cannot help.
    tile = Tile(2, 64, 4)
    pat = AccessPattern("same_row", lambda l, r: (r, 32 * (l % 2) + l // 2), 4, iters=2)
    res = synthesize(tile, [pat], family="rowxor")
    assert res.status == "none" and res.swizzle is None and res.baseline_degree == 2
    assert "unsat core" in res.reason and "same_row" in res.reason
    assert _rowxor_brute_force_min(tile, [pat]) == 2
    # The CuTe family can use the column bit above the bank window instead.
    res = synthesize(tile, [pat], family="cute")
    assert res.status == "found" and res.degree == 1 and res.swizzle is not None
    _check_nvidia_by_hand(tile, pat, res.swizzle, 1)


def test_single_row_tile_has_no_rowxor_swizzle() -> None:
    res = synthesize(
        Tile(1, 65, 4), [AccessPattern("p", lambda l, i: (0, 32 * (l % 2)), 4)], family="rowxor"
    )
    assert res.status == "none" and "single row" in res.reason


def test_identity_when_already_conflict_free() -> None:
    tile = Tile(32, 33, 4)  # padded rows
    res = synthesize(tile, [AccessPattern("col", lambda l, c: (l, c), 4, iters=33)])
    assert res.status == "identity" and res.baseline_degree == 1 and res.swizzle is None


def test_amd_cdna3_vertical_b128_read() -> None:
    tile = Tile(64, 64, 2)
    pat = AccessPattern("vertical", lambda l, it: (l, 8 * it), 16, iters=8)
    res = synthesize(tile, [pat], target="cdna3")
    assert res.status == "found" and res.degree == 1 and res.baseline_degree == 8
    assert res.swizzle is not None and _is_permutation(tile, res.swizzle)
    for it in range(8):
        addrs = [res.swizzle.apply(tile.offset(l, 8 * it)) for l in range(64)]
        assert wavefronts_amd_lds(addrs, 16, "read").conflict_free


def test_bad_patterns_are_rejected() -> None:
    tile = Tile(8, 8, 4)
    with pytest.raises(ValueError, match="outside tile"):
        synthesize(tile, [AccessPattern("oob", lambda l, i: (l, 0), 4)])
    with pytest.raises(ValueError, match="row end"):
        synthesize(tile, [AccessPattern("cross", lambda l, i: (0, 6) if l == 0 else None, 16)])
    with pytest.raises(ValueError, match="aligned"):
        synthesize(tile, [AccessPattern("mis", lambda l, i: (0, 1) if l == 0 else None, 8)])


# ---------------------------------------------------------------------------------------------
# Cross-check against exhaustive enumeration of each family on small tiles
# ---------------------------------------------------------------------------------------------


def _cute_family(tile: Tile, min_unit_log2: int) -> list[CuteSwizzle]:
    """Every Swizzle<B,M,S> of the searched ranges that permutes the tile (by brute force)."""
    bits = max(tile.nbytes - 1, 1).bit_length()
    return [
        CuteSwizzle(b, m, sh)
        for b in range(1, 9)
        for m in range(min_unit_log2, bits + 1)
        for sh in range(b, bits + 2)
        if _np_permutes(tile.nbytes, b, m, sh)
    ]


def _rowxor_family(tile: Tile, min_unit_log2: int) -> list[RowXorSwizzle]:
    row_bits = (tile.rows - 1).bit_length()
    out: list[RowXorSwizzle] = []
    for m in range(min_unit_log2, tile.row_bytes.bit_length()):
        if tile.row_bytes % (1 << m):
            continue
        chunks = tile.row_bytes >> m
        k = (chunks & -chunks).bit_length() - 1
        if k == 0:
            continue
        for cols in itertools.product(range(1 << k), repeat=row_bits):
            out.append(RowXorSwizzle(m, tile.row_bytes, cols))
    return out


def _min_unit_log2(tile: Tile, pats: list[AccessPattern]) -> int:
    return max([4, tile.elem_bytes] + [p.width_bytes for p in pats]).bit_length() - 1


def _cute_brute_force_min(tile: Tile, pats: list[AccessPattern]) -> int:
    base = worst_degree(evaluate(tile, pats, None))
    fam = _cute_family(tile, _min_unit_log2(tile, pats))
    return min([base] + [worst_degree(evaluate(tile, pats, sw)) for sw in fam])


def _rowxor_brute_force_min(tile: Tile, pats: list[AccessPattern]) -> int:
    base = worst_degree(evaluate(tile, pats, None))
    fam = _rowxor_family(tile, _min_unit_log2(tile, pats))
    return min([base] + [worst_degree(evaluate(tile, pats, sw)) for sw in fam])


@st.composite
def small_problem(draw: st.DrawFn, max_rows: int) -> tuple[Tile, list[AccessPattern]]:
    width = draw(st.sampled_from([4, 8, 16]))
    rows = draw(st.sampled_from([r for r in (2, 3, 4, 5, 6, 8, 16) if r <= max_rows]))
    # f32 rows; odd row lengths only for 4-byte accesses (wider ones need aligned rows)
    cols = draw(st.sampled_from([8, 16, 24, 32] + ([9, 33] if width == 4 else [])))
    tile = Tile(rows, cols, 4)
    step = width // 4  # elements per vector
    pats: list[AccessPattern] = []
    for p in range(draw(st.integers(1, 2))):
        table = draw(
            st.lists(
                st.one_of(
                    st.none(),
                    st.tuples(st.integers(0, rows - 1), st.integers(0, cols // step - 1)),
                ),
                min_size=32,
                max_size=32,
            )
        )
        frozen = tuple(None if t is None else (t[0], t[1] * step) for t in table)
        pats.append(AccessPattern(f"p{p}", lambda l, i, f=frozen: f[l], width))
    return tile, pats


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(small_problem(max_rows=16))
def test_cute_synthesis_matches_exhaustive_search(
    problem: tuple[Tile, list[AccessPattern]],
) -> None:
    tile, pats = problem
    res = synthesize(tile, pats, family="cute")
    base = worst_degree(evaluate(tile, pats, None))
    best = _cute_brute_force_min(tile, pats)
    assert res.baseline_degree == base
    if base <= 1:
        assert res.status == "identity"
    elif best < base:
        assert res.status == "found" and res.degree == best and res.swizzle is not None
        assert worst_degree(evaluate(tile, pats, res.swizzle)) == best
        assert _is_permutation(tile, res.swizzle)
    else:
        assert res.status == "none" and res.swizzle is None


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(small_problem(max_rows=4))
def test_rowxor_synthesis_matches_exhaustive_search(
    problem: tuple[Tile, list[AccessPattern]],
) -> None:
    tile, pats = problem
    res = synthesize(tile, pats, family="rowxor")
    base = worst_degree(evaluate(tile, pats, None))
    best = _rowxor_brute_force_min(tile, pats)
    if base <= 1:
        assert res.status == "identity"
    elif best < base:
        assert res.status == "found" and res.degree == best and res.swizzle is not None
        assert worst_degree(evaluate(tile, pats, res.swizzle)) == best
        assert _is_permutation(tile, res.swizzle)
    else:
        assert res.status == "none" and res.swizzle is None
