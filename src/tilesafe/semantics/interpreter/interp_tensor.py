"""The tensor core of one block in the scalar engine: the fragments' registers and the
warpgroups' pending MMAs, which the block's copy engine performs.

Why a module of its own: the registers of a fragment are state no other statement family
touches (only `acc[r]`, `acc[r] = v` and the MMAs), and an MMA's step -- read A and B from
shared memory through their layouts, gather the warpgroup's registers into the [64, N]
tile, multiply-accumulate in semantics/hw/mma.py's numbers, scatter back -- is the copy
engine's work, scheduled like a TMA load (interp.py runs it). The statements that issue and
wait for MMAs are compiled by interp_mma.py.

Registers start as poison (NaN for f32 fragments, 0xDEADBEEF for i32) so that reading one
no write or MMA reached shows in the output. A warpgroup's MMAs perform in issue order
(they accumulate into the same registers): only the oldest pending one of each warpgroup is
in the copy engine's list at a time, so the scheduler can only pick that one.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from tilesafe.frontend import fragments as fr
from tilesafe.frontend import ir
from tilesafe.semantics.expr import fp
from tilesafe.semantics.hw import mma
from tilesafe.semantics.interpreter import interp_error as E
from tilesafe.semantics.interpreter.interp_agents import MmaOp, Thread
from tilesafe.semantics.interpreter.interp_io import I32_SENTINEL
from tilesafe.semantics.interpreter.smem import bits_view

if TYPE_CHECKING:
    from tilesafe.frontend.span import Span
    from tilesafe.semantics.interpreter.interp import _Block

# Registers before any write: a read of one shows (docs/semantics.md, "Tensor cores").
REG_POISON = {ir.DType.F32: np.float32(np.nan), ir.DType.I32: np.int32(I32_SENTINEL)}
_REG_DTYPE = {ir.DType.F32: np.float32, ir.DType.I32: np.int32}


def warpgroups(nthreads: int) -> int:
    """Warpgroups of a block (the last one may be partial: it can hold registers, never run
    an MMA)."""
    return -(-nthreads // fr.WARPGROUP)


def operand_values(smem: np.ndarray, slots: np.ndarray, dtype: ir.DType) -> np.ndarray:
    """The elements at `slots` (absolute element slots of `dtype`) as the MMA reads them:
    16-bit and f32 widened exactly to float32, u8 to int64."""
    bits = bits_view(smem, dtype.nbytes)[slots]
    if dtype is ir.DType.F16:
        return bits.view(np.float16).astype(np.float32)
    if dtype is ir.DType.BF16:
        return fp.bf16_array_to_f32(bits)
    if dtype is ir.DType.F32:
        return bits.view(np.float32)
    return bits.astype(np.int64)


class TensorCore:
    """Registers of every fragment ([threads of whole warpgroups, N/2] per fragment, row t
    thread t) and the queue of issued, not yet performed MMAs of every warpgroup."""

    def __init__(self, blk: _Block) -> None:
        self.b = blk
        rows = warpgroups(blk.nthreads) * fr.WARPGROUP
        self.frags = {f.name: f for f in blk.kernel.fragments}
        self.regs: dict[str, np.ndarray] = {
            f.name: np.full((rows, f.regs), REG_POISON[f.dtype], _REG_DTYPE[f.dtype])
            for f in blk.kernel.fragments}
        self.queues: dict[int, deque[MmaOp]] = {}

    # -- registers --------------------------------------------------------------------------

    def register(self, name: str, reg: Callable[[Thread], int], span: Span
                 ) -> Callable[[Thread], int]:
        """The register index `reg` gives, checked against the fragment (TS204)."""
        n, blk = self.frags[name].regs, self.b

        def index(t: Thread) -> int:
            r = reg(t)
            if 0 <= r < n:
                return r
            raise blk.err(E.FRAG_REG, f"fragment register {name}[{r}] is outside 0..{n - 1} "
                          f"(each thread holds N/2 = {n} registers of '{name}')", span, t,
                          fragment=name, register=r)

        return index

    def reader(self, name: str, reg: Callable[[Thread], int], span: Span
               ) -> Callable[[Thread], Any]:
        """`acc[r]`: the executing thread's register, as the engine's scalars (np.float32
        for f32, a Python int for i32)."""
        regs, index = self.regs[name], self.register(name, reg, span)
        if self.frags[name].dtype is ir.DType.F32:
            return lambda t: regs[t.tid, index(t)]
        return lambda t: int(regs[t.tid, index(t)])

    def writer(self, name: str, reg: Callable[[Thread], int], span: Span
               ) -> Callable[[Thread, Any], None]:
        """`acc[r] = v`: rounded (wrapped) to the fragment's dtype like a `var`."""
        regs, index = self.regs[name], self.register(name, reg, span)
        if self.frags[name].dtype is ir.DType.F32:
            def write_f32(t: Thread, v: Any) -> None:
                regs[t.tid, index(t)] = np.float32(v)

            return write_f32

        def write_i32(t: Thread, v: Any) -> None:
            regs[t.tid, index(t)] = fp.wrap_i32(v)

        return write_i32

    # -- MMAs -------------------------------------------------------------------------------

    def issue(self, op: MmaOp) -> None:
        """Queue an MMA behind its warpgroup's earlier ones; the oldest is the copy
        engine's to perform."""
        queue = self.queues.setdefault(op.wg, deque())
        if not queue:
            self.b.copies.append(op)
        queue.append(op)

    def retire(self, op: MmaOp) -> None:
        """`op` performed (and left the copy engine's list): its successor may go next."""
        queue = self.queues[op.wg]
        assert queue[0] is op
        queue.popleft()
        if queue:
            self.b.copies.append(queue[0])

    def perform(self, op: MmaOp) -> None:
        """The MMA's one step: read A and B as they are now, d = (acc if scale) + A @ B in
        semantics/hw/mma.py's order and rounding, written back to the 128 threads' registers."""
        blk = self.b
        for which, slots in (("A", op.a_slots), ("B", op.b_slots)):
            self.check_proxy(op, which, slots)
        a = operand_values(blk.smem, op.a_slots, op.dtype)
        b = operand_values(blk.smem, op.b_slots, op.dtype)
        regs = self.regs[op.fragment]
        rows = slice(op.wg * fr.WARPGROUP, (op.wg + 1) * fr.WARPGROUP)
        n = self.frags[op.fragment].shape[1]
        acc = mma.gather(regs[rows], n)
        regs[rows] = mma.scatter(mma.mma(acc, a, b, op.dtype, op.scale))
        op.done = True

    def check_proxy(self, op: MmaOp, which: str, slots: np.ndarray) -> None:
        """The MMA reads through the async proxy: a byte a thread wrote through the generic
        proxy and covered by no `fence proxy_async` before a release is TS301, as for a TMA
        store (the tags are interp.py's)."""
        tags = self.b.tags
        if tags is None:
            return
        tile = op.stmt.a if which == "A" else op.stmt.b
        eb = op.dtype.nbytes
        addrs = slots.reshape(-1) * eb
        for k in range(eb):
            writers = tags[addrs + k]
            bad = np.nonzero(writers >= 0)[0]
            if bad.size:
                j = int(bad[0])
                raise self.b.err(
                    E.PROXY_FENCE,
                    f"wgmma reads operand {which} ('{tile.buffer}') at address "
                    f"{int(addrs[j])} that thread {int(writers[j])} wrote through the generic "
                    "proxy with no 'fence proxy_async' before a synchronisation",
                    op.stmt.span, None, writer=int(writers[j]), address=int(addrs[j]),
                    warpgroup=op.wg)

    def pending_text(self, op: MmaOp) -> str:
        n = len(self.queues.get(op.wg, ()))
        return f"{n} MMA{'s' if n != 1 else ''} of warpgroup {op.wg} into '{op.fragment}'"

    def why_unwaited(self, op: MmaOp) -> str:
        """Why nothing waited for the oldest pending MMA: never committed (wait_group waits
        for committed groups only), or no wait covered its group."""
        if any(any(x is op for x in t.mma_open) for t in self.b.threads[op.tid:op.tid + 128]):
            return ("it was never committed ('wgmma_wait' waits for committed groups only: "
                    "'wgmma_commit' first)")
        return "no 'wgmma_wait' covered its group ('wgmma_wait 0' before the threads end)"
