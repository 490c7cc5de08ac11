"""The block index as a parameter of the one-block model: persistent kernels.

Why: a persistent kernel walks a tile schedule, `for t in block.x .. TILES step GRID`, with
its barriers and mbarrier waits inside. Each block's trip count is ceil((TILES - bx) / GRID):
it depends on the block, which the event model (semantics/temporal/events.py) does not allow of a
loop that synchronises -- synchronisation is explored for one block that stands for all.

The blocks of a launch share no shared memory and no mbarrier, so the protocol of block bx
of a launch with sizes sigma is the one-block system of (sigma, bx) on its own. Lifting the
block index into the sizes -- `block.x` becomes a size with `0 <= block.x < grid.x` added
to `where` -- makes the one-block model of the lifted kernel, over every size assignment
its `where` allows, exactly the set of all blocks of all launches. The argument for every
trip count (semantics/temporal/parametric.py) then runs unchanged: its trip count T(sizes) is now
T(sizes, bx), quasi-affine because the schedule's step is a constant; the conditions on the
synchronising terms (periodic in the iteration, z3) are asked over two copies of the
sizes *and* the block, so a term that reads the block other than through the iteration
(the ring counter of one block must not depend on which block it is) is caught there and
the verdict is UNKNOWN. Nothing here is an approximation: every state of the lifted system
is a state of one block of one launch, and every block of every launch is a lifted system.

What changes downstream: a counterexample's sizes carry the block (`split` takes it out:
the launch's sizes and the block to replay); a candidate is confirmed only on that block
(`blocks`); the interpreter's guide names the original kernel's statements (`origin`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import fields, is_dataclass, replace
from typing import Any

from tilesafe.frontend import ir
from tilesafe.frontend.walk import statements
from tilesafe.semantics.temporal.events import has_sync

AXES = ("block.x", "block.y", "block.z")
_KINDS = {ir.BuiltinKind.BLOCK_X: 0, ir.BuiltinKind.BLOCK_Y: 1, ir.BuiltinKind.BLOCK_Z: 2}
# id(original kernel) -> (original, lifted, {id(lifted stmt): original stmt})
_MEMO: dict[int, tuple[ir.Kernel, ir.Kernel, dict[int, ir.Stmt]]] = {}
_LIFTED: dict[int, tuple[ir.Kernel, tuple[str, ...], dict[int, ir.Stmt]]] = {}


def _block_axes(e: Any, out: set[int]) -> None:
    if isinstance(e, ir.Builtin) and e.kind in _KINDS:
        out.add(_KINDS[e.kind])
    elif isinstance(e, ir.Expr):
        for f in fields(e):
            v = getattr(e, f.name)
            if isinstance(v, ir.Expr):
                _block_axes(v, out)
            elif isinstance(v, tuple):
                for x in v:
                    _block_axes(x, out)


def scheduled_axes(kernel: ir.Kernel) -> tuple[int, ...]:
    """The block axes that bound a loop that synchronises (a tile schedule), with the
    `let`s such bounds read inlined."""
    lets = {s.uid: s.value for s in statements(kernel.body) if isinstance(s, ir.Let)}
    out: set[int] = set()

    def visit(e: ir.Expr, depth: int = 0) -> None:
        _block_axes(e, out)
        if depth > 32:
            return
        stack = [e]
        while stack:
            x = stack.pop()
            if isinstance(x, ir.LocalRef) and not x.mutable and x.uid in lets:
                visit(lets[x.uid], depth + 1)
            elif isinstance(x, ir.Expr):
                for f in fields(x):
                    v = getattr(x, f.name)
                    if isinstance(v, ir.Expr):
                        stack.append(v)
                    elif isinstance(v, tuple):
                        stack.extend(y for y in v if isinstance(y, ir.Expr))

    for s in statements(kernel.body):
        if isinstance(s, ir.For) and has_sync(s.body):
            visit(s.lo)
            visit(s.hi)
    return tuple(sorted(a for a in out if a < len(kernel.grid)))


def lift(kernel: ir.Kernel) -> ir.Kernel:
    """The kernel with its scheduled block axes as sizes (itself when there are none).
    Memoised: the same kernel object gives the same lifted object (the checkers' caches
    are keyed by kernel identity)."""
    hit = _MEMO.get(id(kernel))
    if hit is not None and hit[0] is kernel:
        return hit[1]
    axes = scheduled_axes(kernel)
    if not axes:
        return kernel
    names = tuple(AXES[a] for a in axes)
    kinds = {k for k, a in _KINDS.items() if a in axes}
    origin: dict[int, ir.Stmt] = {}

    def rw(x: Any) -> Any:
        if isinstance(x, ir.Builtin) and x.kind in kinds:
            return ir.SizeVar(x.span, ir.ScalarType.INT, x.kind.value)
        if isinstance(x, tuple):
            new = tuple(rw(y) for y in x)
            return x if all(a is b for a, b in zip(new, x, strict=True)) else new
        if is_dataclass(x) and not isinstance(x, type) and isinstance(
                x, (ir.Expr, ir.Stmt, ir.BarrierRef, ir.BufferSlice)):
            changes = {}
            for f in fields(x):
                v = getattr(x, f.name)
                nv = rw(v)
                if nv is not v:
                    changes[f.name] = nv
            if not changes:
                return x
            y = replace(x, **changes)
            if isinstance(x, ir.Stmt):
                origin[id(y)] = x
            return y
        return x

    sp = kernel.span
    extra = []
    for a, name in zip(axes, names, strict=True):
        v = ir.SizeVar(sp, ir.ScalarType.INT, name)
        extra.append(ir.BinOp(sp, ir.ScalarType.BOOL, ">=", v,
                              ir.IntConst(sp, ir.ScalarType.INT, 0)))
        extra.append(ir.BinOp(sp, ir.ScalarType.BOOL, "<", v, kernel.grid[a]))
    body = _normalise(rw(kernel.body), origin)
    lifted = replace(kernel, sizes=kernel.sizes + names, where=kernel.where + tuple(extra),
                     body=body)
    if len(_MEMO) > 64:
        _MEMO.clear()
        _LIFTED.clear()
    _MEMO[id(kernel)] = (kernel, lifted, origin)
    _LIFTED[id(lifted)] = (lifted, names, origin)
    return lifted


# ---- the schedule as an ordinal loop ----------------------------------------------------------


def _normalise(body: tuple[ir.Stmt, ...], origin: dict[int, ir.Stmt]) -> tuple[ir.Stmt, ...]:
    """Every loop that synchronises and whose start reads a lifted block axis,
    `for t in lo .. hi step S`, as its ordinal loop `for t in 0 .. (hi - lo + S - 1) / S`
    with `t` read as `lo + S * t` in its body (the same iterations, t = lo + S*i). The
    terms of the body are then simplified (exact quasi-affine identities under floor
    division: `(lo + S*i - lo) / S` is `i`), so that a ring counter computed from the
    tile index reads the iteration only -- the form the event model's footprints and the
    periodicity argument take as it is, for every size and block."""

    def stmts(ss: tuple[ir.Stmt, ...], subst: dict[int, ir.Expr]) -> tuple[ir.Stmt, ...]:
        out = []
        for x in ss:
            y = stmt(x, subst)
            if y is not x:
                origin[id(y)] = origin.get(id(x), x)
            out.append(y)
        return tuple(out)

    def stmt(x: ir.Stmt, subst: dict[int, ir.Expr]) -> ir.Stmt:
        if isinstance(x, ir.For):
            if has_sync(x.body) and _reads_axis(x.lo):
                sp = x.lo.span
                lo, hi = ex(x.lo, subst), ex(x.hi, subst)
                step = ir.IntConst(sp, ir.ScalarType.INT, x.step)
                var = ir.LoopVar(x.var.span, ir.ScalarType.INT, x.var.name, x.var.uid)
                value = _bin("+", lo, _bin("*", step, var))
                inner = {**subst, x.var.uid: value}
                trip = _bin("/", _bin("+", _bin("-", hi, lo),
                                      ir.IntConst(sp, ir.ScalarType.INT, x.step - 1)), step)
                return replace(x, lo=ir.IntConst(sp, ir.ScalarType.INT, 0),
                               hi=simplify(trip), step=1, body=stmts(x.body, inner))
            return _rebuild(x, subst, stmts, ex)
        return _rebuild(x, subst, stmts, ex)

    def ex(e: ir.Expr, subst: dict[int, ir.Expr]) -> ir.Expr:
        if not subst:
            return e
        new = _subst(e, subst)
        return simplify(new) if new is not e else e

    return stmts(body, {})


def _reads_axis(e: ir.Expr) -> bool:
    return any(isinstance(x, ir.SizeVar) and x.name in AXES for x in _nodes(e))


def _nodes(e: Any) -> Iterator[Any]:
    yield e
    if isinstance(e, ir.Expr):
        for f in fields(e):
            v = getattr(e, f.name)
            if isinstance(v, ir.Expr):
                yield from _nodes(v)
            elif isinstance(v, tuple):
                for y in v:
                    yield from _nodes(y)


def _rebuild(x: Any, subst: dict[int, ir.Expr], stmts: Any, ex: Any) -> Any:
    """`x` with `subst` applied to its expressions and to its statements."""
    if not subst and not isinstance(x, (ir.Role, ir.If, ir.For)):
        return x
    changes = {}
    for f in fields(x):
        v = getattr(x, f.name)
        nv = _field(v, subst, stmts, ex)
        if nv is not v:
            changes[f.name] = nv
    return replace(x, **changes) if changes else x


def _field(v: Any, subst: dict[int, ir.Expr], stmts: Any, ex: Any) -> Any:
    if isinstance(v, ir.Stmt):
        return stmts((v,), subst)[0]
    if isinstance(v, ir.Expr):
        return ex(v, subst)
    if isinstance(v, (ir.BarrierRef, ir.BufferSlice)):
        return _rebuild(v, subst, stmts, ex)
    if isinstance(v, tuple) and v and all(isinstance(y, ir.Stmt) for y in v):
        return stmts(v, subst)
    if isinstance(v, tuple):
        new = tuple(_field(y, subst, stmts, ex) for y in v)
        return v if all(a is b for a, b in zip(new, v, strict=True)) else new
    return v


def _subst(e: ir.Expr, subst: dict[int, ir.Expr]) -> ir.Expr:
    if isinstance(e, ir.LoopVar) and e.uid in subst:
        return subst[e.uid]
    changes = {}
    for f in fields(e):
        v = getattr(e, f.name)
        if isinstance(v, ir.Expr):
            nv = _subst(v, subst)
        elif isinstance(v, tuple):
            nv = tuple(_subst(y, subst) if isinstance(y, ir.Expr) else y for y in v)
            if all(a is b for a, b in zip(nv, v, strict=True)):
                nv = v
        else:
            continue
        if nv is not v:
            changes[f.name] = nv
    return replace(e, **changes) if changes else e


def _bin(op: str, a: ir.Expr, b: ir.Expr) -> ir.Expr:
    return ir.BinOp(a.span, ir.ScalarType.INT, op, a, b)


# Linear forms: ({atom key: (coefficient, atom)}, constant), atoms compared by structure.
Lin = tuple[dict[Any, tuple[int, ir.Expr]], int]


def _key(e: ir.Expr) -> Any:
    if isinstance(e, ir.Expr):
        return (type(e).__name__,) + tuple(_key(getattr(e, f.name)) for f in fields(e)
                                           if f.name not in ("span", "type"))
    if isinstance(e, tuple):
        return tuple(_key(x) for x in e)
    return e


def _lin(e: ir.Expr) -> Lin:
    if isinstance(e, ir.IntConst):
        return {}, e.value
    if isinstance(e, ir.BinOp) and e.type is ir.ScalarType.INT:
        if e.op in ("+", "-"):
            (a, ca), (b, cb) = _lin(e.lhs), _lin(e.rhs)
            sign = 1 if e.op == "+" else -1
            out = dict(a)
            for k, (c, x) in b.items():
                out[k] = (out.get(k, (0, x))[0] + sign * c, x)
            return {k: v for k, v in out.items() if v[0]}, ca + sign * cb
        if e.op == "*":
            (a, ca), (b, cb) = _lin(e.lhs), _lin(e.rhs)
            if not a:
                return {k: (ca * c, x) for k, (c, x) in b.items() if ca * c}, ca * cb
            if not b:
                return {k: (cb * c, x) for k, (c, x) in a.items() if cb * c}, ca * cb
        if e.op in ("/", "%"):
            (a, ca), (b, cb) = _lin(e.lhs), _lin(e.rhs)
            if not b and cb > 0:
                d = cb
                # L = P + d*Q exactly (Q = coefficients // d): floor(L/d) = floor(P/d) + Q,
                # L mod d = P mod d.
                q = {k: (c // d, x) for k, (c, x) in a.items() if c // d}
                p = {k: (c % d, x) for k, (c, x) in a.items() if c % d}
                pc, qc = ca % d, ca // d
                if e.op == "%":
                    if not p:
                        return {}, pc
                    rest = _bin("%", _unlin((p, pc), e.span), ir.IntConst(e.span, e.type, d))
                    return {_key(rest): (1, rest)}, 0
                if not p:
                    return q, qc
                rest = _bin("/", _unlin((p, pc), e.span), ir.IntConst(e.span, e.type, d))
                q = dict(q)
                q[_key(rest)] = (q.get(_key(rest), (0, rest))[0] + 1, rest)
                return q, qc
    return {_key(e): (1, e)}, 0


def _unlin(form: Lin, span: Any) -> ir.Expr:
    terms, c = form
    out: ir.Expr | None = None
    for coeff, atom in terms.values():
        t = atom if coeff == 1 else ir.BinOp(span, ir.ScalarType.INT, "*",
                                              ir.IntConst(span, ir.ScalarType.INT, coeff), atom)
        out = t if out is None else ir.BinOp(span, ir.ScalarType.INT, "+", out, t)
    if out is None:
        return ir.IntConst(span, ir.ScalarType.INT, c)
    if c:
        out = ir.BinOp(span, ir.ScalarType.INT, "+", out, ir.IntConst(span, ir.ScalarType.INT, c))
    return out


def simplify(e: ir.Expr) -> ir.Expr:
    """An equal integer term (floor division and modulo by positive constants), with
    the terms that cancel removed; other terms as they are."""
    if not (isinstance(e, ir.BinOp) and e.type is ir.ScalarType.INT
            and e.op in ("+", "-", "*", "/", "%")):
        return _simplify_inside(e)
    return _unlin(_lin(_simplify_inside(e)), e.span)


def _simplify_inside(e: ir.Expr) -> ir.Expr:
    changes = {}
    for f in fields(e):
        v = getattr(e, f.name)
        if isinstance(v, ir.Expr):
            nv = simplify(v) if not isinstance(e, ir.BinOp) or e.op not in (
                "+", "-", "*", "/", "%") or e.type is not ir.ScalarType.INT else v
            if nv is not v:
                changes[f.name] = nv
        elif isinstance(v, tuple) and any(isinstance(y, ir.Expr) for y in v):
            nv = tuple(simplify(y) if isinstance(y, ir.Expr) else y for y in v)
            changes[f.name] = nv
    return replace(e, **changes) if changes else e


def _info(kernel: ir.Kernel) -> tuple[tuple[str, ...], dict[int, ir.Stmt]] | None:
    hit = _LIFTED.get(id(kernel))
    if hit is not None and hit[0] is kernel:
        return hit[1], hit[2]
    return None


def lifted_axes(kernel: ir.Kernel) -> tuple[str, ...]:
    """The block axes `kernel` (a lifted kernel) has as sizes; () for any other kernel."""
    info = _info(kernel)
    return info[0] if info is not None else ()


def split(kernel: ir.Kernel, sizes: Mapping[str, int]
          ) -> tuple[dict[str, int], dict[int, int]]:
    """A lifted kernel's size assignment as (the launch's sizes, {axis: block index})."""
    axes = lifted_axes(kernel)
    launch = {k: v for k, v in sizes.items() if k not in axes}
    fixed = {AXES.index(k): int(sizes[k]) for k in axes if k in sizes}
    return launch, fixed


def block_of(kernel: ir.Kernel, sizes: Mapping[str, int], ndim: int,
             default: Iterable[int] | None = None) -> tuple[int, ...]:
    """The block to replay: the lifted axes from `sizes`, the others from `default` (0)."""
    _, fixed = split(kernel, sizes)
    base = list(default) if default is not None else [0] * ndim
    for a, v in fixed.items():
        if a < len(base):
            base[a] = v
    return tuple(base)


def blocks(kernel: ir.Kernel, sizes: Mapping[str, int],
           candidates: Iterable[tuple[int, ...]]) -> Iterator[tuple[int, ...]]:
    """The blocks a size assignment stands for: all candidates for a kernel that is not
    lifted; for a lifted one, the candidates with its block on the lifted axes, or (when
    no candidate has it) that block with the other axes at 0."""
    _, fixed = split(kernel, sizes)
    if not fixed:
        yield from candidates
        return
    found = False
    for b in candidates:
        if all(a < len(b) and b[a] == v for a, v in fixed.items()):
            found = True
            yield b
    if not found:
        yield block_of(kernel, sizes, len(kernel.grid))


def origin_id(kernel: ir.Kernel, stmt_id: int) -> int:
    """The id of the original kernel's statement a lifted statement stands for."""
    info = _info(kernel)
    if info is None:
        return stmt_id
    src = info[1].get(stmt_id)
    return id(src) if src is not None else stmt_id


__all__ = ["AXES", "block_of", "blocks", "lift", "lifted_axes", "origin_id",
           "scheduled_axes", "split"]
