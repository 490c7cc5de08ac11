"""Turning explored findings into refutations: runs from the start of the kernel, and
candidate violations confirmed on the exact footprints of one block of one launch.

Why: the explorer's footprints hold for every size and block (semantics/temporal/footprint.py), so
they over-approximate -- a condition on the sizes or the block index runs both branches, an
unknown index touches the whole buffer -- and a race between the threads of a class or an
uninitialised read found with them (a *candidate*) may happen in no launch at all. Its run,
however, is a run of every block of every launch with the same trip counts: synchronisation
never depends on the block (events.Unsupported otherwise). So the run is replayed with the
exact footprints of one block (`_Shadow`); if that block does the violation, the block and
the launch are the witness and the candidate is a refutation. Candidates no tried block
confirms, and "possible" ones (an mbarrier ordering between threads of one class the model
does not decide, elements a TMA store may discard), stay UNKNOWN (TS492): never a
refutation without a witness, never a proof.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from tilesafe.semantics.expr import evaluate
from tilesafe.semantics.interpreter.interp_io import check_where
from tilesafe.semantics.temporal import blockparam
from tilesafe.semantics.temporal import footprint as fpm
from tilesafe.semantics.temporal.budget import Budget, BudgetExceeded
from tilesafe.semantics.temporal.events import Model, compile_expr
from tilesafe.semantics.temporal.explore import (
    CannotMove,
    ExploreError,
    Finding,
    Machine,
    exit_violation,
    finding_key,
    finished,
    replay,
    search,
)
from tilesafe.semantics.temporal.explore.notes import CopyDoneNote, StepNote, SyncNote
from tilesafe.semantics.temporal.explore.operands import Err
from tilesafe.semantics.temporal.explore.state import LoadCopy, State
from tilesafe.semantics.temporal.explore.threads import concurrent_writer, race_text
from tilesafe.semantics.temporal.instrs import Access, Arrive, TmaStore, Wait
from tilesafe.semantics.temporal.parametric import Config, Outcome, sample_sizes, sizes_for_trip

UNSETTLED_CODE = "TS492"
MAX_BLOCKS = 64  # blocks tried per launch (the corners of the grid first)


@dataclass(frozen=True)
class Witness:
    sizes: dict[str, int]
    block: tuple[int, ...]
    message: str
    detail: Mapping[str, Any]


# ---- runs from the start -------------------------------------------------------------------


def from_start(model: Model, outcome: Outcome, finding: Finding, cfg: Config, mach: Machine,
               budget: Budget | None = None) -> tuple[Machine, Finding, Config]:
    """A finding whose run does not start at the initial state (a tail started from a level
    set, or the far system) re-found in a plain exploration of its trip count, so that the
    run starts at the beginning of the kernel; a copy left running at exit gets a run that
    shows it in flight (`in_flight_at_exit`)."""
    mach, finding, cfg = _from_start(model, outcome, finding, cfg, mach, budget)
    return mach, in_flight_at_exit(mach, finding, budget), cfg


def _from_start(model: Model, outcome: Outcome, finding: Finding, cfg: Config, mach: Machine,
                budget: Budget | None = None) -> tuple[Machine, Finding, Config]:
    if finding.root == mach.initial() and cfg.kind == "full":
        return mach, finding, cfg
    # Runs of the far system are valid, move for move, in any system with a trip count
    # that keeps the same levels away from the end: try the smallest such trip counts.
    if cfg.kind.startswith("level") and cfg.trip is not None and finding.root == mach.initial():
        arg = outcome.argument
        depth = int(cfg.kind.split()[1]) + int(arg.get("K", 0)) + 2
        for trip in range(depth, depth + 2 * max(1, int(arg.get("P", 1))) + 1):
            sizes = sizes_for_trip(model, trip)
            if sizes is None:
                continue
            small = Machine(model, sizes)
            steps, _, _ = replay(small, small.initial(), finding.path)
            if steps and len(steps) == len(finding.path):
                return small, replace(finding, root=small.initial()), Config(sizes, trip, "full")
        return mach, finding, cfg
    small = Machine(model, cfg.sizes)
    res = search(small, [small.initial()], True, 200_000, budget=budget)
    again = res.findings.get(finding_key(finding))
    if again is not None:
        return small, again, Config(cfg.sizes, cfg.trip, "full")
    return mach, finding, cfg


EXIT_CODES = ("TS307", "TS430")


def in_flight_at_exit(mach: Machine, finding: Finding, budget: Budget | None = None,
                      limit: int = 20_000) -> Finding:
    """For a copy left running at exit (TS307, TS430): a run that shows the copy still in
    flight when the last thread ends. The search found the violation where it is decided
    (the flags of the state), on a run in which the copy may well have landed in time; this
    depth-first search runs the threads first and the copy engine only when no thread can
    move -- a slow copy engine -- and stops at the first exit with a violating copy in
    flight. Without one within `limit` states, the finding stays as it is."""
    if finding.code not in EXIT_CODES:
        return finding
    start = mach.initial()
    stack: list[tuple[tuple, tuple]] = [(start, ())]
    seen = {start}
    while stack and len(seen) < limit:
        st, path = stack.pop()
        if budget is not None:
            budget.charge()
        if finished(mach, st):
            bad = exit_violation(mach, st)
            if st.copies and bad is not None and bad[0] == finding.code:
                return replace(finding, path=path, root=start, detail={**finding.detail,
                                                                        "state": st})
            continue
        succ, _, _ = mach.successors(st, False)
        threads = [(mv, nxt) for mv, nxt, _ in succ if mv[0] != "c" and nxt is not None]
        moves = threads or [(mv, nxt) for mv, nxt, _ in succ if nxt is not None]
        for mv, nxt in reversed(moves):
            if nxt not in seen:
                seen.add(nxt)
                stack.append((nxt, path + (mv,)))
    return finding


# ---- confirming candidates -----------------------------------------------------------------


def resolve(model: Model, outcome: Outcome, budget: Budget | None = None) -> None:
    """Confirm every candidate finding of `outcome` (in place): a confirmed one becomes a
    finding with its witness; an unconfirmed one is dropped and its code recorded in
    `outcome.unsettled` with the reason (UNKNOWN for that property only)."""
    kept = []
    alternatives: list[dict[str, int]] | None = None
    for f, cfg, mach in outcome.findings:
        kind = f.detail.get("candidate")
        if not kind:
            kept.append((f, cfg, mach))
            continue
        why = _unconfirmable(kind)
        if why is None:
            try:
                mach2, f2, cfg2 = from_start(model, outcome, f, cfg, mach, budget)
                if alternatives is None:
                    alternatives = sample_sizes(model)
                w = confirm(model, f2, [cfg2.sizes] + [s for s in alternatives
                                                       if s != cfg2.sizes], budget)
            except BudgetExceeded as exc:
                w, why = None, exc.reason
            if w is not None:
                detail = {k: v for k, v in f2.detail.items() if k != "candidate"}
                detail["witness"] = {"sizes": w.sizes, "block": list(w.block), **w.detail}
                kept.append((Finding(f2.code, w.message, f2.span, f2.path, f2.root, f2.soft,
                                     detail), Config(w.sizes, cfg2.trip, "full"),
                             Machine(model, w.sizes) if w.sizes != cfg2.sizes else mach2))
                continue
            why = why or _not_confirmed(kind)
        outcome.unsettled.setdefault(f.code, f"{f.message} -- not confirmed: {why}")
    outcome.findings[:] = kept
    for code in list(outcome.unsettled):
        if any(g.code == code for g, _, _ in kept):
            del outcome.unsettled[code]


def _unconfirmable(kind: str) -> str | None:
    if kind == "possible-race":
        return ("the two accesses are separated by mbarrier operations of the class, and "
                "whether those order its threads is not decided")
    return None


def _not_confirmed(kind: str) -> str:
    if kind == "possible-uninit":
        return ("a TMA store reads the element, and in no block of the launches tried does "
                "it fall inside the tensor (elements outside are read and discarded)")
    return ("the explored footprints over-approximate (a condition or index depends on the "
            "sizes, the block index or memory) and no block of the launches tried does it")


def confirm(model: Model, finding: Finding, launches: list[dict[str, int]],
            budget: Budget | None = None) -> Witness | None:
    """The first launch and block whose exact footprints, along the finding's run, make a
    violation of the finding's code."""
    for sizes in launches:
        try:
            grid = check_where(model.kernel, sizes)
        except Exception:  # noqa: BLE001 - sizes outside `where`: not a launch
            continue
        mach = Machine(model, sizes)
        if not _replays(mach, finding):
            continue
        for block in blockparam.blocks(model.kernel, sizes, _blocks(grid)):
            if budget is not None:
                budget.charge(len(finding.path))
            hit = _Shadow(mach, block).run(finding)
            if hit is not None:
                message, detail = hit
                where = ", ".join(f"{k}={v}" for k, v in sizes.items())
                return Witness(dict(sizes), block,
                               f"{message} (witness: block {block} of the launch {where})",
                               detail)
    return None


