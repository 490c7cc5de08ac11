"""An exact, executable model of one PTX mbarrier object (Hopper, shared::cta).

Why: the barrier checker explores every interleaving of roles and the copy engine; each step
is one of these operations on an immutable, hashable state, so explored states can be
stored in sets. Anything PTX leaves undefined raises `MbarrierError` with a TS41x code
instead of guessing. Sources and wording: docs/hardware-rules.md (PTX ISA 9.7.13.15).

State (what PTX says the opaque 64-bit object tracks):
  phase parity        0 or 1; the phase number itself is not observable, only its parity
  pending arrivals    arrivals still needed to complete the current phase, 0..2**20-1
  expected arrivals   reloaded into `pending` whenever a phase completes, 1..2**20-1
  tx-count            outstanding async-transaction bytes, -(2**20-1)..2**20-1; it may go
                      negative because a copy may complete before its expect-tx is seen

A phase completes exactly when pending arrivals and tx-count are both zero; then, as one
atomic step, the parity flips and pending is reloaded from expected (tx-count stays 0).

Waiting on a parity (`mbarrier.test_wait/try_wait.parity p`): p names either the current
phase or the one just before it, by parity, and the wait succeeds iff that phase has
completed. Since the current phase is never complete (it would have flipped), the answer is
simply `p != current parity`. Right after init the current phase is phase 0 (parity 0), so
waiting on parity 1 -- read as "the phase before phase 0" -- succeeds at once, and waiting on
parity 0 blocks until the first phase completes. That is why a wait on the wrong parity is a
bug that passes silently, and why CUTLASS starts producers at parity 1 on empty buffers.

Codes (the same ones the interpreter and the barrier checker report):
  TS401  operation on an uninitialised (or invalidated) mbarrier
  TS402  init on a live mbarrier (undefined: PTX requires mbarrier.inval first)
  TS403  arrival count outside 1..2**20-1, or more arrivals than are pending (undefined)
  TS404  tx-count would leave -(2**20-1)..2**20-1, or a tx operand outside 0..2**20-1
         (libcu++'s precondition for barrier_expect_tx; PTX's operand is a u32)
  TS411  init count outside 1..2**20-1
  TS415  wait parity operand not 0 or 1
  TS416  expect-tx bringing tx-count back to zero after all arrivals (PTX does not say
         whether that completes the phase; tilesafe refuses to guess)
"""

from __future__ import annotations

from typing import NamedTuple

COUNT_MAX = 2**20 - 1
TX_MAX = 2**20 - 1
TX_MIN = -(2**20 - 1)

PTX_MBARRIER = (
    "PTX ISA 9.7.13.15 mbarrier (contents, phase completion, arrive, expect_tx, complete_tx, "
    "test_wait/try_wait), https://docs.nvidia.com/cuda/parallel-thread-execution/"
    "#parallel-synchronization-and-communication-instructions-mbarrier"
)


