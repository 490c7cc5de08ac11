"""The translation validator (codegen/validate): every corpus kernel's PTX is proved; planted
code-generation bugs are refuted with concrete counterexamples; the specification side agrees
with the interpreter's addresses; the PTX reader and executor give PTX's meaning."""

from __future__ import annotations

import functools
import random
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
import z3

from tilesafe.api import checked_program
from tilesafe.checkers.obligation import Verdict
from tilesafe.codegen.compile import compile_kernel
from tilesafe.codegen.validate import CODES, encode, validate_ptx
from tilesafe.codegen.validate import cfg as cfgmod
from tilesafe.codegen.validate import terms as T
from tilesafe.codegen.validate.ptx_parse import parse
from tilesafe.codegen.validate.spec import Spec
from tilesafe.codegen.validate.symexec import Executor
from tilesafe.frontend import ir
from tilesafe.frontend.walk import own_exprs, statements
from tilesafe.semantics.expr import evaluate
from tilesafe.semantics.interpreter.interp_io import check_where
from tilesafe.semantics.interpreter.smem import plan_shared

ROOT = Path(__file__).resolve().parent.parent
CORPUS = sorted(str(p.relative_to(ROOT)) for d in ("corpus/good", "corpus/codegen")
                for p in (ROOT / d).glob("*.tsk"))
PTXAS = shutil.which("ptxas")


@functools.cache
def compiled(path: str) -> tuple[ir.Kernel, str]:
    kernel = checked_program(ROOT / path).kernels[0]
    return kernel, compile_kernel(kernel, path).ptx


# ---- (a) every corpus kernel's PTX is proved ------------------------------------------------


@pytest.mark.parametrize("path", CORPUS)
def test_corpus_ptx_is_proved(path: str) -> None:
    kernel, ptx = compiled(path)
    obs = validate_ptx(kernel, ptx)
    failed = [f"{o.verdict.value} {o.code} {o.name}: {o.message}" for o in obs
              if o.verdict is not Verdict.PROVED]
    assert not failed, "\n".join(failed)
    names = " ".join(o.name for o in obs)
    assert "module interface" in names and "order of memory" in names
    assert all(o.checker == "translation" for o in obs)


def test_every_code_is_documented() -> None:
    doc = (ROOT / "docs" / "codegen.md").read_text()
    readme = (ROOT / "README.md").read_text()
    for code in CODES:
        assert code in doc and code in readme, code


# ---- (b) planted code-generation bugs -------------------------------------------------------


@dataclass(frozen=True)
class Bug:
    name: str
    path: str
    old: str
    new: str
    code: str
    keys: tuple[str, ...] = ()  # counterexample entries that must be present
    moves: tuple[tuple[str, str], ...] = ()  # further (old, new) replacements


