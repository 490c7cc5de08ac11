"""Which thread of a class touches which shared-memory element, and in which order.

Why: the event model runs the threads of a class as ONE lockstep agent, but they are not in
lockstep on the hardware (nor in the interpreter): between two synchronisations one thread
may be far ahead of another. Permissions on atoms cannot see that -- the class holds an
atom as a whole -- so the footprint of every access keeps the identity of the threads that
touch each element. A read by thread t of an element that thread t' != t of the same class
wrote, with nothing ordering the two, is a race (and so is a write that meets another
thread's access); `conflict` finds it. The same evaluation gives, per element, whether the
access certainly writes it and whether it may read it before the reading thread itself
wrote it in this access (an *exposed* read: the value must come from earlier), which is
what the uninitialised-read check needs.

Two modes. The *may* footprint (exact=False) holds for every size and block: it uses only
the thread- and loop-dependent functions of the access tree, and over-approximates where a
term needs more (an unknown index touches the whole buffer, by several threads; an
unknown condition runs both branches, neither certainly; an unknown loop touches every
element). The *exact* footprint (exact=True) is that of one block of one launch: `env`
carries the sizes and the block index, and only terms that read memory stay unknown. Both
report `approx` when something was over-approximated, so a violation found on an
approximate footprint is a candidate, not a refutation.

Thread identities per element are NONE (-1), the one thread (>= 0), or SEVERAL (-2): two
accesses conflict unless both are by the same single thread, which is exactly "some pair
of different threads", and merging footprints keeps that question exact.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from tilesafe.frontend import ir
from tilesafe.frontend.span import Span
from tilesafe.semantics.temporal.events import AccessNode

NONE, SEVERAL = -1, -2
MAX_POINTS = 1 << 22  # (threads x iterations) of one collapsed loop; past it: over-approximate

RAW, WAR, WAW = "read-after-write", "write-after-read", "write-after-write"


# ---- points ------------------------------------------------------------------------------------


@dataclass
class Points:
    """The accesses of one leaf: every (thread, element) it touches, whether it certainly
    does, and its program-order key (a lexicographic tuple per point). `whole`: the index
    is unknown -- every element, by several threads. `guard`: literals (bits, see
    `Literals`) of undecided conditions that are constant per thread for a launch; `must`
    then means "certainly, for a thread for which they hold"."""

    buffer: str
    write: bool
    threads: np.ndarray
    flats: np.ndarray
    must: np.ndarray
    keys: list
    span: Span | None
    whole: bool = False
    guard: int = 0


class Literals:
    """Bits for launch-constant conditions (AccessNode.cond_key), shared by every footprint
    of a model, so that a write "if row < M" and a later read "if row < M" by the same
    thread are seen to agree. Bit 2i: condition i holds; 2i + 1: it does not."""

    LIMIT = 31

    def __init__(self) -> None:
        self.index: dict[tuple, int] = {}

    def bits(self, key: tuple | None) -> tuple[int, int] | None:
        if key is None:
            return None
        i = self.index.get(key)
        if i is None:
            if len(self.index) >= self.LIMIT:
                return None
            i = self.index[key] = len(self.index)
        return 1 << (2 * i), 1 << (2 * i + 1)


def points(nodes: tuple[AccessNode, ...], env: Mapping[str, Any], threads: tuple[int, ...],
           kernel: ir.Kernel, exact: bool = False,
           literals: Literals | None = None) -> tuple[list[Points], bool]:
    """Every access of the tree, vectorised over the class's threads and the iterations of
    its collapsed loops; also whether anything was over-approximated."""
    pts = dict(env)
    pts["thread"] = np.asarray(threads, dtype=np.int64)
    n = len(threads)
    out: list[Points] = []
    approx = [False]
    _walk(nodes, pts, np.ones(n, bool), np.ones(n, bool), 0, [], _Ctx(kernel, exact, literals,
                                                                    out, approx))
    return out, approx[0]


@dataclass
class _Ctx:
    kernel: ir.Kernel
    exact: bool
    literals: Literals | None
    out: list[Points]
    approx: list


def _walk(nodes: tuple[AccessNode, ...], pts: dict[str, Any], may: np.ndarray, must: np.ndarray,
          guard: int, keys: list, cx: _Ctx) -> None:
    kernel, exact, out, approx = cx.kernel, cx.exact, cx.out, cx.approx
    for i, n in enumerate(nodes):
        k = keys + [i]
        if n.kind == "acc":
            fns = n.index_full if exact else n.index
            if fns is None:
                if may.any():
                    approx[0] = True
                    out.append(_whole(n))
                continue
            buf = kernel.buffer(n.buffer)
            idx = [np.broadcast_to(np.asarray(f(pts), dtype=np.int64), may.shape) for f in fns]
            ok = may.copy()
            flat = np.zeros(may.shape, dtype=np.int64)
            for v, d in zip(idx, buf.shape, strict=True):
                ok &= (v >= 0) & (v < d)  # out-of-range indices: the access checker's business
                flat = flat * d + v
            if ok.any():
                out.append(Points(n.buffer, n.write, pts["thread"][ok], flat[ok], must[ok],
                                  [c[ok] if isinstance(c, np.ndarray) else c for c in k],
                                  n.span, guard=guard))
        elif n.kind == "if":
            fn = n.cond_full if exact else n.cond
            if fn is not None:
                c = np.broadcast_to(np.asarray(fn(pts), dtype=bool), may.shape)
                _walk(n.then, pts, may & c, must & c, guard, k + [0], cx)
                _walk(n.orelse, pts, may & ~c, must & ~c, guard, k + [1], cx)
                continue
            approx[0] = True
            lits = cx.literals.bits(n.cond_key) if cx.literals is not None else None
            then_cx = _Ctx(kernel, exact, cx.literals, [], approx)
            else_cx = _Ctx(kernel, exact, cx.literals, [], approx)
            g_then, g_else = (guard | lits[0], guard | lits[1]) if lits else (guard, guard)
            _walk(n.then, pts, may, must, g_then, k + [0], then_cx)
            _walk(n.orelse, pts, may, must, g_else, k + [1], else_cx)
            out.extend(_either(then_cx.out, else_cx.out, len(k), kernel,
                               (guard, g_then, g_else), keep=lits is not None))
        else:
            lo_fn, hi_fn = (n.lo_full, n.hi_full) if exact else (n.lo, n.hi)
            if not may.any():
                continue
            if lo_fn is None or hi_fn is None:
                approx[0] = True
                if not n.uses_var:
                    # The iterations all touch the same elements; only whether there are
                    # any is unknown: the body's points, none of them certain.
                    _walk(n.then, pts, may, np.zeros_like(must), guard, k + [0], cx)
                else:
                    out.extend(_whole(leaf) for leaf in leaves(n.then))
                continue
            try:
                lo = np.broadcast_to(np.asarray(lo_fn(pts), dtype=np.int64), may.shape)
                hi = np.broadcast_to(np.asarray(hi_fn(pts), dtype=np.int64), may.shape)
            except OverflowError:  # a bound past int64: far more points than MAX_POINTS
                approx[0] = True
                out.extend(_whole(leaf) for leaf in leaves(n.then))
                continue
            vlo, vhi = int(lo[may].min()), int(hi[may].max())
            # Count before allocating: a 2^31-trip loop must not build its array (16.9 GB).
            count = max(0, -(-(vhi - vlo) // n.step))
            if count == 0:
                continue
            if count * may.size > MAX_POINTS:
                approx[0] = True
                out.extend(_whole(leaf) for leaf in leaves(n.then))
                continue
            values = np.arange(vlo, vhi, n.step, dtype=np.int64)
            reps = values.size
            new = {key: (np.repeat(np.broadcast_to(v, may.shape), reps)
                         if isinstance(v, np.ndarray) else v) for key, v in pts.items()}
            var = np.tile(values, may.size)
            new[f"L{n.uid}"] = var
            inside = (var >= np.repeat(lo, reps)) & (var < np.repeat(hi, reps))
            inside &= (var - np.repeat(lo, reps)) % n.step == 0
            rk = [np.repeat(np.broadcast_to(c, may.shape), reps) if isinstance(c, np.ndarray)
                  else c for c in k]
            _walk(n.then, new, np.repeat(may, reps) & inside, np.repeat(must, reps) & inside,
                  guard, rk + [var], cx)


def _whole(n: AccessNode) -> Points:
    empty = np.zeros(0, dtype=np.int64)
    return Points(n.buffer, n.write, empty, empty, np.zeros(0, bool), [], n.span, whole=True)


def _either(then: list[Points], orelse: list[Points], level: int, kernel: ir.Kernel,
            guards: tuple[int, int, int], keep: bool) -> list[Points]:
    """Both branches of a condition the footprint cannot decide: every access may happen,
    none certainly (with `keep`, certainly under the branch's literal, which the points'
    guards carry) -- and a write both branches certainly make (same thread, same element)
    happens whichever runs; it is ordered after both branches."""
    out = then + orelse if keep else [
        Points(p.buffer, p.write, p.threads, p.flats, np.zeros_like(p.must), p.keys, p.span,
               p.whole, p.guard) for p in then + orelse]
    guard, g_then, g_else = guards
    for buf in {p.buffer for p in then if p.write and not p.whole}:
        size = kernel.buffer(buf).size
        both = np.intersect1d(_must_codes(then, buf, size, g_then),
                              _must_codes(orelse, buf, size, g_else))
        if not both.size:
            continue
        for p in then:
            if p.buffer != buf or not p.write or p.whole or p.guard != g_then:
                continue
            sel = p.must & np.isin(p.threads * size + p.flats, both)
            if not sel.any():
                continue
            # The point's own key, with the branch column past both branches.
            keys = [c[sel] if isinstance(c, np.ndarray) else c for c in p.keys]
            keys[level] = 2
            out.append(Points(buf, True, p.threads[sel], p.flats[sel],
                              np.ones(int(sel.sum()), bool), keys, p.span, guard=guard))
    return out


def _must_codes(ps: list[Points], buf: str, size: int, guard: int) -> np.ndarray:
    """thread * size + element of every write to `buf` certain under exactly `guard`."""
    parts = [p.threads[p.must] * size + p.flats[p.must] for p in ps
             if p.buffer == buf and p.write and not p.whole and p.guard == guard]
    return np.concatenate(parts) if parts else np.zeros(0, np.int64)


def leaves(nodes: tuple[AccessNode, ...]) -> Iterator[AccessNode]:
    for n in nodes:
        if n.kind == "acc":
            yield n
        else:
            yield from leaves(n.then)
            yield from leaves(n.orelse)


# ---- footprints --------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class BufferPrint:
    """One buffer's part of a footprint, per element (row-major logical index)."""

    reads: np.ndarray  # int32: NONE, the one reading thread, or SEVERAL
    writes: np.ndarray  # int32: likewise for writes
    must: np.ndarray  # bool: certainly written
    exposed: np.ndarray  # bool: may be read before the reading thread wrote it in this access
    exposed_by: np.ndarray  # int32 thread map of those exposed reads
    exposed_guard: np.ndarray  # int64: literals every exposed read of the element is under
    covered: np.ndarray  # int32 thread map of writes certain under literals (not outright)
    covered_guard: np.ndarray  # int64: literals one of those writes needs (all of them)


