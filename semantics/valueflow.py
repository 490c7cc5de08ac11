"""The value proof: every element of an output holds what its `ensures` clause says, for
every size `where` allows.

How. semantics/value_exec.py gives every write as a term over the writing instance. A write
to the specified output is compared with the spec's right-hand side, its index variables
bound to the written index:

* A shared-memory read is resolved to the write it sees. The safety checkers prove that no
  shared element is read before something wrote it (TS306) and that no access races
  (TS302/TS304); here ISL proves, for the buffer, that *at most one* instance of all its
  writing statements writes each element per block (single assignment). Together: the
  read sees exactly that write, so its value is the writer's term, linked by
  `writer index == reader index` (a `Choice` over the writing statements, decided by cases).
  A buffer written more than once per element (a ring refilled every pass, a reduction
  tree) is outside this rule: UNKNOWN, with that reason.
* TMA loads write their box at the *logical* indices of the slice: the TMA checker proves
  the arrangement the copy uses (with its swizzle) equals the buffer's layout (TS520), so
  logical indices line up; out-of-bounds box elements are the fill value.
* Terms are compared structurally, operator by operator (so f32 rounding, and `+` not being
  associative, are respected exactly); global loads by tensor and index, where index
  equality is an ISL emptiness check over all coordinates involved and every size;
  conditional values (`if`, the TMA fill) by cases.
* An order-free `sum` is compared as a multiset: the kernel's additions (folds of loops,
  trees of `+` over resolved reads) are flattened into contributions, each contribution's
  map from its instances to the input elements it reads must be injective, contributions
  disjoint, and the union of their images equal to the image of the spec's index range.
  +0.0 contributions (a zero fill) are dropped: adding +0.0 to an accumulator that starts at
  +0.0 never changes it.

Everything is decided by ISL on exact Presburger sets; guards without a Presburger form are
over-approximated (a superset of instances only makes the proof harder). Failure to prove is
`NotProved` with the reason and, where ISL found one, a point (sizes, coordinates).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass

import islpy as isl

from tilesafe.frontend import ir
from tilesafe.frontend.fmt import without_spans
from tilesafe.semantics import affine, evaluate, fp, sync_counts
from tilesafe.semantics.affine import AffineEnv, NotAffine
from tilesafe.semantics.value_exec import Arrival, Executor, Unsupported, Write, lit
from tilesafe.semantics.value_terms import (
    Accum,
    Choice,
    Fold,
    Glob,
    Inst,
    IntV,
    Ite,
    Link,
    Lit,
    LoopInfo,
    Op,
    Round,
    Shr,
    SpecSum,
    Term,
    insts,
    rename,
    show,
    walk,
)

_COMMUTATIVE = ("f32.add", "f32.mul", "int.add", "int.mul")
MAX_DEPTH = 6  # shared reads resolved through at most this many writers in a chain
SPEC_NS = 1_000_000


class NotProved(Exception):
    def __init__(self, reason: str, point: dict[str, int] | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.point = point


@dataclass(frozen=True)
class Proof:
    """What was proved for one clause, as evidence."""

    writes: int  # write statements of the output compared with the spec
    buffers: tuple[str, ...]  # shared buffers proved single-assignment and resolved
    terms: tuple[str, ...]  # the kernel's value terms (shown)


def prove(kernel: ir.Kernel, spec: ir.Ensures) -> Proof:
    """Prove `spec` for every size, or raise NotProved/Unsupported (with the reason)."""
    ex = Executor(kernel)
    writes = ex.run()
    prover = _Prover(kernel, writes, arrivals=ex.arrivals,
                     phases=sync_counts.phase_members(ex.named_uses))
    outs = [w for w in writes if w.space is ir.Space.GLOBAL and w.target == spec.tensor]
    if not outs:
        raise NotProved(f"nothing writes '{spec.tensor}'")
    shown = []
    for w in outs:
        nsmap = prover.fresh_ns_map()
        value = prover.resolve(rename(w.value, nsmap), 0)
        shown.append(show(value))
        prover.compare_write(w.inst.renamed(nsmap(w.inst.ns)), w.indices, value, spec)
    return Proof(len(outs), tuple(sorted(prover.resolved)), tuple(shown))


class _Prover:
    def __init__(self, kernel: ir.Kernel, writes: list[Write],
                 kernels: tuple[ir.Kernel, ...] | None = None, first_ns: int = 0,
                 ctx: isl.Context | None = None, arrivals: list[Arrival] | None = None,
                 phases: dict[int, tuple[sync_counts.Member, ...]] | None = None) -> None:
        self.k = kernel
        self.arrivals = arrivals or []
        self.phases = phases or {}  # named barriers whose phases order threads (hb)
        self.kernels = kernels or (kernel,)  # every launch coordinates may come from
        self.writes = writes
        self.ctx = ctx or isl.Context()
        self.ns = first_ns
        self.resolved: set[str] = set()
        self.unique: dict[str, bool] = {}

    def fresh_ns_map(self):
        mapping: dict[int, int] = {}

        def f(ns: int) -> int:
            if ns == SPEC_NS:
                return ns
            if ns not in mapping:
                self.ns += 1
                mapping[ns] = self.ns
            return mapping[ns]

        return f

    # ---- resolving shared reads ------------------------------------------------------------

    def resolve(self, t: Term, depth: int) -> Term:
        if isinstance(t, Shr):
            if depth >= MAX_DEPTH:
                raise NotProved(f"shared reads chain through more than {MAX_DEPTH} writers")
            writers = [w for w in self.writes
                       if w.space is ir.Space.SHARED and w.target == t.buffer]
            if not writers:
                raise NotProved(f"nothing writes shared buffer '{t.buffer}'")
            ordered = not self.is_unique(t.buffer, writers)
            if ordered and all(w.tma is not None for w in writers):
                return self.resolve_ring(t, writers, depth)
            if ordered and any(_step_body(w) is not None for w in writers):
                return self.resolve_accumulation(t, writers, depth)
            if ordered:
                self.check_ordered(t, writers)
            options = []
            for w in writers:
                nsmap = self.fresh_ns_map()
                winst = w.inst.renamed(nsmap(w.inst.ns))
                link = Link(t.inst, t.indices, winst, w.indices)
                if ordered:
                    order = self.last_writer(link, writers)
                    if order is None:
                        continue  # this statement is never the last writer of the read
                    link = Link(t.inst, t.indices, winst, w.indices, order)
                value = self.resolve(rename(w.value, nsmap), depth + 1)
                options.append((link, value))
            self.resolved.add(t.buffer)
            return Choice(t.buffer, tuple(options))
        if isinstance(t, Op):
            return Op(t.name, tuple(self.resolve(a, depth) for a in t.args))
        if isinstance(t, Round):
            return Round(t.dtype, self.resolve(t.arg, depth))
        if isinstance(t, Ite):
            return Ite(t.cond, t.inst, self.resolve(t.then, depth),
                       self.resolve(t.orelse, depth))
        if isinstance(t, Fold):
            return Fold(self.resolve(t.init, depth), t.inst, t.depth,
                        self.resolve(t.body, depth), t.guarded)
        return t

    def resolve_accumulation(self, t: Shr, writers: list[Write], depth: int) -> Term:
        """A buffer some statements update in place (`buf[e] = buf[e] + body`, a histogram
        or a running sum kept in shared memory across iterations): the read sees the last
        plain write of its element plus the body of every step between that write and the
        read. That needs every write of the element ordered with the read (check_ordered)
        and with each other (a step's read then sees the write just before it, and no step
        is lost): both proved here, for every size, by ISL."""
        steps = [w for w in writers if _step_body(w) is not None]
        plain = [w for w in writers if _step_body(w) is None]
        if any(w.tma is not None for w in writers) or not plain:
            raise NotProved(self._multi(t.buffer) + "; as an accumulation: "
                            + ("a TMA load writes it" if plain else
                               "nothing but its steps writes it"))
        self.check_ordered(t, writers)
        self.check_writes_ordered(t.buffer, writers)
        options = []
        for w0 in plain:
            map0 = self.fresh_ns_map()
            w0i = w0.inst.renamed(map0(w0.inst.ns))
            order = self.last_writer(Link(t.inst, t.indices, w0i, w0.indices), plain)
            if order is None:
                continue  # never the last plain write of a read element
            link0 = Link(t.inst, t.indices, w0i, w0.indices, order)
            init = self.resolve(rename(w0.value, map0), depth + 1)
            step_opts = []
            for u in steps:
                mapu = self.fresh_ns_map()
                ui = u.inst.renamed(mapu(u.inst.ns))
                window = self.window(link0, ui, u.indices)
                if window is not None:
                    body = _step_body(u)
                    assert body is not None
                    step_opts.append((Link(t.inst, t.indices, ui, u.indices, window),
                                      self.resolve(rename(body, mapu), depth + 1)))
            options.append((link0, init, tuple(step_opts)))
        self.resolved.add(t.buffer)
        return Accum(t.buffer, tuple(options))

    def window(self, link0: Link, step: Inst, step_idx: tuple[ir.Expr, ...]) -> str | None:
        """The step instances of the read's element after the plain write of link0 and
        before the read, as `[names]|set` text over the read's, the write's and the step's
        coordinates (None: there are none)."""
        space = _Space(self, [link0.reader, link0.writer, step])
        s = space.link(link0) & space.same_element(link0.reader, link0.reader_idx, step,
                                                   step_idx)
        s = s & space.hb(link0.writer, step) & space.hb(step, link0.reader)
        keep = [n for n in space.names if _is_block(n)]
        keep += space.inst_dims(link0.reader) + space.inst_dims(link0.writer)
        keep += space.inst_dims(step)
        for name in reversed(space.names):
            if name not in keep:
                s = s.project_out(isl.dim_type.set, space.names.index(name), 1)
        s = s.coalesce()
        return None if s.is_empty() else f"{keep}|{s}"

    def check_writes_ordered(self, buffer: str, writers: list[Write]) -> None:
        """Any two instances writing one element are ordered, one before the other."""
        for a, b in itertools.combinations_with_replacement(range(len(writers)), 2):
            wa, wb = writers[a], writers[b]
            ia, ib = wa.inst.renamed(-5), wb.inst.renamed(-6)
            space = _Space(self, [ia, ib])
            s = space.domain(ia) & space.same_element(ia, wa.indices, ib, wb.indices)
            s = s.subtract(space.hb(ia, ib)).subtract(space.hb(ib, ia))
            s = s.subtract(space.same_instance(ia, ib))
            if not s.is_empty():
                raise NotProved(self._multi(buffer) + "; as an accumulation: two writes of "
                                "one element are not ordered", space.point(s))

    def resolve_ring(self, t: Shr, writers: list[Write], depth: int) -> Term:
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
            return NotProved(self._multi(t.buffer) + f"; as an mbarrier ring: {why}")

        bars = {w.tma.barrier for w in writers if w.tma is not None}
        if len(bars) != 1:
            raise fail("the loads signal different barriers")
        if len(writers) > 1:
            return self.resolve_ring_sequence(t, writers, depth, fail)
        (load,) = writers
        assert load.tma is not None
        bar = self.k.barrier(load.tma.barrier)
        guard = next((g for g in bar.all_guards if g.buffer == t.buffer), None)
        if bar.count != 1 or guard is None:
            raise fail(f"'{bar.name}' does not guard it with count 1")
        arrs = [a for a in self.arrivals if a.barrier == bar.name]
        if len(arrs) != 1 or not arrs[0].tx:
            raise fail(f"'{bar.name}' is not armed by exactly one arrive.expect_tx")
        arrive = arrs[0]
        wait = next((w for w in t.waits if w[0] == bar.name), None)
        if wait is None:
            raise fail(f"the read follows no wait on '{bar.name}' at its loop level")
        _, widx, wait_inst = wait
        real = tuple(lp for lp in load.inst.loops if lp.uid >= 0)
        if (arrive.inst.loops != real or arrive.inst.guards != load.inst.guards
                or (arrive.inst.thread_lo, arrive.inst.thread_hi, arrive.inst.elect)
                != (load.inst.thread_lo, load.inst.thread_hi, load.inst.elect)):
            raise fail("the arrive.expect_tx is not beside the load")
        if len(wait_inst.loops) != len(real) or not real:
            raise fail("the wait and the load are not in loops of the same depth")
        if not (load.inst.elect or load.inst.thread_hi - load.inst.thread_lo == 1):
            raise fail("more than one thread issues the load")
        li = load.inst.renamed(-7)
        ai = arrive.inst.renamed(-7)
        wi = wait_inst
        space = _Space(self, [li, wi, t.inst])
        lname = [space.loop_name(li, lp.uid) for lp in real]
        wname = [space.loop_name(wi, lp.uid) for lp in wi.loops]
        same = space.universe()
        for a, b in zip(lname, wname, strict=True):
            same = same & space.dim(a).eq_set(space.dim(b))
        for lv, (lp, wp) in enumerate(zip(real, wi.loops, strict=True)):
            ctx = space.base & same
            for j in range(lv):
                ctx = ctx & _bounds(space, li, real[j])
            for x, y in ((lp.lo, wp.lo), (lp.hi, wp.hi)):
                if not (ctx & space.term(x, li).ne_set(space.term(y, wi))).is_empty():
                    raise fail("the load's and the wait's loops have different bounds")
            if lp.step != wp.step:
                raise fail("the load's and the wait's loops have different steps")
        box = [n for n in space.inst_dims(li) if n not in lname and not n.startswith("t_")]
        dom_l = space.domain(li)
        for name in box:
            dom_l = dom_l.eliminate(isl.dim_type.set, space.pos[name], 1)
        full_l = space.domain(Inst(li.ns, li.thread_lo, li.thread_hi, li.elect, real, (),
                                   li.lets))
        if not full_l.is_subset(dom_l):
            raise fail("the load is skipped in some iterations")
        wait_all = Inst(wi.ns, wi.thread_lo, wi.thread_hi, wi.elect, wi.loops, (), wi.lets)
        if not space.domain(wait_all).is_subset(space.domain(wi)):
            raise fail("the wait is skipped in some iterations")
        elem_l = load.tma.index if load.tma.index is not None else ir.IntConst(
            bar.span, ir.ScalarType.INT, 0)
        elem_w = widx if widx is not None else elem_l
        seq = full_l & same & space.domain(wait_all)
        if not (seq & space.term(elem_l, li).ne_set(space.term(elem_w, wi))).is_empty():
            raise fail("the load's and the wait's barrier elements differ")
        if not (seq & space.term(arrive.index or elem_l, ai).ne_set(
                space.term(elem_l, li))).is_empty():
            raise fail("the arrive.expect_tx arms another element than the load signals")
        if guard.indexed and not (full_l & space.term(load.indices[0], li).ne_set(
                space.term(elem_l, li))).is_empty():
            raise fail("the load's stage is not the element of the barrier guarding it")
        nsmap = self.fresh_ns_map()
        winst = load.inst.renamed(nsmap(load.inst.ns))
        order = self._ring_order(wi, winst, real)
        link = Link(t.inst, t.indices, winst, load.indices, order)
        exists = _Space(self, [t.inst, wi, winst])
        linked = exists.link(link)
        for name in exists.inst_dims(winst):
            linked = linked.eliminate(isl.dim_type.set, exists.pos[name], 1)
        if not exists.domain(t.inst).is_subset(linked):
            raise fail("some read element is not written by the load of the waited phase")
        value = self.resolve(rename(load.value, nsmap), depth + 1)
        self.resolved.add(t.buffer)
        return Choice(t.buffer, ((link, value),))

    def resolve_ring_sequence(self, t: Shr, writers: list[Write], depth: int, fail
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
        bar = self.k.barrier(loads[0].tma.barrier)  # type: ignore[union-attr]
        guard = next((g for g in bar.all_guards if g.buffer == t.buffer), None)
        if bar.count != 1 or guard is None:
            raise fail(f"'{bar.name}' does not guard it with count 1")
        arrs = [a for a in self.arrivals if a.barrier == bar.name]
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
        issuer = None
        for w in loads:
            sp = _Space(self, [w.inst])
            tset = sp.domain(w.inst)
            keep = sp.pos[_thread(w.inst)]
            for i in reversed(range(len(sp.names))):
                if i != keep:
                    tset = tset.project_out(isl.dim_type.set, i, 1)
            tset = tset.project_out(isl.dim_type.param, 0, tset.dim(isl.dim_type.param))
            if tset.is_empty() or not tset.lexmin().is_equal(tset.lexmax()) or (
                    issuer is not None and not tset.is_equal(issuer)):
                raise fail("the loads are not issued by one thread")
            issuer = tset
        assert issuer is not None
        issuer_thread = int(issuer.sample_point().get_coordinate_val(
            isl.dim_type.set, 0).to_python())
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
            space = _Space(self, [li, wi])
            bare = Inst(li.ns, li.thread_lo, li.thread_hi, li.elect, real, (), li.lets)
            dom_l = space.domain(li)
            for name in space.inst_dims(li):
                if name != _thread(li) and name not in [space.loop_name(li, lp.uid)
                                                        for lp in real]:
                    dom_l = dom_l.eliminate(isl.dim_type.set, space.pos[name], 1)
            last = n == len(loads) - 1
            # every iteration of the loop (or once), for the issuing thread, at every size
            full = space.domain(bare) & space.dim(_thread(li)).eq_set(
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
                    shifted = prev.preimage_multi_aff(_shift(space, space.pos[
                        space.loop_name(li, lp.uid)], -1))
                    if not (shifted & full).is_subset(dom_l):
                        raise fail("the last load statement does not run a prefix of its "
                                   "loop")
                pos = _expr_add(before, ir.BinOp(bar.span, ir.ScalarType.INT, "-",
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
            nsmap = self.fresh_ns_map()
            winst = load.inst.renamed(nsmap(load.inst.ns))
            osp = _Space(self, [wi, winst])
            order = osp.term(pos, winst).eq_set(osp.dim(osp.loop_name(wi, wl.uid)).sub(
                osp.term(wl.lo, wi)))
            link = Link(t.inst, t.indices, winst, load.indices, f"{osp.names}|{order}")
            options.append((link, rename(load.value, nsmap)))
            before = _expr_add(before, count)
        exists = _Space(self, [t.inst, wi] + [lk.writer for lk, _ in options])
        linked = isl.Set.empty(exists.space)
        for lk, _ in options:
            one = exists.link(lk)
            for name in exists.inst_dims(lk.writer):
                one = one.eliminate(isl.dim_type.set, exists.pos[name], 1)
            linked = linked | one
        if not exists.domain(t.inst).is_subset(linked):
            raise fail("some read element is not written by the load of the waited phase")
        self.resolved.add(t.buffer)
        return Choice(t.buffer, tuple((lk, self.resolve(v, depth + 1)) for lk, v in options))

    def _ring_order(self, wait: Inst, writer: Inst, real: tuple[LoopInfo, ...]) -> str:
        """The writer's loop coordinates equal the governing wait's, as `[names]|set`."""
        space = _Space(self, [wait, writer])
        s = space.universe()
        for lp, wp in zip(real, wait.loops, strict=True):
            s = s & space.dim(space.loop_name(writer, lp.uid)).eq_set(
                space.dim(space.loop_name(wait, wp.uid)))
        return f"{space.names}|{s}"

    def check_ordered(self, read: Shr, writers: list[Write]) -> None:
        """A buffer written more than once per element: the write a read sees is the last
        one before it, which is decidable here when program order and `sync` epochs order
        the read against every write of the element (race freedom, proved by the ownership
        checker, says some synchronisation orders them; if it is not program order, a `sync`
        or a named barrier, e.g. an mbarrier phase or an asynchronous TMA load, give up)."""
        for w in writers:
            r, wi = read.inst.renamed(-3), w.inst.renamed(-4)
            space = _Space(self, [r, wi])
            s = space.domain(r) & space.domain(wi)
            for x, y in zip(read.indices, w.indices, strict=True):
                s = s & space.term(x, r).eq_set(space.term(y, wi))
            s = s.subtract(space.hb(wi, r)).subtract(space.hb(r, wi))
            s = s.subtract(space.same_instance(r, wi))  # `x[i] = x[i] + ..`: read first
            if not s.is_empty():
                raise NotProved(self._multi(read.buffer) + "; some write of an element it "
                                "reads is not ordered with the read by program order, a "
                                "`sync` or a named barrier (an mbarrier phase, a TMA load, "
                                "a synchronisation under a condition?)", space.point(s))

    def last_writer(self, link: Link, writers: list[Write]) -> str | None:
        """The pairs (read, write) of `link` where the write is the last one of the element
        before the read, as ISL text over their coordinates; None when there are none."""
        rivals = [(w.inst.renamed(self.fresh_ns_map()(w.inst.ns)), w.indices)
                  for w in writers]
        space = _Space(self, [link.reader, link.writer] + [r for r, _ in rivals])
        s = space.domain(link.reader) & space.link(link)
        s = s & space.hb(link.writer, link.reader)
        for rival, ridx in rivals:
            between = space.same_element(link.reader, link.reader_idx, rival, ridx)
            between = between & space.hb(link.writer, rival) & space.hb(rival, link.reader)
            dims = space.inst_dims(rival)
            for name in dims:
                between = between.eliminate(isl.dim_type.set, space.pos[name], 1)
            s = s.subtract(between)
            if s.is_empty():
                return None
        keep = [n for n in space.names if _is_block(n)]
        keep += space.inst_dims(link.reader) + space.inst_dims(link.writer)
        for name in reversed(space.names):
            if name not in keep:
                s = s.project_out(isl.dim_type.set, space.names.index(name), 1)
        s = s.coalesce()
        return None if s.is_empty() else f"{keep}|{s}"

    def is_unique(self, buffer: str, writers: list[Write]) -> bool:
        """At most one instance of all of `buffer`'s writing statements writes each element
        in a block (ISL, every size)."""
        if buffer in self.unique:
            return self.unique[buffer]
        ok = True
        for a, b in itertools.combinations_with_replacement(range(len(writers)), 2):
            wa, wb = writers[a], writers[b]
            ia, ib = wa.inst.renamed(-1), wb.inst.renamed(-2)
            space = _Space(self, [ia, ib])
            s = space.domain(ia) & space.domain(ib)
            for x, y in zip(wa.indices, wb.indices, strict=True):
                s = s & space.term(x, ia).eq_set(space.term(y, ib))
            if a == b:
                same = space.universe()
                for d in space.inst_dims(ia):
                    same = same & space.dim(d).eq_set(space.dim(d.replace("nm1", "nm2", 1)))
                s = s.subtract(same)
            if not s.is_empty():
                ok = False
                break
        self.unique[buffer] = ok
        return ok

    @staticmethod
    def _multi(buffer: str) -> str:
        return (f"shared buffer '{buffer}' is written more than once per element (a ring "
                "refilled every pass, or a reduction tree): which write a read sees is not "
                "identified for every size")

    # ---- comparing ---------------------------------------------------------------------------

    def compare_write(self, store: Inst, indices: tuple[ir.Expr, ...], value: Term,
                      spec: ir.Ensures) -> None:
        """value (written by `store` at `indices`) == the spec's rhs at those indices."""
        out = self.k.tensor(spec.tensor)
        sinst, sterm = spec_term(spec, self.k)
        space = _Space(self, [store, sinst, *insts(value), *insts(sterm)])
        ctx = space.domain(store)
        for var, idx in zip(spec.index_vars, indices, strict=True):
            ctx = ctx & space.dim(space.loop_name(sinst, var.uid)).eq_set(
                space.term(idx, store))
        outer = {n for n in space.names if _is_block(n)}
        outer |= set(space.inst_dims(store)) | set(space.inst_dims(sinst))
        _Compare(space, out.dtype, outer).equal(value, sterm, ctx, top=True)


