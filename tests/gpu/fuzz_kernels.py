"""Random scalar kernels for differential testing of the code generator on the GPU.

Each kernel is an elementwise kernel (one thread per element, a guarded tail) whose body is
a random program over the language's scalar operations: typed expression trees of int and
float operations (every operator, min/max/abs, f32()/i32(), comparisons joined by && || !,
if/else chains), `let`s and `var`s of every dtype (rounding and wrapping), loads at
shifted in-bounds indices, integer division and modulo by run-time divisors of both signs
(never zero), and stores into f32, f16, bf16, i32 and u8 outputs. Generation is seeded, so
a failing kernel can be regenerated from its number.

    python tests/gpu/fuzz_kernels.py OUT_DIR --count 200   # writes .tsk files

tests/gpu/build_cases.py --only fuzz turns them into cases (verify, compile, interpret on
adversarial inputs); the GPU compares bit for bit.
"""

from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path

FLOAT_INPUTS = ("x", "y")  # f32, f16
INT_INPUTS = ("k",)  # i32
BYTE_INPUTS = ("b",)  # u8
OUTS = (("of", "f32"), ("oh", "f16"), ("ob", "bf16"), ("oi", "i32"), ("ou", "u8"))
COLS = 3


class Gen:
    def __init__(self, seed: int) -> None:
        self.r = random.Random(seed)
        self.lines: list[str] = []
        self.ints: list[str] = ["i"]  # int names in scope (affine index i)
        self.floats: list[str] = []
        self.vars: list[tuple[str, str]] = []
        self.n = 0

    def fresh(self, stem: str) -> str:
        self.n += 1
        return f"{stem}{self.n}"

    # -- expressions -------------------------------------------------------------------------
    def index(self) -> str:
        return self.r.choice(["i", "N - 1 - i", "min(i + 1, N - 1)", "max(i - 2, 0)",
                              "min(i % 37, N - 1)", "i / 2"])

    def fconst(self) -> str:
        return self.r.choice(["0.5", "1.0", "3.0", "0.1", "1.0e30", "1.0e-30", "65504.0",
                              "70000.0", "0.333", "2.5e-3", "16777217.0", "1.0e-40"])

    def iconst(self) -> str:
        return self.r.choice(["0", "1", "3", "7", "1000003", "65535", "2147483647", "255"])

    def fexpr(self, depth: int) -> str:
        r = self.r
        if depth <= 0 or r.random() < 0.25:
            choice = r.random()
            if choice < 0.45:
                return f"{r.choice(FLOAT_INPUTS)}[{self.index()}]"
            if choice < 0.6 and self.floats:
                return r.choice(self.floats)
            if choice < 0.75:
                return self.fconst()
            return f"f32({self.iexpr(depth - 1)})"
        kind = r.random()
        if kind < 0.55:
            op = r.choice(["+", "-", "*", "/"])
            return f"({self.fexpr(depth - 1)} {op} {self.fexpr(depth - 1)})"
        if kind < 0.75:
            fn = r.choice(["min", "max"])
            return f"{fn}({self.fexpr(depth - 1)}, {self.fexpr(depth - 1)})"
        if kind < 0.85:
            return f"abs({self.fexpr(depth - 1)})"
        if kind < 0.95:
            return f"-{self.fexpr(depth - 1)}"
        return f"({self.fexpr(depth - 1)} + {self.iexpr(depth - 1)})"  # mixed: int -> f32

    def iexpr(self, depth: int) -> str:
        r = self.r
        if depth <= 0 or r.random() < 0.3:
            choice = r.random()
            if choice < 0.35:
                return f"{r.choice(INT_INPUTS)}[{self.index()}]"
            if choice < 0.45:
                return f"{r.choice(BYTE_INPUTS)}[{self.index()}]"
            if choice < 0.6:
                return r.choice(self.ints)
            if choice < 0.8:
                return self.iconst()
            return f"i32({self.fexpr(depth - 1)})"
        kind = r.random()
        a = self.iexpr(depth - 1)
        if kind < 0.4:
            op = r.choice(["+", "-"])
            return f"({a} {op} {self.iexpr(depth - 1)})"
        if kind < 0.5:  # a product of two data values stays below 2^63
            return f"({self.small()} * {self.small()})"
        if kind < 0.7:
            d = f"({self.small()} % {r.randint(2, 9)} + {r.randint(1, 5)})"
            if r.random() < 0.5:
                d = f"(0 - {d})"
            return f"({a} {r.choice(['/', '%'])} {d})"
        if kind < 0.8:
            return f"({a} {r.choice(['/', '%'])} {r.choice([2, 3, 8, 7, 64, 1000])})"
        if kind < 0.9:
            return f"{r.choice(['min', 'max'])}({a}, {self.iexpr(depth - 1)})"
        return f"abs({a})"

    def small(self) -> str:
        return self.r.choice([f"k[{self.index()}]", f"b[{self.index()}]", "i", "(i - 500)"])

    def cond(self, depth: int) -> str:
        r = self.r
        if depth <= 0 or r.random() < 0.5:
            if r.random() < 0.6:
                return f"{self.fexpr(1)} {r.choice(['<', '<=', '>', '>=', '==', '!='])} " \
                       f"{self.fexpr(1)}"
            return f"{self.iexpr(1)} {r.choice(['<', '<=', '>', '>=', '==', '!='])} " \
                   f"{self.iexpr(1)}"
        c = r.random()
        if c < 0.4:
            return f"{self.cond(depth - 1)} && {self.cond(depth - 1)}"
        if c < 0.8:
            return f"{self.cond(depth - 1)} || {self.cond(depth - 1)}"
        return f"!({self.cond(depth - 1)})"

    # -- statements --------------------------------------------------------------------------
    def stmt(self, indent: str) -> None:
        r = self.r
        c = r.random()
        if c < 0.3:
            name = self.fresh("f")
            self.lines.append(f"{indent}let {name} = {self.fexpr(3)}")
            self.floats.append(name)
        elif c < 0.45:
            name = self.fresh("n")
            self.lines.append(f"{indent}let {name} = {self.iexpr(2)}")
            self.ints.append(name)
        elif c < 0.75:
            dtype = r.choice(["f32", "f16", "bf16", "i32", "u8"])
            name = self.fresh("v")
            init = self.fexpr(2) if dtype in ("f32", "f16", "bf16") else self.iexpr(2)
            self.lines.append(f"{indent}var {name}: {dtype} = {init}")
            self.vars.append((name, dtype))
        elif self.vars:
            name, dtype = r.choice(self.vars)
            val = self.fexpr(2) if dtype in ("f32", "f16", "bf16") else self.iexpr(1)
            self.lines.append(f"{indent}{name} {r.choice(['=', '+=', '-=', '*='])} {val}")

    def kernel(self, name: str) -> str:
        for _ in range(self.r.randint(3, 8)):
            self.stmt("    ")
        # each output column is written exactly once: directly, or through a var that an
        # if/else chain assigns on every path
        for out, dtype in OUTS:
            for col in range(COLS):
                is_float = dtype in ("f32", "f16", "bf16")
                if self.r.random() < 0.3:
                    sel = self.fresh("s")
                    vt = "f32" if is_float else "i32"
                    val = (lambda: self.fexpr(2)) if is_float else (lambda: self.iexpr(2))
                    self.lines.append(f"    var {sel}: {vt} = {val()}")
                    self.lines.append(f"    if {self.cond(2)} {{")
                    self.lines.append(f"      {sel} = {val()}")
                    self.lines.append(f"    }} else if {self.cond(1)} {{")
                    self.lines.append(f"      {sel} += {val()}")
                    self.lines.append("    }")
                    value = sel
                else:
                    value = self.fexpr(3) if is_float else self.iexpr(3)
                self.lines.append(f"    {out}[i, {col}] = {value}")
        params = ["x: in global f32[N]", "y: in global f16[N]", "k: in global i32[N]",
                  "b: in global u8[N]"]
        params += [f"{o}: out global {d}[N, {COLS}]" for o, d in OUTS]
        head = (f"// Random scalar program {name} (tests/gpu/fuzz_kernels.py).\n"
                f"// sizes: N=300 | N=37\n"
                f"kernel {name}({', '.join(params)})\n"
                "  where N > 0, N <= 1048576\n"
                "  grid ((N + 127) / 128) block 128\n{\n"
                "  let i = block.x * 128 + thread\n"
                "  if i < N {\n")
        return head + "\n".join(self.lines) + "\n  }\n}\n"


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("out")
    p.add_argument("--count", type=int, default=200)
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args(argv)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    for n in range(a.seed, a.seed + a.count):
        (out / f"fuzz{n:04d}.tsk").write_text(Gen(n).kernel(f"fuzz{n:04d}"))
    print(f"{a.count} kernels in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
