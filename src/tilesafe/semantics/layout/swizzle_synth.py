"""Synthesise an XOR swizzle that makes a family of shared-memory accesses conflict-free.

Problem: a row-major tile of shape (R, C) with ``elem_bytes``-byte elements is read/written
by warp-wide access patterns, each a function ``(lane, it) -> (row, col)`` giving the first
element of the lane's vector (or None for an inactive lane), for ``it`` in ``range(iters)``.
We look for a swizzle sigma of the tile's byte offsets such that

  (a) sigma is a bijection of the tile's byte range onto itself, and
  (b) every access instance (pattern x iteration), with each lane's address replaced by
      sigma(address), has the smallest achievable worst-phase conflict degree (1 if possible).

The logical coordinates are concrete (the families are small), only the swizzle is symbolic:
each distinct access of a phase gets a z3 bit-vector term for the bank group of its swizzled
address, and "at most k distinct words per bank per phase" becomes a pseudo-Boolean bound
(for k = 1 simply ``Distinct``). k is minimised by binary search.

Two families:

* ``"cute"``: CuTe's ``Swizzle<B,M,S>`` applied to *byte* offsets,
  ``x ^ ((x >> S) & (((1 << B) - 1) << M))`` with ``S >= B`` (include/cute/swizzle.hpp),
  ``1 <= B <= 8``. Bijectivity on the N-byte tile is encoded exactly (:func:`cute_permutes`),
  not just the sufficient "2**(M+B) divides N".
* ``"rowxor"``: a general F2-linear map of the row index XOR-ed into the chunk index
  (chunk = ``2**M`` bytes, K chunks per row): ``chunk' = chunk ^ A @ bits(row)``. Per row it
  is XOR with a constant, which permutes ``[0, K)`` iff the constant is below ``2**v2(K)``,
  so A has exactly ``v2(K)`` output bits; every chunk size ``2**M`` is tried.

In both families the swizzle granularity ``2**M`` is at least ``max(4, width, elem_bytes)``
bytes, so a lane's vector stays contiguous and "same word"/"same vector" stays decidable on
the unswizzled addresses. Nothing here trusts z3 alone: :func:`evaluate` recounts any
swizzle with the brute-force models of :mod:`tilesafe.semantics.hw.banks`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

import z3

from tilesafe.semantics.hw import banks

Target = Literal["nvidia", "cdna3", "cdna4"]
Family = Literal["cute", "rowxor"]


# ---------------------------------------------------------------------------------------------
# Inputs
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Tile:
    """A row-major tile in shared memory, starting at byte offset 0."""

    rows: int
    cols: int
    elem_bytes: int

    def __post_init__(self) -> None:
        if self.rows < 1 or self.cols < 1 or self.elem_bytes not in (1, 2, 4, 8, 16):
            raise ValueError(f"bad tile {self}")

    @property
    def row_bytes(self) -> int:
        return self.cols * self.elem_bytes

    @property
    def nbytes(self) -> int:
        return self.rows * self.row_bytes

    def offset(self, row: int, col: int) -> int:
        return row * self.row_bytes + col * self.elem_bytes


@dataclass(frozen=True)
class AccessPattern:
    """One warp-wide access, parameterised by lane and by an iteration variable."""

    name: str
    coords: Callable[[int, int], tuple[int, int] | None]  # (lane, it) -> (row, col) or None
    width_bytes: int  # bytes each lane moves (1, 2, 4, 8, 16)
    iters: int = 1
    op: banks.Op = "read"


@dataclass(frozen=True)
class Instance:
    """A pattern at one iteration: concrete unswizzled byte address of each lane."""

    name: str
    iteration: int
    width_bytes: int
    op: banks.Op
    addrs: tuple[int | None, ...]


# ---------------------------------------------------------------------------------------------
# Swizzles
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CuteSwizzle:
    """CuTe ``Swizzle<B,M,S>`` on byte offsets: bits [M, M+B) ^= bits [M+S, M+S+B)."""

    bits: int
    base: int
    shift: int

    def apply(self, offset: int) -> int:
        mask = ((1 << self.bits) - 1) << self.base
        return offset ^ ((offset >> self.shift) & mask)

    def __str__(self) -> str:
        return f"Swizzle<{self.bits},{self.base},{self.shift}> on byte offsets"


@dataclass(frozen=True)
class RowXorSwizzle:
    """chunk index ^= XOR of ``columns[j]`` over the set bits j of the row index.

    ``columns`` are the columns of the F2 matrix A (row bit j -> chunk-bit mask). ``apply``
    XORs address bits [M, ...); that equals XOR-ing the in-row chunk index (and permutes every
    row) when all columns are below ``2**v2(row_bytes >> M)``, which synthesis guarantees.
    """

    chunk_log2: int  # M: a chunk is 2**M bytes
    row_bytes: int
    columns: tuple[int, ...]

    def chunk_xor(self, row: int) -> int:
        out = 0
        for j, col in enumerate(self.columns):
            if (row >> j) & 1:
                out ^= col
        return out

    def apply(self, offset: int) -> int:
        return offset ^ (self.chunk_xor(offset // self.row_bytes) << self.chunk_log2)

    def __str__(self) -> str:
        cols = ", ".join(f"{c:#x}" for c in self.columns)
        return f"chunk({1 << self.chunk_log2} B) ^= A*row, A columns [{cols}]"


Swizzle = CuteSwizzle | RowXorSwizzle


@dataclass(frozen=True)
class InstanceReport:
    name: str
    iteration: int
    report: banks.BankReport


@dataclass(frozen=True)
class SynthResult:
    """Outcome of a synthesis run.

    status: "found" (a swizzle strictly better than the identity), "identity" (the plain
    layout is already conflict-free), "none" (no member of the family improves on the
    identity; ``reason`` summarises the unsat core), "unknown" (solver gave up).
    """

    status: Literal["found", "identity", "none", "unknown"]
    swizzle: Swizzle | None
    degree: int | None  # worst per-phase conflict degree achieved by ``swizzle``
    baseline_degree: int  # worst per-phase conflict degree of the unswizzled layout
    reason: str
    smt2: str = ""  # the decisive query as SMT-LIB (sat for "found", unsat for "none")


# ---------------------------------------------------------------------------------------------
# Concrete evaluation (the brute-force oracle)
# ---------------------------------------------------------------------------------------------


def _model(
    target: Target, width: int, op: banks.Op
) -> tuple[tuple[tuple[int, ...], ...], int, banks.Merge]:
    if target == "nvidia":
        return banks.phases_nvidia(width), banks.NVIDIA_BANKS, "word"
    if target not in ("cdna3", "cdna4"):
        raise ValueError(f"unknown target {target!r} (expected 'nvidia', 'cdna3' or 'cdna4')")
    arch: banks.AmdArch = "cdna3" if target == "cdna3" else "cdna4"
    merge: banks.Merge = "address" if op == "read" else "none"
    return banks.phases_amd(width, op, arch), banks.amd_banks(arch), merge


def _lanes(target: Target) -> int:
    return banks.NVIDIA_WARP if target == "nvidia" else banks.AMD_WAVE


def instances(
    tile: Tile, patterns: Sequence[AccessPattern], target: Target = "nvidia"
) -> list[Instance]:
    """Expand patterns over lanes and iterations into concrete, validated addresses."""
    out: list[Instance] = []
    for pat in patterns:
        w = pat.width_bytes
        if w not in (1, 2, 4, 8, 16) or w < tile.elem_bytes or w % tile.elem_bytes:
            raise ValueError(f"{pat.name}: width {w} does not fit elements of {tile.elem_bytes} B")
        for it in range(pat.iters):
            addrs: list[int | None] = []
            for lane in range(_lanes(target)):
                rc = pat.coords(lane, it)
                if rc is None:
                    addrs.append(None)
                    continue
                row, col = rc
                if not (0 <= row < tile.rows and 0 <= col < tile.cols):
                    raise ValueError(
                        f"{pat.name}[it={it}] lane {lane}: ({row}, {col}) outside tile"
                    )
                if col * tile.elem_bytes + w > tile.row_bytes:
                    raise ValueError(f"{pat.name}[it={it}] lane {lane}: vector crosses the row end")
                addr = tile.offset(row, col)
                if addr % w:
                    raise ValueError(f"{pat.name}[it={it}] lane {lane}: {addr} not {w}-aligned")
                addrs.append(addr)
            out.append(Instance(pat.name, it, w, pat.op, tuple(addrs)))
    return out


def evaluate(
    tile: Tile,
    patterns: Sequence[AccessPattern],
    swizzle: Swizzle | None,
    target: Target = "nvidia",
) -> list[InstanceReport]:
    """Brute-force cost of every access instance under ``swizzle`` (None = identity)."""
    reports: list[InstanceReport] = []
    for inst in instances(tile, patterns, target):
        addrs = [a if a is None or swizzle is None else swizzle.apply(a) for a in inst.addrs]
        phases, n_banks, merge = _model(target, inst.width_bytes, inst.op)
        rep = banks.count_wavefronts(addrs, inst.width_bytes, phases, n_banks, merge)
        reports.append(InstanceReport(inst.name, inst.iteration, rep))
    return reports


def worst_degree(reports: Sequence[InstanceReport]) -> int:
    """Worst per-phase conflict degree over all instances (0 if nothing is active)."""
    return max((r.report.max_way for r in reports), default=0)


def is_bijection(tile: Tile, swizzle: Swizzle) -> bool:
    """Brute-force check that ``swizzle`` permutes the tile's byte offsets."""
    image = {swizzle.apply(x) for x in range(tile.nbytes)}
    return len(image) == tile.nbytes and image == set(range(tile.nbytes))


