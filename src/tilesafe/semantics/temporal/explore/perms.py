"""Permissions on shared memory (ownership): the operations every family uses on a state
being changed (mut.Mut).

Why one module: who holds which share of an atom is one discipline -- a write needs the
whole atom, a read some share, synchronisation moves shares between holders -- and the
families that move shares (mbarriers, bulk copies, named barriers, `sync`, accesses) call
these functions instead of each editing the holder sets. Permissions are integers in units
of `Machine.unit` (the whole atom): exact, and fast to hash. A split that would not be
exact raises Unsupported (the verdict becomes UNKNOWN) rather than rounding.
"""

from __future__ import annotations

from fractions import Fraction
from typing import TYPE_CHECKING

from tilesafe.frontend.span import Span
from tilesafe.semantics.temporal.events import Unsupported
from tilesafe.semantics.temporal.explore.errors import ExploreError
from tilesafe.semantics.temporal.explore.explain import holder_text
from tilesafe.semantics.temporal.explore.state import (
    CLASS,
    DEFINED,
    EARMARK,
    FREE,
    GIVEN_BACK,
    MMA,
    NAMED_CLAIM,
    NAMED_POOL,
    NEVER_WRITTEN,
    POOL,
    REMOTE_MARK,
    STRANDED,
    LoadCopy,
    Perm,
    StoreCopy,
    claimable_by,
    given_back,
    mma_held,
    stranded,
)
from tilesafe.semantics.temporal.explore.threads import (
    concurrent_writer,
    culprit_span,
    uninitialised,
)
from tilesafe.semantics.temporal.instrs import Arrive, Enter, Next, Wait

if TYPE_CHECKING:
    from tilesafe.semantics.temporal.explore.machine import Machine
    from tilesafe.semantics.temporal.explore.mut import Mut

_new = tuple.__new__  # records built without their generated __new__ (every move does this)


def holders(s: Mut, x: int) -> dict:
    return dict(s.perms[x].holders)


def set_holders(s: Mut, x: int, h: dict) -> None:
    s.perms[x] = _new(Perm, (frozenset((k, v) for k, v in h.items() if v), s.perms[x][1]))


def set_unfenced(s: Mut, x: int, unf: frozenset | set | tuple) -> None:
    s.perms[x] = _new(Perm, (s.perms[x][0], tuple(sorted(unf))))


def who(s: Mut, h: dict, but: tuple) -> str:
    m = s.m
    names = []
    for k, v in sorted(h.items()):
        if k == but or k == FREE or not v:
            continue
        names.append(f"{holder_text(m, k)} ({Fraction(v, m.unit)})")
    return ", ".join(names) or "nobody"


def copy_holders(s: Mut, x: int) -> list[str]:
    out = []
    for c in s.copies:
        if isinstance(c, LoadCopy) and x in c.atoms:
            out.append(f"an in-flight TMA load into {s.m.atoms.label(x)}")
        elif isinstance(c, StoreCopy) and x in c.atoms:
            out.append(f"an in-flight TMA store of {s.m.agents[c.cls].cls.name}")
    return out


# ---- accesses -------------------------------------------------------------------------------


def claim_read(s: Mut, a: int, x: int, span: Span | None) -> None:
    h = holders(s, x)
    me = s.m.keys.cls[a]
    if h.get(me):
        return
    free = h.get(FREE, 0)
    if not free:  # a completed named-barrier phase this class waited for
        for k in h:
            if claimable_by(k, a) and h[k]:
                share = min(h[k], s.m.read_share)
                h[me] = share
                h[k] -= share
                if not h[k]:
                    del h[k]
                set_holders(s, x, h)
                return
    if free:
        # A fixed share, so that the order of claims does not matter: all classes
        # together can never hold the whole atom by reading.
        share = min(free, s.m.read_share)
        h[me] = share
        h[FREE] = free - share
        set_holders(s, x, h)
        return
    denied(s, a, x, h, span, write=False)


