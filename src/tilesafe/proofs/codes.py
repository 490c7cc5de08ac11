"""Every diagnostic and obligation code tilesafe can report, with a one-line meaning.

Why a table in code: SARIF logs list every rule a tool has (not only those a run hit) so a
code-scanning UI can show them, and the HTML report links codes to meanings. The full
explanations live in docs/ (access.md, temporal.md, hardware-rules.md, banks.md, codegen.md);
tests/test_cli_ux.py checks that every code the sources use is listed here.
"""

from __future__ import annotations

CODES: dict[str, str] = {
    "TS001": "unexpected token (says what was expected)",
    "TS002": "a character no token starts with",
    "TS003": "the input ended inside a construct; an unterminated `/*`",
    "TS004": "the file cannot be read (missing, a directory, not UTF-8)",
    "TS005": "blocks and expressions nested more than 100 levels deep",
    "TS010": "`wait ful[s] parity 0`",
    "TS011": "a name defined twice",
    "TS012": "a name used as the wrong kind of thing",
    "TS013": "a declaration below the top level; a role inside a role",
    "TS020": "wrong number of indices or coordinates; array barrier without index",
    "TS021": "type mismatch (float into an int, a number as a condition, ...)",
    "TS022": "an index, bound or step that is not an integer",
    "TS023": "an index, bound, parity or coordinate that is not quasi-affine",
    "TS024": "a value that must be a compile-time constant is not",
    "TS025": "a `where` constraint that is not Presburger (or not a condition)",
    "TS026": "a constant out of its range (block size, extent, count, step, alignment ...",
    "TS027": "unknown function or wrong number of arguments",
    "TS030": "a layout that cannot be realised over its buffer",
    "TS031": "a tensormap without a box; a TMA slice whose shape differs from the box",
    "TS032": "a role's thread range empty or outside the block",
    "TS034": "a wgmma whose tiles, dtypes or accumulator do not make an MMA (m64nNk16 for 16-bit "
             "inputs, k32 for u8, k8 for tf32)",
    "TS035": "a fragment no wgmma can accumulate into (64 x N, N a multiple of 8 up to 256; "
             "f32 or i32)",
    "TS036": "a construct the target's hardware does not have (`--target gfx942`: TMA, "
             "mbarriers, named barriers, fences, bulk groups, wgmma, setmaxnreg)",
    "TS040": "a malformed ensures clause (an input on the left, shared memory, a repeated ...",
    "TS041": "an ensures clause that reads outside a tensor for some allowed size and output "
             "element",
    "TS042": "a malformed requires clause (not an `in` integer index tensor, a variable that "
             "indexes no index tensor, not Presburger, a predicate misused)",
    "TS043": "a cluster construct that does not fit the kernel's cluster (no `cluster` clause, "
             "a CTA or multicast mask outside it, a peer's barrier in anything but `arrive`, "
             "more than 8 CTAs)",
    "TS100": "a shared-memory layout that cannot be realised over its buffer",
    "TS101": "a shared-memory layout that maps two elements to one offset (aliasing)",
    "TS102": "a shared-memory layout with a negative offset",
    "TS103": "shared memory beyond the block's limit",
    "TS190": "a layout question ISL could not decide within its budget",
    "TS200": "`tilesafe run`: sizes missing, unknown, against `where`, giving an empty grid or ...",
    "TS201": "a global load or store index outside the tensor",
    "TS202": "a shared-buffer index (or TMA slice) outside the buffer",
    "TS203": "integer division by zero at run time (only with `var` operands)",
    "TS204": "a fragment register index outside 0 .. N/2 - 1 (`acc[r]`, interpreter)",
    "TS205": "a launch's index tensors violate a `requires` clause (the interpreter, `tilesafe "
             "run`, the GPU case runner: the clause, the element and its value), or a clause "
             "too large to check",
    "TS206": "`tilesafe run`: no index-tensor contents satisfying the `requires` clauses were "
             "found at these sizes (the bounded search ended: unsatisfiable, or too large)",
    "TS211": "an element of an `out`/`inout` tensor written twice",
    "TS212": "an element of an `out`/`inout` tensor never written, also when no statement ...",
    "TS213": "a grid dimension below 1 for some allowed size: nothing launches",
    "TS214": "a grid dimension above the hardware's maximum (2^31 - 1 in x, 65535 in y and z) ...",
    "TS215": "an element of an `in` tensor is written",
    "TS216": "a parameter declares no role; the one inferred from the body is used",
    "TS217": "an `out`/`inout` element written by one thread and read by another with nothing "
             "ordering them (another block, or no `sync` between them)",
    "TS218": "a kernel with no `out`/`inout` parameter writes no global tensor: it has no effect",
    "TS219": "an `in` parameter the kernel never reads (warning)",
    "TS220": "an `out` element read before any write of it is ordered before the read: its "
             "contents before the launch are undefined",
    "TS221": "a grid dimension that is not a multiple of the cluster's for some allowed size: "
             "the launch has no clusters",
    "TS290": "ISL ran past its operation budget (or failed): no verdict",
    "TS291": "a guard or index without a Presburger form left the verdict open",
    "TS292": "a possible global race only an ordering outside the model could rule out (a TMA "
             "copy in the same block, an mbarrier or named-barrier hand-off)",
    "TS301": "generic writes read by a TMA store (or a wgmma) with no `fence proxy_async` ...",
    "TS302": "a write without the whole region, or meeting another thread's unordered access ...",
    "TS303": "a TMA load into a region someone still holds",
    "TS304": "a read without permission (not ready), or of an element another thread of its ...",
    "TS305": "an access after the class's own arrive gave the region away",
    "TS306": "a read of shared memory nothing (no thread, no copy) has written",
    "TS307": "the block exits while a TMA store may still read its shared memory",
    "TS308": "a fragment register read or written while a wgmma into it may be pending (no "
             "`wgmma_wait` covered its group)",
    "TS309": "a hand-off between CTAs of a cluster whose release or acquire is not at cluster "
             "scope (a relaxed or `.cta` arrive or wait on a peer's barrier, a relaxed "
             "cluster_arrive before a peer reads): the peer's access races",
    "TS401": "mbarrier used before init",
    "TS402": "init of a live mbarrier",
    "TS403": "more arrivals than the phase has pending",
    "TS404": "mbarrier tx-count outside -(2^20-1)..2^20-1",
    "TS405": "a TMA load signals a barrier whose init was not fenced",
    "TS406": "a phase that never completes: some but not all arrivals come",
    "TS407": "a phase completes while bytes are still expected, or never completes for lack ...",
    "TS408": "a wait on the wrong parity",
    "TS409": "mbarrier index outside the array",
    "TS410": "deadlock: every unfinished role waits",
    "TS411": "mbarrier init count outside 1..2^20-1",
    "TS412": "a thread arrives twice in one phase of a named barrier",
    "TS413": "a named barrier id used two ways (id 0 beside sync, two counts in one phase)",
    "TS414": "a named barrier's thread count is not whole warps or exceeds the block",
    "TS415": "wait parity operand not 0 or 1",
    "TS416": "expect_tx returns tx-count to zero after all arrivals (PTX leaves it unspecified)",
    "TS420": "a block-wide sync not reached by every thread",
    "TS421": "deadlock at named barriers: a phase that can never fill",
    "TS430": "the block exits while a TMA load may still be in flight",
    "TS431": "the block exits while a wgmma may still be pending (no `wgmma_wait` covered it)",
    "TS432": "a CTA's shared memory or barrier used by a peer after the CTA may have exited (no "
             "cluster barrier before exit)",
    "TS433": "a peer CTA's shared memory or barrier used before the CTAs met at a cluster "
             "barrier (the peer may not run yet, its barrier inits not be visible)",
    "TS434": "a CTA rank or multicast mask outside the cluster",
    "TS490": "outside the model or the argument (an unsupported construct, a term not ...",
    "TS491": "a verification budget ran out (the message names the option)",
    "TS492": "a possible violation the model cannot decide (an mbarrier ordering between ...",
    "TS498": "a replayed schedule names a role that cannot move (interpreter)",
    "TS499": "the interpreter's step limit",
    "TS501": "The rank is 1 to 5",
    "TS502": "Every box dimension is 1 to 256 elements",
    "TS503": "The box's inner row, `boxDim[0] × element size`, is a multiple of 16 bytes",
    "TS504": "With no interleave and a swizzle mode, the inner row is at most the swizzle ...",
    "TS505": "Every global stride is a multiple of 16 bytes (32 with 32-byte interleave) and ...",
    "TS506": "The global base address is 16-byte aligned (32 with 32-byte interleave)",
    "TS507": "Every element (traversal) stride is 1 to 8 — dimension 0's too, although without ...",
    "TS508": "The element type is one of u8, u16, u32, i32, u64, i64, f16, f32, f64, bf16 ...",
    "TS509": "Interleave (16B or 32B) needs rank 3..5, and 32-byte interleave needs the 32B ...",
    "TS510": "The shared-memory destination of a bulk tensor copy is 128-byte aligned ...",
    "TS511": "Every global dimension is 1 to 2^32 elements",
    "TS512": "NaN out-of-bounds fill (`FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA`) only for ...",
    "TS513": "Interleave ∈ {none, 16B, 32B}; swizzle ∈ {none, 32B, 64B, 128B} (the driver's ...",
    "TS514": "The arrays have rank (rank−1 for strides) entries",
    "TS515": "The driver refuses a box it sizes above the device's shared memory per SM ...",
    "TS516": "The start coordinate of a copy along the innermost dimension must be a multiple ...",
    "TS517": "a TMA copy whose box lies wholly outside its tensor for some launch (moves "
             "nothing; warning)",
    "TS520": "the arrangement a TMA copy writes differs from the buffer's layout",
    "TS530": "a wgmma operand tile no matrix descriptor reads as the layout places it (for some "
             "origin or placement)",
    "TS531": "a wgmma operand tile that differs between threads of one warpgroup",
    "TS532": "a wgmma that part of a warpgroup runs (.aligned: all 128 threads together)",
    "TS533": "fragments of a role over its register budget (255, or its setmaxnreg)",
    "TS534": "a wgmma with no `wgmma_fence` since its threads last accessed the fragment's "
             "registers (or before their first MMA)",
    "TS536": "a setmaxnreg that part of a warpgroup runs (.sync.aligned: whole warpgroups)",
    "TS537": "setmaxnreg budgets of a block beyond the SM's 65536 registers",
    "TS539": "a wgmma hardware rule the checker could not decide",
    "TS590": "a TMA rule left undecided (budget)",
    "TS591": "a TMA rule outside what the checker models",
    "TS601": "shared-memory bank conflicts (warning)",
    "TS690": "bank conflicts counted at representative sizes only (unknown for others)",
    "TS701": "an integer value may not fit 64 bits for some size `where` allows: no exact code",
    "TS702": "a TMA coordinate may not fit its 32-bit operand",
    "TS703": "shared memory (buffers, barriers, alignment slack) beyond the block's limit",
    "TS704": "no size satisfies `where` and the launch contract",
    "TS705": "a construct the code generator does not emit yet (tensor cores)",
    "TS706": "a fragment register index that is not a compile-time constant: no register "
             "names it",
    "TS707": "a wgmma operand for which no matrix descriptor reads the tile",
    "TS720": "structure: the module interface (entry, parameters, `.reqntid`, the shared ...",
    "TS721": "the address of every global and shared load and store equals the IR's, as ...",
    "TS722": "the PTX runs each instruction for exactly the instances (sizes, block, thread ...",
    "TS723": "`ld.global.nc` only on tensors the kernel never writes (neither by a store nor ...",
    "TS724": "mbarrier operands: addresses, `init` counts, `expect_tx` bytes, `try_wait` parities",
    "TS725": "TMA operands: the slice's shared address, the tensor map (the generic address of ...",
    "TS726": "order: whenever the IR has two memory/synchronisation operations in program ...",
    "TS727": "loops: iteration n of the PTX loop runs exactly when `lo + step*n < hi` (IR) ...",
    "TS728": "the shared-memory base: every tsmem-only sub-computation of a shared address ...",
    "TS729": "other synchronisation: `bar.sync 0`, the `bar.warp.sync` lane mask (the role's ...",
    "TS730": "tensor cores: a wgmma's matrix descriptors equal the ones semantics/wgmma_desc ...",
    "TS731": "fragments: every wgmma of a fragment accumulates into the same registers in one ...",
    "TS801": "value: the element arrived from the wrong input element",
    "TS802": "value: the arithmetic differs from the ensures clause",
    "TS803": "value: a reduction's contributions differ (one dropped, doubled or negated)",
    "TS804": "value: a fill value (TMA out-of-bounds zero/NaN) arrived where data was meant",
    "TS890": "value: the ensures clause is not proved for every size (the launches agreed)",
    "TS920": "compose: an executor's `requires` clause that the inspector's output violates "
             "(a routing shows it)",
    "TS921": "compose: an executor's `requires` clause not proved of the inspector's output "
             "(a launch still checks it)",
    "TS922": "compose: the executor cannot take the inspector's arrays as bound (a missing "
             "tensor or size, a tensor that is not an `in` i32 vector, a `where` no routing "
             "meets)",
    "TS901": "jit call: wrong arguments (too many, an unknown keyword, a parameter given twice "
             "or missing, a size no tensor's shape determines)",
    "TS902": "jit call: a tensor's shape disagrees with the kernel's (wrong rank, or a size read "
             "from two dimensions with two values)",
    "TS903": "jit call: the sizes violate the kernel's `where` (the message names the clause) "
             "or give a launch outside the hardware's limits",
    "TS904": "jit call: a tensor of the wrong dtype for its parameter",
    "TS905": "jit call: a tensor that is not row-major and densely packed",
    "TS906": "jit call: a tensor a TMA descriptor covers whose base address or strides are not "
             "16-byte aligned",
    "TS907": "jit call: tensors on the wrong device (CPU tensors for device='gpu', two GPUs)",
    "TS908": "jit call: an `out`/`inout` tensor that shares memory with another argument",
    "TS909": "jit: the verification gate refuses the kernel (an error obligation or the "
             "translation not proved); `unverified=True` runs it anyway, with a warning",
    "TS910": "jit: the launch itself failed (the GPU driver refused it or the kernel trapped)",
    "TS911": "jit call: the index tensors violate a `requires` clause (checked on their device "
             "before the launch: the clause, the element and its value), or a clause too large "
             "to check",
}


def describe(code: str) -> str:
    """The one-line meaning of a code (empty for an unknown one)."""
    return CODES.get(code, "")
