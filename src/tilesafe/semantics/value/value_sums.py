"""The order-free sums of the value proof: a reduction compared with the spec's `sum` as a
multiset of contributions -- every addend of the kernel's `+` tree lifted to a term of loads
and constants with the instances where it holds, each injective, pairwise disjoint, and
together exactly the spec's image.

Why its own module: the term-by-term comparison (value_compare.Compare) is one recursion
over operators; the sum argument is a different algorithm (contributions, images, the
path-local fast path of value_paths.py) and is what the speed work changes. SumCompare is
Compare's mixin; the helpers below are shared with value_paths.py.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import islpy as isl
import numpy as np

from tilesafe.frontend import ir
from tilesafe.semantics.expr import evaluate, fp
from tilesafe.semantics.value import value_paths
from tilesafe.semantics.value.value_space import NotProved, zero
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
    show,
)

if TYPE_CHECKING:
    from tilesafe.semantics.value.value_space import ValueSpace


class SumCompare:
    """Mixin of value_compare.Compare: `sum` and `sum_seq` against the kernel's term."""

    s: ValueSpace
    outer: set[str]

    def fail(self, why: str, where: isl.Set) -> None:  # Compare's
        raise NotImplementedError

    def equal(self, k: Term, s: Term, ctx: isl.Set, top: bool = False) -> None:  # Compare's
        raise NotImplementedError

    # ---- sums ------------------------------------------------------------------------------

    def sum(self, k: Term, s: SpecSum, ctx: isl.Set) -> None:
        if s.ordered:
            self.seq_sum(k, s, ctx)
            return
        try:
            value_paths.prove_sum(self, k, s, ctx)  # the same argument, path-local spaces
            return
        except (value_paths.Fallback, NotProved):
            pass  # here, in the shared space: what fails, where
        parts = list(self.contributions(k, ctx))
        spec_dom = ctx & self.s.domain(s.inst)
        spec_img, spec_inj = self.image(s.body, spec_dom, {self.s.loop_name(
            s.inst, s.inst.loops[-1].uid)})
        if not spec_inj:
            self.fail("the spec's sum names an input element more than once", spec_dom)
        # Each part checked on its own against the parts before it (small sets: cheaper than
        # growing one union, whose intersections or coalescing dominate with ~100 parts),
        # and subtracted from what is left of the spec's image.
        seen: list[isl.Set] = []
        rest = spec_img
        for body, dom, dims in parts:
            if not same_shape(body, s.body):
                self.fail(f"a contribution {show(body)} does not have the shape of the "
                          f"spec's {show(s.body)}", dom)
            img, inj = self.image(body, dom, dims)
            if not inj:
                self.fail(f"contribution {show(body)} adds an input element more than once",
                          dom)
            if any(not (img & other).is_empty() for other in seen):
                self.fail("two parts of the reduction add the same input element", dom)
            if not img.is_subset(spec_img):
                self.fail("the kernel adds an input element the spec's sum does not", ctx)
            rest = rest.subtract(img)
            seen.append(img)
        if not rest.is_empty():
            self.fail("the kernel's reduction misses an input element of the spec's sum", ctx)

    def seq_sum(self, k: Term, s: SpecSum, ctx: isl.Set) -> None:
        """sum_seq: one unguarded fold over a unit-step loop from +0.0, in the spec's
        order (contribution i of the loop is contribution i of the spec)."""
        if not (isinstance(k, Fold) and k.depth == 1 and not k.guarded
                and isinstance(k.init, Lit) and k.init.bits == 0):
            self.fail("sum_seq is proved only against one unguarded loop accumulating from "
                      "0.0", ctx)
        lp, sp = k.inst.loops[-1], s.inst.loops[-1]
        if lp.step != 1:
            self.fail("sum_seq needs a unit-step loop", ctx)
        kv = self.s.dim(self.s.loop_name(k.inst, lp.uid))
        sv = self.s.dim(self.s.loop_name(s.inst, sp.uid))
        klo, khi = self.s.term(lp.lo, k.inst), self.s.term(lp.hi, k.inst)
        slo, shi = self.s.term(sp.lo, s.inst), self.s.term(sp.hi, s.inst)
        bad = ctx & khi.sub(klo).max(zero(self.s)).ne_set(shi.sub(slo).max(zero(self.s)))
        if not bad.is_empty():
            self.fail("the loop and the spec's sum_seq have different trip counts", bad)
        inner = ctx & self.s.domain(k.inst) & sv.eq_set(kv.sub(klo).add(slo))
        self.equal(k.body, s.body, inner)

    def contributions(self, k: Term, ctx: isl.Set
                      ) -> Iterator[tuple[Term, isl.Set, set[str]]]:
        """(body, instances, the coordinates that range over them) of every addend of an
        f32 `+` tree; +0.0 addends are dropped."""
        if ctx.is_empty():
            return
        if isinstance(k, Op) and k.name == "f32.add":
            for a in k.args:
                yield from self.contributions(a, ctx)
            return
        if isinstance(k, Lit) and k.bits == 0:
            return
        if isinstance(k, Fold):
            yield from self.contributions(k.init, ctx)
            dom = ctx & self.s.domain(k.inst)
            dims = {self.s.loop_name(k.inst, lp.uid) for lp in k.inst.loops[-k.depth:]}
            for body, d, extra in self.contributions(k.body, dom):
                yield body, d, dims | extra
            return
        if isinstance(k, Choice):
            for link, v in k.options:
                dom = ctx & self.s.link(link)
                for body, d, extra in self.contributions(v, dom):
                    yield body, d, extra | set(self.s.owned_dims(link.writer))
            return
        if isinstance(k, Accum):
            for link, init, steps in k.options:
                dom = ctx & self.s.link(link)
                first = set(self.s.owned_dims(link.writer))
                for body, d, extra in self.contributions(init, dom):
                    yield body, d, extra | first
                for step, v in steps:
                    ranging = first | set(self.s.owned_dims(step.writer))
                    for body, d, extra in self.contributions(v, dom & self.s.link(step)):
                        yield body, d, extra | ranging
            return
        if isinstance(k, Ite):
            yield from self.contributions(k.then, ctx & self.s.cond(k.cond, k.inst))
            yield from self.contributions(k.orelse,
                                          ctx & self.s.cond(negated(k.cond), k.inst))
            return
        if isinstance(k, Round) and exact_in(k.arg, k.dtype, self.s.k):
            yield from self.contributions(k.arg, ctx)
            return
        for body, d, extra in self.lift(k, ctx):
            c = constant_of(body)
            if c is not None and c.bits == 0:
                continue  # +0.0 (a zero fill times a zero fill): adds nothing
            yield body, d, extra

    def lift(self, k: Term, ctx: isl.Set) -> Iterator[tuple[Term, isl.Set, set[str]]]:
        """k with every resolved read and conditional inside its operations split into
        cases: (a term of loads and constants, where it holds, the writers' coordinates)."""
        if ctx.is_empty():
            return
        if isinstance(k, Choice):
            for link, v in k.options:
                for body, d, extra in self.lift(v, ctx & self.s.link(link)):
                    yield body, d, extra | set(self.s.owned_dims(link.writer))
            return
        if isinstance(k, Ite):
            yield from self.lift(k.then, ctx & self.s.cond(k.cond, k.inst))
            yield from self.lift(k.orelse, ctx & self.s.cond(negated(k.cond), k.inst))
            return
        if isinstance(k, Round) and exact_in(k.arg, k.dtype, self.s.k):
            yield from self.lift(k.arg, ctx)
            return
        if isinstance(k, Accum):
            self.fail("an accumulation in shared memory inside an operation", ctx)
        if isinstance(k, Op):
            cases: list[tuple[tuple[Term, ...], isl.Set, set[str]]] = [((), ctx, set())]
            for a in k.args:
                cases = [(args + (body,), d2, extra | e2)
                         for args, d, extra in cases
                         for body, d2, e2 in self.lift(a, d)]
            for args, d, extra in cases:
                yield Op(k.name, args), d, extra
            return
        yield k, ctx, set()

    def image(self, body: Term, dom: isl.Set, ranging: set[str]) -> tuple[isl.Set, bool]:
        """{(outer coordinates, leaf indices of body)} over dom, and whether the map from
        (outer, ranging coordinates) to it is injective. Coordinates neither outer nor
        ranging belong to other parts and are pinned to 0."""
        ranging = set(ranging)
        for leaf in leaves(body):  # every coordinate a leaf's value depends on ranges too
            inst = getattr(leaf, "inst", None)
            if isinstance(inst, Inst):
                ranging |= set(self.s.owned_dims(inst)) - self.outer
        pinned = frozenset(n for n in self.s.names if n not in ranging and n not in self.outer)
        for n in pinned:  # pinning a constrained coordinate could empty the image: unsound
            if dom.involves_dims(isl.dim_type.set, self.s.pos[n], 1):
                if not self.s.facts_only(n):
                    raise NotProved(f"a sum's instances constrain coordinate {n}, which is "
                                    "neither fixed for the output element nor ranging over "
                                    "the sum")
                # constrained only by the facts about gathered values (the base of every
                # set): some values of another namespace's coordinates satisfy them -- the
                # data's -- so the coordinate is projected, not pinned
                dom = dom.eliminate(isl.dim_type.set, self.s.pos[n], 1)
        outs = [self.s.dim(n) for n in self.s.names if n in self.outer]
        for leaf in leaves(body):
            if isinstance(leaf, Glob):
                outs += [self.s.term(i, leaf.inst) for i in leaf.indices]
            elif isinstance(leaf, IntV):
                outs.append(self.s.term(leaf.expr, leaf.inst))
        runs = list(reversed(coordinate_runs(sorted(self.s.pos[n] for n in pinned))))
        if not any(o.involves_dims(isl.dim_type.in_, first, n) for o in outs
                   for first, n in runs):
            # Neither the instances nor the values depend on the pinned coordinates: drop
            # them before building the map (~100 of them in a reduction tree's space)
            # rather than pin them to 0 and project them out of the map afterwards.
            small = dom
            for first, n in runs:
                small = small.project_out(isl.dim_type.set, first, n)
                outs = [o.drop_dims(isl.dim_type.in_, first, n) for o in outs]
            return self._image_map(outs, small)
        d = dom & self.s.pinned(pinned)
        lst = isl.PwAffList.alloc(self.s.ctx, len(outs))
        for o in outs:
            lst = lst.add(o)
        rng = isl.Space.create_from_names(self.s.ctx, set=[f"o{i}" for i in range(len(outs))],
                                          params=list(self.s.sizes))
        mspace = self.s.space.map_from_domain_and_range(rng)
        m = isl.Map.from_multi_pw_aff(isl.MultiPwAff.from_pw_aff_list(mspace, lst))
        m = m.intersect_domain(d)
        # The pinned coordinates are 0: dropping them is exact, and injectivity over the
        # few coordinates left is far cheaper than over the whole space (~100 dims).
        for first, n in reversed(coordinate_runs(sorted(self.s.pos[n] for n in pinned))):
            m = m.project_out(isl.dim_type.in_, first, n)
        return m.range(), m.is_injective()

    def _image_map(self, outs: list[isl.PwAff], dom: isl.Set) -> tuple[isl.Set, bool]:
        """image's result from the values `outs` on the instances `dom` (one space)."""
        lst = isl.PwAffList.alloc(self.s.ctx, len(outs))
        for o in outs:
            lst = lst.add(o)
        rng = isl.Space.create_from_names(self.s.ctx, set=[f"o{i}" for i in range(len(outs))],
                                          params=list(self.s.sizes))
        mspace = dom.get_space().map_from_domain_and_range(rng)
        m = isl.Map.from_multi_pw_aff(isl.MultiPwAff.from_pw_aff_list(mspace, lst))
        m = m.intersect_domain(dom)
        return m.range(), m.is_injective()


