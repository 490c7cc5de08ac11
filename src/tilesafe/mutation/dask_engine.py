"""Campaigns past one machine: `tilesafe mutate --dask ADDRESS` and `tilesafe verify --dask
ADDRESS` hand their tasks to a Dask distributed cluster instead of local worker processes.

Why Dask distributed rather than Ray: it is pure Python and installs from PyPI as one small
extra ("distributed"), its LocalCluster runs the same scheduler in CI on 2 cores, and a
cluster is an address any machine with tilesafe installed can join (`dask scheduler`;
`dask worker ADDRESS` on each machine) -- no object store or runtime to operate. What it
buys: a campaign's mutants are independent tasks, so N machines classify the 5,320-mutant
corpus ~N times faster than one, with results merged by the scheduler instead of by hand
from `--shard` files.

Why the same results as a local run: every task is still run the way mutation/pool.py runs
it -- in a fresh child process of the Dask worker, killed past its wall-clock limit (ISL and
z3 cannot be interrupted from Python) -- and outcomes carry the task's index, so records
are assembled in the plan's order whatever order the cluster finishes them in. Only the
seconds differ. The engine has pool.py's interface (`run_tasks`, `map_bounded`).
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Iterable, Iterator
from typing import Any

from tilesafe.api import UsageError
from tilesafe.mutation import pool
from tilesafe.mutation.pool import Outcome, TaskFn

LOCAL = "local"


def _bounded(fn: TaskFn, task: Any, index: int, timeout_s: float) -> Outcome:
    """One task on a Dask worker, in a child process with its wall-clock limit."""
    if multiprocessing.current_process().daemon:
        raise RuntimeError("this Dask worker runs as a daemonic process, which may not start "
                           "the child process a task runs in: start the workers with "
                           "DASK_DISTRIBUTED__WORKER__DAEMON=False")
    _warm()
    (outcome,) = pool.map_bounded(fn, [task], 1, timeout_s)
    return Outcome(index, outcome.status, outcome.value, outcome.progress, outcome.seconds,
                   outcome.error)


def _warm() -> None:
    """Import every checker in the Dask worker (once): the child each task forks then starts
    with them, as pool.py's workers start with the campaign's imports, instead of paying
    the imports (z3, ISL) once per task."""
    from tilesafe.checkers import registry

    for name in registry.CHECKERS:
        registry.load(name)


class DaskEngine:
    """A Dask client (and, for "local", the LocalCluster it owns). Use as a context
    manager; `run_tasks` / `map_bounded` are pool.py's."""

    def __init__(self, address: str, workers: int = 2) -> None:
        try:
            import dask
            from distributed import Client, LocalCluster
        except ImportError:
            raise UsageError("--dask needs Dask distributed: pip install 'tilesafe[distributed]'"
                             ) from None
        self.cluster = None
        if address == LOCAL:
            # worker processes that may fork the per-task child (not daemonic), one task
            # each at a time, as pool.py's workers
            with dask.config.set({"distributed.worker.daemon": False}):
                self.cluster = LocalCluster(n_workers=max(1, workers), threads_per_worker=1,
                                            processes=True, dashboard_address=None)
            self.client = Client(self.cluster)
        else:
            try:
                self.client = Client(address, timeout=10)
            except OSError as err:
                raise UsageError(f"cannot reach the Dask scheduler at {address}: {err}"
                                 ) from None

    def __enter__(self) -> DaskEngine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.client.close()
        if self.cluster is not None:
            self.cluster.close()

    def workers(self) -> int:
        return len(self.client.scheduler_info().get("workers", {}))

    def run_tasks(self, fn: TaskFn, tasks: Iterable[Any], jobs: int, timeout_s: float
                  ) -> Iterator[Outcome]:
        """Every task on the cluster (`jobs` is the cluster's business: it is ignored);
        outcomes as they finish, each carrying its task's index."""
        from distributed import as_completed

        futures = [self.client.submit(_bounded, fn, task, i, timeout_s, pure=False)
                   for i, task in enumerate(tasks)]
        for future in as_completed(futures):
            yield future.result()

    def map_bounded(self, fn: TaskFn, tasks: list[Any], jobs: int, timeout_s: float
                    ) -> list[Outcome]:
        out: list[Outcome | None] = [None] * len(tasks)
        for o in self.run_tasks(fn, tasks, jobs, timeout_s):
            out[o.index] = o
        return [o for o in out if o is not None]
