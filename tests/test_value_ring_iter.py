"""The ring rule by iteration (semantics/value/value_ring_iter.py): a stage refilled by
loads that different threads issue -- a cluster's multicast, whichever CTA owns the stage
-- is resolved to the load of the waited iteration, so the cluster rings' `ensures` are
proved for every size. Mutants that read another stage, load another tile, leave a CTA's
stage unwritten or change the spec are refuted (by the interpreter's launch) or not
proved; and on small sizes the interpreter, under adversarial schedules, computes what the
proved clause says."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tilesafe.checkers import value
from tilesafe.checkers.obligation import Verdict
from tilesafe.checkers.registry import CheckOptions
from tilesafe.frontend import ir
from tilesafe.frontend.load import compile_source, load_program
from tilesafe.semantics.interpreter.interp import random_inputs, run_kernel

ROOT = Path(__file__).resolve().parent.parent
RING = ROOT / "corpus" / "cluster" / "multicast_ring.tsk"


def kernel_text(text: str) -> ir.Kernel:
    return compile_source(text, "r.tsk").kernels[0]


def verdicts(k: ir.Kernel) -> list:
    return value.check(k, CheckOptions())


def deeper(stages: int) -> str:
    """multicast_ring with `stages` stages, stage s multicast by CTA s % 2."""
    return (RING.read_text().replace("const STAGES = 2", f"const STAGES = {stages}")
            .replace("if s == cta_rank", "if s % 2 == cta_rank")
            .replace("arrive empty_w@s[s]", "arrive empty_w@(s % 2)[s]"))


@pytest.mark.parametrize("name", ["multicast_ring", "mma_multicast"])
def test_cluster_rings_ensures_proved(name: str):
    obs = verdicts(load_program(ROOT / "corpus" / "cluster" / f"{name}.tsk").kernels[0])
    assert obs and all(o.verdict is Verdict.PROVED for o in obs), [
        (o.code, o.message) for o in obs]


def test_deeper_ring_with_alternating_owners_proved():
    obs = verdicts(kernel_text(deeper(3)))
    assert obs and all(o.verdict is Verdict.PROVED for o in obs), [
        (o.code, o.message) for o in obs]


MUTANTS = {
    # name -> (old, new, refuted: TS802 expected; else at least not proved)
    "reads the other stage of w": ("* ws[s, idx % 64]", "* ws[(s + 1) % STAGES, idx % 64]",
                                   True),
    "multicasts the mirrored tile": ("tw[k * 64] signal", "tw[(N / 64 - 1 - k) * 64] signal",
                                     True),
    "loads the cluster's first row tile": ("tx[block.x * 64, k * 64]",
                                           "tx[(block.x / 2) * 128, k * 64]", True),
    "spec off by one": ("x[i, j] * w[j]\n", "x[i, j] * w[j] + 1.0\n", True),
    "multicast to CTA 0 only": ("multicast 3", "multicast 1", False),
}


@pytest.mark.parametrize("name", sorted(MUTANTS))
def test_mutants_not_proved(name: str):
    old, new, refutes = MUTANTS[name]
    text = RING.read_text()
    assert text.count(old) == 1
    obs = verdicts(kernel_text(text.replace(old, new)))
    assert obs and not any(o.verdict is Verdict.PROVED for o in obs)
    if refutes:
        assert any(o.verdict is Verdict.REFUTED and o.code == "TS802" for o in obs), [
            (o.code, o.message) for o in obs]


@pytest.mark.parametrize("stages", [2, 3])
def test_interpreter_agrees_with_the_proved_clause(stages: int):
    """Adversarial (PCT) schedules on small sizes: out == x * w, as proved."""
    k = kernel_text(deeper(stages))
    for seed, sizes in enumerate(({"M": 128, "N": 64}, {"M": 256, "N": 320})):
        inputs = random_inputs(k, sizes, seed)
        out = run_kernel(k, sizes, inputs, seed=seed, policy="pct").tensors["out"]
        want = inputs["x"].astype(np.float32) * inputs["w"].astype(np.float32)[None, :]
        assert np.array_equal(out, want)
