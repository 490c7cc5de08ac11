"""`ensures` through an index (semantics/value/value_gather.py): the value proof compares the
kernel's gathered reads with the spec's through coordinates holding the values read,
consistent across the kernel's threads and the spec's index variables, and constrained by
the `requires` clauses (a segment table linking the kernel's block -> expert map to the
spec's routing)."""

from __future__ import annotations

import pytest

from tilesafe.frontend.load import compile_source
from tilesafe.semantics.value import valueflow
from tilesafe.semantics.value.value_space import NotProved


def kernel(text: str):
    return compile_source(text, "v.tsk").kernels[0]


GATHER = """kernel g(x: in global f32[M, H], ids: in global i32[T], w: in global f32[T],
          out: out global f32[T, H])
  where M > 0, M <= 4096, T > 0, T <= 4096, H % 32 == 0, H > 0, H <= 4096
  grid (T, H / 32) block 32
  requires 0 <= ids[t] && ids[t] < M
  ensures out[t, c] == x[ids[t], c] * w[t]
{{
  let r = ids[block.x]
  let c = block.y * 32 + thread
  out[block.x, c] = {value}
}}
"""


def test_gather_times_weight_is_proved():
    assert valueflow.prove(kernel(GATHER.format(value="x[r, c] * w[block.x]")),
                           kernel(GATHER.format(value="x[r, c] * w[block.x]")).ensures[0])


@pytest.mark.parametrize("value", [
    "x[r, c] * w[r]",  # the weight of the row read, not of the token
    "x[block.x, c] * w[block.x]",  # no gather at all
    "x[ids[min(block.x + 1, T - 1)], c] * w[block.x]",  # the neighbour's row
    "w[block.x] * x[r, c] + 0.0",
])
def test_wrong_gathers_are_not_proved(value: str):
    k = kernel(GATHER.format(value=value).replace("T > 0,", "T > 1, M == T,"))
    with pytest.raises(NotProved):
        valueflow.prove(k, k.ensures[0])


SCATTER = """kernel s(x: in global f32[T, H], ids: in global i32[TK], tw: in global f32[TK],
          y: out global f32[TK, H])
  where T > 0, T <= 4096, TK == 2 * T, H % 32 == 0, H > 0, H <= 4096
  grid (TK, H / 32) block 32
  requires permutation(p in 0 .. TK: ids[p])
  requires 0 <= ids[p] && ids[p] < TK
  ensures y[r, c] == x[r / 2, c] * tw[r]
{{
  let r = ids[block.x]
  let c = block.y * 32 + thread
  y[r, c] = {value}
}}
"""


def test_weighted_scatter_is_proved():
    k = kernel(SCATTER.format(value="x[r / 2, c] * tw[r]"))
    valueflow.prove(k, k.ensures[0])


def test_scatter_reading_the_position_not_the_token_is_not_proved():
    k = kernel(SCATTER.format(value="x[block.x / 2, c] * tw[r]"))
    with pytest.raises(NotProved):
        valueflow.prove(k, k.ensures[0])


SEGMENTS = """kernel e(x: in global f32[T, H], ids: in global i32[P], be: in global i32[NB],
          topk: in global i32[T], s: in global f32[E, H], y: out global f32[T, H])
  where T > 0, T <= 4096, E > 0, E <= 64, NB > 0, NB <= 4096, P == 4 * NB, H > 0, H <= 4096
  grid (NB, H) block 4
  requires 0 <= topk[t] && topk[t] < E
  requires 0 <= ids[p] && ids[p] <= T
  requires {link}
  ensures y[t, c] == x[t, c] * s[topk[t], c]
{{
  let p = block.x * 4 + thread
  let r = ids[p]
  let e = be[block.x]
  if r < T {{
    y[r, block.y] = x[r, block.y] * s[e, block.y]
  }}
}}
"""


def test_block_expert_table_linked_to_the_routing_is_proved():
    k = kernel(SEGMENTS.format(link="ids[p] >= T || topk[ids[p]] == be[p / 4]"))
    valueflow.prove(k, k.ensures[0])


def test_without_the_link_the_expert_is_unknown():
    k = kernel(SEGMENTS.format(link="ids[p] >= T || be[p / 4] >= 0"))
    with pytest.raises(NotProved):
        valueflow.prove(k, k.ensures[0])


SENTINEL = """kernel g(table: in global f32[V, H], ids: in global i32[T], y: out global f32[T, H])
  where V > 0, V <= 4096, T > 0, T <= 4096, H % 128 == 0, H > 0, H <= 4096
  grid (T, H / 128) block 128
  requires CLAUSE
  ensures y[t, c] == table[ids[t], c]
{
  let r = ids[block.x]
  if r >= 0 {
    y[block.x, block.y * 128 + thread] = table[r, block.y * 128 + thread]
  } else {
    y[block.x, block.y * 128 + thread] = 0.0
  }
}
"""


@pytest.mark.parametrize(("clause", "outside"), [
    ("ids[t] == -1 || 0 <= ids[t] && ids[t] < V", "ids[0] = -1"),
    ("0 <= ids[t] && ids[t] <= V", "ids[0] = 1"),
    ("0 <= ids[t] && ids[t] < V", None),
    ("ids[t] == -1 && ids[t] >= 0 || 0 <= ids[t] && ids[t] < V", None),
])
def test_a_spec_read_through_an_index_the_clauses_let_outside(clause, outside):
    """TS041 when the clauses allow an index value the spec then reads outside a tensor
    (and contents with that value satisfy every clause), never when they do not."""
    from tilesafe.semantics.value import spec_bounds

    k = compile_source(SENTINEL.replace("CLAUSE", clause), "g.tsk").kernels[0]
    hits = spec_bounds.outside_reads(k, k.ensures[0])
    if outside is None:
        assert hits == []
    else:
        assert len(hits) == 1 and outside in hits[0].describe("y"), hits
