"""Inputs that once made tilesafe exit 3 ("internal error", a bug) — each found by fuzzing.

Exit 3 must never happen for user input: each case must now end in a diagnostic
(`path:line:col: TSnnn message`, exit 2), a verdict (exit 0 or 1, "unknown" where the
tools cannot decide), or a clear run-time error (exit 1 or 2). Cases that used to exhaust
memory run in a subprocess under an address-space limit, so a regression fails the test
instead of the machine.
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tilesafe.frontend.diagnostics import Diagnostic, caret_excerpt
from tilesafe.frontend.parser import _LineIndex, parse
from tilesafe.frontend.span import Span

ROOT = Path(__file__).resolve().parent.parent


def limited_cli(*args: object, mem_mb: int = 3072, timeout: int = 300
                ) -> subprocess.CompletedProcess:
    """`tilesafe ARGS` in a subprocess with at most `mem_mb` of address space."""

    def limit() -> None:
        cap = mem_mb << 20
        resource.setrlimit(resource.RLIMIT_AS, (cap, cap))

    return subprocess.run([sys.executable, "-m", "tilesafe.cli", *map(str, args)],
                          capture_output=True, text=True, cwd=ROOT, timeout=timeout,
                          preexec_fn=limit)


def kernel(body: str, header: str = "x: out global f32[N]",
           where: str = "N > 0, N <= 4096", launch: str = "grid 1 block 32") -> str:
    lines = "".join(f"  {ln}\n" for ln in body.strip("\n").splitlines())
    return f"kernel k({header})\n  where {where}\n  {launch}\n{{\n{lines}}}\n"


# ---- run ---------------------------------------------------------------------------------


def test_run_kernel_without_effectful_statements(cli, tsk):
    """The body compiled to a plain function, which the scheduler cannot step."""
    path = tsk(kernel("let a = 1", header="x: in global f32[N]"))
    r = cli("run", path, "--size", "N=4", "--format", "json")
    assert r.code == 0, r.err
    assert json.loads(r.out)["ok"] is True


# ---- nesting -------------------------------------------------------------------------------


def nested_ifs(n: int) -> str:
    body = "".join(f"if thread < {i + 1} {{\n" for i in range(n)) + "x[thread] = 1.0\n"
    return kernel(body + "}\n" * n, where="N == 32")


@pytest.mark.parametrize("command", [["lint"], ["fmt", "--check"], ["verify"],
                                     ["run", "--size", "N=32"]])
def test_if_nested_300_deep_is_ts005(cli, tsk, command):
    """Python's recursion limit, in the parser's tree transformer (and every walk after)."""
    r = cli(*command, tsk(nested_ifs(300)))
    assert r.code == 2, r.err
    assert "TS005 blocks and expressions nest more than 100 levels deep" in r.out


def test_long_operator_chain_is_ts005(cli, tsk):
    chain = " + ".join(["thread"] * 400)  # flat in the text, 399 deep as a syntax tree
    r = cli("lint", tsk(kernel(f"x[0 * ({chain})] = 1.0", where="N == 32")))
    assert r.code == 2 and "TS005" in r.out and ":5:" in r.out


def test_nesting_just_under_the_limit_works_everywhere(cli, tsk):
    path = tsk(nested_ifs(98))  # kernel body + 98 blocks + the store's 2 levels = 100
    assert cli("lint", path).code == 0
    assert cli("fmt", "--check", path).code in (0, 1)
    verdict = cli("verify", path)  # only thread 0 passes 98 guards: x[1..] unwritten
    assert verdict.code == 1 and "TS212" in verdict.out
    assert cli("run", path, "--size", "N=32").code == 0


# ---- huge loops ------------------------------------------------------------------------------


@pytest.mark.parametrize("trips", ["2147483648", "4294967296", "4294967296 * 4294967296"])
def test_verify_huge_loop_within_memory(tsk, trips):
    """The event model's footprint built one array entry per iteration before checking its
    size (16.9 GB for 2^31 trips, MemoryError for 2^32) and could not hold 2^64 in int64
    (OverflowError). It now counts first and over-approximates a loop that is too big
    (semantics/temporal/footprint.py).
    (A literal 2^64 is TS026 now; folding two literals still reaches it.)"""
    path = tsk(kernel(f"""
