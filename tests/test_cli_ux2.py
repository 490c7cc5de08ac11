"""Output a new user can trust (issue 17, item 6): a refutation's follow-ons under it, not
beside it; SARIF ruleIds from the catalogue; an unreadable file reported once; equiv's
records, dtype text and replay commands; swimlane labels whole; the README's --only list;
TS517 (a TMA box wholly outside its tensor) proved on every good kernel and refuted on the
planted one, cross-checked by enumeration."""

from __future__ import annotations

import argparse
import io
import itertools
import json
import os
import re
import shlex
import subprocess
from pathlib import Path

import islpy as isl
import numpy as np
import pytest
from corpus_files import SLOW_BAD
from hypothesis import given, settings
from hypothesis import strategies as st

from tilesafe import api, cli
from tilesafe.checkers import followon
from tilesafe.checkers.obligation import Obligation, Severity, Verdict
from tilesafe.checkers.registry import CHECKERS
from tilesafe.frontend.span import Span
from tilesafe.proofs import report
from tilesafe.proofs.codes import CODES
from tilesafe.report import svg
from tilesafe.semantics.access import tma_boxes
from tilesafe.semantics.access.access import collect

ROOT = Path(__file__).resolve().parent.parent
GOOD = ROOT / "corpus" / "good"
BAD = ROOT / "corpus" / "bad"
PARITY = BAD / "ts304_wrong_wait_parity.tsk"
OVERGRID = BAD / "ts517_grid_twice_the_tiles.tsk"
ELEMENTWISE = GOOD / "elementwise.tsk"


def run_cli(*args: object) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = cli.main([str(a) for a in args], stdout=out, stderr=err, stdin=io.StringIO(""))
    return code, out.getvalue(), err.getvalue()


# ---- follow-ons ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def parity() -> list[Obligation]:
    return api.verify(PARITY)


def test_planted_bug_prints_one_finding_with_its_follow_ons_counted(parity):
    code, out, _ = run_cli("verify", PARITY)
    assert code == 1
    lines = out.splitlines()
    findings = [ln for ln in lines if not ln.startswith(" ")][:-1]  # the last is the summary
    assert len(findings) == 1 and "TS304 error" in findings[0], out
    follow = [o for o in parity if followon.cause_of(o) == "TS304"]
    assert len(follow) >= 10
    counted = [ln for ln in lines if ln.startswith("    + ")]
    assert len(counted) == 1 and f"+ {len(follow)} follow-ons" in counted[0]
    refuted = [o for o in follow if o.verdict is Verdict.REFUTED]
    for o in refuted:  # named with their own code, not left out
        assert f"{followon.own_code(o)} {o.name.split(': ', 1)[1]}" in counted[0]
    assert "not settled" not in "\n".join(findings) and "trace=" not in out
    assert f"{len(follow)} follow-ons of refutations" in lines[-1]
    assert lines[-1].split(", ")[2] == "1 refuted"


def test_verbose_lists_every_follow_on_under_its_refutation(parity):
    code, out, _ = run_cli("verify", "-v", PARITY)
    assert code == 1
    lines = out.splitlines()
    cause = next(i for i, ln in enumerate(lines) if "TS304 error" in ln)
    below = []
    for ln in lines[cause + 1:]:
        if not ln.startswith(" "):
            break
        below.append(ln)
    text = "\n".join(below)
    assert "trace=" in text  # the full counterexample
    for o in parity:
        if followon.cause_of(o) == "TS304":
            assert o.name.split(": ", 1)[1] in text, o.name


def test_json_nests_follow_ons_and_loses_none(parity):
    code, out, _ = run_cli("verify", "--format", "json", PARITY)
    assert code == 1
    records = [r for r in json.loads(out) if r["kind"] == "obligation"]
    nested = [f for r in records for f in r["follow_ons"]]
    assert len(records) + len(nested) == len(parity)
    assert all(r["follows_from"] is None for r in records)
    causes = [r for r in records if r["follow_ons"]]
    assert len(causes) == 1 and causes[0]["code"] == "TS304" and causes[0]["failed"]
    assert {f["follows_from"] for f in nested} == {"TS304"}
    assert all(f["kind"] == "obligation" for f in nested)


