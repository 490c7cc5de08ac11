"""The translation validator on tensor-core code (issue 20): every corpus/wgmma kernel's PTX
is proved -- descriptors, scale-d, immediates, fragment registers, the unrolled epilogue --
and planted bugs in that PTX are refuted with their code and a concrete counterexample;
the specification's descriptor agrees with semantics/hw/wgmma_desc.py on concrete addresses
and with the descriptor the mma checker found for each tile; the loops the specification
unrolls are those the PTX unrolls."""

from __future__ import annotations

import functools
import re
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import islpy as isl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tilesafe.api import checked_program
from tilesafe.api import compile as api_compile
from tilesafe.checkers.obligation import Verdict
from tilesafe.codegen.compile import compile_kernel
from tilesafe.codegen.validate import terms as T
from tilesafe.codegen.validate import validate_ptx
from tilesafe.codegen.validate.spec import Spec
from tilesafe.codegen.validate.spec_mma import descriptor_term, unrolled
from tilesafe.frontend import ir
from tilesafe.frontend.walk import statements
from tilesafe.semantics.access.access import collect
from tilesafe.semantics.hw import mma_rules
from tilesafe.semantics.hw import wgmma_desc as wd

ROOT = Path(__file__).resolve().parent.parent
WGMMA = sorted(p.stem for p in (ROOT / "corpus" / "wgmma").glob("*.tsk"))
PTXAS = shutil.which("ptxas")

# A kernel that preloads its accumulator (`acc[r] = v`: fragment writes) and reads it back
# through float arithmetic into a bf16 output (the value, narrowed, from register r).
PRELOAD = """\
kernel pre_mma(a: in global bf16[64, 64], b: in global bf16[128, 64],
               cin: in global f32[64, 128], c: out global bf16[64, 128])
  grid 1 block 128
{
  shared sa: bf16[64, 64] layout swizzle128B(row_major) align 1024
  shared sb: bf16[128, 64] layout swizzle128B(row_major) align 1024
  fragment acc: f32[64, 128]
  for i in 0 .. 32 {
    let e = i * 128 + thread
    sa[e / 64, e % 64] = a[e / 64, e % 64]
  }
  for i in 0 .. 64 {
    let e = i * 128 + thread
    sb[e / 64, e % 64] = b[e / 64, e % 64]
  }
  for r in 0 .. 64 {
    acc[r] = cin[row(acc, r), col(acc, r)] * 2.0
  }
  fence proxy_async
  sync
  wgmma_fence
  for kk in 0 .. 4 {
    wgmma acc += sa[0 : 64, kk * 16 : 16] @ sb[0 : 128, kk * 16 : 16].T
  }
  wgmma_commit
  wgmma_wait 0
  for r in 0 .. 64 {
    c[row(acc, r), col(acc, r)] = acc[r] + 1.0
  }
}
"""


def _write(tmp: Path, name: str, text: str) -> Path:
    f = tmp / f"{name}.tsk"
    f.write_text(text)
    return f


@functools.cache
def _sources(tmp: str) -> dict[str, Path]:
    """The corpus kernels, the preloading kernel, and tma_ring_mma with `setmaxnreg` in
    its consumer warpgroup."""
    out = {name: ROOT / "corpus" / "wgmma" / f"{name}.tsk" for name in WGMMA}
    out["preload"] = _write(Path(tmp), "preload", PRELOAD)
    ring = out["tma_ring_mma"].read_text()
    role = "role consumer = warps 4 .. 8 {\n"
    assert role in ring
    out["setmaxnreg"] = _write(Path(tmp), "setmaxnreg",
                               ring.replace(role, role + "    setmaxnreg inc 232\n", 1))
    return out


