"""Lowering of expressions, integer operations, memory addresses and shared-memory
placement: the part of IR -> LIR that computes values (codegen/lower.py lowers statements on
top of it). See codegen/lower.py for what the lowering decides and why.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from tilesafe.codegen import lir
from tilesafe.codegen.lir import Imm, Reg, Ty
from tilesafe.codegen.lir_terms import LirTerms
from tilesafe.codegen.placement import BARRIER_BYTES, SharedPlacement
from tilesafe.codegen.ranges import MAX_ELEMENTS, Interval, SizeBounds
from tilesafe.frontend import ir
from tilesafe.frontend.diagnostics import Diagnostic, DiagnosticError
from tilesafe.frontend.fold import fold
from tilesafe.frontend.limits import MAX_SHARED_BYTES
from tilesafe.frontend.span import NO_SPAN, Span
from tilesafe.semantics import evaluate, fp, layouts
from tilesafe.semantics.interp_io import tensor_usage

WIDE = "TS701"  # an integer that may not fit 64 bits
COORD = "TS702"  # a TMA coordinate that may not fit 32 bits
SMEM = "TS703"  # shared memory beyond the block's limit
NO_SIZES = "TS704"  # no size satisfies `where` and the launch contract



class CodegenError(DiagnosticError):
    def __init__(self, code: str, message: str, span: Span, hint: str | None = None) -> None:
        super().__init__([Diagnostic(code, message, span, hint=hint)])


# ---- values with ranges ---------------------------------------------------------------------


@dataclass(frozen=True)
class IntVal:
    """An integer value and the range of every value it can take."""

    value: lir.Value
    rng: Interval


def ty_for(rng: Interval, span: Span) -> Ty:
    w = rng.width()
    if w is None:
        raise CodegenError(WIDE, f"an integer here may reach [{rng.lo}, {rng.hi}], beyond "
                           "64 bits", span, "bound the sizes in 'where'")
    return Ty.S32 if w == 32 else Ty.S64


def imm_val(v: int, span: Span | None = None) -> IntVal:
    rng = Interval.point(v)
    if rng.width() is None:
        raise CodegenError(WIDE, f"the integer constant {v} does not fit 64 bits",
                           span or NO_SPAN)
    return IntVal(Imm(v, Ty.S32 if rng.width() == 32 else Ty.S64), rng)


class Sym:
    """An integer being computed by the kernel, with Python's integer operators, so that a
    layout's offset function (written with +, *, //, %, ^, &, >>, <<) builds its own address
    arithmetic. Constants fold; every operation gets the width its range needs."""

    __slots__ = ("low", "v")

    def __init__(self, low: ExprLowering, v: IntVal) -> None:
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


# ---- scopes ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Scope:
    """What a statement sees: bound locals (IntVal for ints, a register for floats, a
    mutable register for vars), the enclosing role and the thread's range."""

    values: dict[int, Any] = field(default_factory=dict)
    role: ir.Role | None = None
    thread: Interval = Interval(0, 0)

    def bind(self, uid: int, v: Any) -> Scope:
        return Scope({**self.values, uid: v}, self.role, self.thread)


@dataclass(frozen=True)
class VarSlot:
    """A `var`: its register and dtype (values are rounded / wrapped to it)."""

    reg: Reg
    dtype: ir.DType


# ---- the lowering ---------------------------------------------------------------------------


