"""Time `covers` on nested non-power-of-two CuTe modes (issue 8, item 10).

The per-mode ISL map of such a mode uses floor/mod by its leaf extents; projecting its
range and complementing it costs ISL minutes (`(((2,8),5)):(((240,15),1))` against the
codomain [0, 350) ran past 120 s before the fix). Given the layout object, `covers` decides
on the leaf form (`layout_isl.cute_image_map`); given only the map, counting still refutes
at once and the witness search stops at its share of the budget.

Run: python bench/bench_covers_nested.py
"""

from __future__ import annotations

import platform
import time

from tilesafe.semantics.layout import layout_isl as LI
from tilesafe.semantics.layout.cute import ComposedLayout, Layout, Swizzle, parse_cute

CASES = [
    ("nested, flat twin", parse_cute("(2,8,5):(240,15,1)"), 350),
    ("nested", parse_cute("(((2,8),5)):(((240,15),1))"), 350),
    ("nested permutation", Layout((((2, 8), 5),), (((40, 5), 1),)), 80),
    ("swizzled nested permutation",
     ComposedLayout(Swizzle(2, 0, 4), Layout((((2, 8), 5),), (((40, 5), 1),))), 80),
    ("Sw<3,3,3> o 8 o (64,64):(64,1)",
     ComposedLayout(Swizzle(3, 3, 3), Layout((64, 64), (64, 1)), 8), 4096),
]


def main() -> None:
    print(f"{'case':<32} {'input':<7} {'codomain':>8} {'verdict':<9} {'witness':<8} {'s':>8}")
    for name, layout, cod in CASES:
        for how, obj in (("object", layout), ("map", LI.to_isl(layout))):
            t0 = time.perf_counter()
            res = LI.covers(obj, codomain=cod)
            dt = time.perf_counter() - t0
            wit = "yes" if res.witness else "-"
            print(f"{name:<32} {how:<7} {cod:>8} {res.verdict:<9} {wit:<8} {dt:>8.3f}")
    print(f"python {platform.python_version()} on {platform.machine()}, "
          f"ISL op budget {LI.DEFAULT_MAX_OPS:,} (witness share 1/{LI.WITNESS_SHARE})")


if __name__ == "__main__":
    main()
