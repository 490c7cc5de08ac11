"""The registry contract: what an instruction kind (`Op`) and a family of them (`Family`)
tell the explorer.

Why a contract: the search, the partial-order reduction and the explanations are the same
for every instruction; only what an instruction does, what it touches and when it may run
differ. Each family module (mbarrier.py, bulk.py, named.py, block.py, ownership.py)
implements these hooks for its records (semantics/temporal/instrs.py) and lists them in one
`Family`; ops/__init__.py lists the families. docs/temporal.md ("Adding an instruction
family") walks through a new one.

An `Op` instance belongs to one Machine (one system: sizes, trip counts): it may keep
static tables of its own in `Machine.tables[family name]` (Family.prepare).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from tilesafe.frontend.span import Span
from tilesafe.semantics.temporal.events import TraceStep
from tilesafe.semantics.temporal.explore.operands import NO_OPERANDS
from tilesafe.semantics.temporal.instrs import Instr

if TYPE_CHECKING:
    from tilesafe.semantics.temporal.explore.machine import Machine
    from tilesafe.semantics.temporal.explore.mut import Mut
    from tilesafe.semantics.temporal.explore.state import State

Objects = tuple[Iterable[tuple], Iterable[tuple]]  # (reads, writes): objects.py keys


@dataclass
class Summary:
    """What a class's whole program does, gathered while its futures are computed
    (futures.py), for instructions whose objects are those of others: a fence covers
    the barriers the class initialised and the atoms it writes."""

    inits: set = field(default_factory=set)
    written: set = field(default_factory=set)


@dataclass
class Scan:
    """The prepass over every evaluation of every instruction (atoms.py): which classes
    wait on which barrier instance, and the regions the atoms must refine."""

    waiters: list[set[int]]
    regions: dict[str, set[int]]


class Op:
    """The meaning of one kind of instruction. Defaults: no operands, touches nothing,
    always enabled, never fused, a step of its class alone."""

    # Its objects in the future of a pc are the union over every environment it can run
    # in (futures.py); False: it has no operands, only `static_writes` / `late_writes`.
    enumerated: ClassVar[bool] = False
    # `local` may hold (the step may be fused into the previous move): checked first.
    fusable: ClassVar[bool] = False
    # A trace lists only its own reads (`touched`), not those of the local steps fused into
    # its move: a TMA store's reads are the copy engine's.
    trace_own_reads_only: ClassVar[bool] = False

    def __init__(self, m: Machine) -> None:
        self.m = m

    # -- static: operands and the objects a step may touch ----------------------------------

    def evaluate(self, a: int, ins: Instr, env: Mapping[str, Any]) -> Any:
        """The operands in one environment (operands.py); raise ExploreError on a
        violation that evaluation alone shows (a barrier index outside its array)."""
        return NO_OPERANDS

    def scans(self, ins: Instr) -> bool:
        """Does the prepass (atoms.py) need this instruction's evaluations?"""
        return False

    def scan(self, a: int, ins: Instr, env: Mapping[str, Any], found: Scan) -> None:
        """Add what one evaluation tells the prepass (waiters, regions of shared memory)."""

    def objects(self, a: int, ins: Instr, ev: Any) -> Objects:
        """(reads, writes) of one evaluated step, for the partial-order reduction."""
        return (), ()

    def future(self, a: int, ins: Instr, ev: Any) -> Objects:
        """What it may touch from now on (futures.py): its step, plus what it leaves
        running (the copy a TMA load issues completes later)."""
        return self.objects(a, ins, ev)

    def summarize(self, a: int, ins: Instr, ev: Any, writes: Iterable[tuple],
                  into: Summary) -> None:
        """Contribute to the class's Summary (see there)."""

    def static_writes(self, a: int, ins: Instr) -> Iterable[tuple]:
        """Objects it writes whatever its operands (the class's bulk groups, `sync`)."""
        return ()

    def late_writes(self, summary: Summary) -> Iterable[tuple]:
        """Objects it writes that the rest of the class's program decides (fences)."""
        return ()

    def step_objects(self, a: int, pc: int, ins: Instr, ev: Any) -> Objects:
        """(reads, writes) of its next step as the search sees it (cached per pc)."""
        return self.objects(a, ins, ev)

    # -- dynamic: enabling, joint steps, the step itself -------------------------------------

    def gates(self, ins: Instr) -> bool:
        """Does `gate` decide whether this instruction is enabled (else always)?"""
        return False

    def gate(self, state: State, a: int, ins: Instr, ev: Any, reads: frozenset,
             writes: frozenset) -> tuple[bool, frozenset, frozenset]:
        """Enabled in `state`? With the objects the step touches there (an access claims
        only what the class does not hold yet)."""
        return True, reads, writes

    def joint(self, ins: Instr) -> bool:
        """A step several classes take together: its apply advances them itself."""
        return False

    def converges(self, ins: Instr) -> tuple[int, ...]:
        """Classes that must move with this one (a blocked one pulls them into a
        persistent set)."""
        return ()

    def blocked_on(self, ins: Instr, reads: frozenset) -> tuple | None:
        """The object whose writers could unblock it (a wait's barrier), when blocked."""
        return None

    def local(self, s: Mut, a: int, ins: Instr, ev: Any, reads: frozenset,
              writes: frozenset) -> bool:
        """Touches nothing shared in this state: run it together with the class's previous
        step (Mut.fuse_local); it commutes with every other step."""
        return False

    def apply(self, s: Mut, a: int, ins: Instr, ev: Any, span: Span | None) -> None:
        raise NotImplementedError(type(ins).__name__)

    # -- explanation -------------------------------------------------------------------------

    def detail(self, a: int, ins: Instr, ev: Any, completes: int, observes: int,
               observed: bool) -> tuple[str, str]:
        """A trace line's text (explain.py) and the barrier instance it names ("" none).
        `completes`/`observes`: the absolute phase the step completed or its wait
        observed (-1 none); `observed`: a wait passed (maybe at once)."""
        return ins.op, ""

    def touched(self, ins: Instr, ev: Any) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """Atoms it reads and writes, for the happens-before check of a trace."""
        return (), ()

    def blocked(self, state: State, a: int, ins: Instr,
                phases: Mapping[int, int] | None) -> str | None:
        """Where the class stands in a stuck (or final) state, after its name; None: say
        nothing of it."""
        return f"at {ins.op} (line {line_of(ins)})"


