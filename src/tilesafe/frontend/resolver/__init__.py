"""Syntax tree -> typed IR: name resolution, type checking, constant folding, and the
affinity rules that keep every index a Presburger term.

Diagnostics are collected (not raised one by one) so a user sees every problem of a file
at once; an erroneous expression is replaced by a typed placeholder so checking goes on.
The rules are grouped by what they resolve (base, decls, stmts, exprs, spec; rules for the
standalone ones), assembled in kernel.py.
"""

from __future__ import annotations

from tilesafe.frontend import ast, ir
from tilesafe.frontend import diagnostics as dg
from tilesafe.frontend.diagnostics import Diagnostic, DiagnosticError
from tilesafe.frontend.resolver.kernel import KernelResolver
from tilesafe.frontend.target import DEFAULT, Target


def resolve(module: ast.Module, target: Target = DEFAULT) -> ir.Program:
    """Resolve every kernel of a parsed file for `target` (its warp size and limits); raises
    DiagnosticError listing all problems."""
    diags: list[Diagnostic] = []
    kernels: list[ir.Kernel] = []
    seen: set[str] = set()
    for kernel in module.kernels:
        if kernel.name in seen:
            diags.append(Diagnostic(dg.DUPLICATE_NAME, f"kernel '{kernel.name}' defined twice",
                                    kernel.span))
        seen.add(kernel.name)
        resolver = KernelResolver(kernel, target)
        result = resolver.run()
        diags.extend(resolver.diags)
        if result is not None:
            kernels.append(result)
    if diags:
        raise DiagnosticError(diags)
    return ir.Program(module.path, tuple(kernels))
