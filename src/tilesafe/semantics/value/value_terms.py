"""Symbolic value terms: what a stored value is built from, for every instance at once.

Why: to prove `ensures` for every size, a stored value is not computed but described: a tree
of typed operations (the names of semantics/expr/evaluate.py, so `+` on f32 means exactly what the
interpreter does) over leaves that are global input elements, constants, integer terms and
shared-memory reads. Indices stay IR expressions over the symbolic coordinates of the
statement instance that computed them (`Inst`: block, thread, enclosing loop variables,
guards, `let` bindings), so they can be turned into ISL terms (semantics/expr/affine.py) later.

An `Inst` belongs to a *namespace* (one symbolic thread): two insts of one namespace share
the block, thread and loop coordinates they have in common (a fold's body and the store after
the loop), while the writer found for a shared read lives in a fresh namespace of its own.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace

from tilesafe.frontend import ir
from tilesafe.frontend.ir_text import expr_text


@dataclass(frozen=True)
class LoopInfo:
    uid: int
    lo: ir.Expr
    hi: ir.Expr
    step: int


@dataclass(frozen=True)
class Inst:
    """The instances of one statement in namespace `ns`: threads lo .. hi-1 (only lo with
    `elect`), the enclosing loops, the guards that hold, and the integer lets in scope."""

    ns: int
    thread_lo: int
    thread_hi: int
    elect: bool
    loops: tuple[LoopInfo, ...]
    guards: tuple[ir.Expr, ...]
    lets: tuple[tuple[int, ir.Expr], ...] = field(default=())
    # Number of `sync`s every thread has passed before this statement (None: not an affine
    # function of the coordinates, e.g. a sync under an `if`), and the statement's place in
    # its thread's program order: (position, loop coordinate or 0, position, ...).
    epoch: ir.Expr | None = None
    sched: tuple[ir.Expr, ...] = field(default=())
    kernel: int = 0  # which kernel's launch (1: the second kernel of `tilesafe equiv`)
    # Per named barrier id: this thread's participations (bar_arrive / bar_sync) before the
    # statement, like `epoch` (semantics/temporal/sync_counts.py)
    named: tuple[tuple[int, ir.Expr | None], ...] = field(default=())

    def renamed(self, ns: int) -> Inst:
        return replace(self, ns=ns)

    def __hash__(self) -> int:
        """Computed once: an Inst keys the value space's caches thousands of times, and the
        generated hash would walk its guard and bound expressions every time."""
        cached = self.__dict__.get("_hash")
        if cached is None:
            cached = hash((self.ns, self.thread_lo, self.thread_hi, self.elect, self.loops,
                           self.guards, self.lets, self.epoch, self.sched, self.kernel,
                           self.named))
            object.__setattr__(self, "_hash", cached)
        return cached


class Term:
    """Base of value terms (frozen dataclasses)."""


@dataclass(frozen=True)
class Lit(Term):
    """A float constant, as the f32 the interpreter computes with."""

    bits: int
    value: float


@dataclass(frozen=True)
class IntV(Term):
    """An integer value (used where an int meets a float: `f32(thread)`)."""

    expr: ir.Expr
    inst: Inst


@dataclass(frozen=True)
class Glob(Term):
    """An element of a global tensor, widened exactly to f32 (or an int)."""

    tensor: str
    indices: tuple[ir.Expr, ...]
    inst: Inst


@dataclass(frozen=True)
class Shr(Term):
    """A shared-memory read, not yet resolved to the write it sees. `waits`: the mbarrier
    waits in effect (the latest `wait` on each barrier earlier in the thread's program, at
    the read's loop level or above): (barrier, element index, the wait's inst)."""

    buffer: str
    indices: tuple[ir.Expr, ...]
    inst: Inst
    waits: tuple[tuple[str, ir.Expr | None, Inst], ...] = ()


@dataclass(frozen=True)
class Frag(Term):
    """A fragment register read `acc[r]`, not yet resolved to the writes it sees. A
    fragment is per-thread registers, so `indices` is (the reading thread, the register):
    two accesses touch one register exactly when both agree (semantics/value/value_frag.py)."""

    buffer: str
    indices: tuple[ir.Expr, ...]
    inst: Inst


@dataclass(frozen=True)
class Op(Term):
    """A typed operation of semantics/expr/evaluate.py (`f32.add`, `cvt.f32`, ...)."""

    name: str
    args: tuple[Term, ...]


@dataclass(frozen=True)
class Round(Term):
    """The value stored into an f16/bf16 location (round to nearest even)."""

    dtype: ir.DType
    arg: Term


@dataclass(frozen=True)
class Ite(Term):
    """`cond ? then : orelse`, cond over `inst`'s coordinates (an `if` that assigned)."""

    cond: ir.Expr
    inst: Inst
    then: Term
    orelse: Term


@dataclass(frozen=True)
class Carried(Term):
    """Placeholder for a `var`'s value at the start of a loop iteration."""

    uid: int


@dataclass(frozen=True)
class Fold(Term):
    """A loop accumulation: init + body(v) for every instance v of `inst`'s innermost
    `depth` loops that passes its guards, added in loop order with f32 `+`."""

    init: Term
    inst: Inst
    depth: int
    body: Term
    guarded: bool = False  # an `if` inside the loop selects the iterations that add


@dataclass(frozen=True)
class Link:
    """A resolved shared read: the writer instance (`writer`, in its own namespace) wrote
    `writer_idx` and the reader (`reader`) read `reader_idx`; they are the same element.

    `order` is None when at most one instance ever writes the element (single
    assignment). Otherwise it is the last-writer relation (an ISL set over the reader's and
    the writer's coordinates, as text): the writer happens before the read and no other
    write of the element comes in between, the order being program order and `sync`
    epochs (semantics/value/valueflow.py)."""

    reader: Inst
    reader_idx: tuple[ir.Expr, ...]
    writer: Inst
    writer_idx: tuple[ir.Expr, ...]
    order: str | None = None


