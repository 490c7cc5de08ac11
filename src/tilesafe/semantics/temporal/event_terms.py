"""The terms of the event model: what a synchronising operand depends on, compiled to
functions of the environment an agent evaluates it in, and which statements are events.

Why its own module: the event compiler (semantics/temporal/events.py), its synchronisation
half (event_sync.py), the ring projection and the parametric argument all ask these
questions of IR terms; they sit below all of them.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from tilesafe.frontend import ir
from tilesafe.frontend.span import Span
from tilesafe.frontend.walk import loads, own_exprs, statements, subexprs
from tilesafe.semantics.expr import evaluate
from tilesafe.semantics.temporal.instrs import Fn, Lets

# The tensor-core statements that are events of their class: an MMA (its warpgroup meets
# there and it reads shared memory until a covering wait), the async-group operations, and
# wgmma_fence (it orders the class's register accesses before its MMAs).
TENSOR_SYNC = (ir.Wgmma, ir.WgmmaFence, ir.WgmmaCommit, ir.WgmmaWait)
SYNC_STMTS = (ir.Init, ir.Fence, ir.Sync, ir.Wait, ir.Arrive, ir.ExpectTx, ir.TmaLoad,
              ir.TmaStore, ir.CommitGroup, ir.WaitGroup, ir.NamedBar,
              ir.ClusterBarrier) + TENSOR_SYNC


class Unsupported(Exception):
    """A construct the temporal model cannot represent faithfully (verdicts become UNKNOWN)."""

    def __init__(self, message: str, span: Span | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.span = span


# ---- expressions ------------------------------------------------------------------------------


def free_vars(e: ir.Expr, lets: Lets) -> frozenset[str]:
    """What a term depends on: "thread", "block", "size:N", "loop:<uid>", "data"."""
    out: set[str] = set()
    _free(e, lets, out)
    return frozenset(out)


def _free(e: ir.Expr, lets: Lets, out: set[str]) -> None:
    if isinstance(e, (ir.IntConst, ir.FloatConst)):
        return
    if isinstance(e, ir.SizeVar):
        out.add("size:" + e.name)
    elif isinstance(e, ir.Builtin):
        out.add("thread" if e.kind in (ir.BuiltinKind.THREAD, ir.BuiltinKind.LANE,
                                       ir.BuiltinKind.WARP_ID) else "block")
    elif isinstance(e, ir.LoopVar):
        out.add(f"loop:{e.uid}")
    elif isinstance(e, ir.LocalRef):
        if e.mutable or e.uid not in lets.table:
            out.add("data")
        else:
            _free(lets.table[e.uid], lets, out)
    elif isinstance(e, ir.Load):
        out.add("data")
    elif isinstance(e, ir.BinOp):
        _free(e.lhs, lets, out)
        _free(e.rhs, lets, out)
    elif isinstance(e, ir.UnOp):
        _free(e.operand, lets, out)
    elif isinstance(e, ir.Call):
        if e.func in ("f32", "i32"):
            out.add("data")
        for a in e.args:
            _free(a, lets, out)
    else:
        out.add("data")


def compile_expr(e: ir.Expr, lets: Lets) -> Fn:
    """A closure over an environment (keys: "thread", "block.x", size names, "L<uid>").

    Operators mean what semantics/expr/evaluate.py says; they work on Python ints and,
    elementwise, on numpy integer arrays, so footprints can be evaluated for many threads at
    once. Immutable `let`s are substituted; memory, floats and `var`s raise Unsupported.
    """

    def leaf(x: ir.Expr) -> Fn:
        if isinstance(x, ir.SizeVar):
            name = x.name
            return lambda env: env[name]
        if isinstance(x, ir.Builtin):
            if x.kind is ir.BuiltinKind.THREAD:
                return lambda env: env["thread"]
            if x.kind is ir.BuiltinKind.LANE:
                return lambda env: env["thread"] % 32
            if x.kind is ir.BuiltinKind.WARP_ID:
                return lambda env: env["thread"] // 32
            key = x.kind.value
            return lambda env: env[key]
        if isinstance(x, ir.LoopVar):
            key = f"L{x.uid}"
            return lambda env: env[key]
        if isinstance(x, ir.LocalRef) and not x.mutable and x.uid in lets.table:
            return compile_expr(lets.table[x.uid], lets)
        raise Unsupported(f"expression of kind {type(x).__name__} has no integer meaning "
                          "here", x.span)

    for x in subexprs(e):
        if x.type is ir.ScalarType.FLOAT or isinstance(x, ir.Call) and x.func in ("f32", "i32"):
            raise Unsupported(f"expression of kind {type(x).__name__} has no integer meaning "
                              "here", x.span)
    return evaluate.compile_expr(e, leaf)


def expr_key(e: Any, lets: Lets) -> Any:
    """A term's structure with `let`s inlined and positions dropped: equal keys, equal
    values in equal environments."""
    if isinstance(e, ir.LocalRef) and not e.mutable and e.uid in lets.table:
        return expr_key(lets.table[e.uid], lets)
    if isinstance(e, ir.Expr):
        return (type(e).__name__,) + tuple(expr_key(getattr(e, f), lets)
                                           for f in e.__dataclass_fields__
                                           if f not in ("span", "type"))
    if isinstance(e, tuple):
        return tuple(expr_key(x, lets) for x in e)
    return e


def conjuncts(e: ir.Expr) -> list[ir.Expr]:
    if isinstance(e, ir.BinOp) and e.op == "&&":
        return conjuncts(e.lhs) + conjuncts(e.rhs)
    return [e]


def conjoin(parts: list[ir.Expr], span: Span) -> ir.Expr | None:
    if not parts:
        return None
    out = parts[0]
    for p in parts[1:]:
        out = ir.BinOp(span, ir.ScalarType.BOOL, "&&", out, p)
    return out


# ---- statements -------------------------------------------------------------------------------


def has_sync(stmts: tuple[ir.Stmt, ...]) -> bool:
    return any(isinstance(s, SYNC_STMTS) for s in statements(stmts))


def shared_loads(e: ir.Expr) -> Iterator[ir.Load]:
    return (ld for ld in loads(e) if ld.space is ir.Space.SHARED)


def frag_uses(stmts: tuple[ir.Stmt, ...]
              ) -> tuple[frozenset[str], frozenset[str], Span | None]:
    """The fragments whose registers the statements read (`acc[r]`) and write
    (`acc[r] = v`), nested statements included, and where the first such access is."""
    reads: set[str] = set()
    writes: set[str] = set()
    first: Span | None = None
    for s in statements(stmts):
        for e in own_exprs(s):
            for x in subexprs(e):
                if isinstance(x, ir.FragLoad):
                    reads.add(x.fragment)
                    first = first or x.span
        if isinstance(s, ir.FragStore):
            writes.add(s.fragment)
            first = first or s.span
    return frozenset(reads), frozenset(writes), first


def has_frag(stmts: tuple[ir.Stmt, ...]) -> bool:
    reads, writes, _ = frag_uses(stmts)
    return bool(reads or writes)


def _frag_paths(stmts: tuple[ir.Stmt, ...], lets: Lets,
                guards: list[tuple[Fn, Fn]]) -> bool:
    """Do the statements reach every fragment use they contain unconditionally? Loops on
    the way are added to `guards` (their bounds as functions of the environment of the
    instruction: a bound that reads a loop variable of the statement itself cannot be
    evaluated there and makes the use uncertain); a condition makes it uncertain."""
    certain = True
    for s in stmts:
        if isinstance(s, ir.Let):
            lets = lets.bind(s.uid, s.value)
        if not has_frag((s,)):
            continue
        if isinstance(s, ir.If):
            certain = False
        elif isinstance(s, ir.For):
            inner = {f"loop:{x.var.uid}" for x in statements((s,)) if isinstance(x, ir.For)}
            fv = free_vars(s.lo, lets) | free_vars(s.hi, lets)
            if fv & ({"thread", "data"} | inner):
                certain = False
            else:
                guards.append((compile_expr(s.lo, lets), compile_expr(s.hi, lets)))
            certain = _frag_paths(s.body, lets, guards) and certain
        elif isinstance(s, ir.Role):
            certain = _frag_paths(s.body, lets, guards) and certain
    return certain


def _mma_chain(s: ir.For, lets: Lets) -> tuple[list[tuple[ir.For, Lets]], ir.Wgmma, Lets] | None:
    """A nest of loops around one wgmma and nothing else but `let`s (the k-steps of one
    stage): (the loops with the lets in scope at each, the wgmma, the lets at it)."""
    loops = [(s, lets)]
    body = s.body
    while True:
        inner_lets = loops[-1][1]
        rest = []
        for x in body:
            if isinstance(x, ir.Let):
                if has_shared((x,)) or has_frag((x,)):
                    return None
                inner_lets = inner_lets.bind(x.uid, x.value)
            else:
                rest.append(x)
        if len(rest) != 1:
            return None
        (x,) = rest
        if isinstance(x, ir.Wgmma):
            return loops, x, inner_lets
        if not isinstance(x, ir.For):
            return None
        loops.append((x, inner_lets))
        body = x.body


def has_shared(stmts: tuple[ir.Stmt, ...]) -> bool:
    for s in statements(stmts):
        if isinstance(s, ir.Store) and s.space is ir.Space.SHARED:
            return True
        if any(True for e in own_exprs(s) for _ in shared_loads(e)):
            return True
    return False
