"""IR integer and boolean expressions as text, for messages and evidence.

Why: diagnostics (frontend/resolve.py) and value-proof evidence (semantics/value/value_terms.py)
both name an expression of the IR; one printer keeps them from drifting apart. `brief` is
the diagnostics' one-liner (only the parentheses the source needs, by precedence: `(i + 256)
% N`, never the `i + 256 % N` that means something else; loads and calls elided), the full
form parenthesises every operator and spells out indices and arguments, so that the
structure of a term is unambiguous in evidence.
"""

from __future__ import annotations

from tilesafe.frontend import ir

# Binding strength of the binary operators (grammar/tilesafe.lark), for `brief`.
_PRECEDENCE = {"||": 1, "&&": 2, "==": 3, "!=": 3, "<": 3, "<=": 3, ">": 3, ">=": 3,
               "+": 4, "-": 4, "*": 5, "/": 5, "%": 5}


def expr_text(e: ir.Expr, brief: bool = False) -> str:
    if isinstance(e, ir.IntConst):
        return str(e.value)
    if isinstance(e, (ir.SizeVar, ir.LoopVar, ir.LocalRef)):
        return e.name
    if isinstance(e, ir.Builtin):
        return e.kind.value
    if isinstance(e, ir.BinOp):
        if not brief:
            return f"({expr_text(e.lhs)} {e.op} {expr_text(e.rhs)})"
        mine = _PRECEDENCE.get(e.op, 0)
        lhs, rhs = expr_text(e.lhs, True), expr_text(e.rhs, True)
        left = _PRECEDENCE.get(e.lhs.op, 0) if isinstance(e.lhs, ir.BinOp) else 99
        if left < mine or left == mine == _PRECEDENCE["=="]:  # comparisons do not chain
            lhs = f"({lhs})"
        if isinstance(e.rhs, ir.BinOp) and _PRECEDENCE.get(e.rhs.op, 0) <= mine:
            rhs = f"({rhs})"  # left-associative: a - (b - c) keeps its parentheses
        return f"{lhs} {e.op} {rhs}"
    if isinstance(e, ir.UnOp):
        inner = expr_text(e.operand, brief)
        return f"{e.op}({inner})" if brief and isinstance(e.operand, ir.BinOp) else \
            f"{e.op}{inner}"
    if isinstance(e, ir.Call):
        args = "..." if brief else ", ".join(expr_text(a) for a in e.args)
        return f"{e.func}({args})"
    if isinstance(e, ir.Load):
        idx = "..." if brief else ", ".join(expr_text(i) for i in e.indices)
        cta = "" if e.cta is None else f"@({expr_text(e.cta, brief)})"
        return f"{e.tensor}{cta}[{idx}]"
    if isinstance(e, ir.FragLoad):
        return f"{e.fragment}[{'...' if brief else expr_text(e.reg)}]"
    return "..." if brief else "?"