@dataclass(frozen=True, eq=False)
class Footprint:
    bufs: Mapping[str, BufferPrint]
    approx: bool

    def masks(self) -> dict[str, tuple[int, int, int, int, int]]:
        """Bit masks (reads, writes, certainly written, exposed reads, written certainly
        under literals) per buffer: what atoms must refine."""
        return {b: (_bits(p.reads != NONE), _bits(p.writes != NONE), _bits(p.must),
                    _bits(p.exposed), _bits(p.covered != NONE)) for b, p in self.bufs.items()}

    def touches(self) -> Touches:
        return {b: (p.reads, p.writes) for b, p in self.bufs.items()}


def evaluate(nodes: tuple[AccessNode, ...], env: Mapping[str, Any], threads: tuple[int, ...],
             kernel: ir.Kernel, exact: bool = False,
             literals: Literals | None = None) -> Footprint:
    pts, approx = points(nodes, env, threads, kernel, exact, literals)
    bufs: dict[str, BufferPrint] = {}
    for name in dict.fromkeys(p.buffer for p in pts):
        size = kernel.buffer(name).size
        mine = [p for p in pts if p.buffer == name]
        reads = _thread_map(size, [p for p in mine if not p.write])
        writes = _thread_map(size, [p for p in mine if p.write])
        must = np.zeros(size, bool)
        guarded = []
        for p in mine:
            if p.write and not p.whole:
                if p.guard == 0:
                    must[p.flats[p.must]] = True
                elif p.must.any():
                    guarded.append(_select(p, p.must))
        covered = _thread_map(size, guarded)
        covered_guard = np.zeros(size, np.int64)
        for p in guarded:
            covered_guard[p.flats] |= p.guard
        exposed, exposed_by, exposed_guard = _exposed(size, mine)
        bufs[name] = BufferPrint(reads, writes, must, exposed, exposed_by, exposed_guard,
                                 covered, covered_guard)
    return Footprint(bufs, approx)


