"""Leaf ranges narrowed by a question's hypotheses.

Why: a leaf's declared range covers every instance the validator considers -- a loop
counter's reaches past the IR's trip count (the PTX loop is checked to stop in time), a block
index's reaches the hardware's grid limit. A particular question assumes more: the
instruction runs, so the counter is below the trip count and `block.z < B <= 64`. Interval
analysis under those facts shows a 32-bit address computation exact where the declared
ranges cannot (lift.py), which turns a rank-3 row-major address -- three products of 32-bit
registers, too much for a bit-blaster -- into the specification's own integer expression.

Only comparisons of one leaf's reading with a term whose interval is known are used
(`uint(n) < 32`, `uint(ctaid.z) < sint(s_B)`, `sint(s_M) <= 4096`), twice over so that one
bound may rest on another. The bounds are valid only inside questions that assume `hyps`.
"""

from __future__ import annotations

from tilesafe.codegen.validate import encode
from tilesafe.codegen.validate.encode import Bounds
from tilesafe.codegen.validate.terms import Term


def bounds_from(hyps: list[Term]) -> Bounds:
    bounds: Bounds = {}
    facts = _conjuncts(hyps)
    for _ in range(2):
        for h in facts:
            _narrow(h, bounds)
    return bounds


def _conjuncts(hyps: list[Term]) -> list[Term]:
    """The hypotheses with every conjunction opened: an execution condition is one `and_`
    of the enclosing loops' bounds, roles and guards, each of them a fact of the question."""
    out: list[Term] = []
    todo = list(reversed(hyps))
    while todo:
        h = todo.pop()
        if h.op == "and_":
            todo.extend(reversed(h.args))
        else:
            out.append(h)
    return out


def _narrow(h: Term, bounds: Bounds) -> None:
    if h.op not in ("ilt", "ile"):
        return
    a, b = h.args
    strict = 1 if h.op == "ilt" else 0
    if _is_reading(a):
        _bound(a, None, encode.intervals([b], bounds)[id(b)][1] - strict, bounds)
    if _is_reading(b):
        _bound(b, encode.intervals([a], bounds)[id(a)][0] + strict, None, bounds)


def _is_reading(t: Term) -> bool:
    return t.op in ("sint", "uint") and t.args[0].op == "leaf"


def _bound(reading: Term, lo: int | None, hi: int | None, bounds: Bounds) -> None:
    leaf = reading.args[0]
    signed = reading.op == "sint"
    klo, khi = encode.leaf_range(leaf, signed, bounds)
    new = (max(klo, lo) if lo is not None else klo, min(khi, hi) if hi is not None else khi)
    if new[0] <= new[1]:
        bounds[str(leaf.val)] = (signed, *new)
