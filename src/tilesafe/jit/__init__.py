"""tilesafe.jit: call proved kernels on numpy arrays and torch tensors (docs/jit.md).

    import tilesafe
    saxpy = tilesafe.jit("corpus/good/elementwise.tsk")
    z = saxpy(a, x, y)

`tilesafe.jit` is this package and is also callable: calling it is `jit(...)`. Why the
module is made callable rather than the function living elsewhere: the issue's spelling
`tilesafe.jit(path, kernel=...)` is what users type, and the package keeps the pieces
(contract, cache, builds, runners, torch registration) in small modules beside it.
torch is never imported by importing this package.
"""

from __future__ import annotations

import sys
import types
from typing import Any

from tilesafe.jit.build import ProofSummary
from tilesafe.jit.cache import CompileCache, default_dir
from tilesafe.jit.contract import JitError
from tilesafe.jit.kernel import JitKernel, JitWarning, jit

__all__ = ["CompileCache", "JitError", "JitKernel", "JitWarning", "ProofSummary",
           "default_dir", "jit"]


class _CallableModule(types.ModuleType):
    def __call__(self, *args: Any, **kwargs: Any) -> JitKernel:
        return jit(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