shared s: f32[32]
for i in 0 .. {trips} {{
  s[thread] = 1.0
}}
sync
x[thread] = s[thread]""", where="N == 32"))
    r = limited_cli("verify", path, mem_mb=3072)
    # Proved, or unknown where the over-approximated footprint cannot settle a
    # permission; never a refutation, never exit 3.
    assert r.returncode in (0, 1), r.stdout + r.stderr
    assert " 0 refuted" in r.stdout


# ---- layouts -------------------------------------------------------------------------------


@pytest.mark.parametrize("params", ["5, 2147483648, 5", "5, 256, 5", "3, 13, 3", "1, 0, -18"])
def test_swizzle_beyond_shared_memory_bits_is_ts030(cli, tsk, params):
    """swizzle(5, 2^31, 5) linted clean and then made ISL build 2^(2^31)-sized constants
    (exit 3); swizzle(5, 256, 5) took 11 s. Offsets have 18 bits: M + |S| + B <= 18."""
    r = cli("lint", tsk(kernel(f"shared s: f16[64, 64] layout swizzle({params}, row_major)\n"
                               "s[thread, 0] = 1.0\nx[thread] = 1.0", where="N == 32")))
    assert r.code == 2
    assert "TS030" in r.out and "M + |S| + B must be at most 18" in r.out


def test_swizzle_at_the_bit_limit_is_accepted(cli, tsk):
    r = cli("lint", tsk(kernel("shared s: f16[64, 64] layout swizzle(3, 12, 3, row_major)\n"
                               "s[thread, 0] = 1.0\nx[thread] = 1.0", where="N == 32")))
    assert r.code == 0, r.out


def test_run_sizes_too_big_for_memory_is_a_usage_error(tsk):
    """`where` allows N = 2^30, but 12 GiB of tensors made numpy raise (exit 3)."""
    path = ROOT / "corpus" / "good" / "elementwise.tsk"
    r = limited_cli("run", path, "--size", "N=1000000000", mem_mb=2048)
    assert r.returncode == 2, r.stdout + r.stderr
    assert "TS200 at these sizes the tensors need 11.2 GiB ('x' is f32[1000000000])" in r.stdout
    assert "at most 256.0 MiB" in r.stdout


def test_run_grid_beyond_the_hardware_is_ts214(cli, tsk):
    r = cli("run", tsk(kernel("if thread == 0 && block.y == 0 {\n  x[block.x] = 1.0\n}",
                              launch="grid (N, 70000) block 32")), "--size", "N=4")
    assert r.code == 1, r.err
    assert "TS214 grid dimension y evaluates to 70000, more than the hardware's 65535" in r.out


def test_verify_grid_beyond_the_hardware_is_ts214(cli, tsk):
    r = cli("verify", tsk(kernel("if thread == 0 {\n  x[block.x] = 1.0\n}",
                                 where="N > 0", launch="grid N block 32")))
    assert r.code == 1
    assert "TS214 error: at N=2147483648 the grid extent is 2147483648" in r.out


# ---- comments --------------------------------------------------------------------------------


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet="ab\n/*", max_size=60), st.data())
def test_line_index_agrees_with_counting_newlines(text, data):
    """Comment spans come from a line index (linear), not from counting newlines per
    comment (quadratic: 1 MB of comments took 7.8 s to lint; bench/bench_frontend.py)."""
    offset = data.draw(st.integers(0, len(text)))
    line = text.count("\n", 0, offset) + 1
    col = offset - (text.rfind("\n", 0, offset) + 1) + 1
    assert _LineIndex(text).position(offset) == (line, col)


def test_many_comments_keep_their_positions():
    body = "".join(f"// comment {i}\n" for i in range(2000))
    module = parse(kernel("x[thread] = 1.0", where="N == 32") + body, "c.tsk")
    assert len(module.comments) == 2000
    last = module.comments[-1]  # after the kernel's 6 lines
    assert (last.span.line, last.span.col, last.text) == (2006, 1, "// comment 1999")


@pytest.mark.parametrize("literal", ["9" * 5000, str(2**63), str(2**64)])
def test_integer_literal_past_64_bits_is_ts026(cli, tsk, literal):
    """A 5000-digit literal hit Python's int-conversion limit inside the parser (exit 3)."""
    r = cli("lint", tsk(kernel(f"for i in 0 .. {literal} {{\n  x[thread] = 1.0\n}}",
                               where="N == 32")))
    assert r.code == 2
    assert "TS026 integer literal" in r.out and "literals are below 2^63" in r.out


def test_largest_integer_literal_is_accepted(cli, tsk):
    r = cli("lint", tsk(kernel(f"if thread < {2**63 - 1} {{\n  x[thread] = 1.0\n}}",
                               where="N == 32")))
    assert r.code == 0, r.out


# ---- text: byte-order marks, long lines, control characters ----------------------------------


def test_utf8_bom_is_accepted_and_columns_are_unchanged(cli, tsk):
    bom = "\ufeff"
    assert cli("lint", tsk(bom + kernel("x[thread] = 1.0", where="N == 32"))).code == 0
    bad = tsk(bom + "kernel k(x: out global f32[N]) grid 1 block 32 { $ }\n", "bad.tsk")
    r = cli("lint", bad)
    assert r.code == 2 and "bad.tsk:1:51: TS002 unexpected character '$'" in r.out
    excerpt, caret = r.out.splitlines()[1:3]
    assert "\\ufeff" not in excerpt  # shown as the space the parser read
    assert excerpt.index("$") == caret.index("^")


def test_fmt_drops_the_bom_and_round_trips(cli, tsk):
    path = tsk("\ufeff" + kernel("x[thread] = 1.0", where="N == 32"))
    assert cli("fmt", path).code == 0
    text = path.read_text(encoding="utf-8")
    assert not text.startswith("\ufeff")
    assert cli("fmt", "--check", path).code == 0


