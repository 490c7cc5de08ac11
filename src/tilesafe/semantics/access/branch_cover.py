"""Coverage through the two branches of a data-dependent `if`: `if x[i] > 0.0 { y[i] = x[i] }
else { y[i] = 0.0 }` writes y[i] on every instance, whatever the data.

Why: a guard with no Presburger form (it reads a float) is dropped from the over-
approximated instance sets and empties the under-approximated ones (semantics/access/
access.py), so each branch alone surely writes nothing and coverage (TS212) was left
unknown (TS291) on a correct kernel. But an instance that reaches the `if` runs exactly one
of its branches: when a write in the `then` branch and one in the `else` branch touch the
same elements from the same instances once the condition is set aside -- their over-
approximated relations are equal, and every guard either of them dropped is a part of that
condition -- the two together write exactly that relation, for every value of the data.
"""

from __future__ import annotations

from collections.abc import Sequence

import islpy as isl

from tilesafe.frontend.span import Span
from tilesafe.semantics.access.access import AccessRelation, Branch

IN = isl.dim_type.in_


def written_by_branch_pairs(writers: Sequence[AccessRelation]) -> list[isl.Map]:
    """The relations (instance -> element, instance tuple unnamed) that a pair of writes in
    opposite branches of one data-dependent `if` surely writes together (module doc)."""
    out = []
    for i, a in enumerate(writers):
        for b in writers[i + 1:]:
            split = _opposite(a, b)
            if split is None or a.relation is None or b.relation is None:
                continue
            if a.gathers or b.gathers or a.error or b.error:
                continue
            if not a.dropped or not all(_inside(g, split.cond) for g in a.dropped + b.dropped):
                continue
            ra, rb = _plain(a.relation), _plain(b.relation)
            if ra.is_equal(rb):
                out.append(ra)
    return out


def _opposite(a: AccessRelation, b: AccessRelation) -> Branch | None:
    """The `if` whose opposite branches a and b sit in, all their other branches equal."""
    if len(a.branches) != len(b.branches) or a.dims != b.dims:
        return None
    differ = [(x, y) for x, y in zip(a.branches, b.branches, strict=True) if x != y]
    if len(differ) != 1:
        return None
    x, y = differ[0]
    if x.if_id != y.if_id or x.then == y.then or x.cond is None:
        return None
    return x


def _inside(dropped: str, cond: Span) -> bool:
    """Is a dropped guard ("guard at L:C: why", semantics/expr/affine.py) a part of `cond`?"""
    head = dropped.removeprefix("guard at ").split(":", 2)
    try:
        line, col = int(head[0]), int(head[1])
    except (IndexError, ValueError):
        return False
    return (cond.line, cond.col) <= (line, col) <= (cond.end_line, cond.end_col)


def _plain(rel: isl.Map) -> isl.Map:
    """The relation with its instance tuple unnamed (each access names its own)."""
    return rel.reset_tuple_id(IN)
