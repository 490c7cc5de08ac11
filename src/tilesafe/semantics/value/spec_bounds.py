"""Does an `ensures` clause read inside its tensors, for every size and every output element?

Why: a spec that reads outside an input (`ensures dst[i, j] == src[j, i]` over a non-square
`src`) has no value at most sizes, so the interpreter cannot compare against it there and the
value proof has nothing to prove: a clause like that used to end as "not proved" with the
interpreter agreeing on zero launches. It is a malformed specification, reported at lint time
(TS041) with the sizes and the element whose spec value reads outside.

Each read of the clause is a quasi-affine index in the sizes, the clause's index variables
(ranging over the output's shape) and the variables of the enclosing sums (ranging over their
bounds); the question "some index outside its extent" is one ISL emptiness test per
dimension, for every size `where` allows. A read through an index tensor (`table[ids[t],
c]`) is affine in the value read: that value is one more coordinate, constrained by the
kernel's `requires` clauses (semantics/access/gather.py), so a clause that allows a
sentinel the spec then reads through (`ids[t] == -1 || ...`) is found too; such a witness
is kept only once index-tensor contents with that value are drawn that satisfy every
clause (semantics/access/requires_synth.py), so the diagnostic never rests on data no
launch may pass. A `where` without an exact form, or a read not affine even in the values
read, is not decided here (no diagnostic).
"""

from __future__ import annotations

from dataclasses import dataclass

import islpy as isl

from tilesafe.frontend import ir, walk
from tilesafe.semantics.access.gather import GatherDim, constraints
from tilesafe.semantics.access.gather_keys import canonical, keys_in
from tilesafe.semantics.expr import evaluate
from tilesafe.semantics.expr.affine import (
    AffineEnv,
    NotAffine,
    condition,
    constant,
    make_space,
    term,
)

# ISL operations per clause: these sets are small (a few dims), far below this.
MAX_OPERATIONS = 2_000_000


@dataclass(frozen=True)
class OutsideRead:
    """A read of the spec outside its tensor: the load, the dimension, and a witness."""

    load: ir.Load
    dim: int
    sizes: dict[str, int]
    element: tuple[int, ...]  # the output element whose spec value performs the read
    index: tuple[int, ...]  # the index read (the coordinates that are known)
    extent: int
    reads: tuple[str, ...] = ()  # the index-tensor values it read through (`ids[0] = -1`)

    def describe(self, out: str) -> str:
        sizes = ", ".join(f"{k}={v}" for k, v in self.sizes.items())
        at = f"{out}[{', '.join(map(str, self.element))}]"
        idx = ", ".join(map(str, self.index))
        where = (f"{self.index[self.dim]}, its index in dimension {self.dim}, is"
                 if self.dim < len(self.index) else f"its index in dimension {self.dim} is")
        through = (f" (reading {', '.join(self.reads)}, which the `requires` clauses allow)"
                   if self.reads else "")
        return (f"the spec of {at} reads {self.load.tensor}[{idx}] at {sizes}{through}: "
                f"{where} outside 0 .. {self.extent}")


def outside_reads(kernel: ir.Kernel, spec: ir.Ensures) -> list[OutsideRead]:
    """One OutsideRead per load of `spec` that leaves its tensor for some allowed size."""
    ctx = isl.Context()
    ctx.set_max_operations(MAX_OPERATIONS)
    found = []
    try:
        for load, scope in _loads_with_scope(spec.rhs, ()):
            if load.space is not ir.Space.GLOBAL:
                continue
            hit = _outside(kernel, spec, load, scope, ctx)
            if hit is not None:
                found.append(hit)
    except isl.Error:
        return found  # budget: undecided reads get no diagnostic
    return found


def _loads_with_scope(e: ir.Expr, sums: tuple[ir.Reduce, ...]
                      ) -> list[tuple[ir.Load, tuple[ir.Reduce, ...]]]:
    """Every load of e with the sums that enclose it (outermost first)."""
    if isinstance(e, ir.Reduce):
        inner = (*sums, e)
        return (_loads_with_scope(e.lo, sums) + _loads_with_scope(e.hi, sums)
                + _loads_with_scope(e.body, inner))
    out = []
    if isinstance(e, ir.Load):
        out.append((e, sums))
    for child in walk.operands(e):
        out.extend(_loads_with_scope(child, sums))
    return out


