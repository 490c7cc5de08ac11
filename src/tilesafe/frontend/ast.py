"""Syntax tree of a .tsk file: what the text says, with spans, before names mean anything.

The formatter prints this tree back; the resolver turns it into the typed IR. Keeping the
two apart lets `fmt` work on files that do not type-check.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tilesafe.frontend.span import Span

# ---- expressions -------------------------------------------------------------------------


@dataclass(frozen=True)
class Expr:
    span: Span


@dataclass(frozen=True)
class IntLit(Expr):
    value: int


@dataclass(frozen=True)
class FloatLit(Expr):
    text: str


@dataclass(frozen=True)
class Name(Expr):
    name: str


@dataclass(frozen=True)
class BlockIdx(Expr):
    axis: str


@dataclass(frozen=True)
class Index(Expr):
    """`t[i, j]`: a load from a tensor or buffer (or a buffer slice, inside `bytes(...)`)."""

    name: str
    indices: tuple[Expr, ...]
    # `part@r[i]`: the copy of a shared buffer in CTA r of the cluster (distributed shared
    # memory); None: the executing CTA's own
    cta: Expr | None = None


@dataclass(frozen=True)
class Call(Expr):
    func: str
    args: tuple[Expr, ...]


@dataclass(frozen=True)
class Reduce(Expr):
    """`sum(j in lo .. hi: body)` (only in `ensures`): `func` is sum (order free) or sum_seq
    (sequential f32 order, from +0.0)."""

    func: str
    var: str
    lo: Expr
    hi: Expr
    body: Expr
    # `permutation(p in 0 .. P: ids[p], 0 .. M)`: the value range of a `requires` predicate
    values: tuple[Expr, Expr] | None = None


@dataclass(frozen=True)
class Unary(Expr):
    op: str  # "-" or "!"
    operand: Expr


@dataclass(frozen=True)
class Binary(Expr):
    op: str
    lhs: Expr
    rhs: Expr


# ---- layouts ------------------------------------------------------------------------------

Tup = int | tuple["Tup", ...]


@dataclass(frozen=True)
class CuteLayout:
    span: Span
    shape: Tup
    stride: Tup


@dataclass(frozen=True)
class SwizzledLayout:
    """CuTe's printed ComposedLayout `Sw<bits,base,shift> o [offset o] inner`."""

    span: Span
    bits: int
    base: int
    shift: int
    offset: Tup  # 0 when not written; realize checks it is an int
    inner: CuteLayout


@dataclass(frozen=True)
class LayoutApp:
    span: Span
    head: str
    args: tuple[LayoutArg, ...] | None  # None: bare name, () : empty call


LayoutNode = CuteLayout | SwizzledLayout | LayoutApp
LayoutArg = CuteLayout | SwizzledLayout | LayoutApp | int | tuple

# ---- statements ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Stmt:
    span: Span


@dataclass(frozen=True)
class ConstDecl(Stmt):
    name: str
    value: Expr


@dataclass(frozen=True)
class TensormapDecl(Stmt):
    name: str
    tensor: str
    box: tuple[Expr, ...] | None
    swizzle: str | None
    oob: str | None


@dataclass(frozen=True)
class SharedDecl(Stmt):
    name: str
    dtype: str
    shape: tuple[Expr, ...]
    layout: LayoutNode | None
    align: int | None


@dataclass(frozen=True)
class MbarrierDecl(Stmt):
    name: str
    length: Expr | None
    count: Expr
    guards: str | None
    guard_index: str | None
    # `guards a[i], b[i]`: the buffers after the first, as (name, index name or None)
    more_guards: tuple[tuple[str, str | None], ...] = ()


@dataclass(frozen=True)
class Let(Stmt):
    name: str
    value: Expr


@dataclass(frozen=True)
class VarDecl(Stmt):
    name: str
    dtype: str
    value: Expr


@dataclass(frozen=True)
class Assign(Stmt):
    name: str
    op: str
    value: Expr


@dataclass(frozen=True)
class Store(Stmt):
    target: str
    indices: tuple[Expr, ...]
    value: Expr
    cta: Expr | None = None  # `part@r[i] = v`: a store into CTA r's copy (DSMEM)


@dataclass(frozen=True)
class Block:
    span: Span
    stmts: tuple[Stmt, ...]


@dataclass(frozen=True)
class For(Stmt):
    var: str
    lo: Expr
    hi: Expr
    step: Expr | None
    body: Block


@dataclass(frozen=True)
class If(Stmt):
    cond: Expr
    then: Block
    orelse: Block | If | None


@dataclass(frozen=True)
class ThreadSet:
    span: Span
    kind: str  # "warp", "warps", "threads"
    lo: Expr
    hi: Expr | None


@dataclass(frozen=True)
class Role(Stmt):
    name: str
    threads: ThreadSet
    elect_one: bool
    body: Block


@dataclass(frozen=True)
class BarRef:
    span: Span
    name: str
    index: Expr | None
    cta: Expr | None = None  # `full@r[s]`: the barrier of CTA r of the cluster


