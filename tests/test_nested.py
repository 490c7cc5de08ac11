"""The argument for every size of a loop nest (docs/temporal.md §15): the persistent GEMMs
proved, and the argument against plain exploration.

Plain exploration decides one size assignment at a time; the nested argument every one at
once. On generated ring kernels -- a tile loop around a k-loop, the ring restarted per tile
and its k-loop padded correctly or not -- the argument must prove exactly the variants no
small launch refutes, and refute the others with a launch a plain exploration refutes too.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tilesafe import api
from tilesafe.checkers.obligation import Verdict
from tilesafe.frontend.load import compile_source
from tilesafe.semantics.temporal import blockparam
from tilesafe.semantics.temporal.budget import Budget
from tilesafe.semantics.temporal.events import build_model
from tilesafe.semantics.temporal.explore import Machine, search
from tilesafe.semantics.temporal.nest import Linear, find
from tilesafe.semantics.temporal.parametric import explore_all

ROOT = Path(__file__).resolve().parent.parent
TEMPORAL = ("barrier", "ownership")

RING = """
kernel nest_ring(src: in global f16[M, K], dst: out global f16[M, K])
  where M % 64 == 0, K % 64 == 0, M > 0, K > 0, M <= 4096, K <= 4096
  grid {grid} block 64
{{
  const STAGES = {stages}
  tensormap tin = tiled(src, box [64, 64])
  shared buf: f16[STAGES, 64, 64]
  mbarrier full[STAGES] count 1 guards buf[i]
  mbarrier empty[STAGES] count 1 guards buf[i]

  if thread == 0 {{
    init full
    init empty
    fence mbarrier_init
  }}
  sync

  role producer = warp 0, elect one {{
    for t in {tiles} {{
      for k in 0 .. {steps} {{
        let s = k % STAGES
        wait empty[s] parity (k / STAGES + 1) % 2
        arrive full[s], expect_tx bytes(buf[s])
        tma_load buf[s] <- tin[t * 64, k * 64] signal full[s]
      }}
    }}
  }}
  role consumer = warp 1 {{
    for t in {tiles} {{
      for k in 0 .. {steps} {{
        let s = k % STAGES
        wait full[s] parity (k / STAGES) % 2
        for e in 0 .. 128 {{
          let idx = e * 32 + (thread - 32)
          dst[t * 64 + idx / 64, k * 64 + idx % 64] = buf[s, idx / 64, idx % 64]
        }}
        arrive empty[s], one per warp
      }}
    }}
  }}
}}
"""


def steps(kind: str, stages: int) -> str:
    """The k-loop's trip count: K / 64, or padded to a multiple of `m` ring steps (the ring
    starts every tile at stage 0, parity 0: right only when the count is a multiple of
    2 x STAGES)."""
    if kind == "plain":
        return "K / 64"
    m = 2 * stages if kind == "pad2s" else stages
    return f"((K + {64 * m - 1}) / {64 * m}) * {m}"


def model_of(stages: int, kind: str, ownership: bool = False, blocks: int = 1):
    """The ring kernel; with `blocks` > 1 a persistent one (tiles block.x, block.x + blocks,
    ...: the block index becomes a size, docs/temporal.md §11)."""
    tiles = "0 .. M / 64" if blocks == 1 else f"block.x .. M / 64 step {blocks}"
    src = RING.format(stages=stages, steps=steps(kind, stages), grid=blocks, tiles=tiles)
    kernel = blockparam.lift(compile_source(src, "nest.tsk").kernels[0])
    return build_model(kernel, ownership)


def nested_verdict(model) -> tuple[str, set[str]]:
    out = explore_all(model, True, 400_000, 10_000, Budget(max_states=400_000))
    codes = {f.code for f, _, _ in out.findings if not f.detail.get("candidate")}
    if out.complete and not out.findings:
        return "proved", codes
    return ("refuted" if codes else "unknown"), codes


def plain_codes(model, max_tiles: int = 3, max_k: int = 9, blocks: int = 1
                ) -> dict[tuple[int, int, int], set[str]]:
    """Every (M / 64, k-tiles, block) launch up to the bounds, explored plainly: the codes
    found."""
    out = {}
    for tiles in range(1, blocks * max_tiles + 1):
        for kt in range(1, max_k + 1):
            for b in range(blocks):
                sizes = {"M": 64 * tiles, "K": 64 * kt} | ({"block.x": b} if blocks > 1
                                                           else {})
                mach = Machine(model, sizes)
                res = search(mach, [mach.initial()], True, 200_000)
                assert res.stats.complete or res.findings, res.stats.reason
                out[(tiles, kt, b)] = {f.code for f in res.findings.values()
                                       if not f.detail.get("candidate")}
    return out


@pytest.mark.parametrize(("stages", "kind", "blocks"),
                         [(2, "pad2s", 1), (2, "pads", 1), (2, "plain", 1), (3, "pad2s", 1),
                          (3, "plain", 1), (2, "pad2s", 2), (2, "pads", 2)])
def test_nested_argument_agrees_with_plain_exploration(stages, kind, blocks):
    model = model_of(stages, kind, blocks=blocks)
    assert not isinstance(find(model), str)
    verdict, codes = nested_verdict(model)
    plain = plain_codes(model, max_k=2 * stages + 3, blocks=blocks)
    refuted = {k: v for k, v in plain.items() if v}
    if verdict == "proved":
        assert not refuted, f"proved, but plain exploration refutes {refuted}"
    else:
        assert verdict == "refuted", verdict
        assert refuted, "refuted, but no small launch shows it"
        assert codes & set().union(*refuted.values()), (codes, refuted)
    # The padding decides it: a multiple of 2 x STAGES steps is the only right one.
    assert (verdict == "proved") == (kind == "pad2s")


def test_levels_never_decrease_along_a_run():
    """nest.py's linear level is monotone over every transition of a plain exploration (the
    premise of exploring level by level)."""
    model = model_of(2, "pad2s")
    nest = find(model)
    mach = Machine(model, {"M": 192, "K": 320})
    lin = Linear(nest, 8, 0)  # ((320 + 255) / 256) * 4 k-steps
    res = search(mach, [mach.initial()], False, 100_000)
    assert res.stats.complete
    for st, parent in res.parents.items():
        if parent is not None:
            assert lin.level(parent[0]) <= lin.level(st)
    for st in res.visited:  # normalising and putting back is the identity
        lam = lin.level(st)
        assert lin.denormalise(lin.normalise(st, lam), lam) == st


def test_ownership_of_the_padded_ring_is_proved():
    verdict, codes = nested_verdict(model_of(2, "pad2s", ownership=True))
    assert verdict == "proved", codes


# ---- the persistent GEMMs (issues 20/21) ---------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("name", ["gemm_persistent", "gemm"])
def test_persistent_gemm_proves_every_temporal_obligation(name):
    obligations = api.verify(ROOT / "corpus" / "wgmma" / f"{name}.tsk", only=TEMPORAL)
    failing = [o for o in obligations if o.verdict is not Verdict.PROVED]
    assert not failing, [(o.code, o.name, o.message) for o in failing]
    arg = next(o.evidence for o in obligations if o.checker == "ownership")["argument"]
    assert arg["kind"].startswith("nested loops")
    assert arg["covers"] == "every size assignment allowed by 'where'"
