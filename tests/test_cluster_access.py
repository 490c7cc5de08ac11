"""The access checker's cluster obligations (TS434): every CTA rank a kernel names (`part@r`,
`arrive full@r`) is in 0 .. C - 1 and every multicast mask in 1 .. 2^C - 1, for every
instance and every allowed size -- the static counterpart of the interpreter's TS434. The
temporal model assumes them, as it assumes every index in bounds."""

from __future__ import annotations

from pathlib import Path

import pytest

from tilesafe.checkers import access
from tilesafe.checkers.obligation import Verdict
from tilesafe.checkers.registry import CheckOptions
from tilesafe.frontend.load import compile_source, load_program
from tilesafe.semantics.interpreter.interp import InterpError, random_inputs, run_kernel

ROOT = Path(__file__).resolve().parent.parent
BAD = ROOT / "corpus" / "bad" / "ts434_dsmem_neighbour_past_cluster.tsk"

HEAD = """kernel k(x: in global f32[N], y: out global f32[N])
  where N % 256 == 0, N > 0, N <= 4096
  grid (N / 128) block 128 cluster 2
{
  shared part: f32[128]
  mbarrier ready count 128
"""


def ranks(text: str) -> list:
    k = compile_source(text, "k.tsk").kernels[0]
    return [o for o in access.check(k, CheckOptions()) if "inside the cluster" in o.name]


def body(lines: str, head: str = HEAD) -> str:
    return head + "".join(f"  {line}\n" for line in lines.splitlines()) + "}\n"


def test_neighbour_past_the_cluster_is_refuted_with_the_cta():
    obs = ranks(BAD.read_text())
    assert [o.verdict for o in obs] == [Verdict.REFUTED]
    o = obs[0]
    assert o.code == "TS434" and o.span.line == 14
    assert o.counterexample["rank"] == 2 and o.counterexample["block"] == [1]
    assert "rank 2 is outside the cluster" in o.message and "part@r" in o.message


def test_the_interpreter_agrees():
    k = load_program(BAD).kernels[0]
    with pytest.raises(InterpError) as err:
        run_kernel(k, {"N": 256}, random_inputs(k, {"N": 256}, 0), seed=0, policy="random")
    assert err.value.code == "TS434"


def test_the_fix_is_proved():
    text = BAD.read_text().replace("part@(cta_rank + 1)", "part@((cta_rank + 1) % 2)")
    obs = ranks(text)
    assert [o.verdict for o in obs] == [Verdict.PROVED]


def test_a_guard_narrows_the_instances():
    """Only CTA 0 names CTA cta_rank + 1: inside the cluster."""
    text = body("cluster_sync\nif cta_rank == 0 {\n  y[block.x * 128 + thread] = "
                "part@(cta_rank + 1)[thread]\n}\ncluster_sync")
    assert [o.verdict for o in ranks(text)] == [Verdict.PROVED]


def test_a_loop_variable_rank():
    good = body("cluster_sync\nfor r in 0 .. 2 {\n  part@r[thread] = 1.0\n}\ncluster_sync")
    assert [o.verdict for o in ranks(good)] == [Verdict.PROVED]
    bad = body("cluster_sync\nfor r in 0 .. 3 {\n  part@r[thread] = 1.0\n}\ncluster_sync")
    obs = ranks(bad)
    assert [o.code for o in obs] == ["TS434"]
    assert obs[0].counterexample["loops"] == {"r": 2} and "a store into part@r" in obs[0].message


def test_a_remote_arrive():
    text = body("if thread == 0 {\n  init ready\n}\ncluster_sync\n"
                "arrive ready@(cta_rank + 1), scope cluster\ncluster_sync")
    obs = ranks(text)
    assert [o.code for o in obs] == ["TS434"] and "an arrive on ready@r" in obs[0].message


@pytest.mark.parametrize(("mask", "verdict"), [("cta_rank + 1", Verdict.PROVED),
                                               ("cta_rank + 3", Verdict.REFUTED),
                                               ("cta_rank", Verdict.REFUTED)])
def test_a_multicast_mask(mask: str, verdict: Verdict):
    """CTA r multicasts into the CTAs of mask r + 1 (1, 2: fine); r + 3 names CTA 2 from
    CTA 1 (mask 4); r names no CTA from CTA 0 (mask 0)."""
    head = """kernel k(src: in global f32[M, N], dst: out global f32[M, N])
  where M % 64 == 0, N % 64 == 0, M > 0, N > 0, M <= 4096, N <= 4096
  grid (2 * (M / 64), N / 64) block 128 cluster 2
{
  tensormap tin = tiled(src, box [64, 64])
  shared tile: f32[64, 64]
  mbarrier ready count 1
"""
    text = body("if thread == 0 {\n  init ready\n}\ncluster_sync\nif thread == 0 {\n"
                "  arrive ready, expect_tx 16384\n"
                f"  tma_load tile <- tin[0, 0] signal ready, multicast {mask}\n}}\n"
                "cluster_sync", head)
    obs = ranks(text)
    assert [o.verdict for o in obs] == [verdict], [o.message for o in obs]
    if verdict is Verdict.REFUTED:
        assert obs[0].code == "TS434" and "mask" in obs[0].message


def test_one_obligation_per_reference_none_without_a_cluster():
    k = load_program(ROOT / "corpus" / "cluster" / "cluster_row_sum.tsk").kernels[0]
    names = [o.name for o in access.check(k, CheckOptions())]
    assert sum("inside the cluster" in n for n in names) == 1
    k = load_program(ROOT / "corpus" / "wgmma" / "gemm.tsk").kernels[0]
    assert not any("inside the cluster" in o.name for o in access.check(k, CheckOptions()))
