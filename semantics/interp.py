"""The reference interpreter: runs a kernel on numpy arrays, exactly as docs/semantics.md says.

Why: it is the oracle that GPU runs are compared against (differential testing) and the
engine that replays counterexample schedules from the checkers, so it must be exact (see
semantics/fp.py for the float rules) and deterministic for a given seed or schedule.

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
replayed one, a checker's counterexample). semantics/interp_vec.py is the *vector* engine:
one legal schedule -- groups of threads at one program point stepping together, as numpy
operations, blocks side by side where no block can observe another -- recorded in the same
agent terms, so replaying its schedule here reproduces its run bit for bit. `run_kernel`
picks the vector engine when no particular schedule is asked for (see its docstring).

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
from tilesafe.frontend.walk import first_tensor_core, statements
from tilesafe.semantics import evaluate, fp, tma_rules
from tilesafe.semantics import interp_error as E
from tilesafe.semantics.interp_error import InterpError
from tilesafe.semantics.interp_io import (
    check_where,
    random_inputs,
    summarize_tensor,
    tensor_shapes,
    tensor_usage,
    tensormap_spec,
)
from tilesafe.semantics.mbarrier import MbarrierError, MbarrierState
from tilesafe.semantics.schedule import Guide, make_policy
from tilesafe.semantics.smem import (
    NAN_BITS,
    NUMPY_DTYPE,
    SMEM_POISON,
    Placement,
    bits_view,
    codec,
    plan_shared,
)

__all__ = [
    "DEFAULT_MAX_STEPS", "InterpError", "RunResult", "TraceEvent", "check_where",
    "random_inputs", "run_kernel", "summarize", "tensor_shapes",
]

DEFAULT_MAX_STEPS = 20_000_000

_LOCAL, _EFFECT, _COMPOUND = 0, 1, 2
# Statements whose execution cannot change any barrier, sync or bulk-group state.
_MEMORY_STMTS = (ir.Store, ir.Let, ir.VarDecl, ir.Assign, ir.If)


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
    engine: str = "scalar"  # which engine ran: "scalar" or "vector" (semantics/interp_vec.py)
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

    The scheduler (semantics/schedule.py): `policy` "random" (uniform, seeded) or "pct"
    (adversarial priorities, the copy engine last); with `guide`, a checker counterexample
    is followed in its block first; or a policy object of that module (to inspect it after
    the run). `schedule` replays a recorded run before any of them.

    `engine`: "auto" runs the vector engine (semantics/interp_vec.py: one legal schedule,
    groups of threads in lockstep, recorded in `RunResult.schedule` like any other) when
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
    unsupported = first_tensor_core(kernel)
    if unsupported is not None:
        raise InterpError(E.NOT_YET, "the reference interpreter does not run tensor-core "
                          "statements yet (docs/wgmma.md, Status)", unsupported.span)
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

    def fresh() -> dict[str, np.ndarray]:
        """Private copies of the inputs (the run updates them in place)."""
        return {t.name: np.array(inputs[t.name], dtype=NUMPY_DTYPE[t.dtype], order="C",
                                 copy=True) for t in kernel.params}

    arrays = fresh()
    fallback = _engine_choice(kernel, sizes, grid, engine, seed, schedule, record_trace,
                              policy, guide)
    if fallback is None:
        from tilesafe.semantics.interp_vec import run_vector

        tensors, steps, record = run_vector(kernel, sizes, grid, arrays, fresh, seed=seed,
                                            max_steps=max_steps)
        return RunResult(tensors, steps, record, None, grid,
                         {t.name: t.dtype for t in kernel.params}, "vector")
    seed = 0 if seed is None else seed
    chooser = make_policy(policy, seed, guide) if isinstance(policy, str) else policy
    run = _Run(kernel, dict(sizes), arrays, seed, schedule, max_steps, record_trace, chooser)
    with np.errstate(all="ignore"):
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
    from tilesafe.semantics.interp_vec import vector_unsupported

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
        self.track_proxy = any(isinstance(s, ir.TmaStore) for s in stmts)
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


# ---- threads, blockers, copies ------------------------------------------------------------


class _Thread:
    __slots__ = ("tid", "lane", "warp", "vals", "gen", "pending", "done", "unfenced",
                 "open_group", "groups", "units", "unit_of", "unit", "unit_stmt", "allowed")

    def __init__(self, tid: int) -> None:
        # Units (schedule.py): statements the event model has as instructions; only a
        # guided block counts them, so that a counterexample's class moves can be followed.
        self.units: frozenset[int] | None = None
        self.unit_of: Mapping[int, int] = {}
        self.unit = 0
        self.unit_stmt: int | None = None
        self.allowed = 1 << 60
        self.tid = tid
        self.lane = tid % 32
        self.warp = tid // 32
        self.vals: dict[int, Any] = {}
        self.gen: Any = None
        self.pending: Any = None
        self.done = False
        self.unfenced: list[tuple[int, int]] = []  # (address, bytes) of unfenced generic writes
        self.open_group: list[_Copy] = []
        self.groups: list[list[_Copy]] = []


class _Blocker:
    """What a blocked thread waits for; `ready()` is re-evaluated as the state changes."""

    __slots__ = ("stmt", "role", "key", "ready", "describe")

    def __init__(self, stmt: ir.Stmt, role: str, key: tuple, ready: Callable[[], bool],
                 describe: Callable[[], str]) -> None:
        self.stmt = stmt
        self.role = role
        self.key = key  # blockers with equal keys wait for the same condition
        self.ready = ready
        self.describe = describe  # evaluated only when a deadlock is reported


class _Copy:
    """One copy-engine operation. Loads: one step (write shared, complete_tx). Stores: a
    read step (snapshot shared) then a write step (global)."""

    __slots__ = ("kind", "stmt", "tid", "g", "slots", "addrs", "flat", "mask", "fill", "bar",
                 "nbytes", "data", "read_done", "write_done", "elem_bytes", "buffer", "prio")

    def __init__(self, kind: str, stmt: ir.Stmt, tid: int) -> None:
        self.prio: int | None = None  # the PCT scheduler's priority, once it has seen it
        self.kind = kind
        self.stmt = stmt
        self.tid = tid
        self.read_done = False
        self.write_done = False


# ---- one block ----------------------------------------------------------------------------


class _Block:
    def __init__(self, run: _Run, block_idx: tuple[int, ...]) -> None:
        self.run = run
        self.kernel = run.kernel
        self.block_idx = block_idx
        self.nthreads = run.kernel.block
        self.smem = np.full(run.plan.total, SMEM_POISON, dtype=np.uint8)
        self.tags = np.full(run.plan.total, -1, dtype=np.int32) if run.track_proxy else None
        self.codecs = {dt: codec(dt, self.smem) for dt in ir.DType}
        self.bars: dict[str, list[MbarrierState]] = {}
        self.phase: dict[str, list[int]] = {}
        self.init_by: dict[str, list[int | None]] = {}
        self.fenced: dict[str, list[bool]] = {}
        for b in self.kernel.barriers:
            self.bars[b.name] = [MbarrierState()] * b.instances
            self.phase[b.name] = [0] * b.instances
            self.init_by[b.name] = [None] * b.instances
            self.fenced[b.name] = [False] * b.instances
        self.sync_count = 0
        self.sync_gen = 0
        # Named barriers: id -> [threads arrived in the current phase, phase, its count,
        # the threads that arrived in it]
        self.named: dict[int, list] = {}
        self.uses_sync = any(isinstance(s, ir.Sync) for s in statements(self.kernel.body))
        self.copies: list[_Copy] = []
        self.note: str | None = None
        self.threads = [_Thread(i) for i in range(self.nthreads)]
        guide = run.guide
        self.guided = guide is not None and tuple(guide.block) == tuple(block_idx)
        if self.guided:
            for t in self.threads:
                t.units = guide.units.get(t.tid, frozenset())
                t.unit_of = guide.unit_of.get(t.tid, {})
        local, body = _Compiler(self).block(self.kernel.body, None)
        # A body with no effectful statement compiles to a plain function; every thread
        # runs a generator, so wrap it in one that finishes at its first step.
        self.body = _finishing(body) if local else body

    # -- errors -----------------------------------------------------------------------------

    def err(self, code: str, message: str, span: Span, t: _Thread | None,
            **detail: Any) -> InterpError:
        where = f"block {self.block_idx}" + (f", thread {t.tid}" if t is not None else "")
        detail = {"block": self.block_idx, **detail}
        if t is not None:
            detail["thread"] = t.tid
        return InterpError(code, f"{message} ({where})", span, detail)

    def model_err(self, exc: MbarrierError, label: str, span: Span,
                  t: _Thread | None) -> InterpError:
        return self.err(exc.code, f"{label}: {exc.message}", span, t,
                        barriers=self.barrier_states())

    # -- barriers ---------------------------------------------------------------------------

    def label(self, name: str, i: int) -> str:
        return name if self.kernel.barrier(name).length is None else f"{name}[{i}]"

    def bar_state_text(self, name: str, i: int) -> str:
        st = self.bars[name][i]
        if not st.initialized:
            return f"{self.label(name, i)}: uninitialised"
        return (f"{self.label(name, i)}: phase {self.phase[name][i]} (parity {st.parity}), "
                f"pending {st.pending}/{st.expected}, tx {st.tx}")

    def barrier_states(self) -> dict[str, str]:
        return {self.label(n, i): self.bar_state_text(n, i)
                for n, insts in self.bars.items() for i in range(len(insts))}

    def bar_update(self, name: str, i: int, op: Callable[[MbarrierState], MbarrierState],
                   span: Span, t: _Thread | None) -> None:
        old = self.bars[name][i]
        if not old.initialized:
            raise self.err(E.UNINIT, f"mbarrier {self.label(name, i)} used before init", span,
                           t, barriers=self.barrier_states())
        try:
            new = op(old)
        except MbarrierError as exc:
            raise self.model_err(exc, self.label(name, i), span, t) from None
        if new.parity != old.parity:
            self.phase[name][i] += 1
        self.bars[name][i] = new
        if self.run.trace is not None:
            self.note = self.bar_state_text(name, i)

    # -- the copy engine --------------------------------------------------------------------

    def perform(self, c: _Copy) -> bool:
        """Run the next step of a copy; True when the copy is finished."""
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
        blocked: dict[tuple, list[int]] = {}  # blocker key -> threads waiting on it
        run.policy.start(self)
        for t in threads:
            t.gen = self.body(t)
            try:
                t.pending = self._advance(t)
            except InterpError as exc:
                raise self._annotate(exc) from None
            if t.done:
                continue
            if isinstance(t.pending, _Blocker):
                blocked.setdefault(t.pending.key, []).append(t.tid)
            else:
                ready.append(t.tid)
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
                    was_blocked = isinstance(p, _Blocker)
                    stmt = p.stmt if was_blocked else p
                    t.pending = nxt = self._advance(t)
                    if was_blocked:
                        waiting = blocked[p.key]
                        waiting.remove(agent)
                        if not waiting:
                            del blocked[p.key]
                        dirty = True
                        if not t.done and not isinstance(nxt, _Blocker):
                            ready.append(agent)
                    elif t.done:
                        ready.remove(agent)
                    elif isinstance(nxt, _Blocker):
                        ready.remove(agent)
                    if isinstance(nxt, _Blocker):
                        blocked.setdefault(nxt.key, []).append(agent)
                        dirty = True
                    if not isinstance(stmt, _MEMORY_STMTS):
                        dirty = True
                    kind = type(stmt).__name__ + (".pass" if was_blocked else "")
                else:
                    c = copies[agent - nthreads]
                    stmt = c.stmt
                    kind = ("tma_load.land" if c.kind == "load" else
                            "tma_store.write" if c.read_done else "tma_store.read")
                    if self.perform(c):
                        del copies[agent - nthreads]
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
        global writes left may finish."""
        for c in self.copies:
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

    def _advance(self, t: _Thread) -> Any:
        try:
            return t.gen.send(None)
        except StopIteration:
            t.done = True
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
                ok = not t.done and (not isinstance(t.pending, _Blocker) or t.pending.ready())
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


