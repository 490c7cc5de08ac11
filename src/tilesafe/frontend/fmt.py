"""Canonical formatter: syntax tree (+ the comments of the text) -> canonical .tsk text.

Works on the AST, not the IR, so a file that does not type-check can still be formatted.
The layout is fixed (2-space indent, one statement per line, parentheses only where
precedence needs them); only comments and single blank lines are carried over from the
text, because they are the only things a person wrote that the tree does not hold.

Comments are placed by source position: the printer first lays the tree out as lines, each
remembering which source range it came from; a comment then goes at the end of the line
whose range holds it (or that ends on the comment's source line), and an own-line comment
goes above the first line that starts after it.
"""

from __future__ import annotations

import bisect
import dataclasses
import re
from dataclasses import dataclass, field
from functools import lru_cache

from tilesafe.frontend import ast
from tilesafe.frontend.span import NO_SPAN, Span

INDENT = "  "
Pos = tuple[int, int]  # (line, col), 1-based, as lark and the comment spans count them

# ---- expressions ---------------------------------------------------------------------------

_BINARY_PREC = {"||": 1, "&&": 2, "==": 4, "!=": 4, "<": 4, "<=": 4, ">": 4, ">=": 4,
                "+": 5, "-": 5, "*": 6, "/": 6, "%": 6}
_NOT_PREC, _CMP_PREC, _NEG_PREC, _ATOM_PREC = 3, 4, 7, 8


def format_expr(e: ast.Expr) -> str:
    """One expression, with the fewest parentheses that keep its tree, plus the ones that
    keep floor division readable (see `_clarify`)."""
    return _expr(e)[0]


def _expr(e: ast.Expr) -> tuple[str, int]:
    """(text, precedence of its outermost operator)."""
    if isinstance(e, ast.IntLit):
        return str(e.value), _ATOM_PREC
    if isinstance(e, ast.FloatLit):
        return e.text, _ATOM_PREC
    if isinstance(e, ast.Name):
        return e.name, _ATOM_PREC
    if isinstance(e, ast.BlockIdx):
        return f"block.{e.axis}", _ATOM_PREC
    if isinstance(e, ast.Index):
        return f"{e.name}{_cta(e.cta)}[{_exprs(e.indices)}]", _ATOM_PREC
    if isinstance(e, ast.Call):
        return f"{e.func}({_exprs(e.args)})", _ATOM_PREC
    if isinstance(e, ast.Reduce):
        values = ("" if e.values is None else
                  f", {format_expr(e.values[0])} .. {format_expr(e.values[1])}")
        return (f"{e.func}({e.var} in {format_expr(e.lo)} .. {format_expr(e.hi)}: "
                f"{format_expr(e.body)}{values})"), _ATOM_PREC
    if isinstance(e, ast.Unary):
        if e.op == "!":
            return "!" + _operand(e.operand, _NOT_PREC), _NOT_PREC
        inner = _operand(e.operand, _NEG_PREC)
        sep = " " if inner.startswith("-") else ""  # `- -x`, not `--x`
        return "-" + sep + inner, _NEG_PREC
    if isinstance(e, ast.Binary):
        prec = _BINARY_PREC[e.op]
        # Left-associative chains, except comparisons, which do not chain at all.
        lhs_min = prec + 1 if prec == _CMP_PREC else prec
        if _clarify(e):
            lhs_min = prec + 1
        lhs = _operand(e.lhs, lhs_min)
        rhs = _operand(e.rhs, prec + 1)
        return f"{lhs} {e.op} {rhs}", prec
    raise TypeError(f"not an expression: {e!r}")


def _clarify(e: ast.Binary) -> bool:
    """`(k / S) % 2`, not `k / S % 2`: with floor division `a / b % c`, `a * b / c` and
    `a % b * c` mean different things under other groupings, so a left operand that is a
    different multiplicative operator keeps its parentheses when `/` or `%` is involved."""
    lhs = e.lhs
    return (isinstance(lhs, ast.Binary) and e.op in "*/%" and lhs.op in "*/%"
            and lhs.op != e.op and ("/" in (e.op, lhs.op) or "%" in (e.op, lhs.op)))


