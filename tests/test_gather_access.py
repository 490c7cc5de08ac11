"""Accesses through index tensors (semantics/access/gather.py): bounds of gathers, exactly-once of
scatters, races through a non-injective index -- proved under the `requires` clauses and
refuted with the offending index-tensor element in the counterexample; the verdicts
checked against brute force over every index tensor the clauses allow at small sizes."""

from __future__ import annotations

import itertools

import islpy as isl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tilesafe.checkers import access, global_memory
from tilesafe.checkers.obligation import Verdict
from tilesafe.checkers.registry import CheckOptions
from tilesafe.frontend.load import compile_source
from tilesafe.semantics.access.access import collect

OPTS = CheckOptions()


def kernel(text: str):
    return compile_source(text, "g.tsk").kernels[0]


def verdicts(k, checker=access) -> dict[str, object]:
    return {o.name.split(": ", 1)[1]: o for o in checker.check(k, OPTS)}


GATHER = """kernel g(x: in global f32[M, H], ids: in global i32[T], out: out global f32[T, H])
  where M > 0, M <= 4096, T > 0, T <= 4096, H % 32 == 0, H > 0, H <= 4096
  grid (T, H / 32) block 32
  requires 0 <= ids[t] && ids[t] < M{extra}
{{
  let r = ids[block.x]
  out[block.x, block.y * 32 + thread] = x[r, block.y * 32 + thread]
}}
"""


def test_gather_in_bounds_under_requires():
    v = verdicts(kernel(GATHER.format(extra="")))
    read = next(o for n, o in v.items() if n.startswith("global read of x"))
    assert read.verdict is Verdict.PROVED


def test_gather_out_of_bounds_names_the_element_and_value():
    text = GATHER.format(extra="").replace("ids[t] < M", "ids[t] <= M")
    v = verdicts(kernel(text))
    read = next(o for n, o in v.items() if n.startswith("global read of x"))
    assert read.verdict is Verdict.REFUTED and read.code == "TS201"
    cex = read.counterexample
    ((elem, value),) = cex["gathered"].items()
    assert elem == f"ids[{cex['block'][0]}]"
    assert value == cex["sizes"]["M"] == cex["index"][0]
    assert f"reading {elem} = {value}" in read.message


def test_sentinel_masked_is_in_bounds_unmasked_is_not():
    masked = """kernel g(x: in global f32[M, H], ids: in global i32[T], out: out global f32[T, H])
  where M > 0, M <= 4096, T > 0, T <= 4096, H > 0, H <= 4096
  grid T block 1
  requires 0 <= ids[t] && ids[t] < M || ids[t] == -1
{
  let r = ids[block.x]
  for c in 0 .. H {
    if r >= 0 {
      out[block.x, c] = x[r, c]
    } else {
      out[block.x, c] = 0.0
    }
  }
}
"""
    v = verdicts(kernel(masked))
    assert all(o.verdict is Verdict.PROVED for o in v.values()), v
    unmasked = masked.replace("if r >= 0 {", "if r >= -1 {")
    v = verdicts(kernel(unmasked))
    read = next(o for n, o in v.items() if n.startswith("global read of x"))
    assert read.verdict is Verdict.REFUTED
    assert list(read.counterexample["gathered"].values()) == [-1]


SCATTER = """kernel s(x: in global f32[T, H], ids: in global i32[T], y: out global f32[T, H])
  where T > 0, T <= 4096, H % 32 == 0, H > 0, H <= 4096
  grid (T, H / 32) block 32
  requires 0 <= ids[t] && ids[t] < T
{extra}{{
  let r = ids[block.x]
  y[r, block.y * 32 + thread] = x[block.x, block.y * 32 + thread] * 2.0
}}
"""


def test_scatter_through_a_permutation_is_exactly_once():
    v = verdicts(kernel(SCATTER.format(extra="  requires permutation(p in 0 .. T: ids[p])\n")))
    assert v["y written at most once"].verdict is Verdict.PROVED
    assert v["y written at least once"].verdict is Verdict.PROVED
    assert list(v["y written at least once"].evidence["ranges"].values()) == ["gathered"]


def test_injective_scatter_is_at_most_once_but_coverage_is_open():
    v = verdicts(kernel(SCATTER.format(extra="  requires injective(p in 0 .. T: ids[p])\n")))
    assert v["y written at most once"].verdict is Verdict.PROVED
    assert v["y written at least once"].verdict is Verdict.UNKNOWN


def test_arbitrary_scatter_writes_twice_with_two_positions():
    v = verdicts(kernel(SCATTER.format(extra="")))
    o = v["y written at most once"]
    assert o.verdict is Verdict.REFUTED and o.code == "TS211"
    w1, w2 = o.counterexample["writer1"], o.counterexample["writer2"]
    (e1, v1), = w1["gathered"].items()
    (e2, v2), = w2["gathered"].items()
    assert e1 != e2 and v1 == v2 == o.counterexample["element"][0]


