"""A shared-memory layout that removes a bank conflict, synthesised and then verified.

Why: a TS601 refutation is most useful with a fix. For a buffer no TMA copy touches,
`swizzle_synth.synthesize` (z3) proposes a swizzle for the buffer's last two dims from the
worst warp access of each site, counterexample-guided: every access of the buffer is
recounted under the answer with the buffers re-placed as the interpreter places them, the
instances still conflicting are added, and the question is asked again (up to SYNTH_ROUNDS).
Only a layout whose recount agrees is suggested. For a TMA buffer the copy engine fixes the
arrangement, so only the TMA swizzle modes that fit a row are recounted.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from tilesafe.frontend import ir
from tilesafe.frontend.walk import statements
from tilesafe.semantics.hw import bank_model
from tilesafe.semantics.hw.bank_eval import SiteEval, WarpAccess, costs, where, worst_cost
from tilesafe.semantics.hw.bank_sites import Site
from tilesafe.semantics.interpreter.interp_error import InterpError
from tilesafe.semantics.interpreter.smem import Placement, plan_shared
from tilesafe.semantics.layout import swizzle_synth

SYNTH_ROUNDS = 8  # counterexample-guided synthesis rounds per swizzle family

@dataclass(frozen=True)
class Suggestion:
    layout: str  # in our layout syntax
    degree: int  # worst conflict degree of every access of the buffer under it (verified)
    note: str


class Suggester:
    """Layout suggestions for the buffers of one kernel, one per buffer (cached)."""

    def __init__(self, kernel: ir.Kernel, sites: Sequence[Site],
                 evals: Mapping[int, SiteEval | str], placements: Mapping[str, Placement],
                 timeout_ms: int) -> None:
        self.kernel, self.sites, self.evals = kernel, sites, evals
        self.placements, self.timeout_ms = placements, timeout_ms
        self.suggestions: dict[str, tuple[Suggestion | None, str]] = {}
        self.model = bank_model.for_target(kernel.target)  # whose banks the fix is for

    def suggest(self, buffer: str) -> tuple[Suggestion | None, str]:
        if buffer not in self.suggestions:
            self.suggestions[buffer] = self._suggest(buffer)
        return self.suggestions[buffer]


    def _buffer_evals(self, buffer: str) -> list[SiteEval]:
        out = []
        for k, site in enumerate(self.sites):
            ev = self.evals[k]
            if site.buffer == buffer and isinstance(ev, SiteEval):
                out.append(ev)
        return out

    def recount(self, buffer: str, term: ir.LayoutTerm
                ) -> tuple[int, list[tuple[SiteEval, WarpAccess]]] | None:
        """Worst conflict degree of every access of `buffer` if it had layout `term`, with
        the buffers re-placed as the interpreter would, and the worst instance of each access
        that still conflicts. None: `term` is not a permutation of the buffer's elements (not
        a drop-in replacement) or cannot be realised."""
        buf = self.kernel.buffer(buffer)
        new = dataclasses.replace(buf, layout=term)
        shared = tuple(new if b.name == buffer else b for b in self.kernel.shared)
        try:
            place = plan_shared(shared).placements[buffer]
        except InterpError:
            return None
        first = place.base // buf.dtype.nbytes
        if sorted(place.slots) != list(range(first, first + buf.size)):
            return None
        worst, bad = 1, []
        for ev in self._buffer_evals(buffer):
            w = worst_cost(costs(ev, place, concrete=False))
            if w is not None and w.report.max_way > 1:
                worst = max(worst, w.report.max_way)
                bad.append((ev, w.inst))
        return worst, bad

    def _suggest(self, buffer: str) -> tuple[Suggestion | None, str]:
        """Counterexample-guided: synthesise for the worst warp instance of each access, recount
        every instance under the answer, add the ones still conflicting, and repeat."""
        buf = self.kernel.buffer(buffer)
        if _tma_buffer(self.kernel, buffer):
            return self._suggest_tma(buf)
        evs = self._buffer_evals(buffer)
        place = self.placements[buffer]
        initial: list[tuple[SiteEval, WarpAccess]] = []
        for ev in evs:
            w = worst_cost(costs(ev, place, concrete=False))
            if w is not None:
                initial.append((ev, w.inst))
        eb = buf.dtype.nbytes
        notes: list[str] = []
        best: Suggestion | None = None
        for family in ("cute", "rowxor"):
            chosen = list(initial)
            for _ in range(SYNTH_ROUNDS):
                tile, patterns = _synth_problem(buf, chosen, self.model.lanes)
                if tile is None:
                    return None, "No layout suggestion: the accesses do not fit the synthesiser."
                try:
                    res = swizzle_synth.synthesize(tile, patterns, family, self.model.synth,
                                                   self.timeout_ms)
                except (ValueError, AssertionError) as err:
                    notes.append(f"{family}: {err}")
                    break
                if res.status == "identity":
                    term: ir.LayoutTerm | None = ir.LayoutTerm("row_major", ())
                elif res.status == "found" and res.swizzle is not None:
                    term = _as_term(res.swizzle, buf, eb)
                    if term is None:
                        notes.append(f"{family}: {res.swizzle} has no form in our layout syntax")
                        break
                else:
                    notes.append(f"{family}: {res.reason}")
                    break
                counted = self.recount(buffer, term)
                if counted is None:
                    notes.append(f"{family}: {term} is not a permutation of {buffer}")
                    break
                degree, still = counted
                sug = Suggestion(str(term), degree, f"{family} family: {res.reason}; recounted")
                if degree == 1:
                    return sug, (f"A `{term}` layout for {buffer} removes it (swizzle "
                                 f"synthesis, verified: every access of {buffer} is then "
                                 "conflict-free).")
                if best is None or degree < best.degree:
                    best = sug
                fresh = [x for x in still if not any(x[1] is c[1] for c in chosen)]
                if not fresh:
                    notes.append(f"{family}: best {term} is still {degree}-way")
                    break
                chosen.extend(fresh)
            else:
                notes.append(f"{family}: no verified answer in {SYNTH_ROUNDS} rounds")
        if best is not None:
            return best, (f"No conflict-free swizzle found; `{best.layout}` for {buffer} lowers "
                          f"the worst conflict of its accesses to {best.degree}-way (verified).")
        return None, ("No swizzle(B, M, S, row_major) or row-XOR layout of "
                      f"{buffer} removes it: " + "; ".join(notes))

    def _suggest_tma(self, buf: ir.SharedBuffer) -> tuple[Suggestion | None, str]:
        row_bytes = buf.shape[-1] * buf.dtype.nbytes
        best: tuple[int, ir.LayoutTerm] | None = None
        for head in ("swizzle32B", "swizzle64B", "swizzle128B"):
            span = {"swizzle32B": 32, "swizzle64B": 64, "swizzle128B": 128}[head]
            term = ir.LayoutTerm(head, (ir.LayoutTerm("row_major", ()),))
            if row_bytes > span or str(term) == str(buf.layout):
                continue
            counted = self.recount(buf.name, term)
            if counted is not None and (best is None or counted[0] < best[0]):
                best = (counted[0], term)
        if best is None or best[0] > 1:
            got = f" (best: `{best[1]}`, {best[0]}-way)" if best else ""
            return None, (f"No layout suggestion: {buf.name} is a TMA buffer, so its layout "
                          f"must be a TMA swizzle mode, and none removes it{got}.")
        degree, term = best
        sug = Suggestion(str(term), degree, "TMA swizzle mode, recounted")
        return sug, (f"A `{term}` layout for {buf.name} (with the tensormap's swizzle mode "
                     "changed to match) removes it (verified: every access of "
                     f"{buf.name} is then conflict-free).")

def _tma_buffer(kernel: ir.Kernel, buffer: str) -> bool:
    return any((isinstance(s, ir.TmaLoad) and s.dst.buffer == buffer)
               or (isinstance(s, ir.TmaStore) and s.src.buffer == buffer)
               for s in statements(kernel.body))


def _synth_problem(buf: ir.SharedBuffer, chosen: Sequence[tuple[SiteEval, WarpAccess]],
                   lanes: int = 32
                   ) -> tuple[swizzle_synth.Tile | None, list[swizzle_synth.AccessPattern]]:
    """The buffer's last two dims as a row-major tile, and the chosen warp instances (bound
    evaluation) as access patterns, one per site, deduplicated."""
    shape = buf.shape
    rows, cols = (shape[-2], shape[-1]) if len(shape) >= 2 else (1, shape[0])
    try:
        tile = swizzle_synth.Tile(rows, cols, buf.dtype.nbytes)
    except ValueError:
        return None, []
    tables: dict[int, tuple[SiteEval, dict[tuple[object, ...], None]]] = {}
    for ev, inst in chosen:
        key = tuple((lane, ln.coord[-2:] if len(shape) >= 2 else (0, ln.coord[0]))
                    for lane, ln in sorted(inst.lanes.items()))
        tables.setdefault(id(ev), (ev, {}))[1].setdefault(key, None)
    patterns = []
    for n, (ev, seen) in enumerate(tables.values()):
        table = [dict(k) for k in seen]

        def coords(lane: int, it: int, table: list[dict] = table) -> tuple[int, int] | None:
            rc = table[it].get(lane) if lane < lanes else None
            return None if rc is None else (int(rc[0]), int(rc[1]))

        patterns.append(swizzle_synth.AccessPattern(
            f"{ev.site.op}@{where(ev.site.span)}#{n}", coords, buf.dtype.nbytes, len(table),
            ev.site.op))
    return tile, patterns


def _as_term(sw: swizzle_synth.Swizzle, buf: ir.SharedBuffer, eb: int) -> ir.LayoutTerm | None:
    """A synthesised byte-offset swizzle in our layout syntax (element offsets).

    CuTe Swizzle<B, Mb, S> on byte offsets x = e * eb (eb = 2**k) only moves bits >= Mb >= k,
    so on element offsets it is Swizzle<B, Mb - k, S>: our `swizzle(B, Mb - k, S, row_major)`.
    A row-XOR swizzle becomes an F2 `linear` layout when every extent is a power of two.
    """
    k = eb.bit_length() - 1
    if isinstance(sw, swizzle_synth.CuteSwizzle):
        if sw.base < k:
            return None
        return ir.LayoutTerm("swizzle", (sw.bits, sw.base - k, sw.shift,
                                         ir.LayoutTerm("row_major", ())))
    shape = buf.shape
    if any(e & (e - 1) for e in shape) or sw.chunk_log2 < k or len(shape) < 2:
        return None
    strides = [1] * len(shape)
    for i in range(len(shape) - 2, -1, -1):
        strides[i] = strides[i + 1] * shape[i + 1]
    bases: list[tuple[int, ...]] = []
    for i, e in enumerate(shape):
        nbits = e.bit_length() - 1
        dim = []
        for j in range(nbits):
            off = strides[i] << j
            if i == len(shape) - 2 and j < len(sw.columns):
                off ^= sw.columns[j] << (sw.chunk_log2 - k)
            dim.append(off)
        bases.append(tuple(dim))
    return ir.LayoutTerm("linear", tuple(bases))
