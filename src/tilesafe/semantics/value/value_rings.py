"""Which TMA load a read of an mbarrier ring sees: phase matching, for every size.

Why: a ring buffer is written once per pass, so "the write before the read" is not unique;
what identifies it is the barrier protocol. The read after the reader's n-th wait on
element e sees the n-th load into stage e. The protocol itself is proved elsewhere (the
barrier checker: each wait waits for the next phase of its element, byte counts; the
ownership checker: no load refills a stage its readers still hold); here ISL proves the
phase matching: the n-th load and the n-th wait of each element happen at the same
position, and every element read is written by the load so identified.
"""

from __future__ import annotations

from typing import Protocol

import islpy as isl

from tilesafe.frontend import ir, ir_build
from tilesafe.semantics.expr import affine
from tilesafe.semantics.expr.affine import AffineEnv
from tilesafe.semantics.value.value_exec import Arrival, Write
from tilesafe.semantics.value.value_space import (
    NotProved,
    ValueSpace,
    loop_bounds,
    multi_writer,
    shift,
    thread_dim,
)
from tilesafe.semantics.value.value_terms import Choice, Inst, Link, LoopInfo, Shr, Term, rename


class Resolver(Protocol):
    """What the ring rules need of the prover (semantics/value/valueflow.py)."""

    k: ir.Kernel
    arrivals: list[Arrival]
    resolved: set[str]

    def space(self, involved: list[Inst]) -> ValueSpace: ...

    def fresh_ns_map(self): ...

    def resolve(self, t: Term, depth: int) -> Term: ...


def resolve_ring(p: Resolver, t: Shr, writers: list[Write], depth: int) -> Term:
    """A buffer refilled by TMA loads through an mbarrier ring: the read after the
    reader's n-th wait on element e of the barrier sees the n-th load into stage e.

    The phase matching is decided here, the protocol proved elsewhere: the barrier
    checker proves each wait waits for the next phase of its element and the byte
    counts (TS404/TS407), the ownership checker that no load refills a stage before its
    readers released it (TS303/TS305). Here ISL proves that the n-th load and the n-th
    wait on each element happen at the same loop coordinates: one load statement, one
    `arrive.expect_tx` beside it (count 1), the wait and the load each once per
    iteration of loops with equal bounds, and the same element sequence on both
    sides; and that every read element is written by the load so identified."""
    def fail(why: str) -> NotProved:
        return NotProved(multi_writer(t.buffer) + f"; as an mbarrier ring: {why}")

    bars = {w.tma.barrier for w in writers if w.tma is not None}
    if len(bars) != 1:
        raise fail("the loads signal different barriers")
    try:
        if len(writers) > 1:
            return _resolve_sequence(p, t, writers, depth, fail)
        return _resolve_one(p, t, writers, depth, fail)
    except NotProved as first:
        # loads issued by several threads, or armed by another (a cluster's multicast)
        from tilesafe.semantics.value.value_ring_iter import resolve_by_iteration
        try:
            return resolve_by_iteration(p, t, writers, depth, fail)
        except NotProved:
            raise first from None


