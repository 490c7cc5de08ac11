"""Index-tensor contents that satisfy a kernel's `requires` clauses at concrete sizes (z3).

Why: a kernel with gathers runs only on data its clauses allow (every launch checks them,
semantics/access/requires_eval.py), so everything that draws inputs for it -- `tilesafe run`,
the value checker's refuting search, the replay of a checker's counterexample on the
interpreter -- needs index tensors that satisfy them: a permutation, a sorted segment
table, a block -> expert table consistent with a routing. Uniform random integers almost
never do. The clauses at fixed sizes are a finite constraint problem: one integer per
element, each universal clause instantiated at every point of its variables, the
predicates as counts (each value of the range taken by at most one position, by exactly one
for a permutation; all values distinct without a range). A counterexample's elements
(`ids[3] = 8`) are fixed first, so that the data reproduces it.

Random-looking data: after a first solution, each index tensor in turn gets random target
values (uniform over the range the clauses allow its first element), kept for all its
elements, else for a random half, else a quarter, when the problem stays satisfiable
within a short time -- so a router's ids come out random and the routing tables follow.

Bounded: at most MAX_ELEMENTS index-tensor elements and MAX_POINTS clause points, a solver
timeout per query; past any bound, or when the clauses have no solution at these sizes, it
raises NoSolution (never returns data that violates them: the result is re-checked).
"""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import z3

from tilesafe.frontend import ir
from tilesafe.semantics.access import requires_eval, requires_form

MAX_ELEMENTS = 2048  # index-tensor elements, all tensors together
MAX_POINTS = 40_000  # points of the universal clauses, all together
MAX_LITERALS = 60_000  # of the counting constraints and the reads through reads
MAX_DISTINCT = 2000  # positions of an injective clause without a value range
TIMEOUT_MS = 4000  # per solver query
TRIAL_MS = 1000  # per query trying random targets (a timeout only drops the targets)
DRAW_SECONDS = 8  # for trying random targets, per draw
_RANGES = {ir.DType.I32: (-(2**31), 2**31 - 1), ir.DType.U8: (0, 255)}


class NoSolution(Exception):
    """No contents satisfying the clauses were found within the bounds (the reason says
    which: unsatisfiable, too large, or the solver's time ran out). `unsat`: the clauses
    (with the fixed elements) have no solution at these sizes -- decided, not given up."""

    def __init__(self, reason: str, unsat: bool = False, clause: int = 0) -> None:
        super().__init__(reason)
        self.unsat = unsat
        self.clause = clause  # the clause (by index) that makes the earlier ones unsatisfiable


def draw(kernel: ir.Kernel, sizes: Mapping[str, int], shapes: Mapping[str, tuple[int, ...]],
         rng: np.random.Generator,
         fixed: Mapping[str, Mapping[tuple[int, ...], int]] | None = None
         ) -> dict[str, np.ndarray]:
    """Contents for every tensor the clauses read (name -> array of the tensor's dtype).
    Takes one number from `rng` (its own generator's seed), whatever it finds; the same
    kernel, sizes, seed and fixed elements give the same contents (memoised: the refuting
    search asks again for every input profile)."""
    seed = int(rng.integers(0, 2**62))
    key = (id(kernel), tuple(sorted(sizes.items())), seed, repr(sorted(
        (n, sorted(e.items())) for n, e in (fixed or {}).items())))
    hit = _MEMO.get(key)
    if hit is None or hit[0] is not kernel:
        if len(_MEMO) > 64:
            _MEMO.clear()
        try:
            hit = (kernel, _draw(kernel, sizes, shapes, np.random.default_rng(seed), fixed))
        except NoSolution as err:
            hit = (kernel, err)
        _MEMO[key] = hit
    if isinstance(hit[1], NoSolution):
        raise hit[1]
    return {n: a.copy() for n, a in hit[1].items()}


_MEMO: dict[tuple, tuple[ir.Kernel, Any]] = {}


