"""How many synchronisation events a thread has passed before a statement, as an integer IR
expression of the statement's coordinates.

Why: the value proof (semantics/value/valueflow.py) decides which write a shared read sees from a
happens-before relation built out of these counts. A `sync` (channel SYNC) orders everything
before the n-th `sync` of every thread before everything after it; a named barrier (channel:
its id) orders what a thread did before its n-th participation (`bar_arrive` or `bar_sync`)
before what another thread does after its n-th `bar_sync`, provided each phase is made of
one participation of every thread using the barrier (checked in valueflow.py, against the
barrier checker's TS412). Both need the count as a function of loop coordinates: a constant
per pass over a block, times completed iterations, plus -- for the ring idiom that skips its
first pass (`if k > 0 { bar_sync ... }`) -- events under an `if` whose condition bounds one
loop variable to an interval, counted in closed form with `min`/`max`. Anything else is
None: not known, and the value proof then does not use that channel for the statement.
"""

from __future__ import annotations

from dataclasses import dataclass

from tilesafe.frontend import ir, walk
from tilesafe.frontend.ir_build import add as _add
from tilesafe.frontend.ir_build import call as _call
from tilesafe.frontend.ir_build import const as _int
from tilesafe.frontend.ir_build import floordiv as _div
from tilesafe.frontend.ir_build import mul as _mul
from tilesafe.frontend.ir_build import sub as _sub
from tilesafe.semantics.value.value_terms import Inst

INT, BOOL = ir.ScalarType.INT, ir.ScalarType.BOOL
SYNC = "sync"
Channel = str | int  # SYNC, or a named barrier's id


def is_event(s: ir.Stmt, channel: Channel) -> bool:
    if channel == SYNC:
        return isinstance(s, ir.Sync)
    return isinstance(s, ir.NamedBar) and s.bar_id == channel


