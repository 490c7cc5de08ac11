"""Code generation on the CPU: every kernel compiles and assembles, the verification gate
holds, register widths follow the value ranges, and what cannot be compiled exactly is
refused with a TS7xx diagnostic. (On the GPU: tests/gpu/test_codegen_hw.py.)"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tilesafe import api
from tilesafe.codegen.compile import compile_kernel
from tilesafe.codegen.lower import CodegenError
from tilesafe.codegen.plan import ContractError, bind
from tilesafe.frontend.load import load_program
from tilesafe.frontend.parser import parse
from tilesafe.frontend.resolve import resolve
from tilesafe.semantics.interpreter.interp_error import InterpError

ROOT = Path(__file__).resolve().parent.parent
KERNELS = sorted((ROOT / "corpus" / "good").glob("*.tsk")) + sorted(
    (ROOT / "corpus" / "codegen").glob("*.tsk"))
PTXAS = shutil.which("ptxas")


def _kernel(src: str):
    return resolve(parse(src, "k.tsk")).kernels[0]


@pytest.mark.parametrize("path", KERNELS, ids=lambda p: p.stem)
def test_corpus_kernel_compiles_and_assembles(path: Path, tmp_path: Path) -> None:
    """Every good and codegen-coverage kernel compiles and its PTX assembles for sm_90a
    (in CI, which has ptxas). A codegen kernel goes through `tilesafe compile`'s whole path
    (the verification gate, the translation validator); a good kernel's verification and
    validation are tests/test_corpus.py's and tests/test_validate.py's, not repeated here."""
    kernel = load_program(path).kernels[0]
    if path.parent.name == "codegen":
        res = api.compile(path)
        assert not res.refused, [f"{o.code} {o.name}" for o in res.failing]
        assert res.validation and all(not o.failed for o in res.validation)
        compiled = res.compiled
    else:
        compiled = compile_kernel(kernel, str(path))
    assert f".visible .entry {kernel.name}(" in compiled.ptx
    assert compiled.block == kernel.block
    if PTXAS is None:
        pytest.skip("ptxas not on PATH: assembled in CI, which has it")
    src = tmp_path / "k.ptx"
    src.write_text(compiled.ptx)
    proc = subprocess.run([PTXAS, "-arch=sm_90a", str(src), "-o", str(tmp_path / "k.cubin")],
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr


def test_tma_kernels_take_the_generic_address_of_the_tensor_map() -> None:
    """cp.async.bulk.tensor through the .param address faults on the H100 ("misaligned
    address"): the map's generic address (cvta.param) must be what the copy uses."""
    ptx = compile_kernel(load_program(ROOT / "corpus/good/pipeline2.tsk").kernels[0]).ptx
    lines = ptx.splitlines()
    mov = next(ln for ln in lines if "mov.u64" in ln and "tm_tin" in ln)
    reg = mov.split()[1].rstrip(",")
    assert any(f"cvta.param.u64 {reg}, {reg};" in ln for ln in lines)
    copy = next(ln for ln in lines if "cp.async.bulk.tensor.2d" in ln)
    assert f"[{reg}, {{" in copy


def test_gate_refuses_a_refuted_kernel_and_unverified_emits_a_banner(cli, tmp_path) -> None:
    bad = ROOT / "corpus/bad/ts211_two_writers.tsk"
    res = cli("compile", bad)
    assert res.code == 1
    assert "TS211" in res.out and "not compiled" in res.out
    out = tmp_path / "k.ptx"
    res = cli("compile", bad, "--unverified", "-o", out)
    assert res.code == 0, res.out + res.err
    text = out.read_text()
    assert text.startswith("// UNVERIFIED") and "TS211" in text.splitlines()[2]


def test_compile_cli_writes_ptx_to_stdout_and_json(cli) -> None:
    good = ROOT / "corpus/good/elementwise.tsk"
    res = cli("compile", good)
    assert res.code == 0 and res.out.startswith("//") and ".target sm_90a" in res.out
    res = cli("compile", good, "--format", "json")
    assert res.code == 0 and '"compiled": true' in res.out


def test_ptx_the_validator_does_not_prove_is_withheld(cli, tmp_path, monkeypatch) -> None:
    """A validation obligation that is not proved (here: planted as unknown) fails the
    compile and keeps the PTX from being written, unless --unverified asks for it."""
    from tilesafe.checkers.obligation import Obligation, Verdict
    from tilesafe.codegen import validate

    def unproved(kernel, ptx):
        return [Obligation("translation", f"{kernel.name}: planted", Verdict.UNKNOWN,
                           "test", code="TS721", message="could not be decided: planted")]

    monkeypatch.setattr(validate, "validate_ptx", unproved)
    good = ROOT / "corpus/good/elementwise.tsk"
    out = tmp_path / "k.ptx"
    res = cli("compile", good, "-o", out)
    assert res.code == 1 and not out.exists()
    assert "not written" in res.out and "TS721" in res.err
    res = cli("compile", good)
    assert res.code == 1 and ".target" not in res.out
    res = cli("compile", good, "--unverified", "-o", out)
    assert res.code == 1 and out.exists() and "(UNVERIFIED)" in res.out


WIDTHS = """
kernel w(x: global f32[N], y: global f32[N])
  where N > 0{bound}
  grid ((N + 255) / 256) block 256
{{
  let i = block.x * 256 + thread
  if i < N {{
    y[i] = x[i]
  }}
}}
"""


def test_index_width_follows_the_where_clause() -> None:
    """Bounded sizes give 32-bit index arithmetic; unbounded ones need 64 bits (the launch
    contract allows extents up to 2^40), and must not be computed in 32."""
    narrow = compile_kernel(_kernel(WIDTHS.format(bound=", N <= 1048576"))).ptx
    wide = compile_kernel(_kernel(WIDTHS.format(bound=""))).ptx
    body = [ln for ln in narrow.splitlines() if "add." in ln or "mul." in ln]
    assert body and not any(".s64" in ln for ln in body if "add.s64 %rd" not in ln)
    assert "mul.wide.s32" in narrow
    assert any(".s64" in ln and ("add" in ln or "mul" in ln) for ln in wide.splitlines()
               if "cvta" not in ln and "ld.param" not in ln)


CHUNKS = """kernel chunks(x: in global f32[N], y: out global f32[B])
  where N == B * 256, B > 0, B <= 65536
  grid B block 32
{
  if thread == 0 {
    y[block.x] = x[block.x * 256]
  }
}
"""


def test_a_size_tied_to_another_by_an_equality_compiles(cli, tmp_path) -> None:
    """`where N == B * 256`: ISL writes B as N / 256, a rational coefficient its min/max
    refuse; the ranges of integer terms (lowering and translation validator) take it in
    integer form (was an internal error, exit 3). Through the gate: verified, validated."""
    src = tmp_path / "chunks.tsk"
    src.write_text(CHUNKS)
    res = cli("compile", src, "-o", tmp_path / "chunks.ptx")
    assert res.code == 0, res.out + res.err
    ptx = (tmp_path / "chunks.ptx").read_text()
    assert "ld.global" in ptx and "st.global" in ptx


def test_integer_beyond_64_bits_is_refused() -> None:
    src = """
kernel cube(k: global i32[N], out: global i32[N])
  where N > 0, N <= 1024
  grid 1 block 32
{
  if thread < N {
    let a = k[thread]
    out[thread] = a * a * a
  }
}
"""
    with pytest.raises(CodegenError) as err:
        compile_kernel(_kernel(src))
    assert err.value.diagnostics[0].code == "TS701"


def test_shared_memory_beyond_the_block_limit_is_refused() -> None:
    # 128 KiB of elements spread by the layout's row stride over 256 KiB (the frontend
    # refuses more than 227 KiB of elements outright, TS026)
    src = """
kernel big(x: global f32[64])
  grid 1 block 64
{
  shared t: f32[128, 256] layout (128,256):(512,1)
  t[thread, 0] = x[thread]
  sync
  x[thread] = t[thread, 0]
}
"""
    with pytest.raises(CodegenError) as err:
        compile_kernel(_kernel(src))
    assert err.value.diagnostics[0].code == "TS703"


def test_bind_enforces_the_launch_contract() -> None:
    kernel = load_program(ROOT / "corpus/good/elementwise.tsk").kernels[0]
    compiled = compile_kernel(kernel)
    spec = bind(kernel, compiled, {"N": 1000})
    assert spec.grid == (4, 1, 1) and spec.block == 256
    assert [p["kind"] for p in spec.params] == ["tensor"] * 4 + ["size"]
    with pytest.raises(InterpError):  # elementwise's `where` bounds N by 2^30
        bind(kernel, compiled, {"N": 2**40})
    wide = _kernel("""
kernel wide(x: in global f32[N], y: out global f32[N])
  where N > 0, N <= 1099511627776
  grid ((N + 1048575) / 1048576) block 256
{
  let i = block.x * 1048576 + thread
  if i < N {
    y[i] = x[i]
  }
}
""")
    with pytest.raises(ContractError):  # `where` allows 2^40 elements; the code does not
        bind(wide, compile_kernel(wide), {"N": 2**40})


def test_bind_builds_the_checkers_tensor_map_descriptor() -> None:
    kernel = load_program(ROOT / "corpus/good/pipeline2.tsk").kernels[0]
    spec = bind(kernel, compile_kernel(kernel), {"M": 128, "N": 192})
    (tm,) = [p for p in spec.params if p["kind"] == "tensormap"]
    assert tm["spec"]["global_dims"] == [192, 128]  # innermost first (JSON lists)
    assert tm["spec"]["box_dims"] == [64, 64] and tm["spec"]["swizzle"] == "128B"
    assert spec.smem_bytes >= 2 * 64 * 64 * 2 + 4 * 8


def test_api_compile_reports_the_failing_obligations() -> None:
    res = api.compile(ROOT / "corpus/bad/ts304_wrong_wait_parity.tsk")
    assert res.refused and any(o.code == "TS304" for o in res.failing)


def test_run_on_the_gpu_without_one_is_a_usage_error(cli, monkeypatch) -> None:
    from tilesafe.gpu import driver

    monkeypatch.setattr(driver, "unavailable_reason", lambda: "no CUDA device")
    res = cli("run", ROOT / "corpus/good/elementwise.tsk", "--size", "N=100", "--device", "gpu",
              "--check")
    assert res.code == 2 and "no GPU to run on: no CUDA device" in res.err
