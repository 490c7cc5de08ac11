"""The event model: one block of a kernel as concurrent agents that synchronise.

Why: the temporal checkers (barrier protocol, ownership) reason about the order of
synchronising events, not about values. This module turns the IR into that shape once, so
both checkers (and the happens-before graph) read the same model.

Agents. The threads of the block are partitioned into *classes*: two threads are in one class
when they take the same path through every condition that depends on the thread alone (role
membership, `elect one`, `if thread == 0`, `if lane < 16`, ...). The threads of a class run
the same statements, so a class is modelled as ONE sequential agent that performs each
statement for all of its threads at once (lockstep; see `docs/temporal.md` for when this is
exact). Cardinalities are therefore counted exactly by arithmetic on the thread list: an
`arrive` of a class of 128 threads is 128 arrivals, `one per warp` is the number of warp
leaders in the class, `one` is 1 when the class holds the lowest thread of its role.
The copy engine is a separate agent: every issued TMA copy completes at some later step.

Programs. Each agent gets a flat instruction list: synchronising events (init, fence, sync,
wait, arrive, expect_tx, tma_load, tma_store, commit, wait_group), shared-memory accesses
(ownership only; a loop without synchronisation collapses into one access whose footprint
is the union over its iterations), and control (loop entry/back-edge, uniform branches);
one record type per kind (semantics/temporal/instrs.py), given its meaning by the explorer's family
modules (semantics/temporal/explore/ops/).
Loops keep their trip counts symbolic: a bound is a function of the concrete sizes chosen
when a state space is explored, so `for k in 0 .. N / 64` is explored for as many trip
counts as the parametric argument (semantics/temporal/parametric.py) needs.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace
from typing import Any

from tilesafe.frontend import ir
from tilesafe.frontend.ir import describe_threads
from tilesafe.frontend.span import Span
from tilesafe.frontend.walk import own_exprs, statements
from tilesafe.semantics.temporal.cluster_view import CLUSTER_BARRIER, ClusterInfo
from tilesafe.semantics.temporal.event_sync import SyncCompiler
from tilesafe.semantics.temporal.event_terms import (
    SYNC_STMTS,
    Unsupported,
    _frag_paths,
    _mma_chain,
    compile_expr,
    conjoin,
    conjuncts,
    expr_key,
    frag_uses,
    free_vars,
    has_frag,
    has_shared,
    has_sync,
    shared_loads,
)
from tilesafe.semantics.temporal.instrs import (
    Access,
    AccessNode,
    Branch,
    End,
    Enter,
    Fn,
    FragAccess,
    Instr,
    Jump,
    Lets,
    LoopCtx,
    Next,
)

# ---- thread classes ---------------------------------------------------------------------------


@dataclass(frozen=True)
class ThreadClass:
    index: int
    name: str
    threads: tuple[int, ...]

    @property
    def size(self) -> int:
        return len(self.threads)

    def describe(self) -> str:
        return f"{self.name} ({describe_threads(self.threads)})"


def _thread_only(e: ir.Expr, lets: Lets) -> bool:
    fv = free_vars(e, lets)
    return bool(fv) and fv <= {"thread"}


def _split_cond(cond: ir.Expr, lets: Lets) -> tuple[list[ir.Expr], list[ir.Expr], list[ir.Expr]]:
    """Conjuncts that depend on the thread alone / not on the thread (uniform in a class) /
    on both or on data (neither decidable per class nor per iteration)."""
    thread, uniform, mixed = [], [], []
    for c in conjuncts(cond):
        fv = free_vars(c, lets)
        if "data" in fv:
            mixed.append(c)
        elif fv <= {"thread"} and fv:
            thread.append(c)
        elif "thread" not in fv:
            uniform.append(c)
        else:
            mixed.append(c)
    return thread, uniform, mixed


def _role_members(role: ir.Role) -> range:
    lo, hi = role.threads.lo, role.threads.hi
    return range(lo, lo + 1) if role.elect_one else range(lo, hi)


def thread_classes(kernel: ir.Kernel) -> tuple[ThreadClass, ...]:
    """Partition the block by the path each thread takes through thread-only conditions."""
    sigs: dict[tuple, list[int]] = {}
    for t in range(kernel.block):
        sig: list[tuple[int, bool]] = []
        _signature(kernel.body, t, Lets(), sig)
        sigs.setdefault(tuple(sig), []).append(t)
    groups = sorted(sigs.values(), key=lambda ts: ts[0])
    names: list[str] = []
    for ts in groups:
        roles = _roles_of(kernel.body, ts[0])
        base = "+".join(roles) if roles else "block"
        names.append(base)
    out = []
    for i, ts in enumerate(groups):
        name = names[i]
        if names.count(name) > 1:
            name = f"{name}[{describe_threads(ts).split(' ', 1)[1]}]"
        out.append(ThreadClass(i, name, tuple(ts)))
    return tuple(out)


def _roles_of(stmts: tuple[ir.Stmt, ...], t: int) -> list[str]:
    return [s.name for s in statements(stmts) if isinstance(s, ir.Role) and t in _role_members(s)]


def _signature(stmts: tuple[ir.Stmt, ...], t: int, lets: Lets, sig: list) -> Lets:
    for s in stmts:
        if isinstance(s, ir.Let):
            lets = lets.bind(s.uid, s.value)
        elif isinstance(s, ir.Role):
            member = t in _role_members(s)
            sig.append((id(s), member))
            if member:
                _signature(s.body, t, lets, sig)
        elif isinstance(s, ir.If):
            thread, _, _ = _split_cond(s.cond, lets)
            ok = all(bool(compile_expr(c, lets)({"thread": t})) for c in thread)
            if thread:
                sig.append((id(s), ok))
            if ok:
                _signature(s.then, t, lets, sig)
            _signature(s.orelse, t, lets, sig)
        elif isinstance(s, ir.For):
            _signature(s.body, t, lets, sig)
    return lets


# ---- instructions -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Agent:
    cls: ThreadClass
    code: tuple[Instr, ...]
    param_loop: tuple[int, int, int, ir.For] | None  # (enter pc, next pc, depth, stmt)

    @property
    def name(self) -> str:
        return self.cls.name


@dataclass(frozen=True)
class SymLoop:
    """A kept loop whose trip count depends on the sizes."""

    agent: int
    stmt: ir.For
    nested: bool  # inside another kept loop


@dataclass(frozen=True)
class Model:
    kernel: ir.Kernel
    classes: tuple[ThreadClass, ...]
    agents: tuple[Agent, ...]
    instances: tuple[tuple[str, int], ...]  # every barrier instance, flattened
    ownership: bool
    sym_loops: tuple[SymLoop, ...]
    lets: Lets  # every let of the kernel (uids are unique), for z3 encodings
    # Explore up to renamings of identical classes (semantics/temporal/symmetry.py): for proofs
    # only.
    symmetric: bool = False
    # Check the progress property of a stage projection in every state (semantics/temporal/ring.py).
    progress: bool = False
    # A cluster's view (semantics/temporal/cluster_view.py): how classes, barrier instances
    # and buffer copies map to CTAs; None for one block.
    cluster: ClusterInfo | None = None

    @property
    def cluster_ids(self) -> int:
        """Named-barrier ids from here on are a cluster view's own (CTA syncs, the cluster
        barrier)."""
        return CLUSTER_BARRIER

    def cta_of_class(self, a: int) -> int:
        assert self.cluster is not None
        return self.cluster.cta_of_thread(self.classes[a].threads[0])

    def cta_of_inst(self, inst: int) -> int:
        assert self.cluster is not None
        name, idx = self.instances[inst]
        return idx // self.cluster.instances(name)

    def inst_id(self, name: str, idx: int) -> int:
        return self._inst[(name, idx)]

    @property
    def _inst(self) -> dict[tuple[str, int], int]:
        cache = self.__dict__.get("_inst_cache")
        if cache is None:
            cache = {key: i for i, key in enumerate(self.instances)}
            object.__setattr__(self, "_inst_cache", cache)
        return cache

    def label(self, inst: int) -> str:
        name, idx = self.instances[inst]
        if self.cluster is not None:  # `full[1]@cta0`: stage 1 of CTA 0's barrier array
            n = self.cluster.instances(name)
            local = self.cluster.original_length(name)
            stage = name if local is None else f"{name}[{idx % n}]"
            return f"{stage}@cta{idx // n}"
        return name if self.kernel.barrier(name).length is None else f"{name}[{idx}]"


def build_model(kernel: ir.Kernel, ownership: bool,
                cluster: ClusterInfo | None = None) -> Model:
    """The agents of one block (a cluster's view with `cluster`). Raises Unsupported for
    constructs outside the model."""
    classes = thread_classes(kernel)
    all_lets = Lets({s.uid: s.value for s in statements(kernel.body) if isinstance(s, ir.Let)})
    agents = []
    sym: list[SymLoop] = []
    joint = cluster is not None and all(s.arrive and s.wait for s in statements(kernel.body)
                                         if isinstance(s, ir.ClusterBarrier))
    for cls in classes:
        comp = _Compiler(kernel, cls, ownership, classes, cluster, joint)
        comp.block(kernel.body, (), Lets(), None)
        comp.emit(End(None, ()))
        code = tuple(comp.code)
        param = None
        for enter_pc, next_pc, depth, stmt in comp.sym_loops:
            sym.append(SymLoop(len(agents), stmt, depth > 0))
            if param is None:
                param = (enter_pc, next_pc, depth, stmt)
        agents.append(Agent(cls, code, param))
    instances = tuple((b.name, i) for b in kernel.barriers for i in range(b.instances))
    return Model(kernel, classes, tuple(agents), instances, ownership, tuple(sym), all_lets,
                 cluster=cluster)


class _Compiler(SyncCompiler):
    """One class's program: control flow, accesses and fragment uses here, the
    synchronising statements in event_sync.SyncCompiler."""

    def __init__(self, kernel: ir.Kernel, cls: ThreadClass, ownership: bool,
                 classes: tuple[ThreadClass, ...], cluster: ClusterInfo | None = None,
                 joint_cluster: bool = False) -> None:
        self.cluster = cluster
        self.joint_cluster = joint_cluster
        self.k = kernel
        self.cls = cls
        self.t0 = cls.threads[0]
        self.members = set(cls.threads)
        self.ownership = ownership
        self.classes = classes
        self.code: list[Instr] = []
        self.sym_loops: list[tuple[int, int, int, ir.For]] = []

    def emit(self, ins: Instr) -> int:
        self.code.append(ins)
        return len(self.code) - 1

    def patch(self, pc: int, **changes: Any) -> None:
        old = self.code[pc]
        self.code[pc] = replace(old, **changes)

    def thread_true(self, conds: list[ir.Expr], lets: Lets) -> bool:
        env = {"thread": self.t0}
        return all(bool(compile_expr(c, lets)(env)) for c in conds)

    def relevant(self, stmts: tuple[ir.Stmt, ...]) -> bool:
        return has_sync(stmts) or has_frag(stmts) or (self.ownership and has_shared(stmts))

    # -- statements --------------------------------------------------------------------------

    def block(self, stmts: tuple[ir.Stmt, ...], ctx: tuple[LoopCtx, ...], lets: Lets,
              role: ir.Role | None) -> Lets:
        for s in stmts:
            lets = self.stmt(s, ctx, lets, role)
        return lets

    def stmt(self, s: ir.Stmt, ctx: tuple[LoopCtx, ...], lets: Lets,
             role: ir.Role | None) -> Lets:
        if isinstance(s, ir.Let):
            lets = lets.bind(s.uid, s.value)
            self.frag_access((s,), s, ctx, lets)
            self.plain_access(s, ctx, lets)
            return lets
        if isinstance(s, ir.Role):
            if self.t0 in _role_members(s):
                self.block(s.body, ctx, lets, s)
            return lets
        if isinstance(s, ir.For):
            self.loop(s, ctx, lets, role)
            return lets
        if isinstance(s, ir.If):
            self.cond(s, ctx, lets, role)
            return lets
        if isinstance(s, SYNC_STMTS):
            self.sync_stmt(s, ctx, lets, role)
            return lets
        self.frag_access((s,), s, ctx, lets)
        self.plain_access(s, ctx, lets)
        return lets

    def plain_access(self, s: ir.Stmt, ctx: tuple[LoopCtx, ...], lets: Lets) -> None:
        if not self.ownership:
            return
        self.access_instr((s,), s, ctx, lets)

    def frag_access(self, stmts: tuple[ir.Stmt, ...], s: ir.Stmt, ctx: tuple[LoopCtx, ...],
                    lets: Lets) -> None:
        """The statement's fragment register reads and writes, one instruction (a loop
        without synchronisation included): what the MMAs of its class still write."""
        reads, writes, first = frag_uses(stmts)
        if not (reads or writes):
            return
        guards: list[tuple[Fn, Fn]] = []
        certain = _frag_paths(stmts, lets, guards)
        self.emit(FragAccess(s, ctx, reads=tuple(sorted(reads)), writes=tuple(sorted(writes)),
                             certain=certain, guards=tuple(guards), where=first, lets=lets))

    def access_instr(self, stmts: tuple[ir.Stmt, ...], s: ir.Stmt, ctx: tuple[LoopCtx, ...],
                     lets: Lets) -> None:
        nodes = _access_nodes(stmts, lets, self.k)
        if nodes:
            self.emit(Access(s, ctx, access=nodes, lets=lets,
                            sync_exprs=tuple(_access_exprs(stmts, lets))))

    def loop(self, s: ir.For, ctx: tuple[LoopCtx, ...], lets: Lets, role: ir.Role | None) -> None:
        if not has_sync(s.body):
            self.frag_access((s,), s, ctx, lets)
            if self.ownership and has_shared(s.body):
                self.access_instr((s,), s, ctx, lets)
            return
        chain = _mma_chain(s, lets)
        if chain is not None:
            # The k-steps of one stage: one instruction, the MMAs of every iteration.
            self.wgmma(chain[1], s, chain[0], ctx, chain[2], role)
            return
        for bound in (s.lo, s.hi):
            fv = free_vars(bound, lets)
            if fv & {"thread", "block", "data"}:
                raise Unsupported("a loop that synchronises must have bounds uniform over "
                                  "the block (no thread, block index or memory)", s.span)
        lo, hi, step = compile_expr(s.lo, lets), compile_expr(s.hi, lets), s.step

        def trip(env: Mapping[str, Any]) -> int:
            return max(0, -((lo(env) - hi(env)) // step))

        symbolic = any(v.startswith("size:")
                       for v in free_vars(s.hi, lets) | free_vars(s.lo, lets))
        enter = self.emit(Enter(s, ctx, trip=trip, sync_exprs=(s.lo, s.hi),
                                lets=lets))
        inner = ctx + (LoopCtx(s.var.uid, lo, step, s),)
        body_pc = len(self.code)
        self.block(s.body, inner, lets, role)
        nxt = self.emit(Next(s, ctx, trip=trip, target=body_pc, lets=lets,
                              sync_exprs=(s.lo, s.hi)))
        self.patch(enter, target=nxt + 1)
        if symbolic:
            self.sym_loops.append((enter, nxt, len(ctx), s))

    def cond(self, s: ir.If, ctx: tuple[LoopCtx, ...], lets: Lets, role: ir.Role | None) -> None:
        thread, uniform, mixed = _split_cond(s.cond, lets)
        relevant_then, relevant_else = self.relevant(s.then), self.relevant(s.orelse)
        if not (relevant_then or relevant_else):
            self.frag_access((s,), s, ctx, lets)
            if self.ownership and any(True for _ in shared_loads(s.cond)):
                self.plain_access(s, ctx, lets)
            return
        if mixed:
            if has_sync(s.then) or has_sync(s.orelse):
                raise Unsupported("synchronisation under a condition that mixes the thread "
                                  "with loop variables, sizes or memory", s.span)
            self.frag_access((s,), s, ctx, lets)
            if self.ownership:
                self.access_instr((s,), s, ctx, lets)
            return
        self.plain_loads_of(s, ctx, lets)
        if not self.thread_true(thread, lets):
            self.block(s.orelse, ctx, lets, role)
            return
        ucond = conjoin(uniform, s.cond.span)
        if ucond is None:
            self.block(s.then, ctx, lets, role)
            return
        br = self.emit(Branch(s, ctx, cond=compile_expr(ucond, lets),
                             sync_exprs=(ucond,), lets=lets))
        self.block(s.then, ctx, lets, role)
        if s.orelse:
            jmp = self.emit(Jump(s, ctx))
            self.patch(br, target=len(self.code))
            self.block(s.orelse, ctx, lets, role)
            self.patch(jmp, target=len(self.code))
        else:
            self.patch(br, target=len(self.code))

    def plain_loads_of(self, s: ir.If, ctx: tuple[LoopCtx, ...], lets: Lets) -> None:
        if self.ownership and any(True for _ in shared_loads(s.cond)):
            nodes = _loads_nodes(s.cond, lets, self.k)
            exprs = tuple(i for ld in shared_loads(s.cond) for i in ld.indices)
            self.emit(Access(s, ctx, access=nodes, lets=lets, sync_exprs=exprs))

# ---- access footprints ------------------------------------------------------------------------


def _known(e: ir.Expr, lets: Lets) -> bool:
    """The term reads only the thread and loop variables (the same for every size and
    block)."""
    fv = free_vars(e, lets)
    return not (fv & {"data", "block"} or any(v.startswith("size:") for v in fv))


def _compiled(e: ir.Expr, lets: Lets) -> tuple[Fn | None, Fn | None]:
    """(plain, full) functions of a term: see AccessNode."""
    if "data" in free_vars(e, lets):
        return None, None
    try:
        full = compile_expr(e, lets)
    except Unsupported:
        return None, None
    return (full if _known(e, lets) else None), full


def _loads_nodes(e: ir.Expr, lets: Lets, kernel: ir.Kernel) -> tuple[AccessNode, ...]:
    out = []
    for ld in shared_loads(e):
        out.append(_acc_node(ld.tensor, False, ld.indices, lets, ld.span))
    return tuple(out)


def _acc_node(buffer: str, write: bool, indices: tuple[ir.Expr, ...], lets: Lets,
              span: Span | None = None) -> AccessNode:
    fns = [_compiled(i, lets) for i in indices]
    index = tuple(f for f, _ in fns) if all(f is not None for f, _ in fns) else None
    full = tuple(g for _, g in fns) if all(g is not None for _, g in fns) else None
    return AccessNode("acc", buffer=buffer, write=write, index=index, index_full=full,
                      span=span)


def _access_nodes(stmts: tuple[ir.Stmt, ...], lets: Lets, kernel: ir.Kernel
                  ) -> tuple[AccessNode, ...]:
    out: list[AccessNode] = []
    for s in stmts:
        if isinstance(s, ir.Let):
            out.extend(_loads_nodes(s.value, lets, kernel))
            lets = lets.bind(s.uid, s.value)
        elif isinstance(s, ir.Store):
            for e in s.indices + (s.value,):
                out.extend(_loads_nodes(e, lets, kernel))
            if s.space is ir.Space.SHARED:
                out.append(_acc_node(s.tensor, True, s.indices, lets, s.span))
        elif isinstance(s, (ir.VarDecl, ir.Assign)):
            out.extend(_loads_nodes(s.value, lets, kernel))
        elif isinstance(s, ir.For):
            inner = _access_nodes(s.body, lets, kernel)
            if not inner:
                continue
            lo, lo_full = _compiled(s.lo, lets)
            hi, hi_full = _compiled(s.hi, lets)
            uses = any(f"loop:{s.var.uid}" in free_vars(e, lets)
                       for e in _access_exprs(s.body, lets, known_only=False))
            out.append(AccessNode("loop", uid=s.var.uid, lo=lo, hi=hi, lo_full=lo_full,
                                  hi_full=hi_full, step=s.step, then=inner, uses_var=uses))
        elif isinstance(s, ir.If):
            out.extend(_loads_nodes(s.cond, lets, kernel))
            then = _access_nodes(s.then, lets, kernel)
            orelse = _access_nodes(s.orelse, lets, kernel)
            if not (then or orelse):
                continue
            cond, cond_full = _compiled(s.cond, lets)
            fv = free_vars(s.cond, lets)
            constant = not any(v == "data" or v.startswith("loop:") for v in fv)
            out.append(AccessNode("if", cond=cond, cond_full=cond_full,
                                  cond_key=expr_key(s.cond, lets) if constant else None,
                                  then=then, orelse=orelse))
        elif isinstance(s, ir.Role):
            out.extend(_access_nodes(s.body, lets, kernel))
    return tuple(out)


def _access_exprs(stmts: tuple[ir.Stmt, ...], lets: Lets,
                  known_only: bool = True) -> Iterator[ir.Expr]:
    """The terms a footprint depends on (with `known_only`, those it evaluates exactly)."""
    def keep(e: ir.Expr) -> bool:
        return not known_only or _known(e, lets)

    for s in stmts:
        if isinstance(s, ir.Let):
            lets = lets.bind(s.uid, s.value)
        for e in own_exprs(s):
            for ld in shared_loads(e):
                yield from (i for i in ld.indices if keep(i))
        if isinstance(s, ir.Store) and s.space is ir.Space.SHARED:
            yield from (i for i in s.indices if keep(i))
        if isinstance(s, ir.For):
            yield from (b for b in (s.lo, s.hi) if keep(b))
            yield from _access_exprs(s.body, lets, known_only)
        elif isinstance(s, ir.If):
            if keep(s.cond):
                yield s.cond
            yield from _access_exprs(s.then, lets, known_only)
            yield from _access_exprs(s.orelse, lets, known_only)
        elif isinstance(s, ir.Role):
            yield from _access_exprs(s.body, lets, known_only)


def slice_mask(buf: ir.SharedBuffer, prefix: tuple[int, ...]) -> int:
    """Bit mask of the elements of buf[prefix...] (row-major logical order)."""
    inner = 1
    for d in buf.shape[len(prefix):]:
        inner *= d
    start = 0
    for p, d in zip(prefix, buf.shape, strict=False):
        if not 0 <= p < d:
            return 0
        start = start * d + p
    start *= inner
    return ((1 << inner) - 1) << start


# ---- happens-before ---------------------------------------------------------------------------


@dataclass(frozen=True)
class TraceStep:
    """One step of an explored run: who moved, what it did, and what it synchronised with.

    `kind` is the instruction op (or "copy_load"/"copy_store" for the copy engine, "sync"
    for the joint `sync`); `inst` a barrier-instance label; `phase` the phase that a wait
    observed or an arrival/complete_tx completed (absolute, counted along the run)."""

    index: int
    agents: tuple[str, ...]
    kind: str
    line: int
    detail: str
    inst: str = ""
    completes: int = -1  # phase number this step completed on `inst`
    observes: int = -1  # phase number this wait observed
    copy_id: int = -1  # copy issued (tma_*) or completed (copy_*)
    reads: tuple[str, ...] = ()  # shared-memory regions read (ownership runs)
    writes: tuple[str, ...] = ()  # shared-memory regions written
