"""The MoE layer of proved pieces (tilesafe.moe.MoE: the inspector, corpus/moe's grouped
GEMM and top-2 combine through tilesafe.jit) on the GPU, against the numpy reference and
timed against torch, in one run (issue 23, item 4; docs/moe.md).

    python bench/bench_moe.py [--quick]     # a GPU machine with torch and the full install

For every routing kind of tilesafe.moe.routing (uniform, hot experts, empty experts, one
expert pair for all, one token) at each shape:

* **correctness** on exact inputs (multiples of 1/4 and 1/8: every product and sum is exact
  in f32, so any order of the MMA's additions gives the same bits) -- the layer's output is
  compared bit for bit with tilesafe.moe.reference.moe (float64, exact here);
* **timing** (CUDA events, median of 20 calls after 3 warm-up calls) of the whole layer --
  the inspector on the GPU, the launch checks of the GEMM's `requires` clauses on the
  routing, the two kernels -- and of torch's usual eager MoE on the same tensors: per
  expert, index_select of its tokens' rows, a bf16 matmul, the routing weights, index_add
  into the output; and of the inspector alone (`route ms`: tilesafe.moe.align on the GPU);
* **what the composition proof saves** (`check ms`): one call of the grouped GEMM with every
  `requires` clause checked on the routing minus one with the clauses `tilesafe compose`
  proved of the inspector's output skipped (the layer's way: only the router's ids checked);
* **the gathered scale** (corpus/moe/moe_scale.tsk) through tilesafe.jit over the whole
  allocation (the blocks of expert -1 and the sentinel rows masked by the kernel), bit for
  bit against tilesafe.moe.reference.scale (`scale bits`).

It prints one table; nothing is asserted beyond the bits (a mismatch is printed and the exit
status is 1).
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]

SHAPES = [  # (tokens T, hidden D, expert output N, experts E)
    (4096, 1024, 1024, 8),
    (16384, 2048, 1024, 16),
]
QUICK = [(512, 256, 256, 8)]
KINDS = ("uniform", "hot", "empty", "single", "one_token")


def torch_moe(torch, x, topk, tw, w):
    """Eager torch: per expert, gather its pairs' token rows, multiply, weight, add."""
    t, k = topk.shape
    y = torch.zeros(t, w.shape[1], dtype=torch.float32, device=x.device)
    flat, weights = topk.reshape(-1), tw.reshape(-1)
    order = torch.argsort(flat)
    counts = torch.bincount(flat, minlength=w.shape[0]).tolist()
    start = 0
    for e, c in enumerate(counts):
        if c == 0:
            continue
        pairs = order[start:start + c]
        start += c
        rows = torch.div(pairs, k, rounding_mode="floor")
        out = torch.mm(x.index_select(0, rows), w[e].t()).float() * weights[pairs, None]
        y.index_add_(0, rows, out)
    return y


def scale_bits(torch, scale, x, ids, tw, r, e, rng, dev) -> bool:
    """moe_scale over the whole allocation on the GPU, bit for bit against the reference."""
    from tilesafe.moe import reference

    s = rng.standard_normal((e, x.shape[1])).astype(np.float32)
    xs = torch.from_numpy(x).to(dev)
    inter = scale(xs, torch.from_numpy(ids.astype(np.int32)).to(dev).reshape(-1),
                  torch.from_numpy(tw.reshape(-1)).to(dev), r.sorted_ids, r.expert_ids,
                  torch.from_numpy(s).to(dev))
    want = reference.scale(x, ids, tw.reshape(-1), s)
    return np.array_equal(inter.cpu().numpy().view(np.uint32), want.view(np.uint32))


def timed(torch, fn, reps: int = 20) -> float:
    """Median milliseconds of `fn()` over `reps` calls (after 3 warm-up calls)."""
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    return statistics.median(times)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="one small shape")
    ap.add_argument("--shape", type=int, default=None, help="only SHAPES[i]")
    args = ap.parse_args(argv)
    import torch

    from tilesafe.moe import reference, routing
    from tilesafe.moe.pipeline import MoE

    dev = torch.device("cuda")
    print(f"card: {torch.cuda.get_device_name(0)}, torch {torch.__version__}")
    print(f"{'T':>6} {'D':>5} {'N':>5} {'E':>3} {'routing':>9} {'blocks':>6} {'bits':>9} "
          f"{'tilesafe ms':>11} {'torch ms':>9} {'ratio':>6} {'torch err':>9} {'route ms':>8} "
          f"{'check ms':>8} {'scale bits':>10}")
    failed = 0
    shapes = QUICK if args.quick else SHAPES
    if args.shape is not None:
        shapes = [shapes[args.shape]]
    for t, d, n, e in shapes:
        layer = MoE(e, device="gpu", kernels=ROOT / "corpus" / "moe")
        import tilesafe.jit as tj

        scale = tj.jit(ROOT / "corpus" / "moe" / "moe_scale.tsk", device="gpu")
        for kind in KINDS:
            rng = np.random.default_rng(7)
            ids = routing.routing(kind, t, e, 2, rng)
            tokens = ids.shape[0]
            x = routing.quarters((tokens, d), rng)
            w = routing.quarters((e, n, d), rng)
            tw = routing.route_weights(tokens, 2, rng).reshape(tokens, 2)
            xg = torch.from_numpy(x).to(dev, torch.bfloat16)
            wg = torch.from_numpy(w).to(dev, torch.bfloat16)
            idg = torch.from_numpy(ids.astype(np.int32)).to(dev)
            twg = torch.from_numpy(tw).to(dev)
            y = layer(xg, idg, twg, wg)
            want = reference.moe(x, ids, tw, w).astype(np.float32)
            same = np.array_equal(y.cpu().numpy().view(np.uint32), want.view(np.uint32))
            failed += not same
            ref = torch_moe(torch, xg, idg.long(), twg, wg)
            ours = timed(torch, lambda f=layer, xg=xg, idg=idg, twg=twg, wg=wg: f(xg, idg, twg, wg))
            theirs = timed(torch, lambda xg=xg, idg=idg, twg=twg, wg=wg: torch_moe(
                torch, xg, idg.long(), twg, wg))
            route = timed(torch, lambda f=layer, idg=idg: f.route(idg))
            blocks = layer.last_routing.used_blocks if layer.last_routing else 0
            r = layer.route(idg)
            sids, be = r.used()
            args = (xg, idg.reshape(-1), twg.reshape(-1), sids, be, wg)
            full = timed(torch, lambda a=args, f=layer: f.gemm(*a))
            proved = timed(torch, lambda a=args, f=layer: f.gemm.call_with_proved(
                f.composition.unchecked, *a))
            s_ok = scale_bits(torch, scale, x, ids, tw, r, e, rng, dev)
            failed += not s_ok
            # torch rounds each expert's product to bf16 before weighting: its error, not ours
            err = float((ref - y).abs().max() / y.abs().max().clamp_min(1e-30))
            print(f"{tokens:>6} {d:>5} {n:>5} {e:>3} {kind:>9} {blocks:>6} "
                  f"{'bit-exact' if same else 'DIFFER':>9} {ours:>11.3f} {theirs:>9.3f} "
                  f"{theirs / ours:>5.2f}x {err:>9.1e} {route:>8.3f} {full - proved:>8.3f} "
                  f"{'bit-exact' if s_ok else 'DIFFER':>10}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
