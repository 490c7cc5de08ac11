"""What a search reports: violations (ExploreError while stepping, Finding once reached).

Why separate: the family modules raise violations, the search turns them into findings,
and the checkers and the witness code read findings; none of them needs the others.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from tilesafe.frontend.span import Span

# mbarrier model codes without a barrier-checker code of their own -> the checker's codes
# (the model already raises TS401..TS404 itself).
MODEL_CODES = {"TS411": "TS403", "TS415": "TS408", "TS416": "TS407"}


class ExploreError(Exception):
    """A violation by one step: hard (the run cannot go on: undefined behaviour) or soft (a
    protocol slip the run survives; `soft`), with details for the report."""

    def __init__(self, code: str, message: str, span: Span | None, soft: bool = False,
                 **detail: Any) -> None:
        super().__init__(message)
        self.code, self.message, self.span, self.soft, self.detail = (code, message, span,
                                                                       soft, detail)


class CannotMove(Exception):
    """A replayed move names an agent that cannot move in that state: the path does not
    belong to this system (e.g. a far-system run tried at a smaller trip count). Not a
    property of the kernel, so it carries no TS code."""


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
