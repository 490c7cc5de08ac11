"""`requires` clauses on a launch's data (issue 23, item 3): the launch check
(semantics/access/requires_eval.py) against a brute-force reading of the clauses, the
search for data that satisfies them (requires_synth.py), and every launcher refusing data
that does not (the interpreter TS205, the GPU launcher, tilesafe.jit TS911)."""

from __future__ import annotations

import io
import itertools
import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tilesafe.frontend.load import compile_source
from tilesafe.semantics.access import requires_eval, requires_form, requires_synth
from tilesafe.semantics.interpreter import interp
from tilesafe.semantics.interpreter.interp_error import InterpError
from tilesafe.semantics.interpreter.interp_io import random_inputs

HEAD = """kernel k(ids: in global i32[T], tab: in global i32[M], be: in global i32[NB],
         y: out global f32[T])
  where T > 0, T <= 64, M > 0, M <= 64, NB > 0, NB <= 64
  grid T block 1
"""
BODY = "{\n  y[block.x] = 0.0\n}\n"

CLAUSES = [
    "requires {a} <= ids[t] && ids[t] < M + {b}",
    "requires ids[p] == M || tab[ids[p]] == be[p / {c}]",
    "requires ids[p] >= M || be[ids[p] / {c}] >= {a}",
    "requires injective(p in 0 .. T: ids[p], 0 .. M)",
    "requires injective(p in 0 .. T: ids[p])",
    "requires permutation(p in 0 .. T: ids[p], 0 .. M)",
    "requires sorted(b in 0 .. NB: be[b])",
    "requires p == q || ids[p] != ids[q]",
    "requires be[0] == {a}",
]


def _kernel(clause: str):
    return compile_source(HEAD + "  " + clause + "\n" + BODY, "r.tsk").kernels[0]


def _holds_brute(clause: str, arrays: dict[str, list[int]], sizes: dict[str, int]) -> bool:
    """The clause by its definition (ir.Requires), evaluated point by point in Python."""
    ids, tab, be = arrays["ids"], arrays["tab"], arrays["be"]
    t, m = sizes["T"], sizes["M"]

    def get(a: list[int], i: int) -> int:
        if not 0 <= i < len(a):
            raise IndexError
        return a[i]

    if clause.startswith("requires injective") or clause.startswith("requires permutation"):
        ranged = ", 0 .. M" in clause
        vals = [v for v in ids if not ranged or 0 <= v < m]
        ok = len(vals) == len(set(vals))
        if clause.startswith("requires permutation"):
            ok = ok and set(range(m)) <= set(ids)
        return ok
    if clause.startswith("requires sorted"):
        return all(a <= b for a, b in itertools.pairwise(be))
    body = clause[len("requires "):].replace("&&", "and").replace("||", "or").replace(
        "/", "//")
    names = sorted({v for v in ("t", "p", "q") if f"[{v}]" in body or f"{v} ==" in body})
    arrays_by_name = {"ids": ids, "tab": tab, "be": be}
    # direct reads (an index that reads nothing): outside its tensor the clause says nothing
    direct = re.findall(r"\b(ids|tab|be)\[([^\[\]]*)\]", body)
    for point in itertools.product(range(t), repeat=len(names)):
        env = dict(zip(names, point, strict=True))
        if any(not 0 <= eval(i, {"M": m, "T": t, **env}) < len(arrays_by_name[a])
               for a, i in direct):
            continue
        expr = body
        for name in ("ids", "tab", "be"):
            expr = expr.replace(f"{name}[", f"get({name}, ")
        expr = expr.replace("]", ")")
        try:
            if not eval(expr, {"get": get, "ids": ids, "tab": tab, "be": be, "M": m,
                               "T": t, **env}):
                return False
        except IndexError:  # a read through a read outside its tensor: taken to fail
            return False
    return True


@settings(max_examples=120, deadline=None)
@given(which=st.integers(0, len(CLAUSES) - 1), a=st.integers(-1, 1), b=st.integers(-1, 1),
       c=st.sampled_from([1, 2, 3]), t=st.integers(1, 5), m=st.integers(1, 5),
       nb=st.integers(1, 3), data=st.data())
