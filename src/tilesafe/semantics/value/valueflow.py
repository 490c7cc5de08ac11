"""The value proof: every element of an output holds what its `ensures` clause says, for
every size `where` allows.

How. semantics/value/value_exec.py gives every write as a term over the writing instance. A write
to the specified output is compared with the spec's right-hand side, its index variables
bound to the written index. Before that, every shared-memory read in the term is replaced
by the write it sees (this module):

* single assignment: ISL proves that at most one instance of all the buffer's writing
  statements writes each element per block. The safety checkers prove that no shared
  element is read before something wrote it (TS306) and that no access races (TS302/TS304),
  so the read sees exactly that write (a `Choice` over the writing statements, linked by
  `writer index == reader index`, decided by cases);
* an mbarrier ring refilled by TMA loads: phase matching (semantics/value/value_rings.py);
* otherwise the last write before the read, where happens-before (program order, `sync`
  epochs, named-barrier phases: semantics/value/value_space.py, semantics/temporal/sync_counts.py)
  orders the read against every write of its element;
* an element updated in place across iterations (`buf[e] = buf[e] + body`): the last plain
  write plus every update between it and the read (an `Accum`, compared as a sum).

TMA loads write their box at the *logical* indices of the slice: the TMA checker proves the
arrangement the copy uses (with its swizzle) equals the buffer's layout (TS520), so logical
indices line up; out-of-bounds box elements are the fill value. The comparison itself --
operator by operator, loads by index, order-free sums as multisets -- is
semantics/value/value_compare.py.

Everything is decided by ISL on exact Presburger sets; a guard without a Presburger form
gives up rather than approximate. Failure to prove is `NotProved` with the reason and,
where ISL found one, a point (sizes, coordinates).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import islpy as isl

from tilesafe.frontend import ir
from tilesafe.frontend import walk as ir_walk
from tilesafe.frontend.fmt import without_spans
from tilesafe.frontend.fold import fold
from tilesafe.semantics.temporal import sync_counts
from tilesafe.semantics.value import value_frag, value_rings
from tilesafe.semantics.value.value_compare import Compare
from tilesafe.semantics.value.value_exec import (
    Arrival,
    Executor,
    TermAlgebra,
    Unsupported,
    Write,
    lit,
)
from tilesafe.semantics.value.value_mma import FragWrite
from tilesafe.semantics.value.value_space import (
    SPEC_NS,
    NotProved,
    ValueSpace,
    is_block,
    multi_writer,
    subtract,
)
from tilesafe.semantics.value.value_terms import (
    Accum,
    Choice,
    Fold,
    Frag,
    Glob,
    Inst,
    IntV,
    Ite,
    Link,
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

__all__ = ["NotProved", "Proof", "Prover", "prove", "spec_term", "insts"]

MAX_DEPTH = 6  # shared reads resolved through at most this many writers in a chain
# ISL operations one proof may take: a bound on its time (the slowest good kernel,
# row_sum_ilp, needs between 1e7 and 5e7); past it ISL raises and the clause is unknown.
MAX_OPERATIONS = 200_000_000


def new_context() -> isl.Context:
    """An ISL context with the proof's operation budget."""
    ctx = isl.Context()
    ctx.set_max_operations(MAX_OPERATIONS)
    return ctx


@dataclass(frozen=True)
class Proof:
    """What was proved for one clause, as evidence."""

    writes: int  # write statements of the output compared with the spec
    buffers: tuple[str, ...]  # shared buffers proved single-assignment and resolved
    terms: tuple[str, ...]  # the kernel's value terms (shown)
    seconds: float = 0.0  # how long the proof took (filled in by the caller)


def prove(kernel: ir.Kernel, spec: ir.Ensures) -> Proof:
    """Prove `spec` for every size, or raise NotProved/Unsupported (with the reason)."""
    ex = Executor(kernel)
    writes = ex.run()
    prover = Prover(kernel, writes, arrivals=ex.arrivals,
                     phases=sync_counts.phase_members(ex.named_uses),
                     frag_writes=ex.frag_writes)
    outs = [w for w in writes if w.space is ir.Space.GLOBAL and w.target == spec.tensor]
    if not outs:
        raise NotProved(f"nothing writes '{spec.tensor}'")
    shown = []
    for w in outs:
        nsmap = prover.fresh_ns_map()
        value = prover.resolve(rename(w.value, nsmap), 0)
        prover.check_inputs_unwritten(value)
        shown.append(show(value))
        prover.compare_write(w.inst.renamed(nsmap(w.inst.ns)), w.indices, value, spec)
    return Proof(len(outs), tuple(sorted(prover.resolved)), tuple(shown))


