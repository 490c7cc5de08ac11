"""The z3 side of the argument for every trip count: IR terms as z3 terms over copies of the
sizes, the solver calls whose answers count as proofs, and the small term utilities the
conditions are built from (trip-count terms, structural shapes, period candidates).

Why its own module: the conditions of the argument (param_terms.py), the size searches
(param_sizes.py), the stage projection (ring.py), the nested argument (nest_terms.py) and the
bank checker all ask z3 the same way -- two copies of the sizes sharing the thread and loop
variables, `unsat` as the only proof, every query kept as SMT-LIB for the certificates.
"""

from __future__ import annotations

from typing import Any

import z3

from tilesafe.frontend import ir
from tilesafe.frontend.fold import NoForm, fold
from tilesafe.semantics.expr.z3_terms import Z3Terms
from tilesafe.semantics.temporal.events import Model, free_vars


class Timeout(Exception):
    pass


class Enc:
    """IR terms as z3 terms, over one copy of the sizes (suffix) and shared other vars."""

    def __init__(self, kernel: ir.Kernel, model: Model, suffix: str, shared: dict) -> None:
        self.k = kernel
        self.lets = model.lets.table
        self.sizes = {n: z3.Int(n + suffix) for n in kernel.sizes}
        self.shared = shared  # "thread", "loop:<uid>", "block.x" -> z3 Int (shared copies)
        self.loops: dict[int, Any] = {}  # overrides of loop variables for this copy

    def var(self, key: str) -> Any:
        if key not in self.shared:
            self.shared[key] = z3.Int(key)
        return self.shared[key]

    def term(self, e: ir.Expr) -> Any:
        """`e` as a z3 term over this copy's leaves, through the one z3 algebra
        (semantics/expr/z3_terms.py: the language's floor division and modulo)."""
        try:
            return fold(e, Z3Terms(self))
        except NoForm as err:
            raise ValueError(str(err)) from None

    def where(self) -> list:
        return [self.term(w) for w in self.k.where]


def solver(timeout_ms: int) -> z3.Solver:
    s = z3.Solver()
    s.set("timeout", timeout_ms)
    return s


def smt2_with_status(s: z3.Solver, res: z3.CheckSatResult) -> str:
    """The solver's SMT-LIB 2 text with the answer z3 gave as its `:status`, so a certificate
    checker (another solver) knows what to confirm."""
    status = "sat" if res == z3.sat else "unsat" if res == z3.unsat else "unknown"
    return s.to_smt2().replace("(set-info :status unknown)", f"(set-info :status {status})", 1)


def check(s: z3.Solver, queries: list[str]) -> z3.CheckSatResult:
    res = s.check()
    queries.append(smt2_with_status(s, res))
    if res == z3.unknown:
        raise Timeout(s.reason_unknown())
    return res


PORTFOLIO = (None, "QF_NIA", "LIA")


def prove_unsat(assertions: list, timeout_ms: int, queries: list[str]) -> bool:
    """True when the assertions are unsatisfiable. Quantifier-free div/mod arithmetic can
    send one z3 strategy into a long search that another finishes at once, so a few are
    tried with a share of the budget; any 'unsat' is a proof, any 'sat' a refutation."""
    share = max(200, timeout_ms // len(PORTFOLIO))
    for logic in PORTFOLIO:
        s = z3.SolverFor(logic) if logic else z3.Solver()
        s.set("timeout", share)
        s.add(*assertions)
        res = s.check()
        if res == z3.unsat:
            queries.append(smt2_with_status(s, res))
            return True
        if res == z3.sat:
            return False
    raise Timeout("periodicity query")


def trip_expr(loop: ir.For) -> ir.Expr:
    """ceil((hi - lo) / step) as an IR term (without the max with 0)."""
    sp = loop.span
    diff = ir.BinOp(sp, ir.ScalarType.INT, "-", loop.hi, loop.lo)
    if loop.step == 1:
        return diff
    num = ir.BinOp(sp, ir.ScalarType.INT, "+", diff, ir.IntConst(sp, ir.ScalarType.INT,
                                                                   loop.step - 1))
    return ir.BinOp(sp, ir.ScalarType.INT, "/", num, ir.IntConst(sp, ir.ScalarType.INT,
                                                                  loop.step))


def shape(e: Any) -> Any:
    """A term without its spans (structural equality)."""
    if isinstance(e, ir.Expr):
        return (type(e).__name__,) + tuple(shape(getattr(e, f)) for f in e.__dataclass_fields__
                                           if f not in ("span", "type"))
    if isinstance(e, tuple):
        return tuple(shape(x) for x in e)
    return e


def divisors(n: int) -> list[int]:
    return sorted({d for i in range(1, int(n ** 0.5) + 1) if n % i == 0 for d in (i, n // i)})


def divisor_product(e: ir.Expr, uid: int | None, lets: Any) -> int:
    """Product of the divisors of / and % nodes whose operand depends on the loop variable
    (or, with uid None, on the sizes): a period candidate."""
    prod = 1
    stack = [e]
    while stack:
        x = stack.pop()
        if isinstance(x, ir.LocalRef) and not x.mutable and x.uid in lets.table:
            stack.append(lets.table[x.uid])
        elif isinstance(x, ir.BinOp):
            if x.op in ("/", "%") and isinstance(x.rhs, ir.IntConst):
                fv = free_vars(x.lhs, lets)
                hit = (f"loop:{uid}" in fv) if uid is not None else any(
                    v.startswith("size:") for v in fv)
                if hit:
                    prod *= x.rhs.value
            stack.extend((x.lhs, x.rhs))
        elif isinstance(x, ir.UnOp):
            stack.append(x.operand)
        elif isinstance(x, ir.Call):
            stack.extend(x.args)
    return max(1, prod)


def show(e: ir.Expr) -> str:
    if isinstance(e, ir.IntConst):
        return str(e.value)
    if isinstance(e, ir.SizeVar):
        return e.name
    if isinstance(e, ir.LoopVar):
        return e.name
    if isinstance(e, ir.LocalRef):
        return e.name
    if isinstance(e, ir.BinOp):
        return f"({show(e.lhs)} {e.op} {show(e.rhs)})"
    return "..."
