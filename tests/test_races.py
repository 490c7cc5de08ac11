"""Races between the threads of one class and uninitialised shared-memory reads.

The event model runs a class of threads as one lockstep agent; footprints keep which thread
touches which element (semantics/temporal/footprint.py), so a read of another thread's unordered
write (a deleted `sync`), a write over another thread's unordered read (a tile reused
without a trailing `sync`) and a read of memory nothing wrote are found; candidates on
over-approximated footprints are refuted only with a witness block (semantics/temporal/witness.py),
else UNKNOWN (TS492) -- never PROVED."""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np

from tilesafe.checkers import barrier, ownership
from tilesafe.checkers.obligation import Severity, Verdict
from tilesafe.checkers.registry import CheckOptions
from tilesafe.frontend.load import compile_source, load_program
from tilesafe.semantics.temporal import footprint as fpm
from tilesafe.semantics.temporal.events import build_model

ROOT = Path(__file__).resolve().parent.parent
GOOD = ROOT / "corpus" / "good"
OPTS = CheckOptions()


@functools.cache
def kernel(src: str):
    return compile_source(src).kernels[0]


def verdicts(k) -> dict[str, tuple[str, str | None]]:
    """Property name -> (verdict, code) of the error-severity ownership obligations."""
    obs = ownership.check(k, OPTS) + barrier.check(k, OPTS)
    return {o.name.split(": ", 1)[1]: (o.verdict.value, o.code or o.evidence.get("code"))
            for o in obs if o.verdict is not Verdict.PROVED}


def access_footprint(src: str, cls: int = 0, which: int = 0) -> fpm.Footprint:
    k = kernel(src)
    model = build_model(k, True)
    agent = model.agents[cls]
    ins = [i for i in agent.code if i.op == "access"][which]
    return fpm.evaluate(ins.access, {"block.x": 0}, agent.cls.threads, k,
                        literals=fpm.Literals())


# ---- footprints with thread identity -----------------------------------------------------------

ACC = """
kernel acc(x: global f32[64], y: global f32[64]) grid 1 block 64 {
  shared s: f32[64]
  shared u: f32[64]
  for r in 0 .. 4 {
    s[thread] = s[thread] + x[thread]
  }
  u[thread] = x[thread]
  y[thread] = u[thread] + u[63 - thread]
}
"""


def test_thread_maps_must_writes_and_exposed_reads():
    fp = access_footprint(ACC, which=0)
    s = fp.bufs["s"]
    assert list(s.writes[:3]) == [0, 1, 2] and list(s.reads[:3]) == [0, 1, 2]
    assert s.must.all()
    # The first iteration reads s[t] before thread t wrote it: exposed (uninitialised).
    assert s.exposed.all() and list(s.exposed_by[:2]) == [0, 1]
    assert fpm.self_conflict(fp.touches()) is None  # every thread on its own elements
    write = access_footprint(ACC, which=1).touches()
    read = access_footprint(ACC, which=2)
    assert read.bufs["u"].exposed.all()  # nothing of u is written by the reading access
    # u[0] is written by thread 0 and read by threads 0 and 63: a read after another
    # thread's write.
    c = fpm.conflict(write, read.touches())
    assert c == fpm.Conflict(fpm.RAW, "u", 0, 0, fpm.SEVERAL) and c.code == "TS304"
    assert fpm.conflict(write, {"u": (np.arange(64, dtype=np.int32),
                                      np.full(64, fpm.NONE, np.int32))}) is None


GUARDED = """
kernel g(x: global f32[M], y: global f32[M]) where M > 0 grid ((M + 63) / 64) block 64 {
  shared s: f32[64]
  if block.x * 64 + thread < M {
    s[thread] = x[block.x * 64 + thread]
  }
  if block.x * 64 + thread < M {
    y[block.x * 64 + thread] = s[thread] * 2.0
  }
}
"""


