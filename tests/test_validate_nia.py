"""No-overflow side conditions proved in integer arithmetic (codegen/validate/nia.py) let
lift.py read a PTX address as the integer it stands for where interval analysis cannot.

The examples pin the case this exists for -- a row-major index in 32-bit registers at the
edge of 2^31 elements, below it only because row < M, col < N and M * N <= 2^31 -- and the
wrap-around it must not read away (the same registers when `where` allows one more row).
The property test checks every reading whose conditions are proved against concrete
evaluation; the kernel tests run the whole validator: proved as compiled, refuted with a
concrete counterexample when the same PTX is checked against a looser `where`.
"""

from __future__ import annotations

import random

from hypothesis import find, given, settings
from hypothesis import strategies as st

from tilesafe.checkers.obligation import Verdict
from tilesafe.codegen.compile import compile_kernel
from tilesafe.codegen.validate import lift, narrow, nia, validate_ptx
from tilesafe.codegen.validate import terms as T
from tilesafe.codegen.validate.terms import LeafInfo
from tilesafe.frontend.load import compile_source


def _edge(rows: int) -> tuple[T.Term, list[T.Term]]:
    """The byte offset of dst[row, col] in a [M, N] f16 tensor as a persistent strip walk's
    PTX computes it -- col = (block.x + 132 t) * 64 + lane and row * N + col in 32-bit
    registers, then mul.wide -- and the question's facts: the loop bound, the access in
    bounds, M <= rows, N <= 65536. Leaves have the validator's declared ranges."""
    m = T.leaf(f"n{rows}:s_M", 64, LeafInfo("int", True, 1, 2**40 - 1))
    n = T.leaf(f"n{rows}:s_N", 64, LeafInfo("int", True, 1, 2**40 - 1))
    row = T.leaf(f"n{rows}:row", 32, LeafInfo("int", True, -(2**31), 2**31 - 1))
    bx = T.leaf(f"n{rows}:ctaid.x", 32, LeafInfo("int", False, 0, 2**31 - 2))
    t = T.leaf(f"n{rows}:t", 64, LeafInfo("int", False, 0, 2**64 - 1))
    tid = T.leaf(f"n{rows}:tid", 32, LeafInfo("int", False, 0, 127))
    col = T.add(T.shl(T.add(bx, T.mul(T.trunc(t, 32), T.bv(132, 32))), T.bv(6, 32)),
                T.band(tid, T.bv(63, 32)))
    ptx = T.mul(T.sext(T.add(T.mul(row, T.trunc(n, 32)), col), 64), T.bv(2, 64))
    icol = T.iadd(T.imul(T.iadd(T.uint(bx), T.imul(T.uint(t), T.const_int(132))),
                         T.const_int(64)), T.ifmod(T.uint(tid), T.const_int(64)))
    trips = T.ifdiv(T.iadd(T.isub(T.ifdiv(T.sint(n), T.const_int(64)), T.uint(bx)),
                           T.const_int(131)), T.const_int(132))
    hyps = [T.ilt(T.uint(bx), T.const_int(132)), T.ilt(T.uint(t), trips),
            T.ile(T.const_int(0), T.sint(row)), T.ilt(T.sint(row), T.sint(m)),
            T.ilt(icol, T.sint(n)),
            T.ile(T.sint(m), T.const_int(rows)), T.ile(T.sint(n), T.const_int(65536))]
    return ptx, hyps


def test_flat_index_at_the_edge_of_2_31_reads_exactly_once_its_condition_is_proved():
    ptx, hyps = _edge(32768)
    bounds = narrow.bounds_from(hyps)
    assert lift.modular(ptx, bounds) is None  # intervals: col up to 67583, past N
    reading, fits = lift.modular_deferred(ptx, bounds)
    assert reading is not None and len(fits) == 1
    assert (fits[0].lo, fits[0].hi) == (-(2**31), 2**31 - 1)
    assert nia.prove(hyps, fits, bounds, 2000)


def test_the_condition_is_refused_where_the_register_wraps():
    ptx, hyps = _edge(32769)  # one more row: (M - 1) * N + N - 1 = 2^31 + 65535
    bounds = narrow.bounds_from(hyps)
    reading, fits = lift.modular_deferred(ptx, bounds)
    assert reading is not None and fits
    assert not nia.prove(hyps, fits, bounds, 2000)


def test_conditions_outside_the_integer_fragment_are_not_proved():
    x = T.leaf("o:x", 32, LeafInfo("int", True, -(2**31), 2**31 - 1))
    computed = T.sint(T.add(x, T.bv(1, 32)))  # a reading of a computed register
    fit = lift.Fit(computed, 0, 10)
    assert not nia.prove([T.ile(computed, T.const_int(5))], (fit,), {}, 2000)
    assert nia.prove([], (), {}, 2000)  # nothing to show


# -- random terms: a proved reading equals the register where the hypotheses hold ----------

LEAVES = [T.leaf(f"q:{i}", 32, LeafInfo("int", i % 2 == 0, lo, hi))
          for i, (lo, hi) in enumerate([(-(2**31), 2**31 - 1), (0, 2**32 - 1),
                                        (-(2**31), 2**31 - 1)])]


