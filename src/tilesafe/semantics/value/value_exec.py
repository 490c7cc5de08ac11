"""Symbolic execution of a kernel body into value terms (semantics/value/value_terms.py).

Why: the value proof needs, for every write to global or shared memory, the term of the
value written as a function of the writing instance's coordinates, for every size. One pass
over the IR gives it: integer expressions stay IR (with `let`s recorded for substitution),
float expressions become terms built with the operation names of semantics/expr/evaluate.py,
an `if` that assigns a `var` gives an `Ite`, and a loop that accumulates into a `var`
(`acc += t(j)`, possibly under a guard, possibly nested) gives a `Fold`. TMA loads become
writes of their whole box (out-of-bounds elements: the tensormap's fill value), TMA stores
become global writes of the elements inside the tensor. Synchronisation has no value of its
own: which write a read sees is decided later (semantics/value/valueflow.py) from facts the
safety checkers prove.

Anything outside this fragment raises `Unsupported` with the reason; the caller answers
UNKNOWN, never a guess.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from tilesafe.frontend import ir
from tilesafe.frontend import walk as ir_walk
from tilesafe.frontend.fmt import without_spans
from tilesafe.frontend.fold import Algebra, fold
from tilesafe.frontend.ir_build import add as _add
from tilesafe.frontend.ir_build import const as _int
from tilesafe.semantics.expr import evaluate, fp
from tilesafe.semantics.temporal import sync_counts as sc
from tilesafe.semantics.value import value_gather, value_mma
from tilesafe.semantics.value.value_terms import (
    Carried,
    Fold,
    Frag,
    Glob,
    Inst,
    IntV,
    Ite,
    Lit,
    LoopInfo,
    Op,
    Round,
    Shr,
    Term,
    walk,
)

BOOL, INT, FLOAT = ir.ScalarType.BOOL, ir.ScalarType.INT, ir.ScalarType.FLOAT


class Unsupported(Exception):
    """The kernel leaves the fragment the value proof handles (the reason says how)."""


@dataclass(frozen=True)
class Write:
    """A statement writing `target` (a global tensor or shared buffer) at `indices` (over
    `inst`'s coordinates, including any box coordinates) with `value`."""

    target: str
    space: ir.Space
    indices: tuple[ir.Expr, ...]
    value: Term
    inst: Inst
    span: object
    tma: TmaWrite | None = None  # a TMA load: the barrier it completes on


@dataclass(frozen=True)
class Arrival:
    """An `arrive` on a barrier (`tx`: with expect_tx), for the phase matching of TMA
    loads (semantics/value/valueflow.py)."""

    barrier: str
    index: ir.Expr | None
    tx: bool
    inst: Inst


@dataclass(frozen=True)
class TmaWrite:
    """The barrier a TMA load's `Write` completes on."""

    barrier: str
    index: ir.Expr | None


@dataclass
class _Ctx:
    thread_lo: int
    thread_hi: int
    elect: bool
    loops: tuple[LoopInfo, ...]
    guards: tuple[ir.Expr, ...]
    lets: dict[int, ir.Expr]
    vals: dict[int, Term]
    int_vars: set[int] = field(default_factory=set)
    # per channel (`sync`, a named barrier id): events this thread has passed (sync_counts.py)
    counts: dict[sc.Channel, ir.Expr | None] = field(default_factory=dict)
    # per channel whose count `roles` made thread-dependent: the count before those roles and
    # the thread ranges that had events since
    split: dict[sc.Channel, tuple[ir.Expr, tuple[tuple[int, int], ...]]] = field(
        default_factory=dict)
    sched: tuple[ir.Expr, ...] = ()  # the enclosing levels' (position, coordinate)s
    pos: int = 0  # the current statement's position in its block
    kernel: int = 0
    waits: dict[str, tuple[ir.Expr | None, Inst]] = field(default_factory=dict)

    def inst(self, extra_guards: tuple[ir.Expr, ...] = ()) -> Inst:
        named = tuple(sorted(((c, e) for c, e in self.counts.items() if c != sc.SYNC),
                             key=lambda ce: ce[0]))
        return Inst(0, self.thread_lo, self.thread_hi, self.elect, self.loops,
                    self.guards + extra_guards, tuple(sorted(self.lets.items())),
                    self.counts.get(sc.SYNC), self.sched + (_int(self.pos, None),),
                    self.kernel, named)

    def child(self, **changes) -> _Ctx:
        new = _Ctx(self.thread_lo, self.thread_hi, self.elect, self.loops, self.guards,
                   dict(self.lets), dict(self.vals), set(self.int_vars), dict(self.counts),
                   sched=self.sched, pos=self.pos, kernel=self.kernel,
                   waits=dict(self.waits))  # `split` is per block: a new block starts none
        for k, v in changes.items():
            setattr(new, k, v)
        return new


def lit(value: float) -> Lit:
    f = np.float32(value)
    return Lit(fp.f32_bits(f), float(f))


class Executor:
    """Collects every write of the kernel (`writes`), in program order."""

    def __init__(self, kernel: ir.Kernel, tag: int = 0) -> None:
        self.k = kernel
        self.tag = tag
        self.writes: list[Write] = []
        self.frag_writes: list[value_mma.FragWrite] = []  # registers (semantics/value/value_mma.py)
        self.arrivals: list[Arrival] = []
        self.named_uses: list[tuple[ir.NamedBar, Inst]] = []  # every bar_sync / bar_arrive
        self._fresh = -1 - 100_000 * tag  # box coordinates: uids no loop of the IR has

    def run(self) -> list[Write]:
        ids = sorted({s.bar_id for s in _all_stmts(self.k.body) if isinstance(s, ir.NamedBar)})
        counts: dict[sc.Channel, ir.Expr | None] = {ch: _int(0, None)
                                                    for ch in [sc.SYNC, *ids]}
        ctx = _Ctx(0, self.k.block, False, (), (), {}, {}, counts=counts, kernel=self.tag)
        self.block(self.k.body, ctx)
        return self.writes

    def fresh_var(self, name: str, span) -> ir.LoopVar:
        self._fresh -= 1
        return ir.LoopVar(span, INT, name, self._fresh)

    # ---- statements ------------------------------------------------------------------------

    def block(self, stmts: tuple[ir.Stmt, ...], ctx: _Ctx) -> None:
        for i, s in enumerate(stmts):
            ctx.pos = i
            self.stmt(s, ctx)

    def nested(self, ctx: _Ctx, coord: ir.Expr | None, **changes) -> _Ctx:
        """The context of a compound statement's body: one more (position, coordinate)
        level of program order."""
        level = (_int(ctx.pos, None), coord if coord is not None else _int(0, None))
        inner = ctx.child(**changes)
        inner.sched = ctx.sched + level
        return inner

    def stmt(self, s: ir.Stmt, ctx: _Ctx) -> None:
        if not isinstance(s, ir.Role):  # events outside roles: role entry counts are stale
            for ch in [ch for ch in ctx.split if sc.per_pass((s,), ch) != 0]:
                del ctx.split[ch]
        if isinstance(s, ir.Let):
            if s.value.type is INT and (not _reads_memory(s.value)
                                        or value_gather.is_index_term(self.k, s.value)):
                ctx.lets[s.uid] = s.value
            else:
                ctx.vals[s.uid] = self.value(s.value, ctx)
        elif isinstance(s, ir.VarDecl):
            if s.value.type is INT:
                ctx.int_vars.add(s.uid)
            else:
                ctx.vals[s.uid] = _rounded(s.dtype, self.value(s.value, ctx))
        elif isinstance(s, ir.Assign):
            if s.uid in ctx.int_vars:
                ctx.int_vars.add(s.uid)
                return
            value = self.value(s.value, ctx)
            if s.op != "=":
                op = evaluate.assign_op(s.op, FLOAT)
                value = Op(op, (ctx.vals[s.uid], value))
            dtype = _var_dtype(self.k, s.uid)
            ctx.vals[s.uid] = _rounded(dtype, value) if dtype else value
        elif isinstance(s, ir.Store):
            value = self.value(s.value, ctx)
            if s.space is ir.Space.SHARED:
                value = _rounded(self.k.buffer(s.tensor).dtype, value)
            self.writes.append(Write(s.tensor, s.space, s.indices, value, ctx.inst(), s.span))
        elif isinstance(s, ir.For):
            self.loop(s, ctx)
        elif isinstance(s, ir.If):
            self.branch(s, ctx)
        elif isinstance(s, ir.Role):
            lo, hi = max(ctx.thread_lo, s.threads.lo), min(ctx.thread_hi, s.threads.hi)
            if s.elect_one:
                hi = lo + 1
            inner = self.nested(ctx, None, thread_lo=lo, thread_hi=max(lo, hi),
                                elect=ctx.elect or s.elect_one)
            for ch, (base, ranges) in ctx.split.items():
                if all(hi <= a or b <= lo for a, b in ranges):  # none of its threads moved
                    inner.counts[ch] = base
            self.block(s.body, inner)
            _merge_back(ctx, inner, s.body)
            for ch, before in ctx.counts.items():
                if sc.per_pass(s.body, ch) == 0:
                    continue
                # only the role's threads moved on: no one count for all threads any more,
                # but a later role of other threads still starts from the count before
                if before is not None:
                    ctx.split[ch] = (before, ())
                if ch in ctx.split:
                    base, ranges = ctx.split[ch]
                    ctx.split[ch] = (base, ranges + ((lo, max(lo, hi)),))
                ctx.counts[ch] = None
        elif isinstance(s, (ir.Sync, ir.NamedBar)):
            if isinstance(s, ir.NamedBar):
                self.named_uses.append((s, ctx.inst()))
            ch = sc.SYNC if isinstance(s, ir.Sync) else s.bar_id
            before = ctx.counts.get(ch)
            if before is not None:
                ctx.counts[ch] = _add(before, _int(1, s.span))
        elif isinstance(s, ir.Wait):
            ctx.waits[s.barrier.name] = (s.barrier.index, ctx.inst())
        elif isinstance(s, ir.Arrive):
            self.arrivals.append(Arrival(s.barrier.name, s.barrier.index,
                                         s.tx_bytes is not None, ctx.inst()))
        elif isinstance(s, ir.ExpectTx):
            self.arrivals.append(Arrival(s.barrier.name, s.barrier.index, True, ctx.inst()))
        elif isinstance(s, ir.TmaLoad):
            self.tma_load(s, ctx)
        elif isinstance(s, ir.TmaStore):
            self.tma_store(s, ctx)
        elif isinstance(s, ir.Wgmma):
            if self.k.buffer(s.a.buffer).dtype is ir.DType.F32:
                raise Unsupported("a tf32 wgmma: the tensor core drops the inputs' low "
                                  "significand bits, which no spec operation denotes")
            self.frag_writes += value_mma.mma_writes(self.k, s, ctx.inst(), _waits(ctx),
                                                     self.fresh_var)
        elif isinstance(s, ir.FragStore):
            value = _rounded(self.k.fragment(s.fragment).dtype, self.value(s.value, ctx))
            self.frag_writes.append(value_mma.store_write(s, value, ctx.inst()))
        # sync, waits, arrivals, fences, inits, bulk groups: ordering only (valueflow.py)

    def loop(self, s: ir.For, ctx: _Ctx) -> None:
        info = LoopInfo(s.var.uid, s.lo, s.hi, s.step)
        assigned = _assigned(s.body)
        carried = {uid for uid in assigned if uid in ctx.vals}
        per = {ch: sc.per_iteration(s, ch) for ch in ctx.counts}
        inner = self.nested(ctx, s.var, loops=ctx.loops + (info,))
        for ch, entry in ctx.counts.items():
            p = per[ch]
            inner.counts[ch] = (None if entry is None or p is None
                                else sc.entering_iteration(entry, s, p))
        for uid in carried:
            inner.vals[uid] = Carried(uid)
        self.block(s.body, inner)
        for name in list(ctx.waits):
            if inner.waits.get(name) != ctx.waits[name]:
                del ctx.waits[name]  # the last iteration's wait: not modelled after the loop
        for uid in carried:
            ctx.vals[uid] = _fold(ctx.vals[uid], inner.vals[uid], uid, inner.inst())
        for uid in assigned & ctx.int_vars:
            ctx.int_vars.add(uid)
        for ch, entry in ctx.counts.items():
            p = per[ch]
            ctx.counts[ch] = None if entry is None or p is None else sc.after_loop(entry, s, p)
        for w in [*self.writes, *self.frag_writes]:
            if any(isinstance(n, Carried) for n in walk(w.value)):
                raise Unsupported("a store inside a loop writes a value carried from the "
                                  "previous iteration")

    def branch(self, s: ir.If, ctx: _Ctx) -> None:
        cond = s.cond
        picked = self.data_condition(cond, ctx)
        if picked is not None and self.selected_store(s, picked, ctx):
            return
        neg = ir.UnOp(cond.span, BOOL, "!", cond)
        then = self.nested(ctx, None, guards=ctx.guards + (cond,))
        self.block(s.then, then)
        orelse = self.nested(ctx, _int(1, s.span), guards=ctx.guards + (neg,))
        self.block(s.orelse, orelse)
        loops = tuple(lp.uid for lp in ctx.loops if lp.step == 1)
        for ch, before in ctx.counts.items():
            ctx.counts[ch] = None if before is None else sc.after_branch(before, s, ch, loops)
        for uid in _assigned(s.then) | _assigned(s.orelse):
            if uid in ctx.vals:
                a, b = then.vals[uid], orelse.vals[uid]
                ctx.vals[uid] = (a if a == b else Ite(cond, ctx.inst(), a, b)
                                 if picked is None else Op(SELECT, (picked, a, b)))

    def data_condition(self, cond: ir.Expr, ctx: _Ctx) -> Term | None:
        """A condition on data (it reads memory: `x[i] > 0.0`) as a boolean value term, or
        None: an affine condition is a set of instances (Ite), and a condition that mixes
        integers into it is not decided on values (semantics/value/value_fp.py)."""
        if not _reads_memory(cond):
            return None
        try:
            return fold(cond, ConditionTerms(ctx))
        except Unsupported:
            return None

    def selected_store(self, s: ir.If, picked: Term, ctx: _Ctx) -> bool:
        """`if c { T[idx] = a } else { T[idx] = b }` with c on data: one write of T[idx] on
        every instance, its value `select(c, a, b)` -- each branch alone writes under a
        guard on data, which no instance set can express."""
        if len(s.then) != 1 or len(s.orelse) != 1:
            return False
        a, b = s.then[0], s.orelse[0]
        if not (isinstance(a, ir.Store) and isinstance(b, ir.Store)
                and a.space is b.space is ir.Space.GLOBAL and a.tensor == b.tensor
                and without_spans(a.indices) == without_spans(b.indices)):
            return False
        value = Op(SELECT, (picked, self.value(a.value, ctx), self.value(b.value, ctx)))
        self.writes.append(Write(a.tensor, a.space, a.indices, value, ctx.inst(), a.span))
        return True

    def tma_load(self, s: ir.TmaLoad, ctx: _Ctx) -> None:
        tm = self.k.tensormap(s.tensormap)
        tensor = self.k.tensor(tm.tensor)
        box = [self.fresh_var(f"e{d}", s.span) for d in range(len(tm.box))]
        loops = ctx.loops + tuple(LoopInfo(v.uid, _int(0, s.span), _int(n, s.span), 1)
                                  for v, n in zip(box, tm.box, strict=True))
        # lands asynchronously: ordered by its barrier, not by any thread's sync count
        inner = ctx.child(loops=loops, counts=dict.fromkeys(ctx.counts))
        gidx = tuple(_add(c, v) for c, v in zip(s.coords, box, strict=True))
        inside = _in_bounds(gidx, tensor.shape, s.span)
        fill = lit(0.0 if tm.oob_fill == "zero" else float("nan"))
        value: Term = Ite(inside, inner.inst(), Glob(tensor.name, gidx, inner.inst()), fill)
        buf = self.k.buffer(s.dst.buffer)
        sidx = s.dst.prefix + tuple(box[len(box) - (len(buf.shape) - len(s.dst.prefix)):])
        if len(sidx) != len(buf.shape):
            raise Unsupported("a TMA box whose rank differs from the buffer slice's")
        self.writes.append(Write(buf.name, ir.Space.SHARED, sidx, value, inner.inst(),
                                 s.span, TmaWrite(s.barrier.name, s.barrier.index)))

    def tma_store(self, s: ir.TmaStore, ctx: _Ctx) -> None:
        tm = self.k.tensormap(s.tensormap)
        tensor = self.k.tensor(tm.tensor)
        buf = self.k.buffer(s.src.buffer)
        box = [self.fresh_var(f"e{d}", s.span) for d in range(len(tm.box))]
        loops = ctx.loops + tuple(LoopInfo(v.uid, _int(0, s.span), _int(n, s.span), 1)
                                  for v, n in zip(box, tm.box, strict=True))
        gidx = tuple(_add(c, v) for c, v in zip(s.coords, box, strict=True))
        inside = _in_bounds(gidx, tensor.shape, s.span)
        inner = ctx.child(loops=loops, guards=ctx.guards + (inside,))
        sidx = s.src.prefix + tuple(box[len(box) - (len(buf.shape) - len(s.src.prefix)):])
        if len(sidx) != len(buf.shape):
            raise Unsupported("a TMA box whose rank differs from the buffer slice's")
        value = Shr(buf.name, sidx, inner.inst(), _waits(ctx))
        self.writes.append(Write(tensor.name, ir.Space.GLOBAL, gidx, value, inner.inst(),
                                 s.span))

    # ---- expressions -----------------------------------------------------------------------

    def value(self, e: ir.Expr, ctx: _Ctx) -> Term:
        return fold(e, KernelTerms(ctx))


class TermAlgebra(Algebra[Term]):
    """Expressions as value terms (the specification proof's meaning): an operation is an
    Op named by its typed operation, an int operand of a float operation is wrapped in
    cvt.f32, `f32(x)` of a float is x; a condition is not a value."""

    def op(self, name: str, e: ir.Expr, args: list[Term]) -> Term:
        if name in ("and", "or", "not") or e.type is BOOL:
            raise Unsupported("a condition used as a value")
        return args[0] if name == "id" else Op(name, tuple(args))

    def to_float(self, x: Term, e: ir.Expr) -> Term:
        return Op("cvt.f32", (x,))


SELECT = "select"  # select(c, a, b): a where the data condition c holds, else b


class ConditionTerms(TermAlgebra):
    """A condition on data as a boolean term: float comparisons of value terms and their
    `!`, `&&`, `||` (what value_fp.py decides); anything integer is not one."""

    def __init__(self, ctx: _Ctx) -> None:
        self.values = KernelTerms(ctx)

    def op(self, name: str, e: ir.Expr, args: list[Term]) -> Term:
        if name in ("and", "or", "not") or (name.startswith("f32.") and e.type is BOOL):
            return Op(name, tuple(args))
        if e.type is BOOL:
            raise Unsupported("an integer comparison in a condition on data")
        return self.values.op(name, e, args)

    def whole(self, e: ir.Expr) -> Term | None:
        return self.values.whole(e)  # an integer constant compared with a float

    def leaf(self, e: ir.Expr) -> Term:
        return self.values.leaf(e)


class KernelTerms(TermAlgebra):
    """The kernel's expressions at one statement: loads become global or shared reads of
    the statement's instance, locals their current terms; an integer term that reads no
    memory and no term-valued local stays whole (an IntV, compared by ISL)."""

    def __init__(self, ctx: _Ctx) -> None:
        self.ctx = ctx

    def whole(self, e: ir.Expr) -> Term | None:
        if e.type is not INT:
            return None
        if any(isinstance(n, ir.LocalRef) and n.mutable for n in ir_walk.subexprs(e)):
            raise Unsupported(f"the integer variable in '{_short(e)}' is mutable")
        if _reads_memory(e) or any(isinstance(n, ir.LocalRef) and n.uid in self.ctx.vals
                                   for n in ir_walk.subexprs(e)):
            return None  # computed from memory: a term of loads and integer operations
        return IntV(e, self.ctx.inst())

    def leaf(self, e: ir.Expr) -> Term:
        ctx = self.ctx
        if isinstance(e, ir.FloatConst):
            return lit(e.value)
        if isinstance(e, ir.Load):
            if e.space is ir.Space.GLOBAL:
                return Glob(e.tensor, e.indices, ctx.inst())
            return Shr(e.tensor, e.indices, ctx.inst(), _waits(ctx))
        if isinstance(e, ir.LocalRef):
            if e.uid not in ctx.vals:
                raise Unsupported(f"'{e.name}' has no value term")
            return ctx.vals[e.uid]
        if isinstance(e, ir.FragLoad):
            return Frag(e.fragment, (value_mma.thread(e.span), e.reg), ctx.inst())
        raise Unsupported(f"'{type(e).__name__}' as a value")


def execute(kernel: ir.Kernel, tag: int = 0) -> list[Write]:
    return Executor(kernel, tag).run()


def _waits(ctx: _Ctx) -> tuple[tuple[str, ir.Expr | None, Inst], ...]:
    return tuple((name, idx, inst) for name, (idx, inst) in sorted(ctx.waits.items()))


# ---- helpers ---------------------------------------------------------------------------------


def _rounded(dtype: ir.DType | None, value: Term) -> Term:
    if dtype in (ir.DType.F16, ir.DType.BF16):
        return Round(dtype, value)
    if dtype in (ir.DType.I32, ir.DType.U8):
        return Round(dtype, value)  # wraps into the integer type, as the store does
    return value


def _var_dtype(kernel: ir.Kernel, uid: int) -> ir.DType | None:
    for s in _all_stmts(kernel.body):
        if isinstance(s, ir.VarDecl) and s.uid == uid:
            return s.dtype
    return None


def _all_stmts(stmts: tuple[ir.Stmt, ...]):
    for s in stmts:
        yield s
        if isinstance(s, ir.For):
            yield from _all_stmts(s.body)
        elif isinstance(s, ir.If):
            yield from _all_stmts(s.then)
            yield from _all_stmts(s.orelse)
        elif isinstance(s, ir.Role):
            yield from _all_stmts(s.body)


def _assigned(stmts: tuple[ir.Stmt, ...]) -> set[int]:
    return {s.uid for s in _all_stmts(stmts) if isinstance(s, ir.Assign)}


def _merge_back(ctx: _Ctx, inner: _Ctx, body: tuple[ir.Stmt, ...]) -> None:
    """A role body that assigns an outer `var`: only its threads see the new value."""
    for uid in _assigned(body):
        if uid in ctx.vals and inner.vals[uid] != ctx.vals[uid]:
            raise Unsupported("a role assigns a variable declared outside it")


def _fold(before: Term, after: Term, uid: int, inst: Inst) -> Term:
    """The value of a var after a loop whose body turned Carried(uid) into `after`."""
    if after == Carried(uid):
        return before
    depth, body, guard, guarded = 1, None, None, False
    node = after
    if isinstance(node, Ite) and node.orelse == Carried(uid):
        guard, node = node.cond, node.then
    if isinstance(node, Op) and node.name == "f32.add" and node.args[0] == Carried(uid):
        body = node.args[1]
        body_inst = inst
    elif isinstance(node, Fold) and node.init == Carried(uid):
        body, depth, body_inst = node.body, node.depth + 1, node.inst
        guarded = node.guarded
    else:
        raise Unsupported("a loop updates a variable other than by `acc += term`")
    if any(isinstance(n, Carried) for n in walk(body)):
        raise Unsupported("an accumulated term reads an accumulator")
    if guard is not None:
        body_inst = replace(body_inst, guards=body_inst.guards + (guard,))
        guarded = True
    return Fold(before, body_inst, depth, body, guarded)


def _in_bounds(idx: tuple[ir.Expr, ...], shape: tuple[ir.Expr, ...], span) -> ir.Expr:
    cond: ir.Expr | None = None
    for i, extent in zip(idx, shape, strict=True):
        c = ir.BinOp(span, BOOL, "&&", ir.BinOp(span, BOOL, ">=", i, _int(0, span)),
                     ir.BinOp(span, BOOL, "<", i, extent))
        cond = c if cond is None else ir.BinOp(span, BOOL, "&&", cond, c)
    assert cond is not None
    return cond


def _reads_memory(e: ir.Expr) -> bool:
    """Reads memory or a fragment register: a value term, not an ISL-comparable integer."""
    return any(isinstance(x, (ir.Load, ir.FragLoad)) for x in ir_walk.subexprs(e))


def _short(e: ir.Expr) -> str:
    return f"{e.span.line}:{e.span.col}"
