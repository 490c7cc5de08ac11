"""`ensures` specifications: the language (parse, diagnostics, fmt), the value checker on the
corpus, the refutations replayed on the interpreter, and a hypothesis cross-check of the
value-flow prover against the interpreter on generated kernels (so that a wrong encoding
cannot make a false "proved").
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tilesafe.checkers import value
from tilesafe.checkers.obligation import Severity, Verdict
from tilesafe.checkers.registry import CheckOptions
from tilesafe.frontend.diagnostics import DiagnosticError
from tilesafe.frontend.fmt import format_source
from tilesafe.frontend.load import compile_source, load_program
from tilesafe.semantics.interpreter.interp_io import tensor_shapes
from tilesafe.semantics.value import spec_eval, spec_run, valueflow
from tilesafe.semantics.value.spec_inputs import Profile, choose_sizes
from tilesafe.semantics.value.value_exec import Unsupported

ROOT = Path(__file__).resolve().parent.parent
GOOD = sorted((ROOT / "corpus" / "good").glob("*.tsk"))

# Good kernels whose every clause is proved for all sizes: all of them (a new good kernel
# whose spec is only a TS890 warning must be named here with the reason).
# pair_sums: g reads back h, a global tensor the kernel wrote; the value proof does not
# follow values through global memory, so that clause is `ensures tested`.
PROVED = {p.stem for p in GOOD} - {"pair_sums"}

HEADER = """kernel k(src: in global f32[M, N], dst: out global f32[N, M])
  where M % 32 == 0, N % 32 == 0, M > 0, N > 0, M <= 4096, N <= 4096
  grid (M / 32, N / 32) block 256
