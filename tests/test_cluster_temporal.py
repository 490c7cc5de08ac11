"""The temporal checkers across the CTAs of a cluster (docs/temporal.md §16): the cluster
as one block (semantics/temporal/cluster_view.py) with the cluster family's scopes and
lifetimes (semantics/temporal/explore/ops/cluster.py).

Good cluster kernels prove every barrier and ownership property for every trip count; the
four real-world bug classes (SGLang #32907, CUTLASS #3643 and #3324, SGLang #38829) and
the other cluster bad kernels are refuted with their code and a message naming the CTA,
the barrier and the scope; each fix is proved; and the reference interpreter shows the
lifetime bugs."""

from __future__ import annotations

from pathlib import Path

import pytest

from tilesafe.checkers import barrier, ownership
from tilesafe.checkers.obligation import Verdict
from tilesafe.checkers.registry import CheckOptions
from tilesafe.frontend import ir
from tilesafe.frontend.load import compile_source, load_program
from tilesafe.semantics.interpreter.interp import InterpError, random_inputs, run_kernel
from tilesafe.semantics.temporal import cluster_view, reduce, ring
from tilesafe.semantics.temporal.budget import Budget
from tilesafe.semantics.temporal.events import build_model

ROOT = Path(__file__).resolve().parent.parent
OPTIONS = CheckOptions()


def kernel_at(path: Path) -> ir.Kernel:
    return load_program(path).kernels[0]


def kernel_text(text: str) -> ir.Kernel:
    return compile_source(text, "c.tsk").kernels[0]


def verdicts(k: ir.Kernel) -> list:
    return barrier.check(k, OPTIONS) + ownership.check(k, OPTIONS)


def refuted(k: ir.Kernel) -> list:
    return [o for o in verdicts(k) if o.verdict is Verdict.REFUTED and o.code]


@pytest.mark.parametrize("name", ["multicast_copy", "cluster_row_sum", "multicast_halves",
                                  "dsmem_exchange", "cluster4_row_sum"])
def test_good_cluster_kernels_proved(name: str):
    obs = verdicts(kernel_at(ROOT / "corpus" / "cluster" / f"{name}.tsk"))
    assert obs and all(o.verdict is Verdict.PROVED for o in obs), [
        (o.name, o.verdict, o.message) for o in obs if o.verdict is not Verdict.PROVED]
    names = {o.name.split(": ", 1)[1] for o in obs}
    assert {"cluster-lifetime", "cluster-scope"} <= names


def ring_text(stages: int = 2) -> str:
    """corpus/cluster/multicast_ring.tsk with `stages` stages, stage s owned (multicast)
    by CTA s % 2."""
    text = (ROOT / "corpus" / "cluster" / "multicast_ring.tsk").read_text()
    if stages == 2:
        return text
    return (text.replace("const STAGES = 2", f"const STAGES = {stages}")
            .replace("if s == cta_rank", "if s % 2 == cta_rank")
            .replace("arrive empty_w@s[s]", "arrive empty_w@(s % 2)[s]"))


@pytest.mark.parametrize("stages", [2, 3, pytest.param(4, marks=pytest.mark.slow)])
def test_multicast_ring_proved_through_its_stage_projections(stages: int):
    """The ring whose empty_w barrier gathers the consumer arrivals of both CTAs, for
    every trip count, through the projection onto stage s of every CTA (ring.py): one
    search per stage, as the stages' owners differ (2 stages: 28,000 states in a few
    seconds, where the whole cluster took 420,000 and 2-3 minutes; 3 stages ran past the
    1,000,000-state budget whole)."""
    k = kernel_text(ring_text(stages))
    r = ring.project(k)
    assert isinstance(r, ring.Ring) and r.stages == stages and not r.alike
    assert len(r.projections) == stages
    obs = verdicts(k)
    assert obs and all(o.verdict is Verdict.PROVED for o in obs), [
        (o.name, o.verdict, o.message) for o in obs if o.verdict is not Verdict.PROVED]
    arg = obs[0].evidence["argument"]["ring"]
    assert arg["projections"] == stages and "every CTA" in arg["cluster"]