def _resolve_one(p: Resolver, t: Shr, writers: list[Write], depth: int, fail) -> Term:
    """One load statement, its arrive.expect_tx beside it (resolve_ring's docstring)."""
    (load,) = writers
    assert load.tma is not None
    bar = p.k.barrier(load.tma.barrier)
    guard = next((g for g in bar.all_guards if g.buffer == t.buffer), None)
    if bar.count != 1 or guard is None:
        raise fail(f"'{bar.name}' does not guard it with count 1")
    real = tuple(lp for lp in load.inst.loops if lp.uid >= 0)
    arrs = [a for a in p.arrivals if a.barrier == bar.name]
    txs = [a for a in arrs if a.tx]
    if len(txs) != 1:
        raise fail(f"'{bar.name}' is not armed by exactly one arrive.expect_tx")
    arrive = txs[0]
    if (arrive.inst.loops != real or arrive.inst.guards != load.inst.guards
            or (arrive.inst.thread_lo, arrive.inst.thread_hi, arrive.inst.elect)
            != (load.inst.thread_lo, load.inst.thread_hi, load.inst.elect)):
        raise fail("the arrive.expect_tx is not beside the load")
    # arrivals without bytes: phases of iterations that load nothing (gemm's ring steps
    # past the last k-tile); they must take turns with the load, one arrival an iteration
    bare = [a for a in arrs if not a.tx]
    if any(a.inst.loops != real for a in bare):
        raise fail(f"an arrive on '{bar.name}' is outside the load's loops")
    wait = next((w for w in t.waits if w[0] == bar.name), None)
    if wait is None:
        raise fail(f"the read follows no wait on '{bar.name}' at its loop level")
    _, widx, wait_inst = wait
    issuing = issuer(p, load.inst)
    if issuing is None:
        raise fail("more than one thread issues the load")
    li = load.inst.renamed(-7)
    ai = arrive.inst.renamed(-7)
    wi = wait_inst
    space = p.space([li, wi, t.inst])
    lname = [space.loop_name(li, lp.uid) for lp in real]
    same = same_loops(space, li, real, wi, fail, "the load's")
    box = [n for n in space.inst_dims(li) if n not in lname and not n.startswith("t_")]

    def over_loops(s: isl.Set) -> isl.Set:
        """`s` over the load's loop coordinates only: its box dims dropped (the space's
        base bounds them too when the load's origin reads an index tensor)."""
        for name in box:
            s = s.eliminate(isl.dim_type.set, space.pos[name], 1)
        return s

    dom_l = over_loops(space.domain(li))
    # every iteration, for the issuing thread (a guard `thread == 0` picks it, like `elect`)
    full_l = over_loops(space.domain(Inst(li.ns, li.thread_lo, li.thread_hi, li.elect, real,
                                          (), li.lets)) & space.dim(thread_dim(li)).eq_set(
        affine.constant(AffineEnv(space.space), issuing)))
    turns = [(dom_l, arrive.index, ai)]
    for a in bare:
        bi = a.inst.renamed(-7)
        turns.append((over_loops(space.domain(bi)), a.index, bi))
    one_arrival_each(space, turns, full_l, fail)
    wait_all = Inst(wi.ns, wi.thread_lo, wi.thread_hi, wi.elect, wi.loops, (), wi.lets)
    if not space.domain(wait_all).is_subset(space.domain(wi)):
        raise fail("the wait is skipped in some iterations")
    elem_l = load.tma.index if load.tma.index is not None else ir.IntConst(
        bar.span, ir.ScalarType.INT, 0)
    elem_w = widx if widx is not None else elem_l
    seq = full_l & same & space.domain(wait_all)
    if not (seq & space.term(elem_l, li).ne_set(space.term(elem_w, wi))).is_empty():
        raise fail("the load's and the wait's barrier elements differ")
    for dom, index, inst in turns:
        if not (dom & space.term(index or elem_l, inst).ne_set(
                space.term(elem_l, li))).is_empty():
            raise fail("an arrive arms another element than the load signals")
    if guard.indexed and not (full_l & space.term(load.indices[0], li).ne_set(
            space.term(elem_l, li))).is_empty():
        raise fail("the load's stage is not the element of the barrier guarding it")
    nsmap = p.fresh_ns_map()
    winst = load.inst.renamed(nsmap(load.inst.ns))
    order = ring_order(p, wi, winst, real)
    link = Link(t.inst, t.indices, winst, load.indices, order)
    exists = p.space([t.inst, wi, winst])
    linked = exists.link(link)
    for name in exists.inst_dims(winst):
        linked = linked.eliminate(isl.dim_type.set, exists.pos[name], 1)
    if not exists.domain(t.inst).is_subset(linked):
        raise fail("some read element is not written by the load of the waited phase")
    value = p.resolve(rename(load.value, nsmap), depth + 1)
    p.resolved.add(t.buffer)
    return Choice(t.buffer, ((link, value),))

