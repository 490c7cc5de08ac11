"""tilesafe.jit on numpy arrays through the reference interpreter (docs/jit.md): calls,
outputs allocated or given, sizes read from shapes, and every contract diagnostic naming
the tensor and the clause it violates (TS901-TS909).

The contract checks are also called directly on the kernels' IR (no verification needed)
where a build would only add time; one test per code sees the same diagnostic through a
call.
"""

from __future__ import annotations

import re
import warnings
from pathlib import Path

import numpy as np
import pytest

import tilesafe
from tilesafe import api
from tilesafe.jit import JitError, JitWarning, contract

ROOT = Path(__file__).resolve().parent.parent
GOOD = ROOT / "corpus" / "good"
SCALE_BIAS = ROOT / "examples" / "kernels" / "scale_bias.tsk"


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("jit-cache")


@pytest.fixture(scope="module")
def saxpy(cache_dir):
    return tilesafe.jit(GOOD / "elementwise.tsk", device="interp", cache=cache_dir)


def _kernel(path: Path, name: str | None = None):
    return api.select_kernel(api.checked_program(path), name)


def _codes(err: JitError) -> list[str]:
    return [d.code for d in err.diagnostics]


# ---- calls ---------------------------------------------------------------------------------


def test_tilesafe_jit_is_callable_and_the_package():
    import tilesafe.jit as package

    assert tilesafe.jit is package and callable(tilesafe.jit)


def test_call_allocates_the_output_and_matches_numpy(saxpy):
    a = np.array([1.5], np.float32)
    x = np.linspace(-3, 3, 1000, dtype=np.float32)
    y = np.arange(1000, dtype=np.float32) / 7
    z = saxpy(a, x, y)
    assert z.dtype == np.float32 and z.shape == (1000,)
    want = (np.float32(1.5) * x).astype(np.float32) + y  # rounded product, then the add
    assert np.array_equal(z, want)
    assert saxpy.verified and saxpy.proof.verified and saxpy.proof.obligations > 0
    assert ".entry elementwise" in saxpy.ptx


def test_call_writes_into_a_given_output_by_keyword_or_position(saxpy):
    a, x, y = (np.array([2.0], np.float32), np.ones(300, np.float32),
               np.full(300, 0.5, np.float32))
    out = np.zeros(300, np.float32)
    assert saxpy(a, x, y, z=out) is out
    assert np.all(out == 2.5)
    out2 = np.zeros(300, np.float32)
    assert saxpy(a, x, y, out2) is out2 and np.all(out2 == 2.5)
    out3 = np.zeros(300, np.float32)
    assert saxpy(a, x, y, out=out3) is out3 and np.all(out3 == 2.5)  # the only output


def test_sizes_are_read_from_shapes_and_each_size_works(saxpy):
    for n in (1, 255, 256, 257):
        x = np.arange(n, dtype=np.float32)
        z = saxpy(np.array([3.0], np.float32), x, x)
        assert np.array_equal(z, 4 * x)


def test_inputs_are_not_modified(saxpy):
    a, x, y = np.array([2.0], np.float32), np.ones(64, np.float32), np.ones(64, np.float32)
    saxpy(a, x, y)
    assert np.all(x == 1) and np.all(y == 1) and a[0] == 2


def test_several_outputs_come_back_as_a_tuple(cache_dir):
    k = tilesafe.jit(GOOD / "pair_sums.tsk", device="interp", cache=cache_dir)
    ref = api.run_detailed(GOOD / "pair_sums.tsk", {"N": 512})
    h, g = k(ref.inputs["x"])
    assert h.shape == g.shape == (512,)
    assert np.array_equal(h, ref.result.tensors["h"])
    assert np.array_equal(g, ref.result.tensors["g"])


# ---- the contract, one code at a time -------------------------------------------------------


def test_ts901_wrong_arguments_name_the_parameter(saxpy):
    x = np.ones(8, np.float32)
    with pytest.raises(JitError) as err:
        saxpy(x, x)  # no y
    assert _codes(err.value) == ["TS901"] and "'y'" in str(err.value)
    with pytest.raises(JitError) as err:
        saxpy(x, x, x, x, x)
    assert "takes 4 tensors" in str(err.value)
    with pytest.raises(JitError) as err:
        saxpy(x, x, x, w=x)
    assert "no parameter or size 'w'" in str(err.value)
    with pytest.raises(JitError) as err:
        saxpy(x, x, x, a=x)
    assert "given twice" in str(err.value)
    with pytest.raises(JitError) as err:
        saxpy([1.0], x, x)
    assert "numpy array or a torch tensor" in str(err.value)