# ---------------------------------------------------------------------------------------------
# Symbolic encoding
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Access:
    """One distinct (merge-key) access of a phase: its unswizzled address and bank window."""

    addr: int
    unit_log2: int  # log2 of the bank-group granularity (4, 8 or 16 bytes)


@dataclass(frozen=True)
class _PhaseGroup:
    label: str
    accesses: tuple[_Access, ...]
    window_log2: int  # log2(n_banks * 4): bank group = addr bits [unit_log2, window_log2)


def _phase_groups(
    tile: Tile, patterns: Sequence[AccessPattern], target: Target
) -> list[_PhaseGroup]:
    groups: list[_PhaseGroup] = []
    for inst in instances(tile, patterns, target):
        phases, n_banks, merge = _model(target, inst.width_bytes, inst.op)
        unit_log2 = max(inst.width_bytes, banks.WORD_BYTES).bit_length() - 1
        window_log2 = (n_banks * banks.WORD_BYTES).bit_length() - 1
        for p, phase in enumerate(phases):
            seen: dict[object, _Access] = {}
            for lane in phase:
                addr = inst.addrs[lane]
                if addr is None:
                    continue
                # One representative per merge key; for aligned accesses the first word's key
                # identifies the whole vector, as in banks.access_keys.
                _, key = banks.access_keys(addr, lane, inst.width_bytes, merge)[0]
                seen.setdefault(key, _Access(addr, unit_log2))
            if len(seen) > 1:
                label = f"{inst.name}[it={inst.iteration}] phase {p}"
                groups.append(_PhaseGroup(label, tuple(seen.values()), window_log2))
    return groups