def _finishing(fn: Callable[[_Thread], None]) -> Callable[[_Thread], Any]:
    """A generator function that runs `fn` and finishes without yielding."""

    def gen(t: _Thread):
        fn(t)
        return
        yield  # makes this a generator

    return gen


# ---- compiling the IR to closures ----------------------------------------------------------


def _counted(kind: int, stmt: ir.Stmt, fn: Callable) -> Callable:
    """`fn`, counting the thread's entry into `stmt` when it is one of its units (a guided
    block: semantics/schedule.py). Effects are counted where they are yielded (run_gen),
    compound statements and local ones here, before they run."""
    sid = id(stmt)
    if kind == _EFFECT:
        return fn

    def enter(t: _Thread) -> None:
        if t.units is not None and sid in t.units:
            t.unit += 1
            t.unit_stmt = sid

    if kind == _LOCAL:
        def local(t: _Thread) -> None:
            enter(t)
            return fn(t)

        return local

    def compound(t: _Thread):
        enter(t)
        yield from fn(t)

    return compound


_VAR_CONVERT: dict[ir.DType, Callable[[Any], Any]] = {
    ir.DType.F32: lambda x: x,
    ir.DType.F16: fp.round_to_f16,
    ir.DType.BF16: fp.round_to_bf16,
    ir.DType.I32: fp.wrap_i32,
    ir.DType.U8: fp.wrap_u8,
}


