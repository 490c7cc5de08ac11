"""The cluster constructs in the frontend (docs/language.md, section 14): they parse, format
to a fixed point, resolve to the IR the later stages read, and every misuse the text shows
is TS043 at the construct."""

from __future__ import annotations

import pytest

from tilesafe.frontend import ir
from tilesafe.frontend.diagnostics import DiagnosticError
from tilesafe.frontend.fmt import format_source
from tilesafe.frontend.load import compile_source
from tilesafe.frontend.walk import cluster_construct, statements

HEAD = """kernel k(x: in global f32[N], y: out global f32[N])
  where N % 256 == 0, N > 0, N <= 1048576
  grid (N / 128) block 128 cluster (2, 1, 1)
{
  shared part: f32[128]
  mbarrier ready count 1
  mbarrier full[2] count 1 guards part
"""


def src(body: str, head: str = HEAD) -> str:
    return head + "".join(f"  {line}\n" for line in body.splitlines()) + "}\n"


def resolve(text: str) -> ir.Kernel:
    return compile_source(text, "c.tsk").kernels[0]


def codes(text: str) -> list[tuple[str, int, int]]:
    with pytest.raises(DiagnosticError) as err:
        resolve(text)
    return [(d.code, d.span.line, d.span.col) for d in err.value.diagnostics]


def test_every_construct_resolves():
    k = resolve(src("part@(1 - cta_rank)[thread] = x[block.x * 128 + thread]\n"
                    "arrive ready@0, one, scope cluster\n"
                    "arrive full@1[0], relaxed\n"
                    "wait ready parity 0, scope cluster\n"
                    "cluster_arrive relaxed\ncluster_wait\ncluster_sync\n"
                    "y[block.x * 128 + thread] = part@0[thread] + part[thread]"))
    assert k.cluster == (2, 1, 1) and k.cluster_size == 2
    body = list(statements(k.body))
    store = body[0]
    assert isinstance(store, ir.Store) and store.cta is not None
    # cta_rank is the block index modulo the cluster: 1 - block.x % 2
    assert "block.x % 2" in repr(store.cta).replace("'", "") or store.cta.rhs.op == "%"
    a1, a2, w = body[1], body[2], body[3]
    assert a1.barrier.cta.value == 0 and a1.scope is ir.Scope.CLUSTER and not a1.relaxed
    assert a2.barrier.cta.value == 1 and a2.relaxed and a2.scope is ir.Scope.CTA
    assert w.scope is ir.Scope.CLUSTER
    cb = [s for s in body if isinstance(s, ir.ClusterBarrier)]
    assert [(c.arrive, c.wait, c.relaxed) for c in cb] == [
        (True, False, True), (False, True, False), (True, True, False)]
    load = body[-1].value.lhs
    assert load.cta.value == 0 and body[-1].value.rhs.cta is None
    assert cluster_construct(k) is not None


def test_cta_rank_in_block_indices():
    """Rank x + CX * y of CTA (x, y) in a 2 x 2 cluster, as the block index says."""
    head = HEAD.replace("grid (N / 128) block 128 cluster (2, 1, 1)",
                        "grid (N / 128, 2) block 128 cluster (2, 2)")
    k = resolve(src("let r = cta_rank\ny[block.x * 128 + thread] = f32(r)", head))
    from tilesafe.semantics.expr import evaluate

    let = k.body[0]
    f = evaluate.compile_expr(let.value, lambda leaf: (lambda env: env[leaf.kind.value]))
    for bx in range(4):
        for by in range(2):
            assert f({"block.x": bx, "block.y": by}) == bx % 2 + 2 * (by % 2)
    assert k.cluster == (2, 2, 1)


def test_multicast_and_fmt_fixed_point():
    head = HEAD.replace("  shared part", "  tensormap tx = tiled(x, box [128])\n  shared part")
    text = src("if thread == 0 {\n  init full\n  fence mbarrier_init\n}\ncluster_sync\n"
               "if thread == 0 && cta_rank == 0 {\n"
               "  arrive full[0], expect_tx bytes(part)\n"
               "  tma_load part <- tx[block.x * 128] signal full[0], multicast 3\n}\n"
               "wait full[0] parity 0\ny[block.x * 128 + thread] = part[thread]", head)
    k = resolve(text)
    tma = next(s for s in statements(k.body) if isinstance(s, ir.TmaLoad))
    assert tma.multicast.value == 3
    once = format_source(text, "c.tsk")
    assert format_source(once, "c.tsk") == once
    assert "cluster (2, 1, 1)" in once and "multicast 3" in once


@pytest.mark.parametrize(("body", "head", "where"), [
    ("cluster_sync", HEAD.replace(" cluster (2, 1, 1)", ""), (8, 3)),
    ("let a = cta_rank", HEAD.replace(" cluster (2, 1, 1)", ""), (8, 11)),
    ("arrive ready@2, scope cluster", HEAD, (8, 16)),
    ("wait ready@1 parity 0", HEAD, (8, 14)),
    ("init full@1[0]", HEAD, (8, 13)),
    ("y@1[0] = 1.0", HEAD, (8, 5)),
    ("let v = part@(0 - 1)[0]", HEAD, (8, 17)),
    ("sync", HEAD.replace("cluster (2, 1, 1)", "cluster (4, 4)"), (3, 37)),
    ("sync", HEAD.replace("cluster (2, 1, 1)", "cluster (1, 2)"), (3, 40)),
])
def test_ts043(body: str, head: str, where: tuple[int, int]):
    assert ("TS043",) + where in codes(src(body, head))


def test_multicast_mask_outside_the_cluster():
    head = HEAD.replace("  shared part", "  tensormap tx = tiled(x, box [128])\n  shared part")
    found = codes(src("tma_load part <- tx[0] signal ready, multicast 4", head))
    assert [c for c, *_ in found] == ["TS043"]


def test_peer_rank_must_be_affine():
    found = codes(src("let v = part@(cta_rank * cta_rank)[0]"))
    assert [c for c, *_ in found] == ["TS023"]


def test_amd_refuses_every_cluster_construct():
    """gfx942 has no clusters: the clause, a peer's memory and the cluster barrier are
    TS036, each where it is."""
    text = src("cluster_sync\nlet v = part@1[0]\npart@0[thread] = 1.0\nsync")
    with pytest.raises(DiagnosticError) as err:
        compile_source(text, "c.tsk", "gfx942")
    found = [(d.code, d.span.line) for d in err.value.diagnostics]
    assert {c for c, _ in found} == {"TS036"}
    assert {1, 8, 9, 10} <= {line for _, line in found}, found
