"""The instructions of an agent's program: one record type per kind of event.

Why records per kind: the event model (semantics/temporal/events.py) compiles every class of threads
into a flat program, and the explorer (semantics/temporal/explore/) gives each kind its meaning. A
`Wait` has a barrier, an index and a parity; a `TmaLoad` a buffer slice and a byte count; a
loop's `Enter` a trip count and an exit. One record with every field for every kind made
each reader guess which fields mean something; here each kind carries only its own, and the
explorer's registry (semantics/temporal/explore/ops/) maps the record type to the family module that
implements it.

Every record keeps `op`, the kind's name as traces and messages print it ("wait",
"tma_load", "narrive" ...): counterexamples, swimlanes and the happens-before graph key on
it, so the names are those the tool always printed.

Control records (`Control`: loop entry and back-edge, uniform branches, jumps) are not
events: the explorer runs them at once when a program counter lands on them
(`Machine.settle`). `End` is the visible end of a program.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from tilesafe.frontend import ir
from tilesafe.frontend.span import Span

Fn = Callable[[Mapping[str, Any]], Any]


@dataclass(frozen=True)
class Lets:
    """The immutable `let` bindings in scope, by uid (substituted where they are used)."""

    table: Mapping[int, ir.Expr] = field(default_factory=dict)

    def bind(self, uid: int, value: ir.Expr) -> Lets:
        return Lets({**self.table, uid: value})


@dataclass(frozen=True)
class LoopCtx:
    """An enclosing loop that is kept (it contains synchronisation)."""

    uid: int
    lo: Fn
    step: int
    stmt: ir.For


@dataclass(frozen=True)
class AccessNode:
    """A tree evaluated (vectorised over threads and collapsed loops) into a footprint
    (semantics/temporal/footprint.py).

    kind "acc": buffer, write flag, index functions; kind "loop": uid, lo/hi functions,
    step, children; kind "if": cond, then, orelse.

    Every function comes twice. The plain one (`index`, `lo`, `hi`, `cond`) reads only the
    thread and loop variables, so a footprint holds for every size and block; it is None
    where the term needs more (sizes, the block index), and the footprint then
    over-approximates: an unknown index touches the whole buffer, an unknown condition
    runs both branches, an unknown loop every element. The `_full` one also reads the
    sizes and the block index, so it gives the exact footprint of one block of one launch
    (the witness of a refutation); it is None only for terms that read memory."""

    kind: str
    buffer: str = ""
    write: bool = False
    index: tuple[Fn, ...] | None = None
    index_full: tuple[Fn, ...] | None = None
    uid: int = 0
    lo: Fn | None = None
    hi: Fn | None = None
    lo_full: Fn | None = None
    hi_full: Fn | None = None
    step: int = 1
    cond: Fn | None = None
    cond_full: Fn | None = None
    # A condition that reads only the thread, the block index and the sizes is constant per
    # thread for a whole launch: its structural key lets footprints say "certainly
    # written, if this condition holds for the thread" (None: not such a condition).
    cond_key: tuple | None = None
    uses_var: bool = True  # loop: some index, condition or bound below reads its variable
    then: tuple[AccessNode, ...] = ()
    orelse: tuple[AccessNode, ...] = ()
    span: Span | None = None  # the load or store itself (for diagnostics)

    @property
    def exact(self) -> bool:
        """An access whose elements are known for every size and block."""
        return self.index is not None


# ---- the common part ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Instr:
    """What every instruction has: its statement, the kept loops around it, the terms the
    parametric argument must check (semantics/temporal/parametric.py) and the `let`s in scope."""

    op: ClassVar[str] = ""
    stmt: ir.Stmt | None
    ctx: tuple[LoopCtx, ...]
    sync_exprs: tuple[ir.Expr, ...] = field(default=(), kw_only=True)
    lets: Lets = field(default_factory=Lets, kw_only=True)

    @property
    def visible(self) -> bool:
        """An event (or the end), not control flow."""
        return not isinstance(self, Control)

    @property
    def span(self) -> Span | None:
        return self.stmt.span if self.stmt is not None else None

    def text(self) -> str:
        s = self.stmt
        where = f" (line {s.span.line})" if s is not None else ""
        return f"{self.op}{where}"

    def shape(self) -> tuple:
        """What two classes must agree on, instruction by instruction, to be candidates
        for renaming into each other (semantics/temporal/symmetry.py): the kind and its static
        operands; terms only by whether they exist (their values are compared as they are
        evaluated)."""
        return (self.op, len(self.ctx)) + self._operands()

    def _operands(self) -> tuple:
        return ()


@dataclass(frozen=True)
class Control(Instr):
    """Control flow: run at once by `Machine.settle`, never a step of the search."""

    target: int = field(default=-1, kw_only=True)  # loop exit / back-edge / else / jump

    def _operands(self) -> tuple:
        return (self.target,)


@dataclass(frozen=True, kw_only=True)
class Enter(Control):
    op: ClassVar[str] = "enter"
    trip: Fn  # the loop's trip count in an environment


@dataclass(frozen=True, kw_only=True)
class Next(Control):
    op: ClassVar[str] = "next"
    trip: Fn


@dataclass(frozen=True, kw_only=True)
class Branch(Control):
    op: ClassVar[str] = "branch"
    cond: Fn  # a condition uniform over the class (not taken: jump to `target`)


@dataclass(frozen=True)
class Jump(Control):
    op: ClassVar[str] = "jump"


@dataclass(frozen=True)
class End(Instr):
    op: ClassVar[str] = "end"


# ---- mbarriers (semantics/temporal/explore/ops/mbarrier.py)
# ----------------------------------------------


@dataclass(frozen=True, kw_only=True)
class BarrierOp(Instr):
    """An operation on an mbarrier instance: `bar[idx]` (idx None: a scalar barrier, or
    every instance for `init`)."""

    bar: str
    idx: Fn | None

    def _operands(self) -> tuple:
        return (self.bar, self.idx is None)


@dataclass(frozen=True, kw_only=True)
class Init(BarrierOp):
    op: ClassVar[str] = "init"
    count: int  # threads of the class that run it (more than one re-initialises)

    def _operands(self) -> tuple:
        return super()._operands() + (self.count,)


@dataclass(frozen=True)
class FenceInit(Instr):
    """fence mbarrier_init: the class's inits become visible to the copy engine."""

    op: ClassVar[str] = "fence_init"


