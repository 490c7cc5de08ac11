"""Refuting a clause of an executor on the inspector's output: a concrete routing.

Why a search next to the proof: z3 answers "unknown" rather than "sat" on the quantified
theory, so a clause the inspector does not guarantee would only be "not proved". A small
routing on which `tilesafe.moe.align`'s actual output violates the clause -- evaluated by
the launch check itself (semantics/access/requires_eval.py) -- makes it "refuted", with
the router ids that show it. Routings are drawn from a fixed seed (the same answer on every
run), over few pairs and experts, with ids outside 0 .. E-1 where the input clauses allow
them; a launch's other sizes come from z3 on the executor's `where`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import z3

from tilesafe.frontend import ir
from tilesafe.moe.align import align
from tilesafe.semantics.expr.z3_terms import SizeTerms

if TYPE_CHECKING:
    from tilesafe.moe.compose import Binding, ClauseVerdict

ROUTINGS = 24  # random routings per (pairs, experts)
PAIRS = (1, 2, 3, 4, 6, 8)
EXPERTS = (1, 2, 3)


def refute(kernel: ir.Kernel, binding: Binding, forms: Sequence[Mapping[str, Any]],
           index: int, kinds: Sequence[str]) -> ClauseVerdict | None:
    """A refutation of clause `index`, or None when the search finds none."""
    from tilesafe.moe.compose import ClauseVerdict
    from tilesafe.semantics.access import requires_eval, requires_form

    inputs = [f for f, k in zip(forms, kinds, strict=True) if k == "input" and set(
        requires_form.tensors((f,))) <= {n for n, w in binding.tensors.items()
                                         if w == "topk_ids"}]
    rng = np.random.default_rng(0)
    big = (binding.block + 1, binding.block + 2, 2 * binding.block + 2)
    for tk in PAIRS + big:
        for e in EXPERTS:
            for ids in _routings(rng, tk, e, random=tk in PAIRS):
                r = align(ids, e, binding.block)
                sids, be = r.used() if binding.cut == "used" else (r.sorted_ids, r.expert_ids)
                by_field = {"topk_ids": ids.astype(np.int32), "sorted_ids": sids,
                            "expert_ids": be, "total": np.array([r.total], np.int32)}
                arrays = _shaped(kernel, {n: by_field[w] for n, w in binding.tensors.items()})
                if arrays is None:
                    continue
                sizes = _sizes(kernel, binding, arrays, e)
                if sizes is None:
                    continue
                try:
                    if requires_eval.first_violation(inputs, sizes, arrays) is not None:
                        continue
                    v = requires_eval.first_violation([forms[index]], sizes, arrays)
                except (requires_eval.TooLarge, KeyError):
                    continue
                if v is not None:
                    at = ", ".join(f"{k} = {x}" for k, x in v.at.items())
                    return ClauseVerdict(index, forms[index]["text"], forms[index]["line"],
                                         "refuted", f"at {at}: {v.detail}" if at else v.detail,
                                         [int(x) for x in ids], sizes)
    return None


def _routings(rng: np.random.Generator, tk: int, e: int, random: bool) -> list[np.ndarray]:
    """Skewed and uniform routings: all on one expert, one per expert, all on the last
    expert but one pair; with `random`, also random ones, and random ones with an id
    outside the experts (-1, or E)."""
    last = np.full(tk, e - 1)
    last[0] = 0
    out = [np.zeros(tk, np.int64), np.arange(tk) % e, np.full(tk, e - 1), last,
           np.sort(np.arange(tk) % e)]
    if not random:
        return out
    for _ in range(ROUTINGS):
        ids = rng.integers(0, e, tk)
        out.append(ids)
    for bad in (-1, e):
        ids = rng.integers(0, e, tk)
        ids[rng.integers(0, tk)] = bad
        out.append(ids)
    return out


def _shaped(kernel: ir.Kernel, arrays: dict[str, np.ndarray]) -> dict[str, np.ndarray] | None:
    """The arrays in the executor's shapes (the router's ids as [T, K] where it says so);
    None when a routing's pairs do not fill whole rows of K."""
    out = {}
    for name, a in arrays.items():
        t = kernel.tensor(name)
        if len(t.shape) == 2 and isinstance(t.shape[1], ir.IntConst):
            k = t.shape[1].value
            if a.size % k:
                return None
            a = a.reshape(-1, k)
        out[name] = a
    return out


def _sizes(kernel: ir.Kernel, binding: Binding, arrays: Mapping[str, np.ndarray],
           experts: int) -> dict[str, int] | None:
    """Sizes for a launch on `arrays` that `where` allows (z3; None if there is none)."""
    sizes = {n: z3.Int(n) for n in kernel.sizes}
    terms = SizeTerms(sizes)
    s = z3.Solver()
    s.set("rlimit", 200_000)
    s.add(*[terms.fold(w) for w in kernel.where])
    s.add(sizes[binding.experts] == experts)
    for t in kernel.params:
        if t.name in arrays:
            for d, n in zip(t.shape, arrays[t.name].shape, strict=True):
                s.add(terms.fold(d) == int(n))
    if s.check() != z3.sat:
        return None
    m = s.model()
    return {n: m.eval(v, model_completion=True).as_long() for n, v in sizes.items()}
