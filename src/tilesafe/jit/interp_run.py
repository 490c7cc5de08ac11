"""A jit call on the reference interpreter: what CI runs, and what `device="interp"` asks for.

Why the interpreter and not a numpy re-implementation: it is the oracle every GPU run is
compared with bit for bit, so a call here computes exactly what the compiled kernel does
on the GPU (for a proved kernel, with any schedule).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from tilesafe.frontend import ir
from tilesafe.frontend.diagnostics import Diagnostic
from tilesafe.jit.contract import JitError


def run(kernel: ir.Kernel, sizes: Mapping[str, int], shapes: Mapping[str, tuple[int, ...]],
        grid: tuple[int, ...], arrays: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Interpret one launch; `arrays` holds the given tensors as the interpreter's numpy
    arrays (an `out` tensor not given starts poisoned, as `tilesafe run` makes it). Returns
    the written tensors. JitError with the interpreter's code when the run is refused (too
    large for it, TS200) or fails."""
    from tilesafe.semantics.interpreter import interp
    from tilesafe.semantics.interpreter.interp_io import check_memory, poisoned

    try:
        check_memory(kernel, shapes, grid)
        inputs = dict(arrays)
        for t in kernel.params:  # only outputs can be missing (contract.bind)
            if t.name not in inputs:
                inputs[t.name] = poisoned(t, tuple(shapes[t.name]))
        result = interp.run_kernel(kernel, dict(sizes), inputs)
    except interp.InterpError as err:
        raise JitError([Diagnostic(err.code, f"the reference interpreter: {err.message}",
                                   err.span or kernel.span)]) from None
    return {t.name: result.tensors[t.name] for t in kernel.params if t.role.written}
