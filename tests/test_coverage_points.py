"""In-tile offsets by evaluation (semantics/access/coverage.py, `_offset_points`) against
ISL's own enumeration of the offset set, and the boxes built from either (issue 19: ISL
counted a wgmma fragment's 8,192 offsets in ~2.5 s per kernel)."""

from __future__ import annotations

import islpy as isl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tilesafe.checkers import access
from tilesafe.checkers.registry import CheckOptions
from tilesafe.frontend.load import load_program
from tilesafe.semantics.access import coverage as cov

CTX = isl.Context()


def _isl_points(s: isl.Set) -> set[tuple[int, ...]]:
    free = s.project_out(isl.dim_type.param, 0, s.dim(isl.dim_type.param))
    out: set[tuple[int, ...]] = set()
    free.foreach_point(lambda p: out.add(tuple(
        p.get_coordinate_val(isl.dim_type.set, k).to_python() for k in range(free.dim(
            isl.dim_type.set)))))
    return out


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 40), st.integers(1, 12), st.sampled_from([1, 2, 3, 4, 8]),
       st.sampled_from([1, 2, 4, 16]), st.integers(0, 5), st.sampled_from([(), (2, 1), (1, 3)]))
def test_offset_points_equal_isl_enumeration(nt: int, nr: int, d: int, m: int, c: int,
                                             box: tuple[int, ...]) -> None:
    # [N] -> { [b, t, r] }: b an outer dim, t and r inner (a thread and a register loop)
    dom = isl.Set.read_from_str(
        CTX, f"[N] -> {{ [b, t, r] : 0 <= b < N and 0 <= t < {nt} and 0 <= r < {nr} }}")
    terms = [f"(floor(t / {d}) + {m} * floor(r / 2) + {c})", f"((t mod {d}) + 2 * (r mod 2))"]
    splits = []
    for term in terms:
        aff = isl.Aff.read_from_str(CTX, f"[N] -> {{ [b, t, r] -> [{term}] }}")
        splits.append(cov._Split(isl.Aff.zero_on_domain(aff.get_domain_local_space()), aff))
    prod = cov._product(dom, [1, 2])
    assert prod is not None
    offsets = cov._apply([s.inner for s in splits], prod.inner)
    if box:
        ext = isl.Set.universe(offsets.get_space())
        for k, e in enumerate(box):
            ext = ext.lower_bound_val(isl.dim_type.set, k, isl.Val.int_from_si(CTX, 0))
            ext = ext.upper_bound_val(isl.dim_type.set, k, isl.Val.int_from_si(CTX, e - 1))
        offsets = offsets.sum(ext)
    known = cov._offset_points(prod.inner, [1, 2], splits, box)
    assert known == _isl_points(offsets)
    assert cov._as_boxes(offsets, lambda: known).is_equal(cov._as_boxes(offsets))


def test_offset_terms_reading_outer_dims_are_left_to_isl() -> None:
    dom = isl.Set.read_from_str(CTX, "[N] -> { [b, t] : 0 <= b < N and 0 <= t < 8 }")
    aff = isl.Aff.read_from_str(CTX, "[N] -> { [b, t] -> [(t + b)] }")
    split = cov._Split(isl.Aff.zero_on_domain(aff.get_domain_local_space()), aff)
    assert cov._offset_points(dom, [1], [split], ()) is None


@pytest.mark.parametrize("name", ["good/cute_blocked_colmajor", "good/transpose_tma",
                                  "good/tile_history"])
def test_corpus_offsets_same_boxes_both_ways(name: str, monkeypatch) -> None:
    seen = []
    as_boxes = cov._as_boxes

    def both(offsets, points=None):
        got = as_boxes(offsets, points)
        assert got.is_equal(as_boxes(offsets))
        seen.append(points is not None and points() is not None)
        return got

    monkeypatch.setattr(cov, "_as_boxes", both)
    kernel = load_program(f"corpus/{name}.tsk").kernels[0]
    assert all(o.verdict.value == "proved" for o in access.check(kernel, CheckOptions()))
    assert any(seen)
