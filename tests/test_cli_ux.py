"""The command line as a new user meets it (issue 11, item 3): quiet by default, exit codes
as documented, -V, directories and standard input, --only, help on every option, fmt
--diff, JSON `kind`, SARIF results and rules, and the packaging promises of the README."""

from __future__ import annotations

import argparse
import io
import json
import re
import subprocess
import sys
import types
from pathlib import Path

import pytest
import tomllib

from tilesafe.checkers import registry
from tilesafe.checkers.obligation import Obligation, Severity, Verdict
from tilesafe.cli import _parser, main
from tilesafe.frontend.span import Span
from tilesafe.proofs.codes import CODES

ROOT = Path(__file__).resolve().parent.parent
GOOD = ROOT / "corpus" / "good"
BAD = ROOT / "corpus" / "bad"


def run_cli(*args: object, stdin: str = "") -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main([str(a) for a in args], stdout=out, stderr=err, stdin=io.StringIO(stdin))
    return code, out.getvalue(), err.getvalue()


def _fake(monkeypatch, obligations: list[Obligation]) -> None:
    module = types.ModuleType("tilesafe_fake_ux_checker")
    module.check = lambda kernel, options: list(obligations)
    monkeypatch.setitem(sys.modules, "tilesafe_fake_ux_checker", module)
    monkeypatch.setitem(registry.CHECKERS, "fake", "tilesafe_fake_ux_checker")


def _ob(verdict: Verdict, code: str | None = None, severity: Severity = Severity.ERROR,
        name: str = "prop", checker: str = "fake", evidence: dict | None = None,
        seconds: float = 0.01) -> Obligation:
    return Obligation(checker=checker, name=name, verdict=verdict, method="isl",
                      span=Span("f.tsk", 3, 1, 3, 5), code=code,
                      message="broken" if code else "", severity=severity, seconds=seconds,
                      evidence=evidence or {})


ELEMENTWISE = GOOD / "elementwise.tsk"


# ---- default output: failures and one summary line -----------------------------------------


def test_default_output_is_failures_and_summary(monkeypatch):
    _fake(monkeypatch, [_ob(Verdict.PROVED, name="fine"),
                        _ob(Verdict.REFUTED, "TS201", name="broken one")])
    code, out, _ = run_cli("verify", "--only", "fake", ELEMENTWISE)
    assert code == 1
    lines = out.splitlines()
    assert len(lines) == 2, out
    assert "broken one" in lines[0] and "fine" not in out
    assert lines[-1].startswith("2 obligations, 1 proved, 1 refuted")


def test_verbose_prints_proved(monkeypatch):
    _fake(monkeypatch, [_ob(Verdict.PROVED, name="fine")])
    code, out, _ = run_cli("verify", "-v", "--only", "fake", ELEMENTWISE)
    assert code == 0 and "fine — proved (isl" in out


def test_temporal_obligations_of_one_exploration_read_as_one_proof():
    code, out, _ = run_cli("verify", "-v", "--only", "barrier,ownership", ELEMENTWISE)
    assert code == 0, out
    proofs = [ln for ln in out.splitlines()[:-1]]
    grouped = [ln for ln in proofs if "temporal properties proved by one exploration" in ln]
    assert len(grouped) == 1, out
    n = int(re.search(r": (\d+) temporal properties", grouped[0]).group(1))
    assert n >= 10
    assert "deadlock-free" in grouped[0] and "read-permission" in grouped[0]
    assert f"{n} of them decided by 1 temporal exploration" in out.splitlines()[-1]
    # and not verbose: nothing but the summary
    code, out, _ = run_cli("verify", "--only", "barrier,ownership", ELEMENTWISE)
    assert len(out.splitlines()) == 1


# ---- exit codes: warnings exit 0 unless --warnings-as-errors -------------------------------


def test_warning_exits_0_and_warnings_as_errors_exits_1(monkeypatch):
    _fake(monkeypatch, [_ob(Verdict.REFUTED, "TS601", Severity.WARNING)])
    assert run_cli("verify", "--only", "fake", ELEMENTWISE)[0] == 0
    code, out, _ = run_cli("verify", "--only", "fake", "--warnings-as-errors", ELEMENTWISE)
    assert code == 1 and "1 failing" in out


