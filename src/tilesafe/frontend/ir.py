"""The kernel IR: one typed, immutable structure that every later stage reads.

Names are resolved (each reference says what it refers to), constants are folded to
integers, `bytes(buf[s])` is folded to its byte count, declarations are hoisted out of the
body into tables, and every node keeps the span of the text it came from.

Integer arithmetic is mathematical (unbounded) with floor division and floor modulo, as in
Presburger arithmetic; float arithmetic is IEEE binary32, with loads of f16/bf16 widened
exactly and stores rounded to nearest-even (see docs/language.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from tilesafe.frontend.span import Span
from tilesafe.frontend.target import DEFAULT as DEFAULT_TARGET
from tilesafe.frontend.target import Target

# ---- layouts ------------------------------------------------------------------------------

LayoutArg = "int | tuple | LayoutTerm"


@dataclass(frozen=True)
class LayoutTerm:
    """A layout as written: `head(args)`. semantics/layout/layouts.py gives each head its meaning;
    a CuTe literal `(64,64):(64,1)` is LayoutTerm("cute", (shape, stride)) and CuTe's
    swizzled form `Sw<B,M,S> o OFF o L` is LayoutTerm("composed", (B, M, S, OFF, L)). Args
    are ints, nested tuples of ints, or LayoutTerms."""

    head: str
    args: tuple = ()

    def __str__(self) -> str:
        if self.head == "cute" and len(self.args) == 2:
            return f"{_tup(self.args[0])}:{_tup(self.args[1])}"
        if self.head == "composed" and len(self.args) == 5:
            b, m, s, off, inner = self.args
            offset = "" if off == 0 else f"{_tup(off)} o "
            return f"Sw<{b},{m},{s}> o {offset}{_tup(inner)}"
        if not self.args:
            return self.head
        return f"{self.head}({', '.join(_tup(a) for a in self.args)})"


def _tup(value: object) -> str:
    if isinstance(value, LayoutTerm):
        return str(value)
    if isinstance(value, tuple):
        return "(" + ",".join(_tup(v) for v in value) + ")"
    return str(value)


# ---- types -------------------------------------------------------------------------------


class DType(str, Enum):
    F16 = "f16"
    BF16 = "bf16"
    F32 = "f32"
    I32 = "i32"
    U8 = "u8"

    @property
    def nbytes(self) -> int:
        return {"f16": 2, "bf16": 2, "f32": 4, "i32": 4, "u8": 1}[self.value]

    @property
    def is_float(self) -> bool:
        return self.value in ("f16", "bf16", "f32")

    @property
    def scalar(self) -> ScalarType:
        return ScalarType.FLOAT if self.is_float else ScalarType.INT


class ScalarType(str, Enum):
    INT = "int"
    FLOAT = "float"
    BOOL = "bool"


class Space(str, Enum):
    GLOBAL = "global"
    SHARED = "shared"


class ParamRole(str, Enum):
    """What a kernel may do with a global tensor parameter (docs/language.md, section 2).

    The role, not the body, decides which tensors are outputs: an output whose only store
    was deleted is still an output (and then unwritten, TS212), and a store into an input
    is a bug (TS215) rather than a silent change of the tensor's meaning."""

    IN = "in"  # read only: its contents are inputs and it is never written
    OUT = "out"  # every element written exactly once; its contents before the launch are
    # undefined (`tilesafe run` poisons them)
    INOUT = "inout"  # read, and every element written exactly once

    @property
    def written(self) -> bool:
        """The kernel must write every element exactly once."""
        return self is not ParamRole.IN

    @property
    def defined_on_entry(self) -> bool:
        """Its contents before the launch mean something (random inputs, not poison)."""
        return self is not ParamRole.OUT


# ---- expressions -------------------------------------------------------------------------


@dataclass(frozen=True)
class Expr:
    span: Span
    type: ScalarType


@dataclass(frozen=True)
class IntConst(Expr):
    value: int


@dataclass(frozen=True)
class FloatConst(Expr):
    value: float


@dataclass(frozen=True)
class SizeVar(Expr):
    """A symbolic size parameter (M, N): proofs quantify over every value `where` allows."""

    name: str