def _draw(kernel: ir.Kernel, sizes: Mapping[str, int], shapes: Mapping[str, tuple[int, ...]],
          rng: np.random.Generator,
          fixed: Mapping[str, Mapping[tuple[int, ...], int]] | None) -> dict[str, np.ndarray]:
    clauses = requires_form.encode(kernel)
    names = requires_form.tensors(clauses)
    if not names:
        return {}
    total = sum(math.prod(shapes[n]) for n in names)
    if total > MAX_ELEMENTS:
        raise NoSolution(f"the index tensors have {total} elements (at most {MAX_ELEMENTS} "
                         "are drawn by search): give smaller sizes")
    enc = _Encoding(kernel, sizes, shapes, names)
    for c in clauses:
        enc.clause(c)
    for name, elems in (fixed or {}).items():
        for idx, value in elems.items():
            enc.solver.add(enc.element(name, tuple(idx)) == int(value))
    model = enc.solve([])
    if model is None:
        culprit = _culprit(kernel, sizes, shapes, names, clauses, fixed) if (
            enc.decided_unsat) else 0
        raise NoSolution(enc.why_not(), unsat=enc.decided_unsat, clause=culprit)
    deadline = time.monotonic() + DRAW_SECONDS
    for name in names:  # random targets, one tensor at a time, kept when satisfiable
        lo, hi = enc.value_range(name, clauses, model)
        targets = rng.integers(lo, hi + 1, size=enc.shapes[name])
        keep = fixed.get(name, {}) if fixed else {}
        free = [(idx, int(t)) for idx, t in np.ndenumerate(targets) if idx not in keep]
        for share in (1.0, 0.5, 0.25):
            if time.monotonic() > deadline:
                break
            chosen = [x for x in free if share == 1.0 or rng.random() < share]
            pins = [enc.element(name, idx) == t for idx, t in chosen]
            trial = enc.solve(pins, TRIAL_MS)
            if trial is not None:
                model = trial
                enc.solver.add(*pins)
                break
    out = {n: enc.values(model, n).astype(_numpy_dtype(kernel, n)) for n in names}
    v = requires_eval.first_violation(clauses, sizes, out)
    if v is not None:  # the encoding and the check disagree: never hand out such data
        raise NoSolution(f"internal: drawn data fails the launch check ({v.message()})")
    return out


def _numpy_dtype(kernel: ir.Kernel, name: str) -> Any:
    return np.uint8 if kernel.tensor(name).dtype is ir.DType.U8 else np.int32


