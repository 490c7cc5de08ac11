"""The instances of a TMA copy whose box lies wholly outside its tensor (TS517).

Why a finding at all: out-of-bounds box elements are legal -- a load fills them (zero or
NaN), a store drops them -- so a box that misses the tensor entirely faults nowhere and
computes nothing wrong. But a copy that moves no element is almost always a launch that
does not match its tensor (a grid sized for a smaller tile, a tile loop running one tile
too far): blocks that load zeros and store nothing, still paying for the barrier round
trip. The TMA checker reports it as a warning.

Exact for affine coordinates: the box `[c_k, c_k + box_k)` meets `[0, extent_k)` in every
dimension iff the clipped access relation (semantics/access/access.py: the box intersected with
the tensor) has an image for that instance. So the instances that miss are the domain
minus the relation's domain -- for every size `where` allows, decided by ISL.
"""

from __future__ import annotations

from dataclasses import dataclass

import islpy as isl

from tilesafe.semantics.access.access import AccessRelation, point_values


@dataclass(frozen=True)
class Outside:
    """Instances of one TMA copy whose box misses the tensor: `possible` over the instances
    that may run (guards without a Presburger form dropped), `certain` over those that
    surely run (their guarded part left out); equal when every guard is exact."""

    possible: isl.Set
    certain: isl.Set


@dataclass(frozen=True)
class Witness:
    """One instance whose box misses the tensor: the sizes, the instance's dims (block,
    thread, loop variables) and the box's start coordinates."""

    sizes: dict[str, int]
    instance: dict[str, int]
    start: list[int]


def outside(a: AccessRelation) -> Outside:
    """The instances of the TMA global-side access `a` whose box misses its tensor."""
    if not a.clipped or a.relation is None or a.origin is None:
        raise ValueError(f"{a.name} is not a modelled TMA copy of a tensor")
    meets = a.relation.domain()
    return Outside(a.domain.subtract(meets), a.domain_under.subtract(meets))


def witness(a: AccessRelation, instances: isl.Set) -> Witness:
    """The least instance of `instances` (smallest sizes first, then block, thread and loop
    values: the launch a person would try first) with its box's start."""
    nparam = instances.dim(isl.dim_type.param)
    flat = instances.move_dims(isl.dim_type.set, 0, isl.dim_type.param, 0, nparam)
    try:
        point = flat.lexmin().sample_point()
    except isl.Error:  # the budget: any point will do
        point = flat.sample_point()
    _, values = point_values(point)
    names = [instances.get_dim_name(isl.dim_type.param, i) for i in range(nparam)]
    sizes = dict(zip(names, values[:nparam], strict=True))
    inst = values[nparam:]
    fixed = isl.Set.universe(instances.get_space())
    for i, v in enumerate(values[:nparam]):
        fixed = fixed.fix_val(isl.dim_type.param, i, isl.Val.int_from_si(fixed.get_ctx(), v))
    for i, v in enumerate(inst):
        fixed = fixed.fix_val(isl.dim_type.set, i, isl.Val.int_from_si(fixed.get_ctx(), v))
    assert a.origin is not None
    _, start = point_values(a.origin.intersect_domain(fixed).range().sample_point())
    return Witness(sizes, dict(zip(a.dims, inst, strict=True)), start)