def test_sarif_keeps_follow_ons_inside_the_one_result(parity):
    code, out, _ = run_cli("verify", "--format", "sarif", PARITY)
    assert code == 1
    results = json.loads(out)["runs"][0]["results"]
    assert [r["ruleId"] for r in results] == ["TS304"]
    props = results[0]["properties"]
    follow = [o for o in parity if followon.cause_of(o) == "TS304"]
    assert len(props["followOns"]) == len(follow)
    refuted = [o for o in follow if o.verdict is Verdict.REFUTED]
    related = results[0]["relatedLocations"]
    assert len(related) == len(refuted)
    assert {loc["physicalLocation"]["region"]["startLine"] for loc in related} == \
        {o.span.line for o in refuted}


def test_only_the_follow_ons_checker_still_fails_the_kernel():
    """--only barrier leaves the ownership refutation out: its follow-ons stand on their own
    (a deadlock refuted by the barrier checker is an error), never an exit 0."""
    code, out, _ = run_cli("verify", "--only", "barrier", "--format", "json", PARITY)
    assert code == 1
    records = json.loads(out)
    assert all(r["follows_from"] is None and not r["follow_ons"] for r in records)
    assert any(r["code"] == "TS410" and r["failed"] for r in records)
    assert all(r["code"] in CODES for r in records if r["verdict"] != "proved")


def test_report_shows_follow_ons_under_their_refutation(parity):
    code, out, _ = run_cli("report", "--format", "markdown", PARITY)
    assert code == 1
    rows = [ln for ln in out.splitlines() if "| ❌" in ln or "| ❔" in ln]
    top = [r for r in rows if "follow-on" not in r]
    follow = [o for o in parity if followon.cause_of(o) == "TS304"]
    assert len(top) == 1 and "TS304" in top[0]
    assert sum("(follow-on of TS304)" in r for r in rows) == len(follow)
    assert f"| 1 | 0 | {len(follow)} |" in out  # refuted, unknown, follow-ons


def _ob(name: str, verdict: Verdict, code: str | None, severity: Severity,
        evidence: dict | None = None) -> Obligation:
    return Obligation("fake", name, verdict, "m", Span("f.tsk", 3, 1, 3, 2), code, "msg",
                      severity, evidence=evidence or {})


def test_settle_keeps_attached_follow_ons_and_frees_orphans():
    cause = _ob("c", Verdict.REFUTED, "TS304", Severity.ERROR)
    ref = _ob("r", Verdict.REFUTED, None, Severity.WARNING, followon.mark("TS304", "TS410"))
    open_ = _ob("u", Verdict.UNKNOWN, None, Severity.NOTE, followon.mark("TS304"))
    assert followon.settle([cause, ref, open_]) == [cause, ref, open_]
    alone = followon.settle([ref, open_])
    assert [(o.code, o.severity, o.failed) for o in alone] == [
        ("TS410", Severity.ERROR, True), (followon.UNSETTLED_CODE, Severity.ERROR, True)]
    assert all(followon.cause_of(o) is None for o in alone)
    # a follow-on of another kernel's refutation is not attached across kernels
    entries = [report.Entry("f.tsk", "k1", cause), report.Entry("f.tsk", "k2", ref)]
    assert [len(e.follow_ons) for e in report.nest(entries)] == [0, 0]


# ---- the bad corpus through every output format -----------------------------------------------


@pytest.fixture(scope="module")
def bad_corpus() -> tuple[list[report.Entry], list]:
    """The bad corpus through `verify`'s own path (cli.verify_entries), once (without the
    slow nested-GEMM kernels unless TILESAFE_SLOW=1: minutes of the CI's budget)."""
    files = [str(p) for p in sorted(BAD.glob("*.tsk"))
             if os.environ.get("TILESAFE_SLOW") or p.name not in SLOW_BAD]
    args = argparse.Namespace(files=files, only=None, timeout=None, max_states=None,
                              max_memory=None, query_timeout=None)
    entries, diags, _ = cli.verify_entries(args, cli._Out(io.StringIO(), io.StringIO()))
    return entries, diags


