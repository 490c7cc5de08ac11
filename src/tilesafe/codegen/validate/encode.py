"""Terms -> z3.

Bit-vector terms keep their width. Integer terms (the specification) are encoded as
bit-vectors of a width W chosen per query by interval analysis so that every integer
sub-term's value fits: with every leaf bounded (its range is asserted), the W-bit
arithmetic is then exactly integer arithmetic, and bit-vector solving stays decidable and
fast (z3's integer/bit-vector conversions are not).

Products of two non-constant values (the row-major flat index: extent x index) are
uninterpreted functions `mul_W` by default: equal factors give equal products, which is all
an address proof needs, and it keeps multipliers out of the bit-blaster. A model found
under that abstraction is confirmed by evaluating it with exact products; when it does not
survive, the query is re-run with real multiplication (`real_products`).
"""

from __future__ import annotations

import z3

from tilesafe.codegen.validate import terms as T
from tilesafe.codegen.validate.terms import BOOL, INT, Term

Interval = tuple[int, int]
# Ranges narrowed by a question's hypotheses (narrow.py): leaf name -> (the reading the
# range is of: signed?, lo, hi). Valid only inside questions that assume those hypotheses.
Bounds = dict[str, tuple[bool, int, int]]


def _bits(lo: int, hi: int) -> int:
    b = 1
    while not (-(1 << (b - 1)) <= lo and hi < (1 << (b - 1))):
        b += 1
    return b


def encode_bits(t: Term, signed: bool) -> int:
    """Bits of `t` the encoding reads: all of them, except for a leaf whose asserted
    range fits fewer (signed leaves keep a sign bit), which makes the reading exact."""
    if t.op != "leaf":
        return t.w
    return narrow_bits(t, signed)


def leaf_range(t: Term, signed: bool, bounds: Bounds | None = None) -> Interval:
    """Range of a bit-vector leaf read as a signed or unsigned integer (narrowed by `bounds`
    where given)."""
    w = t.w
    full = (-(1 << (w - 1)), (1 << (w - 1)) - 1) if signed else (0, (1 << w) - 1)
    if t.op != "leaf":
        return full
    info = T.leaf_info(str(t.val))
    if info.lo is None or info.hi is None:
        return full
    declared, lo, hi = (bounds or {}).get(str(t.val), (info.signed, info.lo, info.hi))
    if declared == signed or (lo >= 0 and hi < (1 << (w - 1))):
        return (lo, hi)
    return full


