"""State of the lockstep interpreter: a batch of blocks, its threads (lanes), registers,
shared memory and barriers, and the groups of lanes expressions are evaluated over.

Why a batch: blocks never synchronise with each other, so a batch of consecutive blocks can
run side by side, lane = block-in-batch * block + thread, every per-thread value one array
over all lanes and every per-block value one array over the batch's blocks. The driver
(semantics/interpreter/interp_vec.py) decides when that is sound (no block reads a tensor the launch
writes; writes of one element must come in launch order) and otherwise runs one block per
batch, as the scalar engine does.

Messages and error details are the scalar engine's (semantics/interpreter/interp.py, _Block), word
for word: a vector run that fails is re-run until the failing step is executed thread by
thread, and must then raise exactly what the scalar engine raises on that schedule.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from tilesafe.frontend import ir
from tilesafe.frontend.span import Span
from tilesafe.semantics.hw.mbarrier import MbarrierError, MbarrierState
from tilesafe.semantics.interpreter.interp_error import UNINIT, InterpError
from tilesafe.semantics.interpreter.smem import SMEM_POISON, SmemPlan, bits_view


class OrderConflict(Exception):
    """A batched run wrote an element after a later block of the launch had written it:
    the scalar engine's block order would keep the other value (re-run block by block)."""


class WriteOrder:
    """Which block of the current batch wrote each element of a tensor last, to check that
    the writes to every element come in launch order (blocks of a batch run side by side).

    A step whose elements increase with the lanes (each written once, in block order) and
    lie outside everything the batch wrote before cannot break the order: it is only
    remembered. The per-element array is built when a step falls inside that range."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.last: np.ndarray | None = None  # 1 + launch index of the last writer
        self.pending: list[tuple[np.ndarray, Any]] = []
        self.hull: tuple[int, int] | None = None

    def begin_batch(self) -> None:
        """Earlier batches' blocks come before every block of the next one."""
        if self.last is not None:
            self._materialise()
        self.pending, self.hull = [], None

    def claim(self, w: np.ndarray, who: Any) -> None:
        """Elements `w` are written by blocks `who` (1 + launch index), in this order."""
        if not len(w):
            return
        lo, hi = int(w[0]), int(w[-1])
        if self.last is None and (len(w) == 1 or bool(np.all(w[1:] > w[:-1]))) and (
                self.hull is None or hi < self.hull[0] or lo > self.hull[1]):
            self.pending.append((w, who))
            self.hull = (lo, hi) if self.hull is None else (min(lo, self.hull[0]),
                                                             max(hi, self.hull[1]))
            return
        self._materialise()
        assert self.last is not None
        if np.any(self.last[w] > who):
            raise OrderConflict()
        self.last[w] = who

    def _materialise(self) -> None:
        if self.last is None:
            self.last = np.zeros(self.size, np.int32)
        for pw, pwho in self.pending:
            self.last[pw] = pwho
        self.pending = []


class VGlobal:
    """A global tensor: its array, flat views, and vectorised element reads and writes."""

    def __init__(self, tensor: ir.GlobalTensor, array: np.ndarray) -> None:
        self.tensor = tensor
        self.array = array
        self.shape = array.shape
        self.strides = tuple(int(np.prod(self.shape[i + 1:], dtype=np.int64))
                             for i in range(len(self.shape)))
        raw = array.reshape(-1).view(np.uint8)
        self.bits = bits_view(raw, tensor.dtype.nbytes)
        self.read, self.write = vector_codec(tensor.dtype, raw)
        self.order = WriteOrder(self.bits.size)  # batched runs: writes in launch order


def vector_codec(dtype: ir.DType, raw: np.ndarray
                 ) -> tuple[Callable[[Any], Any], Callable[[Any, Any], None]]:
    """Element reader/writer over a flat byte array, for index arrays: smem.codec's rules
    (f16/bf16 widened exactly, stores rounded to nearest even with the canonical NaN,
    integers wrapped), one call per group instead of per thread."""
    from tilesafe.semantics.expr import fp
    from tilesafe.semantics.interpreter.interp_vec_expr import f16_bits

    if dtype is ir.DType.F32:
        view = raw.view(np.float32)

        def write_f32(i: Any, x: Any) -> None:
            view[i] = x

        return view.__getitem__, write_f32
    if dtype in (ir.DType.F16, ir.DType.BF16):
        hv, bv = raw.view(np.float16), raw.view(np.uint16)
        if dtype is ir.DType.F16:
            def write_f16(i: Any, x: Any) -> None:
                bv[i] = f16_bits(np.asarray(x, dtype=np.float32))

            return (lambda i: hv[i].astype(np.float32)), write_f16

        def write_bf16(i: Any, x: Any) -> None:
            bv[i] = fp.f32_array_to_bf16(np.asarray(x, dtype=np.float32).reshape(-1))

        return (lambda i: fp.bf16_array_to_f32(bv[i])), write_bf16
    if dtype is ir.DType.I32:
        iv = raw.view(np.int32)

        def write_i32(i: Any, v: Any) -> None:
            iv[i] = (np.asarray(v, dtype=np.int64) + (1 << 31)) % (1 << 32) - (1 << 31)

        return (lambda i: iv[i].astype(np.int64)), write_i32

    def write_u8(i: Any, v: Any) -> None:
        raw[i] = np.asarray(v, dtype=np.int64) & 0xFF

    return (lambda i: raw[i].astype(np.int64)), write_u8