class MbarrierError(Exception):
    """An operation PTX forbids or leaves undefined on this state."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code} {message}")
        self.code = code
        self.message = message


class MbarrierState(NamedTuple):
    """One mbarrier; every operation returns a new state. Default: not initialised.

    A NamedTuple (immutable, and cheap to hash) so the explicit-state explorer can keep
    millions of them in its visited sets and use this model directly."""

    initialized: bool = False
    parity: int = 0
    pending: int = 0
    expected: int = 0
    tx: int = 0

    # -- lifecycle -------------------------------------------------------------------------
    def init(self, count: int) -> MbarrierState:
        """mbarrier.init: phase 0, pending = expected = count, tx-count 0."""
        if self.initialized:
            raise MbarrierError("TS402", "mbarrier.init on a live mbarrier (inval it first)")
        if not 1 <= count <= COUNT_MAX:
            raise MbarrierError("TS411", f"init count {count} is outside 1..{COUNT_MAX}")
        return MbarrierState(True, 0, count, count, 0)

    def inval(self) -> MbarrierState:
        """mbarrier.inval: the memory may be reused (or re-initialised) afterwards."""
        self._require_init("inval")
        return MbarrierState()

    # -- arrivals and transactions ----------------------------------------------------------
    def arrive(self, count: int = 1) -> tuple[MbarrierState, int]:
        """mbarrier.arrive: pending -= count. Returns (new state, token).

        The token is the parity of the phase the arrival belonged to (PTX returns an opaque
        value capturing the phase before the arrive-on); `test_wait(token)` later asks
        whether that phase completed.
        """
        self._require_init("arrive")
        if not 1 <= count <= COUNT_MAX:
            raise MbarrierError("TS403", f"arrival count {count} is outside 1..{COUNT_MAX}")
        if count > self.pending:
            raise MbarrierError(
                "TS403", f"{count} arrival(s) but only {self.pending} pending (undefined behaviour)"
            )
        token = self.parity
        return self._replace(pending=self.pending - count)._settle(), token

    def expect_tx(self, nbytes: int) -> MbarrierState:
        """mbarrier.expect_tx: tx-count += nbytes.

        PTX names arrive-on and complete-tx as the steps that may complete a phase, not
        expect-tx; the one case where it matters (tx back to zero after all arrivals; an
        H100 completes the phase then) raises TS416 rather than guessing.
        """
        self._require_init("expect_tx")
        new_tx = self._tx_after(nbytes, +1)
        if new_tx == 0 and self.pending == 0 and nbytes != 0:
            raise MbarrierError(
                "TS416",
                "expect_tx returns tx-count to zero after all arrivals: whether the phase completes"
                " is not specified by PTX",
            )
        return self._replace(tx=new_tx)

    def arrive_expect_tx(self, nbytes: int) -> tuple[MbarrierState, int]:
        """mbarrier.arrive.expect_tx: expect-tx first, then one arrive-on (count 1)."""
        self._require_init("arrive.expect_tx")
        staged = self._replace(tx=self._tx_after(nbytes, +1))
        return staged.arrive(1)

    def complete_tx(self, nbytes: int) -> MbarrierState:
        """complete-tx (done by the copy engine, or mbarrier.complete_tx): tx-count -= nbytes."""
        self._require_init("complete_tx")
        return self._replace(tx=self._tx_after(nbytes, -1))._settle()

    # -- waiting ------------------------------------------------------------------------------
    def test_wait_parity(self, parity: int) -> bool:
        """mbarrier.test_wait.parity / try_wait.parity: has the phase of `parity` completed?

        True iff `parity` differs from the current phase's parity (it then names the
        immediately preceding, completed phase). Does not change the state.
        """
        self._require_init("test_wait.parity")
        if parity not in (0, 1):
            raise MbarrierError("TS415", f"wait parity {parity} is not 0 or 1")
        return parity != self.parity

    def test_wait(self, token: int) -> bool:
        """Token form of test_wait: has the phase the arrival (token) belonged to completed?"""
        return self.test_wait_parity(token)

    # -- helpers ------------------------------------------------------------------------------
    def _require_init(self, op: str) -> None:
        if not self.initialized:
            raise MbarrierError("TS401", f"{op} on an uninitialised mbarrier")

    def _tx_after(self, nbytes: int, sign: int) -> int:
        if not 0 <= nbytes <= TX_MAX:
            raise MbarrierError("TS404", f"tx operand {nbytes} is outside 0..{TX_MAX}")
        new_tx = self.tx + sign * nbytes
        if not TX_MIN <= new_tx <= TX_MAX:
            raise MbarrierError(
                "TS404", f"tx-count would become {new_tx}, outside {TX_MIN}..{TX_MAX}"
            )
        return new_tx

    def _settle(self) -> MbarrierState:
        if self.pending == 0 and self.tx == 0:
            return self._replace(parity=self.parity ^ 1, pending=self.expected)
        return self
