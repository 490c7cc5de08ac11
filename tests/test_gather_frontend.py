"""The language of gathers and scatters: reads of index tensors inside global indices, and
`requires` clauses on index tensors (docs/language.md, section 13) -- what resolves, what
is rejected with which code, and that the formatter keeps their meaning."""

from __future__ import annotations

import pytest
from test_fmt import check_roundtrip

from tilesafe.frontend import ir
from tilesafe.frontend.diagnostics import DiagnosticError
from tilesafe.frontend.load import compile_source

HEAD = ("kernel k(x: in global f32[M, H], ids: in global i32[T], be: in global i32[NB], "
        "w: in global f32[T], f: in global f32[T], y: out global f32[T, H])\n"
        "  where M > 0, M <= 4096, T > 0, T <= 4096, NB > 0, NB <= 64, H > 0, H <= 4096\n"
        "  grid T block 1\n")
BODY = "{\n  for c in 0 .. H {\n    y[block.x, c] = x[ids[block.x], c] * w[block.x]\n  }\n}\n"


def compile_(requires: str = "", body: str = BODY, head: str = HEAD) -> ir.Kernel:
    return compile_source(head + requires + body, "g.tsk").kernels[0]


def codes(requires: str = "", body: str = BODY, head: str = HEAD) -> list[str]:
    try:
        compile_(requires, body, head)
    except DiagnosticError as err:
        return [d.code for d in err.diagnostics]
    return []


def test_gather_resolves_to_a_load_in_the_index():
    k = compile_("  requires 0 <= ids[t] && ids[t] < M\n")
    store = k.body[0].body[0]
    load = store.value.lhs
    assert isinstance(load, ir.Load) and load.tensor == "x"
    assert isinstance(load.indices[0], ir.Load) and load.indices[0].tensor == "ids"
    (r,) = k.requires
    assert r.kind is ir.RequireKind.ALL and [v.name for v in r.vars] == ["t"]


def test_let_bound_to_a_gather_indexes_a_global_tensor():
    body = ("{\n  let r = ids[block.x] / 2\n  for c in 0 .. H {\n    y[block.x, c] = x[r, c]\n"
            "  }\n}\n")
    assert codes(body=body) == []


@pytest.mark.parametrize(("body", "what"), [
    ("{\n  shared s: f32[8]\n  s[ids[block.x]] = 1.0\n  y[block.x, 0] = 0.0\n}\n", "shared"),
    ("{\n  for c in 0 .. ids[block.x] {\n    y[block.x, c] = 1.0\n  }\n}\n", "loop bound"),
    ("{\n  y[block.x, ids[ids[block.x]]] = 1.0\n}\n", "read through a read"),
    ("{\n  y[block.x, be[block.x] * ids[block.x]] = 1.0\n}\n", "product of two reads"),
])
def test_gathers_stay_out_of_other_positions(body: str, what: str):
    assert codes(body=body) == ["TS023"], what


def test_only_declared_in_integer_tensors_index():
    head = HEAD.replace("ids: in global i32[T]", "ids: global i32[T]")
    assert "TS023" in codes(head=head)
    head = HEAD.replace("ids: in global i32[T]", "ids: in global f32[T]")
    assert "TS022" in codes(head=head) or "TS023" in codes(head=head)


@pytest.mark.parametrize("clause", [
    "requires 0 <= ids[t] && ids[t] < M || ids[t] == -1",
    "requires p == q || ids[p] != ids[q]",
    "requires injective(p in 0 .. T: ids[p], 0 .. M)",
    "requires permutation(p in 0 .. T: ids[p])",
    "requires sorted(b in 0 .. NB: be[b])",
    "requires ids[p] >= M || be[ids[p] / 64] >= 0",
    "requires be[0] == 0",
])
def test_requires_forms_resolve(clause: str):
    k = compile_(f"  {clause}\n")
    assert len(k.requires) == 1


def test_permutation_defaults_to_the_range_of_its_domain():
    k = compile_("  requires permutation(p in 0 .. T: ids[p])\n")
    (r,) = k.requires
    assert r.kind is ir.RequireKind.PERMUTATION
    assert isinstance(r.vlo, ir.IntConst) and r.vlo.value == 0
    assert isinstance(r.vhi, ir.SizeVar) and r.vhi.name == "T"