def _operand(e: ast.Expr, min_prec: int) -> str:
    text, prec = _expr(e)
    return text if prec >= min_prec else f"({text})"


def _exprs(es: tuple[ast.Expr, ...]) -> str:
    return ", ".join(format_expr(e) for e in es)


def _cta(e: ast.Expr | None) -> str:
    """`@1`, `@peer`, `@(cta_rank + 1)`: a peer CTA of the cluster; "" for the own CTA."""
    if e is None:
        return ""
    if isinstance(e, (ast.IntLit, ast.Name)):
        return f"@{format_expr(e)}"
    return f"@({format_expr(e)})"


def _is_atom(e: ast.Expr) -> bool:
    return _expr(e)[1] == _ATOM_PREC


# ---- layouts -------------------------------------------------------------------------------


def _tup(t: object) -> str:
    if isinstance(t, tuple):
        return "(" + ",".join(_tup(x) for x in t) + ")"
    return str(t)


def format_layout(node: object) -> str:
    if isinstance(node, ast.CuteLayout):
        return f"{_tup(node.shape)}:{_tup(node.stride)}"
    if isinstance(node, ast.SwizzledLayout):
        offset = "" if node.offset == 0 else f"{_tup(node.offset)} o "
        return (f"Sw<{node.bits},{node.base},{node.shift}> o {offset}"
                f"{format_layout(node.inner)}")
    if isinstance(node, ast.LayoutApp):
        if node.args is None:
            return node.head
        return f"{node.head}({', '.join(format_layout(a) for a in node.args)})"
    return _tup(node)


# ---- simple statements ---------------------------------------------------------------------


def _bar(ref: ast.BarRef) -> str:
    name = ref.name + _cta(ref.cta)
    return name if ref.index is None else f"{name}[{format_expr(ref.index)}]"


def _sem(scope: str | None, relaxed: bool) -> str:
    """The memory-model options of an mbarrier operation, as written after it."""
    return (", relaxed" if relaxed else "") + (f", scope {scope}" if scope else "")


def _buf(ref: ast.BufRef) -> str:
    return ref.name if not ref.indices else f"{ref.name}[{_exprs(ref.indices)}]"


