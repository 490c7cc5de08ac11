"""What the MoE kernels must compute, in numpy: the reference GPU runs and the interpreter
are compared with.

`scale` and `combine` follow the kernels' f32 operations in order (bit-exact on any input);
`gemm` and `moe` sum in float64 (exact on the small-multiple inputs of tilesafe.moe.routing,
within the float bound of docs/moe.md otherwise). Pair i is token i // k, choice i % k.
"""

from __future__ import annotations

import numpy as np


def scale(x: np.ndarray, topk: np.ndarray, tw: np.ndarray, s: np.ndarray, k: int = 2
          ) -> np.ndarray:
    """corpus/moe/moe_scale.tsk: inter[i, c] = x[i // k, c] * s[topk[i], c] * tw[i], f32,
    rounded after each product as the kernel does."""
    flat = np.asarray(topk).reshape(-1)
    rows = np.arange(flat.size) // k
    prod = (x[rows] * s[flat]).astype(np.float32)
    return (prod * tw[:, None]).astype(np.float32)


def gemm(x: np.ndarray, topk: np.ndarray, tw: np.ndarray, w: np.ndarray, k: int = 2
         ) -> np.ndarray:
    """corpus/moe/moe_gemm.tsk: inter[i, n] = (x[i // k] . w[topk[i], n]) * tw[i], the dot
    product in float64 (x and w as float32 values: bf16 widened)."""
    flat = np.asarray(topk).reshape(-1)
    out = np.zeros((flat.size, w.shape[1]), np.float64)
    # one expert at a time: gathering w[topk] for every pair is TK x N x D float64 values
    # (550 GB at 16384 tokens of 2048 against 1024 outputs)
    for e in np.unique(flat):
        pairs = np.flatnonzero(flat == e)
        out[pairs] = x[pairs // k].astype(np.float64) @ w[e].astype(np.float64).T
    return out * np.asarray(tw, dtype=np.float64).reshape(-1)[:, None]


def combine(inter: np.ndarray, k: int = 2) -> np.ndarray:
    """corpus/moe/moe_combine.tsk: y[t] = inter[k t] + inter[k t + 1] + ..., f32 in order."""
    t = inter.shape[0] // k
    out = inter[0::k][:t].astype(np.float32)
    for j in range(1, k):
        out = (out + inter[j::k][:t]).astype(np.float32)
    return out


def moe(x: np.ndarray, topk: np.ndarray, tw: np.ndarray, w: np.ndarray) -> np.ndarray:
    """The whole layer, float64: y[t] = sum_j tw[t, j] * (w[topk[t, j]] @ x[t])."""
    topk = np.asarray(topk)
    k = topk.shape[1]
    return gemm(x, topk, tw, w, k).reshape(topk.shape[0], k, -1).sum(axis=1)
