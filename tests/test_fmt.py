"""The formatter: canonical output, idempotence, same meaning (IR up to spans), and every
comment kept (and kept near what it talks about)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tilesafe.frontend import ast
from tilesafe.frontend.diagnostics import DiagnosticError
from tilesafe.frontend.fmt import format_expr, format_source, without_spans
from tilesafe.frontend.parser import parse
from tilesafe.frontend.resolve import resolve

ROOT = Path(__file__).resolve().parent.parent
CORPUS_FILES = sorted((ROOT / "corpus").glob("*/*.tsk"))
GOOD_FILES = sorted((ROOT / "corpus" / "good").glob("*.tsk"))


def ir_of(text: str):
    return without_spans(resolve(parse(text, "same.tsk")))


def check_roundtrip(text: str) -> str:
    """Format; the result must be a fixed point, keep every comment, and mean the same."""
    out = format_source(text, "same.tsk")
    assert format_source(out, "same.tsk") == out, "not idempotent"
    before, after = parse(text, "same.tsk"), parse(out, "same.tsk")
    assert [c.text.rstrip() for c in before.comments] == [c.text.rstrip()
                                                          for c in after.comments]
    try:
        meaning = without_spans(resolve(before))
    except DiagnosticError:
        return out
    assert without_spans(resolve(after)) == meaning, "formatting changed the IR"
    return out


@pytest.mark.parametrize("path", GOOD_FILES, ids=[p.name for p in GOOD_FILES])
def test_good_corpus_roundtrip(path: Path):
    text = path.read_text()
    out = check_roundtrip(text)
    ir_of(out)  # still resolves
    assert out == text, "corpus/good is kept in canonical form: run `tilesafe fmt` on it"


@pytest.mark.parametrize("path", CORPUS_FILES, ids=[f"{p.parent.name}/{p.name}"
                                                    for p in CORPUS_FILES])
def test_corpus_roundtrip_when_it_parses(path: Path):
    text = path.read_text()
    try:
        parse(text, "x.tsk")
    except DiagnosticError:
        pytest.skip("does not parse (a syntax-error corpus file)")
    check_roundtrip(text)


def test_corpus_is_not_empty():
    assert CORPUS_FILES, "no corpus files found"


# ---- canonical style -----------------------------------------------------------------------

MESSY = """// header comment
kernel   pipe( src : global f16[M,N],dst:global f16[M , N] )
where M%64==0,N%64==0 grid (M/64) block 160 {
const STAGES=2;
tensormap tin=tiled(src,box[64,64],swizzle 128B)
shared buf : f16[STAGES,64,64] layout swizzle128B( row_major ) align 1024
mbarrier full[STAGES] count 1 guards buf[ i ]
if thread==0 { init full; fence mbarrier_init } sync
role producer=warp 0,elect one { for k in 0..N/64 { let s=k%STAGES
arrive full[s],expect_tx bytes(buf[s]); tma_load buf[s]<-tin[block.x*64,k*64] signal full[s] } }
role consumer = warps 1..5 { for k in 0..N/64 step 1 {
wait full[k%STAGES] parity ((k/STAGES)%2)
}}}
"""

CANONICAL = """// header comment
kernel pipe(src: global f16[M, N], dst: global f16[M, N])
  where M % 64 == 0, N % 64 == 0
  grid (M / 64) block 160
{
  const STAGES = 2
  tensormap tin = tiled(src, box [64, 64], swizzle 128B)
  shared buf: f16[STAGES, 64, 64] layout swizzle128B(row_major) align 1024
  mbarrier full[STAGES] count 1 guards buf[i]
  if thread == 0 {
    init full
    fence mbarrier_init
  }
  sync
  role producer = warp 0, elect one {
    for k in 0 .. N / 64 {
      let s = k % STAGES
      arrive full[s], expect_tx bytes(buf[s])
      tma_load buf[s] <- tin[block.x * 64, k * 64] signal full[s]
    }
  }
  role consumer = warps 1 .. 5 {
    for k in 0 .. N / 64 step 1 {
      wait full[k % STAGES] parity (k / STAGES) % 2
    }
  }
}
"""


def test_canonical_layout():
    assert check_roundtrip(MESSY) == CANONICAL


def test_canonical_is_fixed_point():
    assert format_source(CANONICAL) == CANONICAL


def _expr(text: str) -> ast.Expr:
    module = parse(f"kernel k() grid 1 block 32 {{\n  let e = {text}\n}}\n")
    stmt = module.kernels[0].body.stmts[0]
    assert isinstance(stmt, ast.Let)
    return stmt.value


@pytest.mark.parametrize(("src", "want"), [
    ("(a + b) * c", "(a + b) * c"),
    ("a + (b * c)", "a + b * c"),
    ("(a + b) + c", "a + b + c"),
    ("a + (b + c)", "a + (b + c)"),
    ("a - (b - c)", "a - (b - c)"),
    ("(a - b) - c", "a - b - c"),
    ("a / (b * 2)", "a / (b * 2)"),
    ("(a / 2) % 2", "(a / 2) % 2"),  # kept: floor division reads ambiguously without them
    ("a / 2 / 2", "a / 2 / 2"),
    ("(a * 4) / 3", "(a * 4) / 3"),
    ("(a * 4) * 3", "a * 4 * 3"),
    ("a % (2 / 2)", "a % (2 / 2)"),
    ("-(a + b)", "-(a + b)"),
    ("(-a) * b", "-a * b"),
    ("-(a * b)", "-(a * b)"),
    ("- -a", "- -a"),
    ("-(-3)", "- -3"),
    ("a - -b", "a - -b"),
    ("!(a < b)", "!a < b"),
    ("!(a < b && c)", "!(a < b && c)"),
    ("(a < b) && (c < d)", "a < b && c < d"),
    ("(a < b || c < d) && e < f", "(a < b || c < d) && e < f"),
    ("a < b || (c < d && e < f)", "a < b || c < d && e < f"),
    ("a < b || (c < d || e < f)", "a < b || (c < d || e < f)"),
    ("((a))", "a"),
    ("(a + 1) < (b * 2)", "a + 1 < b * 2"),
    ("(a < b) == (c < d)", "(a < b) == (c < d)"),
    ("min((a), max(b, (c + 1)))", "min(a, max(b, c + 1))"),
    ("t[(i + 1) * 2, (j)]", "t[(i + 1) * 2, j]"),
    ("block.x * (64)", "block.x * 64"),
    ("1.50 * (2.0e3)", "1.50 * 2.0e3"),
    ("!!(a == 1)", "!!a == 1"),
])
def test_minimal_parentheses(src: str, want: str):
    got = format_expr(_expr(src))
    assert got == want
    assert without_spans(_expr(got)) == without_spans(_expr(src))


# ---- comments ------------------------------------------------------------------------------

COMMENTED = """/* file
   header */

