"""Fuzzing the frontend: random text and mutated corpus files must either compile or fail
with diagnostics (never another exception), and whatever parses must survive the
formatter (fixed point, same comments, same IR).

Three tests x 700 examples = 2,100 examples per run, about 30 s on two cores.
"""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tilesafe.frontend.diagnostics import DiagnosticError, render
from tilesafe.frontend.fmt import format_module, without_spans
from tilesafe.frontend.parser import parse
from tilesafe.frontend.resolve import resolve


def _load_inputs():
    """tests/ is not a package: load fuzz_inputs.py by path, whatever pytest's import mode."""
    path = Path(__file__).resolve().parent / "fuzz_inputs.py"
    spec = importlib.util.spec_from_file_location("fuzz_inputs", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("fuzz_inputs", module)
    spec.loader.exec_module(module)
    return module


_INPUTS = _load_inputs()
SEEDS, VOCAB, tokens = _INPUTS.SEEDS, _INPUTS.VOCAB, _INPUTS.tokens

FUZZ = settings(max_examples=700, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                       HealthCheck.filter_too_much])


def check_frontend(text: str) -> None:
    """The property: success or DiagnosticError; and the formatter round-trips."""
    try:
        module = parse(text, "fuzz.tsk")
    except DiagnosticError as err:
        check_diagnostics(err, text)
        return
    try:
        meaning = without_spans(resolve(module))
    except DiagnosticError as err:
        check_diagnostics(err, text)
        meaning = None
    out = format_module(module, text)
    again = parse(out, "fuzz.tsk")  # the formatter's output always parses
    assert format_module(again, out) == out, "fmt is not idempotent"
    assert len(again.comments) == len(module.comments), "fmt lost a comment"
    if meaning is not None:
        assert without_spans(resolve(again)) == meaning, "fmt changed the IR"
    else:
        try:
            resolve(again)
        except DiagnosticError:
            pass
        else:
            raise AssertionError("fmt turned a file with type errors into a valid one")


def check_diagnostics(err: DiagnosticError, text: str) -> None:
    assert err.diagnostics
    for d in err.diagnostics:
        assert re.fullmatch(r"TS0\d\d", d.code), d.code
        assert d.message
        assert d.span.line >= 0 and d.span.col >= 0
        render(d, text)  # the caret excerpt never fails


@st.composite
def mutated(draw: st.DrawFn) -> str:
    toks = tokens(draw(st.sampled_from(SEEDS)))
    for _ in range(draw(st.integers(1, 4))):
        if not toks:
            break
        i = draw(st.integers(0, len(toks) - 1))
        kind = draw(st.sampled_from(["delete", "duplicate", "swap", "insert_char",
                                     "insert_token", "replace"]))
        if kind == "delete":
            del toks[i]
        elif kind == "duplicate":
            toks.insert(i, toks[i])
        elif kind == "swap":
            j = draw(st.integers(0, len(toks) - 1))
            toks[i], toks[j] = toks[j], toks[i]
        elif kind == "insert_char":
            toks.insert(i, draw(st.characters(codec="utf-8", exclude_categories=["Cs"])))
        elif kind == "insert_token":
            toks.insert(i, draw(st.sampled_from(VOCAB)))
        else:
            toks[i] = draw(st.sampled_from(VOCAB))
    return "".join(toks)


@FUZZ
@given(mutated())
def test_mutated_corpus(text: str):
    check_frontend(text)


@FUZZ
@given(st.lists(st.sampled_from(VOCAB), max_size=60).map(" ".join))
def test_random_token_soup(text: str):
    check_frontend(text)


@FUZZ
@given(st.text(alphabet=st.sampled_from(list("kernl(){}[]<>=!+-*/%.,:;_ \n\t0123456789aAzZ\"'#@$"
                                             "\\é€\x00")) | st.characters(codec="utf-8"),
               max_size=80))
def test_random_text(text: str):
    check_frontend(text)