def format_simple(s: ast.Stmt) -> str:
    """A statement without a body, on one line."""
    if isinstance(s, ast.ConstDecl):
        return f"const {s.name} = {format_expr(s.value)}"
    if isinstance(s, ast.TensormapDecl):
        opts = [s.tensor]
        if s.box is not None:
            opts.append(f"box [{_exprs(s.box)}]")
        if s.swizzle is not None:
            opts.append(f"swizzle {s.swizzle}")
        if s.oob is not None:
            opts.append(f"oob {s.oob}")
        return f"tensormap {s.name} = tiled({', '.join(opts)})"
    if isinstance(s, ast.SharedDecl):
        text = f"shared {s.name}: {s.dtype}[{_exprs(s.shape)}]"
        if s.layout is not None:
            text += f" layout {format_layout(s.layout)}"
        if s.align is not None:
            text += f" align {s.align}"
        return text
    if isinstance(s, ast.MbarrierDecl):
        text = f"mbarrier {s.name}"
        if s.length is not None:
            text += f"[{format_expr(s.length)}]"
        text += f" count {format_expr(s.count)}"
        if s.guards is not None:
            refs = ((s.guards, s.guard_index),) + s.more_guards
            text += " guards " + ", ".join(n if i is None else f"{n}[{i}]" for n, i in refs)
        return text
    if isinstance(s, ast.Let):
        return f"let {s.name} = {format_expr(s.value)}"
    if isinstance(s, ast.VarDecl):
        return f"var {s.name}: {s.dtype} = {format_expr(s.value)}"
    if isinstance(s, ast.Assign):
        return f"{s.name} {s.op} {format_expr(s.value)}"
    if isinstance(s, ast.Store):
        return f"{s.target}{_cta(s.cta)}[{_exprs(s.indices)}] = {format_expr(s.value)}"
    if isinstance(s, ast.Init):
        return f"init {_bar(s.barrier)}"
    if isinstance(s, ast.Fence):
        return f"fence {s.kind}"
    if isinstance(s, ast.Sync):
        return "sync"
    if isinstance(s, ast.Wait):
        return (f"wait {_bar(s.barrier)} parity {format_expr(s.parity)}"
                + _sem(s.scope, s.relaxed))
    if isinstance(s, ast.Arrive):
        text = f"arrive {_bar(s.barrier)}"
        if s.mode == "one":
            text += ", one"
        elif s.mode == "per_warp":
            text += ", one per warp"
        if s.tx_bytes is not None:
            text += f", expect_tx {format_expr(s.tx_bytes)}"
        return text + _sem(s.scope, s.relaxed)
    if isinstance(s, ast.ExpectTx):
        return f"expect_tx {_bar(s.barrier)}, {format_expr(s.nbytes)}"
    if isinstance(s, ast.TmaLoad):
        cast = "" if s.multicast is None else f", multicast {format_expr(s.multicast)}"
        return (f"tma_load {_buf(s.dst)} <- {s.tensormap}[{_exprs(s.coords)}] "
                f"signal {_bar(s.barrier)}{cast}")
    if isinstance(s, ast.TmaStore):
        return f"tma_store {s.tensormap}[{_exprs(s.coords)}] <- {_buf(s.src)}"
    if isinstance(s, ast.CommitGroup):
        return "commit_group"
    if isinstance(s, ast.ClusterBarrier):
        if s.arrive and s.wait:
            return "cluster_sync"
        return "cluster_wait" if s.wait else "cluster_arrive" + (" relaxed" if s.relaxed else "")
    if isinstance(s, ast.NamedBar):
        op = "bar_arrive" if s.arrive else "bar_sync"
        return f"{op} {format_expr(s.bar_id)}, {format_expr(s.count)}"
    if isinstance(s, ast.WaitGroup):
        return f"wait_group {s.pending}" + (" read" if s.read else "")
    if isinstance(s, ast.FragmentDecl):
        return f"fragment {s.name}: {s.dtype}[{_exprs(s.shape)}]"
    if isinstance(s, ast.Wgmma):
        text = f"wgmma {s.acc} {s.op} {_tile(s.a)} @ {_tile(s.b)}"
        return text + (f", scale_d {format_expr(s.scale_d)}" if s.scale_d is not None else "")
    if isinstance(s, ast.WgmmaFence):
        return "wgmma_fence"
    if isinstance(s, ast.WgmmaCommit):
        return "wgmma_commit"
    if isinstance(s, ast.WgmmaWait):
        return f"wgmma_wait {s.pending}"
    if isinstance(s, ast.SetMaxNReg):
        return f"setmaxnreg {'inc' if s.inc else 'dec'} {s.count}"
    raise TypeError(f"not a simple statement: {type(s).__name__}")


def _tile(t: ast.MmaTile) -> str:
    parts = [format_expr(i.start) if i.extent is None else
             f"{format_expr(i.start)} : {format_expr(i.extent)}" for i in t.index]
    return f"{t.buffer}[{', '.join(parts)}]" + (".T" if t.transposed else "")


def _thread_set(ts: ast.ThreadSet) -> str:
    if ts.kind == "warp":
        return f"warp {format_expr(ts.lo)}"
    assert ts.hi is not None
    return f"{ts.kind} {format_expr(ts.lo)} .. {format_expr(ts.hi)}"


@lru_cache(maxsize=1)
def _keyword_patterns() -> tuple[re.Pattern[str], ...]:
    """Every non-NAME terminal of the grammar that can also read as a name (`read`,
    `guards`, `else`, ...): a statement starting with such a name may be swallowed by the
    statement before it unless a `;` separates them."""
    from tilesafe.frontend.parser import _parser

    out = []
    for term in _parser().terminals:
        if term.name != "NAME":
            out.append(re.compile(term.pattern.to_regexp()))
    return tuple(out)


@lru_cache(maxsize=256)
def _needs_separator(name: str) -> bool:
    return any(p.fullmatch(name) for p in _keyword_patterns())


def _starts_with_keyword_name(s: ast.Stmt) -> bool:
    if isinstance(s, ast.Assign):
        return _needs_separator(s.name)
    if isinstance(s, ast.Store):
        return _needs_separator(s.target)
    return False


MAX_WIDTH = 100
_ASSIGNING = (ast.Let, ast.VarDecl, ast.Assign, ast.Store, ast.ConstDecl)


