"""CuTe's printed forms in a `layout` clause: static ints `(_64,_64):(_1,_64)` and a swizzle
composed with a layout `Sw<3,3,3> o (64,64):(64,1)` (issue 8, item 12) -- parsed, resolved
to a layout term, realised with the meaning CuTe gives them, formatted, and diagnosed."""

from __future__ import annotations

import pytest

from tilesafe import api
from tilesafe.frontend import ast, ir
from tilesafe.frontend.diagnostics import DiagnosticError
from tilesafe.frontend.fmt import format_source
from tilesafe.frontend.load import compile_source
from tilesafe.frontend.parser import parse
from tilesafe.semantics.layout import layout_isl as LI
from tilesafe.semantics.layout.cute import ComposedLayout, Layout, Swizzle, parse_cute
from tilesafe.semantics.layout.layouts import realize


def kernel(*decls: str) -> str:
    body = "".join(f"  {d}\n" for d in decls)
    return f"kernel k() grid 1 block 32 {{\n{body}  sync\n}}\n"


def layout_of(decl: str) -> object:
    stmt = parse(kernel(decl)).kernels[0].body.stmts[0]
    assert isinstance(stmt, ast.SharedDecl)
    return stmt.layout


def term_of(decl: str) -> ir.LayoutTerm:
    return compile_source(kernel(decl), "t.tsk").kernels[0].shared[0].layout


def test_static_ints_parse_as_ints() -> None:
    node = layout_of("shared a: f16[64, 64] layout (_64,_64):(_1,_64)")
    assert isinstance(node, ast.CuteLayout)
    assert (node.shape, node.stride) == ((64, 64), (1, 64))
    node = layout_of("shared a: f16[8, 4] layout ((_2,4),_4):((_-1,2),_8)")
    assert (node.shape, node.stride) == (((2, 4), 4), ((-1, 2), 8))


def test_swizzle_composed_with_a_layout_parses() -> None:
    node = layout_of("shared a: f16[64, 64] layout Sw<3,3,3> o (64,64):(64,1)")
    assert isinstance(node, ast.SwizzledLayout)
    assert (node.bits, node.base, node.shift, node.offset) == (3, 3, 3, 0)
    assert (node.inner.shape, node.inner.stride) == ((64, 64), (64, 1))
    node = layout_of("shared a: f16[64, 64] layout Sw<2,4,-3> o _8 o (_64,_64):(_64,_1)")
    assert (node.bits, node.base, node.shift, node.offset) == (2, 4, -3, 8)
    # as an argument of another layout, and with `Sw` and `o` still usable as names
    node = layout_of("shared a: f16[64, 64] layout padded(Sw<3,3,3> o (64,64):(64,1), 0)")
    assert isinstance(node, ast.LayoutApp) and isinstance(node.args[0], ast.SwizzledLayout)
    prog = compile_source(kernel("let Sw = 2", "let o = 3", "if Sw < o { sync }"), "t.tsk")
    assert prog.kernels[0].body


def test_term_prints_as_cute_does() -> None:
    term = term_of("shared a: f16[64, 64] layout Sw<3,3,3> o _0 o (_64,_64):(_64,_1)")
    assert term == ir.LayoutTerm("composed", (3, 3, 3, 0, ir.LayoutTerm(
        "cute", ((64, 64), (64, 1)))))
    assert str(term) == "Sw<3,3,3> o (64,64):(64,1)"
    term = term_of("shared a: f16[64, 64] layout Sw<3,3,3> o 8 o (64,64):(64,1)")
    assert str(term) == "Sw<3,3,3> o 8 o (64,64):(64,1)"


