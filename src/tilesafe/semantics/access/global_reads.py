"""Reads of an `out` tensor see a write: every element of an `out` tensor the kernel reads
was written before the read, by a write ordered before it.

Why: an `out` tensor's contents before the launch are undefined (tilesafe.jit allocates it,
the GPU leaves whatever was there). A kernel that reads one of its elements before any write
of it -- `y[i] = y[i] + x[i]` on an `out` y (meant `inout`), a block reading its neighbour
in its own tile before the `sync` that follows the neighbour's store -- computes with
garbage on every schedule. It is no race (TS217: nothing else writes the element meanwhile)
and every access is in bounds, so no other property sees it; without an `ensures` nothing
did. This is the global-memory twin of the ownership checker's TS306 (no read of shared
memory nothing wrote).

The claim, for every size `where` allows: for every read instance r of element e of an
`out` tensor, some write instance w of e happens before r. Happens-before here is the
sufficient one of semantics/access/global_races.py (`Orders`) plus the direction of program
order within one thread:

* program order: w and r run in the same block and thread, and w comes first -- an earlier
  iteration of the innermost loop they share at which their iteration vectors differ
  (loop variables increase: steps are positive), or the same iterations of every loop they
  share and w earlier in the text (a statement reads its operands before it stores:
  `Place.seq`);
* a `sync` epoch: w's thread had passed fewer `sync`s before w than r's thread before r;
* a named-barrier phase (`Orders._named`, the direction w -> r).

Both directions of the verdict:

* proof: the reads on the over-approximated instance sets, minus the (reader, element) pairs
  some write on the *under*-approximated sets precedes, must be empty;
* refutation: a read on the under-approximated sets that no write on the over-approximated
  sets precedes, when that happens-before is all of it: no TMA copy on either side (its
  global side is asynchronous), no mbarrier or named-barrier hand-off in the kernel, `sync`
  counts known, every access at one place of the text. Otherwise UNKNOWN.

Gathered indices (a write or read through an index tensor) are never used to cover a read,
and a kernel with one is never refuted here: the elements they touch depend on data.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import Enum

import islpy as isl

from tilesafe.semantics.access.access import AccessRelation
from tilesafe.semantics.access.global_races import NO_SEQ, Orders, Side, _less

IN, OUT = isl.dim_type.in_, isl.dim_type.out


class Reads(str, Enum):
    WRITTEN = "written"  # every read has a write before it, for every allowed size
    UNWRITTEN = "unwritten"  # a read (under-approximated) no write precedes, exactly
    OPEN = "open"  # neither could be shown


@dataclass(frozen=True)
class ReadFinding:
    """The verdict on one tensor; for UNWRITTEN the read and its unwritten (instance ->
    element) pairs on the under-approximated instances; for OPEN the reason."""

    outcome: Reads
    reader: AccessRelation | None = None
    unwritten: isl.Map | None = None
    reason: str = ""
    evidence: dict[str, object] = field(default_factory=dict)


def program_order(orders: Orders, w: Side, r: Side, space: isl.Space) -> isl.Map:
    """Pairs (w instance -> r instance) of one block and thread where w runs first in that
    thread (see the module doc); empty when either access has no single place in the text."""
    if NO_SEQ in (w.place.seq, r.place.seq):
        return isl.Map.empty(space)
    nb = orders.nblock
    same = isl.Map.universe(space)
    for k in range(nb + 1):  # block coordinates and the thread
        same = same.equate(IN, k, OUT, k)
    shared = 0
    for a, b in zip(w.place.loops, r.place.loops, strict=False):
        if a != b:
            break
        shared += 1
    result = isl.Map.empty(space)
    prefix = same
    for j in range(shared):  # equal on the loops outside j, w's iteration of j earlier
        result = result.union(prefix.order_lt(IN, nb + 1 + j, OUT, nb + 1 + j))
        prefix = prefix.equate(IN, nb + 1 + j, OUT, nb + 1 + j)
    if w.place.seq < r.place.seq:
        result = result.union(prefix)
    return result


def happens_before(orders: Orders, w: Side, r: Side, space: isl.Space) -> isl.Map:
    """w instance -> r instance pairs of one block where w happens before r, by program
    order, a `sync` epoch or a named-barrier phase. A TMA copy is ordered with nothing."""
    if w.tma or r.tma:
        return isl.Map.empty(space)
    same_block = isl.Map.universe(space)
    for k in range(orders.nblock):
        same_block = same_block.equate(IN, k, OUT, k)
    result = program_order(orders, w, r, space)
    if w.epoch is not None and r.epoch is not None:
        result = result.union(_less(w.epoch, r.epoch).intersect(same_block))
    return result.union(orders._named(w, r).intersect(same_block))


def _written_before(orders: Orders, w: Side, r: Side, under_w: bool) -> isl.Map | None:
    """reader instance -> element pairs of r's relation that some instance of w writes
    before the read (w on its under- or over-approximated instances); None when w cannot
    cover anything (no affine relation, or gathered indices)."""
    wrel = w.access.relation_under if under_w else w.access.relation
    rrel = r.access.relation
    if wrel is None or rrel is None or w.access.gathers or r.access.gathers:
        return None
    space = wrel.domain().get_space().map_from_domain_and_range(rrel.domain().get_space())
    hb = happens_before(orders, w, r, space)
    hb = hb.intersect_domain(wrel.domain()).intersect_range(rrel.domain())
    return hb.reverse().apply_range(wrel).intersect(rrel)


def unwritten_reads(orders: Orders, writers: Sequence[Side], readers: Sequence[Side]
                    ) -> ReadFinding:
    """Decide, for one `out` tensor, whether every read has a write of its element before
    it (module doc): WRITTEN on over-approximated reads, UNWRITTEN on under-approximated
    ones when the ordering is exact, OPEN otherwise."""
    evidence: dict[str, object] = {
        "reads": {_label(r.access): str(r.access.relation) for r in readers},
        "writes": {_label(w.access): str(w.access.relation) for w in writers},
        "query": "for each read R: is_empty(R minus { (r, e) : some write W of e happens "
                 "before r (program order, sync epoch, named-barrier phase) })",
    }
    left: dict[str, str] = {}
    evidence["unwritten"] = left
    opened: list[tuple[Side, str]] = []
    for r in readers:
        if r.access.relation is None:
            opened.append((r, f"the read has no affine relation: {r.access.error}"))
            continue
        rest = r.access.relation
        for w in writers:
            got = _written_before(orders, w, r, under_w=True)
            if got is not None:
                rest = rest.subtract(got)
        if rest.is_empty():
            continue
        left[_label(r.access)] = str(rest.coalesce())
        exact = _exact(orders, writers, r)
        if exact is not None:
            opened.append((r, exact))
            continue
        assert r.access.relation_under is not None
        rest_u = r.access.relation_under
        for w in writers:
            got = _written_before(orders, w, r, under_w=False)
            assert got is not None  # _exact checked every writer is modelled
            rest_u = rest_u.subtract(got)
        if not rest_u.is_empty():
            return ReadFinding(Reads.UNWRITTEN, r.access, rest_u, evidence=evidence)
        dropped = "; ".join(r.access.dropped + tuple(g for w in writers
                                                    for g in w.access.dropped))
        opened.append((r, "unless an unmodelled guard prevents it: "
                          f"{dropped or 'an unmodelled guard'}"))
    if opened:
        r, why = opened[0]
        return ReadFinding(Reads.OPEN, r.access, reason=why, evidence=evidence)
    return ReadFinding(Reads.WRITTEN, evidence=evidence)


def _exact(orders: Orders, writers: Sequence[Side], r: Side) -> str | None:
    """None when happens-before is all of the ordering between r and every write of the
    tensor (a read no such write precedes is then unwritten); else why not."""
    if r.tma or any(w.tma for w in writers):
        return ("a TMA copy's global side is asynchronous, and what orders it (its mbarrier, "
                "wait_group) is outside this model")
    if orders.where.hand_offs:
        return ("the kernel hands off through an mbarrier or a named barrier, which may "
                "order a write before the read in a way this model does not decide")
    if r.epoch is None or any(w.epoch is None for w in writers):
        return ("the number of `sync`s before an access is not an affine function of the "
                "instance (a `sync` under a condition or in a role)")
    if NO_SEQ in (r.place.seq, *(w.place.seq for w in writers)):
        return "an access sits at two places of the text"
    if r.access.gathers or any(w.access.gathers or w.access.relation is None
                               for w in writers):
        return "a write or the read goes through an index tensor or has no affine form"
    return None


def _label(a: AccessRelation) -> str:
    return f"{a.name}@{a.span.line}:{a.span.col}"
