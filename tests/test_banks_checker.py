"""The bank-conflict checker (checkers/banks.py) against hand counts and brute force.

The independent counts below never call semantics/hw/banks.py: they take each active lane's
element offset (row-major or padded, written out here), turn it into a 4-byte word and a
bank (word % 32), and count distinct words per bank, the definition in the CUDA programming
guide. The checker's verdict and degree must agree with them.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tilesafe.checkers import banks as checker
from tilesafe.checkers.obligation import Severity, Verdict
from tilesafe.checkers.registry import CHECKERS, CheckOptions, load
from tilesafe.frontend import ir
from tilesafe.frontend.load import compile_source, load_program
from tilesafe.frontend.span import NO_SPAN
from tilesafe.semantics.hw import bank_sites
from tilesafe.semantics.layout import layouts, swizzle_synth

ROOT = Path(__file__).resolve().parent.parent
BAD = ROOT / "corpus" / "bad" / "ts601_transpose_conflict.tsk"
GOOD = ROOT / "corpus" / "good"
INT = ir.ScalarType.INT


def run(kernel: ir.Kernel, suggest: bool = True) -> list:
    return checker.check_kernel(kernel, CheckOptions(), suggest=suggest)


def kernel_of(text: str) -> ir.Kernel:
    return compile_source(text).kernels[0]


def by_line(obs: list, line: int) -> list:
    return [o for o in obs if o.span is not None and o.span.line == line]


def banks_of(words: list[int]) -> dict[int, set[int]]:
    out: dict[int, set[int]] = {}
    for w in words:
        out.setdefault(w % 32, set()).add(w)
    return out


def degree(words: list[int]) -> int:
    return max((len(ws) for ws in banks_of(words).values()), default=0)


# ---- the planted bug and the two good transposes ----------------------------------------


@pytest.fixture(scope="module")
def bad_obligations() -> list:
    return load("banks")(load_program(BAD).kernels[0], CheckOptions())


def test_registered() -> None:
    assert CHECKERS["banks"] == "tilesafe.checkers.banks"
    assert "access" in CHECKERS


def test_bad_transpose_is_a_32_way_conflict(bad_obligations: list) -> None:
    assert all(o.checker == "banks" and o.severity is Severity.WARNING for o in bad_obligations)
    assert not any(o.failed for o in bad_obligations)  # a lint never fails verify
    refuted = [o for o in bad_obligations if o.verdict is Verdict.REFUTED]
    assert len(refuted) == 1
    ob = refuted[0]
    assert ob.code == "TS601" and ob.span.line == 22 and "32-way bank conflict" in ob.message
    cex = ob.counterexample
    assert cex["degree"] == 32 and cex["wavefronts"] == 32 and cex["ideal"] == 1
    assert sorted(cex["lanes"]) == list(range(32))
    words = [a // 4 for a in cex["addresses"]]
    assert len(set(words)) == 32 and len({w % 32 for w in words}) == 1
    # lane l reads t[l, c]: the indices and addresses are the real ones (row stride 128 B)
    base = cex["addresses"][0] - 128 * cex["indices"][0][0] - 4 * cex["indices"][0][1]
    for (r, c), a in zip(cex["indices"], cex["addresses"], strict=True):
        assert a == base + 128 * r + 4 * c
    assert [r for r, _ in cex["indices"]] == cex["lanes"]
    # the row-wise store is conflict-free
    (store,) = by_line(bad_obligations, 17)
    assert store.verdict is Verdict.PROVED and store.evidence["worst_way"] == 1
    assert store.message.startswith("conflict-free: 32 wavefronts, ideal 32")


def test_bad_transpose_first_line_names_the_code() -> None:
    first = BAD.read_text().splitlines()[0]
    assert re.fullmatch(r"// expect: TS601 at 22", first)


def test_suggested_swizzle_is_verified_conflict_free(bad_obligations: list) -> None:
    (ob,) = [o for o in bad_obligations if o.verdict is Verdict.REFUTED]
    sug = ob.evidence["suggestion"]
    assert sug["degree"] == 1 and f"`{sug['layout']}`" in ob.message and "removes it" in ob.message
    assert sug["layout"].startswith("swizzle(")
    # re-run the checker on the kernel with the suggested layout written in the source
    text = BAD.read_text().replace("layout row_major", f"layout {sug['layout']}")
    kernel = kernel_of(text)
    obs = run(kernel)
    assert obs and all(o.verdict is Verdict.PROVED for o in obs)
    # and count by hand through the realised layout: column reads and row writes
    real = layouts.realize(_term(kernel.shared[0].layout), (32, 32), 4)
    for c in range(32):
        assert degree([real.offset((lane, c)) for lane in range(32)]) == 1
        assert degree([real.offset((c, lane)) for lane in range(32)]) == 1


def _term(t: ir.LayoutTerm) -> layouts.LayoutTerm:
    return layouts.LayoutTerm(t.head, tuple(_term(a) if isinstance(a, ir.LayoutTerm) else a
                                            for a in t.args))


@pytest.mark.parametrize("name", ["transpose_swizzled.tsk", "transpose_ragged.tsk",
                                  "row_reduce.tsk"])
def test_good_kernels_are_conflict_free(name: str) -> None:
    obs = run(load_program(GOOD / name).kernels[0])
    assert obs
    assert all(o.code != "TS601" for o in obs)
    assert all(o.verdict is Verdict.PROVED for o in obs), [o.message for o in obs]
    assert all(o.evidence["worst_way"] == 1 for o in obs)


def test_row_wise_row_major_is_conflict_free() -> None:
    k = kernel_of("""