def _wrap(indent: int, s: ast.Stmt, text: str) -> str:
    """A binding or store wider than MAX_WIDTH breaks after its `=` (the value goes on a
    continuation line one level deeper), a wgmma before its `scale_d` clause; nothing else
    is ever broken."""
    if len(INDENT * indent + text) <= MAX_WIDTH:
        return text
    if isinstance(s, ast.Wgmma) and s.scale_d is not None:
        clause = f"scale_d {format_expr(s.scale_d)}"
        head = text[: len(text) - len(clause)].rstrip()
        return f"{head}\n{INDENT * (indent + 1)}{clause}"
    if not isinstance(s, _ASSIGNING):
        return text
    value = format_expr(s.value)
    head = text[: len(text) - len(value)].rstrip()
    return f"{head}\n{INDENT * (indent + 1)}{value}"


def _header(k: ast.Kernel) -> str:
    """`kernel name(params)`; past MAX_WIDTH the parameters continue on lines aligned
    under the first one, as many to a line as fit."""
    params = [f"{p.name}: {p.role + ' ' if p.role else ''}global {p.dtype}[{_exprs(p.shape)}]"
              for p in k.params]
    opening = f"kernel {k.name}("
    one_line = opening + ", ".join(params) + ")"
    if len(one_line) <= MAX_WIDTH or len(params) < 2:
        return one_line
    lines, current = [], opening
    for i, p in enumerate(params):
        piece = p + ("," if i < len(params) - 1 else ")")
        fresh = current in (opening, " " * len(opening))
        if not fresh and len(current) + 1 + len(piece) > MAX_WIDTH:
            lines.append(current)
            current = " " * len(opening)
            fresh = True
        current += piece if fresh else " " + piece
    lines.append(current)
    return "\n".join(lines)


# ---- layout into lines ---------------------------------------------------------------------


@dataclass
class _Line:
    indent: int
    text: str
    start: Pos  # where in the source the first thing on this line came from
    end: Pos  # where in the source the last thing on this line ended
    closing: bool = False  # starts with '}': comments above it belong inside the block
    blank_ok: bool = True  # may be preceded by a blank line kept from the source
    new_kernel: bool = False  # a blank line always separates kernels
    leading: list[ast.Comment] = field(default_factory=list)
    trailing: list[ast.Comment] = field(default_factory=list)


def _start(span: Span) -> Pos:
    return (span.line, span.col)


def _end(span: Span) -> Pos:
    return (span.end_line, span.end_col)


def _close_brace(block: ast.Block) -> Pos:
    return (block.span.end_line, block.span.end_col - 1)