def _outside(kernel: ir.Kernel, spec: ir.Ensures, load: ir.Load,
             sums: tuple[ir.Reduce, ...], ctx: isl.Context) -> OutsideRead | None:
    names = [f"i{k}" for k in range(len(spec.index_vars))] + [f"s{k}" for k in range(len(sums))]
    keys = keys_in(kernel, load.indices)
    space = make_space(ctx, kernel.sizes, tuple(names) + tuple(
        f"g{k}" for k in range(len(keys))))
    loops = {v.uid: k for k, v in enumerate(spec.index_vars)}
    loops.update({r.var.uid: len(spec.index_vars) + k for k, r in enumerate(sums)})
    env = AffineEnv(space, loops, gathers={key: len(names) + k for k, key in enumerate(keys)})
    try:
        domain = env.universe()
        for w in kernel.where:
            c = condition(w, env)
            if not c.exact:
                return None
            domain = domain & c.over
        out = kernel.tensor(spec.tensor)
        for k, extent in enumerate(out.shape):
            v = isl.PwAff.var_on_domain(env.local_space(), isl.dim_type.set, k)
            domain = domain & v.ge_set(constant(env, 0)) & v.lt_set(term(extent, env))
        for k, r in enumerate(sums):
            v = isl.PwAff.var_on_domain(env.local_space(), isl.dim_type.set,
                                        len(spec.index_vars) + k)
            domain = domain & v.ge_set(term(r.lo, env)) & v.lt_set(term(r.hi, env))
        if keys:
            domain = constraints(kernel, domain, [GatherDim(env.gathers[key], key, env)
                                                  for key in keys])
        indices = [term(i, env) for i in load.indices]
        extents = [term(x, env) for x in kernel.tensor(load.tensor).shape]
    except NotAffine:
        return None
    for k, (idx, extent) in enumerate(zip(indices, extents, strict=True)):
        bad = domain & (idx.lt_set(constant(env, 0)) | idx.ge_set(extent))
        if bad.is_empty():
            continue
        hit = _witness(kernel, spec, load, sums, k, bad, env, keys)
        if hit is not None:
            return hit
    return None


def _witness(kernel: ir.Kernel, spec: ir.Ensures, load: ir.Load, sums: tuple[ir.Reduce, ...],
             dim: int, bad: isl.Set, env: AffineEnv, keys: list[ir.Load]
             ) -> OutsideRead | None:
    """A small point of `bad` (sizes bounded where possible, so the message is readable);
    with reads through index tensors, None unless contents with the point's values that
    satisfy every `requires` clause exist."""
    for bound in (64, 256, 4096, 1 << 20):
        small = bad
        for i in range(len(kernel.sizes)):
            p = isl.PwAff.var_on_domain(env.local_space(), isl.dim_type.param, i)
            small = small & p.le_set(constant(env, bound))
        if not small.is_empty():
            bad = small
            break
    point = bad.lexmin().sample_point()
    sizes = {n: int(point.get_coordinate_val(isl.dim_type.param, i).to_python())
             for i, n in enumerate(kernel.sizes)}
    coords = [int(point.get_coordinate_val(isl.dim_type.set, i).to_python())
              for i in range(bad.dim(isl.dim_type.set))]
    element = tuple(coords[:len(spec.index_vars)])
    bound_vars = [v.uid for v in spec.index_vars] + [r.var.uid for r in sums]
    bindings = dict(zip(bound_vars, coords[:len(bound_vars)], strict=True))
    values = {key: coords[env.gathers[key]] for key in keys}
    index = tuple(_value(i, sizes, bindings, values) for i in load.indices)
    extent = evaluate.eval_sizes(kernel.tensor(load.tensor).shape[dim], sizes)
    reads: list[str] = []
    if keys:
        fixed: dict[str, dict[tuple[int, ...], int]] = {}
        for key, v in values.items():
            at = tuple(_value(i, sizes, bindings, values) for i in key.indices)
            fixed.setdefault(key.tensor, {})[at] = v
            reads.append(f"{key.tensor}[{', '.join(map(str, at))}] = {v}")
        if not _realisable(kernel, sizes, fixed):
            return None
    return OutsideRead(load, dim, sizes, element, index, extent, tuple(reads))


def _realisable(kernel: ir.Kernel, sizes: dict[str, int],
                fixed: dict[str, dict[tuple[int, ...], int]]) -> bool:
    """Index-tensor contents holding `fixed` that satisfy every `requires` clause exist."""
    import numpy as np

    from tilesafe.semantics.access import requires_synth
    from tilesafe.semantics.interpreter.interp_error import InterpError
    from tilesafe.semantics.interpreter.interp_io import tensor_shapes

    try:
        shapes = tensor_shapes(kernel, sizes)
        requires_synth.draw(kernel, sizes, shapes, np.random.default_rng(0), fixed)
    except (requires_synth.NoSolution, InterpError, KeyError):
        return False
    return True


def _value(e: ir.Expr, sizes: dict[str, int], bindings: dict[int, int],
           values: dict[ir.Load, int] | None = None) -> int:
    """An index of the spec at concrete sizes, variable values and values read."""

    def leaf(x: ir.Expr) -> evaluate.Fn:
        if isinstance(x, ir.SizeVar):
            return lambda env: sizes[x.name]
        if isinstance(x, ir.LoopVar):
            return lambda env: bindings[x.uid]
        if isinstance(x, ir.Load) and values and canonical(x) in values:
            v = values[canonical(x)]
            return lambda env: v
        raise evaluate.NoValue(x)

    return int(evaluate.compile_expr(e, leaf)(None))
