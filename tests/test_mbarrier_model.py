"""Tests for tilesafe.semantics.hw.mbarrier, the executable model of one PTX mbarrier.

Sequences marked "seen on an H100" reproduce what test_wait.parity returned on real hardware
(driver 580.159.04; docs/hardware-rules.md), so they check the model against the machine.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tilesafe.semantics.hw.mbarrier import COUNT_MAX, TX_MAX, MbarrierError, MbarrierState


def err(code: str):
    return pytest.raises(MbarrierError, match=f"^{code} ")


def test_parity_waits_right_after_init() -> None:
    # Seen on an H100: right after init, parity 1 passes at once and parity 0 does not.
    b = MbarrierState().init(1)
    assert b.test_wait_parity(1) is True  # the "phase before phase 0": the wrong-parity trap
    assert b.test_wait_parity(0) is False
    b, token = b.arrive()
    assert token == 0
    assert b.test_wait_parity(0) is True and b.test_wait_parity(1) is False
    assert b.test_wait(token) is True


def test_tma_round_seen_on_h100() -> None:
    # count 2: expect_tx 32; arrive; complete 32 -> still pending; arrive -> complete.
    b = MbarrierState().init(2).expect_tx(32)
    b, _ = b.arrive()
    assert not b.test_wait_parity(0)
    b = b.complete_tx(32)
    assert not b.test_wait_parity(0)
    b, _ = b.arrive()
    assert b.test_wait_parity(0) and not b.test_wait_parity(1)
    assert (b.pending, b.tx, b.parity) == (2, 0, 1)


def test_copy_may_complete_before_expect_tx() -> None:
    # Seen on an H100: complete_tx first leaves tx-count negative and the phase open.
    b = MbarrierState().init(1).complete_tx(64)
    assert b.tx == -64 and not b.test_wait_parity(0)
    b, _ = b.arrive()
    assert not b.test_wait_parity(0)
    # The H100 completed the phase on the next expect_tx(64); PTX does not say so: refuse.
    with err("TS416"):
        b.expect_tx(64)
    b2, _ = MbarrierState().init(1).complete_tx(64).arrive_expect_tx(64)
    assert b2.test_wait_parity(0)  # arrive.expect_tx: expect first, then the arrival completes


def test_init_count_range() -> None:
    assert MbarrierState().init(COUNT_MAX).pending == 2**20 - 1
    for bad in (0, 2**20, -1):
        with err("TS411"):
            MbarrierState().init(bad)


def test_uninitialised_and_reinit() -> None:
    fresh = MbarrierState()
    with err("TS401"):
        fresh.arrive()
    with err("TS401"):
        fresh.test_wait_parity(0)
    with err("TS401"):
        fresh.complete_tx(16)
    live = fresh.init(4)
    with err("TS402"):
        live.init(4)
    assert live.inval().init(2).expected == 2
    with err("TS401"):
        live.inval().arrive()


def test_arrival_count_rules() -> None:
    b = MbarrierState().init(3)
    with err("TS403"):
        b.arrive(0)
    with err("TS403"):
        b.arrive(4)  # more arrivals than pending: undefined in PTX
    b, _ = b.arrive(2)
    with err("TS403"):
        b.arrive(2)
    b, _ = b.arrive(1)
    assert b.parity == 1 and b.pending == 3


def test_tx_count_limits() -> None:
    b = MbarrierState().init(1)
    with err("TS404"):
        b.expect_tx(TX_MAX + 1)  # operand out of range
    full = b.expect_tx(TX_MAX)
    with err("TS404"):
        full.expect_tx(1)  # tx-count would pass 2**20 - 1
    with err("TS404"):
        b.complete_tx(TX_MAX).complete_tx(1)  # below -(2**20 - 1)
    with err("TS404"):
        b.arrive_expect_tx(2**20)
    with err("TS404"):
        b.expect_tx(-1)


def test_parity_operand_must_be_a_bit() -> None:
    with err("TS415"):
        MbarrierState().init(1).test_wait_parity(2)


def test_states_are_hashable_values() -> None:
    a, _ = MbarrierState().init(2).arrive()
    b = MbarrierState().init(2).expect_tx(8).complete_tx(8)
    b, _ = b.arrive()
    assert a == b and hash(a) == hash(b)
    assert len({a, b, MbarrierState()}) == 2


ops = st.lists(
    st.tuples(
        st.sampled_from(["arrive", "expect", "complete", "arrive_expect"]), st.integers(0, 64)
    ),
    max_size=40,
)


@settings(max_examples=300, deadline=None)
@given(count=st.integers(1, 4), script=ops)
def test_phase_flips_exactly_when_arrivals_and_tx_reach_zero(count: int, script) -> None:
    b = MbarrierState().init(count)
    for op, n in script:
        try:
            if op == "arrive":
                nb, _ = b.arrive(max(1, n % 3))
            elif op == "expect":
                nb = b.expect_tx(n)
            elif op == "complete":
                nb = b.complete_tx(n)
            else:
                nb, _ = b.arrive_expect_tx(n)
        except MbarrierError as e:
            assert e.code in ("TS403", "TS416")
            continue
        # the pending count and tx-count this operation would leave, before any phase flip
        if op in ("arrive", "arrive_expect"):
            arrivals = max(1, n % 3) if op == "arrive" else 1
            raw_pending = b.pending - arrivals
        else:
            raw_pending = b.pending
        raw_tx = b.tx + (n if op in ("expect", "arrive_expect") else -n if op == "complete" else 0)
        flipped = nb.parity != b.parity
        assert flipped == (raw_pending == 0 and raw_tx == 0)
        if flipped:
            assert (nb.pending, nb.tx) == (nb.expected, 0)
        else:
            assert (nb.pending, nb.tx) == (raw_pending, raw_tx)
        assert not (nb.pending == 0 and nb.tx == 0)  # a finished phase never lingers
        assert nb.test_wait_parity(b.parity) is flipped
        b = nb


@settings(max_examples=150, deadline=None)
@given(
    chunks=st.lists(st.integers(1, 4096), min_size=1, max_size=6),
    early=st.integers(0, 6),
)
def test_a_tma_load_completes_once_whatever_the_order(chunks: list[int], early: int) -> None:
    """A producer's arrive.expect_tx(B) and the copy's complete_tx pieces summing to B, with
    any number of pieces landing before the expect: the phase completes exactly at the end."""
    total = sum(chunks)
    b = MbarrierState().init(1)
    early = min(early, len(chunks))
    for c in chunks[:early]:
        b = b.complete_tx(c)
        assert not b.test_wait_parity(0)
    b, _ = b.arrive_expect_tx(total)
    for i, c in enumerate(chunks[early:]):
        assert not b.test_wait_parity(0)
        b = b.complete_tx(c)
        assert b.test_wait_parity(0) == (early + i == len(chunks) - 1)
    assert b.test_wait_parity(0) and b.tx == 0


def _pipeline(stages: int, iters: int, consumers: int, producer_start: int) -> bool:
    """CUTLASS PipelineTmaAsync in lock-step: full[s] count 1, empty[s] count `consumers`.
    Returns False when the first wait that should block passes (or one blocks forever)."""
    full = [MbarrierState().init(1) for _ in range(stages)]
    empty = [MbarrierState().init(consumers) for _ in range(stages)]
    for k in range(iters):
        s, phase = k % stages, (k // stages) % 2
        if not empty[s].test_wait_parity(phase ^ producer_start):
            return False
        full[s], _ = full[s].arrive_expect_tx(1024)
        # before the copy lands the consumer must still be blocked
        if full[s].test_wait_parity(phase):
            return False
        full[s] = full[s].complete_tx(1024)
        if not full[s].test_wait_parity(phase):
            return False
        for _ in range(consumers):
            empty[s], _ = empty[s].arrive()
    return True


def test_cutlass_producer_starts_at_parity_one() -> None:
    assert _pipeline(stages=2, iters=10, consumers=4, producer_start=1)
    # a producer waiting on parity 0 of a fresh empty barrier would block forever
    assert not _pipeline(stages=2, iters=10, consumers=4, producer_start=0)