class _Encoding:
    """The clauses over one z3 integer per index-tensor element."""

    def __init__(self, kernel: ir.Kernel, sizes: Mapping[str, int],
                 shapes: Mapping[str, tuple[int, ...]], names: list[str]) -> None:
        self.sizes = {k: int(v) for k, v in sizes.items()}
        self.shapes = {n: tuple(int(d) for d in shapes[n]) for n in names}
        self.solver = z3.Solver()
        self.solver.set("timeout", TIMEOUT_MS)
        self.vars: dict[str, list[z3.ArithRef]] = {}
        self.arrays: dict[str, z3.ArrayRef] = {}
        self.points = 0
        self.literals = 0
        self.decided_unsat = False
        self.unsat_reason = ""
        for n in names:
            lo, hi = _RANGES.get(kernel.tensor(n).dtype, _RANGES[ir.DType.I32])
            vs = [z3.Int(f"{n}_{i}") for i in range(math.prod(self.shapes[n]))]
            for v in vs:
                self.solver.add(v >= lo, v <= hi)
            self.vars[n] = vs
        self.fresh = itertools.count()

    # ---- elements and reads ------------------------------------------------------------------

    def element(self, name: str, idx: tuple[int, ...]) -> z3.ArithRef:
        flat = 0
        for i, n in zip(idx, self.shapes[name], strict=True):
            flat = flat * n + int(i)
        return self.vars[name][flat]

    def array(self, name: str) -> z3.ArrayRef:
        """The tensor as a z3 array (for reads at symbolic indices)."""
        if name not in self.arrays:
            a = z3.Array(f"A_{name}", z3.IntSort(), z3.IntSort())
            for i, v in enumerate(self.vars[name]):
                self.solver.add(z3.Select(a, i) == v)
            self.arrays[name] = a
        return self.arrays[name]

    def value_range(self, name: str, clauses: Any, model: z3.ModelRef) -> tuple[int, int]:
        """A range for random targets: the values the first solution gave the tensor, the
        constants and the sizes (and sizes - 1) its clauses compare with -- a guess (a
        target outside what the clauses allow is dropped with the others), cheap where an
        optimising query is not."""
        pool = set(int(v) for v in self.values(model, name).reshape(-1))
        for c in clauses:
            if name in requires_form.tensors((c,)):
                for leaf in _leaves(c):
                    if leaf[0] == "int":
                        pool.add(int(leaf[1]))
                    elif leaf[0] == "size":
                        pool |= {self.sizes[leaf[1]], self.sizes[leaf[1]] - 1}
        lo, hi = (max(-(1 << 16), min(v, 1 << 16)) for v in (min(pool), max(pool)))
        return lo, hi

    def values(self, model: z3.ModelRef, name: str) -> np.ndarray:
        out = [model.eval(v, model_completion=True).as_long() for v in self.vars[name]]
        return np.array(out, dtype=np.int64).reshape(self.shapes[name])

    # ---- forms -------------------------------------------------------------------------------

    def ev(self, f: list[Any], env: Mapping[str, Any]) -> tuple[Any, Any]:
        """(value, defined): Python ints/bools where everything is concrete, z3 terms
        otherwise; `defined` as requires_eval reads it (a read outside its tensor where its
        value decides the clause is undefined)."""
        kind = f[0]
        if kind == "int":
            return int(f[1]), True
        if kind == "size":
            return self.sizes[f[1]], True
        if kind == "var":
            return env[f[1]], True
        if kind == "load":
            return self.load(f, env)
        if kind == "un":
            v, ok = self.ev(f[2], env)
            if f[1] == "!":
                return (not v) if isinstance(v, bool) else z3.Not(v), ok
            return -v, ok
        if kind == "call":
            args = [self.ev(a, env) for a in f[2]]
            ok = _and(*(a[1] for a in args))
            x = args[0][0]
            if f[1] == "abs":
                return (abs(x) if isinstance(x, int) else z3.If(x >= 0, x, -x)), ok
            y = args[1][0]
            if isinstance(x, int) and isinstance(y, int):
                return (min(x, y) if f[1] == "min" else max(x, y)), ok
            return (z3.If(x <= y, x, y) if f[1] == "min" else z3.If(x >= y, x, y)), ok
        op = f[1]
        a, aok = self.ev(f[2], env)
        b, bok = self.ev(f[3], env)
        if op in ("&&", "||"):
            want = op == "||"  # the value of a that decides without b
            if isinstance(a, bool):
                return (a if a == want else b), (aok if a == want else _and(aok, bok))
            value = z3.Or(a, _b(b)) if want else z3.And(a, _b(b))
            ok = _or(_and(aok, a if want else z3.Not(a)), _and(aok, bok))
            return value, ok
        return _arith(op, a, b), _and(aok, bok)

    def load(self, f: list[Any], env: Mapping[str, Any]) -> tuple[Any, Any]:
        name = f[1]
        shape = self.shapes[name]
        idx, oks = [], []
        for i in f[2]:
            v, ok = self.ev(i, env)
            idx.append(v)
            oks.append(ok)
        ok = _and(*oks)
        if all(isinstance(i, int) for i in idx):
            if not all(0 <= i < n for i, n in zip(idx, shape, strict=True)):
                return 0, False
            return self.element(name, tuple(idx)), ok
        flat: Any = 0
        for i, n in zip(idx, shape, strict=True):
            ok = _and(ok, i >= 0, i < n)
            flat = flat * n + i
        # a read at an unknown index: a fresh value equal to the element the index names
        # (case by case -- plain integer arithmetic, which the solver handles far better
        # than an array read at these sizes)
        self.literals += len(self.vars[name])
        if self.literals > MAX_LITERALS:
            raise NoSolution("the clauses' reads through reads are too many to search at "
                             "these sizes: give smaller sizes")
        v = z3.Int(f"read_{name}_{next(self.fresh)}")
        key = z3.Int(f"at_{name}_{next(self.fresh)}")
        self.solver.add(key == flat)
        for k, elem in enumerate(self.vars[name]):
            self.solver.add(z3.Implies(key == k, v == elem))
        return v, ok

    def inbounds(self, f: list[Any], env: Mapping[str, Any]) -> Any:
        out: Any = True
        for i, n in zip(f[2], self.shapes[f[1]], strict=True):
            v, _ = self.ev(i, env)
            out = _and(out, v >= 0, v < n)
        return out

    # ---- clauses -----------------------------------------------------------------------------

    def clause(self, c: Mapping[str, Any]) -> None:
        if c["kind"] == "all":
            self.universal(c)
        else:
            self.predicate(c)

    def universal(self, c: Mapping[str, Any]) -> None:
        holders = {n: np.empty(s, dtype=np.int8) for n, s in self.shapes.items()}
        try:
            box = requires_eval._box(c, c["cond"], c["vars"], self.sizes, holders)
        except requires_eval.TooLarge as err:
            raise NoSolution(str(err)) from None
        direct = requires_eval._direct(c["cond"], [])
        for point in itertools.product(*box):
            self.points += 1
            if self.points > MAX_POINTS:
                raise NoSolution(f"the clauses have more than {MAX_POINTS} points at these "
                                 "sizes: give smaller sizes")
            env = dict(zip(c["vars"], point, strict=True))
            if not all(self.inbounds(ld, env) is True for ld in direct):
                continue
            value, ok = self.ev(c["cond"], env)
            self.require(_and(ok, value), c)

    def predicate(self, c: Mapping[str, Any]) -> None:
        var = c["vars"][0]
        lo, hi = requires_eval._scalar(c["lo"], self.sizes), requires_eval._scalar(
            c["hi"], self.sizes)
        direct = requires_eval._direct(c["value"], [])
        positions, values = [], []
        for p in range(lo, hi):
            env = {var: p}
            if not all(self.inbounds(ld, env) is True for ld in direct):
                continue
            v, ok = self.ev(c["value"], env)
            self.require(ok, c)
            positions.append(p)
            values.append(v)
        if c["kind"] == "sorted":
            for a, b in itertools.pairwise(values):
                self.require(_le(a, b), c)
            return
        vlo = None if c.get("vlo") is None else requires_eval._scalar(c["vlo"], self.sizes)
        vhi = None if c.get("vhi") is None else requires_eval._scalar(c["vhi"], self.sizes)
        onto = c["kind"] == "permutation"
        if vlo is None or vhi is None:  # injective over every value
            if len(values) > MAX_DISTINCT:
                raise NoSolution(f"`{c['text']}` over {len(values)} positions is too large "
                                 "to search")
            if len(values) > 1:
                self.solver.add(z3.Distinct(*values))
            return
        if onto and vhi - vlo > len(positions):
            self.unsat_reason = (f"`{c['text']}` needs {vhi - vlo} values at "
                                 f"{len(positions)} positions")
            self.solver.add(False)
            return
        self.literals += max(0, vhi - vlo) * len(positions)
        if self.literals > MAX_LITERALS:
            raise NoSolution(f"`{c['text']}` is too large to search at these sizes")
        # each value of the range taken at most once (exactly once: permutation), as
        # pseudo-boolean counts: far easier for the solver than an inverse array
        for r in range(vlo, vhi):
            hits = [(_b(v == r), 1) for v in values if not (isinstance(v, int) and v != r)]
            if not hits:
                if onto:
                    self.unsat_reason = f"`{c['text']}`: no position can take {r}"
                    self.solver.add(False)
                continue
            self.solver.add(z3.PbEq(hits, 1) if onto else z3.PbLe(hits, 1))

    def require(self, cond: Any, c: Mapping[str, Any]) -> None:
        if cond is True:
            return
        if cond is False:
            self.unsat_reason = f"`{c['text']}` fails whatever the data"
        self.solver.add(cond)

    def solve(self, assumptions: list[Any], timeout_ms: int = TIMEOUT_MS
              ) -> z3.ModelRef | None:
        """A model with `assumptions` too (each behind a fresh literal assumed for this
        query only: cheaper than push/pop over a large problem), or None."""
        lits = []
        for a in assumptions:
            lit = z3.Bool(f"try_{next(self.fresh)}")
            self.solver.add(z3.Implies(lit, a))
            lits.append(lit)
        self.solver.set("timeout", timeout_ms)
        try:
            result = self.solver.check(*lits)
        finally:
            self.solver.set("timeout", TIMEOUT_MS)
        if result == z3.sat:
            return self.solver.model()
        if result == z3.unsat and not assumptions:
            self.decided_unsat = True
        if result == z3.unknown and not assumptions:
            self.unsat_reason = self.unsat_reason or (
                f"the solver gave up ({self.solver.reason_unknown()})")
        return None

    def why_not(self) -> str:
        return self.unsat_reason or "the clauses have no solution at these sizes"