# ---- the spec as a term ----------------------------------------------------------------------


def spec_term(spec: ir.Ensures, kernel: ir.Kernel) -> tuple[Inst, Term]:
    out = kernel.tensor(spec.tensor)
    loops = tuple(LoopInfo(v.uid, ir.IntConst(spec.span, ir.ScalarType.INT, 0), d, 1)
                  for v, d in zip(spec.index_vars, out.shape, strict=True))
    inst = Inst(SPEC_NS, 0, 1, False, loops, ())
    return inst, _spec_value(spec.rhs, inst)


def _spec_value(e: ir.Expr, inst: Inst) -> Term:
    if e.type is ir.ScalarType.INT:
        return IntV(e, inst)
    if isinstance(e, ir.FloatConst):
        return lit(e.value)
    if isinstance(e, ir.Load):
        return Glob(e.tensor, e.indices, inst)
    if isinstance(e, ir.Reduce):
        inner = Inst(inst.ns, 0, 1, False, inst.loops + (LoopInfo(e.var.uid, e.lo, e.hi, 1),),
                     ())
        return SpecSum(e.ordered, inner, _spec_value(e.body, inner))
    if isinstance(e, (ir.BinOp, ir.UnOp, ir.Call)):
        op = evaluate.typed_op(e)
        operands = ((e.lhs, e.rhs) if isinstance(e, ir.BinOp)
                    else (e.operand,) if isinstance(e, ir.UnOp) else e.args)
        args = []
        for a, conv in zip(operands, op.to_float, strict=True):
            t = _spec_value(a, inst)
            args.append(Op("cvt.f32", (t,)) if conv else t)
        return args[0] if op.name == "id" else Op(op.name, tuple(args))
    raise Unsupported(f"'{type(e).__name__}' in a spec")