@pytest.fixture(scope="module")
def sources(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return _sources(str(tmp_path_factory.mktemp("wgmma")))


@functools.cache
def _compiled(path: Path) -> tuple[ir.Kernel, str]:
    kernel = checked_program(path).kernels[0]
    return kernel, compile_kernel(kernel, str(path)).ptx


def compiled(sources: dict[str, Path], name: str) -> tuple[ir.Kernel, str]:
    return _compiled(sources[name])


def failures(obs) -> list[str]:
    return [f"{o.verdict.value} {o.code} {o.name}: {o.message}" for o in obs
            if o.verdict is not Verdict.PROVED]


# ---- every kernel's PTX is proved -----------------------------------------------------------


@pytest.mark.parametrize("name", WGMMA + ["preload", "setmaxnreg"])
def test_tensor_core_ptx_is_proved(sources: dict[str, Path], name: str) -> None:
    kernel, ptx = compiled(sources, name)
    obs = validate_ptx(kernel, ptx)
    assert not failures(obs), "\n".join(failures(obs))
    names = [o.name for o in obs]
    # the tensor-core obligations are there, not skipped
    assert any(n.startswith("wgmma at ") and ": operands of PTX line" in n for n in names)
    for what in ("wgmma_fence", "wgmma_commit", "wgmma_wait"):
        assert any(n.startswith(f"{what} at ") and "executes exactly" in n for n in names)
    assert "fragment acc: its PTX registers" in names
    regs = kernel.fragment("acc").regs
    stores = [n for n in names if n.startswith("store ") and ": value of PTX line" in n]
    assert len(stores) == regs  # one per unrolled copy of the epilogue: every register
    assert {int(re.search(r"\br = (\d+)\)", n).group(1))  # type: ignore[union-attr]
            for n in stores} == set(range(regs))
    if name == "preload":
        assert len([n for n in names if n.startswith("write acc[")
                    and ": value of PTX line" in n]) == regs
    if name == "setmaxnreg":
        assert any(n.startswith("setmaxnreg at ") and "operands" in n for n in names)


def test_compile_api_validates_tensor_core_kernels() -> None:
    """The TS705 guard is gone: `compile --unverified` emits and validates (verify still
    reports TS538 until the temporal model covers wgmma)."""
    res = api_compile(ROOT / "corpus" / "wgmma" / "tile_mma.tsk", unverified=True)
    assert res.compiled is not None and "wgmma.mma_async" in res.compiled.ptx
    assert res.validation and not failures(res.validation)
    if res.failing:  # the gate still refuses without --unverified
        assert "UNVERIFIED" in res.compiled.ptx


# ---- planted bugs -----------------------------------------------------------------------


def _desc_constant(fn: Callable[[int], int]) -> Callable[[str], str]:
    """Rewrite the first descriptor's constant fields (`or.b64 d, start, CONST`)."""
    def mutate(ptx: str) -> str:
        return re.sub(r"(or\.b64 %rd\d+, %rd\d+, )(-?\d+);",
                      lambda m: f"{m.group(1)}{_signed(fn(int(m.group(2))))};", ptx, count=1)
    return mutate


def _signed(v: int) -> int:
    v %= 2**64
    return v - 2**64 if v >= 2**63 else v


def _row_off(ptx: str) -> str:
    """128 bytes (one row of the 128-byte swizzled tile) added to the address the first
    descriptor's start field is computed from."""
    return re.sub(r"(\tshr\.s32 (%r\d+), (%r\d+), 3;\n\tand\.b32 \2, \2, 112;\n)",
                  lambda m: f"\tadd.u32 {m.group(3)}, {m.group(3)}, 128;\n{m.group(1)}", ptx,
                  count=1)


def _swap_acc(ptx: str) -> str:
    return re.sub(r"\{(%[fr]\d+), (%[fr]\d+),", r"{\2, \1,", ptx, count=1)


def _flip_trans_b(ptx: str) -> str:
    return re.sub(r", (\d), (\d);(\s+// \d+:\d+ wgmma\n)",
                  lambda m: f", {m.group(1)}, {1 - int(m.group(2))};{m.group(3)}", ptx, count=1)


def _invert_scale(ptx: str) -> str:
    m = re.search(r"\twgmma\.mma_async[^\n]*\}, %rd\d+, %rd\d+, (%p\d+)", ptx)
    assert m is not None
    p = m.group(1)
    return ptx.replace("\twgmma.mma_async", f"\tnot.pred {p}, {p};\n\twgmma.mma_async", 1)


def _delete(pattern: str) -> Callable[[str], str]:
    return lambda ptx: re.sub(rf"\t{pattern}[^\n]*\n", "", ptx, count=1)


def _epilogue_register(ptx: str) -> str:
    """The first epilogue store stores the next register."""
    return re.sub(r"(st\.global\.[bf]32 \[%rd\d+\], %[fr])(\d+);",
                  lambda m: f"{m.group(1)}{int(m.group(2)) + 1};", ptx, count=1)


def _drop_copy(ptx: str) -> str:
    """Copy 5 of the epilogue deleted (its `// unrolled` line and its body)."""
    return re.sub(r"\t// unrolled r \(uid \d+\) = 5 \(copy 5\)\n(?:(?!\t// unrolled)[^\n]*\n)*?"
                  r"(?=\t// unrolled)", "", ptx, count=1)


def _after_copy(ptx: str, var: str, value: int, pattern: str, repl: str) -> str:
    """`pattern` replaced once, after the first `// unrolled VAR ... = VALUE` line."""
    m = re.search(rf"\t// unrolled {var} \(uid \d+\) = {value} \(copy", ptx)
    assert m is not None
    return ptx[:m.end()] + re.sub(pattern, repl, ptx[m.end():], count=1)


def _preload_write(new: Callable[[str, int], str]) -> Callable[[str], str]:
    """Rewrite the first fragment write of the preload (`mov.f32 %fR, %fV;` in copy 0)."""
    def mutate(ptx: str) -> str:
        m = re.search(r"= 0 \(copy 0\)\n(?:[^\n]*\n)*?\t(mov\.f32 %f(\d+), %f\d+;)\n", ptx)
        assert m is not None
        return ptx.replace(m.group(1), new(m.group(1), int(m.group(2))), 1)
    return mutate


@dataclass(frozen=True)
class Bug:
    name: str
    kernel: str
    mutate: Callable[[str], str]
    code: str
    keys: tuple[str, ...] = ()  # counterexample entries that must be present


BUGS = [
    Bug("descriptor swizzle mode", "tma_ring_mma",
        _desc_constant(lambda v: (v % 2**62) | (wd.Mode.B64.code << 62)), "TS730",
        ("thread", "PTX descriptor A", "IR descriptor A")),
    Bug("descriptor LBO", "tile_mma", _desc_constant(lambda v: v + (1 << 16)), "TS730",
        ("PTX descriptor A", "IR descriptor A")),
    Bug("descriptor SBO", "two_consumers_mma", _desc_constant(lambda v: v + (64 << 32)),
        "TS730", ("PTX descriptor A", "IR descriptor A", "M", "N", "K")),
    Bug("start address one tile row off", "u8_mma", _row_off, "TS730",
        ("tsmem (shared address of the dynamic array)", "PTX descriptor A")),
    Bug("start address one tile row off (MN-major B)", "mn_major_b_mma", _row_off, "TS730",
        ("PTX descriptor A", "IR descriptor A")),
    Bug("accumulator registers swapped", "tile_mma", _swap_acc, "TS731",
        ("thread", "PTX reads", "IR reads")),
    Bug("accumulator registers swapped (s32)", "u8_mma", _swap_acc, "TS731",
        ("PTX reads", "IR reads")),
    Bug("trans-b flipped", "mn_major_b_mma", _flip_trans_b, "TS730",
        ("PTX imm-trans-b", "IR imm-trans-b")),
    Bug("trans-b flipped (K-major)", "tile_mma", _flip_trans_b, "TS730",
        ("PTX imm-trans-b", "IR imm-trans-b")),
    Bug("scale-d inverted", "tma_ring_mma", _invert_scale, "TS730",
        ("PTX scale-d", "IR scale-d", "iteration of kt (40:5)")),
    Bug("wait_group 1 instead of 0", "u8_mma",
        lambda p: p.replace("wgmma.wait_group.sync.aligned 0;",
                            "wgmma.wait_group.sync.aligned 1;", 1), "TS729", ("thread",)),
    Bug("commit deleted", "two_consumers_mma", _delete(r"wgmma\.commit_group"), "TS720",
        ("thread",)),
    Bug("fence deleted", "tile_mma", _delete(r"wgmma\.fence"), "TS720", ("block.x",)),
    Bug("epilogue store of the wrong register", "tile_mma", _epilogue_register, "TS731",
        ("thread", "PTX reads", "IR reads")),
    Bug("epilogue store of the wrong register (s32)", "u8_mma", _epilogue_register, "TS731",
        ("PTX reads", "IR reads")),
    Bug("unrolled epilogue copy missing", "mn_major_b_mma", _drop_copy, "TS720",
        ("thread",)),
    Bug("fragment write to the wrong register", "preload",
        _preload_write(lambda text, r: text.replace(f"%f{r},", f"%f{r + 1},", 1)), "TS731",
        ("register",)),
    Bug("extra write of a fragment register", "preload",
        lambda p: p.replace("\twgmma.commit_group", "\tmov.f32 %f45, 0f00000000;\n"
                            "\twgmma.commit_group", 1), "TS731", ("register",)),
    Bug("TMA store coordinate in the second unrolled copy", "gemm_persistent",
        lambda p: _after_copy(p, "h", 1, r"(\tadd\.s32 %r\d+, %r\d+, )128;(\n\tmul\.lo\.s32 "
                              r"%r\d+, %r\d+, 64;)", r"\g<1>0;\2"), "TS725",
        ("PTX coordinate 0 (innermost first)", "IR coordinate 0 (innermost first)")),
    Bug("loop bound in the second unrolled copy", "gemm_persistent",
        lambda p: _after_copy(p, "h", 1, r"(\tsetp\.ge\.s32 %p\d+, %r\d+, )2;", r"\g<1>1;"),
        "TS727", ("iteration of j (h = 1) (83:11)",)),
    Bug("wgmma wait_group 0 instead of 1", "gemm_ws",
        lambda p: p.replace("wgmma.wait_group.sync.aligned 1;",
                            "wgmma.wait_group.sync.aligned 0;", 1), "TS729", ("thread",)),
    Bug("setmaxnreg count", "setmaxnreg",
        lambda p: p.replace("setmaxnreg.inc.sync.aligned.u32 232;",
                            "setmaxnreg.inc.sync.aligned.u32 240;", 1), "TS730",
        ("PTX count", "IR count")),
]


def concrete(cex: object) -> bool:
    """Every value a number or a word, at least one number, no symbolic leftovers."""
    if not isinstance(cex, dict) or not cex:
        return False
    vals = list(cex.values())
    return any(isinstance(v, int) for v in vals) and all(
        isinstance(v, (int, str)) and not (isinstance(v, str) and "…" in v)
        for v in vals if not isinstance(v, bool))


def assemble(ptx: str, tmp: Path) -> subprocess.CompletedProcess:
    f = tmp / "k.ptx"
    f.write_text(ptx)
    return subprocess.run([PTXAS, "-arch=sm_90a", str(f), "-o", str(tmp / "k.cubin")],
                          capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("bug", BUGS, ids=[b.name for b in BUGS])
def test_planted_tensor_core_bug_is_refuted(sources: dict[str, Path], bug: Bug,
                                            tmp_path: Path) -> None:
    kernel, ptx = compiled(sources, bug.kernel)
    bad = bug.mutate(ptx)
    assert bad != ptx, f"{bug.name}: the mutation no longer applies"
    obs = validate_ptx(kernel, bad)
    hits = [o for o in obs if o.verdict is Verdict.REFUTED and o.code == bug.code]
    assert hits, failures(obs)
    assert any(concrete(o.counterexample) for o in hits), [o.counterexample for o in hits]
    for key in bug.keys:  # a loop's name carries its position, which an added line moves
        pattern = re.sub(r"\\\(\d+:\d+\\\)", lambda _: r"\(\d+:\d+\)", re.escape(key))
        assert any(any(re.fullmatch(pattern, k) for k in o.counterexample or {})
                   for o in hits), (key, hits[0].counterexample)
    assert not any(o.verdict is Verdict.PROVED and o.code == bug.code and o.name == h.name
                   for h in hits for o in obs)
    if PTXAS is not None:
        r = assemble(bad, tmp_path)
        assert r.returncode == 0, r.stderr


def test_swapped_register_names_both_registers(sources: dict[str, Path]) -> None:
    """Swapping the first two accumulators makes the stores of acc[0] and acc[1] each read
    the other's register -- both refuted, each naming the register it reads."""
    kernel, ptx = compiled(sources, "tile_mma")
    obs = validate_ptx(kernel, _swap_acc(ptx))
    bad = {o.name.split(": value")[0]: o.counterexample for o in obs
           if o.verdict is Verdict.REFUTED and o.code == "TS731"}
    first, second = re.search(r"\{(%f\d+), (%f\d+),", ptx).groups()  # type: ignore[union-attr]
    cex0 = next(c for n, c in bad.items() if n.endswith("(r = 0)"))
    cex1 = next(c for n, c in bad.items() if n.endswith("(r = 1)"))
    assert cex0["PTX reads"] == f"acc[1] ({first})" and cex0["IR reads"] == f"acc[0] ({second})"
    assert cex1["PTX reads"] == f"acc[0] ({second})" and cex1["IR reads"] == f"acc[1] ({first})"
    assert len(bad) == 2


def test_a_different_float_value_is_unknown_never_proved(sources: dict[str, Path]) -> None:
    """Floats are uninterpreted: `acc[r] + 2.0` for `acc[r] + 1.0` cannot be refuted (the
    two agree on NaN), but must not be proved."""
    kernel, ptx = compiled(sources, "preload")
    bad = re.sub(r"(add\.rn\.f32 %f\d+, %f\d+, )0f3F800000;", r"\g<1>0f40000000;", ptx,
                 count=1)
    assert bad != ptx
    obs = validate_ptx(kernel, bad)
    hit = [o for o in obs if "(r = 0): value of PTX line" in o.name and "store c" in o.name]
    assert hit and all(o.verdict is Verdict.UNKNOWN and o.code == "TS731" for o in hit)


def test_unsupported_tensor_core_form_is_never_proved(sources: dict[str, Path]) -> None:
    kernel, ptx = compiled(sources, "tile_mma")
    bad = ptx.replace("wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16",
                      "wgmma.mma_async.sp.sync.aligned.m64n128k16.f32.bf16.bf16", 1)
    assert bad != ptx
    obs = validate_ptx(kernel, bad)
    assert any(o.verdict is Verdict.UNKNOWN and "not understood" in o.message for o in obs)
    assert any(o.verdict is not Verdict.PROVED for o in obs if o.name.startswith("wgmma at"))


# ---- the specification against the semantics ------------------------------------------------


@settings(max_examples=200, deadline=None)
@given(st.integers(0, (1 << 18) // 16 - 1), st.sampled_from(list(wd.Mode)),
       st.sampled_from([16, 32, 64, 128, 256, 1024, 8192]), st.sampled_from([64, 512, 1024]))
def test_descriptor_term_is_the_encoding(chunk: int, mode: wd.Mode, lbo: int, sbo: int) -> None:
    """descriptor_term on a concrete address is wgmma_desc's encode of its swizzle."""
    addr = chunk * 16
    d = wd.Descriptor(wd.Major.K, mode, lbo, sbo, 2)
    got = descriptor_term(T.const_int(addr), d)
    assert got.is_const and int(got.val) == d.encode(int(wd.swizzle(addr, mode)))  # type: ignore


def test_spec_descriptor_is_the_checkers_at_every_origin() -> None:
    """tile_mma: with the buffers where the interpreter puts them (R = 1024: tsmem = 1024),
    the specification's descriptor at k-step kk is the encoding of the start address
    semantics/mma_rules found for origin kk (the one the TS530 proof is about)."""
    kernel = checked_program(ROOT / "corpus" / "wgmma" / "tile_mma.tsk").kernels[0]
    spec = Spec(kernel)
    ev = next(e for e in spec.events if e.kind == "wgmma")
    (kk,) = ev.fors
    found = {(op.which,): mma_rules.descriptor(kernel, op)
             for op in mma_rules.operands(collect(kernel, isl.Context()))}
    tsmem, n = T.leaf("tsmem", 32), T.leaf(f"n:F{kk.var.uid}", 64)
    for which in ("A", "B"):
        verdict = found[(which,)]
        assert verdict.found is not None
        d = verdict.found.descriptor
        by_origin = dict(zip(verdict.origins, verdict.found.starts, strict=True))
        for step in range(4):
            term = T.substitute([ev.ops[f"desc_{which.lower()}"]],  # type: ignore[list-item]
                                {id(tsmem): T.bv(1024, 32), id(n): T.bv(step, 64)})[0]
            origin = (0, step * 16)
            assert int(term.val) == d.encode(by_origin[origin]), (which, step)  # type: ignore


@pytest.mark.parametrize("name", WGMMA + ["preload"])
def test_unrolled_loops_are_the_ones_the_ptx_unrolls(sources: dict[str, Path],
                                                     name: str) -> None:
    """A loop is unrolled exactly when its body names fragment registers by its variable:
    the specification's rule picks the loops whose copies the PTX's `// unrolled` lines
    name, and the PTX has one copy per iteration."""
    kernel, ptx = compiled(sources, name)
    fors = [s for s in statements(kernel.body) if isinstance(s, ir.For)]
    marked = {(int(u), int(v)) for u, v in
              re.findall(r"// unrolled \S+ \(uid (\d+)\) = (-?\d+) \(copy", ptx)}
    assert {f.var.uid for f in fors if unrolled(f)} == {u for u, _ in marked}
    assert marked  # every one of these kernels has an unrolled epilogue
    # the copies the specification states are the copies the PTX has
    spec = Spec(kernel)
    assert {c for e in spec.events for c in e.copies} == marked