class ExprLowering:
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
        if self.place.nbytes > MAX_SHARED_BYTES:
            raise CodegenError(SMEM, f"the kernel needs {self.place.nbytes} bytes of shared "
                               f"memory (buffers, mbarriers and {self.place.align - 16} bytes "
                               f"to align the base), more than a block may have "
                               f"({MAX_SHARED_BYTES})", kernel.span)
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
                            tuple(self.prologue) + tuple(self.out), self.nregs)

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

    # -- integer operations ---------------------------------------------------------------

    def int_op(self, name: str, a: IntVal, b: IntVal | None, span: Span,
               known: Interval | None = None) -> IntVal:
        """One integer operation with exact semantics (floor / and %; bit operations on
        non-negative values), in the width its result range needs. `known` is a range the
        result is proved to lie in by other means (the flat index of an in-bounds access)."""
        if isinstance(a.value, Imm) and (b is None or isinstance(b.value, Imm)):
            return self._fold(name, a, b)
        rng = self._range(name, a.rng, b.rng if b is not None else None)
        if known is not None:
            rng = rng.meet(known)
        ty = ty_for(rng, span)
        args = (a, b) if b is not None else (a,)
        if name in ("int.div", "int.mod", "int.min", "int.max", "int.abs"):
            # Not homomorphic under wrapping: operate in the widest operand width.
            for x in args:
                ty = Ty.S64 if _value_ty(x.value) is Ty.S64 else ty
        vals = tuple(self._fit(x, ty) for x in args)
        if name in ("int.div", "int.mod") and b is not None and not isinstance(b.value, Imm):
            if b.rng.lo <= 0 <= b.rng.hi:
                self._trap_if_zero(b, span)
        hint = "nonneg" if all(x.rng.nonneg for x in args) else ""
        dst = self.reg(ty)
        self.emit(lir.Op(dst, name, vals, hint))
        return IntVal(dst, rng)

    def _fold(self, name: str, a: IntVal, b: IntVal | None) -> IntVal:
        x = int(a.value.value)
        y = int(b.value.value) if b is not None else 0
        table = {"bit.xor": lambda: x ^ y, "bit.and": lambda: x & y, "bit.or": lambda: x | y,
                 "bit.shr": lambda: x >> y, "bit.shl": lambda: x << y}
        if name in table:
            return imm_val(table[name]())
        impl = evaluate.CONCRETE[name]
        return imm_val(int(impl(x, y) if b is not None else impl(x)))

    @staticmethod
    def _range(name: str, a: Interval, b: Interval | None) -> Interval:
        if b is None:
            return {"int.neg": lambda: -a, "int.abs": a.absolute}[name]()
        if name == "int.add":
            return a + b
        if name == "int.sub":
            return a - b
        if name == "int.mul":
            return a * b
        if name == "int.div":
            return a.floordiv(b)
        if name == "int.mod":
            return a.floormod(b)
        if name == "int.min":
            return a.minimum(b)
        if name == "int.max":
            return a.maximum(b)
        if name in ("bit.xor", "bit.or"):
            return a.bitwise(b)
        if name == "bit.and":  # a mask of a non-negative value never exceeds either
            if a.lo >= 0 and b.lo >= 0:
                return Interval(0, min(a.hi, b.hi))
            if a.lo >= 0 or b.lo >= 0:
                return Interval(0, a.hi if a.lo >= 0 else b.hi)
            return a.bitwise(b)
        if name in ("bit.shr", "bit.shl"):  # shift amounts are never negative here
            lo, hi = max(b.lo, 0), max(b.hi, 0)
            scale = Interval(1 << lo, 1 << hi)
            return a.floordiv(scale) if name == "bit.shr" else a * scale
        raise AssertionError(name)

    def _fit(self, v: IntVal, ty: Ty) -> lir.Value:
        """v in a register of type ty: narrower operands are sign-extended by the printer;
        a wider one is truncated here, which is exact because the operation's result range
        fits ty and +, -, * commute with wrapping."""
        if isinstance(v.value, Imm):
            return Imm(v.value.value, ty)
        if v.value.ty.bits > ty.bits:
            dst = self.reg(ty)
            self.emit(lir.Op(dst, "cvt.s32", (v.value,)))
            return dst
        return v.value

    def _trap_if_zero(self, b: IntVal, span: Span) -> None:
        p = self.reg(Ty.PRED)
        self.emit(lir.Op(p, "int.eq", (b.value, Imm(0, _value_ty(b.value)))))
        self.emit(lir.If(p, (lir.Trap(span),), (), span))

    def narrow(self, v: IntVal, rng: Interval) -> IntVal:
        """v known (by a proof elsewhere) to lie in rng: use that range from here on."""
        r = v.rng.meet(rng)
        if r.lo > r.hi:
            r = rng
        if isinstance(v.value, Reg) and v.value.ty is Ty.S64 and r.width() == 32:
            return IntVal(self._fit(IntVal(v.value, r), Ty.S32), r)
        return IntVal(v.value, r)

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

    # -- memory -----------------------------------------------------------------------------

    def _dtype_of(self, e: ir.Load) -> ir.DType:
        if e.space is ir.Space.GLOBAL:
            return self.k.tensor(e.tensor).dtype
        return self.k.buffer(e.tensor).dtype

    def load(self, e: ir.Load, scope: Scope) -> Reg:
        dtype = self._dtype_of(e)
        addr = self.address(e.tensor, e.space, e.indices, scope, e.span)
        dst = self.reg(Ty.F32 if dtype.is_float else Ty.S32)
        readonly = e.space is ir.Space.GLOBAL and e.tensor not in self.written
        self.emit(lir.Load(dst, e.space, dtype, addr, readonly, e.span))
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

def _value_ty(v: lir.Value) -> Ty:
    return v.ty


def _may_fault(e: ir.Expr) -> bool:
    """Whether evaluating e could fault: it reads memory or divides by a non-constant."""
    from tilesafe.frontend.walk import subexprs

    for x in subexprs(e):
        if isinstance(x, ir.Load):
            return True
        if isinstance(x, ir.BinOp) and x.op in ("/", "%") and not isinstance(x.rhs, ir.IntConst):
            return True
    return False