class BuiltinKind(str, Enum):
    THREAD = "thread"  # linear thread index in the block, 0 .. block-1
    # `lane` / `warp_id` on a 32-lane target; on a target whose warp is W != 32 the
    # resolver writes them as `thread % W` / `thread / W` (frontend/target.py), so these two
    # kinds only ever mean 32 lanes.
    LANE = "lane"  # thread % 32
    WARP_ID = "warp_id"  # thread / 32
    BLOCK_X = "block.x"
    BLOCK_Y = "block.y"
    BLOCK_Z = "block.z"


@dataclass(frozen=True)
class Builtin(Expr):
    kind: BuiltinKind


@dataclass(frozen=True)
class LoopVar(Expr):
    """Reference to a `for` variable; `uid` tells apart shadowing loops of one name."""

    name: str
    uid: int


@dataclass(frozen=True)
class LocalRef(Expr):
    """Reference to a `let` (immutable) or `var` (mutable) local, by uid."""

    name: str
    uid: int
    mutable: bool


@dataclass(frozen=True)
class BinOp(Expr):
    """op in + - * / % (integer / and % are floor division and floor modulo),
    == != < <= > >= (type BOOL), && || (BOOL operands)."""

    op: str
    lhs: Expr
    rhs: Expr


@dataclass(frozen=True)
class UnOp(Expr):
    op: str  # "-" or "!"
    operand: Expr


@dataclass(frozen=True)
class Call(Expr):
    """Pure built-in functions: min, max, abs, f32 (to float), i32 (float to int, toward 0)."""

    func: str
    args: tuple[Expr, ...]


@dataclass(frozen=True)
class Load(Expr):
    """Read one element of a global tensor or a shared buffer (logical indices)."""

    tensor: str
    space: Space
    indices: tuple[Expr, ...]
    # `part@r[i]`: a read of CTA r's copy of a shared buffer (distributed shared memory,
    # `ld.shared::cluster` through `mapa`); None: the executing CTA's own
    cta: Expr | None = None


@dataclass(frozen=True)
class Reduce(Expr):
    """`sum(j in lo .. hi: body)`, only inside `ensures`: the f32 sum of body over
    j = lo .. hi-1. `ordered` False (`sum`): every contribution exactly once, in any order
    (the kernel may add them in any tree); True (`sum_seq`): ((0.0 + b(lo)) + b(lo+1)) + ...
    with every addition rounded to f32, exactly as a sequential loop computes it."""

    ordered: bool
    var: LoopVar
    lo: Expr
    hi: Expr
    body: Expr


# ---- statements --------------------------------------------------------------------------


@dataclass(frozen=True)
class Stmt:
    span: Span


@dataclass(frozen=True)
class Let(Stmt):
    uid: int
    name: str
    value: Expr


@dataclass(frozen=True)
class VarDecl(Stmt):
    uid: int
    name: str
    dtype: DType
    value: Expr


@dataclass(frozen=True)
class Assign(Stmt):
    """`x = e`, `x += e` ...: `op` is "=", "+", "-" or "*"."""

    uid: int
    name: str
    op: str
    value: Expr


@dataclass(frozen=True)
class Store(Stmt):
    tensor: str
    space: Space
    indices: tuple[Expr, ...]
    value: Expr
    cta: Expr | None = None  # `part@r[i] = v`: a write into CTA r's copy (DSMEM)


@dataclass(frozen=True)
class For(Stmt):
    """`for var in lo .. hi step step`: var = lo, lo+step, ... while var < hi (step > 0)."""

    var: LoopVar
    lo: Expr
    hi: Expr
    step: int
    body: tuple[Stmt, ...]


@dataclass(frozen=True)
class If(Stmt):
    cond: Expr
    then: tuple[Stmt, ...]
    orelse: tuple[Stmt, ...]


@dataclass(frozen=True)
class ThreadRange:
    """Threads lo .. hi-1 of the block (warp ranges are lowered to thread ranges)."""

    lo: int
    hi: int

    def __contains__(self, thread: int) -> bool:
        return self.lo <= thread < self.hi

    @property
    def size(self) -> int:
        return self.hi - self.lo