class Group:
    """Some lanes of a batch (sorted), as the environment of expression closures."""

    __slots__ = ("st", "lanes", "n", "sel", "_tid", "_row", "reads")

    def __init__(self, st: Batch, lanes: np.ndarray) -> None:
        self.st = st
        self.lanes = lanes
        self.n = len(lanes)
        lo = int(lanes[0]) if self.n else 0
        contiguous = self.n and int(lanes[-1]) - lo + 1 == self.n
        self.sel: Any = slice(lo, lo + self.n) if contiguous else lanes
        self._tid: np.ndarray | None = None
        self._row: np.ndarray | None = None
        self.reads: list | None = None  # (lanes, key, element indices) when recording

    def sub(self, mask: np.ndarray) -> Group:
        g = Group(self.st, self.lanes[mask])
        g.reads = self.reads
        return g

    @property
    def tid(self) -> np.ndarray:
        if self._tid is None:
            nt = self.st.nthreads
            self._tid = self.lanes if self.st.nblocks == 1 else self.lanes % nt
        return self._tid

    @property
    def row(self) -> np.ndarray:
        """Block-in-batch of each lane."""
        if self._row is None:
            self._row = self.lanes // self.st.nthreads
        return self._row

    def reg(self, uid: int) -> Any:
        return self.st.regs[uid][self.sel]

    def set_reg(self, uid: int, value: Any) -> None:
        regs = self.st.regs
        arr = regs.get(uid)
        if arr is None:
            dtype = value.dtype if isinstance(value, np.ndarray) else np.asarray(value).dtype
            arr = regs[uid] = np.zeros(self.st.n, dtype=dtype)
        arr[self.sel] = value

    def block_coord(self, axis: int) -> Any:
        coords = self.st.block_coords[axis]
        return int(coords[0]) if self.st.nblocks == 1 else coords[self.row]

    def note_read(self, key: tuple[str, str], elems: Any) -> None:
        if self.reads is not None:
            self.reads.append((self.lanes, key, np.broadcast_to(elems, (self.n,))))


