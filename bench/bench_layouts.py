"""Time to decide layout equivalence and injectivity: ISL vs brute-force enumeration.

Tiles of 2^6 .. 2^20 elements, for three kinds of layout:
  * swizzle128B: the TMA 128-byte swizzle of an f16 tile with 64-element rows, checked equal
    to the same function written as a hierarchical CuTe swizzled layout;
  * cute-hier: an 8x8-blocked CuTe layout ((8,R/8),(8,C/8)):((8,8C),(1,64)), checked equal to
    the LEGO-style `tiled((8,8), row_major)` (a cross-kind equivalence);
  * f2: the same 128B swizzle given as an F2 linear layout (one basis per coordinate bit),
    checked equal to the CuTe swizzle;
plus the parametric case -- a symbolic M x N matrix cut into 64x64 tiles with ragged last
tiles -- which ISL decides for all sizes at once and enumeration cannot do at all.

ISL times are plain ISL on the maps (map construction included, no structural shortcuts).
Enumeration evaluates every coordinate with the same Python `offset()` the interpreter uses
(equivalence: both layouts at every coordinate, stopping at the first difference;
injectivity: distinct offsets). Each case gets an equal share of the enumeration budget;
once the projected time passes it, larger sizes are extrapolated linearly from the largest
measured size and marked "(extrap.)".

Run: python bench/bench_layouts.py [--max-log2 20] [--budget 60]
"""

from __future__ import annotations

import argparse
import platform
import time
from collections.abc import Callable
from dataclasses import dataclass

from tilesafe.semantics.layout import layout_isl as LI
from tilesafe.semantics.layout.layouts import LayoutTerm, RealLayout, flat_offsets, realize
from tilesafe.semantics.layout.piecewise import ragged_tiles

T = LayoutTerm


@dataclass
class Row:
    case: str
    n: int | str
    prop: str
    isl_s: float
    verdict: str
    enum_s: float | None
    extrapolated: bool = False


def swizzle_pair(n: int) -> tuple[RealLayout, RealLayout]:
    rows = n // 64
    a = realize(T("swizzle128B", (T("row_major"),)), (rows, 64), 2)
    if rows >= 8:
        text = f"Sw<3,3,3> o ((8,{rows // 8}),64):((64,512),1)"
    else:
        text = f"Sw<3,3,3> o ({rows},64):(64,1)"
    return a, realize(T("cute", (text,)), (rows, 64), 2)


