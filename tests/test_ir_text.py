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


def _int(op: str, a: ir.Expr, b: ir.Expr) -> ir.Expr:
    return ir.BinOp(None, INT, op, a, b)


def test_brief_keeps_the_parentheses_the_meaning_needs():
    """A diagnostic once printed `(i + 256) % N` as 'i + 256 % N', which reads as another
    expression; brief keeps exactly the parentheses precedence and associativity need."""
    c256 = ir.IntConst(None, INT, 256)
    assert expr_text(_int("%", _int("+", K, c256), N), brief=True) == "(k + 256) % N"
    assert expr_text(_int("+", K, _int("%", c256, N)), brief=True) == "k + 256 % N"
    assert expr_text(_int("-", K, _int("-", N, T)), brief=True) == "k - (N - thread)"
    assert expr_text(_int("-", _int("-", K, N), T), brief=True) == "k - N - thread"
    assert expr_text(_int("/", K, _int("*", N, c256)), brief=True) == "k / (N * 256)"
    neg = ir.UnOp(None, INT, "-", _int("+", K, N))
    assert expr_text(neg, brief=True) == "-(k + N)"


def test_brief_text_evaluates_like_the_expression():
    """Every brief text of random integer trees, read back by Python with floor semantics
    (the language's `/` and `%` are floor division and modulo, as Python's // and %),
    evaluates to the tree's value."""
    import random

    rng = random.Random(0)
    leaves = {"k": 7, "N": -5, "thread": 3}

    def tree(depth: int) -> tuple[ir.Expr, int]:
        if depth == 0 or rng.random() < 0.3:
            name = rng.choice(list(leaves))
            node = {"k": K, "N": N, "thread": T}[name]
            return node, leaves[name]
        op = rng.choice(["+", "-", "*", "/", "%"])
        (a, va), (b, vb) = tree(depth - 1), tree(depth - 1)
        if op in "/%" and vb == 0:
            op = "+"
        value = {"+": va + vb, "-": va - vb, "*": va * vb, "/": va // vb if vb else 0,
                 "%": va % vb if vb else 0}[op]
        return _int(op, a, b), value

    for _ in range(300):
        e, value = tree(4)
        text = expr_text(e, brief=True).replace("/", "//")
        assert eval(text, {}, dict(leaves)) == value, text
