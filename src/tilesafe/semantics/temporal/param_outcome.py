"""What one argument for every trip count hands the checkers: the explorations it ran
(`Config`) and everything they found or proved (`Outcome`).

Why its own module: the argument for one parametric loop (parametric.py), the nested one
(nest_argument.py), the reductions (reduce.py) and the witnesses (witness.py) all produce or
read these records; none of them should need the others' machinery to do so.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tilesafe.semantics.temporal.explore import Finding, Machine


@dataclass
class Config:
    sizes: dict[str, int]
    trip: int | None  # the parameter T, when there is one
    kind: str  # "full", "tail", "level"


@dataclass
class Outcome:
    """Everything the checkers report: verdict material, findings, and the evidence."""

    complete: bool  # every allowed size is covered (no state limit, argument applies)
    reason: str  # why not, when not complete
    findings: list[tuple[Finding, Config, Machine]] = field(default_factory=list)
    states: int = 0
    transitions: int = 0
    explorations: list[dict[str, Any]] = field(default_factory=list)
    argument: dict[str, Any] = field(default_factory=dict)
    queries: list[str] = field(default_factory=list)  # SMT-LIB of the z3 proofs
    seconds: float = 0.0
    finals: list[tuple[tuple, Machine, tuple, tuple]] = field(default_factory=list)
    # ownership: "class @ line N (op)" -> the distinct shares it holds there
    points: dict[str, set[str]] = field(default_factory=dict)
    budget: bool = False  # incomplete because the verification budget is spent (TS491)
    # code -> why: candidate violations that exact footprints did not confirm (TS492)
    unsettled: dict[str, str] = field(default_factory=dict)
