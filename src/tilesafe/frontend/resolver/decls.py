"""Resolving declarations: constants, sizes, `where`, tensor maps, shared buffers, mbarriers,
and the block's shared-memory total."""

from __future__ import annotations

from tilesafe.frontend import ast, ir
from tilesafe.frontend import diagnostics as dg
from tilesafe.frontend.limits import MAX_SHARED_BYTES, MBARRIER_BYTES
from tilesafe.frontend.resolver.base import BOOL, INT, ResolverBase
from tilesafe.frontend.resolver.rules import is_presburger, layout_term, names_in


class DeclResolver(ResolverBase):
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
            for name in names_in(e):
                if not self.taken(name) and name not in self.sizes:
                    self.sizes.append(name)
        value = self.expr(e)
        self.require_affine(value, e.span, "a size expression")
        return value

    def where_expr(self, e: ast.Expr) -> ir.Expr:
        for name in names_in(e):
            if not self.taken(name) and name not in self.sizes:
                self.sizes.append(name)
        value = self.expr(e)
        if value.type is not BOOL:
            self.error(dg.NOT_PRESBURGER, "a 'where' constraint must be a comparison", e.span)
        elif not is_presburger(value):
            self.error(dg.NOT_PRESBURGER,
                       "a 'where' constraint must be Presburger: affine comparisons joined "
                       "by && || !, with * / % only by constants", e.span)
        return value

    def specialize_expr(self, e: ast.Expr) -> ir.Expr:
        """A fact of a `specialize` clause: Presburger over sizes the kernel already has (a
        variant restricts the launches; it cannot introduce a size)."""
        for name in names_in(e):
            if not self.taken(name) and name not in self.sizes:
                self.error(dg.UNKNOWN_NAME, f"'specialize' names '{name}', which is not a size "
                           "of the kernel", e.span,
                           f"sizes: {', '.join(self.sizes) or 'none'}")
                return ir.IntConst(e.span, BOOL, 1)
        value = self.expr(e)
        if value.type is not BOOL:
            self.error(dg.NOT_PRESBURGER, "a 'specialize' fact must be a comparison", e.span)
        elif not is_presburger(value):
            self.error(dg.NOT_PRESBURGER,
                       "a 'specialize' fact must be Presburger: affine comparisons joined "
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
        most = min(MAX_SHARED_BYTES, self.target.max_shared)
        if need > most:
            decls = [d for d in k.body.stmts if isinstance(d, (ast.SharedDecl,
                                                                ast.MbarrierDecl))]
            biggest = max(decls, key=lambda d: self.decl_bytes(d), default=None)
            span = biggest.span if biggest is not None else k.span
            self.error(dg.BAD_VALUE, f"shared buffers and mbarriers need {need} bytes; a "
                       f"block's shared memory holds at most {most} on {self.target.name}",
                       span)

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
        layout = layout_term(d.layout) if d.layout is not None else ir.LayoutTerm("row_major")
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