"""
BODY = """{
  shared t: f32[32, 33]
  for i in 0 .. 4 {
    let r = thread / 32 + 8 * i
    t[r, lane] = src[block.x * 32 + r, block.y * 32 + lane]
  }
  sync
  for i in 0 .. 4 {
    let c = thread / 32 + 8 * i
    dst[block.y * 32 + c, block.x * 32 + lane] = t[lane, c]
  }
}
"""


def diag(spec: str) -> tuple[str, int, int]:
    try:
        compile_source(HEADER + spec + "\n" + BODY, "t.tsk")
    except DiagnosticError as err:
        d = err.diagnostics[0]
        return d.code, d.span.line, d.span.col
    return "ok", 0, 0


# ---- the language -------------------------------------------------------------------------


@pytest.mark.parametrize("spec, code", [
    ("  ensures dst[i, j] == src[j, i]", "ok"),
    ("  ensures dst[i, j] == src[j, i] * 2.0 + f32(i)", "ok"),
    ("  ensures dst[i, j] == sum(k in 0 .. N: src[j, k])", "ok"),
    ("  ensures dst[i, j] == sum_seq(k in 0 .. j: src[k, i])", "ok"),
    ("  ensures src[i, j] == dst[j, i]", "TS040"),  # an input
    ("  ensures dst[i] == src[i, 0]", "TS020"),  # rank
    ("  ensures dst[i, i] == src[i, i]", "TS040"),  # repeated index variable
    ("  ensures dst[i, j] == src[j, i] + f32(thread)", "TS040"),  # a thread index
    ("  ensures dst[i, j] == src[block.x, i]", "TS040"),
    ("  ensures dst[i, j] == prod(k in 0 .. N: src[j, k])", "TS040"),
    ("  ensures dst[i, j] == sum(k in 0 .. N * N: src[j, 0])", "TS040"),  # not affine
    ("  ensures dst[i, j] == src[j, q]", "TS010"),
    ("  ensures dst[i, j] == i < j", "TS021"),
    ("  ensures nope[i, j] == src[j, i]", "TS010"),
    ("  ensures dst[M, j] == src[j, 0]", "TS040"),  # shadows a size
])
def test_ensures_diagnostics(spec: str, code: str):
    got = diag(spec)
    assert got[0] == code, got
    if code != "ok":
        assert got[1] == 4  # on the ensures line


def test_shared_buffer_in_a_spec_is_ts040():
    src = HEADER.replace("block 256\n", "block 256\n  ensures dst[i, j] == t[0, 0]\n") + BODY
    with pytest.raises(DiagnosticError) as err:
        compile_source(src, "t.tsk")
    assert err.value.diagnostics[0].code in ("TS040", "TS010")


def test_fmt_round_trips_ensures():
    src = HEADER + "  ensures   dst[i,j]==sum( k in 0..N : src[j,k] )*2.0\n" + BODY
    out = format_source(src, "t.tsk")
    assert "  ensures dst[i, j] == sum(k in 0 .. N: src[j, k]) * 2.0\n" in out
    assert format_source(out, "t.tsk") == out


def test_kernel_without_ensures_gets_no_value_obligation():
    k = compile_source(HEADER + BODY, "t.tsk").kernels[0]
    assert k.ensures == ()
    assert value.check(k, CheckOptions()) == []


# ---- the corpus -----------------------------------------------------------------------------


@pytest.mark.parametrize("path", GOOD, ids=[p.stem for p in GOOD])
def test_good_kernel_specs(path: Path):
    """Every clause proved -- and, since `verify` no longer runs the interpreter on a proved
    clause, cross-checked here: the interpreter agrees with the spec at the refuting half's
    launches, on plain and on special-value inputs."""
    k = load_program(path).kernels[0]
    assert k.ensures, f"{path.name} has no ensures"
    obs = value.check(k, CheckOptions())
    assert len(obs) == len(k.ensures)
    for o in obs:
        assert o.verdict is not Verdict.REFUTED, o.message
        if path.stem in PROVED:
            assert o.verdict is Verdict.PROVED, o.message
        elif o.verdict is Verdict.UNKNOWN:
            assert o.code == "TS890" and o.severity is Severity.WARNING
            assert o.evidence["launches_agreed"], "no launch compared"
    sizes = choose_sizes(k)[:3]
    for profile in (Profile.PLAIN, Profile.SPECIAL):
        for run in spec_run.check(k, sizes, profile=profile):
            assert run.runs, run.skipped
            assert run.mismatch is None, run.mismatch.describe()


@pytest.mark.parametrize("name", ["ts801_transpose_reads_row", "ts801_tma_coords_swapped",
                                  "ts802_saxpy_minus", "ts803_reduce_tree_minus",
                                  "ts804_ragged_fill_nan"])
def test_refutation_replays_on_the_interpreter(name: str):
    """The counterexample's sizes and seed rerun the interpreter; the element differs from
    the spec evaluated in numpy, and the refutation named what arrived."""
    k = load_program(ROOT / "corpus" / "bad" / f"{name}.tsk").kernels[0]
    obs = [o for o in value.check(k, CheckOptions()) if o.verdict is Verdict.REFUTED]
    assert obs and obs[0].code == name[:5].upper()
    cex = obs[0].counterexample
    spec = next(s for s in k.ensures if cex["element"].startswith(s.tensor + "["))
    exact = cex["inputs"].startswith("small integers")
    arrays, result = spec_run.replay(k, cex["sizes"], cex["seed"], exact,
                                     Profile(cex["profile"]))
    want = spec_eval.expected(k, spec, cex["sizes"], arrays, tensor_shapes(k, cex["sizes"]))
    got = result.tensors[spec.tensor]
    element = tuple(int(x) for x in cex["element"].split("[")[1].rstrip("]").split(","))
    assert not spec_run.same_bits(got, want)[element]
    if name.startswith("ts801"):
        assert cex["received"] and cex["expects"] and cex["received"] != cex["expects"]


# ---- the prover against the interpreter ------------------------------------------------------

SQUARE = """kernel k(src: in global f32[N, N], dst: out global f32[N, N])
  where N % 32 == 0, N > 0, N <= 4096
  grid (N / 32, N / 32) block 256
  ensures dst[i, j] == {spec}
{{
  shared t: f32[32, 33]
  for i in 0 .. 4 {{
    let r = thread / 32 + 8 * i
    t[{w}] = src[block.x * 32 + r, block.y * 32 + lane]
  }}
  sync
  for i in 0 .. 4 {{
    let c = thread / 32 + 8 * i
    dst[{d}] = {v}
  }}
}}
"""


@settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck))
@given(w=st.sampled_from(["r, lane", "lane, r"]),
       d=st.sampled_from(["block.y * 32 + c, block.x * 32 + lane",
                          "block.x * 32 + c, block.y * 32 + lane",
                          "block.x * 32 + lane, block.y * 32 + c"]),
       rd=st.sampled_from(["lane, c", "c, lane"]),
       op=st.sampled_from(["", " * 2.0", " + 1.0"]),
       spec=st.sampled_from(["src[j, i]", "src[i, j]", "src[j, i] * 2.0", "src[i, j] + 1.0"]))
def test_prover_agrees_with_the_interpreter(w, d, rd, op, spec):
    """Every variant is safe (square tensors, bijective index maps); whatever the prover
    says must match what the interpreter computes: proved => no mismatch at N = 64, and
    on this fragment the prover is also complete (not proved => a mismatch)."""
    src = SQUARE.format(spec=spec, w=w, d=d, v=f"t[{rd}]{op}")
    k = compile_source(src, "gen.tsk").kernels[0]
    try:
        valueflow.prove(k, k.ensures[0])
        proved = True
    except (valueflow.NotProved, Unsupported):
        proved = False
    (run,) = spec_run.check(k, [{"N": 64}])
    assert run.runs, run.skipped
    assert proved == (run.mismatch is None), (src, run.mismatch)


@pytest.mark.parametrize("edit, why", [
    ("= buf[s, idx / 64, idx % 64]", "= buf[(k + 1) % STAGES, idx / 64, idx % 64]"),
    ("wait full[s] parity (k / STAGES) % 2", "wait full[(k + 1) % STAGES] parity (k / STAGES) % 2"),
    ("tin[block.x * 64, k * 64]", "tin[block.x * 64, N - 64 - k * 64]"),
])
def test_ring_rule_rejects_mismatched_phases(edit: str, why: str):
    """pipeline2 with the consumer reading another stage than it waited for, waiting on the
    wrong element, or the producer loading the tiles in reverse: never proved."""
    src = (ROOT / "corpus" / "good" / "pipeline2.tsk").read_text().replace(edit, why)
    k = compile_source(src, "p.tsk").kernels[0]
    with pytest.raises((valueflow.NotProved, Unsupported)):
        valueflow.prove(k, k.ensures[0])


@pytest.mark.parametrize("name, edit, why", [
    ("tma_copy_ring", "tin[(block.x * TILES + k + STAGES) * 32, 0]",
     "tin[(block.x * TILES + k + STAGES - 1) * 32, 0]"),
    ("tma_copy_ring", "      tma_load buf[k] <- tin",
     "      tma_load buf[(k + 1) % STAGES] <- tin"),
    ("tma_store_pipeline", "tin[block.x * 64, (k + 1) * 64]", "tin[block.x * 64, 0]"),
])
def test_ring_sequence_rule_rejects_wrong_refills(name: str, edit: str, why: str):
    """A prologue + refill ring whose refill loads the wrong tile or fills the wrong
    stage: never proved."""
    src = (ROOT / "corpus" / "good" / f"{name}.tsk").read_text()
    assert edit in src
    k = compile_source(src.replace(edit, why), "p.tsk").kernels[0]
    with pytest.raises((valueflow.NotProved, Unsupported)):
        valueflow.prove(k, k.ensures[0])


def test_order_free_sum_multiset():
    """A row sum through a register: proved; the same with one column skipped: refuted by
    the multiset comparison (and by the interpreter)."""
    base = """kernel rs(x: in global f32[M, 64], out: out global f32[M])
  where M % 64 == 0, M > 0, M <= 4096
  grid (M / 64) block 64
  ensures out[i] == sum(j in 0 .. 64: x[i, j])
{
  var acc: f32 = 0.0
  for j in LO .. 64 {
    acc += x[block.x * 64 + thread, j]
  }
  out[block.x * 64 + thread] = acc
}
"""
    good = compile_source(base.replace("LO", "0"), "a.tsk").kernels[0]
    valueflow.prove(good, good.ensures[0])
    bad = compile_source(base.replace("LO", "1"), "b.tsk").kernels[0]
    with pytest.raises(valueflow.NotProved, match="misses"):
        valueflow.prove(bad, bad.ensures[0])
    (run,) = spec_run.check(bad, [{"M": 64}])
    assert run.mismatch is not None and run.mismatch.code == "TS803"


def test_distinct_inputs_are_distinct():
    from tilesafe.frontend import ir
    from tilesafe.semantics.value.spec_inputs import distinct_floats
    v = distinct_floats(ir.DType.F16, 4096, np.random.default_rng(1))
    assert len(set(v.astype(np.float16).tolist())) == 4096 and not (v == 0).any()


# ---- tilesafe equiv ---------------------------------------------------------------------------

DIRECT = """kernel tr(src: in global f32[M, N], dst: out global f32[N, M])
  where M % 32 == 0, N % 32 == 0, M > 0, N > 0, M <= 1048576, N <= 1048576
  grid (M / 32, N / 32) block 1024
{
  dst[block.y * 32 + thread % 32, block.x * 32 + thread / 32] =
    src[block.x * 32 + thread / 32, block.y * 32 + thread % 32]
}
"""


def test_equiv_proves_a_retiled_transpose(tmp_path: Path):
    from tilesafe.cli import main
    from tilesafe.semantics.value import equiv

    direct = tmp_path / "direct.tsk"
    direct.write_text(DIRECT)
    a = load_program(ROOT / "corpus" / "good" / "transpose_swizzled.tsk").kernels[0]
    b = load_program(direct).kernels[0]
    res = equiv.check(a, b)
    assert res.verdict == "proved", res.reason
    assert main(["equiv", str(ROOT / "corpus" / "good" / "transpose_swizzled.tsk"),
                 str(direct)]) == 0


def test_equiv_follows_named_barriers_and_rings():
    """equiv resolves shared reads with the same rules as the value proof: a named-barrier
    hand-off (named_handoff) and a TMA ring (pipeline2) against themselves with an operand
    order or a statement order changed are proved the same."""
    from tilesafe.frontend.load import compile_source
    from tilesafe.semantics.value import equiv

    text = (ROOT / "corpus" / "good" / "named_handoff.tsk").read_text()
    a = compile_source(text, "a.tsk").kernels[0]
    b = compile_source(text.replace("2.0 * buf[thread - 128]", "buf[thread - 128] * 2.0"),
                       "b.tsk").kernels[0]
    assert equiv.check(a, b).verdict == "proved"
    ring = (ROOT / "corpus" / "good" / "pipeline2.tsk").read_text()
    c = compile_source(ring, "c.tsk").kernels[0]
    assert equiv.check(c, c).verdict == "proved"


def test_equiv_distinguishing_input_replays(tmp_path: Path):
    import io
    import json

    from tilesafe.cli import main
    from tilesafe.semantics.interpreter.interp import run_kernel
    from tilesafe.semantics.value.spec_inputs import value_inputs

    good = ROOT / "corpus" / "good" / "transpose_swizzled.tsk"
    bad = ROOT / "corpus" / "bad" / "ts801_transpose_reads_row.tsk"
    buf = io.StringIO()
    assert main(["equiv", str(good), str(bad), "--format", "json"], stdout=buf) == 1
    rec = json.loads(buf.getvalue())
    assert rec["verdict"] == "refuted"
    d = rec["difference"]
    a, b = load_program(good).kernels[0], load_program(bad).kernels[0]
    arrays = value_inputs(a, d["sizes"], d["seed"], exact=False)
    ra = run_kernel(a, d["sizes"], arrays, seed=d["seed"])
    rb = run_kernel(b, d["sizes"], arrays, seed=d["seed"])
    el = tuple(d["element"])
    assert ra.tensors[d["tensor"]][el] != rb.tensors[d["tensor"]][el]


def test_equiv_needs_the_same_parameters():
    from tilesafe.semantics.value import equiv

    a = load_program(ROOT / "corpus" / "good" / "transpose_swizzled.tsk").kernels[0]
    b = load_program(ROOT / "corpus" / "good" / "elementwise.tsk").kernels[0]
    res = equiv.check(a, b)
    assert res.verdict == "unknown" and "parameters differ" in res.reason


# ---- soundness audit on planted value bugs --------------------------------------------------

_AUDIT_KERNELS = ("transpose_swizzled", "pipeline2", "tma_copy_ring", "ragged_tma",
                  "tma_store_pipeline", "cute_layout")
_AUDIT_OPS = ("index-swap", "index-drop", "coord-swap", "oob-fill", "arith-swap")


def _audit_mutants():
    from tilesafe.mutation.generate import generate

    out = []
    for name in _AUDIT_KERNELS:
        out += generate(ROOT / "corpus" / "good" / f"{name}.tsk", _AUDIT_OPS).mutants
    return out


@pytest.mark.slow  # a drawn mutant's interpreter runs can take minutes
@settings(max_examples=5, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_proved_mutants_agree_with_the_interpreter(data):
    """A mutant of a good kernel (a swapped or dropped index term, swapped TMA coordinates,
    an operator swap, a changed fill) that the value proof accepts must compute its spec
    on the interpreter, at the refuting half's launches and at the corpus test sizes."""
    from tilesafe.mutation.sizes import corpus_sizes

    mutants = _audit_mutants()
    m = data.draw(st.sampled_from(mutants))
    k = compile_source(m.text, m.path).kernels[0]
    try:
        for spec in k.ensures:
            valueflow.prove(k, spec)
    except (valueflow.NotProved, Unsupported):
        return
    sizes = list(corpus_sizes(m.path)[:2])
    for run in spec_run.check(k) + spec_run.check(k, sizes):
        assert run.mismatch is None, (m.id, run.mismatch.describe())