RING_MUTANTS = {
    # mutant of the 2-stage ring -> (replacement, the codes that may refute it)
    "remote arrive at .cta scope": ((", one per warp, scope cluster",
                                     ", one per warp, scope cta"), {"TS309"}),
    "owner's wait acquires at .cta scope": (("(k / STAGES + 1) % 2, scope cluster",
                                             "(k / STAGES + 1) % 2"), {"TS309"}),
    "no wait before the multicast": (
        ("      wait empty_w[s] parity (k / STAGES + 1) % 2, scope cluster\n", ""), {"TS303"}),
    "empty_w counts one CTA": (("empty_w[STAGES] count 8", "empty_w[STAGES] count 4"),
                               {"TS303"}),
    "every arrival on CTA 0's empty_w": (("empty_w@s[s], one", "empty_w@0[s], one"),
                                        {"TS407", "TS406", "TS410"}),
    "last stage's parity flipped": (
        ("wait full[s] parity (k / STAGES) % 2",
         "wait full[s] parity (k / STAGES + k % STAGES / (STAGES - 1)) % 2"), {"TS304"}),
    "full expects the x tile only": (("expect_tx bytes(xs[s]) + bytes(ws[s])",
                                      "expect_tx bytes(xs[s])"), {"TS304", "TS404"}),
}


# In the default run: one scope, one count, one parity mutant; the rest with the slow tests
# (10-25 s each).
QUICK_MUTANTS = {"remote arrive at .cta scope", "empty_w counts one CTA",
                 "last stage's parity flipped"}


@pytest.mark.parametrize("name", [n if n in QUICK_MUTANTS else
                                  pytest.param(n, marks=pytest.mark.slow)
                                  for n in sorted(RING_MUTANTS)])
def test_ring_mutants_not_proved_by_the_projection_and_refuted(name: str):
    """No mutant is proved through the stage projections (for the scope mutants: in the
    ownership semantics, where scopes live), and the checkers refute each."""
    (old, new), codes = RING_MUTANTS[name]
    text = ring_text()
    assert text.count(old) == 1
    k = kernel_text(text.replace(old, new))
    reduce._PROGRESS.clear()
    assert reduce.by_ring(k, True, 10_000, Budget(max_states=300_000),
                          cluster=cluster_view.info(k)) is None
    got = {o.code for o in refuted(k)}
    assert got and got <= codes, got


def test_mma_multicast_proved_for_every_trip_count():
    """Tensor cores fed by a ring whose B stages the two CTAs take turns to multicast:
    wgmma groups, remote arrivals at cluster scope, both CTAs' lifetimes -- through the
    stage projections (each iteration commits and waits for its MMAs; about 15 s, where
    the whole view took about 2 minutes)."""
    obs = verdicts(kernel_at(ROOT / "corpus" / "cluster" / "mma_multicast.tsk"))
    assert obs and all(o.verdict is Verdict.PROVED for o in obs), [
        (o.name, o.verdict, o.message) for o in obs if o.verdict is not Verdict.PROVED]
    names = {o.name.split(": ", 1)[1] for o in obs}
    assert {"cluster-lifetime", "cluster-scope", "mmas-done-at-exit"} <= names


BAD = {
    "ts432_dsmem_read_after_peer_exit": ("TS432", ("cta 1", "finished")),
    "ts309_remote_arrive_cta_scope": ("TS309", ("cta1", "ready@cta0", ".cta scope")),
    "ts309_gather_wait_cta_scope": ("TS309", ("gather@cta0", "acquires at .cta scope")),
    "ts309_relaxed_cluster_arrive": ("TS309", ("relaxed cluster_arrive",)),
    "ts433_multicast_before_peer_init": ("TS433", ("cta 1", "ready@cta1")),
    "ts410_multicast_peer_not_armed": ("TS410", ("ready@cta1", "tx -16384")),
}


