"""The value proof's memoised last-writer answers (issue 19): a reduction tree reads one
statement's element in many namespaces, and the answer computed once is reused with its
coordinates renamed. Every reused answer must denote the set a fresh computation gives, and
the proof must still fail on a tree that adds an element twice or misses one."""

from __future__ import annotations

import pytest

from tilesafe.frontend.load import compile_source
from tilesafe.semantics.value import valueflow
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
