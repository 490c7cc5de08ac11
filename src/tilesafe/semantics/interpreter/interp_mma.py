"""Tensor-core statements of the scalar engine compiled to closures: `wgmma` (a warpgroup's
convergence, then one MMA issued to the copy engine), `wgmma_commit`, `wgmma_wait N`,
`wgmma_fence`, `setmaxnreg`, and fragment register writes `acc[r] = v`. Reads `acc[r]` are
expressions (interp_exprs.py); the registers and the MMA's arithmetic are interp_tensor.py's.

Why separate: these statements share one piece of state, a warpgroup's MMAs in flight and
the groups they were committed in, and one collective rule -- the 128 threads of the
warpgroup issue each MMA together (PTX `.sync.aligned`) -- that no other family has.

The model (docs/semantics.md, "Tensor cores"):
- Issue. Every thread of the warpgroup (thread / 128) reaches the statement and evaluates
  the tile origins and scale-d; a thread waits until all 128 are there (a thread that never
  comes deadlocks the others, TS410). Threads disagreeing on a tile or on scale-d is TS531;
  a role holding part of a warpgroup is TS532. The last arrival issues ONE MMA: it joins
  every member's open group and its warpgroup's queue on the copy engine.
- `wgmma_commit` closes the thread's open group. `wgmma_wait N` blocks until at most N of
  the thread's committed groups still hold a pending MMA. An MMA never committed is never
  waited for (PTX: wait_group waits for committed groups only).
- `wgmma_fence` and `setmaxnreg` change no value in this model (a missing fence is the
  temporal checker's business).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from tilesafe.frontend import fragments as fr
from tilesafe.frontend import ir
from tilesafe.semantics.interpreter import interp_error as E
from tilesafe.semantics.interpreter.interp_agents import EFFECT, LOCAL, Blocker, MmaOp, Thread

if TYPE_CHECKING:
    from tilesafe.semantics.interpreter.interp import _Block


class _Gate:
    """One warpgroup's arrivals at one wgmma statement, for the current instance: how many
    threads are there, the operands the first of them evaluated, and a generation that
    advances when the MMA is issued (the waiting threads' signal to go on)."""

    __slots__ = ("arrived", "generation", "first", "operands")

    def __init__(self) -> None:
        self.arrived = 0
        self.generation = 0
        self.first = -1  # the thread whose operands the others must match
        self.operands: tuple = ()


class MmaCompiler:
    """`s_<Stmt>` for Wgmma, WgmmaFence, WgmmaCommit, WgmmaWait, SetMaxNReg, FragStore."""

    def __init__(self, blk: _Block, expr: Callable[[ir.Expr], Callable[[Any], Any]]) -> None:
        self.b = blk
        self.k = blk.kernel
        self.expr = expr

    # -- operands ---------------------------------------------------------------------------

    def tile(self, t: ir.MmaTile) -> Callable[[Thread], tuple[int, ...]]:
        """The tile's origin (one start per buffer dim) for a thread, bounds-checked (TS202):
        the whole tile inside the buffer."""
        starts = [self.expr(i.start) for i in t.index]
        shape = self.k.buffer(t.buffer).shape
        extents = [1 if i.extent is None else i.extent for i in t.index]
        blk = self.b

        def origin(th: Thread) -> tuple[int, ...]:
            o = tuple(f(th) for f in starts)
            for s, e, d in zip(o, extents, shape, strict=True):
                if not (0 <= s and s + e <= d):
                    tiles = ", ".join(str(s) if i.extent is None else f"{s} : {i.extent}"
                                      for s, i in zip(o, t.index, strict=True))
                    raise blk.err(E.SHARED_OOB, f"wgmma tile {t.buffer}[{tiles}] reaches "
                                  f"outside shape {list(shape)}", t.span, th,
                                  tensor=t.buffer, origin=list(o), shape=list(shape))
            return o

        return origin

    def slots(self, t: ir.MmaTile) -> Callable[[tuple[int, ...]], np.ndarray]:
        """Element slots [rows, cols] of the tile at an origin: logical element (i, j) of
        the tile (after `.T`) is the buffer coordinate origin + i along `ranged[0]` and
        + j along `ranged[1]`, placed by the buffer's layout."""
        pl = self.b.run.plan.placements[t.buffer]
        table = np.asarray(pl.slots, dtype=np.int64)
        strides = np.asarray(pl.strides, dtype=np.int64)
        rdim, cdim = t.ranged
        rows, cols = t.shape
        grid = (np.arange(rows)[:, None] * strides[rdim]
                + np.arange(cols)[None, :] * strides[cdim])

        def at(origin: tuple[int, ...]) -> np.ndarray:
            return table[int(np.dot(origin, strides)) + grid]

        return at

    # -- statements -------------------------------------------------------------------------

    def s_Wgmma(self, s: ir.Wgmma, role: ir.Role | None):
        blk = self.b
        a_origin, b_origin = self.tile(s.a), self.tile(s.b)
        a_at, b_at = self.slots(s.a), self.slots(s.b)
        dtype = self.k.buffer(s.a.buffer).dtype
        cond = self.expr(s.scale_d) if s.scale_d is not None else None
        lo = role.threads.lo if role is not None else 0
        hi = role.threads.hi if role is not None else blk.nthreads
        if role is not None and role.elect_one:
            hi = lo + 1
        hi = min(hi, blk.nthreads)
        rname = role.name if role is not None else "block"
        gates: dict[int, _Gate] = {}

        def operands(t: Thread) -> tuple:
            scale = s.accumulate and (cond is None or bool(cond(t)))
            return a_origin(t), b_origin(t), scale

        def disagree(t: Thread, gate: _Gate, ops: tuple) -> str:
            names = ("the A tile's origin", "the B tile's origin", "scale-d")
            i = next(i for i in range(3) if ops[i] != gate.operands[i])
            return (f"wgmma: thread {t.tid} reaches it with {names[i]} {ops[i]}, thread "
                    f"{gate.first} of its warpgroup with {gate.operands[i]}: one MMA of a "
                    "warpgroup has one A, one B and one scale-d")

        def arrive(t: Thread) -> Blocker | None:
            wg = t.tid // fr.WARPGROUP
            first, end = wg * fr.WARPGROUP, (wg + 1) * fr.WARPGROUP
            if lo > first or hi < end:
                inside = max(0, min(hi, end) - max(lo, first))
                raise blk.err(E.MMA_PARTIAL, f"wgmma by {inside} of the 128 threads of "
                              f"warpgroup {wg} (threads {first} .. {end - 1}): the {rname} "
                              f"role holds threads {lo} .. {hi - 1}; a wgmma is executed by "
                              "whole warpgroups", s.span, t, warpgroup=wg)
            ops = operands(t)
            gate = gates.setdefault(wg, _Gate())
            if gate.arrived == 0:
                gate.first, gate.operands = t.tid, ops
            elif ops != gate.operands:
                raise blk.err(E.MMA_NONUNIFORM, disagree(t, gate, ops), s.span, t,
                              warpgroup=wg)
            gate.arrived += 1
            gen = gate.generation
            if gate.arrived == fr.WARPGROUP:
                (ao, bo, scale) = gate.operands
                op = MmaOp(s, wg, a_at(ao), b_at(bo), dtype, scale)
                op.cta = blk.rank
                for member in blk.threads[first:end]:
                    member.mma_open.append(op)
                blk.tensor.issue(op)
                gate.arrived, gate.generation = 0, gen + 1
                return None
            return Blocker(s, rname, ("wgmma", id(gates), wg, gen),
                           lambda: gate.generation != gen,
                           lambda: f"converge at wgmma (line {s.span.line}; "
                           f"{gate.arrived} of 128 threads of warpgroup {wg} there)")

        return EFFECT, s, arrive

    def s_WgmmaCommit(self, s: ir.WgmmaCommit, role):
        def commit(t: Thread) -> None:
            t.mma_groups.append(t.mma_open)
            t.mma_open = []

        return LOCAL, s, commit

    def s_WgmmaWait(self, s: ir.WgmmaWait, role):
        limit = s.pending
        rname = role.name if role is not None else "block"

        def pending(t: Thread) -> int:
            groups = t.mma_groups
            while groups and all(op.done for op in groups[0]):
                groups.pop(0)  # MMAs perform in order: a done oldest group stays done
            return sum(1 for g in groups if not all(op.done for op in g))

        def wait(t: Thread) -> Blocker | None:
            if pending(t) <= limit:
                return None
            return Blocker(s, rname, ("wgmma_wait", t.tid), lambda: pending(t) <= limit,
                           lambda: f"wgmma_wait {limit} ({pending(t)} committed groups with "
                           "MMAs pending)")

        return EFFECT, s, wait

    def s_WgmmaFence(self, s: ir.WgmmaFence, role):
        return LOCAL, s, lambda t: None

    def s_SetMaxNReg(self, s: ir.SetMaxNReg, role):
        return LOCAL, s, lambda t: None

    def s_FragStore(self, s: ir.FragStore, role):
        """An effect (a pause before it): an MMA into the same registers may perform before
        or after it, whichever the schedule picks -- the race is observable."""
        value = self.expr(s.value)
        write = self.b.tensor.writer(s.fragment, self.expr(s.reg), s.span)

        def store(t: Thread) -> None:
            write(t, value(t))

        return EFFECT, s, store
