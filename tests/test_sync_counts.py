"""Counting synchronisation events (semantics/temporal/sync_counts.py) against brute force, and the
named-barrier happens-before it gives the value proof: the hand-off kernels prove, and every
edit that breaks the ordering a read relies on is not proved (a refutation or an unknown,
never a "proved")."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tilesafe.frontend import ir
from tilesafe.frontend.load import compile_source
from tilesafe.semantics.expr import evaluate
from tilesafe.semantics.temporal import sync_counts
from tilesafe.semantics.value import valueflow
from tilesafe.semantics.value.value_exec import Unsupported

ROOT = Path(__file__).resolve().parent.parent
INT, BOOL = ir.ScalarType.INT, ir.ScalarType.BOOL
K = ir.LoopVar(None, INT, "k", 7)
BAR = ir.NamedBar(None, False, 3, 64)


def c(v: int) -> ir.Expr:
    return ir.IntConst(None, INT, v)


def value(e: ir.Expr, k: int) -> int:
    def leaf(x):
        if isinstance(x, ir.LoopVar):
            return lambda env: env
        raise evaluate.NoValue(x)
    return int(evaluate.compile_expr(e, leaf)(k))


CMP = st.sampled_from(["<", "<=", ">", ">="])


@settings(max_examples=200, deadline=None)
@given(lo=st.integers(-3, 5), hi=st.integers(-3, 12), fixed=st.integers(0, 2),
       conds=st.lists(st.tuples(CMP, st.integers(-2, 10), st.booleans()), min_size=1,
                      max_size=2),
       guarded=st.integers(1, 2))
def test_counts_under_interval_guards_match_brute_force(lo, hi, fixed, conds, guarded):
    """Events of `for k in lo .. hi { [bar x fixed]; if <conds on k> { bar x guarded } }`
    before each iteration and after the loop, in closed form, equal the counted ones."""
    cond = None
    for op, bound, flip in conds:
        one = (ir.BinOp(None, BOOL, op, K, c(bound)) if not flip else
               ir.BinOp(None, BOOL, op, c(bound), K))
        cond = one if cond is None else ir.BinOp(None, BOOL, "&&", cond, one)
    body = (BAR,) * fixed + (ir.If(None, cond, (BAR,) * guarded, ()),)
    loop = ir.For(None, K, c(lo), c(hi), 1, body)
    per = sync_counts.per_iteration(loop, 3)
    assert per is not None

    def holds(k: int) -> bool:
        ok = True
        for op, bound, flip in conds:
            a, b = (k, bound) if not flip else (bound, k)
            ok = ok and {"<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b}[op]
        return ok

    seen = 0
    for k in range(lo, hi):
        assert value(sync_counts.entering_iteration(c(5), loop, per), k) == 5 + seen
        after_if = sync_counts.after_branch(c(0), body[-1], 3, (7,))
        assert after_if is not None
        assert value(after_if, k) == (guarded if holds(k) else 0)
        seen += fixed + (guarded if holds(k) else 0)
    assert value(sync_counts.after_loop(c(5), loop, per), 0) == 5 + seen


def test_counts_give_up_where_not_an_interval():
    odd = ir.BinOp(None, BOOL, "==", ir.BinOp(None, INT, "%", K, c(2)), c(1))
    loop = ir.For(None, K, c(0), c(8), 1, (ir.If(None, odd, (BAR,), ()),))
    assert sync_counts.per_iteration(loop, 3) is None
    assert sync_counts.after_branch(c(0), loop.body[0], 3, (7,)) is None
    stepped = ir.For(None, K, c(0), c(8), 2, (ir.If(None, ir.BinOp(None, BOOL, ">", K, c(0)),
                                                     (BAR,), ()),))
    assert sync_counts.per_iteration(stepped, 3) is None


HANDOFF = (ROOT / "corpus" / "good" / "named_handoff.tsk").read_text()
GEMV = (ROOT / "corpus" / "good" / "persistent_gemv.tsk").read_text()
STORE = (ROOT / "corpus" / "good" / "persistent_tma_store.tsk").read_text()


def prove(text: str) -> None:
    k = compile_source(text, "t.tsk").kernels[0]
    valueflow.prove(k, k.ensures[0])


@pytest.mark.parametrize("text", [HANDOFF, GEMV, STORE], ids=["handoff", "gemv", "store"])
def test_named_barrier_handoffs_prove(text: str):
    prove(text)


def _edit(text: str, old: str, new: str, count: int = 1) -> str:
    assert text.count(old) >= count, old
    return text.replace(old, new, count)


BROKEN = {
    # the producer writes after its arrive: the consumer may read the previous segment
    "write-after-arrive": _edit(
        HANDOFF, "      buf[thread] = x[block.x, k * 128 + thread]\n      bar_arrive 1, 256\n",
        "      bar_arrive 1, 256\n      buf[thread] = x[block.x, k * 128 + thread]\n"),
    # the producer no longer waits for the consumer: it may overwrite an unread segment
    "no-empty-wait": _edit(HANDOFF, "      if k > 0 {\n        bar_sync 2, 256\n      }\n", ""),
    # the consumer does not wait for the producer
    "consumer-arrives-only": _edit(HANDOFF, "      bar_sync 1, 256\n      y[",
                                   "      bar_arrive 1, 256\n      y["),
    # the empty wait skipped for two passes: the second segment may overwrite the first
    "skips-two-passes": _edit(HANDOFF, "if k > 0 {", "if k > 1 {"),
    # the barrier counted for fewer threads than use it: phases are not participations
    "count-half": _edit(_edit(HANDOFF, "bar_arrive 1, 256", "bar_arrive 1, 128"),
                        "bar_sync 1, 256", "bar_sync 1, 128"),
    # the gemv's partials: the second meeting dropped, the next tile overwrites them
    "gemv-no-second-meeting": _edit(
        GEMV, "      // overwrites it\n      bar_sync 1, 256\n", "      // overwrites it\n"),
    # the staging tile stored before the consumers met
    "store-before-meeting": _edit(
        STORE, "        arrive empty[s], one per warp\n        bar_sync 1, 256\n",
        "        arrive empty[s], one per warp\n"),
}


@pytest.mark.parametrize("name", sorted(BROKEN))
def test_broken_orderings_are_not_proved(name: str):
    with pytest.raises((valueflow.NotProved, Unsupported)):
        prove(BROKEN[name])
