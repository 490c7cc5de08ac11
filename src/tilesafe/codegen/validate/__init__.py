"""Translation validation of emitted PTX against the kernel's IR (issue 7, item 6).

`validate_ptx(kernel, ptx)` reads the PTX back (ptx_parse), executes it symbolically over
its control-flow graph (cfg, symexec), derives what every access and synchronisation
statement must do from the IR alone (spec, layout_terms), and proves with z3 (encode,
solve) for every size the `where` clause allows that the PTX does exactly that
(obligations). Nothing here imports the code generator: the validator shares no code with
the printer it checks.
"""

from __future__ import annotations

from tilesafe.codegen.validate.obligations import CODES, validate_ptx

__all__ = ["CODES", "validate_ptx"]