@dataclass(frozen=True)
class BufRef:
    span: Span
    name: str
    indices: tuple[Expr, ...]


@dataclass(frozen=True)
class Init(Stmt):
    barrier: BarRef


@dataclass(frozen=True)
class Fence(Stmt):
    kind: str


@dataclass(frozen=True)
class Sync(Stmt):
    pass


@dataclass(frozen=True)
class Wait(Stmt):
    barrier: BarRef
    parity: Expr
    scope: str | None = None  # `scope cta` / `scope cluster`; None: not written (cta)
    relaxed: bool = False  # `relaxed`: a wait that acquires nothing


@dataclass(frozen=True)
class Arrive(Stmt):
    barrier: BarRef
    mode: str  # "each", "one", "per_warp"
    tx_bytes: Expr | None
    scope: str | None = None  # `scope cta` / `scope cluster`; None: not written (cta)
    relaxed: bool = False  # `relaxed`: an arrive that releases nothing


@dataclass(frozen=True)
class ExpectTx(Stmt):
    barrier: BarRef
    nbytes: Expr


@dataclass(frozen=True)
class TmaLoad(Stmt):
    dst: BufRef
    tensormap: str
    coords: tuple[Expr, ...]
    barrier: BarRef
    multicast: Expr | None = None  # `, multicast MASK`: the CTAs of the cluster it lands in


@dataclass(frozen=True)
class TmaStore(Stmt):
    tensormap: str
    coords: tuple[Expr, ...]
    src: BufRef


@dataclass(frozen=True)
class CommitGroup(Stmt):
    pass


@dataclass(frozen=True)
class WaitGroup(Stmt):
    pending: int
    read: bool


@dataclass(frozen=True)
class NamedBar(Stmt):
    """`bar_sync ID, COUNT` (arrive and wait) or `bar_arrive ID, COUNT` (arrive only)."""

    arrive: bool
    bar_id: Expr
    count: Expr


@dataclass(frozen=True)
class ClusterBarrier(Stmt):
    """`cluster_sync` (arrive and wait), `cluster_arrive [relaxed]`, `cluster_wait`."""

    arrive: bool
    wait: bool
    relaxed: bool = False


# ---- tensor cores ---------------------------------------------------------------------------


@dataclass(frozen=True)
class FragmentDecl(Stmt):
    """`fragment acc: f32[64, N]`."""

    name: str
    dtype: str
    shape: tuple[Expr, ...]


@dataclass(frozen=True)
class TileIndex:
    """One index of an MMA tile: a point (`extent` None) or a range `start : extent`."""

    span: Span
    start: Expr
    extent: Expr | None


@dataclass(frozen=True)
class MmaTile:
    span: Span
    buffer: str
    index: tuple[TileIndex, ...]
    transposed: bool


@dataclass(frozen=True)
class Wgmma(Stmt):
    """`wgmma acc (= | +=) A @ B [, scale_d cond]`."""

    acc: str
    op: str
    a: MmaTile
    b: MmaTile
    scale_d: Expr | None


@dataclass(frozen=True)
class WgmmaFence(Stmt):
    pass


@dataclass(frozen=True)
class WgmmaCommit(Stmt):
    pass


@dataclass(frozen=True)
class WgmmaWait(Stmt):
    pending: int


@dataclass(frozen=True)
class SetMaxNReg(Stmt):
    inc: bool
    count: int


# ---- kernels ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Param:
    span: Span
    name: str
    dtype: str
    shape: tuple[Expr, ...]
    role: str | None = None  # "in", "out", "inout"; None when the text gives none


@dataclass(frozen=True)
class Ensures:
    """`ensures out[i, j] == rhs`: the value every element of `out` holds after the launch."""

    span: Span
    tensor: str
    index_vars: tuple[str, ...]
    rhs: Expr
    modifier: str | None = None  # `ensures tested ...`: the word after `ensures`, if any
    modifier_span: Span | None = None


@dataclass(frozen=True)
class Requires:
    """`requires COND`: a precondition on the contents of index tensors (a condition, or a
    predicate call such as `injective(p in 0 .. P: ids[p], 0 .. M)`)."""

    span: Span
    cond: Expr


@dataclass(frozen=True)
class Kernel:
    span: Span
    name: str
    params: tuple[Param, ...]
    where: tuple[Expr, ...]
    grid: tuple[Expr, ...]
    block_dim: Expr
    body: Block
    ensures: tuple[Ensures, ...] = ()
    # `specialize F1, F2`: one tuple of facts per clause, in order (docs/jit.md)
    specialize: tuple[tuple[Expr, ...], ...] = ()
    requires: tuple[Requires, ...] = ()
    cluster: tuple[Expr, ...] = ()  # `cluster (CX, CY, CZ)` (1 to 3 dims); () without one


@dataclass(frozen=True)
class Comment:
    span: Span
    text: str


@dataclass(frozen=True)
class Module:
    path: str
    kernels: tuple[Kernel, ...]
    comments: tuple[Comment, ...] = field(default=())
