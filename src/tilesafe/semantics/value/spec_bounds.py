"""Does an `ensures` clause read inside its tensors, for every size and every output element?

Why: a spec that reads outside an input (`ensures dst[i, j] == src[j, i]` over a non-square
`src`) has no value at most sizes, so the interpreter cannot compare against it there and the
value proof has nothing to prove: a clause like that used to end as "not proved" with the
interpreter agreeing on zero launches. It is a malformed specification, reported at lint time
(TS041) with the sizes and the element whose spec value reads outside.

Each read of the clause is a quasi-affine index in the sizes, the clause's index variables
(ranging over the output's shape) and the variables of the enclosing sums (ranging over their
bounds); the question "some index outside its extent" is one ISL emptiness test per
dimension, for every size `where` allows. A read whose index is not quasi-affine (a gather
through an index tensor) or a `where` without an exact form is not decided here (no
diagnostic): the interpreter reports such reads when it evaluates the spec.
"""

from __future__ import annotations

from dataclasses import dataclass

import islpy as isl

from tilesafe.frontend import ir, walk
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

    def describe(self, out: str) -> str:
        sizes = ", ".join(f"{k}={v}" for k, v in self.sizes.items())
        at = f"{out}[{', '.join(map(str, self.element))}]"
        idx = ", ".join(map(str, self.index))
        where = (f"{self.index[self.dim]}, its index in dimension {self.dim}, is"
                 if self.dim < len(self.index) else f"its index in dimension {self.dim} is")
        return (f"the spec of {at} reads {self.load.tensor}[{idx}] at {sizes}: {where} "
                f"outside 0 .. {self.extent}")


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
    space = make_space(ctx, kernel.sizes, tuple(names))
    loops = {v.uid: k for k, v in enumerate(spec.index_vars)}
    loops.update({r.var.uid: len(spec.index_vars) + k for k, r in enumerate(sums)})
    env = AffineEnv(space, loops)
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
        indices = [term(i, env) for i in load.indices]
        extents = [term(x, env) for x in kernel.tensor(load.tensor).shape]
    except NotAffine:
        return None
    for k, (idx, extent) in enumerate(zip(indices, extents, strict=True)):
        bad = domain & (idx.lt_set(constant(env, 0)) | idx.ge_set(extent))
        if bad.is_empty():
            continue
        return _witness(kernel, spec, load, sums, k, bad, env)
    return None


def _witness(kernel: ir.Kernel, spec: ir.Ensures, load: ir.Load, sums: tuple[ir.Reduce, ...],
             dim: int, bad: isl.Set, env: AffineEnv) -> OutsideRead:
    """A small point of `bad` (sizes bounded where possible, so the message is readable)."""
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
    bindings = dict(zip(bound_vars, coords, strict=True))
    index = tuple(_value(i, sizes, bindings) for i in load.indices)
    extent = evaluate.eval_sizes(kernel.tensor(load.tensor).shape[dim], sizes)
    return OutsideRead(load, dim, sizes, element, index, extent)


def _value(e: ir.Expr, sizes: dict[str, int], bindings: dict[int, int]) -> int:
    """An index of the spec at concrete sizes and variable values."""

    def leaf(x: ir.Expr) -> evaluate.Fn:
        if isinstance(x, ir.SizeVar):
            return lambda env: sizes[x.name]
        if isinstance(x, ir.LoopVar):
            return lambda env: bindings[x.uid]
        raise evaluate.NoValue(x)

    return int(evaluate.compile_expr(e, leaf)(None))
