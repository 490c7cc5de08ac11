"""The wgmma hardware rules (checkers/mma.py): descriptors for every operand placement
(TS530), one descriptor per warpgroup (TS531), whole warpgroups (TS532), register budgets
(TS533); the async groups are the temporal checkers' (tests/test_temporal_wgmma.py).

Each bad variant is one planted edit of a good single-warpgroup MMA, refuted with its code;
the descriptor verdicts are cross-checked against the descriptor synthesis run directly on
the enumerated tile addresses."""

from __future__ import annotations

import pytest

from tilesafe.checkers import mma
from tilesafe.checkers.obligation import Verdict
from tilesafe.checkers.registry import CheckOptions
from tilesafe.frontend.load import compile_source

GOOD = """kernel tile_mma(a: in global {dt}[64, 64], b: in global {dt}[{bshape}],
                c: out global {acc}[64, 128])
  grid 1 block {block}
{{
  shared sa: {dt}[64, 64] layout {alay} align 1024
  shared sb: {dt}[{bshape}] layout {blay} align 1024
  fragment acc: {acc}[64, 128]
{extra}  sync
  {guard}wgmma_fence
  for kk in 0 .. {ksteps} {{
    wgmma acc += sa[0 : 64, {aorigin} : {k}] @ {btile}, scale_d kk > 0
  }}
  wgmma_commit
  wgmma_wait 0
  {close}for r in 0 .. 64 {{
    c[row(acc, r), col(acc, r)] = acc[r]
  }}
}}
"""
BASE = dict(dt="bf16", acc="f32", bshape="128, 64", alay="swizzle128B(row_major)",
            blay="swizzle128B(row_major)", block=128, extra="", guard="", close="",
            ksteps=4, aorigin="kk * 16", k=16, btile="sb[0 : 128, kk * 16 : 16].T")


def kernel(**edits):
    return compile_source(GOOD.format(**{**BASE, **edits}), "t.tsk").kernels[0]


def verdicts(k) -> dict[str, list]:
    out: dict[str, list] = {}
    for o in mma.check(k, CheckOptions()):
        out.setdefault(o.code or "proved", []).append(o)
    return out


def test_the_good_mma_is_proved():
    v = verdicts(kernel())
    assert set(v) == {"proved"}
    desc = [o for o in v["proved"] if "descriptor" in o.name]
    assert len(desc) == 2 and all("K-major, b128" in o.message for o in desc)


@pytest.mark.parametrize("edits, code", [
    ({"alay": "row_major"}, "TS530"),  # no swizzle, 128-byte rows: no core-matrix form
    ({"alay": "padded(row_major, 8)"}, "TS530"),  # padded rows: no stride describes them
    ({"alay": "swizzle64B(row_major)"}, "TS530"),  # a swizzle narrower than the rows
    ({"aorigin": "(thread / 64) * 16"}, "TS531"),  # half the warpgroup reads other columns
    ({"guard": "if thread < 64 {\n  ", "close": "}\n  "}, "TS532"),  # half a warpgroup
    ({"block": 256, "guard": "if thread < 192 {\n  ", "close": "}\n  "}, "TS532"),
])
def test_planted_bugs_are_refuted_with_their_code(edits, code):
    v = verdicts(kernel(**edits))
    refuted = {c for c, obs in v.items() if any(o.verdict is Verdict.REFUTED for o in obs)}
    assert refuted == {code}, {c: [o.message[:100] for o in obs] for c, obs in v.items()}


def test_tf32_operands_must_be_k_major():
    """B stored [K, N] (N contiguous, 128-byte rows) is MN-major: legal for 16-bit inputs,
    not for tf32."""
    def mn_kernel(dt: str, k: int) -> object:
        text = GOOD.format(**{**BASE, "dt": dt, "k": k, "ksteps": 64 // k,
                              "aorigin": f"kk * {k}", "bshape": "64, 64",
                              "btile": f"sb[kk * {k} : {k}, 0 : 64]"})
        text = text.replace("f32[64, 128]", "f32[64, 64]").replace("for r in 0 .. 64",
                                                                     "for r in 0 .. 32")
        return compile_source(text, "t.tsk").kernels[0]

    bf16 = verdicts(mn_kernel("bf16", 16))
    assert "TS530" not in bf16, bf16.get("TS530")
    assert any("MN-major" in o.message for o in bf16["proved"])
    tf32 = verdicts(mn_kernel("f32", 8))
    assert any("operand B" in o.name for o in tf32.get("TS530", [])), tf32.keys()


def test_fragments_over_the_register_budget():
    k = compile_source(GOOD.format(**BASE).replace(
        "fragment acc: f32[64, 128]", "fragment acc: f32[64, 128]\n  fragment big: f32[64, 256]"
        "\n  fragment big2: f32[64, 256]").replace(
        "  wgmma_commit", "  big[0] = 0.0\n  big2[0] = 0.0\n  wgmma_commit"), "t.tsk").kernels[0]
    v = verdicts(k)
    assert [o.counterexample["registers"] for o in v["TS533"]] == [64 + 128 + 128]


def test_descriptor_verdict_matches_direct_synthesis():
    """The checker's TS530 verdict is exactly what synthesis says on the tile addresses the
    interpreter's placement gives (both origins of both operands)."""
    import islpy as isl
    import numpy as np

    from tilesafe.semantics.access.access import collect
    from tilesafe.semantics.hw import mma_rules as mr
    from tilesafe.semantics.hw import wgmma_desc as wd
    from tilesafe.semantics.interpreter.smem import plan_shared

    for alay in ("swizzle128B(row_major)", "row_major", "swizzle32B(row_major)"):
        k = kernel(alay=alay)
        checker = {o.name: o.verdict for o in mma.check(k, CheckOptions())
                   if "descriptor" in o.name}
        for op in mr.operands(collect(k, isl.Context())):
            place = plan_shared(k.shared).placements[op.tile.buffer]
            tiles = []
            for kk in range(4):
                origin = (0, 16 * kk)
                tiles.append(mr.tile_addresses(op, origin, place))
            direct = wd.synthesize(tiles, k.buffer(op.tile.buffer).dtype)
            name = next(n for n in checker if f"operand {op.which}" in n)
            assert (checker[name] is Verdict.PROVED) == isinstance(direct, wd.Found)
            assert all(isinstance(t, np.ndarray) for t in tiles)
