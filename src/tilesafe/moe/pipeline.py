"""An MoE layer from proved pieces: the inspector, then the grouped GEMM and the top-k
combine of corpus/moe, each a `tilesafe.jit` kernel.

Why the composition needs no trust in the inspector: the GEMM's `requires` clauses are
exactly what its proofs assume of the routing (bounds, every pair once, one expert per
block, the block's expert the pair's), and `tilesafe compose` proves each clause about the
routing of tilesafe.moe.align's output for every routing and size
(tilesafe/moe/compose.py). The layer runs that proof when it is made and, since it runs
the inspector itself, skips the proved clauses at launch. The clause on the router's ids
(an input) is implied by "every id is an expert", which the inspector counts as it
routes (`Routing.invalid`): with none invalid it is skipped too, otherwise the launch
check runs and names the first bad id (TS911, on the GPU for torch CUDA tensors). A clause
the proof does not establish stays checked. The executors' `ensures`
say what each computes; composed, y[t] = sum_j tw[t, j] * (w[topk[t, j]] @ x[t])
(tilesafe.moe.reference.moe).

Top-2 routing, blocks of 64 rows, bf16 x [T, D] and w [E, N, D] (torch Linear layout),
f32 weights and output.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tilesafe.moe.align import Routing, align

KERNELS = Path(__file__).resolve().parents[3] / "corpus" / "moe"
BLOCK = 64
TOP_K = 2


class MoE:
    """`MoE(experts)(x, topk_ids, topk_weights, w)` -> y [T, N] (numpy or torch, like x).
    `device` and `cache` are tilesafe.jit's; `kernels` is the folder holding moe_gemm.tsk
    and moe_combine.tsk (corpus/moe of the checkout by default)."""

    def __init__(self, experts: int, *, device: str = "auto", cache: Any = True,
                 kernels: str | Path = KERNELS) -> None:
        import tilesafe.jit as tj

        self.experts = experts
        folder = Path(kernels)
        self.gemm = tj.jit(folder / "moe_gemm.tsk", device=device, cache=cache)
        self.combine = tj.jit(folder / "moe_combine.tsk", device=device, cache=cache)
        self.last_routing: Routing | None = None
        from tilesafe.moe.compose import Binding, compose

        # the GEMM's clauses proved of the inspector's used arrays (about 1 s): skipped at launch
        self.composition = compose(self.gemm.kernel,
                                   Binding.default(self.gemm.kernel, BLOCK, "used"))

    def route(self, topk_ids: Any) -> Routing:
        """The inspector on the router's ids (numpy or torch: on their device)."""
        if tuple(topk_ids.shape[1:]) != (TOP_K,):
            raise ValueError(f"the kernels are top-{TOP_K}: topk_ids must be [T, {TOP_K}], "
                             f"got {list(topk_ids.shape)}")
        return align(topk_ids, self.experts, BLOCK)

    def __call__(self, x: Any, topk_ids: Any, topk_weights: Any, w: Any) -> Any:
        routing = self.route(topk_ids)
        self.last_routing = routing
        sids, be = routing.used()  # the blocks in use: the GEMM's grid
        # the clauses proved of the inspector's output are not checked again; the router's
        # ids need no check either when the inspector found every one an expert (it counts
        # them as it routes) -- otherwise the launch check names the first bad one (TS911)
        skip = (self.composition.unchecked_when_valid if routing.invalid == 0 else
                self.composition.unchecked)
        inter = self.gemm.call_with_proved(skip, x, topk_ids.reshape(-1),
                                           topk_weights.reshape(-1), sids, be, w)
        return self.combine(inter, T=int(x.shape[0]))

