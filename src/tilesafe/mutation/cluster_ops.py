"""Mutation operators of thread-block clusters: the slips behind the real-world cluster bugs
(docs/language.md §14, docs/temporal.md §16).

Each edit is one of the mistakes the four reported bugs were made of, or the nearest
slip of the same kind:

* `cluster.scope`: a cluster-scope arrive or wait written without `scope cluster` (CUTLASS
  #3643: a remote arrive at CTA scope; #3324: the leader's wait at CTA scope);
* `cluster.relaxed`: a cluster-scope arrive or wait, or a split `cluster_arrive`, made
  `relaxed` (SGLang #38829: a relaxed arrive published no DSMEM writes);
* `cluster.cta-sync`: a `cluster_sync` written as the CTA's `sync` (SGLang #32907's class:
  nothing keeps a peer alive, or a peer's barrier is used before it is initialised);
* `cluster.local`: a peer's buffer or barrier (`part@1[0]`, `arrive full@r[s]`) replaced by
  the CTA's own (the `@r` forgotten);
* `cluster.unicast`: a multicast TMA load made a plain one (the peers' copies never fill).

A deleted `cluster_sync` is `delete.cluster_barrier` (operators.py); a rank or mask off by
one is `int.rank` / `int.mask`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

from tilesafe.frontend import ast
from tilesafe.mutation.sites import Site


def op_cluster(site: Site) -> Iterator:
    from tilesafe.mutation.operators import Edit, stmt_head

    node = site.node

    def edit(slug: str, new: object) -> Edit:
        return Edit(f"cluster.{slug}", slug, f"`{stmt_head(node)}` -> `{stmt_head(new)}`",
                    new, None, stmt_head(node), stmt_head(new))

    if isinstance(node, (ast.Arrive, ast.Wait)):
        if node.scope == "cluster":
            yield edit("scope", dataclasses.replace(node, scope=None))
        if not node.relaxed and (node.scope == "cluster" or node.barrier.cta is not None):
            yield edit("relaxed", dataclasses.replace(node, relaxed=True))
        if node.barrier.cta is not None:
            yield edit("local", dataclasses.replace(
                node, barrier=dataclasses.replace(node.barrier, cta=None)))
    elif isinstance(node, ast.ClusterBarrier):
        if node.arrive and node.wait:
            yield edit("cta-sync", ast.Sync(node.span))
        elif node.arrive and not node.relaxed:
            yield edit("relaxed", dataclasses.replace(node, relaxed=True))
    elif isinstance(node, ast.Store) and node.cta is not None:
        yield edit("local", dataclasses.replace(node, cta=None))
    elif isinstance(node, ast.TmaLoad) and node.multicast is not None:
        yield edit("unicast", dataclasses.replace(node, multicast=None))
    elif isinstance(node, ast.Index) and node.cta is not None:
        new = dataclasses.replace(node, cta=None)
        yield Edit("cluster.local", "local", f"`{_expr(node)}` -> `{_expr(new)}`", new)


def _expr(e: ast.Expr) -> str:
    from tilesafe.frontend.fmt import format_expr

    return format_expr(e)
