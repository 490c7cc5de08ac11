"""Shared by the value-proof cross-checks (tests/test_value_*.py): does the prover prove a
kernel's first `ensures`, and do the interpreter's launches agree with it?"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from tilesafe.frontend.load import compile_source
from tilesafe.semantics.value import spec_run, valueflow
from tilesafe.semantics.value.value_exec import Unsupported


def proved(src: str) -> bool:
    k = compile_source(src, "k.tsk").kernels[0]
    try:
        valueflow.prove(k, k.ensures[0])
    except (valueflow.NotProved, Unsupported):
        return False
    return True


def agrees(src: str, launches: Iterable[Mapping[str, int]]) -> bool:
    """Every launch ran and matched the spec bit for bit."""
    k = compile_source(src, "k.tsk").kernels[0]
    runs = spec_run.check(k, [dict(s) for s in launches])
    return all(r.runs and r.mismatch is None for r in runs)
