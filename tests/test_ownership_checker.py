"""The ownership checker: the good corpus is proved, every race it reports makes the reference
interpreter produce a wrong output under some schedule, and for random small pipelines
(stages, consumer warps, trip counts, mutated parities / counts / byte counts) its verdict,
together with the barrier checker's, agrees with running the kernel."""

from __future__ import annotations

import functools
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tilesafe.checkers import barrier, ownership, temporal
from tilesafe.checkers.obligation import Severity, Verdict
from tilesafe.checkers.registry import CheckOptions
from tilesafe.frontend.load import compile_source, load_program
from tilesafe.semantics.interpreter.interp import InterpError, random_inputs, run_kernel
from tilesafe.semantics.interpreter.interp_io import as_float

sys.path.insert(0, str(Path(__file__).resolve().parent))
from schedules import shows_failure  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
GOOD = sorted((ROOT / "corpus" / "good").glob("*.tsk"))
BAD = ROOT / "corpus" / "bad"
OPTS = CheckOptions()


@functools.cache
def kernel_of(path: Path):
    """Parsed once per test session, so the checkers' per-kernel cache is shared."""
    return load_program(path).kernels[0]


@pytest.mark.parametrize("path", GOOD, ids=[p.name for p in GOOD])
def test_good_corpus_proved(path: Path):
    obs = ownership.check(kernel_of(path), OPTS)
    assert {o.name.split(": ", 1)[1] for o in obs} == {p.name for p in ownership.PROPS}
    bad = [f"{o.name}: {o.verdict.value} {o.message}" for o in obs
           if o.verdict is not Verdict.PROVED]
    assert not bad, bad


def test_permission_state_per_program_point_is_evidence():
    obs = ownership.check(kernel_of(ROOT / "corpus" / "good" / "pipeline2.tsk"), OPTS)
    table = obs[0].evidence["permissions per program point"]
    # After its wait on full[s] the consumer holds the whole stage, and hands it back.
    reads = [v for k, v in table.items() if k.startswith("consumer @") and "(arrive)" in k]
    assert reads and any("buf[0]: 1" in s or "buf[1]: 1" in s for s in reads[0])
    waits = [v for k, v in table.items() if k.startswith("producer @") and "(wait)" in k]
    assert waits


def test_race_evidence_names_the_region_and_holders():
    obs = ownership.check(kernel_of(BAD / "ts303_producer_skips_empty_wait.tsk"), OPTS)
    o = next(o for o in obs if o.code == "TS303")
    assert o.verdict is Verdict.REFUTED and o.severity is Severity.ERROR
    assert o.counterexample["region"].startswith("buf[")
    assert any("in-flight" in line or "consumer" in line
               for line in o.counterexample["permissions"])
    assert "TMA load into buf[" in o.message


# ---- races found statically give wrong outputs in the interpreter ----------------------------

RACES = {  # file -> (sizes, reference function of the inputs)
    "ts302_reduction_missing_sync.tsk": ({"M": 8, "N": 32},
                                         lambda k, i: {"out": _f(k, i, "x").sum(axis=1)}),
    "ts303_producer_skips_empty_wait.tsk": ({"M": 64, "N": 192},
                                            lambda k, i: {"dst": _f(k, i, "src")}),
    # The interpreter runs threads one by one: lanes that pass the wrong-parity wait before
    # the tile lands read poison, lanes that test it after the copy block for a phase that
    # never comes, so the run ends in a deadlock rather than with a wrong output.
    "ts304_wrong_wait_parity.tsk": ({"M": 64, "N": 64}, lambda k, i: {"dst": _f(k, i, "src")}),
    "ts305_release_before_last_read.tsk": ({"M": 64, "N": 192},
                                           lambda k, i: {"dst": _f(k, i, "src")}),
    "ts407_expect_tx_one_tile_short.tsk": ({"M": 64, "N": 128},
                                           lambda k, i: {"dst": _f(k, i, "a") + _f(k, i, "b")}),
}


def _f(k, inputs, name):
    return as_float(inputs[name], k.tensor(name).dtype)


def wrong_output_seed(k, sizes, ref, seeds, errors: bool = False) -> int | None:
    """The first seed whose run produces a wrong output (or, with `errors`, fails)."""
    inputs = random_inputs(k, sizes, 1)
    want = ref(k, inputs)
    for seed in seeds:
        try:
            res = run_kernel(k, sizes, inputs, seed=seed)
        except InterpError:
            if errors:
                return seed
            continue
        for name, value in want.items():
            if not np.array_equal(as_float(res.tensors[name], k.tensor(name).dtype), value):
                return seed
    return None


@pytest.mark.parametrize("name", sorted(RACES))
def test_static_race_gives_a_different_output(name: str):
    k = kernel_of(BAD / name)
    obs = ownership.check(k, OPTS) + barrier.check(k, OPTS)
    # Reported as the kernel's error, or as a warning that follows from it (code in evidence).
    assert any(o.verdict is Verdict.REFUTED and o.checker == "ownership"
               and (o.code or o.evidence.get("code", "")).startswith("TS3") for o in obs)
    sizes, ref = RACES[name]
    errors = name.startswith("ts304_wrong")
    assert wrong_output_seed(k, sizes, ref, range(8), errors=errors) is not None