def test_check_agrees_with_brute_force(which, a, b, c, t, m, nb, data):
    clause = CLAUSES[which].format(a=a, b=b, c=c)
    k = _kernel(clause)
    values = st.integers(-1, m + 1)
    arrays = {"ids": data.draw(st.lists(values, min_size=t, max_size=t)),
              "tab": data.draw(st.lists(st.integers(-1, 3), min_size=m, max_size=m)),
              "be": data.draw(st.lists(st.integers(-1, 3), min_size=nb, max_size=nb))}
    sizes = {"T": t, "M": m, "NB": nb}
    np_arrays = {n: np.array(v, dtype=np.int32) for n, v in arrays.items()}
    v = requires_eval.first_violation(requires_form.encode(k), sizes, np_arrays)
    assert (v is None) == _holds_brute(clause, arrays, sizes), (clause, arrays, v)
    if v is not None:
        assert v.text in clause and v.index == 0
        for elem, value in v.reads.items():  # the elements it names hold those values
            name, idx = elem[:-1].split("[")
            assert arrays[name][int(idx)] == value


def test_torch_tensors_are_checked_where_they_are():
    torch = pytest.importorskip("torch")
    k = _kernel("requires permutation(p in 0 .. T: ids[p], 0 .. M)")
    good = {"ids": torch.tensor([2, 0, 1, 3], dtype=torch.int32)}
    sizes = {"T": 4, "M": 4, "NB": 1}
    assert requires_eval.first_violation(requires_form.encode(k), sizes, good) is None
    bad = {"ids": torch.tensor([2, 0, 2, 3], dtype=torch.int32)}
    v = requires_eval.first_violation(requires_form.encode(k), sizes, bad)
    assert v is not None and v.reads == {"ids[0]": 2, "ids[2]": 2}


def test_too_large_to_check_is_refused_not_passed():
    k = _kernel("requires p == q || ids[p] != ids[q]")
    with pytest.raises(requires_eval.TooLarge):
        requires_eval.first_violation(requires_form.encode(k), {"T": 64, "M": 1, "NB": 1},
                                      {"ids": np.arange(64, dtype=np.int32)}, max_points=100)


# ---- drawing data that satisfies them -------------------------------------------------------


@settings(max_examples=25, deadline=None)
@given(which=st.integers(0, len(CLAUSES) - 1), a=st.integers(0, 1), c=st.sampled_from([1, 2]),
       t=st.integers(1, 6), seed=st.integers(0, 1000))
def test_drawn_data_satisfies_the_clauses(which, a, c, t, seed):
    clause = CLAUSES[which].format(a=a, b=0, c=c)
    k = _kernel(clause)
    sizes = {"T": t, "M": t, "NB": 3}
    shapes = {"ids": (t,), "tab": (t,), "be": (3,)}
    try:
        out = requires_synth.draw(k, sizes, shapes, np.random.default_rng(seed))
    except requires_synth.NoSolution:  # allowed only where brute force finds none either
        assert which == 0 and a == 1 and t == 1 or _no_solution_brute(clause, sizes)
        return
    assert requires_eval.first_violation(requires_form.encode(k), sizes, out) is None


def _no_solution_brute(clause: str, sizes: dict[str, int]) -> bool:
    t, m = sizes["T"], sizes["M"]
    rng = range(-1, m + 2)
    for ids in itertools.product(rng, repeat=t):
        for be in itertools.product(range(-1, 3), repeat=3):
            arrays = {"ids": list(ids), "tab": [0] * m, "be": list(be)}
            if _holds_brute(clause, arrays, sizes):
                return False
    return True


def test_fixed_elements_are_kept_and_unsatisfiable_is_said():
    k = _kernel("requires permutation(p in 0 .. T: ids[p], 0 .. M)")
    out = requires_synth.draw(k, {"T": 6, "M": 4, "NB": 1},
                              {"ids": (6,), "tab": (4,), "be": (1,)}, np.random.default_rng(0),
                              fixed={"ids": {(2,): 3, (5,): 7}})
    assert out["ids"][2] == 3 and out["ids"][5] == 7
    assert sorted(v for v in out["ids"] if 0 <= v < 4) == [0, 1, 2, 3]
    with pytest.raises(requires_synth.NoSolution, match="needs 4 values at 3 positions"):
        requires_synth.draw(k, {"T": 3, "M": 4, "NB": 1},
                            {"ids": (3,), "tab": (4,), "be": (1,)}, np.random.default_rng(0))


