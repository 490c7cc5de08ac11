"""Resolving the tensor-core constructs: `fragment` declarations, `wgmma` and its async-group
statements, `setmaxnreg`, fragment registers (`acc[r]`) and their coordinates (`row(acc, r)`,
`col(acc, r)`).

What is decided here is what the text alone decides: an MMA's operand tiles have an MMA
shape (m64nNk16 for 16-bit inputs, k32 for 8-bit, k8 for f32 as tf32) and matching dtypes,
the accumulator is a fragment of the right dtype and N; register indices and tile starts
are quasi-affine. Whether an operand's layout has a matrix descriptor, whether the async
groups are waited for, which warpgroup runs the MMA: the checkers' (docs/wgmma.md).
"""

from __future__ import annotations

from tilesafe.frontend import ast, ir
from tilesafe.frontend import diagnostics as dg
from tilesafe.frontend import fragments as fr
from tilesafe.frontend.resolver.base import BOOL, INT, ResolverBase
from tilesafe.frontend.resolver.rules import placeholder
from tilesafe.frontend.span import Span

MAX_WAIT_PENDING = 7  # wgmma.wait_group N takes an immediate 0 .. 7
MAXNREG_RANGE = (24, 256)  # setmaxnreg: a multiple of 8 in this range


class MmaResolver(ResolverBase):
    def fragment_decl(self, d: ast.FragmentDecl) -> None:
        if not self.declare_check(d.name, d.span):
            return
        dtype = ir.DType(d.dtype)
        dims = [self.const_int(e, "a fragment extent") for e in d.shape]
        if dtype not in (ir.DType.F32, ir.DType.I32):
            self.error(dg.BAD_FRAGMENT, f"fragment '{d.name}' holds {dtype.value}: a wgmma "
                       "accumulator is f32 (16-bit or f32 inputs) or i32 (u8 inputs)", d.span)
        elif dims[0] != fr.M or dims[1] not in fr.N_CHOICES:
            self.error(dg.BAD_FRAGMENT, f"fragment '{d.name}' is {dims[0]} x {dims[1]}: a wgmma "
                       f"accumulator is {fr.M} x N with N a multiple of 8 in 8 .. 256", d.span)
        else:
            self.fragments[d.name] = ir.Fragment(d.span, d.name, dtype, (dims[0], dims[1]))

    # ---- statements ---------------------------------------------------------------------------

    def s_FragmentDecl(self, s: ast.FragmentDecl) -> None:
        self._misplaced_decl(s)

    def s_Wgmma(self, s: ast.Wgmma) -> ir.Stmt | None:
        frag = self.fragments.get(s.acc)
        if frag is None:
            self._not_a_fragment(s.acc, s.span)
            return None
        if s.op not in ("=", "+="):
            self.error(dg.BAD_MMA, f"'wgmma {s.acc} {s.op}': an MMA overwrites ('=') or "
                       "accumulates ('+=')", s.span)
            return None
        a, b = self.mma_tile(s.a), self.mma_tile(s.b)
        scale = None
        if s.scale_d is not None:
            scale = self.expr(s.scale_d)
            if scale.type is not BOOL:
                self.error(dg.DTYPE_MISMATCH, "scale_d takes a condition (accumulate when "
                           "it holds)", s.scale_d.span)
            if s.op != "+=":
                self.error(dg.BAD_MMA, "scale_d goes with '+=' (with '=' the accumulator is "
                           "always overwritten)", s.scale_d.span)
        if a is None or b is None:
            return None
        if not self.mma_shape(frag, a, b, s.span):
            return None
        return ir.Wgmma(s.span, s.acc, a, b, s.op == "+=", scale)

    def s_WgmmaFence(self, s: ast.WgmmaFence) -> ir.Stmt:
        return ir.WgmmaFence(s.span)

    def s_WgmmaCommit(self, s: ast.WgmmaCommit) -> ir.Stmt:
        return ir.WgmmaCommit(s.span)

    def s_WgmmaWait(self, s: ast.WgmmaWait) -> ir.Stmt:
        if not 0 <= s.pending <= MAX_WAIT_PENDING:
            self.error(dg.BAD_VALUE, f"wgmma_wait {s.pending}: at most {MAX_WAIT_PENDING} "
                       "groups can be left pending", s.span)
        return ir.WgmmaWait(s.span, min(s.pending, MAX_WAIT_PENDING))

    def s_SetMaxNReg(self, s: ast.SetMaxNReg) -> ir.Stmt:
        lo, hi = MAXNREG_RANGE
        if not (lo <= s.count <= hi and s.count % 8 == 0):
            self.error(dg.BAD_VALUE, f"setmaxnreg {s.count}: the register count is a multiple "
                       f"of 8 in {lo} .. {hi}", s.span)
        return ir.SetMaxNReg(s.span, s.inc, s.count)

    def frag_store(self, s: ast.Store) -> ir.Stmt | None:
        frag = self.fragments[s.target]
        reg = self.frag_reg(frag, s.indices, s.span)
        value = self.convert(self.expr(s.value), frag.dtype.scalar, s.value.span)
        return None if reg is None else ir.FragStore(s.span, frag.name, reg, value)

    # ---- expressions --------------------------------------------------------------------------

    def frag_load(self, e: ast.Index) -> ir.Expr:
        frag = self.fragments[e.name]
        reg = self.frag_reg(frag, e.indices, e.span)
        if reg is None:
            return placeholder(e.span, frag.dtype.scalar)
        return ir.FragLoad(e.span, frag.dtype.scalar, frag.name, reg)

    def frag_coord(self, e: ast.Call) -> ir.Expr:
        """`row(acc, r)` / `col(acc, r)`: the element register r of the executing thread
        holds, as an integer term (frontend/fragments.py), so every stage reads the layout
        the same way."""
        if len(e.args) != 2 or not isinstance(e.args[0], ast.Name) or \
                e.args[0].name not in self.fragments:
            self.error(dg.BAD_CALL, f"'{e.func}(fragment, register)' names a fragment and one "
                       "of its registers", e.span)
            return placeholder(e.span, INT)
        reg = self.expr(e.args[1])
        self.require_affine(reg, e.args[1].span, "a fragment register")
        return (fr.acc_row if e.func == "row" else fr.acc_col)(reg, e.span)

    # ---- operands -----------------------------------------------------------------------------

    def frag_reg(self, frag: ir.Fragment, indices: tuple[ast.Expr, ...], span: Span
                 ) -> ir.Expr | None:
        if len(indices) != 1:
            self.error(dg.RANK_MISMATCH, f"fragment '{frag.name}' is indexed by one register "
                       f"(0 .. {frag.regs - 1}), got {len(indices)} indices", span)
            return None
        reg = self.expr(indices[0])
        self.require_affine(reg, indices[0].span, "a fragment register")
        return reg

    def mma_tile(self, t: ast.MmaTile) -> ir.MmaTile | None:
        buf = self.buffers.get(t.buffer)
        if buf is None:
            if self.taken(t.buffer):
                self.error(dg.WRONG_KIND, f"'{t.buffer}' is not a shared buffer: wgmma reads "
                           "its operands from shared memory", t.span)
            else:
                self.unknown(t.buffer, t.span, "shared buffer")
            return None
        if len(t.index) != len(buf.shape):
            self.error(dg.RANK_MISMATCH, f"'{t.buffer}' has rank {len(buf.shape)} but the tile "
                       f"gives {len(t.index)} indices", t.span)
            return None
        index = []
        for i in t.index:
            start = self.expr(i.start)
            self.require_affine(start, i.start.span, "a tile start")
            extent = None if i.extent is None else self.const_int(i.extent, "a tile extent")
            index.append(ir.TileIndex(start, extent))
        if sum(i.extent is not None for i in index) != 2:
            self.error(dg.BAD_MMA, f"an MMA tile of '{t.buffer}' ranges over exactly two dims "
                       "(`start : extent`), the others are single indices", t.span)
            return None
        return ir.MmaTile(t.span, t.buffer, tuple(index), t.transposed)

    def mma_shape(self, frag: ir.Fragment, a: ir.MmaTile, b: ir.MmaTile, span: Span) -> bool:
        da, db = self.buffers[a.buffer].dtype, self.buffers[b.buffer].dtype
        if da is not db or da not in fr.K_OF:
            self.error(dg.BAD_MMA, f"wgmma operands of {da.value} and {db.value}: both f16, "
                       "both bf16, both u8, or both f32 (tf32)", span)
            return False
        k = fr.K_OF[da]
        (am, ak), (bk, bn) = a.shape, b.shape
        want = f"A is {fr.M} x {k}, B is {k} x {frag.shape[1]} (the accumulator's N)"
        if (am, ak, bk, bn) != (fr.M, k, k, frag.shape[1]):
            self.error(dg.BAD_MMA, f"wgmma tiles {am} x {ak} @ {bk} x {bn} for "
                       f"{da.value} inputs into '{frag.name}' ({frag.shape[0]} x "
                       f"{frag.shape[1]}): {want}", span)
            return False
        if fr.ACC_OF[da] is not frag.dtype:
            self.error(dg.BAD_MMA, f"{da.value} inputs accumulate into "
                       f"{fr.ACC_OF[da].value}, but '{frag.name}' holds {frag.dtype.value}", span)
            return False
        return True

    def _not_a_fragment(self, name: str, span: Span) -> None:
        if self.taken(name):
            self.error(dg.WRONG_KIND, f"'{name}' is not a fragment", span)
        else:
            self.unknown(name, span, "fragment")

