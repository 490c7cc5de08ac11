"""LIR -> HIP C++ for AMD gfx942: the second printer behind the backend boundary.

The input is the very LIR the PTX printer reads (codegen/lir.py: widths, addresses,
placement and who-acts were decided by the lowering, nothing above LIR changes); this module
only spells it in C++ that compiles with hipcc, with a bare clang for gfx942, and with nvcc
(HIP on CUDA, for differential runs on an NVIDIA GPU). Operations are spelled by
hip_ops.py, the platform names and exact scalar helpers come from hip_prelude.py.

Conventions of the emitted module (docs/codegen.md, "HIP for AMD"):

* One `extern "C"` kernel named like the IR kernel, parameters in the LIR's order:
  `const unsigned char *p_T` per tensor (its global address; the launcher passes device
  pointers), `long long s_N` per size; launch bounds = the block.
* Shared memory is one dynamic array `tsmem` (16-byte aligned); the LIR's shared addresses
  are byte offsets into it. The buffers' base R is the first byte at or after `tsmem` whose
  address is 1024 modulo A (A the largest buffer alignment): the placement the interpreter,
  the checkers and the PTX use (codegen/placement.py), so the LDS addresses the bank proof
  counted are the ones the code touches, up to a shift by a multiple of 16 bytes.
* Shared-memory accesses are `volatile`: one LDS instruction of the element's width per
  access, which is what the bank proof counts (no merged ds_read2/ds_read_b64).
* Every statement's code ends with `// LINE:COL what`, as in the PTX.
* Registers are locals declared at the top (`rN`), loops are C++ `for` with the bound
  evaluated once before, `if` is `if`.

What AMD hardware does not have is refused (CodegenError TS036): mbarriers, TMA, bulk
groups, named barriers, fences of the async proxy, warp convergence masks (`one per warp`
converges on mbarrier arrivals only), wgmma and setmaxnreg. The frontend refuses them first
for `--target gfx942` (frontend/target_rules.py); this check keeps the printer honest if
it is handed other LIR.
"""

from __future__ import annotations

from tilesafe.codegen import lir
from tilesafe.codegen.hip_ops import CTYPE, HipOps, reg_name
from tilesafe.codegen.hip_prelude import PRELUDE
from tilesafe.codegen.lower_values import CodegenError
from tilesafe.frontend import ir
from tilesafe.frontend.span import NO_SPAN, Span
from tilesafe.frontend.target_rules import NOT_ON_TARGET

SMEM_SYMBOL = "tsmem"
SMEM_ORIGIN = 1024  # semantics/smem.SMEM_BASE, as in the PTX printer

# LIR instructions of Hopper's asynchronous machinery, with what AMD lacks.
_REFUSED = {
    lir.MbarInit: "mbarrier init", lir.MbarArrive: "mbarrier arrive",
    lir.MbarExpectTx: "mbarrier expect_tx", lir.MbarWait: "mbarrier wait",
    lir.Fence: "fence (mbarrier init / async proxy)", lir.NamedBar: "named barrier",
    lir.WarpSync: "warp convergence (one per warp)", lir.TmaLoad: "tma_load",
    lir.TmaStore: "tma_store", lir.CommitGroup: "commit_group", lir.WaitGroup: "wait_group",
    lir.Wgmma: "wgmma", lir.WgmmaFence: "wgmma_fence", lir.WgmmaCommit: "wgmma_commit",
    lir.WgmmaWait: "wgmma_wait", lir.SetMaxNReg: "setmaxnreg",
    lir.Unrolled: "an unrolled fragment loop",
}

# Shared-memory accesses are volatile: one LDS instruction per element access, in program
# order, as the bank proof counts them -- clang otherwise merges two accesses of a thread
# into one ds_write2_b32 / ds_read_b64, whose lane phases the model does not have
# (tests/test_hip_amd.py reads the disassembly for it).
_LDS = "volatile TS_LDS "