P2 = "corpus/good/pipeline2.tsk"
PS = "corpus/good/persistent_strided.tsk"
ARRIVE = "\tmbarrier.arrive.expect_tx.shared::cta.b64 _, [%r18], 8192;  // 39:7 arrive expect_tx\n"
BUGS = [
    Bug("store address off by one element", P2, "\tadd.s64 %rd59, %rd58, %rd75;\n",
        "\tadd.s64 %rd59, %rd58, %rd75;\n\tadd.s64 %rd59, %rd59, 1;\n", "TS721",
        ("M", "N", "thread", "PTX address", "IR address")),
    Bug("swizzle XOR mask", P2, "and.b32 %r45, %r44, 448;", "and.b32 %r45, %r44, 384;",
        "TS721", ("thread", "tsmem (shared address of the dynamic array)", "PTX address")),
    Bug("swizzle shift", P2, "shr.s32 %r46, %r45, 3;", "shr.s32 %r46, %r45, 2;", "TS721",
        ("thread", "PTX address", "IR address")),
    Bug("cvta.param dropped", P2, "\tcvta.param.u64 %rd69, %rd69;\n", "", "TS725",
        ("PTX tensor map", "param-space address of tm_tin")),
    Bug("wrong parity", P2, "add.s32 %r16, %r15, 1;", "add.s32 %r16, %r15, 0;", "TS724",
        ("PTX parity", "IR parity")),
    Bug("fence.mbarrier_init missing", P2,
        "\tfence.mbarrier_init.release.cluster;  // 31:5 fence mbarrier_init\n", "", "TS720",
        ("M", "N", "thread")),
    Bug("fence.proxy.async missing", "corpus/good/smem_fence_tma_store.tsk",
        "\tfence.proxy.async.shared::cta;  // 30:3 fence proxy_async\n", "", "TS720",
        ("M", "N")),
    Bug("TMA coordinates swapped", P2, "{%r26, %r25}", "{%r25, %r26}", "TS725",
        ("PTX coordinate 0 (innermost first)", "IR coordinate 0 (innermost first)")),
    Bug("32-bit flat index past 2^31 elements", P2, "\tmul.wide.s32 %rd58, %r52, %r10;\n",
        "\tmul.lo.s32 %r71, %r52, %r10;\n\tcvt.s64.s32 %rd58, %r71;\n", "TS721",
        ("M", "N", "block.x", "PTX address", "IR address"),
        ((".reg .b32 %r<71>;", ".reg .b32 %r<72>;"),)),
    Bug("loop bound off by one", P2, "setp.ge.s32 %p67, %r12, %r66;",
        "setp.gt.s32 %p67, %r12, %r66;", "TS727", ("N", "iteration of k (36:5)")),
    Bug("mbarrier count", P2, "mbarrier.init.shared::cta.b64 [%r6], 4;",
        "mbarrier.init.shared::cta.b64 [%r6], 3;", "TS724", ("PTX count", "IR count")),
    Bug("mbarrier address", P2, "add.u32 %r14, %r14, 16400;", "add.u32 %r14, %r14, 16384;",
        "TS724", ("PTX address", "IR address", "iteration of k (36:5)")),
    Bug("shared base rounded to 512", P2, "and.b32 %r4, %r4, -1024;",
        "and.b32 %r4, %r4, -512;", "TS728",
        ("tsmem (shared address of the dynamic array)", "PTX base")),
    Bug("expect_tx bytes", P2, "_, [%r18], 8192;", "_, [%r18], 4096;", "TS724",
        ("PTX tx bytes", "IR tx bytes")),
    Bug("bar.sync before the inits", P2, "\tbar.sync 0;  // 33:3 sync\n", "", "TS726",
        ("thread",), (("\tsetp.eq.s32 %p2, %r1, 0;\n",
                       "\tbar.sync 0;  // 33:3 sync\n\tsetp.eq.s32 %p2, %r1, 0;\n"),)),
    Bug("arrive after the copy it counts", P2, ARRIVE, "", "TS726", ("thread",),
        (("// 40:7 tma_load\n", "// 40:7 tma_load\n" + ARRIVE),)),
    Bug("elect one picks thread 1", P2, "setp.eq.s32 %p8, %r1, 0;", "setp.eq.s32 %p8, %r1, 1;",
        "TS722", ("thread", "IR runs", "PTX runs")),
    Bug("warp mask of a partial warp", "corpus/codegen/sync_zoo.tsk", "bar.warp.sync %r67;",
        "bar.warp.sync -1;", "TS729", ("thread", "PTX lane mask", "IR lane mask")),
    Bug("wait that does not spin", P2, "\t@!%p68 bra $Lwait5;\n", "", "TS729"),
    Bug("wait that spins while the phase is complete", P2, "\t@!%p68 bra $Lwait5;\n",
        "\t@%p68 bra $Lwait5;\n", "TS729"),
    Bug("store through the wrong tensor map", "corpus/good/tma_store_pipeline.tsk",
        "[%rd83, {", "[%rd76, {", "TS725", ("PTX tensor map",)),
    Bug("store without annotation", P2, "st.global.b16 [%rd61], %h77;  // 49:9 store f16",
        "st.global.b16 [%rd61], %h77;", "TS720"),
    Bug("wait_group count", "corpus/good/tma_store_pipeline.tsk", "wait_group.read 1;",
        "wait_group.read 0;", "TS729"),
    # the persistent kernel whose store address timed out before the loop bound inside
    # its execution condition narrowed the tile counter (narrow.py): still refuted
    Bug("persistent column stride", PS, "mul.lo.s32 %r44, 4, %r43;",
        "mul.lo.s32 %r44, 3, %r43;", "TS721",
        ("N", "block.x", "iteration of t (49:5)", "PTX address", "IR address")),
    Bug("persistent column mask", PS, "and.b32 %r73, %r57, 63;", "and.b32 %r73, %r57, 31;",
        "TS721", ("N", "thread", "PTX address", "IR address")),
    Bug("persistent trip count rounded down", PS, "add.s32 %r41, %r40, 3;",
        "add.s32 %r41, %r40, 0;", "TS727", ("N", "block.x", "iteration of t (49:5)")),
]


