"""The HIP prelude's scalar functions (codegen/hip_prelude.py) compiled as host C++ with g++
and compared bit for bit with semantics/expr/fp.py, the interpreter's definitions: f32 -> f16 and
bf16 rounding (every 1021st f32 bit pattern, the boundaries around every f16 binade and
subnormal, NaNs and infinities), f16 -> f32 widening (all 65536 patterns), `i32()`,
min/max on NaN and signed zeros, floor division and modulo. The same integer code is what
an AMD GPU runs (tests/test_hip_amd.py compiles it for gfx942) and what the H100 runs in
the HIP-on-CUDA cases (tests/gpu/build_hip_cases.py). Skips without g++.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from tilesafe.codegen.hip_prelude import PRELUDE
from tilesafe.semantics.expr import fp

GXX = shutil.which("g++")
pytestmark = pytest.mark.skipif(GXX is None, reason="g++ not on PATH")

DRIVER = r"""
#include <cstdio>
#include <cstdlib>
#include <vector>
int main(int argc, char **argv) {
  FILE *in = std::fopen(argv[1], "rb"), *out = std::fopen(argv[2], "wb");
  std::vector<unsigned> a(std::atoi(argv[3])), b(a.size());
  std::fread(a.data(), 4, a.size(), in);
  std::fread(b.data(), 4, b.size(), in);
  for (size_t i = 0; i < a.size(); ++i) {
    float x = ts_float(a[i]), y = ts_float(b[i]);
    unsigned r[9] = {ts_f32_to_f16(x), ts_bits(ts_f16_to_f32((unsigned short)a[i])),
                     ts_f32_to_bf16(x), (unsigned)ts_f2i(x), ts_bits(ts_fmin(x, y)),
                     ts_bits(ts_fmax(x, y)), ts_bits(ts_fabs(x)), 0, 0};
    int p = (int)a[i], q = (int)b[i] | 1;  /* q != 0 */
    r[7] = (unsigned)ts_div32(p, q);
    r[8] = (unsigned)ts_mod32(p, q);
    std::fwrite(r, 4, 9, out);
  }
  return 0;
}
"""


@pytest.fixture(scope="module")
def host_prelude(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("prelude")
    src = d / "driver.cpp"
    src.write_text(PRELUDE + DRIVER)
    exe = d / "driver"
    subprocess.run([GXX, "-O2", "-std=c++17", "-ffp-contract=off", "-fno-fast-math", str(src),
                    "-o", str(exe)], check=True, capture_output=True, text=True)
    return exe


def _inputs() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(25)
    strided = np.arange(0, 2**32, 1021, dtype=np.uint64).astype(np.uint32)
    edges = []
    for e in range(100, 146):  # every binade around the f16 range, its halfway points
        base = e << 23
        for m in (0, 1, 0x0FFF, 0x1000, 0x1001, 0x1FFF, 0x2000, 0x3FFF, 0x7FFFFF, 0x7FF000,
                  0x7FEFFF, 0x7FE000, 0x400000, 0x7FFFFE):
            edges += [base | m, (base | m) | 0x80000000]
    special = [0, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000, 0xFFC00001, 0x7F800001,
               0x477FF000, 0x477FEFFF, 0x477FE000, 0x33000000, 0x33000001, 0x38800000,
               0x387FFFFF, 0x4F000000, 0xCF000000, 0xCF000001, 0x4EFFFFFF, 1, 0x7F7FFFFF]
    halfs = np.arange(65536, dtype=np.uint32)
    a = np.concatenate([strided, np.array(edges + special, dtype=np.uint32), halfs,
                        rng.integers(0, 2**32, 200_000, dtype=np.uint64).astype(np.uint32)])
    b = rng.integers(0, 2**32, a.size, dtype=np.uint64).astype(np.uint32)
    b[: len(special) ** 2 % a.size] = 0
    pairs = np.array(special, dtype=np.uint32)
    a[:pairs.size ** 2] = np.repeat(pairs, pairs.size)
    b[:pairs.size ** 2] = np.tile(pairs, pairs.size)
    return a, b


def _expected(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    x, y = a.view(np.float32), b.view(np.float32)
    with np.errstate(all="ignore"):
        h = x.astype(np.float16).view(np.uint16).astype(np.uint32)
        h = np.where(np.isnan(x), fp.F16_NAN_BITS, h)
        h = np.where(~np.isnan(x) & (np.abs(x) >= 65520.0),
                     np.where(x < 0, 0xFC00, 0x7C00), h)
        wide = (a & 0xFFFF).astype(np.uint16).view(np.float16).astype(np.float32)
        bf = fp.f32_array_to_bf16(x).astype(np.uint32)
        i = np.where(np.isnan(x), 0, np.clip(np.trunc(x.astype(np.float64)), -(2**31),
                                             2**31 - 1)).astype(np.int64)
    mins = np.array([fp.f32_bits(fp.fmin(p, q)) for p, q in zip(x, y, strict=True)],
                    dtype=np.uint32)
    maxs = np.array([fp.f32_bits(fp.fmax(p, q)) for p, q in zip(x, y, strict=True)],
                    dtype=np.uint32)
    p, q = a.view(np.int32).astype(np.int64), (b | 1).view(np.int32).astype(np.int64)
    return np.stack([h, wide.view(np.uint32), bf, (i & 0xFFFFFFFF).astype(np.uint32), mins,
                     maxs, a & 0x7FFFFFFF, ((p // q) & 0xFFFFFFFF).astype(np.uint32),
                     ((p % q) & 0xFFFFFFFF).astype(np.uint32)], axis=1).astype(np.uint32)


def test_prelude_matches_the_interpreter_bit_for_bit(host_prelude: Path, tmp_path: Path):
    a, b = _inputs()
    # min/max through fp.fmin per element is slow in Python: compare them on a sample
    keep = np.zeros(a.size, bool)
    keep[:400] = True
    keep[np.random.default_rng(1).choice(a.size, 20_000, replace=False)] = True
    sa, sb = a[keep], b[keep]
    (tmp_path / "in.bin").write_bytes(sa.tobytes() + sb.tobytes())
    subprocess.run([str(host_prelude), str(tmp_path / "in.bin"), str(tmp_path / "out.bin"),
                    str(sa.size)], check=True)
    got = np.frombuffer((tmp_path / "out.bin").read_bytes(), dtype=np.uint32).reshape(-1, 9)
    want = _expected(sa, sb)
    names = ["f32->f16", "f16->f32", "f32->bf16", "i32()", "min", "max", "abs", "div", "mod"]
    for k, name in enumerate(names):
        differ = got[:, k] != want[:, k]
        if name == "f16->f32":  # NaN payloads are not modelled (semantics/expr/fp.py)
            differ &= ~(np.isnan(np.ascontiguousarray(got[:, k]).view(np.float32))
                        & np.isnan(np.ascontiguousarray(want[:, k]).view(np.float32)))
        bad = np.flatnonzero(differ)
        assert bad.size == 0, (f"{name}: {bad.size} differ, e.g. input 0x{sa[bad[0]]:08x} "
                               f"0x{sb[bad[0]]:08x}: got 0x{got[bad[0], k]:08x}, want "
                               f"0x{want[bad[0], k]:08x}")


def test_conversions_on_every_strided_pattern(host_prelude: Path, tmp_path: Path):
    """The conversions alone on all ~4.5 million inputs (no per-element Python)."""
    a, b = _inputs()
    (tmp_path / "in.bin").write_bytes(a.tobytes() + b.tobytes())
    subprocess.run([str(host_prelude), str(tmp_path / "in.bin"), str(tmp_path / "out.bin"),
                    str(a.size)], check=True)
    got = np.frombuffer((tmp_path / "out.bin").read_bytes(), dtype=np.uint32).reshape(-1, 9)
    x = a.view(np.float32)
    with np.errstate(all="ignore"):
        h = x.astype(np.float16).view(np.uint16).astype(np.uint32)
        h = np.where(np.isnan(x), fp.F16_NAN_BITS, h)
        h = np.where(~np.isnan(x) & (np.abs(x) >= 65520.0), np.where(x < 0, 0xFC00, 0x7C00), h)
    assert np.array_equal(got[:, 0], h)
    assert np.array_equal(got[:, 2], fp.f32_array_to_bf16(x).astype(np.uint32))
    wide = (a & 0xFFFF).astype(np.uint16).view(np.float16).astype(np.float32)
    nan = np.isnan(wide)  # NaN payloads are not modelled (semantics/expr/fp.py): NaN is NaN
    assert np.array_equal(np.isnan(np.ascontiguousarray(got[:, 1]).view(np.float32)), nan)
    assert np.array_equal(got[~nan, 1], wide.view(np.uint32)[~nan])
