"""Expressions of the scalar engine compiled to closures `t -> value`: operators and
constants as semantics/expr/evaluate.py says, leaves from the block (sizes, block index) and the
thread (registers, `thread`, `lane`, `warp_id`, fragment registers `acc[r]`), loads with
their bounds checks (TS201, TS202); and which expressions are visible (read memory another
agent may write: shared memory, written tensors, fragment registers an MMA may update).

Why separate: statements of every family (interp_compile.py, interp_sync.py,
interp_copies.py) compile their operands through this one place, so an index means the
same row-major, bounds-checked position everywhere; the visibility rule decides where a
thread must pause before a statement.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from tilesafe.frontend import ir
from tilesafe.frontend.span import Span
from tilesafe.semantics.expr import evaluate
from tilesafe.semantics.interpreter import interp_error as E
from tilesafe.semantics.interpreter.interp_agents import Thread
from tilesafe.semantics.interpreter.interp_error import InterpError

if TYPE_CHECKING:
    from tilesafe.semantics.interpreter.interp import _Block


class ExprCompiler:
    """`expr(e)` -> closure; `index_fn` the bounds-checked row-major index of an access."""

    def __init__(self, blk: _Block) -> None:
        self.b = blk
        self.run = blk.run
        self.visible_tensors = blk.run.written

    # -- visibility -------------------------------------------------------------------------

    def visible(self, e: ir.Expr | None) -> bool:
        if e is None:
            return False
        if isinstance(e, ir.Load):
            if e.space is ir.Space.SHARED or e.tensor in self.visible_tensors:
                return True
            return any(self.visible(i) for i in e.indices)
        if isinstance(e, ir.BinOp):
            return self.visible(e.lhs) or self.visible(e.rhs)
        if isinstance(e, ir.UnOp):
            return self.visible(e.operand)
        if isinstance(e, ir.Call):
            return any(self.visible(a) for a in e.args)
        # A fragment register is written by the warpgroup's MMAs, asynchronously: reading
        # one is a step of its own, so an MMA may perform just before or just after it.
        return isinstance(e, ir.FragLoad)

    # -- expressions ------------------------------------------------------------------------

    def expr(self, e: ir.Expr) -> Callable[[Any], Any]:
        """Operators and constants mean what semantics/expr/evaluate.py says; the leaves are this
        block's sizes and indices and the thread's registers and memory."""
        return evaluate.compile_expr(e, self.leaf)

    def leaf(self, e: ir.Expr) -> Callable[[Any], Any]:
        if isinstance(e, ir.SizeVar):
            v = self.run.sizes[e.name]
            return lambda t: v
        if isinstance(e, ir.Builtin):
            return self.e_Builtin(e)
        if isinstance(e, (ir.LoopVar, ir.LocalRef)):
            uid = e.uid
            return lambda t: t.vals[uid]
        if isinstance(e, ir.Load):
            return self.e_Load(e)
        if isinstance(e, ir.FragLoad):
            return self.b.tensor.reader(e.fragment, self.expr(e.reg), e.span)
        raise TypeError(f"no meaning for {type(e).__name__}")

    def e_Builtin(self, e: ir.Builtin):
        kind = e.kind
        if kind is ir.BuiltinKind.THREAD:
            return lambda t: t.tid
        if kind is ir.BuiltinKind.LANE:
            return lambda t: t.lane
        if kind is ir.BuiltinKind.WARP_ID:
            return lambda t: t.warp
        axis = {ir.BuiltinKind.BLOCK_X: 0, ir.BuiltinKind.BLOCK_Y: 1, ir.BuiltinKind.BLOCK_Z: 2}
        idx = self.b.block_idx
        v = idx[axis[kind]] if axis[kind] < len(idx) else 0
        return lambda t: v

    def e_Load(self, e: ir.Load):
        if e.space is ir.Space.GLOBAL:
            g = self.run.globals[e.tensor]
            flat = self.index_fn(e.tensor, g.shape, e.indices, e.span, E.GLOBAL_OOB, "global")
            read = g.read
            return lambda t: read(flat(t))
        pl = self.run.plan.placements[e.tensor]
        flat = self.index_fn(e.tensor, pl.buffer.shape, e.indices, e.span, E.SHARED_OOB,
                             "shared")
        slots = pl.slots
        if e.cta is not None:
            # A peer's copy of the buffer: the same slots in that CTA's shared memory.
            blk, rank, dtype, span = self.b, self.expr(e.cta), pl.buffer.dtype, e.span
            what = f"read of '{e.tensor}'"

            def read_peer(t: Thread) -> Any:
                peer = blk.peer(rank(t), t, span, what)
                return peer.codecs[dtype][0](slots[flat(t)])

            return read_peer
        read = self.b.codecs[pl.buffer.dtype][0]
        return lambda t: read(slots[flat(t)])

    def index_fn(self, name: str, shape: tuple[int, ...], indices: tuple[ir.Expr, ...],
                 span: Span, code: str, space: str) -> Callable[[Any], int]:
        """Row-major linear index of a logical coordinate, raising TS201/TS202 outside."""
        fns = [self.expr(i) for i in indices]
        blk = self.b

        def oob(t: Thread, idx: tuple[int, ...]) -> InterpError:
            return blk.err(code, f"{space} access {name}{list(idx)} is outside shape "
                           f"{list(shape)}", span, t, tensor=name, index=list(idx),
                           shape=list(shape))

        if len(fns) == 1:
            (f0,), (d0,) = fns, shape

            def flat1(t: Thread) -> int:
                i = f0(t)
                if 0 <= i < d0:
                    return i
                raise oob(t, (i,))

            return flat1
        if len(fns) == 2:
            (f0, f1), (d0, d1) = fns, shape

            def flat2(t: Thread) -> int:
                i, j = f0(t), f1(t)
                if 0 <= i < d0 and 0 <= j < d1:
                    return i * d1 + j
                raise oob(t, (i, j))

            return flat2

        if len(fns) == 3:
            (f0, f1, f2), (d0, d1, d2) = fns, shape

            def flat3(t: Thread) -> int:
                i, j, k = f0(t), f1(t), f2(t)
                if 0 <= i < d0 and 0 <= j < d1 and 0 <= k < d2:
                    return (i * d1 + j) * d2 + k
                raise oob(t, (i, j, k))

            return flat3

        def flatn(t: Thread) -> int:
            k = 0
            idx = tuple(f(t) for f in fns)
            for i, d in zip(idx, shape, strict=True):
                if not 0 <= i < d:
                    raise oob(t, idx)
                k = k * d + i
            return k

        return flatn
