"""Mutation operators: each proposes single edits of one node of a kernel's syntax tree.

Why these: each models a slip a person makes in Hopper code and that tilesafe claims to
catch (or, for value edits, that a later specification checker should): an off-by-one in a
count, box or loop bound; a wrong parity; a forgotten wait, arrive, fence or sync; a swizzle
that disagrees between a tensor map and its buffer; a guard that lets one element too many
through; an arrive in the wrong mode; a role range shifted by a warp. One edit per mutant,
so a verdict is about that edit alone.

An operator is a function `Site -> Iterator[Edit]`; the edit replaces the site's node. An
operator may propose edits that do not type-check (a parity of -1, a non-power-of-two
alignment): generate.py keeps only the mutants that lint clean, so operators stay simple.
The operator name of an edit is `family` or `family.context` (`int.box`, `delete.wait`);
`--operators` selects by family or by full name.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from tilesafe.frontend import ast
from tilesafe.frontend.fmt import format_expr, format_layout
from tilesafe.frontend.span import Span
from tilesafe.mutation.cluster_ops import op_cluster
from tilesafe.mutation.sites import Site


@dataclass(frozen=True)
class Edit:
    """One proposed change: `new` replaces the site's node.

    `slug` is the short, deterministic name of the change inside the mutant id; `edit` the
    human text; `span` where in the original the change is (defaults to the site's node);
    `before`/`after` the statement-level texts when the operator knows them better than
    the generic statement printer (deletions, swaps)."""

    operator: str
    slug: str
    edit: str
    new: object
    span: Span | None = None
    before: str | None = None
    after: str | None = None


Operator = Callable[[Site], Iterator[Edit]]

_OP_SLUG = {"<": "lt", "<=": "le", ">": "gt", ">=": "ge", "==": "eq", "!=": "ne", "+": "add",
            "-": "sub", "*": "mul", "/": "div", "%": "mod", "&&": "and", "||": "or"}


def _lit(value: int, like: ast.Expr) -> ast.IntLit:
    return ast.IntLit(like.span, value)


def _bin(op: str, lhs: ast.Expr, rhs: ast.Expr) -> ast.Binary:
    return ast.Binary(lhs.span, op, lhs, rhs)


def _plus(e: ast.Expr, k: int) -> ast.Expr:
    """`e + k` (folded when `e` is a literal)."""
    if isinstance(e, ast.IntLit):
        return _lit(e.value + k, e)
    return _bin("+" if k >= 0 else "-", e, _lit(abs(k), e))


def _q(e: ast.Expr) -> str:
    return f"`{format_expr(e)}`"


# ---- integer literals, by context ------------------------------------------------------------

# (owner type, field) -> context; the innermost one on the path decides.
_INT_CONTEXT: dict[tuple[str, str], str] = {
    ("Kernel", "where"): "where",
    ("Kernel", "grid"): "grid",
    ("Kernel", "block_dim"): "block",
    ("MbarrierDecl", "count"): "count",
    ("MbarrierDecl", "length"): "length",
    ("Wait", "parity"): "parity",
    ("TensormapDecl", "box"): "box",
    ("For", "lo"): "loop",
    ("For", "hi"): "loop",
    ("For", "step"): "loop",
    ("TmaLoad", "coords"): "tma-coord",
    ("TmaStore", "coords"): "tma-coord",
    ("Index", "indices"): "index",
    ("Store", "indices"): "index",
    ("BufRef", "indices"): "index",
    ("BarRef", "index"): "index",
    ("ConstDecl", "value"): "const",
    ("SharedDecl", "shape"): "shape",
    ("Arrive", "tx_bytes"): "expect-tx",
    ("ExpectTx", "nbytes"): "expect-tx",
    ("If", "cond"): "guard",
    ("Let", "value"): "let",
    ("Store", "value"): "value",
    ("Assign", "value"): "value",
    ("VarDecl", "value"): "value",
    ("NamedBar", "bar_id"): "bar-id",
    ("NamedBar", "count"): "bar-count",
    ("ThreadSet", "lo"): "role",
    ("ThreadSet", "hi"): "role",
    ("TmaLoad", "multicast"): "mask",
    ("Index", "cta"): "rank",
    ("Store", "cta"): "rank",
    ("BarRef", "cta"): "rank",
}


def int_context(site: Site) -> str | None:
    pair = site.innermost(*_INT_CONTEXT)
    return _INT_CONTEXT[pair] if pair else None


def _int_values(v: int) -> list[tuple[str, int]]:
    """+1, -1, *2, /2 of `v`, without repeats or no-ops (first spelling wins)."""
    out: list[tuple[str, int]] = []
    seen = {v}
    for how, new in (("+1", v + 1), ("-1", v - 1), ("*2", v * 2), ("/2", v // 2)):
        if new not in seen:
            seen.add(new)
            out.append((how, new))
    return out


def op_int(site: Site) -> Iterator[Edit]:
    """Integer literals +1 / -1 / *2 / /2, named by context (`int.box`, `int.count`, ...).
    Role ranges are left to `role-range`, which shifts both ends together."""
    node = site.node
    if isinstance(node, ast.IntLit):
        ctx = int_context(site)
        if ctx is None or ctx == "role":
            return
        for how, new in _int_values(node.value):
            yield Edit(f"int.{ctx}", f"{node.value}>{new}", f"`{node.value}` -> `{new}` ({how})",
                       _lit(new, node))
    elif isinstance(node, ast.SharedDecl) and node.align is not None:
        for how, new in (("*2", node.align * 2), ("/2", node.align // 2)):
            yield Edit("int.align", f"align{node.align}>{new}",
                       f"`align {node.align}` -> `align {new}` ({how})",
                       dataclasses.replace(node, align=new))


# ---- operator swaps --------------------------------------------------------------------------

_CMP_SWAPS = {"<": ("<=", ">="), "<=": ("<", ">"), ">": (">=", "<="), ">=": (">", "<"),
              "==": ("!=",), "!=": ("==",)}
_ARITH_SWAPS = {"+": ("-",), "-": ("+",), "*": ("/",), "/": ("*", "%"), "%": ("/",)}


def _swap(family: str, table: dict[str, tuple[str, ...]], site: Site) -> Iterator[Edit]:
    node = site.node
    if not isinstance(node, ast.Binary) or node.op not in table:
        return
    for new in table[node.op]:
        mutant = dataclasses.replace(node, op=new)
        yield Edit(family, f"{_OP_SLUG[node.op]}>{_OP_SLUG[new]}",
                   f"{_q(node)} -> {_q(mutant)}", mutant)


def op_cmp(site: Site) -> Iterator[Edit]:
    """Comparison swaps: the boundary (`<` / `<=`) and the negation (`<` / `>=`)."""
    return _swap("cmp-swap", _CMP_SWAPS, site)


def op_arith(site: Site) -> Iterator[Edit]:
    """Arithmetic swaps: `+`/`-`, `*`/`/`, `/`/`%`."""
    return _swap("arith-swap", _ARITH_SWAPS, site)


# ---- barrier protocol ------------------------------------------------------------------------


def op_parity(site: Site) -> Iterator[Edit]:
    """The parity of a wait: `+ 1` added or removed before `% 2`, `% 2` dropped, a literal
    parity flipped -- the classic producer/consumer phase slips."""
    node = site.node
    if not isinstance(node, ast.Wait):
        return
    p = node.parity

    def mk(slug: str, new: ast.Expr) -> Edit:
        return Edit("parity", slug, f"parity {_q(p)} -> {_q(new)}",
                    dataclasses.replace(node, parity=new), p.span)

    if isinstance(p, ast.IntLit):
        if p.value in (0, 1):
            yield mk("flip", _lit(1 - p.value, p))
        return
    if isinstance(p, ast.Binary) and p.op == "%" and isinstance(p.rhs, ast.IntLit) \
            and p.rhs.value == 2:
        yield mk("drop%2", p.lhs)
        inner = p.lhs
        if isinstance(inner, ast.Binary) and inner.op == "+" and \
                isinstance(inner.rhs, ast.IntLit) and inner.rhs.value == 1:
            yield mk("drop+1", _bin("%", inner.lhs, p.rhs))
        else:
            yield mk("add+1", _bin("%", _bin("+", inner, _lit(1, p)), p.rhs))
        return
    yield mk("add+1", _bin("%", _bin("+", p, _lit(1, p)), _lit(2, p)))


def op_expect_tx(site: Site) -> Iterator[Edit]:
    """Transaction bytes: doubled, halved, one 16-byte chunk more or less, the whole buffer
    instead of one stage (`bytes(buf)` for `bytes(buf[s])`), and an arrive that forgets
    its expect_tx."""
    node = site.node
    if isinstance(node, ast.Arrive) and node.tx_bytes is not None:
        field, e = "tx_bytes", node.tx_bytes
        yield Edit("expect-tx", "drop", f"drop `expect_tx {format_expr(e)}`",
                   dataclasses.replace(node, tx_bytes=None), e.span)
    elif isinstance(node, ast.ExpectTx):
        field, e = "nbytes", node.nbytes
    else:
        return
    variants: list[tuple[str, ast.Expr]] = [
        ("*2", _bin("*", e, _lit(2, e))), ("/2", _bin("/", e, _lit(2, e))),
        ("+16", _bin("+", e, _lit(16, e))), ("-16", _bin("-", e, _lit(16, e))),
    ]
    if isinstance(e, ast.Call) and e.func == "bytes" and len(e.args) == 1 and \
            isinstance(e.args[0], ast.Index):
        whole = ast.Name(e.args[0].span, e.args[0].name)
        variants.append(("whole", dataclasses.replace(e, args=(whole,))))
    for slug, new in variants:
        yield Edit("expect-tx", slug, f"expect_tx {_q(e)} -> {_q(new)}",
                   dataclasses.replace(node, **{field: new}), e.span)


def op_arrive_mode(site: Site) -> Iterator[Edit]:
    """`arrive` as each thread / `one` / `one per warp`: the arrival count per phase."""
    node = site.node
    if not isinstance(node, ast.Arrive):
        return
    names = {"each": "each thread", "one": "one", "per_warp": "one per warp"}
    for mode in ("each", "one", "per_warp"):
        if mode != node.mode:
            yield Edit("arrive-mode", f"{node.mode}>{mode}",
                       f"arrive {names[node.mode]} -> {names[mode]}",
                       dataclasses.replace(node, mode=mode))


def op_bar_mode(site: Site) -> Iterator[Edit]:
    """`bar_sync` <-> `bar_arrive`: a named barrier's participant waits or no longer does."""
    node = site.node
    if not isinstance(node, ast.NamedBar):
        return
    new = dataclasses.replace(node, arrive=not node.arrive)
    slug = "arrive>sync" if node.arrive else "sync>arrive"
    yield Edit("bar-mode", slug, f"{stmt_head(node)} -> {stmt_head(new)}", new)


def op_elect(site: Site) -> Iterator[Edit]:
    """`elect one` added to or removed from a role."""
    node = site.node
    if isinstance(node, ast.Role):
        what = "remove `elect one`" if node.elect_one else "add `elect one`"
        yield Edit("elect-one", "off" if node.elect_one else "on", f"{what} on role {node.name}",
                   dataclasses.replace(node, elect_one=not node.elect_one),
                   node.threads.span)


def op_role_range(site: Site) -> Iterator[Edit]:
    """Role thread ranges shifted by one (warp or thread) or shrunk at either end."""
    node = site.node
    if not isinstance(node, ast.ThreadSet):
        return

    def text(ts: ast.ThreadSet) -> str:
        if ts.kind == "warp":
            return f"`warp {format_expr(ts.lo)}`"
        assert ts.hi is not None
        return f"`{ts.kind} {format_expr(ts.lo)} .. {format_expr(ts.hi)}`"

    if node.hi is None:
        variants = [("shift+1", _plus(node.lo, 1), None), ("shift-1", _plus(node.lo, -1), None)]
    else:
        variants = [("shift+1", _plus(node.lo, 1), _plus(node.hi, 1)),
                    ("shift-1", _plus(node.lo, -1), _plus(node.hi, -1)),
                    ("shrink-hi", node.lo, _plus(node.hi, -1)),
                    ("shrink-lo", _plus(node.lo, 1), node.hi)]
    for slug, lo, hi in variants:
        new = dataclasses.replace(node, lo=lo, hi=hi)
        yield Edit("role-range", slug, f"{text(node)} -> {text(new)}", new)


def op_fence(site: Site) -> Iterator[Edit]:
    """`fence mbarrier_init` <-> `fence proxy_async`."""
    node = site.node
    if isinstance(node, ast.Fence):
        other = "proxy_async" if node.kind == "mbarrier_init" else "mbarrier_init"
        yield Edit("fence-kind", f"{node.kind}>{other}", f"`fence {node.kind}` -> "
                   f"`fence {other}`", dataclasses.replace(node, kind=other))


def op_wait_group(site: Site) -> Iterator[Edit]:
    """`wait_group N [read]`: `read` toggled, N one more or one less."""
    node = site.node
    if not isinstance(node, ast.WaitGroup):
        return

    def text(w: ast.WaitGroup) -> str:
        return f"`wait_group {w.pending}{' read' if w.read else ''}`"

    variants = [("read-off" if node.read else "read-on",
                 dataclasses.replace(node, read=not node.read)),
                (f"{node.pending}>{node.pending + 1}",
                 dataclasses.replace(node, pending=node.pending + 1))]
    if node.pending > 0:
        variants.append((f"{node.pending}>{node.pending - 1}",
                         dataclasses.replace(node, pending=node.pending - 1)))
    for slug, new in variants:
        yield Edit("wait-group", slug, f"{text(node)} -> {text(new)}", new)


# ---- statements ------------------------------------------------------------------------------

_DELETABLE: dict[type, str] = {
    ast.Wait: "wait", ast.Arrive: "arrive", ast.Sync: "sync", ast.Fence: "fence",
    ast.Store: "store", ast.Init: "init", ast.TmaLoad: "tma_load", ast.TmaStore: "tma_store",
    ast.CommitGroup: "commit_group", ast.WaitGroup: "wait_group", ast.Let: "let",
    ast.ExpectTx: "expect_tx", ast.NamedBar: "bar_sync", ast.ClusterBarrier: "cluster_barrier",
}
_DECLS = (ast.ConstDecl, ast.TensormapDecl, ast.SharedDecl, ast.MbarrierDecl)


def stmt_head(s: ast.Stmt) -> str:
    """One line for a statement: the whole of a simple one, the head of a compound one."""
    from tilesafe.frontend.fmt import format_simple

    if isinstance(s, ast.For):
        step = f" step {format_expr(s.step)}" if s.step is not None else ""
        return f"for {s.var} in {format_expr(s.lo)} .. {format_expr(s.hi)}{step} {{ ... }}"
    if isinstance(s, ast.If):
        return f"if {format_expr(s.cond)} {{ ... }}"
    if isinstance(s, ast.Role):
        ts = s.threads
        rng = (f"warp {format_expr(ts.lo)}" if ts.hi is None
               else f"{ts.kind} {format_expr(ts.lo)} .. {format_expr(ts.hi)}")
        elect = ", elect one" if s.elect_one else ""
        return f"role {s.name} = {rng}{elect} {{ ... }}"
    return format_simple(s)


def op_delete(site: Site) -> Iterator[Edit]:
    """Delete one statement of a kind that carries protocol or data: wait, arrive, sync,
    bar_sync, bar_arrive, fence, store, init, tma_load, tma_store, commit_group, wait_group,
    expect_tx, the cluster barrier, and let (which only survives linting where nothing uses
    it)."""
    node = site.node
    if not isinstance(node, ast.Block):
        return
    for i, s in enumerate(node.stmts):
        kind = _DELETABLE.get(type(s))
        if kind is None:
            continue
        if isinstance(s, ast.NamedBar) and s.arrive:
            kind = "bar_arrive"
        text = stmt_head(s)
        new = dataclasses.replace(node, stmts=node.stmts[:i] + node.stmts[i + 1:])
        yield Edit(f"delete.{kind}", "del", f"delete `{text}`", new, s.span, text, "")


def op_swap(site: Site) -> Iterator[Edit]:
    """Swap two adjacent statements of a block (never a declaration: they are hoisted)."""
    node = site.node
    if not isinstance(node, ast.Block):
        return
    for i in range(len(node.stmts) - 1):
        a, b = node.stmts[i], node.stmts[i + 1]
        if isinstance(a, _DECLS) or isinstance(b, _DECLS):
            continue  # declarations are hoisted: moving one changes nothing
        ta, tb = stmt_head(a), stmt_head(b)
        if ta == tb:
            continue
        stmts = list(node.stmts)
        stmts[i], stmts[i + 1] = b, a
        yield Edit("swap-adjacent", "swap", f"swap `{ta}` with the next `{tb}`",
                   dataclasses.replace(node, stmts=tuple(stmts)), a.span,
                   f"{ta}; {tb}", f"{tb}; {ta}")


# ---- guards and where --------------------------------------------------------------------------


def _conjuncts(e: ast.Expr) -> list[ast.Expr]:
    if isinstance(e, ast.Binary) and e.op == "&&":
        return _conjuncts(e.lhs) + _conjuncts(e.rhs)
    return [e]


def _and_all(es: list[ast.Expr]) -> ast.Expr:
    out = es[0]
    for e in es[1:]:
        out = _bin("&&", out, e)
    return out


def _in_guard(site: Site) -> bool:
    return site.innermost(("If", "cond")) is not None


def op_guard(site: Site) -> Iterator[Edit]:
    """Guard weakening in `if` conditions: `<` -> `<=`, `>` -> `>=`, and dropping one
    conjunct of an `&&` chain (the forgotten half of `row < M && col < N`)."""
    node = site.node
    if not isinstance(node, ast.Binary) or not _in_guard(site):
        return
    if node.op in ("<", ">"):
        new = dataclasses.replace(node, op=node.op + "=")
        yield Edit("guard-weaken", f"{_OP_SLUG[node.op]}>{_OP_SLUG[new.op]}",
                   f"{_q(node)} -> {_q(new)}", new)
    elif node.op == "&&":
        parent = site.ancestors[-1] if site.ancestors else None
        if isinstance(parent, ast.Binary) and parent.op == "&&":
            return  # only the top of a chain: each conjunct is dropped once
        parts = _conjuncts(node)
        for i, part in enumerate(parts):
            rest = _and_all(parts[:i] + parts[i + 1:])
            yield Edit("guard-weaken", f"drop{i}", f"drop conjunct {_q(part)} of {_q(node)}",
                       rest, part.span)


def op_where(site: Site) -> Iterator[Edit]:
    """Drop one `where` constraint (or one conjunct of an `&&` in it): the kernel now claims
    more sizes than it was written for."""
    node = site.node
    if not isinstance(node, ast.Kernel):
        return
    for i, item in enumerate(node.where):
        rest = node.where[:i] + node.where[i + 1:]
        yield Edit("where-drop", f"drop{i}", f"drop where {_q(item)}",
                   dataclasses.replace(node, where=rest), item.span)
        parts = _conjuncts(item)
        if len(parts) > 1:
            for j, part in enumerate(parts):
                new_item = _and_all(parts[:j] + parts[j + 1:])
                where = node.where[:i] + (new_item,) + node.where[i + 1:]
                yield Edit("where-drop", f"drop{i}.{j}", f"drop {_q(part)} from where {_q(item)}",
                           dataclasses.replace(node, where=where), part.span)


def op_loop_bound(site: Site) -> Iterator[Edit]:
    """A loop's upper bound one more or one less, its lower bound one more."""
    node = site.node
    if not isinstance(node, ast.For):
        return
    for slug, field, value in (("hi+1", "hi", _plus(node.hi, 1)),
                               ("hi-1", "hi", _plus(node.hi, -1)),
                               ("lo+1", "lo", _plus(node.lo, 1))):
        old = getattr(node, field)
        yield Edit("loop-bound", slug, f"loop {field} {_q(old)} -> {_q(value)}",
                   dataclasses.replace(node, **{field: value}), old.span)


# ---- indices ---------------------------------------------------------------------------------


def _terms(e: ast.Expr) -> list[tuple[str, ast.Expr]]:
    """The top-level additive terms of `e` with their signs (`a - b + c` -> +a, -b, +c)."""
    if isinstance(e, ast.Binary) and e.op in ("+", "-"):
        return _terms(e.lhs) + [(e.op, e.rhs)]
    return [("+", e)]


def _sum(terms: list[tuple[str, ast.Expr]]) -> ast.Expr:
    sign, first = terms[0]
    out: ast.Expr = first if sign == "+" else ast.Unary(first.span, "-", first)
    for sign, t in terms[1:]:
        out = _bin(sign, out, t)
    return out


def _index_fields(node: object) -> tuple[str, str] | None:
    """(field holding the index tuple, family prefix) of a node with indices."""
    if isinstance(node, (ast.Index, ast.Store, ast.BufRef)):
        return "indices", "index"
    if isinstance(node, (ast.TmaLoad, ast.TmaStore)):
        return "coords", "coord"
    return None


def op_index(site: Site) -> Iterator[Edit]:
    """Index components swapped (`t[i, j]` -> `t[j, i]`) and one additive term of a
    component dropped (`t[block.x * 64 + r, c]` -> `t[r, c]`: the forgotten tile offset);
    the same on TMA coordinates."""
    node = site.node
    spec = _index_fields(node)
    if spec is None:
        return
    field, family = spec
    comps: tuple[ast.Expr, ...] = getattr(node, field)
    for i in range(len(comps)):
        for j in range(i + 1, len(comps)):
            if format_expr(comps[i]) == format_expr(comps[j]):
                continue
            swapped = list(comps)
            swapped[i], swapped[j] = comps[j], comps[i]
            yield Edit(f"{family}-swap", f"swap{i}-{j}",
                       f"swap {_q(comps[i])} and {_q(comps[j])}",
                       dataclasses.replace(node, **{field: tuple(swapped)}), comps[i].span)
    for i, c in enumerate(comps):
        terms = _terms(c)
        if len(terms) < 2:
            continue
        for k in range(len(terms)):
            rest = _sum(terms[:k] + terms[k + 1:])
            new = list(comps)
            new[i] = rest
            yield Edit(f"{family}-drop", f"drop{i}.{k}",
                       f"{_q(c)} -> {_q(rest)} (drop `{terms[k][0]} "
                       f"{format_expr(terms[k][1])}`)",
                       dataclasses.replace(node, **{field: tuple(new)}), c.span)


# ---- layouts and tensor maps -------------------------------------------------------------------

_SWIZZLE_HEADS = ("swizzle32B", "swizzle64B", "swizzle128B")


def _tma_buffers(kernel: ast.Kernel) -> set[str]:
    from tilesafe.mutation.sites import walk_stmts

    names = set()
    for s in walk_stmts(kernel.body):
        if isinstance(s, ast.TmaLoad):
            names.add(s.dst.name)
        elif isinstance(s, ast.TmaStore):
            names.add(s.src.name)
    return names


def _layout_text(layout: object) -> str:
    return "row_major (default)" if layout is None else format_layout(layout)


def op_layout_swizzle(site: Site) -> Iterator[Edit]:
    """A shared buffer's swizzle changed: another TMA swizzle head, the swizzle removed, the
    bits of `swizzle(B, M, S, L)` / `Sw<B,M,S>` one more or less, or a 128-byte swizzle
    added to a TMA buffer that has none."""
    node = site.node
    if not isinstance(node, ast.SharedDecl):
        return
    lay = node.layout
    variants: list[tuple[str, object]] = []
    if isinstance(lay, ast.LayoutApp) and lay.head in _SWIZZLE_HEADS:
        for head in _SWIZZLE_HEADS:
            if head != lay.head:
                variants.append((f"{lay.head}>{head}", dataclasses.replace(lay, head=head)))
        if lay.args:
            variants.append(("unswizzle", lay.args[0]))
    elif isinstance(lay, ast.LayoutApp) and lay.head == "swizzle" and lay.args \
            and len(lay.args) == 4 and isinstance(lay.args[0], int):
        b = lay.args[0]
        for nb in (b + 1, b - 1):
            variants.append((f"bits{b}>{nb}",
                             dataclasses.replace(lay, args=(nb, *lay.args[1:]))))
        variants.append(("unswizzle", lay.args[3]))
    elif isinstance(lay, ast.SwizzledLayout):
        for nb in (lay.bits + 1, lay.bits - 1):
            variants.append((f"bits{lay.bits}>{nb}", dataclasses.replace(lay, bits=nb)))
        variants.append(("unswizzle", lay.inner))
    elif node.name in _tma_buffers(site.kernel):
        inner = lay if lay is not None else ast.LayoutApp(node.span, "row_major", None)
        variants.append(("add128B", ast.LayoutApp(node.span, "swizzle128B", (inner,))))
    for slug, new in variants:
        yield Edit("layout-swizzle", slug,
                   f"layout of {node.name}: `{_layout_text(lay)}` -> `{_layout_text(new)}`",
                   dataclasses.replace(node, layout=new))


def _row_col_variants(lay: object) -> Iterator[tuple[str, object]]:
    """Every layout term with one row_major/col_major swapped or one CuTe literal's
    top-level strides reversed."""
    if isinstance(lay, ast.LayoutApp):
        if lay.head in ("row_major", "col_major") and lay.args is None:
            yield (f"{lay.head}>{'col_major' if lay.head == 'row_major' else 'row_major'}",
                   dataclasses.replace(lay, head="col_major" if lay.head == "row_major"
                                       else "row_major"))
        for i, a in enumerate(lay.args or ()):
            for slug, new in _row_col_variants(a):
                args = list(lay.args or ())
                args[i] = new
                yield slug, dataclasses.replace(lay, args=tuple(args))
    elif isinstance(lay, ast.SwizzledLayout):
        for slug, new in _row_col_variants(lay.inner):
            yield slug, dataclasses.replace(lay, inner=new)
    elif isinstance(lay, ast.CuteLayout):
        if isinstance(lay.stride, tuple) and len(lay.stride) > 1 and \
                lay.stride != tuple(reversed(lay.stride)):
            yield "strides-reversed", dataclasses.replace(lay, stride=tuple(reversed(lay.stride)))


def op_row_col(site: Site) -> Iterator[Edit]:
    """Row-major <-> column-major: `row_major`/`col_major` swapped anywhere in a layout
    term, a CuTe literal's strides reversed, `col_major` given to a buffer with none."""
    node = site.node
    if not isinstance(node, ast.SharedDecl):
        return
    lay = node.layout
    if lay is None:
        variants: list[tuple[str, object]] = [
            ("row_major>col_major", ast.LayoutApp(node.span, "col_major", None))]
    else:
        variants = list(_row_col_variants(lay))
    for slug, new in variants:
        yield Edit("row-col", slug,
                   f"layout of {node.name}: `{_layout_text(lay)}` -> `{_layout_text(new)}`",
                   dataclasses.replace(node, layout=new))


def op_tensormap_swizzle(site: Site) -> Iterator[Edit]:
    """A tensor map's swizzle mode changed (none / 32B / 64B / 128B)."""
    node = site.node
    if not isinstance(node, ast.TensormapDecl):
        return
    old = node.swizzle or "none"
    for mode in ("none", "32B", "64B", "128B"):
        if mode != old:
            yield Edit("tensormap-swizzle", f"{old}>{mode}",
                       f"tensormap {node.name}: `swizzle {old}` -> `swizzle {mode}`",
                       dataclasses.replace(node, swizzle=None if mode == "none" else mode))


def op_oob(site: Site) -> Iterator[Edit]:
    """A tensor map's out-of-bounds fill flipped (zero <-> nan)."""
    node = site.node
    if not isinstance(node, ast.TensormapDecl):
        return
    old = node.oob or "zero"
    new = "nan" if old == "zero" else "zero"
    yield Edit("oob-fill", f"{old}>{new}", f"tensormap {node.name}: `oob {old}` -> `oob {new}`",
               dataclasses.replace(node, oob=new))


# ---- the registry ----------------------------------------------------------------------------

# Specific operators first: when two edits print the same mutant, the first one keeps it.
OPERATORS: tuple[tuple[str, Operator], ...] = (
    ("delete", op_delete),
    ("swap-adjacent", op_swap),
    ("parity", op_parity),
    ("expect-tx", op_expect_tx),
    ("arrive-mode", op_arrive_mode),
    ("bar-mode", op_bar_mode),
    ("elect-one", op_elect),
    ("role-range", op_role_range),
    ("fence-kind", op_fence),
    ("cluster", op_cluster),
    ("wait-group", op_wait_group),
    ("guard-weaken", op_guard),
    ("where-drop", op_where),
    ("loop-bound", op_loop_bound),
    ("index", op_index),
    ("layout-swizzle", op_layout_swizzle),
    ("row-col", op_row_col),
    ("tensormap-swizzle", op_tensormap_swizzle),
    ("oob-fill", op_oob),
    ("cmp-swap", op_cmp),
    ("arith-swap", op_arith),
    ("int", op_int),
)

# The families an --operators selector may name (`index` covers index-swap, coord-drop, ...).
FAMILIES: tuple[str, ...] = (
    "delete", "swap-adjacent", "parity", "expect-tx", "arrive-mode", "bar-mode", "elect-one",
    "role-range",
    "fence-kind", "cluster", "wait-group", "guard-weaken", "where-drop", "loop-bound", "index-swap",
    "index-drop", "coord-swap", "coord-drop", "layout-swizzle", "row-col", "tensormap-swizzle",
    "oob-fill", "cmp-swap", "arith-swap", "int",
)


def selected(operator: str, selectors: tuple[str, ...] | None) -> bool:
    """Does an edit's operator name match any selector (a family or a full name)?"""
    if not selectors:
        return True
    return any(operator == s or operator.startswith(s + ".") for s in selectors)


def unknown_selectors(selectors: tuple[str, ...]) -> list[str]:
    """Selectors that name no family and no `family.context` of one."""
    out = []
    for s in selectors:
        family = s.split(".", 1)[0]
        if s not in FAMILIES and family not in ("delete", "int"):
            out.append(s)
    return out
