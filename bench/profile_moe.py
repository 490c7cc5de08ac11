"""Where the MoE layer's per-call time goes (docs/moe.md, "GPU results"): the layer call
split into its parts, each timed with CUDA events (median of 20 after 3 warm-up calls),
and a cProfile of 20 layer calls (the host work: Python functions by cumulative time).

    python bench/profile_moe.py [--tokens 4096]     # a GPU machine, full install
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))

from bench_moe import timed  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tokens", type=int, default=4096)
    args = ap.parse_args(argv)
    import torch

    from tilesafe.moe import routing
    from tilesafe.moe.pipeline import MoE

    dev = torch.device("cuda")
    t, d, n, e = args.tokens, 1024, 1024, 8
    layer = MoE(e, device="gpu", kernels=ROOT.parent / "corpus" / "moe")
    rng = np.random.default_rng(7)
    ids = routing.routing("uniform", t, e, 2, rng)
    x = torch.from_numpy(routing.quarters((t, d), rng)).to(dev, torch.bfloat16)
    w = torch.from_numpy(routing.quarters((e, n, d), rng)).to(dev, torch.bfloat16)
    tw = torch.from_numpy(routing.route_weights(t, 2, rng).reshape(t, 2)).to(dev)
    idg = torch.from_numpy(ids.astype(np.int32)).to(dev)
    r = layer.route(idg)
    sids, be = r.used()
    gemm_args = (x, idg.reshape(-1), tw.reshape(-1), sids, be, w)
    inter = layer.gemm(*gemm_args)
    parts = {
        "layer": lambda: layer(x, idg, tw, w),
        "inspector (align)": lambda: layer.route(idg),
        "gemm call, proved clauses skipped": lambda: layer.gemm.call_with_proved(
            layer.composition.unchecked, *gemm_args),
        "gemm call, every clause checked": lambda: layer.gemm(*gemm_args),
        "combine call": lambda: layer.combine(inter, T=t),
    }
    print(f"card: {torch.cuda.get_device_name(0)}, torch {torch.__version__}; T={t} D={d} "
          f"N={n} E={e}, uniform routing")
    for name, fn in parts.items():
        print(f"{name:>36}: {timed(torch, fn):7.3f} ms")
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(20):
        layer(x, idg, tw, w)
    torch.cuda.synchronize()
    prof.disable()
    text = io.StringIO()
    pstats.Stats(prof, stream=text).sort_stats("cumulative").print_stats(45)
    print(text.getvalue())
    return 0


if __name__ == "__main__":
    sys.exit(main())
