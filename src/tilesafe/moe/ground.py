"""Ground instances of quantified facts at the terms a query mentions (pattern matching).

Why: z3 instantiates a quantified fact by E-matching its patterns against the terms of the
query, and whether it finds an instance in time depends on its version and on the order in
which the process created terms (the same composition obligation proved with z3 5.4 and
"unknown" with 4.15). Matching the patterns here, syntactically, against the terms of the
goal and the ground facts -- a few rounds, since instances bring new terms -- and adding
the instances as ground facts makes the query nearly quantifier-free, so its answer no
longer rests on the solver's heuristics. Every instance is an instance of a fact already
given, so adding it changes nothing the query means; z3 still sees the quantified facts.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import z3

ROUNDS = 3
LIMIT = 4000  # instances per query: past it, the rest is left to z3's own matching


def instances(facts: Sequence[z3.BoolRef], goal: z3.BoolRef) -> list[z3.BoolRef]:
    """Instances of the universally quantified `facts` whose patterns match terms of the
    goal, of the other facts and of earlier instances."""
    quants = [f for f in facts if z3.is_quantifier(f) and f.is_forall()]
    pool: dict[int, z3.ExprRef] = {}
    for f in [goal, *[f for f in facts if not z3.is_quantifier(f)]]:
        _collect(f, pool)
    out: list[z3.BoolRef] = []
    made: set[tuple[int, tuple[int, ...]]] = set()
    for _ in range(ROUNDS):
        by_head: dict[int, list[z3.ExprRef]] = {}
        for t in pool.values():
            by_head.setdefault(t.decl().get_id(), []).append(t)
        fresh: list[z3.BoolRef] = []
        for qi, q in enumerate(quants):
            for pi in range(q.num_patterns()):
                pattern = q.pattern(pi)
                pieces = [pattern.arg(k) for k in range(pattern.num_args())]
                for binding in _match_all(pieces, by_head, {}):
                    if len(binding) != q.num_vars():
                        continue
                    key = (qi, tuple(binding[v].get_id() for v in range(q.num_vars())))
                    if key in made:
                        continue
                    made.add(key)
                    fresh.append(z3.substitute_vars(
                        q.body(), *[binding[v] for v in range(q.num_vars())]))
                    if len(out) + len(fresh) >= LIMIT:
                        return out + fresh
        if not fresh:
            break
        out += fresh
        for f in fresh:
            _collect(f, pool)
    return out


def _collect(e: z3.ExprRef, pool: dict[int, z3.ExprRef]) -> None:
    """Every application of an uninterpreted function with arguments in `e`."""
    todo = [e]
    seen: set[int] = set()
    while todo:
        t = todo.pop()
        if t.get_id() in seen or not z3.is_app(t):
            continue
        seen.add(t.get_id())
        if t.num_args() and t.decl().kind() == z3.Z3_OP_UNINTERPRETED:
            pool.setdefault(t.get_id(), t)
        todo.extend(t.children())


def _match_all(pieces: list[z3.ExprRef], by_head: dict[int, list[z3.ExprRef]],
               binding: dict[int, z3.ExprRef]) -> Iterator[dict[int, z3.ExprRef]]:
    if not pieces:
        yield binding
        return
    head, rest = pieces[0], pieces[1:]
    for ground in by_head.get(head.decl().get_id(), []):
        b = _match(head, ground, dict(binding))
        if b is not None:
            yield from _match_all(rest, by_head, b)


def _match(p: z3.ExprRef, g: z3.ExprRef, binding: dict[int, z3.ExprRef]
           ) -> dict[int, z3.ExprRef] | None:
    if z3.is_var(p):
        v = z3.get_var_index(p)
        if v in binding:
            return binding if binding[v].eq(g) else None
        binding[v] = g
        return binding
    if not z3.is_app(g) or p.decl().get_id() != g.decl().get_id() or (
            p.num_args() != g.num_args()):
        return None
    if p.num_args() == 0:
        return binding if p.eq(g) else None
    for a, b in zip(p.children(), g.children(), strict=True):
        if _match(a, b, binding) is None:
            return None
    return binding
