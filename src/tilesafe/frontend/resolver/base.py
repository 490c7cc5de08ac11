"""The resolver's shared state and bookkeeping: names in scope, fresh uids, diagnostics.

Why a base class: the resolver is one pass over a kernel, but its rules fall in groups --
declarations, statements, expressions and their typing, specifications -- each a mixin of
its own module (frontend/resolver/*.py) over this state, so each group reads at once.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from tilesafe.frontend import ast, ir
from tilesafe.frontend import diagnostics as dg
from tilesafe.frontend.diagnostics import Diagnostic
from tilesafe.frontend.span import Span
from tilesafe.frontend.target import DEFAULT, Target

INT, FLOAT, BOOL = ir.ScalarType.INT, ir.ScalarType.FLOAT, ir.ScalarType.BOOL
BUILTINS: dict[str, ir.BuiltinKind | None] = {
    "thread": ir.BuiltinKind.THREAD, "lane": ir.BuiltinKind.LANE,
    "warp_id": ir.BuiltinKind.WARP_ID,
    "cta_rank": None,  # the CTA's rank in its cluster: resolved to block indices (cluster.py)
}
BLOCK_AXES = {"x": ir.BuiltinKind.BLOCK_X, "y": ir.BuiltinKind.BLOCK_Y,
              "z": ir.BuiltinKind.BLOCK_Z}
FUNCS = {"min": 2, "max": 2, "abs": 1, "f32": 1, "i32": 1, "bytes": 1, "row": 2, "col": 2}
CMP = ("==", "!=", "<", "<=", ">", ">=")
DECLS = (ast.ConstDecl, ast.TensormapDecl, ast.SharedDecl, ast.MbarrierDecl,
         ast.FragmentDecl)


@dataclass(frozen=True)
class Local:
    uid: int
    type: ir.ScalarType
    mutable: bool
    affine: bool  # an immutable INT local whose value is quasi-affine
    # an immutable INT local affine in reads of index tensors (`let r = ids[t]`): usable in
    # the index of a global tensor (a gather or scatter), nowhere else
    gathered: bool = False


@dataclass(frozen=True)
class Loop:
    uid: int


@dataclass(frozen=True)
class SpecWrapped:
    """An already-resolved spec operand passed back through the ordinary expression rules
    (so a spec gets the same typing and folding as the body)."""

    value: ir.Expr

    @property
    def span(self) -> Span:
        return self.value.span


class ResolverBase:
    def __init__(self, kernel: ast.Kernel, target: Target = DEFAULT):
        self.k = kernel
        self.target = target  # warp size and limits (frontend/target.py)
        self.diags: list[Diagnostic] = []
        self.consts: dict[str, int] = {}
        self.sizes: list[str] = []
        self.tensors: dict[str, ir.GlobalTensor] = {}
        self.buffers: dict[str, ir.SharedBuffer] = {}
        self.tmaps: dict[str, ir.TensorMap] = {}
        self.barriers: dict[str, ir.Barrier] = {}
        self.fragments: dict[str, ir.Fragment] = {}
        self.scopes: list[dict[str, Local | Loop]] = []
        self.uid = 0
        self.role: ast.Role | None = None
        self.block = 0
        self.cluster: tuple[int, int, int] | None = None

    def error(self, code: str, message: str, span: Span, hint: str | None = None) -> None:
        self.diags.append(Diagnostic(code, message, span, hint=hint))

    def fresh(self) -> int:
        self.uid += 1
        return self.uid

    def all_names(self) -> list[str]:
        names = list(self.consts) + self.sizes + list(self.tensors) + list(self.buffers)
        names += list(self.tmaps) + list(self.barriers) + list(self.fragments) + list(BUILTINS)
        for scope in self.scopes:
            names += list(scope)
        return names

    def unknown(self, name: str, span: Span, what: str = "name") -> None:
        close = difflib.get_close_matches(name, self.all_names(), n=1)
        hint = f"did you mean '{close[0]}'?" if close else None
        self.error(dg.UNKNOWN_NAME, f"unknown {what} '{name}'", span, hint)

    def taken(self, name: str) -> bool:
        if name in self.consts or name in self.sizes or name in self.tensors:
            return True
        if name in self.buffers or name in self.tmaps or name in self.barriers:
            return True
        if name in self.fragments:
            return True
        return name in BUILTINS or any(name in s for s in self.scopes)

    def declare_check(self, name: str, span: Span) -> bool:
        if self.taken(name):
            self.error(dg.DUPLICATE_NAME, f"'{name}' is already defined", span)
            return False
        return True

    @contextmanager
    def scope(self) -> Iterator[dict[str, Local | Loop]]:
        self.scopes.append({})
        try:
            yield self.scopes[-1]
        finally:
            self.scopes.pop()

    def lookup_local(self, name: str) -> Local | Loop | None:
        for scope in reversed(self.scopes):
            if name in scope:
                return scope[name]
        return None