class _Layout:
    """Lays out a module as `_Line`s in source order."""

    def __init__(self, comments: tuple[ast.Comment, ...]):
        self.lines: list[_Line] = []
        self.comment_starts = sorted(_start(c.span) for c in comments)

    def emit(self, indent: int, text: str, start: Pos, end: Pos, **kw: bool) -> None:
        self.lines.append(_Line(indent, text, start, end, **kw))

    def has_comment_inside(self, block: ast.Block) -> bool:
        lo = (block.span.line, block.span.col + 1)
        i = bisect.bisect_left(self.comment_starts, lo)
        return i < len(self.comment_starts) and self.comment_starts[i] < _close_brace(block)

    def module(self, m: ast.Module) -> None:
        for k in m.kernels:
            self.kernel(k)

    def kernel(self, k: ast.Kernel) -> None:
        header_end = _end(k.params[-1].span) if k.params else _start(k.span)
        self.emit(0, _header(k), _start(k.span), header_end, new_kernel=True)
        if k.where:
            self.emit(1, f"where {_exprs(k.where)}", _start(k.where[0].span),
                      _end(k.where[-1].span), blank_ok=False)
        for facts in k.specialize:
            self.emit(1, f"specialize {_exprs(facts)}", _start(facts[0].span),
                      _end(facts[-1].span), blank_ok=False)
        if len(k.grid) == 1:
            g = k.grid[0]
            grid = format_expr(g) if _is_atom(g) else f"({format_expr(g)})"
        else:
            grid = f"({_exprs(k.grid)})"
        launch = f"grid {grid} block {format_expr(k.block_dim)}"
        end = _end(k.block_dim.span)
        if k.cluster:
            one = len(k.cluster) == 1 and _is_atom(k.cluster[0])
            launch += f" cluster {_exprs(k.cluster) if one else f'({_exprs(k.cluster)})'}"
            end = _end(k.cluster[-1].span)
        self.emit(1, launch, _start(k.grid[0].span), end, blank_ok=False)
        for r in k.requires:
            self.emit(1, f"requires {format_expr(r.cond)}", _start(r.span), _end(r.span),
                      blank_ok=False)
        for c in k.ensures:
            tested = f"{c.modifier} " if c.modifier else ""
            self.emit(1, f"ensures {tested}{c.tensor}[{', '.join(c.index_vars)}] == "
                      f"{format_expr(c.rhs)}", _start(c.span), _end(c.span), blank_ok=False)
        body = k.body
        self.emit(0, "{", _start(body.span), (body.span.line, body.span.col + 1),
                  blank_ok=False)
        self.stmts(body.stmts, 1)
        brace = _close_brace(body)
        self.emit(0, "}", brace, _end(body.span), closing=True, blank_ok=False)

    def stmts(self, stmts: tuple[ast.Stmt, ...], indent: int) -> None:
        for i, s in enumerate(stmts):
            self.stmt(s, indent)
            if i + 1 < len(stmts) and _starts_with_keyword_name(stmts[i + 1]):
                self.lines[-1].text += ";"

    def stmt(self, s: ast.Stmt, indent: int) -> None:
        if isinstance(s, ast.For):
            head = f"for {s.var} in {format_expr(s.lo)} .. {format_expr(s.hi)}"
            if s.step is not None:
                head += f" step {format_expr(s.step)}"
            self.open_block(indent, head, _start(s.span), s.body, last=True)
        elif isinstance(s, ast.Role):
            head = f"role {s.name} = {_thread_set(s.threads)}"
            if s.elect_one:
                head += ", elect one"
            self.open_block(indent, head, _start(s.span), s.body, last=True)
        elif isinstance(s, ast.If):
            self.if_chain(s, indent, f"if {format_expr(s.cond)}", _start(s.span))
        else:
            self.emit(indent, _wrap(indent, s, format_simple(s)), _start(s.span), _end(s.span))

    def if_chain(self, s: ast.If, indent: int, head: str, start: Pos) -> None:
        self.open_block(indent, head, start, s.then, last=s.orelse is None)
        if s.orelse is None:
            return
        brace = _close_brace(s.then)
        if isinstance(s.orelse, ast.If):
            self.if_chain(s.orelse, indent, f"}} else if {format_expr(s.orelse.cond)}", brace)
        else:
            self.open_block(indent, "} else", brace, s.orelse, last=True)

    def open_block(self, indent: int, head: str, start: Pos, body: ast.Block,
                   last: bool) -> None:
        """`head {`, the body one level deeper, and (if `last`) the closing `}`.
        An empty, comment-free block that ends the statement prints as `head {}`."""
        closing = head.startswith("}")
        if last and not body.stmts and not self.has_comment_inside(body):
            self.emit(indent, head + " {}", start, _end(body.span), closing=closing,
                      blank_ok=not closing)
            return
        self.emit(indent, head + " {", start, (body.span.line, body.span.col + 1),
                  closing=closing, blank_ok=not closing)
        self.stmts(body.stmts, indent + 1)
        if last:
            self.emit(indent, "}", _close_brace(body), _end(body.span), closing=True,
                      blank_ok=False)


# ---- comments ------------------------------------------------------------------------------


class _Source:
    """Offsets of the text, to ask what surrounds a comment."""

    def __init__(self, text: str):
        self.text = text
        self.line_starts = [0] + [m.end() for m in re.finditer("\n", text)]

    def offset(self, pos: Pos) -> int:
        line, col = pos
        if line - 1 >= len(self.line_starts):
            return len(self.text)
        return min(self.line_starts[line - 1] + col - 1, len(self.text))

    def first_on_line(self, pos: Pos) -> bool:
        """Only whitespace precedes `pos` on its line."""
        off = self.offset(pos)
        return self.text[self.line_starts[pos[0] - 1]:off].strip() == ""

    def blank_before(self, pos: Pos) -> bool:
        """`pos` opens its line and the line above it is blank."""
        line = pos[0]
        if line < 2 or not self.first_on_line(pos):
            return False
        above = self.text[self.line_starts[line - 2]:self.line_starts[line - 1]]
        return above.strip() == ""


