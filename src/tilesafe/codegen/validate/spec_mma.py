"""The specification of the tensor-core statements: `wgmma` with the descriptors its
operands must carry, `wgmma_fence` / `wgmma_commit` / `wgmma_wait`, `setmaxnreg`,
fragment writes `acc[r] = v`, and the loops that must be unrolled because their body names
fragment registers by the loop variable.

Why separate from spec_walk.py: these statements say what the *hardware* must be told,
not where memory is touched. A wgmma's operand tiles reach the tensor cores only through
64-bit matrix descriptors, so the specification of its operands is the descriptor
semantics/hw/wgmma_desc.py encodes for the tile the IR names -- the start address (the swizzle
of the shared address of the tile's first element, through the buffer's layout, >> 4) and
the LBO, SBO and swizzle mode semantics/hw/mma_rules.py proved read exactly the tile (TS530).
A register is named in the instruction text, so `acc[r]` needs a constant r: a `for` whose
body indexes a fragment by its variable (directly or through `let`s) has one copy of its
body per iteration in any correct PTX, and the walk states each copy separately, the
variable a constant (`WalkCtx.copies`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING

import islpy as isl

from tilesafe.codegen.validate import terms as T
from tilesafe.codegen.validate.spec_events import FragRead, WalkCtx
from tilesafe.codegen.validate.spec_terms import SpecUnsupported
from tilesafe.codegen.validate.terms import LeafInfo, Term
from tilesafe.frontend import ir, walk
from tilesafe.frontend.span import Span
from tilesafe.semantics.access.access import collect
from tilesafe.semantics.hw import mma_rules
from tilesafe.semantics.hw import wgmma_desc as wd
from tilesafe.semantics.hw.mma_rules import DescriptorVerdict

if TYPE_CHECKING:
    from tilesafe.codegen.validate.spec import Spec
    from tilesafe.codegen.validate.spec_events import SpecEvent

# PTX type names of the wgmma's inputs and accumulator, by IR dtype
INPUT_TYPE = {ir.DType.BF16: "bf16", ir.DType.F16: "f16", ir.DType.F32: "tf32",
              ir.DType.U8: "u8"}
ACC_TYPE = {ir.DType.F32: "f32", ir.DType.I32: "s32"}
MAX_COPIES = 4096  # copies one unrolled loop may have before the walk gives up
SHARED_FIELD = 1 << 14  # the descriptor's 14-bit start address field (address >> 4)


def unrolled(s: ir.For) -> bool:
    """Must this loop be unrolled? -- a fragment register index in its body depends on the
    loop variable (a register number is part of the instruction, so every iteration is
    its own code), or the bounds of an inner loop that must be unrolled do (that loop's
    copies exist only once the variable is a constant); directly or through `let`s."""
    dependent = {s.var.uid}
    body = list(walk.statements(s.body))
    changed = True
    while changed:
        changed = False
        for x in body:
            if isinstance(x, ir.Let) and x.uid not in dependent \
                    and _mentions(x.value, dependent):
                dependent.add(x.uid)
                changed = True
    for x in body:
        if isinstance(x, ir.For) and (_mentions(x.lo, dependent)
                                      or _mentions(x.hi, dependent)) and unrolled(x):
            return True
        regs = [x.reg] if isinstance(x, ir.FragStore) else []
        for e in walk.own_exprs(x):
            regs += [y.reg for y in walk.subexprs(e) if isinstance(y, ir.FragLoad)]
        if any(_mentions(r, dependent) for r in regs):
            return True
    return False


def _mentions(e: ir.Expr, uids: set[int]) -> bool:
    return any(isinstance(y, (ir.LoopVar, ir.LocalRef)) and y.uid in uids
               for y in walk.subexprs(e))


def descriptor_term(addr: Term, d: wd.Descriptor) -> Term:
    """The 64-bit descriptor (as an unsigned integer) of a tile whose first element is at
    shared address `addr`: the mode's swizzle of the address (bits [4, 4 + b) XOR bits
    [7, 7 + b)), >> 4, in bits 0-13, and LBO, SBO and the mode in the fields above it
    (wgmma_desc.Descriptor.encode)."""
    start = addr
    if d.mode.bits:
        high = T.ifmod(T.ifdiv(addr, T.const_int(128)), T.const_int(1 << d.mode.bits))
        start = T.ixor(addr, T.imul(high, T.const_int(16)))
    field = T.ifmod(T.ifdiv(start, T.const_int(16)), T.const_int(SHARED_FIELD))
    return T.iadd(field, T.const_int(d.encode(0)))


class TensorCoreWalk:
    """Mixin of spec_walk.StatementWalk: `s_<Stmt>` for the tensor-core statements and the
    unrolling of `for`s over fragment registers."""

    # what StatementWalk provides
    spec: Spec
    k: ir.Kernel
    int_expr: Callable[..., Term]
    expr: Callable[..., Term]
    cond: Callable[..., tuple[Term, list[Term]]]
    stmts: Callable[[tuple[ir.Stmt, ...], WalkCtx], None]
    emit: Callable[..., SpecEvent]
    _after: Callable[[WalkCtx, list[Term]], WalkCtx]

    def unroll(self, s: ir.For, ctx: WalkCtx) -> WalkCtx:
        conds: list[Term] = []
        lo = self.int_expr(s.lo, ctx, conds)
        hi = self.int_expr(s.hi, ctx, conds)
        if not (lo.is_const and hi.is_const):
            raise SpecUnsupported(f"loop '{s.var.name}' at {s.span.line}:{s.span.col} "
                                  "indexes fragment registers but its bounds are not "
                                  "constants")
        values = range(int(lo.val), int(hi.val), s.step)  # type: ignore[call-overload]
        if len(values) > MAX_COPIES:
            raise SpecUnsupported(f"loop '{s.var.name}' would have {len(values)} copies")
        base = self._after(ctx, conds)
        self.spec.unrolled[s.var.uid] = s.var.name
        for v in values:
            inner = replace(base, env={**base.env, s.var.uid: T.const_int(v)},
                            copies=base.copies + ((s.var.uid, v),))
            self.stmts(s.body, inner)
        return base

    def per_copy(self, s: ir.For, ctx: WalkCtx) -> ir.For:
        """A counted loop inside an unrolled one is one PTX loop per copy: each copy's is a
        loop of its own (a fresh uid, its counter `n:F<uid>`, the copy in its name); the
        body still names the variable by the source's uid (the walk binds that)."""
        if not ctx.copies:
            return s
        self.spec.fresh_uid -= 1
        var = replace(s.var, uid=self.spec.fresh_uid,
                      name=f"{s.var.name}{self.spec.copy_label(ctx.copies)}")
        return replace(s, var=var)

    def _tile(self, tile: ir.MmaTile, ctx: WalkCtx, conds: list[Term]) -> tuple[Term, Term]:
        """(shared address of the tile's first element, the tile inside its buffer)."""
        buf = self.k.buffer(tile.buffer)
        starts = [self.int_expr(i.start, ctx, conds) for i in tile.index]
        inb = T.and_(*[T.and_(T.ile(T.const_int(0), x),
                              T.ile(T.iadd(x, T.const_int(i.extent or 1)), T.const_int(e)))
                       for x, i, e in zip(starts, tile.index, buf.shape, strict=True)])
        return self.spec.shared_address(buf, starts), inb

    def s_Wgmma(self, s: ir.Wgmma, ctx: WalkCtx) -> WalkCtx:
        k = self.k
        conds: list[Term] = []
        frag = k.fragment(s.acc)
        ops: dict[str, object] = {"fragment": s.acc, "n": frag.shape[1], "k": s.k,
                                  "dtype": ACC_TYPE.get(frag.dtype, frag.dtype.value),
                                  "atype": INPUT_TYPE[k.buffer(s.a.buffer).dtype]}
        inbs = []
        for which, tile in (("a", s.a), ("b", s.b)):
            addr, inb = self._tile(tile, ctx, conds)
            inbs.append(inb)
            verdict = self.spec.descriptor(s, which.upper())
            d = verdict.found.descriptor if verdict.found is not None else None
            ops[f"desc_{which}"] = descriptor_term(addr, d) if d is not None else None
            ops[f"trans_{which}"] = int(d.major is wd.Major.MN) if d is not None else None
            ops[f"why_{which}"] = verdict.failure or verdict.undecided
        if s.scale_d is not None:
            ops["scale"] = self.cond(s.scale_d, ctx, conds)[0]
        else:
            ops["scale"] = T.boolean(s.accumulate)
        self.emit("wgmma", s, ctx, conds, "wgmma", T.and_(*inbs), **ops)
        return self._after(ctx, conds)

    def s_WgmmaFence(self, s: ir.WgmmaFence, ctx: WalkCtx) -> WalkCtx:
        self.emit("wgmma.fence", s, ctx, [], "wgmma_fence")
        return ctx

    def s_WgmmaCommit(self, s: ir.WgmmaCommit, ctx: WalkCtx) -> WalkCtx:
        self.emit("wgmma.commit", s, ctx, [], "wgmma_commit")
        return ctx

    def s_WgmmaWait(self, s: ir.WgmmaWait, ctx: WalkCtx) -> WalkCtx:
        self.emit("wgmma.wait", s, ctx, [], "wgmma_wait",
                  pending=s.pending)
        return ctx

    def s_SetMaxNReg(self, s: ir.SetMaxNReg, ctx: WalkCtx) -> WalkCtx:
        self.emit("setmaxnreg", s, ctx, [], "setmaxnreg",
                  inc=s.inc, count=s.count)
        return ctx

    def s_FragStore(self, s: ir.FragStore, ctx: WalkCtx) -> WalkCtx:
        conds: list[Term] = []
        frag = self.k.fragment(s.fragment)
        r = register_index(self.int_expr(s.reg, ctx, conds), frag, s.span)
        value = self.expr(s.value, ctx, conds)
        self.emit("frag.write", s, ctx, conds, f"write {s.fragment}[{r}]", fragment=s.fragment,
                  reg=r, value=value, dtype=frag.dtype)
        return self._after(ctx, conds)


