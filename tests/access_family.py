"""Random one-dimensional kernels for brute-force checks of the global-memory checker: per
iteration k of `for k in 0 .. K`, a write x[w] and a read x[r] of one tensor (in either order,
each under its bounds guard), with optional `sync`s between and after them. The race test
(tests/test_global_races.py) makes the tensor `inout`, the unwritten-read test
(tests/test_global_reads.py) `out`; both enumerate the same accesses."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from hypothesis import strategies as st


@dataclass(frozen=True)
class Index:
    """(p * thread + q * block.x + s * k + c) [/ m or % m], as the language evaluates it."""

    p: int
    q: int
    s: int
    c: int
    op: str  # "", "/" or "%"
    m: int

    def text(self) -> str:
        e = f"({self.p} * thread + {self.q} * block.x + {self.s} * k + {self.c})"
        return f"{e} {self.op} {self.m}" if self.op else e

    def at(self, t: int, b: int, k: int) -> int:
        v = self.p * t + self.q * b + self.s * k + self.c
        return v // self.m if self.op == "/" else v % self.m if self.op == "%" else v


@dataclass(frozen=True)
class Family:
    """Per iteration k of `for k in 0 .. K`: the first access, an optional `sync`, the
    second, an optional `sync`; the write is x[w], the read x[r] of tensor `tensor` (declared
    `role`); every thread's sum of its reads goes to the `out` tensor `result`."""

    w: Index
    r: Index
    write_first: bool
    sync_mid: bool
    sync_end: bool
    block: int
    trips: int
    tensor: str = "x"
    role: str = "inout"
    result: str = "y"

    def source(self) -> str:
        x = self.tensor
        write = (f"    let w = {self.w.text()}\n    if w >= 0 && w < N {{\n"
                 f"      {x}[w] = 1.0\n    }}\n")
        read = (f"    let r = {self.r.text()}\n    if r >= 0 && r < N {{\n"
                f"      acc += {x}[r]\n    }}\n")
        first, second = (write, read) if self.write_first else (read, write)
        mid = "    sync\n" if self.sync_mid else ""
        end = "    sync\n" if self.sync_end else ""
        b = self.block
        return (f"kernel fam({x}: {self.role} global f32[N], {self.result}: out global f32[N])\n"
                f"  where N > 0, N <= 1073741824\n"
                f"  grid ((N + {b - 1}) / {b}) block {b}\n{{\n"
                f"  var acc: f32 = 0.0\n  for k in 0 .. {self.trips} {{\n"
                f"{first}{mid}{second}{end}  }}\n"
                f"  let i = block.x * {b} + thread\n  if i < N {{\n"
                f"    {self.result}[i] = acc\n  }}\n}}\n")

    def accesses(self, n: int) -> Iterator[tuple[str, int, int, int, int, int, int]]:
        """(kind, block, thread, k, position, epoch, element) of every access at N = n."""
        per = int(self.sync_mid) + int(self.sync_end)
        grid = (n + self.block - 1) // self.block
        for b in range(grid):
            for t in range(self.block):
                for k in range(self.trips):
                    for pos, kind in enumerate(("w", "r") if self.write_first else ("r", "w")):
                        e = (self.w if kind == "w" else self.r).at(t, b, k)
                        epoch = k * per + (int(self.sync_mid) if pos else 0)
                        if 0 <= e < n:
                            yield kind, b, t, k, pos, epoch, e


def families(**kind: str) -> st.SearchStrategy[Family]:
    """Families with small coefficients; `kind` sets tensor, role and result."""
    small = st.integers(-2, 2)
    index = st.builds(Index, small, small, small, st.integers(-3, 3),
                      st.sampled_from(["", "/", "%"]), st.integers(2, 3))
    return st.builds(Family, index, index, st.booleans(), st.booleans(), st.booleans(),
                     st.sampled_from([2, 4]), st.integers(1, 3), **{k: st.just(v) for k, v
                                                                    in kind.items()})
