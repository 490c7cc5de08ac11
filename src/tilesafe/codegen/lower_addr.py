"""Addresses in the lowering: a global element as `base + flat * size` over the run-time
extents, a shared element as `base + layout(indices) * size` with the layout's own offset
function evaluated on symbolic values (`Sym`), an mbarrier after the buffers; and loads.

Why separate: this is where the memory model the translation validator proves
(docs/codegen.md) is built -- placement, extents, the in-bounds ranges the checkers proved
-- on top of the integer operations; it is a mixin of ExprLowering because addresses are
values in the same LIR stream (`reg`, `emit`, `once`, `int_expr`, `int_op`, `narrow`).
"""

from __future__ import annotations

from typing import Any

from tilesafe.codegen import lir
from tilesafe.codegen.lir import Imm, Reg, Ty
from tilesafe.codegen.lower_values import IntVal, Scope, imm_val
from tilesafe.codegen.placement import BARRIER_BYTES
from tilesafe.codegen.ranges import MAX_ELEMENTS, Interval
from tilesafe.frontend import ir
from tilesafe.frontend.span import Span


class Sym:
    """An integer being computed by the kernel, with Python's integer operators, so that a
    layout's offset function (written with +, *, //, %, ^, &, >>, <<) builds its own address
    arithmetic. Constants fold; every operation gets the width its range needs."""

    __slots__ = ("low", "v")

    def __init__(self, low: Any, v: IntVal) -> None:
        self.low = low
        self.v = v

    def _wrap(self, x: Any) -> IntVal:
        if isinstance(x, Sym):
            return x.v
        return imm_val(int(x))

    def _op(self, name: str, other: Any, swap: bool = False) -> Sym | int:
        a, b = self.v, self._wrap(other)
        if swap:
            a, b = b, a
        return Sym(self.low, self.low.int_op(name, a, b, self.low.span))

    def __add__(self, o: Any) -> Sym:
        return self if isinstance(o, int) and o == 0 else self._op("int.add", o)

    __radd__ = __add__

    def __sub__(self, o: Any) -> Sym:
        return self if isinstance(o, int) and o == 0 else self._op("int.sub", o)

    def __rsub__(self, o: Any) -> Sym:
        return self._op("int.sub", o, swap=True)

    def __mul__(self, o: Any) -> Sym | int:
        if isinstance(o, int):
            if o == 0:
                return 0
            if o == 1:
                return self
        return self._op("int.mul", o)

    __rmul__ = __mul__

    def __floordiv__(self, o: int) -> Sym:
        return self if o == 1 else self._op("int.div", o)

    def __mod__(self, o: int) -> Sym | int:
        return 0 if o == 1 else self._op("int.mod", o)

    def __xor__(self, o: Any) -> Sym:
        return self if isinstance(o, int) and o == 0 else self._op("bit.xor", o)

    __rxor__ = __xor__

    def __and__(self, o: int) -> Sym | int:
        return 0 if o == 0 else self._op("bit.and", o)

    def __rshift__(self, o: int) -> Sym:
        return self if o == 0 else self._op("bit.shr", o)

    def __lshift__(self, o: int) -> Sym:
        return self if o == 0 else self._op("bit.shl", o)