def intervals(roots: list[Term], bounds: Bounds | None = None) -> dict[int, Interval]:
    out: dict[int, Interval] = {}
    for t in T.postorder(roots):
        if t.w != INT:
            continue
        a = [out.get(id(x)) for x in t.args]
        op = t.op
        if op == "const":
            v = int(t.val)  # type: ignore[arg-type]
            r = (v, v)
        elif op in ("sint", "uint"):
            r = leaf_range(t.args[0], op == "sint", bounds)
        elif op == "iadd":
            r = (a[0][0] + a[1][0], a[0][1] + a[1][1])
        elif op == "isub":
            r = (a[0][0] - a[1][1], a[0][1] - a[1][0])
        elif op == "imul":
            c = [x * y for x in a[0] for y in a[1]]
            r = (min(c), max(c))
        elif op == "ifdiv":
            d = t.args[1]
            if d.is_const and int(d.val) > 0:  # type: ignore[arg-type]
                k = int(d.val)  # type: ignore[arg-type]
                r = (a[0][0] // k, a[0][1] // k)
            else:
                m = max(abs(a[0][0]), abs(a[0][1]))
                r = (-m, m)
        elif op == "ifmod":
            d = t.args[1]
            if d.is_const and int(d.val) > 0:  # type: ignore[arg-type]
                k = int(d.val)  # type: ignore[arg-type]
                r = a[0] if 0 <= a[0][0] and a[0][1] < k else (0, k - 1)
            else:
                m = max(abs(a[1][0]), abs(a[1][1]))
                r = (-m, m)
        elif op in ("imin", "imax"):
            f = min if op == "imin" else max
            r = (f(a[0][0], a[1][0]), f(a[0][1], a[1][1]))
        elif op == "iabs":
            lo, hi = a[0]
            r = (0 if lo <= 0 <= hi else min(abs(lo), abs(hi)), max(abs(lo), abs(hi)))
        elif op == "ite":
            r = (min(a[1][0], a[2][0]), max(a[1][1], a[2][1]))
        elif op == "ixor":
            top = max(_bits(*a[0]), _bits(*a[1]))
            if a[0][0] >= 0 and a[1][0] >= 0:
                r = (0, (1 << (top - 1)) - 1)
            else:
                r = (-(1 << (top - 1)), (1 << (top - 1)) - 1)
        else:
            raise AssertionError(op)
        out[id(t)] = r
    return out


def narrow_bits(t: Term, signed: bool) -> int:
    """How many low bits of a bit-vector hold its whole integer reading (fewer than its
    width for a leaf whose asserted range is small: `param:s_N` in 1 .. 2^20)."""
    lo, hi = leaf_range(t, signed)
    if signed:
        return min(t.w, _bits(lo, hi))
    return min(t.w, max(1, hi.bit_length()))


def width_for(roots: list[Term]) -> int:
    """A width in which every integer sub-term is exact (and bit-vectors read as integers
    fit with room for their sign)."""
    w = 34
    for t in T.postorder(roots):
        if t.op in ("sint", "uint"):
            w = max(w, narrow_bits(t.args[0], t.op == "sint") + 2)
        elif t.op == "mul" and not t.args[0].is_const and not t.args[1].is_const:
            w = max(w, t.w + 2)
    for lo, hi in intervals(roots).values():
        w = max(w, _bits(lo, hi) + 1)
    return w


class Encoder:
    def __init__(self, width: int, real_products: bool = False,
                 ranges: dict[int, Interval] | None = None) -> None:
        self.W = width
        self.real = real_products
        self.ranges = ranges or {}
        self.lemmas: list[z3.ExprRef] = []
        self.memo: dict[int, z3.ExprRef] = {}
        self.funcs: dict[tuple, z3.FuncDeclRef] = {}
        self.leaves: dict[str, z3.ExprRef] = {}

    def sort(self, w: int) -> z3.SortRef:
        if w == BOOL:
            return z3.BoolSort()
        return z3.BitVecSort(self.W if w == INT else w)

    def func(self, name: str, args: tuple[Term, ...], w: int) -> z3.FuncDeclRef:
        key = (name, tuple(a.w for a in args), w)
        f = self.funcs.get(key)
        if f is None:
            sig = [self.sort(a.w) for a in args] + [self.sort(w)]
            tag = "_".join(str(a.w) for a in args)
            f = self.funcs[key] = z3.Function(f"{name}#{tag}#{w}", *sig)
        return f

    def mul(self, a: z3.ExprRef, b: z3.ExprRef) -> z3.ExprRef:
        if self.real:
            return a * b
        f = self.funcs.get(("*mul*",))
        if f is None:
            s = z3.BitVecSort(self.W)
            f = self.funcs[("*mul*",)] = z3.Function(f"mul{self.W}", s, s, s)
        return f(a, b)

    def __call__(self, t: Term) -> z3.ExprRef:
        for u in T.postorder([t]):
            if id(u) not in self.memo:
                self.memo[id(u)] = self._enc(u)
        return self.memo[id(t)]

    def _enc(self, t: Term) -> z3.ExprRef:
        op, W = t.op, self.W
        a = [self.memo[id(x)] for x in t.args]
        if op == "const":
            if t.w == BOOL:
                return z3.BoolVal(bool(t.val))
            return z3.BitVecVal(int(t.val), W if t.w == INT else t.w)  # type: ignore[arg-type]
        if op == "leaf":
            name = str(t.val)
            v = self.leaves.get(name)
            if v is None:
                v = z3.Bool(name) if t.w == BOOL else z3.BitVec(name, t.w)
                self.leaves[name] = v
            return v
        if op == "add" or op == "iadd":
            return a[0] + a[1]
        if op == "sub" or op == "isub":
            return a[0] - a[1]
        if op in ("mul", "imul"):
            if t.args[0].is_const or t.args[1].is_const:
                return a[0] * a[1]
            if op == "imul":
                prod = self.mul(a[0], a[1])
                r = self.ranges.get(id(t))
                if r is not None and not self.real:
                    # what real multiplication guarantees, from the factors' ranges
                    self.lemmas.append(z3.And(prod >= z3.BitVecVal(r[0], W),
                                              prod <= z3.BitVecVal(r[1], W)))
                return prod
            if self.real:
                return a[0] * a[1]
            ext = W - t.w
            return z3.Extract(t.w - 1, 0, self.mul(z3.SignExt(ext, a[0]), z3.SignExt(ext, a[1])))
        if op == "and":
            return a[0] & a[1]
        if op == "or":
            return a[0] | a[1]
        if op in ("xor", "ixor"):
            return a[0] ^ a[1]
        if op == "not":
            return z3.Not(a[0]) if t.w == BOOL else ~a[0]
        if op == "neg":
            return -a[0]
        if op == "shl":
            return a[0] << a[1]
        if op == "lshr":
            return z3.LShR(a[0], a[1])
        if op == "ashr":
            return a[0] >> a[1]
        if op in ("smin", "imin"):
            return z3.If(a[0] < a[1], a[0], a[1])
        if op in ("smax", "imax"):
            return z3.If(a[0] < a[1], a[1], a[0])
        if op == "umin":
            return z3.If(z3.ULT(a[0], a[1]), a[0], a[1])
        if op == "umax":
            return z3.If(z3.ULT(a[0], a[1]), a[1], a[0])
        if op in ("abs", "iabs"):
            return z3.If(a[0] < 0, -a[0], a[0])
        if op == "sdiv":
            return a[0] / a[1]
        if op == "srem":
            return z3.SRem(a[0], a[1])
        if op == "udiv":
            return z3.UDiv(a[0], a[1])
        if op == "urem":
            return z3.URem(a[0], a[1])
        if op == "sext":
            return z3.SignExt(t.w - t.args[0].w, a[0])
        if op == "zext":
            return z3.ZeroExt(t.w - t.args[0].w, a[0])
        if op == "trunc":
            return z3.Extract(t.w - 1, 0, a[0])
        if op in ("sint", "uint"):
            x = t.args[0]
            k = encode_bits(x, op == "sint")
            low = a[0] if k == x.w else z3.Extract(k - 1, 0, a[0])
            return z3.SignExt(W - k, low) if op == "sint" else z3.ZeroExt(W - k, low)
        if op == "ite":
            return z3.If(a[0], a[1], a[2])
        if op == "tobv":
            return (z3.Extract(t.w - 1, 0, a[0]) if W >= t.w
                    else z3.SignExt(t.w - W, a[0]))
        if op in ("eq", "ieq"):
            return a[0] == a[1]
        if op in ("slt", "ilt"):
            return a[0] < a[1]
        if op in ("sle", "ile"):
            return a[0] <= a[1]
        if op == "ult":
            return z3.ULT(a[0], a[1])
        if op == "ule":
            return z3.ULE(a[0], a[1])
        if op == "and_":
            return z3.And(*a)
        if op == "or_":
            return z3.Or(*a)
        if op == "ineg":
            return -a[0]
        if op == "ifdiv":
            return self._floor(t, a, quotient=True)
        if op == "ifmod":
            return self._floor(t, a, quotient=False)
        if op == "uf":
            return self.func(str(t.val), t.args, t.w)(*a)
        raise AssertionError(op)

    def _floor(self, t: Term, a: list[z3.ExprRef], quotient: bool) -> z3.ExprRef:
        x, y = a
        d = t.args[1]
        if d.is_const:
            c = T.signed(int(d.val), self.W) if d.w != INT else int(d.val)  # type: ignore
            if c > 0 and c & (c - 1) == 0:
                k = c.bit_length() - 1
                return x >> k if quotient else x & (c - 1)
            if c > 0:
                lo, hi = self.ranges.get(id(t.args[0]), (-(1 << (self.W - 1)), 0))
                if lo >= 0:  # a divider as narrow as the dividend
                    k = max(hi.bit_length(), c.bit_length()) + 1
                    if k < self.W:
                        xs, ys = z3.Extract(k - 1, 0, x), z3.BitVecVal(c, k)
                        r = z3.UDiv(xs, ys) if quotient else z3.URem(xs, ys)
                        return z3.ZeroExt(self.W - k, r)
                    return z3.UDiv(x, y) if quotient else z3.URem(x, y)
                q, r = x / y, z3.SRem(x, y)
                return z3.If(r < 0, q - 1, q) if quotient else z3.If(r < 0, r + y, r)
        q, r = x / y, z3.SRem(x, y)
        fix = z3.And(r != 0, (r < 0) != (y < 0))
        return z3.If(fix, q - 1, q) if quotient else z3.If(fix, r + y, r)


def leaf_constraints(enc: Encoder, roots: list[Term]) -> list[z3.ExprRef]:
    """The asserted range and alignment of every bounded leaf of the query."""
    out = []
    for t in T.leaves(roots):
        if t.w <= 0:
            continue
        info = T.leaf_info(str(t.val))
        x = enc(t)
        if info.lo is not None and info.hi is not None:
            if info.signed:
                lo, hi = info.lo, info.hi
                if lo > -(1 << (t.w - 1)):
                    out.append(x >= z3.BitVecVal(lo, t.w))
                if hi < (1 << (t.w - 1)) - 1:
                    out.append(x <= z3.BitVecVal(hi, t.w))
            else:
                if info.lo > 0:
                    out.append(z3.UGE(x, z3.BitVecVal(info.lo, t.w)))
                if info.hi < (1 << t.w) - 1:
                    out.append(z3.ULE(x, z3.BitVecVal(info.hi, t.w)))
        if info.align > 1:
            out.append(x & (info.align - 1) == 0)
    return out
