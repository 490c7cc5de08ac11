"""No-overflow side conditions, decided in integer arithmetic.

Why: lift.py reads a PTX address computation as the integer it stands for only where every
register provably holds its exact value; interval analysis shows that for most code, but it
forgets relations between leaves. A persistent kernel whose `where` clause allows exactly
2^31 elements (M <= 32768, N <= 65536) computes its flat index row * N + col in 32-bit
registers: the value is below 2^31 because row < M, col < N and M * N <= 2^31, while the
intervals of row, N and col (with col = (block.x + 132 t) * 64 + lane bounded only through
the trip count) add up past 2^31. Without the integer view the address went to the
bit-blaster with real multiplication and timed out (TS721 unknown after 10 s).

The conditions are asked as one question over mathematical integers (z3's nonlinear integer
arithmetic): the question's hypotheses that are integer facts (comparisons of integer terms
and their conjunctions, disjunctions and negations; every other hypothesis is dropped,
which only weakens the assumptions) imply lo <= term <= hi for every condition. Leaves are
their readings (signed or unsigned) with the ranges the question asserts. A proof makes the
reading exact for every instance of the question; anything else (a counterexample, a
timeout, a term outside this fragment) leaves the caller on the bit-vector encoding.
"""

from __future__ import annotations

import z3

from tilesafe.codegen.validate import encode
from tilesafe.codegen.validate import terms as T
from tilesafe.codegen.validate.lift import Fit
from tilesafe.codegen.validate.terms import Term


class _Outside(Exception):
    """The term is not in the integer fragment encoded here."""


class _Encoder:
    def __init__(self, bounds: encode.Bounds) -> None:
        self.bounds = bounds
        self.memo: dict[int, z3.ExprRef] = {}
        self.facts: list[z3.ExprRef] = []  # leaf ranges, alignments, reading links
        self.readings: dict[tuple[str, bool], z3.ArithRef] = {}

    def __call__(self, t: Term) -> z3.ExprRef:
        """Children first, without descending below a reading (its leaf is a bit-vector)."""
        stack = [(t, False)]
        while stack:
            u, ready = stack.pop()
            if id(u) in self.memo:
                continue
            if ready or u.op in ("sint", "uint") or not u.args:
                self.memo[id(u)] = self._enc(u)
                continue
            stack.append((u, True))
            stack.extend((x, False) for x in u.args)
        return self.memo[id(t)]

    def _enc(self, t: Term) -> z3.ExprRef:
        op = t.op
        if op == "const" and t.w == T.INT:
            return z3.IntVal(int(t.val))  # type: ignore[arg-type]
        if op == "const" and t.w == T.BOOL:
            return z3.BoolVal(bool(t.val))
        if op in ("sint", "uint"):
            return self._reading(t.args[0], op == "sint")
        if op in ("iadd", "isub", "imul", "imin", "imax", "ilt", "ile", "ieq"):
            a, b = (self.memo[id(x)] for x in t.args)
            return {"iadd": lambda: a + b, "isub": lambda: a - b, "imul": lambda: a * b,
                    "imin": lambda: z3.If(a < b, a, b), "imax": lambda: z3.If(a < b, b, a),
                    "ilt": lambda: a < b, "ile": lambda: a <= b, "ieq": lambda: a == b}[op]()
        if op in ("ifdiv", "ifmod"):
            d = t.args[1]
            if not (d.is_const and int(d.val) > 0):  # type: ignore[arg-type]
                raise _Outside(op)  # z3's div is Euclidean: floor only for d > 0
            a = self.memo[id(t.args[0])]
            return a / int(d.val) if op == "ifdiv" else a % int(d.val)  # type: ignore
        if op == "iabs":
            a = self.memo[id(t.args[0])]
            return z3.If(a < 0, -a, a)
        if op == "and_":
            return z3.And(*[self.memo[id(x)] for x in t.args])
        if op == "or_":
            return z3.Or(*[self.memo[id(x)] for x in t.args])
        if op == "not" and t.w == T.BOOL:
            return z3.Not(self.memo[id(t.args[0])])
        raise _Outside(op)

    def _reading(self, x: Term, signed: bool) -> z3.ArithRef:
        if x.op != "leaf" or x.w <= 0:
            raise _Outside("reading of a computed bit-vector")
        name = str(x.val)
        key = (name, signed)
        r = self.readings.get(key)
        if r is not None:
            return r
        r = z3.Int(f"{name}#{'s' if signed else 'u'}")
        self.readings[key] = r
        lo, hi = encode.leaf_range(x, signed, self.bounds)
        self.facts += [r >= lo, r <= hi]
        info = T.leaf_info(name)
        if info.align > 1:
            self.facts.append(r % info.align == 0)
        other = self.readings.get((name, not signed))
        if other is not None:  # the two readings of one register
            s, u = (r, other) if signed else (other, r)
            half = 1 << (x.w - 1)
            self.facts.append(s == z3.If(u >= half, u - 2 * half, u))
        return r


def prove(hyps: list[Term], fits: tuple[Fit, ...], bounds: encode.Bounds,
          timeout_ms: int) -> bool:
    """Do the integer facts among `hyps` imply every condition of `fits`? True only on a
    proof."""
    if not fits:
        return True
    enc = _Encoder(bounds)
    try:
        goal = z3.And(*[z3.And(enc(f.term) >= f.lo, enc(f.term) <= f.hi) for f in fits])
    except _Outside:
        return False
    facts = []
    for h in hyps:
        try:
            facts.append(enc(h))
        except _Outside:
            continue  # not an integer fact: dropping it only weakens the assumptions
    s = z3.SolverFor("QF_NIA")
    s.set("timeout", max(1, timeout_ms))
    s.add(*facts, *enc.facts, z3.Not(goal))
    try:
        return s.check() == z3.unsat
    except z3.Z3Exception:
        return False
