"""IR integer and boolean expressions as text, for messages and evidence.

Why: diagnostics (frontend/resolve.py) and value-proof evidence (semantics/value/value_terms.py)
both name an expression of the IR; one printer keeps them from drifting apart. `brief` is
the diagnostics' one-liner (operators without parentheses, loads and calls elided), the
full form parenthesises every operator and spells out indices and arguments, so that the
structure of a term is unambiguous in evidence.
"""

from __future__ import annotations

from tilesafe.frontend import ir


def expr_text(e: ir.Expr, brief: bool = False) -> str:
    if isinstance(e, ir.IntConst):
        return str(e.value)
    if isinstance(e, (ir.SizeVar, ir.LoopVar, ir.LocalRef)):
        return e.name
    if isinstance(e, ir.Builtin):
        return e.kind.value
    if isinstance(e, ir.BinOp):
        text = f"{expr_text(e.lhs, brief)} {e.op} {expr_text(e.rhs, brief)}"
        return text if brief else f"({text})"
    if isinstance(e, ir.UnOp):
        return f"{e.op}{expr_text(e.operand, brief)}"
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