def _v2(n: int) -> int:
    """2-adic valuation: the largest v with 2**v dividing n."""
    return (n & -n).bit_length() - 1


class _Encoding:
    """A z3 solver holding one family's unknowns and the per-phase bank constraints."""

    def __init__(self, timeout_ms: int) -> None:
        self.solver = z3.Solver()
        self.solver.set("timeout", timeout_ms)
        self.trackers: dict[str, z3.BoolRef] = {}

    def track(self, label: str, constraint: z3.BoolRef) -> None:
        lit = self.trackers.get(label)
        if lit is None:
            lit = z3.Bool(f"trk!{len(self.trackers)}")
            self.trackers[label] = lit
        self.solver.add(z3.Implies(lit, constraint))

    def bound_groups(
        self, groups: Sequence[_PhaseGroup], bank: Callable[[int, int, int], z3.BitVecRef], k: int
    ) -> list[z3.BoolRef]:
        """Constraints 'at most k distinct accesses per bank group' for each phase."""
        out: list[z3.BoolRef] = []
        for g in groups:
            terms = [bank(a.addr, a.unit_log2, g.window_log2) for a in g.accesses]
            if k == 1:
                cons = z3.Distinct(*terms)
            else:  # for every bank group value, at most k of the accesses land on it
                n_values = 1 << (g.window_log2 - g.accesses[0].unit_log2)
                cons = z3.And([z3.AtMost(*[t == v for t in terms], k) for v in range(n_values)])
            lit = z3.Bool(f"grp!{g.label}!{k}")
            self.trackers[f"{g.label}#{k}"] = lit
            self.solver.add(z3.Implies(lit, cons))
            out.append(lit)
        return out

    def check(self, assumptions: Sequence[z3.BoolRef]) -> z3.CheckSatResult:
        return self.solver.check(*assumptions)

    def smt2(self, assumptions: Sequence[z3.BoolRef]) -> str:
        """The query as SMT-LIB, so another solver can re-check the verdict."""
        lits = " ".join(a.sexpr() for a in assumptions)
        return f"{self.solver.sexpr()}(check-sat-assuming ({lits}))\n"

    def core_labels(self) -> list[str]:
        names = {str(v): k for k, v in self.trackers.items()}
        return sorted(names.get(str(c), str(c)).split("#")[0] for c in self.solver.unsat_core())