def test_real_bank_conflict_warning_exit_codes():
    path = BAD / "ts601_transpose_conflict.tsk"
    assert run_cli("verify", "--only", "banks", path)[0] == 0
    assert run_cli("verify", "--only", "banks", "--warnings-as-errors", path)[0] == 1


def test_undeclared_role_warning_exit_codes(tsk):
    src = (GOOD / "elementwise.tsk").read_text().replace("in global", "global", 1)
    path = tsk(src)
    code, out, _ = run_cli("verify", "--only", "access", path)
    assert code == 0 and "TS216 warning" in out
    assert run_cli("verify", "--only", "access", "--warnings-as-errors", path)[0] == 1


def test_readme_documents_warning_exit_codes():
    readme = (ROOT / "README.md").read_text()
    table = readme[readme.index("### Exit codes"):]
    assert "--warnings-as-errors" in table and "warning" in table.split("| 1 |")[0]


# ---- -V, directories, standard input, --only -----------------------------------------------


def test_dash_V_prints_version(capsys):
    from tilesafe import __version__

    assert run_cli("-V")[0] == 0
    assert f"tilesafe {__version__}" in capsys.readouterr().out


def test_directory_is_searched_for_tsk(tmp_path):
    (tmp_path / "sub").mkdir()
    for name in ("a.tsk", "sub/b.tsk"):
        (tmp_path / name).write_text(ELEMENTWISE.read_text())
    (tmp_path / "notes.txt").write_text("not a kernel")
    code, out, _ = run_cli("lint", tmp_path)
    assert code == 0 and out.startswith("2 files checked")
    code, out, _ = run_cli("verify", "--only", "layout", tmp_path, "--format", "json")
    assert code == 0
    assert {Path(r["path"]).name for r in json.loads(out)} <= {"a.tsk", "b.tsk"}


def test_empty_directory_is_usage_error(tmp_path):
    code, _, err = run_cli("lint", tmp_path)
    assert code == 2 and "no .tsk files" in err


def test_dash_reads_standard_input():
    text = ELEMENTWISE.read_text()
    code, out, _ = run_cli("lint", "-", stdin=text)
    assert code == 0 and "1 file checked: no problems" in out
    code, out, _ = run_cli("verify", "--only", "access", "-", stdin=text)
    assert code == 0 and "proved" in out
    code, out, _ = run_cli("lint", "-", stdin=text.replace("{", "", 1))
    assert code == 2 and out.startswith("<stdin>:")


def test_fmt_standard_input_prints_formatted():
    ugly = ELEMENTWISE.read_text().replace("\n  where", " where", 1)
    code, out, _ = run_cli("fmt", "-", stdin=ugly)
    assert code == 0 and out == ELEMENTWISE.read_text()
    assert run_cli("fmt", "--check", "-", stdin=ugly)[0] == 1


def test_only_lists_checkers_in_help_and_refuses_empty():
    help_text = _sub("verify").format_help()
    for name in registry.CHECKERS:
        assert name in help_text
    for empty in ("", ",", " , "):
        code, _, err = run_cli("verify", "--only", empty, ELEMENTWISE)
        assert code == 2 and "at least one" in err


# ---- help everywhere -----------------------------------------------------------------------


def _subparsers() -> dict[str, argparse.ArgumentParser]:
    parser = _parser()
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


def _sub(name: str) -> argparse.ArgumentParser:
    return _subparsers()[name]


def test_every_subcommand_and_option_has_help():
    parser = _parser()
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    helped = {c.dest for c in action._choices_actions if c.help}
    assert helped == set(action.choices), set(action.choices) - helped
    for name, sub in action.choices.items():
        for a in sub._actions:
            assert a.help and a.help != argparse.SUPPRESS, f"{name} {a.option_strings or a.dest}"
    for a in parser._actions:
        assert a.help, a.option_strings


# ---- fmt --diff, and the bad corpus in canonical form --------------------------------------


def test_fmt_diff_exits_1_when_it_prints_a_diff(tsk):
    ugly = tsk(ELEMENTWISE.read_text().replace("\n  where", " where", 1))
    code, out, _ = run_cli("fmt", "--diff", ugly)
    assert code == 1 and out.startswith("---") and "\n+" in out
    clean = tsk(ELEMENTWISE.read_text(), "clean.tsk")
    code, out, _ = run_cli("fmt", "--diff", clean)
    assert code == 0 and out == ""