# ---- ISL space over all coordinates involved ------------------------------------------------


class _Space:
    """One ISL set space: params = sizes; dims = block coordinates, then per namespace its
    thread and loop coordinates (`t_n3`, `l_n3_17`)."""

    def __init__(self, prover: _Prover, involved: list[Inst]) -> None:
        self.k = prover.k
        self.kernels = prover.kernels
        self.ctx = prover.ctx
        self.phases = prover.phases
        names = [_block_name(tag, i) for tag, k in enumerate(self.kernels)
                 for i in range(len(k.grid))]
        seen: set[str] = set(names)
        for inst in involved:
            for n in self.inst_dims(inst):
                if n not in seen:
                    seen.add(n)
                    names.append(n)
        self.names = names
        sizes = tuple(dict.fromkeys(n for k in self.kernels for n in k.sizes))
        self.sizes = sizes
        self.space = affine.make_space(self.ctx, sizes, tuple(names))
        self.pos = {n: i for i, n in enumerate(names)}
        self._envs: dict[Inst, AffineEnv] = {}
        where = affine.exact_set(isl.Set.universe(self.space))
        env = AffineEnv(self.space)
        blocks = self.universe()
        for tag, k in enumerate(self.kernels):
            for c in k.where:
                where = where & affine.condition(c, env)
            for i, g in enumerate(k.grid):
                b = self.dim(_block_name(tag, i))
                blocks = blocks & b.ge_set(affine.constant(env, 0)) & b.lt_set(
                    affine.term(g, env))
        self.base = blocks & where.over

    @staticmethod
    def inst_dims(inst: Inst) -> list[str]:
        dims = [] if inst.ns == SPEC_NS else [_thread(inst)]
        return dims + [_Space.loop_name(inst, lp.uid) for lp in inst.loops]

    @staticmethod
    def loop_name(inst: Inst, uid: int) -> str:
        return f"l_n{_id(inst.ns)}_{_id(uid)}"

    def universe(self) -> isl.Set:
        return isl.Set.universe(self.space)

    def dim(self, name: str) -> isl.PwAff:
        return affine.dim(AffineEnv(self.space), self.pos[name])

    def env(self, inst: Inst) -> AffineEnv:
        env = self._envs.get(inst)
        if env is None:
            loops = {lp.uid: self.pos[self.loop_name(inst, lp.uid)] for lp in inst.loops}
            thread = None if inst.ns == SPEC_NS else self.pos[_thread(inst)]
            grid = self.kernels[inst.kernel].grid
            blocks = tuple(self.pos[_block_name(inst.kernel, i)] for i in range(len(grid)))
            env = AffineEnv(self.space, loops, blocks, thread, dict(inst.lets))
            self._envs[inst] = env
        return env

    def term(self, e: ir.Expr, inst: Inst) -> isl.PwAff:
        try:
            return affine.term(e, self.env(inst))
        except NotAffine as why:
            raise NotProved(f"'{show(IntV(e, inst))}' is not quasi-affine: {why.reason}") \
                from None

    def cond(self, e: ir.Expr, inst: Inst) -> isl.Set:
        """A guard as an exact set. A guard with no Presburger form is not approximated:
        the multiset and last-writer arguments need exact instance sets, so give up."""
        c = affine.condition(e, self.env(inst))
        if not c.exact:
            raise NotProved(f"a guard is not Presburger ({'; '.join(c.dropped)})")
        return c.over

    def domain(self, inst: Inst) -> isl.Set:
        """The instances, exactly (NotProved on a non-Presburger guard), in the block grid,
        at sizes `where` allows."""
        env = self.env(inst)
        s = self.base
        if inst.ns != SPEC_NS:
            t = self.dim(_thread(inst))
            s = s & t.ge_set(affine.constant(env, inst.thread_lo))
            s = s & t.lt_set(affine.constant(env, inst.thread_lo + 1 if inst.elect
                                              else inst.thread_hi))
        for lp in inst.loops:
            v = self.dim(self.loop_name(inst, lp.uid))
            lo = self.term(lp.lo, inst)
            s = s & v.ge_set(lo) & v.lt_set(self.term(lp.hi, inst))
            if lp.step != 1:
                s = s & v.sub(lo).mod_val(affine.val(self.ctx, lp.step)).eq_set(
                    affine.constant(env, 0))
        for g in inst.guards:
            s = s & self.cond(g, inst)
        return s

    def same_element(self, reader: Inst, ridx, writer: Inst, widx) -> isl.Set:
        s = self.domain(writer)
        for r, w in zip(ridx, widx, strict=True):
            s = s & self.term(r, reader).eq_set(self.term(w, writer))
        return s

    def link(self, link: Link) -> isl.Set:
        s = self.same_element(link.reader, link.reader_idx, link.writer, link.writer_idx)
        if link.order is None:
            return s
        return s & self.embed(link.order)

    def embed(self, text: str) -> isl.Set:
        """A set over some of this space's coordinates (`[names]|set`) as a set of it."""
        names_text, set_text = text.split("|", 1)
        names = [n.strip(" '") for n in names_text.strip("[]").split(",")]
        small = isl.Set.read_from_str(self.ctx, set_text)
        params = ", ".join(self.sizes)
        m = isl.Map.read_from_str(self.ctx, f"[{params}] -> {{ [{', '.join(names)}] -> "
                                  f"[{', '.join(self.names)}] }}")
        return self.universe() & small.align_params(m.get_space().params()).apply(m)

    def hb(self, a: Inst, b: Inst) -> isl.Set:
        """a happens before b by program order (same thread), by a `sync` between them
        (a's epoch is smaller), or by a named barrier: a's thread takes part in the phase
        after a, whose number is smaller than that of the last phase b's thread waited
        for (sync_counts.py says when phase numbers are participation counts).
        Sufficient, and checked to decide every pair it is used on (check_ordered)."""
        s = self.lex_lt(a, b) & self.dim(_thread(a)).eq_set(self.dim(_thread(b)))
        if a.epoch is not None and b.epoch is not None:
            s = s | self.term(a.epoch, a).lt_set(self.term(b.epoch, b))
        waited = dict(b.named)
        for bar_id, before in a.named:
            after = waited.get(bar_id)
            members = self.phases.get(bar_id)
            if before is None or after is None or members is None:
                continue
            if sync_counts.member(members, a.thread_lo, a.thread_hi) is None:
                continue
            mb = sync_counts.member(members, b.thread_lo, b.thread_hi)
            if mb is None or not mb.waits:
                continue
            s = s | self.term(before, a).lt_set(self.term(after, b))
        return s

    def same_instance(self, a: Inst, b: Inst) -> isl.Set:
        """a and b are one statement instance of one thread."""
        if len(a.sched) != len(b.sched):
            return isl.Set.empty(self.space)
        s = self.dim(_thread(a)).eq_set(self.dim(_thread(b)))
        for x, y in zip(a.sched, b.sched, strict=True):
            s = s & self.term(x, a).eq_set(self.term(y, b))
        return s

    def lex_lt(self, a: Inst, b: Inst) -> isl.Set:
        env = AffineEnv(self.space)
        n = max(len(a.sched), len(b.sched))
        pad = affine.constant(env, -1)
        xs = [self.term(x, a) for x in a.sched] + [pad] * (n - len(a.sched))
        ys = [self.term(y, b) for y in b.sched] + [pad] * (n - len(b.sched))
        result = isl.Set.empty(self.space)
        eq = self.universe()
        for x, y in zip(xs, ys, strict=True):
            result = result | (eq & x.lt_set(y))
            eq = eq & x.eq_set(y)
        return result

    def point(self, s: isl.Set) -> dict[str, int]:
        """A point of s, with small sizes where s has one (a launch the interpreter can
        run to confirm the failure as a refutation)."""
        for bound in (256, 1024, 8192):
            small = s
            for i in range(len(self.sizes)):
                v = isl.PwAff.var_on_domain(isl.LocalSpace.from_space(self.space),
                                            isl.dim_type.param, i)
                small = small & v.le_set(affine.constant(AffineEnv(self.space), bound))
            if not small.is_empty():
                s = small
                break
        p = s.sample_point()
        out = {}
        for i, name in enumerate(self.sizes):
            out[name] = int(p.get_coordinate_val(isl.dim_type.param, i).to_python())
        for i, name in enumerate(self.names):
            if _is_block(name) or name.startswith(f"l_n{SPEC_NS}_"):
                out[name] = int(p.get_coordinate_val(isl.dim_type.set, i).to_python())
        return out


