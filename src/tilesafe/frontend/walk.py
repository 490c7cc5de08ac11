"""Traversals of the IR that every later stage needs: statements in nested bodies, the
expressions one statement evaluates, and the sub-expressions of an expression.

Kept beside the IR so that a new statement kind is taught to every stage at once.
"""

from __future__ import annotations

from collections.abc import Iterator

from tilesafe.frontend import ir


def statements(stmts: tuple[ir.Stmt, ...]) -> Iterator[ir.Stmt]:
    """Every statement, pre-order, descending into for/if/role bodies."""
    for s in stmts:
        yield s
        if isinstance(s, (ir.For, ir.Role)):
            yield from statements(s.body)
        elif isinstance(s, ir.If):
            yield from statements(s.then)
            yield from statements(s.orelse)


def own_exprs(s: ir.Stmt) -> Iterator[ir.Expr]:
    """The expressions a statement evaluates itself (not those of nested statements)."""
    if isinstance(s, (ir.Let, ir.VarDecl, ir.Assign)):
        yield s.value
    elif isinstance(s, ir.Store):
        yield from s.indices
        yield s.value
        if s.cta is not None:
            yield s.cta
    elif isinstance(s, ir.For):
        yield s.lo
        yield s.hi
    elif isinstance(s, ir.If):
        yield s.cond
    elif isinstance(s, (ir.Init, ir.Wait, ir.Arrive, ir.ExpectTx)):
        if s.barrier.index is not None:
            yield s.barrier.index
        if s.barrier.cta is not None:
            yield s.barrier.cta
        if isinstance(s, ir.Wait):
            yield s.parity
        elif isinstance(s, ir.Arrive) and s.tx_bytes is not None:
            yield s.tx_bytes
        elif isinstance(s, ir.ExpectTx):
            yield s.nbytes
    elif isinstance(s, ir.TmaLoad):
        yield from s.dst.prefix
        yield from s.coords
        if s.barrier.index is not None:
            yield s.barrier.index
        if s.multicast is not None:
            yield s.multicast
    elif isinstance(s, ir.TmaStore):
        yield from s.src.prefix
        yield from s.coords
    elif isinstance(s, ir.Wgmma):
        for tile in (s.a, s.b):
            yield from (i.start for i in tile.index)
        if s.scale_d is not None:
            yield s.scale_d
    elif isinstance(s, ir.FragStore):
        yield s.reg
        yield s.value


TENSOR_CORE = (ir.Wgmma, ir.WgmmaFence, ir.WgmmaCommit, ir.WgmmaWait, ir.SetMaxNReg,
               ir.FragStore)


def first_tensor_core(kernel: ir.Kernel) -> ir.Stmt | None:
    """The first tensor-core statement of the kernel (an MMA, its async-group statements,
    setmaxnreg, a fragment store), or one that reads a fragment; None without any: the
    stages that do not handle them yet refuse such a kernel by name."""
    for s in statements(kernel.body):
        if isinstance(s, TENSOR_CORE):
            return s
        if any(isinstance(x, ir.FragLoad) for e in own_exprs(s) for x in subexprs(e)):
            return s
    return None


def cluster_construct(kernel: ir.Kernel) -> tuple[ir.Stmt | ir.Expr, str] | None:
    """The first construct that reaches beyond the executing CTA -- a peer's shared memory
    (`part@r[i]`), a peer's barrier (`arrive full@r[s]`), a multicast TMA load, the cluster
    barrier -- with what it is; None without any. A stage that gives such constructs no
    meaning of its own refuses the kernel by naming it, rather than reading a peer's
    buffer as the CTA's own."""
    for s in statements(kernel.body):
        if isinstance(s, ir.ClusterBarrier):
            return s, "the cluster barrier"
        if isinstance(s, ir.Store) and s.cta is not None:
            return s, f"a store into a peer CTA's '{s.tensor}'"
        if isinstance(s, (ir.Arrive, ir.Wait, ir.Init, ir.ExpectTx)) and s.barrier.cta is not None:
            return s, f"an arrive on a peer CTA's '{s.barrier.name}'"
        if isinstance(s, ir.TmaLoad) and s.multicast is not None:
            return s, "a multicast TMA load"
        for e in own_exprs(s):
            for ld in loads(e):
                if ld.cta is not None:
                    return ld, f"a read of a peer CTA's '{ld.tensor}'"
    return None


def operands(e: ir.Expr) -> tuple[ir.Expr, ...]:
    """The direct sub-expressions of `e` (a load's indices, an operator's operands, a sum's
    bounds and body): the one definition of an expression's children."""
    if isinstance(e, ir.Load):
        return tuple(e.indices) + ((e.cta,) if e.cta is not None else ())
    if isinstance(e, ir.BinOp):
        return (e.lhs, e.rhs)
    if isinstance(e, ir.UnOp):
        return (e.operand,)
    if isinstance(e, ir.Call):
        return tuple(e.args)
    if isinstance(e, ir.Reduce):
        return (e.lo, e.hi, e.body)
    if isinstance(e, ir.FragLoad):
        return (e.reg,)
    return ()


def subexprs(e: ir.Expr) -> Iterator[ir.Expr]:
    """`e` and every expression inside it, pre-order (into the bodies of spec sums too)."""
    yield e
    for child in operands(e):
        yield from subexprs(child)


def loads(e: ir.Expr) -> Iterator[ir.Load]:
    """Every memory read inside `e` (an index may itself read memory)."""
    return (x for x in subexprs(e) if isinstance(x, ir.Load))


def tensor_usage(kernel: ir.Kernel) -> tuple[frozenset[str], frozenset[str]]:
    """(global tensors the body reads, global tensors it writes), by generic accesses or TMA.

    A fact about the text, not the declared roles: the resolver infers the role of an
    undeclared parameter from it, and the interpreter schedules loads of written tensors."""
    read: set[str] = set()
    written: set[str] = set()
    for s in statements(kernel.body):
        if isinstance(s, ir.Store) and s.space is ir.Space.GLOBAL:
            written.add(s.tensor)
        elif isinstance(s, ir.TmaLoad):
            read.add(kernel.tensormap(s.tensormap).tensor)
        elif isinstance(s, ir.TmaStore):
            written.add(kernel.tensormap(s.tensormap).tensor)
        for e in own_exprs(s):
            read.update(ld.tensor for ld in loads(e) if ld.space is ir.Space.GLOBAL)
    return frozenset(read), frozenset(written)