@dataclass(frozen=True)
class _Candidate:
    """One encoded sub-family (all of CuTe, or rowxor at one chunk size)."""

    enc: _Encoding
    bank: Callable[[int, int, int], z3.BitVecRef]  # (addr, lo, hi) -> bits [lo, hi) of sigma(addr)
    base: list[z3.BoolRef]  # tracker literals of the family bounds
    extract: Callable[[z3.ModelRef], Swizzle]
    minimise: Callable[[z3.ModelRef], z3.BoolRef] | None  # "strictly simpler than this model"
    note: str


def cute_permutes(nbytes: int, swizzle: CuteSwizzle) -> bool:
    """Exact test that ``Swizzle<B,M,S>`` (S >= B) permutes ``[0, nbytes)``; O(1), no search.

    The map is an involution that only rewrites bits [M, K), K = M + B, so every whole
    2**K-aligned block is mapped onto itself. Only the last partial block [q, nbytes) can leak;
    there the YYY bits (at >= M + S >= K) come from q alone, so the whole tail is XOR-ed with
    one constant d. XOR with d maps [0, r) onto itself iff d < 2**v2(r) (and v2(r) =
    v2(nbytes)); the test suite checks this against brute force.
    """
    b, m, s = swizzle.bits, swizzle.base, swizzle.shift
    if b == 0:
        return True
    if s < b:
        raise ValueError("CuTe requires S >= B")
    r = nbytes % (1 << (m + b))
    if r == 0:
        return True
    d = ((nbytes - r) >> s) & (((1 << b) - 1) << m)
    return d < (1 << _v2(nbytes))


def _cute_candidates(
    tile: Tile, min_unit_log2: int, timeout_ms: int
) -> tuple[list[_Candidate], str]:
    n = tile.nbytes
    addr_bits = max(n - 1, 1).bit_length()
    # Wide enough for every address, for M + B (<= addr_bits + 8) and for the bank window.
    width = max(addr_bits + 5, 9)
    enc = _Encoding(timeout_ms)
    b, m, s = (z3.BitVec(x, width) for x in ("B", "M", "S"))
    ranges = z3.And(
        z3.UGE(b, 1),
        z3.ULE(b, 8),
        z3.UGE(s, b),
        z3.ULE(s, addr_bits),
        z3.UGE(m, min_unit_log2),
        z3.ULE(m, addr_bits),
    )
    ranges_label = f"family ranges (1<=B<=8, S>=B, M>={min_unit_log2})"
    enc.track(ranges_label, ranges)
    one = z3.BitVecVal(1, width)
    mask = ((one << b) - 1) << m  # bits above the address width are dropped: harmless
    # Exact bijection condition, the same formula as cute_permutes.
    n_bv = z3.BitVecVal(n, width)
    r = n_bv & ((one << (m + b)) - 1)
    tail_xor = z3.LShR(n_bv - r, s) & mask
    bij_label = f"bijection on the {n}-byte tile"
    enc.track(bij_label, z3.Or(r == 0, z3.ULT(tail_xor, 1 << _v2(n))))

    def bank(addr: int, lo: int, hi: int) -> z3.BitVecRef:
        a = z3.BitVecVal(addr, width)
        return z3.Extract(hi - 1, lo, a ^ (z3.LShR(a, s) & mask))

    def extract(model: z3.ModelRef) -> Swizzle:
        val = [model.eval(x, model_completion=True).as_long() for x in (b, m, s)]
        return CuteSwizzle(val[0], val[1], val[2])

    def simpler(model: z3.ModelRef) -> z3.BoolRef:
        return z3.ULT(b, model.eval(b, model_completion=True))

    base = [enc.trackers[ranges_label], enc.trackers[bij_label]]
    return [_Candidate(enc, bank, base, extract, simpler, "cute")], ""


