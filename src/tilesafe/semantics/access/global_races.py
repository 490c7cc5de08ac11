"""Races on global memory: an element of an `out`/`inout` tensor written by one thread and
read by another with nothing ordering the two.

Why a model of its own: the ownership checker orders shared-memory accesses inside one block;
global memory is shared by every block of a launch, and nothing orders two blocks of one
launch (the language has no grid-wide barrier). So a global write and a read of the same
element by another thread are ordered only when both run in one block and

* the same thread runs both (program order: a statement reads its operands before it
  stores, `x[i] = x[i] + 1` is one thread's read then write), or
* a `sync` separates them: the thread of one passed fewer `sync`s before it than the thread
  of the other had passed before the other (semantics/temporal/sync_counts.py counts them as an
  affine function of the instance; this relies on every thread reaching every `sync`,
  which the barrier checker proves, TS420), or
* a named barrier does: the first thread's participations before its access are fewer than
  the phases the second thread had waited for before its access, for barriers whose phases
  are participation counts (sync_counts.phase_members).

That union is a *sufficient* happens-before (every pair it orders is ordered). It is used in
both directions of the verdict:

* proof: the pairs it leaves unordered, on over-approximated instance sets, must be empty;
* refutation: a pair in two different blocks is always a race; a pair in one block is a race
  only when the ordering is *exact* for it: both accesses are generic loads/stores with
  known `sync` counts and the kernel has no other hand-off (no mbarrier `wait`, no named
  barrier) that could order them. A TMA copy's global side runs asynchronously (a TMA store
  writes after the issuing thread moved on, a TMA load reads until its barrier completes),
  so it is ordered with nothing in its block here; a pair that needs one of these orderings
  is left open, never refuted.

Each access is the parametric ISL relation instance -> element of semantics/access/access.py;
`Places` adds, per access node, what orders it (sync and named-barrier counts, thread range).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import Enum

import islpy as isl

from tilesafe.frontend import ir, walk
from tilesafe.semantics.access.access import AccessRelation, Kind, Via
from tilesafe.semantics.access.gather import pair_facts
from tilesafe.semantics.expr.affine import AffineEnv, NotAffine, term
from tilesafe.semantics.temporal import sync_counts as sc
from tilesafe.semantics.value.value_terms import Inst

IN, OUT = isl.dim_type.in_, isl.dim_type.out
NO_SEQ = -1  # Place.seq of a node met at two places of the text
_TMA = (Via.TMA_LOAD, Via.TMA_STORE)


class NoPlace(Exception):
    """An access whose ordering facts the walk could not pin down (the caller answers
    UNKNOWN)."""


# ---- what orders each access -------------------------------------------------------------


@dataclass(frozen=True)
class Place:
    """The ordering facts of one access: its enclosing loops (uids, outermost first) and
    integer lets (to read count expressions as ISL terms over the access's instance
    space), the `sync`s and named-barrier participations its thread passed before it (None:
    not an affine function of the instance), its thread range (lo .. hi-1; one thread
    under `elect`), and `seq`, its position in the body's text (a statement's operands
    before the statement: a thread's program order within one iteration of the loops two
    accesses share, semantics/access/global_reads.py)."""

    loops: tuple[int, ...]
    lets: Mapping[int, ir.Expr]
    epoch: ir.Expr | None
    named: Mapping[int, ir.Expr | None]
    thread_lo: int
    thread_hi: int
    seq: int = 0


@dataclass(frozen=True)
class Places:
    """Per access node (`id` of the ir.Load / ir.Store / ir.TmaLoad / ir.TmaStore), its
    Place; every named-barrier use (for sync_counts.phase_members); and whether the kernel
    has a hand-off other than `sync` (an mbarrier wait or a named barrier), which makes the
    `sync` ordering of a block a lower bound only."""

    by_node: Mapping[int, Place]
    named_uses: tuple[tuple[ir.NamedBar, Inst], ...]
    hand_offs: bool


@dataclass
class _State:
    """The walk's position: thread range, loops, guards, lets and event counts (mutable:
    a statement moves the counts of the statements after it)."""

    lo: int
    hi: int
    elect: bool
    loops: tuple[ir.For, ...]
    guards: tuple[ir.Expr, ...]
    lets: dict[int, ir.Expr]
    counts: dict[sc.Channel, ir.Expr | None]
    # per channel a role made thread-dependent: the count before the roles and the thread
    # ranges that have had events since (a later role of other threads starts from it)
    split: dict[sc.Channel, tuple[ir.Expr, tuple[tuple[int, int], ...]]] = field(
        default_factory=dict)

    def place(self, seq: int = 0) -> Place:
        named = {c: e for c, e in self.counts.items() if c != sc.SYNC}
        return Place(tuple(f.var.uid for f in self.loops), dict(self.lets),
                     self.counts.get(sc.SYNC), named, self.lo, self.hi, seq)

    def child(self, **changes: object) -> _State:
        new = _State(self.lo, self.hi, self.elect, self.loops, self.guards, dict(self.lets),
                     dict(self.counts))  # `split` belongs to one statement list
        for k, v in changes.items():
            setattr(new, k, v)
        return new


def places(kernel: ir.Kernel) -> Places:
    """Walk the body once, counting events as semantics/value/value_exec.py does (the same
    sync_counts rules for loops, branches and roles)."""
    return _Walk(kernel).run()


class _Walk:
    def __init__(self, kernel: ir.Kernel) -> None:
        self.k = kernel
        self.by_node: dict[int, Place] = {}
        self.named_uses: list[tuple[ir.NamedBar, Inst]] = []
        self.hand_offs = False
        self.shared: set[int] = set()
        self.seq = 0

    def run(self) -> Places:
        stmts = list(walk.statements(self.k.body))
        ids = sorted({s.bar_id for s in stmts if isinstance(s, ir.NamedBar)})
        counts: dict[sc.Channel, ir.Expr | None] = {
            ch: ir.IntConst(self.k.span, ir.ScalarType.INT, 0) for ch in [sc.SYNC, *ids]}
        self.hand_offs = any(isinstance(s, (ir.Wait, ir.NamedBar)) for s in stmts)
        self.block(self.k.body, _State(0, self.k.block, False, (), (), {}, counts))
        by_node = {k: v for k, v in self.by_node.items() if k not in self.shared}
        return Places(by_node, tuple(self.named_uses), self.hand_offs)

    def record(self, node: object, place: Place) -> None:
        """One node object met twice (a shared subtree) would have two places: keep
        neither, so that its accesses are not ordered by a guess."""
        self.seq += 1
        old = self.by_node.get(id(node))
        if old is None:
            self.by_node[id(node)] = replace(place, seq=self.seq)
            return
        if replace(old, seq=0) != replace(place, seq=0):
            self.shared.add(id(node))
        # met twice with the same facts: its place in program order is not one (NO_SEQ)
        self.by_node[id(node)] = replace(old, seq=NO_SEQ)

    def block(self, stmts: tuple[ir.Stmt, ...], st: _State) -> None:
        for s in stmts:
            self.stmt(s, st)

    def stmt(self, s: ir.Stmt, st: _State) -> None:
        if not isinstance(s, ir.Role):  # events outside roles: role entry counts are stale
            for ch in [ch for ch in st.split if sc.per_pass((s,), ch) != 0]:
                del st.split[ch]
        place = st.place()
        for e in walk.own_exprs(s):
            for ld in walk.loads(e):
                self.record(ld, place)
        if isinstance(s, (ir.Store, ir.TmaLoad, ir.TmaStore)):
            self.record(s, place)
        if isinstance(s, ir.Let) and s.value.type is ir.ScalarType.INT:
            st.lets[s.uid] = s.value
        elif isinstance(s, ir.For):
            self.loop(s, st)
        elif isinstance(s, ir.If):
            self.branch(s, st)
        elif isinstance(s, ir.Role):
            self.role(s, st)
        elif isinstance(s, (ir.Sync, ir.NamedBar)):
            if isinstance(s, ir.NamedBar):
                inst = Inst(0, st.lo, st.hi, st.elect, (), st.guards)
                self.named_uses.append((s, inst))
            ch = sc.SYNC if isinstance(s, ir.Sync) else s.bar_id
            before = st.counts.get(ch)
            if before is not None:
                st.counts[ch] = ir.BinOp(s.span, ir.ScalarType.INT, "+", before,
                                         ir.IntConst(s.span, ir.ScalarType.INT, 1))

    def loop(self, s: ir.For, st: _State) -> None:
        per = {ch: sc.per_iteration(s, ch) for ch in st.counts}
        inner = st.child(loops=st.loops + (s,))
        for ch, entry in st.counts.items():
            p = per[ch]
            inner.counts[ch] = (None if entry is None or p is None
                                else sc.entering_iteration(entry, s, p))
        self.block(s.body, inner)
        for ch, entry in st.counts.items():
            p = per[ch]
            st.counts[ch] = None if entry is None or p is None else sc.after_loop(entry, s, p)

    def branch(self, s: ir.If, st: _State) -> None:
        neg = ir.UnOp(s.cond.span, ir.ScalarType.BOOL, "!", s.cond)
        self.block(s.then, st.child(guards=st.guards + (s.cond,)))
        self.block(s.orelse, st.child(guards=st.guards + (neg,)))
        loops = tuple(f.var.uid for f in st.loops if f.step == 1)
        for ch, before in st.counts.items():
            st.counts[ch] = None if before is None else sc.after_branch(before, s, ch, loops)

    def role(self, s: ir.Role, st: _State) -> None:
        lo, hi = max(st.lo, s.threads.lo), min(st.hi, s.threads.hi)
        if s.elect_one:
            hi = lo + 1
        inner = st.child(lo=lo, hi=max(lo, hi), elect=st.elect or s.elect_one)
        for ch, (base, ranges) in st.split.items():
            if all(hi <= a or b <= lo for a, b in ranges):  # none of its threads moved
                inner.counts[ch] = base
        self.block(s.body, inner)
        for ch, before in st.counts.items():
            if sc.per_pass(s.body, ch) == 0:
                continue
            # only the role's threads moved on: no single count for all threads any more
            if before is not None:
                st.split[ch] = (before, ())
            if ch in st.split:
                base, ranges = st.split[ch]
                st.split[ch] = (base, ranges + ((lo, max(lo, hi)),))
            st.counts[ch] = None


# ---- pairs of instances ------------------------------------------------------------------


@dataclass(frozen=True)
class Side:
    """One access of a tensor with its ordering facts as ISL maps over its instance space
    (instance -> [count]); None where the count is not known."""

    access: AccessRelation
    place: Place
    epoch: isl.Map | None
    named: Mapping[int, isl.Map | None]

    @property
    def tma(self) -> bool:
        return self.access.via in _TMA


class Outcome(str, Enum):
    NONE = "none"  # no unordered write/read pair, for every allowed size
    RACE = "race"  # a pair that is a race, on the under-approximated instance sets
    OPEN = "open"  # candidates the model cannot confirm


@dataclass(frozen=True)
class Finding:
    """The verdict on one tensor. For RACE: the writer, the reader and their racing
    instance pairs (writer instance -> reader instance, on the under-approximated domains;
    pairs of different blocks, and pairs of one block where the ordering is exact). For
    OPEN: the reason, and `inexact` whether it comes from an unmodelled guard or index
    (else from an ordering the model does not treat exactly)."""

    outcome: Outcome
    writer: AccessRelation | None = None
    reader: AccessRelation | None = None
    pairs: isl.Map | None = None
    reason: str = ""
    inexact: bool = False
    evidence: Mapping[str, object] = field(default_factory=dict)


class Orders:
    """Happens-before between the accesses of one kernel, as ISL relations between their
    instance spaces (writer instance -> reader instance)."""

    def __init__(self, kernel: ir.Kernel, where: Places) -> None:
        self.k = kernel
        self.where = where
        self.nblock = len(kernel.grid)
        self.phases = sc.phase_members(list(where.named_uses))

    def side(self, a: AccessRelation) -> Side:
        place = self.where.by_node.get(id(a.node))
        if place is None or len(place.loops) != len(a.loop_dims):
            raise NoPlace(f"no ordering facts for the access at {_label(a)}")
        env = AffineEnv(a.domain.get_space(),
                        {uid: self.nblock + 1 + k for k, uid in enumerate(place.loops)},
                        tuple(range(self.nblock)), self.nblock, place.lets)
        named = {bar: _count_map(e, env) for bar, e in place.named.items()}
        return Side(a, place, _count_map(place.epoch, env), named)

    def candidates(self, w: Side, r: Side, under: bool) -> tuple[isl.Map, isl.Map] | None:
        """(pairs in different blocks, pairs in one block not ordered by the sufficient
        happens-before) touching one element; None when a relation is not modelled."""
        wrel = w.access.relation_under if under else w.access.relation
        rrel = r.access.relation_under if under else r.access.relation
        if wrel is None or rrel is None:
            return None
        pairs = wrel.apply_range(rrel.reverse())  # writer instance -> reader instance
        if w.access.gathers or r.access.gathers:  # the values the two read, consistent
            pairs = pair_facts(self.k, w.access.gathers, r.access.gathers, pairs.get_space(),
                               pairs)
        same = pairs
        for k in range(self.nblock):
            same = same.equate(IN, k, OUT, k)
        cross = pairs.subtract(same)
        return cross, same.subtract(self.ordered(w, r, same.get_space()))

    def ordered(self, w: Side, r: Side, space: isl.Space) -> isl.Map:
        """Pairs of one block (in `space`) that happen-before orders, either way. A TMA copy
        is ordered with nothing (its global side is asynchronous)."""
        result = isl.Map.empty(space)
        if w.tma or r.tma:
            return result
        universe = isl.Map.universe(space)
        result = result.union(universe.equate(IN, self.nblock, OUT, self.nblock))
        if w.epoch is not None and r.epoch is not None:
            result = result.union(_less(w.epoch, r.epoch)).union(_less(r.epoch, w.epoch)
                                                                 .reverse())
        return result.union(self._named(w, r)).union(self._named(r, w).reverse())

    def _named(self, a: Side, b: Side) -> isl.Map:
        """a -> b pairs ordered by a named barrier: a's thread takes part in a phase after
        a that b's thread waited for before b (value_space.ValueSpace.hb, the same rule)."""
        out = None
        for bar, before in a.named.items():
            after = b.named.get(bar)
            members = self.phases.get(bar)
            if before is None or after is None or members is None:
                continue
            if sc.member(members, a.place.thread_lo, a.place.thread_hi) is None:
                continue
            mb = sc.member(members, b.place.thread_lo, b.place.thread_hi)
            if mb is None or not mb.waits:
                continue
            rel = _less(before, after)
            out = rel if out is None else out.union(rel)
        if out is None:
            space = a.access.domain.get_space().map_from_domain_and_range(
                b.access.domain.get_space())
            return isl.Map.empty(space)
        return out

    def exact(self, w: Side, r: Side) -> bool:
        """Is `ordered` all of happens-before for this pair within a block?"""
        return (not (w.tma or r.tma) and not self.where.hand_offs
                and w.epoch is not None and r.epoch is not None)