GRID_ONLY = """
kernel first_block(x: in global f32[N], y: out global f32[N])
  where N > 0, N <= 4096, G > 0, G <= 8
  grid G block 32
{
  if block.x == 0 {
    for i in thread .. N step 32 {
      y[i] = x[i]
    }
  }
}
"""


def test_ts901_a_size_no_shape_determines_must_be_passed():
    k = api.select_kernel(api.checked_program("<grid>", GRID_ONLY), None)
    x = np.zeros(100, np.float32)
    given, sizes = contract.assign(k, (x,), {})
    with pytest.raises(JitError) as err:
        contract.bind(k, given, sizes, zero_copy=False)
    assert _codes(err.value) == ["TS901"] and "k(..., G=...)" in str(err.value)
    given, sizes = contract.assign(k, (x,), {"G": 2})
    b = contract.bind(k, given, sizes, zero_copy=False)
    assert b.sizes == {"N": 100, "G": 2} and b.allocate == ("y",) and b.grid == (2,)
    with pytest.raises(JitError) as err:
        contract.assign(k, (x,), {"G": 2.0})
    assert "size G must be an int" in str(err.value)


def test_ts902_a_size_read_twice_must_agree(saxpy):
    with pytest.raises(JitError) as err:
        saxpy(np.ones(1, np.float32), np.ones(10, np.float32), np.ones(12, np.float32))
    assert _codes(err.value) == ["TS902"]
    assert "size N is 10 from x.shape[0] but 12 from y.shape[0]" in str(err.value)


def test_ts902_rank_and_computed_dimensions():
    k = _kernel(GOOD / "ragged_tma.tsk")  # rowsum: f32[M, (N + 63) / 64]
    src = np.zeros((70, 136), np.float16)
    given, sizes = contract.assign(k, (src,), {"rowsum": np.zeros((70, 2), np.float32)})
    with pytest.raises(JitError) as err:
        contract.bind(k, given, sizes, zero_copy=False)
    assert _codes(err.value) == ["TS902"]
    assert "rowsum" in str(err.value) and "= [70, 3]" in str(err.value)
    given, sizes = contract.assign(k, (src[0],), {})
    with pytest.raises(JitError) as err:
        contract.bind(k, given, sizes, zero_copy=False)
    assert "tensor 'src' has rank 1" in str(err.value)


def test_an_affine_dimension_determines_its_size():
    text = """
kernel twice(x: in global f32[2 * N + 1], y: out global f32[N])
  where N > 0, N <= 4096
  grid 1 block 32
{
  for i in thread .. N step 32 {
    y[i] = x[2 * i + 1]
  }
}
"""
    k = api.select_kernel(api.checked_program("<twice>", text), None)
    given, sizes = contract.assign(k, (np.zeros(21, np.float32),), {})
    assert contract.bind(k, given, sizes, zero_copy=False).sizes == {"N": 10}
    given, sizes = contract.assign(k, (np.zeros(20, np.float32),), {})
    with pytest.raises(JitError) as err:  # even: no N fits, so N is not determined
        contract.bind(k, given, sizes, zero_copy=False)
    assert _codes(err.value) == ["TS901"]


def test_ts903_where_violation_names_the_clause(cache_dir):
    k = tilesafe.jit(GOOD / "pipeline2.tsk", device="interp", cache=cache_dir)
    with pytest.raises(JitError) as err:
        k(np.zeros((100, 64), np.float16))
    assert _codes(err.value) == ["TS903"]
    assert "sizes M=100, N=64 violate the kernel's `where M % 64 == 0`" in str(err.value)
    # the diagnostic points at the clause in the source
    (diag,) = err.value.diagnostics
    assert diag.span.path.endswith("pipeline2.tsk") and diag.span.line == 19


def test_ts904_dtype(saxpy):
    x = np.ones(8, np.float32)
    with pytest.raises(JitError) as err:
        saxpy(np.ones(1, np.float64), x, x)
    assert _codes(err.value) == ["TS904"]
    assert "tensor 'a' is numpy float64; parameter a is f32[1]" in str(err.value)


def test_ts905_strides(saxpy):
    x = np.ones(16, np.float32)
    with pytest.raises(JitError) as err:
        saxpy(np.ones(1, np.float32), x[::2], x[:8])
    assert _codes(err.value) == ["TS905"] and "'x'" in str(err.value)


