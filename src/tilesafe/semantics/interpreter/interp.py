"""The reference interpreter: runs a kernel on numpy arrays, exactly as docs/semantics.md says.

Why: it is the oracle that GPU runs are compared against (differential testing) and the
engine that replays counterexample schedules from the checkers, so it must be exact (see
semantics/expr/fp.py for the float rules) and deterministic for a given seed or schedule.

How it runs. Blocks are independent and run one after another. Inside a block every thread
is a Python generator over closures compiled from the IR; a thread runs purely local
statements (lets, vars, loops, conditions on registers) without stopping, and pauses before
every statement with a visible effect: a shared-memory access, a store to or load from a
global tensor the kernel writes, an mbarrier operation, `sync`, a wait, a TMA issue, a bulk
group wait, a fence. Each such statement then executes atomically when the scheduler picks
the thread (sequential consistency at statement granularity). The copy engine of the block
is a set of pending operations (a TMA load landing; a TMA store reading shared memory; a
TMA store writing global memory), each of which may be scheduled at any step.

Choices this module makes where docs/semantics.md is silent (each is documented there or
should be):
- `arrive b, one per warp` is elect.sync + arrive: the lanes of each warp of the role first
  converge (none continues before all of them reached the statement; a lane that never
  reaches it deadlocks the others), then the lowest lane arrives. Without the convergence the
  other lanes' earlier shared reads would race with the refill the arrival allows.
  `arrive b, one` does not converge: the lowest thread of the role arrives, nobody waits.
- `var x: T` holds a T: every assignment rounds (f16/bf16) or wraps (i32/u8) like a store.
- `i32(x)` is PTX cvt.rzi.s32.f32 (NaN -> 0, saturating); float min/max are PTX min/max.f32
  (a NaN operand yields the other one, -0 < +0); a float literal is the f32 nearest to the
  IR's binary64 value; int and float operands meet in f32 (the int rounded once).
- Shared memory starts as 0xFF bytes (NaN in every float type), so reading a stage before
  its copy landed shows up in the output.
- A TMA load lands atomically in one step; a TMA store reads shared memory in one step and
  writes global memory in a later one (so `wait_group N read` is observable).
- The copy engine is not drained at exit: when every thread has finished, a load still in
  flight is TS430 and a store that has not read shared memory yet is TS307 (a store with
  only its global writes left finishes).
- `fence proxy_async` covers a thread's generic shared writes made since its last release
  (`sync`, `arrive`, the convergence of `one per warp`); a TMA store that reads a byte still
  covered by no fence is TS301.

Two engines. This module is the *scalar* engine: every schedule (seeded random, PCT, a
replayed one, a checker's counterexample). semantics/interpreter/interp_vec.py is the *vector*
engine: one legal schedule -- groups of threads at one program point stepping together, as numpy
operations, blocks side by side where no block can observe another -- recorded in the same
agent terms, so replaying its schedule here reproduces its run bit for bit. `run_kernel`
picks the vector engine when no particular schedule is asked for (see its docstring).

This module is the runner: run-wide state, one block's memory, barriers and copy engine, and
the scheduler. The block's statements are compiled to closures by interp_compile.py (with
interp_exprs.py, interp_sync.py and interp_copies.py); threads, blockers and copies are the
records of interp_agents.py.

Agents, as recorded in `RunResult.schedule`: 0 .. block-1 are threads; block + j is the j-th
oldest pending copy-engine operation of the current block. The schedule of a run lists the
choice made at every step, blocks concatenated in launch order (x fastest); passing it back as
`schedule=` replays the run exactly (after the list runs out, the seeded random choice goes on).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from tilesafe.frontend import ir
from tilesafe.frontend.ir import describe_threads
from tilesafe.frontend.span import Span
from tilesafe.frontend.walk import statements
from tilesafe.semantics.expr import evaluate
from tilesafe.semantics.hw import tma_rules
from tilesafe.semantics.interpreter import interp_error as E
from tilesafe.semantics.interpreter.interp_agents import Blocker, Copy, MmaOp, Thread
from tilesafe.semantics.interpreter.interp_bars import BlockBarriers
from tilesafe.semantics.interpreter.interp_compile import Compiler, finishing
from tilesafe.semantics.interpreter.interp_error import InterpError
from tilesafe.semantics.interpreter.interp_io import (
    check_requires,
    check_where,
    random_inputs,
    summarize_tensor,
    tensor_shapes,
    tensor_usage,
    tensormap_spec,
)
from tilesafe.semantics.interpreter.interp_tensor import TensorCore
from tilesafe.semantics.interpreter.schedule import Guide, make_policy
from tilesafe.semantics.interpreter.smem import (
    NUMPY_DTYPE,
    SMEM_POISON,
    bits_view,
    codec,
    plan_shared,
)

__all__ = [
    "DEFAULT_MAX_STEPS", "InterpError", "RunResult", "TraceEvent", "check_where",
    "random_inputs", "run_kernel", "summarize", "tensor_shapes",
]

DEFAULT_MAX_STEPS = 20_000_000

# Statements whose execution cannot change any barrier, sync, bulk-group or wgmma-group
# state (a fragment register write included: no blocked thread waits on a register).
_MEMORY_STMTS = (ir.Store, ir.Let, ir.VarDecl, ir.Assign, ir.If, ir.FragStore)


@dataclass(frozen=True)
class TraceEvent:
    """One scheduler step: who moved and which statement (or copy) it performed."""

    step: int
    block: tuple[int, ...]
    agent: int
    kind: str
    span: Span
    detail: str | None = None


@dataclass(frozen=True)
class RunResult:
    tensors: dict[str, np.ndarray]  # final contents of every global tensor (bf16 as uint16)
    steps: int
    choices: tuple[int, ...] | Any  # the schedule, or a vector run's record of it
    trace: tuple[TraceEvent, ...] | None  # only with record_trace=True
    grid: tuple[int, ...]
    dtypes: dict[str, ir.DType]
    # which engine ran: "scalar" or "vector" (semantics/interpreter/interp_vec.py)
    engine: str = "scalar"
    fallback: str | None = None  # engine="auto" ran the scalar engine: why

    @functools.cached_property
    def schedule(self) -> tuple[int, ...]:
        """The agent chosen at every step: pass back as `schedule=` to replay the run on the
        scalar engine (a vector run's is spelled out on first use)."""
        c = self.choices
        return c if isinstance(c, tuple) else c.schedule()


def summarize(result: RunResult) -> dict[str, dict[str, Any]]:
    """Per tensor: dtype, shape, checksum of the bytes, sum/min/max of finite values, NaN and
    inf counts (what the CLI prints after `tilesafe run`)."""
    return {name: summarize_tensor(arr, result.dtypes[name])
            for name, arr in result.tensors.items()}


def run_kernel(
    kernel: ir.Kernel,
    sizes: Mapping[str, int],
    inputs: Mapping[str, np.ndarray],
    *,
    seed: int | None = None,
    schedule: Sequence[int] | None = None,
    max_steps: int = DEFAULT_MAX_STEPS,
    record_trace: bool = False,
    policy: str | Any = "random",
    guide: Guide | None = None,
    engine: str = "auto",
) -> RunResult:
    """Run every block of `kernel` for concrete `sizes` on copies of `inputs`.

    The scheduler (semantics/interpreter/schedule.py): `policy` "random" (uniform, seeded) or "pct"
    (adversarial priorities, the copy engine last); with `guide`, a checker counterexample
    is followed in its block first; or a policy object of that module (to inspect it after
    the run). `schedule` replays a recorded run before any of them.

    `engine`: "auto" runs the vector engine (semantics/interpreter/interp_vec.py: one legal
    schedule, groups of threads in lockstep, recorded in `RunResult.schedule` like any other) when
    no particular schedule is asked for -- no `seed`, `schedule`, `guide`, trace, or
    policy other than "random" -- and the kernel is in its fragment; otherwise the scalar
    engine (a missing seed is 0), with `RunResult.fallback` saying why. "scalar" always
    runs the scalar engine; "vector" always the vector engine (with `seed`, it picks its
    group steps at random; ValueError where it cannot run).

    `inputs` must hold every global tensor (outputs too: their initial contents) with the
    shape the sizes give and the numpy dtype of smem.NUMPY_DTYPE (bf16 as uint16 patterns).
    Raises InterpError (with `.schedule` set to the choices made so far) on any run-time
    error, including deadlock.
    """
    grid = check_where(kernel, sizes)
    shapes = tensor_shapes(kernel, sizes)
    for t in kernel.params:
        if t.name not in inputs:
            raise ValueError(f"no input array for global tensor '{t.name}'")
        a = np.asarray(inputs[t.name])
        want = NUMPY_DTYPE[t.dtype]
        if a.shape != shapes[t.name] or a.dtype != want:
            raise ValueError(f"tensor '{t.name}' must be {np.dtype(want).name}"
                             f"{list(shapes[t.name])}, got {a.dtype.name}{list(a.shape)}")
    check_requires(kernel, sizes, inputs)

    def fresh() -> dict[str, np.ndarray]:
        """Private copies of the inputs (the run updates them in place)."""
        return {t.name: np.array(inputs[t.name], dtype=NUMPY_DTYPE[t.dtype], order="C",
                                 copy=True) for t in kernel.params}

    arrays = fresh()
    fallback = _engine_choice(kernel, sizes, grid, engine, seed, schedule, record_trace,
                              policy, guide)
    if fallback is None:
        from tilesafe.semantics.interpreter.interp_vec import run_vector

        tensors, steps, record = run_vector(kernel, sizes, grid, arrays, fresh, seed=seed,
                                            max_steps=max_steps)
        return RunResult(tensors, steps, record, None, grid,
                         {t.name: t.dtype for t in kernel.params}, "vector")
    seed = 0 if seed is None else seed
    chooser = make_policy(policy, seed, guide) if isinstance(policy, str) else policy
    run = _Run(kernel, dict(sizes), arrays, seed, schedule, max_steps, record_trace, chooser)
    with np.errstate(all="ignore"):
        if kernel.cluster is not None:
            from tilesafe.semantics.interpreter.interp_cluster import run_clusters

            run_clusters(run, grid, _Block)
        else:
            for bz in range(grid[2] if len(grid) > 2 else 1):
                for by in range(grid[1] if len(grid) > 1 else 1):
                    for bx in range(grid[0]):
                        block_idx = (bx, by, bz)[: len(grid)]
                        _Block(run, block_idx).execute()
    return RunResult(arrays, run.step, tuple(run.choices),
                     tuple(run.trace) if run.trace is not None else None, grid,
                     {t.name: t.dtype for t in kernel.params}, "scalar",
                     fallback if engine == "auto" else None)


ENGINES = ("auto", "scalar", "vector")


def _engine_choice(kernel: ir.Kernel, sizes: Mapping[str, int], grid: tuple[int, ...],
                   engine: str, seed: int | None, schedule: Sequence[int] | None,
                   record_trace: bool, policy: Any, guide: Guide | None) -> str | None:
    """None: run the vector engine; else why the scalar engine runs."""
    if engine not in ENGINES:
        raise ValueError(f"unknown engine {engine!r} (known: {', '.join(ENGINES)})")
    if engine == "scalar":
        return "engine='scalar' was asked for"
    asked = ("a replayed schedule" if schedule is not None else
             "a checker counterexample to follow" if guide is not None else
             "a trace" if record_trace else
             f"the {policy!r} scheduler" if not (isinstance(policy, str)
                                                 and policy == "random") else None)
    if engine == "auto" and asked is None and seed is not None:
        asked = f"the random scheduler with seed {seed}"
    if asked is not None:
        if engine == "vector":
            raise ValueError(f"the vector engine runs its own schedule, not {asked}")
        return f"{asked} was asked for"
    from tilesafe.semantics.interpreter.interp_vec import vector_unsupported

    why = vector_unsupported(kernel, sizes, grid)
    if why is not None and engine == "vector":
        raise ValueError(f"the vector engine cannot run this launch: {why}")
    return why


# ---- run-wide state -----------------------------------------------------------------------


@dataclass
class _Global:
    tensor: ir.GlobalTensor
    array: np.ndarray
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    bits: np.ndarray  # flat view as unsigned patterns
    read: Callable[[int], Any]
    write: Callable[[int, Any], None]


class _Run:
    def __init__(self, kernel: ir.Kernel, sizes: dict[str, int], arrays: dict[str, np.ndarray],
                 seed: int, schedule: Sequence[int] | None, max_steps: int,
                 record_trace: bool, policy: Any) -> None:
        self.kernel = kernel
        self.sizes = sizes
        self.globals: dict[str, _Global] = {}
        for t in kernel.params:
            arr = arrays[t.name]
            raw = arr.reshape(-1).view(np.uint8)
            read, write = codec(t.dtype, raw)
            shape = arr.shape
            strides = tuple(int(np.prod(shape[i + 1:], dtype=np.int64)) for i in range(len(shape)))
            self.globals[t.name] = _Global(t, arr, shape, strides, bits_view(raw, t.dtype.nbytes),
                                           read, write)
        _, self.written = tensor_usage(kernel)
        self.plan = plan_shared(kernel.shared)
        stmts = list(statements(kernel.body))
        # Generic writes the async proxy reads next (a TMA store, a wgmma's operands) need
        # `fence proxy_async`: tag shared bytes with their unfenced writer.
        self.track_proxy = any(isinstance(s, (ir.TmaStore, ir.Wgmma)) for s in stmts)
        self.var_dtypes = {s.uid: s.dtype for s in stmts if isinstance(s, ir.VarDecl)}
        self.policy = policy
        self.guide: Guide | None = getattr(policy, "guide", None)
        self.replay = list(schedule) if schedule is not None else []
        self.choices: list[int] = []
        self.trace: list[TraceEvent] | None = [] if record_trace else None
        self.step = 0
        self.max_steps = max_steps
        self._tmap_ok: set[str] = set()

    def box_offsets(self, tm: ir.TensorMap, eb: int, base: int) -> np.ndarray:
        """Byte offsets (from `base`) where the copy engine puts each box element."""
        return _box_offsets(tm.box, eb, tm.swizzle, base)

    def check_tensormap(self, tm: ir.TensorMap, span: Span) -> None:
        """Refuse a descriptor the driver would reject (TS5xx), once per tensor map."""
        if tm.name in self._tmap_ok:
            return
        spec = tensormap_spec(self.kernel, tm, self.globals[tm.tensor].shape)
        bad = tma_rules.admissibility(spec)
        if bad:
            v = bad[0]
            raise InterpError(v.code, f"tensormap '{tm.name}': {v.message}", tm.span,
                              {"rule": v.rule, "citation": v.citation})
        self._tmap_ok.add(tm.name)


@functools.lru_cache(maxsize=256)
def _box_offsets(box: tuple[int, ...], eb: int, swizzle: str, base: int) -> np.ndarray:
    out = np.array(tma_rules.box_arrangement(box, eb, swizzle, base), dtype=np.int64)
    out.flags.writeable = False
    return out


# ---- one block ----------------------------------------------------------------------------


class _Block(BlockBarriers):
    """One block: its shared memory, barrier states, copy engine and threads, run by the
    scheduler in `execute` over the closures interp_compile.py made for it."""

    def __init__(self, run: _Run, block_idx: tuple[int, ...], rank: int = 0,
                 copies: list | None = None) -> None:
        self.run = run
        self.kernel = run.kernel
        self.block_idx = block_idx
        # Its rank in its cluster, and the cluster (interp_cluster.Cluster: set by the
        # cluster before anything runs; None without one).
        self.rank = rank
        self.cluster: Any = None
        self.nthreads = run.kernel.block
        self.smem = np.full(run.plan.total, SMEM_POISON, dtype=np.uint8)
        self.tags = np.full(run.plan.total, -1, dtype=np.int32) if run.track_proxy else None
        self.codecs = {dt: codec(dt, self.smem) for dt in ir.DType}
        self.init_barriers()
        self.sync_count = 0
        self.sync_gen = 0
        # Named barriers: id -> [threads arrived in the current phase, phase, its count,
        # the threads that arrived in it]
        self.named: dict[int, list] = {}
        self.uses_sync = any(isinstance(s, ir.Sync) for s in statements(self.kernel.body))
        # The copy engine's pending operations: the cluster's one list for its CTAs.
        self.copies: list[Copy | MmaOp] = [] if copies is None else copies
        self.note: str | None = None
        self.threads = [Thread(i, rank) for i in range(self.nthreads)]
        self.tensor = TensorCore(self)
        guide = run.guide
        self.guided = guide is not None and tuple(guide.block) == tuple(block_idx)
        if self.guided:
            for t in self.threads:
                t.units = guide.units.get(t.tid, frozenset())
                t.unit_of = guide.unit_of.get(t.tid, {})
        local, body = Compiler(self).block(self.kernel.body, None)
        # A body with no effectful statement compiles to a plain function; every thread
        # runs a generator, so wrap it in one that finishes at its first step.
        self.body = finishing(body) if local else body

    # -- errors -----------------------------------------------------------------------------

    def err(self, code: str, message: str, span: Span, t: Thread | None,
            **detail: Any) -> InterpError:
        where = f"block {self.block_idx}"
        if self.cluster is not None:
            where += f" = cta {self.rank} of its cluster"
            detail = {"cta": self.rank, **detail}
        where += f", thread {t.tid}" if t is not None else ""
        detail = {"block": self.block_idx, **detail}
        if t is not None:
            detail["thread"] = t.tid
        return InterpError(code, f"{message} ({where})", span, detail)

    def peer(self, rank: int, t: Thread, span: Span, what: str) -> _Block:
        """The CTA of this block's cluster with `rank`, for thread t to `what` (its shared
        memory, a barrier): inside the cluster (TS434), after t met it at a cluster barrier
        (TS433: before that the peer may not run yet, its barriers not be initialised) and
        before it exited (TS432: its shared memory is gone)."""
        if rank == self.rank:
            return self
        cl = self.cluster
        n = 1 if cl is None else len(cl.ctas)
        if cl is None or not 0 <= rank < n:
            raise self.err(E.BAD_RANK, f"{what} of CTA {rank}, outside the cluster (ranks 0 .. "
                           f"{n - 1})", span, t, rank=rank)
        if not t.met:
            raise self.err(E.PEER_NOT_READY, f"{what} of CTA {rank} before this thread passed "
                           "a cluster barrier: the peer may not have started, its barriers "
                           "may not be initialised (`cluster_sync` after the inits)", span, t,
                           rank=rank)
        other = cl.ctas[rank]
        if cl.exited(rank):
            raise self.err(E.PEER_EXITED, f"{what} of CTA {rank}, whose threads have all "
                           "exited: its shared memory is gone (a cluster barrier before "
                           "exit keeps every CTA until its peers are done with it)", span, t,
                           rank=rank)
        return other

    # -- the copy engine --------------------------------------------------------------------

    def perform(self, c: Copy | MmaOp) -> bool:
        """Run the next step of a copy (or an MMA: interp_tensor.py); True when the copy is
        finished."""
        if isinstance(c, MmaOp):
            self.tensor.perform(c)
            if self.run.trace is not None:
                self.note = f"into '{c.fragment}' of warpgroup {c.wg}"
            return True
        g: _Global = c.g
        sbits = bits_view(self.smem, c.elem_bytes)
        if c.kind == "load":
            vals = np.full(c.flat.shape, c.fill, dtype=g.bits.dtype)
            vals[c.mask] = g.bits[c.flat[c.mask]]
            sbits[c.slots] = vals
            if self.tags is not None:
                for k in range(c.elem_bytes):
                    self.tags[c.addrs + k] = -1
            name, i = c.bar
            self.bar_update(name, i, lambda s: s.complete_tx(c.nbytes), c.stmt.span, None)
            c.read_done = c.write_done = True
            return True
        if not c.read_done:
            if self.tags is not None:
                for k in range(c.elem_bytes):
                    writers = self.tags[c.addrs + k]
                    bad = np.nonzero(writers >= 0)[0]
                    if bad.size:
                        j = int(bad[0])
                        raise self.err(
                            E.PROXY_FENCE,
                            f"tma_store reads '{c.buffer}' at address {int(c.addrs[j])} (box "
                            f"element {j}) that thread {int(writers[j])} wrote through the "
                            "generic proxy with no 'fence proxy_async' before a "
                            "synchronisation (or after this store was issued)", c.stmt.span,
                            None, writer=int(writers[j]),
                            address=int(c.addrs[j]), issuer=c.tid)
            c.data = sbits[c.slots].copy()
            c.read_done = True
            if self.run.trace is not None:
                self.note = "read shared"
            return False
        g.bits[c.flat[c.mask]] = c.data[c.mask]
        c.write_done = True
        if self.run.trace is not None:
            self.note = "wrote global"
        return True

    # -- scheduling -------------------------------------------------------------------------

    def execute(self) -> None:
        run = self.run
        threads = self.threads
        nthreads = self.nthreads
        ready: list[int] = []
        # (CTA, blocker key) -> threads waiting on it: equal keys wait for one condition (of
        # their own CTA: each CTA of a cluster has its own `sync`, barriers, ...)
        blocked: dict[tuple, list[int]] = {}
        run.policy.start(self)
        for agent, t in enumerate(threads):  # an agent is its thread's place in `threads`
            t.gen = self.start(t)
            try:
                t.pending = self._advance(t)
            except InterpError as exc:
                raise self._annotate(exc) from None
            if t.done:
                continue
            if isinstance(t.pending, Blocker):
                blocked.setdefault((t.cta, t.pending.key), []).append(agent)
            else:
                ready.append(agent)
        passable: list[int] = []
        dirty = True
        copies = self.copies
        while True:
            if dirty:
                passable = [tid for tids in blocked.values()
                            if threads[tids[0]].pending.ready() for tid in tids]
                dirty = False
            n = len(ready) + len(passable) + len(copies)
            if n == 0:
                if blocked:
                    stuck = [tid for tids in blocked.values() for tid in tids]
                    raise self._annotate(self._deadlock(stuck))
                return
            if copies and not ready and not passable and not blocked:
                try:
                    self._exit_with_copies()
                except InterpError as exc:
                    raise self._annotate(exc) from None
            if run.step >= run.max_steps:
                raise self._annotate(self.err(E.STEP_LIMIT, f"step limit {run.max_steps} "
                                              "reached", self.kernel.span, None))
            agent = self._choose(ready, passable)
            run.choices.append(agent)
            self.note = None
            try:
                if agent < nthreads:
                    t = threads[agent]
                    p = t.pending
                    was_blocked = isinstance(p, Blocker)
                    stmt = p.stmt if was_blocked else p
                    t.pending = nxt = self._advance(t)
                    if was_blocked:
                        waiting = blocked[(t.cta, p.key)]
                        waiting.remove(agent)
                        if not waiting:
                            del blocked[(t.cta, p.key)]
                        dirty = True
                        if not t.done and not isinstance(nxt, Blocker):
                            ready.append(agent)
                    elif t.done:
                        ready.remove(agent)
                    if t.done:
                        dirty = True  # a cluster barrier counts exited threads as arrived
                    elif isinstance(nxt, Blocker):
                        ready.remove(agent)
                    if isinstance(nxt, Blocker):
                        blocked.setdefault((t.cta, nxt.key), []).append(agent)
                        dirty = True
                    if not isinstance(stmt, _MEMORY_STMTS):
                        dirty = True
                    kind = type(stmt).__name__ + (".pass" if was_blocked else "")
                else:
                    c = copies[agent - nthreads]
                    stmt = c.stmt
                    kind = ("wgmma.perform" if c.kind == "mma" else
                            "tma_load.land" if c.kind == "load" else
                            "tma_store.write" if c.read_done else "tma_store.read")
                    if self.perform(c):
                        del copies[agent - nthreads]
                        if c.kind == "mma":
                            self.retire(c)  # the warpgroup's next MMA may go
                    dirty = True
            except InterpError as exc:
                raise self._annotate(exc) from None
            if run.trace is not None:
                run.trace.append(TraceEvent(run.step, self.block_idx, agent, kind, stmt.span,
                                            self.note))
            run.step += 1

    def _exit_with_copies(self) -> None:
        """Every thread has finished. PTX does not drain the copy engine at exit: a load
        still in flight, or a store that has not read its shared memory yet, touches
        memory the block no longer owns (undefined behaviour). Stores that only have their
        global writes left may finish. An MMA still pending would write registers of
        threads that no longer exist and read shared memory the block no longer owns
        (TS431)."""
        for c in self.copies:
            if isinstance(c, MmaOp):
                raise self.err(E.EXIT_MMA, f"every thread finished with "
                               f"{self.tensor.pending_text(c)} still pending: "
                               f"{self.tensor.why_unwaited(c)}", c.stmt.span, None,
                               warpgroup=c.wg)
            if c.kind == "load":
                name, i = c.bar
                raise self.err(E.EXIT_LOAD, f"every thread finished while a TMA load into "
                               f"'{c.buffer}' (signalling {self.label(name, i)}) is still in "
                               "flight: nothing waited for it", c.stmt.span, None,
                               issuer=c.tid, barriers=self.barrier_states())
            if not c.read_done:
                raise self.err(E.EXIT_STORE, f"every thread finished while a TMA store from "
                               f"'{c.buffer}' (thread {c.tid}) has not read shared memory "
                               "yet: 'wait_group 0 read' before exit", c.stmt.span, None,
                               issuer=c.tid)

    def start(self, t: Thread) -> Any:
        """The generator running thread t's statements."""
        return self.body(t)

    def retire(self, c: MmaOp) -> None:
        self.tensor.retire(c)

    def finished(self, t: Thread) -> None:
        """Thread t ran its last statement (a cluster counts its live threads)."""
        if self.cluster is not None:
            self.cluster.finished(t)

    def _advance(self, t: Thread) -> Any:
        try:
            return t.gen.send(None)
        except StopIteration:
            t.done = True
            self.finished(t)
            return None
        except evaluate.EvalError as exc:
            raise self.err(exc.code, exc.message, exc.span, t) from None

    def _choose(self, ready: list[int], passable: list[int]) -> int:
        run = self.run
        pos = len(run.choices)
        if pos < len(run.replay):
            agent = run.replay[pos]
            ok = False
            if 0 <= agent < self.nthreads:
                t = self.threads[agent]
                ok = not t.done and (not isinstance(t.pending, Blocker) or t.pending.ready())
            elif self.nthreads <= agent < self.nthreads + len(self.copies):
                ok = True
            if not ok:
                raise self.err(E.BAD_REPLAY, f"replayed schedule step {pos} names agent {agent},"
                               " which cannot move now", self.kernel.span, None, step=pos)
            return agent
        return run.policy.choose(self, ready, passable)

    def _annotate(self, exc: InterpError) -> InterpError:
        exc.detail.setdefault("block", self.block_idx)
        exc.schedule = tuple(self.run.choices)
        exc.steps = self.run.step
        return exc

    def _deadlock(self, blocked: list[int]) -> InterpError:
        groups: dict[tuple[str, str], list[int]] = {}
        for tid in blocked:
            b = self.threads[tid].pending
            groups.setdefault((b.role, b.describe()), []).append(tid)
        lines = [f"{role} {describe_threads(tids)} {what}"
                 for (role, what), tids in sorted(groups.items(), key=lambda kv: kv[1][0])]
        finished = [t.tid for t in self.threads if t.done]
        all_sync = all(isinstance(self.threads[tid].pending.stmt, ir.Sync) for tid in blocked)
        all_named = all(isinstance(self.threads[tid].pending.stmt, (ir.Sync, ir.NamedBar))
                        for tid in blocked)
        code = E.SYNC_DEADLOCK if all_sync else E.NAMED_DEADLOCK if all_named else E.DEADLOCK
        head = ("deadlock at sync" if all_sync else "deadlock at named barriers" if all_named
                else "deadlock")
        tail = f"; {describe_threads(finished)} finished" if finished else ""
        first = self.threads[blocked[0]].pending.stmt
        return self.err(code, f"{head}: " + "; ".join(lines) + tail, first.span, None,
                        blocked=[{"role": r, "threads": tids, "waits": w}
                                 for (r, w), tids in groups.items()],
                        finished=finished, barriers=self.barrier_states())