def register_index(r: Term, frag: ir.Fragment, span: Span) -> int:
    """A fragment register index the walk evaluated: a constant inside the fragment (the
    code generator refuses anything else, TS706)."""
    if not r.is_const or not 0 <= int(r.val) < frag.regs:  # type: ignore[arg-type]
        raise SpecUnsupported(f"register index of '{frag.name}' at {span.line}:{span.col} "
                              f"is not a constant in 0 .. {frag.regs - 1}")
    return int(r.val)  # type: ignore[arg-type]


def frag_read(spec: Spec, e: ir.FragLoad, ctx: WalkCtx, conds: list[Term]) -> Term:
    """`acc[r]` in an expression: a leaf standing for the register's value where this
    statement reads it (fragment_checks.py relates it to the PTX register holding
    fragment register r there); i32 fragments read as signed integers."""
    frag = spec.k.fragment(e.fragment)
    r = register_index(spec.int_expr(e.reg, ctx, conds), frag, e.span)
    name = f"frag:{e.fragment}:{r}@{spec.order}"
    spec.frag_reads[name] = FragRead(e.fragment, r, spec.order)
    v = T.leaf(name, 32, LeafInfo("nondet", note=f"{e.fragment}[{r}] at "
                                                 f"{e.span.line}:{e.span.col}"))
    return v if frag.dtype.is_float else T.sint(v)


def descriptors(kernel: ir.Kernel) -> dict[tuple[int, str], DescriptorVerdict]:
    """What semantics/mma_rules proves about every wgmma operand, by (id of the statement,
    "A" or "B"): the matrix descriptor that reads its tile at every origin and placement
    (TS530), or why there is none."""
    accesses = collect(kernel, isl.Context())
    return {(id(op.stmt), op.which): mma_rules.descriptor(kernel, op)
            for op in mma_rules.operands(accesses)}
