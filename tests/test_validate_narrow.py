"""Hypothesis-narrowed leaf ranges (codegen/validate/narrow.py) let lift.py read a PTX address
computation as the integer it stands for only where no register can wrap.

The property test builds random PTX-like computations (32-bit registers: products, shifts,
masks, sign extension) under random bounds on their leaves and checks every integer reading
lift.py gives against concrete evaluation at points that satisfy the bounds, the corners
included. The examples pin the case this exists for (a rank-3 row-major address in 32-bit
registers, corpus/good/batched_copy.tsk) and the wrap-arounds it must not read away.
"""

from __future__ import annotations

import random

from hypothesis import find, given, settings
from hypothesis import strategies as st

from tilesafe.codegen.validate import lift, narrow
from tilesafe.codegen.validate import terms as T
from tilesafe.codegen.validate.terms import LeafInfo


def _leaves(size_hi: int) -> dict[str, T.Term]:
    """Sizes, block.z, a loop counter and the thread with the validator's kinds of ranges:
    declared ranges as wide as the launch contract, the narrow facts only in hypotheses."""
    out = {name: T.leaf(f"t{size_hi}:s_{name}", 64, LeafInfo("int", True, 1, 2**40 - 1))
           for name in "BMN"}
    out["z"] = T.leaf("t:ctaid.z", 32, LeafInfo("int", False, 0, 65534))
    out["n"] = T.leaf("t:n", 64, LeafInfo("int", False, 0, 2**64 - 1))
    out["tid"] = T.leaf("t:tid", 32, LeafInfo("int", False, 0, 127))
    return out


def _hyps(v: dict[str, T.Term], size_hi: int) -> list[T.Term]:
    out = [T.ilt(T.uint(v["z"]), T.sint(v["B"])), T.ilt(T.uint(v["n"]), T.const_int(32)),
           T.ile(T.sint(v["B"]), T.const_int(64))]
    return out + [T.ile(T.sint(v[s]), T.const_int(size_hi)) for s in "MN"]


def _rank3(v: dict[str, T.Term]) -> tuple[T.Term, T.Term]:
    """The byte offset of a [B, M, N] f16 store: PTX in 32-bit registers, IR in integers."""
    m32, n32 = T.trunc(v["M"], 32), T.trunc(v["N"], 32)
    idx = T.add(T.mul(T.trunc(v["n"], 32), T.bv(128, 32)), v["tid"])
    row, col = T.ashr(idx, T.bv(6, 32)), T.band(idx, T.bv(63, 32))
    ptx = T.mul(T.sext(T.add(T.mul(T.add(T.mul(v["z"], m32), row), n32), col), 64),
                T.bv(2, 64))
    iidx = T.iadd(T.imul(T.uint(v["n"]), T.const_int(128)), T.uint(v["tid"]))
    irow, icol = T.ifdiv(iidx, T.const_int(64)), T.ifmod(iidx, T.const_int(64))
    ir = T.imul(T.iadd(T.imul(T.iadd(T.imul(T.uint(v["z"]), T.sint(v["M"])), irow),
                              T.sint(v["N"])), icol), T.const_int(2))
    return ptx, ir


def test_rank3_address_in_32_bits_reads_as_the_specifications_integer():
    v = _leaves(4096)
    ptx, ir = _rank3(v)
    bounds = narrow.bounds_from(_hyps(v, 4096))
    assert bounds["t:n"] == (False, 0, 31) and bounds["t:ctaid.z"] == (False, 0, 63)
    assert lift.modular(ptx, bounds) is ir  # the same hash-consed term: nothing to solve


def test_no_integer_reading_where_a_register_can_wrap():
    v = _leaves(4096)
    ptx, _ = _rank3(v)
    assert lift.modular(ptx) is None  # declared ranges: block.z to 65534, counter to 2^64
    w = _leaves(2**20)
    ptx, _ = _rank3(w)  # B * M * N up to 2^46: the 32-bit products wrap
    assert lift.modular(ptx, narrow.bounds_from(_hyps(w, 2**20))) is None


def test_bounds_follow_from_comparisons_with_known_intervals_only():
    x = T.leaf("t:x", 32, LeafInfo("int", True, -(2**31), 2**31 - 1))
    y = T.leaf("t:y", 32, LeafInfo("nondet"))
    # x < y with y anything: only what the 32-bit reading of y allows
    assert narrow.bounds_from([T.ilt(T.sint(x), T.sint(y))])["t:x"] == (True, -(2**31),
                                                                          2**31 - 2)
    assert narrow.bounds_from([T.ile(T.const_int(-5), T.sint(x)),
                               T.ile(T.sint(x), T.const_int(7))]) == {"t:x": (True, -5, 7)}
    # the unsigned reading below 9: bits 0..8, so the signed reading is 0..8 as well
    b = narrow.bounds_from([T.ilt(T.uint(x), T.const_int(9))])
    assert b == {"t:x": (False, 0, 8)}
    assert lift.exact(T.sext(x, 64), b) is T.sint(x)
    # an empty range (contradictory hypotheses) narrows nothing
    assert narrow.bounds_from([T.ilt(T.sint(x), T.const_int(-(2**31)))]) == {}



