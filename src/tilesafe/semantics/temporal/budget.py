"""One global budget for the explicit-state searches of one verification: states, seconds
and memory.

Why: a search's state space can grow without bound in practice (eight consumer roles over
eight stages reach gigabytes), and one kernel runs many searches (a few trip counts, the
level sets, tails, two checkers' semantics, counterexample replays). A per-search bound
does not bound their sum, and states alone bound neither time nor memory. Every search
charges this budget; when it runs out the search stops and the verdict is UNKNOWN (TS491)
with the reason and the `tilesafe verify` option that raises the limit -- never PROVED.

Exhaustion is sticky: once a limit is hit, every later charge fails at once, so the
remaining work of the verification ends quickly instead of starting new searches.
"""

from __future__ import annotations

import os
import resource
import time

BUDGET_CODE = "TS491"
CHECK_EVERY = 512  # states between time and memory checks (reading the clock is cheap,
# /proc less so)


class BudgetExceeded(Exception):
    """The verification budget is spent; `reason` names the limit and the option."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def _rss_bytes() -> int:
    """Resident set size of this process now (Linux /proc), else the peak so far."""
    try:
        with open("/proc/self/statm", encoding="ascii") as f:
            pages = int(f.read().split()[1])
        return pages * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


class Budget:
    """States, wall-clock seconds and memory (resident size of the process, MB) allowed to
    one verification. None means unlimited. Memory is the process's size, not growth: a
    long-lived process reuses freed memory, so growth would not show a search's size."""

    def __init__(self, max_states: int | None = None, seconds: float | None = None,
                 memory_mb: int | None = None) -> None:
        self.max_states = max_states
        self.seconds = seconds
        self.memory_mb = memory_mb
        self.states = 0
        self.start = time.monotonic()
        self.exceeded: str | None = None
        self._next_check = 1  # the first state checks too; then every CHECK_EVERY

    def charge(self, states: int = 1) -> None:
        """Account for explored states; raises BudgetExceeded when a limit is passed."""
        if self.exceeded is not None:
            raise BudgetExceeded(self.exceeded)
        self.states += states
        if self.max_states is not None and self.states > self.max_states:
            self._stop(f"state budget of {self.max_states} states spent (raise --max-states)")
        if self.states >= self._next_check:
            self._next_check = self.states + CHECK_EVERY
            self.check()

    def check(self) -> None:
        """Time and memory; raises BudgetExceeded when either is spent."""
        if self.exceeded is not None:
            raise BudgetExceeded(self.exceeded)
        if self.seconds is not None and time.monotonic() - self.start > self.seconds:
            self._stop(f"time budget of {self.seconds:g} s spent (raise --timeout)")
        if self.memory_mb is not None:
            if _rss_bytes() / (1 << 20) > self.memory_mb:
                self._stop(f"memory budget of {self.memory_mb} MB spent (raise --max-memory)")

    def remaining_ms(self, cap: int) -> int:
        """A solver query's timeout: at most `cap` ms and at most the time left (>= 1)."""
        if self.seconds is None:
            return cap
        left = self.seconds - (time.monotonic() - self.start)
        return max(1, min(cap, int(left * 1000)))

    def _stop(self, reason: str) -> None:
        self.exceeded = reason
        raise BudgetExceeded(reason)


def unlimited() -> Budget:
    return Budget()