class _Compare:
    def __init__(self, space: _Space, out_dtype: ir.DType, outer: set[str]) -> None:
        self.s = space
        self.out_dtype = out_dtype
        self.outer = outer  # coordinates fixed for one output element

    def fail(self, why: str, where: isl.Set) -> None:
        if len(why) > 400:
            why = why[:400] + "..."
        raise NotProved(why, self.s.point(where) if not where.is_empty() else None)

    def equal(self, k: Term, s: Term, ctx: isl.Set, top: bool = False) -> None:
        """Prove k == s on every point of ctx (bit-exact values). `top`: k flows unchanged
        into the output, whose store rounds to its dtype anyway (so rounding to that dtype
        on the way is the identity)."""
        if ctx.is_empty():
            return
        if isinstance(k, Choice):
            for link, v in k.options:
                self.equal(v, s, ctx & self.s.link(link), top)
            return
        if isinstance(k, Ite):
            c = self.s.cond(k.cond, k.inst)
            self.equal(k.then, s, ctx & c, top)
            self.equal(k.orelse, s, ctx & self.s.cond(_neg(k.cond), k.inst), top)
            return
        if isinstance(s, Choice):  # the other side is a kernel too (`tilesafe equiv`)
            for link, v in s.options:
                self.equal(k, v, ctx & self.s.link(link), top)
            return
        if isinstance(s, Ite):
            self.equal(k, s.then, ctx & self.s.cond(s.cond, s.inst), top)
            self.equal(k, s.orelse, ctx & self.s.cond(_neg(s.cond), s.inst), top)
            return
        if top and isinstance(k, Round) and k.dtype is self.out_dtype:
            self.equal(k.arg, s, ctx, top)
            return
        if top and isinstance(s, Round) and s.dtype is self.out_dtype:
            self.equal(k, s.arg, ctx, top)
            return
        if isinstance(k, Round):
            inner = k.arg
            if _exact_in(inner, k.dtype, self.s.k):
                self.equal(inner, s, ctx)
                return
            if isinstance(s, Round) and s.dtype is k.dtype:
                self.equal(inner, s.arg, ctx)
                return
            self.fail(f"the kernel rounds '{show(inner)}' to {k.dtype.value} where the spec "
                      f"does not", ctx)
        if isinstance(s, SpecSum):
            self.sum(k, s, ctx)
            return
        if isinstance(k, Glob) and isinstance(s, Glob):
            if k.tensor != s.tensor:
                self.fail(f"the kernel moves '{k.tensor}' where the spec asks for "
                          f"'{s.tensor}'", ctx)
            for d, (a, b) in enumerate(zip(k.indices, s.indices, strict=True)):
                bad = ctx & self.s.term(a, k.inst).ne_set(self.s.term(b, s.inst))
                if not bad.is_empty():
                    self.fail(f"index {d} of '{k.tensor}' differs: the kernel reads "
                              f"{show(k)}, the spec {show(s)}", bad)
            return
        if isinstance(k, Lit) and isinstance(s, Lit):
            if k.bits != s.bits and not (k.value != k.value and s.value != s.value):
                self.fail(f"the kernel has {k.value} where the spec has {s.value}", ctx)
            return
        if isinstance(k, IntV) and isinstance(s, IntV):
            bad = ctx & self.s.term(k.expr, k.inst).ne_set(self.s.term(s.expr, s.inst))
            if not bad.is_empty():
                self.fail(f"integer {show(k)} differs from the spec's {show(s)}", bad)
            return
        if isinstance(k, Op) and isinstance(s, Op) and k.name == s.name and \
                len(k.args) == len(s.args):
            try:
                for a, b in zip(k.args, s.args, strict=True):
                    self.equal(a, b, ctx)
            except NotProved as first:
                if k.name not in _COMMUTATIVE:
                    raise
                # IEEE + and * are commutative (bit for bit, NaN payloads aside)
                try:
                    self.equal(k.args[0], s.args[1], ctx)
                    self.equal(k.args[1], s.args[0], ctx)
                except NotProved:
                    raise first from None
            return
        if isinstance(k, Fold):
            self.fail("a loop accumulation where the spec has no sum", ctx)
        if isinstance(k, Accum):
            self.fail("an accumulation in shared memory where the spec has no sum", ctx)
        self.fail(f"the kernel computes {show(k)} where the spec asks for {show(s)}", ctx)

    # ---- sums ------------------------------------------------------------------------------

    def sum(self, k: Term, s: SpecSum, ctx: isl.Set) -> None:
        if s.ordered:
            self.seq_sum(k, s, ctx)
            return
        parts = list(self.contributions(k, ctx))
        spec_dom = ctx & self.s.domain(s.inst)
        spec_img, spec_inj = self.image(s.body, spec_dom, {self.s.loop_name(
            s.inst, s.inst.loops[-1].uid)})
        if not spec_inj:
            self.fail("the spec's sum names an input element more than once", spec_dom)
        union = isl.Set.empty(spec_img.get_space())
        for body, dom, dims in parts:
            if not _same_shape(body, s.body):
                self.fail(f"a contribution {show(body)} does not have the shape of the "
                          f"spec's {show(s.body)}", dom)
            img, inj = self.image(body, dom, dims)
            if not inj:
                self.fail(f"contribution {show(body)} adds an input element more than once",
                          dom)
            if not (img & union).is_empty():
                self.fail("two parts of the reduction add the same input element", dom)
            union = union | img
        if not union.subtract(spec_img).is_empty():
            self.fail("the kernel adds an input element the spec's sum does not", ctx)
        if not spec_img.subtract(union).is_empty():
            self.fail("the kernel's reduction misses an input element of the spec's sum", ctx)

    def seq_sum(self, k: Term, s: SpecSum, ctx: isl.Set) -> None:
        """sum_seq: one unguarded fold over a unit-step loop from +0.0, in the spec's
        order (contribution i of the loop is contribution i of the spec)."""
        if not (isinstance(k, Fold) and k.depth == 1 and not k.guarded
                and isinstance(k.init, Lit) and k.init.bits == 0):
            self.fail("sum_seq is proved only against one unguarded loop accumulating from "
                      "0.0", ctx)
        lp, sp = k.inst.loops[-1], s.inst.loops[-1]
        if lp.step != 1:
            self.fail("sum_seq needs a unit-step loop", ctx)
        kv = self.s.dim(self.s.loop_name(k.inst, lp.uid))
        sv = self.s.dim(self.s.loop_name(s.inst, sp.uid))
        klo, khi = self.s.term(lp.lo, k.inst), self.s.term(lp.hi, k.inst)
        slo, shi = self.s.term(sp.lo, s.inst), self.s.term(sp.hi, s.inst)
        bad = ctx & khi.sub(klo).max(_zero(self.s)).ne_set(shi.sub(slo).max(_zero(self.s)))
        if not bad.is_empty():
            self.fail("the loop and the spec's sum_seq have different trip counts", bad)
        inner = ctx & self.s.domain(k.inst) & sv.eq_set(kv.sub(klo).add(slo))
        self.equal(k.body, s.body, inner)

    def contributions(self, k: Term, ctx: isl.Set
                      ) -> Iterator[tuple[Term, isl.Set, set[str]]]:
        """(body, instances, the coordinates that range over them) of every addend of an
        f32 `+` tree; +0.0 addends are dropped."""
        if ctx.is_empty():
            return
        if isinstance(k, Op) and k.name == "f32.add":
            for a in k.args:
                yield from self.contributions(a, ctx)
            return
        if isinstance(k, Lit) and k.bits == 0:
            return
        if isinstance(k, Fold):
            yield from self.contributions(k.init, ctx)
            dom = ctx & self.s.domain(k.inst)
            dims = {self.s.loop_name(k.inst, lp.uid) for lp in k.inst.loops[-k.depth:]}
            for body, d, extra in self.contributions(k.body, dom):
                yield body, d, dims | extra
            return
        if isinstance(k, Choice):
            for link, v in k.options:
                dom = ctx & self.s.link(link)
                for body, d, extra in self.contributions(v, dom):
                    yield body, d, extra | set(self.s.inst_dims(link.writer))
            return
        if isinstance(k, Accum):
            for link, init, steps in k.options:
                dom = ctx & self.s.link(link)
                first = set(self.s.inst_dims(link.writer))
                for body, d, extra in self.contributions(init, dom):
                    yield body, d, extra | first
                for step, v in steps:
                    ranging = first | set(self.s.inst_dims(step.writer))
                    for body, d, extra in self.contributions(v, dom & self.s.link(step)):
                        yield body, d, extra | ranging
            return
        if isinstance(k, Ite):
            yield from self.contributions(k.then, ctx & self.s.cond(k.cond, k.inst))
            yield from self.contributions(k.orelse,
                                          ctx & self.s.cond(_neg(k.cond), k.inst))
            return
        if isinstance(k, Round) and _exact_in(k.arg, k.dtype, self.s.k):
            yield from self.contributions(k.arg, ctx)
            return
        yield from self.lift(k, ctx)

    def lift(self, k: Term, ctx: isl.Set) -> Iterator[tuple[Term, isl.Set, set[str]]]:
        """k with every resolved read and conditional inside its operations split into
        cases: (a term of loads and constants, where it holds, the writers' coordinates)."""
        if ctx.is_empty():
            return
        if isinstance(k, Choice):
            for link, v in k.options:
                for body, d, extra in self.lift(v, ctx & self.s.link(link)):
                    yield body, d, extra | set(self.s.inst_dims(link.writer))
            return
        if isinstance(k, Ite):
            yield from self.lift(k.then, ctx & self.s.cond(k.cond, k.inst))
            yield from self.lift(k.orelse, ctx & self.s.cond(_neg(k.cond), k.inst))
            return
        if isinstance(k, Round) and _exact_in(k.arg, k.dtype, self.s.k):
            yield from self.lift(k.arg, ctx)
            return
        if isinstance(k, Accum):
            self.fail("an accumulation in shared memory inside an operation", ctx)
        if isinstance(k, Op):
            cases: list[tuple[tuple[Term, ...], isl.Set, set[str]]] = [((), ctx, set())]
            for a in k.args:
                cases = [(args + (body,), d2, extra | e2)
                         for args, d, extra in cases
                         for body, d2, e2 in self.lift(a, d)]
            for args, d, extra in cases:
                yield Op(k.name, args), d, extra
            return
        yield k, ctx, set()

    def image(self, body: Term, dom: isl.Set, ranging: set[str]) -> tuple[isl.Set, bool]:
        """{(outer coordinates, leaf indices of body)} over dom, and whether the map from
        (outer, ranging coordinates) to it is injective. Coordinates neither outer nor
        ranging belong to other parts and are pinned to 0."""
        env = AffineEnv(self.s.space)
        d = dom
        ranging = set(ranging)
        for leaf in _leaves(body):  # every coordinate a leaf's value depends on ranges too
            inst = getattr(leaf, "inst", None)
            if isinstance(inst, Inst):
                ranging |= set(self.s.inst_dims(inst)) - self.outer
        for n in self.s.names:
            if n not in ranging and n not in self.outer:
                d = d & self.s.dim(n).eq_set(affine.constant(env, 0))
        outs = [self.s.dim(n) for n in self.s.names if n in self.outer]
        for leaf in _leaves(body):
            if isinstance(leaf, Glob):
                outs += [self.s.term(i, leaf.inst) for i in leaf.indices]
            elif isinstance(leaf, IntV):
                outs.append(self.s.term(leaf.expr, leaf.inst))
        lst = isl.PwAffList.alloc(self.s.ctx, len(outs))
        for o in outs:
            lst = lst.add(o)
        rng = isl.Space.create_from_names(self.s.ctx, set=[f"o{i}" for i in range(len(outs))],
                                          params=list(self.s.sizes))
        mspace = self.s.space.map_from_domain_and_range(rng)
        m = isl.Map.from_multi_pw_aff(isl.MultiPwAff.from_pw_aff_list(mspace, lst))
        m = m.intersect_domain(d)
        return m.range(), m.is_injective()