class Prover:
    def __init__(self, kernel: ir.Kernel, writes: list[Write],
                 kernels: tuple[ir.Kernel, ...] | None = None, first_ns: int = 0,
                 ctx: isl.Context | None = None, arrivals: list[Arrival] | None = None,
                 phases: dict[int, tuple[sync_counts.Member, ...]] | None = None,
                 frag_writes: list[FragWrite] | None = None) -> None:
        self.k = kernel
        self.frag_writes = frag_writes or []  # fragment registers (semantics/value/value_mma.py)
        self.arrivals = arrivals or []
        self.phases = phases or {}  # named barriers whose phases order threads (hb)
        self.kernels = kernels or (kernel,)  # every launch coordinates may come from
        self.writes = writes
        self.ctx = ctx or new_context()
        self.ns = first_ns
        self.resolved: set[str] = set()
        self.unique: dict[str, bool] = {}
        self._last: dict[tuple, str | None] = {}  # last_writer's answers per statement pair
        self._ordered: set[tuple] = set()  # (read, indices, write, indices) proved ordered
        self._spaces: dict[tuple[str, ...], ValueSpace] = {}
        self._parsed: dict[str, isl.Set] = {}  # order texts, parsed once (ValueSpace.embed)

    def space(self, involved: list[Inst]) -> ValueSpace:
        """One ISL space over the blocks and every coordinate of `involved`; spaces with the
        same coordinates are shared (with their caches of terms and domains)."""
        names = tuple(dict.fromkeys(n for i in involved for n in ValueSpace.inst_dims(i)))
        hit = self._spaces.get(names)
        if hit is None:
            hit = self._spaces[names] = ValueSpace(self.kernels, self.ctx, self.phases,
                                                   involved)
            hit.parsed = self._parsed
        return hit

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
        if isinstance(t, Frag):
            if depth >= MAX_DEPTH:
                raise NotProved(f"shared reads chain through more than {MAX_DEPTH} writers")
            return value_frag.resolve_fragment(self, t, depth)
        if isinstance(t, Shr):
            if depth >= MAX_DEPTH:
                raise NotProved(f"shared reads chain through more than {MAX_DEPTH} writers")
            writers = [w for w in self.writes
                       if w.space is ir.Space.SHARED and w.target == t.buffer]
            if not writers:
                raise NotProved(f"nothing writes shared buffer '{t.buffer}'")
            ordered = not self.is_unique(t.buffer, writers)
            if ordered and all(w.tma is not None for w in writers):
                return value_rings.resolve_ring(self, t, writers, depth)
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
        read (`accumulate`)."""
        bodies = [(w, _step_body(w)) for w in writers]
        steps = [(w, body) for w, body in bodies if body is not None]
        plain = [w for w, body in bodies if body is None]
        if any(w.tma is not None for w in writers) or not plain:
            raise NotProved(multi_writer(t.buffer) + "; as an accumulation: "
                            + ("a TMA load writes it" if plain else
                               "nothing but its steps writes it"))
        return self.accumulate(t, plain, steps, depth)

    def accumulate(self, t: Shr | Frag, plain: list, steps: list, depth: int) -> Accum:
        """The read `t` of an element written by `plain` statements (which set it) and
        `steps` (statement, body: each adds body to it): per plain statement that is the
        last plain write of a read element, its value and the steps between it and the
        read. That needs every write of the element ordered with the read (check_ordered)
        and with each other (a step's read then sees the write just before it, and no step
        is lost): both proved here, for every size, by ISL. Shared buffers and fragment
        registers (semantics/value/value_frag.py) alike."""
        writers = plain + [w for w, _ in steps]
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
            for u, body in steps:
                mapu = self.fresh_ns_map()
                ui = u.inst.renamed(mapu(u.inst.ns))
                window = self.window(link0, ui, u.indices)
                if window is not None:
                    step_opts.append((Link(t.inst, t.indices, ui, u.indices, window),
                                      self.resolve(rename(body, mapu), depth + 1)))
            options.append((link0, init, tuple(step_opts)))
        self.resolved.add(t.buffer)
        return Accum(t.buffer, tuple(options))

    def window(self, link0: Link, step: Inst, step_idx: tuple[ir.Expr, ...]) -> str | None:
        """The step instances of the read's element after the plain write of link0 and
        before the read, as `[names]|set` text over the read's, the write's and the step's
        coordinates (None: there are none)."""
        space = self.space([link0.reader, link0.writer, step])
        s = space.link(link0) & space.same_element(link0.reader, link0.reader_idx, step,
                                                   step_idx)
        s = s & space.hb(link0.writer, step) & space.hb(step, link0.reader)
        return space.text(s, [link0.reader, link0.writer, step])

    def check_writes_ordered(self, buffer: str, writers: list) -> None:
        """Any two instances writing one element are ordered, one before the other."""
        for a, b in itertools.combinations_with_replacement(range(len(writers)), 2):
            wa, wb = writers[a], writers[b]
            ia, ib = wa.inst.renamed(-5), wb.inst.renamed(-6)
            space = self.space([ia, ib])
            s = space.unordered(ia, wa.indices, ib, wb.indices)
            if not s.is_empty():
                raise NotProved(multi_writer(buffer) + "; as an accumulation: two writes of "
                                "one element are not ordered", space.point(s))

    def check_ordered(self, read: Shr | Frag, writers: list) -> None:
        """A buffer written more than once per element: the write a read sees is the last
        one before it, which is decidable here when program order and `sync` epochs order
        the read against every write of the element (race freedom, proved by the ownership
        checker, says some synchronisation orders them; if it is not program order, a `sync`
        or a named barrier, e.g. an mbarrier phase or an asynchronous TMA load, give up)."""
        for w in writers:
            r, wi = read.inst.renamed(-3), w.inst.renamed(-4)
            key = (r, read.indices, wi, w.indices)
            if key in self._ordered:
                continue  # the same statements and indices were decided before: ordered
            space = self.space([r, wi])
            s = space.unordered(r, read.indices, wi, w.indices)
            if not s.is_empty():
                raise NotProved(multi_writer(read.buffer) + "; some write of an element it "
                                "reads is not ordered with the read by program order, a "
                                "`sync` or a named barrier (an mbarrier phase, a TMA load, "
                                "a synchronisation under a condition?)", space.point(s))
            self._ordered.add(key)

    def last_writer(self, link: Link, writers: list) -> str | None:
        """The pairs (read, write) of `link` where the write is the last one of the element
        before the read, as ISL text over their coordinates; None when there are none.

        Memoised per statement pair: a reduction tree reads one statement's element in many
        namespaces (row_sum_ilp: 63 reads of 11 statements, each against 6 writers), and
        the answer differs only in the names of the coordinates. The `[names]|set` text is
        read positionally (ValueSpace.embed), so a cached answer is reused with the names
        of this link's reader and writer put in its header."""
        key = (link.reader.renamed(-100), link.reader_idx, link.writer.renamed(-101),
               link.writer_idx, tuple(id(w) for w in writers))
        if key not in self._last:
            self._last[key] = self._last_writer(link, writers)
        return _retarget(self._last[key], link)

    def _last_writer(self, link: Link, writers: list) -> str | None:
        rivals = [(w.inst.renamed(self.fresh_ns_map()(w.inst.ns)), w.indices)
                  for w in writers]
        space = self.space([link.reader, link.writer] + [r for r, _ in rivals])
        s = space.domain(link.reader) & space.link(link)
        s = s & space.hb(link.writer, link.reader)
        for rival, ridx in rivals:
            between = space.same_element(link.reader, link.reader_idx, rival, ridx)
            between = between & space.hb(link.writer, rival) & space.hb(rival, link.reader)
            dims = space.owned_dims(rival)
            for name in dims:
                between = between.eliminate(isl.dim_type.set, space.pos[name], 1)
            s = subtract(s, between)
            if s.is_empty():
                return None
        return space.text(s, [link.reader, link.writer])

    def is_unique(self, buffer: str, writers: list[Write]) -> bool:
        """At most one instance of all of `buffer`'s writing statements writes each element
        in a block (ISL, every size)."""
        if buffer in self.unique:
            return self.unique[buffer]
        ok = True
        for a, b in itertools.combinations_with_replacement(range(len(writers)), 2):
            wa, wb = writers[a], writers[b]
            ia, ib = wa.inst.renamed(-1), wb.inst.renamed(-2)
            space = self.space([ia, ib])
            s = space.domain(ia) & space.same_element(ia, wa.indices, ib, wb.indices)
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

    def check_inputs_unwritten(self, value: Term) -> None:
        """Every global read in `value` sees the tensor's contents from before the launch:
        no write of the kernel to the same element happens before it. A kernel that reads
        back an element of an `inout` (or `out`) tensor it wrote earlier (`x[i] = 2 * x[i];
        sync; y[i] = x[i ^ 1]`) reads the new value, which a load term does not denote;
        such reads are not proved. Writes from other blocks, or unordered ones, are races
        (TS217, which the proof depends on), so only the block's own ordered writes count."""
        for g in walk(value):
            if not isinstance(g, Glob):
                continue
            writers = [w for w in self.writes
                       if w.space is ir.Space.GLOBAL and w.target == g.tensor]
            for w in writers:
                winst = w.inst.renamed(self.fresh_ns_map()(w.inst.ns))
                space = self.space([g.inst, winst])
                earlier = (space.domain(g.inst)
                           & space.same_element(g.inst, g.indices, winst, w.indices)
                           & space.hb(winst, g.inst))
                if not earlier.is_empty():
                    raise NotProved(f"the kernel reads {show(g)} after writing that element "
                                    f"of '{g.tensor}' itself: the value read is not the "
                                    "input's", space.point(earlier))

    # ---- comparing ---------------------------------------------------------------------------

    def compare_write(self, store: Inst, indices: tuple[ir.Expr, ...], value: Term,
                      spec: ir.Ensures) -> None:
        """value (written by `store` at `indices`) == the spec's rhs at those indices."""
        out = self.k.tensor(spec.tensor)
        sinst, sterm = spec_term(spec, self.k)
        space = self.space([store, sinst, *insts(value), *insts(sterm)])
        ctx = space.domain(store)
        for var, idx in zip(spec.index_vars, indices, strict=True):
            ctx = ctx & space.dim(space.loop_name(sinst, var.uid)).eq_set(
                space.term(idx, store))
        outer = {n for n in space.names if is_block(n)}
        outer |= set(space.owned_dims(store)) | set(space.owned_dims(sinst))
        Compare(space, out.dtype, outer, [store, sinst]).equal(value, sterm, ctx, top=True)


