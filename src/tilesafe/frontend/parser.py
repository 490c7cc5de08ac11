"""Text -> syntax tree. Lark does the parsing; this module turns its trees into `ast` nodes
and its exceptions into TS0xx diagnostics with what was expected."""

from __future__ import annotations

import bisect
import hashlib
import os
import re
import sys
from functools import lru_cache
from importlib import resources
from pathlib import Path

import lark
from lark import Lark, Token, v_args

from tilesafe.frontend import ast
from tilesafe.frontend import diagnostics as dg
from tilesafe.frontend.diagnostics import Diagnostic, DiagnosticError
from tilesafe.frontend.parse_sync import SyncRules
from tilesafe.frontend.span import Span


@lru_cache(maxsize=1)
def _parser() -> Lark:
    """The LALR(1) parser, its tables loaded from the user's cache when a previous process
    built them for this very grammar. Why: building the tables takes ~0.3 s of CPU, a third
    of a cold `tilesafe verify` of a small kernel (issue 19). Lark checks a digest of the
    grammar, the options, its own version and Python's before it trusts the cached tables,
    and rebuilds (and rewrites) them on any mismatch or unreadable file."""
    text = resources.files("tilesafe.grammar").joinpath("tilesafe.lark").read_text()
    return Lark(text, parser="lalr", propagate_positions=True, maybe_placeholders=True,
                cache=_cache_file(text) or False)


def _cache_file(grammar: str) -> str | None:
    """A per-user file for the parser tables of `grammar` (TILESAFE_CACHE_DIR, else the
    platform's user cache directory, + tilesafe/parser), or None when that directory cannot
    be made. Per user and not in the shared temporary directory: the file is a pickle, and
    nobody else should be able to plant one."""
    root = os.environ.get("TILESAFE_CACHE_DIR")
    try:
        if root:
            base = Path(root)
        elif sys.platform == "win32":
            base = Path(os.environ.get("LOCALAPPDATA") or Path.home() / "AppData" / "Local")
        elif sys.platform == "darwin":
            base = Path.home() / "Library" / "Caches"
        else:
            base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
        folder = (base if root else base / "tilesafe") / "parser"
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    except (OSError, RuntimeError, KeyError):  # no home directory, a read-only one
        return None
    digest = hashlib.sha256(grammar.encode()).hexdigest()[:16]
    return str(folder / f"lalr-{digest}-lark{lark.__version__}-py{sys.version_info[0]}"
                        f"{sys.version_info[1]}.pickle")


_COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)


# How deeply blocks and operators may nest (docs/language.md, section 8). Every stage after
# the parser walks the tree recursively; real kernels nest fewer than 10 levels, and 100
# keeps the deepest walk (the formatter's, the interpreter's closures) far below Python's
# recursion limit, which an `if` nested about 250 deep used to exhaust (exit 3).
MAX_NESTING = 100
# Integer literals fit a signed 64-bit register: nothing a GPU kernel indexes or counts is
# larger, and Python refuses to convert literals past 4300 digits at all (exit 3 before).
# Arithmetic on them stays exact (constant folding may go past 2^63).
MAX_LITERAL = 2**63 - 1
_CHAINS = frozenset({"or_expr", "and_expr", "cmp_expr", "sum_expr", "product"})
_EXPRS = _CHAINS | {"not_op", "neg", "int_lit", "float_lit", "name_ref", "index_expr", "call",
                    "block_idx", "remote_index_expr"}


def parse(text: str, path: str = "<input>") -> ast.Module:
    """Parse a whole .tsk file. Raises DiagnosticError on the first syntax error."""
    if text.startswith(dg.BOM):  # a space, so every column stays what an editor shows
        text = " " + text[1:]
    try:
        tree = _parser().parse(text)
    except lark.exceptions.UnexpectedInput as err:
        unclosed = _unclosed_comment(text)
        if unclosed is not None and _error_offset(err, text) >= unclosed:
            span = _offset_span(text, path, unclosed, unclosed + 2)
            diag = Diagnostic(dg.EARLY_EOF, "unterminated block comment", span,
                              hint="the comment opened here never closes: add '*/'")
            raise DiagnosticError([diag]) from None
        raise DiagnosticError([_syntax_diagnostic(err, text, path)]) from None
    too_deep = _too_deep(tree)
    if too_deep is not None:
        span = _span(path, too_deep.meta)
        raise DiagnosticError([Diagnostic(
            dg.TOO_DEEP, f"blocks and expressions nest more than {MAX_NESTING} levels deep "
            "here", span, hint="split the expression with `let`s, or flatten the nested "
            "blocks")]) from None
    try:
        kernels = _ToAst(path).transform(tree)
    except lark.exceptions.VisitError as err:  # a rule refused its text (TS026 literal)
        if isinstance(err.orig_exc, DiagnosticError):
            raise err.orig_exc from None
        raise
    lines = _LineIndex(text)
    comments = tuple(
        ast.Comment(lines.span(path, m.start(), m.end()), m.group(0))
        for m in _COMMENT.finditer(text)
    )
    return ast.Module(path, tuple(kernels), comments)


