"""The backend-neutral form of a kernel: typed virtual registers, operations, memory and
synchronisation instructions, structured loops and branches.

Why a layer between the IR and PTX: the IR speaks of logical indices, layouts and
mathematical integers; a backend wants address arithmetic in fixed-width registers. The
lowering (codegen/lower.py) decides everything that is not specific to one instruction set
— register widths, address expressions of every layout, where the barriers live in shared
memory, which thread arrives — and a printer (codegen/ptx.py; a HIP printer next) only
spells the result. Operation names are those of semantics/expr/evaluate.py (`int.add`,
`f32.mul`, ...) plus a few bit and conversion operations the address arithmetic needs, so
the meaning of every operation is stated once.

Control flow stays structured (Loop, If) so that every printer can emit it directly and
the translation validator can recognise loops.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

from tilesafe.frontend import ir
from tilesafe.frontend.span import Span


class Ty(str, Enum):
    PRED = "pred"
    S32 = "s32"
    S64 = "s64"
    U32 = "u32"  # shared-memory addresses
    U64 = "u64"  # global addresses
    F32 = "f32"

    @property
    def bits(self) -> int:
        return {"pred": 1, "s32": 32, "s64": 64, "u32": 32, "u64": 64, "f32": 32}[self.value]

    @property
    def is_int(self) -> bool:
        return self in (Ty.S32, Ty.S64, Ty.U32, Ty.U64)


@dataclass(frozen=True)
class Reg:
    id: int
    ty: Ty


@dataclass(frozen=True)
class Imm:
    value: int | float
    ty: Ty


Value = Reg | Imm

# Operations beyond semantics/evaluate.CONCRETE's names, all on integer registers:
#   bit.xor bit.and bit.or bit.shr (arithmetic) bit.shl      layouts' swizzles and F2 maps
#   cvt.s64 (sign-extend)  cvt.s32 (keep the low 32 bits)    width changes
#   wrap.u8 (keep the low 8 bits)                             `var x: u8`
#   round.f16 round.bf16 (f32 -> nearest f16/bf16 -> f32)     `var x: f16`
#   select (pred, a, b)                                       piecewise choices
#   mov
#   addr.global (base u64, flat index, element bytes)         base + flat * bytes
#   addr.shared (base u32, start, offset, element bytes)      base + start + offset * bytes
EXTRA_OPS = frozenset({"bit.xor", "bit.and", "bit.or", "bit.shr", "bit.shl", "cvt.s64",
                       "cvt.s32", "wrap.u8", "round.f16", "round.bf16", "select", "mov",
                       "addr.global", "addr.shared"})


@dataclass(frozen=True)
class Instr:
    """Base of every instruction; `origin` is the source text it implements (None for
    bookkeeping such as the prologue)."""


@dataclass(frozen=True)
class Op(Instr):
    """dst = name(args). Integer arguments may be narrower than dst (sign-extended).
    `hint` carries facts the lowering proved that let a printer pick cheaper code:
    "nonneg" (every operand >= 0)."""

    dst: Reg
    name: str
    args: tuple[Value, ...]
    hint: str = ""


@dataclass(frozen=True)
class Special(Instr):
    """dst = a hardware index: 'tid.x', 'ctaid.x', 'ctaid.y', 'ctaid.z'."""

    dst: Reg
    name: str


@dataclass(frozen=True)
class Param(Instr):
    """dst = the value of kernel parameter `name` (a size, or a tensor's global address)."""

    dst: Reg
    name: str


@dataclass(frozen=True)
class SharedBase(Instr):
    """dst = the shared-memory address of the block's dynamic shared memory, rounded up to
    `align` bytes (the buffers' placement assumes an aligned base)."""

    dst: Reg
    align: int


@dataclass(frozen=True)
class Load(Instr):
    """dst = element of `dtype` at `addr` in `space`, widened (f16/bf16 -> f32 exactly;
    i32/u8 -> s32). `readonly`: the kernel never writes this tensor (non-coherent path)."""

    dst: Reg
    space: ir.Space
    dtype: ir.DType
    addr: Value
    readonly: bool
    origin: Span | None = None
    remote: bool = False  # `addr` is a shared::cluster address (MapA): a peer CTA's memory


@dataclass(frozen=True)
class Store(Instr):
    """Store `value` as one element of `dtype` (rounded to nearest even for f16/bf16; the
    low bits for i32/u8)."""

    space: ir.Space
    dtype: ir.DType
    addr: Value
    value: Value
    origin: Span | None = None
    remote: bool = False  # `addr` is a shared::cluster address (MapA): a peer CTA's memory


@dataclass(frozen=True)
class MapA(Instr):
    """dst = the shared::cluster address of shared address `addr` in CTA `cta` of the
    cluster (PTX `mapa`): every CTA places its buffers at the same offsets, so a peer's
    element is the own address mapped to the peer."""

    dst: Reg
    addr: Value
    cta: Value
    origin: Span | None = None


@dataclass(frozen=True)
class ClusterBar(Instr):
    """The cluster barrier: arrive (a release unless `relaxed`) and/or wait (an acquire)."""

    arrive: bool
    wait: bool
    relaxed: bool = False
    origin: Span | None = None


@dataclass(frozen=True)
class MbarInit(Instr):
    bar: Value
    count: int
    origin: Span | None = None


@dataclass(frozen=True)
class MbarArrive(Instr):
    """One arrival (with `tx` expected bytes raised first when given). A release at
    `scope` ("cta" or "cluster"), nothing with `relaxed`; `remote`: `bar` is a
    shared::cluster address (a peer CTA's barrier, from MapA)."""

    bar: Value
    tx: Value | None
    origin: Span | None = None
    scope: str = "cta"
    relaxed: bool = False
    remote: bool = False


@dataclass(frozen=True)
class MbarExpectTx(Instr):
    bar: Value
    tx: Value
    origin: Span | None = None


@dataclass(frozen=True)
class MbarWait(Instr):
    """Block until the phase of parity `parity` of the barrier has completed: an acquire
    at `scope` ("cta" or "cluster"), nothing with `relaxed`."""

    bar: Value
    parity: Value
    origin: Span | None = None
    scope: str = "cta"
    relaxed: bool = False


@dataclass(frozen=True)
class Fence(Instr):
    kind: ir.FenceKind
    origin: Span | None = None


@dataclass(frozen=True)
class BarSync(Instr):
    """Every thread of the block meets here (barrier 0)."""

    origin: Span | None = None


@dataclass(frozen=True)
class NamedBar(Instr):
    """`bar.sync id, count` (arrive and wait) or `bar.arrive id, count` (arrive only)."""

    bar_id: int
    count: int
    arrive: bool
    origin: Span | None = None


@dataclass(frozen=True)
class WarpSync(Instr):
    """The lanes of `mask` (of this thread's warp) converge here."""

    mask: Value
    origin: Span | None = None


@dataclass(frozen=True)
class TmaLoad(Instr):
    """Bulk tensor copy global -> shared, completing its bytes on `bar`. Coordinates are
    innermost first, as the hardware takes them."""

    tensormap: str
    smem: Value
    coords: tuple[Value, ...]
    bar: Value
    origin: Span | None = None
    mask: Value | None = None  # multicast: the CTAs of the cluster it lands in (16 bits)


@dataclass(frozen=True)
class TmaStore(Instr):
    tensormap: str
    smem: Value
    coords: tuple[Value, ...]
    origin: Span | None = None


@dataclass(frozen=True)
class CommitGroup(Instr):
    origin: Span | None = None


@dataclass(frozen=True)
class WaitGroup(Instr):
    pending: int
    read: bool
    origin: Span | None = None


@dataclass(frozen=True)
class Wgmma(Instr):
    """wgmma.mma_async by the executing warpgroup: `acc` (+)= A @ B. `acc` are the
    accumulator registers in fragment order, `desc_a`/`desc_b` the 64-bit matrix
    descriptors, `scale_d` a predicate (false: the accumulator is overwritten)."""

    acc: tuple[Reg, ...]
    desc_a: Value
    desc_b: Value
    scale_d: Value
    n: int
    k: int
    dtype: ir.DType  # of A and B
    acc_dtype: ir.DType
    trans_a: int  # 1: MN-major
    trans_b: int
    origin: Span | None = None


@dataclass(frozen=True)
class WgmmaFence(Instr):
    origin: Span | None = None


@dataclass(frozen=True)
class WgmmaCommit(Instr):
    origin: Span | None = None


@dataclass(frozen=True)
class WgmmaWait(Instr):
    pending: int
    origin: Span | None = None


@dataclass(frozen=True)
class SetMaxNReg(Instr):
    inc: bool
    count: int
    origin: Span | None = None


@dataclass(frozen=True)
class Unrolled(Instr):
    """One copy of an unrolled loop's body, the loop variable (`uid`) fixed to `value`:
    loops whose body indexes fragment registers (a register number must be a constant)."""

    label: str
    uid: int
    index: int
    value: int
    body: tuple[Instr, ...]
    origin: Span | None = None


@dataclass(frozen=True)
class Trap(Instr):
    """Abort the kernel (an integer division by zero, as the interpreter reports it)."""

    origin: Span | None = None


@dataclass(frozen=True)
class Loop(Instr):
    """for var = lo; var < hi; var += step. `hi` is evaluated once, before the loop.
    `label` names the source loop (variable name and uid) for readers of the output."""

    var: Reg
    lo: Value
    hi: Value
    step: int
    body: tuple[Instr, ...]
    label: str = ""
    origin: Span | None = None


@dataclass(frozen=True)
class If(Instr):
    cond: Value
    then: tuple[Instr, ...]
    orelse: tuple[Instr, ...] = ()
    origin: Span | None = None


class ParamKind(str, Enum):
    TENSOR = "tensor"  # u64 global address
    SIZE = "size"  # s64 size value
    TENSORMAP = "tensormap"  # 128-byte CUtensorMap, passed by value


@dataclass(frozen=True)
class KernelParam:
    name: str  # the PTX parameter name
    kind: ParamKind
    source: str  # the tensor, size or tensormap it carries


@dataclass(frozen=True)
class Function:
    """One lowered kernel."""

    name: str
    params: tuple[KernelParam, ...]
    block: int
    smem_bytes: int  # dynamic shared memory to request (alignment slack included)
    body: tuple[Instr, ...]
    nregs: int
    notes: tuple[str, ...] = field(default=())
    cluster: tuple[int, int, int] | None = None  # CTAs per cluster (the launch's attribute)
