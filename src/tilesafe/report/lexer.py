"""A Pygments lexer for the tilesafe language (`.tsk`).

Used by the HTML report and for docs (```tsk blocks); registered as the Pygments plugin
`tsk` (pyproject: entry point `pygments.lexers`), so `pygmentize -l tsk` works once the
package is installed. The keywords are grammar/tilesafe.lark's; a test keeps them in step.
"""

from __future__ import annotations

from pygments.lexer import RegexLexer, bygroups, words
from pygments.token import (
    Comment,
    Keyword,
    Name,
    Number,
    Operator,
    Punctuation,
    Text,
    Whitespace,
)

DECLARATIONS = ("kernel", "const", "tensormap", "shared", "mbarrier", "fragment", "let", "var",
                "role", "ensures", "requires", "specialize")
KEYWORDS = ("where", "grid", "block", "if", "else", "for", "in", "step", "layout", "align",
            "count", "guards", "box", "swizzle", "oob", "tiled", "elect", "one", "per",
            "warp", "warps", "threads", "global", "parity", "signal", "read", "zero", "nan",
            "none", "scale_d", "inc", "dec", "cluster", "scope", "cta", "relaxed", "multicast")
OPERATIONS = ("sync", "wait", "arrive", "init", "fence", "expect_tx", "tma_load", "tma_store",
              "commit_group", "wait_group", "mbarrier_init", "proxy_async", "bar_sync",
              "bar_arrive", "wgmma", "wgmma_fence", "wgmma_commit", "wgmma_wait", "setmaxnreg",
              "cluster_sync", "cluster_arrive", "cluster_wait")
ROLES = ("in", "out", "inout")
TYPES = ("f16", "bf16", "f32", "f64", "i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64",
         "bool")
BUILTINS = ("thread", "lane", "warp_id", "cta_rank", "bytes", "min", "max", "abs", "clamp")


class TskLexer(RegexLexer):
    """tilesafe kernels: declarations, synchronisation operations, types, sizes."""

    name = "tilesafe"
    aliases = ["tsk", "tilesafe"]
    filenames = ["*.tsk"]
    mimetypes = ["text/x-tilesafe"]

    tokens = {
        "root": [
            (r"\s+", Whitespace),
            (r"//.*?$", Comment.Single),
            (r"/\*", Comment.Multiline, "comment"),
            (r"(kernel)(\s+)([A-Za-z_]\w*)", bygroups(Keyword.Declaration, Whitespace,
                                                      Name.Function)),
            (words(DECLARATIONS, suffix=r"\b"), Keyword.Declaration),
            (words(OPERATIONS, suffix=r"\b"), Keyword.Pseudo),
            (words(TYPES, suffix=r"\b"), Keyword.Type),
            (words(("out", "inout"), suffix=r"\b"), Keyword),
            (words(KEYWORDS, suffix=r"\b"), Keyword),
            (words(BUILTINS, suffix=r"\b"), Name.Builtin),
            (r"block\.(x|y|z)\b", Name.Builtin),
            (r"\d+\.\d*([eE][+-]?\d+)?|\d+[eE][+-]?\d+", Number.Float),
            (r"\d+", Number.Integer),
            (r"[A-Z][A-Z0-9_]*\b", Name.Constant),
            (r"[A-Za-z_]\w*", Name),
            (r"\.\.|==|!=|<=|>=|&&|\|\||<-|[-+*/%<>=!]", Operator),
            (r"[\[\](){},:;.]", Punctuation),
            (r".", Text),
        ],
        "comment": [
            (r"[^*/]+", Comment.Multiline),
            (r"\*/", Comment.Multiline, "#pop"),
            (r"[*/]", Comment.Multiline),
        ],
    }