def _culprit(kernel: ir.Kernel, sizes: Mapping[str, int], shapes: Mapping[str, tuple[int, ...]],
             names: list[str], clauses: Sequence[Mapping[str, Any]],
             fixed: Mapping[str, Mapping[tuple[int, ...], int]] | None) -> int:
    """The first clause whose addition makes the clauses before it unsatisfiable (what a
    diagnostic should point at); 0 when no prefix is decided unsatisfiable."""
    for k in range(1, len(clauses)):
        enc = _Encoding(kernel, sizes, shapes, names)
        for c in clauses[:k]:
            enc.clause(c)
        for name, elems in (fixed or {}).items():
            for idx, value in elems.items():
                enc.solver.add(enc.element(name, tuple(idx)) == int(value))
        if enc.solve([]) is None:
            return k - 1 if enc.decided_unsat else 0
    return len(clauses) - 1


def _leaves(c: Mapping[str, Any]) -> list[list[Any]]:
    out: list[list[Any]] = []

    def walk(f: Any) -> None:
        if isinstance(f, list) and f:
            if f[0] in ("int", "size"):
                out.append(f)
            for x in f[1:]:
                walk(x)

    for key in ("cond", "lo", "hi", "value", "vlo", "vhi"):
        walk(c.get(key))
    return out


