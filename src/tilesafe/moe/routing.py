"""Router outputs to test the MoE executors on: skewed, as real routers are.

Why skewed: a uniform routing gives every expert about TK / E pairs, so every group fills
its blocks the same way; the bugs of an inspector-executor pair live in the corners -- an
expert with no pair (a padded group of length 0, blocks that start where the previous
expert's end), a hot expert whose group spans many blocks, one token (two pairs, one block
each), all tokens on the same two experts. Each token picks K distinct experts, as top-k
routing does.

Values are small multiples of powers of two (docs/moe.md, "Exactness"), so the executors'
float arithmetic is exact and GPU, interpreter and numpy agree bit for bit.
"""

from __future__ import annotations

import numpy as np

KINDS = ("uniform", "hot", "empty", "single", "one_token")


def routing(kind: str, tokens: int, experts: int, k: int, rng: np.random.Generator
            ) -> np.ndarray:
    """Top-k expert ids, [tokens, k] int32, each row k distinct experts (experts >= k).

    uniform    every expert equally likely;
    hot        about 80 % of the choices go to two hot experts;
    empty      only the even experts are ever chosen (the odd ones get no pair);
    single     every token picks experts 0 .. k-1;
    one_token  one token (tokens is ignored), uniform choices."""
    if experts < k:
        raise ValueError(f"top-{k} routing needs at least {k} experts, got {experts}")
    if kind == "one_token":
        tokens = 1
    weights = np.ones(experts)
    if kind == "hot":
        weights[: min(2, experts)] = 4.0 * experts
    elif kind == "empty":
        weights[1::2] = 0.0
        if np.count_nonzero(weights) < k:
            weights[:k] = 1.0
    elif kind not in ("uniform", "single", "one_token"):
        raise ValueError(f"unknown routing kind {kind!r} (known: {', '.join(KINDS)})")
    out = np.empty((tokens, k), dtype=np.int32)
    for t in range(tokens):
        if kind == "single":
            out[t] = np.arange(k)
        else:
            out[t] = rng.choice(experts, size=k, replace=False, p=weights / weights.sum())
    return out


def route_weights(tokens: int, k: int, rng: np.random.Generator) -> np.ndarray:
    """Routing weights, [tokens * k] float32, multiples of 1/8 in [1/8, 1] (exact in every
    float format, and so are their products with the executors' small multiples of 1/4)."""
    return (rng.integers(1, 9, size=tokens * k) / 8).astype(np.float32)


def quarters(shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    """float32 multiples of 1/4 in [-2, 2] (exact in bf16: sums of up to 2^16 products of
    two of them are exact in f32)."""
    return (rng.integers(-8, 9, size=shape) / 4).astype(np.float32)