@pytest.mark.parametrize("name", sorted(BAD))
def test_bad_cluster_kernels_refuted(name: str):
    code, words = BAD[name]
    bad = refuted(kernel_at(ROOT / "corpus" / "bad" / f"{name}.tsk"))
    assert [o.code for o in bad] == [code], [(o.code, o.message) for o in bad]
    msg = bad[0].message
    assert all(w in msg for w in words), msg
    assert bad[0].counterexample and bad[0].counterexample.get("trace")


FIXES = {
    # the fix of each bad kernel, as a text replacement
    "ts309_remote_arrive_cta_scope": ("    arrive ready@0\n",
                                      "    arrive ready@0, scope cluster\n"),
    "ts309_gather_wait_cta_scope": ("    wait gather parity 0\n",
                                    "    wait gather parity 0, scope cluster\n"),
    "ts309_relaxed_cluster_arrive": ("  cluster_arrive relaxed\n", "  cluster_arrive\n"),
    "ts433_multicast_before_peer_init": ("  }\n  sync\n", "  }\n  cluster_sync\n"),
}


@pytest.mark.parametrize("name", sorted(FIXES))
def test_each_fix_is_proved(name: str):
    old, new = FIXES[name]
    text = (ROOT / "corpus" / "bad" / f"{name}.tsk").read_text()
    assert old in text
    obs = verdicts(kernel_text(text.replace(old, new)))
    assert all(o.verdict is Verdict.PROVED for o in obs), [
        (o.name, o.code, o.message) for o in obs if o.verdict is not Verdict.PROVED]


def test_a_cta_scoped_remote_arrive_without_writes_is_fine():
    """Scope matters for what is handed over: an arrive that hands nothing over (its
    class holds nothing the barrier guards) is no race, whatever its scope."""
    text = (ROOT / "corpus" / "bad" / "ts309_remote_arrive_cta_scope.tsk").read_text()
    text = text.replace("    both@0[1, thread] = x[block.x * 128 + thread]\n", "")
    text = text.replace("    y[block.x * 128 + 128 + thread] = both[1, thread]\n",
                        "    y[block.x * 128 + 128 + thread] = x[block.x * 128 + 128 + thread]\n")
    assert not refuted(kernel_text(text))


@pytest.mark.parametrize(("name", "code"), [("ts432_dsmem_read_after_peer_exit", "TS432"),
                                            ("ts433_multicast_before_peer_init", "TS433"),
                                            ("ts410_multicast_peer_not_armed", "TS410")])
def test_interpreter_shows_it(name: str, code: str):
    """Adversarial schedules (PCT, at most 64 seeds) reach the refuted behaviour."""
    k = kernel_at(ROOT / "corpus" / "bad" / f"{name}.tsk")
    sizes = {s: 64 for s in k.sizes} if "M" not in k.sizes or "N" in k.sizes else {"M": 1}
    codes = set()
    for seed in range(64):
        try:
            run_kernel(k, sizes, random_inputs(k, sizes, seed), seed=seed, policy="pct")
        except InterpError as err:
            codes.add(err.code)
            if err.code == code:
                break
    assert code in codes, codes


def test_view_folds_cta_rank_and_names_ctas():
    k = kernel_at(ROOT / "corpus" / "cluster" / "multicast_ring.tsk")
    v = cluster_view.view(k)
    assert v.block == 2 * k.block and v.cluster is None
    assert v.buffer("xs").shape == (2,) + k.buffer("xs").shape
    assert v.barrier("empty_w").length == 4
    m = build_model(v, True, cluster_view.info(k))
    assert [m.label(i) for i in range(m.inst_id("empty_w", 0), m.inst_id("empty_w", 0) + 4)] \
        == ["empty_w[0]@cta0", "empty_w[1]@cta0", "empty_w[0]@cta1", "empty_w[1]@cta1"]
    assert {a.cls.name for a in m.agents} >= {"cta0+producer", "cta1+consumer"}
    # `if s == cta_rank` folded to a constant per CTA: no block-dependent synchronisation
    from tilesafe.frontend.walk import statements
    conds = [s.cond for s in statements(v.body) if isinstance(s, ir.If)]
    assert all("block" not in repr(c) for c in conds)