def _shift(text: str, lines: int) -> str:
    """The statement positions of `text` (`// LINE:COL ...` annotations, `(LINE:COL)` in a
    counterexample's keys) moved by `lines`."""
    return re.sub(r"(// |\()(\d+):(\d+)",
                  lambda m: f"{m.group(1)}{int(m.group(2)) + lines}:{m.group(3)}", text)


def _line_shift(ptx: str, bug: Bug) -> int:
    shift = next((d for d in (0, 1, -1, 2, -2, 3, -3)
                  if _shift(bug.old, d) in ptx
                  and all(_shift(o, d) in ptx or _shift(o, d) in _shift(bug.new, d)
                          for o, _ in bug.moves)), None)
    assert shift is not None, f"{bug.name}: the PTX changed; update the mutation"
    return shift


def mutate(ptx: str, bug: Bug) -> str:
    """Plant `bug`. The patterns name statements by source position; when lines were added
    above them in the kernel (an `ensures` clause), the one shift that makes every pattern
    match is applied -- the instructions themselves must still be as recorded."""
    shift = _line_shift(ptx, bug)
    out = ptx.replace(_shift(bug.old, shift), _shift(bug.new, shift), 1)
    for old, new in bug.moves:
        assert _shift(old, shift) in out, f"{bug.name}: {old!r} not found"
        out = out.replace(_shift(old, shift), _shift(new, shift), 1)
    return out


def assemble(ptx: str, tmp: Path) -> subprocess.CompletedProcess:
    f = tmp / "k.ptx"
    f.write_text(ptx)
    return subprocess.run([PTXAS, "-arch=sm_90a", str(f), "-o", str(tmp / "k.cubin")],
                          capture_output=True, text=True, timeout=120)


def concrete(cex: object) -> bool:
    """Every value a number or a word, at least one number, no symbolic leftovers."""
    if not isinstance(cex, dict) or not cex:
        return False
    vals = list(cex.values())
    return any(isinstance(v, int) for v in vals) and all(
        isinstance(v, (int, str)) and not (isinstance(v, str) and ("(" in v or "…" in v))
        for v in vals if not isinstance(v, bool))


@pytest.mark.parametrize("bug", BUGS, ids=[b.name for b in BUGS])
def test_planted_bug_is_refuted(bug: Bug, tmp_path: Path) -> None:
    kernel, ptx = compiled(bug.path)
    bad = mutate(ptx, bug)
    obs = validate_ptx(kernel, bad)
    hits = [o for o in obs if o.verdict is Verdict.REFUTED and o.code == bug.code]
    assert hits, [(o.verdict.value, o.code, o.name, o.message) for o in obs
                  if o.verdict is not Verdict.PROVED]
    assert any(concrete(o.counterexample) for o in hits), [o.counterexample for o in hits]
    for key in bug.keys:  # a loop's name carries its position, which an added line moves
        pattern = re.sub(r"\\\(\d+:\d+\\\)", lambda _: r"\(\d+:\d+\)", re.escape(key))
        assert any(any(re.fullmatch(pattern, k) for k in o.counterexample or {})
                   for o in hits), (key, hits[0].counterexample)
    if PTXAS is not None:
        r = assemble(bad, tmp_path)
        assert r.returncode == 0, r.stderr