def _replays(mach: Machine, finding: Finding) -> bool:
    """Is the run (from the start of the kernel) a run of this launch too?"""
    st = mach.initial()
    for mv in finding.path:
        try:
            st, _ = mach.apply(st, mv)
        except (CannotMove, ExploreError, IndexError):
            return False
    return True


def _blocks(grid: tuple[int, ...]) -> Iterator[tuple[int, ...]]:
    """The corners of the grid (where ragged edges are), then the rest, at most MAX_BLOCKS."""
    dims = [sorted({0, g - 1}) for g in grid]
    seen = set()
    for b in itertools.product(*dims):
        seen.add(b)
        yield b
    for b in itertools.product(*(range(g) for g in grid)):
        if len(seen) >= MAX_BLOCKS:
            return
        if b not in seen:
            seen.add(b)
            yield b


class _Shadow:
    """One block, replayed along an explored run with exact footprints: element-level
    "may have been written" and, per class, the certain accesses not yet ordered among its
    threads (open / published by an arrive / published and acquired), as in the explorer."""

    def __init__(self, mach: Machine, block: tuple[int, ...]) -> None:
        self.m = mach
        self.block = block
        k = mach.k
        self.written = {b.name: np.zeros(b.size, bool) for b in k.shared}
        self.wins: list[list[fpm.Touches]] = [[{}, {}, {}] for _ in range(mach.n)]

    def env(self, a: int, ins: Any, ctrs: tuple[int, ...]) -> dict[str, Any]:
        env = self.m.env(a, ins, ctrs)
        for axis, v in zip(("block.x", "block.y", "block.z"), self.block, strict=False):
            env[axis] = v
        return env

    def run(self, finding: Finding) -> tuple[str, dict[str, Any]] | None:
        st = self.m.initial()
        for mv in finding.path:
            rec: list = []
            try:
                nxt, _ = self.m.apply(st, mv, rec)
            except (ExploreError, CannotMove):
                return None
            for r in rec:
                hit = self.event(st, r)
                if hit is not None and hit[0] == finding.code:
                    return hit[1], hit[2]
            st = nxt
        return None

    def event(self, st: State, r: Any) -> tuple[str, str, dict] | None:
        if isinstance(r, SyncNote):
            self.wins = [[{}, {}, {}] for _ in range(self.m.n)]
            return None
        if isinstance(r, CopyDoneNote):
            if isinstance(r.copy, LoadCopy):
                for x in r.copy.atoms:
                    self._mark(x)
            return None
        if not isinstance(r, StepNote) or isinstance(r.ev, Err):
            return None
        ins = r.ins
        a = r.agents[0]
        if isinstance(ins, Access):
            return self.access(st, a, ins, r.ctrs)
        if isinstance(ins, TmaStore):
            return self.store(a, ins, r.ctrs)
        if isinstance(ins, Arrive):
            group = ins.group if ins.per_warp and ins.group else (a,)
            for g in group:
                if ins.per_warp:
                    o, rel, ordd = self.wins[g]
                    self.wins[g] = [{}, {}, fpm.merge(ordd, fpm.merge(o, rel))]
                elif ins.count > 0:
                    o, rel, ordd = self.wins[g]
                    self.wins[g] = [{}, fpm.merge(rel, o), ordd]
        elif isinstance(ins, Wait):
            o, rel, ordd = self.wins[a]
            self.wins[a] = [o, {}, fpm.merge(ordd, rel)]
        return None

    def store(self, a: int, ins: Any, ctrs: tuple[int, ...]) -> tuple[str, str, dict] | None:
        """A TMA store of this block: an element of its box that lies inside the tensor (so
        it is stored) and that nothing wrote is an uninitialised read (TS306)."""
        m, s = self.m, ins.stmt
        tm = m.k.tensormap(s.tensormap)
        tensor, buf = m.k.tensor(tm.tensor), m.k.buffer(s.src.buffer)
        env = self.env(a, ins, ctrs)
        shape = [int(evaluate.eval_sizes(d, m.sizes)) for d in tensor.shape]
        coords = [int(compile_expr(c, ins.lets)(env)) for c in s.coords]
        prefix = tuple(int(f(env)) for f in ins.prefix)
        written = self.written[buf.name].reshape(buf.shape)[prefix]
        box = np.indices(tm.box).reshape(len(tm.box), -1)
        inside = np.ones(box.shape[1], bool)
        for d, (c, n) in enumerate(zip(coords, shape, strict=True)):
            inside &= (box[d] + c >= 0) & (box[d] + c < n)
        tail = box[len(tm.box) - written.ndim:]  # the box's last dims index the slice
        unread = inside & ~written[tuple(tail)]
        if not unread.any():
            return None
        j = int(np.flatnonzero(unread)[0])
        element = prefix + tuple(int(x) for x in tail[:, j])
        label = fpm.element_label(buf, int(np.ravel_multi_index(element, buf.shape)))
        gidx = [c + int(x) for c, x in zip(coords, box[:, j], strict=True)]
        target = f"{tensor.name}[{', '.join(map(str, gidx))}]"
        return ("TS306", f"the TMA store of {m.agents[a].cls.name} (line {s.span.line}) reads "
                f"{label}, which nothing has written, and stores it to {target}, inside the "
                "tensor", {"element": label, "stored to": target, "line": s.span.line})

    def _mark(self, atom: int) -> None:
        buf = self.m.atoms.buf[atom]
        mask = self.m.atoms.mask[atom]
        w = self.written[buf]
        bits = np.unpackbits(np.frombuffer(mask.to_bytes((w.size + 7) // 8, "little"),
                                           dtype=np.uint8), bitorder="little")[:w.size]
        w |= bits.astype(bool)

    def access(self, st: State, a: int, ins: Any, ctrs: tuple[int, ...]
               ) -> tuple[str, str, dict] | None:
        m = self.m
        cls = m.agents[a].cls
        env = self.env(a, ins, ctrs)
        fp = fpm.evaluate(ins.access, env, cls.threads, m.k, exact=True)
        hit = None
        if not fp.approx:
            for buf, p in fp.bufs.items():
                fresh = np.flatnonzero(p.exposed & ~self.written[buf])
                if fresh.size and hit is None:
                    e = int(fresh[0])
                    x = m.atoms.at(buf, e)
                    code = ("TS304" if concurrent_writer(m, st.agents, st.copies, a, x)
                            else "TS306")
                    who, span = fpm.threads_at(ins.access, env, cls.threads, m.k, buf, e,
                                               False)
                    label = fpm.element_label(m.k.buffer(buf), e)
                    what = ("before the write that fills it is ordered before the read" if
                            code == "TS304" else "which nothing has written before")
                    hit = (code, f"thread {who[0] if who else '?'} of {cls.name} reads "
                           f"{label} {what}", {"threads": who, "element": label,
                                               "line": span.line if span else None})
            if cls.size > 1:
                t = fp.touches()
                o, rel, _ = self.wins[a]
                c = fpm.self_conflict(t) or fpm.conflict(fpm.merge(o, rel), t)
                if c is not None and hit is None:
                    label = fpm.element_label(m.k.buffer(c.buffer), c.element)
                    write = c.kind != fpm.RAW
                    who, span = fpm.threads_at(ins.access, env, cls.threads, m.k, c.buffer,
                                               c.element, write)
                    hit = (c.code, race_text(m, a, c, "race"),
                           {"threads": who, "earlier thread": c.earlier, "element": label,
                            "kind": c.kind, "line": span.line if span else None})
                self.wins[a][0] = fpm.merge(o, t)
        for buf, p in fp.bufs.items():
            self.written[buf] |= p.writes != fpm.NONE
        return hit
