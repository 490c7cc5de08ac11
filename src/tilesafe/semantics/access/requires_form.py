"""A kernel's `requires` clauses as plain data (JSON): what a launch checks on its data.

Why plain data: the clauses are checked where the data is, before anything runs -- by the
interpreter and `tilesafe run` on the host, by `tilesafe.jit` on torch tensors on the GPU,
by the case runner on the lent GPU machine, which has numpy and torch but neither the
frontend's parser nor ISL. So the clauses travel as data (in a LaunchSpec, a case file) and
semantics/access/requires_eval.py evaluates this form only; this module, which needs the IR,
runs on the host that compiled the kernel.

An expression is a list: ["int", 5], ["size", "TK"], ["var", "p"], ["load", "sids", [i..]],
["bin", "+", a, b] (also comparisons, && and ||), ["un", "-" or "!", a],
["call", "min" | "max" | "abs", [args]]. A clause is a dict: "kind" ("all", "injective",
"permutation", "sorted"), "text" (as the kernel says it), "line", "vars" (names), and
"cond" (all) or "lo", "hi", "value", "vlo", "vhi" (the predicates; vlo/vhi may be null).
"""

from __future__ import annotations

from typing import Any

from tilesafe.frontend import ir
from tilesafe.frontend.ir_text import expr_text

Form = list[Any]


class NotEncodable(Exception):
    """A term outside the clause language (the resolver admits none; kept as a guard)."""


def encode(kernel: ir.Kernel) -> tuple[dict[str, Any], ...]:
    """Every `requires` clause of `kernel`, in order."""
    return tuple(clause(r) for r in kernel.requires)


def clause(r: ir.Requires) -> dict[str, Any]:
    out: dict[str, Any] = {"kind": r.kind.value, "text": text(r), "line": r.span.line,
                           "vars": [v.name for v in r.vars]}
    if r.kind is ir.RequireKind.ALL:
        assert r.cond is not None
        out["cond"] = expr(r.cond)
        return out
    for key in ("lo", "hi", "value", "vlo", "vhi"):
        e = getattr(r, key)
        out[key] = None if e is None else expr(e)
    return out


def text(r: ir.Requires) -> str:
    """The clause as the kernel writes it (for messages): `0 <= sids[p] && sids[p] <= TK`."""
    if r.kind is ir.RequireKind.ALL:
        assert r.cond is not None
        return source(r.cond)
    assert r.lo is not None and r.hi is not None and r.value is not None
    rng = "" if r.vlo is None or r.vhi is None else f", {source(r.vlo)} .. {source(r.vhi)}"
    return (f"{r.kind.value}({r.vars[0].name} in {source(r.lo)} .. {source(r.hi)}: "
            f"{source(r.value)}{rng})")


_PREC = {"||": 1, "&&": 2, "==": 4, "!=": 4, "<": 4, "<=": 4, ">": 4, ">=": 4, "+": 5,
         "-": 5, "*": 6, "/": 6, "%": 6}


def source(e: ir.Expr, outer: int = 0, right: bool = False) -> str:
    """An expression with only the parentheses precedence needs (the formatter's style)."""
    if isinstance(e, ir.BinOp):
        prec = _PREC[e.op]
        inner = f"{source(e.lhs, prec)} {e.op} {source(e.rhs, prec, right=True)}"
        tight = prec < outer or (prec == outer and right)
        return f"({inner})" if tight else inner
    if isinstance(e, ir.UnOp):
        prec = 3 if e.op == "!" else 7
        inner = f"{e.op}{source(e.operand, prec)}"
        return f"({inner})" if prec < outer else inner
    if isinstance(e, ir.Load):
        return f"{e.tensor}[{', '.join(source(i) for i in e.indices)}]"
    if isinstance(e, ir.Call):
        return f"{e.func}({', '.join(source(a) for a in e.args)})"
    return expr_text(e)


def expr(e: ir.Expr) -> Form:
    if isinstance(e, ir.IntConst):
        return ["int", int(e.value)]
    if isinstance(e, ir.SizeVar):
        return ["size", e.name]
    if isinstance(e, ir.LoopVar):
        return ["var", e.name]
    if isinstance(e, ir.Load):
        return ["load", e.tensor, [expr(i) for i in e.indices]]
    if isinstance(e, ir.BinOp):
        return ["bin", e.op, expr(e.lhs), expr(e.rhs)]
    if isinstance(e, ir.UnOp):
        return ["un", e.op, expr(e.operand)]
    if isinstance(e, ir.Call) and e.func in ("min", "max", "abs"):
        return ["call", e.func, [expr(a) for a in e.args]]
    raise NotEncodable(f"{type(e).__name__} in a requires clause")


def tensors(clauses: tuple[dict[str, Any], ...]) -> list[str]:
    """The index tensors the clauses read, in first-read order."""
    out: dict[str, None] = {}

    def walk(f: Form | None) -> None:
        if f is None:
            return
        if f[0] == "load":
            for i in f[2]:
                walk(i)
            out.setdefault(f[1], None)
        elif f[0] == "bin":
            walk(f[2])
            walk(f[3])
        elif f[0] == "un":
            walk(f[2])
        elif f[0] == "call":
            for a in f[2]:
                walk(a)

    for c in clauses:
        for key in ("cond", "lo", "hi", "value", "vlo", "vhi"):
            walk(c.get(key))
    return list(out)