def test_a_guarded_write_covers_the_same_threads_read_under_the_same_guard():
    lits = fpm.Literals()
    k = kernel(GUARDED)
    agent = build_model(k, True).agents[0]
    w, r = [fpm.evaluate(i.access, {}, agent.cls.threads, k, literals=lits)
            for i in agent.code if i.op == "access"]
    assert not w.bufs["s"].must.any()  # not certain: the guard depends on the block
    assert (w.bufs["s"].covered == np.arange(64)).all()
    assert (r.bufs["s"].exposed_by == np.arange(64)).all()
    assert ((w.bufs["s"].covered_guard & ~r.bufs["s"].exposed_guard) == 0).all()
    assert verdicts(k) == {}  # proved: no uninitialised read, no race


# ---- races between threads of one class --------------------------------------------------------

TRANSPOSE = (GOOD / "transpose_swizzled.tsk").read_text()


def test_deleted_sync_in_the_transpose_is_a_race_with_a_witness():
    k = kernel(TRANSPOSE.replace("  sync\n", ""))
    obs = ownership.check(k, OPTS)
    o = next(o for o in obs if o.code == "TS304")
    assert o.verdict is Verdict.REFUTED and o.severity is Severity.ERROR
    assert "same class" in o.message and "witness: block" in o.message
    w = o.evidence.get("witness") or o.counterexample
    assert w


def test_the_good_transposes_are_proved():
    for name in ("transpose_swizzled", "transpose_ragged", "cute_layout", "cute_colmajor"):
        assert verdicts(load_program(GOOD / f"{name}.tsk").kernels[0]) == {}, name


def test_tile_reused_without_a_trailing_sync_is_a_write_after_read_race():
    src = (ROOT / "corpus" / "bad" / "ts302_tile_reused_without_trailing_sync.tsk").read_text()
    v = verdicts(kernel(src))
    assert v["write-permission"] == ("refuted", "TS302")
    fixed = src.replace("    // (the sync that belongs here was removed)\n", "    sync\n")
    assert verdicts(kernel(fixed)) == {}


BARRIER_ORDERED = """
kernel nb(x: global f32[128], y: global f32[128]) grid 1 block 128 {
  shared s: f32[128]
  mbarrier b count 128 guards s
  if thread == 0 { init b }
  sync
  s[thread] = x[thread]
  arrive b
  wait b parity 0
  y[thread] = s[127 - thread]
}
"""


def test_ordering_through_an_mbarrier_of_the_class_is_unknown_not_proved():
    """All 128 threads arrive on b, then wait for its phase: the mbarrier orders them (an
    emulated named barrier), which the lockstep model does not decide -- UNKNOWN, never
    PROVED, never a refutation without a witness."""
    v = verdicts(kernel(BARRIER_ORDERED))
    assert v["read-permission"] == ("unknown", "TS492")
    assert all(verdict != "refuted" for verdict, _ in v.values())


def test_unconfirmed_candidate_is_unknown():
    """Thread t reads s[t + 1], written by thread t + 1 under its own guard: the reads are
    covered for every launch, but not by the same thread, which the footprints do not
    decide, and no launch shows a violation: UNKNOWN (TS492)."""
    src = """
    kernel shift(x: global f32[N], y: global f32[N]) where N > 0, N <= 64
      grid 1 block 64 {
      shared s: f32[64]
      if thread < N { s[thread] = x[thread] }
      sync
      if thread + 1 < N { y[thread] = s[thread + 1] }
    }
    """
    v = verdicts(kernel(src))
    assert v == {"initialised-reads": ("unknown", "TS492")}


# ---- uninitialised reads -----------------------------------------------------------------------


def test_accumulator_never_zeroed_is_uninitialised():
    src = """
    kernel colsum(x: global f32[M, 128], out: global f32[128]) where M > 0 grid 1 block 128 {
      shared acc: f32[128]
      for r in 0 .. M {
        acc[thread] = acc[thread] + x[r, thread]
      }
      sync
      out[thread] = acc[thread]
    }
    """
    v = verdicts(kernel(src))
    assert v["initialised-reads"] == ("refuted", "TS306")
    loop = "      for r in 0 .. M {"
    fixed = src.replace(loop, "      acc[thread] = 0.0\n" + loop)
    assert verdicts(kernel(fixed)) == {}


def test_tma_zero_fill_counts_as_written():
    assert verdicts(load_program(GOOD / "ragged_tma.tsk").kernels[0]) == {}