def _step_body(w: Write) -> Term | None:
    """For an in-place update `buf[e] = buf[e] + body` of a shared f32 buffer (the read of
    the element it writes, in the same statement instance), the body added; else None."""
    v = w.value
    if w.space is not ir.Space.SHARED or w.tma is not None:
        return None
    if not (isinstance(v, Op) and v.name == "f32.add"):
        return None
    for i in (0, 1):
        r, body = v.args[i], v.args[1 - i]
        if (isinstance(r, Shr) and r.buffer == w.target and r.inst == w.inst
                and without_spans(r.indices) == without_spans(w.indices)
                and not any(isinstance(n, Shr) and n.buffer == w.target for n in walk(body))):
            return body
    return None


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


def _expr_add(a: ir.Expr, b: ir.Expr) -> ir.Expr:
    return ir.BinOp(a.span, ir.ScalarType.INT, "+", a, b)


def _shift(space: _Space, pos: int, by: int) -> isl.MultiAff:
    """The map x -> x with coordinate pos lowered by `by` (x[pos] - by; by < 0 raises)."""
    ls = isl.LocalSpace.from_space(space.space)
    affs = []
    for i in range(len(space.names)):
        a = isl.Aff.var_on_domain(ls, isl.dim_type.set, i)
        if i == pos:
            a = a.add_constant_val(isl.Val.int_from_si(space.ctx, -by))
        affs.append(a)
    lst = isl.AffList.alloc(space.ctx, len(affs))
    for a in affs:
        lst = lst.add(a)
    return isl.MultiAff.from_aff_list(space.space.map_from_set(), lst)


