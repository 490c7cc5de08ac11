"""Inputs and sizes that make value bugs visible when a kernel runs against its spec.

Why not the interpreter's usual random inputs (multiples of 1/4 in [-2, 2]): with only 17
distinct values most elements of a tensor are equal to many others, so a kernel that moves
src[j, i] where src[i, j] belongs often moves the same number, and a refutation could not
say *which* input element arrived. Here every float input element gets a value drawn without
replacement from a pool of distinct, non-zero, finite values of its dtype (zero is left out
so that an out-of-bounds zero fill never looks like data).

Specs with an order-free `sum` get small non-zero integers instead: every partial sum is
then exact in f32, so any order of the contributions gives the same bits, and only the
multiset of contributions (each exactly once) decides the value, which is what such a spec
claims.

Sizes: a few small launches that satisfy `where`, chosen for shape (the cheapest; the one
with the longest loops; the one with the most blocks; a ragged one where `where` allows).
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from enum import Enum

import numpy as np

from tilesafe.frontend import ir
from tilesafe.semantics.expr import evaluate, fp, size_combos
from tilesafe.semantics.interpreter.interp_io import random_inputs
from tilesafe.semantics.interpreter.smem import NUMPY_DTYPE

Sizes = dict[str, int]

CANDIDATE_VALUES = (1, 2, 3, 7, 8, 9, 16, 31, 32, 33, 64, 65, 96, 100, 128, 130, 192, 256,
                    320, 384, 448, 512, 768)
MAX_ELEMENTS = 1 << 18  # all tensors of one launch together
MAX_THREADS = 1 << 13  # threads of one launch: keeps an interpreter run to a few seconds
_MANTISSA = {ir.DType.F16: 10, ir.DType.BF16: 7, ir.DType.F32: 23}
# Binades the values come from (centred on 1): f16 and bf16 need many to have enough
# distinct values; all stay far from overflow in products and short sums.
_EXPONENTS = {ir.DType.F16: 16, ir.DType.BF16: 64, ir.DType.F32: 8}


def distinct_floats(dtype: ir.DType, n: int, rng: np.random.Generator) -> np.ndarray:
    """n values of `dtype` (as float32), pairwise distinct whenever the pool allows."""
    bits, binades = _MANTISSA[dtype], _EXPONENTS[dtype]
    pool = 2 * binades * (1 << bits)
    picks = rng.choice(pool, size=n, replace=n > pool)
    sign = np.where(picks % 2 == 0, 1.0, -1.0)
    rest = picks // 2
    exponent = (rest % binades) - binades // 2
    mantissa = rest // binades
    values = sign * np.ldexp(1.0 + mantissa / float(1 << bits), exponent)
    return values.astype(np.float32)


def small_integers(n: int, rng: np.random.Generator) -> np.ndarray:
    """Non-zero integers in [-8, 8]: exact in every float dtype, and so are their sums."""
    v = rng.integers(1, 9, size=n) * rng.choice((-1, 1), size=n)
    return v.astype(np.float32)


class Profile(str, Enum):
    """Which values the float inputs of a launch get.

    PLAIN    distinct values (or small integers for order-free sums): moved-element and
             arithmetic bugs on ordinary data;
    SPECIAL  the same, with about one element in eight replaced by a special value of the
             IEEE formats: +-inf, NaN, +-0, and (for specs without an order-free sum) the
             smallest subnormal and the largest finite value of the dtype -- a spec term like
             `x * 0.0` or a missing NaN guard differs only there;
    WIDE     small integers times 2^12 (exact in every float dtype, and so are their sums
             and products in f32) whose sums overflow f16: an accumulator narrower than the
             spec's f32 differs only there;
    EDGES    PLAIN everywhere but the corners of every float input (its first and last
             element along each dimension), which all hold one special value, picked by the
             seed (`edge_special`): a spec term at a fixed index (`x[0] * 0.0`,
             `w[N - 1]`) reads a corner, and SPECIAL's random one-in-eight rarely hits it.

    SPECIAL and WIDE keep every result independent of the summation order for order-free
    sums (ints, infinities and NaN add the same in any order; -0 and subnormals, whose
    sums depend on the order, are left out there), so a kernel whose reduction order differs
    from the spec's sequential one is never refuted by them."""

    PLAIN = "plain"
    SPECIAL = "special"
    WIDE = "wide"
    EDGES = "edges"