def test_the_proof_is_bounded_and_ends_in_unknown(monkeypatch):
    """Past its ISL operation budget the value proof stops: TS890 naming the budget (an
    error: nothing proved the spec), never a hang or a crash (and never "proved")."""
    monkeypatch.setattr(valueflow, "MAX_OPERATIONS", 100_000)
    k = load_program(ROOT / "corpus" / "good" / "row_reduce.tsk").kernels[0]
    (o,) = value.check(k, CheckOptions())
    assert o.verdict is Verdict.UNKNOWN and o.code == "TS890"
    assert o.severity is Severity.ERROR and o.failed
    assert "operation budget ran out" in o.message
    assert {a["inputs"] for a in o.evidence["launches_agreed"]} == {"plain", "special", "wide",
                                                                 "edges"}


# ---- unproved, refuted, malformed: the exit code is the contract -----------------------------

INT_ACC = """kernel thrice(x: in global i32[N], out: out global i32[N])
  where N > 0, N <= 1048576
  grid ((N + 255) / 256) block 256
  ensures {modifier}out[i] == x[i] * {factor}
{{
  let i = block.x * 256 + thread
  if i < N {{
    var acc: i32 = 0
    for j in 0 .. 3 {{
      acc += x[i]
    }}
    out[i] = acc
  }}
}}
"""


