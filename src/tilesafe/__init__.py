"""tilesafe: formal verification for Hopper GPU kernels.

The public API (`lint`, `load`, `verify`, `run`) lives in `tilesafe.api`; it is re-exported
here lazily so that `import tilesafe.frontend...` does not pull in every stage.
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"
__all__ = ["__version__", "lint", "load", "run", "verify"]


def __getattr__(name: str) -> Any:
    if name in ("lint", "load", "run", "verify"):
        from tilesafe import api

        return getattr(api, name)
    if name == "jit":  # the package, callable: tilesafe.jit(path, kernel=...) (docs/jit.md)
        import importlib

        return importlib.import_module("tilesafe.jit")
    raise AttributeError(f"module 'tilesafe' has no attribute {name!r}")