def _rowxor_candidates(
    tile: Tile, min_unit_log2: int, timeout_ms: int
) -> tuple[list[_Candidate], str]:
    row_bits = (tile.rows - 1).bit_length()
    if row_bits == 0:
        return [], "no swizzle of this family: the tile has a single row, nothing to XOR in"
    width = max(max(tile.nbytes - 1, 1).bit_length() + 2, 9)
    cands: list[_Candidate] = []
    for m_log2 in range(min_unit_log2, tile.row_bytes.bit_length()):
        if tile.row_bytes % (1 << m_log2):
            continue
        # XOR with c permutes the chunk indices [0, K) iff c < 2**v2(K) (see cute_permutes), so
        # the matrix may only touch the low v2(K) chunk bits.
        k_bits = _v2(tile.row_bytes >> m_log2)
        if k_bits == 0:
            continue
        enc = _Encoding(timeout_ms)
        cols = [z3.BitVec(f"A{j}_M{m_log2}", k_bits) for j in range(row_bits)]

        def bank(
            addr: int, lo: int, hi: int, cols: list[z3.BitVecRef] = cols, m_log2: int = m_log2
        ) -> z3.BitVecRef:
            row = addr // tile.row_bytes
            t: z3.BitVecRef = z3.BitVecVal(0, cols[0].size())
            for j, c in enumerate(cols):
                if (row >> j) & 1:
                    t = t ^ c
            wide = z3.ZeroExt(width - t.size(), t) << m_log2
            return z3.Extract(hi - 1, lo, z3.BitVecVal(addr, width) ^ wide)

        def extract(
            model: z3.ModelRef, cols: list[z3.BitVecRef] = cols, m_log2: int = m_log2
        ) -> Swizzle:
            vals = tuple(model.eval(c, model_completion=True).as_long() for c in cols)
            return RowXorSwizzle(m_log2, tile.row_bytes, vals)

        def simpler(model: z3.ModelRef, cols: list[z3.BitVecRef] = cols) -> z3.BoolRef:
            def used(c: z3.BitVecRef) -> z3.ArithRef:
                return z3.If(c != 0, 1, 0)

            now = sum(model.eval(used(c), model_completion=True).as_long() for c in cols)
            return z3.Sum([used(c) for c in cols]) < now

        cands.append(_Candidate(enc, bank, [], extract, simpler, f"rowxor M={m_log2}"))
    if not cands:
        return [], (
            f"no swizzle of this family: no chunk size >= {1 << min_unit_log2} bytes splits a "
            f"{tile.row_bytes}-byte row into an even number of chunks"
        )
    return cands, ""