class Addressing:
    """load, address, extent and the global, shared and barrier addresses."""

    def _dtype_of(self, e: ir.Load) -> ir.DType:
        if e.space is ir.Space.GLOBAL:
            return self.k.tensor(e.tensor).dtype
        return self.k.buffer(e.tensor).dtype

    def load(self, e: ir.Load, scope: Scope) -> Reg:
        dtype = self._dtype_of(e)
        addr = self.address(e.tensor, e.space, e.indices, scope, e.span)
        if e.cta is not None:
            addr = self.mapa(addr, e.cta, scope, e.span)
        dst = self.reg(Ty.F32 if dtype.is_float else Ty.S32)
        readonly = e.space is ir.Space.GLOBAL and e.tensor not in self.written
        self.emit(lir.Load(dst, e.space, dtype, addr, readonly, e.span, e.cta is not None))
        return dst

    def mapa(self, addr: lir.Value, cta: ir.Expr, scope: Scope, span: Span) -> Reg:
        """The shared::cluster address of `addr` in CTA `cta` (a rank inside the cluster:
        proved by the checkers)."""
        rank = self.narrow(self.int_expr(cta, scope), Interval(0, self.k.cluster_size - 1))
        dst = self.reg(Ty.U32)
        self.emit(lir.MapA(dst, addr, self._fit(rank, Ty.S32), span))
        return dst

    def address(self, name: str, space: ir.Space, indices: tuple[ir.Expr, ...],
                scope: Scope, span: Span) -> lir.Value:
        idx = [self.int_expr(i, scope) for i in indices]
        if space is ir.Space.GLOBAL:
            return self.global_address(name, idx, span)
        return self.shared_address(name, idx, span)

    def extent(self, e: ir.Expr) -> IntVal:
        rng = self.bounds.of(e)
        return self.once(("extent", e), lambda: self.narrow(
            self.int_expr(e, Scope()), Interval(max(1, rng.lo), rng.hi)))

    def global_address(self, name: str, idx: list[IntVal], span: Span) -> lir.Value:
        """base + (((i0 * d1 + i1) * d2 + i2) ...) * size. Every partial sum is a prefix of
        an in-bounds flat index (the access checker proved the indices in bounds), so it lies
        in [0, elements); the launch contract bounds elements below 2^40."""
        t = self.k.tensor(name)
        dims = [self.extent(d) for d in t.shape]
        total = 1
        for d in dims:
            total *= d.rng.hi
        flat_rng = Interval(0, min(total, MAX_ELEMENTS) - 1)
        acc = self.narrow(idx[0], Interval(0, dims[0].rng.hi - 1))
        for i, d in zip(idx[1:], dims[1:], strict=True):
            part = self.int_op("int.mul", acc, d, span, flat_rng)
            i = self.narrow(i, Interval(0, d.rng.hi - 1))
            acc = self.int_op("int.add", part, i, span, flat_rng)
        base = self.once(("ptr", name), lambda: self._param_ptr(name))
        dst = self.reg(Ty.U64)
        self.emit(lir.Op(dst, "addr.global", (base, acc.value, Imm(t.dtype.nbytes, Ty.S32))))
        return dst

    def _param_ptr(self, name: str) -> Reg:
        r = self.reg(Ty.U64)
        self.emit(lir.Param(r, f"p_{name}"))
        return r

    def smem_base(self) -> Reg:
        def make() -> Reg:
            r = self.reg(Ty.U32)
            self.emit(lir.SharedBase(r, self.place.align))
            return r

        return self.once("smem", make)

    def shared_address(self, name: str, idx: list[IntVal], span: Span) -> lir.Value:
        """base + buffer offset + layout(indices) * size, the layout's offset function
        evaluated on the symbolic indices (each in its extent: proved by the checkers)."""
        buf = self.k.buffer(name)
        saved, self.span = self.span, span
        try:
            coords = []
            for i, e in zip(idx, buf.shape, strict=True):
                v = self.narrow(i, Interval(0, e - 1))
                coords.append(int(v.value.value) if isinstance(v.value, Imm) else Sym(self, v))
            off = self.layouts[name].offset_of(tuple(coords))
        finally:
            self.span = saved
        offv = off.v if isinstance(off, Sym) else imm_val(int(off))
        start = self.place.buffer_start[name]
        dst = self.reg(Ty.U32)
        self.emit(lir.Op(dst, "addr.shared", (self.smem_base(), Imm(start, Ty.S32),
                                               offv.value, Imm(buf.dtype.nbytes, Ty.S32))))
        return dst

    def barrier_address(self, ref: ir.BarrierRef, scope: Scope,
                        index: int | None = None) -> lir.Value:
        start = self.place.barrier_start[ref.name]
        if index is not None:
            i = imm_val(index)
        elif ref.index is None:
            i = imm_val(0)
        else:
            n = self.k.barrier(ref.name).instances
            i = self.narrow(self.int_expr(ref.index, scope), Interval(0, n - 1))
        dst = self.reg(Ty.U32)
        self.emit(lir.Op(dst, "addr.shared", (self.smem_base(), Imm(start, Ty.S32), i.value,
                                               Imm(BARRIER_BYTES, Ty.S32))))
        return dst