@pytest.mark.parametrize("modifier, severity", [("", Severity.ERROR),
                                                ("tested ", Severity.WARNING)])
def test_an_unproved_spec_fails_unless_accepted_as_tested(modifier: str, severity: Severity):
    """A correct kernel the prover cannot handle (an integer accumulator) and no launch
    refutes: TS890, an error -- `ensures tested` turns it into a warning."""
    k = compile_source(INT_ACC.format(modifier=modifier, factor=3), "t.tsk").kernels[0]
    assert k.ensures[0].tested is bool(modifier)
    (o,) = value.check(k, CheckOptions())
    assert o.verdict is Verdict.UNKNOWN and o.code == "TS890" and o.severity is severity
    assert o.failed is (severity is Severity.ERROR)
    assert "integer variable" in o.evidence["reason"]
    assert len(o.evidence["launches_agreed"]) >= 10


def test_a_tested_spec_is_still_refuted_when_wrong():
    k = compile_source(INT_ACC.format(modifier="tested ", factor=2), "t.tsk").kernels[0]
    (o,) = value.check(k, CheckOptions())
    assert o.verdict is Verdict.REFUTED and o.failed


def test_cli_exit_code_of_an_unproved_spec(tmp_path: Path):
    from tilesafe.cli import main

    plain, tested = tmp_path / "plain.tsk", tmp_path / "tested.tsk"
    plain.write_text(INT_ACC.format(modifier="", factor=3))
    tested.write_text(INT_ACC.format(modifier="tested ", factor=3))
    assert main(["verify", "--only", "value", str(plain)]) == 1
    assert main(["verify", "--only", "value", str(tested)]) == 0
    assert main(["compile", str(plain), "-o", str(tmp_path / "p.ptx")]) == 1


