"""The transition system of one block for concrete sizes (and trip counts): its static
part -- environments, evaluation, atoms, futures -- and the moves (por.py chooses among
them, mut.py performs them, the family modules in ops/ say what each instruction does).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator, Mapping
from typing import Any, NamedTuple

from tilesafe.frontend import ir
from tilesafe.semantics.hw import mbarrier as mb
from tilesafe.semantics.temporal import footprint as fpm
from tilesafe.semantics.temporal import symmetry
from tilesafe.semantics.temporal.events import Agent, Model
from tilesafe.semantics.temporal.explore import por
from tilesafe.semantics.temporal.explore.atoms import prepass
from tilesafe.semantics.temporal.explore.errors import ExploreError
from tilesafe.semantics.temporal.explore.explain import bar_text, blocked_lines, holder_text
from tilesafe.semantics.temporal.explore.futures import futures
from tilesafe.semantics.temporal.explore.mut import Mut
from tilesafe.semantics.temporal.explore.operands import AT_END, AT_SYNC, FAILS, STEP, Err
from tilesafe.semantics.temporal.explore.ops import Hooks, Op, cluster
from tilesafe.semantics.temporal.explore.state import (
    FREE,
    NO_WINDOW,
    BarRec,
    HolderKeys,
    Perm,
    Pos,
    State,
)
from tilesafe.semantics.temporal.instrs import Branch, End, Enter, Instr, Jump, Next, Sync


class Step(NamedTuple):
    """A class's next step at a pc and counters (cached): the instruction, its Op, its
    operands, what it reads and writes (objects.py), and its kind: an ordinary step, the
    end of the program, the block-wide `sync`, or one whose evaluation failed (Err)."""

    ins: Instr
    op: Op
    ev: Any
    reads: frozenset
    writes: frozenset
    kind: int
    joint: bool  # a step several classes take together (Op.joint): it advances them itself
    gated: bool  # Op.gate decides whether it is enabled (else: always)
    remote: bool = False  # it touches another CTA of a cluster (never fused: ops/cluster.py)


class Machine:
    """The transition system of one block for concrete sizes (and trip counts)."""

    # A named-barrier arrival's objects for partial-order reduction: every atom (False:
    # the searches of §4 and their state counts) or the atoms it touches in the state (the
    # nested argument's runs, semantics/temporal/nest_level.py; ops/named.py says why).
    precise_pools = False

    def __init__(self, model: Model, sizes: Mapping[str, int], period: int | None = None,
                 enum_cap: int = 4096, loop_caps: Mapping[int, int] | None = None,
                 template: Machine | None = None) -> None:
        self.model = model
        self.k = model.kernel
        self.sizes = dict(sizes)
        self.ownership = model.ownership
        self.agents: tuple[Agent, ...] = model.agents
        self.n = len(self.agents)
        self.ninst = len(model.instances)
        self.period = period
        self.enum_cap = enum_cap
        # Per kept loop (by its variable's uid): at most this many iterations are enumerated
        # for the static tables and futures (the nested argument's loops, nest_argument.py).
        self.loop_caps = dict(loop_caps or {})
        # A lifted block index (semantics/temporal/blockparam.py) is a size: it overrides the
        # default.
        self.base = {"block.x": 0, "block.y": 0, "block.z": 0, **self.sizes}
        self._ev: dict[tuple, Any] = {}
        self._settle: dict[tuple, Pos] = {}
        self.bar_len = {b.name: b.instances for b in self.k.barriers}
        self.labels = [model.label(i) for i in range(len(model.instances))]
        self.bar_count = {b.name: b.count for b in self.k.barriers}
        # Permissions in integer units of one atom: every share the rules create (a read
        # share 1/(n+1), a phase split among its waiters, a TMA store's half) divides it.
        self.unit = math.lcm(*range(1, self.n + 2)) ** 2 * (1 << 24)
        self.read_share = self.unit // (self.n + 1)
        self.keys = HolderKeys(self.n, self.ninst)
        self._static_cache: dict[tuple, Step] = {}
        self._por_cache: dict = {}
        self._copy_cache: dict = {}
        self.windows: fpm.TouchTable = model.__dict__.setdefault("_touches", fpm.TouchTable())
        # Identical classes (semantics/temporal/symmetry.py): states are kept up to their renaming.
        self.sym: tuple[tuple[int, ...], ...] = (symmetry.groups(self.agents)
                                                 if model.symmetric else ())
        self.sym_of: dict[int, tuple[int, ...]] = {a: g for g in self.sym for a in g}
        # Every program ends with its one End (events.build_model): a class has finished
        # when its pc is there.
        self.last_pc = tuple(len(ag.code) - 1 for ag in self.agents)
        self.hooks = Hooks(self)
        if template is not None:
            # A run of the nested argument: the atoms, tables and futures are those of the
            # template machine, which the argument shows cover every run (nest_argument.py).
            self.atoms, self.waiters = template.atoms, template.waiters
            self.tables, self.fut, self.static_w = (template.tables, template.fut,
                                                    template.static_w)
        else:
            self.atoms, self.waiters = prepass(self)
            self.rebuild_static()
        if self.sym:  # differences show at once, before any search (semantics/temporal/symmetry.py)
            for g in self.sym:
                for pc, ins in enumerate(self.agents[g[0]].code):
                    if ins.visible:
                        for ctrs in itertools.islice(self.envs(g[0], ins), 64):
                            self.event(g[0], pc, ctrs)

    def rebuild_static(self) -> None:
        """The families' tables and the futures, from the atoms and waiters (again, when a
        tail machine takes over those of the far system: semantics/temporal/parametric.py)."""
        self.tables = self.hooks.tables(self)
        self.fut, self.static_w = futures(self)

    # ---- environments and evaluation -------------------------------------------------------

    def env(self, a: int, ins: Instr, ctrs: tuple[int, ...]) -> dict[str, Any]:
        env = dict(self.base)
        env["thread"] = self.agents[a].cls.threads[0]
        for lc, i in zip(ins.ctx, ctrs, strict=False):
            env[f"L{lc.uid}"] = lc.lo(env) + lc.step * i
        return env

    def settle(self, a: int, pc: int, ctrs: tuple[int, ...]) -> Pos:
        """Run control instructions until a visible one (loops, branches, jumps)."""
        key = (a, pc, ctrs)
        hit = self._settle.get(key)
        if hit is not None:
            return hit
        code = self.agents[a].code
        p, c = pc, ctrs
        while True:
            ins = code[p]
            if isinstance(ins, Enter):
                if ins.trip(self.env(a, ins, c)) > 0:
                    c = c + (0,)
                    p += 1
                else:
                    p = ins.target
            elif isinstance(ins, Next):
                i = c[-1] + 1
                if i < ins.trip(self.env(a, ins, c[:-1])):
                    c = c[:-1] + (i,)
                    p = ins.target
                else:
                    c = c[:-1]
                    p += 1
            elif isinstance(ins, Branch):
                p = p + 1 if bool(ins.cond(self.env(a, ins, c))) else ins.target
            elif isinstance(ins, Jump):
                p = ins.target
            else:
                break
        pos = self._settle[key] = (p, c)
        if a in self.sym_of:
            for b in self.sym_of[a]:
                if b != a and self.settle(b, pc, ctrs) != pos:
                    raise symmetry.SymmetryBroken(
                        f"classes {self.agents[a].name} and {self.agents[b].name} take "
                        "different paths", None)
        return pos

    def event(self, a: int, pc: int, ctrs: tuple[int, ...]) -> Any:
        """The evaluated operands of an instruction (cached): Err on failure."""
        key = (a, pc, ctrs)
        hit = self._ev.get(key)
        if hit is not None:
            return hit
        ins = self.agents[a].code[pc]
        ev = self.evaluate_safe(a, ins, self.env(a, ins, ctrs), wrap=True)
        self._ev[key] = ev
        if a in self.sym_of:
            for b in self.sym_of[a]:
                if b != a and not symmetry.same_event(ev, self.event(b, pc, ctrs)):
                    raise symmetry.SymmetryBroken(
                        f"classes {self.agents[a].name} and {self.agents[b].name} differ at "
                        f"{ins.text()}", None)
        return ev

    def evaluate_safe(self, a: int, ins: Instr, env: Mapping[str, Any], wrap: bool = False
                      ) -> Any:
        """The operands in `env` (not cached); a violation gives None (or, with `wrap`,
        Err)."""
        try:
            return self.hooks.ops[type(ins)].evaluate(a, ins, env)
        except ExploreError as err:
            return Err(err) if wrap else None

    def envs(self, a: int, ins: Instr) -> Iterator[tuple[int, ...]]:
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
            trip = min(trip, self.loop_caps.get(lc.uid, trip))
            for i in range(min(trip, self.enum_cap)):
                yield from rec(d + 1, ctrs + (i,))
        yield from rec(0, ())

    def _is_param(self, a: int, stmt: ir.For) -> bool:
        p = self.agents[a].param_loop
        return p is not None and p[3] is stmt

    def _trip_of(self, a: int, stmt: ir.For, env: Mapping[str, Any]) -> int:
        for ins in self.agents[a].code:
            if isinstance(ins, Enter) and ins.stmt is stmt:
                return int(ins.trip(env))
        return 0

    # ---- states and moves ------------------------------------------------------------------

    def initial(self) -> State:
        agents = tuple(self.settle(a, 0, ()) for a in range(self.n))
        bars = tuple(BarRec(mb.MbarrierState(), -1, False, 0) for _ in range(self.ninst))
        obs = (-1,) * (self.n * self.ninst)
        perms: tuple = ()
        if self.ownership:
            perms = tuple(Perm(frozenset({(FREE, self.unit)}), ()) for _ in range(len(self.atoms)))
        defined = (0,) * len(self.atoms) if self.ownership else ()
        lflags = (0,) * self.ninst
        sages = ((),) * self.n
        wins = (NO_WINDOW,) * self.n if self.ownership else ()
        named = (0,) * len(self.tables["named"].ids)
        mma = (self.tables["wgmma"].initial,) * self.n
        state = State(agents, bars, obs, (), perms, defined, lflags, sages, wins, named, mma)
        return symmetry.canon(state, self.sym, self.ninst) if self.sym else state

    def instr(self, state: State, a: int) -> Instr:
        return self.agents[a].code[state.agents[a][0]]

    def step_of(self, a: int, pc: int, ctrs: tuple[int, ...]) -> Step:
        """The class's step at (pc, ctrs): instruction, Op, operands, objects (cached)."""
        key = (a, pc, ctrs)
        hit = self._static_cache.get(key)
        if hit is None:
            ins = self.agents[a].code[pc]
            op = self.hooks.ops[type(ins)]
            ev = self.event(a, pc, ctrs)
            kind = (AT_END if isinstance(ins, End) else AT_SYNC if isinstance(ins, Sync)
                    else FAILS if isinstance(ev, Err) else STEP)
            r, w = op.step_objects(a, pc, ins, ev) if kind == STEP else ((), ())
            r, w, remote = cluster.step_objects(self, a, pc, ctrs, frozenset(r), frozenset(w),
                                                kind == STEP and op.joint(ins))
            normal = kind == STEP
            hit = Step(ins, op, ev, r, w, kind,
                       normal and op.joint(ins), normal and op.gates(ins), remote)
            self._static_cache[key] = hit
        return hit

    def copy_objects(self, c: tuple) -> frozenset:
        """What completing an in-flight copy writes (cached per copy)."""
        hit = self._copy_cache.get(c)
        if hit is None:
            hit = self._copy_cache[c] = cluster.copy_objects(
                self, frozenset(self.hooks.in_flight[c[0]].objects(c)))
        return hit

    def successors(self, state: State, por_on: bool) -> tuple[list, list, dict]:
        """(move, next state or None, soft violation or the hard one) for the moves the
        search takes (a persistent subset with `por_on`), the enabled moves, and the
        per-agent analysis (por.analyse)."""
        enabled, info = por.analyse(self, state)
        moves = por.persistent(self, state, enabled, info) if por_on else enabled
        out = []
        for mv in moves:
            try:
                nxt, soft = self.apply(state, mv)
                if self.sym:
                    nxt = symmetry.canon(nxt, self.sym, self.ninst)
                out.append((mv, nxt, soft))
            except ExploreError as err:
                out.append((mv, None, err))
        return out, enabled, info

    def apply(self, state: State, mv: tuple, rec: list | None = None
              ) -> tuple[State, ExploreError | None]:
        """Perform one move. Raises ExploreError for a hard violation; returns (state, soft
        violation or None). With `rec`, appends what the move did (notes.py)."""
        s = Mut(self, state, rec)
        if mv[0] == "sync":
            s.sync()
        elif mv[0] == "c":
            s.copy_done(mv[1])
        else:
            s.step(mv[1])
        return s.freeze(), s.soft

    # ---- explanations (explain.py) ---------------------------------------------------------

    def atom_label(self, atom: int) -> str:
        return self.atoms.label(atom)

    def describe_holder(self, k: tuple) -> str:
        return holder_text(self, k)

    def blocked_lines(self, state: State, phases: Mapping[int, int] | None = None
                      ) -> list[str]:
        return blocked_lines(self, state, phases)

    def bar_text(self, state: State, inst: int, phases: Mapping[int, int] | None = None
                 ) -> str:
        return bar_text(self, state, inst, phases)
