"""The one record every checker returns.

Checkers never print; they return Obligations, and proofs/ and the CLI turn them into
reports. A verdict is only "proved" when a decision procedure said so; anything the
procedure could not settle (timeout, unsupported form) is "unknown" with a TS code.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum

from tilesafe.frontend.span import Span


class Verdict(str, Enum):
    PROVED = "proved"
    REFUTED = "refuted"
    UNKNOWN = "unknown"


class Severity(str, Enum):
    ERROR = "error"
    WARNING = "warning"
    NOTE = "note"


@dataclass(frozen=True)
class Obligation:
    """One property of one kernel, with the evidence behind its verdict.

    `counterexample` holds concrete values (sizes, block, thread, iteration, index, offsets)
    when refuted; `evidence` holds what a person or another solver can re-check (ISL sets
    as strings, SMT-LIB text, traces).
    """

    checker: str
    name: str
    verdict: Verdict
    method: str
    span: Span | None = None
    code: str | None = None
    message: str = ""
    severity: Severity = Severity.ERROR
    seconds: float = 0.0
    counterexample: Mapping[str, object] | None = None
    evidence: Mapping[str, object] = field(default_factory=dict)

    @property
    def failed(self) -> bool:
        """True when this obligation should make `verify` exit non-zero."""
        return self.verdict is not Verdict.PROVED and self.severity is Severity.ERROR
