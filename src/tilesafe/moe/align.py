"""The inspector: `moe_align_block_size` semantics, on numpy arrays or torch tensors.

Given the router's top-k expert ids (T tokens x K choices, flattened to TK pairs, pair
i = t * K + k), the executor wants the pairs grouped by expert, each expert's group padded
to a multiple of the block size B with a sentinel (TK, one past every pair), and one expert
id per block:

* counts[e]: the pairs routed to expert e (ids outside 0 .. E-1 are left out, as vLLM's
  alignment skips them -- the executor's `requires` then refuses the routing at launch,
  naming a pair no position holds);
* offsets: the exclusive prefix sum of the padded counts; `total` = offsets[E], the rows the
  executor has work in (vLLM's num_tokens_post_padded);
* sorted_ids[offsets[e] + r] = the r-th pair (in pair order) routed to e; every other
  position holds the sentinel TK;
* expert_ids[b] = the expert whose padded group holds block b, -1 for the blocks past
  `total` (vLLM fills them with 0 and stops at num_tokens_post_padded; -1 makes an executor
  that processes them without checking fail its bounds proof instead of computing garbage).

The arrays are allocated for the worst case, TK + E (B - 1) rows rounded up to whole blocks,
so their shapes depend on TK, E and B only (a launch can be captured once).

Why the inspector is host code and not a proved kernel: what the executor needs of it is
exactly its `requires` clauses, and those are checked on its output at every launch (a
routing the inspector got wrong is refused before the executor reads it). Its correctness
is tested against brute force (tests/test_moe.py), not proved.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True)
class Routing:
    """The inspector's output (numpy arrays or torch tensors, int32)."""

    sorted_ids: Any  # [NB * B]: pair ids grouped by expert, padded with the sentinel TK
    expert_ids: Any  # [NB]: the expert of each block, -1 past `total`
    total: int  # rows in use: a multiple of B (num_tokens_post_padded)
    pairs: int  # TK, the sentinel
    block: int  # B
    invalid: int = 0  # pairs whose id is not an expert 0 .. E-1 (left out of the routing)

    @property
    def used_blocks(self) -> int:
        return self.total // self.block

    def used(self) -> tuple[Any, Any]:
        """(sorted_ids, expert_ids) cut to the blocks in use (no -1 block)."""
        return self.sorted_ids[: self.total], self.expert_ids[: self.used_blocks]


def allocated_blocks(pairs: int, experts: int, block: int) -> int:
    """Blocks of the worst case: every expert's group one pair past a multiple of B."""
    return -(-(pairs + experts * (block - 1)) // block)


def align(topk_ids: Any, experts: int, block: int) -> Routing:
    """The routing of `topk_ids` ([T, K] or [TK]; numpy or torch, any integer dtype) for
    `experts` experts and blocks of `block` rows, on the ids' device."""
    if experts < 1 or block < 1:
        raise ValueError(f"experts and block must be positive, got {experts}, {block}")
    if type(topk_ids).__module__.startswith("torch"):
        return _align_torch(topk_ids, experts, block)
    return _align_numpy(np.asarray(topk_ids), experts, block)


def _align_numpy(ids: np.ndarray, experts: int, block: int) -> Routing:
    flat = ids.reshape(-1).astype(np.int64)
    tk = int(flat.size)
    nb = allocated_blocks(tk, experts, block)
    valid = (flat >= 0) & (flat < experts)
    counts = np.bincount(flat[valid], minlength=experts)
    padded = -(-counts // block) * block
    offsets = np.concatenate([[0], np.cumsum(padded)])
    total = int(offsets[-1])
    pairs = np.nonzero(valid)[0]
    order = pairs[np.argsort(flat[pairs], kind="stable")]  # by expert, then pair id
    e_sorted = flat[order]
    starts = np.concatenate([[0], np.cumsum(counts)])[:-1]
    rank = np.arange(order.size) - starts[e_sorted]
    sorted_ids = np.full(nb * block, tk, dtype=np.int32)
    sorted_ids[offsets[e_sorted] + rank] = order
    expert_ids = np.full(nb, -1, dtype=np.int32)
    expert_ids[: total // block] = np.repeat(np.arange(experts), padded // block)
    return Routing(sorted_ids, expert_ids, total, tk, block, int(tk - pairs.size))


def _align_torch(ids: Any, experts: int, block: int) -> Routing:
    """The same arrays with torch operations whose shapes never depend on the data, so the
    only host synchronisation is the final read of `total` and of the invalid-id count (the
    host needs both: the executor's grid, and whether the router's ids need their launch
    check). Invalid pairs sort after every expert (key E) and scatter to a spare slot."""
    import torch

    dev = ids.device
    flat = ids.reshape(-1).to(torch.int64)
    tk = int(flat.numel())
    nb = allocated_blocks(tk, experts, block)
    valid = (flat >= 0) & (flat < experts)
    key = torch.where(valid, flat, torch.full_like(flat, experts))
    counts = torch.zeros(experts + 1, dtype=torch.int64, device=dev)
    counts.scatter_add_(0, key, torch.ones_like(key))
    padded = (counts[:experts] + block - 1) // block * block
    zero = torch.zeros(1, dtype=torch.int64, device=dev)
    offsets = torch.cat([zero, torch.cumsum(padded, 0)])  # E + 1 entries
    order = torch.sort(key, stable=True).indices  # by expert, then pair id; invalid last
    e_sorted = key[order]
    starts = torch.cat([zero, torch.cumsum(counts, 0)])[:-1]  # E + 1 entries
    rank = torch.arange(tk, device=dev) - starts[e_sorted]
    spare = nb * block  # invalid pairs land here, past the array
    pos = torch.where(e_sorted < experts, offsets[e_sorted.clamp(max=experts - 1)] + rank,
                      torch.full_like(rank, spare))
    sorted_ids = torch.full((spare + 1,), tk, dtype=torch.int32, device=dev)
    sorted_ids[pos] = order.to(torch.int32)
    rows = torch.arange(nb, device=dev) * block
    total_t = offsets[experts]
    owner = torch.searchsorted(offsets[1:], rows, right=True)
    expert_ids = torch.where(rows < total_t, owner, torch.full_like(owner, -1)).to(torch.int32)
    total, invalid = torch.stack([total_t, counts[experts]]).tolist()
    return Routing(sorted_ids[:spare], expert_ids, int(total), tk, block, int(invalid))