def test_refuted_addresses_differ_concretely() -> None:
    kernel, ptx = compiled(P2)
    bug = next(b for b in BUGS if b.name.startswith("32-bit"))
    obs = validate_ptx(kernel, mutate(ptx, bug))
    o = next(o for o in obs if o.verdict is Verdict.REFUTED and o.code == "TS721")
    cex = o.counterexample
    assert cex["PTX address"] != cex["IR address"]
    # the wrap needs more than 2^31 elements before the row: replay it
    row = cex["block.x"] * 64 + (cex["thread"] - 32) // 64
    assert row * cex["N"] >= 2**31


def test_persistent_column_refuted_where_the_stride_shows() -> None:
    """The wrong block stride (c = (block.x + 3 t) * 64 for (block.x + 4 t) * 64) is
    refuted at an instance whose addresses differ by exactly the missing 64 t columns."""
    kernel, ptx = compiled(PS)
    bug = next(b for b in BUGS if b.name == "persistent column stride")
    obs = validate_ptx(kernel, mutate(ptx, bug))
    cex = next(o for o in obs if o.verdict is Verdict.REFUTED and o.code == "TS721"
               ).counterexample
    t = next(v for k, v in cex.items() if k.startswith("iteration of t "))
    assert t > 0 and cex["IR address"] - cex["PTX address"] == 2 * 64 * t


INPLACE = """kernel inplace(x: global f32[N], y: global f32[N])
  where N > 0, N <= 1048576
  grid ((N + 127) / 128) block 128
{
  let i = block.x * 128 + thread
  if i < N {
    y[i] = y[i] + x[i]
  }
}
"""


def test_noncoherent_load_of_a_written_tensor(tmp_path: Path) -> None:
    src = tmp_path / "inplace.tsk"
    src.write_text(INPLACE)
    kernel = checked_program(src).kernels[0]
    ptx = compile_kernel(kernel, str(src)).ptx
    assert "ld.global.f32" in ptx and "ld.global.nc.f32" in ptx  # y coherent, x not
    assert all(o.verdict is Verdict.PROVED for o in validate_ptx(kernel, ptx))
    bad = ptx.replace("ld.global.f32", "ld.global.nc.f32", 1)
    hits = [o for o in validate_ptx(kernel, bad)
            if o.verdict is Verdict.REFUTED and o.code == "TS723"]
    assert hits and concrete(hits[0].counterexample)
    assert hits[0].counterexample["tensor written by"].startswith("store f32")
    if PTXAS is not None:
        assert assemble(bad, tmp_path).returncode == 0


WIDE_COMPARE = """kernel wide_compare(y: global f32[N])
  where N > 0, N <= 1048576
  grid ((N + 127) / 128) block 128
{
  let i = block.x * 128 + thread
  if i < N && thread < 4294967297 {
    y[i] = 1.0
  }
}
"""


def test_comparison_with_a_64_bit_constant(tmp_path: Path) -> None:
    """Found by the validator: the printer compares a 32-bit register with an immediate
    that needs 64 bits in a `.s32` setp, which ptxas accepts and truncates (4294967297 ->
    1), so the store runs for thread 0 only. Refuted while the printer does so; proved once
    it compares in 64 bits."""
    src = tmp_path / "wide.tsk"
    src.write_text(WIDE_COMPARE)
    kernel = checked_program(src).kernels[0]
    ptx = compile_kernel(kernel, str(src)).ptx
    obs = validate_ptx(kernel, ptx)
    if re.search(r"setp\.lt\.s32 [^;]*4294967297;", ptx):
        hits = [o for o in obs if o.verdict is Verdict.REFUTED and o.code == "TS722"]
        assert hits and hits[0].counterexample["IR runs"] == 1
        assert hits[0].counterexample["PTX runs"] == 0
        assert hits[0].counterexample["thread"] != 0
    else:
        assert all(o.verdict is Verdict.PROVED for o in obs)