def _select(p: Points, sel: np.ndarray) -> Points:
    return Points(p.buffer, p.write, p.threads[sel], p.flats[sel], p.must[sel],
                  [c[sel] if isinstance(c, np.ndarray) else c for c in p.keys], p.span,
                  p.whole, p.guard)


def _thread_map(size: int, pts: list[Points]) -> np.ndarray:
    out = np.full(size, NONE, dtype=np.int32)
    if any(p.whole for p in pts):
        out[:] = SEVERAL
        return out
    flats = [p.flats for p in pts if p.flats.size]
    if not flats:
        return out
    f = np.concatenate(flats)
    t = np.concatenate([p.threads for p in pts if p.flats.size])
    lo = np.full(size, np.iinfo(np.int64).max, dtype=np.int64)
    hi = np.full(size, -1, dtype=np.int64)
    np.minimum.at(lo, f, t)
    np.maximum.at(hi, f, t)
    touched = hi >= 0
    out[touched] = np.where(lo[touched] == hi[touched], hi[touched], SEVERAL)
    return out


def _exposed(size: int, pts: list[Points]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Elements some thread may read before it certainly wrote them itself in this access
    (program order: the points' keys, compared lexicographically; a write certain under
    literals covers a later read of the same thread under at least those literals), with
    the reading threads and the literals all those reads are under."""
    exposed = np.zeros(size, bool)
    by = np.full(size, NONE, np.int32)
    guard = np.full(size, -1, np.int64)  # all bits: AND identity
    if any(p.whole and not p.write for p in pts):
        return np.ones(size, bool), np.full(size, SEVERAL, np.int32), np.zeros(size, np.int64)
    reads = [p for p in pts if not p.write and not p.whole and p.flats.size]
    if not reads:
        return exposed, by, np.zeros(size, np.int64)
    writes = [_select(p, p.must) for p in pts if p.write and not p.whole and p.must.any()]
    parts = reads + writes
    depth = max(len(p.keys) for p in parts)
    cols = []
    for d in range(depth):
        cols.append(np.concatenate([
            np.broadcast_to(np.asarray(p.keys[d] if d < len(p.keys) else 0, dtype=np.int64),
                            p.flats.shape) for p in parts]))
    group = np.concatenate([p.threads * size + p.flats for p in parts])
    is_w = np.concatenate([np.full(p.flats.size, p.write) for p in parts])
    g_of = np.concatenate([np.full(p.flats.size, p.guard, np.int64) for p in parts])
    order = np.lexsort(tuple(reversed(cols)) + (group,))
    group, is_w, g_of = group[order], is_w[order], g_of[order]
    start = np.ones(group.size, bool)
    start[1:] = group[1:] != group[:-1]
    covered = np.zeros(group.size, bool)
    for g in np.unique(g_of[is_w]):
        w_g = is_w & (g_of == g)
        before = np.cumsum(w_g) - w_g  # such writes strictly before, from the array start
        base = np.maximum.accumulate(np.where(start, before, 0))
        covered |= (before - base > 0) & ((g & ~g_of) == 0)
    hit = ~is_w & ~covered
    if hit.any():
        flats, threads, rg = group[hit] % size, group[hit] // size, g_of[hit]
        exposed[flats] = True
        by = _thread_map(size, [Points("", False, threads, flats, np.ones(flats.size, bool),
                                       [], None)])
        np.bitwise_and.at(guard, flats, rg)
    guard[~exposed] = 0
    return exposed, by, guard


def _bits(a: np.ndarray) -> int:
    if not a.any():
        return 0
    return int.from_bytes(np.packbits(a, bitorder="little").tobytes(), "little")


# ---- conflicts between threads of one class ----------------------------------------------------

Touches = Mapping[str, tuple[np.ndarray, np.ndarray]]  # buffer -> (reads, writes) thread maps


@dataclass(frozen=True)
class Conflict:
    """Two accesses to one element by different threads, at least one a write."""

    kind: str  # RAW, WAR, WAW (the later access reads / writes)
    buffer: str
    element: int  # row-major logical index
    earlier: int  # the thread of the earlier access (SEVERAL: more than one)
    later: int

    @property
    def code(self) -> str:
        """A read of data not ready (TS304) or a write without the whole region (TS302)."""
        return "TS304" if self.kind == RAW else "TS302"


def _combine(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.where(a == NONE, b, np.where((b == NONE) | (a == b), a, SEVERAL)).astype(np.int32)


def _differ(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Some thread of `a` and a different one of `b` touch the element."""
    return (a != NONE) & (b != NONE) & ~((a == b) & (a >= 0))


def merge(a: Touches, b: Touches) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    out = dict(a)
    for buf, (r, w) in b.items():
        if buf in out:
            r0, w0 = out[buf]
            out[buf] = (_combine(r0, r), _combine(w0, w))
        else:
            out[buf] = (r, w)
    return out


def conflict(earlier: Touches, later: Touches) -> Conflict | None:
    """The first element where a later access of the class meets an earlier one of another
    thread of the class (read after write first: it is what reads unwritten data)."""
    for buf, (r1, w1) in later.items():
        if buf not in earlier:
            continue
        r0, w0 = earlier[buf]
        for kind, a, b in ((RAW, w0, r1), (WAR, r0, w1), (WAW, w0, w1)):
            hit = np.flatnonzero(_differ(a, b))
            if hit.size:
                e = int(hit[0])
                return Conflict(kind, buf, e, int(a[e]), int(b[e]))
    return None


def self_conflict(t: Touches) -> Conflict | None:
    """Two threads of one access (a collapsed loop included) on one element, one of them
    writing: nothing orders them."""
    for buf, (r, w) in t.items():
        hit = np.flatnonzero(_differ(w, r))
        if hit.size:
            e = int(hit[0])
            return Conflict(RAW, buf, e, int(w[e]), int(r[e]))
        hit = np.flatnonzero(w == SEVERAL)
        if hit.size:
            e = int(hit[0])
            return Conflict(WAW, buf, e, SEVERAL, SEVERAL)
    return None


def shifted(t: Touches, delta: int) -> Touches:
    """The same thread map with every single-thread entry moved by `delta` (NONE and
    SEVERAL kept): conflicts are decided by "same single thread or not", which a
    translation preserves."""
    return {b: (np.where(r >= 0, r + delta, r).astype(np.int32),
                np.where(w >= 0, w + delta, w).astype(np.int32)) for b, (r, w) in t.items()}


def touch_key(t: Touches) -> tuple:
    """A hashable value equal for equal thread maps (for interning)."""
    return tuple(sorted((b, r.tobytes(), w.tobytes()) for b, (r, w) in t.items()))


class TouchTable:
    """Thread maps interned as small integers (what explorer states hold: a class's
    unordered accesses since its threads were last ordered), with memoised merge and
    conflict checks. Id 0 is "nothing". One table per model, so that states of different
    machines of the model (the far system and its tails) agree on what an id means."""

    def __init__(self) -> None:
        self._ids: dict[tuple, int] = {(): 0}
        self._maps: list[Touches] = [{}]
        self._merge: dict[tuple[int, int], int] = {}
        self._conflict: dict[tuple[int, int], Conflict | None] = {}
        self._self: dict[int, Conflict | None] = {}

    def intern(self, t: Touches) -> int:
        key = touch_key(t)
        hit = self._ids.get(key)
        if hit is None:
            hit = self._ids[key] = len(self._maps)
            self._maps.append(t)
        return hit

    def get(self, i: int) -> Touches:
        return self._maps[i]

    def merge(self, i: int, j: int) -> int:
        if not i or i == j:
            return j or i
        if not j:
            return i
        key = (i, j) if i < j else (j, i)
        hit = self._merge.get(key)
        if hit is None:
            hit = self._merge[key] = self.intern(merge(self._maps[i], self._maps[j]))
        return hit

    def conflict(self, earlier: int, later: int) -> Conflict | None:
        if not earlier or not later:
            return None
        key = (earlier, later)
        if key not in self._conflict:
            self._conflict[key] = conflict(self._maps[earlier], self._maps[later])
        return self._conflict[key]

    def self_conflict(self, i: int) -> Conflict | None:
        if not i:
            return None
        if i not in self._self:
            self._self[i] = self_conflict(self._maps[i])
        return self._self[i]


# ---- diagnostics -------------------------------------------------------------------------------


def threads_at(nodes: tuple[AccessNode, ...], env: Mapping[str, Any], threads: tuple[int, ...],
               kernel: ir.Kernel, buffer: str, element: int, write: bool,
               exact: bool = True) -> tuple[list[int], Span | None]:
    """The threads whose access (a read or a write) touches one element, and the span of
    the first load or store that does: for messages and witnesses."""
    pts, _ = points(nodes, env, threads, kernel, exact)
    who: list[int] = []
    span = None
    for p in pts:
        if p.buffer != buffer or p.write != write or p.whole:
            continue
        hit = p.threads[p.flats == element]
        if hit.size:
            who.extend(int(t) for t in np.unique(hit))
            span = span or p.span
    return sorted(set(who)), span


def culprit(nodes: tuple[AccessNode, ...], env: Mapping[str, Any], threads: tuple[int, ...],
            kernel: ir.Kernel, buffer: str, mask: int, write: bool) -> Span | None:
    """The span of the first load or store among `nodes` whose footprint meets `mask`."""
    pts, _ = points(nodes, env, threads, kernel, False)
    for p in pts:
        if p.buffer != buffer or p.write != write:
            continue
        if p.whole:
            return p.span
        flats = np.unique(p.flats)
        if any((mask >> int(f)) & 1 for f in flats):
            return p.span
    return None


def element_label(buf: ir.SharedBuffer, element: int) -> str:
    idx = []
    for d in reversed(buf.shape):
        idx.append(element % d)
        element //= d
    return f"{buf.name}[{', '.join(str(i) for i in reversed(idx))}]"
