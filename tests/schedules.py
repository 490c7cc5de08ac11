"""Running a kernel in the reference interpreter the way a refutation is witnessed: the
checker's counterexample replayed (semantics/temporal/guide.py), then adversarial PCT scheduling,
and plain PCT runs -- a fixed, seeded set, so tests that use it are deterministic."""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np

from tilesafe.semantics.interpreter.interp import InterpError, random_inputs, run_kernel
from tilesafe.semantics.interpreter.interp_io import as_float
from tilesafe.semantics.interpreter.schedule import Guide

GUIDED_SEEDS = range(4)  # even: PCT after the replay; odd: the violating class last
PCT_SEEDS = range(6)


def failure(k, sizes: Mapping[str, int], inputs, want: Mapping[str, np.ndarray],
            **how) -> str | None:
    """What went wrong in one run (None: the run was correct)."""
    try:
        res = run_kernel(k, sizes, inputs, **how)
    except InterpError as exc:
        return exc.code
    for name, value in want.items():
        got = as_float(res.tensors[name], k.tensor(name).dtype)
        if not np.array_equal(got, as_float(value, k.tensor(name).dtype)):
            return f"wrong {name}"
    return None


def shows_failure(k, sizes: Mapping[str, int], ref: Callable, guide: Guide | None
                  ) -> tuple[str, str] | None:
    """The first failing run of the fixed set: (how it was scheduled, what failed)."""
    inputs = random_inputs(k, sizes, 1)
    want = ref(sizes, inputs)
    if guide is not None:
        for seed in GUIDED_SEEDS:
            bad = failure(k, sizes, inputs, want, seed=seed, policy="pct", guide=guide)
            if bad:
                return f"counterexample replay, then PCT seed {seed}", bad
    for seed in PCT_SEEDS:
        bad = failure(k, sizes, inputs, want, seed=seed, policy="pct")
        if bad:
            return f"PCT seed {seed}", bad
    return None
