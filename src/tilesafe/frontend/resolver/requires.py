"""Resolving `requires` clauses (preconditions on index tensors) and the reads of index
tensors that gathers and scatters use as indices.

Why here: an index through a value read from memory (`x[ids[t], c]`) is not quasi-affine, so
no Presburger checker could bound it -- unless the value read is an *unknown* that the kernel
constrains. A `requires` clause says what the launch guarantees about an index tensor's
contents (bounds, a sentinel, injectivity, a permutation, sortedness, a segment table); the
provers treat each read of an index tensor as a fresh integer constrained by the clauses,
and the launcher checks the clauses on the data before anything runs
(semantics/requires_eval.py). Both only make sense for tensors the kernel cannot change, so
an index tensor is an `in` parameter of integer dtype, declared as such.
"""

from __future__ import annotations

from collections.abc import Iterator

from tilesafe.frontend import ast, ir
from tilesafe.frontend import diagnostics as dg
from tilesafe.frontend.resolver.base import BOOL, BUILTINS, INT, Loop, ResolverBase, SpecWrapped
from tilesafe.frontend.resolver.rules import is_affine, placeholder, why_not_affine
from tilesafe.frontend.span import Span

PREDICATES = {"injective": ir.RequireKind.INJECTIVE, "permutation": ir.RequireKind.PERMUTATION,
              "sorted": ir.RequireKind.SORTED}


def ast_names(e: ast.Expr) -> Iterator[str]:
    """Every plain name inside an expression, indices and call arguments included."""
    if isinstance(e, ast.Name):
        yield e.name
    elif isinstance(e, ast.Index):
        for i in e.indices:
            yield from ast_names(i)
    elif isinstance(e, ast.Binary):
        yield from ast_names(e.lhs)
        yield from ast_names(e.rhs)
    elif isinstance(e, ast.Unary):
        yield from ast_names(e.operand)
    elif isinstance(e, ast.Call):
        for a in e.args:
            yield from ast_names(a)


def direct_loads(e: ir.Expr) -> Iterator[ir.Load]:
    """The reads in `e` whose indices read nothing themselves (their range bounds the
    quantified variables of a clause)."""
    if isinstance(e, ir.Load):
        if not any(isinstance(x, ir.Load) for i in e.indices for x in _subexprs(i)):
            yield e
        for i in e.indices:
            yield from direct_loads(i)
    elif isinstance(e, ir.BinOp):
        yield from direct_loads(e.lhs)
        yield from direct_loads(e.rhs)
    elif isinstance(e, ir.UnOp):
        yield from direct_loads(e.operand)
    elif isinstance(e, ir.Call):
        for a in e.args:
            yield from direct_loads(a)


def _subexprs(e: ir.Expr) -> Iterator[ir.Expr]:
    yield e
    if isinstance(e, ir.Load):
        for i in e.indices:
            yield from _subexprs(i)
    elif isinstance(e, ir.BinOp):
        yield from _subexprs(e.lhs)
        yield from _subexprs(e.rhs)
    elif isinstance(e, ir.UnOp):
        yield from _subexprs(e.operand)
    elif isinstance(e, ir.Call):
        for a in e.args:
            yield from _subexprs(a)


