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

The statement walk is spec_walk.py; the event and loop records are spec_events.py.

Leaves shared with the PTX side carry the same names: `param:s_N` (a size), `tid.x`,
`ctaid.x`, `tsmem`, `gbase:p_T`, `tmap:tm_x`. Loop counters are `n:F<uid>`; the PTX's
counters are renamed to them once loops are matched.
"""

from __future__ import annotations

from dataclasses import replace

import islpy as isl

from tilesafe.codegen.validate import layout_terms, spec_mma
from tilesafe.codegen.validate import terms as T
from tilesafe.codegen.validate.spec_events import (  # noqa: F401 - re-exported
    FragRead,
    SpecEvent,
    SpecLoop,
    WalkCtx,
    counter,
    size_leaf,
    thread,
)
from tilesafe.codegen.validate.spec_terms import (  # noqa: F401 - re-exported
    F32_TO_I32,
    FLOAT_CMP,
    FLOAT_OPS,
    INT_TO_F32,
    SmtTerms,
    SpecUnsupported,
)
from tilesafe.codegen.validate.spec_walk import StatementWalk
from tilesafe.codegen.validate.terms import BOOL, LeafInfo, Term
from tilesafe.frontend import ir
from tilesafe.frontend.fold import fold
from tilesafe.frontend.limits import MBARRIER_BYTES
from tilesafe.semantics.expr import affine
from tilesafe.semantics.hw.mma_rules import DescriptorVerdict
from tilesafe.semantics.interpreter.smem import SMEM_BASE, plan_shared

MAX_ELEMENTS = 2**40  # the launch contract (codegen/ranges.py, gpu/launcher.py)
GRID_LIMITS = (2**31 - 1, 65535, 65535)
SMEM_WINDOW = 2**18  # the dynamic shared array starts inside the block's 228 KiB window
BARRIER_BYTES = MBARRIER_BYTES  # the PTX ISA size of an mbarrier object

WIDEN = {ir.DType.F16: "cvt.f32.f16", ir.DType.BF16: "cvt.f32.bf16"}


class Spec:
    """Everything the IR says, as terms: assumptions and one event per access or
    synchronisation statement instance."""

    def __init__(self, kernel: ir.Kernel) -> None:
        self.k = kernel
        self.events: list[SpecEvent] = []
        self.loops: dict[int, SpecLoop] = {}
        self.order = 0
        self.frag_reads: dict[str, FragRead] = {}  # leaf name -> the fragment read
        self.unrolled: dict[int, str] = {}  # uid of an unrolled loop's variable -> its name
        self.fresh_uid = 0  # below every source uid: loops of unrolled copies (spec_mma.py)
        self._descriptors: dict[tuple[int, str], DescriptorVerdict] | None = None
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
        StatementWalk(self).stmts(kernel.body, self._root())

    # -- launch facts ---------------------------------------------------------------------

    def _root(self) -> WalkCtx:
        return WalkCtx(T.TRUE, (), {}, None)

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
        lo, hi = affine.bounds(pa)
        return clip(lo, -(2**63)), clip(hi, 2**63 - 1)

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

    def int_expr(self, e: ir.Expr, ctx: WalkCtx, conds: list[Term] | None = None) -> Term:
        """An integer expression (loads inside become events under ctx.cond)."""
        v = self.expr(e, ctx, conds)
        if v.w == T.INT:
            return v
        raise SpecUnsupported(f"integer expected at {e.span.line}:{e.span.col}")

    def expr(self, e: ir.Expr, ctx: WalkCtx, conds: list[Term] | None = None) -> Term:
        """An expression as a term in exact integer arithmetic and the PTX float vocabulary
        (codegen/validate/spec_terms.py); division conditions go to `conds`."""
        return fold(e, SmtTerms(self, ctx, [] if conds is None else conds))

    def cond(self, e: ir.Expr, ctx: WalkCtx, conds: list[Term] | None = None
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

    def load(self, e: ir.Load, ctx: WalkCtx, conds: list[Term]) -> Term:
        idx = [self.int_expr(i, ctx, conds) for i in e.indices]
        dtype = self._dtype(e.tensor, e.space)
        w = dtype.nbytes * 8
        data = T.leaf(f"d:{e.span.line}:{e.span.col}{ctx.tag}", w,
                      LeafInfo("nondet", note=f"value of {e.tensor}[...] at "
                                              f"{e.span.line}:{e.span.col}"))
        addr, inb = self.address(e.tensor, e.space, idx)
        self.events.append(SpecEvent(
            "ld", e, e.span, T.and_(ctx.cond, *conds), ctx.fors, (self.order, 0),
            f"load {dtype.value}", {"addr": addr, "space": e.space.value, "tensor": e.tensor,
                                    "dtype": dtype, "nc": e.tensor not in self.written},
            inb, ctx.role, data, ctx.copies))
        if dtype.is_float:
            return T.uf(WIDEN[dtype], 32, data) if dtype in WIDEN else data
        return T.sint(data) if dtype is ir.DType.I32 else T.uint(data)

    def frag_read(self, e: ir.FragLoad, ctx: WalkCtx, conds: list[Term]) -> Term:
        return spec_mma.frag_read(self, e, ctx, conds)

    def copy_label(self, copies: tuple[tuple[int, int], ...]) -> str:
        """' (r = 3)': which copy of its unrolled loops an event is (empty outside)."""
        inner = ", ".join(f"{self.unrolled.get(u, f'uid {u}')} = {v}" for u, v in copies)
        return f" ({inner})" if inner else ""

    def descriptor(self, s: ir.Wgmma, which: str) -> DescriptorVerdict:
        if self._descriptors is None:
            self._descriptors = spec_mma.descriptors(self.k)
        return self._descriptors.get((id(s), which), DescriptorVerdict(
            None, (), (), undecided="the access relations have no such operand"))

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

    def barrier(self, ref: ir.BarrierRef, ctx: WalkCtx, conds: list[Term],
                index: Term | None = None) -> tuple[Term, Term]:
        bar = self.k.barrier(ref.name)
        if index is None:
            index = (T.const_int(0) if ref.index is None
                     else self.int_expr(ref.index, ctx, conds))
        addr = T.iadd(T.iadd(self.R, T.const_int(self.bar_offset[ref.name])),
                      T.imul(index, T.const_int(BARRIER_BYTES)))
        inb = T.and_(T.ile(T.const_int(0), index), T.ilt(index, T.const_int(bar.instances)))
        return addr, inb


def _may_be_zero(x: Term) -> bool:
    from tilesafe.codegen.validate.encode import intervals

    lo, hi = intervals([x])[id(x)]
    return lo <= 0 <= hi
