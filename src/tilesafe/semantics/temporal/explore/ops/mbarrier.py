"""The mbarrier family: init, fence mbarrier_init, wait, arrive, expect_tx.

Why here: one module holds what these instructions do to the barrier state (through the
executable PTX model, semantics/hw/mbarrier.py), what they touch for the partial-order
reduction, when a wait may pass, and how a stuck wait is classified. What other families
do when a phase completes or a wait passes (copies, permissions) they do in their own
`on_phase` / `on_wait` hooks.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from tilesafe.frontend import ir
from tilesafe.frontend.span import Span
from tilesafe.semantics.hw import mbarrier as mb
from tilesafe.semantics.temporal.explore import objects as obj
from tilesafe.semantics.temporal.explore import perms
from tilesafe.semantics.temporal.explore.errors import MODEL_CODES, ExploreError
from tilesafe.semantics.temporal.explore.explain import bar_text
from tilesafe.semantics.temporal.explore.notes import (
    BarNote,
    CompletesNote,
    ConvergeNote,
    ObservesNote,
)
from tilesafe.semantics.temporal.explore.operands import (
    ArriveOperands,
    Err,
    InitOperands,
    WaitOperands,
)
from tilesafe.semantics.temporal.explore.ops import cluster
from tilesafe.semantics.temporal.explore.ops.base import Family, Op, Summary, line_of
from tilesafe.semantics.temporal.explore.state import State, bar_rec
from tilesafe.semantics.temporal.instrs import (
    Arrive,
    BarrierOp,
    ExpectTx,
    FenceInit,
    Init,
    Instr,
    Wait,
)

if TYPE_CHECKING:
    from tilesafe.semantics.temporal.explore.machine import Machine
    from tilesafe.semantics.temporal.explore.mut import Mut


def instance(m: Machine, ins: BarrierOp, env: Mapping[str, Any]) -> int:
    """The barrier instance an operation names in `env` (TS409 outside the array)."""
    if ins.idx is None:
        return m.model.inst_id(ins.bar, 0)
    i = int(ins.idx(env))
    if not 0 <= i < m.bar_len[ins.bar]:
        raise ExploreError("TS409", f"barrier index {ins.bar}[{i}] is outside "
                           f"0..{m.bar_len[ins.bar] - 1}", ins.stmt.span)
    return m.model.inst_id(ins.bar, i)


def bar_op(s: Mut, inst: int, op: Callable[[mb.MbarrierState], mb.MbarrierState],
           span: Span | None, what: str, args: tuple = ()) -> None:
    """Apply `op` to barrier `inst`; `what` and `args` name it in a recorded step (the
    certificate checker replays them on its own mbarrier model)."""
    m = s.m
    if s.rec is not None:
        s.rec.append(BarNote(inst, what, args))
    st, init_by, fenced, ncomp = s.bars[inst]
    if not st.initialized:
        raise ExploreError("TS401", f"{what} on {m.labels[inst]} before init", span)
    try:
        new = op(st)
    except mb.MbarrierError as exc:
        code = MODEL_CODES.get(exc.code, exc.code)
        raise ExploreError(code, f"{what} on {m.labels[inst]}: {exc.message}", span,
                           model_code=exc.code) from None
    completed = new.parity != st.parity
    s.bars[inst] = bar_rec(new, init_by, fenced, min(ncomp + 1, 2) if completed else ncomp)
    if completed:
        if s.rec is not None:
            s.rec.append(CompletesNote(inst))
        for a in range(m.n):
            k = a * m.ninst + inst
            if s.obs[k] >= 0:
                s.obs[k] = min(s.obs[k] + 1, 2)
        for f in m.hooks.phase:  # the other families' reactions (copies, permissions)
            f(s, inst, span)
        canon(s, inst)


def canon(s: Mut, inst: int) -> None:
    """Phases completed only matter for a first wait (capped at 2); once every class that
    waits on the instance has waited, forget the count (a canonical state)."""
    m = s.m
    if all(s.obs[w * m.ninst + inst] >= 0 for w in m.waiters[inst]):
        st, init_by, fenced, phases = s.bars[inst]
        if phases != 2:
            s.bars[inst] = bar_rec(st, init_by, fenced, 2)


class InitOp(Op):
    enumerated = True

    def evaluate(self, a: int, ins: Init, env: Mapping[str, Any]) -> InitOperands:
        m = self.m
        if ins.idx is None:
            return InitOperands(tuple(m.model.inst_id(ins.bar, i)
                                      for i in range(m.bar_len[ins.bar])))
        return InitOperands((instance(m, ins, env),))

    def objects(self, a: int, ins: Init, ev: InitOperands) -> tuple:
        return (), tuple(obj.phase(i) for i in ev.insts)

    def summarize(self, a: int, ins: Init, ev: InitOperands, writes: Any,
                  into: Summary) -> None:
        into.inits.update(writes)

    def apply(self, s: Mut, a: int, ins: Init, ev: InitOperands, span: Span | None) -> None:
        m = self.m
        for inst in ev.insts:
            st, init_by, _, _ = s.bars[inst]
            if st.initialized or ins.count > 1:
                who = (f"class {m.agents[init_by].cls.name}" if st.initialized
                       else f"another of the {ins.count} threads of {m.agents[a].cls.name}")
                raise ExploreError("TS402", f"init of {m.labels[inst]}, which is live "
                                   f"(initialised by {who})", span)
            s.note(BarNote, inst, "init", (m.bar_count[ins.bar],))
            try:
                new = st.init(m.bar_count[ins.bar])
            except mb.MbarrierError as exc:
                raise ExploreError(MODEL_CODES.get(exc.code, exc.code), exc.message,
                                   span) from None
            s.bars[inst] = bar_rec(new, a, False, 0)
            for c in range(m.n):
                s.obs[c * m.ninst + inst] = -1

    def detail(self, a: int, ins: Init, ev: Any, completes: int, observes: int,
               observed: bool) -> tuple[str, str]:
        if isinstance(ev, Err):
            return "init", ""
        return "init " + ", ".join(self.m.labels[i] for i in ev.insts), ""


class FenceInitOp(Op):
    def late_writes(self, summary: Summary) -> Any:
        return summary.inits

    def step_objects(self, a: int, pc: int, ins: Instr, ev: Any) -> tuple:
        return (), tuple(self.m.static_w[a][pc])

    def apply(self, s: Mut, a: int, ins: FenceInit, ev: Any, span: Span | None) -> None:
        for i, (st, init_by, fenced, n) in enumerate(s.bars):
            if init_by == a and not fenced:
                s.bars[i] = bar_rec(st, init_by, True, n)


class WaitOp(Op):
    enumerated = True

    def gates(self, ins: Instr) -> bool:
        return True

    def evaluate(self, a: int, ins: Wait, env: Mapping[str, Any]) -> WaitOperands:
        return WaitOperands(instance(self.m, ins, env), int(ins.parity(env)))

    def scans(self, ins: Instr) -> bool:
        return True

    def scan(self, a: int, ins: Wait, env: Mapping[str, Any], found: Any) -> None:
        found.waiters[instance(self.m, ins, env)].add(a)

    def objects(self, a: int, ins: Wait, ev: WaitOperands) -> tuple:
        if not self.m.ownership:
            return (obj.phase(ev.inst),), ()
        return (obj.phase(ev.inst),), (obj.earmark(ev.inst, a),)

    def gate(self, state: State, a: int, ins: Wait, ev: WaitOperands, reads: frozenset,
             writes: frozenset) -> tuple[bool, frozenset, frozenset]:
        st = state.bars[ev.inst].st
        return (not st.initialized) or ev.parity != st.parity, reads, writes

    def blocked_on(self, ins: Instr, reads: frozenset) -> tuple | None:
        return next(iter(reads))

    def apply(self, s: Mut, a: int, ins: Wait, ev: WaitOperands, span: Span | None) -> None:
        m = self.m
        inst, p = ev.inst, ev.parity
        st, _, _, ncomp = s.bars[inst]
        if not st.initialized:
            raise ExploreError("TS401", f"wait on {m.labels[inst]} before init", span)
        if p not in (0, 1):
            raise ExploreError("TS408", f"wait parity {p} is not 0 or 1", span)
        if s.rec is not None:
            s.rec.append(BarNote(inst, "wait", (p,)))
        k = a * m.ninst + inst
        d = s.obs[k]
        label = m.labels[inst]
        who = m.agents[a].cls.name
        if d < 0:
            target = -1 if p == 1 else 0
            gap = ncomp - target
            if gap >= 2:
                s.flag(ExploreError("TS408", f"first wait of {who} on {label} (parity {p}) "
                                    f"comes after {ncomp} phase(s) completed: it cannot tell "
                                    "them apart", span, soft=True))
        else:
            expect = (st.parity - d) % 2
            if p != expect:
                s.flag(ExploreError("TS408", f"wait on {label} parity {p} passes on a phase "
                                    f"{who} already consumed: it needs the phase of parity "
                                    f"{expect} (waits must alternate parity)", span,
                                    soft=True))
            elif d >= 2:
                s.flag(ExploreError("TS408", f"{label} completed two phases before {who} "
                                    "waited for the first: the parity wait cannot tell them "
                                    "apart", span, soft=True))
        s.obs[k] = 0
        canon(s, inst)
        if s.rec is not None:
            s.rec.append(ObservesNote(inst))
        for f in m.hooks.wait:  # the other families' reactions (load flags, permissions)
            f(s, a, inst, ins.cluster)

    def detail(self, a: int, ins: Wait, ev: Any, completes: int, observes: int,
               observed: bool) -> tuple[str, str]:
        if isinstance(ev, Err):
            return ins.op, ""
        label = self.m.labels[ev.inst]
        text = f"wait {label} parity {ev.parity}"
        if observes >= 0:
            text += f" passes (phase {observes} completed)"
        elif observes == -1 and observed:
            text += " passes at once (no phase has completed)"
        return text + completing(completes), label

    def blocked(self, state: State, a: int, ins: Wait,
                phases: Mapping[int, int] | None) -> str | None:
        ev = self.m.event(a, *state.agents[a])
        if isinstance(ev, Err):
            return None
        return (f"waits {self.m.labels[ev.inst]} parity {ev.parity} (line {line_of(ins)}) "
                f"[{bar_text(self.m, state, ev.inst, phases)}]")


class ArriveOp(Op):
    enumerated = True

    def gates(self, ins: Arrive) -> bool:
        return ins.joint

    def evaluate(self, a: int, ins: Arrive, env: Mapping[str, Any]) -> ArriveOperands:
        tx = int(ins.tx(env)) if ins.tx is not None else None
        return ArriveOperands(instance(self.m, ins, env), tx)

    def objects(self, a: int, ins: Arrive, ev: ArriveOperands) -> tuple:
        m = self.m
        if not m.ownership:
            return (), (obj.phase(ev.inst),)
        inst = ev.inst
        w = [obj.phase(inst), obj.pool(inst)] + [obj.earmark(inst, x) for x in m.waiters[inst]]
        w.extend(m.tables["ownership"].unfenced_keys[a])
        return (), tuple(w)

    def static_writes(self, a: int, ins: Arrive) -> Any:
        return (obj.warp_meet(id(ins.stmt)),) if ins.per_warp else ()

    def joint(self, ins: Arrive) -> bool:
        return ins.joint

    def converges(self, ins: Arrive) -> tuple[int, ...]:
        return ins.group if ins.per_warp else ()

    def gate(self, state: State, a: int, ins: Arrive, ev: Any, reads: frozenset,
             writes: frozenset) -> tuple[bool, frozenset, frozenset]:
        """A split per-warp arrive is one step of its group, taken by its first class once
        every class of the group is at it (with the objects of them all)."""
        if not ins.joint:
            return True, reads, writes
        if a != min(ins.group):
            return False, reads, writes
        m = self.m
        agents = state.agents
        ok = all(m.agents[g].code[agents[g][0]].stmt is ins.stmt for g in ins.group)
        for g in ins.group:
            if g != a:
                other = m.step_of(g, *agents[g])
                reads, writes = reads | other.reads, writes | other.writes
        return ok, reads, writes

    def apply(self, s: Mut, a: int, ins: Arrive, ev: ArriveOperands,
              span: Span | None) -> None:
        if ins.joint:
            self.converge(s, ins)
            return
        self.arrive_one_class(s, a, ins, ev, span)

    def arrive_one_class(self, s: Mut, a: int, ins: Arrive, ev: ArriveOperands,
                         span: Span | None) -> None:
        m = self.m
        inst, tx = ev.inst, ev.tx
        cluster.check_peers(s, a, (m.tables["cluster"].inst_cta[inst],) if m.model.cluster
                            else (), f"arrives on {m.labels[inst]}", span)
        if not s.bars[inst].st.initialized:
            raise ExploreError("TS401", f"arrive on {m.labels[inst]} before init", span)
        n = ins.count
        if ins.per_warp or n > 0:
            # The class releases what it did (with `one` of a class of several threads, only
            # one thread arrives: the others deposit nothing) -- where the release's scope
            # reaches the barrier's waiters (ops/cluster.py).
            mode = cluster.release_mode(m, a, ins, inst)
            if isinstance(mode, tuple):
                if m.ownership:
                    perms.strand(s, a, mode[1], inst)
            else:
                one = ins.stmt.mode is ir.ArriveMode.ONE and m.agents[a].cls.size > 1
                deposit = cluster.NO_DEPOSIT if one else mode
                for f in m.hooks.arrive:
                    f(s, a, inst, ins.per_warp, deposit)
        if n == 0:
            return
        st = s.bars[inst].st
        if n > st.pending:
            raise ExploreError("TS403", f"{m.agents[a].cls.name} makes {n} arrivals on "
                               f"{m.labels[inst]} but the phase has only {st.pending} of "
                               f"{st.expected} pending: the arriving thread set is larger "
                               "than the declared count", span, arrivals=n, count=st.expected)

        def op(b: mb.MbarrierState) -> mb.MbarrierState:
            if tx is None:
                return b.arrive(n)[0]
            for _ in range(n):
                b = b.arrive_expect_tx(tx)[0]
            return b

        bar_op(s, inst, op, span, "arrive", (n, tx))

    def converge(self, s: Mut, ins: Arrive) -> None:
        """`arrive ..., one per warp` across classes that share warps: all lanes meet, then
        every warp leader arrives."""
        m = self.m
        for g in ins.group:
            pc, ctrs = s.agents[g]
            gins = m.agents[g].code[pc]
            ev = m.event(g, pc, ctrs)
            if isinstance(ev, Err):
                raise ev.error.with_traceback(None)
            self.arrive_one_class(s, g, gins, ev, gins.stmt.span)
        for g in ins.group:
            s.advance(g)
        s.note(ConvergeNote, ins.group)

    def detail(self, a: int, ins: Arrive, ev: Any, completes: int, observes: int,
               observed: bool) -> tuple[str, str]:
        if isinstance(ev, Err):
            return ins.op, ""
        label = self.m.labels[ev.inst]
        text = f"arrive {label} x{ins.count}"
        if ev.tx is not None:
            text += f", expect_tx {ev.tx}"
        return text + completing(completes), label

    def blocked(self, state: State, a: int, ins: Arrive,
                phases: Mapping[int, int] | None) -> str | None:
        if ins.per_warp:
            return (f"waits for its warps to converge at 'arrive ..., one per warp' "
                    f"(line {line_of(ins)})")
        return super().blocked(state, a, ins, phases)


class ExpectTxOp(Op):
    enumerated = True

    def evaluate(self, a: int, ins: ExpectTx, env: Mapping[str, Any]) -> ArriveOperands:
        return ArriveOperands(instance(self.m, ins, env), int(ins.tx(env)))

    def objects(self, a: int, ins: ExpectTx, ev: ArriveOperands) -> tuple:
        return (), (obj.phase(ev.inst),)

    def apply(self, s: Mut, a: int, ins: ExpectTx, ev: ArriveOperands,
              span: Span | None) -> None:
        tx = ev.tx

        def op(b: mb.MbarrierState) -> mb.MbarrierState:
            for _ in range(ins.count):
                b = b.expect_tx(tx)
            return b

        bar_op(s, ev.inst, op, span, "expect_tx", (ins.count, tx))

    def detail(self, a: int, ins: ExpectTx, ev: Any, completes: int, observes: int,
               observed: bool) -> tuple[str, str]:
        if isinstance(ev, Err):
            return ins.op, ""
        label = self.m.labels[ev.inst]
        return f"expect_tx {label} {ev.tx} x{ins.count}" + completing(completes), label


def completing(completes: int) -> str:
    return f", completing phase {completes}" if completes >= 0 else ""


def stuck(m: Machine, state: State, live: list[int]) -> tuple[str, str] | None:
    """A deadlock with a class at a wait: TS407 a tx-count that cannot reach zero, TS406 a
    phase short of arrivals, TS408 a wait for a phase its parity misnames (in that order
    of preference; the first class with the preferred code)."""
    codes = []
    for a in live:
        pc, ctrs = state.agents[a]
        ins = m.agents[a].code[pc]
        if not isinstance(ins, Wait):
            continue
        ev = m.event(a, pc, ctrs)
        if isinstance(ev, Err):
            continue
        st = state.bars[ev.inst].st
        d = state.obs[a * m.ninst + ev.inst]
        label = m.labels[ev.inst]
        if st.pending == 0 and st.tx != 0:
            codes.append(("TS407", f"{label} has all arrivals but its tx-count is {st.tx}: "
                          "expect_tx bytes and the bytes its copies deliver differ"))
        elif 0 < st.pending < st.expected:
            codes.append(("TS406", f"{label} got {st.expected - st.pending} of "
                          f"{st.expected} arrivals in this phase and no more can come"))
        elif d >= 0 and ev.parity != (st.parity - d) % 2:
            codes.append(("TS408", f"wait on {label} parity {ev.parity} names a phase that "
                          "never comes"))
    order = {"TS407": 0, "TS406": 1, "TS408": 2}
    if codes:
        codes.sort(key=lambda c: order[c[0]])
        return codes[0]
    return None


FAMILY = Family("mbarrier", {Init: InitOp, FenceInit: FenceInitOp, Wait: WaitOp,
                             Arrive: ArriveOp, ExpectTx: ExpectTxOp}, stuck=stuck)