class RequiresResolver(ResolverBase):
    # ---- index tensors in the body ---------------------------------------------------------

    def index_tensor(self, name: str) -> str | None:
        """Why `name` cannot be read as an index tensor (None: it can)."""
        t = self.tensors.get(name)
        if t is None:
            return f"'{name}' is not a global tensor"
        if t.dtype.is_float:
            return f"'{name}' holds {t.dtype.value}, not integers"
        if not t.role_declared or t.role is not ir.ParamRole.IN:
            return (f"'{name}' is not declared 'in' (an index tensor must not change during "
                    "the launch)")
        return None

    def index_read(self, load: ir.Load) -> bool:
        """A read usable inside a global index: an index tensor at quasi-affine indices (a
        read through a read is not, in a kernel body)."""
        return (load.space is ir.Space.GLOBAL and self.index_tensor(load.tensor) is None
                and all(is_affine(i, self.affine_local) for i in load.indices))

    def gather_local(self, uid: int) -> bool:
        """An immutable local usable in a global index: affine, or affine in index reads."""
        for scope in self.scopes:
            for entry in scope.values():
                if getattr(entry, "uid", None) == uid and not isinstance(entry, Loop):
                    return entry.affine or entry.gathered
        return False

    # ---- requires clauses ------------------------------------------------------------------

    def requires(self, c: ast.Requires) -> ir.Requires | None:
        before = len(self.diags)
        e = c.cond
        if isinstance(e, ast.Reduce) and e.func in PREDICATES:
            result = self.req_predicate(c, e)
        else:
            result = self.req_all(c)
        return result if len(self.diags) == before else None

    def req_error(self, message: str, span: Span, hint: str | None = None) -> None:
        self.error(dg.BAD_REQUIRES, message, span, hint)

    def req_all(self, c: ast.Requires) -> ir.Requires | None:
        free = [n for n in dict.fromkeys(ast_names(c.cond))
                if not self.taken(n) and n not in BUILTINS]
        with self.scope() as sc:
            loop_vars = []
            for n in free:
                uid = self.fresh()
                sc[n] = Loop(uid)
                loop_vars.append(ir.LoopVar(c.span, INT, n, uid))
            cond = self.req_expr(c.cond)
        if cond.type is not BOOL:
            self.req_error("a 'requires' clause must be a condition (or a predicate such as "
                           "injective(...))", c.cond.span)
            return None
        self.req_presburger(cond)
        self.req_bound_vars(loop_vars, cond, c.span)
        return ir.Requires(c.span, ir.RequireKind.ALL, tuple(loop_vars), cond=cond)

    def req_bound_vars(self, loop_vars: list[ir.LoopVar], cond: ir.Expr, span: Span) -> None:
        """Every quantified variable indexes some direct read: its range is where the reads
        are inside their tensors (an unbounded variable would quantify over all integers)."""
        bound = {x.uid for ld in direct_loads(cond) for i in ld.indices for x in _subexprs(i)
                 if isinstance(x, ir.LoopVar)}
        for v in loop_vars:
            if v.uid not in bound:
                self.req_error(f"'{v.name}' in a 'requires' clause indexes no index tensor, so "
                               "nothing bounds it", span, "a quantified variable ranges over "
                               "the indices of the index-tensor reads it appears in")

    def req_presburger(self, cond: ir.Expr) -> None:
        """Comparisons of terms affine in the quantified variables and the values read."""
        if isinstance(cond, ir.BinOp) and cond.op in ("&&", "||"):
            self.req_presburger(cond.lhs)
            self.req_presburger(cond.rhs)
        elif isinstance(cond, ir.UnOp) and cond.op == "!":
            self.req_presburger(cond.operand)
        elif isinstance(cond, ir.BinOp) and cond.type is BOOL:
            for side in (cond.lhs, cond.rhs):
                self.req_affine(side)
        else:
            self.req_error("a 'requires' condition is comparisons joined by && || !",
                           cond.span)

    def req_affine(self, e: ir.Expr) -> bool:
        why = why_not_affine(e, None, lambda ld: True)
        if why is not None:
            self.req_error(f"a 'requires' term must be quasi-affine in its variables and the "
                           f"values it reads: {why}", e.span)
            return False
        for ld in (x for x in _subexprs(e) if isinstance(x, ir.Load)):
            for i in ld.indices:
                why = why_not_affine(i, None, lambda ld: True)
                if why is not None:
                    self.req_error(f"an index in a 'requires' clause must be quasi-affine: "
                                   f"{why}", i.span)
                    return False
        return True

    def req_predicate(self, c: ast.Requires, e: ast.Reduce) -> ir.Requires | None:
        kind = PREDICATES[e.func]
        lo, hi = self.req_size_term(e.lo), self.req_size_term(e.hi)
        values = None
        if e.values is not None:
            if kind is ir.RequireKind.SORTED:
                self.req_error("sorted(...) takes no value range", e.values[0].span)
                return None
            values = (self.req_size_term(e.values[0]), self.req_size_term(e.values[1]))
        if self.taken(e.var) or self.lookup_local(e.var) is not None:
            self.req_error(f"variable '{e.var}' shadows another name", e.span)
            return None
        with self.scope() as sc:
            uid = self.fresh()
            sc[e.var] = Loop(uid)
            var = ir.LoopVar(e.span, INT, e.var, uid)
            body = self.req_expr(e.body)
        if body.type is not INT:
            self.req_error(f"{e.func}(...) speaks of an integer term of the index tensors",
                           e.body.span)
            return None
        if not self.req_affine(body):
            return None
        if not any(isinstance(x, ir.Load) for x in _subexprs(body)):
            self.req_error(f"{e.func}(...) reads no index tensor", e.body.span)
            return None
        vlo, vhi = values if values is not None else (None, None)
        if kind is ir.RequireKind.PERMUTATION and values is None:
            vlo = ir.IntConst(e.span, INT, 0)
            vhi = hi if isinstance(lo, ir.IntConst) and lo.value == 0 else self.e_Binary(
                ast.Binary(e.span, "-", SpecWrapped(hi), SpecWrapped(lo)))
        return ir.Requires(c.span, kind, (var,), lo=lo, hi=hi, value=body, vlo=vlo, vhi=vhi)

    def req_size_term(self, e: ast.Expr) -> ir.Expr:
        value = self.req_expr(e)
        if value.type is not INT or not is_affine(value):
            self.req_error("a range in a 'requires' predicate is quasi-affine in the sizes",
                           e.span)
            return placeholder(e.span, INT)
        return value

    def req_expr(self, e: ast.Expr) -> ir.Expr:
        """An expression of a clause: sizes, constants, its variables and reads of index
        tensors (through other reads too); nothing that exists only during the launch."""
        if isinstance(e, ast.Reduce):
            self.req_error(f"'{e.func}(...)' can only be a whole 'requires' clause "
                           "(injective, permutation, sorted)", e.span)
            return placeholder(e.span, INT)
        if isinstance(e, ast.Index):
            why = self.index_tensor(e.name)
            if why is not None:
                if e.name in self.tensors or e.name in self.buffers or not self.taken(e.name):
                    self.req_error(f"'requires' speaks of index tensors: {why}", e.span)
                else:
                    self.req_error(f"'{e.name}' is not a tensor", e.span)
                return placeholder(e.span, INT)
            t = self.tensors[e.name]
            if len(e.indices) != len(t.shape):
                self.error(dg.RANK_MISMATCH, f"'{e.name}' has rank {len(t.shape)} but "
                           f"{len(e.indices)} indices were given", e.span)
                return placeholder(e.span, INT)
            indices = tuple(self.req_expr(i) for i in e.indices)
            for i, src in zip(indices, e.indices, strict=True):
                self.require_int(i, src.span)
            return ir.Load(e.span, INT, e.name, ir.Space.GLOBAL, indices)
        if isinstance(e, ast.BlockIdx):
            self.req_error("'requires' speaks of the launch's data, not of a block", e.span)
            return placeholder(e.span, INT)
        if isinstance(e, ast.Name) and e.name in BUILTINS and self.lookup_local(e.name) is None:
            self.req_error(f"'requires' cannot use '{e.name}': it speaks of the launch's "
                           "data, not of a thread", e.span)
            return placeholder(e.span, INT)
        if isinstance(e, ast.Unary):
            return self.e_Unary(ast.Unary(e.span, e.op, SpecWrapped(self.req_expr(e.operand))))
        if isinstance(e, ast.Binary):
            return self.e_Binary(ast.Binary(e.span, e.op, SpecWrapped(self.req_expr(e.lhs)),
                                            SpecWrapped(self.req_expr(e.rhs))))
        if isinstance(e, ast.Call):
            if e.func not in ("min", "max", "abs"):
                self.req_error(f"'{e.func}(...)' has no meaning in a 'requires' clause",
                               e.span)
                return placeholder(e.span, INT)
            return self.e_Call(ast.Call(e.span, e.func,
                                        tuple(SpecWrapped(self.req_expr(a)) for a in e.args)))
        return self.expr(e)