def test_every_sarif_rule_id_over_the_bad_corpus_is_a_catalogue_rule(bad_corpus):
    entries, diags = bad_corpus
    log = report.sarif_log(entries, diags)
    run = log["runs"][0]
    rules = {r["id"] for r in run["tool"]["driver"]["rules"]}
    assert rules == set(CODES)
    results = run["results"]
    assert len(results) >= len(list(BAD.glob("*.tsk")))
    for r in results:
        assert r["ruleId"] in rules, r["ruleId"]


def test_no_follow_on_of_the_bad_corpus_is_left_without_its_refutation(bad_corpus):
    entries, _ = bad_corpus
    records = report.obligation_records(entries)
    assert all(r["follows_from"] is None for r in records)
    assert sum(len(r["follow_ons"]) for r in records) == sum(
        1 for e in entries if followon.cause_of(e.obligation) is not None) > 0


ENUM_TEXT = re.compile(r"<\w+\.\w+: |\b(?:DType|ScalarType|Space|ParamRole|BuiltinKind|"
                       r"FenceKind|ArriveMode|Verdict|Severity|Via|Kind|Profile|Outcome|Ty|"
                       r"ParamKind)\.[A-Z_]+\b")


def test_no_output_prints_an_enum(bad_corpus, tmp_path):
    """Messages name dtypes, roles and spaces as the source writes them (`f16`), never as
    Python enums (`DType.F16`, `<DType.F16: 'f16'>`)."""
    entries, diags = bad_corpus
    texts = ["\n".join(report.text_lines(entries, verbose=True)),
             json.dumps(report.obligation_records(entries)),
             json.dumps(report.sarif_log(entries, diags)),
             run_cli("lint", "--format", "json", BAD)[1],
             run_cli("lint", BAD)[1]]
    f16 = tmp_path / "elementwise_f16.tsk"
    f16.write_text(ELEMENTWISE.read_text().replace("f32", "f16"))
    texts.append(run_cli("equiv", ELEMENTWISE, f16)[1])
    texts.append(run_cli("equiv", "--format", "json", ELEMENTWISE, f16)[1])
    for path in sorted(GOOD.glob("*.tsk"))[:6]:
        texts.append(run_cli("run", path, "--size", _small_sizes(path), "--format", "json")[1])
    found = [m.group(0) for t in texts for m in ENUM_TEXT.finditer(t)]
    assert found == []
    assert "f16[N]" in texts[5]  # what the equiv message says instead


def _small_sizes(path: Path) -> str:
    from tilesafe.semantics.value.spec_inputs import choose_sizes

    sizes = choose_sizes(api.load(path).kernels[0])[0]
    return ",".join(f"{k}={v}" for k, v in sizes.items())


# ---- an unreadable file ------------------------------------------------------------------------


@pytest.mark.parametrize("argv", [
    ["lint"], ["lint", "--format", "json"], ["verify"], ["verify", "--format", "json"],
    ["verify", "--format", "sarif"], ["run"], ["run", "--format", "json"], ["compile"],
    ["compile", "--format", "json"], ["report"], ["fmt"], ["fmt", "--check"], ["fmt", "--diff"],
    ["mutate"]])
def test_missing_file_is_its_diagnostic_and_exit_2(tmp_path, argv):
    missing = tmp_path / "nope.tsk"
    code, out, err = run_cli(*argv, missing)
    assert code == 2
    assert "TS004" in out + err
    if "sarif" in argv:  # the rule catalogue describes obligations; the results are TS004 only
        results = json.loads(out)["runs"][0]["results"]
        assert [r["ruleId"] for r in results] == ["TS004"]
    else:
        assert "obligation" not in out and "<html" not in out.lower()
    assert not list(tmp_path.iterdir())  # nothing written (a report, a formatted file)


def test_missing_file_text_output_is_the_diagnostic_alone(tmp_path):
    missing = tmp_path / "nope.tsk"
    for argv in (["verify"], ["lint"], ["run"], ["compile"], ["fmt"]):
        code, out, _ = run_cli(*argv, missing)
        first = out.splitlines()[0]
        assert code == 2 and first.startswith(f"{missing}:1:1: TS004 cannot read file"), out
        if argv[0] != "lint":  # lint's summary counts diagnostics, which is what it checks
            assert len(out.splitlines()) == 1, out
    code, out, _ = run_cli("equiv", missing, ELEMENTWISE)
    assert code == 2 and out.splitlines() == [f"{missing}:1:1: TS004 cannot read file: "
                                              "No such file or directory"]


