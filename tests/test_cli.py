"""The `tilesafe` command line: exit codes, text/JSON/SARIF output, fmt, run, and that no
input ever produces a traceback."""

from __future__ import annotations

import json
import subprocess
import sys
import types
from pathlib import Path

import numpy as np
import pytest

from tilesafe.checkers import registry
from tilesafe.checkers.obligation import Obligation, Severity, Verdict
from tilesafe.frontend.span import Span

ROOT = Path(__file__).resolve().parent.parent
GOOD = sorted((ROOT / "corpus" / "good").glob("*.tsk"))

SMALL = """// a tiny guarded copy
kernel small(x: global f32[N], y: global f32[N])
  where N > 0
  grid ((N + 63) / 64) block 64
{
  let i = block.x * 64 + thread
  if i < N {
    y[i] = x[i] * 2.0
  }
}
"""

UGLY = ("kernel small(x: global f32[N], y: global f32[N]) where N > 0 "
        "grid ((N+63)/64) block 64 {\n let i = block.x*64+thread; if i<N { y[i] = x[i]*2.0 } }\n")

OOB = SMALL.replace("if i < N", "if i <= N")


def subprocess_cli(*args: object, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tilesafe.cli", *map(str, args)],
                          capture_output=True, text=True, cwd=cwd or ROOT, timeout=300)


# ---- subprocess: the real entry point ------------------------------------------------------


def test_subprocess_lint_ok_and_error(tsk):
    good = tsk(SMALL, "good.tsk")
    bad = tsk(SMALL.replace("x[i] * 2.0", "x[i] * 2.0 +"), "bad.tsk")
    ok = subprocess_cli("lint", good)
    assert ok.returncode == 0, ok.stderr
    assert "no problems" in ok.stdout
    fail = subprocess_cli("lint", bad, "--format", "json")
    assert fail.returncode == 2
    records = json.loads(fail.stdout)
    assert [r["code"] for r in records] == ["TS001"]
    assert records[0]["line"] == 9
    assert "Traceback" not in fail.stderr + fail.stdout


def test_subprocess_usage_error_exits_2():
    proc = subprocess_cli("frobnicate")
    assert proc.returncode == 2
    assert "usage:" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_console_script_is_installed():
    import shutil

    exe = shutil.which("tilesafe")
    if exe is None:
        pytest.skip("tilesafe console script not on PATH")
    proc = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and proc.stdout.startswith("tilesafe ")


# ---- lint ----------------------------------------------------------------------------------


def test_lint_text_renders_caret_and_hint(cli, tsk):
    path = tsk(SMALL.replace("y[i] = x[i]", "y[i] = xx[i]"))
    r = cli("lint", path)
    assert r.code == 2
    first = r.out.splitlines()[0]
    assert first == f"{path}:8:12: TS010 unknown tensor 'xx'"
    assert "   8 |     y[i] = xx[i] * 2.0" in r.out
    assert "^^^^^" in r.out
    assert "= did you mean 'x'?" in r.out
    assert r.out.rstrip().endswith("1 file checked: 1 error")


def test_lint_json_records(cli, tsk):
    path = tsk(SMALL.replace("block 64", "block 0"))
    r = cli("lint", "--format", "json", path)
    assert r.code == 2
    recs = json.loads(r.out)
    assert recs == [{"kind": "diagnostic", "path": str(path), "line": 4, "col": 30,
                     "end_line": 4, "end_col": 31,
                     "code": "TS026", "severity": "error",
                     "message": "block size 0 is not in 1..1024", "hint": None}]


def test_lint_clean_json_is_empty_list(cli, tsk):
    r = cli("lint", "--format", "json", tsk(SMALL))
    assert r.code == 0 and json.loads(r.out) == []


def test_lint_missing_file(cli, tmp_path):
    r = cli("lint", tmp_path / "missing.tsk")
    assert r.code == 2
    assert "TS004 cannot read file" in r.out


