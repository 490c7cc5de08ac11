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

import networkx as nx
import numpy as np

from tilesafe.frontend import ir
from tilesafe.frontend.fragments import WARPGROUP
from tilesafe.frontend.ir import describe_threads
from tilesafe.frontend.span import Span
from tilesafe.frontend.walk import loads, own_exprs, statements, subexprs
from tilesafe.semantics.expr import evaluate
from tilesafe.semantics.temporal.instrs import (
    Access,
    AccessNode,
    Arrive,
    Branch,
    Commit,
    End,
    Enter,
    ExpectTx,
    FenceInit,
    FenceProxy,
    Fn,
    FragAccess,
    Init,
    InnerLoop,
    Instr,
    Jump,
    Lets,
    LoopCtx,
    MmaTileTerm,
    NamedArrive,
    NamedWait,
    Next,
    Sync,
    TmaLoad,
    TmaStore,
    Wait,
    WaitGroup,
    Wgmma,
    WgmmaCommit,
    WgmmaFence,
    WgmmaWait,
)

# The tensor-core statements that are events of their class: an MMA (its warpgroup meets
# there and it reads shared memory until a covering wait), the async-group operations, and
# wgmma_fence (it orders the class's register accesses before its MMAs).
TENSOR_SYNC = (ir.Wgmma, ir.WgmmaFence, ir.WgmmaCommit, ir.WgmmaWait)
SYNC_STMTS = (ir.Init, ir.Fence, ir.Sync, ir.Wait, ir.Arrive, ir.ExpectTx, ir.TmaLoad,
              ir.TmaStore, ir.CommitGroup, ir.WaitGroup, ir.NamedBar) + TENSOR_SYNC