def claim_write(s: Mut, a: int, x: int, span: Span | None) -> None:
    h = holders(s, x)
    me = s.m.keys.cls[a]
    mine = [k for k in h if k == me or k == FREE or claimable_by(k, a)]
    if sum(h[k] for k in mine) == s.m.unit:
        for k in mine:
            del h[k]
        h[me] = s.m.unit
        set_holders(s, x, h)
        return
    denied(s, a, x, h, span, write=True)


def scope_race(s: Mut, a: int, x: int, h: dict, what: str, span: Span | None) -> None:
    """A claim that fails because a release or acquire had the wrong scope: what the region
    waits for was given up by a relaxed or `.cta` arrive nobody can acquire, or lies in a
    phase only an acquire at cluster scope takes (TS309, naming the CTA, barrier and
    scope)."""
    m = s.m
    for k in sorted(h):
        if k[0] == STRANDED and h[k]:
            raise ExploreError("TS309", f"{m.agents[a].cls.name} {what} {m.atoms.label(x)}, "
                               f"which {holder_text(m, k)}: the hand-off needs a release at "
                               "cluster scope (`scope cluster`, not relaxed)", span,
                               atom=m.atoms.label(x))
        if k[0] == REMOTE_MARK and h[k]:
            raise ExploreError("TS309", f"{m.agents[a].cls.name} {what} {m.atoms.label(x)}, "
                               f"which {holder_text(m, k)}; its wait on {m.labels[k[1]]} "
                               "acquires at .cta scope (add `scope cluster` to the wait)",
                               span, atom=m.atoms.label(x))


def denied(s: Mut, a: int, x: int, h: dict, span: Span | None, write: bool) -> None:
    m = s.m
    name, region = m.agents[a].cls.name, m.atoms.label(x)
    span = culprit_span(m, a, s.agents[a], x, write) or span
    scope_race(s, a, x, h, "writes" if write else "reads", span)
    others = [who(s, h, m.keys.cls[a])] + copy_holders(s, x)
    others = [o for o in others if o != "nobody"] or ["nobody (its permission is lost)"]
    held = "; ".join(others)
    if released_before(m, a, s.agents[a][0], x):
        raise ExploreError("TS305", f"{name} accesses {region} after its own arrive released "
                           f"it (now held by {held}): the arrive comes before the last access",
                           span, atom=region)
    if write:
        raise ExploreError("TS302", f"{name} writes {region} without full permission (held by "
                           f"{held})", span, atom=region)
    raise ExploreError("TS304", f"{name} reads {region} before it is ready: no permission "
                       f"(held by {held}){unguarded_hint(m, x, h)}", span, atom=region)


def unguarded_hint(m: Machine, x: int, h: dict) -> str:
    """Where the region sits in a barrier phase that does not guard it: a TMA load
    signalling that barrier filled it, and since a barrier hands over only the buffers
    it `guards`, no wait can ever give it to a reader (docs/language.md, *guards*)."""
    buf = m.atoms.buf[x]
    for k in h:
        if k[0] in (POOL, EARMARK) and x not in m.atoms.guards[k[1]]:
            bar = m.model.instances[k[1]][0]
            return (f"; the TMA load that filled it signals {m.labels[k[1]]}, but "
                    f"mbarrier {bar} does not guard {buf}: a barrier hands over only the "
                    f"buffers it guards -- add {buf}[i] to its `guards` (e.g. `guards ..., "
                    f"{buf}[i]`)")
    return ""


def released_before(m: Machine, a: int, pc: int, atom: int) -> bool:
    """Did this class, earlier in the same pass over its code (back to the loop head or
    the start), arrive on a barrier guarding this atom's buffer before waiting on one?
    Then a missing permission was given away by its own arrive (TS305)."""
    code = m.agents[a].code
    buf = m.atoms.buf[atom]
    q = pc - 1
    while q >= 0:
        ins = code[q]
        if isinstance(ins, (Enter, Next)):
            return False
        if isinstance(ins, (Arrive, Wait)):
            g = m.k.barrier(ins.bar).guards
            if g is not None and g.buffer == buf:
                return isinstance(ins, Arrive)
        q -= 1
    return False


