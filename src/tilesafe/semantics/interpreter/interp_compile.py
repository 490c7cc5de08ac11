"""The scalar engine's compiler: one block's IR turned into closures over its state.

A statement compiles to (kind, stmt, fn) (interp_agents.py); a body of LOCAL statements to
a plain function, any other body to a generator that yields each effectful statement
before running it, which is where the scheduler interleaves threads. This module compiles
bodies and the value and control statements (`let`, `var`, assignments, stores, `for`,
`if`, roles); expressions are interp_exprs.py, synchronisation interp_sync.py, bulk
copies interp_copies.py and tensor-core statements interp_mma.py.

Why separate from interp.py: the runner (blocks, the scheduler, the copy engine) executes
whatever this produces and knows nothing of the IR's statement forms.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from tilesafe.frontend import ir
from tilesafe.semantics.expr import evaluate, fp
from tilesafe.semantics.interpreter import interp_error as E
from tilesafe.semantics.interpreter.interp_agents import COMPOUND, EFFECT, LOCAL, Thread
from tilesafe.semantics.interpreter.interp_copies import CopyCompiler
from tilesafe.semantics.interpreter.interp_exprs import ExprCompiler
from tilesafe.semantics.interpreter.interp_mma import MmaCompiler
from tilesafe.semantics.interpreter.interp_sync import SyncCompiler

if TYPE_CHECKING:
    from tilesafe.semantics.interpreter.interp import _Block


def finishing(fn: Callable[[Thread], None]) -> Callable[[Thread], Any]:
    """A generator function that runs `fn` and finishes without yielding."""

    def gen(t: Thread):
        fn(t)
        return
        yield  # makes this a generator

    return gen


def _counted(kind: int, stmt: ir.Stmt, fn: Callable) -> Callable:
    """`fn`, counting the thread's entry into `stmt` when it is one of its units (a guided
    block: semantics/interpreter/schedule.py). Effects are counted where they are yielded (run_gen),
    compound statements and local ones here, before they run."""
    sid = id(stmt)
    if kind == EFFECT:
        return fn

    def enter(t: Thread) -> None:
        if t.units is not None and sid in t.units:
            t.unit += 1
            t.unit_stmt = sid

    if kind == LOCAL:
        def local(t: Thread) -> None:
            enter(t)
            return fn(t)

        return local

    def compound(t: Thread):
        enter(t)
        yield from fn(t)

    return compound


_VAR_CONVERT: dict[ir.DType, Callable[[Any], Any]] = {
    ir.DType.F32: lambda x: x,
    ir.DType.F16: fp.round_to_f16,
    ir.DType.BF16: fp.round_to_bf16,
    ir.DType.I32: fp.wrap_i32,
    ir.DType.U8: fp.wrap_u8,
}


class Compiler:
    """Turns IR into closures over one block's state. Expressions: t -> value. Statements:
    (kind, stmt, fn) where LOCAL fns run at once, EFFECT fns run after the thread yields the
    statement (and may return a Blocker), COMPOUND fns are generators."""

    def __init__(self, blk: _Block) -> None:
        self.b = blk
        self.run = blk.run
        self.k = blk.kernel
        exprs = ExprCompiler(blk)
        self.expr, self.visible, self.index_fn = exprs.expr, exprs.visible, exprs.index_fn
        sync = SyncCompiler(blk, self.expr)
        copies = CopyCompiler(blk, self.expr, sync.bar_index)
        mma = MmaCompiler(blk, self.expr)
        # statement type name -> its compiler (this class's own s_* included)
        self.handlers: dict[str, Callable] = {
            name: getattr(family, name) for family in (self, sync, copies, mma)
            for name in dir(family) if name.startswith("s_")}

    # -- statements -------------------------------------------------------------------------

    def block(self, stmts: tuple[ir.Stmt, ...], role: ir.Role | None):
        items = [self.stmt(s, role) for s in stmts]
        if self.b.guided:
            items = [(kind, stmt, _counted(kind, stmt, fn)) for kind, stmt, fn in items]
        if all(kind == LOCAL for kind, _, _ in items):
            fns = [fn for _, _, fn in items]

            def run_local(t: Thread) -> None:
                for fn in fns:
                    fn(t)

            return True, run_local
        steps = tuple(items)

        def run_gen(t: Thread):
            for kind, stmt, fn in steps:
                if kind == EFFECT and t.units is not None and id(stmt) in t.units:
                    t.unit += 1  # entering a unit before yielding it (see _counted)
                    t.unit_stmt = id(stmt)
                if kind == LOCAL:
                    fn(t)
                elif kind == EFFECT:
                    yield stmt
                    blocker = fn(t)
                    if blocker is not None:
                        yield blocker
                else:
                    yield from fn(t)

        return False, run_gen

    def stmt(self, s: ir.Stmt, role: ir.Role | None) -> tuple[int, ir.Stmt, Callable]:
        name = "s_" + type(s).__name__
        return (self.handlers.get(name) or getattr(self, name))(s, role)

    def s_Let(self, s: ir.Let, role):
        f, uid = self.expr(s.value), s.uid

        def let(t: Thread) -> None:
            t.vals[uid] = f(t)

        return (EFFECT if self.visible(s.value) else LOCAL), s, let

    def s_VarDecl(self, s: ir.VarDecl, role):
        f, uid, conv = self.expr(s.value), s.uid, _VAR_CONVERT[s.dtype]

        def decl(t: Thread) -> None:
            t.vals[uid] = conv(f(t))

        return (EFFECT if self.visible(s.value) else LOCAL), s, decl

    def s_Assign(self, s: ir.Assign, role):
        f, uid = self.expr(s.value), s.uid
        dtype = self.run.var_dtypes[s.uid]
        conv = _VAR_CONVERT[dtype]
        name = evaluate.assign_op(s.op, dtype.scalar)

        if name is None:
            def assign(t: Thread) -> None:
                t.vals[uid] = conv(f(t))
        else:
            combine = evaluate.CONCRETE[name]

            def assign(t: Thread) -> None:
                t.vals[uid] = conv(combine(t.vals[uid], f(t)))

        return (EFFECT if self.visible(s.value) else LOCAL), s, assign

    def s_Store(self, s: ir.Store, role):
        val = self.expr(s.value)
        if s.space is ir.Space.GLOBAL:
            g = self.run.globals[s.tensor]
            flat = self.index_fn(s.tensor, g.shape, s.indices, s.span, E.GLOBAL_OOB, "global")
            write = g.write

            def store_global(t: Thread) -> None:
                write(flat(t), val(t))

            return EFFECT, s, store_global
        pl = self.run.plan.placements[s.tensor]
        flat = self.index_fn(s.tensor, pl.buffer.shape, s.indices, s.span, E.SHARED_OOB,
                             "shared")
        write = self.b.codecs[pl.buffer.dtype][1]
        slots, eb, tags = pl.slots, pl.elem_bytes, self.b.tags
        if s.cta is not None:
            # Into a peer's copy (DSMEM): not tracked for the async proxy (a peer's TMA store
            # of it would need the writer's fence; docs/semantics.md, "Clusters").
            blk, rank, dtype, what = self.b, self.expr(s.cta), pl.buffer.dtype, \
                f"store into '{s.tensor}'"

            def store_peer(t: Thread) -> None:
                peer = blk.peer(rank(t), t, s.span, what)
                peer.codecs[dtype][1](slots[flat(t)], val(t))

            return EFFECT, s, store_peer

        def store_shared(t: Thread) -> None:
            slot = slots[flat(t)]
            write(slot, val(t))
            if tags is not None:
                addr = slot * eb
                tags[addr:addr + eb] = t.tid
                t.unfenced.append((addr, eb))

        return EFFECT, s, store_shared

    def s_For(self, s: ir.For, role):
        lo, hi, step, uid = self.expr(s.lo), self.expr(s.hi), s.step, s.var.uid
        local, body = self.block(s.body, role)
        if local:
            def loop_local(t: Thread) -> None:
                v, end = lo(t), hi(t)
                while v < end:
                    t.vals[uid] = v
                    body(t)
                    v += step

            return LOCAL, s, loop_local

        def loop(t: Thread):
            v, end = lo(t), hi(t)
            while v < end:
                t.vals[uid] = v
                yield from body(t)
                v += step

        return COMPOUND, s, loop

    def s_If(self, s: ir.If, role):
        cond = self.expr(s.cond)
        then_local, then = self.block(s.then, role)
        else_local, orelse = self.block(s.orelse, role)
        pause = self.visible(s.cond)
        if then_local and else_local and not pause:
            def if_local(t: Thread) -> None:
                (then if cond(t) else orelse)(t)

            return LOCAL, s, if_local

        def if_gen(t: Thread):
            if pause:
                yield s
            branch, is_local = (then, then_local) if cond(t) else (orelse, else_local)
            if is_local:
                branch(t)
            else:
                yield from branch(t)

        return COMPOUND, s, if_gen

    def s_Role(self, s: ir.Role, role):
        lo, hi, elect = s.threads.lo, s.threads.hi, s.elect_one
        local, body = self.block(s.body, s)

        def member(t: Thread) -> bool:
            return t.tid == lo if elect else lo <= t.tid < hi

        if local:
            def role_local(t: Thread) -> None:
                if member(t):
                    body(t)

            return LOCAL, s, role_local

        def role_gen(t: Thread):
            if member(t):
                yield from body(t)

        return COMPOUND, s, role_gen