def test_a_missing_file_beside_a_good_one_is_named_in_the_summary(tmp_path):
    code, out, _ = run_cli("verify", "--only", "layout", tmp_path / "nope.tsk", ELEMENTWISE)
    assert code == 2
    assert out.splitlines()[-1].endswith("; 1 file not verified (see the diagnostics above)")
    html = tmp_path / "r.html"
    code, _, err = run_cli("report", "--only", "layout", tmp_path / "nope.tsk", ELEMENTWISE,
                           "-o", html)
    assert code == 2 and "TS004" in err and "TS004" in html.read_text()


# ---- equiv -------------------------------------------------------------------------------------


def test_equiv_json_has_kind_and_a_replay_that_run_accepts(tmp_path, monkeypatch):
    minus = tmp_path / "minus.tsk"
    minus.write_text(ELEMENTWISE.read_text().replace("x[i] + y[i]", "x[i] - y[i]"))
    code, out, _ = run_cli("equiv", "--format", "json", ELEMENTWISE, minus)
    assert code == 1
    rec = json.loads(out)
    assert rec["kind"] == "equiv" and rec["verdict"] == "refuted"
    d = rec["difference"]
    monkeypatch.chdir(tmp_path)
    got = []
    for command, side in zip(d["replay"], ("a", "b"), strict=True):
        words = shlex.split(command)
        assert words[:2] == ["tilesafe", "run"]
        args = cli._parser().parse_args(words[1:])  # run's own argparse accepts it
        assert args.command == "run" and args.inputs == "distinct"
        assert run_cli(*words[1:])[0] == 0
        saved = np.load(tmp_path / f"equiv_{side}.npz")
        got.append(float(saved[f"out_{d['tensor']}"][tuple(d["element"])]))
    assert got == [d["a"], d["b"]] and got[0] != got[1]
    code, text, _ = run_cli("equiv", ELEMENTWISE, minus)
    assert d["replay"][0] in text and d["replay"][1] in text


def test_equiv_proved_and_unknown_records_have_kind(tmp_path):
    code, out, _ = run_cli("equiv", "--format", "json", ELEMENTWISE, ELEMENTWISE)
    assert code == 0 and json.loads(out)["kind"] == "equiv"


def test_run_refuses_distinct_inputs_on_the_gpu():
    code, _, err = run_cli("run", ELEMENTWISE, "--size", "N=4", "--device", "gpu",
                           "--inputs", "distinct")
    assert code == 2 and "--inputs distinct" in err


# ---- the report's swimlanes --------------------------------------------------------------------


def test_swimlane_labels_are_whole_and_fit_their_columns():
    steps = [svg.Step(1, ("producer_warpgroup_with_a_long_name",), "arrive full[0] x1", 3),
             svg.Step(2, ("consumer",), "tma_load buf signal full[0] (8192 bytes)", 4),
             svg.Step(3, ("producer_warpgroup_with_a_long_name", "consumer"),
                      "all threads meet at sync", 5),
             svg.Step(4, ("copy engine",), "TMA load lands: complete_tx 8192 bytes on full[0]",
                      0)]
    why = "waits empty[0] parity 1 (line 27) " + "x" * 200
    pic = svg.swimlanes("t", ["producer_warpgroup_with_a_long_name", "consumer", "copy engine"],
                        steps, {"consumer": why}, ["full[0]: phase 1 (parity 1)"], [])
    labels = re.findall(r'<text class="step-label"[^>]*><title>[^<]*</title>([^<]*)</text>', pic)
    assert labels == ["arrive", "tma_load", "sync", "load lands"]
    boxes = [float(w) for w in re.findall(r'<rect class="step" x="[^"]+" y="[^"]+" '
                                          r'width="([^"]+)"', pic)]
    for label, width in zip(labels, boxes, strict=True):
        assert width >= svg.text_width(label, svg.STEP_FONT), label
    lanes = re.findall(r'<text [^>]*class="lane">([^<]*)</text>', pic)
    assert lanes == ["producer_warpgroup_with_a_long_name", "consumer", "copy engine"]
    first_step = float(re.search(r'<rect class="step" x="([^"]+)"', pic).group(1))
    assert first_step >= 4 + svg.text_width(lanes[0], svg.LANE_FONT)
    shortened = re.search(r'class="why"><title>([^<]*)</title>([^<]*)</text>', pic)
    assert shortened.group(1) == why and shortened.group(2).endswith("…")