def _resolve_sequence(p: Resolver, t: Shr, writers: list[Write], depth: int, fail
                      ) -> Term:
    """The ring rule for a stage loaded by several statements in sequence (a prologue
    that fills the ring, then the refill or prefetch in the loop). Each load statement
    has at most one loop; all but the last run every iteration, the last a prefix of
    its loop; their instances come one statement after the other in program order, so
    load instance number p (in that concatenated order) sits at position
    p = (loads of the earlier statements) + (k - lo). The governing wait runs once per
    iteration of one loop: wait number p at k = lo_W + p. ISL proves the barrier element
    of load p equals that of wait p for every p both have; then the n-th load and the
    n-th wait of each element have the same p, so the read after wait p sees load p."""
    loads = sorted(writers, key=lambda w: _sched_key(w.inst))
    bar = p.k.barrier(loads[0].tma.barrier)  # type: ignore[union-attr]
    guard = next((g for g in bar.all_guards if g.buffer == t.buffer), None)
    if bar.count != 1 or guard is None:
        raise fail(f"'{bar.name}' does not guard it with count 1")
    arrs = [a for a in p.arrivals if a.barrier == bar.name]
    if len(arrs) != len(loads) or not all(a.tx for a in arrs):
        raise fail(f"'{bar.name}' is not armed by one arrive.expect_tx per load")
    wait = next((w for w in t.waits if w[0] == bar.name), None)
    if wait is None:
        raise fail(f"the read follows no wait on '{bar.name}' at its loop level")
    _, widx, wi = wait
    if len(wi.loops) != 1:
        raise fail("the governing wait is not in exactly one loop")
    for a, b in zip(loads, loads[1:], strict=False):
        if not _before(a.inst, b.inst):
            raise fail("the load statements are not one after the other")
    threads = {issuer(p, w.inst) for w in loads}
    if None in threads or len(threads) != 1:
        raise fail("the loads are not issued by one thread")
    (issuer_thread,) = threads
    wl = wi.loops[0]
    options = []
    before: ir.Expr = ir.IntConst(bar.span, ir.ScalarType.INT, 0)
    for n, load in enumerate(loads):
        real = tuple(lp for lp in load.inst.loops if lp.uid >= 0)
        if len(real) > 1:
            raise fail("a load statement is in more than one loop")
        arrive = next((a for a in arrs if a.inst.loops == real and a.inst.guards ==
                       load.inst.guards and _sched_key(a.inst)[:-1] ==
                       _sched_key(load.inst)[:-1]), None)
        if arrive is None:
            raise fail("a load has no arrive.expect_tx beside it")
        li, ai = load.inst.renamed(-7), arrive.inst.renamed(-7)
        space = p.space([li, wi])
        bare = Inst(li.ns, li.thread_lo, li.thread_hi, li.elect, real, (), li.lets)
        dom_l = space.domain(li)
        for name in space.inst_dims(li):
            if name != thread_dim(li) and name not in [space.loop_name(li, lp.uid)
                                                    for lp in real]:
                dom_l = dom_l.eliminate(isl.dim_type.set, space.pos[name], 1)
        last = n == len(loads) - 1
        # every iteration of the loop (or once), for the issuing thread, at every size
        full = space.domain(bare) & space.dim(thread_dim(li)).eq_set(
            affine.constant(AffineEnv(space.space), issuer_thread))
        if real:
            lp = real[0]
            if lp.step != 1:
                raise fail("a load loop's step is not 1")
            k = space.dim(space.loop_name(li, lp.uid))
            if not last and not full.is_subset(dom_l):
                raise fail("a load before the last is skipped in some iterations")
            if last:  # a prefix: an executed iteration's predecessors are executed
                prev = dom_l & k.gt_set(space.term(lp.lo, li))
                shifted = prev.preimage_multi_aff(shift(space, space.pos[
                    space.loop_name(li, lp.uid)], -1))
                if not (shifted & full).is_subset(dom_l):
                    raise fail("the last load statement does not run a prefix of its "
                               "loop")
            pos = ir_build.add(before, ir.BinOp(bar.span, ir.ScalarType.INT, "-",
                                             ir.LoopVar(bar.span, ir.ScalarType.INT,
                                                        "k", lp.uid), lp.lo))
            count = ir.Call(bar.span, ir.ScalarType.INT, "max", (
                ir.IntConst(bar.span, ir.ScalarType.INT, 0),
                ir.BinOp(bar.span, ir.ScalarType.INT, "-", lp.hi, lp.lo)))
        else:
            if not last and not full.is_subset(dom_l):
                raise fail("a load before the last does not always run")
            pos, count = before, ir.IntConst(bar.span, ir.ScalarType.INT, 1)
        elem = load.tma.index if load.tma.index is not None else ir.IntConst(  # type: ignore[union-attr]
            bar.span, ir.ScalarType.INT, 0)
        welem = widx if widx is not None else elem
        # wait number p at k_W = lo_W + p: same element as load number p
        same = space.term(pos, li).eq_set(space.dim(space.loop_name(wi, wl.uid)).sub(
            space.term(wl.lo, wi)))
        both = dom_l & space.domain(Inst(wi.ns, wi.thread_lo, wi.thread_hi, wi.elect,
                                         wi.loops, (), wi.lets)) & same
        if not (both & space.term(elem, li).ne_set(space.term(welem, wi))).is_empty():
            raise fail("a load and the wait with its number have different elements")
        if not (dom_l & space.term(arrive.index or elem, ai).ne_set(
                space.term(elem, li))).is_empty():
            raise fail("an arrive.expect_tx arms another element than its load")
        if guard.indexed and not (dom_l & space.term(load.indices[0], li).ne_set(
                space.term(elem, li))).is_empty():
            raise fail("a load's stage is not the element of the barrier guarding it")
        nsmap = p.fresh_ns_map()
        winst = load.inst.renamed(nsmap(load.inst.ns))
        osp = p.space([wi, winst])
        order = osp.term(pos, winst).eq_set(osp.dim(osp.loop_name(wi, wl.uid)).sub(
            osp.term(wl.lo, wi)))
        link = Link(t.inst, t.indices, winst, load.indices, f"{osp.names}|{order}")
        options.append((link, rename(load.value, nsmap)))
        before = ir_build.add(before, count)
    exists = p.space([t.inst, wi] + [lk.writer for lk, _ in options])
    linked = isl.Set.empty(exists.space)
    for lk, _ in options:
        one = exists.link(lk)
        for name in exists.inst_dims(lk.writer):
            one = one.eliminate(isl.dim_type.set, exists.pos[name], 1)
        linked = linked | one
    if not exists.domain(t.inst).is_subset(linked):
        raise fail("some read element is not written by the load of the waited phase")
    p.resolved.add(t.buffer)
    return Choice(t.buffer, tuple((lk, p.resolve(v, depth + 1)) for lk, v in options))

