"""What the lowering computes with: an integer value with the range of every value it can
take, the width that range needs, and the error a value beyond 64 bits raises.

`Scope` is what a statement sees (bound locals, the role, the thread's range), `VarSlot` a
`var`'s register.

Why separate: the integer operations (lower_int.py), the addresses (lower_addr.py), the
expressions (lower_expr.py, lir_terms.py) and the statements (lower.py) all pass IntVals
and pick widths by the same rule; none of them owns it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tilesafe.codegen import lir
from tilesafe.codegen.lir import Imm, Reg, Ty
from tilesafe.codegen.ranges import Interval
from tilesafe.frontend import ir
from tilesafe.frontend.diagnostics import Diagnostic, DiagnosticError
from tilesafe.frontend.span import NO_SPAN, Span

WIDE = "TS701"  # an integer that may not fit 64 bits
COORD = "TS702"  # a TMA coordinate that may not fit 32 bits
SMEM = "TS703"  # shared memory beyond the block's limit
NO_SIZES = "TS704"  # no size satisfies `where` and the launch contract


class CodegenError(DiagnosticError):
    def __init__(self, code: str, message: str, span: Span, hint: str | None = None) -> None:
        super().__init__([Diagnostic(code, message, span, hint=hint)])


@dataclass(frozen=True)
class IntVal:
    """An integer value and the range of every value it can take."""

    value: lir.Value
    rng: Interval


def ty_for(rng: Interval, span: Span) -> Ty:
    w = rng.width()
    if w is None:
        raise CodegenError(WIDE, f"an integer here may reach [{rng.lo}, {rng.hi}], beyond "
                           "64 bits", span, "bound the sizes in 'where'")
    return Ty.S32 if w == 32 else Ty.S64


def imm_val(v: int, span: Span | None = None) -> IntVal:
    rng = Interval.point(v)
    if rng.width() is None:
        raise CodegenError(WIDE, f"the integer constant {v} does not fit 64 bits",
                           span or NO_SPAN)
    return IntVal(Imm(v, Ty.S32 if rng.width() == 32 else Ty.S64), rng)


def value_ty(v: lir.Value) -> Ty:
    return v.ty


# ---- scopes ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Scope:
    """What a statement sees: bound locals (IntVal for ints, a register for floats, a
    mutable register for vars), the enclosing role and the thread's range."""

    values: dict[int, Any] = field(default_factory=dict)
    role: ir.Role | None = None
    thread: Interval = Interval(0, 0)

    def bind(self, uid: int, v: Any) -> Scope:
        return Scope({**self.values, uid: v}, self.role, self.thread)


@dataclass(frozen=True)
class VarSlot:
    """A `var`: its register and dtype (values are rounded / wrapped to it)."""

    reg: Reg
    dtype: ir.DType
