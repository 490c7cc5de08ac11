"""The array evaluation of specifications (semantics/value/spec_vec.py) against the element-at-a-
time definition (spec_eval.expected_scalar): the same bits on every input profile (special
values included; every NaN equals every NaN, payloads are not modelled), the same spec
errors, and the scalar fallback where int64 would not be exact."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tilesafe.api import checked_program, load_program
from tilesafe.semantics.interpreter.interp_io import tensor_shapes
from tilesafe.semantics.value import spec_eval, spec_vec
from tilesafe.semantics.value.spec_inputs import Profile, choose_sizes, value_inputs

ROOT = Path(__file__).resolve().parents[1]
KERNELS = ["corpus/good/elementwise.tsk", "corpus/good/row_sum_ilp.tsk",
           "corpus/good/ragged_tma.tsk", "corpus/good/tile_history.tsk",
           "corpus/good/named_epilogue.tsk", "corpus/good/persistent_gemv.tsk",
           "corpus/good/pair_sums.tsk", "corpus/wgmma/u8_mma.tsk",
           "corpus/wgmma/mn_major_b_mma.tsk",
           "corpus/bad/ts803_row_sum_drops_ragged_tail.tsk"]


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    if a.dtype.kind == "f":
        both_nan = np.isnan(a.astype(np.float32)) & np.isnan(b.astype(np.float32))
        bits = a.view(np.uint8).reshape(a.size, -1) != b.view(np.uint8).reshape(b.size, -1)
        return bool((~bits.any(axis=1) | both_nan.reshape(-1)).all())
    return bool(np.array_equal(a.view(np.uint8), b.view(np.uint8)))


@pytest.mark.parametrize("path", KERNELS)
def test_array_evaluation_matches_the_definition(path: str) -> None:
    kernel = checked_program(ROOT / path).kernels[0]
    compared = 0
    for sizes in choose_sizes(kernel, 2):
        shapes = tensor_shapes(kernel, sizes)
        if sum(int(np.prod(s)) for s in shapes.values()) > 40_000:
            continue
        for profile in Profile:
            for exact in (True, False):
                arrays = value_inputs(kernel, sizes, 11, exact, profile)
                for spec in kernel.ensures:
                    want = spec_eval.expected_scalar(kernel, spec, sizes, arrays, shapes)
                    got = spec_vec.expected(kernel, spec, sizes, arrays, shapes)
                    assert got is not None
                    assert _same(want, got), (path, sizes, profile, exact)
                    compared += 1
    assert compared > 0


def test_a_spec_reading_outside_is_the_same_error(tmp_path: Path) -> None:
    src = tmp_path / "k.tsk"
    src.write_text("""kernel shifted(x: in global f32[N], y: out global f32[N])
  where N > 1, N <= 4096
  grid 1 block 32
  ensures y[i] == x[i + 1]
{
  for i in thread .. N step 32 { y[i] = x[i] }
}
""")
    kernel = load_program(src).kernels[0]  # lint rejects it (TS041); the evaluators must too
    sizes = {"N": 40}
    shapes = tensor_shapes(kernel, sizes)
    arrays = value_inputs(kernel, sizes, 0, True)
    errors = []
    for fn in (spec_eval.expected_scalar, spec_vec.expected):
        with pytest.raises(spec_eval.SpecOutOfBounds) as info:
            fn(kernel, kernel.ensures[0], sizes, arrays, shapes)
        errors.append((info.value.tensor, info.value.index))
    assert errors[0] == errors[1] == ("x", (40,))


def test_integers_beyond_int64_fall_back_to_python_integers(tmp_path: Path) -> None:
    src = tmp_path / "k.tsk"
    src.write_text("""kernel big(x: in global f32[N], y: out global f32[N])
  where N > 0, N <= 4096
  grid 1 block 32
  ensures y[i] == f32(i * 4611686018427387904 * 4) + x[i]
{
  for i in thread .. N step 32 { y[i] = x[i] }
}
""")
    kernel = checked_program(src).kernels[0]
    sizes = {"N": 8}
    shapes = tensor_shapes(kernel, sizes)
    arrays = value_inputs(kernel, sizes, 0, True)
    assert spec_vec.expected(kernel, kernel.ensures[0], sizes, arrays, shapes) is None
    out = spec_eval.expected(kernel, kernel.ensures[0], sizes, arrays, shapes)
    assert out[1] == np.float32(2.0**64) + arrays["x"][1]