def test_misannotated_instruction_is_refuted() -> None:
    kernel, ptx = compiled(P2)
    line = re.search(r"// (\d+):9 store f16", ptx).group(1)  # the output store's line
    bad = ptx.replace(f"// {line}:9 store f16", f"// {line}:10 store f16")
    obs = validate_ptx(kernel, bad)
    assert any(o.verdict is Verdict.REFUTED and o.code == "TS720" and f"{line}:10" in o.message
               for o in obs)
    bad = ptx.replace(f"// {line}:59 load f16", f"// {line}:59 load f32")
    assert bad != ptx
    assert any(o.verdict is Verdict.REFUTED and o.code == "TS720"
               for o in validate_ptx(kernel, bad))


def test_unknown_instruction_is_never_proved() -> None:
    kernel, ptx = compiled(P2)
    bad = ptx.replace("\tmov.u32 %r24, %ctaid.x;\n", "\tpopc.b32 %r24, %r1;\n")
    obs = validate_ptx(kernel, bad)
    unk = [o for o in obs if o.verdict is Verdict.UNKNOWN and o.code == "TS720"]
    assert unk and "popc" in unk[0].name
    # the store's address used %r24: it cannot be proved any more
    assert not all(o.verdict is Verdict.PROVED for o in obs if "store f16" in o.name)


def test_statement_behind_an_unknown_instruction_is_not_refuted() -> None:
    """A vector store the executor does not model: unknown, not 'missing'."""
    kernel, ptx = compiled(P2)
    bad = ptx.replace("st.global.b16 [%rd61], %h77;", "st.global.v2.b16 [%rd61], {%h77, %h77};")
    obs = validate_ptx(kernel, bad)
    store = [o for o in obs if "store f16" in o.name]
    assert store and all(o.verdict is Verdict.UNKNOWN for o in store)
    assert not any(o.verdict is Verdict.REFUTED for o in obs)


def test_unreadable_ptx_is_unknown() -> None:
    kernel, ptx = compiled(P2)
    for bad in (ptx.replace("{%r26, %r25}", "{%r26, %r25"), "garbage $$$", ""):
        obs = validate_ptx(kernel, bad)
        assert obs and all(o.verdict is not Verdict.PROVED for o in obs)


def test_interface_mismatch_is_refuted() -> None:
    kernel, ptx = compiled(P2)
    for old, new in ((".reqntid 160, 1, 1", ".reqntid 256, 1, 1"),
                     (".param .s64 s_N", ".param .u32 s_N"),
                     (".align 16 .b8 tsmem[]", ".align 8 .b8 tsmem[]")):
        obs = validate_ptx(kernel, ptx.replace(old, new))
        assert any(o.name == "module interface" and o.verdict is Verdict.REFUTED for o in obs)


# ---- (c) the specification side against the interpreter's addresses ------------------------


def _shared_elements(buf: ir.SharedBuffer, rng: random.Random) -> list[tuple[int, ...]]:
    import itertools

    allc = list(itertools.product(*(range(e) for e in buf.shape)))
    return allc if len(allc) <= 4096 else rng.sample(allc, 2000)