def test_report_swimlanes_of_a_real_deadlock_have_whole_labels(tmp_path):
    html = tmp_path / "r.html"
    run_cli("report", "--only", "barrier,ownership", BAD / "ts410_producer_waits_full.tsk",
            "-o", html)
    pics = re.findall(r'<svg class="pic" data-kind="swimlanes".*?</svg>', html.read_text(),
                      re.S)
    assert pics
    for pic in pics:
        for title, label in re.findall(r'<text class="step-label"[^>]*><title>([^<]*)</title>'
                                       r"([^<]*)</text>", pic):
            action = re.sub(r" \(line \d+\)$", "", title.split(". ", 1)[1])
            assert label and label == svg.step_label(action), (label, action)
            assert action.startswith(label.split()[0]) or label == "sync", (label, action)


# ---- README and .gitignore ---------------------------------------------------------------------


def test_readme_only_list_is_the_registry():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    m = re.search(r"--only takes at least one of (.*?);", readme, re.S)
    assert m, "the README no longer describes --only"
    listed = [w for w in re.split(r"[,\s]+", m.group(1)) if w and w not in ("and", "or")]
    assert listed == list(CHECKERS)


def test_compiled_ptx_is_ignored_by_git():
    r = subprocess.run(["git", "check-ignore", "-q", "pipeline2.ptx"], cwd=ROOT,
                       capture_output=True, timeout=60)
    assert r.returncode == 0


# ---- TS517: a TMA box wholly outside its tensor -------------------------------------------------


def test_no_good_kernel_copies_a_box_outside_its_tensor():
    code, out, _ = run_cli("verify", "--only", "tma", "--format", "json", GOOD)
    boxes = [r for r in json.loads(out) if "every box meets" in r.get("name", "")]
    assert len(boxes) >= 15
    assert all(r["verdict"] == "proved" for r in boxes), [r["message"] for r in boxes]


def test_planted_overgrid_is_a_warning_with_a_real_witness():
    obs = [o for o in api.verify(OVERGRID, only=("tma",)) if "every box meets" in o.name]
    assert len(obs) == 2 and all(o.verdict is Verdict.REFUTED for o in obs)
    assert all(o.code == "TS517" and o.severity is Severity.WARNING for o in obs)
    for o in obs:
        cex = o.counterexample
        assert any(c + b <= 0 or c >= s for c, b, s in
                   zip(cex["coord"], cex["box"], cex["shape"], strict=True)), cex
    assert run_cli("verify", "--only", "tma", OVERGRID)[0] == 0  # a warning exits 0
    assert run_cli("verify", "--only", "tma", "--warnings-as-errors", OVERGRID)[0] == 1


def _brute_outside(kernel, a, sizes: dict[str, int]) -> set[tuple[int, ...]]:
    """The instances of `a` at `sizes` whose box misses the tensor, by interval arithmetic
    on each instance's start (the domain enumerated point by point)."""
    ctx = a.domain.get_ctx()
    fix = isl.Set.universe(a.domain.get_space())
    for name, v in sizes.items():
        i = fix.find_dim_by_name(isl.dim_type.param, name)
        fix = fix.fix_val(isl.dim_type.param, i, isl.Val.int_from_si(ctx, v))
    shape = [_extent(e, sizes) for e in kernel.tensor(a.tensor).shape]
    out: set[tuple[int, ...]] = set()
    starts = a.origin.intersect_domain(a.domain.intersect(fix))

    def visit(point: isl.Point) -> None:
        n = a.domain.dim(isl.dim_type.set)
        vals = [point.get_coordinate_val(isl.dim_type.set, k).to_python()
                for k in range(n + len(shape))]
        inst, start = tuple(vals[:n]), vals[n:]
        if any(c + b <= 0 or c >= s for c, b, s in zip(start, a.box, shape, strict=True)):
            out.add(inst)

    starts.wrap().foreach_point(visit)
    return out


def _extent(e, sizes):
    from tilesafe.semantics.expr.affine import eval_sizes

    return eval_sizes(e, sizes)