def synthesize(
    tile: Tile,
    patterns: Sequence[AccessPattern],
    family: Family = "cute",
    target: Target = "nvidia",
    timeout_ms: int = 20_000,
) -> SynthResult:
    """Find a swizzle of ``family`` minimising the worst per-phase conflict degree.

    The identity layout's degree (``baseline``) is computed by brute force; the solver is asked
    for degree k < baseline, smallest k first (binary search). The returned swizzle is then
    re-checked by :func:`evaluate` and :func:`is_bijection`; a mismatch raises, since it would
    mean the encoding is wrong.
    """
    baseline = worst_degree(evaluate(tile, patterns, None, target))
    insts = instances(tile, patterns, target)
    if baseline <= 1:
        return SynthResult(
            "identity", None, baseline, baseline, "the unswizzled layout is already conflict-free"
        )
    min_unit = max([banks.WORD_BYTES, tile.elem_bytes] + [i.width_bytes for i in insts])
    min_unit_log2 = min_unit.bit_length() - 1
    groups = _phase_groups(tile, patterns, target)
    if family == "cute":
        cands, why = _cute_candidates(tile, min_unit_log2, timeout_ms)
    elif family == "rowxor":
        cands, why = _rowxor_candidates(tile, min_unit_log2, timeout_ms)
    else:
        raise ValueError(f"unknown family {family!r}")
    if not cands:
        return SynthResult("none", None, None, baseline, why)

    lits: dict[int, dict[int, list[z3.BoolRef]]] = {id(c): {} for c in cands}
    unsat_query = [""]  # SMT-LIB of the most recent unsat query

    def attempt(k: int) -> tuple[str, _Candidate | None, list[str]]:
        """sat with some candidate / unsat for all (core of the last) / unknown."""
        core: list[str] = []
        unknown = False
        for c in cands:
            if k not in lits[id(c)]:
                lits[id(c)][k] = c.enc.bound_groups(groups, c.bank, k)
            res = c.enc.check(c.base + lits[id(c)][k])
            if res == z3.sat:
                return "sat", c, []
            if res == z3.unknown:
                unknown = True
            else:
                core = c.enc.core_labels()
                unsat_query[0] = c.enc.smt2(c.base + lits[id(c)][k])
        return ("unknown" if unknown else "unsat"), None, core

    # Degree 1 is the usual goal and the cheapest query; ask it first, then binary-search the
    # smallest achievable degree in [2, baseline - 1] (sat is monotone in k).
    best: tuple[int, _Candidate] | None = None
    last_core: list[str] = []
    last_unsat = ""
    saw_unknown = False
    status, cand, core = attempt(1)
    if status == "sat":
        assert cand is not None
        best = (1, cand)
        lo, hi = 2, 1
    else:
        saw_unknown |= status == "unknown"
        last_core, last_unsat = core, unsat_query[0]
        lo, hi = 2, baseline - 1
    while lo <= hi:
        mid = (lo + hi) // 2
        status, cand, core = attempt(mid)
        if status == "sat":
            assert cand is not None
            best = (mid, cand)
            hi = mid - 1
        else:
            saw_unknown |= status == "unknown"
            if status == "unsat":
                last_core, last_unsat = core, unsat_query[0]
            lo = mid + 1
    if best is None:
        if saw_unknown:
            return SynthResult("unknown", None, None, baseline, "solver timeout before a verdict")
        summary = "; ".join(dict.fromkeys(last_core)) or "(empty core)"
        return SynthResult(
            "none",
            None,
            None,
            baseline,
            f"no {family} swizzle lowers the worst conflict degree below {baseline}; "
            f"unsat core: {summary}",
            last_unsat,
        )
    k, cand = best
    if cand.enc.check(cand.base + lits[id(cand)][k]) != z3.sat:  # re-solve to get its model
        return SynthResult("unknown", None, None, baseline, "solver timeout re-solving the answer")
    model = cand.enc.solver.model()
    if cand.minimise is not None:  # prefer the fewest swizzle bits among equally good answers
        while True:
            cand.enc.solver.push()
            cand.enc.solver.add(cand.minimise(model))
            res = cand.enc.check(cand.base + lits[id(cand)][k])
            if res == z3.sat:
                model = cand.enc.solver.model()
            cand.enc.solver.pop()
            if res != z3.sat:
                break
    swizzle = cand.extract(model)
    achieved = worst_degree(evaluate(tile, patterns, swizzle, target))
    if achieved > k or not is_bijection(tile, swizzle):
        raise AssertionError(f"encoding bug: {swizzle} claimed degree {k}, brute force {achieved}")
    note = "" if k == 1 else f" (degree 1 is unsat; best achievable in the family is {k})"
    if saw_unknown and k > 1:
        note = f" (a degree below {k} was neither found nor ruled out: solver timeout)"
    query = cand.enc.smt2(cand.base + lits[id(cand)][k])
    return SynthResult(
        "found",
        swizzle,
        achieved,
        baseline,
        f"{swizzle}: degree {baseline} -> {achieved}{note}",
        query,
    )
