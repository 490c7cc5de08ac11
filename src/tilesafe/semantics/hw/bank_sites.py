"""The shared-memory accesses the bank-conflict analysis looks at, what their addresses
depend on, and how they vary with a loop variable.

Why a module of its own (in semantics/, not in the checker): these are facts about the
kernel text -- every generic-proxy shared load/store with its enclosing role, loops and
guards (`sites`); whether a term depends on data, the thread, the block or the sizes (`deps`);
how a term varies with a loop variable (`period_in`, which decides how many iterations of a
loop the enumeration must look at, independently of the sizes) -- and a lane's concrete
value of a term (`compile_expr`, through semantics/expr/evaluate.py's one meaning of operators).
The banks checker (checkers/banks.py) and its evaluation (semantics/hw/bank_eval.py) use them.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from tilesafe.frontend import ir
from tilesafe.frontend.fold import Algebra, fold
from tilesafe.frontend.span import Span
from tilesafe.semantics.expr import evaluate

MAX_PERIOD = 256  # a longer period is treated as "not periodic"

Op = Literal["read", "write"]



@dataclass(frozen=True)
class Guard:
    cond: ir.Expr
    positive: bool


@dataclass(frozen=True)
class Scope:
    role: ir.Role | None = None
    loops: tuple[ir.For, ...] = ()
    guards: tuple[Guard, ...] = ()


@dataclass(frozen=True)
class Site:
    """One shared-memory load or store of the kernel text."""

    buffer: str
    op: Op
    indices: tuple[ir.Expr, ...]
    span: Span
    scope: Scope


def sites(kernel: ir.Kernel) -> tuple[tuple[Site, ...], dict[int, ir.Expr]]:
    """Every generic-proxy shared access in text order, and the `let` bindings by uid."""
    out: list[Site] = []
    lets: dict[int, ir.Expr] = {}
    _walk(kernel.body, Scope(), out, lets)
    return tuple(out), lets


def _walk(stmts: Sequence[ir.Stmt], scope: Scope, out: list[Site],
          lets: dict[int, ir.Expr]) -> None:
    for s in stmts:
        if isinstance(s, ir.For):
            _loads(s.lo, scope, out)
            _loads(s.hi, scope, out)
            _walk(s.body, dataclasses.replace(scope, loops=scope.loops + (s,)), out, lets)
        elif isinstance(s, ir.If):
            _loads(s.cond, scope, out)
            _walk(s.then, _guarded(scope, s.cond, True), out, lets)
            _walk(s.orelse, _guarded(scope, s.cond, False), out, lets)
        elif isinstance(s, ir.Role):
            _walk(s.body, dataclasses.replace(scope, role=s), out, lets)
        else:
            if isinstance(s, ir.Let):
                lets[s.uid] = s.value
            for value in _expr_fields(s):
                _loads(value, scope, out)
            # (a peer CTA's shared memory is reached through the SM-to-SM network, which
            # the bank model does not describe: distributed accesses are not sites)
            if isinstance(s, ir.Store) and s.space is ir.Space.SHARED and s.cta is None:
                out.append(Site(s.tensor, "write", s.indices, s.span, scope))


def _expr_fields(s: ir.Stmt) -> Iterator[ir.Expr]:
    for f in dataclasses.fields(s):
        value = getattr(s, f.name)
        items = value if isinstance(value, tuple) else (value,)
        for item in items:
            if isinstance(item, ir.Expr):
                yield item
            elif isinstance(item, ir.BarrierRef) and item.index is not None:
                yield item.index
            elif isinstance(item, ir.BufferSlice):
                yield from item.prefix


def _guarded(scope: Scope, cond: ir.Expr, positive: bool) -> Scope:
    return dataclasses.replace(scope, guards=scope.guards + (Guard(cond, positive),))


def _loads(e: ir.Expr, scope: Scope, out: list[Site]) -> None:
    """Shared loads inside an expression; the right side of && / || runs only when the
    left side lets it (short-circuit), so it is guarded by it."""
    if isinstance(e, ir.BinOp) and e.op in ("&&", "||"):
        _loads(e.lhs, scope, out)
        _loads(e.rhs, _guarded(scope, e.lhs, e.op == "&&"), out)
        return
    if isinstance(e, ir.Load):
        for i in e.indices:
            _loads(i, scope, out)
        if e.space is ir.Space.SHARED and e.cta is None:
            out.append(Site(e.tensor, "read", e.indices, e.span, scope))
        return
    if isinstance(e, ir.BinOp):
        _loads(e.lhs, scope, out)
        _loads(e.rhs, scope, out)
    elif isinstance(e, ir.UnOp):
        _loads(e.operand, scope, out)
    elif isinstance(e, ir.Call):
        for a in e.args:
            _loads(a, scope, out)


# ---- dependences and concrete evaluation ------------------------------------------------

DATA = "data"
THREAD = "thread"
BLOCK = "block"
SIZE = "size"


def deps(e: ir.Expr, lets: Mapping[int, ir.Expr]) -> frozenset[object]:
    """What a term depends on: THREAD, BLOCK, SIZE, DATA (memory, mutable or float values)
    and the uids of loop variables."""
    return fold(e, _Deps(lets))


class _Deps(Algebra[frozenset]):
    """Dependences as an algebra: an integer operation depends on what its operands do,
    anything float, a load, a mutable local or another call on data."""

    def __init__(self, lets: Mapping[int, ir.Expr]) -> None:
        self.lets = lets

    def whole(self, e: ir.Expr) -> frozenset | None:
        if isinstance(e, ir.FloatConst) or e.type is ir.ScalarType.FLOAT:
            return frozenset({DATA})
        return None

    def leaf(self, e: ir.Expr) -> frozenset:
        if isinstance(e, ir.IntConst):
            return frozenset()
        if isinstance(e, ir.SizeVar):
            return frozenset({SIZE})
        if isinstance(e, ir.Builtin):
            return frozenset({BLOCK if e.kind.value.startswith("block") else THREAD})
        if isinstance(e, ir.LoopVar):
            return frozenset({e.uid})
        if isinstance(e, ir.LocalRef) and not e.mutable and e.uid in self.lets:
            return fold(self.lets[e.uid], self)
        return frozenset({DATA})

    def op(self, name: str, e: ir.Expr, args: list[frozenset]) -> frozenset:
        if isinstance(e, ir.Call) and e.func not in ("min", "max", "abs"):
            return frozenset({DATA})
        return frozenset().union(*args)

    def to_float(self, x: frozenset, e: ir.Expr) -> frozenset:
        return frozenset({DATA})


class LaneEnv:
    """The values one lane sees: thread, block coordinates, sizes, loop variables."""

    __slots__ = ("thread", "block", "sizes", "loops")

    def __init__(self, sizes: Mapping[str, int]) -> None:
        self.thread = 0
        self.block: tuple[int, int, int] = (0, 0, 0)
        self.sizes = sizes
        self.loops: dict[int, int] = {}


Fn = Callable[[LaneEnv], Any]

def compile_expr(e: ir.Expr, lets: Mapping[int, ir.Expr]) -> Fn:
    """A closure computing an integer/boolean term for one lane (callers check `deps` has no
    DATA first). Operators mean what semantics/expr/evaluate.py says (floor / and %)."""

    def leaf(x: ir.Expr) -> Fn:
        if isinstance(x, ir.SizeVar):
            name = x.name
            return lambda env: env.sizes[name]
        if isinstance(x, ir.Builtin):
            kind = x.kind
            if kind is ir.BuiltinKind.THREAD:
                return lambda env: env.thread
            if kind is ir.BuiltinKind.LANE:
                return lambda env: env.thread % 32
            if kind is ir.BuiltinKind.WARP_ID:
                return lambda env: env.thread // 32
            axis = "xyz".index(kind.value[-1])
            return lambda env: env.block[axis]
        if isinstance(x, ir.LoopVar):
            uid = x.uid
            return lambda env: env.loops[uid]
        if isinstance(x, ir.LocalRef) and not x.mutable and x.uid in lets:
            return evaluate.compile_expr(lets[x.uid], leaf)
        raise ValueError(f"cannot evaluate {type(x).__name__} concretely")

    return evaluate.compile_expr(e, leaf)


# ---- periodicity in a loop variable (size-independent) ---------------------------------

CONST = ("const", 1)
_Kind = tuple[str, int] | None  # ("const", 1) | ("per", P) | ("lin", P) | None (unknown)


def _lcm(a: int, b: int) -> int:
    return a * b // math.gcd(a, b)


def join_kinds(kinds: Sequence[_Kind], allow_lin: bool) -> _Kind:
    """Combine operands: const ∘ const = const; periodic parts give the lcm of periods;
    `lin` (shift by a constant per period) survives only where allow_lin (+, -)."""
    if any(k is None for k in kinds):
        return None
    name, period = "const", 1
    for k in kinds:
        assert k is not None
        if k[0] == "lin" and not allow_lin:
            return None
        if k[0] != "const":
            name = "lin" if "lin" in (name, k[0]) else "per"
            period = _lcm(period, k[1])
    return (name, period) if period <= MAX_PERIOD else None


def period_in(e: ir.Expr, uid: int, lets: Mapping[int, ir.Expr]) -> _Kind:
    """How term e depends on loop variable `uid`.

    ("const", 1): not at all. ("per", P): e(v + P) = e(v) for every v. ("lin", P): e(v + t)
    = e(v) + a*t for every multiple t of P, with a*P an integer. None: neither is shown.
    Rules: v is lin 1; +,- keep lin; times a v-free term keeps the kind; lin / c is lin c*P
    (the shift a*t is a multiple of c); lin % c is per c*P; comparisons, min, max, abs and
    boolean operators only of per/const operands.
    """
    return fold(e, _Periods(uid, lets))


class _Periods(Algebra[_Kind]):
    """period_in as an algebra over the integer operations (see period_in)."""

    def __init__(self, uid: int, lets: Mapping[int, ir.Expr]) -> None:
        self.uid, self.lets = uid, lets

    def leaf(self, e: ir.Expr) -> _Kind:
        if isinstance(e, ir.LoopVar):
            return ("lin", 1) if e.uid == self.uid else CONST
        if isinstance(e, (ir.IntConst, ir.SizeVar, ir.Builtin, ir.FloatConst)):
            return CONST
        if isinstance(e, ir.LocalRef) and not e.mutable and e.uid in self.lets:
            return fold(self.lets[e.uid], self)
        return None

    def to_float(self, x: _Kind, e: ir.Expr) -> _Kind:
        return x

    def op(self, name: str, e: ir.Expr, args: list[_Kind]) -> _Kind:
        if name in ("int.neg", "f32.neg"):
            return args[0]
        if name in ("int.add", "int.sub", "f32.add", "f32.sub"):
            return join_kinds(args, allow_lin=True)
        if name in ("int.mul", "f32.mul"):
            lhs, rhs = args
            return rhs if lhs == CONST else lhs if rhs == CONST else None
        if name in ("int.div", "int.mod", "f32.div"):
            return _divided(e, args[0], name != "int.mod")
        if isinstance(e, ir.Call) and e.func not in ("min", "max", "abs"):
            return None
        return join_kinds(args, allow_lin=False)


def _divided(e: ir.Expr, lhs: _Kind, div: bool) -> _Kind:
    """lin / c is lin c*P, lin % c is per c*P (c a positive constant); else as lhs."""
    assert isinstance(e, ir.BinOp)
    if not isinstance(e.rhs, ir.IntConst) or e.rhs.value <= 0 or lhs is None:
        return None
    if lhs[0] != "lin":
        return lhs
    p = e.rhs.value * lhs[1]
    if p > MAX_PERIOD:
        return None
    return ("lin", p) if div else ("per", p)