kernel rows(src: global f32[64, 32], dst: global f32[64, 32])
  grid (1) block 256
{
  shared t: f32[64, 32] layout row_major
  for i in 0 .. 8 {
    t[warp_id + 8 * i, lane] = src[warp_id + 8 * i, lane]
  }
  sync
  for i in 0 .. 8 {
    dst[warp_id + 8 * i, lane] = t[warp_id + 8 * i, lane]
  }
}
""")
    obs = run(k)
    assert len(obs) == 2
    for o in obs:
        assert o.verdict is Verdict.PROVED
        assert o.message.startswith("conflict-free: 64 wavefronts, ideal 64")
        assert o.evidence["warp_accesses"] == 64  # 8 warps x 8 iterations
        amd = o.evidence["amd_lds"]
        assert amd["cdna3"]["worst_way"] == 1


def test_amd_estimate_of_the_column_read(bad_obligations: list) -> None:
    (ob,) = [o for o in bad_obligations if o.verdict is Verdict.REFUTED]
    amd = ob.evidence["amd_lds"]
    # wave = warps 2w, 2w+1: lanes 0-31 read column c, lanes 32-63 column c+1, rows 0..31.
    words = [r * 32 + 0 for r in range(32)] + [r * 32 + 1 for r in range(32)]
    cdna3 = max(degree(words[:32]), degree(words[32:]))  # b32 phases: 0-31, 32-63
    cdna4 = max(len(ws) for ws in _banks(words, 64).values())  # one phase of 64, 64 banks
    assert amd["cdna3"]["worst_way"] == cdna3 == 32
    assert amd["cdna4"]["worst_way"] == cdna4 == 16


def _banks(words: list[int], n: int) -> dict[int, set[int]]:
    out: dict[int, set[int]] = {}
    for w in words:
        out.setdefault(w % n, set()).add(w)
    return out


# ---- element vs byte swizzles -----------------------------------------------------------


def test_f16_suggestion_converts_byte_swizzle_to_element_swizzle() -> None:
    text = """
