"""A pool of worker processes in which every task has a wall-clock limit.

Why not multiprocessing.Pool: a task stuck inside ISL or z3 cannot be interrupted from
Python, and Pool cannot kill one task without losing the pool. Here each worker is one
process on one pipe; a task past its deadline gets its worker killed (and replaced), and the
caller receives a timeout result carrying whatever progress the task had reported. A worker
that dies (out of memory, a crash in native code) gives a crash result the same way.

Workers are forked where the platform allows it, so they start with the parent's imports.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import time
import traceback
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from typing import Any

Progress = Callable[[Any], None]
TaskFn = Callable[[Any, Progress], Any]


@dataclass(frozen=True)
class Outcome:
    """What became of one task: `status` is "ok" (value is the result), "timeout" or
    "crash" (value is None); `progress` is the last thing the task reported."""

    index: int
    status: str
    value: Any
    progress: Any
    seconds: float
    error: str = ""


def _context() -> Any:
    methods = mp.get_all_start_methods()
    return mp.get_context("fork" if "fork" in methods else "spawn")


# A worker retires (and is replaced by a fresh one) past this resident size or this many
# tasks. Why: memory a verification took is rarely given back to the system, and the
# checkers' memory budget measures the whole process -- a long-lived worker that once grew
# would report every later mutant's verification as out of memory (unknown).
RETIRE_MB = 1536
RETIRE_TASKS = 40


def rss_mb() -> int:
    """Resident size of this process in MiB (0 where /proc is not there)."""
    try:
        with open("/proc/self/statm") as f:
            pages = int(f.read().split()[1])
    except (OSError, ValueError, IndexError):
        return 0
    return pages * os.sysconf("SC_PAGE_SIZE") // 2**20


def _worker_main(conn: Connection, fn: TaskFn) -> None:
    done = 0
    while True:
        try:
            msg = conn.recv()
        except (EOFError, OSError):
            return
        if msg is None:
            return
        index, task = msg

        def progress(payload: Any, _index: int = index) -> None:
            conn.send(("progress", _index, payload, False))

        try:
            result = fn(task, progress)
            kind, payload = "done", result
        except BaseException as err:  # noqa: BLE001 - reported to the parent, never lost
            kind = "error"
            payload = f"{type(err).__name__}: {err}\n{traceback.format_exc(limit=8)}"
        done += 1
        retire = done >= RETIRE_TASKS or rss_mb() > RETIRE_MB
        conn.send((kind, index, payload, retire))
        if retire:
            return


class _Worker:
    def __init__(self, ctx: Any, fn: TaskFn) -> None:
        parent, child = ctx.Pipe()
        self.conn: Connection = parent
        self.proc = ctx.Process(target=_worker_main, args=(child, fn), daemon=True)
        self.proc.start()
        child.close()
        self.index: int | None = None
        self.started = 0.0
        self.progress: Any = None

    def give(self, index: int, task: Any) -> None:
        self.index, self.started, self.progress = index, time.monotonic(), None
        self.conn.send((index, task))

    def kill(self) -> None:
        if self.proc.is_alive():
            self.proc.terminate()
            self.proc.join(2)
            if self.proc.is_alive():
                self.proc.kill()
                self.proc.join(2)
        self.conn.close()

    def stop(self) -> None:
        try:
            self.conn.send(None)
        except (OSError, ValueError):
            pass
        self.proc.join(5)
        self.kill()


def run_tasks(fn: TaskFn, tasks: Iterable[Any], jobs: int, timeout_s: float
              ) -> Iterator[Outcome]:
    """Run `fn(task, progress)` for every task in up to `jobs` processes, each task within
    `timeout_s` seconds of wall-clock time; yields outcomes as they finish (any order)."""
    ctx = _context()
    pending = list(enumerate(tasks))
    pending.reverse()
    workers: list[_Worker] = []
    try:
        for _ in range(max(1, min(jobs, len(pending)))):
            workers.append(_Worker(ctx, fn))
        for w in workers:
            if pending:
                w.give(*pending.pop())
        while any(w.index is not None for w in workers):
            busy = [w for w in workers if w.index is not None]
            now = time.monotonic()
            next_deadline = min(w.started + timeout_s for w in busy)
            ready = wait([w.conn for w in busy], timeout=max(0.0, next_deadline - now))
            for w in list(busy):
                outcome: Outcome | None = None
                replace = False  # a timed-out or dead worker is replaced
                elapsed = time.monotonic() - w.started
                if w.conn in ready:
                    try:
                        kind, index, payload, retire = w.conn.recv()
                    except (EOFError, OSError):
                        replace = True
                        outcome = Outcome(w.index, "crash", None, w.progress,  # type: ignore[arg-type]
                                          elapsed, "worker process died (exit code "
                                          f"{w.proc.exitcode})")
                    else:
                        replace = retire
                        if kind == "progress":
                            w.progress = payload
                        elif kind == "done":
                            outcome = Outcome(index, "ok", payload, w.progress, elapsed)
                        else:  # a Python exception inside the task: the worker lives on
                            outcome = Outcome(index, "crash", None, w.progress, elapsed,
                                              payload)
                if outcome is None and elapsed >= timeout_s:
                    replace = True
                    outcome = Outcome(w.index, "timeout", None, w.progress,  # type: ignore[arg-type]
                                      elapsed, f"no answer within {timeout_s:g} s")
                if outcome is None:
                    continue
                if replace:
                    workers.remove(w)
                    w.kill()
                    w = _Worker(ctx, fn)
                    workers.append(w)
                w.index = None
                yield outcome
                if pending:
                    w.give(*pending.pop())
    finally:
        for w in workers:
            w.stop()


def map_bounded(fn: TaskFn, tasks: list[Any], jobs: int, timeout_s: float) -> list[Outcome]:
    """`run_tasks`, with the outcomes in task order."""
    out: list[Outcome | None] = [None] * len(tasks)
    for o in run_tasks(fn, tasks, jobs, timeout_s):
        out[o.index] = o
    return [o for o in out if o is not None]


def _plain(task: tuple[Callable[[Any], Any], Any], progress: Progress) -> Any:
    fn, item = task
    return fn(item)


def map_simple(fn: Callable[[Any], Any], items: list[Any], jobs: int,
               timeout_s: float = 120.0, default: Any = None) -> list[Any]:
    """`[fn(x) for x in items]` over `jobs` processes; a task that times out or crashes
    gives `default`."""
    outcomes = map_bounded(_plain, [(fn, x) for x in items], jobs, timeout_s)
    return [o.value if o.status == "ok" else default for o in outcomes]
