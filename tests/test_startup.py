"""What a cold `tilesafe verify` no longer pays for (issue 19): the happens-before graph's
reachability against a brute-force closure, and the parser's cached tables parsing exactly
what freshly built ones do."""

from __future__ import annotations

import itertools
import os

from hypothesis import given, settings
from hypothesis import strategies as st
from lark import Lark

from tilesafe.frontend import parser
from tilesafe.semantics.temporal.happens_before import StepGraph


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 7), st.lists(st.tuples(st.integers(0, 6), st.integers(0, 6)),
                                   max_size=14))
def test_step_graph_reachability_is_the_transitive_closure(n: int, edges: list) -> None:
    g = StepGraph()
    for i in range(n):
        g.add_node(i)
    edges = [(a % n, b % n) for a, b in edges]
    for a, b in edges:
        g.add_edge(a, b)
    reach = {(i, i) for i in range(n)} | set(edges)
    for _ in range(n):  # Warshall by repetition: enough rounds for paths of length n
        reach |= {(a, d) for (a, b), (c, d) in itertools.product(reach, reach) if b == c}
    for a, b in itertools.product(range(n), repeat=2):
        assert g.has_path(a, b) == ((a, b) in reach), (a, b, edges)
    assert g.number_of_nodes() == n
    assert g.number_of_edges() == len(set(edges))


def test_cached_parser_tables_parse_like_fresh_ones(tmp_path, monkeypatch) -> None:
    from importlib import resources

    text = resources.files("tilesafe.grammar").joinpath("tilesafe.lark").read_text()
    monkeypatch.setenv("TILESAFE_CACHE_DIR", str(tmp_path))
    path = parser._cache_file(text)
    assert path is not None and path.startswith(str(tmp_path))
    fresh = Lark(text, parser="lalr", propagate_positions=True, maybe_placeholders=True)
    writes = Lark(text, parser="lalr", propagate_positions=True, maybe_placeholders=True,
                  cache=path)
    reads = Lark(text, parser="lalr", propagate_positions=True, maybe_placeholders=True,
                 cache=path)
    source = open("corpus/good/pipeline2.tsk", encoding="utf-8").read()
    assert fresh.parse(source) == writes.parse(source)
    assert os.path.getsize(path) > 0
    assert reads.parse(source) == fresh.parse(source)


def test_unwritable_cache_directory_parses_without_a_cache(tmp_path, monkeypatch) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory", encoding="utf-8")
    monkeypatch.setenv("TILESAFE_CACHE_DIR", str(blocker / "below"))
    assert parser._cache_file("grammar text") is None
