"""The ring rule by iteration: a stage refilled by loads that different threads issue.

Why: in the view of a cluster as one block (semantics/temporal/cluster_view.py) a stage of
CTA r is refilled by whichever CTA multicasts it at that iteration (`multicast_ring`: stage
s by CTA s % 2, landing in both CTAs), and CTA r's `full` barrier is armed by CTA r's own
producer. The rules of value_rings.py need the load and its `arrive.expect_tx` side by side
in one thread, so the read's writer was not identified and the `ensures` of every cluster
ring stayed `ensures tested`.

The rule: the read after the wait at loop coordinates k sees the load at coordinates k.
What makes it so, each proved here for every size with ISL (the protocol itself -- byte
counts, each wait waiting for the next phase, no load into a stage its readers still hold
-- is the barrier and ownership checkers', as for value_rings.py):

1. *Phases are iterations.* The arrivals that may arm an element the wait names all come
   from one thread, in loops of the wait's shape, exactly one arrival in each of that
   thread's iterations (the barrier counts 1), and the one at k arms the element the wait
   names at k. So the n-th phase of element e completes in the n-th iteration naming e,
   and the wait at k waits for the phase of iteration k.
2. *The loads of iteration k land in the phase of iteration k.* Each load statement that
   may write what the read reads is issued by one thread, in loops of the wait's shape,
   and where it runs at k it signals the element the wait names at k and writes the stage
   that element guards. A load of iteration k cannot land in an earlier phase of its
   element (it is issued after the stage was released, after that phase was consumed) nor
   in a later one (the phase of k does not complete without its bytes): the protocol.
3. *One writer.* For every read, the loads at the wait's coordinates that write its
   element are exactly one instance (ISL: the options' links are pairwise disjoint, and
   together they cover every read).
"""

from __future__ import annotations

import islpy as isl

from tilesafe.frontend import ir
from tilesafe.semantics.expr import affine
from tilesafe.semantics.expr.affine import AffineEnv
from tilesafe.semantics.value.value_exec import Arrival, Write
from tilesafe.semantics.value.value_rings import (
    Resolver,
    issuer,
    one_arrival_each,
    ring_order,
    same_loops,
)
from tilesafe.semantics.value.value_space import ValueSpace, thread_dim
from tilesafe.semantics.value.value_terms import (
    Choice,
    Inst,
    Link,
    LoopInfo,
    Shr,
    Term,
    rename,
)

ARMS_NS = -11  # namespaces for the checks (the prover's own start at 0)
LOAD_NS = -13


def resolve_by_iteration(p: Resolver, t: Shr, writers: list[Write], depth: int, fail
                         ) -> Term:
    """The read after the wait at coordinates k sees the load at coordinates k (module
    docstring); NotProved (through `fail`) when a condition is not shown."""
    bar = p.k.barrier(writers[0].tma.barrier)  # type: ignore[union-attr]
    guard = next((g for g in bar.all_guards if g.buffer == t.buffer), None)
    if bar.count != 1 or guard is None:
        raise fail(f"'{bar.name}' does not guard it with count 1")
    wait = next((w for w in t.waits if w[0] == bar.name), None)
    if wait is None:
        raise fail(f"the read follows no wait on '{bar.name}' at its loop level")
    _, widx, wi = wait
    zero = ir.IntConst(bar.span, ir.ScalarType.INT, 0)
    elem_w = widx if widx is not None else zero
    wait_all = Inst(wi.ns, wi.thread_lo, wi.thread_hi, wi.elect, wi.loops, (), wi.lets)
    sp = p.space([wi])
    if not sp.domain(wait_all).is_subset(sp.domain(wi)):
        raise fail("the wait is skipped in some iterations")
    _phases_are_iterations(p, bar.name, wi, elem_w, wait_all, zero, fail)
    mine = [w for w in writers if _may_write(p, t, w)]
    if not mine:
        raise fail("no load writes what the read reads")
    options = []
    for w in mine:
        real = tuple(lp for lp in w.inst.loops if lp.uid >= 0)
        _load_of_iteration(p, w, real, guard, wi, elem_w, wait_all, zero, fail)
        nsmap = p.fresh_ns_map()
        named = w.inst.renamed(nsmap(w.inst.ns))
        link = Link(t.inst, t.indices, named, w.indices, ring_order(p, wi, named, real))
        options.append((link, rename(w.value, nsmap)))
    _one_writer(p, t, wi, [lk for lk, _ in options], fail)
    p.resolved.add(t.buffer)
    return Choice(t.buffer, tuple((lk, p.resolve(v, depth + 1)) for lk, v in options))