@pytest.mark.parametrize("modifier, code", [("tested ", "ok"), ("trusted ", "TS040")])
def test_ensures_modifier(modifier: str, code: str):
    got = diag(f"  ensures {modifier}dst[i, j] == src[j, i]")
    assert got[0] == code, got


def test_fmt_keeps_the_tested_modifier():
    src = HEADER + "  ensures  tested dst[i,j]==src[j,i]\n" + BODY
    out = format_source(src, "t.tsk")
    assert "  ensures tested dst[i, j] == src[j, i]\n" in out
    assert compile_source(out, "t.tsk").kernels[0].ensures[0].tested


def test_a_spec_reading_an_out_tensor_is_malformed():
    src = HEADER.replace("block 256\n", "block 256\n  ensures dst[i, j] == dst[i, j]\n") + BODY
    with pytest.raises(DiagnosticError) as err:
        compile_source(src, "t.tsk")
    assert err.value.diagnostics[0].code == "TS040"
    assert "'out' tensor" in err.value.diagnostics[0].message


@pytest.mark.parametrize("spec, outside", [
    ("dst[i, j] == src[j, i]", False),  # the transpose: src is M x N, dst N x M
    ("dst[i, j] == src[i, j]", True),  # reads src[i, j] with i < N: outside when N > M
    ("dst[i, j] == src[j, i + 1]", True),  # one past the last column
    ("dst[i, j] == src[j, i % 32 + 32]", True),  # the next tile: none when N = 32
    ("dst[i, j] == sum(k in 0 .. M + 1: src[k, i])", True),  # the sum runs one row over
    ("dst[i, j] == sum(k in 0 .. M: src[k, i])", False),
])
def test_spec_reading_outside_a_tensor_is_ts041(spec: str, outside: bool):
    """Decided by ISL for every size; cross-checked by evaluating the spec at the witness
    sizes (it must really read outside there) and at small sizes where it is in bounds."""
    from tilesafe import api
    from tilesafe.semantics.value import spec_bounds

    program = compile_source(HEADER + f"  ensures {spec}\n" + BODY, "t.tsk")
    k = program.kernels[0]
    hits = spec_bounds.outside_reads(k, k.ensures[0])
    assert bool(hits) is outside
    diags = api.spec_diagnostics(program)
    assert [d.code for d in diags] == (["TS041"] if outside else [])
    check_sizes = [hits[0].sizes] if hits else [{"M": 32, "N": 64}, {"M": 64, "N": 32}]
    for sizes in check_sizes:
        arrays = spec_run.value_inputs(k, sizes, 0, exact=True)
        try:
            spec_eval.expected(k, k.ensures[0], sizes, arrays, tensor_shapes(k, sizes))
            raised = False
        except spec_eval.SpecOutOfBounds:
            raised = True
        assert raised is outside, sizes