def _too_deep(tree: lark.Tree) -> lark.Tree | None:
    """The first node nested deeper than MAX_NESTING, or None; iterative, so any depth is
    measured safely. A block counts one level, an operator one (a chain `a + b + c` of n
    operands n - 1, as the syntax tree nests it), everything else none."""
    stack = [(tree, 0)]
    while stack:
        node, depth = stack.pop()
        kind = node.data
        if kind == "block":
            depth += 1
        elif kind in _EXPRS:
            operands = sum(isinstance(c, lark.Tree) for c in node.children)
            depth += max(1, operands - 1) if kind in _CHAINS else 1
        if depth > MAX_NESTING:
            return node
        # reversed: the first node popped is the leftmost, so the report is the first
        # place in the text where the limit is crossed
        stack.extend((c, depth) for c in reversed(node.children) if isinstance(c, lark.Tree))
    return None


_COMMENT_OR_OPEN = re.compile(r"//[^\n]*|/\*.*?\*/|/\*", re.S)


def _unclosed_comment(text: str) -> int | None:
    """Offset of a `/*` that no `*/` closes (everything after it is inside the comment, so
    the parser's complaint about the next token would point at the wrong thing)."""
    for m in _COMMENT_OR_OPEN.finditer(text):
        if m.group(0) == "/*":
            return m.start()
    return None


def _error_offset(err: lark.exceptions.UnexpectedInput, text: str) -> int:
    if isinstance(err, lark.exceptions.UnexpectedToken) and err.token.type == "$END":
        return len(text)
    pos = getattr(err, "pos_in_stream", None)
    if isinstance(pos, int):
        return pos
    token = getattr(err, "token", None)
    start = getattr(token, "start_pos", None)
    return start if isinstance(start, int) else len(text)


class _LineIndex:
    """Offsets -> (line, col) by binary search over the line starts: one pass over the text,
    then O(log lines) per position. (Counting newlines per comment was quadratic: 1 MB of
    comments took 8-25 s to lint.)"""

    def __init__(self, text: str):
        self.starts = [0] + [m.end() for m in re.finditer("\n", text)]

    def position(self, offset: int) -> tuple[int, int]:
        line = bisect.bisect_right(self.starts, offset)
        return line, offset - self.starts[line - 1] + 1

    def span(self, path: str, start: int, end: int) -> Span:
        return Span(path, *self.position(start), *self.position(end))


def _offset_span(text: str, path: str, start: int, end: int) -> Span:
    """The span of text[start:end] (for a single position; use _LineIndex for many)."""
    return _LineIndex(text).span(path, start, end)


# ---- error translation ---------------------------------------------------------------------

_PUNCT = {
    "LPAR": "'('", "RPAR": "')'", "LSQB": "'['", "RSQB": "']'", "LBRACE": "'{'",
    "RBRACE": "'}'", "COMMA": "','", "COLON": "':'", "SEMICOLON": "';'", "DOT": "'.'",
    "EQUAL": "'='", "BANG": "'!'", "MINUS": "'-'", "$END": "end of file",
    "NAME": "a name", "INT": "an integer", "SIGNED_INT": "an integer", "FLOAT": "a number",
    "DTYPE": "a dtype (f16, bf16, f32, i32, u8)", "CMP_OP": "a comparison",
    "ADD_OP": "'+' or '-'", "MUL_OP": "'*', '/' or '%'", "ASSIGN_OP": "'=', '+=', '-=' or '*='",
    "SWIZZLE_MODE": "a swizzle mode (none, 32B, 64B, 128B)", "OOB_FILL": "'zero' or 'nan'",
    "FENCE_KIND": "'mbarrier_init' or 'proxy_async'", "ELECT_ONE": "'elect one'",
    "WAIT_READ": "'read'", "STATIC_INT": "an integer", "SW_OPEN": "'Sw<'",
    "COMPOSE": "'o'", "PARAM_ROLE": "a role (in, out, inout)",
}


