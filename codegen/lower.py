"""IR -> LIR: every decision of code generation that is not specific to one instruction set.

What is decided here, and why here:

* Register widths. Every integer operation gets the narrowest signed width (32 or 64
  bits) its exact value always fits, from the value ranges of codegen/ranges.py; a value
  that may not fit 64 bits refuses compilation (TS701) instead of wrapping silently.
* Meaning. Each operator node is lowered to the operation semantics/evaluate.typed_op
  names (the interpreter runs the same names), with the same int -> f32 conversions.
* Addresses. A global element is `base + flat * size`, the row-major flat index computed
  from run-time extents; a shared element is `base + layout(indices) * size`, where the
  layout's own offset function (semantics/layouts.RealLayout.offset_of) is evaluated on
  symbolic values, so the address arithmetic is the layout's definition, not a copy of it.
* Shared memory. Buffers sit where semantics/smem.plan_shared puts them (relative to a
  base rounded up at run time to the largest alignment), mbarriers after them.
* Who acts. `elect one` is the lowest thread of the role, as in the interpreter (PTX
  `elect.sync` does not promise which lane it picks, and per-thread state such as bulk
  groups must stay with one thread); `one per warp` converges the role's lanes of the warp
  and lets the lowest arrive.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from tilesafe.codegen import lir
from tilesafe.codegen.lir import Imm, Reg, Ty
from tilesafe.codegen.ranges import MAX_ELEMENTS, Interval, SizeBounds, dtype_interval
from tilesafe.frontend import ir
from tilesafe.frontend.diagnostics import Diagnostic, DiagnosticError
from tilesafe.frontend.span import Span
from tilesafe.semantics import evaluate, layouts
from tilesafe.semantics.interp_io import tensor_usage
from tilesafe.semantics.smem import SMEM_BASE, plan_shared

WIDE = "TS701"  # an integer that may not fit 64 bits
COORD = "TS702"  # a TMA coordinate that may not fit 32 bits
SMEM = "TS703"  # shared memory beyond the block's limit
NO_SIZES = "TS704"  # no size satisfies `where` and the launch contract

MAX_DYNAMIC_SMEM = 232448  # sm_90: cudaDevAttrMaxSharedMemoryPerBlockOptin
BARRIER_BYTES = 8


class CodegenError(DiagnosticError):
    def __init__(self, code: str, message: str, span: Span, hint: str | None = None) -> None:
        super().__init__([Diagnostic(code, message, span, hint=hint)])


# ---- values with ranges ---------------------------------------------------------------------


@dataclass(frozen=True)
class IntVal:
    """An integer value and the range of every value it can take."""

    value: lir.Value
    rng: Interval


def _ty_for(rng: Interval, span: Span) -> Ty:
    w = rng.width()
    if w is None:
        raise CodegenError(WIDE, f"an integer here may reach [{rng.lo}, {rng.hi}], beyond "
                           "64 bits", span, "bound the sizes in 'where'")
    return Ty.S32 if w == 32 else Ty.S64


def _imm(v: int) -> IntVal:
    rng = Interval.point(v)
    return IntVal(Imm(v, Ty.S32 if rng.width() == 32 else Ty.S64), rng)


class Sym:
    """An integer being computed by the kernel, with Python's integer operators, so that a
    layout's offset function (written with +, *, //, %, ^, &, >>, <<) builds its own address
    arithmetic. Constants fold; every operation gets the width its range needs."""

    __slots__ = ("low", "v")

    def __init__(self, low: _Lowering, v: IntVal) -> None:
        self.low = low
        self.v = v

    def _wrap(self, x: Any) -> IntVal:
        if isinstance(x, Sym):
            return x.v
        return _imm(int(x))

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
class _Scope:
    """What a statement sees: bound locals (IntVal for ints, a register for floats, a
    mutable register for vars), the enclosing role and the thread's range."""

    values: dict[int, Any] = field(default_factory=dict)
    role: ir.Role | None = None
    thread: Interval = Interval(0, 0)

    def bind(self, uid: int, v: Any) -> _Scope:
        return _Scope({**self.values, uid: v}, self.role, self.thread)