def same_loops(space: ValueSpace, a: Inst, loops: tuple[LoopInfo, ...], wait: Inst, fail,
               who: str) -> isl.Set:
    """The set where `a`'s loops (`loops`, outermost first) and the wait's have equal
    coordinates, after proving they are loops of one shape: equal depth, and level by level
    equal bounds (where the outer coordinates are equal) and steps."""
    if len(wait.loops) != len(loops) or not loops:
        raise fail(f"the wait and {who} statement are not in loops of the same depth")
    same = space.universe()
    for lp, wp in zip(loops, wait.loops, strict=True):
        same = same & space.dim(space.loop_name(a, lp.uid)).eq_set(
            space.dim(space.loop_name(wait, wp.uid)))
    for lv, (lp, wp) in enumerate(zip(loops, wait.loops, strict=True)):
        ctx = space.base & same
        for j in range(lv):
            ctx = ctx & loop_bounds(space, a, loops[j])
        for x, y in ((lp.lo, wp.lo), (lp.hi, wp.hi)):
            if not (ctx & space.term(x, a).ne_set(space.term(y, wait))).is_empty():
                raise fail(f"{who} and the wait's loops have different bounds")
        if lp.step != wp.step:
            raise fail(f"{who} and the wait's loops have different steps")
    return same


def one_arrival_each(space: ValueSpace, turns: list, full: isl.Set, fail) -> None:
    """The iterations of the issuing thread (`full`) each run exactly one of the arrivals
    (`turns`: instances, element index, inst, all over the load's loop coordinates): the
    load's arrive.expect_tx or one without bytes. Then the n-th phase of an element is the
    n-th iteration naming it, whichever arrival completed it, and a read after that wait
    sees the load of that iteration if it ran (checked by the caller)."""
    for n, (dom, _, _) in enumerate(turns):
        if not dom.is_subset(full):
            raise fail("an arrive of the ring runs outside the load's iterations or thread")
        for other, _, _ in turns[n + 1:]:
            if not (dom & other).is_empty():
                raise fail("two arrivals of the ring in one iteration")
    covered = isl.Set.empty(full.get_space())
    for dom, _, _ in turns:
        covered = covered | dom
    if not full.is_subset(covered):
        raise fail("the load is skipped in some iterations")


def issuer(p: Resolver, inst: Inst) -> int | None:
    """The one thread that runs `inst` (for some size and block), or None when none or
    several do: a load's n-th instance is then the issuing thread's n-th."""
    sp = p.space([inst])
    tset = sp.domain(inst)
    keep = sp.pos[thread_dim(inst)]
    for i in reversed(range(len(sp.names))):
        if i != keep:
            tset = tset.project_out(isl.dim_type.set, i, 1)
    tset = tset.project_out(isl.dim_type.param, 0, tset.dim(isl.dim_type.param))
    if tset.is_empty() or not tset.lexmin().is_equal(tset.lexmax()):
        return None
    return int(tset.sample_point().get_coordinate_val(isl.dim_type.set, 0).to_python())


def ring_order(p: Resolver, wait: Inst, writer: Inst, real: tuple[LoopInfo, ...]) -> str:
    """The writer's loop coordinates equal the governing wait's, as `[names]|set`."""
    space = p.space([wait, writer])
    s = space.universe()
    for lp, wp in zip(real, wait.loops, strict=True):
        s = s & space.dim(space.loop_name(writer, lp.uid)).eq_set(
            space.dim(space.loop_name(wait, wp.uid)))
    return f"{space.names}|{s}"


def _sched_key(inst: Inst) -> tuple[int, ...]:
    return tuple(e.value if isinstance(e, ir.IntConst) else -1 for e in inst.sched)


def _before(a: Inst, b: Inst) -> bool:
    """Every instance of a precedes every instance of b in program order: they part at a
    statement position before either's loop coordinates differ."""
    for x, y in zip(a.sched, b.sched, strict=False):
        if isinstance(x, ir.IntConst) and isinstance(y, ir.IntConst):
            if x.value != y.value:
                return x.value < y.value
            continue
        return False  # reached a loop coordinate while still equal: interleaved
    return False