def _describe_terminal(name: str) -> str:
    if name in _PUNCT:
        return _PUNCT[name]
    try:
        term = _parser().get_terminal(name)
    except KeyError:
        return name.lower()
    pattern = term.pattern
    if isinstance(pattern, lark.lexer.PatternStr):
        return f"'{pattern.value}'"
    return name.lower()


def _expected(names: set[str] | frozenset[str] | None) -> str:
    if not names:
        return ""
    described = sorted({_describe_terminal(n) for n in names})
    if len(described) > 12:
        described = described[:12] + ["..."]
    return ", ".join(described)


def _syntax_diagnostic(err: lark.exceptions.UnexpectedInput, text: str, path: str) -> Diagnostic:
    line = getattr(err, "line", 1) or 1
    col = getattr(err, "column", 1) or 1
    if isinstance(err, lark.exceptions.UnexpectedCharacters):
        char = text[err.pos_in_stream] if err.pos_in_stream < len(text) else "?"
        span = Span(path, line, col, line, col + 1)
        expected = _expected(err.allowed)
        hint = f"expected {expected}" if expected else None
        return Diagnostic(dg.BAD_CHAR, f"unexpected character {char!r}", span, hint=hint)
    if isinstance(err, lark.exceptions.UnexpectedToken):
        token = err.token
        expected = _expected(err.expected)
        if token.type == "$END":
            end = _offset_span(text, path, len(text), len(text))
            return Diagnostic(
                dg.EARLY_EOF, f"unexpected end of file; expected {expected}", end
            )
        span = Span(path, token.line, token.column, token.end_line or token.line,
                    token.end_column or token.column + 1)
        return Diagnostic(
            dg.SYNTAX, f"unexpected {_token_text(token)}; expected {expected}", span
        )
    end = _offset_span(text, path, len(text), len(text))
    return Diagnostic(dg.EARLY_EOF, "unexpected end of file", end)


def _token_text(token: Token) -> str:
    value = str(token)
    if len(value) > 20:
        value = value[:17] + "..."
    return f"'{value}'"


# ---- tree -> ast ---------------------------------------------------------------------------


def _span(path: str, meta: object) -> Span:
    if getattr(meta, "empty", True):
        return Span(path, 0, 0, 0, 0)
    return Span(path, meta.line, meta.column, meta.end_line, meta.end_column)


def _tok_span(path: str, tok: Token) -> Span:
    return Span(path, tok.line, tok.column, tok.end_line or tok.line,
                tok.end_column or tok.column + len(tok))


