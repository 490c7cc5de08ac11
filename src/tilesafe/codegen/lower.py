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

from typing import Any

from tilesafe.codegen import lir
from tilesafe.codegen.lir import Imm, Reg, Ty
from tilesafe.codegen.lower_expr import (
    COORD,
    CodegenError,
    ExprLowering,
    Interval,
    IntVal,
    Scope,
    VarSlot,
    imm_val,
    ty_for,
)
from tilesafe.codegen.lower_mma import MmaLowering
from tilesafe.codegen.ranges import dtype_interval
from tilesafe.frontend import ir
from tilesafe.frontend.span import Span
from tilesafe.semantics.expr import evaluate

__all__ = ["CodegenError", "lower"]


def lower(kernel: ir.Kernel) -> lir.Function:
    """The kernel as a backend-neutral function (raises CodegenError, a DiagnosticError)."""
    return _Lowering(kernel).function()


class _Lowering(MmaLowering, ExprLowering):
    """Statements and synchronisation, on top of the expression lowering."""

    # -- statements -------------------------------------------------------------------------

    def stmts(self, body: tuple[ir.Stmt, ...], scope: Scope) -> Scope:
        for s in body:
            scope = getattr(self, "s_" + type(s).__name__)(s, scope)
        return scope

    def block_of(self, body: tuple[ir.Stmt, ...], scope: Scope) -> tuple[lir.Instr, ...]:
        with self.nested() as out:
            self.stmts(body, scope)
        return tuple(out)

    def value(self, e: ir.Expr, scope: Scope) -> Any:
        return (self.float_expr(e, scope) if e.type is ir.ScalarType.FLOAT
                else self.int_expr(e, scope))

    def s_Let(self, s: ir.Let, scope: Scope) -> Scope:
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
    def _mutable(e: ir.Expr, scope: Scope) -> bool:
        return isinstance(e, (ir.LocalRef, ir.LoopVar)) and (
            isinstance(scope.values.get(e.uid), VarSlot) or isinstance(e, ir.LoopVar))

    def s_VarDecl(self, s: ir.VarDecl, scope: Scope) -> Scope:
        reg = self.reg(Ty.F32 if s.dtype.is_float else Ty.S32)
        self._assign(reg, s.dtype, self.value(s.value, scope))
        return scope.bind(s.uid, VarSlot(reg, s.dtype))

    def s_Assign(self, s: ir.Assign, scope: Scope) -> Scope:
        var: VarSlot = scope.values[s.uid]
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
        src = self._low32(v.value)
        self.emit(lir.Op(reg, "wrap.u8" if dtype is ir.DType.U8 else "mov", (src,)))

    def _low32(self, src: lir.Value) -> lir.Value:
        """An integer value as the 32 bits an i32/u8 element keeps (its low bits: what a
        store or a `var` of that dtype holds, the interpreter's wrap)."""
        if isinstance(src, Reg) and src.ty is Ty.S64:
            low = self.reg(Ty.S32)
            self.emit(lir.Op(low, "cvt.s32", (src,)))
            return low
        if isinstance(src, Imm):
            return Imm(((int(src.value) + 2**31) % 2**32) - 2**31, Ty.S32)
        return src

    def s_Store(self, s: ir.Store, scope: Scope) -> Scope:
        dtype = (self.k.tensor(s.tensor) if s.space is ir.Space.GLOBAL
                 else self.k.buffer(s.tensor)).dtype
        v = self.value(s.value, scope)
        addr = self.address(s.tensor, s.space, s.indices, scope, s.span)
        if s.cta is not None:  # a peer CTA's copy of the buffer (distributed shared memory)
            addr = self.mapa(addr, s.cta, scope, s.span)
        if isinstance(v, IntVal):
            v = self._low32(v.value)
        self.emit(lir.Store(s.space, dtype, addr, v, s.span, s.cta is not None))
        return scope

    def s_For(self, s: ir.For, scope: Scope) -> Scope:
        if self.needs_unroll(s):  # a fragment register is named in the instruction
            return self.unroll(s, scope)
        lo, hi = self.int_expr(s.lo, scope), self.int_expr(s.hi, scope)
        if lo.rng.lo > hi.rng.hi - 1:  # never runs for any size
            return scope
        var_rng = Interval(lo.rng.lo, max(lo.rng.lo, hi.rng.hi - 1))
        # The increment computes var + step before the exit test: that value must fit too.
        ty = ty_for(Interval(var_rng.lo, var_rng.hi + s.step), s.span)
        var = self.reg(ty)
        inner = scope.bind(s.var.uid, IntVal(var, var_rng))
        body = self.block_of(s.body, inner)
        self.emit(lir.Loop(var, self._fit(lo, ty), self._fit(hi, ty), s.step, body,
                           f"{s.var.name} (uid {s.var.uid})", s.span))
        return scope

    def s_If(self, s: ir.If, scope: Scope) -> Scope:
        c = self.cond(s.cond, scope)
        self.emit(lir.If(c, self.block_of(s.then, scope), self.block_of(s.orelse, scope),
                         s.span))
        return scope

    def s_Role(self, s: ir.Role, scope: Scope) -> Scope:
        lo, hi = s.threads.lo, s.threads.hi
        if s.elect_one:
            hi = lo + 1
        inner = Scope(scope.values, s, Interval(lo, hi - 1))
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

    def s_Init(self, s: ir.Init, scope: Scope) -> Scope:
        bar = self.k.barrier(s.barrier.name)
        if s.barrier.index is None and bar.length is not None:
            for i in range(bar.instances):
                self.emit(lir.MbarInit(self.barrier_address(s.barrier, scope, i), bar.count,
                                       s.span))
        else:
            self.emit(lir.MbarInit(self.barrier_address(s.barrier, scope), bar.count, s.span))
        return scope

    def s_Fence(self, s: ir.Fence, scope: Scope) -> Scope:
        self.emit(lir.Fence(s.kind, s.span))
        return scope

    def s_Sync(self, s: ir.Sync, scope: Scope) -> Scope:
        self.emit(lir.BarSync(s.span))
        return scope

    def s_NamedBar(self, s: ir.NamedBar, scope: Scope) -> Scope:
        self.emit(lir.NamedBar(s.bar_id, s.count, s.arrive, s.span))
        return scope

    def s_Wait(self, s: ir.Wait, scope: Scope) -> Scope:
        bar = self.barrier_address(s.barrier, scope)
        parity = self.narrow(self.int_expr(s.parity, scope), Interval(0, 1))
        self.emit(lir.MbarWait(bar, self._fit(parity, Ty.S32), s.span, s.scope.value,
                               s.relaxed))
        return scope

    def s_Arrive(self, s: ir.Arrive, scope: Scope) -> Scope:
        role = scope.role
        lo = role.threads.lo if role is not None else 0
        hi = role.threads.hi if role is not None else self.k.block
        if role is not None and role.elect_one:
            hi = lo + 1

        def arrive() -> tuple[lir.Instr, ...]:
            with self.nested() as out:
                bar = self.barrier_address(s.barrier, scope)
                remote = s.barrier.cta is not None
                if remote:  # a peer CTA's barrier
                    bar = self.mapa(bar, s.barrier.cta, scope, s.span)
                tx = None
                if s.tx_bytes is not None:
                    tx = self._fit(self.narrow(self.int_expr(s.tx_bytes, scope),
                                               Interval(0, 2**20 - 1)), Ty.S32)
                self.emit(lir.MbarArrive(bar, tx, s.span, s.scope.value, s.relaxed, remote))
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
        base = self.int_op("bit.and", tid, imm_val(-32), span)
        if lo % 32 == 0 and hi % 32 == 0:
            return Imm(-1, Ty.S32), base.value
        first = self.narrow(self.int_op("int.max", self.int_op("int.sub", imm_val(lo), base, span),
                                        imm_val(0), span), Interval(0, 31))
        last = self.narrow(self.int_op("int.min", self.int_op("int.sub", imm_val(hi), base, span),
                                       imm_val(32), span), Interval(1, 32))
        one = IntVal(Imm(1, Ty.S64), Interval(1, 1))
        top = self.int_op("bit.shl", one, last, span)
        bottom = self.int_op("bit.shl", one, first, span)
        mask = self.int_op("int.sub", top, bottom, span)
        low = self.reg(Ty.S32)
        self.emit(lir.Op(low, "cvt.s32", (self._fit(mask, Ty.S64),)))
        return low, self.int_op("int.add", base, first, span).value

    def s_ExpectTx(self, s: ir.ExpectTx, scope: Scope) -> Scope:
        bar = self.barrier_address(s.barrier, scope)
        tx = self._fit(self.narrow(self.int_expr(s.nbytes, scope), Interval(0, 2**20 - 1)),
                       Ty.S32)
        self.emit(lir.MbarExpectTx(bar, tx, s.span))
        return scope

    def _slice_address(self, sl: ir.BufferSlice, scope: Scope) -> lir.Value:
        buf = self.k.buffer(sl.buffer)
        idx = [self.int_expr(p, scope) for p in sl.prefix]
        idx += [imm_val(0)] * (len(buf.shape) - len(idx))
        return self.shared_address(sl.buffer, idx, sl.span)

    def _coords(self, coords: tuple[ir.Expr, ...], scope: Scope) -> tuple[lir.Value, ...]:
        out = []
        for c in coords:
            v = self.int_expr(c, scope)
            if v.rng.width() != 32:
                raise CodegenError(COORD, f"TMA coordinate may reach [{v.rng.lo}, "
                                   f"{v.rng.hi}], beyond the 32-bit operand", c.span,
                                   "bound the sizes in 'where'")
            out.append(self._fit(v, Ty.S32))
        return tuple(reversed(out))  # the hardware takes the innermost dimension first

    def s_TmaLoad(self, s: ir.TmaLoad, scope: Scope) -> Scope:
        smem = self._slice_address(s.dst, scope)
        coords = self._coords(s.coords, scope)
        bar = self.barrier_address(s.barrier, scope)
        mask = None
        if s.multicast is not None:  # bit r: CTA r of the cluster (16 bits)
            full = (1 << self.k.cluster_size) - 1
            mask = self._fit(self.narrow(self.int_expr(s.multicast, scope),
                                         Interval(1, full)), Ty.S32)
        self.emit(lir.TmaLoad(f"tm_{s.tensormap}", smem, coords, bar, s.span, mask))
        return scope

    def s_ClusterBarrier(self, s: ir.ClusterBarrier, scope: Scope) -> Scope:
        self.emit(lir.ClusterBar(s.arrive, s.wait, s.relaxed, s.span))
        return scope

    def s_TmaStore(self, s: ir.TmaStore, scope: Scope) -> Scope:
        smem = self._slice_address(s.src, scope)
        coords = self._coords(s.coords, scope)
        self.emit(lir.TmaStore(f"tm_{s.tensormap}", smem, coords, s.span))
        return scope

    def s_CommitGroup(self, s: ir.CommitGroup, scope: Scope) -> Scope:
        self.emit(lir.CommitGroup(s.span))
        return scope

    def s_WaitGroup(self, s: ir.WaitGroup, scope: Scope) -> Scope:
        self.emit(lir.WaitGroup(s.pending, s.read, s.span))
        return scope
