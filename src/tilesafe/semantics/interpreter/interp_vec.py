"""The lockstep (vector) engine of the reference interpreter: the scalar engine's semantics
on one schedule, executed as numpy operations over groups of threads.

Why: the scalar engine (semantics/interpreter/interp.py) steps every thread through Python
generators, about 0.1 M elements/s; differential testing and mutation triage need real sizes. Every
interleaving of a kernel's statements is one of its meanings (docs/semantics.md), and for a
race-free kernel they all give the same result, so running one well-chosen interleaving
fast is as good an oracle -- provided that interleaving is one the scalar engine could run.

The schedule. Threads at the same program point (interp_vec_prog) form a group; a *group
step* executes that point's statement for every thread of the group, and stands for their
scalar steps one after another in thread order (block by block): a legal interleaving, with
each statement still atomic. Threads waiting at a barrier are a group of their own, which
passes once the barrier lets them. With no seed, the engine always moves the group at the
lowest program point (so threads that diverged at an `if` or in a loop meet again before
going on), and lets the copy engine move only when no thread can (a slow copy engine);
with a seed (`engine="vector"`), it picks among the movable groups and copy steps at random.
The run records its schedule in the scalar engine's terms (`RunResult.schedule`), and
replaying it there (`schedule=`) reproduces the run bit for bit: tests/test_interp_vec.py
checks exactly that on the corpus.

Exactness, step by step: data statements are vectorised and fall back to thread-by-thread
execution where one thread of a group reads what an earlier one writes (interp_vec_data);
barrier operations are counted (sync, convergence) or applied thread by thread
(interp_vec_sync); copies are performed one at a time (interp_vec_tma). Errors: a failing
group step cannot say which thread fails first, so the launch is run again with that step
executed thread by thread; the first failing thread then raises exactly the scalar engine's
error, with the schedule up to it.

Blocks: a batch of consecutive blocks runs side by side (a block index is one more array
dimension), when no block reads a tensor the launch writes (TMA included); a batch that
writes an element after a later block wrote it, that fails, or that reaches the step
limit, is run again one block at a time (launch order), where the scalar engine's block
order holds by construction.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from tilesafe.frontend import ir
from tilesafe.frontend.ir import describe_threads
from tilesafe.semantics.expr.evaluate import EvalError
from tilesafe.semantics.interpreter import interp_error as E
from tilesafe.semantics.interpreter.interp_error import InterpError
from tilesafe.semantics.interpreter.interp_io import tensor_usage
from tilesafe.semantics.interpreter.interp_vec_data import DataOps
from tilesafe.semantics.interpreter.interp_vec_expr import int_bound_problem
from tilesafe.semantics.interpreter.interp_vec_prog import (
    VISIBLE,
    Kind,
    Program,
    lower,
    unsupported,
)
from tilesafe.semantics.interpreter.interp_vec_record import Record
from tilesafe.semantics.interpreter.interp_vec_state import Batch, Group, OrderConflict, VGlobal
from tilesafe.semantics.interpreter.interp_vec_sync import Blocked, SyncOps
from tilesafe.semantics.interpreter.interp_vec_tma import TmaOps, exit_with_copies, perform
from tilesafe.semantics.interpreter.smem import plan_shared

BATCH_LANES = 1 << 18  # threads of one batch (bounds the arrays of one group step)
BATCH_SMEM = 1 << 26  # bytes of shared memory of one batch


def vector_unsupported(kernel: ir.Kernel, sizes: Mapping[str, int],
                       grid: tuple[int, ...]) -> str | None:
    """Why the vector engine does not run this launch (None: it does)."""
    if kernel.cluster is not None:
        return ("a thread-block cluster (the vector engine steps one block at a time; the "
                "CTAs of a cluster share a schedule in the scalar engine)")
    _, written = tensor_usage(kernel)
    return unsupported(kernel, written) or int_bound_problem(kernel, sizes, grid)


def run_vector(kernel: ir.Kernel, sizes: Mapping[str, int], grid: tuple[int, ...],
               arrays: dict[str, np.ndarray], fresh: Callable[[], dict[str, np.ndarray]],
               *, seed: int | None, max_steps: int
               ) -> tuple[dict[str, np.ndarray], int, Record]:
    """(final tensors, steps, schedule record) of one vector run, on `arrays` (private
    copies of the inputs, updated in place) or, when a first attempt must be run again, on
    `fresh()` copies; InterpError as the scalar engine raises it on the recorded schedule
    (`.schedule` and `.steps` set)."""
    read, written = tensor_usage(kernel)
    plan = plan_shared(kernel.shared)
    prog = lower(kernel, written)
    nblocks = int(np.prod(grid))
    batch = 1
    if not read & written and nblocks > 1:
        # shared memory, and with TMA stores its writer and release count per byte
        per_byte = 9 if any(isinstance(n.stmt, ir.TmaStore) for n in prog.nodes) else 1
        batch = max(1, min(nblocks, BATCH_LANES // kernel.block,
                           BATCH_SMEM // (plan.total * per_byte)))
    exact: set[int] = set()
    tensors = arrays
    while True:
        launch = _Launch(kernel, dict(sizes), grid, tensors, prog, plan, batch, exact,
                         seed, max_steps)
        try:
            return launch.run()
        except _Rerun:
            batch = 1
        except _Inexact as inexact:
            assert inexact.gstep not in exact
            exact.add(inexact.gstep)
        tensors = fresh()


class _Rerun(Exception):
    """A batched run cannot be kept: run the launch again one block at a time."""


class _Inexact(Exception):
    """Group step `gstep` failed with several threads: run again, it one thread at a time."""

    def __init__(self, gstep: int) -> None:
        super().__init__(gstep)
        self.gstep = gstep


class _Launch:
    """One attempt at the whole launch."""

    def __init__(self, kernel: ir.Kernel, sizes: dict[str, int], grid: tuple[int, ...],
                 inputs: Mapping[str, np.ndarray], prog: Program, plan: Any, batch: int,
                 exact: set[int], seed: int | None, max_steps: int) -> None:
        self.kernel, self.grid, self.prog, self.plan = kernel, grid, prog, plan
        self.batch, self.exact, self.max_steps = batch, exact, max_steps
        self.arrays = dict(inputs)
        self.globals = {t.name: VGlobal(t, self.arrays[t.name]) for t in kernel.params}
        self.track_proxy = any(isinstance(n.stmt, ir.TmaStore) for n in prog.nodes)
        data = DataOps(kernel, sizes, plan, self.globals, batch > 1)
        sync = SyncOps(data)
        tma = TmaOps(data, sync)
        self.local: dict[int, Any] = {}
        self.effect: dict[int, Any] = {}
        for pc, node in enumerate(prog.nodes):
            if node.kind in VISIBLE:
                self.effect[pc] = _compile_effect(pc, node, data, sync, tma)
            elif node.kind is not Kind.END:
                self.local[pc] = data.local(node)
        self.rng = random.Random(seed) if seed is not None else None
        self.record = Record(kernel.block)
        self.steps = 0
        self.gstep = 0

    def run(self) -> tuple[dict[str, np.ndarray], int, Record]:
        total = int(np.prod(self.grid))
        with np.errstate(all="ignore"):
            for first in range(0, total, self.batch):
                for gl in self.globals.values():
                    gl.order.begin_batch()
                st = Batch(self.kernel, self.grid, self.plan, first,
                           min(self.batch, total - first), self.track_proxy)
                _Scheduler(self, st).execute()
        return self.arrays, self.steps, self.record

    def fail(self, exc: InterpError, st: Batch) -> InterpError:
        """The error as the scalar engine raises it (interp._Block._annotate)."""
        if st.nblocks > 1:
            raise _Rerun()
        exc.detail.setdefault("block", st.block_idx(0))
        exc.schedule = self.record.schedule()
        exc.steps = self.steps
        return exc


def _compile_effect(pc: int, node: Any, data: DataOps, sync: SyncOps, tma: TmaOps) -> Any:
    s = node.stmt
    if node.kind is Kind.CONVERGE:
        return sync.converge(pc, node)
    if node.kind is Kind.VIF or isinstance(s, (ir.Let, ir.VarDecl, ir.Assign, ir.Store)):
        return data.effect(node)
    table = {ir.Init: sync.init, ir.Arrive: sync.arrive, ir.ExpectTx: sync.expect_tx,
             ir.Fence: tma.fence}
    if type(s) in table:
        return table[type(s)](node)
    table_pc = {ir.Wait: sync.wait, ir.Sync: sync.sync, ir.NamedBar: sync.named,
                ir.TmaLoad: tma.tma_load, ir.TmaStore: tma.tma_store,
                ir.WaitGroup: tma.wait_group}
    return table_pc[type(s)](pc, node)


class _Scheduler:
    """Runs one batch to completion, choosing a group (or copy) at every step."""

    def __init__(self, launch: _Launch, st: Batch) -> None:
        self.L = launch
        self.st = st
        self.nodes = launch.prog.nodes
        self.at: dict[int, np.ndarray] = {}  # program point -> lanes about to execute it
        self.waiting: dict[int, list[Blocked]] = {}  # program point -> lanes waiting there
        self.checked = np.zeros(st.nblocks, bool)  # blocks whose exit was checked

    # -- the loop ---------------------------------------------------------------------------

    def execute(self) -> None:
        st, L = self.st, self.L
        self.thread_step(0, np.arange(st.n, dtype=np.int64), "start")
        while True:
            passable = self.passable()
            if not self.at and not passable and not st.copy_keys:
                if self.waiting:
                    if st.nblocks > 1:
                        raise _Rerun()
                    raise L.fail(self.deadlock(), st)
                return
            if L.steps >= L.max_steps:
                if st.nblocks > 1:
                    raise _Rerun()
                raise L.fail(st.err(E.STEP_LIMIT, f"step limit {L.max_steps} reached",
                                    self.L.kernel.span, 0, None), st)
            kind, key = self.choose(passable)
            if kind == "copy":
                self.copy_step(key)
            else:
                lanes = passable[key] if kind == "pass" else self.at[key]
                room = L.max_steps - L.steps
                if len(lanes) > room:
                    if st.nblocks > 1:
                        raise _Rerun()
                    lanes = lanes[:room]
                if kind == "at":
                    rest = self.at.pop(key)[len(lanes):]
                    if len(rest):
                        self.at[key] = rest
                else:
                    self.unwait(key, lanes)
                self.thread_step(key, lanes, kind)

    def choose(self, passable: dict[int, np.ndarray]) -> tuple[str, Any]:
        groups = sorted([(pc, 0, "pass") for pc in passable] + [(pc, 1, "at") for pc in self.at])
        rng = self.L.rng
        if rng is None:
            if groups:
                return groups[0][2], groups[0][0]
            return "copy", min(self.st.copy_keys)
        options = [(kind, pc) for pc, _, kind in groups]
        options += [("copy", k) for k in sorted(self.st.copy_keys)]
        return options[rng.randrange(len(options))]

    # -- thread steps -----------------------------------------------------------------------

    def thread_step(self, pc: int, lanes: np.ndarray, kind: str) -> None:
        """Execute a group step: `kind` "at" runs the node, "pass" resumes waiting lanes,
        "start" runs the block's code up to every thread's first step (no step itself)."""
        L, st = self.L, self.st
        gstep = L.gstep
        L.gstep += 1
        single = gstep in L.exact or len(lanes) == 1
        parts = [lanes[k:k + 1] for k in range(len(lanes))] if single else [lanes]
        for part in parts:
            if kind != "start":
                L.record.lanes(st.first, part)
            try:
                self.run_part(pc, part, kind)
            except OrderConflict:
                raise _Rerun() from None
            except (InterpError, EvalError) as exc:
                if st.nblocks > 1:
                    raise _Rerun() from None
                if not single:
                    raise _Inexact(gstep) from None
                if isinstance(exc, EvalError):
                    exc = st.lane_err(exc.code, exc.message, exc.span, int(part[0]))
                raise L.fail(exc, st) from None
            if kind != "start":
                L.steps += len(part)
        self.check_exits()

    def run_part(self, pc: int, lanes: np.ndarray, kind: str) -> None:
        node = self.nodes[pc]
        if kind == "start":
            self.advance([(0, lanes)])
            return
        if kind == "pass":
            self.advance([(node.next, lanes)])
            return
        out = self.L.effect[pc](Group(self.st, lanes))
        if out.blocked is not None:
            self.waiting.setdefault(pc, []).append(out.blocked)
        self.advance(out.go)

    def advance(self, go: list[tuple[int, np.ndarray]]) -> None:
        """Run local code until every lane reaches a visible node or the end; lowest
        program point first, so lanes that diverged meet again."""
        work: dict[int, list[np.ndarray]] = {}
        for pc, lanes in go:
            if len(lanes):
                work.setdefault(pc, []).append(lanes)
        st, nodes, local = self.st, self.nodes, self.L.local
        while work:
            pc = min(work)
            parts = work.pop(pc)
            lanes = parts[0] if len(parts) == 1 else np.sort(np.concatenate(parts))
            node = nodes[pc]
            if node.kind in VISIBLE:
                prev = self.at.get(pc)
                self.at[pc] = lanes if prev is None else np.sort(np.concatenate([prev, lanes]))
            elif node.kind is Kind.END:
                st.finish(lanes)
            else:
                for npc, nl in local[pc](Group(st, lanes)):
                    if len(nl):
                        work.setdefault(npc, []).append(nl)

    def check_exits(self) -> None:
        """interp._Block._exit_with_copies for every block whose threads all finished."""
        st = self.st
        for row in np.flatnonzero((st.live == 0) & ~self.checked).tolist():
            self.checked[row] = True
            if st.copies[row]:
                try:
                    exit_with_copies(st, row)
                except InterpError as exc:
                    raise self.L.fail(exc, st) from None

    # -- waiting ----------------------------------------------------------------------------

    def passable(self) -> dict[int, np.ndarray]:
        out = {}
        for pc, chunks in self.waiting.items():
            ready = [c.lanes[c.ready(self.st)] for c in chunks]
            lanes = np.concatenate(ready) if len(ready) > 1 else ready[0]
            if len(lanes):
                out[pc] = np.sort(lanes) if len(ready) > 1 else lanes
        return out

    def unwait(self, pc: int, lanes: np.ndarray) -> None:
        st = self.st
        kept = []
        for c in self.waiting.pop(pc):
            mask = np.isin(c.lanes, lanes)
            if st.order is not None:
                for j in np.flatnonzero(mask).tolist():
                    st.unblock_order(c.key(st, j), st.tid_of(int(c.lanes[j])))
            rest = c.take(mask)
            if rest is not None:
                kept.append(rest)
        if kept:
            self.waiting[pc] = kept

    def deadlock(self) -> InterpError:
        """interp._Block._deadlock, word for word (one block per batch)."""
        st = self.st
        where: dict[int, tuple[Blocked, int]] = {}
        for chunks in self.waiting.values():
            for c in chunks:
                for j, lane in enumerate(c.lanes.tolist()):
                    where[st.tid_of(lane)] = (c, j)
        assert st.order is not None
        stuck = [tid for tids in st.order.values() for tid in tids]
        groups: dict[tuple[str, str], list[int]] = {}
        for tid in stuck:
            c, j = where[tid]
            role = c.node.role.name if c.node.role is not None else "block"
            groups.setdefault((role, c.describe(st, j)), []).append(tid)
        lines = [f"{role} {describe_threads(tids)} {what}"
                 for (role, what), tids in sorted(groups.items(), key=lambda kv: kv[1][0])]
        finished = np.flatnonzero(st.done).tolist()
        stmts = [where[tid][0].node.stmt for tid in stuck]
        all_sync = all(isinstance(s, ir.Sync) for s in stmts)
        all_named = all(isinstance(s, (ir.Sync, ir.NamedBar)) for s in stmts)
        code = E.SYNC_DEADLOCK if all_sync else E.NAMED_DEADLOCK if all_named else E.DEADLOCK
        head = ("deadlock at sync" if all_sync else "deadlock at named barriers" if all_named
                else "deadlock")
        tail = f"; {describe_threads(finished)} finished" if finished else ""
        return st.err(code, f"{head}: " + "; ".join(lines) + tail, stmts[0].span, 0, None,
                      blocked=[{"role": r, "threads": tids, "waits": w}
                               for (r, w), tids in groups.items()],
                      finished=finished, barriers=st.barrier_states(0))

    # -- copies -----------------------------------------------------------------------------

    def copy_step(self, key: tuple) -> None:
        """Every pending copy with this key, block by block, each one scheduler step."""
        st, L = self.st, self.L
        for row in range(st.nblocks):
            pending = st.copies[row]
            j = 0
            while j < len(pending):
                c = pending[j]
                if c.key != key:
                    j += 1
                    continue
                if L.steps >= L.max_steps:
                    if st.nblocks > 1:
                        raise _Rerun()
                    raise L.fail(st.err(E.STEP_LIMIT, f"step limit {L.max_steps} reached",
                                        L.kernel.span, 0, None), st)
                L.record.copy(st.first, row, st.nthreads + j)
                try:
                    finished = perform(st, c, st.nblocks > 1)
                except OrderConflict:
                    raise _Rerun() from None
                except InterpError as exc:
                    raise L.fail(exc, st) from None
                L.steps += 1
                if finished:
                    del pending[j]
                else:
                    j += 1
        self.check_exits()