def _attach(lines: list[_Line], comments: tuple[ast.Comment, ...], src: _Source
            ) -> list[ast.Comment]:
    """Give each comment to a line (leading or trailing); returns those after the last."""
    starts = [ln.start for ln in lines]
    tail: list[ast.Comment] = []
    for c in sorted(comments, key=lambda c: _start(c.span)):
        cs, ce = _start(c.span), _end(c.span)
        i = bisect.bisect_right(starts, cs) - 1
        if i >= 0 and (cs < lines[i].end or not src.first_on_line(cs)):
            lines[i].trailing.append(c)
            continue
        j = bisect.bisect_left(starts, ce)
        if j < len(lines):
            lines[j].leading.append(c)
        else:
            tail.append(c)
    return tail


def _comment_text(c: ast.Comment) -> str:
    return c.text.rstrip() if c.text.startswith("//") else c.text


def _render(lines: list[_Line], tail: list[ast.Comment], src: _Source) -> str:
    out: list[str] = []
    after_open = True  # right after `{` (or at the top of the file): no blank line

    def put(indent: int, text: str, pos: Pos, blank_ok: bool, force_blank: bool) -> None:
        nonlocal after_open
        if out and (force_blank or (blank_ok and not after_open and src.blank_before(pos))):
            out.append("")
        out.append(INDENT * indent + text)
        after_open = False

    for n, line in enumerate(lines):
        force = line.new_kernel and n > 0
        lead_indent = line.indent + 1 if line.closing else line.indent
        for k, c in enumerate(line.leading):
            put(lead_indent, _comment_text(c), _start(c.span), True, force and k == 0)
        force = force and not line.leading
        text = line.text
        overflow: list[ast.Comment] = []
        closed = False  # a `//` comment ends the line: later comments go below it
        for c in line.trailing:
            if closed:
                overflow.append(c)
            else:
                text += " " + _comment_text(c)
                closed = c.text.startswith("//")
        put(line.indent, text, line.start, line.blank_ok, force)
        after_open = line.text.endswith("{")
        if overflow:
            nxt = lines[n + 1] if n + 1 < len(lines) else None
            if nxt is None:
                indent = 0
            else:
                indent = nxt.indent + 1 if nxt.closing else nxt.indent
            for c in overflow:
                out.append(INDENT * indent + _comment_text(c))
            after_open = False
    for c in tail:
        put(0, _comment_text(c), _start(c.span), True, False)
    return "\n".join(out) + "\n"


def format_module(module: ast.Module, source: str) -> str:
    """The canonical text of a parsed file; `source` is the text it was parsed from (for
    comments and blank lines)."""
    layout = _Layout(module.comments)
    layout.module(module)
    src = _Source(source)
    tail = _attach(layout.lines, module.comments, src)
    if not layout.lines:
        return "\n".join(_comment_text(c) for c in tail) + ("\n" if tail else "")
    return _render(layout.lines, tail, src)


def format_source(text: str, path: str = "<input>") -> str:
    """Parse and format (raises DiagnosticError when the text does not parse)."""
    from tilesafe.frontend.parser import parse

    return format_module(parse(text, path), text)


# ---- comparing meaning ---------------------------------------------------------------------


def without_spans(value: object) -> object:
    """`value` with every Span replaced by NO_SPAN, recursively: two trees that differ only
    in where their text sat compare equal."""
    if isinstance(value, Span):
        return NO_SPAN
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        changes = {f.name: without_spans(getattr(value, f.name))
                   for f in dataclasses.fields(value)}
        return dataclasses.replace(value, **changes)
    if isinstance(value, tuple):
        return tuple(without_spans(v) for v in value)
    if isinstance(value, list):
        return [without_spans(v) for v in value]
    if isinstance(value, dict):
        return {k: without_spans(v) for k, v in value.items()}
    return value
