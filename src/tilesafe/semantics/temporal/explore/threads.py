"""The threads of one class (ownership): races between them and uninitialised reads.

Why: a class moves as one agent, but its threads are not in lockstep. Per class the state
keeps the accesses not yet ordered among its threads (State.wins, interned thread maps of
semantics/temporal/footprint.py); synchronisation moves them from "open" to "released" (an arrive)
to "ordered" (a later wait: possibly ordered) and clears them (`sync`, a completed named
barrier phase). Both kinds of finding are *candidates* (soft, detail["candidate"]): the
footprints over-approximate, so the checker confirms them on the exact footprints of one
block (semantics/temporal/witness.py) before refuting.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tilesafe.frontend.span import Span
from tilesafe.semantics.temporal import footprint as fpm
from tilesafe.semantics.temporal.explore import objects as obj
from tilesafe.semantics.temporal.explore.errors import ExploreError
from tilesafe.semantics.temporal.explore.state import NO_WINDOW, LoadCopy
from tilesafe.semantics.temporal.instrs import Access

if TYPE_CHECKING:
    from tilesafe.semantics.temporal.explore.machine import Machine
    from tilesafe.semantics.temporal.explore.mut import Mut


def release(s: Mut, a: int, acquire: bool = False) -> None:
    """The class arrives on a barrier: its earlier accesses are published. With
    `acquire` (the warp convergence of `one per warp`), also ordered among its lanes."""
    if not s.m.ownership:
        return
    w = s.m.windows
    opened, released, ordered = s.wins[a]
    if acquire:
        s.wins[a] = (0, 0, w.merge(ordered, w.merge(opened, released)))
    else:
        s.wins[a] = (0, w.merge(released, opened), ordered)


def acquire(s: Mut, a: int) -> None:
    """The class passes a wait: what it published before may now be ordered."""
    if not s.m.ownership:
        return
    opened, released, ordered = s.wins[a]
    s.wins[a] = (opened, 0, s.m.windows.merge(ordered, released))


def ordered_all(s: Mut, a: int) -> None:
    """Every thread of the class is ordered after every access of the class."""
    s.wins[a] = NO_WINDOW


def race_check(s: Mut, a: int, touch: int, span: Span | None) -> None:
    """Threads of one class run the same code but not in lockstep: an access meeting
    another thread's access of the class since the threads were last ordered (`sync`;
    for `open` and `released` not even possibly: no wait of the class came in between)
    is a race. Conflicts with `ordered` accesses (a release and an acquire of the class
    in between, which mbarriers may have made an ordering) are possible races only."""
    m = s.m
    w = m.windows
    opened, released, ordered = s.wins[a]
    if s.soft is None:
        c = w.self_conflict(touch) or w.conflict(w.merge(opened, released), touch)
        kind = "race"
        if c is None:
            c, kind = w.conflict(ordered, touch), "possible-race"
        if c is not None:
            pc, ctrs = s.agents[a]
            ins = m.agents[a].code[pc]
            span = fpm.culprit(ins.access, m.env(a, ins, ctrs), m.agents[a].cls.threads,
                               m.k, c.buffer, 1 << c.element, c.kind != fpm.RAW) or span
            s.soft = ExploreError(c.code, race_text(m, a, c, kind), span, soft=True,
                                  candidate=kind, agent=a,
                                  atom=fpm.element_label(m.k.buffer(c.buffer), c.element))
    s.wins[a] = (w.merge(opened, touch), released, ordered)


def uninitialised(s: Mut, a: int, x: int, span: Span | None, kind: str) -> None:
    """A read of an atom nothing has certainly written. When another agent (or a copy
    in flight) may still write it before its next `sync`, the read is not ordered after
    that write: data not ready (TS304). Otherwise nothing writes it first in any run
    (TS306)."""
    if s.soft is not None:
        return
    m = s.m
    region = m.atoms.label(x)
    who = m.agents[a].cls.name
    if concurrent_writer(m, s.agents, s.copies, a, x):
        code = "TS304"
        msg = (f"{who} reads {region} before the write that fills it is ordered before "
               "the read (use before ready)")
    else:
        code = "TS306"
        msg = (f"{who} reads {region}, which nothing (no thread, no copy) has written "
               "before: uninitialised shared memory")
    if kind == "uninit":
        span = culprit_span(m, a, s.agents[a], x, False) or span
    s.soft = ExploreError(code, msg, span, soft=True, candidate=kind, agent=a, atom=region)


def culprit_span(m: Machine, a: int, where: tuple, atom: int, write: bool) -> Span | None:
    """The load or store (inside a collapsed loop, say) that touched the atom."""
    pc, ctrs = where
    ins = m.agents[a].code[pc]
    if not isinstance(ins, Access):
        return None
    env = m.env(a, ins, ctrs)
    return fpm.culprit(ins.access, env, m.agents[a].cls.threads, m.k, m.atoms.buf[atom],
                       m.atoms.mask[atom], write)


def concurrent_writer(m: Machine, agents: Any, copies: Any, a: int, x: int) -> bool:
    """May another agent, or a copy in flight, still write atom x before its next sync
    (its future, futures.py)? `agents` and `copies` are those of a state."""
    key = obj.unfenced(x)
    for b in range(m.n):
        if b != a and key in m.fut[b][agents[b][0]][1]:
            return True
    return any(isinstance(c, LoadCopy) and x in c.atoms for c in copies)


def race_text(m: Machine, a: int, c: fpm.Conflict, kind: str) -> str:
    """What two threads of one class did to one element, for a race message."""
    base = m.agents[a].cls.threads[0] if m.sym else 0

    def who(t: int) -> str:
        return f"thread {t + base}" if t >= 0 else "several threads"

    elem = fpm.element_label(m.k.buffer(c.buffer), c.element)
    cls = m.agents[a].cls.name
    earlier = "wrote" if c.kind in (fpm.RAW, fpm.WAW) else "read"
    later = "reads" if c.kind == fpm.RAW else "writes"
    text = (f"{who(c.later)} of {cls} {later} {elem}, which {who(c.earlier)} of the same "
            f"class {earlier}")
    if kind == "possible-race":
        return (text + " with only mbarrier operations of the class in between: whether "
                "they order the two threads is not decided (possible race)")
    return (text + " with no synchronisation in between: the threads of a class are not "
            "in lockstep, so this is a race (a `sync` missing?)")
