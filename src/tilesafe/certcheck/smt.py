"""Answer an SMT-LIB 2 script with cvc5 (PyPI `cvc5`), independently of z3."""

from __future__ import annotations

import re


class SolverMissing(RuntimeError):
    """cvc5 is not installed (pip install cvc5)."""


def solve(text: str, timeout_s: float = 60.0) -> str:
    """cvc5's answer to the script's (last) check-sat: 'sat', 'unsat' or 'unknown'; an
    error in the script raises ValueError. When cvc5 gives up on division by constants,
    the script is asked again with them as fresh integers (certcheck/lia.py)."""
    answer = _solve(text, timeout_s)
    if answer == "unknown" and re.search(r"\((div|mod)\s", text):
        from tilesafe.certcheck.lia import linearise

        answer = _solve(linearise(text), timeout_s)
    return answer


def _solve(text: str, timeout_s: float) -> str:
    try:
        import cvc5
    except ModuleNotFoundError as err:
        raise SolverMissing("cvc5 is not installed (pip install cvc5)") from err
    # the expected answer is compared by the caller; cvc5 would turn a mismatch into an error
    text = re.sub(r"\(\s*set-info\s+:status\s+\w+\s*\)", "", text)
    if not re.search(r"\(\s*set-logic\b", text):
        text = "(set-logic ALL)\n" + text  # z3 writes none; ALL is what cvc5 assumes
    tm = cvc5.TermManager()
    solver = cvc5.Solver(tm)
    solver.setOption("tlimit-per", str(max(1, int(timeout_s * 1000))))
    symbols = cvc5.SymbolManager(tm)
    parser = cvc5.InputParser(solver, symbols)
    parser.setStringInput(cvc5.InputLanguage.SMT_LIB_2_6, text, "certificate")
    answer = "unknown"
    try:
        while True:
            cmd = parser.nextCommand()
            if cmd.isNull():
                break
            out = cmd.invoke(solver, symbols).strip()
            if out in ("sat", "unsat", "unknown"):
                answer = out
            elif out.startswith("(error"):
                raise ValueError(out)
    except RuntimeError as err:  # cvc5 reports parse errors as RuntimeError
        raise ValueError(str(err)) from None
    return answer


def declared_status(text: str) -> str | None:
    """The `(set-info :status ...)` a script declares (what its writer says it answers)."""
    m = re.search(r"\(\s*set-info\s+:status\s+(sat|unsat|unknown)\s*\)", text)
    return m.group(1) if m else None