def describe_threads(tids: tuple[int, ...] | list[int]) -> str:
    """'thread 7' or 'threads 0-31,64-95': inclusive runs, for messages (never `..`, which
    in the language is half-open)."""
    runs: list[list[int]] = []
    for t in sorted(tids):
        if runs and t == runs[-1][1] + 1:
            runs[-1][1] = t
        else:
            runs.append([t, t])
    parts = [f"{a}" if a == b else f"{a}-{b}" for a, b in runs]
    return ("thread " if len(tids) == 1 else "threads ") + ",".join(parts)


@dataclass(frozen=True)
class Role(Stmt):
    """A warp-specialised branch. With `elect_one`, only the lowest thread of the range runs
    the body (PTX elect.sync picks one leader; we fix it to the lowest lane so that every
    stage agrees which one)."""

    name: str
    threads: ThreadRange
    elect_one: bool
    body: tuple[Stmt, ...]


@dataclass(frozen=True)
class BarrierRef:
    """One mbarrier: `index` is None for a scalar barrier. `cta`: the barrier of CTA `cta`
    of the cluster (a remote arrive, `mbarrier.arrive.shared::cluster`); None: the
    executing CTA's own."""

    span: Span
    name: str
    index: Expr | None
    cta: Expr | None = None


@dataclass(frozen=True)
class BufferSlice:
    """`buf[s]`: a prefix of a shared buffer's indices; the rest of its dims are the box."""

    span: Span
    buffer: str
    prefix: tuple[Expr, ...]


class FenceKind(str, Enum):
    MBARRIER_INIT = "mbarrier_init"
    PROXY_ASYNC = "proxy_async"


class Scope(str, Enum):
    """The set of threads an mbarrier operation's release or acquire is guaranteed to
    synchronise with (PTX `.cta` / `.cluster`): a hand-off between CTAs of a cluster needs
    `.cluster` on both sides (docs/semantics.md, "Clusters")."""

    CTA = "cta"
    CLUSTER = "cluster"


class ArriveMode(str, Enum):
    EACH = "each"  # every thread that executes it arrives
    ONE = "one"  # only the lowest thread of the enclosing role (or block)
    PER_WARP = "per_warp"  # only the lowest thread of each warp of the enclosing role


@dataclass(frozen=True)
class Init(Stmt):
    """Initialise one barrier (`index` given) or every element of the array."""

    barrier: BarrierRef


@dataclass(frozen=True)
class Fence(Stmt):
    kind: FenceKind


@dataclass(frozen=True)
class Sync(Stmt):
    """`bar.sync 0` over the whole block."""


@dataclass(frozen=True)
class Wait(Stmt):
    """Spin on `mbarrier.try_wait.parity`: passes once the phase with this parity completed.
    An acquire at `scope` (`.acquire.cta` by default, PTX's); `relaxed`: acquires nothing."""

    barrier: BarrierRef
    parity: Expr
    scope: Scope = Scope.CTA
    relaxed: bool = False


@dataclass(frozen=True)
class Arrive(Stmt):
    """`mbarrier.arrive` (or `arrive.expect_tx` when tx_bytes is set). A release at `scope`
    (`.release.cta` by default, PTX's); `relaxed`: releases nothing."""

    barrier: BarrierRef
    mode: ArriveMode
    tx_bytes: Expr | None
    scope: Scope = Scope.CTA
    relaxed: bool = False


@dataclass(frozen=True)
class ExpectTx(Stmt):
    """`mbarrier.expect_tx` without an arrival."""

    barrier: BarrierRef
    nbytes: Expr


@dataclass(frozen=True)
class TmaLoad(Stmt):
    """`cp.async.bulk.tensor` global -> shared, completing `nbytes` on the barrier. With
    `multicast` (a CTA mask, bit r for CTA r of the cluster) the box lands in the slice of
    every CTA in the mask, each completing `nbytes` on its own barrier at the same offset
    (`.multicast::cluster`)."""

    dst: BufferSlice
    tensormap: str
    coords: tuple[Expr, ...]
    barrier: BarrierRef
    nbytes: int
    multicast: Expr | None = None


