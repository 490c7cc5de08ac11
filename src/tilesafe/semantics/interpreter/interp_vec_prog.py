"""The kernel body as a flat program of numbered nodes, for the lockstep interpreter.

Why: the scalar interpreter keeps one Python generator per thread, so a thread's position is
hidden in its generator. The vector engine needs positions it can compare: a thread's state
is a program counter into this list (plus its registers), threads at the same counter form
a group that executes the node together, and threads that diverged (an `if`, loops of
different trip counts) meet again simply by reaching the same counter.

The flattening keeps the scalar engine's step structure exactly
(semantics/interpreter/interp_compile.py, Compiler): a node is *visible* -- it is a scheduling step,
executed atomically when the scheduler picks it -- iff the scalar engine yields before that
statement: every store, every barrier/sync/TMA/fence/wait statement, a let/var/assignment whose
value reads shared memory or a global tensor the kernel writes, and an `if` whose condition does.
`arrive, one` is a test of the thread index in front of the arrive; `arrive, one per warp` is a
convergence step, then a leader test, then the arrive (two steps for the leader, as in the scalar
engine). Everything else (lets, loops, conditions on registers, role tests,
`commit_group`) is local code that runs between steps.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from tilesafe.frontend import ir
from tilesafe.frontend.walk import first_tensor_core, loads, own_exprs, statements, subexprs


class Kind(str, Enum):
    """What a node does. Local kinds run inside a step; visible kinds are steps."""

    LOCAL = "local"  # let / var / assignment on registers, commit_group
    BRANCH = "branch"  # `if` on registers: `next` = then, `alt` = else
    ROLE = "role"  # thread in the role's range (or its elected thread): `next` = body
    ELECT = "elect"  # thread == `lo` (arrive, one)
    LEADER = "leader"  # thread == max(lo, 32 * warp) (arrive, one per warp)
    FOR = "for"  # evaluate bounds, first iteration or exit (`alt`)
    NEXT = "next"  # loop back edge: step, then `next` = body or `alt` = exit
    JUMP = "jump"
    END = "end"
    EFFECT = "effect"  # a visible statement
    VIF = "vif"  # a visible `if`: the condition is evaluated in the step
    CONVERGE = "converge"  # the convergence step of `arrive, one per warp`


VISIBLE = frozenset({Kind.EFFECT, Kind.VIF, Kind.CONVERGE})


@dataclass(frozen=True)
class Node:
    """One program point. `role` is the enclosing role (for messages and arrive modes);
    `loop` numbers a FOR/NEXT pair (the register holding its end bound)."""

    kind: Kind
    stmt: ir.Stmt | None
    next: int
    alt: int = -1
    role: ir.Role | None = None
    lo: int = 0  # ELECT/LEADER/CONVERGE: the role's first thread
    hi: int = 0  # CONVERGE: one past the role's last thread
    loop: int = -1


@dataclass(frozen=True)
class Program:
    nodes: tuple[Node, ...]
    loops: int  # number of `for` statements (end-bound registers -1 .. -loops)


class _Lower:
    """Turns statements into nodes in program order (pre-order), patching jump targets."""

    def __init__(self, kernel: ir.Kernel, written: frozenset[str]) -> None:
        self.kernel = kernel
        self.written = written
        self.rows: list[dict] = []
        self.loops = 0

    def emit(self, kind: Kind, stmt: ir.Stmt | None, role: ir.Role | None, **kw) -> int:
        self.rows.append({"kind": kind, "stmt": stmt, "next": len(self.rows) + 1,
                          "role": role, **kw})
        return len(self.rows) - 1

    def visible(self, e: ir.Expr | None) -> bool:
        """The scalar compiler's rule (interp_exprs.ExprCompiler.visible)."""
        if e is None:
            return False
        return any(ld.space is ir.Space.SHARED or ld.tensor in self.written for ld in loads(e))

    def body(self, stmts: tuple[ir.Stmt, ...], role: ir.Role | None) -> None:
        for s in stmts:
            self.stmt(s, role)

    def stmt(self, s: ir.Stmt, role: ir.Role | None) -> None:
        if isinstance(s, (ir.Let, ir.VarDecl, ir.Assign)):
            self.emit(Kind.EFFECT if self.visible(s.value) else Kind.LOCAL, s, role)
        elif isinstance(s, ir.CommitGroup):
            self.emit(Kind.LOCAL, s, role)
        elif isinstance(s, ir.If):
            self._if(s, role)
        elif isinstance(s, ir.For):
            loop = self.loops
            self.loops += 1
            head = self.emit(Kind.FOR, s, role, loop=loop)
            self.body(s.body, role)
            back = self.emit(Kind.NEXT, s, role, loop=loop)
            self.rows[back]["next"] = head + 1
            self.rows[back]["alt"] = self.rows[head]["alt"] = len(self.rows)
        elif isinstance(s, ir.Role):
            test = self.emit(Kind.ROLE, s, role, lo=s.threads.lo, hi=s.threads.hi)
            self.body(s.body, s)
            self.rows[test]["alt"] = len(self.rows)
        elif isinstance(s, ir.Arrive) and s.mode is not ir.ArriveMode.EACH:
            self._arrive(s, role)
        else:
            self.emit(Kind.EFFECT, s, role)

    def _if(self, s: ir.If, role: ir.Role | None) -> None:
        test = self.emit(Kind.VIF if self.visible(s.cond) else Kind.BRANCH, s, role)
        self.body(s.then, role)
        jump = self.emit(Kind.JUMP, None, role)
        self.rows[test]["alt"] = len(self.rows)
        self.body(s.orelse, role)
        self.rows[jump]["next"] = len(self.rows)

    def _arrive(self, s: ir.Arrive, role: ir.Role | None) -> None:
        lo = role.threads.lo if role is not None else 0
        hi = role.threads.hi if role is not None else self.kernel.block
        if role is not None and role.elect_one:
            hi = lo + 1
        if s.mode is ir.ArriveMode.ONE:
            test = self.emit(Kind.ELECT, s, role, lo=lo)
        else:
            self.emit(Kind.CONVERGE, s, role, lo=lo, hi=hi)
            test = self.emit(Kind.LEADER, s, role, lo=lo)
        self.emit(Kind.EFFECT, s, role)
        self.rows[test]["alt"] = len(self.rows)

    def program(self) -> Program:
        self.body(self.kernel.body, None)
        self.emit(Kind.END, None, None)
        return Program(tuple(Node(**row) for row in self.rows), self.loops)