// kernel doc
kernel a(x: global f32[N], // input
         y: global f32[N])
  // constraints
  where N > 0 /* positive */, N % 32 == 0
  grid (N / 32) block 32 // one warp
{ // body
  const C = 4; // four


  let q = (1 + 2) * 3 // trailing
  var acc: f32 = 0.0
  for i in 0..C { // loop head
    acc += x[block.x * 32 + i] /* inline */ * 2.0
    // last in loop
  } // after loop
  if q > 0 {} else {
    // only a comment
  }
  if q > 1 { acc = 1.0 } // then
  else if q < 0 {
     acc = -acc
  }
  // before else
  else { acc = - -acc; }
  y[block.x * 32 + thread] =
     // inside a statement
     acc
  // end of body
}
// between kernels

kernel b() grid 1 block 32 { sync /* one */ /* two */ // three
  /* four */ sync }
// at the end
"""

COMMENTED_CANONICAL = """/* file
   header */

// kernel doc
kernel a(x: global f32[N], y: global f32[N]) // input
  // constraints
  where N > 0, N % 32 == 0 /* positive */
  grid (N / 32) block 32 // one warp
{ // body
  const C = 4 // four

  let q = (1 + 2) * 3 // trailing
  var acc: f32 = 0.0
  for i in 0 .. C { // loop head
    acc += x[block.x * 32 + i] * 2.0 /* inline */
    // last in loop
  } // after loop
  if q > 0 {
  } else {
    // only a comment
  }
  if q > 1 {
    acc = 1.0
  } else if q < 0 { // then
    acc = -acc
  } else { // before else
    acc = - -acc
  }
  y[block.x * 32 + thread] = acc // inside a statement
  // end of body
}

// between kernels

