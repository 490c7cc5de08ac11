"""A block's mbarriers in the reference interpreter: their states, phases, who initialised
them and whether the init was fenced, and the one way to update a state (`bar_update`),
which reports every misuse with the barrier's name and the states of all of them.

Why a module of its own: the bookkeeping is the same for every instruction that touches a
barrier (arrive, expect_tx, a TMA load's complete_tx, a remote arrive from a peer CTA), and
apart from the scheduler that runs them (interp._Block, which mixes this in).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tilesafe.frontend import ir
from tilesafe.frontend.span import Span
from tilesafe.semantics.hw.mbarrier import MbarrierError, MbarrierState
from tilesafe.semantics.interpreter import interp_error as E
from tilesafe.semantics.interpreter.interp_agents import Thread
from tilesafe.semantics.interpreter.interp_error import InterpError


class BlockBarriers:
    """The barriers of one block; the block provides `kernel`, `run`, `note` and `err`."""

    kernel: ir.Kernel
    run: Any
    note: str | None
    bars: dict[str, list[MbarrierState]]
    phase: dict[str, list[int]]
    init_by: dict[str, list[int | None]]
    fenced: dict[str, list[bool]]
    err: Callable[..., InterpError]  # the block's: code, message, span, thread, detail

    def init_barriers(self) -> None:
        """Every barrier instance uninitialised, in phase 0."""
        self.bars, self.phase, self.init_by, self.fenced = {}, {}, {}, {}
        for b in self.kernel.barriers:
            self.bars[b.name] = [MbarrierState()] * b.instances
            self.phase[b.name] = [0] * b.instances
            self.init_by[b.name] = [None] * b.instances
            self.fenced[b.name] = [False] * b.instances

    def model_err(self, exc: MbarrierError, label: str, span: Span,
                  t: Thread | None) -> InterpError:
        return self.err(exc.code, f"{label}: {exc.message}", span, t,
                        barriers=self.barrier_states())

    def label(self, name: str, i: int) -> str:
        return name if self.kernel.barrier(name).length is None else f"{name}[{i}]"

    def bar_state_text(self, name: str, i: int) -> str:
        st = self.bars[name][i]
        if not st.initialized:
            return f"{self.label(name, i)}: uninitialised"
        return (f"{self.label(name, i)}: phase {self.phase[name][i]} (parity {st.parity}), "
                f"pending {st.pending}/{st.expected}, tx {st.tx}")

    def barrier_states(self) -> dict[str, str]:
        return {self.label(n, i): self.bar_state_text(n, i)
                for n, insts in self.bars.items() for i in range(len(insts))}

    def bar_update(self, name: str, i: int, op: Callable[[MbarrierState], MbarrierState],
                   span: Span, t: Thread | None) -> None:
        old = self.bars[name][i]
        if not old.initialized:
            raise self.err(E.UNINIT, f"mbarrier {self.label(name, i)} used before init", span,
                           t, barriers=self.barrier_states())
        try:
            new = op(old)
        except MbarrierError as exc:
            raise self.model_err(exc, self.label(name, i), span, t) from None
        if new.parity != old.parity:
            self.phase[name][i] += 1
        self.bars[name][i] = new
        if self.run.trace is not None:
            self.note = self.bar_state_text(name, i)