@pytest.mark.parametrize("text", [
    "Sw<3,3,3> o (64,64):(64,1)",
    "Sw<3,3,3> o 8 o (64,64):(64,1)",
    "Sw<2,4,3> o ((8,8),64):((64,512),1)",
    "Sw<3,3,3> o 4096:1",
])
def test_realised_as_cute_computes_it(text: str) -> None:
    """Every coordinate's offset is CuTe's c -> sw(off + L(c)) on the same literal."""
    term = term_of(f"shared a: f16[64, 64] layout {text}")
    real = realize(term, (64, 64), 2)
    want = parse_cute(text)
    assert isinstance(want, ComposedLayout)
    mode_wise = want.layout.rank() == 2
    for r in range(64):
        for c in range(64):
            crd = (r, c) if mode_wise else r * 64 + c
            assert real.offset((r, c)) == want(crd)
    assert real.cosize == max(want(i) for i in range(4096)) + 1


def test_decisions_use_the_swizzle_lemma_and_agree_with_swizzle128b() -> None:
    real = realize(term_of("shared a: f16[64, 64] layout Sw<3,3,3> o (64,64):(64,1)"),
                   (64, 64), 2)
    tma = realize(ir.LayoutTerm("swizzle128B", (ir.LayoutTerm("row_major"),)), (64, 64), 2)
    assert LI.equivalent(real, tma).ok  # CUTLASS's f16 128B atom is Sw<3,3,3>
    inj = LI.injective(real)
    assert inj.ok and "lemma" in inj.evidence
    assert LI.covers(real, codomain=4096).ok
    shifted = realize(term_of("shared a: f16[64, 64] layout Sw<3,3,3> o 8 o (64,64):(64,1)"),
                      (64, 64), 2)
    assert LI.injective(shifted).ok and LI.covers(shifted, codomain=4096).refuted
    sw = ComposedLayout(Swizzle(3, 3, 3), Layout((64, 64), (64, 1)), 8)
    assert shifted.cosize == sw.cosize()


def test_good_forms_lint_clean(tmp_path) -> None:
    path = tmp_path / "t.tsk"
    path.write_text(kernel(
        "shared a: f16[64, 64] layout Sw<3,3,3> o (64,64):(64,1) align 1024",
        "shared b: f16[64, 64] layout (_64,_64):(_1,_64)",
        "shared c: f16[64, 64] layout Sw<3,3,3> o _0 o (_64,_64):(_64,_1) align 1024"))
    assert api.lint(path) == []


@pytest.mark.parametrize(("text", "says"), [
    ("Sw<3,3,1> o (64,64):(64,1)", "|S| must be >= B"),
    ("Sw<3,3,3> o (1,2) o (64,64):(64,1)", "offset must be an integer"),
    ("Sw<3,3,3> o (32,64):(64,1)", "has size 2048"),
    ("(_32,_64):(_64,_1)", "has size 2048"),
])
def test_bad_forms_are_ts030(tmp_path, text: str, says: str) -> None:
    path = tmp_path / "t.tsk"
    path.write_text(kernel(f"shared a: f16[64, 64] layout {text}"))
    diags = api.lint(path)
    assert [d.code for d in diags] == ["TS030"] and says in diags[0].message


@pytest.mark.parametrize("text", [
    "Sw<3,3,3> (64,64):(64,1)",         # no `o`
    "Sw<3,3,3> o row_major",            # CuTe composes the swizzle with a literal
    "Sw<3,3> o (64,64):(64,1)",         # two parameters
    "(_64,_x):(_1,_64)",
])
def test_malformed_forms_are_syntax_diagnostics(text: str) -> None:
    with pytest.raises(DiagnosticError) as err:
        parse(kernel(f"shared a: f16[64, 64] layout {text}"))
    assert all(d.code.startswith("TS00") for d in err.value.diagnostics)


def test_formatter_keeps_the_swizzle_and_drops_static_markers() -> None:
    src = kernel("shared a: f16[64, 64] layout Sw<3,3,3>  o  _0 o (_64,_64):(_64,_1)",
                 "shared b: f16[64, 64] layout Sw<3,3,3> o 8 o (64,64):(64,1)")
    out = format_source(src)
    assert "layout Sw<3,3,3> o (64,64):(64,1)" in out
    assert "layout Sw<3,3,3> o 8 o (64,64):(64,1)" in out
    assert format_source(out) == out