kernel b()
  grid 1 block 32
{
  sync /* one */ /* two */ // three
  /* four */
  sync
}
// at the end
"""


def test_comments_kept_in_place():
    assert check_roundtrip(COMMENTED) == COMMENTED_CANONICAL


def test_two_line_comments_on_one_output_line_do_not_merge():
    text = ("kernel a(x: global f32[N], // one\n         y: global f32[N]) // two\n"
            "  grid 1 block 32\n{\n}\n")
    out = check_roundtrip(text)
    assert out == ("kernel a(x: global f32[N], y: global f32[N]) // one\n  // two\n"
                   "  grid 1 block 32\n{\n}\n")


def test_comment_only_file_is_not_a_module():
    # The grammar needs at least one kernel; fmt reports it rather than printing nothing.
    with pytest.raises(DiagnosticError) as err:
        format_source("// nothing here\n")
    assert err.value.diagnostics[0].code == "TS003"


def test_trailing_whitespace_of_line_comments_dropped():
    out = check_roundtrip("kernel a() grid 1 block 32 {\n  sync // x   \n}\n")
    assert "// x\n" in out


def test_blank_lines_collapse_to_one_and_never_open_a_block():
    text = "kernel a() grid 1 block 32 {\n\n\n  sync\n\n\n\n  sync\n\n}\n"
    assert check_roundtrip(text) == "kernel a()\n  grid 1 block 32\n{\n  sync\n\n  sync\n}\n"


def test_empty_blocks_compact():
    text = "kernel a() grid 1 block 32 {\n  for i in 0 .. 2 { }\n  role r = warp 0 {\n  }\n}\n"
    assert check_roundtrip(text) == ("kernel a()\n  grid 1 block 32\n{\n  for i in 0 .. 2 {}\n"
                                     "  role r = warp 0 {}\n}\n")


def test_keyword_named_variable_keeps_its_separator():
    # `read` and `guards` are keywords in some positions: without the `;` the statement
    # before would swallow them.
    text = ("kernel a() grid 1 block 32 {\n  var read: i32 = 0\n"
            "  wait_group 1; read = 2\n}\n")
    out = check_roundtrip(text)
    assert "wait_group 1;\n  read = 2\n" in out


def test_long_store_wraps_after_equals():
    idx = " + ".join(["i"] * 30)
    text = f"kernel a(x: global f32[N]) grid 1 block 32 {{\n  let i = 0\n  x[0] = x[{idx}]\n}}\n"
    out = check_roundtrip(text)
    assert f"  x[0] =\n    x[{idx}]\n" in out


def test_all_statement_forms_roundtrip():
    text = """kernel every(src: global f16[M, N], dst: global f16[M, N], v: global i32[N])
  where M % 64 == 0, N % 64 == 0, M > 0, N > 0
  grid (M / 64, N / 64, 1) block 128
{
  const S = 2
  tensormap tin = tiled(src, box [64, 64], swizzle 128B, oob nan)
  tensormap tout = tiled(dst, box [64, 64])
  shared buf: f16[S, 64, 64] layout swizzle128B(row_major) align 1024
  shared t2: f16[64, 64] layout padded(col_major, 8)
  shared t3: f16[64, 64] layout linear((1,2,4,8,16,32), (64,128,256,512,1024,2048))
  mbarrier full[S] count 1 guards buf[i]
  mbarrier one count 4 guards t2
  mbarrier plain count 1
  if thread == 0 { init full; init one; init plain[0 + 0] ; fence mbarrier_init }
  sync
  var acc: f32 = 0.0
  role prod = threads 0 .. 32, elect one {
    for k in 0 .. N / 64 step 2 {
      wait full[k % S] parity (k / S + 1) % 2
      expect_tx full[k % S], bytes(buf[k % S])
      arrive full[k % S]
      tma_load buf[k % S] <- tin[block.x * 64, k * 64] signal full[k % S]
    }
  }
  role cons = warps 1 .. 4 {
    arrive one, one per warp
    arrive one, one
    arrive plain, expect_tx 0
    acc += f32(v[lane]) * 2.0
    acc -= 1.0
    acc *= abs(-1.5)
    if lane < 4 { acc = 0.0 } else if lane > 8 { acc = 1.0 } else { acc = max(acc, 0.5) }
    fence proxy_async
    tma_store tout[block.x * 64, block.y * 64] <- t2
    commit_group
    wait_group 0 read
    wait_group 0
    v[lane] = i32(acc) % 7
  }
}
"""
    out = check_roundtrip(text)
    assert "role prod = threads 0 .. 32, elect one {" in out
    assert "  grid (M / 64, N / 64, 1) block 128\n" in out
    assert "tensormap tin = tiled(src, box [64, 64], swizzle 128B, oob nan)" in out
    assert "layout linear((1,2,4,8,16,32), (64,128,256,512,1024,2048))" in out
    assert "} else if lane > 8 {" in out


def test_file_that_does_not_type_check_still_formats():
    text = "kernel a() grid 1 block 32 { let x = nope   + 1 }\n"
    out = format_source(text)
    assert out == "kernel a()\n  grid 1 block 32\n{\n  let x = nope + 1\n}\n"


def test_syntax_error_is_a_diagnostic():
    with pytest.raises(DiagnosticError) as err:
        format_source("kernel a( {")
    assert err.value.diagnostics[0].code == "TS001"
