"""The error every reference-interpreter failure raises: a TS code, a message, a span, and
machine-readable detail (block, thread, indices, barrier states...).

Why separate: the shared-memory model, the interpreter and its callers (CLI, checkers that
replay counterexample schedules) all need it without importing each other.

Codes the interpreter raises:
  TS200  sizes missing / violating the `where` clause / a non-positive grid or shape /
         tensors or a launch too big for the interpreter (MAX_RUN_BYTES, MAX_RUN_THREADS)
  TS103  the shared buffers, as their layouts place them, exceed a block's shared memory
  TS201  global out-of-bounds access          TS202  shared out-of-bounds access
  TS203  integer division by zero at run time (only possible with `var` operands)
  TS204  a fragment register index outside 0 .. N/2 - 1
  TS205  the index tensors violate a `requires` clause (checked before anything runs)
  TS206  (`tilesafe run`) no index-tensor contents satisfying the clauses could be drawn
  TS214  a grid dimension beyond the hardware's maximum (the driver refuses the launch)
  TS221  a grid dimension that is not a multiple of the cluster's (no launch of clusters)
  TS301  a TMA store or a wgmma read shared memory written by the generic proxy with no
         `fence proxy_async` by the writer before its next synchronisation
  TS307  every thread finished while a TMA store had not yet read its shared memory
         (PTX does not drain the copy engine at exit: `wait_group 0 read` first)
  TS401  barrier used before `init`           TS402  `init` of a live barrier
  TS403  more arrivals than pending           TS404  tx-count out of the PTX range
  TS405  the copy engine signals a barrier whose init was not fenced (`fence mbarrier_init`)
  TS410  deadlock: every unfinished thread blocked and the copy engine idle
  TS420  deadlock at `sync`: every blocked thread waits at `sync` (a role-subset reached it)
  TS430  every thread finished while a TMA load was still in flight (nobody waited for it)
  TS431  every thread finished while a wgmma was still pending (no wgmma_wait covered it)
  TS432  a CTA's shared memory or barrier used by a peer after every thread of the CTA
         finished (a peer's DSMEM access, remote arrive or multicast delivery)
  TS433  a peer CTA's shared memory or barrier used before the two met at a cluster barrier
         (the peer may not have started, its barriers not been initialised)
  TS434  a CTA rank or multicast mask outside the cluster
  TS531  the threads of one warpgroup reach a wgmma with different tiles (or scale_d)
  TS532  a wgmma in a role that holds only part of a warpgroup
  TS411 / TS415 / TS416  passed through from the mbarrier model (init count range, parity
         operand not 0/1, expect_tx completing a phase PTX leaves unspecified)
  TS5xx  a tensor map the driver would reject, or a TMA shared address not 128-byte aligned
  TS498  replayed schedule names an agent that cannot move at that step (a bad replay
         input, not a property of the kernel; TS490 is the temporal checkers' "outside
         the argument" unknown)
  TS499  step limit exceeded
"""

from __future__ import annotations

from typing import Any

from tilesafe.frontend.span import NO_SPAN, Span

WHERE = "TS200"
GLOBAL_OOB = "TS201"
SHARED_OOB = "TS202"
DIV_ZERO = "TS203"
FRAG_REG = "TS204"
REQUIRES = "TS205"
NO_ROUTING = "TS206"
GRID_TOO_LARGE = "TS214"
SMEM_CAPACITY = "TS103"
PROXY_FENCE = "TS301"
EXIT_STORE = "TS307"
UNINIT = "TS401"
REINIT = "TS402"
OVER_ARRIVE = "TS403"
TX_RANGE = "TS404"
UNFENCED_INIT = "TS405"
DEADLOCK = "TS410"
SYNC_DEADLOCK = "TS420"
NAMED_COUNT = "TS414"  # a named barrier count not a multiple of 32, or past the block
NAMED_MISMATCH = "TS412"  # a thread arrives twice in one phase of a named barrier
NAMED_COLLISION = "TS413"  # one barrier id, two counts (or id 0, which `sync` uses)
NAMED_DEADLOCK = "TS421"  # blocked threads wait at named barriers only
EXIT_LOAD = "TS430"
EXIT_MMA = "TS431"
PEER_EXITED = "TS432"  # a CTA's shared memory or barrier used after the CTA exited
PEER_NOT_READY = "TS433"  # ... before the CTA is known to run (no cluster barrier between)
BAD_RANK = "TS434"  # a CTA rank or multicast mask outside the cluster
GRID_NOT_CLUSTERS = "TS221"  # a grid dimension that is not a multiple of the cluster's
MMA_NONUNIFORM = "TS531"  # the checker's code: one tile per warpgroup
MMA_PARTIAL = "TS532"  # the checker's code: whole warpgroups run a wgmma
BAD_REPLAY = "TS498"
STEP_LIMIT = "TS499"


class InterpError(Exception):
    """A run-time error of a kernel (or of the interpreter's input), with where and why."""

    def __init__(
        self, code: str, message: str, span: Span = NO_SPAN, detail: dict[str, Any] | None = None
    ) -> None:
        super().__init__(f"{span}: {code} {message}")
        self.code = code
        self.message = message
        self.span = span
        self.detail: dict[str, Any] = dict(detail or {})
        # Filled by run_kernel: the scheduling choices up to the error, to replay it.
        self.schedule: tuple[int, ...] = ()
        self.steps = 0
