"""Bulk copies in the scalar engine: `tma_load` / `tma_store` issue a Copy for the block's
copy engine (its shared slots and global positions computed at issue, with the
descriptor, alignment and bounds checks), `commit_group` and `wait_group` track a thread's
bulk groups.

Why separate: these statements do not touch memory themselves -- the copy engine performs
the copies as separately scheduled agents (interp.py, `_Block.perform`) -- and their
state, a thread's open and committed groups, is theirs alone.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from tilesafe.frontend import ir
from tilesafe.semantics.hw import tma_rules
from tilesafe.semantics.interpreter import interp_error as E
from tilesafe.semantics.interpreter.interp_agents import EFFECT, LOCAL, Blocker, Copy, Thread
from tilesafe.semantics.interpreter.smem import NAN_BITS, Placement

if TYPE_CHECKING:
    from tilesafe.semantics.interpreter.interp import _Block


class CopyCompiler:
    """`s_<Stmt>` for TmaLoad, TmaStore, CommitGroup, WaitGroup."""

    def __init__(self, blk: _Block, expr: Callable[[ir.Expr], Callable[[Any], Any]],
                 bar_index: Callable[[ir.BarrierRef], Callable[[Any], int]]) -> None:
        self.b = blk
        self.run = blk.run
        self.k = blk.kernel
        self.expr = expr
        self.bar_index = bar_index

    def tma_common(self, s: ir.TmaLoad | ir.TmaStore, sl: ir.BufferSlice):
        """Closure computing, for one issuing thread, the copy's shared slots and global
        positions (a Copy without kind-specific fields)."""
        blk, run = self.b, self.run
        tm = self.k.tensormap(s.tensormap)
        g = run.globals[tm.tensor]
        pl: Placement = run.plan.placements[sl.buffer]
        eb = pl.elem_bytes
        prefix = [self.expr(p) for p in sl.prefix]
        coords = [self.expr(c) for c in s.coords]
        rank_buf = len(pl.buffer.shape)
        box_grid = np.indices(tm.box).reshape(len(tm.box), -1).astype(np.int64)
        gshape = np.array(g.shape, dtype=np.int64).reshape(-1, 1)
        gstrides = np.array(g.strides, dtype=np.int64).reshape(-1, 1)
        fill = NAN_BITS.get(g.tensor.dtype, 0) if tm.oob_fill == "nan" else 0
        kind = "load" if isinstance(s, ir.TmaLoad) else "store"

        def make(t: Thread) -> Copy:
            run.check_tensormap(tm, s.span)
            pre = tuple(f(t) for f in prefix)
            for p, d in zip(pre, pl.buffer.shape, strict=False):
                if not 0 <= p < d:
                    raise blk.err(E.SHARED_OOB, f"slice {sl.buffer}{list(pre)} is outside shape "
                                  f"{list(pl.buffer.shape)}", sl.span, t)
            base = pl.address(pre + (0,) * (rank_buf - len(pre)))
            if base % tma_rules.SMEM_ALIGNMENT:
                raise blk.err("TS510", f"TMA shared address {base} of {sl.buffer}{list(pre)} "
                              f"is not {tma_rules.SMEM_ALIGNMENT}-byte aligned", sl.span, t)
            addrs = base + run.box_offsets(tm, eb, base)
            if addrs.min() < pl.base or addrs.max() + eb > pl.base + pl.nbytes:
                raise blk.err(E.SHARED_OOB, f"TMA box at {sl.buffer}{list(pre)} reaches outside "
                              f"the buffer (bytes {pl.base}..{pl.base + pl.nbytes - 1})",
                              sl.span, t)
            origin = np.array([f(t) for f in coords], dtype=np.int64).reshape(-1, 1)
            gidx = origin + box_grid
            mask = np.all((gidx >= 0) & (gidx < gshape), axis=0)
            c = Copy(kind, s, t.tid, blk.rank)
            c.g, c.elem_bytes, c.buffer, c.fill = g, eb, sl.buffer, fill
            c.addrs, c.slots = addrs, addrs // eb
            c.flat, c.mask = np.where(mask, (gidx * gstrides).sum(axis=0), 0), mask
            return c

        return make

    def s_TmaLoad(self, s: ir.TmaLoad, role):
        blk, name = self.b, s.barrier.name
        make, index = self.tma_common(s, s.dst), self.bar_index(s.barrier)
        mask = self.expr(s.multicast) if s.multicast is not None else None

        def land_in(t: Thread, dst: Any, i: int) -> None:
            """One copy of the box into CTA `dst`'s slice, completing on its barrier."""
            if not dst.bars[name][i].initialized:
                raise blk.err(E.UNINIT, f"tma_load signals mbarrier {dst.label(name, i)} "
                              + (f"of CTA {dst.rank} " if dst is not blk else "")
                              + "before init", s.span, t, barriers=dst.barrier_states())
            if not dst.fenced[name][i]:
                raise blk.err(E.UNFENCED_INIT, f"tma_load signals mbarrier "
                              f"{dst.label(name, i)}"
                              + (f" of CTA {dst.rank}" if dst is not blk else "")
                              + f" whose init (thread {dst.init_by[name][i]}) was not "
                              "followed by 'fence mbarrier_init'", s.span, t)
            c = make(t)
            c.cta = dst.rank
            c.bar, c.nbytes = (name, i), s.nbytes
            blk.copies.append(c)

        def tma_load(t: Thread) -> None:
            i = index(t)
            if mask is None:
                land_in(t, blk, i)
                return
            bits = mask(t)
            n = len(blk.cluster.ctas)
            if not 0 < bits < 1 << n:
                raise blk.err(E.BAD_RANK, f"multicast mask {bits} names no CTA or one outside "
                              f"the cluster (ranks 0 .. {n - 1})", s.span, t, mask=bits)
            for r in range(n):
                if (bits >> r) & 1:
                    land_in(t, blk.peer(r, t, s.span, "multicast into the shared memory"), i)

        return EFFECT, s, tma_load

    def s_TmaStore(self, s: ir.TmaStore, role):
        blk, make = self.b, self.tma_common(s, s.src)

        def tma_store(t: Thread) -> None:
            c = make(t)
            t.open_group.append(c)
            blk.copies.append(c)

        return EFFECT, s, tma_store

    def s_CommitGroup(self, s: ir.CommitGroup, role):
        def commit(t: Thread) -> None:
            t.groups.append(t.open_group)
            t.open_group = []

        return LOCAL, s, commit

    def s_WaitGroup(self, s: ir.WaitGroup, role):
        """PTX `cp.async.bulk.wait_group[.read] N`: every committed group except the N most
        recent must be complete (read-complete for `.read`). Copies may finish out of order,
        so this is stricter than "at most N groups incomplete"."""
        limit, read_only = s.pending, s.read
        rname = role.name if role else "block"

        def waiting(t: Thread) -> int:
            while t.groups and all(c.write_done for c in t.groups[0]):
                t.groups.pop(0)  # only a fully finished *oldest* group may be forgotten
            older = t.groups[:len(t.groups) - limit] if limit else t.groups
            if read_only:
                return sum(1 for g in older if not all(c.read_done for c in g))
            return sum(1 for g in older if not all(c.write_done for c in g))

        def wait_group(t: Thread) -> Blocker | None:
            if waiting(t) == 0:
                return None
            return Blocker(s, rname, ("group", t.tid), lambda: waiting(t) == 0,
                            lambda: f"wait_group {limit}{' read' if read_only else ''} "
                            f"({waiting(t)} older committed groups not complete)")

        return EFFECT, s, wait_group
