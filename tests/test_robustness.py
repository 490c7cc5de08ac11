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

from tilesafe.frontend.parser import _LineIndex, parse

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


@pytest.mark.parametrize("trips", [2**31, 2**32, 2**64])
def test_verify_huge_loop_within_memory(tsk, trips):
    """The event model's footprint built one array entry per iteration before checking its
    size (16.9 GB for 2^31 trips, MemoryError for 2^32) and could not hold 2^64 in int64
    (OverflowError). It now counts first and over-approximates a loop that is too big."""
    path = tsk(kernel(f"""
shared s: f32[32]
for i in 0 .. {trips} {{
  s[thread] = 1.0
}}
sync
x[thread] = s[thread]""", where="N == 32"))
    r = limited_cli("verify", path, mem_mb=3072)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "0 failing" in r.stdout


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
