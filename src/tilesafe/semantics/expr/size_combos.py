"""Size assignments to try, with the sizes a `where` equation fixes computed, not guessed.

Why: checkers that need concrete launches (the refuting search of the value checker, the
bank checker's representative sizes) walk products of candidate values per size. A kernel
whose sizes are tied by equations (`TK == 2 * T`, `P == 64 * NB`: the MoE executors) has
almost no such product satisfying `where` -- the equations hold by accident only -- and the
product grows as candidates^sizes (23^7 assignments took minutes to walk). Solving each
equation `S == term` for S (a size not in the term, the term over sizes and constants)
leaves a product over the free sizes only, and every assignment it gives satisfies the
equations; the other conjuncts of `where` prune the product as soon as their sizes are set.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from tilesafe.frontend import ir, walk
from tilesafe.semantics.expr import evaluate


def derived_sizes(kernel: ir.Kernel) -> dict[str, ir.Expr]:
    """Sizes that a `where` equation fixes from the others: name -> the term, in an order in
    which each term's sizes are free or come earlier (an equation that would close a cycle
    is not used)."""
    eqs: dict[str, ir.Expr] = {}
    for w in _conjuncts(kernel.where):
        if not (isinstance(w, ir.BinOp) and w.op == "=="):
            continue
        for lhs, rhs in ((w.lhs, w.rhs), (w.rhs, w.lhs)):
            if (isinstance(lhs, ir.SizeVar) and lhs.name not in eqs
                    and lhs.name not in _size_names(rhs) and _over_sizes(rhs)):
                eqs[lhs.name] = rhs
                break
    order: dict[str, ir.Expr] = {}
    while True:  # keep an equation once every size it uses is free or already kept
        ready = [n for n, e in eqs.items() if n not in order
                 and all(m not in eqs or m in order for m in _size_names(e))]
        if not ready:
            return order
        for n in ready:
            order[n] = eqs[n]


def combos(kernel: ir.Kernel, candidates: Sequence[int]) -> Iterator[dict[str, int]]:
    """Every combination of `candidates` for the free sizes that satisfies `where`, in
    itertools.product order, the derived sizes computed. A `where` conjunct is tested as
    soon as its sizes have values, so a branch of the product it refutes is never walked
    (a kernel with four free sizes has 23^4 candidates, most of them cut at the first or
    second size)."""
    derived = derived_sizes(kernel)
    free = [n for n in kernel.sizes if n not in derived]
    checks: list[list[ir.Expr]] = [[] for _ in range(len(free) + 1)]
    known: set[str] = set()
    ready: list[list[str]] = [[] for _ in range(len(free) + 1)]
    levels: dict[str, int] = {}
    for level in range(len(free) + 1):
        if level:
            known.add(free[level - 1])
        for n, e in derived.items():  # derived sizes computable at this level
            if n not in levels and _size_names(e) <= known:
                levels[n] = level
                ready[level].append(n)
                known.add(n)
    for w in _conjuncts(kernel.where):
        names = _size_names(w)
        level = max((levels.get(n, free.index(n) + 1 if n in free else len(free))
                     for n in names), default=0)
        checks[level].append(w)

    def holds(level: int, sizes: dict[str, int]) -> bool:
        try:
            for n in ready[level]:
                sizes[n] = evaluate.eval_sizes(derived[n], sizes)
            return all(bool(evaluate.eval_sizes(w, sizes)) for w in checks[level])
        except (evaluate.EvalError, evaluate.NoValue, KeyError, ZeroDivisionError):
            return False

    def walk(level: int, sizes: dict[str, int]) -> Iterator[dict[str, int]]:
        if not holds(level, sizes):
            return
        if level == len(free):
            yield {n: sizes[n] for n in kernel.sizes}
            return
        for v in candidates:
            yield from walk(level + 1, {**sizes, free[level]: v})

    yield from walk(0, {})


def _conjuncts(exprs: Sequence[ir.Expr]) -> list[ir.Expr]:
    out: list[ir.Expr] = []
    for e in exprs:
        if isinstance(e, ir.BinOp) and e.op == "&&":
            out += _conjuncts((e.lhs, e.rhs))
        else:
            out.append(e)
    return out


def _size_names(e: ir.Expr) -> set[str]:
    return {x.name for x in walk.subexprs(e) if isinstance(x, ir.SizeVar)}


def _over_sizes(e: ir.Expr) -> bool:
    """An integer term of sizes and constants only."""
    return e.type is ir.ScalarType.INT and all(
        isinstance(x, (ir.SizeVar, ir.IntConst, ir.BinOp, ir.UnOp, ir.Call))
        for x in walk.subexprs(e))
