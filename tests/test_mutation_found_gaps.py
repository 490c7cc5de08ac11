"""Tests that mutating tilesafe's own Python showed were missing (bench/python_mutation.py,
cosmic-ray on a sample of each module's mutants against its targeted tests; results in
docs/mutation.md). Each test names the surviving mutant it kills."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from tilesafe.checkers import layout
from tilesafe.checkers.obligation import Obligation, Severity, Verdict
from tilesafe.checkers.registry import CheckOptions
from tilesafe.frontend.load import compile_source
from tilesafe.semantics.expr import fp
from tilesafe.semantics.hw.mbarrier import COUNT_MAX, MbarrierError, MbarrierState
from tilesafe.semantics.layout import layout_isl as LI
from tilesafe.semantics.layout import layouts

# ---- semantics/hw/mbarrier.py -------------------------------------------------------------------


def test_expect_tx_raises_the_count_and_a_later_complete_tx_closes_the_phase():
    """Survivors: `and` -> `or` and `new_tx == 0` -> `>= 0` in expect_tx's TS416 test (no
    test called expect_tx on its own)."""
    s = MbarrierState().init(1).expect_tx(8192)
    assert (s.tx, s.pending, s.parity) == (8192, 1, 0)
    s, token = s.arrive()
    assert (s.tx, s.pending, s.parity, token) == (8192, 0, 0, 0)  # bytes still owed
    s = s.expect_tx(16)  # all arrivals in, tx goes up, not to zero: no TS416
    assert s.tx == 8208 and s.parity == 0
    s = s.complete_tx(8208)
    assert (s.tx, s.pending, s.parity) == (0, 1, 1)


def test_expect_tx_back_to_zero_after_all_arrivals_is_ts416():
    """The case PTX leaves open: a copy completed before its expect_tx, all arrivals in."""
    s = MbarrierState().init(1).complete_tx(64)
    s, _ = s.arrive()
    assert (s.tx, s.pending, s.parity) == (-64, 0, 0)
    with pytest.raises(MbarrierError) as err:
        s.expect_tx(64)
    assert err.value.code == "TS416"
    assert s.expect_tx(32).tx == -32  # not back to zero: fine


def test_expect_tx_back_to_zero_with_arrivals_pending_is_fine():
    """Survivor of the second run: `self.pending == 0` -> `>= 0` in expect_tx's TS416 test.
    The copy completed first (tx -64), the expect_tx returns tx to zero, but an arrival is
    still owed: the phase cannot complete yet, so nothing is left unspecified."""
    s = MbarrierState().init(2).complete_tx(64)
    s, _ = s.arrive()
    assert (s.tx, s.pending, s.parity) == (-64, 1, 0)
    s = s.expect_tx(64)
    assert (s.tx, s.pending, s.parity) == (0, 1, 0)
    s, _ = s.arrive()
    assert (s.tx, s.pending, s.parity) == (0, 2, 1)


def test_expect_tx_of_zero_bytes_is_not_ts416():
    """Survivors: `nbytes != 0` -> `>= 0` / `!= 1`: an empty expect_tx changes nothing, even
    on a (hand-built) state with nothing pending."""
    s = MbarrierState(True, 0, 0, 1, 0)
    assert s.expect_tx(0) == s


def test_arrive_accepts_the_largest_count():
    """Survivor: `count <= COUNT_MAX` -> `count < COUNT_MAX` in arrive."""
    s = MbarrierState().init(COUNT_MAX)
    s, _ = s.arrive(COUNT_MAX)
    assert (s.parity, s.pending) == (1, COUNT_MAX)
    with pytest.raises(MbarrierError) as err:
        MbarrierState().init(1).arrive(COUNT_MAX + 1)
    assert err.value.code == "TS403"


# ---- checkers/obligation.py ------------------------------------------------------------------


def test_an_obligation_is_immutable_and_untimed_by_default():
    """Survivors: `frozen=True` -> `False`, the default `seconds = 0.0` changed."""
    o = Obligation("c", "n", Verdict.PROVED, "m")
    assert o.seconds == 0.0 and o.message == "" and o.evidence == {}
    with pytest.raises(dataclasses.FrozenInstanceError):
        o.verdict = Verdict.REFUTED  # type: ignore[misc]


@pytest.mark.parametrize("verdict", list(Verdict))
@pytest.mark.parametrize("severity", list(Severity))
def test_failed_is_not_proved_and_an_error(verdict, severity):
    o = Obligation("c", "n", verdict, "m", severity=severity)
    assert o.failed == (verdict is not Verdict.PROVED and severity is Severity.ERROR)


# ---- semantics/expr/fp.py
# -------------------------------------------------------------------------

F = np.float32


def test_int_to_f32_ties_to_even_above_two_to_the_25():
    """Survivor: `1 << (shift - 1)` -> `1 ^ (shift - 1)` (the half-way point); only ties with
    at least two dropped bits tell them apart."""
    base = 1 << 25  # f32 spacing 4 here
    assert fp.int_to_f32(base + 2) == F(base)  # tie, even stays
    assert fp.int_to_f32(base + 6) == F(base + 8)  # tie, odd rounds up
    assert fp.int_to_f32(base + 3) == F(base + 4)
    assert fp.int_to_f32(-(base + 6)) == F(-(base + 8))


def test_f16_overflow_threshold_is_the_tie_above_65504():
    """Survivor: `abs(x) >= 65520.0` -> `>`."""
    assert fp.f32_to_f16_bits(F(65520.0)) == 0x7C00
    assert fp.f32_to_f16_bits(F(-65520.0)) == 0xFC00
    assert fp.f32_to_f16_bits(F(65519.996)) == 0x7BFF


def test_f16_bits_are_masked_to_16_bits():
    """Survivor: `bits & 0xFFFF` -> `bits * 0xFFFF` in f16_bits_to_f32."""
    assert fp.f16_bits_to_f32(0x3C00) == F(1.0)
    assert fp.f16_bits_to_f32(0x1_3C00) == F(1.0)
    assert fp.f16_bits_to_f32(0xC000) == F(-2.0)


def test_i32_conversion_saturates_at_both_ends():
    """Survivor: the constant I32_MIN changed."""
    assert fp.f32_to_i32(F(-3e9)) == -(2**31)
    assert fp.f32_to_i32(F(3e9)) == 2**31 - 1
    assert fp.f32_to_i32(F(-2.75)) == -2 and fp.f32_to_i32(F("nan")) == 0


@pytest.mark.parametrize("f", [fp.fmin, fp.fmax])
def test_min_max_nan_signed_zero_and_order(f):
    """Survivors: the `a == b` test and the comparison of fmin/fmax (negated, weakened)."""
    nan, pz, nz = F("nan"), F(0.0), F(-0.0)
    lo_first = f is fp.fmin
    assert f(nan, F(2.0)) == F(2.0) and f(F(2.0), nan) == F(2.0)
    assert f(F(1.0), F(3.0)) == (F(1.0) if lo_first else F(3.0))
    assert f(F(3.0), F(1.0)) == (F(1.0) if lo_first else F(3.0))
    for a, b in ((pz, nz), (nz, pz)):
        assert bool(np.signbit(f(a, b))) == lo_first  # -0 counts as below +0
    assert f(F(2.5), F(2.5)) == F(2.5)


# ---- checkers/layout.py ----------------------------------------------------------------------

LAYOUTS = """kernel k(x: global f32[N])
  where N > 0
  grid 1 block 32
{
  shared alias: f32[4, 4] layout (4,4):(1,2)
  shared below: f32[4, 4] layout (4,4):(4,-1)
  shared fine: f32[4, 4]
  x[0] = alias[0, 0] + below[0, 0] + fine[0, 0]
}
"""


def test_exhaustive_fallback_decides_aliasing_and_negative_offsets():
    """Survivors: every mutant of the enumeration fallback (used when ISL's budget runs
    out) lived, since no test reached it; reaching it showed that a negative offset crashed
    it (the interpreter's offset table refuses them) instead of refuting TS102."""
    bufs = {b.name: b for b in compile_source(LAYOUTS).kernels[0].shared}

    def decide(prop: str, name: str) -> LI.Result:
        buf = bufs[name]
        real = layouts.realize(buf.layout, buf.shape, buf.dtype.nbytes)
        return LI.enumerated(prop, buf.shape, layout._all_offsets(real), "budget", 0.0)

    inj = decide("injective", "alias")
    assert inj.verdict == LI.REFUTED
    assert (inj.witness["coord_a"], inj.witness["coord_b"], inj.witness["offset"]) == (
        (0, 1), (2, 0), 2)
    assert decide("injective", "fine").verdict == LI.PROVED
    low = decide("in_bounds", "below")
    assert low.verdict == LI.REFUTED
    assert (low.witness["coord"], low.witness["offset"]) == ((0, 1), -1)
    assert decide("injective", "below").verdict == LI.PROVED
    assert decide("in_bounds", "fine").verdict == LI.PROVED
    cover = LI.enumerated("covers", (2, 2), [0, 1, 3, 4], "budget", 0.0, codomain=4)
    assert cover.verdict == LI.REFUTED and cover.witness["offset"] == 2
    assert LI.enumerated("covers", (2, 2), [3, 1, 2, 0], "budget", 0.0,
                         codomain=4).verdict == LI.PROVED


def test_layout_checker_budget_method_and_capacity_gate():
    """Survivors of the 2026-11-26 run over checkers/layout.py: the ISL budget's arithmetic,
    the method named for an enumerated verdict, and the capacity obligation that follows
    only buffers whose offsets are all non-negative."""
    assert layout.isl_budget(1) == 1000
    assert layout.isl_budget(7) == 7 * layout.OPS_PER_MS
    assert layout.isl_budget(10_000) == layout.ISL_OPS_BEFORE_FALLBACK
    k = compile_source(LAYOUTS).kernels[0]
    bufs = {b.name: b for b in k.shared}
    enum = LI.enumerated("injective", (4, 4), list(range(16)), "budget", 0.0)
    assert layout._obligation(k, bufs["fine"], "x", enum, "TS101", 0.0, "").method == \
        "exhaustive"
    isl_res = LI.injective(layouts.realize(bufs["fine"].layout, (4, 4), 4))
    assert layout._obligation(k, bufs["fine"], "x", isl_res, "TS101", 0.0, "").method == "isl"
    obs = layout.check(k, CheckOptions())
    alias = next(o for o in obs if " alias " in o.name and "injective" in o.name)
    assert alias.verdict is Verdict.REFUTED and alias.code == "TS101" and alias.method == "isl"
    assert "clobber" in alias.message
    fine_inj = next(o for o in obs if " fine " in o.name and "injective" in o.name)
    assert fine_inj.verdict is Verdict.PROVED and fine_inj.code is None
    assert fine_inj.message == ""  # a proof carries no failure message
    assert fine_inj.method == "isl"  # decided by ISL: no enumeration
    names = [o.name for o in obs]
    assert not any("shared memory" in n for n in names)  # `below` maps under its base
    fine = compile_source(LAYOUTS.replace("f32[4, 4] layout (4,4):(4,-1)", "f32[4, 4]"))
    names = [o.name for o in layout.check(fine.kernels[0], CheckOptions())]
    assert any("shared memory" in n for n in names)


def test_capacity_obligation_counts_the_bytes_between_the_buffers():
    """Survivors: `used <= MAX` -> `is not`, and the `-` of the span computation."""
    text = LAYOUTS.replace("f32[4, 4] layout (4,4):(1,2)", "f32[4, 4]").replace(
        "f32[4, 4] layout (4,4):(4,-1)", "f32[4, 4] align 1024")
    ob = layout._capacity(compile_source(text).kernels[0])
    # alias at the base (64 bytes), below at the next 1024-aligned address, fine 128-aligned
    # after it: the span is 2176 + 64 - 1024 bytes
    assert ob.verdict is Verdict.PROVED and "shared memory 1216 bytes" in ob.name
    # Over the limit only once placed: the frontend's raw total (TS026 past 232448 bytes)
    # is 64 + 64 + 226 * 256 * 4 = 231552, the placed span 1152 + 231424 = 232576.
    big = text.replace("fine: f32[4, 4]", "fine: f32[226, 256]")
    ob = layout._capacity(compile_source(big).kernels[0])
    assert ob.verdict is Verdict.REFUTED and ob.code == "TS103"
    assert ob.counterexample == {"bytes": 2176 - 1024 + 226 * 256 * 4}


def test_min_max_fmax_of_two_negatives_is_the_larger():
    """Survivor of the second run: `a == b` -> `a >= b` in fmax (the signed-zero branch then
    took every a > b, and picked by a's sign)."""
    assert fp.fmax(np.float32(-1.0), np.float32(-2.0)) == np.float32(-1.0)
    assert fp.fmax(np.float32(-2.0), np.float32(-1.0)) == np.float32(-1.0)


def test_bf16_array_widening_is_a_shift():
    """Survivor of the second run: `<< 16` -> `** 16` in bf16_array_to_f32 (no test widened
    a whole array)."""
    bits = np.array([0x3F80, 0xC000, 0x0000, 0x7F80], dtype=np.uint16)
    got = fp.bf16_array_to_f32(bits)
    assert got.dtype == np.float32
    assert got.tolist() == [1.0, -2.0, 0.0, float("inf")]


def test_capacity_at_exactly_the_limit_is_fine():
    """Survivor: `used <= MAX` -> `used < MAX` (no buffer filled the limit exactly)."""
    src = """kernel full(x: out global f32[1])
  grid 1 block 32
{
  shared big: f32[58112]
  big[thread] = 1.0
  sync
  if thread == 0 {
    x[0] = big[1]
  }
}
"""
    assert 58112 * 4 == layout.MAX_SMEM_PER_BLOCK
    ob = layout._capacity(compile_source(src).kernels[0])
    assert ob.verdict is Verdict.PROVED, ob.message