def _id(x: int) -> str:
    """An ISL-safe name part for a namespace or uid (negative ones: m7)."""
    return str(x) if x >= 0 else f"m{-x}"


def _thread(inst: Inst) -> str:
    return f"t_n{_id(inst.ns)}"


def _bounds(space: _Space, inst: Inst, lp: LoopInfo) -> isl.Set:
    v = space.dim(space.loop_name(inst, lp.uid))
    return v.ge_set(space.term(lp.lo, inst)) & v.lt_set(space.term(lp.hi, inst))


def _block_name(tag: int, axis: int) -> str:
    return f"{'bc'[tag]}{axis}"


def _is_block(name: str) -> bool:
    return name[:1] in ("b", "c") and name[1:].isdigit()


def _zero(space: _Space) -> isl.PwAff:
    return affine.constant(AffineEnv(space.space), 0)


def _leaves(t: Term) -> Iterator[Term]:
    if isinstance(t, (Glob, IntV, Lit)):
        yield t
        return
    if isinstance(t, Op):
        for a in t.args:
            yield from _leaves(a)
        return
    if isinstance(t, Round):
        yield from _leaves(t.arg)
        return
    raise NotProved(f"a sum's term {show(t)} is not built from loads and constants")


def _same_shape(a: Term, b: Term) -> bool:
    if isinstance(a, Op) and isinstance(b, Op):
        return a.name == b.name and len(a.args) == len(b.args) and all(
            _same_shape(x, y) for x, y in zip(a.args, b.args, strict=True))
    if isinstance(a, Glob) and isinstance(b, Glob):
        return a.tensor == b.tensor
    if isinstance(a, Lit) and isinstance(b, Lit):
        return a.bits == b.bits
    if isinstance(a, IntV) and isinstance(b, IntV):
        return True
    if isinstance(a, Round) and isinstance(b, Round):
        return a.dtype is b.dtype and _same_shape(a.arg, b.arg)
    return False


def _exact_in(t: Term, dtype: ir.DType, kernel: ir.Kernel) -> bool:
    """Is rounding t into dtype the identity (a load of a tensor of that dtype, a constant
    it represents exactly, a fill)?"""
    if isinstance(t, Glob):
        return kernel.tensor(t.tensor).dtype is dtype
    if isinstance(t, Lit):
        if t.value != t.value:
            return True
        if dtype is ir.DType.F16:
            import numpy as np
            return float(np.float16(t.value)) == t.value
        if dtype is ir.DType.BF16:
            return fp.f32_to_bf16_bits(fp.f32_from_bits(t.bits)) << 16 == t.bits
        return True
    if isinstance(t, Ite):
        return _exact_in(t.then, dtype, kernel) and _exact_in(t.orelse, dtype, kernel)
    if isinstance(t, Choice):
        return all(_exact_in(v, dtype, kernel) for _, v in t.options)
    if isinstance(t, Round):
        return t.dtype is dtype
    return False


def _neg(e: ir.Expr) -> ir.Expr:
    return ir.UnOp(e.span, ir.ScalarType.BOOL, "!", e)
