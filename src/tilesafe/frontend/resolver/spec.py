"""Resolving `ensures` clauses: index variables over the output's shape, sums, and what a
specification may not mention (it speaks of the result, not of how it is computed)."""

from __future__ import annotations

from tilesafe.frontend import ast, ir
from tilesafe.frontend import diagnostics as dg
from tilesafe.frontend.resolver.base import (
    BOOL,
    BUILTINS,
    FLOAT,
    FUNCS,
    INT,
    Loop,
    ResolverBase,
    SpecWrapped,
)
from tilesafe.frontend.resolver.rules import is_affine, placeholder


class SpecResolver(ResolverBase):
    def ensures(self, c: ast.Ensures) -> ir.Ensures | None:
        """`ensures out[i, j] == rhs`. The index variables are bound over out's shape; rhs
        may use them, sizes, constants, loads of global tensors (indices need not be affine:
        a gather through an index tensor is a spec, not an access the checkers bound) and
        `sum`/`sum_seq`; not shared memory, thread or block indices, or locals, which have no
        meaning after the launch."""
        if c.modifier is not None and c.modifier != "tested":
            self.error(dg.BAD_SPEC, f"unknown 'ensures' modifier '{c.modifier}'",
                       c.modifier_span or c.span, "the only modifier is 'tested' (accept a "
                       "clause checked by testing only)")
            return None
        tensor = self.tensors.get(c.tensor)
        if tensor is None:
            if self.taken(c.tensor):
                self.error(dg.BAD_SPEC, f"'ensures' names '{c.tensor}', which is not a global "
                           "tensor", c.span)
            else:
                self.unknown(c.tensor, c.span, "tensor")
            return None
        if tensor.role_declared and not tensor.role.written:
            self.error(dg.BAD_SPEC, f"'ensures' specifies '{c.tensor}', an 'in' tensor the "
                       "kernel never writes", c.span, "specify an 'out' or 'inout' tensor")
            return None
        if len(c.index_vars) != len(tensor.shape):
            self.error(dg.RANK_MISMATCH, f"'{c.tensor}' has rank {len(tensor.shape)} but "
                       f"'ensures' binds {len(c.index_vars)} index variable(s)", c.span)
            return None
        if len(set(c.index_vars)) != len(c.index_vars):
            self.error(dg.BAD_SPEC, "the index variables of 'ensures' must be distinct", c.span)
            return None
        for v in c.index_vars:
            if self.taken(v):
                self.error(dg.BAD_SPEC, f"index variable '{v}' shadows a declared name",
                           c.span)
                return None
        before = len(self.diags)
        with self.scope() as sc:
            loop_vars = []
            for v in c.index_vars:
                uid = self.fresh()
                sc[v] = Loop(uid)
                loop_vars.append(ir.LoopVar(c.span, INT, v, uid))
            rhs = self.spec_expr(c.rhs)
        if len(self.diags) > before:
            return None
        if rhs.type is BOOL:
            self.error(dg.DTYPE_MISMATCH, "the right-hand side of 'ensures' must be a number",
                       c.rhs.span)
            return None
        return ir.Ensures(c.span, c.tensor, tuple(loop_vars), rhs, c.modifier == "tested")

    def spec_expr(self, e: ast.Expr) -> ir.Expr:
        """An expression of a spec: the ordinary rules, minus what has no meaning after the
        launch, plus sums and non-affine (gather) indices."""
        if isinstance(e, ast.Reduce):
            if e.values is not None and e.func in ("sum", "sum_seq"):
                self.error(dg.BAD_SPEC, f"'{e.func}' takes no value range", e.values[0].span)
                return placeholder(e.span, FLOAT)
            if e.func not in ("sum", "sum_seq"):
                self.error(dg.BAD_SPEC, f"unknown reduction '{e.func}'", e.span,
                           "use sum(j in lo .. hi: e) (order free) or sum_seq (fixed order)")
                return placeholder(e.span, FLOAT)
            lo, hi = self.spec_expr(e.lo), self.spec_expr(e.hi)
            for bound in (lo, hi):
                if bound.type is not INT or not is_affine(bound):
                    self.error(dg.BAD_SPEC, "the bounds of a sum must be quasi-affine "
                               "integers in the sizes and index variables", e.span)
                    return placeholder(e.span, FLOAT)
            if self.taken(e.var) or self.lookup_local(e.var) is not None:
                self.error(dg.BAD_SPEC, f"sum variable '{e.var}' shadows another name", e.span)
                return placeholder(e.span, FLOAT)
            with self.scope() as sc:
                uid = self.fresh()
                sc[e.var] = Loop(uid)
                body = self.spec_expr(e.body)
            if body.type is BOOL:
                self.error(dg.DTYPE_MISMATCH, "a sum adds numbers", e.span)
                return placeholder(e.span, FLOAT)
            body = self.convert(body, FLOAT, e.body.span)
            return ir.Reduce(e.span, FLOAT, e.func == "sum_seq",
                             ir.LoopVar(e.span, INT, e.var, uid), lo, hi, body)
        if isinstance(e, ast.Index):
            if e.name in self.buffers:
                self.error(dg.BAD_SPEC, f"'ensures' cannot read shared buffer '{e.name}': "
                           "it does not outlive the launch", e.span)
                return placeholder(e.span, FLOAT)
            space, dtype, rank = self.indexable(e.name, e.span)
            if space is None:
                return placeholder(e.span, FLOAT)
            if len(e.indices) != rank:
                self.error(dg.RANK_MISMATCH, f"'{e.name}' has rank {rank} but "
                           f"{len(e.indices)} indices were given", e.span)
                return placeholder(e.span, dtype.scalar)
            indices = tuple(self.spec_expr(i) for i in e.indices)
            for i, src in zip(indices, e.indices, strict=True):
                self.require_int(i, src.span)
            return ir.Load(e.span, dtype.scalar, e.name, space, indices)
        if isinstance(e, ast.BlockIdx):
            self.error(dg.BAD_SPEC, "'ensures' speaks of the result, not of a block",
                       e.span)
            return placeholder(e.span, INT)
        if isinstance(e, ast.Name) and e.name in BUILTINS and self.lookup_local(e.name) is None:
            self.error(dg.BAD_SPEC, f"'ensures' cannot use '{e.name}': it speaks of the "
                       "result, not of a thread", e.span)
            return placeholder(e.span, INT)
        if isinstance(e, ast.Unary):
            return self.e_Unary(ast.Unary(e.span, e.op, SpecWrapped(self.spec_expr(e.operand))))
        if isinstance(e, ast.Binary):
            return self.e_Binary(ast.Binary(e.span, e.op, SpecWrapped(self.spec_expr(e.lhs)),
                                            SpecWrapped(self.spec_expr(e.rhs))))
        if isinstance(e, ast.Call) and e.func != "bytes" and e.func in FUNCS:
            return self.e_Call(ast.Call(e.span, e.func,
                                        tuple(SpecWrapped(self.spec_expr(a)) for a in e.args)))
        return self.expr(e)

    def e_Reduce(self, e: ast.Reduce) -> ir.Expr:
        self.error(dg.BAD_SPEC, f"'{e.func}(v in lo .. hi: e)' is only allowed in 'ensures'",
                   e.span, "accumulate into a `var` with a `for` loop")
        return placeholder(e.span, FLOAT)

    def e_SpecWrapped(self, e: SpecWrapped) -> ir.Expr:
        return e.value
