"""tilesafe.jit on a real Hopper GPU (docs/jit.md): host arrays through copies and torch
CUDA tensors in place, bit for bit against the reference interpreter; the launch on torch's
current stream with no hidden synchronisation; tensor maps encoded at the tensors' real
addresses (and TS906 for a misaligned one); the custom op under torch.compile's default
backend.

Needs the full install (the jit verifies and compiles: ISL, z3, lark -- carry the wheels as
tests/gpu/device_run.sh's `pytest` step does), cuda-python and, for the torch half, torch.
Skips cleanly without a GPU; TILESAFE_REQUIRE_GPU=1 turns the skip into a failure.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from tilesafe.gpu import driver

pytestmark = pytest.mark.gpu
REQUIRE = os.environ.get("TILESAFE_REQUIRE_GPU") == "1"
ROOT = Path(__file__).resolve().parents[2]
SAXPY = ROOT / "corpus" / "good" / "elementwise.tsk"
PIPELINE = ROOT / "corpus" / "good" / "pipeline2.tsk"
SCALE_BIAS = ROOT / "examples" / "kernels" / "scale_bias.tsk"


@pytest.fixture(scope="module")
def jit(tmp_path_factory):
    why = driver.unavailable_reason()
    if why is not None:
        if REQUIRE:
            pytest.fail(f"TILESAFE_REQUIRE_GPU=1 but {why}")
        pytest.skip(why)
    import tilesafe

    cache = tmp_path_factory.mktemp("jit-gpu")
    return lambda path, **kw: tilesafe.jit(path, cache=cache, **kw)


def _torch():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.fail("a usable GPU but torch sees none") if REQUIRE else pytest.skip("no CUDA")
    return torch


def _quarters(rng, shape):
    return (rng.integers(-8, 9, shape) / 4).astype(np.float32)


def test_host_arrays_on_the_gpu_equal_the_interpreter(jit):
    gpu, ref = jit(SCALE_BIAS, device="gpu"), jit(SCALE_BIAS, device="interp")
    rng = np.random.default_rng(0)
    for m, n in ((128, 128), (100, 50), (130, 200), (1, 1)):
        x, s, b = _quarters(rng, (m, n)), _quarters(rng, n), _quarters(rng, n)
        y = gpu(x, s, b)
        assert np.array_equal(y, ref(x, s, b)), (m, n)
        assert gpu.last_variant == ref.last_variant


def test_tma_kernel_on_host_arrays(jit):
    k = jit(PIPELINE, device="gpu")
    src = np.random.default_rng(1).standard_normal((192, 320)).astype(np.float16)
    assert np.array_equal(k(src), src)


def test_torch_cuda_tensors_in_place_on_the_current_stream(jit):
    torch = _torch()
    k = jit(SCALE_BIAS)
    base = torch.randn(4096, 1024, device="cuda")
    s, b = torch.randn(1024, device="cuda"), torch.randn(1024, device="cuda")
    # The first call on a device assembles and loads the module (ptxas, cuModuleLoadData:
    # host work that takes longer than any sleep below); the claim is about the calls after.
    k(base, s, b)
    torch.cuda.synchronize()
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        torch.cuda._sleep(2_000_000_000)  # keeps the stream busy for about a second
        x = base * 2  # written on `side` after the sleep
        y = k(x, s, b)  # must run on `side`, after x, and return without waiting
        busy = not side.query()
    side.synchronize()
    assert busy, "the call synchronised (the stream was idle when it returned)"
    assert y.is_cuda and torch.equal(y, (base * 2) * s + b)
    out = torch.empty_like(base)
    assert k(base, s, b, y=out) is out and torch.equal(out, base * s + b)


def test_tensor_maps_at_real_addresses_and_ts906(jit):
    torch = _torch()
    from tilesafe.jit import JitError

    k = jit(PIPELINE)
    src = torch.randn(128, 192, device="cuda").half()
    assert torch.equal(k(src), src)
    block = torch.zeros(64 * 64 + 8, device="cuda", dtype=torch.float16)
    shifted = block[4:4 + 64 * 64].view(64, 64)  # 8 bytes past an aligned start
    with pytest.raises(JitError, match="TS906"):
        k(shifted)


def test_custom_op_under_the_default_torch_compile(jit):
    torch = _torch()
    op = jit(SCALE_BIAS).torch_op()
    f = torch.compile(lambda x, s, b: torch.relu(op(x, s, b)), fullgraph=True)
    for m, n in ((256, 256), (300, 40)):
        x, s, b = (torch.randn(m, n, device="cuda"), torch.randn(n, device="cuda"),
                   torch.randn(n, device="cuda"))
        assert torch.equal(f(x, s, b), torch.relu(x * s + b))
