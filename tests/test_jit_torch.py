"""tilesafe.jit on torch tensors and as a torch.library custom op under torch.compile.

torch is optional (its wheels pull gigabytes of CUDA libraries): CI does not install it and
every test here skips. On CPU tensors a call runs the reference interpreter; the CUDA path
(tensors in place, torch's current stream) is tests/gpu/test_jit_gpu.py's.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import tilesafe
from tilesafe.jit import JitError

torch = pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parent.parent
SAXPY = ROOT / "corpus" / "good" / "elementwise.tsk"
SCALE_BIAS = ROOT / "examples" / "kernels" / "scale_bias.tsk"
WIDEN = """
kernel widen(x: in global bf16[N], y: out global f32[N], h: out global bf16[N])
  where N > 0, N <= 65536
  grid ((N + 127) / 128) block 128
  ensures y[i] == x[i] * 2.0
  ensures h[i] == x[i] + 1.0
{
  let i = block.x * 128 + thread
  if i < N {
    y[i] = x[i] * 2.0
    h[i] = x[i] + 1.0
  }
}
"""


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return tmp_path_factory.mktemp("jit-torch")


def test_cpu_tensors_in_and_out(cache):
    k = tilesafe.jit(SAXPY, device="interp", cache=cache)
    a, x, y = torch.tensor([3.0]), torch.arange(300, dtype=torch.float32), torch.ones(300)
    z = k(a, x, y)
    assert isinstance(z, torch.Tensor) and z.dtype == torch.float32
    assert torch.equal(z, 3 * x + 1)
    out = torch.empty(300)
    assert k(a, x, y, out=out) is out and torch.equal(out, z)


def test_bf16_round_trips(cache):
    k = tilesafe.jit(WIDEN, device="interp", cache=cache)
    x = (torch.arange(-40, 40, dtype=torch.float32) / 8).to(torch.bfloat16)
    y, h = k(x)
    assert y.dtype == torch.float32 and h.dtype == torch.bfloat16
    assert torch.equal(y, x.float() * 2) and torch.equal(h, (x.float() + 1).to(torch.bfloat16))


def test_contract_on_torch_tensors(cache):
    k = tilesafe.jit(SCALE_BIAS, device="interp", cache=cache)
    x, s = torch.ones(64, 64), torch.ones(64)
    with pytest.raises(JitError, match="TS905"):
        k(x.t()[:, :32], s[:32], s[:32])  # a transposed view is not row-major
    with pytest.raises(JitError, match="TS904"):
        k(x.double(), s, s)
    with pytest.raises(JitError, match="TS908"):
        k(x, s, s, y=x)
    y = k(x, s, s)
    assert isinstance(y, torch.Tensor)
    mixed = k(x, s.numpy(), s)  # host arrays of either library mix: all are copied
    assert torch.equal(mixed, y)


def test_custom_op_under_torch_compile(cache):
    k = tilesafe.jit(SCALE_BIAS, device="interp", cache=cache)
    op = k.torch_op()
    assert str(op._schema).startswith("tilesafe::scale_bias_")
    assert k.torch_op() is op  # registered once

    def model(x, s, b):
        return torch.relu(op(x, s, b)) * 2

    compiled = torch.compile(model, fullgraph=True, backend="aot_eager", dynamic=True)
    for m, n in ((64, 64), (100, 50), (70, 130)):
        x, s, b = torch.randn(m, n), torch.randn(n), torch.randn(n)
        assert torch.equal(compiled(x, s, b), torch.relu(x * s + b) * 2)


def test_fake_implementation_gives_shapes_without_running(cache):
    from torch._subclasses.fake_tensor import FakeTensorMode

    k = tilesafe.jit(WIDEN, device="interp", cache=cache)
    op = k.torch_op("widen_fake_test")
    with FakeTensorMode():
        x = torch.empty(77, dtype=torch.bfloat16)
        y, h = op(x)
        assert y.shape == (77,) and y.dtype == torch.float32 and h.dtype == torch.bfloat16


def test_inout_tensors_are_copied_by_the_functional_op(cache):
    text = """
kernel bump(x: inout global f32[N])
  where N > 0, N <= 4096
  grid ((N + 63) / 64) block 64
  ensures x[i] == x[i] + 1.0
{
  let i = block.x * 64 + thread
  if i < N {
    x[i] = x[i] + 1.0
  }
}
"""
    k = tilesafe.jit(text, device="interp", cache=cache)
    x = torch.zeros(10)
    assert torch.equal(k.torch_op()(x), torch.ones(10)) and torch.equal(x, torch.zeros(10))
    k(x)  # the plain call updates in place
    assert torch.equal(x, torch.ones(10))


def test_the_example_module_runs(capsys, monkeypatch, cache):
    import runpy

    monkeypatch.setenv("TILESAFE_CACHE_DIR", str(cache))
    runpy.run_path(str(ROOT / "examples" / "torch_module.py"), run_name="__main__")
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 2 and all("eager exact True, compiled exact True" in s for s in lines)