def _isl_points(s: isl.Set, sizes: dict[str, int]) -> set[tuple[int, ...]]:
    ctx = s.get_ctx()
    for name, v in sizes.items():
        i = s.find_dim_by_name(isl.dim_type.param, name)
        s = s.fix_val(isl.dim_type.param, i, isl.Val.int_from_si(ctx, v))
    found: set[tuple[int, ...]] = set()
    s.foreach_point(lambda p: found.add(tuple(
        p.get_coordinate_val(isl.dim_type.set, k).to_python()
        for k in range(s.dim(isl.dim_type.set)))))
    return found


CROSS = [OVERGRID, GOOD / "smem_fence_tma_store.tsk", GOOD / "ragged_tma.tsk",
         GOOD / "persistent_tma_store.tsk", BAD / "ts516_box_start_unaligned.tsk"]


@pytest.mark.parametrize("path", CROSS, ids=[p.stem for p in CROSS])
def test_outside_set_agrees_with_enumeration(path):
    """The ISL set of instances whose box misses the tensor equals, at small sizes, the
    instances whose start lies past an edge by plain arithmetic."""
    from tilesafe.semantics.value.spec_inputs import choose_sizes

    kernel = api.load(path).kernels[0]
    ctx = isl.Context()
    accesses = [a for a in collect(kernel, ctx) if a.clipped]
    assert accesses
    launches = [s for s in choose_sizes(kernel) if max(s.values()) <= 512][:3]
    assert launches
    for a, sizes in itertools.product(accesses, launches):
        want = _brute_outside(kernel, a, sizes)
        assert _isl_points(tma_boxes.outside(a).possible, sizes) == want, (a.name, sizes)
    if path == OVERGRID:
        assert any(_brute_outside(kernel, a, s) for a in accesses for s in launches)


TEMPLATE = """kernel k(src: in global f32[N], dst: out global f32[N])
  where N % 16 == 0, N > 0, N <= {limit}
  grid ({grid}) block 32
{{
  tensormap tin = tiled(src, box [{box}])
  shared t: f32[{box}]
  mbarrier ready count 1 guards t
  if thread == 0 {{
    init ready
    fence mbarrier_init
  }}
  sync
  role leader = warp 0, elect one {{
    for j in 0 .. {trips} {{
      arrive ready, expect_tx bytes(t)
      tma_load t <- tin[{coord}] signal ready
      wait ready parity j % 2
    }}
  }}
}}
"""


@settings(max_examples=40, deadline=None)
@given(box=st.sampled_from([16, 32, 64]), tile=st.sampled_from([16, 32, 64]),
       grid=st.sampled_from(["N / 16", "N / 32", "(N + 63) / 64", "N / 16 + 1", "2"]),
       offset=st.sampled_from([-128, -64, -16, 0, 16, 64]), trips=st.integers(1, 3))
def test_outside_set_agrees_with_enumeration_on_generated_copies(box, tile, grid, offset,
                                                                 trips):
    """Generated 1-D copies (a grid, a tile stride, a start offset, a loop of copies): the
    instances ISL finds outside the tensor are, at every small size, exactly those whose box
    misses [0, N) by arithmetic; and the checker's verdict is refuted exactly when some
    size up to the bound has one (proved otherwise)."""
    from tilesafe.checkers import tma
    from tilesafe.checkers.registry import CheckOptions
    from tilesafe.frontend.load import load_program

    limit = 256
    coord = f"block.x * {tile} + j * {box} + {offset}".replace("+ -", "- ")
    text = TEMPLATE.format(limit=limit, grid=grid, box=box, trips=trips, coord=coord)
    kernel = load_program("gen.tsk", text).kernels[0]
    (a,) = [a for a in collect(kernel, isl.Context()) if a.clipped]
    out = tma_boxes.outside(a)
    any_outside = False
    for n in range(16, limit + 1, 16):
        want = _brute_outside(kernel, a, {"N": n})
        assert _isl_points(out.possible, {"N": n}) == want, (text, n)
        any_outside |= bool(want)
    (ob,) = [o for o in tma.check(kernel, CheckOptions()) if "every box meets" in o.name]
    assert ob.verdict is (Verdict.REFUTED if any_outside else Verdict.PROVED), text
