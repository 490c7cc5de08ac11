"""A small term language for both sides of the validation: the PTX's values (bit-vectors of
the registers' real widths, predicates) and the specification's values (mathematical
integers), with uninterpreted functions for floats and other opaque values.

Why our own terms instead of building z3 expressions directly:

* one term is evaluated three ways: encoded for z3, evaluated *concretely* with the real
  semantics (to confirm that a solver's model is a true counterexample, products included),
  and analysed for value ranges (to pick a bit-width in which the specification's integer
  arithmetic is exact);
* terms are hash-consed, so identical sub-computations are shared and comparisons and
  caches work by identity.

Sorts: `w > 0` a bit-vector of w bits; `w == BOOL` a truth value; `w == INT` an integer.
Bit-vector constants are stored as their unsigned value.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

BOOL = 0
INT = -1


class Term:
    """One hash-consed node: `op`, argument terms, sort `w`, and a payload `val` (the value
    of a constant, the name of a leaf or function, the width of an extension)."""

    __slots__ = ("__weakref__", "args", "op", "val", "w")

    op: str
    args: tuple[Term, ...]
    w: int
    val: object

    def __repr__(self) -> str:
        return show(self)

    @property
    def is_const(self) -> bool:
        return self.op == "const"


_TABLE: weakref.WeakValueDictionary[tuple, Term] = weakref.WeakValueDictionary()


def _mk(op: str, w: int, args: tuple[Term, ...] = (), val: object = None) -> Term:
    key = (op, w, val, tuple(id(a) for a in args))
    t = _TABLE.get(key)
    if t is not None and t.args == args:
        return t
    t = Term.__new__(Term)
    t.op, t.w, t.args, t.val = op, w, args, val
    _TABLE[key] = t
    return t


# ---- leaves ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class LeafInfo:
    """What a leaf stands for. `kind` is one of:

    * "int": a value a counterexample chooses (a size, a pointer, thread, block, loop
      counter, the shared-memory address, ...); `lo .. hi` bound its integer reading
      (signed or unsigned as `signed` says) and `align` divides it;
    * "nondet": a value the program does not let us choose (loaded data, a register's value
      at a loop head, the result of a division by zero): a refutation must hold for all."""

    kind: str
    signed: bool = True
    lo: int | None = None
    hi: int | None = None
    align: int = 1
    note: str = ""


_LEAVES: dict[str, LeafInfo] = {}


def leaf(name: str, w: int, info: LeafInfo | None = None) -> Term:
    """The leaf `name` (a bit-vector of w bits or a Bool); registers its meaning."""
    if info is not None:
        _LEAVES[name] = info
    elif name not in _LEAVES:
        _LEAVES[name] = LeafInfo("nondet")
    return _mk("leaf", w, (), name)


def leaf_info(name: str) -> LeafInfo:
    return _LEAVES.get(name, LeafInfo("nondet"))


def reset() -> None:
    """Forget leaf descriptions of earlier runs (terms themselves are weakly interned)."""
    _LEAVES.clear()


# ---- constants ------------------------------------------------------------------------------


def bv(value: int, w: int) -> Term:
    return _mk("const", w, (), value % (1 << w))


def const_int(value: int) -> Term:
    return _mk("const", INT, (), value)


TRUE = _mk("const", BOOL, (), True)
FALSE = _mk("const", BOOL, (), False)


def boolean(v: bool) -> Term:
    return TRUE if v else FALSE


def signed(value: int, w: int) -> int:
    value %= 1 << w
    return value - (1 << w) if value >> (w - 1) else value


def sval(t: Term) -> int:
    """Signed value of a bit-vector constant."""
    return signed(int(t.val), t.w)  # type: ignore[arg-type]


# ---- bit-vector operations (PTX semantics: wrap modulo 2^w) ---------------------------------

_BV_FOLD: dict[str, Callable[..., int]] = {
    "add": lambda w, a, b: a + b,
    "sub": lambda w, a, b: a - b,
    "mul": lambda w, a, b: a * b,
    "and": lambda w, a, b: a & b,
    "or": lambda w, a, b: a | b,
    "xor": lambda w, a, b: a ^ b,
    "shl": lambda w, a, b: 0 if b >= w else a << b,
    "lshr": lambda w, a, b: 0 if b >= w else a >> b,
    "ashr": lambda w, a, b: signed(a, w) >> min(b, w - 1),
    "smin": lambda w, a, b: min(signed(a, w), signed(b, w)),
    "smax": lambda w, a, b: max(signed(a, w), signed(b, w)),
    "umin": min,
    "umax": max,
}


def _bv2(op: str, a: Term, b: Term) -> Term:
    assert a.w == b.w and a.w > 0, (op, a, b)
    w = a.w
    if a.is_const and b.is_const and op in _BV_FOLD:
        fn = _BV_FOLD[op]
        return bv(fn(w, a.val, b.val) if op not in ("umin", "umax") else fn(a.val, b.val), w)
    if op in ("add", "or", "xor") and b.is_const and b.val == 0:
        return a
    if op in ("add", "or", "xor", "mul", "and") and a.is_const and not b.is_const:
        return _bv2(op, b, a)  # constants on the right
    if op == "sub" and b.is_const and b.val == 0:
        return a
    if op == "mul" and b.is_const:
        if b.val == 1:
            return a
        if b.val == 0:
            return b
    if op == "and" and b.is_const and b.val == 0:
        return b
    if op in ("shl", "lshr", "ashr") and b.is_const and b.val == 0:
        return a
    if op == "add" and b.is_const and a.op == "add" and a.args[1].is_const:
        return _bv2("add", a.args[0], bv(int(a.args[1].val) + int(b.val), w))
    return _mk(op, w, (a, b))


def add(a: Term, b: Term) -> Term:
    return _bv2("add", a, b)


def sub(a: Term, b: Term) -> Term:
    if b.is_const:
        return _bv2("add", a, bv(-int(b.val), b.w))
    return _bv2("sub", a, b)


def mul(a: Term, b: Term) -> Term:
    return _bv2("mul", a, b)


def band(a: Term, b: Term) -> Term:
    return _bv2("and", a, b)


def bor(a: Term, b: Term) -> Term:
    return _bv2("or", a, b)


def bxor(a: Term, b: Term) -> Term:
    return _bv2("xor", a, b)


def shl(a: Term, b: Term) -> Term:
    return _bv2("shl", a, b)


def lshr(a: Term, b: Term) -> Term:
    return _bv2("lshr", a, b)


def ashr(a: Term, b: Term) -> Term:
    return _bv2("ashr", a, b)


def smin(a: Term, b: Term) -> Term:
    return _bv2("smin", a, b)


def smax(a: Term, b: Term) -> Term:
    return _bv2("smax", a, b)


def umin(a: Term, b: Term) -> Term:
    return _bv2("umin", a, b)


def umax(a: Term, b: Term) -> Term:
    return _bv2("umax", a, b)


def bnot(a: Term) -> Term:
    if a.is_const:
        return bv(~int(a.val), a.w)
    return _mk("not", a.w, (a,))


def neg(a: Term) -> Term:
    if a.is_const:
        return bv(-int(a.val), a.w)
    return _mk("neg", a.w, (a,))


def babs(a: Term) -> Term:
    if a.is_const:
        return bv(abs(sval(a)), a.w)
    return _mk("abs", a.w, (a,))


def divide(op: str, a: Term, b: Term, on_zero: Term) -> Term:
    """`sdiv srem udiv urem` with PTX meaning: truncating; the result of a division by zero
    is unspecified, so it is `on_zero` (a fresh nondeterministic leaf)."""
    assert a.w == b.w
    w = a.w
    if b.is_const and b.val == 0:
        return on_zero
    if a.is_const and b.is_const:
        x, y = int(a.val), int(b.val)
        if op == "udiv":
            return bv(x // y, w)
        if op == "urem":
            return bv(x % y, w)
        sx, sy = signed(x, w), signed(y, w)
        q = abs(sx) // abs(sy) * (1 if (sx < 0) == (sy < 0) else -1)
        return bv(q if op == "sdiv" else sx - q * sy, w)
    core = _mk(op, w, (a, b))
    if b.is_const:
        return core
    return ite(eq(b, bv(0, w)), on_zero, core)


def sext(a: Term, w: int) -> Term:
    if a.w == w:
        return a
    assert w > a.w
    if a.is_const:
        return bv(sval(a), w)
    return _mk("sext", w, (a,))


def zext(a: Term, w: int) -> Term:
    if a.w == w:
        return a
    assert w > a.w
    if a.is_const:
        return bv(int(a.val), w)
    return _mk("zext", w, (a,))


def trunc(a: Term, w: int) -> Term:
    if a.w == w:
        return a
    assert w < a.w
    if a.is_const:
        return bv(int(a.val), w)
    if a.op in ("sext", "zext") and a.args[0].w == w:
        return a.args[0]
    return _mk("trunc", w, (a,))


def ite(c: Term, a: Term, b: Term) -> Term:
    assert c.w == BOOL and a.w == b.w, (c, a, b)
    if c is TRUE or a is b:
        return a
    if c is FALSE:
        return b
    if a.w == BOOL:
        return or_(and_(c, a), and_(not_(c), b))
    return _mk("ite", a.w, (c, a, b))


# ---- predicates -----------------------------------------------------------------------------


def _cmp(op: str, a: Term, b: Term) -> Term:
    assert a.w == b.w and a.w != BOOL, (op, a, b)
    if a.is_const and b.is_const:
        if a.w == INT:
            x, y = int(a.val), int(b.val)  # type: ignore[arg-type]
        elif op in ("slt", "sle"):
            x, y = sval(a), sval(b)
        else:
            x, y = int(a.val), int(b.val)  # type: ignore[arg-type]
        return boolean({"eq": x == y, "slt": x < y, "sle": x <= y, "ult": x < y,
                        "ule": x <= y, "ilt": x < y, "ile": x <= y, "ieq": x == y}[op])
    if a is b:
        return boolean(op in ("eq", "sle", "ule", "ile", "ieq"))
    return _mk(op, BOOL, (a, b))


def eq(a: Term, b: Term) -> Term:
    if a.w == INT:
        return _cmp("ieq", a, b)
    if a.w == BOOL:
        return or_(and_(a, b), and_(not_(a), not_(b)))
    return _cmp("eq", a, b)


def slt(a: Term, b: Term) -> Term:
    return _cmp("slt", a, b)


def sle(a: Term, b: Term) -> Term:
    return _cmp("sle", a, b)


def ult(a: Term, b: Term) -> Term:
    return _cmp("ult", a, b)


def ule(a: Term, b: Term) -> Term:
    return _cmp("ule", a, b)


def not_(a: Term) -> Term:
    if a is TRUE:
        return FALSE
    if a is FALSE:
        return TRUE
    if a.op == "not":
        return a.args[0]
    return _mk("not", BOOL, (a,))


def _flat(op: str, items: Iterable[Term]) -> list[Term]:
    out: list[Term] = []
    seen: set[int] = set()
    for t in items:
        for u in (t.args if t.op == op else (t,)):
            if id(u) not in seen:
                seen.add(id(u))
                out.append(u)
    return out


def and_(*items: Term) -> Term:
    parts = [t for t in _flat("and_", items) if t is not TRUE]
    if any(t is FALSE for t in parts):
        return FALSE
    ids = {id(t) for t in parts}
    if any(t.op == "not" and id(t.args[0]) in ids for t in parts):
        return FALSE
    if not parts:
        return TRUE
    if len(parts) == 1:
        return parts[0]
    return _mk("and_", BOOL, tuple(parts))


def or_(*items: Term) -> Term:
    parts = [t for t in _flat("or_", items) if t is not FALSE]
    if any(t is TRUE for t in parts):
        return TRUE
    ids = {id(t) for t in parts}
    if any(t.op == "not" and id(t.args[0]) in ids for t in parts):
        return TRUE
    if not parts:
        return FALSE
    if len(parts) == 1:
        return parts[0]
    return _mk("or_", BOOL, tuple(parts))


def implies(a: Term, b: Term) -> Term:
    return or_(not_(a), b)


def xor_(a: Term, b: Term) -> Term:
    return or_(and_(a, not_(b)), and_(not_(a), b))


def merge_or(a: Term, b: Term) -> Term:
    """a OR b, factoring out the conjuncts both share: (P and c) or (P and not c) = P. Keeps
    path conditions at join points as small as the program's structure."""
    ca = list(a.args) if a.op == "and_" else [a]
    cb = list(b.args) if b.op == "and_" else [b]
    ids_b = {id(t) for t in cb}
    common = [t for t in ca if id(t) in ids_b]
    ids_c = {id(t) for t in common}
    ra = and_(*[t for t in ca if id(t) not in ids_c])
    rb = and_(*[t for t in cb if id(t) not in ids_c])
    return and_(*common, or_(ra, rb))


