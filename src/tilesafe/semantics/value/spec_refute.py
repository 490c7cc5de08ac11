"""Search for a launch on which a kernel breaks an `ensures` clause the value proof could not
prove: the refuting half of the value check, run only when the proof did not settle a clause.

Why staged: a clause that is not proved for every size is an error unless something decides
it, and a concrete refutation is the most useful answer (sizes, seed, element, the value and
what the spec asks for). The stages go from cheap and likely to broad:

1. the sizes of the point where the proof failed (ISL names a size where the kernel's value
   and the spec's differ symbolically), when small enough to interpret;
2. the standard launches (semantics/value/spec_inputs.py: the cheapest, the longest loops, the most
   blocks, a ragged one) with plain inputs;
3. the same launches with special IEEE values (inf, NaN, zeros, subnormals, extremes) and with
   wide integers whose sums overflow f16: bugs that only show on such data (an `x * 0.0`
   term, an f16 accumulator against an f32 sum); then the cheapest launches with one special
   value at every corner of every input, one launch per special value (a spec term at a
   fixed index, `x[N - 1] * 0.0`, reads a corner); where another clause's order-free sum
   made every input an integer, the clauses without a sum once more on distinct values with
   -0, subnormals and the largest values;
4. further launches: equal sizes (a transposition agrees with a copy only when the sizes
   differ ... or the other way round), distinct ragged sizes, then the cheapest not tried.

Each launch is bounded (the interpreter's step limit, the size limits of spec_inputs), and
there are at most a fixed number of them, so the search always ends; finding nothing leaves
the clause unknown, which `verify` reports as an error (TS890) unless the clause is marked
`tested`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from tilesafe.frontend import ir
from tilesafe.semantics.value import spec_eval, spec_run
from tilesafe.semantics.value.spec_inputs import (
    MAX_ELEMENTS,
    MAX_THREADS,
    Profile,
    _cost,
    choose_sizes,
    edge_specials,
    more_sizes,
)

Sizes = dict[str, int]


@dataclass
class Outcome:
    """What the search found for one clause: a mismatch, or every launch that agreed (with
    its input profile) and those that could not be compared."""

    mismatch: spec_run.Mismatch | None = None
    agreed: list[dict[str, object]] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)


def search(kernel: ir.Kernel, specs: Sequence[ir.Ensures],
           points: Mapping[int, Mapping[str, int]] | None = None) -> list[Outcome]:
    """One Outcome per clause of `specs`; `points` maps a clause's position in `specs` to the
    sizes where its proof failed (stage 1)."""
    outcomes = [Outcome() for _ in specs]
    if not specs:  # every clause proved: no launch to choose
        return outcomes
    first = [_launchable(kernel, p) for p in (points or {}).values()]
    standard = choose_sizes(kernel)
    exact = spec_run.exact_inputs(kernel)
    corner_values = len(edge_specials(ir.DType.F32, exact))
    edges = [(standard[:2], Profile.EDGES, seed, exact) for seed in range(corner_values)]
    stages: list[tuple[list[Sizes], Profile, int, bool]] = [
        ([s for s in first if s is not None], Profile.PLAIN, 0, exact),
        (standard, Profile.PLAIN, 0, exact),
        (standard, Profile.SPECIAL, 0, exact),
        (standard, Profile.WIDE, 0, exact),
        *edges,
    ]
    if exact:
        # Another clause has an order-free sum, so the inputs above were integers without -0,
        # subnormals or the largest values; a clause with no sum is tried on those too.
        stages += [(standard[:2], Profile.SPECIAL, 0, False)]
        stages += [(standard[:2], Profile.EDGES, seed, False)
                   for seed in range(len(edge_specials(ir.DType.F32, False)))]
    stages.append((more_sizes(kernel, standard), Profile.PLAIN, 0, exact))
    for sizes_list, profile, seed, whole in stages:
        open_ = [i for i, o in enumerate(outcomes) if o.mismatch is None
                 and (whole == exact or not spec_eval.has_free_sum(specs[i].rhs))]
        if not open_ or not sizes_list:
            continue
        results = spec_run.check(kernel, _unique(sizes_list), seed=seed,
                                 specs=tuple(specs[i] for i in open_), profile=profile,
                                 exact=whole)
        for i, run in zip(open_, results, strict=True):
            o = outcomes[i]
            o.mismatch = run.mismatch
            o.agreed += [{"sizes": dict(s), "inputs": profile.value, "seed": seed}
                         for s in run.runs
                         if run.mismatch is None or dict(s) != run.mismatch.sizes]
            o.skipped += list(run.skipped)
    return outcomes


def _launchable(kernel: ir.Kernel, point: Mapping[str, int]) -> Sizes | None:
    sizes = {n: int(point[n]) for n in kernel.sizes if n in point}
    if len(sizes) != len(kernel.sizes):
        return None
    cost = _cost(kernel, sizes)
    if cost is None or cost[0] > MAX_ELEMENTS or cost[1] > MAX_THREADS:
        return None
    return sizes


def _unique(sizes_list: list[Sizes]) -> list[Sizes]:
    out: list[Sizes] = []
    for s in sizes_list:
        if s not in out:
            out.append(s)
    return out
