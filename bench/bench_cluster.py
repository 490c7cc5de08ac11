"""Benchmark of the temporal checkers on thread-block clusters: the stage projection of a
cluster ring (stage s of every CTA, docs/temporal.md §10 and §16) against the whole view.

For each cluster kernel -- the corpus's, and `multicast_ring` with 3 and 4 stages (stage s
multicast by CTA s % 2) and in a 3-CTA cluster -- the wall time, verdicts and states of
`barrier` + `ownership` as `verify` runs them, with the reductions (now) and, with
`--whole`, without them (the view of all CTAs explored as one block, as before the
projection), both under the default budgets (1,000,000 states, 300 s). Prints a table;
`python bench/bench_cluster.py [--whole]`.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from tilesafe.checkers import barrier, ownership, temporal
from tilesafe.checkers.obligation import Severity, Verdict
from tilesafe.checkers.registry import CheckOptions
from tilesafe.frontend.load import compile_source
from tilesafe.semantics.temporal import reduce

ROOT = Path(__file__).resolve().parent.parent
CLUSTER = ROOT / "corpus" / "cluster"


def ring_variant(stages: int, ctas: int = 2) -> str:
    """multicast_ring with `stages` stages in clusters of `ctas` CTAs (stage s multicast by
    CTA s % ctas to every CTA)."""
    text = (CLUSTER / "multicast_ring.tsk").read_text()
    text = (text.replace("const STAGES = 2", f"const STAGES = {stages}")
            .replace("if s == cta_rank", f"if s % {ctas} == cta_rank")
            .replace("arrive empty_w@s[s]", f"arrive empty_w@(s % {ctas})[s]"))
    if ctas != 2:
        text = (text.replace("block 160 cluster 2", f"block 160 cluster {ctas}")
                .replace("M % 128 == 0", f"M % {64 * ctas} == 0")
                .replace("count 8 guards ws", f"count {4 * ctas} guards ws")
                .replace("multicast 3", f"multicast {(1 << ctas) - 1}"))
    return text


def cases() -> list[tuple[str, str]]:
    out = [(p.stem, p.read_text()) for p in sorted(CLUSTER.glob("*.tsk"))]
    out += [("multicast_ring, 3 stages", ring_variant(3)),
            ("multicast_ring, 4 stages", ring_variant(4)),
            ("multicast_ring, 3 CTAs x 3 stages", ring_variant(3, 3))]
    return out


def verdict(obs) -> str:
    bad = sorted({o.code or "?" for o in obs if o.verdict is not Verdict.PROVED
                  and o.severity is Severity.ERROR})
    return ",".join(bad) if bad else "proved"


def measure(text: str, reduced: bool) -> tuple[str, float, str, str]:
    """(verdict, seconds, states, projections) of barrier + ownership."""
    reduce.ENABLED = reduced
    temporal._CACHE.clear()
    reduce._PROGRESS.clear()
    kernel = compile_source(text, "bench.tsk").kernels[0]
    options = CheckOptions()
    t0 = time.perf_counter()
    obs = barrier.check(kernel, options) + ownership.check(kernel, options)
    seconds = time.perf_counter() - t0
    ev = obs[0].evidence or {}
    arg = ev.get("argument", {}) if isinstance(ev, dict) else {}
    ring = arg.get("ring", {}) if isinstance(arg, dict) else {}
    run = temporal._CACHE.get((id(kernel), True, options))
    states = str(run[1].outcome.states) if run and run[1].outcome else "-"
    return verdict(obs), seconds, states, str(ring.get("projections", "-"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--whole", action="store_true",
                    help="also explore each view whole (minutes per ring: budgets)")
    args = ap.parse_args()
    head = ["kernel", "verdict", "s", "states", "projections"]
    if args.whole:
        head += ["whole: verdict", "s", "states", "speed-up"]
    rows = []
    for name, text in cases():
        v, s, st, pr = measure(text, True)
        row = [name, v, f"{s:.1f}", st, pr]
        if args.whole:
            wv, ws, wst, _ = measure(text, False)
            # a whole search cut short by the budget: the speed-up is at least this
            row += [wv, f"{ws:.1f}", wst, f"{'' if wv == 'proved' else '>= '}{ws / s:.1f}x"]
        rows.append(row)
        print(" | ".join(row), flush=True)
    reduce.ENABLED = True
    widths = [max(len(r[i]) for r in rows + [head]) for i in range(len(head))]
    print()
    print("| " + " | ".join(h.ljust(w) for h, w in zip(head, widths, strict=True)) + " |")
    print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for r in rows:
        print("| " + " | ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) + " |")


if __name__ == "__main__":
    main()
