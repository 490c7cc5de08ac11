"""The specification's vocabulary: one `SpecEvent` per access or synchronisation statement
instance, one `SpecLoop` per `for`, the walk's context, and the leaves the specification
shares with the PTX side (`tid.x`, `param:s_N`, `n:F<uid>`).

Why separate: the specification (spec.py: the launch, expressions and addresses;
spec_walk.py: the statements) and the obligations that read it all speak these terms;
they live apart from both so neither imports the other for them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tilesafe.codegen.validate import terms as T
from tilesafe.codegen.validate.terms import Term
from tilesafe.frontend import ir
from tilesafe.frontend.span import Span

# The state space of an access to a peer CTA's shared memory (through `mapa`).
CLUSTER_SPACE = "shared::cluster"


@dataclass
class SpecEvent:
    kind: str
    node: object  # ir.Load or ir.Stmt
    span: Span
    cond: Term
    fors: tuple[ir.For, ...]
    order: tuple[int, int]
    what: str
    ops: dict[str, object] = field(default_factory=dict)
    inbounds: Term = T.TRUE
    role: ir.Role | None = None
    data: Term | None = None
    # the copies of unrolled loops this instance belongs to: (loop variable uid, value)
    copies: tuple[tuple[int, int], ...] = ()

    @property
    def key(self) -> tuple[int, int]:
        return (self.span.line, self.span.col)


@dataclass
class SpecLoop:
    node: ir.For
    counter: Term
    lo: Term
    hi: Term
    step: int
    cond: Term  # the `for` statement executes
    fors: tuple[ir.For, ...]  # enclosing loops
    copies: tuple[tuple[int, int], ...] = ()  # the unrolled copy it belongs to


@dataclass(frozen=True)
class WalkCtx:
    """Where the walk is: the execution condition, the enclosing `for`s, the values of
    `let`s, loop variables and `var`s, the enclosing role, and the copies of the unrolled
    loops around it (their variables are constants in `env`)."""

    cond: Term
    fors: tuple[ir.For, ...]
    env: dict[int, Term]
    role: ir.Role | None
    copies: tuple[tuple[int, int], ...] = ()

    @property
    def tag(self) -> str:
        """What tells the leaves of one unrolled copy from another's (empty outside)."""
        return "".join(f"@{uid}={v}" for uid, v in self.copies)


@dataclass(frozen=True)
class FragRead:
    """`acc[r]` as the specification reads it: register `reg` of `fragment` as it is when
    statement number `order` of the walk evaluates it (a leaf; fragment_checks.py names
    the PTX register that holds it there)."""

    fragment: str
    reg: int
    order: int


def thread() -> Term:
    return T.uint(T.leaf("tid.x", 32))


def size_leaf(name: str) -> Term:
    return T.leaf(f"param:s_{name}", 64)


def counter(f: ir.For) -> Term:
    return T.leaf(f"n:F{f.var.uid}", 64)