def line_of(ins: Instr) -> int:
    return ins.stmt.span.line if ins.stmt is not None else 0


class InFlight:
    """Asynchronous work in `State.copies` (a record whose first field is its tag),
    finished by the copy engine at any later step."""

    def __init__(self, m: Machine) -> None:
        self.m = m

    def objects(self, c: tuple) -> frozenset:
        """The objects its completion writes."""
        return frozenset()

    def complete(self, s: Mut, c: tuple) -> None:
        raise NotImplementedError

    def issue_key(self, c: tuple) -> tuple:
        """The IssuedNote (kind, who) of the issue this completion finishes: traces number
        copies by issue."""
        raise NotImplementedError

    def trace_step(self, index: int, c: tuple, completes: int, cid: int) -> TraceStep:
        """Its completion as a trace step (`completes`: the phase it completed, or -1)."""
        raise NotImplementedError


Listener = Callable[..., None]


@dataclass(frozen=True)
class Family:
    """A family of instructions: its ops, the in-flight work it leaves, its static tables,
    and how it reacts to other families' events. Every hook but `ops` is optional.

    on_phase(s, inst, span)  a phase of barrier instance `inst` completed
    on_wait(s, a, inst, cluster)
                             class `a` passed a wait on `inst` (`cluster`: an acquire at
                             cluster scope)
    on_arrive(s, a, inst, acquire, deposit)
                             class `a` arrived on `inst` (`acquire`: its lanes converged
                             first, one per warp; `deposit`: it hands over what it holds,
                             0 no, 1 yes, 2 to waits at cluster scope: ops/cluster.py)
    on_sync(s)               every class met at `sync`
    prepare(m) -> tables     static tables, kept in m.tables[name]
    applies(m) -> bool       whether its listeners react in machine m at all (ownership:
                             only when permissions are tracked)
    at_exit(m, state)        every class finished: asynchronous work left behind, as
                             (code, message, span), or None
    stuck(m, state, live)    no step is enabled: (code, why) when this family explains
                             the deadlock, or None (explain.classify_deadlock)
    """

    name: str
    ops: Mapping[type, type[Op]]
    in_flight: Mapping[str, type[InFlight]] = field(default_factory=dict)
    prepare: Callable[[Machine], Any] | None = None
    applies: Callable[[Machine], bool] | None = None
    on_phase: Listener | None = None
    on_wait: Listener | None = None
    on_arrive: Listener | None = None
    on_sync: Listener | None = None
    at_exit: Callable[[Machine, State], tuple[str, str, Span | None] | None] | None = None
    stuck: Callable[[Machine, State, list[int]], tuple[str, str] | None] | None = None