def find_race(orders: Orders, writers: Sequence[Side], readers: Sequence[Side]) -> Finding:
    """Decide whether some write of a tensor meets a read of it by another thread with
    nothing ordering them (see the module doc): NONE on over-approximations, RACE on
    under-approximations (different blocks, or one block where the ordering is exact),
    OPEN otherwise."""
    evidence: dict[str, object] = {
        "writes": {_label(w.access): str(w.access.relation) for w in writers},
        "reads": {_label(r.access): str(r.access.relation) for r in readers},
        "query": "for each write W and read R: is_empty(W . R^-1 restricted to different "
                 "blocks, or to one block minus same thread, sync-epoch and named-barrier "
                 "order)",
    }
    candidates: dict[str, str] = {}
    evidence["candidates"] = candidates
    opened: list[tuple[Side, Side, str, bool]] = []
    for w in writers:
        for r in readers:
            over = orders.candidates(w, r, under=False)
            if over is None:
                why = w.access.error or r.access.error or "an index without affine form"
                opened.append((w, r, f"cannot model an access: {why}", True))
                continue
            cross, same = over
            if cross.is_empty() and same.is_empty():
                continue
            candidates[f"{w.access.name},{r.access.name}"] = str(cross.union(same)
                                                                 .coalesce())
            under = orders.candidates(w, r, under=True)
            assert under is not None
            cross_u, same_u = under
            race = cross_u.union(same_u) if orders.exact(w, r) else cross_u
            if not race.is_empty():
                return Finding(Outcome.RACE, w.access, r.access, race, evidence=evidence)
            if not same_u.is_empty():
                opened.append((w, r, _unmodelled(w, r), False))
                continue
            dropped = "; ".join(w.access.dropped + r.access.dropped) or "an unmodelled guard"
            opened.append((w, r, f"unless an unmodelled guard prevents it: {dropped}", True))
    if opened:
        w, r, why, inexact = opened[0]
        return Finding(Outcome.OPEN, w.access, r.access, reason=why, inexact=inexact,
                       evidence=evidence)
    return Finding(Outcome.NONE, evidence=evidence)