def test_the_clause_that_leaves_no_contents_is_named(tmp_path):
    """TS206 points at the first clause that makes the ones before it unsatisfiable."""
    from tilesafe.cli import main

    src = tmp_path / "u.tsk"
    src.write_text("""kernel k(ids: in global i32[T], x: in global f32[V], y: out global f32[T])
  where T > 0, T <= 64, V > 0, V <= 64
  grid (T) block 1
  requires 0 <= ids[t] && ids[t] < V
  requires permutation(p in 0 .. T: ids[p], 0 .. T)
  requires ids[t] >= T
{
  y[block.x] = x[ids[block.x]]
}
""")
    out = io.StringIO()
    assert main(["run", str(src), "--size", "T=4,V=8"], stdout=out, stderr=io.StringIO()) == 1
    assert f"{src}:6:3: TS206" in out.getvalue(), out.getvalue()


# ---- every launcher refuses -----------------------------------------------------------------


GATHER = """kernel g(x: in global f32[M, H], ids: in global i32[T], out: out global f32[T, H])
  where M > 0, M <= 4096, T > 0, T <= 4096, H % 32 == 0, H > 0, H <= 4096
  grid (T, H / 32) block 32
  requires 0 <= ids[t] && ids[t] < M
  ensures out[t, c] == x[ids[t], c]
{
  out[block.x, block.y * 32 + thread] = x[ids[block.x], block.y * 32 + thread]
}
"""


def _gather_arrays(ids: list[int]) -> dict[str, np.ndarray]:
    return {"x": np.arange(8 * 32, dtype=np.float32).reshape(8, 32),
            "ids": np.array(ids, dtype=np.int32),
            "out": np.full((len(ids), 32), np.nan, np.float32)}


def test_interpreter_refuses_and_tilesafe_run_draws_valid_data():
    k = compile_source(GATHER, "g.tsk").kernels[0]
    with pytest.raises(InterpError) as err:
        interp.run_kernel(k, {"M": 8, "T": 3, "H": 32}, _gather_arrays([1, 8, 2]))
    assert err.value.code == "TS205"
    assert "at t = 1: ids[1] = 8 (M = 8)" in err.value.message
    inputs = random_inputs(k, {"M": 8, "T": 5, "H": 32}, np.random.default_rng(4))
    assert ((0 <= inputs["ids"]) & (inputs["ids"] < 8)).all()
    res = interp.run_kernel(k, {"M": 8, "T": 5, "H": 32}, inputs)
    assert (res.tensors["out"] == inputs["x"][inputs["ids"]]).all()


def test_gpu_launcher_refuses_before_touching_the_gpu():
    from tilesafe.codegen.compile import compile_kernel
    from tilesafe.codegen.plan import bind
    from tilesafe.gpu import launcher

    k = compile_source(GATHER, "g.tsk").kernels[0]
    spec = bind(k, compile_kernel(k), {"M": 8, "T": 3, "H": 32})
    assert spec.requires and spec.requires[0]["text"] == "0 <= ids[t] && ids[t] < M"
    run = launcher.run(spec, _gather_arrays([1, -1, 2]))  # no GPU needed: refused first
    assert run.status == "refused" and "TS205" in run.error and "ids[1] = -1" in run.error
    again = type(spec).from_json(spec.to_json())
    assert again.requires == spec.requires


def test_jit_refuses_with_ts911(tmp_path):
    import tilesafe
    from tilesafe.jit.contract import JitError

    g = tilesafe.jit(GATHER, device="interp", cache=tmp_path)
    arrays = _gather_arrays([3, 0, 7])
    out = g(arrays["x"], arrays["ids"])
    assert (out == arrays["x"][[3, 0, 7]]).all()
    with pytest.raises(JitError) as err:
        g(arrays["x"], np.array([3, 9, 7], dtype=np.int32))
    (d,) = err.value.diagnostics
    assert d.code == "TS911" and "ids[1] = 9" in d.message and d.span.line == 4