def _b(x: Any) -> Any:
    return z3.BoolVal(x) if isinstance(x, bool) else x


def _and(*xs: Any) -> Any:
    parts = []
    for x in xs:
        if x is True:
            continue
        if x is False:
            return False
        parts.append(x)
    if not parts:
        return True
    return parts[0] if len(parts) == 1 else z3.And(*parts)


def _or(*xs: Any) -> Any:
    parts = []
    for x in xs:
        if x is False:
            continue
        if x is True:
            return True
        parts.append(x)
    if not parts:
        return False
    return parts[0] if len(parts) == 1 else z3.Or(*parts)


def _implies(a: Any, b: Any) -> Any:
    if a is False:
        return True
    if a is True:
        return b
    return z3.Implies(a, b)


def _le(a: Any, b: Any) -> Any:
    if isinstance(a, int) and isinstance(b, int):
        return a <= b
    return a <= b


def _arith(op: str, a: Any, b: Any) -> Any:
    if isinstance(a, int) and isinstance(b, int) and not isinstance(a, bool):
        return requires_eval._binop(op, a, b) if op not in ("==", "!=", "<", "<=", ">",
                                                             ">=") else \
            bool(requires_eval._binop(op, a, b))
    if op == "/":
        return a / b  # z3 integer division: floor for the positive divisors clauses allow
    if op == "%":
        return a % b
    return requires_eval._binop(op, a, b)