# ---- integers (the specification: exact, floor division) ------------------------------------

_INT_FOLD: dict[str, Callable[[int, int], int]] = {
    "iadd": lambda a, b: a + b, "isub": lambda a, b: a - b, "imul": lambda a, b: a * b,
    "imin": min, "imax": max,
}


def _int2(op: str, a: Term, b: Term) -> Term:
    assert a.w == INT and b.w == INT, (op, a, b)
    if a.is_const and b.is_const:
        return const_int(_INT_FOLD[op](int(a.val), int(b.val)))  # type: ignore[arg-type]
    if op in ("iadd", "imul", "imin", "imax") and a.is_const:
        a, b = b, a
    if op in ("iadd", "isub") and b.is_const and b.val == 0:
        return a
    if op == "imul" and b.is_const:
        if b.val == 1:
            return a
        if b.val == 0:
            return b
    if op == "iadd" and b.is_const and a.op == "iadd" and a.args[1].is_const:
        return iadd(a.args[0], const_int(int(a.args[1].val) + int(b.val)))  # type: ignore
    return _mk(op, INT, (a, b))


def iadd(a: Term, b: Term) -> Term:
    return _int2("iadd", a, b)


def isub(a: Term, b: Term) -> Term:
    if a is b:
        return const_int(0)
    if b.is_const:
        return _int2("iadd", a, const_int(-int(b.val)))  # type: ignore[arg-type]
    return _int2("isub", a, b)


