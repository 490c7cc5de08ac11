"""The shared objects a step may read or write, for partial-order reduction (por.py).

Why named constructors: two steps commute unless one writes an object the other touches;
the keys only need to be equal exactly when they name the same object. They stay small
tuples (cheap to hash, and persistent sets are memoised on them), but every key is built
here, so what each one means is written once.

A class's own holdings (its permissions, its unordered accesses, its observed phases) are
private: only its own steps and the joint `sync` change them, so they need no key.
"""

from __future__ import annotations

BLOCK = ("s",)  # the block-wide barrier `sync`: meets every step


def phase(inst: int) -> tuple:
    """A barrier instance's phase state (pending arrivals, tx-count, parity)."""
    return ("b", inst)


def pool(inst: int) -> tuple:
    """What arrives deposited into the barrier's current phase (ownership)."""
    return ("bp", inst)


def earmark(inst: int, cls: int) -> tuple:
    """What a completed phase of the barrier holds for a waiting class (ownership)."""
    return ("be", inst, cls)


def free(atom: int) -> tuple:
    """The free share of an atom (claimable by anyone)."""
    return ("F", atom)


def unfenced(atom: int) -> tuple:
    """An atom's unfenced generic-proxy writers."""
    return ("u", atom)


def groups(cls: int) -> tuple:
    """A class's bulk groups, and the shares its finished TMA stores gave back."""
    return ("g", cls)


def warp_meet(stmt_id: int) -> tuple:
    """The convergence point of an `arrive ..., one per warp` split over classes."""
    return ("w", stmt_id)


def named(index: int) -> tuple:
    """A named barrier's current phase (the classes arrived in it)."""
    return ("n", index)


def alive(cta: int) -> tuple:
    """That CTA `cta` of a cluster has not exited: every step of its classes writes it
    (the last one ends it), every step touching its memory or barriers from another CTA
    reads it (semantics/temporal/explore/ops/cluster.py)."""
    return ("cta", cta)