def lower(kernel: ir.Kernel, written: frozenset[str]) -> Program:
    """The flat program of `kernel`; `written`: the global tensors it writes."""
    return _Lower(kernel, written).program()


# What the vector engine executes; anything else (a construct newer than it, such as the
# tensor-core statements) is left to the scalar engine.
STATEMENTS = (ir.Let, ir.VarDecl, ir.Assign, ir.Store, ir.For, ir.If, ir.Role, ir.Init,
              ir.Fence, ir.Sync, ir.Wait, ir.Arrive, ir.ExpectTx, ir.TmaLoad, ir.TmaStore,
              ir.CommitGroup, ir.WaitGroup, ir.NamedBar)
EXPRESSIONS = (ir.IntConst, ir.FloatConst, ir.SizeVar, ir.Builtin, ir.LoopVar, ir.LocalRef,
               ir.BinOp, ir.UnOp, ir.Call, ir.Load)


def unsupported(kernel: ir.Kernel, written: frozenset[str]) -> str | None:
    """Why the vector engine cannot run `kernel` (None: it can): a statement or expression
    it does not know, or a loop bound that reads shared memory or a written tensor. Its
    steps execute a group's effects before the group's local code, which equals the scalar
    order only when local code reads nothing another thread may write (the scalar engine
    reads a loop bound between steps)."""
    tc = first_tensor_core(kernel)
    if tc is not None:
        return (f"the vector engine does not run tensor-core statements ({type(tc).__name__} "
                f"at {tc.span}): the scalar engine does")
    low = _Lower(kernel, written)
    for s in statements(kernel.body):
        if not isinstance(s, STATEMENTS):
            return f"the vector engine does not execute {type(s).__name__} (at {s.span})"
        for e in own_exprs(s):
            for x in subexprs(e):
                if not isinstance(x, EXPRESSIONS):
                    return (f"the vector engine does not evaluate {type(x).__name__} "
                            f"(at {x.span})")
        if isinstance(s, ir.For) and (low.visible(s.lo) or low.visible(s.hi)):
            return (f"the loop at {s.span} reads memory other threads write in its bounds "
                    "(read between steps)")
    return None
