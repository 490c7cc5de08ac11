"""Gathered values in the value proof: `ensures out[t, c] == x[ids[t], c] * w[t]`.

Why: the value proof (semantics/value/valueflow.py) compares the kernel's value terms with the
spec's in one ISL space (semantics/value/value_space.py), where every index must be a term.
Through an index tensor it is one once the value read is a coordinate of the space: for
every namespace (a symbolic thread, or the spec's index variables) and every read of an
index tensor that namespace can evaluate, one dim `g_n3_0` holds the value read. The facts
of semantics/access/gather.py bind them -- dtype range, *functional consistency* (two reads of one
element give one value, across namespaces: the kernel's `ids[block.x]` and the spec's
`ids[t]` are equal where `t == block.x`) and the `requires` clauses instantiated on them
(`topk[ids[p]] == be[p / 64]` links the kernel's expert table to the spec's routing). A
comparison then goes through exactly as for affine indices, for every launch the clauses
allow.

The hooks in the value proof are small: value_exec keeps an integer `let` that reads only
index tensors as a let (`is_index_term`), and ValueSpace asks this module for its extra
dims (`plan`), the map of reads to dims of one instance (`gathers`) and the facts that
restrict its base set (`facts`).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import islpy as isl

from tilesafe.frontend import ir
from tilesafe.frontend import walk as ir_walk
from tilesafe.semantics.access.gather import GatherDim, constraints
from tilesafe.semantics.access.gather_keys import is_index_read, keys_in
from tilesafe.semantics.expr.affine import AffineEnv


def is_index_term(kernel: ir.Kernel, e: ir.Expr) -> bool:
    """An integer term all of whose reads are index-tensor reads at read-free indices (a
    value the proof can name by a coordinate, not a term of loads)."""
    if e.type is not ir.ScalarType.INT:
        return False
    loads = [x for x in ir_walk.subexprs(e) if isinstance(x, (ir.Load, ir.FragLoad))]
    return bool(loads) and all(
        is_index_read(kernel, x) and not any(isinstance(y, ir.Load) for i in x.indices
                                             for y in ir_walk.subexprs(i))
        for x in loads)


@dataclass(frozen=True)
class Planned:
    """One gather dim of a value space: `name`, the namespace and kernel it belongs to,
    and the read whose value it holds."""

    name: str
    ns: int
    kernel: int
    key: ir.Load


_KEYS: dict[int, tuple[ir.Kernel, tuple[ir.Load, ...], tuple[ir.Load, ...]]] = {}


def _keys(kernel: ir.Kernel) -> tuple[tuple[ir.Load, ...], tuple[ir.Load, ...]]:
    """(the body's index reads, the specs' index reads), canonical, each once. Only reads
    in an index or a guard count: an integer input read as data (u8 operands of an MMA,
    its spec's `i32(a[i, k])`) is a value of the proof, not a coordinate."""
    hit = _KEYS.get(id(kernel))
    if hit is not None and hit[0] is kernel:
        return hit[1], hit[2]
    body: dict[ir.Load, None] = {}
    _walk(kernel, kernel.body, {}, body)
    spec: dict[ir.Load, None] = {}
    for c in kernel.ensures:
        for key in keys_in(kernel, _index_positions(c.rhs)):
            spec.setdefault(key, None)
    if len(_KEYS) > 32:
        _KEYS.clear()
    _KEYS[id(kernel)] = (kernel, tuple(body), tuple(spec))
    return tuple(body), tuple(spec)


def _index_positions(e: ir.Expr) -> Iterator[ir.Expr]:
    """The index expressions of every load in e (sums' bodies included)."""
    for child in ir_walk.operands(e):
        yield from _index_positions(child)
    if isinstance(e, ir.Load):
        yield from e.indices


def _walk(kernel: ir.Kernel, stmts: tuple[ir.Stmt, ...], lets: dict[int, ir.Expr],
          out: dict[ir.Load, None]) -> None:
    lets = dict(lets)
    for s in stmts:
        positions = [i for e in ir_walk.own_exprs(s) for i in _index_positions(e)]
        if isinstance(s, ir.Store):
            positions += list(s.indices)
        elif isinstance(s, ir.TmaLoad):  # a box at an origin read from an index tensor
            positions += list(s.coords)
        elif isinstance(s, ir.If):
            positions.append(s.cond)
        for key in keys_in(kernel, positions, lets):
            out.setdefault(key, None)
        if isinstance(s, ir.Let) and s.value.type is ir.ScalarType.INT:
            lets[s.uid] = s.value
        if isinstance(s, (ir.For, ir.Role)):
            _walk(kernel, s.body, lets, out)
        elif isinstance(s, ir.If):
            _walk(kernel, s.then, lets, out)
            _walk(kernel, s.orelse, lets, out)


def _loop_uids(key: ir.Load) -> set[int]:
    return {x.uid for x in ir_walk.subexprs(key) if isinstance(x, ir.LoopVar)}


def _uses_thread(key: ir.Load) -> bool:
    return any(isinstance(x, ir.Builtin) and x.kind in (
        ir.BuiltinKind.THREAD, ir.BuiltinKind.LANE, ir.BuiltinKind.WARP_ID)
        for x in ir_walk.subexprs(key))


def plan(kernels: tuple[ir.Kernel, ...], involved: Sequence, spec_ns: int,
         ident) -> list[Planned]:
    """The gather dims of a space over the namespaces of `involved` (value_terms.Inst):
    every index read of the body (of the spec, for the spec's namespace) whose loop
    variables the namespace has."""
    loops: dict[int, set[int]] = {}
    tag: dict[int, int] = {}
    for inst in involved:
        loops.setdefault(inst.ns, set()).update(lp.uid for lp in inst.loops)
        tag.setdefault(inst.ns, inst.kernel)
    out = []
    for ns, uids in loops.items():
        body, spec = _keys(kernels[tag[ns]])
        keys = spec if ns == spec_ns else body
        for k, key in enumerate(keys):
            if not _loop_uids(key) <= uids or (ns == spec_ns and _uses_thread(key)):
                continue
            out.append(Planned(f"g_n{ident(ns)}_{k}", ns, tag[ns], key))
    return out


def gathers(planned: Sequence[Planned], pos: dict[str, int], ns: int) -> dict[ir.Load, int]:
    """read -> dim, for the instances of namespace `ns`."""
    return {p.key: pos[p.name] for p in planned if p.ns == ns}


def facts(space, planned: Sequence[Planned], within: isl.Set | None = None) -> isl.Set:
    """The facts about every gather dim of a ValueSpace (semantics/access/gather.py), per
    kernel: dtype ranges, functional consistency and the universal clauses; not the
    two-point predicates (injective, permutation, sorted). What they give -- one writer per
    element of a scatter -- is the access checker's exactly-once, which the value proof
    relies on anyway (checkers/value.py), and their instances over every pair of reads of
    a tensor in every namespace multiply the pieces of the space past ISL's budget (a
    grouped GEMM reads its routing in three places). With `within`, the facts inside it
    (constraints() prunes the pieces as it goes)."""
    out = isl.Set.universe(space.space) if within is None else within
    for tag, kernel in enumerate(space.kernels):
        dims = [GatherDim(space.pos[p.name], p.key, _env(space, p)) for p in planned
                if p.kernel == tag]
        if dims:
            out = constraints(kernel, out, dims, predicates=False)
    return out


def _env(space, p: Planned) -> AffineEnv:
    """An env over the value space giving the leaves of `p.key` in its namespace."""
    from tilesafe.semantics.value.value_space import block_dim, thread_dim
    from tilesafe.semantics.value.value_terms import Inst

    probe = Inst(p.ns, 0, 1, False, (), ())
    loops = {}
    for uid in _loop_uids(p.key):
        name = space.loop_name(probe, uid)
        if name in space.pos:
            loops[uid] = space.pos[name]
    grid = space.kernels[p.kernel].grid
    blocks = tuple(space.pos[block_dim(p.kernel, i)] for i in range(len(grid)))
    tname = thread_dim(probe)
    thread = space.pos.get(tname) if tname in space.pos else None
    return AffineEnv(space.space, loops, blocks, thread, {},
                     gathers(space.gather_plan, space.pos, p.ns))
