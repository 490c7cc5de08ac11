"""Thread-block clusters in the scalar engine: the CTAs of one cluster run under one
scheduler, each with its own shared memory, barriers, `sync` and named barriers, and reach
one another through distributed shared memory, remote arrivals, multicast TMA loads and
the cluster barrier (docs/semantics.md, "Clusters").

Why one scheduler per cluster: the CTAs of a cluster are co-scheduled on the hardware and
observe each other, so the adversarial scheduler must be able to interleave their threads
and copies freely (a peer's store landing between a CTA's two reads, a CTA exiting while a
peer still writes its memory). Clusters are independent of each other and run one after
another, as blocks do without clusters.

Agents, as recorded in the schedule: thread t of CTA r is agent r * block + t (CTAs in
rank order), then the cluster's pending copy-engine operations. Each operation belongs to
the CTA whose shared memory it writes or reads (`Copy.cta`; a multicast load is one
operation per CTA of its mask, each landing and completing its bytes on its own).

The cluster barrier (`barrier.cluster`): a phase completes once every thread of the cluster
that has not exited arrived in it (PTX waits for "all non-exited threads"); `cluster_wait`
passes once the phase the thread arrived in completed. Passing one is also what makes a
peer usable (TS433 before: the peer may not run yet); using a CTA after all its threads
exited is TS432.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from tilesafe.frontend.ir import describe_threads
from tilesafe.semantics.interpreter import interp_error as E
from tilesafe.semantics.interpreter.interp_agents import Copy, MmaOp, Thread
from tilesafe.semantics.interpreter.interp_error import InterpError

if TYPE_CHECKING:
    from tilesafe.semantics.interpreter.interp import _Block


def cluster_origins(grid: tuple[int, ...], dims: tuple[int, int, int]
                    ) -> Iterator[list[tuple[int, tuple[int, ...]]]]:
    """Per cluster, in launch order (x fastest): its CTAs as (rank, block index), rank
    x + CX * (y + CY * z) for the CTA at (x, y, z) inside the cluster."""
    full = tuple(grid) + (1,) * (3 - len(grid))
    cx, cy, cz = dims
    for kz in range(full[2] // cz):
        for ky in range(full[1] // cy):
            for kx in range(full[0] // cx):
                ctas = []
                for z in range(cz):
                    for y in range(cy):
                        for x in range(cx):
                            idx = (kx * cx + x, ky * cy + y, kz * cz + z)[: len(grid)]
                            ctas.append((x + cx * (y + cy * z), idx))
                yield ctas


def run_clusters(run: Any, grid: tuple[int, ...], block_cls: type) -> None:
    """Run every cluster of the launch (TS221 when the grid is not made of clusters)."""
    dims = run.kernel.cluster
    for axis, (g, c) in enumerate(zip(tuple(grid) + (1,) * (3 - len(grid)), dims,
                                      strict=True)):
        if g % c:
            raise InterpError(E.GRID_NOT_CLUSTERS, f"grid dimension {'xyz'[axis]} is {g}, not "
                              f"a multiple of the cluster's {c}: the launch has no clusters "
                              "to run", run.kernel.span, {"grid": list(grid)})
    for ctas in cluster_origins(grid, dims):
        copies: list[Copy | MmaOp] = []
        blocks = [block_cls(run, idx, rank, copies) for rank, idx in ctas]
        Cluster(run, blocks).execute()


class Cluster:
    """The CTAs of one cluster, as one scheduling unit: the scheduler of interp.py runs it
    (`execute` is _Block's, over the union of the CTAs' threads and their shared copy
    engine list); what differs per CTA is delegated to the CTA's block."""

    def __init__(self, run: Any, blocks: list[_Block]) -> None:
        self.run = run
        self.kernel = run.kernel
        self.ctas = blocks
        self.block_idx = blocks[0].block_idx
        self.threads: list[Thread] = [t for b in blocks for t in b.threads]
        self.nthreads = len(self.threads)
        self.copies = blocks[0].copies
        self.per_cta = blocks[0].nthreads
        self.note: str | None = None
        self.guided = False
        self.live = [b.nthreads for b in blocks]  # threads of each CTA still running
        self.arrived: set[int] = set()  # agents arrived in the current cluster-barrier phase
        self.phase = 0
        for b in blocks:
            b.cluster = self

    # -- the scheduler's protocol (interp._Block.execute) ----------------------------------

    def execute(self) -> None:
        from tilesafe.semantics.interpreter.interp import _Block

        _Block.execute(self)  # type: ignore[arg-type]

    def start(self, t: Thread) -> Any:
        return self.ctas[t.cta].start(t)

    def agent(self, t: Thread) -> int:
        return t.cta * self.per_cta + t.tid

    def _advance(self, t: Thread) -> Any:
        return self.ctas[t.cta]._advance(t)

    def perform(self, c: Copy | MmaOp) -> bool:
        blk = self.ctas[c.cta]
        if self.exited(c.cta):
            what = ("a wgmma" if isinstance(c, MmaOp) else
                    f"a TMA {c.kind} into '{c.buffer}'" if c.kind == "load" else
                    f"a TMA store from '{c.buffer}'")
            code = E.EXIT_LOAD if getattr(c, "issuer", c.cta) == c.cta else E.PEER_EXITED
            raise blk.err(code, f"{what} (issued by CTA {getattr(c, 'issuer', c.cta)}) still "
                          f"in flight after every thread of CTA {c.cta} exited: its shared "
                          "memory is gone", c.stmt.span, None)
        done = blk.perform(c)
        self.note = blk.note
        return done

    def retire(self, c: MmaOp) -> None:
        self.ctas[c.cta].tensor.retire(c)

    def finished(self, t: Thread) -> None:
        self.live[t.cta] -= 1
        self.complete_phase()

    def err(self, code: str, message: str, span: Any, t: Thread | None,
            **detail: Any) -> InterpError:
        blk = self.ctas[t.cta] if t is not None else self.ctas[0]
        return blk.err(code, message, span, t, **detail)

    def _annotate(self, exc: InterpError) -> InterpError:
        return self.ctas[0]._annotate(exc)

    def _choose(self, ready: list[int], passable: list[int]) -> int:
        from tilesafe.semantics.interpreter.interp import _Block

        return _Block._choose(self, ready, passable)  # type: ignore[arg-type]

    def _exit_with_copies(self) -> None:
        for c in self.copies:
            self.ctas[c.cta].copies = [c]
            try:
                self.ctas[c.cta]._exit_with_copies()
            finally:
                self.ctas[c.cta].copies = self.copies

    def _deadlock(self, blocked: list[int]) -> InterpError:
        """The blocked threads of every CTA, with their CTA: one error naming all."""
        parts = []
        first: InterpError | None = None
        for r, blk in enumerate(self.ctas):
            mine = [a - r * self.per_cta for a in blocked
                    if r * self.per_cta <= a < (r + 1) * self.per_cta]
            if not mine:
                done = [t.tid for t in blk.threads if t.done]
                if done:
                    parts.append(f"cta {r}: {describe_threads(done)} finished")
                continue
            exc = blk._deadlock(mine)
            first = first or exc
            parts.append(f"cta {r}: {exc.message}")
        assert first is not None
        return InterpError(first.code, "; ".join(parts), first.span, first.detail)

    # -- the cluster barrier and lifetimes --------------------------------------------------

    def exited(self, rank: int) -> bool:
        return self.live[rank] == 0

    def arrive(self, t: Thread) -> None:
        """barrier.cluster.arrive: t counts towards the current phase."""
        self.arrived.add(self.agent(t))
        t.cluster_phase = self.phase
        self.complete_phase()

    def complete_phase(self) -> None:
        """The phase completes once every thread that has not exited arrived in it."""
        if not self.arrived:
            return
        if all(t.done or self.agent(t) in self.arrived for t in self.threads):
            self.phase += 1
            self.arrived = set()

    def passed(self, t: Thread) -> bool:
        return self.phase > t.cluster_phase