_FOLDABLE = ("f32.add", "f32.sub", "f32.mul")


def constant_of(t: Term) -> Lit | None:
    """t's value when it is f32 arithmetic on constants only (evaluated as the interpreter
    does, semantics/expr/evaluate.py), else None."""
    if isinstance(t, Lit):
        return t
    if not (isinstance(t, Op) and t.name in _FOLDABLE):
        return None
    args = [constant_of(a) for a in t.args]
    if any(a is None for a in args):
        return None
    with np.errstate(all="ignore"):
        v = np.float32(evaluate.CONCRETE[t.name](*(fp.f32_from_bits(a.bits) for a in args
                                                    if a is not None)))
    return Lit(fp.f32_bits(v), float(v))


def coordinate_runs(positions: list[int]) -> list[tuple[int, int]]:
    """Sorted positions as (first, length) runs of consecutive ones: one ISL projection per
    run instead of one per coordinate."""
    runs: list[tuple[int, int]] = []
    for p in positions:
        if runs and runs[-1][0] + runs[-1][1] == p:
            runs[-1] = (runs[-1][0], runs[-1][1] + 1)
        else:
            runs.append((p, 1))
    return runs


def leaves(t: Term) -> Iterator[Term]:
    if isinstance(t, (Glob, IntV, Lit)):
        yield t
        return
    if isinstance(t, Op):
        for a in t.args:
            yield from leaves(a)
        return
    if isinstance(t, Round):
        yield from leaves(t.arg)
        return
    raise NotProved(f"a sum's term {show(t)} is not built from loads and constants")