# ---- synchronisation moves shares -----------------------------------------------------------


def deposit(s: Mut, a: int, inst: int, remote: bool = False) -> None:
    """An arrive releases what the class holds of the barrier's guarded region, and
    publishes its generic writes (a later proxy fence no longer covers them). `remote`:
    the arriving class is of another CTA (a release at cluster scope): its share is pooled
    apart, for waits that acquire at cluster scope."""
    me = s.m.keys.cls[a]
    key = s.m.keys.rpool[inst] if remote else s.m.keys.pool[inst]
    for x in s.m.atoms.guards[inst]:
        h = holders(s, x)
        mine = h.pop(me, 0)
        if mine:
            h[key] = h.get(key, 0) + mine
            set_holders(s, x, h)
    publish(s, a)


def publish(s: Mut, a: int) -> None:
    mine = s.m.keys.written[a]
    for x in s.m.tables["ownership"].written[a]:
        unf = s.perms[x].unfenced
        if mine in unf:
            set_unfenced(s, x, (set(unf) - {mine}) | {s.m.keys.published[a]})


def fence(s: Mut, a: int) -> None:
    """fence proxy_async: the class's unpublished generic writes are fenced."""
    mine = s.m.keys.written[a]
    for x in s.m.tables["ownership"].written[a]:
        unf = s.perms[x].unfenced
        if mine in unf:
            set_unfenced(s, x, set(unf) - {mine})


def split_phase(s: Mut, inst: int) -> None:
    """A phase of `inst` completed: what its arrivals pooled is split among the classes
    that wait on the instance, each share earmarked for one of them (what arrivers of
    another CTA pooled, apart: only a wait acquiring at cluster scope takes it)."""
    m = s.m
    waiters = m.waiters[inst]
    pools = ((m.keys.pool[inst], m.keys.earmark[inst]),
             (m.keys.rpool[inst], m.keys.rmark[inst]))
    for x in m.atoms.guards[inst]:
        h = holders(s, x)
        for key, mark in pools:
            pool = h.pop(key, 0)
            if pool and waiters:
                share, rest = divmod(pool, len(waiters))
                if rest:
                    raise Unsupported("a permission split is not exact in the chosen unit")
                for w in waiters:
                    h[mark[w]] = h.get(mark[w], 0) + share
            elif pool:
                h[key] = pool
        set_holders(s, x, h)


def strand(s: Mut, a: int, why: int, inst: int) -> None:
    """A release nobody can acquire (a relaxed arrive, a `.cta` arrive on another CTA's
    barrier; inst -1: a relaxed cluster_arrive, of everything the class holds): what the
    class holds of the region is given up to no one, marked with why (TS309 for whoever
    needs it next)."""
    me = s.m.keys.cls[a]
    atoms = s.m.atoms.guards[inst] if inst >= 0 else range(len(s.m.atoms))
    key = stranded(a, why, inst)
    for x in atoms:
        h = holders(s, x)
        mine = h.pop(me, 0)
        if mine:
            h[key] = h.get(key, 0) + mine
            set_holders(s, x, h)


def collect(s: Mut, a: int, inst: int, remote: bool = False) -> None:
    """Class `a` passed a wait on `inst`: it takes what completed phases earmarked for it
    (`remote`: what arrivers of another CTA released, for a wait at cluster scope)."""
    keys = s.m.keys.rmark if remote else s.m.keys.earmark
    mark, me = keys[inst][a], s.m.keys.cls[a]
    for x in s.m.atoms.guards[inst]:
        h = holders(s, x)
        got = h.pop(mark, 0)
        if got:
            h[me] = h.get(me, 0) + got
            set_holders(s, x, h)


_SYNC_FREES = (CLASS, NAMED_POOL, NAMED_CLAIM)  # what `sync` gives back to FREE


