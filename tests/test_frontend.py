"""Frontend diagnostics: every TS0xx code, on small kernels with one mistake each, with the
exact line and column it must point at (and the did-you-mean hints)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tilesafe import api
from tilesafe.frontend import ir
from tilesafe.frontend.diagnostics import Diagnostic, DiagnosticError, render
from tilesafe.frontend.load import compile_source

# Line 1 is the kernel header; the body starts on line 5. The body text is indented by
# two spaces, so a statement's first column is 3.
HEADER = """kernel k(src: global f16[M, N], dst: global f16[M, N], v: global i32[N])
  where M % 64 == 0, N % 64 == 0, M > 0, N > 0
  grid (M / 64) block 128
{
"""
BODY_LINE = 5


def kernel(body: str) -> str:
    lines = body.strip("\n").splitlines()
    return HEADER + "".join(f"  {ln}\n" for ln in lines) + "}\n"


def diagnostics(text: str) -> list[Diagnostic]:
    try:
        compile_source(text, "t.tsk")
    except DiagnosticError as err:
        assert err.diagnostics, "DiagnosticError without diagnostics"
        return list(err.diagnostics)
    return []


def only(text: str) -> Diagnostic:
    diags = diagnostics(text)
    assert len(diags) == 1, [d.headline() for d in diags]
    return diags[0]


def test_header_compiles_clean():
    program = compile_source(kernel("sync"), "t.tsk")
    k = program.kernels[0]
    assert k.sizes == ("M", "N")
    assert k.block == 128
    assert isinstance(k.body[0], ir.Sync)


# (name, body, code, body line (1-based within the body), column)
BODY_CASES = [
    ("unknown name", "let a = q + 1", "TS010", 1, 11),
    ("sum outside ensures", "let a = sum(j in 0 .. 4: 1.0)", "TS040", 1, 11),
    ("unknown barrier", "mbarrier full count 1\nwait ful parity 0", "TS010", 2, 8),
    ("unknown tensor", "dts[0, 0] = 1.0", "TS010", 1, 3),
    ("unknown block axis", "let a = block.w", "TS010", 1, 11),
    ("duplicate const", "const A = 1\nconst A = 2", "TS011", 2, 3),
    ("let shadows size", "let M = 3", "TS011", 1, 3),
    ("duplicate loop var", "for i in 0 .. 2 {\n  for i in 0 .. 2 {\n  }\n}", "TS011", 2, 5),
    ("barrier used as tensor", "mbarrier b count 1\nlet x = b[0]", "TS012", 2, 11),
    ("assign to let", "let a = 1\na = 2", "TS012", 2, 3),
    ("wait on a buffer", "shared t: f16[64]\nwait t parity 0", "TS012", 2, 8),
    ("tma from a buffer", "shared t: f16[64, 64]\nshared u: f16[64, 64]\n"
     "mbarrier b count 1\ntma_load t <- u[0, 0] signal b", "TS012", 4, 3),
    ("const in a loop", "for i in 0 .. 2 {\n  const C = 1\n}", "TS013", 2, 5),
    ("mma of mismatched dtypes", "shared sa: f16[64, 16]\nshared sb: bf16[16, 64]\n"
     "fragment acc: f32[64, 64]\nwgmma acc += sa[0 : 64, 0 : 16] @ sb[0 : 16, 0 : 64]",
     "TS034", 4, 3),
    ("fragment of 60 columns", "fragment acc: f32[64, 60]", "TS035", 1, 3),
    ("shared in an if", "if thread == 0 {\n  shared t: f32[4]\n}", "TS013", 2, 5),
    ("nested role", "role a = warp 0 {\n  role b = warp 1 {\n  }\n}", "TS013", 2, 5),
    ("store rank", "dst[0] = 1.0", "TS020", 1, 3),
    ("load rank", "let a = src[1, 2, 3]", "TS020", 1, 11),
    ("box rank", "tensormap t = tiled(src, box [64])", "TS020", 1, 3),
    ("barrier not an array", "mbarrier b count 1\ninit b[0]", "TS020", 2, 8),
    ("barrier array needs index", "mbarrier b[2] count 1\nwait b parity 0", "TS020", 2, 8),
    ("let holds a condition", "let c = 1 < 2", "TS021", 1, 3),
    ("float into i32", "v[0] = 1.5", "TS021", 1, 10),
    ("var int from float", "var x: i32 = 0.5", "TS021", 1, 16),
    ("if on a number", "if 1 {\n}", "TS021", 1, 6),
    ("remainder of floats", "let a = 1.5 % 2", "TS021", 1, 11),
    ("float index", "dst[0, 1.5] = 1.0", "TS022", 1, 10),
    ("float loop step", "for i in 0 .. 4 step 1.5 {\n}", "TS022", 1, 24),
    ("product of loop vars", "for i in 0 .. 4 {\n  for j in 0 .. 4 {\n    dst[i * j, 0] = 1.0\n"
     "  }\n}", "TS023", 3, 11),
    ("division by a variable", "for i in 1 .. 4 {\n  dst[64 / i, 0] = 1.0\n}", "TS023", 2, 9),
    ("index through a var", "var i: i32 = 0\ndst[i, 0] = 1.0", "TS023", 2, 7),
    ("index from memory", "dst[v[0], 0] = 1.0", "TS023", 1, 7),
    ("non-constant extent", "shared t: f16[N]", "TS024", 1, 17),
    ("non-constant role bound", "role r = warps 0 .. N {\n}", "TS024", 1, 23),
    ("zero extent", "shared t: f16[0]", "TS026", 1, 17),
    ("bad alignment", "shared t: f16[8] align 48", "TS026", 1, 3),
    ("zero count", "mbarrier b count 0", "TS026", 1, 20),
    ("zero step", "for i in 0 .. 4 step 0 {\n}", "TS026", 1, 24),
    ("division by zero", "let a = 4 / 0", "TS026", 1, 11),
    ("unknown function", "let a = maxx(1, 2)", "TS027", 1, 11),
    ("wrong arity", "let a = min(1)", "TS027", 1, 11),
    ("bytes of an expression", "let a = bytes(1 + 2)", "TS027", 1, 11),
    ("tensormap without box", "tensormap t = tiled(src)", "TS031", 1, 3),
    ("box/buffer mismatch", "tensormap t = tiled(src, box [64, 64])\nshared b: f16[32, 64]\n"
     "mbarrier r count 1\ntma_load b <- t[0, 0] signal r", "TS031", 4, 3),
    ("role beyond block", "role r = warps 3 .. 5 {\n}", "TS032", 1, 12),
    ("empty role", "role r = threads 8 .. 8 {\n}", "TS032", 1, 12),
    ("cta_rank without a cluster", "let a = cta_rank", "TS043", 1, 11),
    ("peer buffer without a cluster", "shared t: f32[4]\nt@1[0] = 1.0", "TS043", 2, 5),
]


@pytest.mark.parametrize(("body", "code", "line", "col"),
                         [c[1:] for c in BODY_CASES], ids=[c[0] for c in BODY_CASES])
def test_body_diagnostic(body: str, code: str, line: int, col: int):
    d = only(kernel(body))
    assert d.code == code, d.headline()
    assert (d.span.line, d.span.col) == (BODY_LINE + line - 1, col), d.headline()
    assert d.span.path == "t.tsk"
    assert d.severity == "error"


def test_every_frontend_code_is_exercised():
    codes = {c[2] for c in BODY_CASES} | {"TS001", "TS002", "TS003", "TS005", "TS025",
                                          "TS030"}
    from tilesafe.frontend import diagnostics as dg

    frontend_codes = {v for k, v in vars(dg).items() if k.isupper() and isinstance(v, str)
                      and v.startswith("TS0")}
    # TS004 (unreadable file) and TS041 (a spec read outside a tensor, decided with ISL by
    # lint; tests/test_specs.py) are not resolver diagnostics; TS042 (a malformed `requires`,
    # a header clause) is exercised by tests/test_gather_frontend.py
    assert frontend_codes - {"TS004", "TS041", "TS042"} <= codes, frontend_codes - codes


def test_nesting_past_the_limit_is_ts005():
    """Exactly at 100 levels is fine; one more is TS005 at the first place past it."""
    from tilesafe.frontend.parser import MAX_NESTING

    # the kernel body (1) + the store's index (1) + a chain of n operands (n - 1)
    at_limit = " + ".join(["thread"] * (MAX_NESTING - 1))
    assert diagnostics(kernel(f"v[{at_limit}] = 1")) == []
    d = only(kernel(f"v[{at_limit} + thread] = 1"))
    assert d.code == "TS005" and (d.span.line, d.span.col) == (BODY_LINE, 3 + 2)
    assert "more than 100 levels" in d.message and "let" in d.hint


def test_did_you_mean_hints():
    d = only(kernel("mbarrier full count 1\nwait ful parity 0"))
    assert d.hint == "did you mean 'full'?"
    d = only(kernel("let a = maxx(1, 2)"))
    assert d.hint == "did you mean 'max'?"
    d = only(kernel("let total = 1\nlet b = totl + 1"))
    assert d.code == "TS010" and d.hint == "did you mean 'total'?"
    d = only(kernel("let a = zzzzz"))
    assert d.hint is None


def test_did_you_mean_sees_enclosing_scopes():
    d = only(kernel("for kk in 0 .. 4 {\n  if kk > 0 {\n    dst[k, 0] = 1.0\n  }\n}"))
    assert d.code == "TS010" and d.hint == "did you mean 'kk'?"


def test_all_problems_reported_at_once():
    diags = diagnostics(kernel("let a = q\nlet b = 1.5 % 2\ndst[0] = 1.0"))
    assert [d.code for d in diags] == ["TS010", "TS021", "TS020"]
    assert [d.span.line for d in diags] == [5, 6, 7]


def test_misplaced_declaration_does_not_cascade():
    diags = diagnostics(kernel("for i in 0 .. 2 {\n  shared t: f32[4]\n  t[i] = 1.0\n}"))
    assert [d.code for d in diags] == ["TS013"]


def test_chained_lets_stay_affine():
    program = compile_source(kernel("let base = block.x * 64\nlet row = base + thread / 2\n"
                                    "dst[row, 0] = 1.0"), "t.tsk")
    assert isinstance(program.kernels[0].body[-1], ir.Store)


# ---- syntax -------------------------------------------------------------------------------

SYNTAX_CASES = [
    ("missing ]", kernel("dst[0, 0 = 1.0"), "TS001", 5, 12),
    ("missing operand", kernel("let a = 1 +"), "TS001", 6, 1),
    ("keyword typo", kernel("wiat b parity 0"), "TS001", 5, 8),
    ("chained comparison", kernel("if 1 < 2 < 3 {\n}"), "TS001", 5, 12),
    ("no launch", "kernel k() {\n}\n", "TS001", 1, 12),
    ("stray char", kernel("let a = 1 $ 2"), "TS002", 5, 13),
    ("backtick", kernel("`sync"), "TS002", 5, 3),
    ("unclosed body", "kernel k() grid 1 block 32 {\n  sync\n", "TS003", 3, 1),
    ("empty file", "", "TS003", 1, 1),
    ("unterminated comment", kernel("sync /* never closed\nsync"), "TS003", 5, 8),
    ("unterminated comment at top", "/* hello\nkernel k() grid 1 block 32 { }", "TS003", 1, 1),
]


@pytest.mark.parametrize(("text", "code", "line", "col"),
                         [c[1:] for c in SYNTAX_CASES], ids=[c[0] for c in SYNTAX_CASES])
def test_syntax_diagnostic(text: str, code: str, line: int, col: int):
    d = only(text)
    assert d.code == code, d.headline()
    assert (d.span.line, d.span.col) == (line, col), d.headline()


def test_syntax_error_says_what_was_expected():
    d = only(kernel("dst[0, 0 = 1.0"))
    assert "unexpected '='" in d.message
    assert "']'" in d.message


def test_stray_character_names_it():
    d = only(kernel("let a = 1 $ 2"))
    assert d.message == "unexpected character '$'"


# ---- where ---------------------------------------------------------------------------------

WHERE_CASES = [
    ("product of sizes", "M * N < 100", 16),
    ("not a comparison", "M + 1", 16),
    ("divide by a size", "M / N > 0", 16),
]


@pytest.mark.parametrize(("where", "col"), [c[1:] for c in WHERE_CASES],
                         ids=[c[0] for c in WHERE_CASES])
def test_where_must_be_presburger(where: str, col: int):
    text = f"kernel k(a: global f32[M, N])\n  where M > 0, {where}\n  grid 1 block 32\n{{\n}}\n"
    d = only(text)
    assert d.code == "TS025"
    assert (d.span.line, d.span.col) == (2, col)


def test_where_presburger_accepted():
    text = ("kernel k(a: global f32[M, N])\n  where M > 0 && (N % 8 == 0 || N == 1), "
            "!(M > 4096), min(M, N) >= 1\n  grid 1 block 32\n{\n}\n")
    assert diagnostics(text) == []


# ---- kernel level --------------------------------------------------------------------------


def test_duplicate_kernel():
    text = "kernel a() grid 1 block 32 {\n}\nkernel a() grid 1 block 32 {\n}\n"
    d = only(text)
    assert d.code == "TS011" and d.span.line == 3


def test_duplicate_param():
    d = only("kernel a(x: global f32[N], x: global f32[N]) grid 1 block 32 {\n}\n")
    assert d.code == "TS011" and (d.span.line, d.span.col) == (1, 28)


def test_block_size_range():
    d = only("kernel a() grid 1 block 2048 {\n}\n")
    assert d.code == "TS026" and (d.span.line, d.span.col) == (1, 25)


def test_block_dot_axis_beyond_grid():
    d = only("kernel a() grid 4 block 32 {\n  let y = block.y\n}\n")
    assert d.code == "TS010" and d.span.line == 2


# ---- layouts (TS030) and files (TS004) through the public API -----------------------------


def test_layout_that_does_not_fit_is_ts030(tsk):
    path = tsk(kernel("shared t: f16[64, 64] layout (32,64):(64,1)"))
    diags = api.lint(path)
    assert [d.code for d in diags] == ["TS030"]
    assert (diags[0].span.line, diags[0].span.col) == (5, 3)
    assert "t" in diags[0].message


def test_unknown_layout_head_is_ts030(tsk):
    path = tsk(kernel("shared t: f16[64, 64] layout zigzag(row_major)"))
    diags = api.lint(path)
    assert [d.code for d in diags] == ["TS030"]


def test_good_layouts_lint_clean(tsk):
    path = tsk(kernel("shared a: f16[64, 64] layout swizzle128B(row_major) align 1024\n"
                      "shared b: f32[32, 32] layout padded(row_major, 1)\n"
                      "shared c: f16[64, 64] layout ((8,8),64):((64,512),1)\n"
                      "shared d: f16[16, 16] layout col_major"))
    assert api.lint(path) == []


def test_missing_file_is_ts004(tmp_path):
    diags = api.lint(tmp_path / "nope.tsk")
    assert [d.code for d in diags] == ["TS004"]


def test_not_utf8_is_ts004(tmp_path):
    path = tmp_path / "bin.tsk"
    path.write_bytes(b"kernel \xff\xfe")
    assert [d.code for d in api.lint(path)] == ["TS004"]


# ---- rendering -----------------------------------------------------------------------------


def test_render_has_caret_under_span():
    text = kernel("let a = q + 1")
    d = only(text)
    shown = render(d, text)
    lines = shown.splitlines()
    assert lines[0] == "t.tsk:5:11: TS010 unknown name 'q'"
    assert lines[1] == "   5 |   let a = q + 1"
    assert lines[2].index("^") == len("   5 | ") + 10
    assert lines[2].count("^") == 1


def test_diagnostic_record_is_json_ready():
    d = only(kernel("let a = maxx(1, 2)"))
    rec = d.to_record()
    assert rec["code"] == "TS027" and rec["line"] == 5 and rec["col"] == 11
    assert rec["hint"] == "did you mean 'max'?"


# ---- the language reference's examples ----------------------------------------------------

DOC = Path(__file__).resolve().parent.parent / "docs" / "language.md"


def doc_examples() -> list[str]:
    if not DOC.exists():
        return []
    blocks = re.findall(r"```tsk\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S)
    return [b for b in blocks if b.lstrip().startswith(("kernel", "//"))]


@pytest.mark.parametrize("text", doc_examples())
def test_language_doc_examples_lint_clean(text: str, tsk):
    assert api.lint(tsk(text)) == []


def test_language_doc_has_examples():
    if DOC.exists():
        assert len(doc_examples()) >= 3