@pytest.mark.parametrize("path", CORPUS)
def test_shared_layout_terms_match_the_interpreter(path: str) -> None:
    """Every shared buffer's specification (ISL map, swizzle XOR, F2 bases) gives the byte
    address the interpreter's slot table gives, element by element, and the z3 encoding of
    the same term evaluates to the same number."""
    kernel, _ = compiled(path)
    T.reset()
    spec = Spec(kernel)
    plan = plan_shared(kernel.shared)
    rng = random.Random(7)
    tsmem = T.leaf("tsmem", 32)
    for buf in kernel.shared:
        coords = [T.leaf(f"c{i}", 32, T.LeafInfo("int", False, 0, e - 1))
                  for i, e in enumerate(buf.shape)]
        addr = spec.shared_address(buf, [T.uint(c) for c in coords])
        width = encode.width_for([addr])
        enc = encode.Encoder(width, ranges=encode.intervals([addr]))
        z = enc(addr)
        for n, c in enumerate(_shared_elements(buf, rng)):
            mapping = {id(tsmem): T.bv(1024, 32)}  # R = 1024 = the interpreter's base
            mapping.update({id(x): T.bv(v, 32) for x, v in zip(coords, c, strict=True)})
            got = T.substitute([addr], mapping)[0]
            assert got.is_const and got.val == plan.placements[buf.name].address(c), \
                (buf.name, c, got)
            if n < 64:
                zs = {enc.leaves[str(x.val)]: z3.BitVecVal(v, 32)
                      for x, v in zip(coords, c, strict=True) if str(x.val) in enc.leaves}
                zs[enc.leaves["tsmem"]] = z3.BitVecVal(1024, 32)
                val = z3.simplify(z3.substitute(z, *zs.items()))
                assert val.as_signed_long() == got.val, (buf.name, c)


def _sizes_for(kernel: ir.Kernel) -> list[dict[str, int]]:
    """A few size assignments `where` accepts (small, so the interpreter could run them)."""
    out = []
    for base in (16, 64, 128, 192, 320):
        for extra in (0, 1, 3):
            sizes = {s: base + (extra if i else 0) * 64 for i, s in enumerate(kernel.sizes)}
            try:
                check_where(kernel, sizes)
            except Exception:  # noqa: BLE001 - any violation: try the next
                continue
            out.append(sizes)
    return out[:3]


def _ir_value(kernel: ir.Kernel):
    lets = {s.uid: s.value for s in statements(kernel.body) if isinstance(s, ir.Let)}

    def value(e: ir.Expr, env: dict) -> int:
        def leaf(x: ir.Expr):
            if isinstance(x, ir.SizeVar):
                return lambda env: env["sizes"][x.name]
            if isinstance(x, ir.Builtin):
                k = x.kind
                if k is ir.BuiltinKind.THREAD:
                    return lambda env: env["thread"]
                if k is ir.BuiltinKind.LANE:
                    return lambda env: env["thread"] % 32
                if k is ir.BuiltinKind.WARP_ID:
                    return lambda env: env["thread"] // 32
                return lambda env: env["block"]["xyz".index(k.value[-1])]
            if isinstance(x, ir.LoopVar):
                return lambda env: env["loops"][x.uid]
            if isinstance(x, ir.LocalRef) and x.uid in lets:
                return lambda env: value(lets[x.uid], env)
            raise evaluate.NoValue(x)

        return int(evaluate.compile_expr(e, leaf)(env))

    return value


@pytest.mark.parametrize("path", ["corpus/good/pipeline2.tsk", "corpus/good/row_reduce.tsk",
                                  "corpus/codegen/layouts_zoo.tsk",
                                  "corpus/codegen/sync_zoo.tsk",
                                  "corpus/good/transpose_swizzled.tsk",
                                  "corpus/good/warp_specialized.tsk"])