_SPECIALS_EXACT = (np.inf, -np.inf, np.nan, 0.0)
_LARGEST = {ir.DType.F16: 65504.0, ir.DType.BF16: 3.3895313892515355e38,
            ir.DType.F32: float(np.finfo(np.float32).max)}
_TINIEST = {ir.DType.F16: 2.0 ** -24, ir.DType.BF16: 2.0 ** -133, ir.DType.F32: 2.0 ** -149}


def special_values(dtype: ir.DType, exact: bool) -> tuple[float, ...]:
    """The special values SPECIAL draws from for one dtype (see Profile)."""
    if exact:
        return _SPECIALS_EXACT
    big, tiny = _LARGEST[dtype], _TINIEST[dtype]
    return (*_SPECIALS_EXACT, -0.0, tiny, -tiny, big, -big)


def edge_specials(dtype: ir.DType, exact: bool) -> tuple[float, ...]:
    """The values EDGES puts at the corners, one per seed (`edge_special`): infinities and
    NaN first (an `x * 0.0` term), then -0 and the largest finite value where the spec has no
    order-free sum."""
    if exact:
        return (np.inf, -np.inf, np.nan)
    return (np.inf, -np.inf, np.nan, -0.0, _LARGEST[dtype])


def edge_special(dtype: ir.DType, exact: bool, seed: int) -> float:
    """The special value of EDGES launch `seed`."""
    values = edge_specials(dtype, exact)
    return float(values[seed % len(values)])


def _corners(shape: tuple[int, ...]) -> tuple[tuple[int, ...], ...]:
    """Every element whose index is the first or the last along each dimension."""
    return tuple(itertools.product(*[sorted({0, d - 1}) for d in shape]))


def profile_values(dtype: ir.DType, n: int, rng: np.random.Generator, exact: bool,
                   profile: Profile) -> np.ndarray:
    """n float32 values for an input of `dtype` under `profile`."""
    if profile is Profile.WIDE:
        return small_integers(n, rng) * np.float32(4096.0)
    vals = small_integers(n, rng) if exact else distinct_floats(dtype, n, rng)
    if profile is Profile.SPECIAL and n:
        specials = np.array(special_values(dtype, exact), np.float32)
        hit = rng.random(n) < 0.125
        hit[rng.integers(0, n)] = True  # at least one special value per tensor
        vals = np.where(hit, specials[rng.integers(0, len(specials), size=n)], vals)
    return vals.astype(np.float32)


# `tilesafe run --inputs KIND`: the value checker's inputs by name, so that every refutation
# can be replayed (KIND -> (exact, profile)); spec_run.run_inputs names a launch's kind.
RUN_KINDS: dict[str, tuple[bool, Profile]] = {
    "distinct": (False, Profile.PLAIN),
    "integers": (True, Profile.PLAIN),
    "special": (False, Profile.SPECIAL),
    "special-integers": (True, Profile.SPECIAL),
    "wide": (True, Profile.WIDE),
    "edges": (False, Profile.EDGES),
    "edges-integers": (True, Profile.EDGES),
}


def run_kind(exact: bool, profile: Profile) -> str:
    """The `--inputs` name of the value checker's inputs (exact, profile)."""
    if profile is Profile.WIDE:
        return "wide"
    return next(k for k, v in RUN_KINDS.items() if v == (exact, profile))


def value_inputs(kernel: ir.Kernel, sizes: Mapping[str, int], seed: int,
                 exact: bool, profile: Profile = Profile.PLAIN) -> dict[str, np.ndarray]:
    """Arrays for every global tensor: outputs poisoned as usual
    (semantics/interpreter/interp_io.py), float inputs from `profile` (distinct values, or small
    integers when `exact`)."""
    rng = np.random.default_rng(seed)
    arrays = random_inputs(kernel, sizes, rng)
    for t in kernel.params:
        if not (t.role.defined_on_entry and t.dtype.is_float):
            continue
        shape = arrays[t.name].shape
        n = int(np.prod(shape, dtype=np.int64))
        plain = Profile.PLAIN if profile is Profile.EDGES else profile
        vals = profile_values(t.dtype, n, rng, exact, plain).reshape(shape)
        if profile is Profile.EDGES and n:
            special = np.float32(edge_special(t.dtype, exact, seed))
            for corner in _corners(shape):
                vals[corner] = special
        if t.dtype is ir.DType.BF16:
            arrays[t.name] = fp.f32_array_to_bf16(vals)
        else:
            with np.errstate(over="ignore"):
                arrays[t.name] = vals.astype(NUMPY_DTYPE[t.dtype])
    return arrays