kernel cols(dst: global f16[64, 32])
  grid (1) block 32
{
  shared t: f16[32, 64] layout row_major
  for i in 0 .. 32 {
    t[i, lane] = 1.0
  }
  sync
  for c in 0 .. 64 {
    dst[c, lane] = t[lane, c]
  }
}
"""
    obs = run(kernel_of(text))
    (ob,) = [o for o in obs if o.verdict is Verdict.REFUTED]
    assert ob.counterexample["degree"] == 32  # 128-byte rows: a column is one bank
    layout = ob.evidence["suggestion"]["layout"]
    m = re.fullmatch(r"swizzle\((\d+), (\d+), (\d+), row_major\)", layout)
    assert m, layout
    b, m_elem, s = map(int, m.groups())
    assert m_elem >= 1  # the synthesiser's byte base is >= 2 (4-byte words), minus log2(2)
    real = layouts.realize(layouts.LayoutTerm("swizzle", (b, m_elem, s,
                                                          layouts.LayoutTerm("row_major"))),
                           (32, 64), 2)
    byte_sw = swizzle_synth.CuteSwizzle(b, m_elem + 1, s)
    for r in range(32):
        for c in range(64):
            assert real.offset((r, c)) * 2 == byte_sw.apply((r * 64 + c) * 2)
    fixed = run(kernel_of(text.replace("layout row_major", f"layout {layout}")))
    assert all(o.verdict is Verdict.PROVED for o in fixed)


def test_row_xor_suggestion_when_no_cute_swizzle_suffices() -> None:
    # Lanes write rows that differ in row bits 0, 3 and 5 (byte-offset bits 7, 10, 12): a
    # CuTe swizzle moves one window of 5 contiguous bits onto the bank bits, so it can only
    # separate two of them; an F2 matrix on the row bits separates all three.
    text = """