def everything_free(s: Mut) -> None:
    """`sync`: what classes and named barriers hold becomes free, every write published."""
    for x, (h, unf) in enumerate(s.perms):
        hh = {k: v for k, v in h if k[0] not in _SYNC_FREES}
        back = sum(v for k, v in h if k[0] in _SYNC_FREES)
        if back:
            hh[FREE] = hh.get(FREE, 0) + back
        s.perms[x] = _new(Perm, (frozenset(hh.items()),
                                 tuple(sorted({s.m.keys.published[c] for c, _ in unf}))))


# ---- bulk copies ----------------------------------------------------------------------------


def load_takes(s: Mut, a: int, inst: int, atoms: tuple[int, ...], span: Span | None) -> None:
    """A TMA load takes its slice whole: the class's share, the phase's pool and the free
    share must make the whole atom (TS303 otherwise: someone still reads the stage)."""
    m = s.m
    me, pool = m.keys.cls[a], m.keys.pool[inst]
    for x in atoms:
        h = holders(s, x)
        if h.get(me, 0) + h.get(pool, 0) + h.get(FREE, 0) != m.unit:
            scope_race(s, a, x, h, "loads (TMA) into", span)
            rest = {k: v for k, v in h.items() if k not in (me, pool, FREE)}
            others = [who(s, rest, ())] + copy_holders(s, x)
            others = [o for o in others if o != "nobody"]
            raise ExploreError("TS303", f"TMA load into {m.atoms.label(x)} while "
                               f"{'; '.join(others) or 'another owner'} still holds it: "
                               "the copy may overwrite a stage that is still being read",
                               span, atom=m.atoms.label(x))
        for k in (me, pool, FREE):
            h.pop(k, None)
        set_holders(s, x, h)
        set_unfenced(s, x, ())


def load_lands(s: Mut, inst: int, atoms: tuple[int, ...]) -> None:
    """A TMA load landed: its slice is written, and pooled into the barrier's phase."""
    key = s.m.keys.pool[inst]
    for x in atoms:
        h = holders(s, x)
        h[key] = h.get(key, 0) + s.m.unit
        set_holders(s, x, h)
        set_unfenced(s, x, ())
        s.defined[x] = DEFINED


def store_reads(s: Mut, a: int, atoms: tuple[int, ...], span: Span | None) -> int:
    """A TMA store reads its slice: the class must be able to read it, it must be written,
    and fenced for the async proxy (TS301). The copy carries half the class's share (the
    class keeps reading meanwhile); returns that share."""
    m = s.m
    frac = 0
    for x in atoms:
        if s.defined[x] != DEFINED:
            # Elements outside the tensor are read but not stored: whether an
            # unwritten one matters is not decided here (UNKNOWN, never a pass).
            uninitialised(s, a, x, span, "possible-uninit")
        claim_read(s, a, x, span)
        unf = s.perms[x].unfenced
        if unf:
            writers = sorted({m.agents[c].cls.name for c, _ in unf})
            raise ExploreError("TS301", f"TMA store reads {m.atoms.label(x)}, written "
                               f"through the generic proxy by {', '.join(writers)} with no "
                               "'fence proxy_async' before the synchronisation that orders "
                               "the write before the copy", span, atom=m.atoms.label(x))
    me = m.keys.cls[a]
    for x in atoms:
        h = holders(s, x)
        mine = h[me]
        frac, rest = divmod(mine, 2)
        if rest:
            raise Unsupported("a permission split is not exact in the chosen unit")
        h[me] = mine - frac
        set_holders(s, x, h)
    return frac


def store_done(s: Mut, c: StoreCopy) -> None:
    """A TMA store finished reading: its share waits for the issuer's wait_group."""
    for x in c.atoms:
        h = holders(s, x)
        key = given_back(c.cls, c.age)
        h[key] = h.get(key, 0) + c.share
        set_holders(s, x, h)


