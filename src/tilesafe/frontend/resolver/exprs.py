"""Resolving expressions and their types: names, indexing, operators (with constant folding),
calls, and the conversions and affinity the language requires."""

from __future__ import annotations

import difflib

from tilesafe.frontend import ast, ir, walk
from tilesafe.frontend import diagnostics as dg
from tilesafe.frontend.resolver.base import (
    BLOCK_AXES,
    BOOL,
    BUILTINS,
    CMP,
    FLOAT,
    FUNCS,
    INT,
    Local,
    Loop,
    ResolverBase,
)
from tilesafe.frontend.resolver.rules import fold_ints, is_affine, placeholder, why_not_affine
from tilesafe.frontend.span import Span


class ExprResolver(ResolverBase):
    def require_int(self, value: ir.Expr, span: Span) -> None:
        if value.type is not INT:
            self.error(dg.NOT_INTEGER, f"expected an integer, found a {value.type.value}",
                       span)

    def require_affine(self, value: ir.Expr, span: Span, what: str,
                       gather_ok: bool = False) -> None:
        """`gather_ok`: a global tensor's index, which may also be affine in reads of index
        tensors (a gather or scatter, docs/language.md section 13)."""
        if value.type is not INT:
            self.error(dg.NOT_INTEGER, f"{what} must be an integer, found a "
                       f"{value.type.value}", span)
            return
        local = self.gather_local if gather_ok else self.affine_local
        gather = self.index_read if gather_ok else None
        if is_affine(value, local, gather):
            return
        hint = "multiply, divide and take remainders only by constants"
        if not gather_ok and is_affine(value, self.gather_local, self.index_read):
            hint = ("a value read from an index tensor may index a global tensor only (a "
                    "gather or scatter), not " + what.removeprefix("a ").removeprefix("an "))
        elif gather_ok:
            bad = next((ld for ld in walk.loads(value) if ld.space is ir.Space.GLOBAL
                        and self.index_tensor(ld.tensor) is not None), None)
            if bad is not None:
                hint = f"an index may read an index tensor: {self.index_tensor(bad.tensor)}"
            elif any(not self.index_read(ld) for ld in walk.loads(value)
                     if ld.space is ir.Space.GLOBAL):
                hint = "an index tensor is read at quasi-affine indices (not through a read)"
        self.error(dg.NOT_AFFINE,
                   f"{what} must be quasi-affine (Presburger): "
                   f"{why_not_affine(value, local, gather)}", span, hint)

    def affine_local(self, uid: int) -> bool:
        for scope in self.scopes:
            for entry in scope.values():
                if isinstance(entry, Local) and entry.uid == uid:
                    return entry.affine
        return False

    def convert(self, value: ir.Expr, want: ir.ScalarType, span: Span) -> ir.Expr:
        if value.type is want:
            return value
        if want is FLOAT and value.type is INT:
            return ir.Call(value.span, FLOAT, "f32", (value,))
        self.error(dg.DTYPE_MISMATCH, f"expected an {want.value} value, found a "
                   f"{value.type.value}", span,
                   "convert explicitly with i32(...)" if want is INT else None)
        return placeholder(span, want)

    # ---- expressions -----------------------------------------------------------------------

    def expr(self, e: ast.Expr) -> ir.Expr:
        return getattr(self, "e_" + type(e).__name__)(e)

    def e_IntLit(self, e: ast.IntLit) -> ir.Expr:
        return ir.IntConst(e.span, INT, e.value)

    def e_FloatLit(self, e: ast.FloatLit) -> ir.Expr:
        return ir.FloatConst(e.span, FLOAT, float(e.text))

    def e_BlockIdx(self, e: ast.BlockIdx) -> ir.Expr:
        kind = BLOCK_AXES.get(e.axis)
        if kind is None:
            self.error(dg.UNKNOWN_NAME, f"unknown block axis '{e.axis}'", e.span,
                       "use block.x, block.y or block.z")
            return placeholder(e.span, INT)
        if "xyz".index(e.axis) >= len(self.k.grid):
            self.error(dg.UNKNOWN_NAME, f"block.{e.axis} used but the grid has "
                       f"{len(self.k.grid)} dimension(s)", e.span)
        return ir.Builtin(e.span, INT, kind)

    def e_Name(self, e: ast.Name) -> ir.Expr:
        local = self.lookup_local(e.name)
        if isinstance(local, Loop):
            return ir.LoopVar(e.span, INT, e.name, local.uid)
        if isinstance(local, Local):
            return ir.LocalRef(e.span, local.type, e.name, local.uid, local.mutable)
        if e.name in self.consts:
            return ir.IntConst(e.span, INT, self.consts[e.name])
        if e.name in self.sizes:
            return ir.SizeVar(e.span, INT, e.name)
        if e.name in BUILTINS:
            kind = BUILTINS[e.name]
            return self.cta_rank(e.span) if kind is None else self.builtin(e.span, kind)
        if self.taken(e.name):
            self.error(dg.WRONG_KIND, f"'{e.name}' is not a value", e.span,
                       "index tensors and buffers, e.g. t[i, j]")
        else:
            self.unknown(e.name, e.span)
        return placeholder(e.span, INT)

    def builtin(self, span: Span, kind: ir.BuiltinKind) -> ir.Expr:
        """`thread`, `lane`, `warp_id`. On a target whose warp is not 32 lanes (a 64-lane
        wavefront) `lane` and `warp_id` are written as what they mean there, `thread % W` and
        `thread / W`, so every later stage reads the target's meaning without knowing it."""
        w = self.target.warp
        if w == 32 or kind is ir.BuiltinKind.THREAD:
            return ir.Builtin(span, INT, kind)
        op = "%" if kind is ir.BuiltinKind.LANE else "/"
        return ir.BinOp(span, INT, op, ir.Builtin(span, INT, ir.BuiltinKind.THREAD),
                        ir.IntConst(span, INT, w))

    def e_Index(self, e: ast.Index) -> ir.Expr:
        if e.name in self.fragments and e.cta is None:
            return self.frag_load(e)
        space, dtype, rank = self.indexable(e.name, e.span)
        if space is None:
            return placeholder(e.span, FLOAT)
        indices = self.indices(e.indices, rank, e.name, e.span, space is ir.Space.GLOBAL)
        cta = self.remote_buffer(e.cta, e.name, space)
        return ir.Load(e.span, dtype.scalar, e.name, space, indices, cta)

    def remote_buffer(self, cta: ast.Expr | None, name: str,
                      space: ir.Space | None) -> ir.Expr | None:
        """The peer CTA of `name@r[...]`: only shared buffers live in a CTA."""
        if cta is None:
            return None
        if space is not ir.Space.SHARED:
            self.error(dg.BAD_CLUSTER, f"'{name}@...' names a peer CTA's copy, but only "
                       "shared buffers belong to a CTA", cta.span)
            return None
        return self.cta_ref(cta, f"'{name}@...' (a peer CTA's shared memory)")

    def e_Unary(self, e: ast.Unary) -> ir.Expr:
        operand = self.expr(e.operand)
        if e.op == "!":
            if operand.type is not BOOL:
                self.error(dg.DTYPE_MISMATCH, "'!' needs a condition", e.span)
            return ir.UnOp(e.span, BOOL, "!", operand)
        if operand.type is BOOL:
            self.error(dg.DTYPE_MISMATCH, "'-' needs a number", e.span)
            return placeholder(e.span, INT)
        if isinstance(operand, ir.IntConst):
            return ir.IntConst(e.span, INT, -operand.value)
        if isinstance(operand, ir.FloatConst):
            return ir.FloatConst(e.span, FLOAT, -operand.value)
        return ir.UnOp(e.span, operand.type, "-", operand)

    def e_Binary(self, e: ast.Binary) -> ir.Expr:
        lhs, rhs = self.expr(e.lhs), self.expr(e.rhs)
        op = e.op
        if op in ("&&", "||"):
            if lhs.type is not BOOL or rhs.type is not BOOL:
                self.error(dg.DTYPE_MISMATCH, f"'{op}' joins conditions", e.span)
            return ir.BinOp(e.span, BOOL, op, lhs, rhs)
        if lhs.type is BOOL or rhs.type is BOOL:
            self.error(dg.DTYPE_MISMATCH, f"'{op}' needs numbers, not conditions", e.span)
            return placeholder(e.span, BOOL if op in CMP else INT)
        if op in CMP:
            return ir.BinOp(e.span, BOOL, op, lhs, rhs)
        if lhs.type is FLOAT or rhs.type is FLOAT:
            if op == "%":
                self.error(dg.DTYPE_MISMATCH, "'%' needs integers", e.span)
                return placeholder(e.span, FLOAT)
            return ir.BinOp(e.span, FLOAT, op, lhs, rhs)
        if isinstance(lhs, ir.IntConst) and isinstance(rhs, ir.IntConst):
            if op in "/%" and rhs.value == 0:
                self.error(dg.BAD_VALUE, "division by zero", e.span)
                return placeholder(e.span, INT)
            return ir.IntConst(e.span, INT, fold_ints(op, lhs.value, rhs.value))
        if op in "/%" and isinstance(rhs, ir.IntConst) and rhs.value <= 0:
            self.error(dg.BAD_VALUE, f"'{op}' by {rhs.value}: divisors must be positive",
                       e.span)
            return placeholder(e.span, INT)
        return ir.BinOp(e.span, INT, op, lhs, rhs)

    def e_Call(self, e: ast.Call) -> ir.Expr:
        arity = FUNCS.get(e.func)
        if arity is None:
            close = difflib.get_close_matches(e.func, list(FUNCS), n=1)
            self.error(dg.BAD_CALL, f"unknown function '{e.func}'", e.span,
                       f"did you mean '{close[0]}'?" if close else
                       "functions: " + ", ".join(sorted(FUNCS)))
            return placeholder(e.span, INT)
        if len(e.args) != arity:
            self.error(dg.BAD_CALL, f"'{e.func}' takes {arity} argument(s), got "
                       f"{len(e.args)}", e.span)
            return placeholder(e.span, INT)
        if e.func == "bytes":
            return self.bytes_of(e)
        if e.func in ("row", "col"):
            return self.frag_coord(e)
        args = tuple(self.expr(a) for a in e.args)
        if any(a.type is BOOL for a in args):
            self.error(dg.DTYPE_MISMATCH, f"'{e.func}' needs numbers", e.span)
            return placeholder(e.span, INT)
        if e.func == "f32":
            return ir.Call(e.span, FLOAT, "f32", args)
        if e.func == "i32":
            return args[0] if args[0].type is INT else ir.Call(e.span, INT, "i32", args)
        rtype = FLOAT if any(a.type is FLOAT for a in args) else INT
        if rtype is INT and all(isinstance(a, ir.IntConst) for a in args):
            values = [a.value for a in args]
            folded = {"min": min, "max": max, "abs": lambda v: abs(v)}[e.func](*values)
            return ir.IntConst(e.span, INT, folded)
        return ir.Call(e.span, rtype, e.func, args)

    def bytes_of(self, e: ast.Call) -> ir.Expr:
        arg = e.args[0]
        if isinstance(arg, ast.Name):
            name, prefix = arg.name, ()
        elif isinstance(arg, ast.Index):
            name, prefix = arg.name, arg.indices
        else:
            self.error(dg.BAD_CALL, "bytes(...) takes a shared buffer or a slice of one", e.span)
            return placeholder(e.span, INT)
        sl = self.buf_slice(ast.BufRef(arg.span, name, prefix))
        if sl is None:
            return placeholder(e.span, INT)
        buf = self.buffers[name]
        n = buf.dtype.nbytes
        for d in buf.shape[len(prefix):]:
            n *= d
        return ir.IntConst(e.span, INT, n)