def same_shape(a: Term, b: Term) -> bool:
    if isinstance(a, Op) and isinstance(b, Op):
        return a.name == b.name and len(a.args) == len(b.args) and all(
            same_shape(x, y) for x, y in zip(a.args, b.args, strict=True))
    if isinstance(a, Glob) and isinstance(b, Glob):
        return a.tensor == b.tensor
    if isinstance(a, Lit) and isinstance(b, Lit):
        return a.bits == b.bits
    if isinstance(a, IntV) and isinstance(b, IntV):
        return True
    if isinstance(a, Round) and isinstance(b, Round):
        return a.dtype is b.dtype and same_shape(a.arg, b.arg)
    return False


def exact_in(t: Term, dtype: ir.DType, kernel: ir.Kernel) -> bool:
    """Is rounding t into dtype the identity (a load of a tensor of that dtype, a constant
    it represents exactly, a fill)?"""
    if isinstance(t, Glob):
        return kernel.tensor(t.tensor).dtype is dtype
    if isinstance(t, Lit):
        if t.value != t.value:
            return True
        if dtype is ir.DType.F16:
            return float(np.float16(t.value)) == t.value
        if dtype is ir.DType.BF16:
            return fp.f32_to_bf16_bits(fp.f32_from_bits(t.bits)) << 16 == t.bits
        return True
    if isinstance(t, Ite):
        return exact_in(t.then, dtype, kernel) and exact_in(t.orelse, dtype, kernel)
    if isinstance(t, Choice):
        return all(exact_in(v, dtype, kernel) for _, v in t.options)
    if isinstance(t, Round):
        return t.dtype is dtype
    return False


def negated(e: ir.Expr) -> ir.Expr:
    return ir.UnOp(e.span, ir.ScalarType.BOOL, "!", e)


