"""The ownership checker (TS3xx): permission-based separation logic over shared memory.

Shared memory is cut into atoms (the coarsest partition that every footprint, TMA slice
and guarded stage is a union of). Each atom carries fractional permissions held by thread
classes, by in-flight copies, by barrier phases (deposited by `arrive`, handed to the
waiters when the phase completes, through the barrier's `guards` resource invariant), by
finished TMA stores (until `wait_group`), or free (after init and after every `sync`). A
write needs the whole atom, a read some share. The same exploration and periodicity
argument as the barrier checker cover every interleaving and every trip count.

  TS301 generic-proxy writes read by a TMA store with no `fence proxy_async` before the
        synchronisation that orders them
  TS302 a write without full permission, or meeting another thread's access of its class
        with nothing ordering them (a race)
  TS303 a TMA load into a region someone else still holds (e.g. a stage still being read)
  TS304 a read without permission (use before ready, e.g. a wait on the wrong parity), or
        of an element another thread of its class wrote with nothing ordering them
  TS305 an access after the class's own arrive gave the region away (arrive too early)
  TS306 a read of shared memory nothing has written (no thread, no copy): uninitialised
  TS307 the block exits while a TMA store may still read its shared memory (no covering
        `wait_group ... read` by the issuer)
  TS308 a fragment register read or written while a wgmma into it may be pending (no
        `wgmma_wait` covered its group); a wgmma's tiles are read (and held) until then
  TS490 outside what the argument covers (UNKNOWN)
  TS491 the verification budget ran out (UNKNOWN; the message names the option)
  TS492 a possible violation the exact footprints did not confirm (UNKNOWN)

The threads of a class run as one agent but are not in lockstep: footprints keep which
thread touches which element (semantics/temporal/footprint.py), so races between threads of one
class and uninitialised reads are found too; candidates found on over-approximated
footprints are confirmed on one block of one launch (semantics/temporal/witness.py).
"""

from __future__ import annotations

from tilesafe.checkers import temporal
from tilesafe.checkers.obligation import Obligation
from tilesafe.checkers.registry import CheckOptions
from tilesafe.checkers.temporal import Prop
from tilesafe.frontend import ir

CHECKER = "ownership"

PROPS = (
    Prop("proxy-fence", ("TS301",),
         "generic writes read by a TMA store or a wgmma are fenced (fence proxy_async) before "
         "the synchronisation that orders them"),
    Prop("write-permission", ("TS302",),
         "every shared-memory write holds the whole region and meets no unordered access "
         "of another thread of its class"),
    Prop("tma-load-permission", ("TS303",),
         "every TMA load writes a region nobody else holds"),
    Prop("read-permission", ("TS304",),
         "every shared-memory read holds a share of it and reads nothing another thread of "
         "its class wrote unordered"),
    Prop("initialised-reads", ("TS306",),
         "every shared-memory read (generic or by a TMA store) reads an element something "
         "wrote before it"),
    Prop("release-order", ("TS305",),
         "no class accesses a region after its own arrive released it"),
    Prop("stores-read-at-exit", ("TS307",),
         "every TMA store has finished reading shared memory when the block exits (its "
         "issuer waited with wait_group ... read)"),
    Prop("fragments-ready", ("TS308",),
         "no fragment register is read or written while a wgmma into it may be pending (a "
         "wgmma_wait covers its group first)"),
)
# A cluster's (docs/temporal.md §16): only kernels with a `cluster` clause have it.
CLUSTER_PROPS = (
    Prop("cluster-scope", ("TS309",),
         "every hand-off between CTAs of a cluster releases and acquires at cluster scope "
         "(no relaxed or .cta arrive, wait or cluster_arrive carries it)"),
)

def check(kernel: ir.Kernel, options: CheckOptions) -> list[Obligation]:
    """Ownership obligations for one kernel (never prints)."""
    run = temporal.explore(kernel, True, options)
    evidence = {}
    if run.model is not None and run.outcome is not None:
        evidence["permissions per program point"] = permission_table(run)
    props = PROPS + (CLUSTER_PROPS if kernel.cluster is not None else ())
    return temporal.obligations(CHECKER, "TS3", props, run, kernel, evidence, options)


def permission_table(run: temporal.Run, limit: int = 4) -> dict[str, list[str]]:
    """For each class and synchronising program point: the shares it holds there (over the
    explored states of one exploration, at most `limit` distinct ones)."""
    out = run.outcome
    table: dict[str, list[str]] = {}
    if out is None or not out.points:
        return table
    for key, seen in out.points.items():
        table[key] = sorted(seen)[:limit]
    return table
