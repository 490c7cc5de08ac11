"""Resolving statements, and the references they make: barrier elements, buffer slices,
TMA targets (with their boxes)."""

from __future__ import annotations

from tilesafe.frontend import ast, ir
from tilesafe.frontend import diagnostics as dg
from tilesafe.frontend.resolver.base import BOOL, INT, Local, Loop, ResolverBase
from tilesafe.frontend.resolver.rules import is_affine
from tilesafe.frontend.span import Span


class StmtResolver(ResolverBase):
    def stmts(self, stmts: tuple[ast.Stmt, ...]) -> tuple[ir.Stmt, ...]:
        out = []
        for s in stmts:
            result = self.stmt(s)
            if result is not None:
                out.append(result)
        return tuple(out)

    def block_stmts(self, block: ast.Block) -> tuple[ir.Stmt, ...]:
        with self.scope():
            return self.stmts(block.stmts)

    def stmt(self, s: ast.Stmt) -> ir.Stmt | None:
        method = getattr(self, "s_" + type(s).__name__)
        return method(s)

    def _misplaced_decl(self, s: ast.Stmt) -> None:
        self.error(dg.MISPLACED, "declarations belong at the top level of the kernel body",
                   s.span)
        # Declare it anyway, so that its uses do not cascade into "unknown name" errors.
        declare = {ast.ConstDecl: self.const_decl, ast.TensormapDecl: self.tensormap_decl,
                   ast.SharedDecl: self.shared_decl, ast.MbarrierDecl: self.mbarrier_decl}
        declare[type(s)](s)

    s_ConstDecl = s_TensormapDecl = s_SharedDecl = s_MbarrierDecl = _misplaced_decl

    def s_Let(self, s: ast.Let) -> ir.Stmt | None:
        value = self.expr(s.value)
        if value.type is BOOL:
            self.error(dg.DTYPE_MISMATCH, "a 'let' holds a number, not a condition", s.span)
        if not self.declare_check(s.name, s.span):
            return None
        uid = self.fresh()
        affine = value.type is INT and is_affine(value, self.affine_local)
        gathered = value.type is INT and is_affine(value, self.gather_local, self.index_read)
        self.scopes[-1][s.name] = Local(uid, value.type, False, affine, gathered)
        return ir.Let(s.span, uid, s.name, value)

    def s_VarDecl(self, s: ast.VarDecl) -> ir.Stmt | None:
        dtype = ir.DType(s.dtype)
        value = self.convert(self.expr(s.value), dtype.scalar, s.value.span)
        if not self.declare_check(s.name, s.span):
            return None
        uid = self.fresh()
        self.scopes[-1][s.name] = Local(uid, dtype.scalar, True, False)
        return ir.VarDecl(s.span, uid, s.name, dtype, value)

    def s_Assign(self, s: ast.Assign) -> ir.Stmt | None:
        local = self.lookup_local(s.name)
        value = self.expr(s.value)
        if local is None:
            if self.taken(s.name):
                self.error(dg.WRONG_KIND, f"'{s.name}' is not a mutable variable", s.span,
                           "declare it with 'var NAME: TYPE = VALUE'")
            else:
                self.unknown(s.name, s.span, "variable")
            return None
        if isinstance(local, Loop) or not local.mutable:
            self.error(dg.WRONG_KIND, f"'{s.name}' is immutable", s.span,
                       "only 'var' locals can be assigned")
            return None
        value = self.convert(value, local.type, s.value.span)
        op = "=" if s.op == "=" else s.op[0]
        return ir.Assign(s.span, local.uid, s.name, op, value)

    def s_Store(self, s: ast.Store) -> ir.Stmt | None:
        if s.target in self.fragments and s.cta is None:
            return self.frag_store(s)
        space, dtype, rank = self.indexable(s.target, s.span)
        if space is None:
            return None
        indices = self.indices(s.indices, rank, s.target, s.span, space is ir.Space.GLOBAL)
        value = self.convert(self.expr(s.value), dtype.scalar, s.value.span)
        cta = self.remote_buffer(s.cta, s.target, space)
        return ir.Store(s.span, s.target, space, indices, value, cta)

    def s_For(self, s: ast.For) -> ir.Stmt | None:
        lo = self.expr(s.lo)
        hi = self.expr(s.hi)
        self.require_affine(lo, s.lo.span, "a loop bound")
        self.require_affine(hi, s.hi.span, "a loop bound")
        step = self.const_int(s.step, "a loop step") if s.step is not None else 1
        if step < 1:
            self.error(dg.BAD_VALUE, f"loop step {step} must be positive", s.step.span)
            step = 1
        if not self.declare_check(s.var, s.span):
            return None
        uid = self.fresh()
        with self.scope() as sc:
            sc[s.var] = Loop(uid)
            body = self.stmts(s.body.stmts)
        return ir.For(s.span, ir.LoopVar(s.span, INT, s.var, uid), lo, hi, step, body)

    def s_If(self, s: ast.If) -> ir.Stmt | None:
        cond = self.expr(s.cond)
        if cond.type is not BOOL:
            self.error(dg.DTYPE_MISMATCH, "an 'if' condition must be a comparison", s.cond.span)
        then = self.block_stmts(s.then)
        if s.orelse is None:
            orelse: tuple[ir.Stmt, ...] = ()
        elif isinstance(s.orelse, ast.Block):
            orelse = self.block_stmts(s.orelse)
        else:
            with self.scope():
                nested = self.stmt(s.orelse)
            orelse = (nested,) if nested is not None else ()
        return ir.If(s.span, cond, then, orelse)

    def s_Role(self, s: ast.Role) -> ir.Stmt | None:
        if self.role is not None:
            self.error(dg.MISPLACED, f"role '{s.name}' is inside role '{self.role.name}'",
                       s.span)
            return None
        ts = s.threads
        lo = self.const_int(ts.lo, "a role bound")
        w = self.target.warp  # `warp N` is the target's warp (or wavefront) N
        if ts.kind == "warp":
            rng = ir.ThreadRange(w * lo, w * lo + w)
        else:
            hi = self.const_int(ts.hi, "a role bound")
            rng = ir.ThreadRange(w * lo, w * hi) if ts.kind == "warps" else ir.ThreadRange(
                lo, hi)
        if rng.lo < 0 or rng.hi > self.block or rng.lo >= rng.hi:
            self.error(dg.BAD_THREADS,
                       f"role '{s.name}' covers threads {rng.lo}..{rng.hi} but the block has "
                       f"threads 0..{self.block}", ts.span)
        self.role = s
        try:
            body = self.block_stmts(s.body)
        finally:
            self.role = None
        return ir.Role(s.span, s.name, rng, s.elect_one, body)

    # ---- references ------------------------------------------------------------------------

    def indexable(self, name: str, span: Span):
        if name in self.tensors:
            t = self.tensors[name]
            return ir.Space.GLOBAL, t.dtype, len(t.shape)
        if name in self.buffers:
            b = self.buffers[name]
            return ir.Space.SHARED, b.dtype, len(b.shape)
        if self.taken(name):
            self.error(dg.WRONG_KIND, f"'{name}' is not a tensor or shared buffer", span)
        else:
            self.unknown(name, span, "tensor")
        return None, None, 0

    def indices(self, exprs, rank: int, name: str, span: Span,
                gather_ok: bool = False) -> tuple[ir.Expr, ...]:
        if len(exprs) != rank:
            self.error(dg.RANK_MISMATCH,
                       f"'{name}' has rank {rank} but {len(exprs)} indices were given", span)
        out = []
        for e in exprs:
            value = self.expr(e)
            self.require_affine(value, e.span, "an index", gather_ok)
            out.append(value)
        return tuple(out)