def test_good_pipeline_output_is_schedule_independent():
    k = kernel_of(ROOT / "corpus" / "good" / "pipeline2.tsk")
    assert wrong_output_seed(k, {"M": 64, "N": 192},
                             lambda k, i: {"dst": _f(k, i, "src")}, range(3)) is None


# ---- property: random small pipelines, checker verdict vs running them -------------------------

TEMPLATE = """
kernel gen(src: global f16[M, N], dst: global f16[M, N])
  where M % 8 == 0, N % 8 == 0, M > 0, N > 0, M <= 64, N <= 512
  grid (M / 8) block {block}
{{
  const STAGES = {stages}
  tensormap tin = tiled(src, box [8, 8])
  shared buf: f16[STAGES, 8, 8]
  mbarrier full[STAGES] count 1 guards buf[i]
  mbarrier empty[STAGES] count {empty_count} guards buf[i]

  if thread == 0 {{ init full; init empty; fence mbarrier_init }}
  sync

  role producer = warp 0, elect one {{
    for k in 0 .. N / 8 {{
      let s = k % STAGES
      wait empty[s] parity (k / STAGES + {pp}) % 2
      arrive full[s], expect_tx {nbytes}
      tma_load buf[s] <- tin[block.x * 8, k * 8] signal full[s]
    }}
  }}
  role consumer = warps 1 .. {last} {{
    for k in 0 .. N / 8 {{
      let s = k % STAGES
      wait full[s] parity (k / STAGES + {cp}) % 2
      for e in 0 .. {sweeps} {{
        let idx = e * {width} + (thread - 32)
        if idx < 64 {{
          dst[block.x * 8 + idx / 8, k * 8 + idx % 8] = buf[s, idx / 8, idx % 8]
        }}
      }}
      arrive empty[s], one per warp
    }}
  }}
}}
"""


@st.composite
def pipelines(draw):
    stages = draw(st.integers(1, 4))
    warps = draw(st.integers(1, 4))
    mutation = draw(st.sampled_from(["none", "none", "producer parity", "consumer parity",
                                     "count", "count low", "bytes low", "bytes high"]))
    if mutation == "count low" and warps == 1:
        mutation = "count"
    width = 32 * warps
    fields = dict(stages=stages, block=32 * (warps + 1), empty_count=warps, pp=1, cp=0,
                  nbytes=128, last=warps + 1, width=width, sweeps=-(-64 // width))
    if mutation == "producer parity":
        fields["pp"] = 0
    elif mutation == "consumer parity":
        fields["cp"] = 1
    elif mutation == "count":
        fields["empty_count"] = warps + 1
    elif mutation == "count low":  # W warp arrivals against a count of W - 1
        fields["empty_count"] = warps - 1
    elif mutation == "bytes low":
        fields["nbytes"] = 64
    elif mutation == "bytes high":
        fields["nbytes"] = 256
    return mutation, TEMPLATE.format(**fields)


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=pipelines())
def test_verdict_agrees_with_running_the_kernel(case):
    mutation, src = case
    k = compile_source(src).kernels[0]
    obs = barrier.check(k, OPTS) + ownership.check(k, OPTS)
    errors = [o for o in obs if o.verdict is not Verdict.PROVED and o.severity is Severity.ERROR]
    refuted = [o for o in errors if o.verdict is Verdict.REFUTED]
    assert all(o.verdict is Verdict.REFUTED for o in errors), [o.message for o in errors]
    if not refuted:
        # Proved for every trip count: every run at small sizes is correct.
        assert mutation == "none"
        for trip in (1, 2, 5):
            sizes = {"M": 8, "N": 8 * trip}
            assert wrong_output_seed(k, sizes, lambda k, i: {"dst": _f(k, i, "src")},
                                     range(2)) is None
            _no_error(k, sizes, range(2))
        return
    assert mutation != "none", [o.message for o in refuted]
    # The interpreter shows the refutation: the checker's counterexample replayed, then
    # adversarial (PCT) scheduling; a fixed set of seeded runs, so this is deterministic.
    # The interpreter runs threads one by one (the checker runs each class in lockstep): a
    # surplus arrival spills into the next phase and shows a few tiles later, so the run
    # is followed in a launch with a few tiles more when it is a run of that launch too.
    cex = refuted[0].counterexample
    sizes = {"M": 8, "N": max(cex["sizes"]["N"], 48)}
    g = temporal.interpreter_guide(k, OPTS, refuted[0].code, sizes)
    if g is None:
        g = temporal.interpreter_guide(k, OPTS, refuted[0].code)
        sizes = g[0]
    shown = shows_failure(k, sizes, lambda s, i: {"dst": i["src"]}, g[1])
    assert shown, (mutation, refuted[0].code, sizes)


def _no_error(k, sizes, seeds):
    inputs = random_inputs(k, sizes, 1)
    for seed in seeds:
        run_kernel(k, sizes, inputs, seed=seed)
