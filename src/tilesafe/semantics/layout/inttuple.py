"""Nested integer tuples, the shapes and strides of CuTe layouts.

An IntTuple is an int or a tuple of IntTuples. Coordinates are linearised
colexicographically (leftmost mode fastest), which is the CuTe convention; every
function here follows it so that `cute.Layout` can stay a thin wrapper.
"""

from __future__ import annotations

from typing import TypeAlias

IntTuple: TypeAlias = "int | tuple[IntTuple, ...]"


def is_int(x: object) -> bool:
    """True for a plain int (bool excluded, it is never a shape)."""
    return isinstance(x, int) and not isinstance(x, bool)


def is_tuple(x: object) -> bool:
    return isinstance(x, tuple)


def check_int_tuple(x: object) -> IntTuple:
    """Return `x` unchanged if it is an IntTuple, else raise ValueError (lists become tuples)."""
    if is_int(x):
        return x  # type: ignore[return-value]
    if isinstance(x, (tuple, list)):
        return tuple(check_int_tuple(e) for e in x)
    raise ValueError(f"not an int tuple: {x!r}")


def flatten(t: IntTuple) -> tuple[int, ...]:
    """Leaves of `t` in order."""
    if is_int(t):
        return (t,)  # type: ignore[return-value]
    out: list[int] = []
    for e in t:  # type: ignore[union-attr]
        out.extend(flatten(e))
    return tuple(out)


def rank(t: IntTuple) -> int:
    """Number of top-level modes (an int has rank 1)."""
    return 1 if is_int(t) else len(t)  # type: ignore[arg-type]


def depth(t: IntTuple) -> int:
    if is_int(t):
        return 0
    return 1 + max((depth(e) for e in t), default=0)  # type: ignore[union-attr]


def product(t: IntTuple) -> int:
    """Product of all leaves (1 for the empty tuple)."""
    if is_int(t):
        return t  # type: ignore[return-value]
    p = 1
    for e in t:  # type: ignore[union-attr]
        p *= product(e)
    return p


def prefix_product(t: IntTuple, init: int = 1) -> IntTuple:
    """Exclusive prefix products with the profile of `t`: the compact colexicographic strides."""
    if is_int(t):
        return init
    out: list[IntTuple] = []
    acc = init
    for e in t:  # type: ignore[union-attr]
        out.append(prefix_product(e, acc))
        acc *= product(e)
    return tuple(out)


def suffix_product(t: tuple[int, ...]) -> tuple[int, ...]:
    """Row-major (lexicographic) strides of a flat shape: last dim fastest."""
    out = [1] * len(t)
    acc = 1
    for i in range(len(t) - 1, -1, -1):
        out[i] = acc
        acc *= t[i]
    return tuple(out)


def congruent(a: IntTuple, b: IntTuple) -> bool:
    """Same tree profile (same nesting and lengths)."""
    if is_int(a) and is_int(b):
        return True
    if is_tuple(a) and is_tuple(b):
        return len(a) == len(b) and all(congruent(x, y) for x, y in zip(a, b, strict=False))  # type: ignore[arg-type]
    return False


def weakly_congruent(coord: IntTuple, shape: IntTuple) -> bool:
    """`coord` is a coarsening of `shape`'s profile: an int may stand for a whole sub-tree."""
    if is_int(coord):
        return True
    if is_int(shape):
        return False
    return len(coord) == len(shape) and all(  # type: ignore[arg-type]
        weakly_congruent(c, s) for c, s in zip(coord, shape, strict=False)  # type: ignore[arg-type]
    )


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def shape_div(a: int, b: int) -> int:
    """a / b when one divides the other (1 when b is a multiple of a), else ValueError."""
    if b == 0:
        raise ValueError("shape_div by zero")
    if a % b == 0:
        return a // b
    if b % a == 0:
        return 1
    raise ValueError(f"shape_div: neither {a} nor {b} divides the other")


def crd2idx(crd: IntTuple, shape: IntTuple, stride: IntTuple | None = None) -> int:
    """Inner product of a (possibly coarser) coordinate with the strides.

    An int coordinate against a tuple shape is split colexicographically; the last mode
    receives whatever is left, so an index past the size extends the last mode (CuTe rule).
    With stride None the compact colexicographic strides are used (coordinate -> index).
    """
    if stride is None:
        stride = prefix_product(shape)
    if is_tuple(crd):
        if not is_tuple(shape) or len(crd) != len(shape):  # type: ignore[arg-type]
            raise ValueError(f"coordinate {crd} does not match shape {shape}")
        return sum(
            crd2idx(c, s, d)
            for c, s, d in zip(crd, shape, stride, strict=False)  # type: ignore[arg-type]
        )
    if is_int(shape):
        return crd * stride  # type: ignore[operator]
    total = 0
    rest = crd
    n = len(shape)  # type: ignore[arg-type]
    for i in range(n):
        s_i, d_i = shape[i], stride[i]  # type: ignore[index]
        if i == n - 1:
            total += crd2idx(rest, s_i, d_i)
        else:
            p = product(s_i)
            total += crd2idx(rest % p, s_i, d_i)  # type: ignore[operator]
            rest = rest // p  # type: ignore[operator]  (never in place: crd may be an array)
    return total


def idx2crd(idx: int, shape: IntTuple) -> IntTuple:
    """Colexicographic coordinate of linear index `idx` with the profile of `shape`.

    The outermost last mode keeps the overflow, so idx2crd and crd2idx round-trip for any
    non-negative index.
    """
    if is_int(shape):
        return idx
    out: list[IntTuple] = []
    rest = idx
    n = len(shape)  # type: ignore[arg-type]
    for i, s in enumerate(shape):  # type: ignore[arg-type]
        if i == n - 1:
            out.append(idx2crd(rest, s))
        else:
            p = product(s)
            out.append(idx2crd(rest % p, s))
            rest //= p
    return tuple(out)


def format_int_tuple(t: IntTuple) -> str:
    """CuTe's printed form: `8`, `(2,4)`, `((2,4),3)`."""
    if is_int(t):
        return str(t)
    return "(" + ",".join(format_int_tuple(e) for e in t) + ")"  # type: ignore[union-attr]


def parse_int_tuple(text: str) -> IntTuple:
    """Parse `8`, `_8`, `(2,4)`, `((2,_4),3)` (CuTe prints static ints with a leading `_`)."""
    pos = 0
    s = text.replace(" ", "")

    def parse() -> IntTuple:
        nonlocal pos
        if pos < len(s) and s[pos] == "(":
            pos += 1
            items: list[IntTuple] = []
            if pos < len(s) and s[pos] == ")":
                pos += 1
                return ()
            while True:
                items.append(parse())
                if pos < len(s) and s[pos] == ",":
                    pos += 1
                    continue
                if pos < len(s) and s[pos] == ")":
                    pos += 1
                    return tuple(items)
                raise ValueError(f"expected ',' or ')' at {pos} in {text!r}")
        start = pos
        if pos < len(s) and s[pos] == "_":
            pos += 1
        if pos < len(s) and s[pos] == "-":
            pos += 1
        while pos < len(s) and s[pos].isdigit():
            pos += 1
        tok = s[start:pos].lstrip("_")
        if not tok or tok == "-":
            raise ValueError(f"expected an integer at {start} in {text!r}")
        return int(tok)

    value = parse()
    if pos != len(s):
        raise ValueError(f"trailing text at {pos} in {text!r}")
    return value