@dataclass(frozen=True)
class Choice(Term):
    """A shared read resolved by cases: for each statement that may have written the element
    (at most one instance in all, proved), the link and the value it wrote."""

    buffer: str
    options: tuple[tuple[Link, Term], ...]


@dataclass(frozen=True)
class Accum(Term):
    """A shared element built by read-modify-write steps (`buf[e] = buf[e] + body`), or a
    fragment register built by the products wgmma instances add to it (`buffer` is then
    the fragment): per
    statement that may have been the last plain (non-step) write before the read, its link
    and value, and the steps after it -- each step statement's link relates the read to
    every instance of it between that write and the read (as `[names]|set` text over the
    read's, the plain write's and the step's coordinates) -- whose bodies are added to it in
    happens-before order (semantics/value/valueflow.py)."""

    buffer: str
    options: tuple[tuple[Link, Term, tuple[tuple[Link, Term], ...]], ...]


@dataclass(frozen=True)
class SpecSum(Term):
    """A spec's `sum(j in lo .. hi: body)`: `inst`'s last loop is j."""

    ordered: bool
    inst: Inst
    body: Term


def children(t: Term) -> tuple[Term, ...]:
    if isinstance(t, Op):
        return t.args
    if isinstance(t, Round):
        return (t.arg,)
    if isinstance(t, Ite):
        return (t.then, t.orelse)
    if isinstance(t, Fold):
        return (t.init, t.body)
    if isinstance(t, Choice):
        return tuple(v for _, v in t.options)
    if isinstance(t, Accum):
        return tuple(x for _, v, steps in t.options for x in (v, *(b for _, b in steps)))
    if isinstance(t, SpecSum):
        return (t.body,)
    return ()


def walk(t: Term) -> Iterator[Term]:
    yield t
    for c in children(t):
        yield from walk(c)


def insts(t: Term) -> Iterator[Inst]:
    """Every inst a term's coordinates come from (links included)."""
    for node in walk(t):
        inst = getattr(node, "inst", None)
        if isinstance(inst, Inst):
            yield inst
        links = [lk for lk, _ in node.options] if isinstance(node, Choice) else []
        if isinstance(node, Accum):
            links = [lk for lk, _, steps in node.options for lk in (lk, *(s for s, _ in steps))]
        for link in links:
            yield link.reader
            yield link.writer


def rename(t: Term, ns_map: Callable[[int], int]) -> Term:
    """The same term with every inst moved to namespace ns_map(ns)."""
    def inst(i: Inst) -> Inst:
        return i.renamed(ns_map(i.ns))

    if isinstance(t, Shr):
        return replace(t, inst=inst(t.inst),
                       waits=tuple((b, i, inst(w)) for b, i, w in t.waits))
    if isinstance(t, (IntV, Glob, Frag)):
        return replace(t, inst=inst(t.inst))
    if isinstance(t, Op):
        return Op(t.name, tuple(rename(a, ns_map) for a in t.args))
    if isinstance(t, Round):
        return Round(t.dtype, rename(t.arg, ns_map))
    if isinstance(t, Ite):
        return Ite(t.cond, inst(t.inst), rename(t.then, ns_map), rename(t.orelse, ns_map))
    if isinstance(t, Fold):
        return Fold(rename(t.init, ns_map), inst(t.inst), t.depth, rename(t.body, ns_map),
                    t.guarded)
    def link(k: Link) -> Link:
        return Link(inst(k.reader), k.reader_idx, inst(k.writer), k.writer_idx, k.order)

    if isinstance(t, Choice):
        return Choice(t.buffer, tuple((link(k), rename(v, ns_map)) for k, v in t.options))
    if isinstance(t, Accum):
        return Accum(t.buffer, tuple(
            (link(k), rename(v, ns_map), tuple((link(s), rename(b, ns_map)) for s, b in steps))
            for k, v, steps in t.options))
    if isinstance(t, SpecSum):
        return SpecSum(t.ordered, inst(t.inst), rename(t.body, ns_map))
    return t


def show(t: Term, limit: int = 160) -> str:
    """A short human-readable form, for evidence and messages (cut at `limit` chars)."""
    text = _show(t)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _show(t: Term) -> str:
    if isinstance(t, Lit):
        return repr(t.value)
    if isinstance(t, IntV):
        return expr_text(t.expr)
    if isinstance(t, (Glob, Shr, Frag)):
        name = t.tensor if isinstance(t, Glob) else t.buffer
        return f"{name}[{', '.join(expr_text(i) for i in t.indices)}]"
    if isinstance(t, Op):
        return f"{t.name}({', '.join(_show(a) for a in t.args)})"
    if isinstance(t, Round):
        return f"{t.dtype.value}({_show(t.arg)})"
    if isinstance(t, Ite):
        return f"({expr_text(t.cond)} ? {_show(t.then)} : {_show(t.orelse)})"
    if isinstance(t, Fold):
        return f"fold{t.depth}({_show(t.init)}; {_show(t.body)})"
    if isinstance(t, Choice):
        return " | ".join(f"{t.buffer}<-{_show(v)}" for _, v in t.options)
    if isinstance(t, Accum):
        return " | ".join(f"{t.buffer}<-{_show(v)}" + "".join(f" + steps({_show(b)})"
                                                              for _, b in steps)
                          for _, v, steps in t.options)
    if isinstance(t, SpecSum):
        return f"sum({_show(t.body)})"
    if isinstance(t, Carried):
        return f"carried#{t.uid}"
    return type(t).__name__