def _term(draw: st.DrawFn, depth: int) -> T.Term:
    if depth == 0 or draw(st.integers(0, 3)) == 0:
        if draw(st.booleans()):
            return T.bv(draw(st.integers(-50, 50)), 32)
        return LEAVES[draw(st.integers(0, len(LEAVES) - 1))]
    op = draw(st.sampled_from(["add", "sub", "mul", "shl", "ashr", "and"]))
    a = _term(draw, depth - 1)
    if op in ("shl", "ashr", "and"):
        k = draw(st.integers(1, 12))
        c = (1 << k) - 1 if op == "and" else k
        return {"shl": T.shl, "ashr": T.ashr, "and": T.band}[op](a, T.bv(c, 32))
    b = _term(draw, depth - 1)
    return {"add": T.add, "sub": T.sub, "mul": T.mul}[op](a, b)


@st.composite
def related_terms(draw: st.DrawFn) -> tuple[T.Term, list[T.Term], list[tuple[int, int]]]:
    """A 32-bit computation, sign-extended as an address is, under hypotheses that bound
    each leaf and relate two of them (l0 + l2 <= k: a fact intervals cannot use)."""
    t = _term(draw, 3)
    hyps, ranges = [], []
    for i, leaf in enumerate(LEAVES):
        lo = draw(st.integers(-300, 300)) if i % 2 == 0 else draw(st.integers(0, 300))
        hi = lo + draw(st.sampled_from([0, 3, 100, 5000, 2**16, 2**30]))
        reading = T.sint(leaf) if i % 2 == 0 else T.uint(leaf)
        hyps += [T.ile(T.const_int(lo), reading), T.ile(reading, T.const_int(hi))]
        ranges.append((lo, hi))
    k = draw(st.integers(-600, 2**30))
    hyps.append(T.ile(T.iadd(T.sint(LEAVES[0]), T.sint(LEAVES[2])), T.const_int(k)))
    return T.sext(t, 64), hyps, ranges + [(k, k)]


@settings(max_examples=200, deadline=None)
@given(related_terms(), st.integers(0, 2**16))
def test_a_reading_with_proved_conditions_equals_the_register(case, seed):
    t, hyps, ranges = case
    bounds = narrow.bounds_from(hyps)
    reading, fits = lift.modular_deferred(t, bounds)
    if reading is None or not nia.prove(hyps, fits, bounds, 2000):
        return
    *boxes, (k, _) = ranges
    rng = random.Random(seed)
    for _ in range(60):
        values = [rng.choice((lo, hi, rng.randint(lo, hi))) for lo, hi in boxes]
        if values[0] + values[2] > k:
            continue  # outside the hypotheses
        m = {id(leaf): T.bv(v, 32) for leaf, v in zip(LEAVES, values, strict=True)}
        value, want = T.substitute([t, reading], m)
        assert T.sval(value) % 2**64 == int(want.val) % 2**64  # type: ignore[arg-type]


def test_the_generator_reaches_readings_only_the_integer_question_shows():
    """The property above is not vacuous: some readings have no interval proof and are
    taken on the strength of the relating hypothesis."""
    def deferred(case) -> bool:
        t, hyps, _ = case
        bounds = narrow.bounds_from(hyps)
        if lift.modular(t, bounds) is not None:
            return False
        reading, fits = lift.modular_deferred(t, bounds)
        return reading is not None and bool(fits) and nia.prove(hyps, fits, bounds, 2000)
    find(related_terms(), deferred, settings=settings(max_examples=5000, deadline=None))


# -- the whole validator -------------------------------------------------------------------

EDGE = """kernel edge(src: in global f16[M, N], dst: out global f16[M, N])
  where M % 64 == 0, M > 0, M <= 32768, N % 64 == 0, N > 0, N <= 65536
  grid (SMS, M / 64) block 128
{
  const SMS = 132
  for t in 0 .. (N / 64 - block.x + SMS - 1) / SMS {
    let c = (block.x + SMS * t) * 64
    for e in 0 .. 32 {
      let idx = e * 128 + thread
      dst[block.y * 64 + idx / 64, c + idx % 64] = src[block.y * 64 + idx / 64, c + idx % 64]
    }
  }
}
"""


def test_persistent_kernel_at_the_edge_of_2_31_elements_is_proved():
    """A persistent strip walk (132 blocks, the H100's SM count) over at most 2^31
    elements: the flat index is 32-bit (compile picks the width relationally), the
    addresses' no-overflow conditions are proved in integers, every obligation holds.
    Before, both addresses were TS721 unknown after 10 s each."""
    kernel = compile_source(EDGE).kernels[0]
    ptx = compile_kernel(kernel).ptx
    assert "mul.wide.s32" in ptx  # the 32-bit flat index this is about
    obs = validate_ptx(kernel, ptx)
    assert [o for o in obs if o.verdict is not Verdict.PROVED] == []


def test_the_same_ptx_under_a_looser_where_is_refuted():
    """The same PTX checked against M <= 65536: the 32-bit flat index wraps, the side
    condition fails, and the bit-vector question refutes both addresses concretely."""
    ptx = compile_kernel(compile_source(EDGE).kernels[0]).ptx
    loose = compile_source(EDGE.replace("M <= 32768", "M <= 65536")).kernels[0]
    hits = [o for o in validate_ptx(loose, ptx)
            if o.verdict is Verdict.REFUTED and o.code == "TS721"]
    assert len(hits) == 2
    for o in hits:
        cex = o.counterexample
        assert cex["PTX address"] != cex["IR address"] and cex["M"] > 32768
        assert cex["IR address"] >= 2**32  # 2 * (row * N + col) past 2^31 elements
