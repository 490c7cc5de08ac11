"""Comparing a kernel's value term with the spec's, on a set of instances, for every size.

Why: once every shared read is resolved (semantics/value/valueflow.py), what is left is two terms
over the coordinates of one ISL space (semantics/value/value_space.py). They are compared
operator by operator -- f32 rounding and the non-associativity of `+` respected exactly,
IEEE `+`/`*` allowed to swap operands --, loads by tensor and index (an emptiness check of
"indices differ"), conditionals by cases, and an order-free `sum` as a multiset of
contributions (injective, disjoint, with exactly the spec's image). A failure is NotProved
with the reason and a point where it happens.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import islpy as isl

from tilesafe.frontend import ir
from tilesafe.semantics.value import value_fp, value_intsum
from tilesafe.semantics.value.value_space import NotProved, ValueSpace
from tilesafe.semantics.value.value_sums import SumCompare, exact_in, negated
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

_COMMUTATIVE = ("f32.add", "f32.mul", "int.add", "int.mul")
_ONE, _PLUS_ZERO, _MINUS_ZERO = 0x3F800000, 0x00000000, 0x80000000


def _identity(t: Term) -> Term:
    """`t` without an operation that returns its operand for every f32 operand under
    round-to-nearest (NaN stays NaN; payloads are not modelled): x * 1.0, 1.0 * x, x / 1.0,
    x - (+0.0), x + (-0.0), (-0.0) + x. (x + (+0.0) is not one: -0 + +0 = +0.) A spec that
    says `src[i, j] * 1.0` is right, and proved, for a kernel that copies."""
    while isinstance(t, Op) and len(t.args) == 2:
        a, b = t.args
        one = [isinstance(x, Lit) and x.bits == _ONE for x in (a, b)]
        if t.name == "f32.mul" and (one[0] or one[1]):
            t = b if one[0] else a
        elif t.name == "f32.div" and one[1]:
            t = a
        elif t.name == "f32.sub" and isinstance(b, Lit) and b.bits == _PLUS_ZERO:
            t = a
        elif t.name == "f32.add" and isinstance(b, Lit) and b.bits == _MINUS_ZERO:
            t = a
        elif t.name == "f32.add" and isinstance(a, Lit) and a.bits == _MINUS_ZERO:
            t = b
        else:
            break
    return t


class Compare(SumCompare):
    def __init__(self, space: ValueSpace, out_dtype: ir.DType, outer: set[str],
                 outer_insts: list[Inst] | None = None) -> None:
        self.s = space
        self.out_dtype = out_dtype
        self.outer = outer  # coordinates fixed for one output element
        # the statements those coordinates belong to (blocks aside), when known: then an
        # order-free sum is compared path by path (semantics/value/value_paths.py)
        self.outer_insts = outer_insts

    def fail(self, why: str, where: isl.Set) -> None:
        if len(why) > 400:
            why = why[:400] + "..."
        raise NotProved(why, self.s.point(where) if not where.is_empty() else None)

    @contextmanager
    def fixed(self, writer: Inst) -> Iterator[None]:
        """Compare under one option of a resolved read: the writer's coordinates are fixed
        for one output element too (the link determines the writer from the reader), so a
        sum below must keep them rather than pin them to 0 -- pinned, the link's constraints
        on them could empty both images and make any two sums look equal."""
        saved, saved_insts = self.outer, self.outer_insts
        self.outer = saved | set(self.s.owned_dims(writer))
        if saved_insts is not None:
            self.outer_insts = saved_insts + [writer]
        try:
            yield
        finally:
            self.outer, self.outer_insts = saved, saved_insts

    def equal(self, k: Term, s: Term, ctx: isl.Set, top: bool = False) -> None:
        """Prove k == s on every point of ctx (bit-exact values). `top`: k flows unchanged
        into the output, whose store rounds to its dtype anyway (so rounding to that dtype
        on the way is the identity)."""
        if ctx.is_empty():
            return
        if top and not self.out_dtype.is_float:
            bits = 8 * self.out_dtype.nbytes
            k, s = _unwrapped(k, bits), _unwrapped(s, bits)
        if isinstance(k, Choice):
            for link, v in k.options:
                with self.fixed(link.writer):
                    self.equal(v, s, ctx & self.s.link(link), top)
            return
        if isinstance(k, Ite):
            c = self.s.cond(k.cond, k.inst)
            self.equal(k.then, s, ctx & c, top)
            self.equal(k.orelse, s, ctx & self.s.cond(negated(k.cond), k.inst), top)
            return
        if isinstance(s, Choice):  # the other side is a kernel too (`tilesafe equiv`)
            for link, v in s.options:
                with self.fixed(link.writer):
                    self.equal(k, v, ctx & self.s.link(link), top)
            return
        if isinstance(s, Ite):
            self.equal(k, s.then, ctx & self.s.cond(s.cond, s.inst), top)
            self.equal(k, s.orelse, ctx & self.s.cond(negated(s.cond), s.inst), top)
            return
        k2, s2 = _identity(k), _identity(s)
        if k2 is not k or s2 is not s:
            self.equal(k2, s2, ctx, top)
            return
        if top and isinstance(k, Round) and k.dtype is self.out_dtype:
            self.equal(k.arg, s, ctx, top)
            return
        if top and isinstance(s, Round) and s.dtype is self.out_dtype:
            self.equal(k, s.arg, ctx, top)
            return
        if isinstance(k, Round):
            inner = k.arg
            if exact_in(inner, k.dtype, self.s.k):
                self.equal(inner, s, ctx)
                return
            if isinstance(s, Round) and s.dtype is k.dtype:
                self.equal(inner, s.arg, ctx)
                return
            self.fail(f"the kernel rounds '{show(inner)}' to {k.dtype.value} where the spec "
                      f"does not", ctx)
        if isinstance(s, SpecSum):
            self.sum(k, s, ctx)
            return
        if (isinstance(s, Op) and s.name == "cvt.i32" and isinstance(s.args[0], SpecSum)
                and not s.args[0].ordered and isinstance(k, Accum)):
            # an integer accumulation (an s32 wgmma) against `i32(sum(...))` of integers
            self.sum(k, value_intsum.integer_sum(self.s, s.args[0], ctx), ctx)
            return
        if isinstance(k, Glob) and isinstance(s, Glob):
            if k.tensor != s.tensor:
                self.fail(f"the kernel moves '{k.tensor}' where the spec asks for "
                          f"'{s.tensor}'", ctx)
            for d, (a, b) in enumerate(zip(k.indices, s.indices, strict=True)):
                bad = ctx & self.s.term(a, k.inst).ne_set(self.s.term(b, s.inst))
                if not bad.is_empty():
                    self.fail(f"index {d} of '{k.tensor}' differs: the kernel reads "
                              f"{show(k)}, the spec {show(s)}", bad)
            return
        if isinstance(k, Lit) and isinstance(s, Lit):
            if k.bits != s.bits and not (k.value != k.value and s.value != s.value):
                self.fail(f"the kernel has {k.value} where the spec has {s.value}", ctx)
            return
        if isinstance(k, IntV) and isinstance(s, IntV):
            bad = ctx & self.s.term(k.expr, k.inst).ne_set(self.s.term(s.expr, s.inst))
            if not bad.is_empty():
                self.fail(f"integer {show(k)} differs from the spec's {show(s)}", bad)
            return
        if isinstance(k, Op) and isinstance(s, Op) and k.name == s.name and \
                len(k.args) == len(s.args):
            try:
                for a, b in zip(k.args, s.args, strict=True):
                    self.equal(a, b, ctx)
            except NotProved as first:
                if self.ieee_equal(k, s, ctx, top):
                    return
                if k.name not in _COMMUTATIVE:
                    raise
                # IEEE + and * are commutative (bit for bit, NaN payloads aside)
                try:
                    self.equal(k.args[0], s.args[1], ctx)
                    self.equal(k.args[1], s.args[0], ctx)
                except NotProved:
                    raise first from None
            return
        if isinstance(k, Fold):
            self.fail("a loop accumulation where the spec has no sum", ctx)
        if isinstance(k, Accum):
            self.fail("an accumulation in shared memory where the spec has no sum", ctx)
        if self.ieee_equal(k, s, ctx, top):
            return
        self.fail(f"the kernel computes {show(k)} where the spec asks for {show(s)}", ctx)

    def ieee_equal(self, k: Term, s: Term, ctx: isl.Set, top: bool) -> bool:
        """Two pointwise terms with the same bits for every input value, decided as IEEE
        arithmetic (semantics/value/value_fp.py: `x * 2.0` and `x + x`); at the top, after
        the output's rounding."""
        return value_fp.equal_by_cases(self, k, s, ctx, self.out_dtype if top else None)


_RING = ("int.add", "int.sub", "int.mul", "int.neg")


def _unwrapped(t: Term, bits: int) -> Term:
    """t with the integer wraps inside a tree of +, -, * removed where they are at least
    `bits` wide: an output stored into `bits` bits is the same modulo 2^bits whether the
    operands wrapped at 2^32 (or 2^bits) on the way or not (those operations are ring
    homomorphisms modulo 2^n). Division, min, max and comparisons stop it."""
    if isinstance(t, Round) and not t.dtype.is_float and 8 * t.dtype.nbytes >= bits:
        return _unwrapped(t.arg, bits)
    if isinstance(t, Op) and t.name in _RING:
        return Op(t.name, tuple(_unwrapped(a, bits) for a in t.args))
    if isinstance(t, Choice):
        return Choice(t.buffer, tuple((lk, _unwrapped(v, bits)) for lk, v in t.options))
    if isinstance(t, Ite):
        return Ite(t.cond, t.inst, _unwrapped(t.then, bits), _unwrapped(t.orelse, bits))
    return t
