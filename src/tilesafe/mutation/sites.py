"""Every place in a syntax tree a mutation operator may edit, with the path to rebuild it.

Why a path and not an in-place edit: the AST is made of frozen dataclasses, so a mutant is
a new tree that shares everything but the spine from the root to the edited node. The path
also gives the node's *context* (is this integer a TMA box extent, a loop bound, a barrier
count?), which decides which edits make sense and names the operator in reports.

The parameter list of a kernel is never visited: mutants keep the kernel's interface, so the
original's inputs can be fed to the mutant unchanged. Nor are its `ensures` clauses: they
are the specification a mutant is judged against, not code with bugs to plant.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass

from tilesafe.frontend import ast

# One step down the tree: (field name, index into a tuple field or None).
Step = tuple[str, "int | None"]
Path = tuple[Step, ...]

# Fields a mutant must never touch (the interface) or that carry no tree.
_SKIP_FIELDS = {("Kernel", "params"), ("Kernel", "name"), ("Kernel", "ensures")}


@dataclass(frozen=True)
class Site:
    """A node of the tree and how it is reached from the module."""

    node: object
    path: Path
    kernel: ast.Kernel
    # (type name of the owner, field name) for every step from the module down to `node`
    owners: tuple[tuple[str, str], ...]
    # the nodes on the way down (module excluded), innermost last, `node` not included
    ancestors: tuple[object, ...]

    def innermost(self, *pairs: tuple[str, str]) -> tuple[str, str] | None:
        """The innermost (owner, field) step of the path among `pairs`."""
        wanted = set(pairs)
        for pair in reversed(self.owners):
            if pair in wanted:
                return pair
        return None

    def enclosing_stmt(self) -> ast.Stmt | None:
        """The innermost statement holding this node (the node itself if it is one)."""
        if isinstance(self.node, ast.Stmt):
            return self.node
        for a in reversed(self.ancestors):
            if isinstance(a, ast.Stmt):
                return a
        return None


def _is_node(value: object) -> bool:
    return dataclasses.is_dataclass(value) and not isinstance(value, type)


def walk(module: ast.Module) -> Iterator[Site]:
    """Every dataclass node below the module's kernels (kernels included), pre-order."""
    for i, kernel in enumerate(module.kernels):
        yield from _walk(kernel, (("kernels", i),), kernel, (("Module", "kernels"),), ())


def _walk(node: object, path: Path, kernel: ast.Kernel, owners: tuple[tuple[str, str], ...],
          ancestors: tuple[object, ...]) -> Iterator[Site]:
    yield Site(node, path, kernel, owners, ancestors)
    owner = type(node).__name__
    below = (*ancestors, node)
    for f in dataclasses.fields(node):  # type: ignore[arg-type]
        if f.name == "span" or (owner, f.name) in _SKIP_FIELDS:
            continue
        value = getattr(node, f.name)
        step_owner = (*owners, (owner, f.name))
        if isinstance(value, tuple):
            for j, item in enumerate(value):
                if _is_node(item):
                    yield from _walk(item, (*path, (f.name, j)), kernel, step_owner, below)
        elif _is_node(value):
            yield from _walk(value, (*path, (f.name, None)), kernel, step_owner, below)


def replace_at(root: object, path: Path, new: object) -> object:
    """`root` with the node at `path` replaced by `new` (everything else shared)."""
    if not path:
        return new
    (name, index), rest = path[0], path[1:]
    child = getattr(root, name)
    if index is None:
        return dataclasses.replace(root, **{name: replace_at(child, rest, new)})  # type: ignore[type-var]
    items = list(child)
    items[index] = replace_at(items[index], rest, new)
    return dataclasses.replace(root, **{name: tuple(items)})  # type: ignore[type-var]


def get_at(root: object, path: Path) -> object:
    """The node at `path` below `root`."""
    node = root
    for name, index in path:
        node = getattr(node, name)
        if index is not None:
            node = node[index]
    return node


def walk_stmts(block: ast.Block) -> Iterator[ast.Stmt]:
    """Every statement of a block, descending into loop, `if` and role bodies."""
    for s in block.stmts:
        yield s
        if isinstance(s, (ast.For, ast.Role)):
            yield from walk_stmts(s.body)
        elif isinstance(s, ast.If):
            yield from walk_stmts(s.then)
            if isinstance(s.orelse, ast.Block):
                yield from walk_stmts(s.orelse)
            elif isinstance(s.orelse, ast.If):
                yield from walk_stmts(ast.Block(s.orelse.span, (s.orelse,)))