def test_lint_many_files(cli, tsk):
    a = tsk(SMALL, "a.tsk")
    b = tsk(SMALL.replace("2.0", "two"), "b.tsk")
    r = cli("lint", a, b)
    assert r.code == 2
    assert f"{b}:8:19: TS010 unknown name 'two'" in r.out
    assert str(a) not in r.out
    assert "2 files checked: 1 error" in r.out


def test_lint_layout_error_is_ts030(cli, tsk):
    text = SMALL.replace("  let i", "  shared t: f16[64, 64] layout (8,8):(8,1)\n  let i")
    r = cli("lint", "--format", "json", tsk(text))
    assert r.code == 2
    assert [rec["code"] for rec in json.loads(r.out)] == ["TS030"]


@pytest.mark.parametrize("path", GOOD, ids=[p.name for p in GOOD])
def test_lint_good_corpus_in_process(cli, path):
    r = cli("lint", path)
    assert r.code == 0, r.out


# ---- fmt -----------------------------------------------------------------------------------


def test_fmt_check_then_rewrite(cli, tsk):
    path = tsk(UGLY)
    r = cli("fmt", "--check", path)
    assert r.code == 1
    assert f"would reformat {path}" in r.out
    assert path.read_text() == UGLY  # --check never writes
    r = cli("fmt", path)
    assert r.code == 0 and f"reformatted {path}" in r.out
    formatted = path.read_text()
    assert "  if i < N {\n    y[i] = x[i] * 2.0\n  }\n" in formatted
    r = cli("fmt", "--check", path)
    assert r.code == 0
    assert "0 files would be reformatted, 1 unchanged" in r.out


def test_fmt_diff_prints_unified_diff(cli, tsk):
    path = tsk(UGLY)
    r = cli("fmt", "--diff", path)
    assert r.code == 1
    assert r.out.startswith(f"--- {path}\n+++ {path}\n")
    assert "+  let i = block.x * 64 + thread" in r.out
    assert path.read_text() == UGLY


def test_fmt_syntax_error_exits_2(cli, tsk):
    path = tsk("kernel k( {")
    r = cli("fmt", path)
    assert r.code == 2 and "TS001" in r.out
    assert path.read_text() == "kernel k( {"


def test_fmt_keeps_comments(cli, tsk):
    path = tsk(SMALL)
    assert cli("fmt", path).code == 0
    assert path.read_text() == SMALL  # already canonical


def test_fmt_refuses_to_write_if_meaning_would_change(cli, tsk, monkeypatch):
    from tilesafe.frontend import fmt

    path = tsk(UGLY)
    monkeypatch.setattr(fmt, "format_module", lambda m, s: s.replace("2.0", "3.0"))
    r = cli("fmt", path)
    assert r.code == 3
    assert "internal error" in r.err and "changed the meaning" in r.err
    assert path.read_text() == UGLY


# ---- verify --------------------------------------------------------------------------------


def _fake_checker(monkeypatch, obligations):
    module = types.ModuleType("tilesafe_fake_checker")
    module.check = lambda kernel, options: list(obligations)
    monkeypatch.setitem(sys.modules, "tilesafe_fake_checker", module)
    monkeypatch.setitem(registry.CHECKERS, "fake", "tilesafe_fake_checker")


def _ob(verdict, code=None, severity=Severity.ERROR, cex=None, line=8):
    return Obligation(checker="fake", name=f"prop {verdict.value}", verdict=verdict,
                      method="isl", span=Span("f.tsk", line, 5, line, 9), code=code,
                      message="it broke" if code else "", severity=severity, seconds=0.0123,
                      counterexample=cex)


def test_verify_all_proved_exits_0(cli, tsk, monkeypatch):
    _fake_checker(monkeypatch, [_ob(Verdict.PROVED)])
    r = cli("verify", "-v", "--only", "fake", tsk(SMALL))
    assert r.code == 0, r.out
    assert "f.tsk:8:5: prop proved — proved (isl, 12.3ms)" in r.out
    assert "1 obligation, 1 proved, 0 refuted, 0 unknown; 0 failing" in r.out