# ---- the spec as a term ----------------------------------------------------------------------


def spec_term(spec: ir.Ensures, kernel: ir.Kernel) -> tuple[Inst, Term]:
    out = kernel.tensor(spec.tensor)
    loops = tuple(LoopInfo(v.uid, ir.IntConst(spec.span, ir.ScalarType.INT, 0), d, 1)
                  for v, d in zip(spec.index_vars, out.shape, strict=True))
    inst = Inst(SPEC_NS, 0, 1, False, loops, ())
    return inst, _spec_value(spec.rhs, inst)


def _spec_value(e: ir.Expr, inst: Inst) -> Term:
    return fold(e, SpecTerms(inst))


class SpecTerms(TermAlgebra):
    """A spec's right-hand side as a value term over the spec's instance: loads are global
    reads, an integer term without loads stays whole, a sum is a SpecSum over one more
    loop (its variable) of the instance."""

    def __init__(self, inst: Inst) -> None:
        self.inst = inst

    def whole(self, e: ir.Expr) -> Term | None:
        if e.type is ir.ScalarType.INT and next(ir_walk.loads(e), None) is None:
            return IntV(e, self.inst)
        if isinstance(e, ir.Reduce):
            inner = Inst(self.inst.ns, 0, 1, False,
                         self.inst.loops + (LoopInfo(e.var.uid, e.lo, e.hi, 1),), ())
            return SpecSum(e.ordered, inner, fold(e.body, SpecTerms(inner)))
        return None

    def leaf(self, e: ir.Expr) -> Term:
        if isinstance(e, ir.FloatConst):
            return lit(e.value)
        if isinstance(e, ir.Load):
            return Glob(e.tensor, e.indices, self.inst)
        raise Unsupported(f"'{type(e).__name__}' in a spec")

    def op(self, name: str, e: ir.Expr, args: list[Term]) -> Term:
        return args[0] if name == "id" else Op(name, tuple(args))


def _retarget(order: str | None, link: Link) -> str | None:
    """A `[names]|set` text (ValueSpace.text over the link's reader and writer) with the
    names of `link`'s coordinates in its header: the block coordinates stay, the reader's
    and the writer's follow in that order, as ValueSpace.text writes them."""
    if order is None:
        return None
    header, body = order.split("|", 1)
    names = [n.strip(" '") for n in header.strip("[]").split(",")]
    blocks = [n for n in names if is_block(n)]
    new = blocks + ValueSpace.inst_dims(link.reader) + ValueSpace.inst_dims(link.writer)
    if len(new) != len(names):
        raise AssertionError(f"a last-writer text over {names} retargeted to {new}")
    return f"{new}|{body}"


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
