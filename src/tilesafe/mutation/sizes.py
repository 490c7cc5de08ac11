"""Which launch sizes a surviving mutant is run at.

Why care: a mutant that survives verification claims to be correct for *every* size its
`where` allows, so the runs that try to show otherwise should use sizes that exercise the
kernel's structure (several blocks, a ring that wraps, ragged edges). For the kernels of
corpus/good/ the tests already chose such sizes (tests/corpus_refs.py: CASES); those are
reused. For any other kernel, small sizes are searched that satisfy `where` for the original
and the mutant alike. A mutant that drops or loosens a `where` constraint is also run at a
few sizes only it allows: there it cannot be compared, but it must not fail.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path

from tilesafe.frontend import ir
from tilesafe.semantics.expr import evaluate, size_combos

Sizes = dict[str, int]

# Small values with the shapes bugs like: 1, around powers of two, multiples of 8/32/64.
CANDIDATE_VALUES = (1, 2, 3, 7, 8, 16, 24, 31, 32, 33, 64, 65, 96, 100, 128, 130, 192, 256,
                    320, 384, 512, 768)
MAX_ELEMENTS = 1 << 17  # all tensors together: keeps one interpreter run around a second


@lru_cache(maxsize=64)
def _corpus_cases(refs_path: str) -> dict[str, tuple[Sizes, ...]]:
    spec = importlib.util.spec_from_file_location("_tilesafe_corpus_refs", refs_path)
    if spec is None or spec.loader is None:
        return {}
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while being built
    try:
        spec.loader.exec_module(module)
    except Exception:  # noqa: BLE001 - a broken test helper only loses the size hint
        return {}
    finally:
        sys.modules.pop(spec.name, None)
    cases = getattr(module, "CASES", {})
    return {name: tuple(dict(s) for s in case.sizes) for name, case in cases.items()}


def corpus_sizes(path: str | Path) -> tuple[Sizes, ...]:
    """The sizes tests/corpus_refs.py tests a corpus/good/ kernel at (quick first), or ()."""
    p = Path(path).resolve()
    if p.parent.name != "good" or p.parent.parent.name != "corpus":
        return ()
    refs = p.parent.parent.parent / "tests" / "corpus_refs.py"
    if not refs.is_file():
        return ()
    return _corpus_cases(str(refs)).get(p.stem, ())


def _value(e: ir.Expr, sizes: Mapping[str, int]) -> object:
    return evaluate.eval_sizes(e, sizes)


def allows(kernel: ir.Kernel, sizes: Mapping[str, int]) -> bool:
    """Do the sizes name exactly the kernel's size parameters and satisfy its `where`?"""
    if set(sizes) != set(kernel.sizes):
        return False
    try:
        return all(bool(_value(w, sizes)) for w in kernel.where)
    except (evaluate.EvalError, evaluate.NoValue, KeyError, ZeroDivisionError):
        return False


def launchable(kernel: ir.Kernel, sizes: Mapping[str, int]) -> bool:
    """Every grid dimension and tensor extent positive at these sizes."""
    try:
        dims = [_value(g, sizes) for g in kernel.grid]
        dims += [_value(d, sizes) for t in kernel.params for d in t.shape]
    except (evaluate.EvalError, evaluate.NoValue, KeyError, ZeroDivisionError):
        return False
    return all(isinstance(d, int) and d >= 1 for d in dims)


def cost(kernel: ir.Kernel, sizes: Mapping[str, int]) -> int:
    """Elements of all tensors at these sizes (what a run's length roughly follows)."""
    total = 0
    for t in kernel.params:
        n = 1
        for d in t.shape:
            n *= int(_value(d, sizes))  # type: ignore[call-overload]
        total += n
    return total


def threads(kernel: ir.Kernel, sizes: Mapping[str, int]) -> int:
    """Threads of a launch at these sizes (0 when the grid cannot be evaluated)."""
    n = kernel.block
    try:
        for g in kernel.grid:
            n *= max(0, int(_value(g, sizes)))  # type: ignore[call-overload]
    except (evaluate.EvalError, evaluate.NoValue, KeyError, ZeroDivisionError):
        return 0
    return n


def _search(ok: object, kernel: ir.Kernel) -> list[Sizes]:
    """All candidate size tuples `ok` accepts, cheapest first, under MAX_ELEMENTS. The
    candidates are size_combos': sizes a `where` equation fixes are computed, not walked
    (the MoE kernels' seven sizes, tied by TK == 2 * T and P == 64 * NB, were 23^7 tuples
    of which almost none satisfied `where`: minutes per kernel)."""
    found: list[tuple[int, Sizes]] = []
    for sizes in size_combos.combos(kernel, CANDIDATE_VALUES):
        if not ok(sizes):  # type: ignore[operator]
            continue
        c = cost(kernel, sizes)
        if c <= MAX_ELEMENTS:
            found.append((c, sizes))
    found.sort(key=lambda cs: (cs[0], sorted(cs[1].items())))
    return [s for _, s in found]


def _spread(cands: list[Sizes], k: int) -> list[Sizes]:
    """Up to k of the (cost-sorted) candidates: the cheapest, then quantiles of the cheaper
    half, so the picks differ in shape and in number of blocks."""
    if len(cands) <= k:
        return list(cands)
    half = cands[: max(k, len(cands) // 2)]
    picks: list[Sizes] = []
    for i in range(k):
        s = half[(i * (len(half) - 1)) // max(1, k - 1)]
        if s not in picks:
            picks.append(s)
    return picks


def choose(path: str | Path, original: ir.Kernel, mutant: ir.Kernel, k: int
           ) -> tuple[list[Sizes], list[Sizes]]:
    """(sizes both kernels allow, up to k; sizes only the mutant allows, up to 2)."""
    listed = [s for s in corpus_sizes(path)
              if allows(original, s) and allows(mutant, s) and launchable(original, s)]
    both = _diverse(original, listed, k)
    if len(both) < k:
        searched = _search(lambda s: allows(original, s) and allows(mutant, s)
                           and launchable(original, s), original)
        for s in _spread(searched, k):
            if len(both) >= k:
                break
            if s not in both:
                both.append(s)
    only: list[Sizes] = []
    if _where_text(original) != _where_text(mutant) and original.sizes == mutant.sizes:
        extra = _search(lambda s: allows(mutant, s) and not allows(original, s)
                        and launchable(mutant, s), mutant)
        only = extra[:2]
    return both, only


def _diverse(kernel: ir.Kernel, listed: list[Sizes], k: int) -> list[Sizes]:
    """The first size (the tests' quick one, chosen to exercise the kernel's pattern), then
    greedily the size bringing the most values not seen yet per size parameter and the most
    blocks (a bug in a block offset needs two blocks to show), less one for a size over
    twice the first's cost, the cheaper on a tie."""
    if not listed:
        return []
    chosen = [listed[0]]
    rest = list(listed[1:])
    while rest and len(chosen) < k:
        def gain(s: Sizes) -> tuple[int, int]:
            new = sum(all(s[n] != c[n] for c in chosen) for n in s)
            more_blocks = int(threads(kernel, s) > max(threads(kernel, c) for c in chosen))
            dear = int(cost(kernel, s) > 2 * cost(kernel, listed[0]))
            return (new + more_blocks - dear, -cost(kernel, s))
        best = max(rest, key=gain)
        chosen.append(best)
        rest.remove(best)
    return chosen


def _where_text(kernel: ir.Kernel) -> str:
    from tilesafe.frontend.fmt import without_spans

    return repr(without_spans(kernel.where))