class _Compiler:
    """Turns IR into closures over one block's state. Expressions: t -> value. Statements:
    (kind, stmt, fn) where LOCAL fns run at once, EFFECT fns run after the thread yields the
    statement (and may return a _Blocker), COMPOUND fns are generators."""

    def __init__(self, blk: _Block) -> None:
        self.b = blk
        self.run = blk.run
        self.k = blk.kernel
        self.visible_tensors = blk.run.written

    # -- visibility -------------------------------------------------------------------------

    def visible(self, e: ir.Expr | None) -> bool:
        if e is None:
            return False
        if isinstance(e, ir.Load):
            if e.space is ir.Space.SHARED or e.tensor in self.visible_tensors:
                return True
            return any(self.visible(i) for i in e.indices)
        if isinstance(e, ir.BinOp):
            return self.visible(e.lhs) or self.visible(e.rhs)
        if isinstance(e, ir.UnOp):
            return self.visible(e.operand)
        if isinstance(e, ir.Call):
            return any(self.visible(a) for a in e.args)
        return False

    # -- expressions ------------------------------------------------------------------------

    def expr(self, e: ir.Expr) -> Callable[[Any], Any]:
        """Operators and constants mean what semantics/evaluate.py says; the leaves are this
        block's sizes and indices and the thread's registers and memory."""
        return evaluate.compile_expr(e, self.leaf)

    def leaf(self, e: ir.Expr) -> Callable[[Any], Any]:
        if isinstance(e, ir.SizeVar):
            v = self.run.sizes[e.name]
            return lambda t: v
        if isinstance(e, ir.Builtin):
            return self.e_Builtin(e)
        if isinstance(e, (ir.LoopVar, ir.LocalRef)):
            uid = e.uid
            return lambda t: t.vals[uid]
        if isinstance(e, ir.Load):
            return self.e_Load(e)
        raise TypeError(f"no meaning for {type(e).__name__}")

    def e_Builtin(self, e: ir.Builtin):
        kind = e.kind
        if kind is ir.BuiltinKind.THREAD:
            return lambda t: t.tid
        if kind is ir.BuiltinKind.LANE:
            return lambda t: t.lane
        if kind is ir.BuiltinKind.WARP_ID:
            return lambda t: t.warp
        axis = {ir.BuiltinKind.BLOCK_X: 0, ir.BuiltinKind.BLOCK_Y: 1, ir.BuiltinKind.BLOCK_Z: 2}
        idx = self.b.block_idx
        v = idx[axis[kind]] if axis[kind] < len(idx) else 0
        return lambda t: v

    def e_Load(self, e: ir.Load):
        if e.space is ir.Space.GLOBAL:
            g = self.run.globals[e.tensor]
            flat = self.index_fn(e.tensor, g.shape, e.indices, e.span, E.GLOBAL_OOB, "global")
            read = g.read
            return lambda t: read(flat(t))
        pl = self.run.plan.placements[e.tensor]
        flat = self.index_fn(e.tensor, pl.buffer.shape, e.indices, e.span, E.SHARED_OOB,
                             "shared")
        read = self.b.codecs[pl.buffer.dtype][0]
        slots = pl.slots
        return lambda t: read(slots[flat(t)])

    def index_fn(self, name: str, shape: tuple[int, ...], indices: tuple[ir.Expr, ...],
                 span: Span, code: str, space: str) -> Callable[[Any], int]:
        """Row-major linear index of a logical coordinate, raising TS201/TS202 outside."""
        fns = [self.expr(i) for i in indices]
        blk = self.b

        def oob(t: _Thread, idx: tuple[int, ...]) -> InterpError:
            return blk.err(code, f"{space} access {name}{list(idx)} is outside shape "
                           f"{list(shape)}", span, t, tensor=name, index=list(idx),
                           shape=list(shape))

        if len(fns) == 1:
            (f0,), (d0,) = fns, shape

            def flat1(t: _Thread) -> int:
                i = f0(t)
                if 0 <= i < d0:
                    return i
                raise oob(t, (i,))

            return flat1
        if len(fns) == 2:
            (f0, f1), (d0, d1) = fns, shape

            def flat2(t: _Thread) -> int:
                i, j = f0(t), f1(t)
                if 0 <= i < d0 and 0 <= j < d1:
                    return i * d1 + j
                raise oob(t, (i, j))

            return flat2

        if len(fns) == 3:
            (f0, f1, f2), (d0, d1, d2) = fns, shape

            def flat3(t: _Thread) -> int:
                i, j, k = f0(t), f1(t), f2(t)
                if 0 <= i < d0 and 0 <= j < d1 and 0 <= k < d2:
                    return (i * d1 + j) * d2 + k
                raise oob(t, (i, j, k))

            return flat3

        def flatn(t: _Thread) -> int:
            k = 0
            idx = tuple(f(t) for f in fns)
            for i, d in zip(idx, shape, strict=True):
                if not 0 <= i < d:
                    raise oob(t, idx)
                k = k * d + i
            return k

        return flatn

    # -- statements -------------------------------------------------------------------------

    def block(self, stmts: tuple[ir.Stmt, ...], role: ir.Role | None):
        items = [self.stmt(s, role) for s in stmts]
        if self.b.guided:
            items = [(kind, stmt, _counted(kind, stmt, fn)) for kind, stmt, fn in items]
        if all(kind == _LOCAL for kind, _, _ in items):
            fns = [fn for _, _, fn in items]

            def run_local(t: _Thread) -> None:
                for fn in fns:
                    fn(t)

            return True, run_local
        steps = tuple(items)

        def run_gen(t: _Thread):
            for kind, stmt, fn in steps:
                if kind == _EFFECT and t.units is not None and id(stmt) in t.units:
                    t.unit += 1  # entering a unit before yielding it (see _counted)
                    t.unit_stmt = id(stmt)
                if kind == _LOCAL:
                    fn(t)
                elif kind == _EFFECT:
                    yield stmt
                    blocker = fn(t)
                    if blocker is not None:
                        yield blocker
                else:
                    yield from fn(t)

        return False, run_gen

    def stmt(self, s: ir.Stmt, role: ir.Role | None) -> tuple[int, ir.Stmt, Callable]:
        return getattr(self, "s_" + type(s).__name__)(s, role)

    def s_Let(self, s: ir.Let, role):
        f, uid = self.expr(s.value), s.uid

        def let(t: _Thread) -> None:
            t.vals[uid] = f(t)

        return (_EFFECT if self.visible(s.value) else _LOCAL), s, let

    def s_VarDecl(self, s: ir.VarDecl, role):
        f, uid, conv = self.expr(s.value), s.uid, _VAR_CONVERT[s.dtype]

        def decl(t: _Thread) -> None:
            t.vals[uid] = conv(f(t))

        return (_EFFECT if self.visible(s.value) else _LOCAL), s, decl

    def s_Assign(self, s: ir.Assign, role):
        f, uid = self.expr(s.value), s.uid
        dtype = self.run.var_dtypes[s.uid]
        conv = _VAR_CONVERT[dtype]
        name = evaluate.assign_op(s.op, dtype.scalar)

        if name is None:
            def assign(t: _Thread) -> None:
                t.vals[uid] = conv(f(t))
        else:
            combine = evaluate.CONCRETE[name]

            def assign(t: _Thread) -> None:
                t.vals[uid] = conv(combine(t.vals[uid], f(t)))

        return (_EFFECT if self.visible(s.value) else _LOCAL), s, assign

    def s_Store(self, s: ir.Store, role):
        val = self.expr(s.value)
        if s.space is ir.Space.GLOBAL:
            g = self.run.globals[s.tensor]
            flat = self.index_fn(s.tensor, g.shape, s.indices, s.span, E.GLOBAL_OOB, "global")
            write = g.write

            def store_global(t: _Thread) -> None:
                write(flat(t), val(t))

            return _EFFECT, s, store_global
        pl = self.run.plan.placements[s.tensor]
        flat = self.index_fn(s.tensor, pl.buffer.shape, s.indices, s.span, E.SHARED_OOB,
                             "shared")
        write = self.b.codecs[pl.buffer.dtype][1]
        slots, eb, tags = pl.slots, pl.elem_bytes, self.b.tags

        def store_shared(t: _Thread) -> None:
            slot = slots[flat(t)]
            write(slot, val(t))
            if tags is not None:
                addr = slot * eb
                tags[addr:addr + eb] = t.tid
                t.unfenced.append((addr, eb))

        return _EFFECT, s, store_shared

    def s_For(self, s: ir.For, role):
        lo, hi, step, uid = self.expr(s.lo), self.expr(s.hi), s.step, s.var.uid
        local, body = self.block(s.body, role)
        if local:
            def loop_local(t: _Thread) -> None:
                v, end = lo(t), hi(t)
                while v < end:
                    t.vals[uid] = v
                    body(t)
                    v += step

            return _LOCAL, s, loop_local

        def loop(t: _Thread):
            v, end = lo(t), hi(t)
            while v < end:
                t.vals[uid] = v
                yield from body(t)
                v += step

        return _COMPOUND, s, loop

    def s_If(self, s: ir.If, role):
        cond = self.expr(s.cond)
        then_local, then = self.block(s.then, role)
        else_local, orelse = self.block(s.orelse, role)
        pause = self.visible(s.cond)
        if then_local and else_local and not pause:
            def if_local(t: _Thread) -> None:
                (then if cond(t) else orelse)(t)

            return _LOCAL, s, if_local

        def if_gen(t: _Thread):
            if pause:
                yield s
            branch, is_local = (then, then_local) if cond(t) else (orelse, else_local)
            if is_local:
                branch(t)
            else:
                yield from branch(t)

        return _COMPOUND, s, if_gen

    def s_Role(self, s: ir.Role, role):
        lo, hi, elect = s.threads.lo, s.threads.hi, s.elect_one
        local, body = self.block(s.body, s)

        def member(t: _Thread) -> bool:
            return t.tid == lo if elect else lo <= t.tid < hi

        if local:
            def role_local(t: _Thread) -> None:
                if member(t):
                    body(t)

            return _LOCAL, s, role_local

        def role_gen(t: _Thread):
            if member(t):
                yield from body(t)

        return _COMPOUND, s, role_gen

    # -- barriers ---------------------------------------------------------------------------

    def bar_index(self, ref: ir.BarrierRef) -> Callable[[Any], int]:
        n = self.k.barrier(ref.name).instances
        if ref.index is None:
            return lambda t: 0
        f, blk, name, span = self.expr(ref.index), self.b, ref.name, ref.span

        def index(t: _Thread) -> int:
            i = f(t)
            if 0 <= i < n:
                return i
            raise blk.err(E.SHARED_OOB, f"barrier index {name}[{i}] is outside 0..{n - 1}",
                          span, t, barrier=name, index=i)

        return index

    def s_Init(self, s: ir.Init, role):
        blk, name = self.b, s.barrier.name
        bar = self.k.barrier(name)
        whole = s.barrier.index is None
        index = self.bar_index(s.barrier)

        def init(t: _Thread) -> None:
            for i in (range(bar.instances) if whole else (index(t),)):
                st = blk.bars[name][i]
                if st.initialized:
                    raise blk.err(E.REINIT, f"init of mbarrier {blk.label(name, i)}, which is "
                                  f"live (initialised by thread {blk.init_by[name][i]})",
                                  s.span, t, barriers=blk.barrier_states())
                try:
                    blk.bars[name][i] = st.init(bar.count)
                except MbarrierError as exc:
                    raise blk.model_err(exc, blk.label(name, i), s.span, t) from None
                blk.phase[name][i] = 0
                blk.init_by[name][i] = t.tid
                blk.fenced[name][i] = False

        return _EFFECT, s, init

    def s_Fence(self, s: ir.Fence, role):
        blk = self.b
        if s.kind is ir.FenceKind.MBARRIER_INIT:
            def fence_init(t: _Thread) -> None:
                for name, owners in blk.init_by.items():
                    for i, owner in enumerate(owners):
                        if owner == t.tid:
                            blk.fenced[name][i] = True

            return _EFFECT, s, fence_init

        def fence_proxy(t: _Thread) -> None:
            tags = blk.tags
            if tags is not None:
                tid = t.tid
                for addr, eb in t.unfenced:
                    if tags[addr] == tid:
                        tags[addr:addr + eb] = -1
            t.unfenced.clear()

        return _EFFECT, s, fence_proxy

    def s_Sync(self, s: ir.Sync, role):
        blk, rname = self.b, role.name if role else "block"

        def sync(t: _Thread) -> _Blocker | None:
            t.unfenced.clear()  # a release: later fences no longer cover earlier writes
            blk.sync_count += 1
            gen = blk.sync_gen
            if blk.sync_count == blk.nthreads:
                blk.sync_count = 0
                blk.sync_gen += 1
                return None
            return _Blocker(s, rname, ("sync", gen), lambda: blk.sync_gen != gen,
                            lambda: f"wait at sync (line {s.span.line}; {blk.sync_count} of "
                            f"{blk.nthreads} threads arrived)")

        return _EFFECT, s, sync

    def s_NamedBar(self, s: ir.NamedBar, role):
        blk, rname = self.b, role.name if role else "block"
        what = "bar_arrive" if s.arrive else "bar_sync"

        def named(t: _Thread) -> _Blocker | None:
            t.unfenced.clear()  # a release, as at sync
            if s.count % 32 or s.count > blk.nthreads:
                raise blk.err(E.NAMED_COUNT, f"{what} {s.bar_id}, {s.count}: the thread count "
                              f"must be a multiple of 32 and at most the block's "
                              f"{blk.nthreads}", s.span, t)
            if s.bar_id == 0 and blk.uses_sync and s.count != blk.nthreads:
                raise blk.err(E.NAMED_COLLISION, f"{what} 0, {s.count}: barrier 0 is the "
                              "block-wide barrier `sync` uses (bar.sync 0 for every thread)",
                              s.span, t)
            st = blk.named.setdefault(s.bar_id, [0, 0, s.count, set()])
            if st[0] and st[2] != s.count:
                raise blk.err(E.NAMED_COLLISION, f"{what} {s.bar_id}, {s.count} while a phase "
                              f"of barrier {s.bar_id} with count {st[2]} is in progress "
                              f"({st[0]} threads arrived): two uses share one id",
                              s.span, t)
            if t.tid in st[3]:
                raise blk.err(E.NAMED_MISMATCH, f"thread arrives twice in one phase of "
                              f"barrier {s.bar_id} (count {st[2]}, {st[0]} arrivals): more "
                              "threads arrive than it counts, or an arrive ran a phase "
                              "ahead", s.span, t)
            st[2] = s.count
            st[0] += 1
            st[3].add(t.tid)
            gen = st[1]
            if st[0] == st[2]:
                st[0], st[1], st[3] = 0, st[1] + 1, set()
                return None
            if s.arrive:
                return None
            return _Blocker(s, rname, ("named", s.bar_id, gen), lambda: st[1] != gen,
                            lambda: f"wait at bar_sync {s.bar_id} (line {s.span.line}; "
                            f"{st[0]} of {st[2]} threads arrived)")

        return _EFFECT, s, named

    def s_Wait(self, s: ir.Wait, role):
        blk, name, rname = self.b, s.barrier.name, role.name if role else "block"
        index, parity = self.bar_index(s.barrier), self.expr(s.parity)

        def wait(t: _Thread) -> _Blocker | None:
            i, p = index(t), parity(t)
            st = blk.bars[name][i]
            if not st.initialized:
                raise blk.err(E.UNINIT, f"wait on mbarrier {blk.label(name, i)} before init",
                              s.span, t, barriers=blk.barrier_states())
            try:
                if st.test_wait_parity(p):
                    return None
            except MbarrierError as exc:
                raise blk.model_err(exc, blk.label(name, i), s.span, t) from None
            insts = blk.bars[name]
            return _Blocker(s, rname, ("wait", name, i, p), lambda: insts[i].parity != p,
                            lambda: f"wait {blk.label(name, i)} parity {p} "
                            f"[{blk.bar_state_text(name, i)}]")

        return _EFFECT, s, wait

    def s_Arrive(self, s: ir.Arrive, role):
        blk, name = self.b, s.barrier.name
        index = self.bar_index(s.barrier)
        tx = self.expr(s.tx_bytes) if s.tx_bytes is not None else None
        lo = role.threads.lo if role is not None else 0
        hi = role.threads.hi if role is not None else blk.nthreads
        if role is not None and role.elect_one:
            hi = lo + 1
        mode = s.mode

        def arrive(t: _Thread) -> None:
            t.unfenced.clear()
            i = index(t)
            if tx is None:
                blk.bar_update(name, i, lambda st: st.arrive(1)[0], s.span, t)
            else:
                n = tx(t)
                blk.bar_update(name, i, lambda st: st.arrive_expect_tx(n)[0], s.span, t)

        if mode is ir.ArriveMode.EACH:
            return _EFFECT, s, arrive
        if mode is ir.ArriveMode.ONE:
            def arrive_one(t: _Thread):
                if t.tid == lo:
                    yield s
                    arrive(t)

            return _COMPOUND, s, arrive_one

        # `one per warp` is elect.sync + arrive: the lanes of each warp (of the role) first
        # converge -- none goes on before all reached the statement -- then the lowest lane
        # arrives. The convergence is what orders the other lanes' earlier accesses before
        # the arrival.
        gates: dict[int, list[int]] = {}  # warp -> [lanes arrived, generation]
        rname = role.name if role is not None else "block"

        def converge(t: _Thread) -> _Blocker | None:
            t.unfenced.clear()
            w = t.warp
            size = min(hi, 32 * w + 32) - max(lo, 32 * w)
            gate = gates.setdefault(w, [0, 0])
            gate[0] += 1
            gen = gate[1]
            if gate[0] == size:
                gate[0], gate[1] = 0, gen + 1
                return None
            return _Blocker(s, rname, ("gate", id(gates), w, gen), lambda: gate[1] != gen,
                            lambda: f"converge at 'arrive {name}, one per warp' (line "
                            f"{s.span.line}; {gate[0]} of {size} lanes of warp {w} there)")

        def arrive_per_warp(t: _Thread):
            yield s
            blocker = converge(t)
            if blocker is not None:
                yield blocker
            if t.tid == max(lo, 32 * t.warp):
                yield s
                arrive(t)

        return _COMPOUND, s, arrive_per_warp

    def s_ExpectTx(self, s: ir.ExpectTx, role):
        blk, name = self.b, s.barrier.name
        index, nbytes = self.bar_index(s.barrier), self.expr(s.nbytes)

        def expect(t: _Thread) -> None:
            i, n = index(t), nbytes(t)
            blk.bar_update(name, i, lambda st: st.expect_tx(n), s.span, t)

        return _EFFECT, s, expect

    # -- the copy engine --------------------------------------------------------------------

    def tma_common(self, s: ir.TmaLoad | ir.TmaStore, sl: ir.BufferSlice):
        """Closure computing, for one issuing thread, the copy's shared slots and global
        positions (a _Copy without kind-specific fields)."""
        blk, run = self.b, self.run
        tm = self.k.tensormap(s.tensormap)
        g = run.globals[tm.tensor]
        pl: Placement = run.plan.placements[sl.buffer]
        eb = pl.elem_bytes
        prefix = [self.expr(p) for p in sl.prefix]
        coords = [self.expr(c) for c in s.coords]
        rank_buf = len(pl.buffer.shape)
        box_grid = np.indices(tm.box).reshape(len(tm.box), -1).astype(np.int64)
        gshape = np.array(g.shape, dtype=np.int64).reshape(-1, 1)
        gstrides = np.array(g.strides, dtype=np.int64).reshape(-1, 1)
        fill = NAN_BITS.get(g.tensor.dtype, 0) if tm.oob_fill == "nan" else 0
        kind = "load" if isinstance(s, ir.TmaLoad) else "store"

        def make(t: _Thread) -> _Copy:
            run.check_tensormap(tm, s.span)
            pre = tuple(f(t) for f in prefix)
            for p, d in zip(pre, pl.buffer.shape, strict=False):
                if not 0 <= p < d:
                    raise blk.err(E.SHARED_OOB, f"slice {sl.buffer}{list(pre)} is outside shape "
                                  f"{list(pl.buffer.shape)}", sl.span, t)
            base = pl.address(pre + (0,) * (rank_buf - len(pre)))
            if base % tma_rules.SMEM_ALIGNMENT:
                raise blk.err("TS510", f"TMA shared address {base} of {sl.buffer}{list(pre)} "
                              f"is not {tma_rules.SMEM_ALIGNMENT}-byte aligned", sl.span, t)
            addrs = base + run.box_offsets(tm, eb, base)
            if addrs.min() < pl.base or addrs.max() + eb > pl.base + pl.nbytes:
                raise blk.err(E.SHARED_OOB, f"TMA box at {sl.buffer}{list(pre)} reaches outside "
                              f"the buffer (bytes {pl.base}..{pl.base + pl.nbytes - 1})",
                              sl.span, t)
            origin = np.array([f(t) for f in coords], dtype=np.int64).reshape(-1, 1)
            gidx = origin + box_grid
            mask = np.all((gidx >= 0) & (gidx < gshape), axis=0)
            c = _Copy(kind, s, t.tid)
            c.g, c.elem_bytes, c.buffer, c.fill = g, eb, sl.buffer, fill
            c.addrs, c.slots = addrs, addrs // eb
            c.flat, c.mask = np.where(mask, (gidx * gstrides).sum(axis=0), 0), mask
            return c

        return make

    def s_TmaLoad(self, s: ir.TmaLoad, role):
        blk, name = self.b, s.barrier.name
        make, index = self.tma_common(s, s.dst), self.bar_index(s.barrier)

        def tma_load(t: _Thread) -> None:
            c = make(t)
            i = index(t)
            if not blk.bars[name][i].initialized:
                raise blk.err(E.UNINIT, f"tma_load signals mbarrier {blk.label(name, i)} "
                              "before init", s.span, t, barriers=blk.barrier_states())
            if not blk.fenced[name][i]:
                raise blk.err(E.UNFENCED_INIT, f"tma_load signals mbarrier "
                              f"{blk.label(name, i)} whose init (thread "
                              f"{blk.init_by[name][i]}) was not followed by "
                              "'fence mbarrier_init'", s.span, t)
            c.bar, c.nbytes = (name, i), s.nbytes
            blk.copies.append(c)

        return _EFFECT, s, tma_load

    def s_TmaStore(self, s: ir.TmaStore, role):
        blk, make = self.b, self.tma_common(s, s.src)

        def tma_store(t: _Thread) -> None:
            c = make(t)
            t.open_group.append(c)
            blk.copies.append(c)

        return _EFFECT, s, tma_store

    def s_CommitGroup(self, s: ir.CommitGroup, role):
        def commit(t: _Thread) -> None:
            t.groups.append(t.open_group)
            t.open_group = []

        return _LOCAL, s, commit

    def s_WaitGroup(self, s: ir.WaitGroup, role):
        """PTX `cp.async.bulk.wait_group[.read] N`: every committed group except the N most
        recent must be complete (read-complete for `.read`). Copies may finish out of order,
        so this is stricter than "at most N groups incomplete"."""
        limit, read_only = s.pending, s.read
        rname = role.name if role else "block"

        def waiting(t: _Thread) -> int:
            while t.groups and all(c.write_done for c in t.groups[0]):
                t.groups.pop(0)  # only a fully finished *oldest* group may be forgotten
            older = t.groups[:len(t.groups) - limit] if limit else t.groups
            if read_only:
                return sum(1 for g in older if not all(c.read_done for c in g))
            return sum(1 for g in older if not all(c.write_done for c in g))

        def wait_group(t: _Thread) -> _Blocker | None:
            if waiting(t) == 0:
                return None
            return _Blocker(s, rname, ("group", t.tid), lambda: waiting(t) == 0,
                            lambda: f"wait_group {limit}{' read' if read_only else ''} "
                            f"({waiting(t)} older committed groups not complete)")

        return _EFFECT, s, wait_group
