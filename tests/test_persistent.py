"""Persistent kernels (semantics/temporal/blockparam.py): the block index as a size of the one-block
model, the tile schedule as its ordinal loop, and the simplification that lets a ring
counter carried across tiles read the iteration only. Proved for every block and size on
the good kernel; refuted (never proved) when the ring is not carried or when a term reads
the block other than through the iteration."""

from __future__ import annotations

import itertools
import random
from pathlib import Path

from tilesafe.checkers import barrier, ownership, temporal
from tilesafe.checkers.obligation import Severity, Verdict
from tilesafe.checkers.registry import CheckOptions
from tilesafe.frontend import ir
from tilesafe.frontend.load import compile_source, load_program
from tilesafe.frontend.walk import statements
from tilesafe.semantics.expr import evaluate
from tilesafe.semantics.temporal import blockparam

ROOT = Path(__file__).resolve().parent.parent
GOOD = ROOT / "corpus" / "good" / "persistent_ring.tsk"
OPTS = CheckOptions()


def kernel_of(text: str) -> ir.Kernel:
    return compile_source(text, "persistent.tsk").kernels[0]


def variant(old: str, new: str) -> ir.Kernel:
    text = GOOD.read_text()
    assert old in text
    return kernel_of(text.replace(old, new))


def test_lift_adds_the_block_as_a_size():
    k = load_program(GOOD).kernels[0]
    assert blockparam.scheduled_axes(k) == (0,)
    lk = blockparam.lift(k)
    assert blockparam.lift(k) is lk  # memoised: the checkers' caches key on identity
    assert lk.sizes == k.sizes + ("block.x",)
    assert blockparam.lifted_axes(lk) == ("block.x",)
    assert blockparam.lifted_axes(k) == ()
    # The schedule is its ordinal loop, and the ring counter reads the iteration only.
    loops = [s for s in statements(lk.body) if isinstance(s, ir.For) and s.var.name == "t"]
    assert loops and all(lp.step == 1 and isinstance(lp.lo, ir.IntConst) for lp in loops)
    gs = [s for s in statements(lk.body) if isinstance(s, ir.Let) and s.name == "g"]
    for g in gs:
        names = {x.name for x in blockparam._nodes(g.value) if isinstance(x, ir.SizeVar)}
        assert not names, names
    # Every lifted statement maps back to the statement the interpreter runs.
    orig = {id(s) for s in statements(k.body)}
    assert all(blockparam.origin_id(lk, id(s)) in orig for s in statements(lk.body))
    launch, fixed = blockparam.split(lk, {"M": 640, "block.x": 3})
    assert launch == {"M": 640} and fixed == {0: 3}


def test_kernels_without_a_schedule_are_not_lifted():
    k = load_program(ROOT / "corpus" / "good" / "warp_specialized.tsk").kernels[0]
    assert blockparam.lift(k) is k


def _leaf(names):
    def leaf(x):
        if isinstance(x, ir.SizeVar):
            return lambda env: env[x.name]
        if isinstance(x, ir.LoopVar):
            return lambda env: env[x.name]
        raise AssertionError(x)
    return leaf


def test_simplify_is_exact():
    """simplify keeps the value of quasi-affine terms (floor division and modulo), at random
    points, negative values included, and cancels what cancels."""
    sp = load_program(GOOD).kernels[0].span
    I = ir.ScalarType.INT  # noqa: E741

    def c(v):
        return ir.IntConst(sp, I, v)

    def b(op, x, y):
        return ir.BinOp(sp, I, op, x, y)

    bx, i, k, m = (ir.SizeVar(sp, I, "bx"), ir.LoopVar(sp, I, "i", 1), ir.LoopVar(sp, I, "k", 2),
                   ir.SizeVar(sp, I, "m"))
    t = b("+", bx, b("*", c(4), i))
    terms = [
        b("+", b("*", b("/", b("-", t, bx), c(4)), c(4)), k),
        b("%", b("+", b("*", b("/", b("-", t, bx), c(4)), c(4)), k), c(3)),
        b("/", b("+", b("-", m, bx), c(3)), c(4)),
        b("%", b("-", b("*", c(6), i), c(7)), c(4)),
        b("/", b("-", b("+", b("*", c(-6), k), m), c(5)), c(3)),
        b("-", b("*", c(2), b("/", t, c(2))), b("%", t, c(2))),
    ]
    rng = random.Random(5)
    for e in terms:
        s = blockparam.simplify(e)
        f0 = evaluate.compile_expr(e, _leaf(None))
        f1 = evaluate.compile_expr(s, _leaf(None))
        for _ in range(300):
            env = {n: rng.randint(-50, 50) for n in ("bx", "i", "k", "m")}
            assert f0(env) == f1(env), (e, s, env)
    g = blockparam.simplify(terms[0])
    assert not any(isinstance(x, ir.SizeVar) for x in blockparam._nodes(g))