@dataclass(frozen=True, kw_only=True)
class Wait(BarrierOp):
    op: ClassVar[str] = "wait"
    parity: Fn
    # An acquire at cluster scope: it may receive what threads of another CTA released to
    # the barrier (a `.cta` acquire may not: semantics/temporal/explore/ops/cluster.py).
    cluster: bool = False


@dataclass(frozen=True, kw_only=True)
class Arrive(BarrierOp):
    op: ClassVar[str] = "arrive"
    count: int  # arrivals the class makes
    tx: Fn | None = None  # expect_tx bytes per arrival (arrive ..., expect_tx)
    per_warp: bool = False  # `one per warp`: the lanes of each warp converge first
    group: tuple[int, ...] = ()  # classes whose lanes converge with this one (per warp)
    release: bool = True  # False: `relaxed`, it hands nothing over
    cluster: bool = False  # a release at cluster scope (else .cta: not to another CTA)

    def _operands(self) -> tuple:
        return super()._operands() + (self.count, self.per_warp, self.tx is None,
                                      self.release, self.cluster)

    @property
    def joint(self) -> bool:
        """A per-warp arrive whose warps are split over several classes: one joint step."""
        return self.per_warp and len(self.group) > 1


@dataclass(frozen=True, kw_only=True)
class ExpectTx(BarrierOp):
    op: ClassVar[str] = "expect_tx"
    count: int  # threads of the class that run it
    tx: Fn

    def _operands(self) -> tuple:
        return super()._operands() + (self.count,)


# ---- bulk copies (semantics/temporal/explore/ops/bulk.py)
# ------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class TmaLoad(BarrierOp):
    op: ClassVar[str] = "tma_load"
    count: int  # issuing threads (each issues one copy)
    nbytes: int  # bytes one copy moves
    buffer: str  # the shared-memory slice buffer[prefix...] it writes
    prefix: tuple[Fn, ...] = ()

    def _operands(self) -> tuple:
        return super()._operands() + (self.count, self.nbytes, self.buffer, len(self.prefix))


@dataclass(frozen=True, kw_only=True)
class TmaStore(Instr):
    op: ClassVar[str] = "tma_store"
    count: int
    nbytes: int
    buffer: str  # the shared-memory slice buffer[prefix...] it reads
    prefix: tuple[Fn, ...] = ()

    def _operands(self) -> tuple:
        return (self.count, self.nbytes, self.buffer, len(self.prefix))


@dataclass(frozen=True)
class Commit(Instr):
    op: ClassVar[str] = "commit"


@dataclass(frozen=True, kw_only=True)
class WaitGroup(Instr):
    op: ClassVar[str] = "wait_group"
    pending: int  # wait_group N: at most N of the class's newest bulk groups may run on

    def _operands(self) -> tuple:
        return (self.pending,)


# ---- named barriers (semantics/temporal/explore/ops/named.py)
# --------------------------------------------


@dataclass(frozen=True, kw_only=True)
class NamedOp(Instr):
    named: int  # the barrier id
    ncount: int  # its thread count
    count: int  # threads of the class

    def _operands(self) -> tuple:
        return (self.count,)


@dataclass(frozen=True, kw_only=True)
class NamedArrive(NamedOp):
    """The arrive of bar_sync, or bar_arrive (or, in a cluster's view, of a CTA's `sync`
    and of the cluster barrier: semantics/temporal/cluster_view.py)."""

    op: ClassVar[str] = "narrive"
    syncs: bool = True  # the class waits for this phase (bar_sync, the cluster barrier)
    release: bool = True  # False: a relaxed cluster_arrive, it hands nothing over
    exits_count: bool = False  # a finished class counts as arrived (the cluster barrier)


