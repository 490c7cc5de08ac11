"""Explicit-state exploration of the event model (semantics/events.py) for concrete sizes.

Why: the barrier protocol and the ownership discipline are properties of every interleaving
of the agents and the copy engine. A state is hashable, so reachable states are enumerated
breadth-first (shortest counterexamples first) with a partial-order reduction that skips
interleavings of independent steps.

State (a tuple, hashed as a whole):
  agents   per class: (pc, loop counters); pc always points at a visible instruction
  bars     per barrier instance: (MbarrierState, initialising class or -1, fenced, phases
           completed capped at 2 -- only a first wait needs it)
  obs      per (class, instance): phases completed that the class has not yet observed
           with a wait (0, 1, 2 = two or more), or -1 before its first wait
  copies   sorted in-flight copies: ("L", instance, bytes, issued-in-current-phase, atoms)
           and ("S", class, group age, atoms, fraction) (age 0 = open bulk group)
  perms    ownership only, per atom of shared memory: (holders with their shares in
           integer units of the atom, unfenced generic writers (class, published?))
  defined  ownership only, per atom: 0 never written, MAYBE_DEFINED, DEFINED, or a cover
           (>= COVER: written if launch-constant conditions held for the writers)
  lflags   per barrier instance: LOAD_IN_PHASE / LOAD_UNOBSERVED (exit: TS430)
  sages    per class: bulk-group ages of TMA stores no wait_group covered (exit: TS307)
  wins     ownership only, per class: (open, published, acquired) interned thread maps of
           its accesses not yet ordered among its threads (semantics/footprint.py)

Races between threads of one class and uninitialised reads are *candidates* (soft findings
with detail["candidate"]): they do not cut a search short, and the checker confirms them on
exact footprints (semantics/witness.py) before refuting.

Permission holders: ("A", class), ("F",) free (claimable: after init and after `sync`),
("P", instance) deposited into a barrier's current phase, ("E", instance, class) released
by a completed phase and earmarked for a waiting class, ("G", class, age) given back by a
finished TMA store and reclaimed at `wait_group`. In-flight copies carry theirs.

Partial-order reduction: persistent sets computed from conflicting "future objects" (the
barriers, buffers, bulk-group state and `sync` an agent may still touch); the state graph is
acyclic (every step moves a program counter forward or retires a copy), so persistent sets
without a cycle proviso preserve every reachable deadlock and every reachable error step.
"""

from __future__ import annotations

import itertools
import math
from collections import deque
from collections.abc import Iterator, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np

from tilesafe.frontend import ir
from tilesafe.frontend.span import Span
from tilesafe.semantics import footprint as fpm
from tilesafe.semantics import mbarrier as mb
from tilesafe.semantics import symmetry
from tilesafe.semantics.budget import Budget, BudgetExceeded
from tilesafe.semantics.events import (
    Agent,
    Instr,
    Model,
    TraceStep,
    Unsupported,
    slice_mask,
)

END = "end"

# Set by `verify --certificates` (proofs/certificates.py): an object whose `begin(machine,
# roots, por)` returns a graph with `visit(state)` and `edge(state, move, next)`; every
# search then records the states and transitions it explored, for an independent checker.
GRAPH_RECORDER: ContextVar[Any] = ContextVar("tilesafe_graph_recorder", default=None)
# Per barrier instance (state[6]): a TMA load was issued during the current phase; a phase
# with a load completed and no wait on the instance has passed since. A block that exits
# with either bit set exits with a load nobody is ordered after (TS430).
LOAD_IN_PHASE, LOAD_UNOBSERVED = 1, 2
# Per atom (state[5]): nothing wrote it (0) / some write may have covered it / it was
# certainly written (a certain write of a thread, a TMA load landing) / from COVER on: it
# was written certainly *if* launch-constant conditions held for the writing threads (an
# interned cover, Machine.cover_of), which covers later reads under the same conditions.
MAYBE_DEFINED, DEFINED, COVER = 1, 2, 3
_EMPTY: frozenset = frozenset()
_SYNC = frozenset({("s",)})
FREE = ("F",)
# mbarrier model codes without a barrier-checker code of their own -> the checker's codes
# (the model already raises TS401..TS404 itself).
MODEL_CODES = {"TS411": "TS403", "TS415": "TS408", "TS416": "TS407"}


@dataclass(frozen=True)
class Finding:
    """A violation reached by some run: the code, what happened, and the run itself."""

    code: str
    message: str
    span: Span | None
    path: tuple  # moves from the root state
    root: tuple  # the state the path starts from
    soft: bool  # the run goes on after it (a protocol slip, not undefined behaviour)
    detail: Mapping[str, Any] = field(default_factory=dict)


@dataclass
class Stats:
    states: int = 0
    transitions: int = 0
    complete: bool = True
    reason: str = ""
    deadlocks: int = 0
    finals: int = 0
    budget: bool = False  # stopped because the verification budget is spent


class CannotMove(Exception):
    """A replayed move names an agent that cannot move in that state: the path does not
    belong to this system (e.g. a far-system run tried at a smaller trip count). Not a
    property of the kernel, so it carries no TS code."""


class _Error(Exception):
    def __init__(self, code: str, message: str, span: Span | None, soft: bool = False,
                 **detail: Any) -> None:
        super().__init__(message)
        self.code, self.message, self.span, self.soft, self.detail = (code, message, span,
                                                                       soft, detail)


