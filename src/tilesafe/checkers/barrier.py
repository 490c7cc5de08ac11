"""The barrier-protocol checker (TS4xx): mbarrier typestate and liveness.

Every interleaving of the thread classes and the copy engine is explored (with partial-
order reduction), and a periodicity argument extends the verdict to every trip count (see
semantics/temporal/parametric.py and docs/temporal.md). Properties and codes:

  TS401 use before init            TS402 re-init while live (or by several threads)
  TS403 more arrivals than the phase has pending (arriving set larger than the count)
  TS404 tx-count outside the PTX range (also proved symbolically for byte counts)
  TS405 copy engine signals a barrier whose init was not fenced (fence mbarrier_init)
  TS406 deadlock: a phase short of arrivals          TS407 expect_tx bytes != bytes delivered
  TS408 wrong wait parity (passes on a phase already consumed / waits for one that never
        comes / two phases completed before the wait)
  TS409 barrier index outside the array              TS410 deadlock
  TS420 deadlock at sync (a `sync` some threads never reach)
  TS414 a named barrier's thread count is not a multiple of 32 (or exceeds the block)
  TS412 more threads arrive in one phase of a named barrier than its count (a class arrives
        twice: a bar_arrive that runs a phase ahead)
  TS413 one barrier id for two synchronisations: two counts, id 0 next to `sync`, or two
        classes arriving at once with more threads than the count (their warps mix)
  TS421 deadlock at a named barrier (fewer threads can arrive than its count)
  TS430 the block exits with a TMA load no wait is ordered after (still in flight)
  TS431 the block exits with a wgmma no wgmma_wait covered (never committed, or not waited)
  TS534 a wgmma with no wgmma_fence since its threads last accessed the fragment's registers
        (or before their first MMA), as PTX requires
  TS490 outside what the argument covers (verdict UNKNOWN, never PROVED)
"""

from __future__ import annotations

from tilesafe.checkers import temporal
from tilesafe.checkers.obligation import Obligation
from tilesafe.checkers.registry import CheckOptions
from tilesafe.checkers.temporal import Prop
from tilesafe.frontend import ir

CHECKER = "barrier"

PROPS = (
    Prop("init-before-use", ("TS401",), "every barrier is initialised before any use"),
    Prop("init-fenced", ("TS405",),
         "every barrier the copy engine signals had its init fenced (fence mbarrier_init)"),
    Prop("no-reinit", ("TS402",), "no barrier is initialised twice while live"),
    Prop("arrival-count", ("TS403", "TS406"),
         "every phase gets exactly its declared number of arrivals"),
    Prop("tx-bytes", ("TS407",),
         "expect_tx bytes per phase equal the bytes the copies signalling it deliver"),
    Prop("tx-range", ("TS404",), "tx-counts stay within the PTX range"),
    Prop("wait-parity", ("TS408",), "every wait names the phase it needs by its parity"),
    Prop("barrier-index", ("TS409",), "every barrier index is inside its array"),
    Prop("deadlock-free", ("TS410", "TS420", "TS421"),
         "no interleaving of the roles and the copy engine deadlocks"),
    Prop("named-barriers", ("TS412", "TS413", "TS414"),
         "every named barrier (bar_sync / bar_arrive) counts whole warps, gets exactly its "
         "count of arriving threads per phase, and has an id of its own"),
    Prop("loads-landed-at-exit", ("TS430",),
         "every TMA load has landed when the block exits (a wait is ordered after it)"),
    Prop("mmas-done-at-exit", ("TS431",),
         "every wgmma is complete when the block exits (committed, and a wgmma_wait covers it)"),
    Prop("wgmma-fenced", ("TS534",),
         "every wgmma comes after a wgmma_fence of its threads that follows their last access "
         "to its fragment's registers"),
)
# A cluster's (docs/temporal.md §16): only kernels with a `cluster` clause have it.
CLUSTER_PROPS = (
    Prop("cluster-lifetime", ("TS432", "TS433"),
         "no CTA touches another CTA's shared memory or barriers before the two met at a "
         "cluster barrier, nor after the other may have exited"),
)


def props_of(kernel: ir.Kernel) -> tuple[Prop, ...]:
    return PROPS + (CLUSTER_PROPS if kernel.cluster is not None else ())


def check(kernel: ir.Kernel, options: CheckOptions) -> list[Obligation]:
    """Barrier-protocol obligations for one kernel (never prints)."""
    run = temporal.explore_barrier(kernel, options)
    evidence = {}
    if run.model is not None:
        evidence["arrivals per statement"] = temporal.arrival_table(run.model)
    return temporal.obligations(CHECKER, "TS4", props_of(kernel), run, kernel, evidence,
                                options)
