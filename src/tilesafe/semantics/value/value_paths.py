"""An order-free sum compared path by path, each path in a space of its own coordinates.

Why: the comparison of a reduction (semantics/value/value_compare.py, `Compare.sum`) works
in one ISL space over every coordinate of the kernel's value term. A reduction tree gives
every resolved read a namespace of its own, so that space has ~100 coordinates (row_sum_ilp:
99), while one contribution -- one path from the output down to a loaded element -- involves
a dozen. Every intersection, projection and injectivity test along a path paid for all of
them (issue 19: row_sum_ilp's 128 contributions took ~2 s). Here each path's instances are
built in a space over the output's coordinates and those of the path alone; the images of
the contributions are sets over the output coordinates and loaded indices, whose space does
not depend on the path, so they are compared exactly as before (each injective, pairwise
disjoint, inside the spec's image, covering it).

The same argument, the same sets: the paths and their order are those `Compare.contributions`
yields (a path whose instances are empty contributes nothing, as there). This module only
*proves*: anything it does not handle (an accumulation inside an operation, index-tensor
coordinates, a context that constrains more than the output's coordinates, too many paths)
and every failure hands the sum back to `Compare.sum`, whose diagnosis and point are then
the ones reported.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

import islpy as isl

from tilesafe.semantics.value.value_space import NotProved, ValueSpace
from tilesafe.semantics.value.value_terms import (
    Accum,
    Choice,
    Fold,
    Glob,
    Inst,
    IntV,
    Ite,
    Lit,
    Op,
    Round,
    SpecSum,
    Term,
)

if TYPE_CHECKING:
    from tilesafe.semantics.value.value_compare import Compare

MAX_PATHS = 4096  # contributions; beyond, the shared-space comparison


class Fallback(Exception):
    """Not handled here: Compare.sum decides."""


def prove_sum(cmp: Compare, k: Term, s: SpecSum, ctx: isl.Set) -> None:
    """Prove the order-free sum k == s on ctx, or raise Fallback (never a wrong proof)."""
    _Paths(cmp).prove(k, s, ctx)


@dataclass(frozen=True)
class _At:
    """Where a path stands: the statements whose coordinates it has met (after the output's),
    the space over exactly those, and its instances there."""

    insts: tuple[Inst, ...]
    space: ValueSpace
    dom: isl.Set

    def __and__(self, other: isl.Set) -> _At:
        return _At(self.insts, self.space, self.dom & other)


class _Paths:
    def __init__(self, cmp: Compare) -> None:
        big = cmp.s
        if big.gather_plan or cmp.outer_insts is None:
            raise Fallback  # index-tensor facts tie namespaces together: only the big space
        self.cmp = cmp
        self.big = big
        self.outer = sorted(cmp.outer, key=lambda n: big.pos[n])
        self.spaces: dict[tuple[str, ...], ValueSpace] = {}
        self.count = 0

    def space(self, insts: tuple[Inst, ...]) -> ValueSpace:
        involved = list(self.cmp.outer_insts or ()) + list(insts)
        names = tuple(dict.fromkeys(n for i in involved for n in ValueSpace.inst_dims(i)))
        hit = self.spaces.get(names)
        if hit is None:
            hit = self.spaces[names] = ValueSpace(self.big.kernels, self.big.ctx,
                                                  self.big.phases, involved)
            hit.parsed = self.big.parsed  # order texts parsed once for every space
        return hit

    def grow(self, at: _At, new: list[Inst]) -> _At:
        """`at` in the space that also has the coordinates of `new`."""
        if all(n in at.space.pos for i in new for n in ValueSpace.inst_dims(i)):
            return at
        insts = at.insts + tuple(new)
        space = self.space(insts)
        return _At(insts, space, _embed(space, at.dom, at.space.names))

    def prove(self, k: Term, s: SpecSum, ctx: isl.Set) -> None:
        from tilesafe.semantics.value import value_sums as vc

        base = _outer_context(self.big, ctx, self.outer)
        root_space = self.space(())
        root = _At((), root_space, _embed(root_space, base, self.outer))
        spec = self.grow(root, [s.inst, *_leaf_insts(s.body)])
        spec_dom = spec.dom & spec.space.domain(s.inst)
        spec_img, spec_inj = self.image(spec.space, s.body, spec_dom, {
            spec.space.loop_name(s.inst, s.inst.loops[-1].uid)})
        if not spec_inj:
            raise Fallback
        seen: list[isl.Set] = []
        rest = spec_img
        for body, at, dims in self.contributions(k, root):
            if not vc.same_shape(body, s.body):
                raise Fallback
            at = self.grow(at, _leaf_insts(body))
            img, inj = self.image(at.space, body, at.dom, dims)
            if not inj or any(not (img & other).is_empty() for other in seen):
                raise Fallback
            if not img.is_subset(spec_img):
                raise Fallback
            rest = rest.subtract(img)
            seen.append(img)
        if not rest.is_empty():
            raise Fallback

    def contributions(self, k: Term, at: _At) -> Iterator[tuple[Term, _At, set[str]]]:
        """Compare.contributions, each path in its own space."""
        from tilesafe.semantics.value.value_sums import constant_of, exact_in, negated

        if at.dom.is_empty():
            return
        if isinstance(k, Op) and k.name == "f32.add":
            for a in k.args:
                yield from self.contributions(a, at)
            return
        if isinstance(k, Lit) and k.bits == 0:
            return
        if isinstance(k, Fold):
            yield from self.contributions(k.init, at)
            at2 = self.grow(at, [k.inst])
            dims = {ValueSpace.loop_name(k.inst, lp.uid) for lp in k.inst.loops[-k.depth:]}
            for body, d, extra in self.contributions(k.body, at2 & at2.space.domain(k.inst)):
                yield body, d, dims | extra
            return
        if isinstance(k, Choice):
            for link, v in k.options:
                at2 = self.grow(at, [link.reader, link.writer])
                for body, d, extra in self.contributions(v, at2 & at2.space.link(link)):
                    yield body, d, extra | set(ValueSpace.inst_dims(link.writer))
            return
        if isinstance(k, Accum):
            for link, init, steps in k.options:
                at2 = self.grow(at, [link.reader, link.writer])
                at2 = at2 & at2.space.link(link)
                first = set(ValueSpace.inst_dims(link.writer))
                for body, d, extra in self.contributions(init, at2):
                    yield body, d, extra | first
                for step, v in steps:
                    ranging = first | set(ValueSpace.inst_dims(step.writer))
                    at3 = self.grow(at2, [step.reader, step.writer])
                    for body, d, extra in self.contributions(v, at3 & at3.space.link(step)):
                        yield body, d, extra | ranging
            return
        if isinstance(k, Ite):
            at2 = self.grow(at, [k.inst])
            yield from self.contributions(k.then, at2 & at2.space.cond(k.cond, k.inst))
            yield from self.contributions(k.orelse,
                                          at2 & at2.space.cond(negated(k.cond), k.inst))
            return
        if isinstance(k, Round) and exact_in(k.arg, k.dtype, self.cmp.s.k):
            yield from self.contributions(k.arg, at)
            return
        for body, d, extra in self.lift(k, at):
            c = constant_of(body)
            if c is not None and c.bits == 0:
                continue
            self.count += 1
            if self.count > MAX_PATHS:
                raise Fallback
            yield body, d, extra

    def lift(self, k: Term, at: _At) -> Iterator[tuple[Term, _At, set[str]]]:
        """Compare.lift, each case in its own space."""
        from tilesafe.semantics.value.value_sums import exact_in, negated

        if at.dom.is_empty():
            return
        if isinstance(k, Choice):
            for link, v in k.options:
                at2 = self.grow(at, [link.reader, link.writer])
                for body, d, extra in self.lift(v, at2 & at2.space.link(link)):
                    yield body, d, extra | set(ValueSpace.inst_dims(link.writer))
            return
        if isinstance(k, Ite):
            at2 = self.grow(at, [k.inst])
            yield from self.lift(k.then, at2 & at2.space.cond(k.cond, k.inst))
            yield from self.lift(k.orelse, at2 & at2.space.cond(negated(k.cond), k.inst))
            return
        if isinstance(k, Round) and exact_in(k.arg, k.dtype, self.cmp.s.k):
            yield from self.lift(k.arg, at)
            return
        if isinstance(k, Accum):
            raise Fallback
        if isinstance(k, Op):
            cases: list[tuple[tuple[Term, ...], _At, set[str]]] = [((), at, set())]
            for a in k.args:
                cases = [(args + (body,), d2, extra | e2)
                         for args, d, extra in cases
                         for body, d2, e2 in self.lift(a, d)]
                if len(cases) > MAX_PATHS:
                    raise Fallback
            for args, d, extra in cases:
                yield Op(k.name, args), d, extra
            return
        yield k, at, set()

    def image(self, space: ValueSpace, body: Term, dom: isl.Set, ranging: set[str]
              ) -> tuple[isl.Set, bool]:
        return _image(space, self.outer, self.cmp.outer, body, dom, ranging)


def _outer_context(big: ValueSpace, ctx: isl.Set, outer: list[str]) -> isl.Set:
    """ctx over the output's coordinates only (in `outer`'s order). It must constrain no
    other coordinate: projecting one out would enlarge it."""
    from tilesafe.semantics.value.value_sums import coordinate_runs

    keep = set(outer)
    s = ctx
    for first, n in reversed(coordinate_runs([big.pos[x] for x in big.names if x not in keep])):
        if s.involves_dims(isl.dim_type.set, first, n):
            raise Fallback
        s = s.project_out(isl.dim_type.set, first, n)
    return s


def _embed(space: ValueSpace, small: isl.Set, names: list[str]) -> isl.Set:
    """A set over `names` (in that order) as a set of `space` (the preimage under the
    projection onto them)."""
    ls = isl.LocalSpace.from_space(space.space)
    lst = isl.AffList.alloc(space.ctx, len(names))
    for n in names:
        lst = lst.add(isl.Aff.var_on_domain(ls, isl.dim_type.set, space.pos[n]))
    small = small.align_params(space.space.params())
    ma = isl.MultiAff.from_aff_list(space.space.map_from_domain_and_range(small.get_space()),
                                    lst)
    return small.preimage_multi_aff(ma)


def _leaf_insts(body: Term) -> list[Inst]:
    from tilesafe.semantics.value.value_sums import leaves

    try:
        return [leaf.inst for leaf in leaves(body) if isinstance(leaf, (Glob, IntV))]
    except NotProved:
        raise Fallback from None


def _image(space: ValueSpace, outer: list[str], outer_set: set[str], body: Term,
           dom: isl.Set, ranging: set[str]) -> tuple[isl.Set, bool]:
    """Compare.image in `space`: {(output coordinates in `outer`'s order, loaded indices)}
    over dom, and whether (output, ranging coordinates) -> it is injective."""
    from tilesafe.semantics.value.value_sums import coordinate_runs, leaves

    ranging = set(ranging)
    for leaf in leaves(body):
        inst = getattr(leaf, "inst", None)
        if isinstance(inst, Inst):
            ranging |= set(space.inst_dims(inst)) - outer_set
    pinned = [n for n in space.names if n not in ranging and n not in outer_set]
    for n in pinned:
        if dom.involves_dims(isl.dim_type.set, space.pos[n], 1):
            raise Fallback
    outs = [space.dim(n) for n in outer]
    for leaf in leaves(body):
        if isinstance(leaf, Glob):
            outs += [space.term(i, leaf.inst) for i in leaf.indices]
        elif isinstance(leaf, IntV):
            outs.append(space.term(leaf.expr, leaf.inst))
    runs = list(reversed(coordinate_runs(sorted(space.pos[n] for n in pinned))))
    if any(o.involves_dims(isl.dim_type.in_, first, n) for o in outs for first, n in runs):
        raise Fallback
    for first, n in runs:
        dom = dom.project_out(isl.dim_type.set, first, n)
        outs = [o.drop_dims(isl.dim_type.in_, first, n) for o in outs]
    lst = isl.PwAffList.alloc(space.ctx, len(outs))
    for o in outs:
        lst = lst.add(o)
    rng = isl.Space.create_from_names(space.ctx, set=[f"o{i}" for i in range(len(outs))],
                                      params=list(space.sizes))
    m = isl.Map.from_multi_pw_aff(isl.MultiPwAff.from_pw_aff_list(
        dom.get_space().map_from_domain_and_range(rng), lst)).intersect_domain(dom)
    return m.range(), m.is_injective()