def _unmodelled(w: Side, r: Side) -> str:
    if w.tma or r.tma:
        which = w if w.tma else r
        return (f"the {which.access.via.value} at line {which.access.span.line} is "
                "asynchronous, and what orders it with other accesses of its block (its "
                "mbarrier, wait_group) is outside this model")
    if w.epoch is None or r.epoch is None:
        return ("the number of `sync`s before an access is not an affine function of the "
                "instance (a `sync` under a condition or in a role)")
    return ("the kernel hands off through an mbarrier or a named barrier, which may order "
            "the pair in a way this model does not decide")


def _count_map(e: ir.Expr | None, env: AffineEnv) -> isl.Map | None:
    """instance -> [count], or None when the count is unknown or not affine."""
    if e is None:
        return None
    try:
        return isl.Map.from_pw_aff(term(e, env))
    except NotAffine:
        return None


def _less(a: isl.Map, b: isl.Map) -> isl.Map:
    """{ x -> y : a(x) < b(y) } for x in a's space and y in b's."""
    lt = isl.Map.read_from_str(a.get_ctx(), "{ [u] -> [v] : u < v }")
    return a.apply_range(lt).apply_range(b.reverse())


def _label(a: AccessRelation) -> str:
    return f"{a.name}@{a.span.line}:{a.span.col}"


def global_sides(orders: Orders, accesses: Sequence[AccessRelation], tensor: str,
                 kind: Kind) -> list[Side]:
    """The accesses of global `tensor` of one kind, with their ordering facts."""
    return [orders.side(a) for a in accesses
            if a.space is ir.Space.GLOBAL and a.tensor == tensor and a.kind is kind]

