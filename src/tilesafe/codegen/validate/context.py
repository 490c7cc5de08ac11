"""What every obligation family of the translation validator reads: the parsed module, its
control-flow graph and symbolic execution, the IR's specification, the prover, the
renaming of PTX names to the IR's, and the reporter.

Why a context object: the families (interface.py, matching.py, loop_checks.py,
instance_checks.py, order_checks.py, wait_checks.py, smem_checks.py) each own one job and
share nothing else; what one family computes for another (the matching, which loops are
exact, which statements execute as in the IR) is passed on explicitly by obligations.py.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from tilesafe.codegen.validate import spec as specmod
from tilesafe.codegen.validate import terms as T
from tilesafe.codegen.validate.cfg import Cfg
from tilesafe.codegen.validate.ptx_parse import Module
from tilesafe.codegen.validate.reporting import Reporter
from tilesafe.codegen.validate.solve import Budget, Prover
from tilesafe.codegen.validate.spec import Spec, SpecEvent
from tilesafe.codegen.validate.symexec import Event, ExecResult
from tilesafe.codegen.validate.terms import Term
from tilesafe.frontend import ir


@dataclass
class Renaming:
    """PTX loop counters and loaded values renamed to the IR's: once loops and statements
    are matched, a question about a PTX term is asked in the specification's leaves."""

    sub: dict[int, Term] = field(default_factory=dict)
    memo: dict[int, Term] = field(default_factory=dict)

    def __call__(self, t: Term) -> Term:
        """A PTX term with its loop counters and loaded values renamed to the IR's."""
        return T.substitute([t], self.sub, self.memo)[0]

    def bind(self, loop_map: dict[int, ir.For], res: ExecResult,
             matched: Iterable[tuple[SpecEvent, list[Event]]]) -> None:
        """Rename each matched PTX loop's counter to its `for`'s and each matched load's
        value to the IR load's (same width); forget what was renamed before."""
        for lid, f in loop_map.items():
            info = res.loops.get(lid)
            if info is not None and info.counter is not None:
                self.sub[id(info.counter)] = specmod.counter(f)
        for spec, ptx in matched:
            for ev in ptx:
                if ev.result is not None and spec.data is not None \
                        and ev.result.w == spec.data.w:
                    self.sub[id(ev.result)] = spec.data
        self.memo = {}


@dataclass(frozen=True)
class Context:
    """The shared, read-only view of one validation run (the renaming fills as loops and
    statements are matched; the reporter's list grows)."""

    kernel: ir.Kernel
    mod: Module
    cfg: Cfg
    spec: Spec
    res: ExecResult
    prover: Prover
    budget: Budget
    p: Renaming
    rep: Reporter

    def counted(self, ev: Event) -> list[int]:
        """The counted loops (with an iteration counter) around an event, outermost first."""
        return [lid for lid in ev.loops
                if self.res.loops.get(lid) is not None and self.res.loops[lid].counter
                is not None]