@dataclass(frozen=True)
class TmaStore(Stmt):
    """`cp.async.bulk.tensor` shared -> global, tracked by bulk groups."""

    tensormap: str
    coords: tuple[Expr, ...]
    src: BufferSlice
    nbytes: int


@dataclass(frozen=True)
class CommitGroup(Stmt):
    """`cp.async.bulk.commit_group`."""


@dataclass(frozen=True)
class WaitGroup(Stmt):
    """`cp.async.bulk.wait_group[.read] pending`."""

    pending: int
    read: bool


@dataclass(frozen=True)
class ClusterBarrier(Stmt):
    """The cluster barrier (`barrier.cluster.arrive[.release|.relaxed]` /
    `barrier.cluster.wait.acquire`): `cluster_sync` arrives and waits, `cluster_arrive`
    only arrives (`relaxed`: releases nothing), `cluster_wait` waits for the phase the thread
    arrived in to complete -- every non-exited thread of the cluster arrived."""

    arrive: bool
    wait: bool
    relaxed: bool = False


NAMED_BARRIERS = 16  # hardware barriers per CTA (ids 0 .. 15); `sync` is bar.sync 0


@dataclass(frozen=True)
class NamedBar(Stmt):
    """`bar.sync id, count` (arrive = False: arrive and wait for the barrier to complete) or
    `bar.arrive id, count` (arrive only). A phase of barrier `id` completes when `count`
    threads have arrived; its waiting threads are released and it is ready for reuse."""

    arrive: bool
    bar_id: int
    count: int


# ---- tensor cores (wgmma) -----------------------------------------------------------------


@dataclass(frozen=True)
class TileIndex:
    """One index of an MMA operand tile: a point (`extent` None) or `start : extent`."""

    start: Expr
    extent: int | None


@dataclass(frozen=True)
class MmaTile:
    """A 2-D tile of a shared buffer read by a wgmma: one index per buffer dim, exactly two
    of them ranges (rows, then columns, in the buffer's dim order; swapped when
    `transposed`). `rows`/`cols` are the buffer dims of the tile's two logical dims."""

    span: Span
    buffer: str
    index: tuple[TileIndex, ...]
    transposed: bool

    @property
    def ranged(self) -> tuple[int, int]:
        dims = [d for d, i in enumerate(self.index) if i.extent is not None]
        return (dims[1], dims[0]) if self.transposed else (dims[0], dims[1])

    @property
    def shape(self) -> tuple[int, int]:
        r, c = self.ranged
        return (self.index[r].extent or 0, self.index[c].extent or 0)


@dataclass(frozen=True)
class Wgmma(Stmt):
    """`wgmma.mma_async` by the executing warpgroup: acc (+)= a @ b, where a is [64, K]
    (M x K) and b is [K, N], K = 16 for 16-bit inputs (32 for u8, 8 for f32 as tf32).
    `scale_d`: None with `accumulate` means 1 (acc += ...), None without it 0 (acc = ...);
    an expression decides at run time (the PTX scale-d predicate)."""

    acc: str
    a: MmaTile
    b: MmaTile
    accumulate: bool
    scale_d: Expr | None

    @property
    def k(self) -> int:
        return self.a.shape[1]


@dataclass(frozen=True)
class WgmmaFence(Stmt):
    """`wgmma.fence`: orders the warpgroup's earlier register and shared accesses before
    the wgmma operations that follow."""


@dataclass(frozen=True)
class WgmmaCommit(Stmt):
    """`wgmma.commit_group`: the wgmmas issued since the last commit form one group."""


@dataclass(frozen=True)
class WgmmaWait(Stmt):
    """`wgmma.wait_group N`: wait until at most N committed groups are pending."""

    pending: int


@dataclass(frozen=True)
class SetMaxNReg(Stmt):
    """`setmaxnreg.inc/dec.sync.aligned.u32 count` for the executing warpgroup."""

    inc: bool
    count: int


@dataclass(frozen=True)
class FragLoad(Expr):
    """`acc[r]`: register r of the executing thread's part of a fragment."""

    fragment: str
    reg: Expr