def _persistent(v: dict[str, T.Term]) -> tuple[T.Term, T.Term]:
    """The column of a persistent kernel's store, c = (block.x + 4 t) * 64 + lane, in 32-bit
    registers (PTX) and in integers (IR), and the loop's execution condition as the
    specification states it: one conjunction, t < (N / 64 - block.x + 3) / 4 among others."""
    bx = T.leaf("t:ctaid.x", 32, LeafInfo("int", False, 0, 2**31 - 2))
    col = T.add(T.shl(T.add(bx, T.mul(T.trunc(v["n"], 32), T.bv(4, 32))), T.bv(6, 32)),
                T.band(v["tid"], T.bv(63, 32)))
    trips = T.ifdiv(T.iadd(T.isub(T.ifdiv(T.sint(v["N"]), T.const_int(64)), T.uint(bx)),
                           T.const_int(3)), T.const_int(4))
    cond = T.and_(T.ilt(T.uint(v["n"]), trips), T.ilt(T.uint(bx), T.const_int(4)),
                  T.ile(T.const_int(32), T.uint(v["tid"])))
    return T.sext(col, 64), cond


def test_facts_inside_an_execution_condition_narrow_the_loop_counter():
    """An execution condition is one conjunction (loops, role, guards); its loop bound is
    what keeps the counter of `for t in 0 .. (N / 64 - block.x + 3) / 4` small. Read only at
    the top level, the counter kept its declared range (to 2^64), the 32-bit column had no
    integer reading, and the store's address went to the bit-blaster, which timed out
    (TS721 unknown after 10 s on corpus/good/persistent_strided.tsk)."""
    v = _leaves(2**20)
    col, cond = _persistent(v)
    size = T.ile(T.sint(v["N"]), T.const_int(2**20))
    bounds = narrow.bounds_from([size, cond])
    assert bounds["t:n"] == (False, 0, 4095) and bounds["t:ctaid.x"] == (False, 0, 3)
    assert lift.exact(col, bounds) is not None
    # a disjunction is not a fact: nothing inside it narrows
    either = T.or_(T.ilt(T.uint(v["n"]), T.const_int(4)), T.ilt(T.uint(v["n"]),
                                                                T.const_int(8)))
    assert "t:n" not in narrow.bounds_from([either])
    # with N unbounded the column may wrap 32 bits: still no reading
    assert lift.exact(col, narrow.bounds_from([cond])) is None

# -- random terms under random bounds, checked by evaluation ---------------------------------

LEAVES = [T.leaf(f"r:{i}", 32, LeafInfo("int", i % 2 == 0, lo, hi))
          for i, (lo, hi) in enumerate([(-(2**31), 2**31 - 1), (0, 2**32 - 1),
                                        (-(2**31), 2**31 - 1), (0, 2**32 - 1)])]


def _term(draw: st.DrawFn, depth: int) -> T.Term:
    if depth == 0 or draw(st.integers(0, 3)) == 0:
        if draw(st.booleans()):
            return T.bv(draw(st.integers(-50, 50)), 32)
        return LEAVES[draw(st.integers(0, len(LEAVES) - 1))]
    op = draw(st.sampled_from(["add", "sub", "mul", "shl", "ashr", "lshr", "and", "xor"]))
    a = _term(draw, depth - 1)
    if op in ("shl", "ashr", "lshr", "and"):
        k = draw(st.integers(1, 12))
        c = (1 << k) - 1 if op == "and" else k
        return {"shl": T.shl, "ashr": T.ashr, "lshr": T.lshr, "and": T.band}[op](a, T.bv(c, 32))
    b = _term(draw, depth - 1)
    return {"add": T.add, "sub": T.sub, "mul": T.mul, "xor": T.bxor}[op](a, b)


@st.composite
def bounded_terms(draw: st.DrawFn) -> tuple[T.Term, list[T.Term], list[tuple[int, int]]]:
    t = _term(draw, 3)
    hyps, ranges = [], []
    for i, leaf in enumerate(LEAVES):
        lo = draw(st.integers(-300, 300)) if i % 2 == 0 else draw(st.integers(0, 300))
        hi = lo + draw(st.sampled_from([0, 3, 100, 5000, 2**20]))
        reading = T.sint(leaf) if i % 2 == 0 else T.uint(leaf)
        hyps += [T.ile(T.const_int(lo), reading), T.ile(reading, T.const_int(hi))]
        ranges.append((lo, hi))
    return T.sext(t, 64), hyps, ranges


@settings(max_examples=300, deadline=None)
@given(bounded_terms(), st.integers(0, 2**16))
def test_an_integer_reading_equals_the_register_wherever_the_hypotheses_hold(case, seed):
    t, hyps, ranges = case
    reading = lift.exact(t, narrow.bounds_from(hyps))
    if reading is None:
        return
    rng = random.Random(seed)
    for k in range(30):
        m = {id(leaf): T.bv((lo, hi)[k % 2] if k < 2 else rng.randint(lo, hi), 32)
             for leaf, (lo, hi) in zip(LEAVES, ranges, strict=True)}
        value, want = T.substitute([t, reading], m)
        assert T.sval(value) == int(want.val)


def test_the_generator_reaches_readings_through_products_and_masks():
    """The property above is not vacuous: readings of terms with a product and a mask exist."""
    def rich(case) -> bool:
        t, hyps, _ = case
        ops = {x.op for x in T.postorder([t])}
        return {"mul", "and"} <= ops and lift.exact(t, narrow.bounds_from(hyps)) is not None
    t, hyps, _ = find(bounded_terms(), rich, settings=settings(max_examples=5000,
                                                                 deadline=None))
    assert lift.exact(t, narrow.bounds_from(hyps)) is not None