class Unsupported(Exception):
    """A construct the temporal model cannot represent faithfully (verdicts become UNKNOWN)."""

    def __init__(self, message: str, span: Span | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.span = span


# ---- expressions ------------------------------------------------------------------------------


def free_vars(e: ir.Expr, lets: Lets) -> frozenset[str]:
    """What a term depends on: "thread", "block", "size:N", "loop:<uid>", "data"."""
    out: set[str] = set()
    _free(e, lets, out)
    return frozenset(out)


def _free(e: ir.Expr, lets: Lets, out: set[str]) -> None:
    if isinstance(e, (ir.IntConst, ir.FloatConst)):
        return
    if isinstance(e, ir.SizeVar):
        out.add("size:" + e.name)
    elif isinstance(e, ir.Builtin):
        out.add("thread" if e.kind in (ir.BuiltinKind.THREAD, ir.BuiltinKind.LANE,
                                       ir.BuiltinKind.WARP_ID) else "block")
    elif isinstance(e, ir.LoopVar):
        out.add(f"loop:{e.uid}")
    elif isinstance(e, ir.LocalRef):
        if e.mutable or e.uid not in lets.table:
            out.add("data")
        else:
            _free(lets.table[e.uid], lets, out)
    elif isinstance(e, ir.Load):
        out.add("data")
    elif isinstance(e, ir.BinOp):
        _free(e.lhs, lets, out)
        _free(e.rhs, lets, out)
    elif isinstance(e, ir.UnOp):
        _free(e.operand, lets, out)
    elif isinstance(e, ir.Call):
        if e.func in ("f32", "i32"):
            out.add("data")
        for a in e.args:
            _free(a, lets, out)
    else:
        out.add("data")


def compile_expr(e: ir.Expr, lets: Lets) -> Fn:
    """A closure over an environment (keys: "thread", "block.x", size names, "L<uid>").

    Operators mean what semantics/expr/evaluate.py says; they work on Python ints and,
    elementwise, on numpy integer arrays, so footprints can be evaluated for many threads at
    once. Immutable `let`s are substituted; memory, floats and `var`s raise Unsupported.
    """

    def leaf(x: ir.Expr) -> Fn:
        if isinstance(x, ir.SizeVar):
            name = x.name
            return lambda env: env[name]
        if isinstance(x, ir.Builtin):
            if x.kind is ir.BuiltinKind.THREAD:
                return lambda env: env["thread"]
            if x.kind is ir.BuiltinKind.LANE:
                return lambda env: env["thread"] % 32
            if x.kind is ir.BuiltinKind.WARP_ID:
                return lambda env: env["thread"] // 32
            key = x.kind.value
            return lambda env: env[key]
        if isinstance(x, ir.LoopVar):
            key = f"L{x.uid}"
            return lambda env: env[key]
        if isinstance(x, ir.LocalRef) and not x.mutable and x.uid in lets.table:
            return compile_expr(lets.table[x.uid], lets)
        raise Unsupported(f"expression of kind {type(x).__name__} has no integer meaning "
                          "here", x.span)

    for x in subexprs(e):
        if x.type is ir.ScalarType.FLOAT or isinstance(x, ir.Call) and x.func in ("f32", "i32"):
            raise Unsupported(f"expression of kind {type(x).__name__} has no integer meaning "
                              "here", x.span)
    return evaluate.compile_expr(e, leaf)


def expr_key(e: Any, lets: Lets) -> Any:
    """A term's structure with `let`s inlined and positions dropped: equal keys, equal
    values in equal environments."""
    if isinstance(e, ir.LocalRef) and not e.mutable and e.uid in lets.table:
        return expr_key(lets.table[e.uid], lets)
    if isinstance(e, ir.Expr):
        return (type(e).__name__,) + tuple(expr_key(getattr(e, f), lets)
                                           for f in e.__dataclass_fields__
                                           if f not in ("span", "type"))
    if isinstance(e, tuple):
        return tuple(expr_key(x, lets) for x in e)
    return e


def conjuncts(e: ir.Expr) -> list[ir.Expr]:
    if isinstance(e, ir.BinOp) and e.op == "&&":
        return conjuncts(e.lhs) + conjuncts(e.rhs)
    return [e]


def conjoin(parts: list[ir.Expr], span: Span) -> ir.Expr | None:
    if not parts:
        return None
    out = parts[0]
    for p in parts[1:]:
        out = ir.BinOp(span, ir.ScalarType.BOOL, "&&", out, p)
    return out


# ---- statements -------------------------------------------------------------------------------


def has_sync(stmts: tuple[ir.Stmt, ...]) -> bool:
    return any(isinstance(s, SYNC_STMTS) for s in statements(stmts))


def shared_loads(e: ir.Expr) -> Iterator[ir.Load]:
    return (ld for ld in loads(e) if ld.space is ir.Space.SHARED)


def frag_uses(stmts: tuple[ir.Stmt, ...]
              ) -> tuple[frozenset[str], frozenset[str], Span | None]:
    """The fragments whose registers the statements read (`acc[r]`) and write
    (`acc[r] = v`), nested statements included, and where the first such access is."""
    reads: set[str] = set()
    writes: set[str] = set()
    first: Span | None = None
    for s in statements(stmts):
        for e in own_exprs(s):
            for x in subexprs(e):
                if isinstance(x, ir.FragLoad):
                    reads.add(x.fragment)
                    first = first or x.span
        if isinstance(s, ir.FragStore):
            writes.add(s.fragment)
            first = first or s.span
    return frozenset(reads), frozenset(writes), first


def has_frag(stmts: tuple[ir.Stmt, ...]) -> bool:
    reads, writes, _ = frag_uses(stmts)
    return bool(reads or writes)


def _frag_paths(stmts: tuple[ir.Stmt, ...], lets: Lets,
                guards: list[tuple[Fn, Fn]]) -> bool:
    """Do the statements reach every fragment use they contain unconditionally? Loops on
    the way are added to `guards` (their bounds as functions of the environment of the
    instruction: a bound that reads a loop variable of the statement itself cannot be
    evaluated there and makes the use uncertain); a condition makes it uncertain."""
    certain = True
    for s in stmts:
        if isinstance(s, ir.Let):
            lets = lets.bind(s.uid, s.value)
        if not has_frag((s,)):
            continue
        if isinstance(s, ir.If):
            certain = False
        elif isinstance(s, ir.For):
            inner = {f"loop:{x.var.uid}" for x in statements((s,)) if isinstance(x, ir.For)}
            fv = free_vars(s.lo, lets) | free_vars(s.hi, lets)
            if fv & ({"thread", "data"} | inner):
                certain = False
            else:
                guards.append((compile_expr(s.lo, lets), compile_expr(s.hi, lets)))
            certain = _frag_paths(s.body, lets, guards) and certain
        elif isinstance(s, ir.Role):
            certain = _frag_paths(s.body, lets, guards) and certain
    return certain


def _mma_chain(s: ir.For, lets: Lets) -> tuple[list[tuple[ir.For, Lets]], ir.Wgmma, Lets] | None:
    """A nest of loops around one wgmma and nothing else but `let`s (the k-steps of one
    stage): (the loops with the lets in scope at each, the wgmma, the lets at it)."""
    loops = [(s, lets)]
    body = s.body
    while True:
        inner_lets = loops[-1][1]
        rest = []
        for x in body:
            if isinstance(x, ir.Let):
                if has_shared((x,)) or has_frag((x,)):
                    return None
                inner_lets = inner_lets.bind(x.uid, x.value)
            else:
                rest.append(x)
        if len(rest) != 1:
            return None
        (x,) = rest
        if isinstance(x, ir.Wgmma):
            return loops, x, inner_lets
        if not isinstance(x, ir.For):
            return None
        loops.append((x, inner_lets))
        body = x.body


def has_shared(stmts: tuple[ir.Stmt, ...]) -> bool:
    for s in statements(stmts):
        if isinstance(s, ir.Store) and s.space is ir.Space.SHARED:
            return True
        if any(True for e in own_exprs(s) for _ in shared_loads(e)):
            return True
    return False


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
        return name if self.kernel.barrier(name).length is None else f"{name}[{idx}]"


def build_model(kernel: ir.Kernel, ownership: bool) -> Model:
    """The agents of one block. Raises Unsupported for constructs outside the model."""
    classes = thread_classes(kernel)
    all_lets = Lets({s.uid: s.value for s in statements(kernel.body) if isinstance(s, ir.Let)})
    agents = []
    sym: list[SymLoop] = []
    for cls in classes:
        comp = _Compiler(kernel, cls, ownership, classes)
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
    return Model(kernel, classes, tuple(agents), instances, ownership, tuple(sym), all_lets)


class _Compiler:
    def __init__(self, kernel: ir.Kernel, cls: ThreadClass, ownership: bool,
                 classes: tuple[ThreadClass, ...]) -> None:
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

    # -- synchronisation ---------------------------------------------------------------------

    def bar_index(self, ref: ir.BarrierRef, lets: Lets) -> tuple[Fn | None, tuple[ir.Expr, ...]]:
        if ref.index is None:
            return None, ()
        self.require_uniform(ref.index, lets, "a barrier index")
        return compile_expr(ref.index, lets), (ref.index,)

    def require_uniform(self, e: ir.Expr, lets: Lets, what: str) -> None:
        """Synchronising operands must be the same for every thread of the class."""
        fv = free_vars(e, lets)
        if "data" in fv or "block" in fv:
            raise Unsupported(f"{what} must not depend on memory or the block index", e.span)
        if "thread" in fv:
            vals = np.asarray(compile_expr(e, lets)({"thread": np.array(self.cls.threads)}))
            if fv != {"thread"} or (vals != vals.flat[0]).any():
                raise Unsupported(f"{what} differs between the threads of class "
                                  f"{self.cls.name}", e.span)

    def sync_stmt(self, s: ir.Stmt, ctx: tuple[LoopCtx, ...], lets: Lets,
                  role: ir.Role | None) -> None:
        n = self.cls.size
        if isinstance(s, ir.Init):
            idx, ex = self.bar_index(s.barrier, lets)
            self.emit(Init(s, ctx, bar=s.barrier.name, idx=idx, count=n,
                            sync_exprs=ex, lets=lets))
        elif isinstance(s, ir.Fence):
            fence = FenceInit if s.kind is ir.FenceKind.MBARRIER_INIT else FenceProxy
            self.emit(fence(s, ctx, lets=lets))
        elif isinstance(s, ir.Sync):
            self.emit(Sync(s, ctx, lets=lets))
        elif isinstance(s, ir.Wait):
            idx, ex = self.bar_index(s.barrier, lets)
            self.require_uniform(s.parity, lets, "a wait parity")
            self.emit(Wait(s, ctx, bar=s.barrier.name, idx=idx,
                            parity=compile_expr(s.parity, lets), sync_exprs=ex + (s.parity,),
                            lets=lets))
        elif isinstance(s, ir.Arrive):
            idx, ex = self.bar_index(s.barrier, lets)
            tx = None
            if s.tx_bytes is not None:
                self.require_uniform(s.tx_bytes, lets, "an expect_tx byte count")
                tx = compile_expr(s.tx_bytes, lets)
                ex = ex + (s.tx_bytes,)
            count, group = self.arrivals(s, role)
            self.emit(Arrive(s, ctx, bar=s.barrier.name, idx=idx, count=count, tx=tx,
                            per_warp=s.mode is ir.ArriveMode.PER_WARP, group=group,
                            sync_exprs=ex, lets=lets))
        elif isinstance(s, ir.ExpectTx):
            idx, ex = self.bar_index(s.barrier, lets)
            self.require_uniform(s.nbytes, lets, "an expect_tx byte count")
            self.emit(ExpectTx(s, ctx, bar=s.barrier.name, idx=idx, count=n,
                            tx=compile_expr(s.nbytes, lets), sync_exprs=ex + (s.nbytes,),
                            lets=lets))
        elif isinstance(s, ir.TmaLoad):
            idx, ex = self.bar_index(s.barrier, lets)
            prefix, pex = self.prefix(s.dst, lets)
            self.emit(TmaLoad(s, ctx, bar=s.barrier.name, idx=idx, count=n,
                            nbytes=s.nbytes, buffer=s.dst.buffer, prefix=prefix,
                            sync_exprs=ex + pex, lets=lets))
        elif isinstance(s, ir.TmaStore):
            prefix, pex = self.prefix(s.src, lets)
            self.emit(TmaStore(s, ctx, count=n, nbytes=s.nbytes, buffer=s.src.buffer,
                            prefix=prefix, sync_exprs=pex, lets=lets))
        elif isinstance(s, ir.CommitGroup):
            self.emit(Commit(s, ctx, lets=lets))
        elif isinstance(s, ir.WaitGroup):
            self.emit(WaitGroup(s, ctx, pending=s.pending, lets=lets))
        elif isinstance(s, ir.Wgmma):
            self.wgmma(s, s, [], ctx, lets, role)
        elif isinstance(s, ir.WgmmaFence):
            self.emit(WgmmaFence(s, ctx, lets=lets))
        elif isinstance(s, ir.WgmmaCommit):
            self.emit(WgmmaCommit(s, ctx, lets=lets))
        elif isinstance(s, ir.WgmmaWait):
            self.emit(WgmmaWait(s, ctx, pending=s.pending, lets=lets))
        elif isinstance(s, ir.NamedBar):
            # bar_sync = arrive, then wait until the phase it arrived in completes
            # (semantics/temporal/explore/ops/named.py); bar_arrive = the arrive alone.
            self.emit(NamedArrive(s, ctx, count=n, named=s.bar_id, ncount=s.count,
                            lets=lets))
            if not s.arrive:
                self.emit(NamedWait(s, ctx, count=n, named=s.bar_id, ncount=s.count,
                                lets=lets))

    def wgmma(self, w: ir.Wgmma, at: ir.Stmt, loops: list[tuple[ir.For, Lets]],
              ctx: tuple[LoopCtx, ...], lets: Lets, role: ir.Role | None) -> None:
        """One instruction for the wgmma `w` (and the loops `loops` around it, collapsed:
        `at` is then the outermost loop). Tile origins may differ between the warpgroups of
        a class (they are evaluated for every thread); within a warpgroup they are one
        (TS531, checker mma)."""
        inner = []
        exprs: list[ir.Expr] = []
        for lp, llets in loops:
            for bound in (lp.lo, lp.hi):
                if free_vars(bound, llets) & {"thread", "block", "data"}:
                    raise Unsupported("a loop of wgmmas must have bounds uniform over the "
                                      "block (no thread, block index or memory)", bound.span)
                exprs.append(bound)
            inner.append(InnerLoop(lp.var.uid, compile_expr(lp.lo, llets),
                                   compile_expr(lp.hi, llets), lp.step))
        tiles = []
        for t in (w.a, w.b):
            starts = []
            for i in t.index:
                if free_vars(i.start, lets) & {"block", "data"}:
                    raise Unsupported("a wgmma tile origin must not depend on memory or the "
                                      "block index", i.start.span)
                starts.append(compile_expr(i.start, lets))
                exprs.append(i.start)
            tiles.append(MmaTileTerm(t.buffer, tuple(starts),
                                     tuple(1 if i.extent is None else i.extent
                                           for i in t.index)))
        self.emit(Wgmma(at, ctx, fragment=w.acc, tiles=tuple(tiles), inner=tuple(inner),
                        group=self.mma_group(role), where=w.span, sync_exprs=tuple(exprs),
                        lets=lets))

    def mma_group(self, role: ir.Role | None) -> tuple[int, ...]:
        """The classes whose threads share a warpgroup (of the role) with this class,
        transitively: the 128 threads of a warpgroup issue its MMA together."""
        lo = role.threads.lo if role is not None else 0
        hi = role.threads.hi if role is not None else self.k.block
        if role is not None and role.elect_one:
            hi = lo + 1

        def groups_of(c: ThreadClass) -> set[int]:
            return {t // WARPGROUP for t in c.threads if lo <= t < hi}

        group = {self.cls.index}
        frontier = groups_of(self.cls)
        seen: set[int] = set()
        while frontier:
            w = frontier.pop()
            seen.add(w)
            for c in self.classes:
                wc = groups_of(c)
                if w in wc and c.index not in group:
                    group.add(c.index)
                    frontier |= wc - seen
        return tuple(sorted(group))

    def prefix(self, sl: ir.BufferSlice, lets: Lets) -> tuple[tuple[Fn, ...], tuple[ir.Expr, ...]]:
        for p in sl.prefix:
            self.require_uniform(p, lets, "a TMA slice index")
        return tuple(compile_expr(p, lets) for p in sl.prefix), sl.prefix

    def arrivals(self, s: ir.Arrive, role: ir.Role | None) -> tuple[int, tuple[int, ...]]:
        """Arrivals this class makes, and (per warp) the classes whose lanes converge."""
        lo = role.threads.lo if role is not None else 0
        hi = role.threads.hi if role is not None else self.k.block
        if role is not None and role.elect_one:
            hi = lo + 1
        if s.mode is ir.ArriveMode.EACH:
            return self.cls.size, ()
        if s.mode is ir.ArriveMode.ONE:
            return (1 if lo in self.members else 0), ()
        warps = {t // 32 for t in self.cls.threads if lo <= t < hi}
        leaders = {max(lo, 32 * w) for w in warps}
        # Classes that share a warp with this one (transitively) converge together.
        group = {self.cls.index}
        frontier = set(warps)
        seen_w: set[int] = set()
        while frontier:
            w = frontier.pop()
            seen_w.add(w)
            for c in self.classes:
                if any(32 * w <= t < 32 * w + 32 and lo <= t < hi for t in c.threads):
                    if c.index not in group:
                        group.add(c.index)
                        frontier |= {t // 32 for t in c.threads if lo <= t < hi} - seen_w
        return len(leaders & self.members), tuple(sorted(group))


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


def happens_before(steps: tuple[TraceStep, ...]) -> nx.DiGraph:
    """Happens-before graph of one run: program order per agent, issue -> completion for
    every copy, phase completion -> the waits that observed it, and `sync` (a joint step,
    so program order through it already orders everything before it)."""
    g = nx.DiGraph()
    last: dict[str, int] = {}
    completed: dict[tuple[str, int], int] = {}
    contributed: dict[tuple[str, int], list[int]] = {}
    issued: dict[int, int] = {}
    phase_now: dict[str, int] = {}
    for st in steps:
        g.add_node(st.index, agents=st.agents, kind=st.kind, line=st.line, detail=st.detail)
        for a in st.agents:
            if a in last:
                g.add_edge(last[a], st.index, why="program order")
            last[a] = st.index
        if st.kind in ("tma_load", "tma_store") and st.copy_id >= 0:
            issued[st.copy_id] = st.index
        if st.kind.startswith("copy_") and st.copy_id in issued:
            g.add_edge(issued[st.copy_id], st.index, why="issue")
        if st.inst and st.kind in ("arrive", "expect_tx", "copy_load"):
            n = phase_now.get(st.inst, 0)
            contributed.setdefault((st.inst, n), []).append(st.index)
            if st.completes >= 0:
                completed[(st.inst, st.completes)] = st.index
                for src in contributed.get((st.inst, st.completes), []):
                    if src != st.index:
                        g.add_edge(src, st.index, why="phase")
                phase_now[st.inst] = st.completes + 1
        if st.kind == "wait" and st.observes >= 0:
            src = completed.get((st.inst, st.observes))
            if src is not None:
                g.add_edge(src, st.index, why=f"{st.inst} phase {st.observes}")
    return g


def ordered(g: nx.DiGraph, a: int, b: int) -> bool:
    """True when one of two steps happens before the other in the run's graph."""
    return nx.has_path(g, a, b) or nx.has_path(g, b, a)


def reads_after_writes(steps: tuple[TraceStep, ...], g: nx.DiGraph) -> tuple[int, list[str]]:
    """Every read of a region must happen after the last write of it before it in the run
    (else the run read racy data). Returns (ordered pairs, descriptions of unordered ones)."""
    last_write: dict[str, TraceStep] = {}
    good, bad = 0, []
    for st in steps:
        for region in st.reads:
            w = last_write.get(region)
            if w is None:
                continue
            if nx.has_path(g, w.index, st.index):
                good += 1
            else:
                bad.append(f"step {st.index + 1} reads {region} written at step {w.index + 1} "
                           "with no happens-before path")
        for region in st.writes:
            last_write[region] = st
    return good, bad
