"""A proved kernel inside a small PyTorch module, eager and under torch.compile.

    pip install -e '.[torch]'          # or any torch >= 2.4 already installed
    python examples/torch_module.py    # CPU: the reference interpreter; CUDA: the GPU

`ScaleBias` is a per-channel affine map (y = x * scale + bias) whose forward is
examples/kernels/scale_bias.tsk: proved for every M, N its `where` allows (bounds, every
output written once, and `ensures y[i, j] == x[i, j] * scale[j] + bias[j]`), compiled to
PTX whose translation is proved too, and cached (a second run neither verifies nor
compiles). Its two `specialize` variants -- no tail guard when M and N are multiples of 64,
one column chunk when N <= 64 -- are proved and picked per call.

The kernel is registered as a torch.library custom op, so torch.compile(fullgraph=True)
keeps it as one node. It has no backward: use it where no gradient flows through it (as
here, under torch.no_grad / inference).
"""

from __future__ import annotations

from pathlib import Path

import torch

import tilesafe

KERNEL = Path(__file__).resolve().parent / "kernels" / "scale_bias.tsk"


class ScaleBias(torch.nn.Module):
    """y = x * scale + bias per column, computed by a proved tilesafe kernel."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.scale = torch.nn.Parameter(torch.ones(channels))
        self.bias = torch.nn.Parameter(torch.zeros(channels))
        self.op = tilesafe.jit(KERNEL).torch_op()  # proved (or cached), then registered

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.op(x.contiguous(), self.scale.detach(), self.bias.detach())


class Head(torch.nn.Module):
    """A linear layer, the proved affine map, then a ReLU."""

    def __init__(self, features: int, channels: int) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(features, channels)
        self.affine = ScaleBias(channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.affine(self.linear(x)))


def main() -> None:
    device = "cuda" if torch.cuda.is_available() else "cpu"
    model = Head(32, 96).to(device)
    with torch.no_grad():
        model.affine.scale.copy_(torch.linspace(0.5, 2.0, 96))
        model.affine.bias.copy_(torch.linspace(-1.0, 1.0, 96))
        compiled = torch.compile(model, fullgraph=True, backend="aot_eager", dynamic=True)
        for rows in (64, 100):  # 100 x 96: the general kernel; 64 x 96: the aligned variant
            x = torch.randn(rows, 32, device=device)
            h = model.linear(x)
            want = torch.relu(h * model.affine.scale + model.affine.bias)
            eager, traced = model(x), compiled(x)
            print(f"{rows} x 96 on {device}: eager exact {torch.equal(eager, want)}, "
                  f"compiled exact {torch.equal(traced, want)}")


if __name__ == "__main__":
    main()