def imul(a: Term, b: Term) -> Term:
    return _int2("imul", a, b)


def imin(a: Term, b: Term) -> Term:
    return _int2("imin", a, b)


def imax(a: Term, b: Term) -> Term:
    return _int2("imax", a, b)


def ineg(a: Term) -> Term:
    return isub(const_int(0), a)


def iabs(a: Term) -> Term:
    if a.is_const:
        return const_int(abs(int(a.val)))  # type: ignore[arg-type]
    return _mk("iabs", INT, (a,))


def ifdiv(a: Term, b: Term) -> Term:
    """Floor division (the IR's `/`); division by zero has no value (callers exclude it)."""
    if b.is_const and b.val == 1:
        return a
    if a.is_const and b.is_const and b.val != 0:
        return const_int(int(a.val) // int(b.val))  # type: ignore[arg-type]
    return _mk("ifdiv", INT, (a, b))


def ifmod(a: Term, b: Term) -> Term:
    """Floor modulo (the IR's `%`)."""
    if b.is_const and b.val == 1:
        return const_int(0)
    if a.is_const and b.is_const and b.val != 0:
        return const_int(int(a.val) % int(b.val))  # type: ignore[arg-type]
    return _mk("ifmod", INT, (a, b))


def ixor(a: Term, b: Term) -> Term:
    """Bitwise exclusive or of two integers (two's complement of unbounded width, as
    Python's `^`): swizzles and F2 layouts are defined with it."""
    if a.is_const and b.is_const:
        return const_int(int(a.val) ^ int(b.val))  # type: ignore[arg-type]
    if b.is_const and b.val == 0:
        return a
    if a.is_const and a.val == 0:
        return b
    return _mk("ixor", INT, (a, b))


def tobv(a: Term, w: int) -> Term:
    """An integer modulo 2^w as a w-bit vector (how an address wraps in a register)."""
    if a.is_const:
        return bv(int(a.val), w)  # type: ignore[arg-type]
    if a.op == "sint" and a.args[0].w == w:
        return a.args[0]
    return _mk("tobv", w, (a,))


def ilt(a: Term, b: Term) -> Term:
    return _cmp("ilt", a, b)


def ile(a: Term, b: Term) -> Term:
    return _cmp("ile", a, b)


def sint(a: Term) -> Term:
    """The signed integer a bit-vector holds."""
    if a.is_const:
        return const_int(sval(a))
    if a.op == "sext":
        return sint(a.args[0])
    if a.op == "zext":
        return uint(a.args[0])
    return _mk("sint", INT, (a,))


def uint(a: Term) -> Term:
    """The unsigned integer a bit-vector holds."""
    if a.is_const:
        return const_int(int(a.val))  # type: ignore[arg-type]
    if a.op == "zext":
        return uint(a.args[0])
    return _mk("uint", INT, (a,))


# ---- uninterpreted functions ----------------------------------------------------------------


def uf(name: str, w: int, *args: Term) -> Term:
    """An opaque function application (float arithmetic, conversions, address-space casts):
    equal arguments give equal results, nothing more is known."""
    return _mk("uf", w, tuple(args), name)


# ---- traversals -----------------------------------------------------------------------------


def postorder(roots: Iterable[Term]) -> list[Term]:
    """Every distinct sub-term, children before parents."""
    out: list[Term] = []
    seen: set[int] = set()
    stack: list[tuple[Term, bool]] = [(r, False) for r in roots]
    while stack:
        t, done = stack.pop()
        if done:
            out.append(t)
            continue
        if id(t) in seen:
            continue
        seen.add(id(t))
        stack.append((t, True))
        for a in reversed(t.args):
            if id(a) not in seen:
                stack.append((a, False))
    return out


def leaves(roots: Iterable[Term]) -> list[Term]:
    return [t for t in postorder(roots) if t.op == "leaf"]


def has_uf(roots: Iterable[Term]) -> bool:
    return any(t.op == "uf" for t in postorder(roots))


def rebuild(t: Term, args: tuple[Term, ...]) -> Term:
    """`t` with new arguments, through the folding constructors."""
    op = t.op
    if op in ("add", "sub", "mul", "and", "or", "xor", "shl", "lshr", "ashr", "smin",
              "smax", "umin", "umax"):
        return {"sub": sub}.get(op, lambda a, b: _bv2(op, a, b))(*args)
    if op in ("sdiv", "srem", "udiv", "urem"):
        return divide(op, args[0], args[1], leaf("unused:divzero", t.w))
    if op == "not":
        return bnot(args[0]) if t.w > 0 else not_(args[0])
    if op == "neg":
        return neg(args[0])
    if op == "abs":
        return babs(args[0])
    if op == "sext":
        return sext(args[0], t.w)
    if op == "zext":
        return zext(args[0], t.w)
    if op == "trunc":
        return trunc(args[0], t.w)
    if op == "ite":
        return ite(*args)
    if op in ("eq", "slt", "sle", "ult", "ule", "ilt", "ile", "ieq"):
        return _cmp(op, *args)
    if op == "and_":
        return and_(*args)
    if op == "or_":
        return or_(*args)
    if op in ("iadd", "isub", "imul", "imin", "imax"):
        return {"isub": isub}.get(op, lambda a, b: _int2(op, a, b))(*args)
    if op == "iabs":
        return iabs(args[0])
    if op == "ifdiv":
        return ifdiv(*args)
    if op == "ifmod":
        return ifmod(*args)
    if op == "ixor":
        return ixor(*args)
    if op == "tobv":
        return tobv(args[0], t.w)
    if op == "sint":
        return sint(args[0])
    if op == "uint":
        return uint(args[0])
    if op == "uf":
        return uf(str(t.val), t.w, *args)
    raise AssertionError(op)


def substitute(roots: list[Term], mapping: Mapping[int, Term],
               memo: dict[int, Term] | None = None) -> list[Term]:
    """Replace sub-terms (keyed by id) and fold constants: with every integer leaf mapped to
    a constant this is concrete evaluation with the real semantics (exact products)."""
    memo = {} if memo is None else memo
    for t in postorder(roots):
        if id(t) in memo:
            continue
        if id(t) in mapping:
            memo[id(t)] = mapping[id(t)]
        elif not t.args:
            memo[id(t)] = t
        else:
            new = tuple(memo[id(a)] for a in t.args)
            if all(n is o for n, o in zip(new, t.args, strict=True)):
                memo[id(t)] = t
            elif t.op == "ifdiv" and new[1].is_const and new[1].val == 0:
                memo[id(t)] = const_int(0)
            elif t.op == "ifmod" and new[1].is_const and new[1].val == 0:
                memo[id(t)] = new[0]
            else:
                memo[id(t)] = rebuild(t, new)
    return [memo[id(r)] for r in roots]


# ---- printing -------------------------------------------------------------------------------

_INFIX = {"add": "+", "sub": "-", "mul": "*", "and": "&", "or": "|", "xor": "^", "shl": "<<",
          "lshr": ">>u", "ashr": ">>", "iadd": "+", "isub": "-", "imul": "*", "ifdiv": "/",
          "ifmod": "%", "ixor": "^", "eq": "==", "ieq": "==", "slt": "<s", "sle": "<=s",
          "ult": "<u", "ule": "<=u", "ilt": "<", "ile": "<="}


def show(t: Term, depth: int = 6) -> str:
    """A readable rendering (cut off below `depth`)."""
    if t.op == "const":
        if t.w == BOOL:
            return "true" if t.val else "false"
        return str(t.val if t.w == INT else sval(t))
    if t.op == "leaf":
        return str(t.val)
    if depth == 0:
        return "…"
    args = [show(a, depth - 1) for a in t.args]
    if t.op in _INFIX and len(args) == 2:
        return f"({args[0]} {_INFIX[t.op]} {args[1]})"
    if t.op == "and_":
        return "(" + " && ".join(args) + ")"
    if t.op == "or_":
        return "(" + " || ".join(args) + ")"
    if t.op == "not":
        return ("!" if t.w == BOOL else "~") + args[0]
    if t.op == "uf":
        return f"{t.val}({', '.join(args)})"
    if t.op in ("sext", "zext", "trunc"):
        return f"{t.op}{t.w}({args[0]})"
    return f"{t.op}({', '.join(args)})"