@v_args(meta=True)
class _ToAst(SyncRules):
    """One method per grammar rule; each builds the matching `ast` node with its span (the
    rules of synchronisation, copies, clusters and tensor cores in frontend/parse_sync.py)."""

    def __init__(self, path: str):
        super().__init__()
        self.path = path

    def _s(self, meta: object) -> Span:
        return _span(self.path, meta)

    def _int(self, tok: Token) -> int:
        """An integer literal, at most MAX_LITERAL in magnitude (TS026 otherwise)."""
        text = str(tok).removeprefix("_")  # `_64`: CuTe's static-int spelling
        digits = text.lstrip("-")
        if len(digits) <= 19 and int(digits) <= MAX_LITERAL:
            return int(text)
        shown = digits if len(digits) <= 24 else f"{digits[:10]}...({len(digits)} digits)"
        raise DiagnosticError([Diagnostic(
            dg.BAD_VALUE, f"integer literal {shown} is out of range: literals are below "
            "2^63", _tok_span(self.path, tok))])

    # kernels
    def start(self, meta, items):
        return items

    def kernel(self, meta, items):
        name, *rest = items
        params = tuple(i for i in rest if isinstance(i, ast.Param))
        where = next((i for i in rest if isinstance(i, tuple) and i and i[0] == "where"), None)
        launch = next(i for i in rest if isinstance(i, tuple) and i and i[0] == "launch")
        body = rest[-1]
        ensures = tuple(i for i in rest if isinstance(i, ast.Ensures))
        special = tuple(i[1] for i in rest if isinstance(i, tuple) and i and i[0] == "specialize")
        requires = tuple(i for i in rest if isinstance(i, ast.Requires))
        return ast.Kernel(self._s(meta), str(name), params, where[1] if where else (),
                          launch[1], launch[2], body, ensures, special, requires,
                          launch[3])

    def requires_clause(self, meta, items):
        return ast.Requires(self._s(meta), items[0])

    def ensures_clause(self, meta, items):
        modifier, name, *rest = items
        rhs = rest[-1]
        return ast.Ensures(self._s(meta), str(name), tuple(str(v) for v in rest[:-1]), rhs,
                           None if modifier is None else str(modifier),
                           None if modifier is None else _tok_span(self.path, modifier))

    def param(self, meta, items):
        name, *rest = items
        role = None
        if isinstance(rest[0], Token) and rest[0].type == "PARAM_ROLE":
            role = str(rest.pop(0))
        dtype, *shape = rest
        return ast.Param(self._s(meta), str(name), str(dtype), tuple(shape), role)

    def where_clause(self, meta, items):
        return ("where", tuple(items))

    def specialize_clause(self, meta, items):
        return ("specialize", tuple(items))

    def launch(self, meta, items):
        cluster = items[2] if items[2] is not None else ()
        return ("launch", items[0], items[1], cluster)

    def grid_1d(self, meta, items):
        return (items[0],)

    def grid_nd(self, meta, items):
        return tuple(i for i in items if i is not None)

    def block(self, meta, items):
        return ast.Block(self._s(meta), tuple(i for i in items if isinstance(i, ast.Stmt)))

    # declarations
    def const_decl(self, meta, items):
        return ast.ConstDecl(self._s(meta), str(items[0]), items[1])

    def tensormap_decl(self, meta, items):
        name, tensor, *opts = items
        box = swizzle = oob = None
        for kind, value in opts:
            if kind == "box":
                box = value
            elif kind == "swizzle":
                swizzle = value
            else:
                oob = value
        return ast.TensormapDecl(self._s(meta), str(name), str(tensor), box, swizzle, oob)

    def tm_box(self, meta, items):
        return ("box", tuple(items))

    def tm_swizzle(self, meta, items):
        return ("swizzle", str(items[0]))

    def tm_oob(self, meta, items):
        return ("oob", str(items[0]))

    def shared_decl(self, meta, items):
        name, dtype, *rest = items
        shape = tuple(i for i in rest if isinstance(i, ast.Expr))
        layout = next((i for i in rest if isinstance(i, ast.LayoutNode)), None)
        align_tok = next((i for i in rest if isinstance(i, Token) and i.type == "INT"), None)
        align = self._int(align_tok) if align_tok is not None else None
        return ast.SharedDecl(self._s(meta), str(name), str(dtype), shape, layout, align)

    def guard_ref(self, meta, items):
        return ("guard", str(items[0]), str(items[1]) if len(items) > 1 else None)

    def mbarrier_decl(self, meta, items):
        name = str(items[0])
        exprs = [i for i in items[1:] if isinstance(i, ast.Expr)]
        refs = [i[1:] for i in items[1:] if isinstance(i, tuple) and i and i[0] == "guard"]
        length, count = (exprs[0], exprs[1]) if len(exprs) == 2 else (None, exprs[0])
        guards, guard_index = refs[0] if refs else (None, None)
        return ast.MbarrierDecl(self._s(meta), name, length, count, guards, guard_index,
                                tuple(refs[1:]))

    def cute_layout(self, meta, items):
        return ast.CuteLayout(self._s(meta), items[0], items[1])

    def swizzled_layout(self, meta, items):
        bits, base, shift = (self._int(t) for t in items if isinstance(t, Token)
                             and t.type == "SIGNED_INT")
        offsets = [i for i in items[:-1] if not isinstance(i, Token)]
        offset = offsets[0] if offsets else 0
        return ast.SwizzledLayout(self._s(meta), bits, base, shift, offset, items[-1])

    def layout_app(self, meta, items):
        head = str(items[0])
        if len(items) == 1:
            return ast.LayoutApp(self._s(meta), head, None)
        args = tuple(i for i in items[1:] if i is not None)
        return ast.LayoutApp(self._s(meta), head, args)

    def tup_int(self, meta, items):
        return self._int(items[0])  # also `_64`: CuTe's static-int spelling

    def tup_nest(self, meta, items):
        return tuple(items)

    # scalar statements
    def let_stmt(self, meta, items):
        return ast.Let(self._s(meta), str(items[0]), items[1])

    def var_decl(self, meta, items):
        return ast.VarDecl(self._s(meta), str(items[0]), str(items[1]), items[2])

    def assign_stmt(self, meta, items):
        return ast.Assign(self._s(meta), str(items[0]), str(items[1]), items[2])

    def store_stmt(self, meta, items):
        name, cta, *exprs = items
        return ast.Store(self._s(meta), str(name), tuple(exprs[:-1]), exprs[-1], cta)

    # `@r`: the CTA of the cluster a reference names
    def cta_int(self, meta, items):
        return ast.IntLit(self._s(meta), self._int(items[0]))

    def cta_name(self, meta, items):
        return ast.Name(self._s(meta), str(items[0]))

    def cta_expr(self, meta, items):
        return items[0]

    def for_stmt(self, meta, items):
        var, lo, hi, *rest = items
        step = rest[0] if len(rest) == 2 else None
        return ast.For(self._s(meta), str(var), lo, hi, step, rest[-1])

    def if_stmt(self, meta, items):
        cond, then, *rest = items
        orelse = rest[0] if rest else None
        return ast.If(self._s(meta), cond, then, orelse)

    def role_stmt(self, meta, items):
        name, threads, *rest = items
        elect = any(isinstance(i, Token) and i.type == "ELECT_ONE" for i in rest)
        return ast.Role(self._s(meta), str(name), threads, elect, rest[-1])

    def ts_warp(self, meta, items):
        return ast.ThreadSet(self._s(meta), "warp", items[0], None)

    def ts_warps(self, meta, items):
        return ast.ThreadSet(self._s(meta), "warps", items[0], items[1])

    def ts_threads(self, meta, items):
        return ast.ThreadSet(self._s(meta), "threads", items[0], items[1])

    # expressions
    def _chain(self, meta, items):
        result = items[0]
        for op, rhs in zip(items[1::2], items[2::2], strict=True):
            span = Span(self.path, result.span.line, result.span.col, rhs.span.end_line,
                        rhs.span.end_col)
            result = ast.Binary(span, str(op), result, rhs)
        return result

    def or_expr(self, meta, items):
        ops = [Token("OR", "||")] * (len(items) - 1)
        return self._chain(meta, _interleave(items, ops))

    def and_expr(self, meta, items):
        ops = [Token("AND", "&&")] * (len(items) - 1)
        return self._chain(meta, _interleave(items, ops))

    def cmp_expr(self, meta, items):
        return self._chain(meta, items)

    sum_expr = _chain
    product = _chain

    def not_op(self, meta, items):
        return ast.Unary(self._s(meta), "!", items[0])

    def neg(self, meta, items):
        return ast.Unary(self._s(meta), "-", items[0])

    def int_lit(self, meta, items):
        return ast.IntLit(self._s(meta), self._int(items[0]))

    def float_lit(self, meta, items):
        return ast.FloatLit(self._s(meta), str(items[0]))

    def name_ref(self, meta, items):
        return ast.Name(self._s(meta), str(items[0]))

    def index_expr(self, meta, items):
        return ast.Index(self._s(meta), str(items[0]), tuple(items[1:]))

    def remote_index_expr(self, meta, items):
        return ast.Index(self._s(meta), str(items[0]), tuple(items[2:]), items[1])

    def call(self, meta, items):
        args = tuple(i for i in items[1:] if i is not None)
        return ast.Call(self._s(meta), str(items[0]), args)

    def reduce_expr(self, meta, items):
        func, var, lo, hi, body, *values = items
        return ast.Reduce(self._s(meta), str(func), str(var), lo, hi, body,
                          (values[0], values[1]) if values else None)

    def block_idx(self, meta, items):
        return ast.BlockIdx(self._s(meta), str(items[0]))


def _interleave(values: list, ops: list) -> list:
    out = [values[0]]
    for op, value in zip(ops, values[1:], strict=True):
        out += [op, value]
    return out
