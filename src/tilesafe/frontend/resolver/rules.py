"""The resolver's standalone rules: role inference, constant folding, typed placeholders,
and what makes a term quasi-affine or a condition Presburger (the affinity rules that keep
every index decidable), plus layout terms from the syntax tree."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

from tilesafe.frontend import ast, ir, walk
from tilesafe.frontend.ir_text import expr_text
from tilesafe.frontend.resolver.base import BOOL, CMP, FLOAT, INT
from tilesafe.frontend.span import Span


def infer_roles(kernel: ir.Kernel) -> ir.Kernel:
    """Give every parameter without a declared role the one its uses imply: written and
    read -> inout, written only -> out, otherwise in. This keeps files written before roles
    existed meaning what they meant (an output was whatever the body stored to); verify
    reports each inferred role (TS216), because an inferred role cannot catch a deleted
    store or a store into an input."""
    if all(t.role_declared for t in kernel.params):
        return kernel
    read, written = walk.tensor_usage(kernel)
    params = []
    for t in kernel.params:
        if not t.role_declared:
            role = (ir.ParamRole.IN if t.name not in written else
                    ir.ParamRole.INOUT if t.name in read else ir.ParamRole.OUT)
            t = replace(t, role=role)
        params.append(t)
    return replace(kernel, params=tuple(params))


def fold_ints(op: str, a: int, b: int) -> int:
    return {"+": a + b, "-": a - b, "*": a * b}.get(op) if op in "+-*" else (
        a // b if op == "/" else a % b)


def placeholder(span: Span, t: ir.ScalarType) -> ir.Expr:
    if t is FLOAT:
        return ir.FloatConst(span, FLOAT, 0.0)
    if t is BOOL:
        return ir.BinOp(span, BOOL, "==", ir.IntConst(span, INT, 0), ir.IntConst(span, INT, 0))
    return ir.IntConst(span, INT, 0)


def names_in(e: ast.Expr) -> Iterator[str]:
    if isinstance(e, ast.Name):
        yield e.name
    elif isinstance(e, ast.Binary):
        yield from names_in(e.lhs)
        yield from names_in(e.rhs)
    elif isinstance(e, ast.Unary):
        yield from names_in(e.operand)
    elif isinstance(e, ast.Call):
        for a in e.args:
            yield from names_in(a)


def is_affine(e: ir.Expr, local_affine=lambda uid: False, gather=None) -> bool:
    """Quasi-affine integer term: + - by anything affine, * by a constant, / % by a
    positive constant, min/max/abs of affine terms; leaves are constants, sizes, loop
    variables, builtins and immutable locals bound to affine terms. With `gather`, a load
    it accepts (a read of an index tensor) is a leaf too: the term is affine in the value
    read, which the provers treat as an unknown constrained by `requires`."""
    return why_not_affine(e, local_affine, gather) is None


def why_not_affine(e: ir.Expr, local_affine=None, gather=None) -> str | None:
    local_affine = local_affine or (lambda uid: True)
    if isinstance(e, ir.Load) and gather is not None and gather(e):
        return None
    if e.type is not INT:
        return f"'{brief(e)}' is not an integer"
    if isinstance(e, (ir.IntConst, ir.SizeVar, ir.LoopVar, ir.Builtin)):
        return None
    if isinstance(e, ir.LocalRef):
        if e.mutable:
            return f"'{e.name}' is a mutable variable"
        return None if local_affine(e.uid) else f"'{e.name}' is not bound to an affine term"
    if isinstance(e, ir.Load):
        return f"it reads memory ('{e.tensor}[...]')"
    if isinstance(e, ir.UnOp):
        return why_not_affine(e.operand, local_affine, gather)
    if isinstance(e, ir.Call):
        if e.func in ("min", "max", "abs"):
            for a in e.args:
                why = why_not_affine(a, local_affine, gather)
                if why:
                    return why
            return None
        return f"'{e.func}(...)' is not affine"
    if isinstance(e, ir.BinOp):
        for side in (e.lhs, e.rhs):
            why = why_not_affine(side, local_affine, gather)
            if why:
                return why
        if e.op == "*" and not (isinstance(e.lhs, ir.IntConst) or isinstance(e.rhs, ir.IntConst)):
            return f"'{brief(e)}' multiplies two non-constant terms"
        if e.op in "/%" and not isinstance(e.rhs, ir.IntConst):
            return f"'{brief(e)}' divides by a non-constant"
        return None
    return f"'{brief(e)}' is not affine"


def is_presburger(e: ir.Expr) -> bool:
    if isinstance(e, ir.BinOp) and e.op in ("&&", "||"):
        return is_presburger(e.lhs) and is_presburger(e.rhs)
    if isinstance(e, ir.UnOp) and e.op == "!":
        return is_presburger(e.operand)
    if isinstance(e, ir.BinOp) and e.op in CMP:
        return is_affine(e.lhs) and is_affine(e.rhs)
    return False


def brief(e: ir.Expr) -> str:
    return expr_text(e, brief=True)


def layout_term(node: ast.LayoutNode) -> ir.LayoutTerm:
    if isinstance(node, ast.CuteLayout):
        return ir.LayoutTerm("cute", (node.shape, node.stride))
    if isinstance(node, ast.SwizzledLayout):
        return ir.LayoutTerm("composed", (node.bits, node.base, node.shift, node.offset,
                                          layout_term(node.inner)))
    args = tuple(
        layout_term(a) if isinstance(a, ast.LayoutNode) else a
        for a in (node.args or ())
    )
    return ir.LayoutTerm(node.head, args)