@dataclass(frozen=True)
class _Var:
    """A `var`: its register and dtype (values are rounded / wrapped to it)."""

    reg: Reg
    dtype: ir.DType


# ---- the lowering ---------------------------------------------------------------------------


def lower(kernel: ir.Kernel) -> lir.Function:
    """The kernel as a backend-neutral function (raises CodegenError, a DiagnosticError)."""
    return _Lowering(kernel).function()


class _Lowering:
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
        self.plan = plan_shared(kernel.shared)
        self.layouts = {b.name: layouts.realize(b.layout, b.shape, b.dtype.nbytes)
                        for b in kernel.shared}
        self.align = max([16] + [b.align for b in kernel.shared])
        end = max((p.base + p.nbytes for p in self.plan.placements.values()),
                  default=SMEM_BASE) - SMEM_BASE
        end = -(-end // BARRIER_BYTES) * BARRIER_BYTES
        self.bar_offset: dict[str, int] = {}
        for b in kernel.barriers:
            self.bar_offset[b.name] = end
            end += BARRIER_BYTES * b.instances
        self.smem_bytes = (self.align - 16 if self.align > 16 else 0) + end
        if self.smem_bytes > MAX_DYNAMIC_SMEM:
            raise CodegenError(SMEM, f"the kernel needs {self.smem_bytes} bytes of shared "
                               f"memory (buffers, mbarriers and {self.align - 16} bytes to "
                               f"align the base), more than a block may have "
                               f"({MAX_DYNAMIC_SMEM})", kernel.span)
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
        scope = _Scope(thread=Interval(0, self.k.block - 1))
        self.stmts(self.k.body, scope)
        return lir.Function(self.k.name, tuple(self.params), self.k.block, self.smem_bytes,
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
        ty = _ty_for(rng, span)
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
            return _imm(table[name]())
        impl = evaluate.CONCRETE[name]
        return _imm(int(impl(x, y) if b is not None else impl(x)))

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

    def builtin(self, e: ir.Builtin, scope: _Scope) -> IntVal:
        kind = e.kind
        if kind in (ir.BuiltinKind.BLOCK_X, ir.BuiltinKind.BLOCK_Y, ir.BuiltinKind.BLOCK_Z):
            return self.ctaid("xyz".index(kind.value[-1]))
        if scope.thread.lo == scope.thread.hi:  # inside `elect one`: the thread is known
            t = scope.thread.lo
            return _imm({ir.BuiltinKind.THREAD: t, ir.BuiltinKind.LANE: t % 32,
                         ir.BuiltinKind.WARP_ID: t // 32}[kind])
        tid = self.narrow(self.tid(), scope.thread)
        if kind is ir.BuiltinKind.THREAD:
            return tid
        if kind is ir.BuiltinKind.LANE:
            return self.int_op("int.mod", tid, _imm(32), e.span)
        return self.int_op("int.div", tid, _imm(32), e.span)

    # -- expressions ------------------------------------------------------------------------

    def int_expr(self, e: ir.Expr, scope: _Scope) -> IntVal:
        if isinstance(e, ir.IntConst):
            return _imm(e.value)
        if isinstance(e, ir.SizeVar):
            return self.size(e.name)
        if isinstance(e, ir.Builtin):
            return self.builtin(e, scope)
        if isinstance(e, (ir.LoopVar, ir.LocalRef)):
            v = scope.values[e.uid]
            if isinstance(v, _Var):
                return IntVal(v.reg, dtype_interval(v.dtype))
            return v
        if isinstance(e, ir.Load):
            return IntVal(self.load(e, scope), dtype_interval(self._dtype_of(e)))
        if isinstance(e, (ir.BinOp, ir.UnOp, ir.Call)):
            op = evaluate.typed_op(e)
            if op.name == "id":
                return self.int_expr(e.args[0], scope)  # type: ignore[union-attr]
            if op.name == "cvt.i32":
                f = self.float_expr(e.args[0], scope)  # type: ignore[union-attr]
                dst = self.reg(Ty.S32)
                self.emit(lir.Op(dst, "cvt.i32", (f,)))
                return IntVal(dst, dtype_interval(ir.DType.I32))
            if isinstance(e, ir.UnOp):
                return self.int_op(op.name, self.int_expr(e.operand, scope), None, e.span)
            if isinstance(e, ir.Call) and len(e.args) == 1:
                return self.int_op(op.name, self.int_expr(e.args[0], scope), None, e.span)
            lhs, rhs = (e.lhs, e.rhs) if isinstance(e, ir.BinOp) else e.args
            a = self.int_expr(lhs, scope)
            b = self.int_expr(rhs, scope)
            return self.int_op(op.name, a, b, e.span)
        raise AssertionError(f"no integer lowering for {type(e).__name__}")

    def float_expr(self, e: ir.Expr, scope: _Scope) -> lir.Value:
        if isinstance(e, ir.FloatConst):
            import numpy as np

            return Imm(float(np.float32(e.value)), Ty.F32)
        if isinstance(e, ir.LocalRef):
            v = scope.values[e.uid]
            return v.reg if isinstance(v, _Var) else v
        if isinstance(e, ir.Load):
            return self.load(e, scope)
        op = evaluate.typed_op(e)  # type: ignore[arg-type]
        if op.name == "id":
            return self.float_expr(e.args[0], scope)  # type: ignore[attr-defined]
        if op.name == "cvt.f32":
            a = self.int_expr(e.args[0], scope)  # type: ignore[attr-defined]
            return self._to_f32(a)
        operands = ((e.lhs, e.rhs) if isinstance(e, ir.BinOp)
                    else (e.operand,) if isinstance(e, ir.UnOp) else e.args)  # type: ignore
        vals = []
        for x, conv in zip(operands, op.to_float, strict=True):
            vals.append(self._to_f32(self.int_expr(x, scope)) if conv
                        else self.float_expr(x, scope))
        dst = self.reg(Ty.F32)
        self.emit(lir.Op(dst, op.name, tuple(vals)))
        return dst

    def _to_f32(self, a: IntVal) -> lir.Value:
        if isinstance(a.value, Imm):
            from tilesafe.semantics import fp

            return Imm(float(fp.int_to_f32(int(a.value.value))), Ty.F32)
        dst = self.reg(Ty.F32)
        self.emit(lir.Op(dst, "cvt.f32", (a.value,)))
        return dst

    def cond(self, e: ir.Expr, scope: _Scope) -> lir.Value:
        """A BOOL expression as a predicate. `&&`/`||` whose right side may fault (a load,
        a division by a non-constant) evaluate it only when needed, as the language says."""
        op = evaluate.typed_op(e) if isinstance(e, (ir.BinOp, ir.UnOp)) else None
        if op is None:
            raise AssertionError("a condition must be a comparison or a connective")
        if op.name == "not":
            a = self.cond(e.operand, scope)  # type: ignore[union-attr]
            dst = self.reg(Ty.PRED)
            self.emit(lir.Op(dst, "not", (a,)))
            return dst
        assert isinstance(e, ir.BinOp)
        if op.name in ("and", "or"):
            a = self.cond(e.lhs, scope)
            if not _may_fault(e.rhs):
                b = self.cond(e.rhs, scope)
                dst = self.reg(Ty.PRED)
                self.emit(lir.Op(dst, op.name, (a, b)))
                return dst
            dst = self.reg(Ty.PRED)
            self.emit(lir.Op(dst, "mov", (a,)))
            with self.nested() as rhs:
                b = self.cond(e.rhs, scope)
                self.emit(lir.Op(dst, "mov", (b,)))
            if op.name == "and":
                self.emit(lir.If(dst, tuple(rhs), ()))
            else:
                self.emit(lir.If(dst, (), tuple(rhs)))
            return dst
        is_float = op.name.startswith("f32.")
        if is_float:
            vals = tuple(self._to_f32(self.int_expr(x, scope)) if conv
                         else self.float_expr(x, scope)
                         for x, conv in zip((e.lhs, e.rhs), op.to_float, strict=True))
        else:
            a, b = self.int_expr(e.lhs, scope), self.int_expr(e.rhs, scope)
            ty = Ty.S64 if Ty.S64 in (_value_ty(a.value), _value_ty(b.value)) else Ty.S32
            vals = (self._fit(a, ty), self._fit(b, ty))
        dst = self.reg(Ty.PRED)
        self.emit(lir.Op(dst, op.name, vals))
        return dst

    # -- memory -----------------------------------------------------------------------------

    def _dtype_of(self, e: ir.Load) -> ir.DType:
        if e.space is ir.Space.GLOBAL:
            return self.k.tensor(e.tensor).dtype
        return self.k.buffer(e.tensor).dtype

    def load(self, e: ir.Load, scope: _Scope) -> Reg:
        dtype = self._dtype_of(e)
        addr = self.address(e.tensor, e.space, e.indices, scope, e.span)
        dst = self.reg(Ty.F32 if dtype.is_float else Ty.S32)
        readonly = e.space is ir.Space.GLOBAL and e.tensor not in self.written
        self.emit(lir.Load(dst, e.space, dtype, addr, readonly, e.span))
        return dst

    def address(self, name: str, space: ir.Space, indices: tuple[ir.Expr, ...],
                scope: _Scope, span: Span) -> lir.Value:
        idx = [self.int_expr(i, scope) for i in indices]
        if space is ir.Space.GLOBAL:
            return self.global_address(name, idx, span)
        return self.shared_address(name, idx, span)

    def extent(self, e: ir.Expr) -> IntVal:
        rng = self.bounds.of(e)
        return self.once(("extent", e), lambda: self.narrow(
            self.int_expr(e, _Scope()), Interval(max(1, rng.lo), rng.hi)))

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
            self.emit(lir.SharedBase(r, self.align))
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
        offv = off.v if isinstance(off, Sym) else _imm(int(off))
        pl = self.plan.placements[name]
        start = pl.base - SMEM_BASE
        dst = self.reg(Ty.U32)
        self.emit(lir.Op(dst, "addr.shared", (self.smem_base(), Imm(start, Ty.S32),
                                               offv.value, Imm(buf.dtype.nbytes, Ty.S32))))
        return dst

    def barrier_address(self, ref: ir.BarrierRef, scope: _Scope,
                        index: int | None = None) -> lir.Value:
        start = self.bar_offset[ref.name]
        if index is not None:
            i = _imm(index)
        elif ref.index is None:
            i = _imm(0)
        else:
            n = self.k.barrier(ref.name).instances
            i = self.narrow(self.int_expr(ref.index, scope), Interval(0, n - 1))
        dst = self.reg(Ty.U32)
        self.emit(lir.Op(dst, "addr.shared", (self.smem_base(), Imm(start, Ty.S32), i.value,
                                               Imm(BARRIER_BYTES, Ty.S32))))
        return dst

    # -- statements -------------------------------------------------------------------------

    def stmts(self, body: tuple[ir.Stmt, ...], scope: _Scope) -> _Scope:
        for s in body:
            scope = getattr(self, "s_" + type(s).__name__)(s, scope)
        return scope

    def block_of(self, body: tuple[ir.Stmt, ...], scope: _Scope) -> tuple[lir.Instr, ...]:
        with self.nested() as out:
            self.stmts(body, scope)
        return tuple(out)

    def value(self, e: ir.Expr, scope: _Scope) -> Any:
        return (self.float_expr(e, scope) if e.type is ir.ScalarType.FLOAT
                else self.int_expr(e, scope))

    def s_Let(self, s: ir.Let, scope: _Scope) -> _Scope:
        v = self.value(s.value, scope)
        # A let keeps the value it had: copy it off a register that changes later.
        if isinstance(v, IntVal) and isinstance(v.value, Reg) and self._mutable(s.value, scope):
            dst = self.reg(v.value.ty)
            self.emit(lir.Op(dst, "mov", (v.value,)))
            v = IntVal(dst, v.rng)
        elif isinstance(v, Reg) and self._mutable(s.value, scope):
            dst = self.reg(v.ty)
            self.emit(lir.Op(dst, "mov", (v,)))
            v = dst
        return scope.bind(s.uid, v)

    @staticmethod
    def _mutable(e: ir.Expr, scope: _Scope) -> bool:
        return isinstance(e, (ir.LocalRef, ir.LoopVar)) and (
            isinstance(scope.values.get(e.uid), _Var) or isinstance(e, ir.LoopVar))

    def s_VarDecl(self, s: ir.VarDecl, scope: _Scope) -> _Scope:
        reg = self.reg(Ty.F32 if s.dtype.is_float else Ty.S32)
        self._assign(reg, s.dtype, self.value(s.value, scope))
        return scope.bind(s.uid, _Var(reg, s.dtype))

    def s_Assign(self, s: ir.Assign, scope: _Scope) -> _Scope:
        var: _Var = scope.values[s.uid]
        name = evaluate.assign_op(s.op, var.dtype.scalar)
        v = self.value(s.value, scope)
        if name is not None:
            if var.dtype.is_float:
                dst = self.reg(Ty.F32)
                self.emit(lir.Op(dst, name, (var.reg, v)))
                v = dst
            else:
                v = self.int_op(name, IntVal(var.reg, dtype_interval(var.dtype)), v, s.span)
        self._assign(var.reg, var.dtype, v)
        return scope

    def _assign(self, reg: Reg, dtype: ir.DType, v: Any) -> None:
        """reg = v held in dtype: rounded to f16/bf16, wrapped to i32/u8."""
        if dtype.is_float:
            op = {ir.DType.F16: "round.f16", ir.DType.BF16: "round.bf16"}.get(dtype, "mov")
            self.emit(lir.Op(reg, op, (v,)))
            return
        src = v.value
        if isinstance(src, Reg) and src.ty is Ty.S64:
            low = self.reg(Ty.S32)
            self.emit(lir.Op(low, "cvt.s32", (src,)))
            src = low
        elif isinstance(src, Imm):
            src = Imm(((int(src.value) + 2**31) % 2**32) - 2**31, Ty.S32)
        self.emit(lir.Op(reg, "wrap.u8" if dtype is ir.DType.U8 else "mov", (src,)))

    def s_Store(self, s: ir.Store, scope: _Scope) -> _Scope:
        dtype = (self.k.tensor(s.tensor) if s.space is ir.Space.GLOBAL
                 else self.k.buffer(s.tensor)).dtype
        v = self.value(s.value, scope)
        addr = self.address(s.tensor, s.space, s.indices, scope, s.span)
        if isinstance(v, IntVal):
            src = v.value
            if isinstance(src, Reg) and src.ty is Ty.S64:
                low = self.reg(Ty.S32)
                self.emit(lir.Op(low, "cvt.s32", (src,)))
                src = low
            elif isinstance(src, Imm):
                src = Imm(((int(src.value) + 2**31) % 2**32) - 2**31, Ty.S32)
            v = src
        self.emit(lir.Store(s.space, dtype, addr, v, s.span))
        return scope

    def s_For(self, s: ir.For, scope: _Scope) -> _Scope:
        lo, hi = self.int_expr(s.lo, scope), self.int_expr(s.hi, scope)
        if lo.rng.lo > hi.rng.hi - 1:  # never runs for any size
            return scope
        var_rng = Interval(lo.rng.lo, max(lo.rng.lo, hi.rng.hi - 1))
        # The increment computes var + step before the exit test: that value must fit too.
        ty = _ty_for(Interval(var_rng.lo, var_rng.hi + s.step), s.span)
        var = self.reg(ty)
        inner = scope.bind(s.var.uid, IntVal(var, var_rng))
        body = self.block_of(s.body, inner)
        self.emit(lir.Loop(var, self._fit(lo, ty), self._fit(hi, ty), s.step, body,
                           f"{s.var.name} (uid {s.var.uid})", s.span))
        return scope

    def s_If(self, s: ir.If, scope: _Scope) -> _Scope:
        c = self.cond(s.cond, scope)
        self.emit(lir.If(c, self.block_of(s.then, scope), self.block_of(s.orelse, scope),
                         s.span))
        return scope

    def s_Role(self, s: ir.Role, scope: _Scope) -> _Scope:
        lo, hi = s.threads.lo, s.threads.hi
        if s.elect_one:
            hi = lo + 1
        inner = _Scope(scope.values, s, Interval(lo, hi - 1))
        p = self.in_range(lo, hi)
        self.emit(lir.If(p, self.block_of(s.body, inner), (), s.span))
        return scope

    def in_range(self, lo: int, hi: int) -> lir.Value:
        """Predicate lo <= thread < hi."""
        tid = self.tid()
        if hi - lo == 1:
            p = self.reg(Ty.PRED)
            self.emit(lir.Op(p, "int.eq", (tid.value, Imm(lo, Ty.S32))))
            return p
        ps = []
        if lo > 0:
            ps.append(self._cmp("int.ge", tid.value, lo))
        if hi < self.k.block:
            ps.append(self._cmp("int.lt", tid.value, hi))
        if not ps:
            p = self.reg(Ty.PRED)
            self.emit(lir.Op(p, "int.ge", (tid.value, Imm(0, Ty.S32))))
            return p
        if len(ps) == 1:
            return ps[0]
        p = self.reg(Ty.PRED)
        self.emit(lir.Op(p, "and", (ps[0], ps[1])))
        return p

    def _cmp(self, name: str, a: lir.Value, c: int) -> Reg:
        p = self.reg(Ty.PRED)
        self.emit(lir.Op(p, name, (a, Imm(c, Ty.S32))))
        return p

    # -- synchronisation --------------------------------------------------------------------

    def s_Init(self, s: ir.Init, scope: _Scope) -> _Scope:
        bar = self.k.barrier(s.barrier.name)
        if s.barrier.index is None and bar.length is not None:
            for i in range(bar.instances):
                self.emit(lir.MbarInit(self.barrier_address(s.barrier, scope, i), bar.count,
                                       s.span))
        else:
            self.emit(lir.MbarInit(self.barrier_address(s.barrier, scope), bar.count, s.span))
        return scope

    def s_Fence(self, s: ir.Fence, scope: _Scope) -> _Scope:
        self.emit(lir.Fence(s.kind, s.span))
        return scope

    def s_Sync(self, s: ir.Sync, scope: _Scope) -> _Scope:
        self.emit(lir.BarSync(s.span))
        return scope

    def s_Wait(self, s: ir.Wait, scope: _Scope) -> _Scope:
        bar = self.barrier_address(s.barrier, scope)
        parity = self.narrow(self.int_expr(s.parity, scope), Interval(0, 1))
        self.emit(lir.MbarWait(bar, self._fit(parity, Ty.S32), s.span))
        return scope

    def s_Arrive(self, s: ir.Arrive, scope: _Scope) -> _Scope:
        role = scope.role
        lo = role.threads.lo if role is not None else 0
        hi = role.threads.hi if role is not None else self.k.block
        if role is not None and role.elect_one:
            hi = lo + 1

        def arrive() -> tuple[lir.Instr, ...]:
            with self.nested() as out:
                bar = self.barrier_address(s.barrier, scope)
                tx = None
                if s.tx_bytes is not None:
                    tx = self._fit(self.narrow(self.int_expr(s.tx_bytes, scope),
                                               Interval(0, 2**20 - 1)), Ty.S32)
                self.emit(lir.MbarArrive(bar, tx, s.span))
            return tuple(out)

        single = scope.thread.lo == scope.thread.hi == lo  # inside `elect one`
        if s.mode is ir.ArriveMode.EACH or single:
            for instr in arrive():
                self.emit(instr)
            return scope
        if s.mode is ir.ArriveMode.ONE:
            self.emit(lir.If(self.in_range(lo, lo + 1), arrive(), (), s.span))
            return scope
        # one per warp: the role's lanes of this warp converge, the lowest of them arrives.
        mask, leader = self._warp_share(lo, hi, s.span)
        self.emit(lir.WarpSync(mask, s.span))
        p = self.reg(Ty.PRED)
        self.emit(lir.Op(p, "int.eq", (self.tid().value, leader)))
        self.emit(lir.If(p, arrive(), (), s.span))
        return scope

    def _warp_share(self, lo: int, hi: int, span: Span) -> tuple[lir.Value, lir.Value]:
        """(lane mask of the role's threads in this thread's warp, the lowest such thread).
        With base the warp's first thread: lanes max(lo - base, 0) .. min(hi - base, 32),
        which lie in 0 .. 32 because this thread (base <= tid < base + 32) is in the role."""
        tid = self.tid()
        base = self.int_op("bit.and", tid, _imm(-32), span)
        if lo % 32 == 0 and hi % 32 == 0:
            return Imm(-1, Ty.S32), base.value
        first = self.narrow(self.int_op("int.max", self.int_op("int.sub", _imm(lo), base, span),
                                        _imm(0), span), Interval(0, 31))
        last = self.narrow(self.int_op("int.min", self.int_op("int.sub", _imm(hi), base, span),
                                       _imm(32), span), Interval(1, 32))
        one = IntVal(Imm(1, Ty.S64), Interval(1, 1))
        top = self.int_op("bit.shl", one, last, span)
        bottom = self.int_op("bit.shl", one, first, span)
        mask = self.int_op("int.sub", top, bottom, span)
        low = self.reg(Ty.S32)
        self.emit(lir.Op(low, "cvt.s32", (self._fit(mask, Ty.S64),)))
        return low, self.int_op("int.add", base, first, span).value

    def s_ExpectTx(self, s: ir.ExpectTx, scope: _Scope) -> _Scope:
        bar = self.barrier_address(s.barrier, scope)
        tx = self._fit(self.narrow(self.int_expr(s.nbytes, scope), Interval(0, 2**20 - 1)),
                       Ty.S32)
        self.emit(lir.MbarExpectTx(bar, tx, s.span))
        return scope

    def _slice_address(self, sl: ir.BufferSlice, scope: _Scope) -> lir.Value:
        buf = self.k.buffer(sl.buffer)
        idx = [self.int_expr(p, scope) for p in sl.prefix]
        idx += [_imm(0)] * (len(buf.shape) - len(idx))
        return self.shared_address(sl.buffer, idx, sl.span)

    def _coords(self, coords: tuple[ir.Expr, ...], scope: _Scope) -> tuple[lir.Value, ...]:
        out = []
        for c in coords:
            v = self.int_expr(c, scope)
            if v.rng.width() != 32:
                raise CodegenError(COORD, f"TMA coordinate may reach [{v.rng.lo}, "
                                   f"{v.rng.hi}], beyond the 32-bit operand", c.span,
                                   "bound the sizes in 'where'")
            out.append(self._fit(v, Ty.S32))
        return tuple(reversed(out))  # the hardware takes the innermost dimension first

    def s_TmaLoad(self, s: ir.TmaLoad, scope: _Scope) -> _Scope:
        smem = self._slice_address(s.dst, scope)
        coords = self._coords(s.coords, scope)
        bar = self.barrier_address(s.barrier, scope)
        self.emit(lir.TmaLoad(f"tm_{s.tensormap}", smem, coords, bar, s.span))
        return scope

    def s_TmaStore(self, s: ir.TmaStore, scope: _Scope) -> _Scope:
        smem = self._slice_address(s.src, scope)
        coords = self._coords(s.coords, scope)
        self.emit(lir.TmaStore(f"tm_{s.tensormap}", smem, coords, s.span))
        return scope

    def s_CommitGroup(self, s: ir.CommitGroup, scope: _Scope) -> _Scope:
        self.emit(lir.CommitGroup(s.span))
        return scope

    def s_WaitGroup(self, s: ir.WaitGroup, scope: _Scope) -> _Scope:
        self.emit(lir.WaitGroup(s.pending, s.read, s.span))
        return scope


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
