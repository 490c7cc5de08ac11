"""Shape-specialised variants of a kernel: the design's partial evaluation, as an IR pass.

A kernel may declare `specialize F1, F2` clauses (docs/jit.md). Each clause is one variant:
the kernel with its facts added to `where`, then simplified --

  * a size-only integer term that the facts make constant (`N / 64` under `N == 512`, the
    grid `(M + 63) / 64` under `M <= 64`) becomes that constant;
  * a guard that holds at every instance where it runs (`row < M` once `M % 64 == 0`) is
    removed (its `then` branch stays), one that holds at none leaves only its `else`; in
    a chain `a && b && c`, each conjunct that always holds is dropped.

Why the variant is then proved and compiled on its own (tilesafe.jit does both): the
rewrite is exact by construction -- every decision is an ISL question answered for every
launch and every statement instance (semantics/expr/specialize_facts.py), and a question ISL
cannot pose is answered "leave it" -- but a proof of the variant, not of the rewrite, is
what a "proved" label may rest on.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from tilesafe.frontend import ir
from tilesafe.semantics.expr import evaluate


@dataclass(frozen=True)
class Variant:
    """One specialisation: the clause's facts and the simplified kernel proved on its own.
    `empty`: no launch satisfies `where` and the facts together (never selected)."""

    index: int
    facts: tuple[ir.Expr, ...]
    kernel: ir.Kernel
    folded: int = 0  # size terms replaced by their constant value
    guards_removed: int = 0  # conditions (or conjuncts) that always held, dropped
    branches_removed: int = 0  # `if`s whose condition never held: only `else` kept
    empty: bool = False

    def describe(self) -> str:
        from tilesafe.frontend.ir_text import expr_text

        return ", ".join(expr_text(f, brief=True) for f in self.facts)

    def holds(self, sizes: Mapping[str, int]) -> bool:
        """Do the facts hold at these sizes? (`where` itself is checked by the caller.)"""
        return not self.empty and all(bool(evaluate.eval_sizes(f, dict(sizes)))
                                      for f in self.facts)


def variants(kernel: ir.Kernel) -> tuple[Variant, ...]:
    """One Variant per `specialize` clause, in the order a call tries them."""
    return tuple(specialize(kernel, facts, i) for i, facts in enumerate(kernel.specializations))


def specialize(kernel: ir.Kernel, facts: tuple[ir.Expr, ...], index: int = 0) -> Variant:
    """The kernel with `facts` added to `where`, simplified (see the module docstring)."""
    from tilesafe.semantics.expr.specialize_facts import SizeFacts

    k = dataclasses.replace(kernel, where=kernel.where + tuple(facts), specializations=())
    oracle = SizeFacts(k)
    if oracle.empty:
        return Variant(index, tuple(facts), k, empty=True)
    rw = _Rewriter(oracle)
    body = rw.stmts(k.body, _Scope())
    grid = tuple(rw.expr(g) for g in k.grid)
    ensures = tuple(dataclasses.replace(c, rhs=rw.expr(c.rhs)) for c in k.ensures)
    out = dataclasses.replace(k, body=body, grid=grid, ensures=ensures)
    return Variant(index, tuple(facts), out, rw.folded, rw.guards_removed, rw.branches_removed)


@dataclass(frozen=True)
class _Scope:
    loops: tuple[ir.For, ...] = ()
    lets: Mapping[int, ir.Expr] = field(default_factory=dict)
    role: ir.Role | None = None
    guards: tuple[tuple[ir.Expr, bool], ...] = ()

    def instance(self) -> Any:
        from tilesafe.semantics.expr.specialize_facts import InstanceScope

        return InstanceScope(self.loops, self.lets, self.role, self.guards)


def _size_only(e: ir.Expr) -> bool:
    if isinstance(e, (ir.SizeVar, ir.IntConst)):
        return True
    if isinstance(e, ir.BinOp):
        return _size_only(e.lhs) and _size_only(e.rhs)
    if isinstance(e, ir.UnOp):
        return _size_only(e.operand)
    if isinstance(e, ir.Call):
        return e.func in ("min", "max", "abs") and all(_size_only(a) for a in e.args)
    return False


class _Rewriter:
    """The rewrite itself; counts what it did so tests and `k.variants` can show it."""

    def __init__(self, oracle: Any) -> None:
        self.oracle = oracle
        self.folded = 0
        self.guards_removed = 0
        self.branches_removed = 0

    # ---- expressions: size-only integer terms that are constants now ------------------------

    def expr(self, e: ir.Expr) -> ir.Expr:
        if isinstance(e, ir.IntConst):
            return e
        if e.type is ir.ScalarType.INT and _size_only(e):
            value = self.oracle.constant(e)
            if value is not None:
                self.folded += 1
                return ir.IntConst(e.span, ir.ScalarType.INT, value)
        if isinstance(e, ir.BinOp):
            return dataclasses.replace(e, lhs=self.expr(e.lhs), rhs=self.expr(e.rhs))
        if isinstance(e, ir.UnOp):
            return dataclasses.replace(e, operand=self.expr(e.operand))
        if isinstance(e, ir.Call):
            return dataclasses.replace(e, args=tuple(self.expr(a) for a in e.args))
        if isinstance(e, ir.Load):
            return dataclasses.replace(e, indices=tuple(self.expr(i) for i in e.indices))
        if isinstance(e, ir.Reduce):
            return dataclasses.replace(e, lo=self.expr(e.lo), hi=self.expr(e.hi),
                                       body=self.expr(e.body))
        if isinstance(e, ir.FragLoad):
            return dataclasses.replace(e, reg=self.expr(e.reg))
        return e

    def _node(self, value: Any) -> Any:
        """Every expression inside a non-statement record (barrier refs, slices, tiles)."""
        if isinstance(value, ir.Expr):
            return self.expr(value)
        if isinstance(value, tuple):
            return tuple(self._node(v) for v in value)
        if dataclasses.is_dataclass(value) and not isinstance(value, (type, ir.Stmt)):
            return dataclasses.replace(value, **{f.name: self._node(getattr(value, f.name))
                                                 for f in dataclasses.fields(value)})
        return value

    # ---- statements ---------------------------------------------------------------------

    def stmts(self, stmts: tuple[ir.Stmt, ...], scope: _Scope) -> tuple[ir.Stmt, ...]:
        out: list[ir.Stmt] = []
        for s in stmts:
            out.extend(self.stmt(s, scope))
            if isinstance(s, ir.Let) and s.value.type is ir.ScalarType.INT:
                scope = dataclasses.replace(scope, lets={**scope.lets, s.uid: s.value})
        return tuple(out)

    def stmt(self, s: ir.Stmt, scope: _Scope) -> tuple[ir.Stmt, ...]:
        if isinstance(s, ir.For):
            inner = dataclasses.replace(scope, loops=scope.loops + (s,))
            return (dataclasses.replace(s, lo=self.expr(s.lo), hi=self.expr(s.hi),
                                        body=self.stmts(s.body, inner)),)
        if isinstance(s, ir.Role):
            inner = dataclasses.replace(scope, role=s)
            return (dataclasses.replace(s, body=self.stmts(s.body, inner)),)
        if isinstance(s, ir.If):
            return self.if_stmt(s, scope)
        changes = {f.name: self._node(getattr(s, f.name)) for f in dataclasses.fields(s)
                   if f.name != "span"}
        return (dataclasses.replace(s, **changes),)

    def if_stmt(self, s: ir.If, scope: _Scope) -> tuple[ir.Stmt, ...]:
        kept: list[ir.Expr] = []
        verdict: bool | None = True
        for conjunct in _conjuncts(s.cond):
            answer = self.oracle.guard(conjunct, scope.instance())
            if answer is True:
                self.guards_removed += 1
                continue
            if answer is False:
                verdict = False
                break
            kept.append(conjunct)
            verdict = None
        if verdict is False:
            self.branches_removed += 1
            return self.stmts(s.orelse, scope)
        if verdict is True:  # every conjunct always holds
            return self.stmts(s.then, scope)
        cond = self.expr(_conjoin(kept, s.cond))
        then_scope = dataclasses.replace(scope, guards=scope.guards + ((s.cond, True),))
        else_scope = dataclasses.replace(scope, guards=scope.guards + ((s.cond, False),))
        return (dataclasses.replace(s, cond=cond, then=self.stmts(s.then, then_scope),
                                    orelse=self.stmts(s.orelse, else_scope)),)


def _conjuncts(e: ir.Expr) -> list[ir.Expr]:
    if isinstance(e, ir.BinOp) and e.op == "&&":
        return _conjuncts(e.lhs) + _conjuncts(e.rhs)
    return [e]


def _conjoin(parts: list[ir.Expr], original: ir.Expr) -> ir.Expr:
    """`a && b && ...` of the kept conjuncts (the original node when nothing was dropped)."""
    if len(parts) == len(_conjuncts(original)):
        return original
    out = parts[0]
    for p in parts[1:]:
        out = ir.BinOp(original.span, ir.ScalarType.BOOL, "&&", out, p)
    return out
