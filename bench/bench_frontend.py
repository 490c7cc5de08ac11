"""Benchmark of the frontend on large inputs: lint time against the size of a file's
comments (it was quadratic: 1 MB of comments took 7.8 s) and against nesting depth.

Run `python bench/bench_frontend.py`; prints one row per input. Time grows linearly with
the comment bytes when each row's s/MB column stays flat.
"""

from __future__ import annotations

import time
from pathlib import Path

from tilesafe.frontend.diagnostics import DiagnosticError
from tilesafe.frontend.fmt import format_source
from tilesafe.frontend.load import compile_source

ROOT = Path(__file__).resolve().parent.parent
KERNEL = (ROOT / "corpus" / "good" / "elementwise.tsk").read_text(encoding="utf-8")


def line_comments(n_bytes: int) -> str:
    line = "// " + "c" * 20 + "\n"
    return KERNEL + line * (n_bytes // len(line))


def block_comments(n_bytes: int) -> str:
    line = "/* " + "c" * 20 + " */\n"
    return KERNEL + line * (n_bytes // len(line))


def nested_ifs(depth: int) -> str:
    body = "".join(f"if thread < {i + 1} {{\n" for i in range(depth)) + "x[thread] = 1.0\n"
    return ("kernel k(x: out global f32[N])\n  where N == 32\n  grid 1 block 32\n{\n"
            + body + "}\n" * depth + "}\n")


def timed(fn, text: str) -> tuple[float, str]:
    start = time.perf_counter()
    try:
        fn(text, "bench.tsk")
        outcome = "ok"
    except DiagnosticError as err:
        outcome = err.diagnostics[0].code
    return time.perf_counter() - start, outcome


def main() -> None:
    compile_source(KERNEL, "warm.tsk")  # builds the parser once, outside the timings
    print(f"{'input':32} {'bytes':>10} {'lint s':>8} {'s/MB':>7} {'fmt s':>8}  outcome")
    for name, make, sizes in (("line comments", line_comments, (1 << 18, 1 << 19, 1 << 20,
                                                                  1 << 21)),
                              ("block comments", block_comments, (1 << 18, 1 << 20)),
                              ("nested ifs", nested_ifs, (25, 50, 98, 300))):
        for size in sizes:
            text = make(size)
            lint_s, outcome = timed(compile_source, text)
            fmt_s, _ = timed(format_source, text)
            mb = len(text.encode()) / (1 << 20)
            label = f"{name} ({size})"
            print(f"{label:32} {len(text.encode()):>10} {lint_s:>8.3f} {lint_s / mb:>7.2f} "
                  f"{fmt_s:>8.3f}  {outcome}")


if __name__ == "__main__":
    main()
