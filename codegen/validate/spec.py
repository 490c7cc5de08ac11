"""The specification side: what each IR access and synchronisation statement must do, read
from the IR alone (never from the code generator).

For every statement instance the walk produces a `SpecEvent`: its execution condition (a
Bool term over the block, the thread, the sizes and one iteration counter per enclosing
`for`), its operands in exact integer arithmetic (floor division and modulo as the IR
defines them, `let`s substituted), and the in-bounds facts of its indices (proved by the
access checker; the operand checks may assume them).

Addresses follow the launch and memory model the code generator promises (docs/codegen.md):

* a global element is `gbase_T + size(dtype) * (row-major flat index over the run-time
  extents)`, where `gbase_T` is the tensor's global address (`cvta.to.global` of p_T);
* shared memory starts at R = the smallest address >= tsmem with R = 1024 (mod A), A the
  largest buffer alignment (at least 16); buffer b lives at R + (placement - 1024), its
  element at `+ size * layout(indices)` with the layout's ISL map; the mbarriers follow the
  last buffer (rounded up to 8 bytes), 8 bytes per instance, in declaration order.

Leaves shared with the PTX side carry the same names: `param:s_N` (a size), `tid.x`,
`ctaid.x`, `tsmem`, `gbase:p_T`, `tmap:tm_x`. Loop counters are `n:F<uid>`; the PTX's
counters are renamed to them once loops are matched.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import islpy as isl

from tilesafe.codegen.validate import layout_terms
from tilesafe.codegen.validate import terms as T
from tilesafe.codegen.validate.spec_terms import (  # noqa: F401 - re-exported
    F32_TO_I32,
    FLOAT_CMP,
    FLOAT_OPS,
    INT_TO_F32,
    SmtTerms,
    SpecUnsupported,
)
from tilesafe.codegen.validate.terms import BOOL, LeafInfo, Term
from tilesafe.frontend import ir
from tilesafe.frontend.fold import fold
from tilesafe.frontend.limits import MBARRIER_BYTES
from tilesafe.frontend.span import Span
from tilesafe.semantics import affine
from tilesafe.semantics.smem import SMEM_BASE, plan_shared

MAX_ELEMENTS = 2**40  # the launch contract (codegen/ranges.py, gpu/launcher.py)
GRID_LIMITS = (2**31 - 1, 65535, 65535)
SMEM_WINDOW = 2**18  # the dynamic shared array starts inside the block's 228 KiB window
BARRIER_BYTES = MBARRIER_BYTES  # the PTX ISA size of an mbarrier object

WIDEN = {ir.DType.F16: "cvt.f32.f16", ir.DType.BF16: "cvt.f32.bf16"}


@dataclass
class SpecEvent:
    kind: str
    node: object  # ir.Load or ir.Stmt
    span: Span
    cond: Term
    fors: tuple[ir.For, ...]
    order: tuple[int, int]
    what: str
    ops: dict[str, object] = field(default_factory=dict)
    inbounds: Term = T.TRUE
    role: ir.Role | None = None
    data: Term | None = None

    @property
    def key(self) -> tuple[int, int]:
        return (self.span.line, self.span.col)


@dataclass
class SpecLoop:
    node: ir.For
    counter: Term
    lo: Term
    hi: Term
    step: int
    cond: Term  # the `for` statement executes
    fors: tuple[ir.For, ...]  # enclosing loops


@dataclass(frozen=True)
class _Ctx:
    cond: Term
    fors: tuple[ir.For, ...]
    env: dict[int, Term]
    role: ir.Role | None


def thread() -> Term:
    return T.uint(T.leaf("tid.x", 32))


def size_leaf(name: str) -> Term:
    return T.leaf(f"param:s_{name}", 64)


def counter(f: ir.For) -> Term:
    return T.leaf(f"n:F{f.var.uid}", 64)


class Spec:
    """Everything the IR says, as terms: assumptions and one event per access or
    synchronisation statement instance."""

    def __init__(self, kernel: ir.Kernel) -> None:
        self.k = kernel
        self.events: list[SpecEvent] = []
        self.loops: dict[int, SpecLoop] = {}
        self.order = 0
        self.size_ranges = self._size_ranges()
        for name in kernel.sizes:
            lo, hi = self.size_ranges[name]
            T.leaf(f"param:s_{name}", 64, LeafInfo("int", True, lo, hi, note=f"size {name}"))
        T.leaf("tid.x", 32, LeafInfo("int", False, 0, kernel.block - 1, note="thread"))
        self.grid = [self.int_expr(g, self._root()) for g in kernel.grid]
        for axis, (g, limit) in enumerate(zip(kernel.grid, GRID_LIMITS, strict=False)):
            top = min(limit, self._grid_max(g))
            T.leaf(f"ctaid.{'xyz'[axis]}", 32,
                   LeafInfo("int", False, 0, max(0, top - 1), note=f"block.{'xyz'[axis]}"))
        T.leaf("tsmem", 32, LeafInfo("int", False, 0, SMEM_WINDOW - 1, 16,
                                     note="shared address of the dynamic array"))
        for t in kernel.params:
            T.leaf(f"gbase:p_{t.name}", 64, LeafInfo("int", False, 0, 2**64 - 1,
                                                     note=f"global address of {t.name}"))
        for tm in kernel.tensormaps:
            T.leaf(f"tmap:tm_{tm.name}", 64, LeafInfo("int", False, 0, 2**64 - 1,
                                                      note=f"generic address of tm_{tm.name}"))
        self.written = self._written()
        self.plan = plan_shared(kernel.shared)
        self.align = max([16] + [b.align for b in kernel.shared])
        end = max((p.base + p.nbytes for p in self.plan.placements.values()),
                  default=SMEM_BASE) - SMEM_BASE
        end = -(-end // BARRIER_BYTES) * BARRIER_BYTES
        self.bar_offset: dict[str, int] = {}
        for b in kernel.barriers:
            self.bar_offset[b.name] = end
            end += BARRIER_BYTES * b.instances
        self.smem_end = end  # bytes used from R
        tsm = T.uint(T.leaf("tsmem", 32))
        self.R = T.iadd(tsm, T.ifmod(T.isub(T.const_int(SMEM_BASE), tsm),
                                     T.const_int(self.align)))
        self.assumptions = self._assumptions()
        self.numel = {t.name: self._numel(t) for t in kernel.params}
        self.stmts(kernel.body, self._root())

    # -- launch facts ---------------------------------------------------------------------

    def _root(self) -> _Ctx:
        return _Ctx(T.TRUE, (), {}, None)

    def _size_ranges(self) -> dict[str, tuple[int, int]]:
        k = self.k
        ctx = isl.Context()
        env = affine.AffineEnv(affine.make_space(ctx, k.sizes, ()))
        allowed = env.universe()
        for c in k.where:
            allowed = allowed.intersect(affine.condition(c, env).over)
        for t in k.params:
            for e in t.shape:
                pa = affine.term(e, env)
                allowed = allowed.intersect(pa.ge_set(affine.constant(env, 1)))
                allowed = allowed.intersect(pa.le_set(affine.constant(env, MAX_ELEMENTS - 1)))
        for g, limit in zip(k.grid, GRID_LIMITS, strict=False):
            pa = affine.term(g, env)
            allowed = allowed.intersect(pa.ge_set(affine.constant(env, 1)))
            allowed = allowed.intersect(pa.le_set(affine.constant(env, limit)))
        self._allowed, self._env = allowed.params(), env
        out = {}
        for name in k.sizes:
            pa = affine.term(ir.SizeVar(k.span, ir.ScalarType.INT, name), env)
            out[name] = self._range_of(pa)
        return out

    def _range_of(self, pa: isl.PwAff) -> tuple[int, int]:
        pa = pa.intersect_params(self._allowed)

        def clip(v: isl.Val, default: int) -> int:
            if v.is_infty() or v.is_neginfty() or v.is_nan():
                return default
            return max(-(2**63), min(2**63 - 1, v.to_python()))

        if self._allowed.is_empty():
            return (1, 1)
        return clip(pa.min_val(), -(2**63)), clip(pa.max_val(), 2**63 - 1)

    def _grid_max(self, g: ir.Expr) -> int:
        return self._range_of(affine.term(g, self._env))[1]

    def _assumptions(self) -> list[Term]:
        """The `where` clause, the launch contract and the block's coordinates: every
        query assumes these (leaf ranges are added by the encoder)."""
        root = self._root()
        out = [self.cond(c, root)[0] for c in self.k.where]
        for t in self.k.params:
            for e in t.shape:
                x = self.int_expr(e, root)
                out += [T.ile(T.const_int(1), x), T.ile(x, T.const_int(MAX_ELEMENTS - 1))]
        for axis, (g, limit) in enumerate(zip(self.grid, GRID_LIMITS, strict=False)):
            out += [T.ile(T.const_int(1), g), T.ile(g, T.const_int(limit)),
                    T.ilt(T.uint(T.leaf(f"ctaid.{'xyz'[axis]}", 32)), g)]
        return out

    def _numel(self, t: ir.GlobalTensor) -> Term:
        acc = T.const_int(1)
        for e in t.shape:
            acc = T.imul(acc, self.int_expr(e, self._root()))
        return acc

    def contract_products(self) -> list[Term]:
        """Fewer than 2^40 elements per tensor (products: used with exact multiplication)."""
        return [T.ilt(n, T.const_int(MAX_ELEMENTS)) for n in self.numel.values()]

    def _written(self) -> set[str]:
        from tilesafe.frontend.walk import statements

        out = set()
        for s in statements(self.k.body):
            if isinstance(s, ir.Store) and s.space is ir.Space.GLOBAL:
                out.add(s.tensor)
            elif isinstance(s, ir.TmaStore):
                out.add(self.k.tensormap(s.tensormap).tensor)
        return out

    # -- expressions ----------------------------------------------------------------------

    def int_expr(self, e: ir.Expr, ctx: _Ctx, conds: list[Term] | None = None) -> Term:
        """An integer expression (loads inside become events under ctx.cond)."""
        v = self.expr(e, ctx, conds)
        if v.w == T.INT:
            return v
        raise SpecUnsupported(f"integer expected at {e.span.line}:{e.span.col}")

    def expr(self, e: ir.Expr, ctx: _Ctx, conds: list[Term] | None = None) -> Term:
        """An expression as a term in exact integer arithmetic and the PTX float vocabulary
        (codegen/validate/spec_terms.py); division conditions go to `conds`."""
        return fold(e, SmtTerms(self, ctx, [] if conds is None else conds))

    def cond(self, e: ir.Expr, ctx: _Ctx, conds: list[Term] | None = None
             ) -> tuple[Term, list[Term]]:
        """A condition; loads in the right operand of && / || are evaluated only when the
        left operand does not decide (short-circuit), as the language says."""
        conds = [] if conds is None else conds
        if isinstance(e, ir.BinOp) and e.op in ("&&", "||"):
            a, _ = self.cond(e.lhs, ctx, conds)
            inner = replace(ctx, cond=T.and_(ctx.cond, a if e.op == "&&" else T.not_(a)))
            rconds: list[Term] = []
            b, _ = self.cond(e.rhs, inner, rconds)
            if rconds:
                guard = a if e.op == "&&" else T.not_(a)
                conds.append(T.implies(guard, T.and_(*rconds)))
            return (T.and_(a, b) if e.op == "&&" else T.or_(a, b)), conds
        if isinstance(e, ir.UnOp) and e.op == "!":
            a, _ = self.cond(e.operand, ctx, conds)
            return T.not_(a), conds
        v = self.expr(e, ctx, conds)
        if v.w != BOOL:
            raise SpecUnsupported("condition expected")
        return v, conds

    # -- memory ---------------------------------------------------------------------------

    def load(self, e: ir.Load, ctx: _Ctx, conds: list[Term]) -> Term:
        idx = [self.int_expr(i, ctx, conds) for i in e.indices]
        dtype = self._dtype(e.tensor, e.space)
        w = dtype.nbytes * 8
        data = T.leaf(f"d:{e.span.line}:{e.span.col}", w,
                      LeafInfo("nondet", note=f"value of {e.tensor}[...] at "
                                              f"{e.span.line}:{e.span.col}"))
        addr, inb = self.address(e.tensor, e.space, idx)
        self.events.append(SpecEvent(
            "ld", e, e.span, T.and_(ctx.cond, *conds), ctx.fors, (self.order, 0),
            f"load {dtype.value}", {"addr": addr, "space": e.space.value, "tensor": e.tensor,
                                    "dtype": dtype, "nc": e.tensor not in self.written},
            inb, ctx.role, data))
        if dtype.is_float:
            return T.uf(WIDEN[dtype], 32, data) if dtype in WIDEN else data
        return T.sint(data) if dtype is ir.DType.I32 else T.uint(data)

    def _dtype(self, name: str, space: ir.Space) -> ir.DType:
        if space is ir.Space.GLOBAL:
            return self.k.tensor(name).dtype
        return self.k.buffer(name).dtype

    def address(self, name: str, space: ir.Space, idx: list[Term]) -> tuple[Term, Term]:
        """(byte address -- for a global tensor its byte offset from `gbase:p_T` --,
        indices in bounds)."""
        if space is ir.Space.GLOBAL:
            t = self.k.tensor(name)
            dims = [self.int_expr(d, self._root()) for d in t.shape]
            flat = idx[0]
            for i, d in zip(idx[1:], dims[1:], strict=True):
                flat = T.iadd(T.imul(flat, d), i)
            inb = T.and_(*[T.and_(T.ile(T.const_int(0), i), T.ilt(i, d))
                           for i, d in zip(idx, dims, strict=True)])
            return T.imul(flat, T.const_int(t.dtype.nbytes)), inb
        buf = self.k.buffer(name)
        inb = T.and_(*[T.and_(T.ile(T.const_int(0), i), T.ilt(i, T.const_int(e)))
                       for i, e in zip(idx, buf.shape, strict=True)])
        return self.shared_address(buf, idx), inb

    def shared_address(self, buf: ir.SharedBuffer, idx: list[Term]) -> Term:
        start = self.plan.placements[buf.name].base - SMEM_BASE
        off = layout_terms.offset(buf, idx)
        return T.iadd(T.iadd(self.R, T.const_int(start)),
                      T.imul(off, T.const_int(buf.dtype.nbytes)))

    def barrier(self, ref: ir.BarrierRef, ctx: _Ctx, conds: list[Term],
                index: Term | None = None) -> tuple[Term, Term]:
        bar = self.k.barrier(ref.name)
        if index is None:
            index = (T.const_int(0) if ref.index is None
                     else self.int_expr(ref.index, ctx, conds))
        addr = T.iadd(T.iadd(self.R, T.const_int(self.bar_offset[ref.name])),
                      T.imul(index, T.const_int(BARRIER_BYTES)))
        inb = T.and_(T.ile(T.const_int(0), index), T.ilt(index, T.const_int(bar.instances)))
        return addr, inb

    # -- statements -----------------------------------------------------------------------

    def stmts(self, body: tuple[ir.Stmt, ...], ctx: _Ctx) -> None:
        for s in body:
            self.order += 1
            ctx = getattr(self, "s_" + type(s).__name__)(s, ctx)

    def emit(self, kind: str, s: ir.Stmt, ctx: _Ctx, conds: list[Term], what: str,
             inb: Term = T.TRUE, sub: int = 1, cond: Term | None = None, **ops: object
             ) -> SpecEvent:
        ev = SpecEvent(kind, s, s.span, T.and_(ctx.cond if cond is None else cond, *conds),
                       ctx.fors, (self.order, sub), what, dict(ops), inb, ctx.role)
        self.events.append(ev)
        return ev

    def _after(self, ctx: _Ctx, conds: list[Term]) -> _Ctx:
        """A statement's divisions by zero stop the run: later statements need them not."""
        return replace(ctx, cond=T.and_(ctx.cond, *conds)) if conds else ctx

    def s_Let(self, s: ir.Let, ctx: _Ctx) -> _Ctx:
        conds: list[Term] = []
        v = self.expr(s.value, ctx, conds)
        return replace(self._after(ctx, conds), env={**ctx.env, s.uid: v})

    def _var(self, s: ir.VarDecl | ir.Assign, ctx: _Ctx, dtype: ir.DType) -> _Ctx:
        conds: list[Term] = []
        self.expr(s.value, ctx, conds)
        info = LeafInfo("nondet", note=f"var {s.name} after {s.span.line}:{s.span.col}")
        if dtype.is_float:
            v = T.leaf(f"var:{s.uid}:{s.span.line}:{s.span.col}", 32, info)
        elif dtype is ir.DType.U8:
            v = T.uint(T.leaf(f"var:{s.uid}:{s.span.line}:{s.span.col}", 8, info))
        else:
            v = T.sint(T.leaf(f"var:{s.uid}:{s.span.line}:{s.span.col}", 32, info))
        return replace(self._after(ctx, conds), env={**ctx.env, s.uid: v})

    def s_VarDecl(self, s: ir.VarDecl, ctx: _Ctx) -> _Ctx:
        self._vars = getattr(self, "_vars", {})
        self._vars[s.uid] = s.dtype
        return self._var(s, ctx, s.dtype)

    def s_Assign(self, s: ir.Assign, ctx: _Ctx) -> _Ctx:
        return self._var(s, ctx, self._vars[s.uid])

    def s_Store(self, s: ir.Store, ctx: _Ctx) -> _Ctx:
        conds: list[Term] = []
        self.expr(s.value, ctx, conds)
        idx = [self.int_expr(i, ctx, conds) for i in s.indices]
        dtype = self._dtype(s.tensor, s.space)
        addr, inb = self.address(s.tensor, s.space, idx)
        self.emit("st", s, ctx, conds, f"store {dtype.value}", inb, addr=addr,
                  space=s.space.value, tensor=s.tensor, dtype=dtype)
        return self._after(ctx, conds)

    def s_For(self, s: ir.For, ctx: _Ctx) -> _Ctx:
        conds: list[Term] = []
        lo = self.int_expr(s.lo, ctx, conds)
        hi = self.int_expr(s.hi, ctx, conds)
        n = counter(s)
        T.leaf(f"n:F{s.var.uid}", 64, LeafInfo("int", False, 0, 2**64 - 1,
                                               note=f"iteration of for {s.var.name}"))
        var = T.iadd(lo, T.imul(T.uint(n), T.const_int(s.step)))
        outer = T.and_(ctx.cond, *conds)
        self.loops[s.var.uid] = SpecLoop(s, n, lo, hi, s.step, outer, ctx.fors)
        inner = _Ctx(T.and_(outer, T.ilt(var, hi)), ctx.fors + (s,),
                     {**ctx.env, s.var.uid: var}, ctx.role)
        self.stmts(s.body, inner)
        return self._after(ctx, conds)

    def s_If(self, s: ir.If, ctx: _Ctx) -> _Ctx:
        c, conds = self.cond(s.cond, ctx)
        base = T.and_(ctx.cond, *conds)
        self.stmts(s.then, replace(ctx, cond=T.and_(base, c)))
        self.stmts(s.orelse, replace(ctx, cond=T.and_(base, T.not_(c))))
        return self._after(ctx, conds)

    def s_Role(self, s: ir.Role, ctx: _Ctx) -> _Ctx:
        t = thread()
        lo, hi = s.threads.lo, s.threads.hi
        if s.elect_one:
            inside = T.eq(t, T.const_int(lo))
        else:
            inside = T.and_(T.ile(T.const_int(lo), t), T.ilt(t, T.const_int(hi)))
        self.stmts(s.body, _Ctx(T.and_(ctx.cond, inside), ctx.fors, ctx.env, s))
        return ctx

    def s_Init(self, s: ir.Init, ctx: _Ctx) -> _Ctx:
        bar = self.k.barrier(s.barrier.name)
        conds: list[Term] = []
        if s.barrier.index is None and bar.length is not None:
            e = T.leaf(f"e:{s.span.line}:{s.span.col}", 32,
                       LeafInfo("int", False, 0, bar.instances - 1,
                                note=f"element of {bar.name}"))
            addr, inb = self.barrier(s.barrier, ctx, conds, T.uint(e))
            self.emit("mbar.init", s, ctx, conds, "init", inb, addr=addr, count=bar.count,
                      elem=e)
        else:
            addr, inb = self.barrier(s.barrier, ctx, conds)
            self.emit("mbar.init", s, ctx, conds, "init", inb, addr=addr, count=bar.count)
        return self._after(ctx, conds)

    def s_Fence(self, s: ir.Fence, ctx: _Ctx) -> _Ctx:
        kind = "fence.mbarrier_init" if s.kind is ir.FenceKind.MBARRIER_INIT \
            else "fence.proxy_async"
        self.emit(kind, s, ctx, [], f"fence {s.kind.value}")
        return ctx

    def s_Sync(self, s: ir.Sync, ctx: _Ctx) -> _Ctx:
        self.emit("bar.sync", s, ctx, [], "sync", id=0)
        return ctx

    def s_NamedBar(self, s: ir.NamedBar, ctx: _Ctx) -> _Ctx:
        kind = "bar.arrive" if s.arrive else "bar.sync"
        what = f"{'bar_arrive' if s.arrive else 'bar_sync'} {s.bar_id}, {s.count}"
        self.emit(kind, s, ctx, [], what, id=s.bar_id, count=s.count)
        return ctx

    def s_Wait(self, s: ir.Wait, ctx: _Ctx) -> _Ctx:
        conds: list[Term] = []
        addr, inb = self.barrier(s.barrier, ctx, conds)
        parity = self.int_expr(s.parity, ctx, conds)
        self.emit("mbar.wait", s, ctx, conds, "wait", inb, addr=addr, parity=parity)
        return self._after(ctx, conds)

    def _role_range(self, ctx: _Ctx) -> tuple[int, int]:
        role = ctx.role
        lo = role.threads.lo if role is not None else 0
        hi = role.threads.hi if role is not None else self.k.block
        if role is not None and role.elect_one:
            hi = lo + 1
        return lo, hi

    def s_Arrive(self, s: ir.Arrive, ctx: _Ctx) -> _Ctx:
        conds: list[Term] = []
        addr, inb = self.barrier(s.barrier, ctx, conds)
        ops: dict[str, object] = {"addr": addr}
        what = "arrive"
        if s.tx_bytes is not None:
            ops["tx"] = self.int_expr(s.tx_bytes, ctx, conds)
            what = "arrive expect_tx"
        lo, hi = self._role_range(ctx)
        t = thread()
        if s.mode is ir.ArriveMode.EACH:
            self.emit("mbar.arrive", s, ctx, conds, what, inb, **ops)
        elif s.mode is ir.ArriveMode.ONE:
            self.emit("mbar.arrive", s, ctx, conds, what, inb,
                      cond=T.and_(ctx.cond, T.eq(t, T.const_int(lo))), sub=2, **ops)
        else:
            base = T.imul(T.ifdiv(t, T.const_int(32)), T.const_int(32))
            leader = T.imax(T.const_int(lo), base)
            if not (ctx.role is not None and ctx.role.elect_one):
                if lo % 32 == 0 and hi % 32 == 0:
                    mask = T.const_int(2**32 - 1)  # whole warps: every lane of the warp
                else:
                    first = T.imax(T.isub(T.const_int(lo), base), T.const_int(0))
                    last = T.imin(T.isub(T.const_int(hi), base), T.const_int(32))
                    mask = T.isub(_pow2(last), _pow2(first))
                self.emit("converge", s, ctx, conds, "converge", mask=mask)
            self.emit("mbar.arrive", s, ctx, conds, what, inb, sub=2,
                      cond=T.and_(ctx.cond, T.eq(t, leader)), **ops)
        return self._after(ctx, conds)

    def s_ExpectTx(self, s: ir.ExpectTx, ctx: _Ctx) -> _Ctx:
        conds: list[Term] = []
        addr, inb = self.barrier(s.barrier, ctx, conds)
        tx = self.int_expr(s.nbytes, ctx, conds)
        self.emit("mbar.expect_tx", s, ctx, conds, "expect_tx", inb, addr=addr, tx=tx)
        return self._after(ctx, conds)

    def _slice(self, sl: ir.BufferSlice, ctx: _Ctx, conds: list[Term]) -> tuple[Term, Term]:
        buf = self.k.buffer(sl.buffer)
        idx = [self.int_expr(p, ctx, conds) for p in sl.prefix]
        inb = T.and_(*[T.and_(T.ile(T.const_int(0), i), T.ilt(i, T.const_int(e)))
                       for i, e in zip(idx, buf.shape, strict=False)])
        idx += [T.const_int(0)] * (len(buf.shape) - len(idx))
        return self.shared_address(buf, idx), inb

    def s_TmaLoad(self, s: ir.TmaLoad, ctx: _Ctx) -> _Ctx:
        conds: list[Term] = []
        smem, inb1 = self._slice(s.dst, ctx, conds)
        coords = tuple(self.int_expr(c, ctx, conds) for c in s.coords)
        bar, inb2 = self.barrier(s.barrier, ctx, conds)
        self.emit("tma.load", s, ctx, conds, "tma_load", T.and_(inb1, inb2), smem=smem,
                  tmap=f"tm_{s.tensormap}", coords=tuple(reversed(coords)), bar=bar,
                  dims=len(coords))
        return self._after(ctx, conds)

    def s_TmaStore(self, s: ir.TmaStore, ctx: _Ctx) -> _Ctx:
        conds: list[Term] = []
        smem, inb = self._slice(s.src, ctx, conds)
        coords = tuple(self.int_expr(c, ctx, conds) for c in s.coords)
        self.emit("tma.store", s, ctx, conds, "tma_store", inb, smem=smem,
                  tmap=f"tm_{s.tensormap}", coords=tuple(reversed(coords)), dims=len(coords))
        return self._after(ctx, conds)

    def s_CommitGroup(self, s: ir.CommitGroup, ctx: _Ctx) -> _Ctx:
        self.emit("commit", s, ctx, [], "commit_group")
        return ctx

    def s_WaitGroup(self, s: ir.WaitGroup, ctx: _Ctx) -> _Ctx:
        self.emit("wait_group", s, ctx, [], "wait_group", pending=s.pending, read=s.read)
        return ctx


def _may_be_zero(x: Term) -> bool:
    from tilesafe.codegen.validate.encode import intervals

    lo, hi = intervals([x])[id(x)]
    return lo <= 0 <= hi


def _pow2(x: Term) -> Term:
    """2^x for 0 <= x <= 32 (a lane count), as a piecewise constant."""
    acc = T.const_int(2**32)
    for k in range(31, -1, -1):
        acc = T.ite(T.eq(x, T.const_int(k)), T.const_int(2**k), acc)
    return acc