def test_persistent_ring_proved_for_every_block():
    k = load_program(GOOD).kernels[0]
    for obs in (barrier.check(k, OPTS), ownership.check(k, OPTS)):
        bad = [(o.name, o.verdict.value, o.message) for o in obs
               if o.verdict is not Verdict.PROVED]
        assert not bad, bad
        arg = obs[0].evidence["argument"]
        assert "block.x" in arg.get("T", ""), arg


def test_phase_reset_refuted_on_a_block_with_two_tiles():
    k = load_program(ROOT / "corpus" / "bad" / "ts408_persistent_phase_reset.tsk").kernels[0]
    obs = barrier.check(k, OPTS)
    (ref,) = [o for o in obs if o.verdict is Verdict.REFUTED and o.severity is Severity.ERROR]
    assert ref.code == "TS408"
    cex = ref.counterexample
    assert "block.x" not in cex["sizes"] and len(cex["block"]) == 1
    # The block really has two tiles or more in that launch.
    tiles = cex["sizes"]["M"] // 64
    assert -(-(tiles - cex["block"][0]) // 4) >= 2
    guide = temporal.interpreter_guide(k, OPTS)
    assert guide is not None and "block.x" not in guide[0]
    assert guide[1].block == tuple(cex["block"])


def test_a_ring_that_starts_at_the_block_index_is_not_proved():
    """The ring counter offset by the block: the first wait of block 3 names parity 1 on a
    fresh barrier (it passes before the tile lands). Only some blocks are wrong: the lifted
    search finds one."""
    k = variant("let g = ((t - block.x) / GRID) * KT + k\n        let s = g % STAGES\n"
                "        wait full[s] parity (g / STAGES) % 2",
                "let g = ((t - block.x) / GRID) * KT + k + block.x\n        let s = g % STAGES\n"
                "        wait full[s] parity (g / STAGES) % 2")
    obs = barrier.check(k, OPTS) + ownership.check(k, OPTS)
    assert not all(o.verdict is Verdict.PROVED for o in obs)
    assert any(o.verdict is Verdict.REFUTED for o in obs)


def test_a_block_dependent_condition_is_unknown_not_proved():
    """Synchronisation under a condition on the block (not a function of the iteration):
    outside the argument, never proved."""
    k = variant("  role producer = warp 0, elect one {\n    for t in block.x .. M / 64 step GRID {",
                "  role producer = warp 0, elect one {\n    for t in block.x .. M / 64 + "
                "block.x % 2 step GRID {")
    obs = barrier.check(k, OPTS)
    assert not all(o.verdict is Verdict.PROVED for o in obs)


def test_every_block_of_small_launches_agrees_with_the_interpreter_model():
    """The lifted where clause admits exactly the blocks of the grid."""
    k = load_program(GOOD).kernels[0]
    lk = blockparam.lift(k)
    for m, bx in itertools.product((64, 320, 1024), range(6)):
        sizes = {"M": m, "block.x": bx}
        ok = all(evaluate.compile_expr(w, _size_leaf)(sizes) for w in lk.where)
        assert ok == (bx < 4), (m, bx)


def _size_leaf(x):
    return lambda env: env[x.name]


def test_the_machine_runs_the_lifted_block():
    """The one-block machine of a lifted kernel runs the block its sizes name (the block
    index is a size there, not the default block 0): its trip count is that block's."""
    from tilesafe.semantics.temporal.events import build_model
    from tilesafe.semantics.temporal.explore import Machine
    k = blockparam.lift(load_program(GOOD).kernels[0])
    model = build_model(k, False)
    for m, bx in ((64, 0), (64, 1), (640, 1), (640, 2), (1024, 3)):
        mach = Machine(model, {"M": m, "block.x": bx})
        trips = {ins.trip(mach.env(a, ins, ())) for a in range(mach.n)
                 for ins in mach.agents[a].code if ins.op == "enter" and not ins.ctx}
        assert trips == {max(0, -(-(m // 64 - bx) // 4))}, (m, bx, trips)


def test_epilogue_partials_reused_without_a_barrier_are_refuted():
    """persistent_gemv without its second epilogue barrier: the next tile overwrites the
    shared partials the first 64 consumer threads may still be adding (TS302). Not a corpus
    bad kernel: the interpreter's fixed schedules do not make the readers slow enough to
    show it (the refutation is still the checkers' own run)."""
    text = (ROOT / "corpus" / "good" / "persistent_gemv.tsk").read_text()
    last = text.rindex("      bar_sync 1, 256\n")
    k = kernel_of(text[:last] + text[last + len("      bar_sync 1, 256\n"):])
    obs = barrier.check(k, OPTS) + ownership.check(k, OPTS)
    errs = {o.code for o in obs if o.verdict is not Verdict.PROVED
            and o.severity is Severity.ERROR}
    assert errs == {"TS302"}, errs
