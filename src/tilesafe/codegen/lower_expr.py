"""Lowering of expressions, integer operations, memory addresses and shared-memory
placement: the part of IR -> LIR that computes values (codegen/lower.py lowers statements on
top of it). See codegen/lower.py for what the lowering decides and why.

ExprLowering owns the LIR stream (registers, the prologue, values computed once), the
kernel's leaves (sizes, thread, block) and expressions; its integer operations are the
IntegerOps mixin (lower_int.py) and its addresses the Addressing mixin (lower_addr.py),
over the values of lower_values.py.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from tilesafe.codegen import lir
from tilesafe.codegen.lir import Imm, Reg, Ty
from tilesafe.codegen.lir_terms import LirTerms
from tilesafe.codegen.lower_addr import Addressing, Sym
from tilesafe.codegen.lower_int import IntegerOps
from tilesafe.codegen.lower_values import (
    COORD,
    NO_SIZES,
    SMEM,
    WIDE,
    CodegenError,
    IntVal,
    Scope,
    VarSlot,
    imm_val,
    ty_for,
)
from tilesafe.codegen.placement import SharedPlacement
from tilesafe.codegen.ranges import Interval, SizeBounds
from tilesafe.frontend import ir
from tilesafe.frontend.fold import fold
from tilesafe.frontend.limits import MAX_SHARED_BYTES
from tilesafe.semantics.expr import fp
from tilesafe.semantics.interpreter.interp_io import tensor_usage
from tilesafe.semantics.layout import layouts

__all__ = ["COORD", "NO_SIZES", "SMEM", "WIDE", "CodegenError", "ExprLowering", "IntVal",
           "Interval", "Scope", "Sym", "VarSlot", "imm_val", "ty_for"]


# ---- the lowering ---------------------------------------------------------------------------


class ExprLowering(IntegerOps, Addressing):
    """Values: integer operations in range-checked widths, float operations with the
    interpreter's conversions, conditions, loads, and global/shared/barrier addresses."""

    def __init__(self, kernel: ir.Kernel) -> None:
        self.k = kernel
        self.bounds = SizeBounds(kernel)
        if self.bounds.is_empty():
            raise CodegenError(NO_SIZES, "no sizes satisfy 'where' and the launch contract "
                               "(every extent 1 .. 2^40 - 1, grid within the hardware "
                               "limits)", kernel.span)
        self.nregs = 0
        self.prologue: list[lir.Instr] = []
        self.out: list[lir.Instr] = []
        self.cache: dict[object, Any] = {}
        self.span = kernel.span
        self.written = tensor_usage(kernel)[1]
        self.layouts = {b.name: layouts.realize(b.layout, b.shape, b.dtype.nbytes)
                        for b in kernel.shared}
        self.place = SharedPlacement.of(kernel)
        limit = min(MAX_SHARED_BYTES, kernel.target.max_shared)  # gfx942: 64 KiB of LDS
        if self.place.nbytes > limit:
            raise CodegenError(SMEM, f"the kernel needs {self.place.nbytes} bytes of shared "
                               f"memory (buffers, mbarriers and {self.place.align - 16} bytes "
                               f"to align the base), more than a block may have "
                               f"({limit})", kernel.span)
        self.params: list[lir.KernelParam] = []
        for t in kernel.params:
            self.params.append(lir.KernelParam(f"p_{t.name}", lir.ParamKind.TENSOR, t.name))
        for s in kernel.sizes:
            self.params.append(lir.KernelParam(f"s_{s}", lir.ParamKind.SIZE, s))
        for tm in kernel.tensormaps:
            self.params.append(lir.KernelParam(f"tm_{tm.name}", lir.ParamKind.TENSORMAP,
                                               tm.name))

    # -- output ---------------------------------------------------------------------------

    def function(self) -> lir.Function:
        scope = Scope(thread=Interval(0, self.k.block - 1))
        self.stmts(self.k.body, scope)
        return lir.Function(self.k.name, tuple(self.params), self.k.block, self.place.nbytes,
                            tuple(self.prologue) + tuple(self.out), self.nregs,
                            cluster=self.k.cluster)

    def reg(self, ty: Ty) -> Reg:
        self.nregs += 1
        return Reg(self.nregs, ty)

    def emit(self, instr: lir.Instr) -> None:
        self.out.append(instr)

    @contextlib.contextmanager
    def nested(self) -> Iterator[list[lir.Instr]]:
        saved, self.out = self.out, []
        body = self.out
        try:
            yield body
        finally:
            self.out = saved

    def once(self, key: object, make: Any) -> Any:
        """A value computed once in the prologue (sizes, extents, indices, bases)."""
        if key not in self.cache:
            saved, self.out = self.out, self.prologue
            try:
                self.cache[key] = make()
            finally:
                self.out = saved
        return self.cache[key]

    # -- leaves -----------------------------------------------------------------------------

    def size(self, name: str) -> IntVal:
        def make() -> IntVal:
            raw = self.reg(Ty.S64)
            self.emit(lir.Param(raw, f"s_{name}"))
            rng = self.bounds.of(ir.SizeVar(self.span, ir.ScalarType.INT, name))
            return self.narrow(IntVal(raw, Interval(-(2**63), 2**63 - 1)), rng)

        return self.once(("size", name), make)

    def tid(self) -> IntVal:
        def make() -> IntVal:
            r = self.reg(Ty.S32)
            self.emit(lir.Special(r, "tid.x"))
            return IntVal(r, Interval(0, self.k.block - 1))

        return self.once("tid", make)

    def ctaid(self, axis: int) -> IntVal:
        def make() -> IntVal:
            r = self.reg(Ty.S32)
            self.emit(lir.Special(r, "ctaid." + "xyz"[axis]))
            hi = self.bounds.of(self.k.grid[axis]).hi
            return IntVal(r, Interval(0, max(0, hi - 1)))

        return self.once(("ctaid", axis), make)

    def builtin(self, e: ir.Builtin, scope: Scope) -> IntVal:
        kind = e.kind
        if kind in (ir.BuiltinKind.BLOCK_X, ir.BuiltinKind.BLOCK_Y, ir.BuiltinKind.BLOCK_Z):
            return self.ctaid("xyz".index(kind.value[-1]))
        if scope.thread.lo == scope.thread.hi:  # inside `elect one`: the thread is known
            t = scope.thread.lo
            return imm_val({ir.BuiltinKind.THREAD: t, ir.BuiltinKind.LANE: t % 32,
                         ir.BuiltinKind.WARP_ID: t // 32}[kind])
        tid = self.narrow(self.tid(), scope.thread)
        if kind is ir.BuiltinKind.THREAD:
            return tid
        if kind is ir.BuiltinKind.LANE:
            return self.int_op("int.mod", tid, imm_val(32), e.span)
        return self.int_op("int.div", tid, imm_val(32), e.span)

    # -- expressions ------------------------------------------------------------------------

    def int_expr(self, e: ir.Expr, scope: Scope) -> IntVal:
        """An integer expression: its value and range (codegen/lir_terms.py)."""
        return fold(e, LirTerms(self, scope))

    def float_expr(self, e: ir.Expr, scope: Scope) -> lir.Value:
        return fold(e, LirTerms(self, scope))

    def _to_f32(self, a: IntVal) -> lir.Value:
        if isinstance(a.value, Imm):
            return Imm(float(fp.int_to_f32(int(a.value.value))), Ty.F32)
        dst = self.reg(Ty.F32)
        self.emit(lir.Op(dst, "cvt.f32", (a.value,)))
        return dst

    def cond(self, e: ir.Expr, scope: Scope) -> lir.Value:
        """A BOOL expression as a predicate (`&&`/`||` short-circuit where the right side
        may fault, as the language says)."""
        if not isinstance(e, (ir.BinOp, ir.UnOp)):
            raise AssertionError("a condition must be a comparison or a connective")
        return fold(e, LirTerms(self, scope))


def _may_fault(e: ir.Expr) -> bool:
    """Whether evaluating e could fault: it reads memory or divides by a non-constant."""
    from tilesafe.frontend.walk import subexprs

    for x in subexprs(e):
        if isinstance(x, ir.Load):
            return True
        if isinstance(x, ir.BinOp) and x.op in ("/", "%") and not isinstance(x.rhs, ir.IntConst):
            return True
    return False