def _diag(line: int, col: int, end_col: int) -> Diagnostic:
    return Diagnostic("TS002", "x", Span("t.tsk", line, col, line, end_col))


def test_long_line_excerpt_is_cut_around_the_caret():
    line = "a" * 1000 + "$" + "b" * 1000
    excerpt, caret = caret_excerpt(_diag(1, 1001, 1002), line).splitlines()
    assert len(excerpt) < 220 and excerpt.count("...") == 2
    assert excerpt[caret.index("^")] == "$" and caret.count("^") == 1
    start = caret_excerpt(_diag(1, 1, 2), line).splitlines()
    assert start[0].endswith("...") and not start[0][7:].startswith("...")
    assert start[1].index("^") == len("   1 | ")


def test_long_span_caret_stays_inside_the_window():
    line = "x" * 5000
    excerpt, caret = caret_excerpt(_diag(1, 10, 4000), line).splitlines()
    assert caret.index("^") == len("   1 | ") + 9
    assert len(caret) <= len(excerpt)


def test_control_characters_are_escaped_in_excerpts():
    line = "a\x1b[31mb\u202ec\x00 $"
    excerpt, caret = caret_excerpt(_diag(1, line.index("$") + 1, line.index("$") + 2),
                                   line).splitlines()
    assert "\x1b" not in excerpt and "\u202e" not in excerpt and "\x00" not in excerpt
    assert "\\x1b[31mb\\u202ec\\x00" in excerpt
    assert excerpt[caret.index("^")] == "$"


def test_lines_are_counted_like_the_parser_counts_them():
    """str.splitlines() also breaks at \\x0c, \\x1c, \\u2028 ...; lark counts only \\n."""
    source = "a\x0cb\u2028c\nsecond $"
    excerpt, caret = caret_excerpt(_diag(2, 8, 9), source).splitlines()
    assert excerpt.endswith("second $") and excerpt[caret.index("^")] == "$"


# ---- shared memory and launch size ------------------------------------------------------------


@pytest.mark.parametrize("decl", ["shared part: f32[2147483648, 32]",
                                  "mbarrier bars[4294967296] count 1",
                                  "shared a: f32[128, 256]\nshared b: f32[128, 256]"])
def test_shared_memory_past_the_hardware_is_ts026(cli, tsk, decl):
    """Found by the CLI fuzzer: a 2^31-row buffer (or a 2^32-element barrier array) linted
    clean, then verify and run enumerated its elements until MemoryError (exit 3)."""
    path = tsk(kernel(decl + "\nx[thread] = 1.0", where="N == 32"))
    for command in (["lint"], ["verify"], ["run", "--size", "N=32"]):
        r = cli(*command, path)
        assert r.code == 2, (command, r.err)
        assert "TS026 shared buffers and mbarriers need" in r.out
        assert "holds at most 232448" in r.out


def test_shared_memory_at_the_hardware_limit_is_accepted(cli, tsk):
    # 232448 bytes: 56 KiB + 8 bytes short of the limit in f32, plus one mbarrier
    decl = "shared a: f32[58110]\nmbarrier b count 1"
    assert cli("lint", tsk(kernel(decl + "\nx[thread] = 1.0", where="N == 32"))).code == 0


def test_run_layout_spread_past_shared_memory_is_ts103(cli, tsk):
    """A CuTe layout with huge strides places 32 elements 10^15 bytes apart: verify refutes
    it (TS103) and run allocated 113 TiB (exit 3); run now says what verify says."""
    path = tsk(kernel("shared s: f32[1, 32] layout (1,32):(1000000000000000,1000000000000)\n"
                      "s[0, thread] = 1.0\nx[thread] = s[0, thread]", where="N == 32"))
    r = cli("run", path, "--size", "N=32")
    assert r.code == 1, r.err
    assert "TS103 the buffers need 124000000000004 bytes of shared memory" in r.out


def test_run_launch_with_too_many_threads_is_a_usage_error(cli, tsk):
    """Found by the CLI fuzzer: a grid of 2^28 blocks that the hardware allows would keep
    the interpreter busy for days."""
    path = tsk(kernel("if block.x == 0 {\n  x[thread] = 1.0\n}", where="N == 32",
                      launch="grid ((N + 2147483648) / 8) block 32"))
    r = cli("run", path, "--size", "N=32")
    assert r.code == 2, r.err
    assert "TS200 at these sizes the launch has 8589934720 threads" in r.out


def test_verify_with_a_far_counterexample_finishes(cli, tsk):
    """Found by the CLI fuzzer: choosing the lexicographically smallest counterexample with
    ISL's lexmin ran for minutes (unnoticed by its operation budget) on a ragged transpose
    whose element is unwritten only past N = 65535; small sizes are now found by boxing."""
    text = (ROOT / "corpus" / "good" / "transpose_ragged.tsk").read_text(encoding="utf-8")
    text = text.replace("let c = thread / 32 + 8 * i", "let c = thread / 32 + 65535 * i")
    r = limited_cli("verify", "--only", "access", tsk(text), timeout=120)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "TS212 error: dst[" in r.stdout and "TS211 error: dst[" in r.stdout