def _phases_are_iterations(p: Resolver, name: str, wi: Inst, elem_w: ir.Expr,
                           wait_all: Inst, zero: ir.Expr, fail) -> None:
    """Condition 1 of the module docstring."""
    arms = [a for a in p.arrivals
            if a.barrier == name and _may_arm(p, a, wi, elem_w, zero)]
    if not arms:
        raise fail(f"no arrive on '{name}' arms the element the read waits for")
    loops = arms[0].inst.loops
    if any(a.inst.loops != loops for a in arms):
        raise fail(f"the arrives on '{name}' are not in one loop nest")
    threads = {issuer(p, a.inst) for a in arms}
    if None in threads or len(threads) != 1:
        raise fail(f"the arrives on '{name}' are not made by one thread")
    (arming,) = threads
    insts = [a.inst.renamed(ARMS_NS) for a in arms]
    space = p.space(insts + [wi])
    same = same_loops(space, insts[0], loops, wi, fail, "the arrive's")
    every = Inst(ARMS_NS, insts[0].thread_lo, insts[0].thread_hi, insts[0].elect, loops, (),
                 insts[0].lets)
    full = space.domain(every) & space.dim(thread_dim(every)).eq_set(
        affine.constant(AffineEnv(space.space), arming))
    turns = [(space.domain(i), a.index, i) for a, i in zip(arms, insts, strict=True)]
    one_arrival_each(space, turns, full, fail)
    waited = same & space.domain(wait_all)
    for dom, index, inst in turns:
        if not (dom & waited & space.term(index if index is not None else zero, inst)
                .ne_set(space.term(elem_w, wi))).is_empty():
            raise fail(f"an arrive on '{name}' arms another element than the wait at the "
                       "same iteration names")


def _load_of_iteration(p: Resolver, w: Write, real: tuple[LoopInfo, ...],
                       guard: ir.BarrierGuard, wi: Inst, elem_w: ir.Expr, wait_all: Inst,
                       zero: ir.Expr, fail) -> None:
    """Condition 2 of the module docstring for one load statement (its loops: `real`)."""
    assert w.tma is not None
    if issuer(p, w.inst) is None:
        raise fail("more than one thread issues a load")
    li = w.inst.renamed(LOAD_NS)
    space = p.space([li, wi])
    same = same_loops(space, li, real, wi, fail, "a load's")
    loop_names = {space.loop_name(li, lp.uid) for lp in real}
    dom = space.domain(li)
    for n in space.inst_dims(li):
        if n not in loop_names and n != thread_dim(li):
            dom = dom.eliminate(isl.dim_type.set, space.pos[n], 1)
    elem = w.tma.index if w.tma.index is not None else zero
    at_k = dom & same & space.domain(wait_all)
    if not (at_k & space.term(elem, li).ne_set(space.term(elem_w, wi))).is_empty():
        raise fail("a load signals another element than the wait at its iteration names")
    if guard.indexed:
        # a cluster view's instance e guards stage e % per_cta of every CTA (ir.BarrierGuard)
        stage, of = (w.indices[0], elem) if not guard.per_cta else (
            w.indices[1], ir.BinOp(elem.span, ir.ScalarType.INT, "%", elem,
                                   ir.IntConst(elem.span, ir.ScalarType.INT, guard.per_cta)))
        if not (dom & space.term(stage, li).ne_set(space.term(of, li))).is_empty():
            raise fail("a load's stage is not the one its barrier element guards")


def _may_arm(p: Resolver, a: Arrival, wi: Inst, elem_w: ir.Expr, zero: ir.Expr) -> bool:
    """Some instance of the arrive names an element some instance of the wait names."""
    ai = a.inst.renamed(ARMS_NS)
    space = p.space([ai, wi])
    index = a.index if a.index is not None else zero
    meet = space.domain(ai) & space.domain(wi) & space.term(index, ai).eq_set(
        space.term(elem_w, wi))
    return not meet.is_empty()


def _may_write(p: Resolver, t: Shr, w: Write) -> bool:
    """Some instance of the load writes an element some instance of the read reads."""
    wi = w.inst.renamed(LOAD_NS)
    space = p.space([t.inst, wi])
    return not (space.same_element(t.inst, t.indices, wi, w.indices)
                & space.domain(t.inst)).is_empty()


def _one_writer(p: Resolver, t: Shr, wi: Inst, links: list[Link], fail) -> None:
    """Condition 3: every read is linked to exactly one load instance."""
    space: ValueSpace = p.space([t.inst, wi] + [lk.writer for lk in links])
    linked = []
    for lk in links:
        one = space.link(lk)
        for name in space.inst_dims(lk.writer):
            one = one.eliminate(isl.dim_type.set, space.pos[name], 1)
        linked.append(one & space.domain(t.inst))
    for n, a in enumerate(linked):
        for b in linked[n + 1:]:
            if not (a & b).is_empty():
                raise fail("two loads of one iteration write an element the read reads")
    covered = isl.Set.empty(space.space)
    for one in linked:
        covered = covered | one
    if not space.domain(t.inst).is_subset(covered):
        raise fail("some read element is not written by a load of the waited iteration")