kernel spread(o: global f32[32])
  grid (1) block 32
{
  shared t: f32[64, 32]
  t[lane % 2 + lane / 2 % 2 * 8 + lane / 4 % 2 * 32, 0] = 1.0
  sync
  o[thread] = t[0, lane]
}
"""
    (ob, _) = run(kernel_of(text))
    assert ob.verdict is Verdict.REFUTED and ob.counterexample["degree"] == 8
    layout = ob.evidence["suggestion"]["layout"]
    assert layout.startswith("linear(") and ob.evidence["suggestion"]["degree"] == 1
    fixed = run(kernel_of(text.replace("shared t: f32[64, 32]",
                                       f"shared t: f32[64, 32] layout {layout}")))
    assert all(o.verdict is Verdict.PROVED for o in fixed)


def test_tma_buffers_only_get_tma_swizzle_modes() -> None:
    obs = run(load_program(GOOD / "ragged_tma.tsk").kernels[0])
    (ob,) = [o for o in obs if o.verdict is Verdict.REFUTED]
    # tile[thread, j], swizzle128B f16: rows r, r+8, r+16, r+24 share a 16-byte chunk's banks
    assert ob.counterexample["degree"] == 4
    assert "TMA buffer" in ob.message and "suggestion" not in ob.evidence


# ---- guards, roles, loops, data ---------------------------------------------------------

GUARDS = """
kernel guards(x: global f32[M], o: global f32[M])
  where M > 0
  grid ((M + 31) / 32) block 64
{
  shared t: f32[32, 32]
  if x[block.x] > 0.0 {
    t[lane, 0] = 1.0
  }
  if x[block.x] > 0.0 {
    t[0, lane] = 1.0
  }
  if block.x * 32 + lane < M {
    t[1, lane] = 2.0
  } else {
    t[lane, 1] = 0.0
  }
  if lane % 2 == 0 {
    t[lane / 2, 3] = 1.0
  }
  sync
  role one = warp 1, elect one {
    t[3, 3] = 2.0
  }
  for j in 0 .. 300 {
    t[j % 32, lane] = 1.0
  }
  for j in 0 .. 300 {
    t[j / 10, lane] = 1.0
  }
  if block.x * 32 + thread < M { o[block.x * 32 + thread] = t[thread % 32, 0] }
}
"""


@pytest.fixture(scope="module")
def guard_obligations() -> list:
    return run(kernel_of(GUARDS), suggest=False)


def test_data_guard_conflict_is_unknown_and_no_conflict_is_proved(guard_obligations) -> None:
    (a,) = by_line(guard_obligations, 8)
    assert a.verdict is Verdict.UNKNOWN and a.code == "TS690" and "32-way" in a.message
    (b,) = by_line(guard_obligations, 11)
    assert b.verdict is Verdict.PROVED and b.evidence["data_guards"]


def test_ragged_else_branch_conflict_found_at_a_ragged_size(guard_obligations) -> None:
    (then,) = by_line(guard_obligations, 14)
    assert then.verdict is Verdict.PROVED
    (orelse,) = by_line(guard_obligations, 16)
    assert orelse.verdict is Verdict.REFUTED and orelse.code == "TS601"
    cex = orelse.counterexample
    m, bx = cex["sizes"]["M"], cex["block"][0]
    active = [lane for lane in range(32) if bx * 32 + lane >= m]  # the else branch
    assert active and cex["degree"] == degree([lane * 32 + 1 for lane in active])
    assert sorted(cex["lanes"]) == active


def test_thread_guard_is_evaluated_per_lane(guard_obligations) -> None:
    (ob,) = by_line(guard_obligations, 19)
    lanes = [lane for lane in range(32) if lane % 2 == 0]
    assert ob.counterexample["degree"] == degree([lane // 2 * 32 + 3 for lane in lanes]) == 16
    assert sorted(ob.counterexample["lanes"]) == lanes


def test_elect_one_is_trivially_conflict_free(guard_obligations) -> None:
    (ob,) = by_line(guard_obligations, 23)
    assert ob.verdict is Verdict.PROVED and ob.method == "trivial"


def test_periodic_loop_checks_one_period(guard_obligations) -> None:
    (ob,) = by_line(guard_obligations, 26)
    assert ob.verdict is Verdict.PROVED
    assert "period 32" in ob.evidence["iterations"]["j"]
    assert ob.evidence["warp_accesses"] == 2 * 32  # 2 warps x one period


def test_cut_non_periodic_loop_is_unknown(guard_obligations) -> None:
    (ob,) = by_line(guard_obligations, 29)
    assert ob.verdict is Verdict.UNKNOWN and ob.code == "TS690"
    assert "first 256 of 300" in ob.evidence["iterations"]["j"]


def test_data_dependent_index_is_unknown() -> None:
    k = load_program(BAD).kernels[0]
    # The frontend refuses such an index (TS023), so build the IR by hand: t[src[0, 0], c]
    loop = k.body[2]
    store = loop.body[1]
    load_ = store.value
    data = ir.Load(NO_SPAN, ir.ScalarType.FLOAT, "src", ir.Space.GLOBAL,
                   (ir.IntConst(NO_SPAN, INT, 0), ir.IntConst(NO_SPAN, INT, 0)))
    new_load = ir.Load(load_.span, load_.type, load_.tensor, load_.space,
                       (data, load_.indices[1]))
    new_store = ir.Store(store.span, store.tensor, store.space, store.indices, new_load)
    new_loop = ir.For(loop.span, loop.var, loop.lo, loop.hi, loop.step,
                      (loop.body[0], new_store))
    k2 = ir.Kernel(k.span, k.name, k.sizes, k.params, k.where, k.grid, k.block, k.consts,
                   k.shared, k.tensormaps, k.barriers, k.body[:2] + (new_loop,))
    (ob,) = by_line(run(k2), 22)
    assert ob.verdict is Verdict.UNKNOWN and ob.code == "TS690"
    assert "depends on data" in ob.message and ob.severity is Severity.WARNING


def test_pipeline_ring_index_is_periodic() -> None:
    (ob,) = run(load_program(GOOD / "pipeline2.tsk").kernels[0])
    assert ob.verdict is Verdict.PROVED
    assert "period 2" in ob.evidence["iterations"]["k"]
    assert ob.evidence["sizes"]["N"] // 64 >= 2  # the ring really wraps at these sizes


# ---- brute force: random 2-D patterns ----------------------------------------------------

ELEM = {"f32": 4, "f16": 2, "u8": 1}


@st.composite
def patterns(draw: st.DrawFn) -> dict:
    return {
        "dtype": draw(st.sampled_from(sorted(ELEM))),
        "rows": draw(st.integers(1, 16)),
        "cols": draw(st.integers(1, 48)),
        "pad": draw(st.sampled_from([0, 0, 1, 2, 4])),
        "warps": draw(st.integers(1, 2)),
        "iters": draw(st.integers(1, 3)),
        "ra": draw(st.integers(0, 9)), "rb": draw(st.integers(0, 5)),
        "rw": draw(st.integers(0, 3)), "rc": draw(st.integers(0, 7)),
        "ca": draw(st.integers(0, 9)), "cb": draw(st.integers(0, 5)),
        "cc": draw(st.integers(0, 7)),
        "m": draw(st.integers(1, 8)),
        "h": draw(st.integers(1, 8)),
    }


def _source(p: dict) -> str:
    layout = "row_major" if p["pad"] == 0 else f"padded(row_major, {p['pad']})"
    value = "1" if p["dtype"] == "u8" else "1.0"
    row = f"({p['ra']} * lane + {p['rb']} * it + {p['rw']} * warp_id + {p['rc']}) % {p['rows']}"
    col = f"({p['ca']} * lane + {p['cb']} * it + {p['cc']}) % {p['cols']}"
    return f"""