# (C++ element type through which a dtype is read/written, widening, narrowing)
_LOAD = {
    ir.DType.F32: ("ts_f32m", "{v}"), ir.DType.I32: ("ts_i32m", "{v}"),
    ir.DType.U8: ("unsigned char", "(int){v}"),
    ir.DType.F16: ("ts_u16m", "ts_f16_to_f32({v})"),
    ir.DType.BF16: ("ts_u16m", "ts_bf16_to_f32({v})"),
}
_STORE = {
    ir.DType.F32: ("ts_f32m", "{v}"), ir.DType.I32: ("ts_i32m", "{v}"),
    ir.DType.U8: ("unsigned char", "(unsigned char)({v})"),
    ir.DType.F16: ("ts_u16m", "ts_f32_to_f16({v})"),
    ir.DType.BF16: ("ts_u16m", "ts_f32_to_bf16({v})"),
}


def print_hip(fn: lir.Function, source: str = "", target: str = "gfx942") -> str:
    """The HIP C++ module holding one kernel (raises CodegenError TS036 for LIR that AMD
    hardware cannot run)."""
    return _HipPrinter(fn, source, target).module()


def refused(body: tuple[lir.Instr, ...]) -> list[tuple[str, Span]]:
    """What in the LIR has no AMD counterpart, with where it comes from."""
    from tilesafe.codegen.ptx import iter_instrs

    out = []
    for i in iter_instrs(body):
        what = _REFUSED.get(type(i))
        if what is not None:
            out.append((what, getattr(i, "origin", None) or NO_SPAN))
    return out


