"""Integer division and remainder by constants as fresh integers, on SMT-LIB text.

Why: z3 writes its periodicity queries with `div`/`mod` by literals, nested (`(mod (div x
3) 2)`), where cvc5's arithmetic may answer `unknown`. Replacing each `(div t k)` by a
fresh q with `k*q <= t <= k*q + k - 1` and `(mod t k)` by `t - k*q` gives a pure linear
script with the same answer. This is the checker's own rewriting (a small s-expression
reader), not the prover's.
"""

from __future__ import annotations

import re
from itertools import count

Sexp = str | list["Sexp"]

_TOKEN = re.compile(r'\s*(\(|\)|\|[^|]*\||"(?:[^"]|"")*"|;[^\n]*|[^\s()]+)')


def parse(text: str) -> list[Sexp]:
    stack: list[list[Sexp]] = [[]]
    for m in _TOKEN.finditer(text):
        tok = m.group(1)
        if tok.startswith(";"):
            continue
        if tok == "(":
            stack.append([])
        elif tok == ")":
            if len(stack) == 1:
                raise ValueError("unbalanced ')'")
            done = stack.pop()
            stack[-1].append(done)
        else:
            stack[-1].append(tok)
    if len(stack) != 1:
        raise ValueError("unbalanced '('")
    return stack[0]


def show(e: Sexp) -> str:
    return e if isinstance(e, str) else "(" + " ".join(show(x) for x in e) + ")"


def _subst(e: Sexp, env: dict[str, Sexp]) -> Sexp:
    """Expand `let`s (their bodies see the bindings; bindings are parallel)."""
    if isinstance(e, str):
        return env.get(e, e)
    if e and e[0] == "let" and len(e) == 3 and isinstance(e[1], list):
        inner = dict(env)
        for b in e[1]:
            if isinstance(b, list) and len(b) == 2 and isinstance(b[0], str):
                inner[b[0]] = _subst(b[1], env)
        return _subst(e[2], inner)
    return [_subst(x, env) for x in e]


def _literal(e: Sexp) -> int | None:
    return int(e) if isinstance(e, str) and e.isdigit() else None


def linearise(text: str) -> str:
    """The script with lets expanded and div/mod by positive literals replaced."""
    commands = parse(text)
    fresh = count()
    decls: list[str] = []
    side: list[str] = []
    memo: dict[str, str] = {}

    def walk(e: Sexp) -> Sexp:
        if isinstance(e, str):
            return e
        e = [walk(x) for x in e]
        if len(e) == 3 and e[0] in ("div", "mod"):
            k = _literal(e[2])
            if k is not None and k > 0:
                t = show(e[1])
                q = memo.get(f"{t}/{k}")
                if q is None:
                    q = memo[f"{t}/{k}"] = f"lin_q{next(fresh)}"
                    decls.append(f"(declare-fun {q} () Int)")
                    side.append(f"(assert (and (<= (* {k} {q}) {t}) "
                                f"(<= {t} (+ (* {k} {q}) {k - 1}))))")
                return q if e[0] == "div" else ["-", e[1], ["*", str(k), q]]
        return e

    head: list[str] = []
    asserts: list[str] = []
    for c in commands:
        if isinstance(c, list) and c and c[0] == "assert" and len(c) == 2:
            asserts.append(show(["assert", walk(_subst(c[1], {}))]))
        elif isinstance(c, list) and c and c[0] in ("check-sat", "exit", "set-logic"):
            continue
        else:
            head.append(show(c))
    return "\n".join(["(set-logic ALL)", *head, *decls, *asserts, *side, "(check-sat)"]) + "\n"