def groups_committed(s: Mut, a: int) -> None:
    for x, (h, _) in enumerate(s.perms):
        if any(k[0] == GIVEN_BACK and k[1] == a for k, _ in h):
            hh = {(given_back(a, k[2] + 1) if k[0] == GIVEN_BACK and k[1] == a else k): v
                  for k, v in h}
            set_holders(s, x, hh)


def groups_waited(s: Mut, a: int, pending: int) -> None:
    """wait_group N: the shares of stores older than the N newest groups come back."""
    for x, (h, _) in enumerate(s.perms):
        back = [(k, v) for k, v in h
                if k[0] == GIVEN_BACK and k[1] == a and k[2] > pending]
        if back:
            hh = dict(h)
            me = s.m.keys.cls[a]
            for k, v in back:
                del hh[k]
                hh[me] = hh.get(me, 0) + v
            set_holders(s, x, hh)



# ---- wgmma ------------------------------------------------------------------------------------


def mma_reads(s: Mut, a: int, atoms: tuple[int, ...], span: Span | None) -> None:
    """The class's MMAs read their tiles until a wgmma_wait covers their group: each tile
    atom must be written (TS306 / TS304 when nothing has written it yet, a candidate when
    it may not be), readable by the class (TS304) and fenced for the async proxy (TS301);
    the open group takes half the class's share (the class keeps reading meanwhile), so
    that nobody gets the atom whole -- to write it, or load a stage into it -- before the
    wait gives the share back."""
    m = s.m
    me = m.keys.cls[a]
    key = mma_held(a, 0)
    for x in atoms:
        d = s.defined[x]
        if d == NEVER_WRITTEN and s.soft is None:
            who, region = m.agents[a].cls.name, m.atoms.label(x)
            if concurrent_writer(m, s.agents, s.copies, a, x):
                s.flag(ExploreError("TS304", f"a wgmma of {who} reads {region} before the write "
                                    "that fills it is ordered before the MMA (use before "
                                    "ready)", span, soft=True, agent=a, atom=region))
            else:
                s.flag(ExploreError("TS306", f"a wgmma of {who} reads {region}, which nothing "
                                    "(no thread, no copy) has written before: uninitialised "
                                    "shared memory", span, soft=True, agent=a, atom=region))
        elif d != DEFINED:
            uninitialised(s, a, x, span, "uninit")  # some write may not cover it
        claim_read(s, a, x, span)
        unf = s.perms[x].unfenced
        if unf:
            writers = sorted({m.agents[c].cls.name for c, _ in unf})
            raise ExploreError("TS301", f"a wgmma reads {m.atoms.label(x)}, written through the "
                               f"generic proxy by {', '.join(writers)} with no 'fence "
                               "proxy_async' before the synchronisation that orders the write "
                               "before the MMA (the tensor cores read through the async "
                               "proxy)", span, atom=m.atoms.label(x))
    for x in atoms:
        h = holders(s, x)
        half, rest = divmod(h[me], 2)
        if rest:
            raise Unsupported("a permission split is not exact in the chosen unit")
        h[me] -= half
        h[key] = h.get(key, 0) + half
        set_holders(s, x, h)


def mma_committed(s: Mut, a: int) -> None:
    """wgmma_commit: the class's groups age by one (the open group becomes age 1)."""
    for x, (h, _) in enumerate(s.perms):
        if any(k[0] == MMA and k[1] == a for k, _ in h):
            set_holders(s, x, {(mma_held(a, k[2] + 1) if k[0] == MMA and k[1] == a else k): v
                               for k, v in h})


def mma_waited(s: Mut, a: int, ages: frozenset[int]) -> None:
    """wgmma_wait N: the MMAs of the groups of these ages (all but the N newest holding
    MMAs) are complete; what they read is the class's again."""
    me = s.m.keys.cls[a]
    for x, (h, _) in enumerate(s.perms):
        back = [(k, v) for k, v in h if k[0] == MMA and k[1] == a and k[2] in ages]
        if back:
            hh = dict(h)
            for k, v in back:
                del hh[k]
                hh[me] = hh.get(me, 0) + v
            set_holders(s, x, hh)
