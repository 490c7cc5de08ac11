"""The corpus contract (docs/corpus.md): every corpus/good file lints clean; every corpus/bad
file reports exactly its planted code.

Adding a case is adding a file: this test walks both folders at collection time.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from corpus_files import SLOW_BAD

from tilesafe import api
from tilesafe.checkers import registry
from tilesafe.checkers.obligation import Severity, Verdict
from tilesafe.frontend.diagnostics import DiagnosticError

ROOT = Path(__file__).resolve().parent.parent
GOOD = sorted((ROOT / "corpus" / "good").glob("*.tsk"))
BAD = sorted((ROOT / "corpus" / "bad").glob("*.tsk"))

EXPECT = re.compile(r"//\s*expect:\s*(TS\d{3})(?:\s+at\s+(\d+))?\s*$")
# `// target: gfx942` on the second line: the bug is one of that machine (frontend/target.py)
TARGET = re.compile(r"//\s*target:\s*(\S+)\s*$")

# Which checkers may report a code family (the hundreds digit); a TS1xx+ bad file is skipped
# (not passed) until a registered checker's name starts with one of these words.
FAMILIES = {
    "1": ("layout",),
    "2": ("access", "bounds", "coverage"),
    "3": ("ownership", "race", "proxy"),
    "4": ("barrier", "mbarrier", "protocol"),
    "5": ("tma", "mma"),
    "6": ("bank", "perf", "vector"),
    "8": ("value", "spec"),
}


def expectation(path: Path) -> tuple[str, int | None]:
    first = path.read_text(encoding="utf-8").splitlines()[0] if path.stat().st_size else ""
    m = EXPECT.match(first.strip())
    assert m, f"{path.name}: first line must be '// expect: TSnnn [at LINE]', got {first!r}"
    return m.group(1), int(m.group(2)) if m.group(2) else None


def target_of(path: Path) -> str | None:
    lines = path.read_text(encoding="utf-8").splitlines()[1:2]
    m = TARGET.match(lines[0].strip()) if lines else None
    return m.group(1) if m else None


@pytest.mark.parametrize("path", GOOD, ids=[p.name for p in GOOD])
def test_good_lints_clean(path: Path):
    diags = api.lint(path)
    assert diags == [], "\n".join(d.headline() for d in diags)


@pytest.mark.parametrize("path", BAD, ids=[p.name for p in BAD])
def test_bad_name_matches_expectation(path: Path):
    code, _ = expectation(path)
    assert path.name.lower().startswith(code.lower() + "_"), (
        f"{path.name}: name it {code.lower()}_<what>.tsk")


BAD_CASES = [pytest.param(p, id=p.name, marks=pytest.mark.slow if p.name in SLOW_BAD else ())
             for p in BAD]


@pytest.mark.parametrize("path", BAD_CASES)
def test_bad_reports_exactly_its_code(path: Path):
    code, line = expectation(path)
    target = target_of(path)
    diags = [d for d in api.lint(path, target=target) if d.severity == "error"]
    if int(code[2:]) < 100:
        # A frontend code: lint reports it, and nothing else.
        got = sorted({d.code for d in diags})
        assert got == [code], "\n".join(d.headline() for d in diags) or "lint was clean"
        if line is not None:
            lines = sorted(d.span.line for d in diags)
            assert line in lines, f"{code} reported at lines {lines}, expected at {line}"
        return
    # A checker code: the file must lint clean, then verify must refute it.
    assert diags == [], "\n".join(d.headline() for d in diags)
    family = FAMILIES.get(code[2], ())
    if not any(name.startswith(family) for name in registry.CHECKERS):
        pytest.skip(f"no registered checker reports {code[:3]}xx codes yet")
    try:
        obligations = api.verify(path, target=target)
    except DiagnosticError as err:  # pragma: no cover - lint was clean above
        pytest.fail("\n".join(d.headline() for d in err.diagnostics))
    # What counts as "reported": every error-severity obligation not proved, plus the
    # warnings of the expected code's own family (TS6xx performance lints are warnings).
    failing = [o for o in obligations if o.verdict is not Verdict.PROVED
               and (o.severity is Severity.ERROR or (o.code or "")[:3] == code[:3])]
    shown = "\n".join(f"{o.code} {o.verdict.value} {o.name}: {o.message}" for o in failing)
    assert {o.code for o in failing} == {code}, shown or "verify found nothing"
    refuted = [o for o in failing if o.verdict is Verdict.REFUTED]
    assert refuted, f"{code} only as 'unknown', never refuted:\n{shown}"
    if line is not None:
        lines = sorted(o.span.line for o in refuted if o.span is not None)
        assert line in lines, f"{code} refuted at lines {lines}, expected at {line}"


def test_corpus_has_frontend_bad_cases():
    frontend = [p for p in BAD if int(expectation(p)[0][2:]) < 100]
    assert len(frontend) >= 12