def test_verify_refuted_exits_1_with_counterexample(cli, tsk, monkeypatch):
    _fake_checker(monkeypatch, [_ob(Verdict.PROVED),
                                _ob(Verdict.REFUTED, "TS201", cex={"N": 1, "thread": 3})])
    r = cli("verify", "--only", "fake", tsk(SMALL))
    assert r.code == 1
    assert "prop refuted — refuted (isl, 12.3ms): TS201 error: it broke" in r.out
    assert "    counterexample: N=1, thread=3" in r.out


def test_verify_unknown_error_exits_1(cli, tsk, monkeypatch):
    _fake_checker(monkeypatch, [_ob(Verdict.UNKNOWN, "TS299")])
    assert cli("verify", "--only", "fake", tsk(SMALL)).code == 1


def test_verify_refuted_warning_exits_0(cli, tsk, monkeypatch):
    _fake_checker(monkeypatch, [_ob(Verdict.REFUTED, "TS601", Severity.WARNING)])
    r = cli("verify", "--only", "fake", tsk(SMALL))
    assert r.code == 0
    assert "TS601 warning: it broke" in r.out
    assert "1 warning(s)" in r.out


def test_verify_json_records(cli, tsk, monkeypatch):
    _fake_checker(monkeypatch, [_ob(Verdict.REFUTED, "TS201", cex={"idx": (1, np.int64(2))})])
    path = tsk(SMALL)
    r = cli("verify", "--only", "fake", "--format", "json", path)
    assert r.code == 1
    (rec,) = json.loads(r.out)
    assert rec["kind"] == "obligation" and rec["kernel"] == "small"
    assert rec["verdict"] == "refuted" and rec["code"] == "TS201" and rec["failed"] is True
    assert rec["line"] == 8 and rec["counterexample"] == {"idx": [1, 2]}


def test_verify_sarif(cli, tsk, monkeypatch):
    _fake_checker(monkeypatch, [_ob(Verdict.PROVED), _ob(Verdict.REFUTED, "TS201", line=9)])
    r = cli("verify", "--only", "fake", "--format", "sarif", tsk(SMALL))
    assert r.code == 1
    log = json.loads(r.out)
    assert log["version"] == "2.1.0"
    results = log["runs"][0]["results"]
    assert [(x["kind"], x["level"]) for x in results] == [("fail", "error")]  # proved: none
    assert results[0]["ruleId"] == "TS201"
    region = results[0]["locations"][0]["physicalLocation"]["region"]
    assert region == {"startLine": 9, "startColumn": 5, "endLine": 9, "endColumn": 9}


def test_verify_parse_error_exits_2_in_every_format(cli, tsk):
    path = tsk("kernel k( {")
    assert cli("verify", path).code == 2
    r = cli("verify", "--format", "json", path)
    assert r.code == 2 and json.loads(r.out)[0]["code"] == "TS001"
    r = cli("verify", "--format", "sarif", path)
    assert r.code == 2
    assert json.loads(r.out)["runs"][0]["results"][0]["ruleId"] == "TS001"


def test_verify_unknown_checker_is_usage_error(cli, tsk):
    r = cli("verify", "--only", "no_such_checker", tsk(SMALL))
    assert r.code == 2
    assert "unknown checker" in r.err


def test_verify_with_registered_checkers_on_good_file(cli, tsk):
    r = cli("verify", "--format", "json", tsk(SMALL))
    recs = json.loads(r.out)
    assert all(rec["kind"] == "obligation" for rec in recs)
    failing = [rec for rec in recs if rec["failed"]]
    assert r.code == (1 if failing else 0), failing


# ---- run -----------------------------------------------------------------------------------



def test_run_prints_summary(cli, tsk):
    r = cli("run", tsk(SMALL), "--size", "N=100", "--seed", "3")
    assert r.code == 0, r.out + r.err
    lines = r.out.splitlines()
    assert lines[0].endswith("kernel small (N=100, seed 3)")
    assert any(ln.startswith("  y: f32[100]") for ln in lines)


