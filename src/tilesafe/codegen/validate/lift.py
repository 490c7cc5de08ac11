"""The integer a PTX bit-vector computation stands for, when it provably stands for one.

Why: a global address is `gbase + offset` in 64-bit registers, the specification's offset an
exact integer with products of extents and indices. Asking a bit-blaster whether the two
agree makes it relate two different multiplier-shaped computations; rewriting the PTX side
into integer arithmetic first makes both sides the same expression up to association, which
the solver settles at once.

Two views of a w-bit term t:

* `modular(t)`: an integer L with L = t (mod 2^w). Addition, subtraction, multiplication and
  truncation keep this without any condition (they are ring operations modulo 2^w), which is
  all a 64-bit address needs;
* `exact(t)`: an integer equal to t's signed value. Needed below a sign extension, a shift,
  a mask or a comparison; established by interval analysis over the leaves' asserted ranges
  (encode.intervals), so it never assumes anything a query does not assert: the leaves'
  declared ranges, narrowed by the question's hypotheses where the caller passes them
  (narrow.py).

Anything else (xor of non-exact values, division, ite, floats) has no view: the caller then
keeps the bit-vector encoding.

Where interval analysis cannot show a reading exact, `modular_deferred` returns the reading
together with the range conditions it rests on (`Fit`s): the caller proves them as a
separate question in integer arithmetic (nia.py) -- a no-overflow obligation -- and uses
the reading only if they hold. Intervals forget relations between leaves: a row-major
index row * N + col in 32-bit registers is below 2^31 because row < M, col < N and
M * N <= 2^31, which no product of intervals shows.
"""

from __future__ import annotations

from dataclasses import dataclass

from tilesafe.codegen.validate import encode
from tilesafe.codegen.validate import terms as T
from tilesafe.codegen.validate.terms import Term


@dataclass(frozen=True)
class Fit:
    """The condition lo <= term <= hi (integers) on which a deferred reading rests."""

    term: Term
    lo: int
    hi: int


class _Lifter:
    def __init__(self, bounds: encode.Bounds | None = None, defer: bool = False) -> None:
        self.mod: dict[int, Term | None] = {}
        self.ex: dict[int, Term | None] = {}
        self.bounds = bounds or {}
        self.defer = defer
        self.pending: list[Fit] = []

    def fits(self, x: Term, w: int, signed: bool = True) -> bool:
        if x.w != T.INT:
            return False
        lo, hi = encode.intervals([x], self.bounds)[id(x)]
        want = (-(1 << (w - 1)), (1 << (w - 1)) - 1) if signed else (0, (1 << w) - 1)
        if want[0] <= lo and hi <= want[1]:
            return True
        if self.defer:
            self.pending.append(Fit(x, *want))
            return True
        return False

    def modular(self, t: Term) -> Term | None:
        if id(t) in self.mod:
            return self.mod[id(t)]
        r = self._modular(t)
        self.mod[id(t)] = r
        return r

    def _modular(self, t: Term) -> Term | None:
        op = t.op
        if op in ("add", "sub", "mul"):
            a, b = (self.modular(x) for x in t.args)
            if a is None or b is None:
                return None
            return {"add": T.iadd, "sub": T.isub, "mul": T.imul}[op](a, b)
        if op == "neg":
            a = self.modular(t.args[0])
            return None if a is None else T.ineg(a)
        if op == "shl" and t.args[1].is_const and int(t.args[1].val) < t.w:  # type: ignore
            a = self.modular(t.args[0])
            return None if a is None else T.imul(a, T.const_int(1 << int(t.args[1].val)))
        if op == "trunc":
            return self.modular(t.args[0])
        return self.exact(t)

    def exact(self, t: Term) -> Term | None:
        if id(t) in self.ex:
            return self.ex[id(t)]
        r = self._exact(t)
        if r is not None and not self.fits(r, t.w):
            r = None
        self.ex[id(t)] = r
        return r

    def _exact(self, t: Term) -> Term | None:
        op = t.op
        if t.w <= 0:
            return None
        if op == "const":
            return T.const_int(T.sval(t))
        if op == "leaf":
            info = T.leaf_info(str(t.val))
            if not info.signed and info.hi is not None and \
                    encode.leaf_range(t, False, self.bounds)[1] < (1 << (t.w - 1)):
                return T.uint(t)  # the reading the specification uses for it
            return T.sint(t)
        if op == "sext":
            return self.exact(t.args[0])
        if op == "zext":
            a = self.exact(t.args[0])
            return a if a is not None and self.fits(a, t.args[0].w, signed=False) else None
        if op in ("add", "sub", "mul", "neg", "shl", "trunc"):
            return self._modular(t)  # exact when its value fits (checked by the caller)
        if op in ("ashr", "lshr") and t.args[1].is_const:
            a = self.exact(t.args[0])
            k = int(t.args[1].val)  # type: ignore[arg-type]
            if a is None or k >= t.w or (op == "lshr" and not self.fits(a, t.w, False)):
                return None
            return T.ifdiv(a, T.const_int(1 << k))
        if op == "and" and t.args[1].is_const:
            a = self.exact(t.args[0])
            return None if a is None else _mask(a, T.sval(t.args[1]), t.w)
        if op in ("smin", "smax"):
            a, b = (self.exact(x) for x in t.args)
            if a is None or b is None:
                return None
            return T.imin(a, b) if op == "smin" else T.imax(a, b)
        if op == "xor":
            a, b = (self.exact(x) for x in t.args)
            return None if a is None or b is None else T.ixor(a, b)
        return None


def _mask(x: Term, m: int, w: int) -> Term | None:
    """x & m for a constant m, on exact integers: each run of ones [lo, hi) of m keeps
    floor(x / 2^lo) mod 2^(hi - lo) (two's complement, any sign); a run reaching the sign
    bit keeps floor(x / 2^lo) * 2^lo."""
    if m == -1:
        return x
    acc = T.const_int(0)
    bit = 0
    while bit < w:
        if not (m >> bit) & 1:
            bit += 1
            continue
        start = bit
        while bit < w and (m >> bit) & 1:
            bit += 1
        scaled = T.ifdiv(x, T.const_int(1 << start))
        if bit >= w and m < 0:
            part = scaled  # the run goes on through the sign
        else:
            part = T.ifmod(scaled, T.const_int(1 << (bit - start)))
        acc = T.iadd(acc, T.imul(part, T.const_int(1 << start)))
    return acc


def modular(t: Term, bounds: encode.Bounds | None = None) -> Term | None:
    """An integer congruent to t modulo 2^width, or None (`bounds`: narrow.py)."""
    return _Lifter(bounds).modular(t)


def modular_deferred(t: Term, bounds: encode.Bounds | None = None
                     ) -> tuple[Term | None, tuple[Fit, ...]]:
    """Like `modular`, but a reading interval analysis cannot show exact is taken with the
    condition that makes it exact: (reading, conditions), valid where every condition
    holds (the caller proves them), or (None, ()) where there is no integer view at all."""
    lifter = _Lifter(bounds, defer=True)
    r = lifter.modular(t)
    if r is None:
        return None, ()
    return r, tuple(dict.fromkeys(lifter.pending))


def exact(t: Term, bounds: encode.Bounds | None = None) -> Term | None:
    """t's signed value as an integer term, or None when it cannot be shown exact."""
    return _Lifter(bounds).exact(t)