class _HipPrinter:
    """Statements, memory, synchronisation and control flow; operations via HipOps."""

    def __init__(self, fn: lir.Function, source: str, target: str) -> None:
        self.fn, self.source, self.target = fn, source, target
        self.lines: list[str] = []
        self.depth = 1
        self.regs: dict[int, lir.Ty] = {}
        self.temps = 0
        self.ops = HipOps(self.ins)

    # -- output -----------------------------------------------------------------------------

    def ins(self, text: str, origin: Span | None = None, what: str = "") -> None:
        note = f"  // {origin.line}:{origin.col} {what}".rstrip() if origin is not None else ""
        self.lines.append("  " * self.depth + text + note)

    def name(self, r: lir.Reg) -> str:
        self.regs[r.id] = r.ty
        return reg_name(r)

    def use(self, v: lir.Value) -> None:
        if isinstance(v, lir.Reg):
            self.name(v)

    def module(self) -> str:
        bad = refused(self.fn.body)
        if bad:
            what, span = bad[0]
            raise CodegenError(NOT_ON_TARGET, f"{what}: not available on {self.target} "
                               f"(AMD); {len(bad)} such instruction(s) in the kernel", span)
        self.block(self.fn.body)
        fn = self.fn
        params = []
        for p in fn.params:
            if p.kind is lir.ParamKind.TENSOR:
                params.append(f"const unsigned char *__restrict__ {p.name}")
            elif p.kind is lir.ParamKind.SIZE:
                params.append(f"long long {p.name}")
            else:  # a tensor map: refused above with its TMA statement
                raise CodegenError(NOT_ON_TARGET, f"tensor map parameter {p.name}: not "
                                   f"available on {self.target}", NO_SPAN)
        decls = []
        by_type: dict[str, list[str]] = {}
        for rid in sorted(self.regs):
            by_type.setdefault(CTYPE[self.regs[rid]], []).append(f"r{rid}")
        for ctype, names in by_type.items():
            sep = " " if ctype.endswith("*") else " "
            star = ", *".join(names) if ctype.endswith("*") else ", ".join(names)
            decls.append(f"  {ctype}{sep}{star};")
        head = [
            "//",
            f"// Generated by tilesafe from {self.source or '<memory>'}, kernel {fn.name}, "
            f"for {self.target} (HIP C++).",
            f"// Launch: block {fn.block} threads, {fn.smem_bytes} bytes of dynamic shared "
            "memory (LDS).",
            "// Builds: hipcc --offload-arch=gfx942; clang -x hip --offload-arch=gfx942 "
            "-nogpulib -nogpuinc --cuda-device-only;",
            "// nvcc -x cu -arch=sm_90a (HIP on CUDA). docs/codegen.md, 'HIP for AMD'.",
            "//",
            PRELUDE.strip("\n"),
            "",
            f"TS_SHARED __attribute__((aligned(16))) unsigned char {SMEM_SYMBOL}[];",
            "",
            f"TS_KERNEL({fn.block}) void {fn.name}({', '.join(params)})",
            "{",
        ]
        return "\n".join(head + decls + self.lines + ["}", ""])

    # -- instructions -----------------------------------------------------------------------

    def block(self, instrs: tuple[lir.Instr, ...]) -> None:
        for i in instrs:
            getattr(self, "i_" + type(i).__name__)(i)

    def i_Special(self, i: lir.Special) -> None:
        what, _, axis = i.name.partition(".")
        src = "TS_TID_X()" if what == "tid" else f"TS_CTAID({axis})"
        self.ins(f"{self.name(i.dst)} = {src};")

    def i_Param(self, i: lir.Param) -> None:
        self.ins(f"{self.name(i.dst)} = {i.name};")

    def i_SharedBase(self, i: lir.SharedBase) -> None:
        """R - tsmem: the offset of the first address >= tsmem that is SMEM_ORIGIN modulo
        the alignment (a power of two)."""
        addr = f"(unsigned)(unsigned long long){SMEM_SYMBOL}"
        self.ins(f"{self.name(i.dst)} = ({SMEM_ORIGIN}u - {addr}) & {i.align - 1}u;")

    def i_Op(self, i: lir.Op) -> None:
        self.name(i.dst)
        for a in i.args:
            self.use(a)
        self.ops.op(i)

    def address(self, space: ir.Space, addr: lir.Value) -> str:
        self.use(addr)
        a = self.ops.val(addr)
        return a if space is ir.Space.GLOBAL else f"({SMEM_SYMBOL} + {a})"

    def i_Load(self, i: lir.Load) -> None:
        ctype, widen = _LOAD[i.dtype]
        const = "const " if i.space is ir.Space.GLOBAL else _LDS
        ptr = f"*({const}{ctype} *){self.address(i.space, i.addr)}"
        self.ins(f"{self.name(i.dst)} = {widen.format(v=ptr)};", i.origin,
                 f"load {i.dtype.value}")

    def i_Store(self, i: lir.Store) -> None:
        ctype, narrow = _STORE[i.dtype]
        self.use(i.value)
        v = self.ops.val(i.value)
        qual = "" if i.space is ir.Space.GLOBAL else _LDS
        ptr = f"*({qual}{ctype} *){self.address(i.space, i.addr)}"
        self.ins(f"{ptr} = {narrow.format(v=v)};", i.origin, f"store {i.dtype.value}")

    def i_BarSync(self, i: lir.BarSync) -> None:
        self.ins("TS_SYNC();", i.origin, "sync")

    def i_Trap(self, i: lir.Trap) -> None:
        self.ins("TS_TRAP();", i.origin, "division by zero")

    # -- control ----------------------------------------------------------------------------

    def i_Loop(self, i: lir.Loop) -> None:
        v = self.name(i.var)
        bits = i.var.ty.bits
        for x in (i.lo, i.hi):
            self.use(x)
        hi = self.ops.val(i.hi, bits)
        if isinstance(i.hi, lir.Reg):  # the bound is evaluated once, before the loop
            self.temps += 1
            t = f"hi{self.temps}"
            self.ins(f"const {CTYPE[i.var.ty]} {t} = {hi};")
            hi = t
        self.ins(f"for ({v} = {self.ops.val(i.lo, bits)}; {v} < {hi}; {v} += {i.step}) {{",
                 i.origin, f"for {i.label}")
        self.depth += 1
        self.block(i.body)
        self.depth -= 1
        self.ins("}")

    def i_If(self, i: lir.If) -> None:
        self.use(i.cond)
        self.ins(f"if ({self.ops.val(i.cond)}) {{", i.origin, "if")
        self.depth += 1
        self.block(i.then)
        self.depth -= 1
        if i.orelse:
            self.ins("} else {")
            self.depth += 1
            self.block(i.orelse)
            self.depth -= 1
        self.ins("}")