def per_pass(stmts: tuple[ir.Stmt, ...], channel: Channel) -> int | None:
    """Events one pass over `stmts` executes, when a constant (None: it depends on a trip
    count or a condition)."""
    n = 0
    for s in stmts:
        if is_event(s, channel):
            n += 1
        elif isinstance(s, ir.For):
            inner = per_pass(s.body, channel)
            if inner != 0:
                trips = None
                if isinstance(s.lo, ir.IntConst) and isinstance(s.hi, ir.IntConst):
                    trips = max(0, -(-(s.hi.value - s.lo.value) // s.step))
                if inner is None or trips is None:
                    return None
                n += inner * trips
        elif isinstance(s, ir.If):
            if per_pass(s.then, channel) != 0 or per_pass(s.orelse, channel) != 0:
                return None
        elif isinstance(s, ir.Role):
            if per_pass(s.body, channel) != 0:
                return None
    return n


@dataclass(frozen=True)
class Interval:
    """lo <= var < hi (a missing bound: unbounded on that side)."""

    var: int  # the loop variable's uid
    lo: ir.Expr | None
    hi: ir.Expr | None


@dataclass(frozen=True)
class PerIteration:
    """Events in one iteration of a loop: `fixed` always, plus `v` for each (v, interval)
    whose interval holds for the iteration's loop variable."""

    fixed: int
    guarded: tuple[tuple[int, Interval], ...]


def per_iteration(loop: ir.For, channel: Channel) -> PerIteration | None:
    fixed, guarded = 0, []
    for s in loop.body:
        if isinstance(s, ir.If):
            v, w = per_pass(s.then, channel), per_pass(s.orelse, channel)
            if v != 0 or w != 0:
                iv = interval(s.cond, loop.var.uid)
                if v is None or iv is None or w != 0 or loop.step != 1:
                    return None
                guarded.append((v, iv))
                continue
        n = per_pass((s,), channel)
        if n is None:
            return None
        fixed += n
    return PerIteration(fixed, tuple(guarded))


def entering_iteration(entry: ir.Expr, loop: ir.For, per: PerIteration) -> ir.Expr:
    """The count at the start of the iteration with the loop variable's current value."""
    done = _div(_sub(loop.var, loop.lo), loop.step)
    out = _add(entry, _mul(done, per.fixed)) if per.fixed else entry
    for v, iv in per.guarded:
        out = _add(out, _mul(_overlap(loop.lo, loop.var, iv), v))
    return out


def after_loop(entry: ir.Expr, loop: ir.For, per: PerIteration) -> ir.Expr:
    span = loop.span
    trips = _call("max", _int(0, span), _div(_add(_sub(
        loop.hi, loop.lo), _int(loop.step - 1, span)), loop.step))
    out = _add(entry, _mul(trips, per.fixed)) if per.fixed else entry
    for v, iv in per.guarded:
        out = _add(out, _mul(_overlap(loop.lo, loop.hi, iv), v))
    return out


def after_branch(before: ir.Expr, s: ir.If, channel: Channel,
                 loops: tuple[int, ...]) -> ir.Expr | None:
    """The count after `if`, when its events are a constant of the then-branch under a
    condition that bounds one enclosing loop variable (uids in `loops`) to an interval."""
    v, w = per_pass(s.then, channel), per_pass(s.orelse, channel)
    if v == 0 and w == 0:
        return before
    if v is None or w != 0:
        return None
    for uid in loops:
        iv = interval(s.cond, uid)
        if iv is not None:
            var = ir.LoopVar(s.span, INT, "k", uid)
            once = _add(var, _int(1, s.span))
            return _add(before, _mul(_overlap(var, once, iv), v))
    return None


def interval(cond: ir.Expr, uid: int) -> Interval | None:
    """`cond` as lo <= var < hi for loop variable `uid`: comparisons of the variable with
    expressions free of it, joined by `&&`."""
    if isinstance(cond, ir.BinOp) and cond.op == "&&":
        a, b = interval(cond.lhs, uid), interval(cond.rhs, uid)
        if a is None or b is None:
            return None
        return Interval(uid, _pick("max", a.lo, b.lo), _pick("min", a.hi, b.hi))
    if not (isinstance(cond, ir.BinOp) and cond.op in ("<", "<=", ">", ">=")):
        return None
    op, lhs, rhs = cond.op, cond.lhs, cond.rhs
    if _is_var(rhs, uid) and not _mentions(lhs, uid):
        op, lhs, rhs = {"<": ">", "<=": ">=", ">": "<", ">=": "<="}[op], rhs, lhs
    if not _is_var(lhs, uid) or _mentions(rhs, uid):
        return None
    one = _int(1, cond.span)
    if op == "<":
        return Interval(uid, None, rhs)
    if op == "<=":
        return Interval(uid, None, _add(rhs, one))
    if op == ">":
        return Interval(uid, _add(rhs, one), None)
    return Interval(uid, rhs, None)


def _overlap(lo: ir.Expr, hi: ir.Expr, iv: Interval) -> ir.Expr:
    """|[lo, hi) ∩ [iv.lo, iv.hi)|: how many integers of a step-1 range the interval keeps."""
    a = lo if iv.lo is None else _call("max", lo, iv.lo)
    b = hi if iv.hi is None else _call("min", hi, iv.hi)
    return _call("max", _int(0, lo.span), _sub(b, a))


def _pick(func: str, a: ir.Expr | None, b: ir.Expr | None) -> ir.Expr | None:
    if a is None or b is None:
        return a if b is None else b
    return _call(func, a, b)


def _is_var(e: ir.Expr, uid: int) -> bool:
    return isinstance(e, ir.LoopVar) and e.uid == uid


def _mentions(e: ir.Expr, uid: int) -> bool:
    """Does e read loop variable uid (a `let` or a load might hide it: counted as yes)?"""
    return any(_is_var(x, uid) or isinstance(x, (ir.LocalRef, ir.Load))
               for x in walk.subexprs(e))


# ---- when phase numbers are participation counts -------------------------------------------


@dataclass(frozen=True)
class Member:
    """Threads lo .. hi-1 use a named barrier; `waits`: every use of theirs is `bar_sync`
    (so after their n-th use they have waited for phase n)."""

    lo: int
    hi: int
    waits: bool


def phase_members(uses: list[tuple[ir.NamedBar, Inst]]) -> dict[int, tuple[Member, ...]]:
    """The named barriers whose n-th phase is made of the n-th participation of every thread
    that uses it, with those threads. That holds when the using thread ranges are disjoint,
    add up to the barrier's count, and no range arrives twice in one phase (the barrier
    checker's TS412, which a verified kernel has proved): a phase then needs every range
    once. Uses under an `elect` or a condition on the thread would break the first two, so
    such a barrier is left out (its ordering is not used, never assumed)."""
    by_id: dict[int, list[tuple[ir.NamedBar, Inst]]] = {}
    for bar, inst in uses:
        by_id.setdefault(bar.bar_id, []).append((bar, inst))
    out: dict[int, tuple[Member, ...]] = {}
    for bar_id, group in by_id.items():
        ranges: dict[tuple[int, int], bool] = {}
        ok = len({bar.count for bar, _ in group}) == 1
        for bar, inst in group:
            if inst.elect or any(_thread_dependent(g) for g in inst.guards):
                ok = False
            key = (inst.thread_lo, inst.thread_hi)
            ranges[key] = ranges.get(key, True) and not bar.arrive
        spans = sorted(ranges)
        if any(a[1] > b[0] for a, b in zip(spans, spans[1:], strict=False)):
            ok = False
        if ok and sum(hi - lo for lo, hi in spans) == group[0][0].count:
            out[bar_id] = tuple(Member(lo, hi, w) for (lo, hi), w in sorted(ranges.items()))
    return out


def member(members: tuple[Member, ...], lo: int, hi: int) -> Member | None:
    """The member range holding threads lo .. hi-1, if one does."""
    return next((m for m in members if m.lo <= lo and hi <= m.hi), None)


def _thread_dependent(e: ir.Expr) -> bool:
    """Does e read the thread index (a `let` or a load might hide it: counted as yes)?"""
    return any((isinstance(x, ir.Builtin) and x.kind in _THREAD)
               or isinstance(x, (ir.LocalRef, ir.Load)) for x in walk.subexprs(e))


_THREAD = (ir.BuiltinKind.THREAD, ir.BuiltinKind.LANE, ir.BuiltinKind.WARP_ID)