@pytest.mark.parametrize(("clause", "code"), [
    ("requires w[t] > 0.0", "TS042"),  # a float tensor is not an index tensor
    ("requires y[t, 0] > 0", "TS042"),  # an output
    ("requires ids[t] * ids[t] < M", "TS042"),  # not Presburger
    ("requires ids[0] < k", "TS042"),  # k indexes nothing: unbounded
    ("requires ids[t] + 1", "TS042"),  # not a condition
    ("requires sorted(b in 0 .. NB: be[b], 0 .. 4)", "TS042"),  # no value range there
    ("requires sorted(b in 0 .. NB: 3)", "TS042"),  # reads nothing
    ("requires ids[thread] < M", "TS042"),
    ("requires injective(p in 0 .. ids[0]: ids[p])", "TS042"),  # range not in the sizes
    ("requires 0 <= sum(p in 0 .. T: ids[p])", "TS042"),
])
def test_malformed_requires(clause: str, code: str):
    assert code in codes(f"  {clause}\n"), clause


def test_sum_takes_no_value_range():
    head = HEAD + "  ensures y[t, c] == sum(j in 0 .. 4: x[j, c], 0 .. 4)\n"
    assert "TS040" in codes(head=head)


def test_fmt_keeps_requires_and_gathers():
    text = (HEAD + "  requires permutation(p in 0 .. T: ids[p], 0 .. M)\n"
            "  requires 0<=ids[t] &&ids[t]<M\n"
            "  ensures y[t, c] == x[ids[t], c] * w[t]\n" + BODY)
    out = check_roundtrip(text)
    assert "  requires permutation(p in 0 .. T: ids[p], 0 .. M)\n" in out
    assert "  requires 0 <= ids[t] && ids[t] < M\n" in out


TMA_HEAD = ("kernel k(w: in global f32[E, 64, 64], be: in global i32[NB], "
            "y: out global f32[NB, 64, 64])\n"
            "  where E > 0, E <= 64, NB > 0, NB <= 64\n  grid NB block 32\n"
            "  requires 0 <= be[b] && be[b] < E\n")


def tma_body(op: str) -> str:
    return ("{\n  tensormap tw = tiled(w, box [1, 64, 64])\n"
            "  tensormap ty = tiled(y, box [1, 64, 64])\n"
            "  shared s: f32[1, 64, 64]\n  mbarrier full count 1 guards s\n"
            "  if thread == 0 {\n    init full\n    fence mbarrier_init\n  }\n  sync\n"
            "  if thread == 0 {\n    arrive full, expect_tx bytes(s)\n"
            f"    tma_load s <- tw[{'be[block.x]' if op == 'load' else 'block.x'}, 0, 0] "
            "signal full\n  }\n  wait full parity 0\n  fence proxy_async\n  sync\n"
            "  if thread == 0 {\n"
            f"    tma_store ty[{'be[block.x]' if op == 'store' else 'block.x'}, 0, 0] <- s\n"
            "    commit_group\n    wait_group 0 read\n  }\n}\n")


def test_a_tma_load_box_may_start_at_a_value_read_from_an_index_tensor():
    """A dense box at a data-dependent origin (the expert's weight tile); a TMA store's
    origin may not read one (a box scattered by data)."""
    k = compile_source(TMA_HEAD + tma_body("load"), "t.tsk").kernels[0]
    load = next(s for s in walk_stmts(k.body) if isinstance(s, ir.TmaLoad))
    assert isinstance(load.coords[0], ir.Load) and load.coords[0].tensor == "be"
    with pytest.raises(DiagnosticError) as err:
        compile_source(TMA_HEAD + tma_body("store"), "t.tsk")
    assert [d.code for d in err.value.diagnostics] == ["TS023"]


def walk_stmts(stmts):
    for s in stmts:
        yield s
        for attr in ("body", "then", "orelse"):
            yield from walk_stmts(getattr(s, attr, ()) or ())