@dataclass(frozen=True)
class FragStore(Stmt):
    """`acc[r] = v`: write register r of the executing thread's part of a fragment."""

    fragment: str
    reg: Expr
    value: Expr


# ---- declarations ------------------------------------------------------------------------


@dataclass(frozen=True)
class GlobalTensor:
    span: Span
    name: str
    dtype: DType
    shape: tuple[Expr, ...]  # affine in size parameters; row-major, densely packed
    role: ParamRole
    # False when the text gave no role and the resolver inferred it from the body (a tensor
    # the body writes is `out`, or `inout` if it also reads it; any other is `in`); verify
    # reports such parameters (TS216) so that files say what they mean.
    role_declared: bool = True


@dataclass(frozen=True)
class Fragment:
    """`fragment acc: f32[64, N]`: a wgmma accumulator distributed over a warpgroup: each
    of its 128 threads holds `regs` = N / 2 registers; which element (i, j) register r of
    thread t holds is frontend/fragments.py's layout (the PTX ISA's for m64nNk16)."""

    span: Span
    name: str
    dtype: DType
    shape: tuple[int, int]

    @property
    def regs(self) -> int:
        return self.shape[0] * self.shape[1] // 128


@dataclass(frozen=True)
class SharedBuffer:
    span: Span
    name: str
    dtype: DType
    shape: tuple[int, ...]
    layout: LayoutTerm  # maps logical indices to element offsets within the buffer
    align: int  # byte alignment of the buffer's base address

    @property
    def size(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n

    @property
    def nbytes(self) -> int:
        return self.size * self.dtype.nbytes


@dataclass(frozen=True)
class TensorMap:
    """A tiled TMA descriptor over a global tensor; box in the tensor's (row-major) order."""

    span: Span
    name: str
    tensor: str
    box: tuple[int, ...]
    swizzle: str  # "none", "32B", "64B", "128B"
    oob_fill: str  # "zero" or "nan"


@dataclass(frozen=True)
class BarrierGuard:
    """`guards buf[i]`: barrier i protects stage i of buf (indexed), or all of buf.

    `per_cta` (only in the temporal model's view of a cluster as one block,
    semantics/temporal/cluster_view.py, where every buffer gains a leading CTA dim and a
    barrier array holds `per_cta` instances per CTA): instance i protects stage i % per_cta
    of every CTA's copy (indexed), or every CTA's whole copy -- an arrive on a peer's
    barrier hands over what the arriving class holds of the stage wherever it lives."""

    buffer: str
    indexed: bool
    per_cta: int = 0

    def prefixes(self, i: int, buffer: SharedBuffer) -> tuple[tuple[int, ...], ...]:
        """The buffer slices (index prefixes) barrier instance i hands over."""
        if self.per_cta:
            if not self.indexed:
                return ((),)
            return tuple((r, i % self.per_cta) for r in range(buffer.shape[0]))
        return ((i,),) if self.indexed else ((),)


@dataclass(frozen=True)
class Barrier:
    span: Span
    name: str
    length: int | None  # None: a scalar barrier
    count: int  # expected arrivals per phase
    guards: BarrierGuard | None  # the first buffer it guards (`guards a[i], b[i]`: a)
    extra_guards: tuple[BarrierGuard, ...] = ()  # the others (b)

    @property
    def all_guards(self) -> tuple[BarrierGuard, ...]:
        """Every buffer the barrier hands over with its phases (docs/language.md)."""
        return ((self.guards,) if self.guards is not None else ()) + self.extra_guards

    @property
    def instances(self) -> int:
        return 1 if self.length is None else self.length


@dataclass(frozen=True)
class Ensures:
    """`ensures out[i, j] == rhs`: after the launch, for every size `where` allows and every
    index (i, j) of `out`, the element holds rhs rounded to out's dtype. The index variables
    are LoopVars bound over out's shape (docs/semantics.md, "Specifications").

    `tested`: the author accepts the clause being checked by testing only (`ensures tested
    ...`): a refutation still fails verification, but a clause the value checker cannot prove
    for every size is a warning instead of an error."""

    span: Span
    tensor: str
    index_vars: tuple[LoopVar, ...]
    rhs: Expr
    tested: bool = False


class RequireKind(str, Enum):
    """What a `requires` clause says about the contents of `in` index tensors
    (docs/language.md, section 13)."""

    ALL = "all"  # `requires COND`: COND holds for every value of the quantified variables
    INJECTIVE = "injective"  # E(p) differs at distinct p (only values in the range count)
    PERMUTATION = "permutation"  # injective, and every value of the range is some E(p)
    SORTED = "sorted"  # E(p) <= E(q) for p <= q


@dataclass(frozen=True)
class Requires:
    """A precondition on the contents of index tensors, which the provers assume (a gathered
    value is an unknown constrained by these clauses) and the launcher checks on the data.

    ALL: `cond` holds for every value of `vars` at which each read of an index tensor whose
    index is affine in `vars` (a *direct* read) is inside its tensor; reads through other
    reads are evaluated left to right with short-circuit `&&`/`||`, so a guard keeps them
    in bounds. The predicates (INJECTIVE, PERMUTATION, SORTED) range `vars[0]` over
    `lo .. hi` and speak of the integer term `value`; for INJECTIVE and PERMUTATION only
    the values in `vlo .. vhi` count (others, such as a sentinel, may repeat), and a
    PERMUTATION takes every value of that range exactly once."""

    span: Span
    kind: RequireKind
    vars: tuple[LoopVar, ...]
    cond: Expr | None = None  # ALL
    lo: Expr | None = None  # the predicates: the range of vars[0], affine in the sizes
    hi: Expr | None = None
    value: Expr | None = None  # the predicates: E(vars[0])
    vlo: Expr | None = None  # INJECTIVE/PERMUTATION: the values that count
    vhi: Expr | None = None


@dataclass(frozen=True)
class Kernel:
    span: Span
    name: str
    sizes: tuple[str, ...]  # symbolic size parameters, in order of first appearance
    params: tuple[GlobalTensor, ...]
    where: tuple[Expr, ...]  # BOOL expressions, Presburger in the sizes
    grid: tuple[Expr, ...]  # 1 to 3 dims, affine in the sizes
    block: int  # threads per block (1-D)
    consts: tuple[tuple[str, int], ...]
    shared: tuple[SharedBuffer, ...]
    tensormaps: tuple[TensorMap, ...]
    barriers: tuple[Barrier, ...]
    body: tuple[Stmt, ...]
    ensures: tuple[Ensures, ...] = ()  # value specifications; none: only safety is proved
    fragments: tuple[Fragment, ...] = ()  # wgmma accumulators (per warpgroup registers)
    # `specialize` clauses: the facts of each variant (Presburger over the sizes), in the
    # order a call tries them; frontend/specialize.py builds the variants (docs/jit.md)
    specializations: tuple[tuple[Expr, ...], ...] = ()
    target: Target = DEFAULT_TARGET  # the machine it was resolved for (warp size, limits)
    # preconditions on the contents of `in` index tensors (gathers/scatters through them)
    requires: tuple[Requires, ...] = ()
    # `cluster (CX, CY, CZ)`: thread-block clusters (always 3 dims here); None without the
    # clause. `cta_rank` is resolved to its value in block indices (`block.x % CX + ...`).
    cluster: tuple[int, int, int] | None = None

    @property
    def cluster_size(self) -> int:
        """CTAs per cluster (1 without a cluster)."""
        if self.cluster is None:
            return 1
        return self.cluster[0] * self.cluster[1] * self.cluster[2]

    def tensor(self, name: str) -> GlobalTensor:
        return next(t for t in self.params if t.name == name)

    def buffer(self, name: str) -> SharedBuffer:
        return next(b for b in self.shared if b.name == name)

    def tensormap(self, name: str) -> TensorMap:
        return next(t for t in self.tensormaps if t.name == name)

    def barrier(self, name: str) -> Barrier:
        return next(b for b in self.barriers if b.name == name)

    def fragment(self, name: str) -> Fragment:
        return next(f for f in self.fragments if f.name == name)


@dataclass(frozen=True)
class Program:
    path: str
    kernels: tuple[Kernel, ...]