SPECIAL_BUGS = {
    # an extra `x * 0.0` term: equal on finite inputs, NaN where x is infinite
    "times_zero": ("""kernel k(a: in global f32[1], x: in global f32[N], z: out global f32[N])
  where N > 0, N <= 1048576
  grid ((N + 255) / 256) block 256
  ensures z[i] == a[0] * x[i] + x[i] * 0.0
{
  let i = block.x * 256 + thread
  if i < N {
    z[i] = a[0] * x[i]
  }
}
""", "special"),
    # an f16 accumulator against the spec's f32 sum: equal until a partial sum overflows f16
    "f16_accumulator": ("""kernel k(x: in global f16[M, N], out: out global f32[M])
  where M > 0, N > 0, M <= 4096, N <= 4096
  grid ((M + 255) / 256) block 256
  ensures out[i] == sum(j in 0 .. N: f32(x[i, j]))
{
  let row = block.x * 256 + thread
  if row < M {
    var acc: f16 = 0.0
    for j in 0 .. N {
      acc += x[row, j]
    }
    out[row] = f32(acc)
  }
}
""", "wide"),
}


@pytest.mark.parametrize("name", sorted(SPECIAL_BUGS))
def test_bugs_seen_only_on_special_values_are_refuted(name: str):
    text, profile = SPECIAL_BUGS[name]
    k = compile_source(text, "t.tsk").kernels[0]
    (o,) = value.check(k, CheckOptions())
    assert o.verdict is Verdict.REFUTED, o.message
    assert o.counterexample["profile"] == profile
    cex = o.counterexample
    arrays, result = spec_run.replay(k, cex["sizes"], cex["seed"],
                                     cex["inputs"].startswith("small integers"),
                                     Profile(profile))
    want = spec_eval.expected(k, k.ensures[0], cex["sizes"], arrays,
                              tensor_shapes(k, cex["sizes"]))
    assert not spec_run.same_bits(result.tensors[k.ensures[0].tensor], want).all()


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2**31), dtype=st.sampled_from(["f16", "bf16", "f32"]))
def test_special_inputs_keep_free_sums_order_independent(seed: int, dtype: str):
    """SPECIAL and WIDE inputs of an order-free sum: every summation order gives the same
    bits (so a kernel adding in another order than the spec is never refuted by them)."""
    from tilesafe.frontend import ir
    from tilesafe.semantics.value.spec_inputs import profile_values

    rng = np.random.default_rng(seed)
    for profile in (Profile.SPECIAL, Profile.WIDE):
        v = profile_values(ir.DType(dtype), 24, rng, True, profile)
        orders = [np.arange(24), np.arange(24)[::-1], rng.permutation(24)]
        sums = []
        for order in orders:
            acc = np.float32(0.0)
            with np.errstate(all="ignore"):
                for x in v[order]:
                    acc = np.float32(acc + x)
            sums.append(acc)
        assert all(spec_run.same_bits(np.array([s]), np.array([sums[0]]))[0] for s in sums)


def test_a_global_read_of_an_element_the_kernel_wrote_is_not_the_input():
    """Reading back an inout element after its (sync-ordered) in-place update sees the new
    value: the value proof must not take the load for the input's value (it proved this
    wrong spec before); the refuting search then finds the difference."""
    k = load_program(ROOT / "corpus" / "bad" / "ts802_inout_read_after_update.tsk").kernels[0]
    with pytest.raises(valueflow.NotProved, match="after writing that element"):
        valueflow.prove(k, k.ensures[0])
    valueflow.prove(k, k.ensures[1])  # the in-place update itself reads x before writing it
    obs = value.check(k, CheckOptions())
    assert [o.verdict for o in obs] == [Verdict.REFUTED, Verdict.PROVED]
