"""The one IR expression printer (frontend/ir_text.py): diagnostics' brief form and the
evidence's full form of the same expressions."""

from tilesafe.frontend import ir
from tilesafe.frontend.ir_text import expr_text

INT = ir.ScalarType.INT
K = ir.LoopVar(None, INT, "k", 1)
N = ir.SizeVar(None, INT, "N")
T = ir.Builtin(None, INT, ir.BuiltinKind.THREAD)


def test_brief_and_full_forms():
    e = ir.BinOp(None, INT, "+", ir.BinOp(None, INT, "*", K, N), ir.UnOp(None, INT, "-", T))
    assert expr_text(e, brief=True) == "k * N + -thread"
    assert expr_text(e) == "((k * N) + -thread)"
    call = ir.Call(None, INT, "min", (K, ir.IntConst(None, INT, 7)))
    assert expr_text(call, brief=True) == "min(...)"
    assert expr_text(call) == "min(k, 7)"
    load = ir.Load(None, ir.ScalarType.FLOAT, "x", ir.Space.GLOBAL, (K, N))
    assert expr_text(load, brief=True) == "x[...]"
    assert expr_text(load) == "x[k, N]"
