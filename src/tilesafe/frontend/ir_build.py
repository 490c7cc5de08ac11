"""Building integer IR expressions that no source text spelled: counts of synchronisation
events, trip counts, box coordinates (semantics/value/value_exec.py,
semantics/temporal/sync_counts.py).

Why: derived expressions then go through the same evaluators as the kernel's own (ISL
terms, the interpreter's closures), with one meaning; these helpers keep their
construction short and uniform. Multiplying or dividing by 1 returns the operand itself.
"""

from __future__ import annotations

from tilesafe.frontend import ir

INT = ir.ScalarType.INT


def const(v: int, span=None) -> ir.Expr:
    return ir.IntConst(span, INT, v)


def add(a: ir.Expr, b: ir.Expr) -> ir.Expr:
    return ir.BinOp(a.span, INT, "+", a, b)


def sub(a: ir.Expr, b: ir.Expr) -> ir.Expr:
    return ir.BinOp(a.span, INT, "-", a, b)


def mul(a: ir.Expr, c: int) -> ir.Expr:
    return a if c == 1 else ir.BinOp(a.span, INT, "*", a, const(c, a.span))


def floordiv(a: ir.Expr, c: int) -> ir.Expr:
    return a if c == 1 else ir.BinOp(a.span, INT, "/", a, const(c, a.span))


def mod(a: ir.Expr, c: int) -> ir.Expr:
    return ir.BinOp(a.span, INT, "%", a, const(c, a.span))


def call(func: str, *args: ir.Expr) -> ir.Expr:
    return ir.Call(args[0].span, INT, func, tuple(args))
