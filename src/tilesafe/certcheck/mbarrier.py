"""The PTX mbarrier rules, written again from the PTX ISA (9.7.13.15) for the checker.

Why again: the explorer's model (semantics/hw/mbarrier.py) is what is being checked; this is a
second, deliberately plain reading of the same rules over lists of integers
[initialised, parity, pending, expected, tx]. A step that breaks a rule raises Illegal.
"""

from __future__ import annotations

LIMIT = (1 << 20) - 1  # arrival counts and the tx-count are 20-bit quantities


class Illegal(Exception):
    """A recorded step the mbarrier rules do not allow."""


def _phase_done(b: list[int]) -> None:
    # a phase completes when nothing is pending and no transaction byte is outstanding
    if b[2] == 0 and b[4] == 0:
        b[1] ^= 1
        b[2] = b[3]


def _add_tx(b: list[int], nbytes: int, sign: int) -> None:
    if nbytes < 0 or nbytes > LIMIT:
        raise Illegal(f"tx operand {nbytes} outside 0..{LIMIT}")
    b[4] += sign * nbytes
    if abs(b[4]) > LIMIT:
        raise Illegal(f"tx-count {b[4]} outside -{LIMIT}..{LIMIT}")


def step(b: list[int], op: str, args: list) -> None:
    """Apply one recorded operation to barrier `b` in place."""
    if op == "init":
        (count,) = args
        if b[0]:
            raise Illegal("init of an initialised barrier")
        if not 1 <= count <= LIMIT:
            raise Illegal(f"init count {count}")
        b[:] = [1, 0, count, count, 0]
        return
    if not b[0]:
        raise Illegal(f"{op} before init")
    if op == "wait":
        (parity,) = args
        if parity not in (0, 1) or parity == b[1]:
            raise Illegal(f"wait on parity {parity} passed while the current phase has "
                          f"parity {b[1]} (it has not completed)")
    elif op == "arrive":
        n, tx = args
        if tx is None:
            if not 1 <= n <= b[2]:
                raise Illegal(f"{n} arrivals with {b[2]} pending")
            b[2] -= n
            _phase_done(b)
        else:
            for _ in range(n):
                _add_tx(b, tx, +1)
                if b[2] < 1:
                    raise Illegal("arrival with nothing pending")
                b[2] -= 1
                _phase_done(b)
    elif op == "expect_tx":
        count, tx = args
        for _ in range(count):
            _add_tx(b, tx, +1)
            if b[4] == 0 and b[2] == 0 and tx != 0:
                raise Illegal("expect_tx returning tx-count to 0 after every arrival")
    elif op == "complete_tx":
        (nbytes,) = args
        _add_tx(b, nbytes, -1)
        _phase_done(b)
    else:
        raise Illegal(f"unknown operation {op!r}")


def well_formed(b: list[int]) -> str | None:
    """Why a barrier value is impossible (None when it is fine)."""
    init, parity, pending, expected, tx = b
    if not init:
        return None if b == [0, 0, 0, 0, 0] else "uninitialised barrier with contents"
    if parity not in (0, 1):
        return f"parity {parity}"
    if not 1 <= expected <= LIMIT or not 0 <= pending <= expected:
        return f"pending {pending} of expected {expected}"
    if abs(tx) > LIMIT:
        return f"tx-count {tx}"
    return None
