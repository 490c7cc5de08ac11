"""The value proof's shortcuts of issue 19, against the long way round.

* Memoised last-writer answers: a reduction tree reads one statement's element in many
  namespaces, and the answer computed once is reused with its coordinates renamed. Every
  reused answer must denote the set a fresh computation gives, and the proof must still fail
  on a tree that adds an element twice or misses one.
* Path-local sums (semantics/value/value_paths.py): every order-free sum is also decided in
  the space of all coordinates (Compare.sum's own loop); the path-local proof must never
  succeed where that one fails, and must succeed on the reduction kernels it is for."""

from __future__ import annotations

import pytest

from tilesafe.frontend.load import compile_source
from tilesafe.semantics.value import value_paths, valueflow
from tilesafe.semantics.value.value_space import NotProved

TREE = """kernel tree(x: in global f32[M, 8], out: out global f32[M])
  where M > 0, M <= 65536
  grid (M) block 8
  ensures out[i] == sum(j in 0 .. 8: x[i, j])
{{
  shared part: f32[8]
  part[thread] = x[block.x, thread]
  sync
  if thread < 4 {{
    part[thread] = part[thread] + part[thread + {a}]
  }}
  sync
  if thread < 2 {{
    part[thread] = part[thread] + part[thread + 2]
  }}
  sync
  if thread < 1 {{
    part[thread] = part[thread] + part[thread + 1]
  }}
  sync
  if thread == 0 {{
    out[block.x] = part[0]
  }}
}}
"""


def _kernel(a: int):
    return compile_source(TREE.format(a=a), "tree.tsk").kernels[0]


def test_reused_last_writer_answers_equal_fresh_ones(monkeypatch) -> None:
    memo = valueflow.Prover.last_writer
    checked = []

    def both(self, link, writers):
        got = memo(self, link, writers)
        fresh = self._last_writer(link, writers)
        assert (got is None) == (fresh is None)
        if got is not None:
            space = self.space([link.reader, link.writer])
            assert space.embed(got) == space.embed(fresh), (got, fresh)
        checked.append(got is not None)
        return got

    monkeypatch.setattr(valueflow.Prover, "last_writer", both)
    k = _kernel(4)
    proof = valueflow.prove(k, k.ensures[0])
    assert proof.writes == 1 and "part" in proof.buffers
    assert len(checked) > 12 and any(checked)  # several namespaces per statement


@pytest.mark.parametrize("a", [3, 5])
def test_wrong_tree_is_not_proved(a: int) -> None:
    k = _kernel(a)  # thread + 3 adds x[i, 3] twice and misses x[i, 4]; + 5 reads past 4
    with pytest.raises(NotProved):
        valueflow.prove(k, k.ensures[0])


_FAST = value_paths.prove_sum  # before any test patches it


def _both_ways(monkeypatch, kernel) -> list[bool]:
    """Prove `kernel`'s clause with every order-free sum decided twice: path by path
    (value_paths) and in the shared space (Compare.sum's own loop). Returns, per sum,
    whether the path-local proof succeeded; it must never succeed where the shared one
    fails."""
    from tilesafe.semantics.value import value_paths, value_sums

    fast = _FAST
    outcomes: list[bool] = []

    def checked(cmp, k, s, ctx):
        try:
            fast(cmp, k, s, ctx)
            ok = True
        except (value_paths.Fallback, NotProved):
            ok = False
        outcomes.append(ok)
        raise value_paths.Fallback  # always let the shared-space loop decide as well

    monkeypatch.setattr(value_paths, "prove_sum", checked)
    try:
        valueflow.prove(kernel, kernel.ensures[0])
        shared = True
    except NotProved:
        shared = False
    assert value_sums.value_paths.prove_sum is checked
    assert shared or not any(outcomes), "the path-local proof proved a sum the shared one refutes"
    return outcomes


def test_path_local_sums_agree_with_the_shared_space(monkeypatch) -> None:
    assert _both_ways(monkeypatch, _kernel(4)) == [True]
    assert _both_ways(monkeypatch, _kernel(0)) == [False]  # x[i, t] twice, x[i, t + 4] never
    k = compile_source(open("corpus/good/tile_history.tsk", encoding="utf-8").read(),
                       "tile_history.tsk").kernels[0]
    assert _both_ways(monkeypatch, k) == [True]
