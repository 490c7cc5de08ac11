"""The agents of one block in the scalar engine: threads, what a blocked thread waits for,
and the copy engine's pending operations (bulk copies and wgmma MMAs); and the three kinds
of compiled statement.

Why separate: the block's scheduler (interp.py) and every statement compiler
(interp_compile.py, interp_sync.py, interp_copies.py) build or move these; they are plain
slotted records with no behaviour of their own.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from tilesafe.frontend import ir

# A compiled statement is (kind, stmt, fn): LOCAL fns run at once, EFFECT fns run after the
# thread yields the statement (and may return a Blocker), COMPOUND fns are generators.
LOCAL, EFFECT, COMPOUND = 0, 1, 2


class Thread:
    """One thread: its registers (`vals`), the generator running its statements, what it
    waits for, its unfenced shared writes and its bulk groups."""

    __slots__ = ("tid", "lane", "warp", "vals", "gen", "pending", "done", "unfenced",
                 "open_group", "groups", "mma_open", "mma_groups", "units", "unit_of", "unit",
                 "unit_stmt", "allowed", "cta", "cluster_phase", "met")

    def __init__(self, tid: int, cta: int = 0) -> None:
        self.cta = cta  # its CTA's rank in the cluster (0 without one)
        self.cluster_phase = -1  # the cluster-barrier phase it arrived in, not yet waited
        self.met = False  # it passed a cluster-barrier wait: every CTA of the cluster runs
        # Units (schedule.py): statements the event model has as instructions; only a
        # guided block counts them, so that a counterexample's class moves can be followed.
        self.units: frozenset[int] | None = None
        self.unit_of: Mapping[int, int] = {}
        self.unit = 0
        self.unit_stmt: int | None = None
        self.allowed = 1 << 60
        self.tid = tid
        self.lane = tid % 32
        self.warp = tid // 32
        self.vals: dict[int, Any] = {}
        self.gen: Any = None
        self.pending: Any = None
        self.done = False
        self.unfenced: list[tuple[int, int]] = []  # (address, bytes) of unfenced generic writes
        self.open_group: list[Copy] = []
        self.groups: list[list[Copy]] = []
        # The MMAs of its warpgroup this thread took part in issuing: the open wgmma group
        # and the committed ones (each thread keeps its own view, as for bulk groups).
        self.mma_open: list[MmaOp] = []
        self.mma_groups: list[list[MmaOp]] = []


class Blocker:
    """What a blocked thread waits for; `ready()` is re-evaluated as the state changes."""

    __slots__ = ("stmt", "role", "key", "ready", "describe")

    def __init__(self, stmt: ir.Stmt, role: str, key: tuple, ready: Callable[[], bool],
                 describe: Callable[[], str]) -> None:
        self.stmt = stmt
        self.role = role
        self.key = key  # blockers with equal keys wait for the same condition
        self.ready = ready
        self.describe = describe  # evaluated only when a deadlock is reported


class Copy:
    """One copy-engine operation. Loads: one step (write shared, complete_tx). Stores: a
    read step (snapshot shared) then a write step (global)."""

    __slots__ = ("kind", "stmt", "tid", "g", "slots", "addrs", "flat", "mask", "fill", "bar",
                 "nbytes", "data", "read_done", "write_done", "elem_bytes", "buffer", "prio",
                 "cta", "issuer")

    def __init__(self, kind: str, stmt: ir.Stmt, tid: int, cta: int = 0) -> None:
        self.prio: int | None = None  # the PCT scheduler's priority, once it has seen it
        # The CTA whose shared memory it writes (a load: a multicast lands one Copy in each
        # CTA of its mask) or reads (a store), and the CTA of the issuing thread.
        self.cta = cta
        self.issuer = cta
        self.kind = kind
        self.stmt = stmt
        self.tid = tid
        self.read_done = False
        self.write_done = False


class MmaOp:
    """One issued wgmma, pending on the block's copy engine until it performs (one step:
    read both tiles from shared memory, update the warpgroup's accumulator registers).

    Why a copy-engine agent: the MMA is asynchronous, so when it reads its operands and
    writes its registers is the schedule's choice, which is what makes a missing
    `wgmma_wait` (or a stage refilled too early) observable. The tile slots are fixed at
    issue (the origins are evaluated then); the values are read when it performs."""

    __slots__ = ("kind", "stmt", "tid", "wg", "fragment", "a_slots", "b_slots", "dtype",
                 "scale", "prio", "done", "cta")

    def __init__(self, stmt: ir.Wgmma, wg: int, a_slots: Any, b_slots: Any,
                 dtype: ir.DType, scale: bool) -> None:
        self.kind = "mma"
        self.stmt = stmt
        self.tid = 128 * wg  # the warpgroup's first thread stands for it in messages
        self.wg = wg
        self.fragment = stmt.acc
        self.a_slots = a_slots  # [64, K] element slots of A (absolute, in elements)
        self.b_slots = b_slots  # [K, N] element slots of B
        self.dtype = dtype  # the operands' element type
        self.scale = scale  # False: the accumulator is overwritten (PTX scale-d 0)
        self.prio: int | None = None  # the PCT scheduler's priority, once it has seen it
        self.done = False
        self.cta = 0  # its warpgroup's CTA (set by the issuing block)