class Batch:
    """Blocks first .. first+nblocks-1 of the launch (in launch order, x fastest)."""

    def __init__(self, kernel: ir.Kernel, grid: tuple[int, ...], plan: SmemPlan,
                 first: int, nblocks: int, track_proxy: bool) -> None:
        self.kernel = kernel
        self.grid = grid
        self.first = first
        self.nblocks = nblocks
        self.nthreads = nt = kernel.block
        self.n = nblocks * nt
        self.regs: dict[int, np.ndarray] = {}
        self.codecs: dict[ir.DType, tuple[Callable, Callable]] = {}
        lin = np.arange(first, first + nblocks, dtype=np.int64)
        dims = list(grid) + [1] * (3 - len(grid))
        self.block_coords = (lin % dims[0], lin // dims[0] % dims[1],
                             lin // (dims[0] * dims[1]))
        self.total = plan.total
        self.smem = np.full(nblocks * plan.total, SMEM_POISON, dtype=np.uint8)
        self.tags = np.full(self.smem.shape, -1, np.int32) if track_proxy else None
        self.tag_epoch = np.zeros(self.smem.shape, np.int32) if track_proxy else None
        self.rel = np.zeros(self.n, np.int64)  # releases (sync, arrive...) per lane
        # mbarriers: instance k of the launch-wide numbering, per block
        self.inst: list[tuple[str, int]] = [(b.name, i) for b in kernel.barriers
                                             for i in range(b.instances)]
        self.offset = {name: self.inst.index((name, 0)) for name in
                       dict.fromkeys(name for name, _ in self.inst)}
        k = len(self.inst)
        self.bars: list[list[MbarrierState]] = [[MbarrierState()] * k for _ in range(nblocks)]
        self.parity = np.zeros((nblocks, max(k, 1)), np.int64)
        self.phase = np.zeros((nblocks, max(k, 1)), np.int64)
        self.init_by = np.full((nblocks, max(k, 1)), -1, np.int64)
        self.fenced = np.zeros((nblocks, max(k, 1)), bool)
        self.sync_count = np.zeros(nblocks, np.int64)
        self.sync_gen = np.zeros(nblocks, np.int64)
        self.named: list[dict[int, list]] = [{} for _ in range(nblocks)]
        self.gates: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        self.copies: list[list[Any]] = [[] for _ in range(nblocks)]
        self.copy_keys: dict[tuple, int] = {}  # pending copies per step key (interp_vec_tma)
        self.bulk: dict[int, list] = {}  # lane -> [open group, committed groups]
        self.done = np.zeros(self.n, bool)
        self.live = np.full(nblocks, nt, np.int64)
        # Blocked threads in the scalar engine's order (one block per batch only): the
        # deadlock message names the statement of the first of them.
        self.order: dict[tuple, list[int]] | None = {} if nblocks == 1 else None

    # -- places -----------------------------------------------------------------------------

    def block_idx(self, row: int) -> tuple[int, ...]:
        return tuple(int(c[row]) for c in self.block_coords)[: len(self.grid)]

    def row_of(self, lane: int) -> int:
        return lane // self.nthreads

    def tid_of(self, lane: int) -> int:
        return lane % self.nthreads

    def smem_view(self, eb: int) -> np.ndarray:
        return bits_view(self.smem, eb)

    def codec(self, dtype: ir.DType) -> tuple[Callable, Callable]:
        """Vector reader/writer of shared memory as elements of `dtype`."""
        if dtype not in self.codecs:
            self.codecs[dtype] = vector_codec(dtype, self.smem)
        return self.codecs[dtype]

    # -- errors -----------------------------------------------------------------------------

    def err(self, code: str, message: str, span: Span, row: int, tid: int | None,
            **detail: Any) -> InterpError:
        """interp._Block.err: the same message and detail for block `row` of the batch."""
        block = self.block_idx(row)
        where = f"block {block}" + (f", thread {tid}" if tid is not None else "")
        detail = {"block": block, **detail}
        if tid is not None:
            detail["thread"] = tid
        return InterpError(code, f"{message} ({where})", span, detail)

    def lane_err(self, code: str, message: str, span: Span, lane: int,
                 **detail: Any) -> InterpError:
        return self.err(code, message, span, self.row_of(lane), self.tid_of(lane), **detail)

    def model_err(self, exc: MbarrierError, k: int, span: Span, row: int,
                  tid: int | None) -> InterpError:
        return self.err(exc.code, f"{self.label(k)}: {exc.message}", span, row, tid,
                        barriers=self.barrier_states(row))

    # -- barriers ---------------------------------------------------------------------------

    def label(self, k: int) -> str:
        name, i = self.inst[k]
        return name if self.kernel.barrier(name).length is None else f"{name}[{i}]"

    def bar_state_text(self, row: int, k: int) -> str:
        st = self.bars[row][k]
        if not st.initialized:
            return f"{self.label(k)}: uninitialised"
        return (f"{self.label(k)}: phase {int(self.phase[row, k])} (parity {st.parity}), "
                f"pending {st.pending}/{st.expected}, tx {st.tx}")

    def barrier_states(self, row: int) -> dict[str, str]:
        return {self.label(k): self.bar_state_text(row, k) for k in range(len(self.inst))}

    def bar_update(self, row: int, k: int, op: Callable[[MbarrierState], MbarrierState],
                   span: Span, tid: int | None) -> None:
        """interp._Block.bar_update, keeping the parity array the waits read in step."""
        old = self.bars[row][k]
        if not old.initialized:
            raise self.err(UNINIT, f"mbarrier {self.label(k)} used before init", span, row,
                           tid, barriers=self.barrier_states(row))
        try:
            new = op(old)
        except MbarrierError as exc:
            raise self.model_err(exc, k, span, row, tid) from None
        if new.parity != old.parity:
            self.phase[row, k] += 1
        self.bars[row][k] = new
        self.parity[row, k] = new.parity

    # -- threads ----------------------------------------------------------------------------

    def release(self, lanes: Any) -> None:
        """A release (sync, arrive, convergence): later fences cover only later writes."""
        if self.tags is not None:
            self.rel[lanes] += 1

    def finish(self, lanes: np.ndarray) -> None:
        lo, n = int(lanes[0]), len(lanes)
        if int(lanes[-1]) - lo + 1 == n:  # a range of lanes: count per block by arithmetic
            self.done[lo:lo + n] = True
            nt = self.nthreads
            edges = np.clip(np.arange(self.nblocks + 1) * nt, lo, lo + n)
            self.live -= np.diff(edges)
            return
        self.done[lanes] = True
        self.live -= np.bincount(lanes // self.nthreads, minlength=self.nblocks)

    def block_order(self, key: tuple, tids: list[int]) -> None:
        if self.order is not None:
            self.order.setdefault(key, []).extend(tids)

    def unblock_order(self, key: tuple, tid: int) -> None:
        if self.order is not None:
            waiting = self.order[key]
            waiting.remove(tid)
            if not waiting:
                del self.order[key]
