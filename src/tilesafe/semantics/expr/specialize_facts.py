"""What a kernel's `where` (with a variant's facts added) decides about its own terms: which
size expressions are constants, which guards always or never hold where they run.

Why a module of its own: frontend/specialize.py rewrites a variant's IR (folds constants,
drops guards that became always true), but whether a rewrite is exact is a Presburger
question over every launch `where` allows and every statement instance (block, thread,
loop iterations), answered here with ISL -- the rewrite only acts on a "yes". A question
ISL cannot pose exactly (a guard that reads memory or a mutable variable, a loop bound
without an affine form) is answered "no", so the rewrite leaves that term alone.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import islpy as isl

from tilesafe.frontend import ir
from tilesafe.semantics.access.access import instance_dims, where_sets
from tilesafe.semantics.expr.affine import (
    AffineEnv,
    NotAffine,
    bounds,
    condition,
    constant,
    make_space,
    term,
)

_ISL_WORDS = frozenset({"and", "or", "not", "mod", "floor", "ceil", "min", "max", "exists"})


@dataclass(frozen=True)
class InstanceScope:
    """What encloses a statement: its loops (outermost first), the integer `let`s in scope,
    its role and the guards (condition, taken branch) it sits under."""

    loops: tuple[ir.For, ...] = ()
    lets: Mapping[int, ir.Expr] = field(default_factory=dict)
    role: ir.Role | None = None
    guards: tuple[tuple[ir.Expr, bool], ...] = ()


class SizeFacts:
    """ISL answers about one kernel, whose `where` already holds the variant's facts."""

    def __init__(self, kernel: ir.Kernel) -> None:
        self.kernel = kernel
        self.ctx = isl.Context()
        env = AffineEnv(make_space(self.ctx, kernel.sizes, ()))
        sets = where_sets(kernel, env)
        # `where` is Presburger (the resolver insists), so over == under; the over set is
        # the sound one for "always" questions should that ever change.
        self.params = sets.over.params()

    @property
    def empty(self) -> bool:
        """No launch satisfies `where` (a variant whose facts contradict it)."""
        return bool(self.params.is_empty())

    def constant(self, e: ir.Expr) -> int | None:
        """The value of a size-only integer term when it is the same for every launch
        `where` allows (None otherwise, or when the term has no ISL form)."""
        if self.empty:
            return None
        env = AffineEnv(make_space(self.ctx, self.kernel.sizes, ()))
        try:
            pa = term(e, env).intersect_params(self.params)
        except NotAffine:
            return None
        lo, hi = bounds(pa)
        if not (lo.is_int() and hi.is_int()) or lo.to_python() != hi.to_python():
            return None
        return int(lo.to_python())

    def guard(self, cond: ir.Expr, scope: InstanceScope) -> bool | None:
        """True when `cond` holds at every instance of a statement in `scope`, False when
        at none, None when it depends (or cannot be decided exactly)."""
        try:
            env, domain = self._domain(scope)
        except NotAffine:
            return None
        sets = condition(cond, env)
        if not sets.exact:
            return None
        if domain.is_subset(sets.under):
            return True
        if domain.intersect(sets.over).is_empty():
            return False
        return None

    def _domain(self, scope: InstanceScope) -> tuple[AffineEnv, isl.Set]:
        """An over-approximation of the statement's instances: `where`, the grid, the
        role's threads, the loop ranges and the enclosing guards (a guard or bound without
        an exact form is dropped, which only enlarges the set)."""
        k = self.kernel
        dims = list(instance_dims(k))
        loops: dict[int, int] = {}
        for loop in scope.loops:
            name = loop.var.name
            if name in dims or name in k.sizes or name in _ISL_WORDS:
                name = f"{name}_{loop.var.uid}"
            loops[loop.var.uid] = len(dims)
            dims.append(name)
        nblocks = len(k.grid)
        env = AffineEnv(make_space(self.ctx, k.sizes, tuple(dims)), loops,
                        tuple(range(nblocks)), nblocks, scope.lets)
        ls = env.local_space()
        zero = constant(env, 0)
        dom = where_sets(k, env).over
        for axis in range(nblocks):
            b = isl.PwAff.var_on_domain(ls, isl.dim_type.set, axis)
            dom = dom.intersect(b.ge_set(zero))
            try:
                dom = dom.intersect(b.lt_set(term(k.grid[axis], env)))
            except NotAffine:
                pass
        lo, hi = 0, k.block
        if scope.role is not None:
            lo, hi = scope.role.threads.lo, scope.role.threads.hi
            if scope.role.elect_one:
                hi = lo + 1
        t = isl.PwAff.var_on_domain(ls, isl.dim_type.set, nblocks)
        dom = dom.intersect(t.ge_set(constant(env, lo))).intersect(t.lt_set(constant(env, hi)))
        for loop in scope.loops:
            v = isl.PwAff.var_on_domain(ls, isl.dim_type.set, loops[loop.var.uid])
            try:
                start = term(loop.lo, env)
                dom = dom.intersect(v.ge_set(start)).intersect(v.lt_set(term(loop.hi, env)))
                if loop.step > 1:
                    step = isl.Val.int_from_si(self.ctx, loop.step)
                    dom = dom.intersect(v.sub(start).mod_val(step).eq_set(zero))
            except NotAffine:
                pass
        for cond, positive in scope.guards:
            sets = condition(cond, env)
            dom = dom.intersect(sets.over if positive else sets.negate().over)
        return env, dom
