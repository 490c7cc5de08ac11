"""The parser's rules for synchronisation, copies, clusters and tensor cores: mbarrier
and named-barrier statements, TMA loads and stores, the cluster barrier, fragments and
wgmma (frontend/parser.py's `_ToAst` has the rest).

Why a module of its own: these rules grow with every instruction family, and the
transformer of the whole grammar had grown past what one can read at once. Lark applies
`v_args` to the methods a class defines itself, so this class carries its own decorator.
"""

from __future__ import annotations

from lark import Token, Transformer, v_args

from tilesafe.frontend import ast
from tilesafe.frontend.span import Span


def exprs(items: list) -> tuple:
    return tuple(i for i in items if isinstance(i, ast.Expr))


@v_args(meta=True)
class SyncRules(Transformer):
    """One method per grammar rule, as in `_ToAst`; `_s` (a node's span) and `_int` (a
    checked integer literal) are the subclass's."""

    def _s(self, meta: object) -> Span:
        raise NotImplementedError

    def _int(self, tok: Token) -> int:
        raise NotImplementedError

    # synchronisation
    def bar_ref(self, meta, items):
        return ast.BarRef(self._s(meta), str(items[0]), items[2], items[1])

    def buf_ref(self, meta, items):
        return ast.BufRef(self._s(meta), str(items[0]), exprs(items[1:]))

    def init_stmt(self, meta, items):
        return ast.Init(self._s(meta), items[0])

    def fence_stmt(self, meta, items):
        return ast.Fence(self._s(meta), str(items[0]))

    def sync_stmt(self, meta, items):
        return ast.Sync(self._s(meta))

    def wait_stmt(self, meta, items):
        scope, relaxed = None, False
        for kind, value in items[2:]:
            if kind == "scope":
                scope = value
            else:
                relaxed = True
        return ast.Wait(self._s(meta), items[0], items[1], scope, relaxed)

    def arrive_stmt(self, meta, items):
        mode, tx, scope, relaxed = "each", None, None, False
        for kind, value in items[1:]:
            if kind == "tx":
                tx = value
            elif kind == "scope":
                scope = value
            elif kind == "relaxed":
                relaxed = True
            else:
                mode = kind
        return ast.Arrive(self._s(meta), items[0], mode, tx, scope, relaxed)

    def sem_scope(self, meta, items):
        return ("scope", str(items[0]))

    def sem_relaxed(self, meta, items):
        return ("relaxed", None)

    def arrive_one(self, meta, items):
        return ("one", None)

    def arrive_per_warp(self, meta, items):
        return ("per_warp", None)

    def arrive_tx(self, meta, items):
        return ("tx", items[0])

    def expect_tx_stmt(self, meta, items):
        return ast.ExpectTx(self._s(meta), items[0], items[1])

    def tma_load_stmt(self, meta, items):
        dst, tmap, *rest = items
        multicast = rest.pop()
        return ast.TmaLoad(self._s(meta), dst, str(tmap), tuple(rest[:-1]), rest[-1],
                           multicast)

    def cluster_sync(self, meta, items):
        return ast.ClusterBarrier(self._s(meta), True, True)

    def cluster_arrive(self, meta, items):
        return ast.ClusterBarrier(self._s(meta), True, False)

    def cluster_arrive_relaxed(self, meta, items):
        return ast.ClusterBarrier(self._s(meta), True, False, True)

    def cluster_wait(self, meta, items):
        return ast.ClusterBarrier(self._s(meta), False, True)

    def tma_store_stmt(self, meta, items):
        tmap, *rest = items
        return ast.TmaStore(self._s(meta), str(tmap), tuple(rest[:-1]), rest[-1])

    def commit_stmt(self, meta, items):
        return ast.CommitGroup(self._s(meta))

    def bar_sync_stmt(self, meta, items):
        return ast.NamedBar(self._s(meta), False, items[0], items[1])

    def bar_arrive_stmt(self, meta, items):
        return ast.NamedBar(self._s(meta), True, items[0], items[1])

    def fragment_decl(self, meta, items):
        name, dtype, *shape = items
        return ast.FragmentDecl(self._s(meta), str(name), str(dtype), tuple(shape))

    def tile_point(self, meta, items):
        return ast.TileIndex(self._s(meta), items[0], None)

    def tile_range(self, meta, items):
        return ast.TileIndex(self._s(meta), items[0], items[1])

    def mma_tile(self, meta, items):
        name, *rest = items
        transposed = bool(rest) and isinstance(rest[-1], Token) and rest[-1].type == "TRANSPOSE"
        index = tuple(i for i in rest if isinstance(i, ast.TileIndex))
        return ast.MmaTile(self._s(meta), str(name), index, transposed)

    def wgmma_stmt(self, meta, items):
        acc, op, a, b, *rest = items
        scale = rest[0] if rest else None
        return ast.Wgmma(self._s(meta), str(acc), str(op), a, b, scale)

    def wgmma_fence_stmt(self, meta, items):
        return ast.WgmmaFence(self._s(meta))

    def wgmma_commit_stmt(self, meta, items):
        return ast.WgmmaCommit(self._s(meta))

    def wgmma_wait_stmt(self, meta, items):
        return ast.WgmmaWait(self._s(meta), self._int(items[0]))

    def setmaxnreg_stmt(self, meta, items):
        return ast.SetMaxNReg(self._s(meta), str(items[0]) == "inc", self._int(items[1]))

    def wait_group_stmt(self, meta, items):
        read = len(items) > 1 and items[1] is not None
        return ast.WaitGroup(self._s(meta), self._int(items[0]), read)