def test_access_addresses_match_the_interpreter(path: str) -> None:
    """For random sizes, blocks, threads and iterations: each load/store's specified
    address (and whether it runs) agrees with evaluating the IR's indices with the
    interpreter's expression semantics and addressing (row-major global, smem plan)."""
    kernel, _ = compiled(path)
    T.reset()
    spec = Spec(kernel)
    plan = plan_shared(kernel.shared)
    value = _ir_value(kernel)
    rng = random.Random(11)
    checked = 0
    for sizes in _sizes_for(kernel):
        grid = check_where(kernel, sizes)
        for _ in range(40):
            env = {"sizes": sizes, "thread": rng.randrange(kernel.block),
                   "block": tuple(rng.randrange(g) for g in grid) + (0, 0), "loops": {}}
            leafvals = {f"param:s_{k}": v for k, v in sizes.items()}
            leafvals.update({"tid.x": env["thread"], "tsmem": 1024})
            leafvals.update({f"ctaid.{a}": env["block"][i] for i, a in enumerate("xyz")})
            for e in spec.events:
                if e.kind not in ("ld", "st"):
                    continue
                for f in e.fors:
                    if f.var.uid not in env["loops"]:
                        lo, hi = value(f.lo, env), value(f.hi, env)
                        n = rng.randrange(max(1, (hi - lo + f.step - 1) // f.step))
                        env["loops"][f.var.uid] = lo + f.step * n
                        leafvals[f"n:F{f.var.uid}"] = n
                mapping = {id(x): T.bv(leafvals[str(x.val)], x.w)
                           for x in T.leaves([e.cond, e.ops["addr"]])
                           if str(x.val) in leafvals}
                cond, addr = T.substitute([e.cond, e.ops["addr"]], mapping)
                if not cond.is_const:
                    continue  # depends on loaded data
                idx = [value(i, env) for i in e.node.indices]  # type: ignore[attr-defined]
                runs = all(_ir_cond(c, value, env) for c in _ir_guards(kernel, e.node))
                assert bool(cond.val) == runs, (e.what, e.span, env)
                if not runs:
                    continue
                if e.ops["space"] == "global":
                    t = kernel.tensor(e.ops["tensor"])
                    shape = [value(d, env) for d in t.shape]
                    want = int(np.ravel_multi_index(idx, shape)) * t.dtype.nbytes
                else:
                    want = plan.placements[e.ops["tensor"]].address(tuple(idx))
                assert addr.is_const and addr.val == want, (e.what, e.span, idx, addr)
                checked += 1
    assert checked > 50


def _ir_guards(kernel: ir.Kernel, node: object) -> list[tuple]:
    """The conditions (with polarity), roles and loop bounds around an access."""
    out: list[tuple] = []

    def walk(body, ctx) -> bool:
        for s in body:
            if s is node or any(x is node for v in own_exprs(s) for x in _subexprs(v)):
                out.extend(ctx)
                return True
            if isinstance(s, ir.For) and walk(s.body, ctx + [("for", s)]):
                return True
            if isinstance(s, ir.If) and (walk(s.then, ctx + [("if", s.cond, True)])
                                         or walk(s.orelse, ctx + [("if", s.cond, False)])):
                return True
            if isinstance(s, ir.Role) and walk(s.body, ctx + [("role", s)]):
                return True
        return False

    walk(kernel.body, [])
    return out


def _subexprs(e: ir.Expr):
    from tilesafe.frontend.walk import subexprs

    return subexprs(e)


def _ir_cond(c: tuple, value, env: dict) -> bool:
    if c[0] == "for":
        f = c[1]
        return value(f.lo, env) <= env["loops"][f.var.uid] < value(f.hi, env)
    if c[0] == "role":
        r = c[1]
        t = env["thread"]
        return t == r.threads.lo if r.elect_one else r.threads.lo <= t < r.threads.hi
    lets_free = evaluate.compile_expr(c[1], lambda x: _bool_leaf(x, value))(env)
    return bool(lets_free) == c[2]


def _bool_leaf(x: ir.Expr, value):
    return lambda env: value(x, env)


# ---- the executor speaks PTX ----------------------------------------------------------------

HEAD = """.version 8.3
.target sm_90a
.address_size 64
.extern .shared .align 16 .b8 tsmem[];
.visible .entry t(
  .param .s64 s_N
)
.reqntid 64, 1, 1
{
  .reg .pred %p<9>;
  .reg .b32 %r<40>;
  .reg .b64 %rd<20>;
  mov.u32 %r1, %tid.x;
  ld.param.s64 %rd1, [s_N];
  cvt.u32.u64 %r2, %rd1;
  sub.s32 %r3, %r1, %r2;
"""


def _run(body: str) -> list:
    T.reset()
    mod = parse(HEAD + body + "\n  ret;\n}\n")
    ex = Executor(mod, cfgmod.build(mod))
    res = ex.run()
    assert not res.unknowns, res.unknowns
    return [e.ops["value"] for e in res.events if e.kind == "st"]


def _eval(t: T.Term, tid: int, n: int) -> int:
    leaves = {"tid.x": (tid, 32), "param:s_N": (n, 64)}
    m = {id(x): T.bv(leaves[str(x.val)][0], x.w) for x in T.leaves([t]) if str(x.val) in leaves}
    v = T.substitute([t], m)[0]
    assert v.is_const
    return T.sval(v) if v.w > 1 else int(v.val)


def _trunc_div(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


@pytest.mark.parametrize("tid,n", [(0, 5), (3, 40), (63, 7), (17, 2**31 + 5), (5, 2**33 - 1)])
def test_executor_integer_semantics(tid: int, n: int) -> None:
    """The executor's meaning of each integer instruction, on concrete values (a = tid - N
    as s32, possibly negative; N truncated to 32 bits)."""
    vals = _run("""
  div.s32 %r4, %r3, 7;
  st.shared.b32 [%r1], %r4;
  rem.s32 %r5, %r3, 7;
  st.shared.b32 [%r1], %r5;
  shr.s32 %r6, %r3, 3;
  st.shared.b32 [%r1], %r6;
  shr.u32 %r7, %r3, 3;
  st.shared.b32 [%r1], %r7;
  mul.wide.s32 %rd2, %r3, 1000000;
  cvt.u32.u64 %r8, %rd2;
  st.shared.b32 [%r1], %r8;
  setp.lt.u32 %p1, %r3, 16;
  selp.b32 %r9, 1, 2, %p1;
  st.shared.b32 [%r1], %r9;
  setp.lt.s32 %p2, %r3, 16;
  @%p2 add.s32 %r9, %r9, 10;
  st.shared.b32 [%r1], %r9;
  min.s32 %r10, %r3, %r1;
  max.u32 %r11, %r3, %r1;
  mad.lo.s32 %r12, %r10, 3, %r11;
  st.shared.b32 [%r1], %r12;
  cvt.s64.s32 %rd3, %r3;
  shr.s64 %rd4, %rd3, 40;
  cvt.u32.u64 %r13, %rd4;
  st.shared.b32 [%r1], %r13;
  and.b32 %r14, %r3, -32;
  xor.b32 %r15, %r14, 5;
  st.shared.b32 [%r1], %r15;
""")
    a = T.signed(tid - n, 32)
    au = a % 2**32
    s32 = lambda x: T.signed(x, 32)  # noqa: E731
    want = [_trunc_div(a, 7), a - _trunc_div(a, 7) * 7, a >> 3, s32(au >> 3),
            s32(a * 1000000), 1 if au < 16 else 2,
            (1 if au < 16 else 2) + (10 if a < 16 else 0),
            s32(min(a, tid) * 3 + s32(max(au, tid))), s32(a >> 40), s32((a & -32) ^ 5)]
    got = [_eval(v, tid, n) for v in vals]
    assert got == want


def test_executor_division_by_zero_is_unspecified() -> None:
    (v,) = _run("""
  div.u32 %r4, 100, %r1;
  st.shared.b32 [%r1], %r4;
""")
    assert _eval(v, 4, 0) == 25
    m = {id(x): T.bv(0, x.w) for x in T.leaves([v]) if str(x.val) == "tid.x"}
    rest = T.substitute([v], m)[0]
    assert rest.op == "leaf" and T.leaf_info(str(rest.val)).kind == "nondet"