kernel brute(o: global f32[1])
  grid (1) block {32 * p['warps']}
{{
  shared t: {p['dtype']}[{p['rows']}, {p['cols']}] layout {layout}
  for it in 0 .. {p['iters']} {{
    if lane % {p['m']} < {p['h']} {{
      t[{row}, {col}] = {value}
    }}
  }}
}}
"""


def _expected(p: dict) -> int:
    eb, stride = ELEM[p["dtype"]], p["cols"] + p["pad"]
    worst = 0
    for w in range(p["warps"]):
        for it in range(p["iters"]):
            words = []
            for lane in range(32):
                if lane % p["m"] >= p["h"]:
                    continue
                r = (p["ra"] * lane + p["rb"] * it + p["rw"] * w + p["rc"]) % p["rows"]
                c = (p["ca"] * lane + p["cb"] * it + p["cc"]) % p["cols"]
                words.append((r * stride + c) * eb // 4)
            worst = max(worst, degree(words))
    return worst


@settings(max_examples=40, deadline=None)
@given(patterns())
def test_degree_matches_brute_force(p: dict) -> None:
    (ob,) = run(kernel_of(_source(p)), suggest=False)
    want = _expected(p)
    assert ob.evidence["worst_way"] == want
    if want == 1:
        assert ob.verdict is Verdict.PROVED
    else:
        assert ob.verdict is Verdict.REFUTED and ob.code == "TS601"
        assert ob.counterexample["degree"] == want
        assert f"{want}-way" in ob.message


# ---- the periodicity argument against evaluation ----------------------------------------

V = ir.LoopVar(NO_SPAN, INT, "v", 1)


def _const(n: int) -> ir.Expr:
    return ir.IntConst(NO_SPAN, INT, n)


def _exprs() -> st.SearchStrategy[ir.Expr]:
    leaves = st.one_of(st.just(V), st.integers(-3, 9).map(_const))

    def grow(sub: st.SearchStrategy[ir.Expr]) -> st.SearchStrategy[ir.Expr]:
        return st.one_of(
            st.tuples(st.sampled_from(["+", "-"]), sub, sub).map(
                lambda t: ir.BinOp(NO_SPAN, INT, t[0], t[1], t[2])),
            st.tuples(sub, st.integers(-3, 5)).map(
                lambda t: ir.BinOp(NO_SPAN, INT, "*", t[0], _const(t[1]))),
            st.tuples(st.sampled_from(["/", "%"]), sub, st.integers(1, 8)).map(
                lambda t: ir.BinOp(NO_SPAN, INT, t[0], t[1], _const(t[2]))),
            st.tuples(st.sampled_from(["min", "max"]), sub, sub).map(
                lambda t: ir.Call(NO_SPAN, INT, t[0], (t[1], t[2]))),
        )

    return st.recursive(leaves, grow, max_leaves=8)


@settings(max_examples=150, deadline=None)
@given(_exprs())
def test_claimed_periods_hold(e: ir.Expr) -> None:
    kind = bank_sites.period_in(e, 1, {})
    f = bank_sites.compile_expr(e, {})
    env = bank_sites.LaneEnv({})

    def at(v: int) -> int:
        env.loops[1] = v
        return f(env)

    if kind is None:
        return
    name, p = kind
    vs = range(-40, 120)
    if name == "const":
        assert len({at(v) for v in vs}) == 1
    elif name == "per":
        assert all(at(v + p) == at(v) for v in vs)
    else:
        assert len({at(v + p) - at(v) for v in vs}) == 1