def test_run_json_and_npz(cli, tsk, tmp_path):
    out = tmp_path / "io.npz"
    r = cli("run", tsk(SMALL), "--size", "N=70", "--format", "json", "--out", out)
    assert r.code == 0, r.out + r.err
    data = json.loads(r.out)
    assert data["ok"] is True and data["sizes"] == {"N": 70}
    assert set(data["summary"]) == {"x", "y"}
    arrays = np.load(out)
    assert sorted(arrays.files) == ["in_x", "in_y", "out_x", "out_y"]
    assert np.array_equal(arrays["out_y"], arrays["in_x"] * np.float32(2.0))
    assert np.array_equal(arrays["out_x"], arrays["in_x"])


def test_run_is_deterministic_per_seed(cli, tsk):
    path = tsk(SMALL)
    a = cli("run", path, "--size", "N=64", "--seed", "1").out
    b = cli("run", path, "--size", "N=64", "--seed", "1").out
    c = cli("run", path, "--size", "N=64", "--seed", "2").out
    assert a == b
    assert a != c


def test_run_out_of_bounds_exits_1(cli, tsk):
    r = cli("run", tsk(OOB), "--size", "N=100")
    assert r.code == 1
    assert "TS201" in r.out


def test_run_bad_sizes(cli, tsk):
    path = tsk(SMALL)
    r = cli("run", path, "--size", "N=0")
    assert r.code == 2 and "TS200" in r.out
    r = cli("run", path)
    assert r.code == 2 and "no value given for size 'N'" in r.out
    r = cli("run", path, "--size", "N=4,Q=2")
    assert r.code == 2


def test_run_malformed_size_list(cli, tsk):
    r = cli("run", tsk(SMALL), "--size", "N:4")
    assert r.code == 2
    assert "bad size 'N:4'" in r.err


def test_run_kernel_choice(cli, tsk):
    path = tsk(SMALL + SMALL.replace("small", "other"))
    r = cli("run", path, "--size", "N=4")
    assert r.code == 2 and "choose one with --kernel" in r.err
    r = cli("run", path, "--size", "N=4", "--kernel", "nope")
    assert r.code == 2 and "no kernel 'nope'" in r.err


# ---- never a traceback ---------------------------------------------------------------------


def test_internal_error_exits_3_without_traceback(cli, tsk, monkeypatch):
    from tilesafe import api

    def boom(*args, **kwargs):
        raise RuntimeError("kaboom")

    monkeypatch.setattr(api, "lint", boom)
    r = cli("lint", tsk(SMALL))
    assert r.code == 3
    assert "tilesafe: internal error: RuntimeError: kaboom" in r.err
    assert "Traceback" not in r.err + r.out


def test_debug_env_shows_traceback(cli, tsk, monkeypatch):
    from tilesafe import api

    monkeypatch.setattr(api, "lint", lambda *args, **kwargs: 1 / 0)
    monkeypatch.setenv("TILESAFE_DEBUG", "1")
    r = cli("lint", tsk(SMALL))
    assert r.code == 3 and "Traceback" in r.err and "ZeroDivisionError" in r.err


@pytest.mark.parametrize("text", ["", "\x00\x01", "kernel", "kernel k() grid 1 block 32 {",
                                  "/*", "}}}}", "kernel k() grid 1 block 32 { " * 50])
def test_garbage_never_crashes(cli, tsk, text):
    path = tsk(text)
    for args in (("lint", path), ("fmt", "--check", path), ("verify", path),
                 ("run", path, "--size", "N=1")):
        r = cli(*args)
        assert r.code == 2, (args, r.out, r.err)


def test_help_exits_0(cli, capsys):
    assert cli("--help").code == 0
    assert cli("lint", "--help").code == 0


# ---- public API ----------------------------------------------------------------------------


def test_public_api(tsk):
    import tilesafe

    path = tsk(SMALL)
    assert tilesafe.lint(path) == []
    program = tilesafe.load(path)
    assert [k.name for k in program.kernels] == ["small"]
    assert isinstance(tilesafe.verify(path), list)
    with pytest.raises(AttributeError):
        _ = tilesafe.nonexistent


def test_public_api_run(tsk):
    import tilesafe

    result = tilesafe.run(tsk(SMALL), {"N": 10}, seed=0)
    assert result.tensors["y"].shape == (10,)