def test_ts906_tma_alignment_when_the_kernel_uses_the_memory_itself():
    k = _kernel(GOOD / "pipeline2.tsk")  # a tensor map over src
    block = np.zeros(64 * 64 + 16, np.float16)
    start = next(i for i in range(16) if (block.ctypes.data + 2 * i) % 16 == 8)
    shifted = block[start:start + 64 * 64].reshape(64, 64)  # 8 bytes off 16
    assert shifted.ctypes.data % 16 == 8
    given, sizes = contract.assign(k, (shifted,), {})
    with pytest.raises(JitError) as err:
        contract.bind(k, given, sizes, zero_copy=True)
    assert _codes(err.value) == ["TS906"] and "'src'" in str(err.value)
    # through copies (numpy to the interpreter or the GPU) the address is not the kernel's
    assert contract.bind(k, given, sizes, zero_copy=False).sizes == {"M": 64, "N": 64}


def test_ts907_device_gpu_without_a_gpu(cache_dir):
    from tilesafe.gpu.driver import unavailable_reason

    if unavailable_reason() is None:
        pytest.skip("a GPU is usable here: device='gpu' runs (tests/gpu/test_jit_gpu.py)")
    k = tilesafe.jit(GOOD / "elementwise.tsk", device="gpu", cache=cache_dir)
    x = np.ones(8, np.float32)
    with pytest.raises(JitError) as err:
        k(np.ones(1, np.float32), x, x)
    assert _codes(err.value) == ["TS907"] and "no GPU can be used" in str(err.value)


def test_ts908_an_output_sharing_memory_with_an_input(saxpy):
    x = np.ones(32, np.float32)
    with pytest.raises(JitError) as err:
        saxpy(np.ones(1, np.float32), x, np.ones(32, np.float32), z=x)
    assert _codes(err.value) == ["TS908"] and "'z' (out) shares memory with 'x'" in str(
        err.value)


def test_every_problem_is_reported_at_once(saxpy):
    with pytest.raises(JitError) as err:
        saxpy(np.ones(1, np.float64), np.ones(16, np.float32)[::2], np.ones(8, np.int32))
    assert sorted(_codes(err.value)) == ["TS904", "TS904", "TS905"]


def test_every_jit_code_is_in_the_catalogue_and_the_docs():
    from tilesafe.proofs.codes import CODES

    used = set()
    for path in (ROOT / "src" / "tilesafe" / "jit").rglob("*.py"):
        used |= set(re.findall(r"\bTS\d{3}\b", path.read_text()))
    used |= {getattr(contract, n) for n in dir(contract) if re.fullmatch(r"[A-Z]+", n)
             and isinstance(getattr(contract, n), str) and getattr(contract, n).startswith("TS")}
    assert used <= set(CODES), sorted(used - set(CODES))
    docs = (ROOT / "docs" / "jit.md").read_text()
    assert all(code in docs for code in used if code.startswith("TS9")), used


# ---- the gate ------------------------------------------------------------------------------


def test_ts909_an_unproved_kernel_is_refused_unless_unverified(tmp_path):
    bad = ROOT / "corpus" / "bad" / "ts201_tail_read_oob.tsk"
    with pytest.raises(JitError) as err:
        tilesafe.jit(bad, device="interp", cache=tmp_path)
    assert _codes(err.value) == ["TS909"] and "unverified=True" in str(err.value)
    assert "TS201" in str(err.value)
    with pytest.warns(JitWarning, match="UNVERIFIED"):
        k = tilesafe.jit(bad, device="interp", cache=tmp_path, unverified=True)
    assert not k.verified and "UNVERIFIED" in k.ptx and "UNVERIFIED" in repr(k)


def test_a_file_that_does_not_load_is_a_diagnostic(tmp_path):
    with pytest.raises(JitError) as err:
        tilesafe.jit(tmp_path / "missing.tsk")
    assert _codes(err.value) == ["TS004"]
    with pytest.raises(JitError) as err:
        tilesafe.jit("kernel k( {", cache=False)
    assert _codes(err.value)[0] == "TS001"


def test_source_text_and_kernel_choice(cache_dir):
    text = (GOOD / "elementwise.tsk").read_text()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        k = tilesafe.jit(text, kernel="elementwise", device="interp", cache=cache_dir)
    assert k.source.path.startswith("<jit:")
    with pytest.raises(api.UsageError):
        tilesafe.jit(text, kernel="nope", cache=cache_dir)
    with pytest.raises(ValueError):
        tilesafe.jit(text, device="tpu", cache=cache_dir)
