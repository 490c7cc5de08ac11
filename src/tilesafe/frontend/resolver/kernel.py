"""One kernel from syntax tree to typed IR: the resolver assembled from its rule groups."""

from __future__ import annotations

from tilesafe.frontend import ast, ir, walk
from tilesafe.frontend import diagnostics as dg
from tilesafe.frontend.limits import MAX_BLOCK
from tilesafe.frontend.resolver.base import DECLS
from tilesafe.frontend.resolver.cluster import ClusterResolver
from tilesafe.frontend.resolver.decls import DeclResolver
from tilesafe.frontend.resolver.exprs import ExprResolver
from tilesafe.frontend.resolver.mma import MmaResolver
from tilesafe.frontend.resolver.requires import RequiresResolver
from tilesafe.frontend.resolver.rules import infer_roles
from tilesafe.frontend.resolver.spec import SpecResolver
from tilesafe.frontend.resolver.stmts import StmtResolver
from tilesafe.frontend.resolver.sync import SyncResolver


class KernelResolver(DeclResolver, StmtResolver, SyncResolver, MmaResolver, ClusterResolver,
                     SpecResolver, RequiresResolver, ExprResolver):
    """Declarations first (constants before shapes and the launch), then the body, then the
    `ensures` clauses (which may need the roles the body implies)."""

    def run(self) -> ir.Kernel | None:
        k = self.k
        top = k.body.stmts
        for stmt in top:  # constants first: shapes and the launch may use them
            if isinstance(stmt, ast.ConstDecl):
                self.const_decl(stmt)
        params = []
        for p in k.params:
            if self.taken(p.name) or any(q.name == p.name for q in params):
                self.error(dg.DUPLICATE_NAME, f"'{p.name}' is already defined", p.span)
                continue
            shape = tuple(self.size_expr(e, implicit=True) for e in p.shape)
            role = ir.ParamRole(p.role) if p.role is not None else ir.ParamRole.IN
            tensor = ir.GlobalTensor(p.span, p.name, ir.DType(p.dtype), shape, role,
                                     role_declared=p.role is not None)
            params.append(tensor)
            self.tensors[p.name] = tensor
        where = tuple(self.where_expr(e) for e in k.where)
        special = tuple(tuple(self.specialize_expr(e) for e in facts) for facts in k.specialize)
        grid = tuple(self.size_expr(e, implicit=False) for e in k.grid)
        self.cluster = self.cluster_clause(k)
        self.block = self.const_int(k.block_dim, "block size")
        most = min(MAX_BLOCK, self.target.max_block)
        if not 1 <= self.block <= most:
            self.error(dg.BAD_VALUE, f"block size {self.block} is not in 1..{most}",
                       k.block_dim.span)
            self.block = max(1, min(self.block, most))
        for stmt in top:
            if isinstance(stmt, ast.TensormapDecl):
                self.tensormap_decl(stmt)
            elif isinstance(stmt, ast.SharedDecl):
                self.shared_decl(stmt)
            elif isinstance(stmt, ast.MbarrierDecl):
                self.mbarrier_decl(stmt)
            elif isinstance(stmt, ast.FragmentDecl):
                self.fragment_decl(stmt)
        self.check_shared_total(k)
        with self.scope():
            body = self.stmts(tuple(s for s in top if not isinstance(s, DECLS)))
        requires = tuple(r for r in (self.requires(c) for c in k.requires) if r is not None)
        ensures = tuple(e for e in (self.ensures(c) for c in k.ensures) if e is not None)
        if self.diags:
            return None
        kernel = ir.Kernel(
            k.span, k.name, tuple(self.sizes), tuple(params), where, grid, self.block,
            tuple(self.consts.items()), tuple(self.buffers.values()),
            tuple(self.tmaps.values()), tuple(self.barriers.values()), body, ensures,
            tuple(self.fragments.values()), special, target=self.target, requires=requires,
            cluster=self.cluster,
        )
        kernel = infer_roles(kernel)
        for c in kernel.ensures:  # a tensor without a declared role: known only now
            if not kernel.tensor(c.tensor).role.written:
                self.error(dg.BAD_SPEC, f"'ensures' specifies '{c.tensor}', which the kernel "
                           "never writes", c.span)
            for load in walk.loads(c.rhs):
                if kernel.tensor(load.tensor).role is ir.ParamRole.OUT:
                    self.error(dg.BAD_SPEC, f"'ensures' reads '{load.tensor}', an 'out' "
                               "tensor: its contents before the launch are undefined",
                               load.span, "read inputs only (an 'inout' tensor's value "
                               "before the launch is allowed)")
        return None if self.diags else kernel
