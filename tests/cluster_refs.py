"""NumPy references for the kernels of corpus/cluster/: what each output tensor must hold,
computed the way the kernel does (f32, one rounding per operation, the kernel's summation
order), so that the interpreter and the GPU agree with them bit for bit."""

from __future__ import annotations

import numpy as np

F32 = np.float32


def ref_multicast_copy(s: dict, x: dict) -> dict:
    src = np.asarray(x["src"], F32)
    return {"dst": np.stack([src, src])}


def tree(v: np.ndarray) -> np.ndarray:
    """The halving tree over the last axis (a power of two): part[t] += part[t + h]."""
    part = np.array(v, dtype=F32)
    h = part.shape[-1] // 2
    while h:
        part[..., :h] = part[..., :h] + part[..., h:2 * h]
        h //= 2
    return part[..., 0]


def ref_cluster_row_sum(s: dict, x: dict) -> dict:
    """CTA r: thread t adds columns r*128 + j*32 + t, j = 0..3, in order from 0.0; a tree
    over the 32 partials; then y = p0 + p1."""
    a = np.asarray(x["x"], F32)
    halves = []
    for r in range(2):
        acc = np.zeros((a.shape[0], 32), F32)
        for j in range(4):
            acc = acc + a[:, r * 128 + j * 32: r * 128 + j * 32 + 32]
        halves.append(tree(acc))
    return {"y": halves[0] + halves[1]}


def ref_multicast_ring(s: dict, x: dict) -> dict:
    return {"out": np.asarray(x["x"], F32) * np.asarray(x["w"], F32)[None, :]}


def ref_dsmem_exchange(s: dict, x: dict) -> dict:
    """Each 256-element block's halves swapped."""
    v = np.asarray(x["x"], F32).reshape(-1, 2, 128)
    return {"y": v[:, ::-1, :].reshape(-1)}


def ref_cluster4_row_sum(s: dict, x: dict) -> dict:
    """CTA r: pair sums x[r*64 + t] + x[r*64 + 32 + t], summed in order from 0.0 by its
    thread 0; then y = ((p0 + p1) + p2) + p3."""
    a = np.asarray(x["x"], F32)
    parts = []
    for r in range(4):
        pairs = a[:, r * 64: r * 64 + 32] + a[:, r * 64 + 32: r * 64 + 64]
        acc = np.zeros(a.shape[0], F32)
        for j in range(32):
            acc = acc + pairs[:, j]
        parts.append(acc)
    return {"y": ((parts[0] + parts[1]) + parts[2]) + parts[3]}


# name -> (reference, sizes to run at: the first in the quick pass)
CASES = {
    "multicast_copy": (ref_multicast_copy, ({"M": 64, "N": 128}, {"M": 192, "N": 64})),
    "cluster_row_sum": (ref_cluster_row_sum, ({"M": 3}, {"M": 1}, {"M": 8})),
    # 5 column tiles through 2 stages: each CTA multicasts the w tiles of its stage
    "multicast_ring": (ref_multicast_ring, ({"M": 128, "N": 320}, {"M": 256, "N": 64})),
    # each CTA multicasts one half of every w tile: 3 stages, 5 and 1 column tiles
    "multicast_halves": (ref_multicast_ring, ({"M": 128, "N": 320}, {"M": 256, "N": 64})),
    "dsmem_exchange": (ref_dsmem_exchange, ({"N": 256}, {"N": 768})),
    "cluster4_row_sum": (ref_cluster4_row_sum, ({"M": 2}, {"M": 1}, {"M": 5})),
}
