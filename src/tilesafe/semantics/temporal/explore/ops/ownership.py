"""The ownership family: shared-memory accesses and `fence proxy_async`, and how
permissions follow the synchronisation of the other families.

Why here: an access claims permission for what it reads and writes (perms.py), marks what
it certainly writes as defined, and is checked against the unordered accesses of its own
class (threads.py). Barrier phases, waits, arrives and `sync` move permissions; this
module's listeners are where they do (the families that synchronise do not know about
shares). Without ownership (the barrier checker alone) every hook here does nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from tilesafe.frontend.span import Span
from tilesafe.semantics.temporal import footprint as fpm
from tilesafe.semantics.temporal.explore import objects as obj
from tilesafe.semantics.temporal.explore import perms, threads
from tilesafe.semantics.temporal.explore.operands import AccessOperands, Err
from tilesafe.semantics.temporal.explore.ops import cluster
from tilesafe.semantics.temporal.explore.ops.base import Family, Op, Scan, Summary
from tilesafe.semantics.temporal.explore.state import (
    COVER,
    DEFINED,
    MAYBE_DEFINED,
    NEVER_WRITTEN,
    NO_WINDOW,
    State,
)
from tilesafe.semantics.temporal.instrs import Access, FenceProxy, Instr

if TYPE_CHECKING:
    from tilesafe.semantics.temporal.explore.machine import Machine
    from tilesafe.semantics.temporal.explore.mut import Mut


@dataclass(frozen=True)
class Written:
    """Per class, the atoms it may write through the generic proxy (sorted), and their
    `unfenced` objects: what its fences and arrives publish."""

    written: tuple[tuple[int, ...], ...]
    unfenced_keys: tuple[tuple[tuple, ...], ...]


def prepare(m: Machine) -> Written:
    written = []
    for a in range(m.n):
        out: set[int] = set()
        if m.ownership:
            for ins in m.agents[a].code:
                if not isinstance(ins, Access):
                    continue
                for ctrs in m.envs(a, ins):
                    ev = m.evaluate_safe(a, ins, m.env(a, ins, ctrs))
                    if ev is not None:
                        out.update(ev.writes)
        written.append(tuple(sorted(out)))
    return Written(tuple(written), tuple(tuple(obj.unfenced(x) for x in w) for w in written))


class AccessOp(Op):
    enumerated = True
    fusable = True

    def gates(self, ins: Instr) -> bool:
        return self.m.ownership  # it claims what the class does not hold yet

    def evaluate(self, a: int, ins: Access, env: Mapping[str, Any]) -> AccessOperands:
        m = self.m
        fp, masks = footprint(m, a, ins, env)
        reads: list[int] = []
        writes: list[int] = []
        must: list[int] = []
        exposed: list[int] = []
        covered: list[int] = []
        for buf, (r, w, mw, ex, cv) in masks.items():
            reads.extend(m.atoms.of(buf, r))
            writes.extend(m.atoms.of(buf, w))
            must.extend(m.atoms.of(buf, mw))
            exposed.extend(m.atoms.of(buf, ex))
            covered.extend(m.atoms.of(buf, cv))
        touch = 0
        if m.agents[a].cls.size > 1:
            t = fp.touches()
            if m.sym:  # relative to the class's first thread (semantics/temporal/symmetry.py)
                t = fpm.shifted(t, -m.agents[a].cls.threads[0])
            touch = m.windows.intern(t)
        covers = tuple((x, cover_of(m, fp, x)) for x in sorted(set(covered)))
        return AccessOperands(tuple(sorted(set(reads) - set(writes))), tuple(sorted(writes)),
                              not fp.approx, touch, tuple(sorted(exposed)),
                              tuple(sorted(must)), covers, fp)

    def scans(self, ins: Instr) -> bool:
        return self.m.ownership

    def scan(self, a: int, ins: Access, env: Mapping[str, Any], found: Scan) -> None:
        _, masks = footprint(self.m, a, ins, env)
        for buf, bits in masks.items():
            found.regions[buf].update(b for b in bits if b)

    def objects(self, a: int, ins: Access, ev: AccessOperands) -> tuple:
        if not self.m.ownership:
            return (), ()
        return (), (tuple(obj.free(x) for x in ev.reads + ev.writes)
                    + tuple(obj.unfenced(x) for x in ev.writes))

    def summarize(self, a: int, ins: Access, ev: AccessOperands, writes: Any,
                  into: Summary) -> None:
        into.written.update(obj.unfenced(x) for x in ev.writes)

    def gate(self, state: State, a: int, ins: Access, ev: AccessOperands, reads: frozenset,
             writes: frozenset) -> tuple[bool, frozenset, frozenset]:
        if not self.m.ownership:
            return True, reads, writes
        return True, reads, claims(self.m, state.perms, a, ev)

    def local(self, s: Mut, a: int, ins: Instr, ev: Any, reads: frozenset,
              writes: frozenset) -> bool:
        return self.m.ownership and not claims(self.m, s.perms, a, ev)

    def apply(self, s: Mut, a: int, ins: Access, ev: AccessOperands,
              span: Span | None) -> None:
        m = self.m
        ct = cluster.tables(m)
        if ct is not None:
            cluster.check_peers(s, a, (ct.atom_cta[x] for x in ev.reads + ev.writes),
                                "accesses the shared memory", span)
        for x in ev.exposed:
            d = s.defined[x]
            if d != DEFINED and not (d >= COVER and covers(m, d, ev.fp, x)):
                threads.uninitialised(s, a, x, span, "uninit")
        for x in ev.reads:
            perms.claim_read(s, a, x, span)
        for x in ev.writes:
            perms.claim_write(s, a, x, span)
            if s.defined[x] == NEVER_WRITTEN:
                s.defined[x] = MAYBE_DEFINED
            unf = s.perms[x].unfenced
            mine = m.keys.written[a]
            perms.set_unfenced(s, x, {mine} if ev.exact else set(unf) | {mine})
        for x, value in ev.covers:
            if s.defined[x] < COVER and s.defined[x] != DEFINED:
                s.defined[x] = value
        for x in ev.must:
            s.defined[x] = DEFINED
        if ev.touch:
            threads.race_check(s, a, ev.touch, span)

    def detail(self, a: int, ins: Access, ev: Any, completes: int, observes: int,
               observed: bool) -> tuple[str, str]:
        if isinstance(ev, Err):
            return "shared access", ""
        label = self.m.atoms.label
        r = ", ".join(sorted({label(x) for x in ev.reads}))
        w = ", ".join(sorted({label(x) for x in ev.writes}))
        return "access" + (f" reads {r}" if r else "") + (f" writes {w}" if w else ""), ""

    def touched(self, ins: Instr, ev: Any) -> tuple[tuple[int, ...], tuple[int, ...]]:
        return ev.reads, ev.writes


class FenceProxyOp(Op):
    fusable = True

    def late_writes(self, summary: Summary) -> Any:
        return summary.written if self.m.ownership else ()

    def step_objects(self, a: int, pc: int, ins: Instr, ev: Any) -> tuple:
        return (), tuple(self.m.static_w[a][pc])

    def local(self, s: Mut, a: int, ins: Instr, ev: Any, reads: frozenset,
              writes: frozenset) -> bool:
        return not reads and not writes

    def apply(self, s: Mut, a: int, ins: FenceProxy, ev: Any, span: Span | None) -> None:
        if self.m.ownership:
            perms.fence(s, a)


def claims(m: Machine, held: tuple, a: int, ev: AccessOperands) -> frozenset:
    """An access touches shared state only where it must claim permission: reading an
    atom the class holds a share of, or writing one it holds whole (its unfenced mark
    is then invisible to others, who cannot read the atom), is a local step."""
    me, unit = m.keys.cls[a], m.unit
    out = []
    for x in ev.reads:
        if not dict(held[x].holders).get(me):
            out.append(obj.free(x))
    for x in ev.writes:
        if dict(held[x].holders).get(me) != unit:
            out.append(obj.free(x))
            out.append(obj.unfenced(x))
    return frozenset(out)


# ---- footprints and definedness covers ----------------------------------------------------


def footprint(m: Machine, a: int, ins: Access, env: Mapping[str, Any]
              ) -> tuple[fpm.Footprint, dict]:
    """The may-footprint (semantics/temporal/footprint.py) and its bit masks. It depends only on
    loop variables (terms with sizes are over-approximated), so it is cached on the
    model across machines."""
    cache = m.model.__dict__.setdefault("_fp_cache", {})
    key = (a, id(ins), tuple(sorted((k, v) for k, v in env.items() if k.startswith("L"))))
    hit = cache.get(key)
    if hit is None:
        lits = m.model.__dict__.setdefault("_literals", fpm.Literals())
        fp = fpm.evaluate(ins.access, env, m.agents[a].cls.threads, m.k, literals=lits)
        hit = (fp, fp.masks())
        cache[key] = hit
    return hit


def cover_of(m: Machine, fp: fpm.Footprint, x: int) -> int:
    """The writes of `fp` to atom x that are certain under launch-constant literals, as
    a definedness value (>= COVER): which thread writes each element, under which."""
    p = fp.bufs[m.atoms.buf[x]]
    mask = m.atoms.elements(x)
    thread = np.where(mask, p.covered, fpm.NONE)
    guard = np.where(mask, p.covered_guard, 0)
    table = m.model.__dict__.setdefault("_covers", {})
    key = (m.atoms.buf[x], thread.tobytes(), guard.tobytes())
    if key not in table:
        table[key] = (COVER + len(table), thread, guard)
    return table[key][0]


def covers(m: Machine, value: int, fp: fpm.Footprint, x: int) -> bool:
    """Does the definedness value `value` of atom x (a cover) cover every exposed read of
    `fp` in x: the same single thread wrote the element under literals the read is
    under too (so, whenever the read happens, the write did)?"""
    cache = m.model.__dict__.setdefault("_cover_hits", {})
    key = (value, id(fp), x)
    hit = cache.get(key)
    if hit is None:
        table = m.model.__dict__["_covers"]
        _, thread, guard = next(v for v in table.values() if v[0] == value)
        p = fp.bufs[m.atoms.buf[x]]
        e = m.atoms.elements(x) & p.exposed
        hit = bool(np.all((p.exposed_by[e] >= 0) & (p.exposed_by[e] == thread[e])
                          & ((guard[e] & ~p.exposed_guard[e]) == 0)))
        cache[key] = hit
    return hit


# ---- how permissions follow the other families' synchronisation ---------------------------


def on_phase(s: Mut, inst: int, span: Span | None) -> None:
    if s.m.ownership:
        perms.split_phase(s, inst)


def on_wait(s: Mut, a: int, inst: int, cluster_scope: bool = False) -> None:
    threads.acquire(s, a)
    if s.m.ownership:
        perms.collect(s, a, inst)
        if cluster_scope:  # what arrivers of another CTA released (ops/cluster.py)
            perms.collect(s, a, inst, remote=True)


def on_arrive(s: Mut, a: int, inst: int, acquire: bool, deposit: int) -> None:
    """`deposit`: ops/cluster.py's NO_DEPOSIT, DEPOSIT or DEPOSIT_REMOTE."""
    threads.release(s, a, acquire=acquire)
    if s.m.ownership and deposit:
        perms.deposit(s, a, inst, remote=deposit == 2)


def on_sync(s: Mut) -> None:
    if s.m.ownership:
        s.wins = [NO_WINDOW] * s.m.n  # every thread is ordered after every access
        perms.everything_free(s)


FAMILY = Family("ownership", {Access: AccessOp, FenceProxy: FenceProxyOp}, prepare=prepare,
                applies=lambda m: m.ownership, on_phase=on_phase, on_wait=on_wait,
                on_arrive=on_arrive, on_sync=on_sync)