RACE = """kernel c(y: in global f32[TK, H], ids: in global i32[TK], out: inout global f32[T, H])
  where T > 0, T <= 4096, TK == 2 * T, H % 32 == 0, H > 0, H <= 4096
  grid (T, H / 32) block 32
  requires permutation(p in 0 .. TK: ids[p])
  requires 0 <= ids[p] && ids[p] < TK
{
  let c = block.y * 32 + thread
  out[block.x, c] = out[ids[2 * block.x] / 2, c] + y[2 * block.x, c]
}
"""


def test_gathered_read_of_what_another_block_writes_is_a_race():
    k = kernel(RACE)
    v = verdicts(k, global_memory)
    o = next(o for n, o in v.items() if "unordered" in n)
    assert o.verdict is Verdict.REFUTED and o.code == "TS217"
    assert "reading ids[" in o.message
    # the same kernel reading its own row (an identity routing) is race-free
    fixed = RACE.replace("out[ids[2 * block.x] / 2, c]", "out[block.x, c]")
    v = verdicts(kernel(fixed), global_memory)
    race = next(o for n, o in v.items() if "unordered" in n)
    assert race.verdict is Verdict.PROVED


# ---- brute force -----------------------------------------------------------------------------

FAMILY = """kernel f(x: in global f32[M], ids: in global i32[T], y: out global f32[M])
  where M > 0, M <= 8, T > 0, T <= 4
  grid T block 1
  requires {lo} <= ids[t] && ids[t] < {hi}
{extra}{{
  let r = ids[block.x]
  if r {cmp} {cut} {{
    y[{a} * r + {b}] = x[{c} * r + {d}]
  }}
}}
"""


def _brute(params: dict, m: int, t: int, perm: bool) -> tuple[bool, bool, bool]:
    """(some read out of bounds, some write out of bounds, some element written twice) over
    every ids the clauses allow at sizes M = m, T = t."""
    lo, hi = params["lo"], params["hi"]
    read_oob = write_oob = twice = False
    for ids in itertools.product(range(lo, hi), repeat=t):
        counted = [v for v in ids if 0 <= v < t]
        if perm and len(set(counted)) != len(counted):
            continue
        writes = []
        for r in ids:
            if not eval(f"{r} {params['cmp']} {params['cut']}"):
                continue
            read_oob |= not 0 <= params["c"] * r + params["d"] < m
            writes.append(params["a"] * r + params["b"])
            write_oob |= not 0 <= writes[-1] < m
        twice |= len(writes) != len(set(writes))
    return read_oob, write_oob, twice


@settings(max_examples=25, deadline=None)
@given(lo=st.integers(-2, 1), width=st.integers(1, 4), a=st.sampled_from([1, 2, -1]),
       b=st.integers(-1, 2), c=st.sampled_from([1, 2]), d=st.integers(-1, 1),
       cmp=st.sampled_from(["<", ">=", "!="]), cut=st.integers(-1, 3),
       inj=st.booleans())
def test_verdicts_agree_with_brute_force(lo, width, a, b, c, d, cmp, cut, inj):
    params = dict(lo=lo, hi=lo + width, a=a, b=b, c=c, d=d, cmp=cmp, cut=cut)
    extra = "  requires injective(p in 0 .. T: ids[p], 0 .. T)\n" if inj else ""
    k = kernel(FAMILY.format(extra=extra, **params))
    v = verdicts(k)
    checks = [next(o for n, o in v.items() if n.startswith("global read of x")),
              next(o for n, o in v.items() if n.startswith("global write of y")),
              v["y written at most once"]]
    for m, t in itertools.product(range(1, 5), range(1, 4)):
        found = _brute(params, m, t, inj)
        for o, bad in zip(checks, found, strict=True):
            if o.verdict is Verdict.PROVED:
                assert not bad, (params, m, t, o.name)
    for o, k_ in zip(checks, range(3), strict=True):
        if o.verdict is Verdict.REFUTED:
            s = o.counterexample["sizes"]
            assert _brute(params, s["M"], s["T"], inj)[k_], (params, o.message)


def test_facts_are_per_instance_dims():
    k = kernel(SCATTER.format(extra="  requires permutation(p in 0 .. T: ids[p])\n"))
    store = next(a for a in collect(k, isl.Context()) if a.tensor == "y")
    assert [d.key.tensor for d in store.gathers] == ["ids"]
    assert store.dims[-1] == "g0_ids"
    # the value dim is bounded by the clause: no instance reads ids[.] >= T or < 0
    space = store.domain.get_space()
    ls = isl.LocalSpace.from_space(space)
    g = isl.PwAff.var_on_domain(ls, isl.dim_type.set, len(store.dims) - 1)
    t = isl.PwAff.var_on_domain(ls, isl.dim_type.param, space.find_dim_by_name(
        isl.dim_type.param, "T"))
    zero = isl.PwAff.zero_on_domain(ls)
    assert store.domain.intersect(g.ge_set(t)).is_empty()
    assert store.domain.intersect(g.lt_set(zero)).is_empty()
    assert not store.domain.intersect(g.lt_set(t)).is_empty()


def test_pairs_without_gathers_are_untouched():
    plain = SCATTER.format(extra="").replace("let r = ids[block.x]", "let r = block.x")
    v = verdicts(kernel(plain))
    assert v["y written at most once"].verdict is Verdict.PROVED


pytestmark = pytest.mark.filterwarnings("ignore")