def test_bad_corpus_is_in_canonical_form():
    """Every bad kernel that parses is a fixed point of fmt (the others are syntax errors
    on purpose)."""
    from tilesafe.cli import _safe_format
    from tilesafe.frontend.diagnostics import DiagnosticError

    checked = 0
    for path in sorted(BAD.glob("*.tsk")):
        text = path.read_text(encoding="utf-8")
        try:
            assert _safe_format(str(path), text) == text, f"fmt would change {path.name}"
        except DiagnosticError:
            continue
        checked += 1
    assert checked >= 55


# ---- JSON kind, SARIF ----------------------------------------------------------------------


def test_every_json_record_has_kind(tsk):
    bad = tsk("kernel k( {", "bad.tsk")
    outputs = [run_cli("lint", "--format", "json", BAD / "ts010_barrier_typo.tsk")[1],
               run_cli("lint", "--format", "json", bad)[1],
               run_cli("verify", "--format", "json", bad)[1],
               run_cli("verify", "--only", "access", "--format", "json", ELEMENTWISE)[1],
               run_cli("run", "--format", "json", ELEMENTWISE, "--size", "N=64")[1],
               run_cli("run", "--format", "json", bad, "--size", "N=64")[1]]
    for text in outputs:
        data = json.loads(text)
        records = data if isinstance(data, list) else [data]
        assert records
        for rec in records:
            assert isinstance(rec.get("kind"), str), rec


def test_sarif_has_one_result_per_failing_obligation_and_every_rule(monkeypatch):
    _fake(monkeypatch, [_ob(Verdict.PROVED, name="a"), _ob(Verdict.REFUTED, "TS201", name="b"),
                        _ob(Verdict.UNKNOWN, "TS290", name="c"),
                        _ob(Verdict.REFUTED, "TS601", Severity.WARNING, name="d")])
    code, out, _ = run_cli("verify", "--only", "fake", "--format", "sarif", ELEMENTWISE)
    assert code == 1
    run = json.loads(out)["runs"][0]
    results = run["results"]
    assert [r["ruleId"] for r in results] == ["TS201", "TS290", "TS601"]
    assert [r["level"] for r in results] == ["error", "error", "warning"]
    rules = {r["id"] for r in run["tool"]["driver"]["rules"]}
    assert set(CODES) <= rules
    assert all(r["shortDescription"]["text"] for r in run["tool"]["driver"]["rules"])
    code, out, _ = run_cli("verify", "--only", "fake", "--format", "sarif",
                           "--warnings-as-errors", ELEMENTWISE)
    assert json.loads(out)["runs"][0]["results"][2]["level"] == "error"


def test_code_catalogue_covers_every_code_in_the_sources():
    used: set[str] = set()
    for path in (ROOT / "src" / "tilesafe").rglob("*.py"):
        used |= set(re.findall(r"\bTS\d{3}\b", path.read_text(encoding="utf-8")))
    assert used <= set(CODES), sorted(used - set(CODES))
    assert all(CODES.values())


# ---- packaging and README ------------------------------------------------------------------


def test_gpu_packages_are_in_the_gpu_extra_not_dev():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    assert any("cuda" in d for d in extras["gpu"])
    assert not any("cuda" in d for d in extras["dev"] + project["dependencies"])


def test_readme_sets_up_a_virtual_environment():
    readme = (ROOT / "README.md").read_text()
    assert "python3 -m venv .venv" in readme and "pip install -e '.[dev]'" in readme


def test_subprocess_stdin_and_version():
    r = subprocess.run([sys.executable, "-m", "tilesafe.cli", "lint", "-"], cwd=ROOT,
                       input=ELEMENTWISE.read_text(), capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    r = subprocess.run([sys.executable, "-m", "tilesafe.cli", "-V"], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0 and r.stdout.startswith("tilesafe ")


@pytest.mark.parametrize("argv", [["verify", "--only"], ["report"], ["check-certificates"]])
def test_missing_arguments_are_usage_errors(argv):
    assert run_cli(*argv)[0] == 2
