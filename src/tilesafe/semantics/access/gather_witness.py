"""Is a refutation through index tensors one of a launch the `requires` clauses allow?

Why: the access checker constrains each gathered value by the clauses instantiated on the
reads the access itself makes (semantics/access/gather.py), not by every clause over every
element -- so a point it finds may need data no launch can have: an expert id -1 in a
block's table where the routing has too few blocks for any block to be empty. Such a point
is not a counterexample. Before one is reported, data that holds the values it names and
satisfies every clause is drawn (semantics/access/requires_synth.py, bounded); a point the
search shows impossible is set aside and another one sampled.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from enum import Enum

import numpy as np

from tilesafe.frontend import ir


class Witness(str, Enum):
    DRAWN = "drawn"  # data with those values satisfying every clause exists (and was drawn)
    IMPOSSIBLE = "impossible"  # no data at these sizes: the clauses exclude the point
    UNDECIDED = "undecided"  # the bounded search gave up (too large, the solver's time)


def witness(kernel: ir.Kernel, sizes: Mapping[str, int],
            gathered: Sequence[Mapping[str, int]]) -> tuple[Witness, str]:
    """Whether data realises the gathered values of a counterexample's instances
    ({"ids[3]": 8, ...} per instance), and why not."""
    from tilesafe.semantics.access import requires_synth
    from tilesafe.semantics.interpreter.interp_io import tensor_shapes

    fixed: dict[str, dict[tuple[int, ...], int]] = {}
    for inst in gathered:
        for elem, value in inst.items():
            name, idx = elem[:-1].split("[")
            fixed.setdefault(name, {})[tuple(int(i) for i in idx.split(", "))] = int(value)
    try:
        requires_synth.draw(kernel, sizes, tensor_shapes(kernel, dict(sizes)),
                            np.random.default_rng(0), fixed)
    except requires_synth.NoSolution as err:
        return (Witness.IMPOSSIBLE if err.unsat else Witness.UNDECIDED), str(err)
    return Witness.DRAWN, ""