def _grid(n: int) -> tuple[int, int]:
    k = n.bit_length() - 1
    r = 1 << (k // 2)
    return r, n // r


def hier_pair(n: int) -> tuple[RealLayout, RealLayout]:
    r, c = _grid(n)
    shape = ((8, r // 8), (8, c // 8))
    stride = ((8, 8 * c), (1, 64))
    a = realize(T("cute", (shape, stride)), (r, c), 2)
    return a, realize(T("tiled", ((8, 8), T("row_major"))), (r, c), 2)


def f2_pair(n: int) -> tuple[RealLayout, RealLayout]:
    rows = n // 64
    sw = realize(T("swizzle128B", (T("row_major"),)), (rows, 64), 2)
    bases = (
        tuple(sw.offset((1 << i, 0)) for i in range(rows.bit_length() - 1)),
        tuple(sw.offset((0, 1 << i)) for i in range(6)),
    )
    return realize(T("linear", bases), (rows, 64), 2), sw


CASES: dict[str, tuple[Callable[[int], tuple[RealLayout, RealLayout]], int]] = {
    "swizzle128B": (swizzle_pair, 6),
    "cute-hier": (hier_pair, 6),
    "f2": (f2_pair, 6),
}


def timed(fn: Callable[[], object]) -> tuple[float, object]:
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def enum_equivalent(a: RealLayout, b: RealLayout) -> bool:
    """Stops at the first coordinate where the layouts differ."""
    return all(a.offset(c) == b.offset(c) for c in a.coords())


def enum_injective(a: RealLayout) -> bool:
    offs = flat_offsets(a)
    return len(set(offs)) == len(offs)


def run(max_log2: int, budget: float) -> list[Row]:
    rows: list[Row] = []
    last: dict[tuple[str, str], tuple[int, float]] = {}
    share = budget / len(CASES)  # each case gets an equal slice of the enumeration budget
    for name, (make, min_log2) in CASES.items():
        spent = 0.0
        for k in range(min_log2, max_log2 + 1, 2):
            n = 1 << k
            a, b = make(n)
            # plain ISL on the maps (no structural shortcuts), map construction included
            checks = [
                ("equivalent", lambda a=a, b=b: LI.equivalent(a.to_isl(), b.to_isl()),
                 lambda a=a, b=b: enum_equivalent(a, b)),
                ("injective", lambda a=a: LI.injective(a.to_isl()),
                 lambda a=a: enum_injective(a)),
            ]
            if name == "swizzle128B":
                c = realize(T("swizzle64B", (T("row_major"),)), a.shape, 2)
                checks.append(("same as swizzle64B?",
                               lambda a=a, c=c: LI.equivalent(a.to_isl(), c.to_isl()),
                               lambda a=a, c=c: enum_equivalent(a, c)))
            for prop, isl_fn, enum_fn in checks:
                isl_s, res = timed(isl_fn)
                verdict = res.verdict  # type: ignore[attr-defined]
                prev = last.get((name, prop))
                projected = prev[1] * n / prev[0] if prev else 0.0
                if prev is None or spent + projected <= share:
                    enum_s, ok = timed(enum_fn)
                    spent += enum_s
                    last[(name, prop)] = (n, enum_s)
                    if (verdict == LI.PROVED) != ok or verdict == LI.UNKNOWN:
                        verdict += " (DISAGREES with enumeration!)"
                    rows.append(Row(name, n, prop, isl_s, verdict, enum_s))
                else:
                    rows.append(Row(name, n, prop, isl_s, verdict, projected, True))
    pw = ragged_tiles(64, 64)
    for prop, fn in [
        ("pieces disjoint+cover", lambda: LI.check_pieces(pw)),
        ("injective", lambda: LI.injective(pw)),
        ("in_bounds", lambda: LI.in_bounds(
            pw, lo=(0, 0, 0), hi=("floor((M + 63)/64)", "floor((N + 63)/64)", 4096))),
    ]:
        isl_s, res = timed(fn)
        verdict = res.verdict  # type: ignore[attr-defined]
        rows.append(Row("ragged MxN", "all M,N", prop, isl_s, verdict, None))
    return rows


def fmt(rows: list[Row], budget: float) -> str:
    head = f"{'case':<12} {'elements':>9} {'property':<24} {'ISL s':>8} {'verdict':<9} " \
           f"{'enum s':>16} {'enum/ISL':>10}"
    lines = [head, "-" * len(head)]
    for r in rows:
        if r.enum_s is None:
            enum, ratio = "n/a (symbolic)", "-"
        else:
            enum = f"{r.enum_s:.3f}" + (" (extrap.)" if r.extrapolated else "")
            ratio = f"{r.enum_s / r.isl_s:.1f}x" if r.isl_s > 0 else "-"
            ratio = f"~{ratio}" if r.extrapolated else ratio
        n = f"2^{r.n.bit_length() - 1}" if isinstance(r.n, int) else r.n
        lines.append(f"{r.case:<12} {n:>9} {r.prop:<24} {r.isl_s:>8.3f} {r.verdict:<9} "
                     f"{enum:>16} {ratio:>10}")
    lines.append(f"enumeration budget {budget:.0f} s in all ({budget / len(CASES):.0f} s per "
                 "case); rows marked (extrap.) / ~ were not enumerated but projected linearly "
                 "from the largest measured size of the same case and property")
    lines.append(f"python {platform.python_version()} on {platform.machine()}, "
                 f"ISL op budget {LI.DEFAULT_MAX_OPS:,}")
    return "\n".join(lines)


CLIFF_CASES = (((32, 32), (5, 0, 5)), ((32, 33), (5, 0, 5)), ((64, 64), (3, 3, 3)),
               ((64, 65), (3, 3, 3)), ((128, 64), (3, 4, 3)), ((120, 64), (3, 4, 3)))


def cliffs() -> str:
    """Realise + cosize + injectivity of a swizzled shared buffer, a power-of-two extent
    beside a ragged one (issue 19: the 32 x 33 case took ~45 s before the cosize was
    enumerated)."""
    lines = [f"{'buffer':12s} {'layout':28s} {'realise+cosize+injective s':>23s}"]
    for shape, sw in CLIFF_CASES:
        term = LayoutTerm("swizzle", (*sw, LayoutTerm("row_major", ())))
        t, ok = timed(lambda term=term, shape=shape: (
            realize(term, shape, 4).cosize, LI.injective(realize(term, shape, 4)).ok))
        lines.append(f"{'x'.join(map(str, shape)):12s} {str(term):28s} {t:23.3f}")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--max-log2", type=int, default=20)
    ap.add_argument("--budget", type=float, default=60.0)
    ap.add_argument("--cliffs", action="store_true",
                    help="only the power-of-two vs ragged swizzle table")
    args = ap.parse_args()
    print(cliffs())
    if not args.cliffs:
        print(fmt(run(args.max_log2, args.budget), args.budget))


if __name__ == "__main__":
    main()
