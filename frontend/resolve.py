"""Syntax tree -> typed IR: name resolution, type checking, constant folding, and the
affinity rules that keep every index a Presburger term.

Diagnostics are collected (not raised one by one) so a user sees every problem of a file
at once; an erroneous expression is replaced by a typed placeholder so checking goes on.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace

from tilesafe.frontend import ast, ir, walk
from tilesafe.frontend import diagnostics as dg
from tilesafe.frontend.diagnostics import Diagnostic, DiagnosticError
from tilesafe.frontend.ir_text import expr_text
from tilesafe.frontend.limits import MAX_BLOCK, MAX_SHARED_BYTES, MBARRIER_BYTES
from tilesafe.frontend.span import Span

INT, FLOAT, BOOL = ir.ScalarType.INT, ir.ScalarType.FLOAT, ir.ScalarType.BOOL
_BUILTINS = {"thread": ir.BuiltinKind.THREAD, "lane": ir.BuiltinKind.LANE,
             "warp_id": ir.BuiltinKind.WARP_ID}
_BLOCK_AXES = {"x": ir.BuiltinKind.BLOCK_X, "y": ir.BuiltinKind.BLOCK_Y,
               "z": ir.BuiltinKind.BLOCK_Z}
_FUNCS = {"min": 2, "max": 2, "abs": 1, "f32": 1, "i32": 1, "bytes": 1}
_DECLS = (ast.ConstDecl, ast.TensormapDecl, ast.SharedDecl, ast.MbarrierDecl)


def resolve(module: ast.Module) -> ir.Program:
    """Resolve every kernel of a parsed file; raises DiagnosticError listing all problems."""
    diags: list[Diagnostic] = []
    kernels: list[ir.Kernel] = []
    seen: set[str] = set()
    for kernel in module.kernels:
        if kernel.name in seen:
            diags.append(Diagnostic(dg.DUPLICATE_NAME, f"kernel '{kernel.name}' defined twice",
                                    kernel.span))
        seen.add(kernel.name)
        resolver = _KernelResolver(kernel)
        result = resolver.run()
        diags.extend(resolver.diags)
        if result is not None:
            kernels.append(result)
    if diags:
        raise DiagnosticError(diags)
    return ir.Program(module.path, tuple(kernels))


@dataclass(frozen=True)
class _Local:
    uid: int
    type: ir.ScalarType
    mutable: bool
    affine: bool  # an immutable INT local whose value is quasi-affine


@dataclass(frozen=True)
class _Loop:
    uid: int


@dataclass(frozen=True)
class _SpecWrapped:
    """An already-resolved spec operand passed back through the ordinary expression rules
    (so a spec gets the same typing and folding as the body)."""

    value: ir.Expr

    @property
    def span(self) -> Span:
        return self.value.span


class _KernelResolver:
    def __init__(self, kernel: ast.Kernel):
        self.k = kernel
        self.diags: list[Diagnostic] = []
        self.consts: dict[str, int] = {}
        self.sizes: list[str] = []
        self.tensors: dict[str, ir.GlobalTensor] = {}
        self.buffers: dict[str, ir.SharedBuffer] = {}
        self.tmaps: dict[str, ir.TensorMap] = {}
        self.barriers: dict[str, ir.Barrier] = {}
        self.scopes: list[dict[str, _Local | _Loop]] = []
        self.uid = 0
        self.role: ast.Role | None = None
        self.block = 0

    # ---- helpers ---------------------------------------------------------------------------

    def error(self, code: str, message: str, span: Span, hint: str | None = None) -> None:
        self.diags.append(Diagnostic(code, message, span, hint=hint))

    def fresh(self) -> int:
        self.uid += 1
        return self.uid

    def all_names(self) -> list[str]:
        names = list(self.consts) + self.sizes + list(self.tensors) + list(self.buffers)
        names += list(self.tmaps) + list(self.barriers) + list(_BUILTINS)
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
        return name in _BUILTINS or any(name in s for s in self.scopes)

    def declare_check(self, name: str, span: Span) -> bool:
        if self.taken(name):
            self.error(dg.DUPLICATE_NAME, f"'{name}' is already defined", span)
            return False
        return True

    @contextmanager
    def scope(self) -> Iterator[dict[str, _Local | _Loop]]:
        self.scopes.append({})
        try:
            yield self.scopes[-1]
        finally:
            self.scopes.pop()

    def lookup_local(self, name: str) -> _Local | _Loop | None:
        for scope in reversed(self.scopes):
            if name in scope:
                return scope[name]
        return None

    # ---- kernel ----------------------------------------------------------------------------

    def run(self) -> ir.Kernel | None:
        k = self.k
        top = k.body.stmts
        for stmt in top:  # constants first: shapes and the launch may use them
            if isinstance(stmt, ast.ConstDecl):
                self.const_decl(stmt)
        params = []
        for p in k.params:
            if self.taken(p.name) or any(q.name == p.name for q in params):
                self.error(dg.DUPLICATE_NAME, f"'{p.name}' is already defined", p.span)
                continue
            shape = tuple(self.size_expr(e, implicit=True) for e in p.shape)
            role = ir.ParamRole(p.role) if p.role is not None else ir.ParamRole.IN
            tensor = ir.GlobalTensor(p.span, p.name, ir.DType(p.dtype), shape, role,
                                     role_declared=p.role is not None)
            params.append(tensor)
            self.tensors[p.name] = tensor
        where = tuple(self.where_expr(e) for e in k.where)
        grid = tuple(self.size_expr(e, implicit=False) for e in k.grid)
        self.block = self.const_int(k.block_dim, "block size")
        if not 1 <= self.block <= MAX_BLOCK:
            self.error(dg.BAD_VALUE, f"block size {self.block} is not in 1..{MAX_BLOCK}",
                       k.block_dim.span)
            self.block = max(1, min(self.block, MAX_BLOCK))
        for stmt in top:
            if isinstance(stmt, ast.TensormapDecl):
                self.tensormap_decl(stmt)
            elif isinstance(stmt, ast.SharedDecl):
                self.shared_decl(stmt)
            elif isinstance(stmt, ast.MbarrierDecl):
                self.mbarrier_decl(stmt)
        self.check_shared_total(k)
        with self.scope():
            body = self.stmts(tuple(s for s in top if not isinstance(s, _DECLS)))
        ensures = tuple(e for e in (self.ensures(c) for c in k.ensures) if e is not None)
        if self.diags:
            return None
        kernel = ir.Kernel(
            k.span, k.name, tuple(self.sizes), tuple(params), where, grid, self.block,
            tuple(self.consts.items()), tuple(self.buffers.values()),
            tuple(self.tmaps.values()), tuple(self.barriers.values()), body, ensures,
        )
        kernel = _infer_roles(kernel)
        for c in kernel.ensures:  # a tensor without a declared role: known only now
            if not kernel.tensor(c.tensor).role.written:
                self.error(dg.BAD_SPEC, f"'ensures' specifies '{c.tensor}', which the kernel "
                           "never writes", c.span)
            for load in walk.loads(c.rhs):
                if kernel.tensor(load.tensor).role is ir.ParamRole.OUT:
                    self.error(dg.BAD_SPEC, f"'ensures' reads '{load.tensor}', an 'out' "
                               "tensor: its contents before the launch are undefined",
                               load.span, "read inputs only (an 'inout' tensor's value "
                               "before the launch is allowed)")
        return None if self.diags else kernel

    # ---- specifications --------------------------------------------------------------------

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
                sc[v] = _Loop(uid)
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
            if e.func not in ("sum", "sum_seq"):
                self.error(dg.BAD_SPEC, f"unknown reduction '{e.func}'", e.span,
                           "use sum(j in lo .. hi: e) (order free) or sum_seq (fixed order)")
                return _placeholder(e.span, FLOAT)
            lo, hi = self.spec_expr(e.lo), self.spec_expr(e.hi)
            for bound in (lo, hi):
                if bound.type is not INT or not _affine(bound):
                    self.error(dg.BAD_SPEC, "the bounds of a sum must be quasi-affine "
                               "integers in the sizes and index variables", e.span)
                    return _placeholder(e.span, FLOAT)
            if self.taken(e.var) or self.lookup_local(e.var) is not None:
                self.error(dg.BAD_SPEC, f"sum variable '{e.var}' shadows another name", e.span)
                return _placeholder(e.span, FLOAT)
            with self.scope() as sc:
                uid = self.fresh()
                sc[e.var] = _Loop(uid)
                body = self.spec_expr(e.body)
            if body.type is BOOL:
                self.error(dg.DTYPE_MISMATCH, "a sum adds numbers", e.span)
                return _placeholder(e.span, FLOAT)
            body = self.convert(body, FLOAT, e.body.span)
            return ir.Reduce(e.span, FLOAT, e.func == "sum_seq",
                             ir.LoopVar(e.span, INT, e.var, uid), lo, hi, body)
        if isinstance(e, ast.Index):
            if e.name in self.buffers:
                self.error(dg.BAD_SPEC, f"'ensures' cannot read shared buffer '{e.name}': "
                           "it does not outlive the launch", e.span)
                return _placeholder(e.span, FLOAT)
            space, dtype, rank = self.indexable(e.name, e.span)
            if space is None:
                return _placeholder(e.span, FLOAT)
            if len(e.indices) != rank:
                self.error(dg.RANK_MISMATCH, f"'{e.name}' has rank {rank} but "
                           f"{len(e.indices)} indices were given", e.span)
                return _placeholder(e.span, dtype.scalar)
            indices = tuple(self.spec_expr(i) for i in e.indices)
            for i, src in zip(indices, e.indices, strict=True):
                self.require_int(i, src.span)
            return ir.Load(e.span, dtype.scalar, e.name, space, indices)
        if isinstance(e, ast.BlockIdx):
            self.error(dg.BAD_SPEC, "'ensures' speaks of the result, not of a block",
                       e.span)
            return _placeholder(e.span, INT)
        if isinstance(e, ast.Name) and e.name in _BUILTINS and self.lookup_local(e.name) is None:
            self.error(dg.BAD_SPEC, f"'ensures' cannot use '{e.name}': it speaks of the "
                       "result, not of a thread", e.span)
            return _placeholder(e.span, INT)
        if isinstance(e, ast.Unary):
            return self.e_Unary(ast.Unary(e.span, e.op, _SpecWrapped(self.spec_expr(e.operand))))
        if isinstance(e, ast.Binary):
            return self.e_Binary(ast.Binary(e.span, e.op, _SpecWrapped(self.spec_expr(e.lhs)),
                                            _SpecWrapped(self.spec_expr(e.rhs))))
        if isinstance(e, ast.Call) and e.func != "bytes" and e.func in _FUNCS:
            return self.e_Call(ast.Call(e.span, e.func,
                                        tuple(_SpecWrapped(self.spec_expr(a)) for a in e.args)))
        return self.expr(e)

    def e_Reduce(self, e: ast.Reduce) -> ir.Expr:
        self.error(dg.BAD_SPEC, f"'{e.func}(v in lo .. hi: e)' is only allowed in 'ensures'",
                   e.span, "accumulate into a `var` with a `for` loop")
        return _placeholder(e.span, FLOAT)

    def e__SpecWrapped(self, e: _SpecWrapped) -> ir.Expr:
        return e.value

    def const_decl(self, d: ast.ConstDecl) -> None:
        if self.declare_check(d.name, d.span):
            self.consts[d.name] = self.const_int(d.value, f"const {d.name}")

    def const_int(self, e: ast.Expr, what: str) -> int:
        """Evaluate an expression that must be a compile-time integer."""
        value = self.expr(e)
        if isinstance(value, ir.IntConst):
            return value.value
        if value.type is INT:
            self.error(dg.NOT_CONSTANT, f"{what} must be a compile-time constant", e.span)
        else:
            self.error(dg.NOT_INTEGER, f"{what} must be an integer", e.span)
        return 1

    def size_expr(self, e: ast.Expr, implicit: bool) -> ir.Expr:
        """An affine expression over size parameters (tensor shapes, grid)."""
        if implicit:
            for name in _names_in(e):
                if not self.taken(name) and name not in self.sizes:
                    self.sizes.append(name)
        value = self.expr(e)
        self.require_affine(value, e.span, "a size expression")
        return value

    def where_expr(self, e: ast.Expr) -> ir.Expr:
        for name in _names_in(e):
            if not self.taken(name) and name not in self.sizes:
                self.sizes.append(name)
        value = self.expr(e)
        if value.type is not BOOL:
            self.error(dg.NOT_PRESBURGER, "a 'where' constraint must be a comparison", e.span)
        elif not _presburger(value):
            self.error(dg.NOT_PRESBURGER,
                       "a 'where' constraint must be Presburger: affine comparisons joined "
                       "by && || !, with * / % only by constants", e.span)
        return value

    # ---- declarations ----------------------------------------------------------------------

    def check_shared_total(self, k: ast.Kernel) -> None:
        """The buffers and mbarriers must fit a block's shared memory even before layouts,
        alignment and padding are counted (the layout checker proves the placed total,
        TS103). Past the hardware's 227 KiB every later stage would still enumerate the
        elements: a buffer of 2^31 rows made verify and run die of MemoryError."""
        need = sum(b.nbytes for b in self.buffers.values())
        need += sum(b.instances for b in self.barriers.values()) * MBARRIER_BYTES
        if need > MAX_SHARED_BYTES:
            decls = [d for d in k.body.stmts if isinstance(d, (ast.SharedDecl,
                                                                ast.MbarrierDecl))]
            biggest = max(decls, key=lambda d: self.decl_bytes(d), default=None)
            span = biggest.span if biggest is not None else k.span
            self.error(dg.BAD_VALUE, f"shared buffers and mbarriers need {need} bytes; a "
                       f"block's shared memory holds at most {MAX_SHARED_BYTES}", span)

    def decl_bytes(self, d: ast.SharedDecl | ast.MbarrierDecl) -> int:
        if isinstance(d, ast.SharedDecl):
            buf = self.buffers.get(d.name)
            return buf.nbytes if buf is not None and buf.span == d.span else 0
        bar = self.barriers.get(d.name)
        return bar.instances * MBARRIER_BYTES if bar is not None and bar.span == d.span else 0

    def tensormap_decl(self, d: ast.TensormapDecl) -> None:
        if not self.declare_check(d.name, d.span):
            return
        tensor = self.tensors.get(d.tensor)
        if tensor is None:
            self.unknown(d.tensor, d.span, "global tensor")
            return
        if d.box is None:
            self.error(dg.BAD_TENSORMAP, f"tensormap '{d.name}' needs a box [..]", d.span)
            return
        box = tuple(self.const_int(e, "a box extent") for e in d.box)
        if len(box) != len(tensor.shape):
            self.error(dg.RANK_MISMATCH,
                       f"box has {len(box)} dims but '{tensor.name}' has rank "
                       f"{len(tensor.shape)}", d.span)
        for extent, e in zip(box, d.box, strict=False):
            if extent < 1:
                self.error(dg.BAD_VALUE, f"box extent {extent} must be positive", e.span)
        self.tmaps[d.name] = ir.TensorMap(d.span, d.name, d.tensor, box, d.swizzle or "none",
                                          d.oob or "zero")

    def shared_decl(self, d: ast.SharedDecl) -> None:
        if not self.declare_check(d.name, d.span):
            return
        shape = tuple(self.const_int(e, "a shared-buffer extent") for e in d.shape)
        for extent, e in zip(shape, d.shape, strict=True):
            if extent < 1:
                self.error(dg.BAD_VALUE, f"extent {extent} must be positive", e.span)
        align = d.align if d.align is not None else 128
        if align < 1 or align & (align - 1):
            self.error(dg.BAD_VALUE, f"alignment {align} must be a power of two", d.span)
        layout = _layout_term(d.layout) if d.layout is not None else ir.LayoutTerm("row_major")
        self.buffers[d.name] = ir.SharedBuffer(d.span, d.name, ir.DType(d.dtype), shape,
                                               layout, align)

    def mbarrier_decl(self, d: ast.MbarrierDecl) -> None:
        if not self.declare_check(d.name, d.span):
            return
        length = self.const_int(d.length, "a barrier array length") if d.length else None
        if length is not None and length < 1:
            self.error(dg.BAD_VALUE, f"barrier array length {length} must be positive",
                       d.length.span)
        count = self.const_int(d.count, "an arrival count")
        if count < 1:
            self.error(dg.BAD_VALUE, f"arrival count {count} must be positive", d.count.span)
        guards: list[ir.BarrierGuard] = []
        refs = ((d.guards, d.guard_index),) + d.more_guards if d.guards is not None else ()
        for gname, gindex in refs:
            buf = self.buffers.get(gname)
            if buf is None:
                self.unknown(gname, d.span, "shared buffer")
            elif any(g.buffer == gname for g in guards):
                self.error(dg.DUPLICATE_NAME, f"'{gname}' is guarded twice by '{d.name}'", d.span)
            elif gindex is not None:
                if length is None:
                    self.error(dg.WRONG_KIND, "'guards buf[i]' needs a barrier array", d.span)
                elif buf.shape[0] != length:
                    self.error(dg.RANK_MISMATCH,
                               f"barrier array has {length} elements but '{buf.name}' has "
                               f"{buf.shape[0]} stages", d.span)
                guards.append(ir.BarrierGuard(gname, True))
            else:
                guards.append(ir.BarrierGuard(gname, False))
        self.barriers[d.name] = ir.Barrier(d.span, d.name, length, count,
                                           guards[0] if guards else None, tuple(guards[1:]))

    # ---- statements ------------------------------------------------------------------------

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
        affine = value.type is INT and _affine(value, self.affine_local)
        self.scopes[-1][s.name] = _Local(uid, value.type, False, affine)
        return ir.Let(s.span, uid, s.name, value)

    def s_VarDecl(self, s: ast.VarDecl) -> ir.Stmt | None:
        dtype = ir.DType(s.dtype)
        value = self.convert(self.expr(s.value), dtype.scalar, s.value.span)
        if not self.declare_check(s.name, s.span):
            return None
        uid = self.fresh()
        self.scopes[-1][s.name] = _Local(uid, dtype.scalar, True, False)
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
        if isinstance(local, _Loop) or not local.mutable:
            self.error(dg.WRONG_KIND, f"'{s.name}' is immutable", s.span,
                       "only 'var' locals can be assigned")
            return None
        value = self.convert(value, local.type, s.value.span)
        op = "=" if s.op == "=" else s.op[0]
        return ir.Assign(s.span, local.uid, s.name, op, value)

    def s_Store(self, s: ast.Store) -> ir.Stmt | None:
        space, dtype, rank = self.indexable(s.target, s.span)
        if space is None:
            return None
        indices = self.indices(s.indices, rank, s.target, s.span)
        value = self.convert(self.expr(s.value), dtype.scalar, s.value.span)
        return ir.Store(s.span, s.target, space, indices, value)

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
            sc[s.var] = _Loop(uid)
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
        if ts.kind == "warp":
            rng = ir.ThreadRange(32 * lo, 32 * lo + 32)
        else:
            hi = self.const_int(ts.hi, "a role bound")
            rng = ir.ThreadRange(32 * lo, 32 * hi) if ts.kind == "warps" else ir.ThreadRange(
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

    def s_Init(self, s: ast.Init) -> ir.Stmt | None:
        ref = self.bar_ref(s.barrier, allow_whole=True)
        return ir.Init(s.span, ref) if ref else None

    def s_Fence(self, s: ast.Fence) -> ir.Stmt:
        return ir.Fence(s.span, ir.FenceKind(s.kind))

    def s_Sync(self, s: ast.Sync) -> ir.Stmt:
        if self.role is not None:
            # Legal syntax, and a real bug pattern: the checkers report the deadlock.
            pass
        return ir.Sync(s.span)

    def s_Wait(self, s: ast.Wait) -> ir.Stmt | None:
        ref = self.bar_ref(s.barrier)
        parity = self.expr(s.parity)
        self.require_affine(parity, s.parity.span, "a wait parity")
        return ir.Wait(s.span, ref, parity) if ref else None

    def s_Arrive(self, s: ast.Arrive) -> ir.Stmt | None:
        ref = self.bar_ref(s.barrier)
        tx = None
        if s.tx_bytes is not None:
            tx = self.expr(s.tx_bytes)
            self.require_affine(tx, s.tx_bytes.span, "a byte count")
        return ir.Arrive(s.span, ref, ir.ArriveMode(s.mode), tx) if ref else None

    def s_ExpectTx(self, s: ast.ExpectTx) -> ir.Stmt | None:
        ref = self.bar_ref(s.barrier)
        nbytes = self.expr(s.nbytes)
        self.require_affine(nbytes, s.nbytes.span, "a byte count")
        return ir.ExpectTx(s.span, ref, nbytes) if ref else None

    def s_TmaLoad(self, s: ast.TmaLoad) -> ir.Stmt | None:
        tmap, coords = self.tma_target(s.tensormap, s.coords, s.span)
        dst = self.buf_slice(s.dst)
        bar = self.bar_ref(s.barrier)
        if tmap is None or dst is None or bar is None:
            return None
        nbytes = self.match_box(tmap, dst, s.span)
        return ir.TmaLoad(s.span, dst, tmap.name, coords, bar, nbytes)

    def s_TmaStore(self, s: ast.TmaStore) -> ir.Stmt | None:
        tmap, coords = self.tma_target(s.tensormap, s.coords, s.span)
        src = self.buf_slice(s.src)
        if tmap is None or src is None:
            return None
        nbytes = self.match_box(tmap, src, s.span)
        return ir.TmaStore(s.span, tmap.name, coords, src, nbytes)

    def s_CommitGroup(self, s: ast.CommitGroup) -> ir.Stmt:
        return ir.CommitGroup(s.span)

    def s_NamedBar(self, s: ast.NamedBar) -> ir.Stmt:
        what = "bar_arrive" if s.arrive else "bar_sync"
        bar_id = self.const_int(s.bar_id, f"a {what} barrier id")
        count = self.const_int(s.count, f"a {what} thread count")
        if not 0 <= bar_id < ir.NAMED_BARRIERS:
            self.error(dg.BAD_VALUE, f"barrier id {bar_id} outside 0 .. "
                       f"{ir.NAMED_BARRIERS - 1} (a block has {ir.NAMED_BARRIERS} named "
                       "barriers)", s.bar_id.span)
            bar_id = 0
        if count < 1:
            self.error(dg.BAD_VALUE, f"thread count {count} must be positive", s.count.span)
            count = 32
        return ir.NamedBar(s.span, s.arrive, bar_id, count)

    def s_WaitGroup(self, s: ast.WaitGroup) -> ir.Stmt:
        return ir.WaitGroup(s.span, s.pending, s.read)

    # ---- references ------------------------------------------------------------------------

    def bar_ref(self, ref: ast.BarRef, allow_whole: bool = False) -> ir.BarrierRef | None:
        bar = self.barriers.get(ref.name)
        if bar is None:
            if self.taken(ref.name):
                self.error(dg.WRONG_KIND, f"'{ref.name}' is not an mbarrier", ref.span)
            else:
                self.unknown(ref.name, ref.span, "mbarrier")
            return None
        index = None
        if ref.index is not None:
            if bar.length is None:
                self.error(dg.RANK_MISMATCH, f"mbarrier '{bar.name}' is not an array", ref.span)
                return None
            index = self.expr(ref.index)
            self.require_affine(index, ref.index.span, "a barrier index")
        elif bar.length is not None and not allow_whole:
            self.error(dg.RANK_MISMATCH, f"mbarrier array '{bar.name}' needs an index",
                       ref.span, f"write {bar.name}[i]")
            return None
        return ir.BarrierRef(ref.span, ref.name, index)

    def buf_slice(self, ref: ast.BufRef) -> ir.BufferSlice | None:
        buf = self.buffers.get(ref.name)
        if buf is None:
            if self.taken(ref.name):
                self.error(dg.WRONG_KIND, f"'{ref.name}' is not a shared buffer", ref.span)
            else:
                self.unknown(ref.name, ref.span, "shared buffer")
            return None
        if len(ref.indices) > len(buf.shape):
            self.error(dg.RANK_MISMATCH, f"'{buf.name}' has rank {len(buf.shape)} but "
                       f"{len(ref.indices)} indices were given", ref.span)
            return None
        prefix = []
        for e in ref.indices:
            value = self.expr(e)
            self.require_affine(value, e.span, "a buffer index")
            prefix.append(value)
        return ir.BufferSlice(ref.span, ref.name, tuple(prefix))

    def tma_target(self, name: str, coords: tuple[ast.Expr, ...], span: Span):
        tmap = self.tmaps.get(name)
        values = []
        for e in coords:
            value = self.expr(e)
            self.require_affine(value, e.span, "a TMA coordinate")
            values.append(value)
        if tmap is None:
            if self.taken(name):
                self.error(dg.WRONG_KIND, f"'{name}' is not a tensormap", span)
            else:
                self.unknown(name, span, "tensormap")
            return None, ()
        if len(coords) != len(tmap.box):
            self.error(dg.RANK_MISMATCH, f"tensormap '{name}' takes {len(tmap.box)} "
                       f"coordinates, got {len(coords)}", span)
            return None, ()
        return tmap, tuple(values)

    def match_box(self, tmap: ir.TensorMap, sl: ir.BufferSlice, span: Span) -> int:
        buf = self.buffers[sl.buffer]
        tile = buf.shape[len(sl.prefix):]
        tensor = self.tensors[tmap.tensor]
        if tuple(tile) != tuple(tmap.box):
            self.error(dg.BAD_TENSORMAP,
                       f"'{buf.name}' slice has shape {list(tile)} but tensormap "
                       f"'{tmap.name}' moves boxes of {list(tmap.box)}", span)
        if tensor.dtype is not buf.dtype:
            self.error(dg.DTYPE_MISMATCH,
                       f"tensormap '{tmap.name}' moves {tensor.dtype.value} but "
                       f"'{buf.name}' holds {buf.dtype.value}", span)
        n = 1
        for d in tmap.box:
            n *= d
        return n * tensor.dtype.nbytes

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

    def indices(self, exprs, rank: int, name: str, span: Span) -> tuple[ir.Expr, ...]:
        if len(exprs) != rank:
            self.error(dg.RANK_MISMATCH,
                       f"'{name}' has rank {rank} but {len(exprs)} indices were given", span)
        out = []
        for e in exprs:
            value = self.expr(e)
            self.require_affine(value, e.span, "an index")
            out.append(value)
        return tuple(out)

    # ---- type rules ------------------------------------------------------------------------

    def require_int(self, value: ir.Expr, span: Span) -> None:
        if value.type is not INT:
            self.error(dg.NOT_INTEGER, f"expected an integer, found a {value.type.value}",
                       span)

    def require_affine(self, value: ir.Expr, span: Span, what: str) -> None:
        if value.type is not INT:
            self.error(dg.NOT_INTEGER, f"{what} must be an integer, found a "
                       f"{value.type.value}", span)
        elif not _affine(value, self.affine_local):
            self.error(dg.NOT_AFFINE,
                       f"{what} must be quasi-affine (Presburger): "
                       f"{_why_not_affine(value, self.affine_local)}",
                       span, "multiply, divide and take remainders only by constants")

    def affine_local(self, uid: int) -> bool:
        for scope in self.scopes:
            for entry in scope.values():
                if isinstance(entry, _Local) and entry.uid == uid:
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
        return _placeholder(span, want)

    # ---- expressions -----------------------------------------------------------------------

    def expr(self, e: ast.Expr) -> ir.Expr:
        return getattr(self, "e_" + type(e).__name__)(e)

    def e_IntLit(self, e: ast.IntLit) -> ir.Expr:
        return ir.IntConst(e.span, INT, e.value)

    def e_FloatLit(self, e: ast.FloatLit) -> ir.Expr:
        return ir.FloatConst(e.span, FLOAT, float(e.text))

    def e_BlockIdx(self, e: ast.BlockIdx) -> ir.Expr:
        kind = _BLOCK_AXES.get(e.axis)
        if kind is None:
            self.error(dg.UNKNOWN_NAME, f"unknown block axis '{e.axis}'", e.span,
                       "use block.x, block.y or block.z")
            return _placeholder(e.span, INT)
        if "xyz".index(e.axis) >= len(self.k.grid):
            self.error(dg.UNKNOWN_NAME, f"block.{e.axis} used but the grid has "
                       f"{len(self.k.grid)} dimension(s)", e.span)
        return ir.Builtin(e.span, INT, kind)

    def e_Name(self, e: ast.Name) -> ir.Expr:
        local = self.lookup_local(e.name)
        if isinstance(local, _Loop):
            return ir.LoopVar(e.span, INT, e.name, local.uid)
        if isinstance(local, _Local):
            return ir.LocalRef(e.span, local.type, e.name, local.uid, local.mutable)
        if e.name in self.consts:
            return ir.IntConst(e.span, INT, self.consts[e.name])
        if e.name in self.sizes:
            return ir.SizeVar(e.span, INT, e.name)
        if e.name in _BUILTINS:
            return ir.Builtin(e.span, INT, _BUILTINS[e.name])
        if self.taken(e.name):
            self.error(dg.WRONG_KIND, f"'{e.name}' is not a value", e.span,
                       "index tensors and buffers, e.g. t[i, j]")
        else:
            self.unknown(e.name, e.span)
        return _placeholder(e.span, INT)

    def e_Index(self, e: ast.Index) -> ir.Expr:
        space, dtype, rank = self.indexable(e.name, e.span)
        if space is None:
            return _placeholder(e.span, FLOAT)
        indices = self.indices(e.indices, rank, e.name, e.span)
        return ir.Load(e.span, dtype.scalar, e.name, space, indices)

    def e_Unary(self, e: ast.Unary) -> ir.Expr:
        operand = self.expr(e.operand)
        if e.op == "!":
            if operand.type is not BOOL:
                self.error(dg.DTYPE_MISMATCH, "'!' needs a condition", e.span)
            return ir.UnOp(e.span, BOOL, "!", operand)
        if operand.type is BOOL:
            self.error(dg.DTYPE_MISMATCH, "'-' needs a number", e.span)
            return _placeholder(e.span, INT)
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
            return _placeholder(e.span, BOOL if op in _CMP else INT)
        if op in _CMP:
            return ir.BinOp(e.span, BOOL, op, lhs, rhs)
        if lhs.type is FLOAT or rhs.type is FLOAT:
            if op == "%":
                self.error(dg.DTYPE_MISMATCH, "'%' needs integers", e.span)
                return _placeholder(e.span, FLOAT)
            return ir.BinOp(e.span, FLOAT, op, lhs, rhs)
        if isinstance(lhs, ir.IntConst) and isinstance(rhs, ir.IntConst):
            if op in "/%" and rhs.value == 0:
                self.error(dg.BAD_VALUE, "division by zero", e.span)
                return _placeholder(e.span, INT)
            return ir.IntConst(e.span, INT, _fold(op, lhs.value, rhs.value))
        if op in "/%" and isinstance(rhs, ir.IntConst) and rhs.value <= 0:
            self.error(dg.BAD_VALUE, f"'{op}' by {rhs.value}: divisors must be positive",
                       e.span)
            return _placeholder(e.span, INT)
        return ir.BinOp(e.span, INT, op, lhs, rhs)

    def e_Call(self, e: ast.Call) -> ir.Expr:
        arity = _FUNCS.get(e.func)
        if arity is None:
            close = difflib.get_close_matches(e.func, list(_FUNCS), n=1)
            self.error(dg.BAD_CALL, f"unknown function '{e.func}'", e.span,
                       f"did you mean '{close[0]}'?" if close else
                       "functions: " + ", ".join(sorted(_FUNCS)))
            return _placeholder(e.span, INT)
        if len(e.args) != arity:
            self.error(dg.BAD_CALL, f"'{e.func}' takes {arity} argument(s), got "
                       f"{len(e.args)}", e.span)
            return _placeholder(e.span, INT)
        if e.func == "bytes":
            return self.bytes_of(e)
        args = tuple(self.expr(a) for a in e.args)
        if any(a.type is BOOL for a in args):
            self.error(dg.DTYPE_MISMATCH, f"'{e.func}' needs numbers", e.span)
            return _placeholder(e.span, INT)
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
            return _placeholder(e.span, INT)
        sl = self.buf_slice(ast.BufRef(arg.span, name, prefix))
        if sl is None:
            return _placeholder(e.span, INT)
        buf = self.buffers[name]
        n = buf.dtype.nbytes
        for d in buf.shape[len(prefix):]:
            n *= d
        return ir.IntConst(e.span, INT, n)


_CMP = ("==", "!=", "<", "<=", ">", ">=")


def _infer_roles(kernel: ir.Kernel) -> ir.Kernel:
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


def _fold(op: str, a: int, b: int) -> int:
    return {"+": a + b, "-": a - b, "*": a * b}.get(op) if op in "+-*" else (
        a // b if op == "/" else a % b)


def _placeholder(span: Span, t: ir.ScalarType) -> ir.Expr:
    if t is FLOAT:
        return ir.FloatConst(span, FLOAT, 0.0)
    if t is BOOL:
        return ir.BinOp(span, BOOL, "==", ir.IntConst(span, INT, 0), ir.IntConst(span, INT, 0))
    return ir.IntConst(span, INT, 0)


def _names_in(e: ast.Expr) -> Iterator[str]:
    if isinstance(e, ast.Name):
        yield e.name
    elif isinstance(e, ast.Binary):
        yield from _names_in(e.lhs)
        yield from _names_in(e.rhs)
    elif isinstance(e, ast.Unary):
        yield from _names_in(e.operand)
    elif isinstance(e, ast.Call):
        for a in e.args:
            yield from _names_in(a)


def _affine(e: ir.Expr, local_affine=lambda uid: False) -> bool:
    """Quasi-affine integer term: + - by anything affine, * by a constant, / % by a
    positive constant, min/max/abs of affine terms; leaves are constants, sizes, loop
    variables, builtins and immutable locals bound to affine terms."""
    return _why_not_affine(e, local_affine) is None


def _why_not_affine(e: ir.Expr, local_affine=None) -> str | None:
    local_affine = local_affine or (lambda uid: True)
    if e.type is not INT:
        return f"'{_brief(e)}' is not an integer"
    if isinstance(e, (ir.IntConst, ir.SizeVar, ir.LoopVar, ir.Builtin)):
        return None
    if isinstance(e, ir.LocalRef):
        if e.mutable:
            return f"'{e.name}' is a mutable variable"
        return None if local_affine(e.uid) else f"'{e.name}' is not bound to an affine term"
    if isinstance(e, ir.Load):
        return f"it reads memory ('{e.tensor}[...]')"
    if isinstance(e, ir.UnOp):
        return _why_not_affine(e.operand, local_affine)
    if isinstance(e, ir.Call):
        if e.func in ("min", "max", "abs"):
            for a in e.args:
                why = _why_not_affine(a, local_affine)
                if why:
                    return why
            return None
        return f"'{e.func}(...)' is not affine"
    if isinstance(e, ir.BinOp):
        for side in (e.lhs, e.rhs):
            why = _why_not_affine(side, local_affine)
            if why:
                return why
        if e.op == "*" and not (isinstance(e.lhs, ir.IntConst) or isinstance(e.rhs, ir.IntConst)):
            return f"'{_brief(e)}' multiplies two non-constant terms"
        if e.op in "/%" and not isinstance(e.rhs, ir.IntConst):
            return f"'{_brief(e)}' divides by a non-constant"
        return None
    return f"'{_brief(e)}' is not affine"


def _presburger(e: ir.Expr) -> bool:
    if isinstance(e, ir.BinOp) and e.op in ("&&", "||"):
        return _presburger(e.lhs) and _presburger(e.rhs)
    if isinstance(e, ir.UnOp) and e.op == "!":
        return _presburger(e.operand)
    if isinstance(e, ir.BinOp) and e.op in _CMP:
        return _affine(e.lhs) and _affine(e.rhs)
    return False


def _brief(e: ir.Expr) -> str:
    return expr_text(e, brief=True)


def _layout_term(node: ast.LayoutNode) -> ir.LayoutTerm:
    if isinstance(node, ast.CuteLayout):
        return ir.LayoutTerm("cute", (node.shape, node.stride))
    if isinstance(node, ast.SwizzledLayout):
        return ir.LayoutTerm("composed", (node.bits, node.base, node.shift, node.offset,
                                          _layout_term(node.inner)))
    args = tuple(
        _layout_term(a) if isinstance(a, ast.LayoutNode) else a
        for a in (node.args or ())
    )
    return ir.LayoutTerm(node.head, args)
