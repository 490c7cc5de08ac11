"""Fuzzing the frontend: random text and mutated corpus files must either compile or fail
with diagnostics (never another exception), and whatever parses must survive the
formatter (fixed point, same comments, same IR).

Three tests x 700 examples = 2,100 examples per run, about 30 s on two cores.
"""

from __future__ import annotations

import re
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tilesafe.frontend.diagnostics import DiagnosticError, render
from tilesafe.frontend.fmt import format_module, without_spans
from tilesafe.frontend.parser import parse
from tilesafe.frontend.resolve import resolve

ROOT = Path(__file__).resolve().parent.parent
SEEDS = [p.read_text(encoding="utf-8") for p in sorted((ROOT / "corpus").glob("*/*.tsk"))]
SEEDS.append("""// every construct, so mutations reach all of the grammar
kernel every(src: global f16[M, N], dst: global f16[M, N], v: global i32[N])
  where M % 64 == 0, N % 64 == 0, M > 0 && !(N > 4096) || N == 64
  grid (M / 64, N / 64) block 128
{
  const S = 2
  tensormap tin = tiled(src, box [64, 64], swizzle 128B, oob nan)
  tensormap tout = tiled(dst, box [64, 64])
  shared buf: f16[S, 64, 64] layout swizzle128B(row_major) align 1024
  shared t2: f16[64, 64] layout ((8,8),64):((64,512),1)
  shared t3: f16[64, 64] layout Sw<3,3,3> o _0 o (_64,_64):(_64,_1)
  mbarrier full[S] count 1 guards buf[i]
  mbarrier one count 4 guards t2
  if thread == 0 { init full; init one; fence mbarrier_init }
  sync
  var acc: f32 = 0.0
  role prod = threads 0 .. 32, elect one {
    for k in 0 .. N / 64 step 2 {
      wait full[k % S] parity (k / S + 1) % 2
      expect_tx full[k % S], bytes(buf[k % S])
      arrive full[k % S], expect_tx 0
      tma_load buf[k % S] <- tin[block.x * 64, k * 64] signal full[k % S]
    }
  }
  role cons = warps 1 .. 4 {
    arrive one, one per warp
    acc += f32(v[lane]) * -2.5e0 /* inline */
    if lane < 4 { acc = 0.0 } else if lane > 8 { acc = 1.0 } else { acc = max(acc, 0.5) }
    fence proxy_async
    tma_store tout[block.x * 64, block.y * 64] <- t2
    commit_group
    wait_group 0 read
    v[lane] = i32(acc) % 7 - min(abs(lane), 3)
  }
}
""")

TOKEN = re.compile(r"\s+|//[^\n]*|/\*.*?\*/|[A-Za-z_][A-Za-z0-9_]*|[0-9]+(?:\.[0-9]+)?|"
                   r"\.\.|<-|[=!<>]=|&&|\|\||[+\-*]=|.", re.S)
VOCAB = ["kernel", "global", "where", "grid", "block", "const", "tensormap", "tiled", "box",
         "swizzle", "oob", "shared", "layout", "align", "mbarrier", "count", "guards", "let",
         "var", "for", "in", "step", "if", "else", "role", "warp", "warps", "threads", "elect",
         "one", "per", "init", "fence", "sync", "wait", "parity", "arrive", "expect_tx",
         "tma_load", "tma_store", "signal", "commit_group", "wait_group", "read", "f16", "f32",
         "i32", "bf16", "u8", "128B", "none", "zero", "nan", "mbarrier_init", "proxy_async",
         "thread", "lane", "warp_id", "min", "max", "abs", "bytes", "row_major", "M", "N", "x",
         "Sw", "o", "_0", "_64",
         "0", "1", "64", "2.5", "(", ")", "[", "]", "{", "}", ",", ":", ";", ".", "..", "<-",
         "=", "+=", "==", "!=", "<", ">=", "&&", "||", "!", "+", "-", "*", "/", "%", " ", "\n",
         "//c\n", "/*c*/", "/*", "*/"]

FUZZ = settings(max_examples=700, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                       HealthCheck.filter_too_much])


def tokens(text: str) -> list[str]:
    return TOKEN.findall(text)


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
