"""Reads of index tensors as keys: which gathered value an index or a guard uses.

Why: a gather `x[ids[t], c]` is not quasi-affine, but it is affine in the value read,
`ids[t]`. The provers give every such read a coordinate of its own (an unknown the
`requires` clauses constrain, semantics/access/gather.py), so they must recognise two reads as the
same read: one tensor, the same index terms once `let`s are substituted and source
positions dropped. An index tensor is an `in` parameter of integer dtype (the resolver
checks the declaration), so two reads of one element give one value during the whole
launch -- the functional consistency the provers rely on.

Pure IR (no ISL), so semantics/expr/affine.py can use it without a cycle.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator, Mapping

from tilesafe.frontend import ir
from tilesafe.frontend.fmt import without_spans
from tilesafe.frontend.ir_text import expr_text


def is_index_tensor(kernel: ir.Kernel, name: str) -> bool:
    """An `in` global tensor of integer dtype: its reads may index global tensors."""
    t = next((p for p in kernel.params if p.name == name), None)
    return t is not None and t.role is ir.ParamRole.IN and not t.dtype.is_float


def is_index_read(kernel: ir.Kernel, e: ir.Expr) -> bool:
    return (isinstance(e, ir.Load) and e.space is ir.Space.GLOBAL
            and is_index_tensor(kernel, e.tensor))


def substitute(e: ir.Expr, lets: Mapping[int, ir.Expr] | None = None,
               loops: Mapping[int, ir.Expr] | None = None) -> ir.Expr:
    """`e` with immutable locals replaced by their bound terms (recursively) and loop
    variables by the given terms."""
    lets = lets or {}
    loops = loops or {}
    if isinstance(e, ir.LocalRef) and not e.mutable and e.uid in lets:
        return substitute(lets[e.uid], lets, loops)
    if isinstance(e, ir.LoopVar) and e.uid in loops:
        return loops[e.uid]
    if isinstance(e, ir.Load):
        return dataclasses.replace(e, indices=tuple(substitute(i, lets, loops)
                                                    for i in e.indices))
    if isinstance(e, ir.BinOp):
        return dataclasses.replace(e, lhs=substitute(e.lhs, lets, loops),
                                   rhs=substitute(e.rhs, lets, loops))
    if isinstance(e, ir.UnOp):
        return dataclasses.replace(e, operand=substitute(e.operand, lets, loops))
    if isinstance(e, ir.Call):
        return dataclasses.replace(e, args=tuple(substitute(a, lets, loops) for a in e.args))
    return e


def canonical(load: ir.Load, lets: Mapping[int, ir.Expr] | None = None) -> ir.Load:
    """The key of a read: lets substituted, no source positions."""
    out = without_spans(substitute(load, lets))
    assert isinstance(out, ir.Load)
    return out


def reads_in(e: ir.Expr) -> Iterator[ir.Load]:
    """Every load in `e`, inner reads before the read they index."""
    if isinstance(e, ir.Load):
        for i in e.indices:
            yield from reads_in(i)
        yield e
    elif isinstance(e, ir.BinOp):
        yield from reads_in(e.lhs)
        yield from reads_in(e.rhs)
    elif isinstance(e, ir.UnOp):
        yield from reads_in(e.operand)
    elif isinstance(e, ir.Call):
        for a in e.args:
            yield from reads_in(a)


def keys_in(kernel: ir.Kernel, exprs: Iterable[ir.Expr],
            lets: Mapping[int, ir.Expr] | None = None) -> list[ir.Load]:
    """The distinct index-tensor reads `exprs` use (lets substituted), inner first."""
    out: dict[ir.Load, None] = {}
    for e in exprs:
        for ld in reads_in(substitute(e, lets)):
            if is_index_read(kernel, ld):
                out.setdefault(canonical(ld), None)
    return list(out)


def show(key: ir.Load) -> str:
    """`ids[(block.x * 64) + i]`, for messages."""
    return expr_text(key)
