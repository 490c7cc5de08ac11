"""Happens-before of one explored run: the evidence a proved temporal obligation carries
(how many events and edges one complete run has, and that every shared read is ordered after
the write it reads).

Why a graph of its own and not networkx: reachability over a few hundred steps is all the
checkers ask of a graph, and importing networkx cost ~0.2 s of every cold `tilesafe verify`
(issue 19).
"""

from __future__ import annotations

from tilesafe.semantics.temporal.events import TraceStep


class StepGraph:
    """A directed graph over the steps of one run (step indices), with reachability."""

    def __init__(self) -> None:
        self.succ: dict[int, set[int]] = {}
        self.attrs: dict[int, dict[str, object]] = {}
        self._edges = 0

    def add_node(self, n: int, **attrs: object) -> None:
        self.succ.setdefault(n, set())
        self.attrs.setdefault(n, {}).update(attrs)

    def add_edge(self, a: int, b: int, **_why: object) -> None:
        self.add_node(a)
        self.add_node(b)
        if b not in self.succ[a]:
            self.succ[a].add(b)
            self._edges += 1

    def number_of_nodes(self) -> int:
        return len(self.succ)

    def number_of_edges(self) -> int:
        return self._edges

    def has_path(self, a: int, b: int) -> bool:
        """True when b is reachable from a (every node reaches itself)."""
        seen, todo = {a}, [a]
        while todo:
            n = todo.pop()
            if n == b:
                return True
            for m in self.succ.get(n, ()):
                if m not in seen:
                    seen.add(m)
                    todo.append(m)
        return False


def happens_before(steps: tuple[TraceStep, ...]) -> StepGraph:
    """Happens-before graph of one run: program order per agent, issue -> completion for
    every copy, phase completion -> the waits that observed it, and `sync` (a joint step,
    so program order through it already orders everything before it)."""
    g = StepGraph()
    last: dict[str, int] = {}
    completed: dict[tuple[str, int], int] = {}
    contributed: dict[tuple[str, int], list[int]] = {}
    issued: dict[int, int] = {}
    phase_now: dict[str, int] = {}
    for st in steps:
        g.add_node(st.index, agents=st.agents, kind=st.kind, line=st.line, detail=st.detail)
        for a in st.agents:
            if a in last:
                g.add_edge(last[a], st.index, why="program order")
            last[a] = st.index
        if st.kind in ("tma_load", "tma_store") and st.copy_id >= 0:
            issued[st.copy_id] = st.index
        if st.kind.startswith("copy_") and st.copy_id in issued:
            g.add_edge(issued[st.copy_id], st.index, why="issue")
        if st.inst and st.kind in ("arrive", "expect_tx", "copy_load"):
            n = phase_now.get(st.inst, 0)
            contributed.setdefault((st.inst, n), []).append(st.index)
            if st.completes >= 0:
                completed[(st.inst, st.completes)] = st.index
                for src in contributed.get((st.inst, st.completes), []):
                    if src != st.index:
                        g.add_edge(src, st.index, why="phase")
                phase_now[st.inst] = st.completes + 1
        if st.kind == "wait" and st.observes >= 0:
            src = completed.get((st.inst, st.observes))
            if src is not None:
                g.add_edge(src, st.index, why=f"{st.inst} phase {st.observes}")
    return g


def ordered(g: StepGraph, a: int, b: int) -> bool:
    """True when one of two steps happens before the other in the run's graph."""
    return g.has_path(a, b) or g.has_path(b, a)


def reads_after_writes(steps: tuple[TraceStep, ...], g: StepGraph) -> tuple[int, list[str]]:
    """Every read of a region must happen after the last write of it before it in the run
    (else the run read racy data). Returns (ordered pairs, descriptions of unordered ones)."""
    last_write: dict[str, TraceStep] = {}
    good, bad = 0, []
    for st in steps:
        for region in st.reads:
            w = last_write.get(region)
            if w is None:
                continue
            if g.has_path(w.index, st.index):
                good += 1
            else:
                bad.append(f"step {st.index + 1} reads {region} written at step {w.index + 1} "
                           "with no happens-before path")
        for region in st.writes:
            last_write[region] = st
    return good, bad