class Machine:
    """The transition system of one block for concrete sizes (and trip counts)."""

    def __init__(self, model: Model, sizes: Mapping[str, int], period: int | None = None,
                 enum_cap: int = 4096) -> None:
        self.model = model
        self.k = model.kernel
        self.sizes = dict(sizes)
        self.ownership = model.ownership
        self.agents: tuple[Agent, ...] = model.agents
        self.n = len(self.agents)
        self.ninst = len(model.instances)
        self.period = period
        self.enum_cap = enum_cap
        # A lifted block index (semantics/blockparam.py) is a size: it overrides the default.
        self.base = {"block.x": 0, "block.y": 0, "block.z": 0, **self.sizes}
        self._ev: dict[tuple, Any] = {}
        self._settle: dict[tuple, tuple[int, tuple[int, ...]]] = {}
        self.bar_len = {b.name: b.instances for b in self.k.barriers}
        self.labels = [model.label(i) for i in range(len(model.instances))]
        self.bar_count = {b.name: b.count for b in self.k.barriers}
        self.atoms: dict[str, list[int]] = {}
        self.atom_buf: list[str] = []
        self.atom_mask: list[int] = []
        self.waiters: list[tuple[int, ...]] = [() for _ in range(self.ninst)]
        self.guard_atoms: list[tuple[int, ...]] = [() for _ in range(self.ninst)]
        # Permissions in integer units of one atom: every share the rules create (a read
        # share 1/(n+1), a phase split among its waiters, a TMA store's half) divides it.
        self.unit = math.lcm(*range(1, self.n + 2)) ** 2 * (1 << 24)
        # Named barriers (bar_sync / bar_arrive): per id used, the classes arrived in the
        # current phase (a bit mask, state[9]); a phase completes when the arrived classes
        # hold `count` threads. Syncers (classes with a bar_sync on the id) get what the
        # arrivers released (ownership).
        ids = sorted({ins.named for ag in self.agents for ins in ag.code
                      if ins.op in ("narrive", "nwait")})
        self.nidx = {b: i for i, b in enumerate(ids)}
        self.named_ids = tuple(ids)
        self.ncounts = tuple(sorted({ins.ncount for ag in self.agents for ins in ag.code
                                     if ins.op == "narrive" and ins.named == b}) for b in ids)
        self.uses_sync = any(ins.op == "sync" for ag in self.agents for ins in ag.code)
        self.nsyncers = tuple(tuple(a for a, ag in enumerate(self.agents)
                                    if any(ins.op == "nwait" and ins.named == b
                                           for ins in ag.code)) for b in ids)
        self.read_share = self.unit // (self.n + 1)
        self.fut: list[tuple[tuple[frozenset, frozenset], ...]] = []
        self.static_w: list[tuple[frozenset, ...]] = []
        self._static_cache: dict = {}
        self._por_cache: dict = {}
        self._copy_cache: dict = {}
        self.static_u: list[tuple] = []
        self._labels_cache: dict[int, str] = model.__dict__.setdefault("_label_cache", {})
        self.windows: fpm.TouchTable = model.__dict__.setdefault("_touches", fpm.TouchTable())
        # Identical classes (semantics/symmetry.py): states are kept up to their renaming.
        self.sym: tuple[tuple[int, ...], ...] = (symmetry.groups(self.agents)
                                                 if model.symmetric else ())
        self.sym_of: dict[int, tuple[int, ...]] = {a: g for g in self.sym for a in g}
        self._prepass()
        self._futures()
        if self.sym:  # differences show at once, before any search (semantics/symmetry.py)
            for g in self.sym:
                for pc, ins in enumerate(self.agents[g[0]].code):
                    if ins.visible:
                        for ctrs in itertools.islice(self._envs(g[0], ins), 64):
                            self.event(g[0], pc, ctrs)

    # ---- environments and evaluation -------------------------------------------------------

    def describe_holder(self, k: tuple) -> str:
        """Who a permission key names, for evidence and messages."""
        if k[0] == "F":
            return "free"
        if k[0] == "A":
            return self.agents[k[1]].cls.name
        if k[0] == "P":
            return f"barrier {self.labels[k[1]]} (current phase)"
        if k[0] == "E":
            return f"barrier {self.labels[k[1]]} (released to {self.agents[k[2]].cls.name})"
        if k[0] == "G":
            return f"finished TMA store of {self.agents[k[1]].cls.name} (not yet waited)"
        if k[0] == "N":
            return f"named barrier {self.named_ids[k[1]]} (released by its arrivers)"
        if k[0] == "Q":
            who = ", ".join(self.agents[c].cls.name for c in range(self.n) if (k[2] >> c) & 1)
            return f"named barrier {self.named_ids[k[1]]} (completed; claimable by {who})"
        return str(k)

    def env(self, a: int, ins: Instr, ctrs: tuple[int, ...]) -> dict[str, Any]:
        env = dict(self.base)
        env["thread"] = self.agents[a].cls.threads[0]
        for lc, i in zip(ins.ctx, ctrs, strict=False):
            env[f"L{lc.uid}"] = lc.lo(env) + lc.step * i
        return env

    def settle(self, a: int, pc: int, ctrs: tuple[int, ...]) -> tuple[int, tuple[int, ...]]:
        """Run control instructions until a visible one (loops, branches, jumps)."""
        key = (a, pc, ctrs)
        hit = self._settle.get(key)
        if hit is not None:
            return hit
        code = self.agents[a].code
        p, c = pc, ctrs
        while True:
            ins = code[p]
            if ins.op == "enter":
                if ins.trip(self.env(a, ins, c)) > 0:
                    c = c + (0,)
                    p += 1
                else:
                    p = ins.target
            elif ins.op == "next":
                i = c[-1] + 1
                if i < ins.trip(self.env(a, ins, c[:-1])):
                    c = c[:-1] + (i,)
                    p = ins.target
                else:
                    c = c[:-1]
                    p += 1
            elif ins.op == "branch":
                p = p + 1 if bool(ins.cond(self.env(a, ins, c))) else ins.target
            elif ins.op == "jump":
                p = ins.target
            else:
                break
        self._settle[key] = (p, c)
        if a in self.sym_of:
            for b in self.sym_of[a]:
                if b != a and self.settle(b, pc, ctrs) != (p, c):
                    raise symmetry.SymmetryBroken(
                        f"classes {self.agents[a].name} and {self.agents[b].name} take "
                        "different paths", None)
        return p, c

    def inst_of(self, ins: Instr, env: Mapping[str, Any]) -> int:
        if ins.idx is None:
            return self.model.inst_id(ins.bar, 0)
        i = int(ins.idx(env))
        if not 0 <= i < self.bar_len[ins.bar]:
            raise _Error("TS409", f"barrier index {ins.bar}[{i}] is outside "
                         f"0..{self.bar_len[ins.bar] - 1}", ins.stmt.span)
        return self.model.inst_id(ins.bar, i)

    def event(self, a: int, pc: int, ctrs: tuple[int, ...]) -> tuple:
        """The evaluated operands of an instruction (cached): ('err', _Error) on failure."""
        key = (a, pc, ctrs)
        hit = self._ev.get(key)
        if hit is not None:
            return hit
        ins = self.agents[a].code[pc]
        env = self.env(a, ins, ctrs)
        try:
            ev = self._evaluate(a, ins, env)
        except _Error as err:
            ev = ("err", err)
        self._ev[key] = ev
        if a in self.sym_of:
            for b in self.sym_of[a]:
                if b != a and not symmetry.same_event(ev, self.event(b, pc, ctrs)):
                    raise symmetry.SymmetryBroken(
                        f"classes {self.agents[a].name} and {self.agents[b].name} differ at "
                        f"{ins.text()}", None)
        return ev

    def _evaluate(self, a: int, ins: Instr, env: Mapping[str, Any]) -> tuple:
        op = ins.op
        if op == "init":
            if ins.idx is None:
                insts = tuple(self.model.inst_id(ins.bar, i) for i in range(self.bar_len[ins.bar]))
            else:
                insts = (self.inst_of(ins, env),)
            return ("ok", insts)
        if op == "wait":
            return ("ok", self.inst_of(ins, env), int(ins.parity(env)))
        if op in ("arrive", "expect_tx"):
            tx = int(ins.tx(env)) if ins.tx is not None else None
            return ("ok", self.inst_of(ins, env), tx)
        if op in ("tma_load", "tma_store"):
            inst = self.inst_of(ins, env) if op == "tma_load" else -1
            prefix = tuple(int(f(env)) for f in ins.prefix)
            buf = self.k.buffer(ins.buffer)
            mask = slice_mask(buf, prefix)
            if mask == 0:
                raise _Error("TS409", f"TMA slice {ins.buffer}{list(prefix)} is outside the "
                             "buffer", ins.stmt.span)
            return ("ok", inst, self.atoms_of(ins.buffer, mask) if self.ownership else ())
        if op == "access":
            fp, masks = self.footprint(a, ins, env)
            reads, writes, must, exposed, covered = [], [], [], [], []
            for buf, (r, w, mw, ex, cv) in masks.items():
                reads.extend(self.atoms_of(buf, r))
                writes.extend(self.atoms_of(buf, w))
                must.extend(self.atoms_of(buf, mw))
                exposed.extend(self.atoms_of(buf, ex))
                covered.extend(self.atoms_of(buf, cv))
            touch = 0
            if self.agents[a].cls.size > 1:
                t = fp.touches()
                if self.sym:  # relative to the class's first thread (semantics/symmetry.py)
                    t = fpm.shifted(t, -self.agents[a].cls.threads[0])
                touch = self.windows.intern(t)
            covers = tuple((x, self.cover_of(fp, x)) for x in sorted(set(covered)))
            return ("ok", tuple(sorted(set(reads) - set(writes))), tuple(sorted(writes)),
                    not fp.approx, touch, tuple(sorted(exposed)), tuple(sorted(must)), covers,
                    fp)
        return ("ok",)

    # ---- atoms and waiters (ownership) -----------------------------------------------------

    def cover_of(self, fp: fpm.Footprint, x: int) -> int:
        """The writes of `fp` to atom x that are certain under launch-constant literals, as
        a definedness value (>= COVER): which thread writes each element, under which."""
        p = fp.bufs[self.atom_buf[x]]
        mask = self._elements(x)
        thread = np.where(mask, p.covered, fpm.NONE)
        guard = np.where(mask, p.covered_guard, 0)
        table = self.model.__dict__.setdefault("_covers", {})
        key = (self.atom_buf[x], thread.tobytes(), guard.tobytes())
        if key not in table:
            table[key] = (COVER + len(table), thread, guard)
        return table[key][0]

    def covers(self, value: int, fp: fpm.Footprint, x: int) -> bool:
        """Does the definedness value `value` of atom x (a cover) cover every exposed read of
        `fp` in x: the same single thread wrote the element under literals the read is
        under too (so, whenever the read happens, the write did)?"""
        cache = self.model.__dict__.setdefault("_cover_hits", {})
        key = (value, id(fp), x)
        hit = cache.get(key)
        if hit is None:
            table = self.model.__dict__["_covers"]
            _, thread, guard = next(v for v in table.values() if v[0] == value)
            p = fp.bufs[self.atom_buf[x]]
            e = self._elements(x) & p.exposed
            hit = bool(np.all((p.exposed_by[e] >= 0) & (p.exposed_by[e] == thread[e])
                              & ((guard[e] & ~p.exposed_guard[e]) == 0)))
            cache[key] = hit
        return hit

    def _elements(self, x: int) -> np.ndarray:
        """Atom x as a boolean array over its buffer's elements."""
        size = self.k.buffer(self.atom_buf[x]).size
        raw = self.atom_mask[x].to_bytes((size + 7) // 8, "little")
        bits = np.unpackbits(np.frombuffer(raw, dtype=np.uint8), bitorder="little")
        return bits[:size].astype(bool)

    def footprint(self, a: int, ins: Instr, env: Mapping[str, Any]
                  ) -> tuple[fpm.Footprint, dict]:
        """The may-footprint (semantics/footprint.py) and its bit masks. It depends only on
        loop variables (terms with sizes are over-approximated), so it is cached on the
        model across machines."""
        cache = self.model.__dict__.setdefault("_fp_cache", {})
        key = (a, id(ins), tuple(sorted((k, v) for k, v in env.items() if k.startswith("L"))))
        hit = cache.get(key)
        if hit is None:
            lits = self.model.__dict__.setdefault("_literals", fpm.Literals())
            fp = fpm.evaluate(ins.access, env, self.agents[a].cls.threads, self.k,
                              literals=lits)
            hit = (fp, fp.masks())
            cache[key] = hit
        return hit

    def atoms_of(self, buf: str, mask: int) -> tuple[int, ...]:
        if mask == 0:
            return ()
        return tuple(i for i in self.atoms.get(buf, ()) if self.atom_mask[i] & mask)

    def _envs(self, a: int, ins: Instr) -> Iterator[tuple[int, ...]]:
        """Loop counters the instruction can run under (param loops up to one period)."""
        def rec(d: int, ctrs: tuple[int, ...]) -> Iterator[tuple[int, ...]]:
            if d == len(ins.ctx):
                yield ctrs
                return
            lc = ins.ctx[d]
            env = dict(self.base)
            env["thread"] = self.agents[a].cls.threads[0]
            for lc2, i in zip(ins.ctx[:d], ctrs, strict=False):
                env[f"L{lc2.uid}"] = lc2.lo(env) + lc2.step * i
            trip = self._trip_of(a, lc.stmt, env)
            if self.period is not None and trip > self.period and self._is_param(a, lc.stmt):
                trip = self.period
            for i in range(min(trip, self.enum_cap)):
                yield from rec(d + 1, ctrs + (i,))
        yield from rec(0, ())

    def _is_param(self, a: int, stmt: ir.For) -> bool:
        p = self.agents[a].param_loop
        return p is not None and p[3] is stmt

    def _trip_of(self, a: int, stmt: ir.For, env: Mapping[str, Any]) -> int:
        for ins in self.agents[a].code:
            if ins.op == "enter" and ins.stmt is stmt:
                return int(ins.trip(env))
        return 0

    def _prepass(self) -> None:
        """Enumerate every evaluation of the instructions once: regions that refine the
        buffers into atoms, and which classes wait on which barrier instance."""
        regions: dict[str, set[int]] = {b.name: set() for b in self.k.shared}
        waiters: list[set[int]] = [set() for _ in range(self.ninst)]
        for b in self.k.barriers:
            for g in b.all_guards:
                buf = self.k.buffer(g.buffer)
                for i in range(b.instances):
                    if g.indexed and i < buf.shape[0]:
                        regions[buf.name].add(slice_mask(buf, (i,)))
        for a, ag in enumerate(self.agents):
            for ins in ag.code:
                if ins.op not in ("wait", "tma_load", "tma_store", "access"):
                    continue
                for ctrs in self._envs(a, ins):
                    env = self.env(a, ins, ctrs)
                    try:
                        if ins.op == "wait":
                            waiters[self.inst_of(ins, env)].add(a)
                        elif not self.ownership:
                            continue
                        elif ins.op == "access":
                            _, masks = self.footprint(a, ins, env)
                            for buf, bits in masks.items():
                                regions[buf].update(m for m in bits if m)
                        else:
                            prefix = tuple(int(f(env)) for f in ins.prefix)
                            m = slice_mask(self.k.buffer(ins.buffer), prefix)
                            if m:
                                regions[ins.buffer].add(m)
                    except _Error:
                        continue
        self.waiters = [tuple(sorted(w)) for w in waiters]
        if not self.ownership:
            return
        for buf in self.k.shared:
            full = (1 << buf.size) - 1
            atoms = [full]
            for r in sorted(regions[buf.name]):
                nxt = []
                for at in atoms:
                    x, y = at & r, at & ~r
                    nxt.extend(v for v in (x, y) if v)
                atoms = nxt
            ids = []
            for at in atoms:
                ids.append(len(self.atom_mask))
                self.atom_mask.append(at)
                self.atom_buf.append(buf.name)
            self.atoms[buf.name] = ids
        for b in self.k.barriers:
            for g in b.all_guards:
                buf = self.k.buffer(g.buffer)
                for i in range(b.instances):
                    mask = slice_mask(buf, (i,)) if g.indexed else (1 << buf.size) - 1
                    inst = self.model.inst_id(b.name, i)
                    self.guard_atoms[inst] += self.atoms_of(buf.name, mask)

    def _futures(self) -> None:
        """Per agent and pc, the objects it may still read / write up to its next `sync`:
        the union over every evaluation of each instruction, propagated backwards over the
        control-flow graph. Keys: ("b", instance), ("m", atom), ("g", class) bulk groups,
        ("s",) the block barrier, ("w", id) a per-warp convergence point."""
        self.static_u = [self._written_atoms(a) for a in range(self.n)]
        for a, ag in enumerate(self.agents):
            code = ag.code
            writes_atoms: set = set()
            inits: set = set()
            reads: list[set] = []
            wrs: list[set] = []
            for ins in code:
                r: set = set()
                w: set = set()
                if ins.op in ("wait", "arrive", "expect_tx", "tma_load", "tma_store", "access",
                              "init", "narrive", "nwait"):
                    for ctrs in self._envs(a, ins):
                        ev = self._evaluate_safe(a, ins, self.env(a, ins, ctrs))
                        if ev is None:
                            continue
                        rr, ww = self._objects(a, ins, ev)
                        r.update(rr)
                        w.update(ww)
                        if ins.op == "tma_load":  # the copy it issues completes later
                            w.update(self._copy_objects(("L", ev[1], ins.nbytes, True, ev[2])))
                        if ins.op == "access":
                            writes_atoms.update(("u", x) for x in ev[2])
                        elif ins.op == "init":
                            inits.update(ww)
                if ins.op == "sync":
                    w.add(("s",))
                if ins.op in ("tma_store", "commit", "wait_group"):
                    w.add(("g", a))
                if ins.op == "arrive" and ins.per_warp:
                    w.add(("w", id(ins.stmt)))
                reads.append(r)
                wrs.append(w)
            for pc, ins in enumerate(code):
                if ins.op == "fence_init":
                    wrs[pc] |= inits
                elif ins.op == "fence_proxy" and self.ownership:
                    wrs[pc] |= writes_atoms
            self.static_w.append(tuple(frozenset(w) for w in wrs))
            succ = []
            for pc, ins in enumerate(code):
                # A future ends at the next `sync`: nothing after it can happen before every
                # agent -- the one whose step is being reordered included -- gets there.
                if ins.op in ("end", "sync"):
                    succ.append(())
                elif ins.op == "jump":
                    succ.append((ins.target,))
                elif ins.op in ("enter", "branch", "next"):
                    succ.append((pc + 1, ins.target))
                else:
                    succ.append((pc + 1,))
            fr = [set(x) for x in reads]
            fw = [set(x) for x in wrs]
            changed = True
            while changed:
                changed = False
                for pc in range(len(code) - 1, -1, -1):
                    for q in succ[pc]:
                        if not (fr[q] <= fr[pc] and fw[q] <= fw[pc]):
                            fr[pc] |= fr[q]
                            fw[pc] |= fw[q]
                            changed = True
            self.fut.append(tuple((frozenset(x), frozenset(y)) for x, y in zip(fr, fw,
                                                                              strict=True)))

    def _written_atoms(self, a: int) -> tuple:
        """("u", atom) for every atom the class may write through the generic proxy."""
        if not self.ownership:
            return ()
        out: set = set()
        for ins in self.agents[a].code:
            if ins.op != "access":
                continue
            for ctrs in self._envs(a, ins):
                ev = self._evaluate_safe(a, ins, self.env(a, ins, ctrs))
                if ev is not None:
                    out.update(("u", x) for x in ev[2])
        return tuple(sorted(out))

    def _evaluate_safe(self, a: int, ins: Instr, env: Mapping[str, Any]) -> tuple | None:
        try:
            return self._evaluate(a, ins, env)
        except _Error:
            return None

    def culprit_span(self, a: int, where: tuple, atom: int, write: bool) -> Span | None:
        """The load or store (inside a collapsed loop, say) that touched the atom."""
        pc, ctrs = where
        ins = self.agents[a].code[pc]
        if ins.op != "access":
            return None
        env = self.env(a, ins, ctrs)
        return fpm.culprit(ins.access, env, self.agents[a].cls.threads, self.k,
                           self.atom_buf[atom], self.atom_mask[atom], write)

    def concurrent_writer(self, agents: Any, copies: Any, a: int, x: int) -> bool:
        """May another agent, or a copy in flight, still write atom x before its next sync
        (its future, `_futures`)? `agents` and `copies` are those of a state."""
        key = ("u", x)
        for b in range(self.n):
            if b != a and key in self.fut[b][agents[b][0]][1]:
                return True
        return any(c[0] == "L" and x in c[4] for c in copies)

    def atom_at(self, buf: str, element: int) -> int:
        """The atom holding one element of a buffer."""
        for x in self.atoms.get(buf, ()):
            if (self.atom_mask[x] >> element) & 1:
                return x
        raise KeyError((buf, element))

    def race_text(self, a: int, c: fpm.Conflict, kind: str) -> str:
        """What two threads of one class did to one element, for a race message."""
        base = self.agents[a].cls.threads[0] if self.sym else 0

        def who(t: int) -> str:
            return f"thread {t + base}" if t >= 0 else "several threads"

        elem = fpm.element_label(self.k.buffer(c.buffer), c.element)
        cls = self.agents[a].cls.name
        earlier = "wrote" if c.kind in (fpm.RAW, fpm.WAW) else "read"
        later = "reads" if c.kind == fpm.RAW else "writes"
        text = (f"{who(c.later)} of {cls} {later} {elem}, which {who(c.earlier)} of the same "
                f"class {earlier}")
        if kind == "possible-race":
            return (text + " with only mbarrier operations of the class in between: whether "
                    "they order the two threads is not decided (possible race)")
        return (text + " with no synchronisation in between: the threads of a class are not "
                "in lockstep, so this is a race (a `sync` missing?)")

    def released_before(self, a: int, pc: int, atom: int) -> bool:
        """Did this class, earlier in the same pass over its code (back to the loop head or
        the start), arrive on a barrier guarding this atom's buffer before waiting on one?
        Then a missing permission was given away by its own arrive (TS305)."""
        code = self.agents[a].code
        buf = self.atom_buf[atom]
        q = pc - 1
        while q >= 0:
            ins = code[q]
            if ins.op in ("enter", "next"):
                return False
            if ins.op in ("arrive", "wait"):
                g = self.k.barrier(ins.bar).guards
                if g is not None and g.buffer == buf:
                    return ins.op == "arrive"
            q -= 1
        return False

    def atom_label(self, atom: int) -> str:
        """buf, buf[1], buf[0, 32..63, 0..63], or an element count when not a box."""
        hit = self._labels_cache.get(atom)
        if hit is not None:
            return hit
        buf = self.k.buffer(self.atom_buf[atom])
        mask = self.atom_mask[atom]
        count = bin(mask).count("1")
        label = f"{buf.name}{{{count} elements}}"
        if mask == (1 << buf.size) - 1:
            label = buf.name
        else:
            coords = []
            for flat in ((mask & -mask).bit_length() - 1, mask.bit_length() - 1):
                c = []
                for d in reversed(buf.shape):
                    c.append(flat % d)
                    flat //= d
                coords.append(tuple(reversed(c)))
            lo, hi = coords
            box = 1
            for a, b in zip(lo, hi, strict=True):
                box *= b - a + 1
            if box == count and all(a <= b for a, b in zip(lo, hi, strict=True)):
                parts = [str(a) if a == b else f"{a}..{b}" for a, b in zip(lo, hi, strict=True)]
                while len(parts) > 1 and parts[-1] == f"0..{buf.shape[len(parts) - 1] - 1}":
                    parts.pop()
                label = f"{buf.name}[{', '.join(parts)}]"
        self._labels_cache[atom] = label
        return label

    # ---- the initial state -----------------------------------------------------------------

    def initial(self) -> tuple:
        agents = tuple(self.settle(a, 0, ()) for a in range(self.n))
        bars = tuple((mb.MbarrierState(), -1, False, 0) for _ in range(self.ninst))
        obs = (-1,) * (self.n * self.ninst)
        perms: tuple = ()
        if self.ownership:
            perms = tuple((frozenset({(FREE, self.unit)}), ()) for _ in self.atom_mask)
        defined = (0,) * len(self.atom_mask) if self.ownership else ()
        lflags = (0,) * self.ninst
        sages = ((),) * self.n
        wins = ((0, 0, 0),) * self.n if self.ownership else ()
        named = (0,) * len(self.named_ids)
        state = (agents, bars, obs, (), perms, defined, lflags, sages, wins, named)
        return symmetry.canon(state, self.sym, self.ninst) if self.sym else state

    # ---- moves -----------------------------------------------------------------------------

    def instr(self, state: tuple, a: int) -> Instr:
        return self.agents[a].code[state[0][a][0]]

    def _static(self, a: int, pc: int, ctrs: tuple[int, ...]) -> tuple:
        """(instruction, evaluated operands, read objects, write objects), cached."""
        key = (a, pc, ctrs)
        hit = self._static_cache.get(key)
        if hit is None:
            ins = self.agents[a].code[pc]
            ev = self.event(a, pc, ctrs)
            if ev[0] == "err" or ins.op in ("sync", END):
                r, w = (), ()
            elif ins.op in ("wait_group", "fence_init", "fence_proxy", "commit"):
                r, w = (), tuple(self.static_w[a][pc])
                if ins.op == "wait_group":
                    r, w = (("g", a),), ()
            else:
                r, w = self._objects(a, ins, ev)
            hit = (ins, ev, frozenset(r), frozenset(w))
            self._static_cache[key] = hit
        return hit

    def analyse(self, state: tuple) -> tuple[list, dict]:
        """Enabled moves, and for every agent and copy: (enabled, reads, writes) of its next
        step. Keys ("a", i), ("c", j); the joint `sync` is ("sync",)."""
        agents, bars = state[0], state[1]
        info: dict = {}
        enabled: list = []
        at_sync = live = 0
        for a in range(self.n):
            pc, ctrs = agents[a]
            ins, ev, r, w = self._static(a, pc, ctrs)
            op = ins.op
            if op == END:
                continue
            live += 1
            if op == "sync":
                at_sync += 1
                info[("a", a)] = (False, _EMPTY, _SYNC)
                continue
            if ev[0] == "err":
                info[("a", a)] = (True, _EMPTY, _EMPTY)
                enabled.append(("a", a))
                continue
            ok = True
            if op == "wait":
                st = bars[ev[1]][0]
                ok = (not st.initialized) or ev[2] != st.parity
            elif op == "nwait":
                ok = not (state[9][self.nidx[ins.named]] >> a) & 1
            elif op == "access" and self.ownership:
                w = self._claims(state, a, ev)
            elif op == "wait_group":
                ok = not any(c[0] == "S" and c[1] == a and c[2] > ins.pending for c in state[3])
            elif op == "arrive" and ins.per_warp and len(ins.group) > 1:
                if a != min(ins.group):
                    info[("a", a)] = (False, r, w)
                    continue
                ok = all(self.agents[g].code[agents[g][0]].stmt is ins.stmt
                         for g in ins.group)
                for g in ins.group:
                    if g != a:
                        _, _, rg, wg = self._static(g, *agents[g])
                        r, w = r | rg, w | wg
            info[("a", a)] = (ok, r, w)
            if ok:
                enabled.append(("a", a))
        if at_sync and at_sync == self.n and live == self.n:
            enabled.append(("sync",))
        copies = state[3]
        for j, c in enumerate(copies):
            if j and copies[j - 1] == c:
                continue  # identical copies: completing either gives the same state
            info[("c", j)] = (True, _EMPTY, self._copy_objects(c))
            enabled.append(("c", j))
        return enabled, info

    def _objects(self, a: int, ins: Instr, ev: tuple) -> tuple[tuple, tuple]:
        """(reads, writes) of one evaluated step. Keys: ("b", i) a barrier's phase state;
        ownership only: ("bp", i) its pool, ("be", i, class) what a completed phase holds for
        a waiter, ("F", atom) the free share, ("u", atom) unfenced writers, ("g", class) bulk
        groups and given-back store shares. A class's own holdings are private (only its
        own steps and the joint `sync` change them), so they need no key."""
        op = ins.op
        if op == "narrive":
            if self.ownership:  # a completing phase makes what it pooled claimable
                return (), (("n", self.nidx[ins.named]),) + tuple(
                    ("F", x) for x in range(len(self.atom_mask)))
            return (), (("n", self.nidx[ins.named]),)
        if op == "nwait":
            return (("n", self.nidx[ins.named]),), ()
        if not self.ownership:
            if op == "wait":
                return (("b", ev[1]),), ()
            if op in ("arrive", "expect_tx"):
                return (), (("b", ev[1]),)
            if op == "init":
                return (), tuple(("b", i) for i in ev[1])
            if op == "tma_load":
                return (("b", ev[1]),), ()
            if op == "tma_store":
                return (), (("g", a),)
            return (), ()
        if op == "wait":
            return (("b", ev[1]),), (("be", ev[1], a),)
        if op == "arrive":
            inst = ev[1]
            w = [("b", inst), ("bp", inst)] + [("be", inst, x) for x in self.waiters[inst]]
            w.extend(self.static_u[a])
            return (), tuple(w)
        if op == "expect_tx":
            return (), (("b", ev[1]),)
        if op == "init":
            return (), tuple(("b", i) for i in ev[1])
        if op == "tma_load":
            return (("b", ev[1]),), ((("bp", ev[1]),) + tuple(("F", x) for x in ev[2])
                                      + tuple(("u", x) for x in ev[2]))
        if op == "tma_store":
            return (tuple(("u", x) for x in ev[2]),
                    (("g", a),) + tuple(("F", x) for x in ev[2]))
        if op == "access":
            return (), (tuple(("F", x) for x in ev[1] + ev[2])
                        + tuple(("u", x) for x in ev[2]))
        return (), ()

    def _copy_objects(self, c: tuple) -> frozenset:
        hit = self._copy_cache.get(c)
        if hit is None:
            if c[0] == "L":
                keys = [("b", c[1])]
                if self.ownership:
                    keys += [("bp", c[1])] + [("be", c[1], w) for w in self.waiters[c[1]]]
                    keys += [("u", x) for x in c[4]]
            else:
                keys = [("g", c[1])]
            hit = frozenset(keys)
            self._copy_cache[c] = hit
        return hit

    def _claims(self, state: tuple, a: int, ev: tuple) -> frozenset:
        """An access touches shared state only where it must claim permission: reading an
        atom the class holds a share of, or writing one it holds whole (its unfenced mark
        is then invisible to others, who cannot read the atom), is a local step."""
        perms, me, unit = state[4], ("A", a), self.unit
        out = []
        for x in ev[1]:
            if not dict(perms[x][0]).get(me):
                out.append(("F", x))
        for x in ev[2]:
            if dict(perms[x][0]).get(me) != unit:
                out.append(("F", x))
                out.append(("u", x))
        return frozenset(out)

    # ---- partial-order reduction -----------------------------------------------------------

    def persistent(self, state: tuple, enabled: list, info: dict) -> list:
        """A persistent subset of the enabled moves (smallest over the seeds tried).

        Closure rule: with an agent (or copy) in the set, every other one whose future
        objects conflict with its next step (a write meets any access, a read meets a
        write) joins, whether that step is enabled or blocked (a blocked step's objects are
        what could unblock it); a blocked per-warp arrive pulls in the classes it converges
        with; `sync` meets everyone."""
        if len(enabled) <= 1 or ("sync",) in enabled:
            return enabled
        # The choice depends only on each agent's pc (futures), on what the next steps touch
        # and whether they are enabled: memoise on exactly that.
        agents = state[0]
        sig = (tuple((k, v[0], v[1], v[2], agents[k[1]][0] if k[0] == "a" else 0)
                     for k, v in info.items()), len(enabled))
        hit = self._por_cache.get(sig)
        if hit is None:
            hit = self._persistent(state, enabled, info)
            self._por_cache[sig] = hit
        return hit

    def _persistent(self, state: tuple, enabled: list, info: dict) -> list:
        agents = state[0]
        for mv in enabled:  # a step that touches nothing shared commutes with everything
            if mv[0] == "a":
                _, r, w = info[mv]
                if not r and not w:
                    return [mv]
        keys = list(info)
        nk = len(keys)
        futs = []
        blocked: list = []
        for k in keys:
            if k[0] == "a":
                futs.append(self.fut[k[1]][agents[k[1]][0]])
                ok, r, _ = info[k]
                ins = self.instr(state, k[1])
                blocked.append(next(iter(r)) if (not ok and ins.op == "wait" and r) else None)
            else:
                futs.append((_EMPTY, info[k][2]))
                blocked.append(None)
        index = {k: i for i, k in enumerate(keys)}
        # Who could write each blocking object (and so unblock the wait).
        writers = {}
        for i, obj in enumerate(blocked):
            if obj is not None and obj not in writers:
                writers[obj] = [j for j in range(nk) if j != i and obj in futs[j][1]]

        allf = [fr | fw for fr, fw in futs]
        steps_all = [info[k] for k in keys]
        step_all = [r | w for _, r, w in steps_all]

        enabled_idx = {index[mv] for mv in enabled}

        def closure(start: int, limit: int) -> set[int] | None:
            """The closed set from one seed, or None as soon as it holds `limit` enabled
            moves: it cannot beat the best set found (and a cut-off set is not closed, so
            it is never used)."""
            chosen = {start}
            _, reads, writes = steps_all[start]
            changed = True
            while changed:
                if len(chosen & enabled_idx) >= limit:
                    return None
                changed = False
                if ("s",) in writes:
                    return set(range(nk))
                for j in range(nk):
                    if j in chosen:
                        continue
                    if blocked[j] is not None and all(x in chosen for x in writers[blocked[j]]):
                        # Blocked until some step of the set runs: only its next step counts.
                        fw, fa = steps_all[j][2], step_all[j]
                    else:
                        fw, fa = futs[j][1], allf[j]
                    if (writes and not writes.isdisjoint(fa)) or (
                            reads and not reads.isdisjoint(fw)):
                        chosen.add(j)
                        _, r, w = steps_all[j]
                        reads, writes = reads | r, writes | w
                        changed = True
                for i in list(chosen):
                    k = keys[i]
                    if k[0] == "a" and not info[k][0]:
                        ins = self.instr(state, k[1])
                        if ins.op == "arrive" and ins.per_warp:
                            for g in ins.group:
                                gi = index.get(("a", g))
                                if gi is not None and gi not in chosen:
                                    chosen.add(gi)
                                    _, r, w = steps_all[gi]
                                    reads, writes = reads | r, writes | w
                                    changed = True
            return chosen

        best = enabled
        for seed in enabled:
            seen = closure(index[seed], len(best))
            if seen is None:
                continue
            subset = [mv for mv in enabled if index[mv] in seen]
            if len(subset) < len(best):
                best = subset
                if len(best) == 1:
                    break
        return best

    # ---- stepping --------------------------------------------------------------------------

    def successors(self, state: tuple, por: bool) -> tuple[list, list, dict]:
        enabled, info = self.analyse(state)
        moves = self.persistent(state, enabled, info) if por else enabled
        out = []
        for mv in moves:
            try:
                nxt, soft = self.apply(state, mv)
                if self.sym:
                    nxt = symmetry.canon(nxt, self.sym, self.ninst)
                out.append((mv, nxt, soft))
            except _Error as err:
                out.append((mv, None, err))
        return out, enabled, info

    def no_progress(self, state: tuple, enabled: list) -> str | None:
        """The progress property of a stage projection (semantics/ring.py): with no copy in
        flight, some class at the least iteration of the loops, or outside them, or the
        block-wide `sync`, can move. A violation: why."""
        level: dict[int, int] = {}
        for a, ag in enumerate(self.agents):
            p = ag.param_loop
            if p is not None:
                pc, ctrs = state[0][a]
                if p[0] < pc < p[1]:
                    level[a] = ctrs[p[2]]
        if not level:
            return None
        low = min(level.values())
        for mv in enabled:
            if mv[0] == "sync" or (mv[0] == "a" and level.get(mv[1], low) == low):
                return None
        return (f"no class at the least iteration ({low}) of the stage projection can move: "
                "its progress is not shown")

    def apply(self, state: tuple, mv: tuple, rec: list | None = None
              ) -> tuple[tuple, _Error | None]:
        """Perform one move. Raises _Error for a hard violation; returns (state, soft
        violation or None). With `rec`, appends a description of the step."""
        s = _Mut(self, state, rec)
        if mv[0] == "sync":
            s.sync()
        elif mv[0] == "c":
            s.copy_done(mv[1])
        else:
            s.agent_step(mv[1])
        return s.freeze(), s.soft

    def blocked_lines(self, state: tuple, phases: Mapping[int, int] | None = None
                      ) -> list[str]:
        """Who waits on what, with the barrier state (phase, pending, tx)."""
        lines = []
        for a in range(self.n):
            pc, ctrs = state[0][a]
            ins = self.agents[a].code[pc]
            name = self.agents[a].cls.describe()
            if ins.op == END:
                continue
            line = ins.stmt.span.line if ins.stmt is not None else 0
            if ins.op == "wait":
                ev = self.event(a, pc, ctrs)
                if ev[0] == "err":
                    continue
                lines.append(f"{name} waits {self.labels[ev[1]]} parity {ev[2]} "
                             f"(line {line}) [{self.bar_text(state, ev[1], phases)}]")
            elif ins.op == "sync":
                lines.append(f"{name} waits at sync (line {line})")
            elif ins.op == "nwait":
                lines.append(f"{name} waits at bar_sync {ins.named} (line {line})")
            elif ins.op == "wait_group":
                lines.append(f"{name} waits at wait_group {ins.pending} (line {line})")
            elif ins.op == "arrive" and ins.per_warp:
                lines.append(f"{name} waits for its warps to converge at 'arrive ..., one per "
                             f"warp' (line {line})")
            else:
                lines.append(f"{name} at {ins.op} (line {line})")
        return lines

    def bar_text(self, state: tuple, inst: int, phases: Mapping[int, int] | None = None) -> str:
        st, _, _, ncomp = state[1][inst]
        if not st.initialized:
            return f"{self.labels[inst]}: uninitialised"
        n = phases.get(inst, ncomp) if phases is not None else ncomp
        return (f"{self.labels[inst]}: phase {n} (parity {st.parity}), pending "
                f"{st.pending}/{st.expected}, tx {st.tx}")

    def exit_violation(self, state: tuple) -> tuple[str, str, Span | None] | None:
        """At a state where every agent has finished: asynchronous work the block may leave
        behind. PTX does not drain the copy engine at exit: a TMA store whose shared-memory
        reads no `wait_group ... read` of its issuer covered (TS307), or a TMA load whose
        landing no wait is ordered after (TS430), may still be running when the block's
        shared memory is handed to the next block -- undefined behaviour. Copies finishing
        early in one interleaving prove nothing: the copy engine may be slower."""
        for a, ages in enumerate(state[7]):
            if ages:
                span = self._span_of(a, "tma_store")
                return ("TS307", f"{self.agents[a].cls.name} exits with a TMA store whose "
                        "shared-memory reads no 'wait_group 0 read' (or a covering "
                        "wait_group) waited for: the block may exit while the copy engine "
                        "still reads its shared memory", span)
        for inst, flags in enumerate(state[6]):
            if flags:
                span = self._load_span(inst)
                return ("TS430", f"the block exits with a TMA load signalling "
                        f"{self.labels[inst]} that no wait is ordered after: the copy may "
                        "still be writing shared memory when the block exits (a load "
                        "nobody consumes)", span)
        return None

    def _span_of(self, a: int, op: str) -> Span | None:
        for ins in reversed(self.agents[a].code):
            if ins.op == op and ins.stmt is not None:
                return ins.stmt.span
        return None

    def _load_span(self, inst: int) -> Span | None:
        name = self.model.instances[inst][0]
        for ag in self.agents:
            for ins in reversed(ag.code):
                if ins.op == "tma_load" and ins.bar == name and ins.stmt is not None:
                    return ins.stmt.span
        return None

    def classify_deadlock(self, state: tuple) -> tuple[str, str]:
        """The code of a deadlock and why: TS420 all at sync; TS407 tx-count stuck;
        TS406 a phase short of arrivals; TS408 a wait for a phase the parity misnames;
        TS410 otherwise."""
        codes = []
        live = [a for a in range(self.n) if self.instr(state, a).op != END]
        if any(self.instr(state, a).op == "nwait" for a in live) and all(
                self.instr(state, a).op in ("nwait", "sync") for a in live):
            lines = []
            for a in live:
                ins = self.instr(state, a)
                if ins.op == "nwait":
                    i = self.nidx[ins.named]
                    got = sum(self.agents[c].cls.size for c in range(self.n)
                              if (state[9][i] >> c) & 1)
                    lines.append(f"{self.agents[a].cls.name} waits at bar_sync {ins.named} "
                                 f"({got} of {ins.ncount} threads arrived)")
            done = [self.agents[a].cls.describe() for a in range(self.n) if a not in live]
            return "TS421", ("named barrier never completes: " + "; ".join(lines) +
                             ("; " + ", ".join(done) + " finished" if done else ""))
        if all(self.instr(state, a).op == "sync" for a in live):
            done = [self.agents[a].cls.describe() for a in range(self.n) if a not in live]
            return "TS420", ("every blocked thread waits at sync, but " +
                             (", ".join(done) + " finished" if done else "not all arrived"))
        for a in live:
            pc, ctrs = state[0][a]
            ins = self.agents[a].code[pc]
            if ins.op != "wait":
                continue
            ev = self.event(a, pc, ctrs)
            if ev[0] == "err":
                continue
            st = state[1][ev[1]][0]
            d = state[2][a * self.ninst + ev[1]]
            if st.pending == 0 and st.tx != 0:
                codes.append(("TS407", f"{self.labels[ev[1]]} has all arrivals but its "
                              f"tx-count is {st.tx}: expect_tx bytes and the bytes its copies "
                              "deliver differ"))
            elif 0 < st.pending < st.expected:
                codes.append(("TS406", f"{self.labels[ev[1]]} got "
                              f"{st.expected - st.pending} of {st.expected} arrivals in this "
                              "phase and no more can come"))
            elif d >= 0 and ev[2] != (st.parity - d) % 2:
                codes.append(("TS408", f"wait on {self.labels[ev[1]]} parity {ev[2]} names "
                              "a phase that never comes"))
        order = {"TS407": 0, "TS406": 1, "TS408": 2}
        if codes:
            codes.sort(key=lambda c: order[c[0]])
            return codes[0]
        return "TS410", "every unfinished agent is blocked and the copy engine is idle"


class _Mut:
    """A state being changed by one move (copy-on-write of its parts).

    Permissions are integers in units of `Machine.unit` (the whole atom): exact, and fast
    to hash. A split that would not be exact raises Unsupported (the verdict becomes
    UNKNOWN) rather than rounding."""

    def __init__(self, m: Machine, state: tuple, rec: list | None) -> None:
        self.m = m
        self.agents = list(state[0])
        self.bars = list(state[1])
        self.obs = list(state[2])
        self.copies = list(state[3])
        self.perms = list(state[4])
        self.defined = list(state[5])
        self.lflags = list(state[6])
        self.sages = list(state[7])
        self.wins = list(state[8])
        self.named = list(state[9])
        self.soft: _Error | None = None
        self.rec = rec

    def freeze(self) -> tuple:
        return (tuple(self.agents), tuple(self.bars), tuple(self.obs),
                tuple(sorted(self.copies)), tuple(self.perms), tuple(self.defined),
                tuple(self.lflags), tuple(self.sages), tuple(self.wins), tuple(self.named))

    def note(self, **kw: Any) -> None:
        if self.rec is not None:
            self.rec.append(kw)

    # -- barriers ----------------------------------------------------------------------------

    def bar_op(self, inst: int, op, span: Span | None, what: str, args: tuple = ()) -> None:
        """Apply `op` to barrier `inst`; `what` and `args` name it in a recorded step (the
        certificate checker replays them on its own mbarrier model)."""
        self.note(bar=(inst, what, args))
        st, init_by, fenced, ncomp = self.bars[inst]
        if not st.initialized:
            raise _Error("TS401", f"{what} on {self.m.labels[inst]} before init", span)
        try:
            new = op(st)
        except mb.MbarrierError as exc:
            code = MODEL_CODES.get(exc.code, exc.code)
            raise _Error(code, f"{what} on {self.m.labels[inst]}: {exc.message}", span,
                         model_code=exc.code) from None
        completed = new.parity != st.parity
        self.bars[inst] = (new, init_by, fenced, min(ncomp + 1, 2) if completed else ncomp)
        if completed:
            if self.lflags[inst] & LOAD_IN_PHASE:
                self.lflags[inst] = (self.lflags[inst] & ~LOAD_IN_PHASE) | LOAD_UNOBSERVED
            self.on_complete(inst, span)
            self.canon(inst)

    def canon(self, inst: int) -> None:
        """Phases completed only matter for a first wait (capped at 2); once every class
        that waits on the instance has waited, forget the count (a canonical state)."""
        m = self.m
        if all(self.obs[w * m.ninst + inst] >= 0 for w in m.waiters[inst]):
            st, init_by, fenced, n = self.bars[inst]
            if n != 2:
                self.bars[inst] = (st, init_by, fenced, 2)

    def on_complete(self, inst: int, span: Span | None) -> None:
        m = self.m
        self.note(completes=inst)
        for a in range(m.n):
            k = a * m.ninst + inst
            if self.obs[k] >= 0:
                self.obs[k] = min(self.obs[k] + 1, 2)
        fresh = False
        for i, c in enumerate(self.copies):
            if c[0] == "L" and c[1] == inst and c[3]:
                fresh = True
                self.copies[i] = (c[0], c[1], c[2], False, c[4])
        if fresh and self.soft is None:
            self.soft = _Error("TS407", f"a phase of {m.labels[inst]} completed while a "
                               "copy that signals it is still in flight: expect_tx counts "
                               "fewer bytes than the copies deliver", span, soft=True)
        if m.ownership:
            waiters = m.waiters[inst]
            for x in m.guard_atoms[inst]:
                h = self.holders(x)
                pool = h.pop(("P", inst), 0)
                if pool and waiters:
                    share, rest = divmod(pool, len(waiters))
                    if rest:
                        raise Unsupported("a permission split is not exact in the chosen unit")
                    for w in waiters:
                        key = ("E", inst, w)
                        h[key] = h.get(key, 0) + share
                elif pool:
                    h[("P", inst)] = pool
                self.set_holders(x, h)

    # -- permissions -------------------------------------------------------------------------

    def set_holders(self, x: int, h: dict) -> None:
        self.perms[x] = (frozenset((k, v) for k, v in h.items() if v), self.perms[x][1])

    def holders(self, x: int) -> dict:
        return dict(self.perms[x][0])

    def set_unfenced(self, x: int, unf: frozenset | set) -> None:
        self.perms[x] = (self.perms[x][0], tuple(sorted(unf)))

    def who(self, h: dict, but: tuple) -> str:
        names = []
        for k, v in sorted(h.items()):
            if k == but or k == FREE or not v:
                continue
            names.append(f"{self.m.describe_holder(k)} ({Fraction(v, self.m.unit)})")
        return ", ".join(names) or "nobody"

    def copy_holders(self, x: int) -> list[str]:
        out = []
        for c in self.copies:
            if c[0] == "L" and x in c[4]:
                out.append(f"an in-flight TMA load into {self.m.atom_label(x)}")
            elif c[0] == "S" and x in c[3]:
                out.append(f"an in-flight TMA store of {self.m.agents[c[1]].cls.name}")
        return out

    def claim_read(self, a: int, x: int, span: Span | None) -> None:
        h = self.holders(x)
        me = ("A", a)
        if h.get(me):
            return
        free = h.get(FREE, 0)
        if not free:  # a completed named-barrier phase this class waited for
            for k in h:
                if k[0] == "Q" and (k[2] >> a) & 1 and h[k]:
                    share = min(h[k], self.m.read_share)
                    h[me] = share
                    h[k] -= share
                    if not h[k]:
                        del h[k]
                    self.set_holders(x, h)
                    return
        if free:
            # A fixed share, so that the order of claims does not matter: all classes
            # together can never hold the whole atom by reading.
            share = min(free, self.m.read_share)
            h[me] = share
            h[FREE] = free - share
            self.set_holders(x, h)
            return
        self.denied(a, x, h, span, write=False)

    def claim_write(self, a: int, x: int, span: Span | None) -> None:
        h = self.holders(x)
        me = ("A", a)
        mine = [k for k in h if k == me or k == FREE or (k[0] == "Q" and (k[2] >> a) & 1)]
        if sum(h[k] for k in mine) == self.m.unit:
            for k in mine:
                del h[k]
            h[me] = self.m.unit
            self.set_holders(x, h)
            return
        self.denied(a, x, h, span, write=True)

    def denied(self, a: int, x: int, h: dict, span: Span | None, write: bool) -> None:
        m = self.m
        name, region = m.agents[a].cls.name, m.atom_label(x)
        span = m.culprit_span(a, self.agents[a], x, write) or span
        others = [self.who(h, ("A", a))] + self.copy_holders(x)
        others = [o for o in others if o != "nobody"] or ["nobody (its permission is lost)"]
        held = "; ".join(others)
        if m.released_before(a, self.agents[a][0], x):
            raise _Error("TS305", f"{name} accesses {region} after its own arrive released it "
                         f"(now held by {held}): the arrive comes before the last access",
                         span, atom=region)
        if write:
            raise _Error("TS302", f"{name} writes {region} without full permission (held by "
                         f"{held})", span, atom=region)
        raise _Error("TS304", f"{name} reads {region} before it is ready: no permission "
                     f"(held by {held}){self.unguarded_hint(x, h)}", span, atom=region)

    def unguarded_hint(self, x: int, h: dict) -> str:
        """Where the region sits in a barrier phase that does not guard it: a TMA load
        signalling that barrier filled it, and since a barrier hands over only the buffers
        it `guards`, no wait can ever give it to a reader (docs/language.md, *guards*)."""
        m = self.m
        buf = m.atom_buf[x]
        for k in h:
            if k[0] in ("P", "E") and x not in m.guard_atoms[k[1]]:
                bar = m.model.instances[k[1]][0]
                return (f"; the TMA load that filled it signals {m.labels[k[1]]}, but "
                        f"mbarrier {bar} does not guard {buf}: a barrier hands over only the "
                        f"buffers it guards -- add {buf}[i] to its `guards` (e.g. `guards ..., "
                        f"{buf}[i]`)")
        return ""

    # -- agents ------------------------------------------------------------------------------

    def advance(self, a: int) -> None:
        pc, ctrs = self.agents[a]
        self.agents[a] = self.m.settle(a, pc + 1, ctrs)

    def agent_step(self, a: int) -> None:
        m = self.m
        pc, ctrs = self.agents[a]
        ins = m.agents[a].code[pc]
        if ins.op in (END, "sync"):
            raise CannotMove(f"replay: {m.agents[a].cls.name} cannot move")
        ev = m.event(a, pc, ctrs)
        span = ins.stmt.span if ins.stmt is not None else None
        self.note(agents=(a,), ins=ins, ev=ev, ctrs=ctrs)
        if ev[0] == "err":
            raise ev[1]
        getattr(self, "op_" + ins.op)(a, ins, ev, span)
        if not (ins.op == "arrive" and ins.per_warp and len(ins.group) > 1):
            self.advance(a)
            self.fuse_local(a)

    def fuse_local(self, a: int) -> None:
        """Run the agent's next steps at once while they touch nothing shared (a shared-
        memory access the class already holds permission for, a fence with nothing to do):
        they commute with every other step, so no interleaving is lost."""
        m = self.m
        while True:
            pc, ctrs = self.agents[a]
            ins, ev, r, w = m._static(a, pc, ctrs)
            if ins.op not in ("access", "fence_proxy") or ev[0] == "err":
                return
            if ins.op == "access":
                if not m.ownership or m._claims(self.state_view(), a, ev):
                    return
            elif r or w:
                return
            self.note(agents=(a,), ins=ins, ev=ev, fused=True, ctrs=ctrs)
            getattr(self, "op_" + ins.op)(a, ins, ev, ins.stmt.span)
            self.advance(a)

    def state_view(self) -> tuple:
        return (None, None, None, None, self.perms, self.defined)

    def op_init(self, a: int, ins: Instr, ev: tuple, span: Span | None) -> None:
        for inst in ev[1]:
            st, init_by, _, _ = self.bars[inst]
            if st.initialized or ins.count > 1:
                who = (f"class {self.m.agents[init_by].cls.name}" if st.initialized
                       else f"another of the {ins.count} threads of {self.m.agents[a].cls.name}")
                raise _Error("TS402", f"init of {self.m.labels[inst]}, which is live "
                             f"(initialised by {who})", span)
            self.note(bar=(inst, "init", (self.m.bar_count[ins.bar],)))
            try:
                new = st.init(self.m.bar_count[ins.bar])
            except mb.MbarrierError as exc:
                raise _Error(MODEL_CODES.get(exc.code, exc.code), exc.message, span) from None
            self.bars[inst] = (new, a, False, 0)
            for c in range(self.m.n):
                self.obs[c * self.m.ninst + inst] = -1

    def op_fence_init(self, a: int, ins: Instr, ev: tuple, span: Span | None) -> None:
        for i, (st, init_by, fenced, n) in enumerate(self.bars):
            if init_by == a and not fenced:
                self.bars[i] = (st, init_by, True, n)

    def op_fence_proxy(self, a: int, ins: Instr, ev: tuple, span: Span | None) -> None:
        if not self.m.ownership:
            return
        mine = (a, False)
        for _, x in self.m.static_u[a]:
            unf = self.perms[x][1]
            if mine in unf:
                self.set_unfenced(x, set(unf) - {mine})

    def op_sync(self, a: int, ins: Instr, ev: tuple, span: Span | None) -> None:
        raise AssertionError("sync is a joint move")

    def op_narrive(self, a: int, ins: Instr, ev: tuple, span: Span | None) -> None:
        """bar.arrive / the arrive of bar.sync: the class's threads count towards the
        current phase of the named barrier; its accesses are published and what it holds
        is released to the barrier (handed to the syncers when the phase completes)."""
        m = self.m
        i = m.nidx[ins.named]
        mask = self.named[i]
        name = m.agents[a].cls.name
        what = f"{'bar_sync' if ins.op == 'narrive' and not ins.stmt.arrive else 'bar_arrive'}"
        if ins.ncount % 32 or ins.ncount > m.k.block:
            raise _Error("TS414", f"{what} {ins.named}, {ins.ncount}: the thread count must be "
                         f"a multiple of 32 (whole warps) and at most the block's "
                         f"{m.k.block}", span)
        if len(m.ncounts[i]) > 1:
            raise _Error("TS413", f"barrier id {ins.named} is used with thread counts "
                         f"{', '.join(map(str, m.ncounts[i]))}: two synchronisations share "
                         "one id (their arrivals mix into one phase)", span)
        if ins.named == 0 and m.uses_sync and ins.ncount != m.k.block:
            raise _Error("TS413", f"{what} 0, {ins.ncount}: barrier 0 is the block-wide "
                         "barrier `sync` uses (bar.sync 0 for every thread); give this "
                         "synchronisation an id of its own", span)
        for b in range(m.n):
            if b == a or (mask >> b) & 1:
                continue
            bins = m.agents[b].code[self.agents[b][0]]
            if bins.op == "narrive" and bins.named == ins.named:
                both = sum(m.agents[c].cls.size for c in range(m.n)
                           if (mask >> c) & 1 or c in (a, b))
                if both > ins.ncount:
                    raise _Error("TS413", f"{name} and {m.agents[b].cls.name} arrive at "
                                 f"barrier id {ins.named} (count {ins.ncount}) at the same "
                                 f"time, {both} threads for one phase: the hardware mixes "
                                 "their warps into one phase -- two synchronisations share "
                                 "one id", span)
        if (mask >> a) & 1:
            raise _Error("TS412", f"{name} arrives at named barrier {ins.named} twice in one "
                         f"phase (count {ins.ncount}): the barrier completes without the "
                         "threads it was meant to wait for", span)
        self.release(a)
        if m.ownership:
            for x in range(len(m.atom_mask)):
                h = self.holders(x)
                mine = h.pop(("A", a), 0)
                # The class gives up its claim on what a completed phase it waited for
                # left unclaimed: the other classes of that phase keep theirs; once none is
                # left it is released here (whoever gets it is ordered after this arrive,
                # ordered after that phase's arrivals).
                pools = [k for k in h if k[0] == "Q" and (k[2] >> a) & 1]
                for k in pools:
                    v = h.pop(k)
                    rest = k[2] & ~(1 << a)
                    if rest:
                        k2 = ("Q", k[1], rest)
                        h[k2] = h.get(k2, 0) + v
                    else:
                        mine += v
                if mine:
                    h[("N", i)] = h.get(("N", i), 0) + mine
                if mine or pools:
                    self.set_holders(x, h)
            self.publish(a)
        mask |= 1 << a
        arrived = sum(m.agents[c].cls.size for c in range(m.n) if (mask >> c) & 1)
        if arrived > ins.ncount:
            raise _Error("TS412", f"{arrived} threads arrive at named barrier {ins.named} "
                         f"in one phase but its count is {ins.ncount}", span)
        if arrived == ins.ncount:
            # The classes that arrived with bar_sync: at their wait now, or this one.
            syncers = 1 << a if not ins.stmt.arrive else 0
            for c in range(m.n):
                if c != a and (mask >> c) & 1 and m.agents[c].code[self.agents[c][0]].op == \
                        "nwait":
                    syncers |= 1 << c
            mask = 0
            self.named_complete(i, span, syncers)
        self.named[i] = mask

    def named_complete(self, i: int, span: Span | None, syncers: int) -> None:
        """A phase of a named barrier completes: what its arrivers released becomes
        claimable (like free memory) by the classes that arrived in it with `bar_sync` --
        each is ordered after every arrival of the phase once it passes its wait. Without
        such a class it stays with the barrier (no thread is ordered after the arrivers)."""
        m = self.m
        if not m.ownership or not syncers:
            return
        key = ("Q", i, syncers)
        for x in range(len(m.atom_mask)):
            h = self.holders(x)
            pool = h.pop(("N", i), 0)
            if not pool:
                continue
            h[key] = h.get(key, 0) + pool
            self.set_holders(x, h)

    def op_nwait(self, a: int, ins: Instr, ev: tuple, span: Span | None) -> None:
        """The phase the class arrived in has completed: every thread of the class (and
        of every class that arrived) arrived before any passes, so its threads are ordered."""
        if self.m.ownership:
            self.wins[a] = (0, 0, 0)

    def op_wait(self, a: int, ins: Instr, ev: tuple, span: Span | None) -> None:
        m = self.m
        inst, p = ev[1], ev[2]
        st, _, _, ncomp = self.bars[inst]
        if not st.initialized:
            raise _Error("TS401", f"wait on {m.labels[inst]} before init", span)
        if p not in (0, 1):
            raise _Error("TS408", f"wait parity {p} is not 0 or 1", span)
        self.note(bar=(inst, "wait", (p,)))
        k = a * m.ninst + inst
        d = self.obs[k]
        label = m.labels[inst]
        if d < 0:
            target = -1 if p == 1 else 0
            gap = ncomp - target
            if gap >= 2 and self.soft is None:
                self.soft = _Error("TS408", f"first wait of {m.agents[a].cls.name} on {label} "
                                   f"(parity {p}) comes after {ncomp} phase(s) completed: it "
                                   "cannot tell them apart", span, soft=True)
        else:
            expect = (st.parity - d) % 2
            if p != expect and self.soft is None:
                self.soft = _Error("TS408", f"wait on {label} parity {p} passes on a phase "
                                   f"{m.agents[a].cls.name} already consumed: it needs the "
                                   f"phase of parity {expect} (waits must alternate parity)",
                                   span, soft=True)
            elif d >= 2 and self.soft is None:
                self.soft = _Error("TS408", f"{label} completed two phases before "
                                   f"{m.agents[a].cls.name} waited for the first: the parity "
                                   "wait cannot tell them apart", span, soft=True)
        self.obs[k] = 0
        self.canon(inst)
        self.lflags[inst] &= ~LOAD_UNOBSERVED  # this wait is ordered after every landed load
        self.acquire(a)
        self.note(observes=inst)
        if m.ownership:
            for x in m.guard_atoms[inst]:
                h = self.holders(x)
                got = h.pop(("E", inst, a), 0)
                if got:
                    h[("A", a)] = h.get(("A", a), 0) + got
                    self.set_holders(x, h)

    def deposit(self, a: int, inst: int) -> None:
        """An arrive releases what the class holds of the barrier's guarded region, and
        publishes its generic writes (a later proxy fence no longer covers them)."""
        for x in self.m.guard_atoms[inst]:
            h = self.holders(x)
            mine = h.pop(("A", a), 0)
            if mine:
                h[("P", inst)] = h.get(("P", inst), 0) + mine
                self.set_holders(x, h)
        self.publish(a)

    def publish(self, a: int) -> None:
        mine = (a, False)
        for _, x in self.m.static_u[a]:
            unf = self.perms[x][1]
            if mine in unf:
                self.set_unfenced(x, (set(unf) - {mine}) | {(a, True)})

    def op_arrive(self, a: int, ins: Instr, ev: tuple, span: Span | None) -> None:
        if ins.per_warp and len(ins.group) > 1:
            self.converge(ins)
            return
        self.arrive_one_class(a, ins, ev, span)

    def arrive_one_class(self, a: int, ins: Instr, ev: tuple, span: Span | None) -> None:
        m = self.m
        inst, tx = ev[1], ev[2]
        if not self.bars[inst][0].initialized:
            raise _Error("TS401", f"arrive on {m.labels[inst]} before init", span)
        n = ins.count
        if ins.per_warp or n > 0:
            self.release(a, acquire=ins.per_warp)
        if m.ownership and (n > 0 or ins.per_warp):
            if not (ins.stmt.mode is ir.ArriveMode.ONE and m.agents[a].cls.size > 1):
                self.deposit(a, inst)
        if n == 0:
            return
        st = self.bars[inst][0]
        if n > st.pending:
            raise _Error("TS403", f"{m.agents[a].cls.name} makes {n} arrivals on "
                         f"{m.labels[inst]} but the phase has only {st.pending} of "
                         f"{st.expected} pending: the arriving thread set is larger than the "
                         "declared count", span, arrivals=n, count=st.expected)

        def op(s: mb.MbarrierState) -> mb.MbarrierState:
            if tx is None:
                return s.arrive(n)[0]
            for _ in range(n):
                s = s.arrive_expect_tx(tx)[0]
            return s

        self.bar_op(inst, op, span, "arrive", (n, tx))

    def converge(self, ins: Instr) -> None:
        """`arrive ..., one per warp` across classes that share warps: all lanes meet, then
        every warp leader arrives."""
        m = self.m
        for g in ins.group:
            pc, ctrs = self.agents[g]
            gins = m.agents[g].code[pc]
            ev = m.event(g, pc, ctrs)
            if ev[0] == "err":
                raise ev[1]
            self.arrive_one_class(g, gins, ev, gins.stmt.span)
        for g in ins.group:
            self.advance(g)
        self.note(agents=ins.group)

    def op_expect_tx(self, a: int, ins: Instr, ev: tuple, span: Span | None) -> None:
        inst, tx = ev[1], ev[2]

        def op(s: mb.MbarrierState) -> mb.MbarrierState:
            for _ in range(ins.count):
                s = s.expect_tx(tx)
            return s

        self.bar_op(inst, op, span, "expect_tx", (ins.count, tx))

    def op_tma_load(self, a: int, ins: Instr, ev: tuple, span: Span | None) -> None:
        m = self.m
        inst, atoms = ev[1], ev[2]
        st, init_by, fenced, _ = self.bars[inst]
        label = m.labels[inst]
        if not st.initialized:
            raise _Error("TS401", f"tma_load signals {label} before init", span)
        if not fenced:
            raise _Error("TS405", f"tma_load signals {label}, whose init by "
                         f"{m.agents[init_by].cls.name} was not followed by 'fence "
                         "mbarrier_init' (the copy engine may not see the init)", span)
        for _ in range(ins.count):
            if m.ownership:
                for x in atoms:
                    h = self.holders(x)
                    me, pool = ("A", a), ("P", inst)
                    if h.get(me, 0) + h.get(pool, 0) + h.get(FREE, 0) != m.unit:
                        rest = {k: v for k, v in h.items() if k not in (me, pool, FREE)}
                        others = [self.who(rest, ())] + self.copy_holders(x)
                        others = [o for o in others if o != "nobody"]
                        raise _Error("TS303", f"TMA load into {m.atom_label(x)} while "
                                     f"{'; '.join(others) or 'another owner'} still holds it: "
                                     "the copy may overwrite a stage that is still being read",
                                     span, atom=m.atom_label(x))
                    for k in (me, pool, FREE):
                        h.pop(k, None)
                    self.set_holders(x, h)
                    self.set_unfenced(x, ())
            self.copies.append(("L", inst, ins.nbytes, True, atoms))
            self.lflags[inst] |= LOAD_IN_PHASE
            self.note(copy=("L", inst))

    def op_tma_store(self, a: int, ins: Instr, ev: tuple, span: Span | None) -> None:
        m = self.m
        atoms = ev[2]
        for _ in range(ins.count):
            frac = 0
            if m.ownership:
                for x in atoms:
                    if self.defined[x] != DEFINED:
                        # Elements outside the tensor are read but not stored: whether an
                        # unwritten one matters is not decided here (UNKNOWN, never a pass).
                        self.uninitialised(a, x, span, "possible-uninit")
                    self.claim_read(a, x, span)
                    unf = self.perms[x][1]
                    if unf:
                        writers = sorted({m.agents[c].cls.name for c, _ in unf})
                        raise _Error("TS301", f"TMA store reads {m.atom_label(x)}, written "
                                     f"through the generic proxy by {', '.join(writers)} with "
                                     "no 'fence proxy_async' before the synchronisation that "
                                     "orders the write before the copy", span,
                                     atom=m.atom_label(x))
                for x in atoms:
                    h = self.holders(x)
                    mine = h[("A", a)]
                    frac, rest = divmod(mine, 2)
                    if rest:
                        raise Unsupported("a permission split is not exact in the chosen unit")
                    h[("A", a)] = mine - frac
                    self.set_holders(x, h)
            self.copies.append(("S", a, 0, atoms, frac))
            if 0 not in self.sages[a]:
                self.sages[a] = tuple(sorted(self.sages[a] + (0,)))
            self.note(copy=("S", a))

    def op_commit(self, a: int, ins: Instr, ev: tuple, span: Span | None) -> None:
        self.sages[a] = tuple(age + 1 for age in self.sages[a])
        self.copies = [(c[0], c[1], c[2] + 1, c[3], c[4]) if c[0] == "S" and c[1] == a else c
                       for c in self.copies]
        if self.m.ownership:
            for x, (h, _) in enumerate(self.perms):
                if any(k[0] == "G" and k[1] == a for k, _ in h):
                    hh = {(("G", a, k[2] + 1) if k[0] == "G" and k[1] == a else k): v
                          for k, v in h}
                    self.set_holders(x, hh)

    def op_wait_group(self, a: int, ins: Instr, ev: tuple, span: Span | None) -> None:
        self.sages[a] = tuple(age for age in self.sages[a] if age <= ins.pending)
        if not self.m.ownership:
            return
        for x, (h, _) in enumerate(self.perms):
            back = [(k, v) for k, v in h if k[0] == "G" and k[1] == a and k[2] > ins.pending]
            if back:
                hh = dict(h)
                for k, v in back:
                    del hh[k]
                    hh[("A", a)] = hh.get(("A", a), 0) + v
                self.set_holders(x, hh)

    def op_access(self, a: int, ins: Instr, ev: tuple, span: Span | None) -> None:
        reads, writes, exact, touch, exposed, must, covers, fp = ev[1:9]
        for x in exposed:
            d = self.defined[x]
            if d != DEFINED and not (d >= COVER and self.m.covers(d, fp, x)):
                self.uninitialised(a, x, span, "uninit")
        for x in reads:
            self.claim_read(a, x, span)
        for x in writes:
            self.claim_write(a, x, span)
            if self.defined[x] == 0:
                self.defined[x] = MAYBE_DEFINED
            unf = self.perms[x][1]
            self.set_unfenced(x, {(a, False)} if exact else set(unf) | {(a, False)})
        for x, value in covers:
            if self.defined[x] < COVER and self.defined[x] != DEFINED:
                self.defined[x] = value
        for x in must:
            self.defined[x] = DEFINED
        if touch:
            self.race_check(a, touch, span)

    # -- the threads of one class (semantics/footprint.py) ---------------------------------

    def uninitialised(self, a: int, x: int, span: Span | None, kind: str) -> None:
        """A read of an atom nothing has certainly written. When another agent (or a copy
        in flight) may still write it before its next `sync`, the read is not ordered after
        that write: data not ready (TS304). Otherwise nothing writes it first in any run
        (TS306). A candidate: the footprints over-approximate, so the checker confirms it
        on the exact footprints of a block (semantics/witness.py) before refuting."""
        if self.soft is not None:
            return
        m = self.m
        region = m.atom_label(x)
        who = m.agents[a].cls.name
        if self.concurrent_writer(a, x):
            code = "TS304"
            msg = (f"{who} reads {region} before the write that fills it is ordered before "
                   "the read (use before ready)")
        else:
            code = "TS306"
            msg = (f"{who} reads {region}, which nothing (no thread, no copy) has written "
                   "before: uninitialised shared memory")
        if kind == "uninit":
            span = m.culprit_span(a, self.agents[a], x, False) or span
        self.soft = _Error(code, msg, span, soft=True, candidate=kind, agent=a,
                           atom=region)

    def concurrent_writer(self, a: int, x: int) -> bool:
        return self.m.concurrent_writer(self.agents, self.copies, a, x)

    def race_check(self, a: int, touch: int, span: Span | None) -> None:
        """Threads of one class run the same code but not in lockstep: an access meeting
        another thread's access of the class since the threads were last ordered (`sync`;
        for `open` and `released` not even possibly: no wait of the class came in between)
        is a race. Conflicts with `ordered` accesses (a release and an acquire of the class
        in between, which mbarriers may have made an ordering) are possible races only."""
        m = self.m
        w = m.windows
        opened, released, ordered = self.wins[a]
        if self.soft is None:
            c = w.self_conflict(touch) or w.conflict(w.merge(opened, released), touch)
            kind = "race"
            if c is None:
                c, kind = w.conflict(ordered, touch), "possible-race"
            if c is not None:
                pc, ctrs = self.agents[a]
                ins = m.agents[a].code[pc]
                span = fpm.culprit(ins.access, m.env(a, ins, ctrs), m.agents[a].cls.threads,
                                   m.k, c.buffer, 1 << c.element, c.kind != fpm.RAW) or span
                self.soft = _Error(c.code, m.race_text(a, c, kind), span, soft=True,
                                   candidate=kind, agent=a,
                                   atom=fpm.element_label(m.k.buffer(c.buffer), c.element))
        self.wins[a] = (w.merge(opened, touch), released, ordered)

    def release(self, a: int, acquire: bool = False) -> None:
        """The class arrives on a barrier: its earlier accesses are published. With
        `acquire` (the warp convergence of `one per warp`), also ordered among its lanes."""
        if not self.m.ownership:
            return
        w = self.m.windows
        opened, released, ordered = self.wins[a]
        if acquire:
            self.wins[a] = (0, 0, w.merge(ordered, w.merge(opened, released)))
        else:
            self.wins[a] = (0, w.merge(released, opened), ordered)

    def acquire(self, a: int) -> None:
        """The class passes a wait: what it published before may now be ordered."""
        if not self.m.ownership:
            return
        opened, released, ordered = self.wins[a]
        self.wins[a] = (opened, 0, self.m.windows.merge(ordered, released))

    # -- joint moves and the copy engine -----------------------------------------------------

    def sync(self) -> None:
        m = self.m
        self.note(agents=tuple(range(m.n)), sync=True)
        for a in range(m.n):
            self.advance(a)
        if m.ownership:
            self.wins = [(0, 0, 0)] * m.n  # every thread is ordered after every access
            for x, (h, unf) in enumerate(self.perms):
                hh = {k: v for k, v in h if k[0] not in ("A", "N", "Q")}
                back = sum(v for k, v in h if k[0] in ("A", "N", "Q"))
                if back:
                    hh[FREE] = hh.get(FREE, 0) + back
                self.perms[x] = (frozenset(hh.items()),
                                 tuple(sorted({(c, True) for c, _ in unf})))

    def copy_done(self, j: int) -> None:
        m = self.m
        c = self.copies.pop(j)
        self.note(copy_done=c)
        if c[0] == "L":
            inst, nbytes, atoms = c[1], c[2], c[4]
            if m.ownership:
                for x in atoms:
                    h = self.holders(x)
                    h[("P", inst)] = h.get(("P", inst), 0) + m.unit
                    self.set_holders(x, h)
                    self.set_unfenced(x, ())
                    self.defined[x] = DEFINED
            self.bar_op(inst, lambda s: s.complete_tx(nbytes), None, "complete_tx", (nbytes,))
        elif m.ownership:
            a, age, atoms, frac = c[1], c[2], c[3], c[4]
            for x in atoms:
                h = self.holders(x)
                key = ("G", a, age)
                h[key] = h.get(key, 0) + frac
                self.set_holders(x, h)


# ---- search -----------------------------------------------------------------------------------


@dataclass
class SearchResult:
    stats: Stats
    findings: dict[str, Finding]
    parents: dict
    visited: set
    first_final: tuple | None = None


SLACK = 12  # after a violation, explore this many steps deeper (for nearby codes), no more


def finding_key(f: Finding) -> str:
    """Searches keep the first finding per key: the code, and apart from it the first
    candidate of the code (which may be confirmed, and reached sooner)."""
    return f.code + "?" if f.detail.get("candidate") else f.code


def rank(f: Finding) -> int:
    """Which finding of a code to keep: a violation outright, then a candidate the checker
    can confirm on exact footprints, then one it cannot (semantics/witness.py). Candidates
    do not cut the search short: unconfirmed, they must not cost the other properties."""
    kind = f.detail.get("candidate")
    if not kind:
        return 0
    return 2 if kind.startswith("possible") else 1


def search(m: Machine, roots: list[tuple], por: bool, max_states: int,
           stop_on_hard: bool = False, budget: Budget | None = None) -> SearchResult:
    """Breadth-first exploration from `roots`; the first finding of each code is kept with
    the path that reaches it. Once something is found the search goes only SLACK steps
    deeper (a refuted kernel needs no complete state space, and a broken protocol can make
    it huge); the result is then marked incomplete. Every state is charged to `budget` (the
    verification's global one); `max_states` bounds this search alone."""
    stats = Stats()
    parents: dict = {r: None for r in roots}
    depth: dict = {r: 0 for r in roots}
    queue = deque(roots)
    recorder = GRAPH_RECORDER.get()
    graph = recorder.begin(m, roots, por) if recorder is not None else None
    findings: dict[str, Finding] = {}
    first_final = None
    horizon: int | None = None

    def found(code: str, f: Finding, d: int) -> None:
        nonlocal horizon
        key = finding_key(f)
        old = findings.get(key)
        if old is None or rank(f) < rank(old):
            findings[key] = f
        if horizon is None and not f.detail.get("candidate"):
            horizon = d + SLACK

    while queue:
        st = queue.popleft()
        d = depth[st]
        if horizon is not None and d > horizon:
            stats.complete = False
            stats.reason = "stopped after a violation"
            continue
        stats.states += 1
        if stats.states > max_states:
            stats.complete = False
            stats.reason = f"state limit {max_states} reached"
            break
        if budget is not None:
            try:
                budget.charge()
            except BudgetExceeded as exc:
                stats.complete = False
                stats.reason = exc.reason
                stats.budget = True
                break
        if graph is not None:
            graph.visit(st)
        if all(m.instr(st, a).op == END for a in range(m.n)):
            # The block exits here: copies still in flight are the witness of TS307/TS430.
            bad = m.exit_violation(st)
            if bad is not None:
                root, path = path_to(parents, st)
                found(bad[0], Finding(bad[0], bad[1], bad[2], path, root, False,
                                      {"state": st}), d)
                continue
        try:
            succ, enabled, _ = m.successors(st, por)
        except Unsupported as exc:
            stats.complete = False
            stats.reason = exc.message
            break
        if m.model.progress and enabled and not st[3]:
            why = m.no_progress(st, enabled)
            if why:
                root, path = path_to(parents, st)
                found("TS490", Finding("TS490", why, None, path, root, False, {"state": st}), d)
        if not enabled:
            if all(m.instr(st, a).op == END for a in range(m.n)) and not st[3]:
                stats.finals += 1
                if first_final is None:
                    first_final = st
            else:
                stats.deadlocks += 1
                code, why = m.classify_deadlock(st)
                root, path = path_to(parents, st)
                found(code, Finding(code, why, None, path, root, False, {"state": st}), d)
            continue
        for mv, nxt, info in succ:
            stats.transitions += 1
            if graph is not None and nxt is not None:
                graph.edge(st, mv, nxt)
            if nxt is None:
                err: _Error = info
                root, path = path_to(parents, st)
                found(err.code, Finding(err.code, err.message, err.span, path + (mv,), root,
                                        False, {"state": st, **err.detail}), d + 1)
                if stop_on_hard:
                    stats.reason = "stopped at the first error"
                    return SearchResult(stats, findings, parents, set(parents), first_final)
                continue
            if info is not None:
                root, path = path_to(parents, st)
                found(info.code, Finding(info.code, info.message, info.span, path + (mv,), root,
                                         True, {"state": st, **info.detail}), d + 1)
            if nxt not in parents:
                parents[nxt] = (st, mv)
                depth[nxt] = d + 1
                queue.append(nxt)
    return SearchResult(stats, findings, parents, set(parents), first_final)


def path_to(parents: dict, st: tuple) -> tuple[tuple, tuple]:
    """The root a state was reached from, and the moves from it."""
    out = []
    while parents.get(st) is not None:
        st, mv = parents[st]
        out.append(mv)
    return st, tuple(reversed(out))


def replay(m: Machine, root: tuple, path: tuple) -> tuple[list[TraceStep], tuple, dict]:
    """Re-run a path recording each step (with absolute phase numbers along the run)."""
    steps: list[TraceStep] = []
    phases: dict[int, int] = {}
    st = root
    copy_ids: dict[tuple, list[int]] = {}
    next_copy = itertools.count()
    for i, mv in enumerate(path):
        rec: list = []
        if mv[0] == "c" and mv[1] >= len(st[3]):
            break
        try:
            nxt, _ = m.apply(st, mv, rec)
            if m.sym:  # the path was found between representatives (semantics/symmetry.py)
                nxt = symmetry.canon(nxt, m.sym, m.ninst)
        except CannotMove:
            break
        except _Error:
            nxt = None
        steps.append(_describe(m, st, mv, rec, phases, copy_ids, next_copy, i))
        if nxt is None:
            break
        st = nxt
    return steps, st, phases


def _describe(m: Machine, st: tuple, mv: tuple, rec: list, phases: dict, copy_ids: dict,
              next_copy, index: int) -> TraceStep:
    completes = observes = copy_id = -1
    inst_label = ""
    for r in rec:
        if "completes" in r:
            inst = r["completes"]
            completes = phases.get(inst, 0)
            phases[inst] = completes + 1
            inst_label = m.labels[inst]
        if "observes" in r:
            inst = r["observes"]
            observes = phases.get(inst, 0) - 1
            inst_label = m.labels[inst]
        if "copy" in r:
            copy_id = next(next_copy)
            copy_ids.setdefault(r["copy"], []).append(copy_id)
    if mv[0] == "sync":
        ins = next((m.instr(st, a) for a in range(m.n)), None)
        line = ins.stmt.span.line if ins is not None and ins.stmt is not None else 0
        return TraceStep(index, tuple(a.cls.name for a in m.agents), "sync", line,
                         "all threads meet at sync")
    if mv[0] == "c":
        c = st[3][mv[1]]
        key = ("L", c[1]) if c[0] == "L" else ("S", c[1])
        ids = copy_ids.get(key) or [-1]
        cid = ids.pop(0)
        if c[0] == "L":
            label = m.labels[c[1]]
            done = f", completing phase {completes}" if completes >= 0 else ""
            return TraceStep(index, ("copy engine",), "copy_load", 0,
                             f"TMA load lands: complete_tx {c[2]} bytes on {label}{done}",
                             label, completes, -1, cid,
                             writes=tuple(m.atom_label(x) for x in c[4]))
        return TraceStep(index, ("copy engine",), "copy_store", 0,
                         f"TMA store of {m.agents[c[1]].cls.name} finishes", "", -1, -1, cid)
    a = mv[1]
    pc, ctrs = st[0][a]
    ins = m.agents[a].code[pc]
    ev = m.event(a, pc, ctrs)
    names = tuple(m.agents[g].cls.name for g in (ins.group if ins.per_warp and ins.group
                                                   else (a,)))
    line = ins.stmt.span.line if ins.stmt is not None else 0
    iters = ", ".join(f"{lc.stmt.var.name}={lc.lo(m.env(a, ins, ctrs)) + lc.step * i}"
                      for lc, i in zip(ins.ctx, ctrs, strict=False))
    where = f" [{iters}]" if iters else ""
    detail = ins.op
    reads: tuple[str, ...] = ()
    writes: tuple[str, ...] = ()
    fused = [r for r in rec if r.get("fused") and r["ev"][0] == "ok" and r["ins"].op == "access"]
    for r in ([{"ev": ev}] if ins.op == "access" and ev[0] == "ok" else []) + fused:
        reads += tuple(m.atom_label(x) for x in r["ev"][1])
        writes += tuple(m.atom_label(x) for x in r["ev"][2])
    if ins.op == "tma_store" and ev[0] == "ok":
        reads = tuple(m.atom_label(x) for x in ev[2])
    if ev[0] == "ok" and ins.op in ("wait", "arrive", "expect_tx", "tma_load"):
        inst_label = m.labels[ev[1]]
        if ins.op == "wait":
            detail = f"wait {inst_label} parity {ev[2]}"
            if observes >= 0:
                detail += f" passes (phase {observes} completed)"
            elif observes == -1 and any("observes" in r for r in rec):
                detail += " passes at once (no phase has completed)"
        elif ins.op == "arrive":
            detail = f"arrive {inst_label} x{ins.count}"
            if ev[2] is not None:
                detail += f", expect_tx {ev[2]}"
        elif ins.op == "expect_tx":
            detail = f"expect_tx {inst_label} {ev[2]} x{ins.count}"
        else:
            detail = f"tma_load {ins.buffer} signal {inst_label} ({ins.nbytes} bytes)"
        if completes >= 0:
            detail += f", completing phase {completes}"
    elif ins.op == "init":
        detail = "init " + ", ".join(m.labels[i] for i in ev[1]) if ev[0] == "ok" else "init"
    elif ins.op == "access":
        detail = "shared access"
        if ev[0] == "ok":
            r = ", ".join(sorted({m.atom_label(x) for x in ev[1]}))
            w = ", ".join(sorted({m.atom_label(x) for x in ev[2]}))
            detail = "access" + (f" reads {r}" if r else "") + (f" writes {w}" if w else "")
    elif ins.op == "tma_store":
        detail = f"tma_store from {ins.buffer}"
    elif ins.op == "wait_group":
        detail = f"wait_group {ins.pending}"
    if fused:
        detail += "; then " + "; ".join(
            "reads " + ", ".join(sorted({m.atom_label(x) for x in r["ev"][1]})) for r in fused)
    return TraceStep(index, names, ins.op, line, detail + where, inst_label, completes,
                     observes, copy_id, reads, writes)


def trace_lines(steps: list[TraceStep]) -> list[str]:
    return [f"{s.index + 1:3d}. {' + '.join(s.agents)}: {s.detail}"
            + (f" (line {s.line})" if s.line else "") for s in steps]
