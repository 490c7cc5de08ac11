"""Resolving the cluster constructs: the `cluster (CX, CY, CZ)` launch clause, `cta_rank`, a
peer's shared buffer or barrier (`part@r[i]`, `full@r[s]`), multicast TMA loads and the
cluster barrier.

What the text alone decides is decided here (TS043): the clause's dims are constants whose
product is at most MAX_CLUSTER, every cluster construct sits in a kernel that has a
cluster, a CTA named by a constant is inside the cluster, a constant multicast mask names
only CTAs of the cluster, a peer's barrier is only arrived at. What depends on the sizes or
on loop variables (a peer rank or a mask computed at run time) is the checkers'.

`cta_rank` is resolved to what it is, a function of the block index: CTA (x, y, z) of a
cluster of CX x CY x CZ has rank x + CX * (y + CY * z), and its position in the cluster is
the block index modulo the cluster's dims (PTX `%cluster_ctarank`, `%cluster_ctaid`). Every
later stage then reads it without knowing about clusters; the temporal model's cluster
view folds it back to a constant per CTA (semantics/temporal/cluster_view.py).
"""

from __future__ import annotations

from tilesafe.frontend import ast, ir
from tilesafe.frontend import diagnostics as dg
from tilesafe.frontend.limits import MAX_CLUSTER
from tilesafe.frontend.resolver.base import INT, ResolverBase
from tilesafe.frontend.resolver.rules import placeholder
from tilesafe.frontend.span import Span

AXES = (ir.BuiltinKind.BLOCK_X, ir.BuiltinKind.BLOCK_Y, ir.BuiltinKind.BLOCK_Z)


class ClusterResolver(ResolverBase):
    cluster: tuple[int, int, int] | None

    def cluster_clause(self, k: ast.Kernel) -> tuple[int, int, int] | None:
        """The cluster's dims (three, padded with 1), or None without a clause."""
        if not k.cluster:
            return None
        dims = [self.const_int(e, "a cluster dimension") for e in k.cluster]
        for d, e in zip(dims, k.cluster, strict=True):
            if d < 1:
                self.error(dg.BAD_CLUSTER, f"cluster dimension {d} must be positive", e.span)
        dims = [max(1, d) for d in dims] + [1] * (3 - len(dims))
        size = dims[0] * dims[1] * dims[2]
        if size > MAX_CLUSTER:
            self.error(dg.BAD_CLUSTER, f"a cluster of {size} CTAs: at most {MAX_CLUSTER} "
                       "(the portable cluster size on sm_90)", k.cluster[0].span)
        for axis, d in enumerate(dims):
            if d > 1 and axis >= len(k.grid):
                self.error(dg.BAD_CLUSTER, f"the cluster spans {d} CTAs along "
                           f"{'xyz'[axis]} but the grid has {len(k.grid)} dimension(s)",
                           k.cluster[axis].span)
        return (dims[0], dims[1], dims[2])

    def need_cluster(self, what: str, span: Span) -> bool:
        if self.cluster is None:
            self.error(dg.BAD_CLUSTER, f"{what} needs a thread-block cluster", span,
                       "add `cluster (2, 1, 1)` (or another size) after `block`")
            return False
        return True

    def cta_rank(self, span: Span) -> ir.Expr:
        """`cta_rank`: x + CX * (y + CY * z), (x, y, z) = the block index modulo the
        cluster's dims."""
        if not self.need_cluster("'cta_rank'", span):
            return placeholder(span, INT)
        term: ir.Expr | None = None
        stride = 1
        for axis, d in enumerate(self.cluster):
            if d == 1:
                continue
            pos: ir.Expr = ir.BinOp(span, INT, "%", ir.Builtin(span, INT, AXES[axis]),
                                    ir.IntConst(span, INT, d))
            if stride != 1:
                pos = ir.BinOp(span, INT, "*", ir.IntConst(span, INT, stride), pos)
            term = pos if term is None else ir.BinOp(span, INT, "+", term, pos)
            stride *= d
        return term if term is not None else ir.IntConst(span, INT, 0)

    def cta_ref(self, e: ast.Expr | None, what: str) -> ir.Expr | None:
        """The CTA a `@r` names: an affine integer in 0 .. cluster size - 1."""
        if e is None:
            return None
        if not self.need_cluster(what, e.span):
            return None
        value = self.expr(e)
        self.require_affine(value, e.span, "a CTA rank")
        if isinstance(value, ir.IntConst) and not 0 <= value.value < self.cluster_size():
            self.error(dg.BAD_CLUSTER, f"CTA {value.value} is outside the cluster (ranks 0 .. "
                       f"{self.cluster_size() - 1})", e.span)
        return value

    def cluster_size(self) -> int:
        c = self.cluster
        return 1 if c is None else c[0] * c[1] * c[2]

    def multicast_mask(self, e: ast.Expr | None) -> ir.Expr | None:
        if e is None:
            return None
        if not self.need_cluster("a multicast TMA load", e.span):
            return None
        value = self.expr(e)
        self.require_affine(value, e.span, "a multicast CTA mask")
        full = (1 << self.cluster_size()) - 1
        if isinstance(value, ir.IntConst) and not 0 < value.value <= full:
            self.error(dg.BAD_CLUSTER, f"multicast mask {value.value} names no CTA or one "
                       f"outside the cluster (ranks 0 .. {self.cluster_size() - 1}: masks "
                       f"1 .. {full})", e.span)
        return value

    def s_ClusterBarrier(self, s: ast.ClusterBarrier) -> ir.Stmt | None:
        what = ("cluster_sync" if s.arrive and s.wait else
                "cluster_wait" if s.wait else "cluster_arrive")
        if not self.need_cluster(f"'{what}'", s.span):
            return None
        return ir.ClusterBarrier(s.span, s.arrive, s.wait, s.relaxed)

    @staticmethod
    def sem_scope(text: str | None) -> ir.Scope:
        return ir.Scope(text) if text is not None else ir.Scope.CTA