@dataclass(frozen=True, kw_only=True)
class NamedWait(NamedOp):
    """The wait of bar_sync: until the phase the class arrived in completes."""

    op: ClassVar[str] = "nwait"
    exits_count: bool = False  # a finished class counts as arrived (the cluster barrier)


# ---- a cluster's view (semantics/temporal/explore/ops/cluster.py)


@dataclass(frozen=True, kw_only=True)
class CtaSync(Instr):
    """A CTA's `sync` in a cluster's view: one joint step of the CTA's classes."""

    op: ClassVar[str] = "sync"
    cta: int
    group: tuple[int, ...]  # the classes of the CTA
    named: int  # the named-barrier id whose claims hand the CTA's holdings over

    def _operands(self) -> tuple:
        return (self.cta,)


@dataclass(frozen=True, kw_only=True)
class ClusterSync(Instr):
    """`cluster_sync` in a cluster's view (when no cluster_arrive / cluster_wait is split
    apart): one joint step of every class that has not finished."""

    op: ClassVar[str] = "cluster_sync"


# ---- the block barrier (semantics/temporal/explore/ops/block.py)
# -----------------------------------------


@dataclass(frozen=True)
class Sync(Instr):
    op: ClassVar[str] = "sync"


# ---- shared memory (semantics/temporal/explore/ops/ownership.py)
# -----------------------------------------


@dataclass(frozen=True, kw_only=True)
class Access(Instr):
    """Shared-memory loads and stores of a statement (a collapsed loop included)."""

    op: ClassVar[str] = "access"
    access: tuple[AccessNode, ...]

    def _operands(self) -> tuple:
        return (len(self.access),)


@dataclass(frozen=True)
class FenceProxy(Instr):
    """fence proxy_async: the class's generic writes become visible to the async proxy."""

    op: ClassVar[str] = "fence_proxy"


# ---- tensor cores (semantics/temporal/explore/ops/wgmma.py)
# ----------------------------------------------


@dataclass(frozen=True)
class MmaTileTerm:
    """One operand tile of a wgmma: the buffer, each index's start term (a function of the
    thread, the loop variables and the sizes) and extent (1 for a point index)."""

    buffer: str
    starts: tuple[Fn, ...]
    extents: tuple[int, ...]


@dataclass(frozen=True)
class InnerLoop:
    """A loop without synchronisation around wgmmas, collapsed into their instruction: the
    MMAs of all its iterations are one step (their tiles the union over the iterations)."""

    uid: int
    lo: Fn
    hi: Fn
    step: int


@dataclass(frozen=True, kw_only=True)
class Wgmma(Instr):
    """`wgmma acc (+)= A @ B` (a collapsed loop of them included): every warpgroup of the
    class issues one MMA per statement instance that reads its tiles from shared memory
    asynchronously and writes the fragment, until a covering `wgmma_wait`."""

    op: ClassVar[str] = "wgmma"
    fragment: str
    tiles: tuple[MmaTileTerm, ...]
    inner: tuple[InnerLoop, ...] = ()
    group: tuple[int, ...] = ()  # classes sharing the warpgroups of this one (they converge)
    where: Span | None = None  # the wgmma statement (`stmt` is its loop when collapsed)

    def _operands(self) -> tuple:
        return (self.fragment, tuple((t.buffer, t.extents) for t in self.tiles),
                len(self.inner))

    @property
    def joint(self) -> bool:
        """The warpgroups' threads are split over several classes: one joint step."""
        return len(self.group) > 1


@dataclass(frozen=True)
class WgmmaFence(Instr):
    """wgmma_fence: the class's earlier register accesses are ordered before its MMAs."""

    op: ClassVar[str] = "wgmma_fence"


@dataclass(frozen=True)
class WgmmaCommit(Instr):
    """wgmma_commit: the class's open group of MMAs is closed."""

    op: ClassVar[str] = "wgmma_commit"


@dataclass(frozen=True, kw_only=True)
class WgmmaWait(Instr):
    op: ClassVar[str] = "wgmma_wait"
    pending: int  # at most N of the class's newest committed groups may still be pending

    def _operands(self) -> tuple:
        return (self.pending,)


@dataclass(frozen=True, kw_only=True)
class FragAccess(Instr):
    """A statement (a collapsed loop included) that reads or writes fragment registers
    (`acc[r]`, `acc[r] = v`). `certain`: every thread of the class does it whenever the
    instruction runs: no condition inside the statement decides, and `guards`, the bounds
    (lo, hi) of the loops inside it on the way, give every one at least one iteration."""

    op: ClassVar[str] = "fragment"
    reads: tuple[str, ...]
    writes: tuple[str, ...]
    certain: bool = True
    guards: tuple[tuple[Fn, Fn], ...] = ()
    where: Span | None = None  # the first fragment read or write (for messages)

    def _operands(self) -> tuple:
        return (self.reads, self.writes, self.certain)
