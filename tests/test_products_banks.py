"""Products of sizes in TMA strides (semantics/expr/products.py) and bank-conflict freedom for
every size (semantics/hw/bank_param.py), against concrete evaluation."""

from __future__ import annotations

import itertools

from tilesafe.checkers import banks, tma
from tilesafe.checkers.obligation import Verdict
from tilesafe.checkers.registry import CheckOptions
from tilesafe.frontend.load import compile_source, load_program
from tilesafe.semantics.expr import products

BATCHED = open("corpus/good/batched_copy.tsk").read()


def stride_obligation(text: str):
    k = compile_source(text, "b.tsk").kernels[0]
    return next(o for o in tma.check(k, CheckOptions()) if "stride of dim 0" in o.name), k


def test_product_facts_bound_every_allowed_value() -> None:
    k = compile_source(BATCHED, "b.tsk").kernels[0]
    src = k.tensor("src")
    f = products.facts(k, 2, src.shape[1:], 5000)
    assert f is not None and f.lo == 2 * 64 * 64 and f.hi == 2 * 4096 * 4096
    assert f.divisor % 16 == 0
    # every allowed (M, N) on a grid of values: the product is inside the facts
    for m, n in itertools.product(range(64, 4097, 448), range(64, 4097, 960)):
        v = 2 * m * n
        assert f.lo <= v <= f.hi and v % f.divisor == 0


def test_product_stride_proved_and_refuted() -> None:
    ob, _ = stride_obligation(BATCHED)
    assert ob.verdict is Verdict.PROVED and "product" in ob.evidence
    big = BATCHED.replace("M <= 4096, N <= 4096", "M <= 1048576, N <= 1048576")
    ob, _ = stride_obligation(big)
    assert ob.verdict is Verdict.REFUTED and ob.code == "TS505"
    s = ob.counterexample["sizes"]
    assert 2 * s["M"] * s["N"] > (1 << 40) - 1  # the witness really breaks the rule
    odd = BATCHED.replace("M % 64 == 0, N % 64 == 0", "M % 2 == 0")
    ob, _ = stride_obligation(odd)
    assert ob.verdict is Verdict.REFUTED and ob.code == "TS505"
    s = ob.counterexample["sizes"]
    assert (2 * s["M"] * s["N"]) % 16 != 0


def bank_obs(text: str):
    return banks.check(compile_source(text, "h.tsk").kernels[0], CheckOptions())


def test_banks_parametric_for_every_size() -> None:
    k = load_program("corpus/good/tile_history.tsk").kernels[0]
    obs = banks.check(k, CheckOptions())
    assert all(o.verdict is Verdict.PROVED for o in obs)
    loop = [o for o in obs if "min" in str(o.evidence.get("scope")) or "z3" in o.method]
    assert loop and all(o.evidence["scope"].startswith("every size") for o in obs)


def test_banks_not_invariant_is_not_proved_for_every_size() -> None:
    # The lanes' offsets wrap differently with k ((lane + k) % 32): no single warp access
    # stands for all, so the verdict must not be a proof for every size.
    text = open("corpus/good/tile_history.tsk").read().replace(
        "hist[min(k, 7), lane] = hist[min(k, 7), lane] + s",
        "hist[min(k, 7), (lane + k) % 32] = hist[min(k, 7), lane] + s")
    obs = bank_obs(text)
    ob = next(o for o in obs if "write" in o.name and "(lane + k)" in
              text.splitlines()[o.span.line - 1])
    assert ob.verdict is not Verdict.PROVED
    assert "not shown for every size" in ob.message