# ---- sizes ------------------------------------------------------------------------------------


def _value(e: ir.Expr, sizes: Mapping[str, int]) -> int:
    return evaluate.eval_sizes(e, sizes)


def _cost(kernel: ir.Kernel, sizes: Mapping[str, int]) -> tuple[int, int] | None:
    """(elements of all tensors, threads of the launch), or None when not launchable."""
    try:
        if not all(bool(_value(w, sizes)) for w in kernel.where):
            return None
        grid = [_value(g, sizes) for g in kernel.grid]
        elems = 0
        for t in kernel.params:
            n = 1
            for d in t.shape:
                extent = _value(d, sizes)
                if extent < 1:
                    return None
                n *= extent
            elems += n
    except (evaluate.EvalError, evaluate.NoValue, KeyError, ZeroDivisionError):
        return None
    if any(g < 1 for g in grid):
        return None
    threads = kernel.block
    for g in grid:
        threads *= g
    return elems, threads


def choose_sizes(kernel: ir.Kernel, k: int = 5) -> list[Sizes]:
    """Up to k launches that satisfy `where`: the cheapest, for each size the launch where
    it is largest (the longest loops over it), the most blocks, and a ragged one (sizes not
    multiples of 8) if allowed."""
    names = kernel.sizes
    found: list[tuple[int, int, Sizes]] = []
    everything: list[tuple[int, int, Sizes]] = []
    for sizes in size_combos.combos(kernel, CANDIDATE_VALUES):
        c = _cost(kernel, sizes)
        if c is not None:
            everything.append((c[0], c[1], sizes))
            if c[0] <= MAX_ELEMENTS and c[1] <= MAX_THREADS:
                found.append((c[0], c[1], sizes))
    if not found:  # nothing small: the cheapest launch there is, if any
        return [min(everything, key=lambda f: (f[0], f[1]))[2]] if everything else []
    found.sort(key=lambda f: (f[0], sorted(f[2].items())))
    picks: list[Sizes] = [found[0][2]]

    def add(best: tuple[int, int, Sizes]) -> None:
        if best[2] not in picks and len(picks) < k:
            picks.append(best[2])

    for name in names:  # stretch every size on its own: loops over it run many times
        add(max(found, key=lambda f: (f[2][name], -f[0])))
    add(max(found, key=lambda f: (f[1], -f[0])))
    ragged = [f for f in found if any(v % 8 for v in f[2].values())]
    if ragged:
        add(max(ragged, key=lambda f: (sum(v % 8 != 0 for v in f[2].values()), f[1], -f[0])))
    return picks


def more_sizes(kernel: ir.Kernel, seen: list[Sizes], k: int = 6) -> list[Sizes]:
    """Up to k further small launches, for a clause nothing has proved or refuted yet:
    every size equal (a transposing spec agrees with a copy only off the diagonal of the
    sizes), every size distinct and ragged, then the cheapest ones not tried."""
    names = kernel.sizes
    found = []
    for sizes in size_combos.combos(kernel, CANDIDATE_VALUES):
        c = _cost(kernel, sizes)
        if c is not None and c[0] <= MAX_ELEMENTS and c[1] <= MAX_THREADS and sizes not in seen:
            found.append((c[0], sizes))
    found.sort(key=lambda f: (f[0], sorted(f[1].items())))
    picks: list[Sizes] = []

    def add(sizes: Sizes | None) -> None:
        if sizes is not None and sizes not in picks and len(picks) < k:
            picks.append(sizes)

    equal = [f for f in found if len(set(f[1].values())) == 1]
    add(equal[0][1] if equal else None)
    add(equal[len(equal) // 2][1] if equal else None)
    distinct = [f for f in found if len(set(f[1].values())) == len(names)
                and any(v % 8 for v in f[1].values())]
    add(distinct[0][1] if distinct else None)
    for _, sizes in found:
        add(sizes)
    return picks
