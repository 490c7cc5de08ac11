"""Checking a launch's data against the `requires` clauses, before anything runs.

Why: the proofs of a kernel with gathers hold for the index tensors its `requires` clauses
allow (semantics/access/gather.py). The data arrives at run time -- a router's top-k ids, an
inspector's sorted routing -- and nothing proves what it holds, so every launch checks it:
the interpreter and `tilesafe run`, `tilesafe.jit` (on torch tensors, on their GPU), the case
runner. A launch outside the clauses is refused with the clause, the element and the value
(`sids[37] = 4097`), never run into an out-of-bounds access.

The meaning is the provers' (ir.Requires): a universal clause holds at every value of its
variables at which its *direct* reads (those whose indices read nothing) are inside their
tensors; a read through a read (`topk[sids[p]]`) is evaluated with short-circuit `&&`/`||`
and must be inside its tensor where its value decides the clause (out of bounds there, the
clause is taken to fail: the check never reads outside a tensor). The predicates range
their variable over `lo .. hi` (where the direct reads are in bounds): injective -- the
values inside `vlo .. vhi` (all values without a range) are distinct; permutation -- also
every value of the range is taken; sorted -- non-decreasing.

Works on numpy arrays and torch tensors alike (on the tensors' device: one host
synchronisation when a clause fails or at the end), from the plain-data form of
semantics/access/requires_form.py, with numpy as the only import: this runs on the GPU
machine too. Every clause is evaluated over a box of variable values; past `max_points` the
launch is refused as not checkable (TooLarge), never let through.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

MAX_POINTS = 1 << 28  # points of one clause (a two-variable clause over 16384 elements)
CHUNK = 1 << 22  # points evaluated at once


class TooLarge(Exception):
    """A clause whose variables range over more points than the check may evaluate, or one
    whose variables no read bounds: the launch cannot be checked, so it is refused."""

    def __init__(self, clause: Mapping[str, Any], why: str) -> None:
        super().__init__(f"requires `{clause['text']}` (line {clause['line']}) cannot be "
                         f"checked at launch: {why}")
        self.clause = clause
        self.index = -1


@dataclass(frozen=True)
class Violation:
    """The first point (in index order) where a clause fails: the clause, its variables'
    values, the index-tensor elements involved with their values, and what is wrong."""

    text: str
    line: int
    at: dict[str, int]
    reads: dict[str, int] = field(default_factory=dict)
    detail: str = ""
    index: int = -1  # which clause (in the kernel's order)

    def message(self) -> str:
        where = ", ".join(f"{k} = {v}" for k, v in self.at.items())
        return (f"requires `{self.text}` (line {self.line}) does not hold"
                f"{' at ' + where if where else ''}: {self.detail}")


def first_violation(clauses: Sequence[Mapping[str, Any]], sizes: Mapping[str, int],
                    arrays: Mapping[str, Any], max_points: int = MAX_POINTS
                    ) -> Violation | None:
    """The first clause that fails on `arrays` (tensor name -> numpy array or torch tensor
    holding the launch's data) at `sizes`, or None. Raises TooLarge."""
    for index, c in enumerate(clauses):
        xp = _backend(arrays, c)
        check = _all if c["kind"] == "all" else _predicate
        try:
            v = check(c, sizes, arrays, xp, max_points)
        except TooLarge as err:
            err.index = index
            raise
        if v is not None:
            return dataclasses.replace(v, index=index)
    return None


# ---- array backends -------------------------------------------------------------------------


class _Numpy:
    """The few array operations the check needs, on numpy (the torch subclass overrides
    what differs). Every value is an array (0-d for constants), so `~` is always logical."""

    def const(self, v: int | bool) -> Any:
        return np.asarray(v, dtype=np.bool_ if isinstance(v, bool) else np.int64)

    def arange(self, lo: int, hi: int) -> Any:
        return np.arange(lo, hi, dtype=np.int64)

    def flat(self, a: Any) -> Any:
        return np.ascontiguousarray(a).reshape(-1).astype(np.int64)

    def where(self, c: Any, a: Any, b: Any) -> Any:
        return np.where(c, a, b)

    def minimum(self, a: Any, b: Any) -> Any:
        return np.minimum(a, b)

    def maximum(self, a: Any, b: Any) -> Any:
        return np.maximum(a, b)

    def broadcast(self, a: Any, shape: tuple[int, ...]) -> Any:
        return np.broadcast_to(a, shape)

    def first(self, mask: Any) -> tuple[int, ...] | None:
        hits = np.argwhere(mask)
        return None if len(hits) == 0 else tuple(int(x) for x in hits[0])

    def item(self, a: Any) -> int:
        return int(a)

    def stable_argsort(self, a: Any) -> Any:
        return np.argsort(a, kind="stable")

    def bincount(self, a: Any, n: int) -> Any:
        return np.bincount(a, minlength=n)


_DEVICE_CONSTS: dict[tuple[str, type, int | bool], Any] = {}  # never written in place


class _Torch(_Numpy):
    """On the tensors' device: nothing leaves it but the answer."""

    def __init__(self, torch: Any, device: Any) -> None:
        self.t = torch
        self.device = device

    def const(self, v: int | bool) -> Any:
        # one copy to the device per constant, kept: a clause's constants are the same at
        # every launch, and each fresh one was a blocking host-to-device copy
        key = (str(self.device), type(v), v)
        c = _DEVICE_CONSTS.get(key)
        if c is None:
            dtype = self.t.bool if isinstance(v, bool) else self.t.int64
            c = self.t.tensor(v, dtype=dtype, device=self.device)
            if len(_DEVICE_CONSTS) < 4096:
                _DEVICE_CONSTS[key] = c
        return c

    def arange(self, lo: int, hi: int) -> Any:
        return self.t.arange(lo, hi, dtype=self.t.int64, device=self.device)

    def flat(self, a: Any) -> Any:
        return a.contiguous().reshape(-1).to(self.t.int64)

    def where(self, c: Any, a: Any, b: Any) -> Any:
        return self.t.where(c, a, b)

    def minimum(self, a: Any, b: Any) -> Any:
        return self.t.minimum(a, b)

    def maximum(self, a: Any, b: Any) -> Any:
        return self.t.maximum(a, b)

    def broadcast(self, a: Any, shape: tuple[int, ...]) -> Any:
        return a.expand(shape)

    def first(self, mask: Any) -> tuple[int, ...] | None:
        if not bool(mask.any()):  # the one synchronisation of a clause that holds
            return None
        return tuple(int(x) for x in self.t.nonzero(mask)[0].tolist())

    def item(self, a: Any) -> int:
        return int(a.item())

    def stable_argsort(self, a: Any) -> Any:
        return self.t.sort(a, stable=True).indices

    def bincount(self, a: Any, n: int) -> Any:
        return self.t.bincount(a, minlength=n)


def _backend(arrays: Mapping[str, Any], clause: Mapping[str, Any]) -> _Numpy:
    """torch when the clause's tensors are torch tensors (evaluated on their device)."""
    for name in _reads(clause):
        a = arrays.get(name)
        if a is not None and type(a).__module__.startswith("torch"):
            import torch

            return _Torch(torch, a.device)
    return _Numpy()


def _reads(clause: Mapping[str, Any]) -> list[str]:
    out: list[str] = []

    def walk(f: Any) -> None:
        if isinstance(f, list) and f:
            if f[0] == "load" and f[1] not in out:
                out.append(f[1])
            for x in f[1:]:
                walk(x)

    for key in ("cond", "value"):
        walk(clause.get(key))
    return out


# ---- expressions over arrays of points ------------------------------------------------------


class _Eval:
    """Evaluates a clause's forms over broadcast arrays of variable values: each result is
    (value, defined) -- defined is false where a read through a read that decides the
    value falls outside its tensor (short-circuit `&&`/`||` as the provers read them)."""

    def __init__(self, xp: _Numpy, sizes: Mapping[str, int], arrays: Mapping[str, Any],
                 env: Mapping[str, Any]) -> None:
        self.xp, self.sizes, self.arrays, self.env = xp, sizes, arrays, env
        self.flats: dict[str, Any] = {}
        self.yes = xp.const(True)

    def shape(self, name: str) -> tuple[int, ...]:
        return tuple(int(d) for d in self.arrays[name].shape)

    def ev(self, f: list[Any]) -> tuple[Any, Any]:
        kind = f[0]
        if kind == "int":
            return self.xp.const(int(f[1])), self.yes
        if kind == "size":
            return self.xp.const(int(self.sizes[f[1]])), self.yes
        if kind == "var":
            return self.env[f[1]], self.yes
        if kind == "load":
            return self.load(f)
        if kind == "un":
            v, ok = self.ev(f[2])
            return (~v if f[1] == "!" else -v), ok
        if kind == "call":
            args = [self.ev(a) for a in f[2]]
            ok = self.yes
            for _, a_ok in args:
                ok = ok & a_ok
            if f[1] == "abs":
                return abs(args[0][0]), ok
            op = self.xp.minimum if f[1] == "min" else self.xp.maximum
            return op(args[0][0], args[1][0]), ok
        op = f[1]
        a, aok = self.ev(f[2])
        b, bok = self.ev(f[3])
        if op == "&&":  # defined: a defined and false, or both defined
            return a & b, (aok & ~a) | (aok & bok)
        if op == "||":  # defined: a defined and true, or both defined
            return a | b, (aok & a) | (aok & bok)
        return _binop(op, a, b), aok & bok

    def inbounds(self, f: list[Any]) -> Any:
        """Whether a read's indices are inside its tensor."""
        mask = self.yes
        for i, extent in zip(f[2], self.shape(f[1]), strict=True):
            v, _ = self.ev(i)
            mask = mask & (v >= 0) & (v < extent)
        return mask

    def load(self, f: list[Any]) -> tuple[Any, Any]:
        name = f[1]
        flat = self.xp.const(0)
        ok = self.yes
        for i, extent in zip(f[2], self.shape(name), strict=True):
            v, vok = self.ev(i)
            ok = ok & vok & (v >= 0) & (v < extent)
            flat = flat * extent + v
        if name not in self.flats:
            self.flats[name] = self.xp.flat(self.arrays[name])
        value = self.flats[name][self.xp.where(ok, flat, self.xp.const(0))]
        return value, ok


def _binop(op: str, a: Any, b: Any) -> Any:
    if op == "+":
        return a + b
    if op == "-":
        return a - b
    if op == "*":
        return a * b
    if op == "/":
        return a // b
    if op == "%":
        return a % b
    return {"==": lambda: a == b, "!=": lambda: a != b, "<": lambda: a < b,
            "<=": lambda: a <= b, ">": lambda: a > b, ">=": lambda: a >= b}[op]()


def _direct(f: list[Any] | None, out: list[list[Any]]) -> list[list[Any]]:
    """The reads of a form whose indices read nothing (they bound the variables)."""
    if f is None:
        return out
    if f[0] == "load":
        if not any(_has_load(i) for i in f[2]):
            out.append(f)
        for i in f[2]:
            _direct(i, out)
    elif f[0] == "bin":
        _direct(f[2], out)
        _direct(f[3], out)
    elif f[0] == "un":
        _direct(f[2], out)
    elif f[0] == "call":
        for a in f[2]:
            _direct(a, out)
    return out


def _has_load(f: list[Any]) -> bool:
    if f[0] == "load":
        return True
    if f[0] == "bin":
        return _has_load(f[2]) or _has_load(f[3])
    if f[0] == "un":
        return _has_load(f[2])
    if f[0] == "call":
        return any(_has_load(a) for a in f[2])
    return False


def _affine(f: list[Any], var: str, sizes: Mapping[str, int]) -> tuple[int, int] | None:
    """(a, b) with f == a * var + b for every value of var, b over sizes and constants
    (None when f is not of that form in var alone)."""
    kind = f[0]
    if kind == "int":
        return 0, int(f[1])
    if kind == "size":
        return 0, int(sizes[f[1]])
    if kind == "var":
        return (1, 0) if f[1] == var else None
    if kind == "un" and f[1] == "-":
        inner = _affine(f[2], var, sizes)
        return None if inner is None else (-inner[0], -inner[1])
    if kind == "bin" and f[1] in ("+", "-", "*"):
        a, b = _affine(f[2], var, sizes), _affine(f[3], var, sizes)
        if a is None or b is None:
            return None
        if f[1] == "+":
            return a[0] + b[0], a[1] + b[1]
        if f[1] == "-":
            return a[0] - b[0], a[1] - b[1]
        if a[0] != 0 and b[0] != 0:
            return None
        return a[0] * b[1] + b[0] * a[1], a[1] * b[1]
    return None


def _box(clause: Mapping[str, Any], form: list[Any], names: Sequence[str],
         sizes: Mapping[str, int], arrays: Mapping[str, Any]) -> list[range]:
    """A range per variable holding every value at which the direct reads indexed by it
    alone (a * v + b) are inside their tensors: outside it the clause says nothing."""
    direct = _direct(form, [])
    out = []
    for v in names:
        lo: float = -math.inf
        hi: float = math.inf
        for ld in direct:
            for i, extent in zip(ld[2], arrays[ld[1]].shape, strict=True):
                ab = _affine(i, v, sizes)
                if ab is None or ab[0] == 0:
                    continue
                a, b, n = ab[0], ab[1], int(extent)  # 0 <= a v + b < n
                if a > 0:
                    lo, hi = max(lo, -(b // a)), min(hi, -((b - n) // a))
                else:
                    lo, hi = max(lo, (b - n) // -a + 1), min(hi, b // -a + 1)
        if lo == -math.inf or hi == math.inf:
            raise TooLarge(clause, f"no read indexes by '{v}' alone (a * {v} + b), so "
                           "nothing bounds its values")
        out.append(range(int(lo), max(int(lo), int(hi))))
    return out


# ---- the clauses ----------------------------------------------------------------------------


def _all(c: Mapping[str, Any], sizes: Mapping[str, int], arrays: Mapping[str, Any],
         xp: _Numpy, max_points: int) -> Violation | None:
    names = list(c["vars"])
    box = _box(c, c["cond"], names, sizes, arrays)
    if not names:  # a clause of constants (`be[0] == 0`): one point
        names, box = ["$"], [range(0, 1)]
    total = math.prod(len(r) for r in box)
    if total > max_points:
        raise TooLarge(c, f"its variables range over {total} points (at most {max_points})")
    if total == 0:
        return None
    direct = _direct(c["cond"], [])
    inner = math.prod(len(r) for r in box[1:])
    step = max(1, CHUNK // max(1, inner))
    first = box[0]
    for start in range(first.start, first.stop, step):
        stop = min(first.stop, start + step)
        env = {}
        for k, (v, r) in enumerate(zip(names, box, strict=True)):
            lo, hi = (start, stop) if k == 0 else (r.start, r.stop)
            shape = [1] * len(names)
            shape[k] = hi - lo
            env[v] = xp.arange(lo, hi).reshape(tuple(shape))
        ev = _Eval(xp, sizes, arrays, env)
        domain = ev.yes
        for ld in direct:
            domain = domain & ev.inbounds(ld)
        value, ok = ev.ev(c["cond"])
        bad = domain & ~(ok & value)
        full = tuple(stop - start if k == 0 else len(r) for k, r in enumerate(box))
        hit = xp.first(xp.broadcast(bad, full))
        if hit is not None:
            at = {v: (start if k == 0 else box[k].start) + hit[k]
                  for k, v in enumerate(names) if v != "$"}
            reads, detail = _explain(c, c["cond"], sizes, arrays, at)
            return Violation(c["text"], c["line"], at, reads, detail)
    return None


def _predicate(c: Mapping[str, Any], sizes: Mapping[str, int], arrays: Mapping[str, Any],
               xp: _Numpy, max_points: int) -> Violation | None:
    var = c["vars"][0]
    lo, hi = _scalar(c["lo"], sizes), _scalar(c["hi"], sizes)
    if hi - lo > max_points:
        raise TooLarge(c, f"its variable ranges over {hi - lo} positions")
    if hi <= lo:
        return None
    n = hi - lo
    p = xp.arange(lo, hi)
    ev = _Eval(xp, sizes, arrays, {var: p})
    domain = ev.yes
    for ld in _direct(c["value"], []):
        domain = domain & ev.inbounds(ld)
    value, ok = ev.ev(c["value"])
    domain = xp.broadcast(domain, (n,))
    value = xp.broadcast(value, (n,))
    hit = xp.first(domain & ~xp.broadcast(ok, (n,)))
    if hit is not None:  # a read through a read outside its tensor
        at = {var: lo + hit[0]}
        reads, detail = _explain(c, c["value"], sizes, arrays, at)
        return Violation(c["text"], c["line"], at, reads, detail)
    pos, vals = p[domain], value[domain]
    if c["kind"] == "sorted":
        hit = xp.first(vals[:-1] > vals[1:]) if len(vals) > 1 else None
        if hit is None:
            return None
        p1, p2 = xp.item(pos[hit[0]]), xp.item(pos[hit[0] + 1])
        v1, v2 = xp.item(vals[hit[0]]), xp.item(vals[hit[0] + 1])
        e1, e2 = _name(c, sizes, arrays, var, p1), _name(c, sizes, arrays, var, p2)
        return Violation(c["text"], c["line"], {var: p2}, {e1: v1, e2: v2},
                         f"{e1} = {v1} > {e2} = {v2}: not sorted")
    vlo = None if c.get("vlo") is None else _scalar(c["vlo"], sizes)
    vhi = None if c.get("vhi") is None else _scalar(c["vhi"], sizes)
    if vlo is not None and vhi is not None:
        keep = (vals >= vlo) & (vals < vhi)
        pos, vals = pos[keep], vals[keep]
    if len(vals) > 1:
        order = xp.stable_argsort(vals)
        s = vals[order]
        hit = xp.first(s[1:] == s[:-1])
        if hit is not None:
            p1, p2 = xp.item(pos[order[hit[0]]]), xp.item(pos[order[hit[0] + 1]])
            v = xp.item(s[hit[0]])
            e1, e2 = _name(c, sizes, arrays, var, p1), _name(c, sizes, arrays, var, p2)
            return Violation(c["text"], c["line"], {var: p2}, {e1: v, e2: v},
                             f"{e1} = {e2} = {v}: two positions take one value")
    if c["kind"] == "permutation" and vlo is not None and vhi is not None and vhi > vlo:
        if vhi - vlo > max_points:
            raise TooLarge(c, f"its range has {vhi - vlo} values")
        hit = xp.first(xp.bincount(vals - vlo, vhi - vlo) == 0)
        if hit is not None:
            missing = vlo + hit[0]
            return Violation(c["text"], c["line"], {}, {},
                             f"no {var} in {lo} .. {hi} has {_value_text(c)} = {missing} "
                             f"(each value of {vlo} .. {vhi} must be taken once)")
    return None


# ---- messages: one point, evaluated in plain Python -----------------------------------------


def _scalar(f: list[Any], sizes: Mapping[str, int]) -> int:
    return int(_Point(sizes, {}, {}).ev(f))


class _Point:
    """A clause at one point, in Python integers, recording every read it makes."""

    def __init__(self, sizes: Mapping[str, int], arrays: Mapping[str, Any],
                 env: Mapping[str, int]) -> None:
        self.sizes, self.arrays, self.env = sizes, arrays, env
        self.reads: dict[str, int] = {}
        self.outside: str | None = None

    def ev(self, f: list[Any]) -> Any:
        kind = f[0]
        if kind == "int":
            return f[1]
        if kind == "size":
            return int(self.sizes[f[1]])
        if kind == "var":
            return self.env[f[1]]
        if kind == "load":
            idx = [self.ev(i) for i in f[2]]
            if any(i is None for i in idx):
                return None
            shape = tuple(int(d) for d in self.arrays[f[1]].shape)
            text = f"{f[1]}[{', '.join(map(str, idx))}]"
            if not all(0 <= i < n for i, n in zip(idx, shape, strict=True)):
                self.outside = self.outside or f"{text} is outside {f[1]}'s shape {list(shape)}"
                return None
            a = self.arrays[f[1]]
            v = int(a[tuple(idx)].item() if hasattr(a[tuple(idx)], "item") else a[tuple(idx)])
            self.reads[text] = v
            return v
        if kind == "un":
            v = self.ev(f[2])
            return None if v is None else ((not v) if f[1] == "!" else -v)
        if kind == "call":
            args = [self.ev(a) for a in f[2]]
            if any(a is None for a in args):
                return None
            return {"min": min, "max": max, "abs": abs}[f[1]](*args)
        op = f[1]
        a = self.ev(f[2])
        if op == "&&":
            return False if a is False else (None if a is None else self.ev(f[3]))
        if op == "||":
            return True if a is True else (None if a is None else self.ev(f[3]))
        b = self.ev(f[3])
        if a is None or b is None:
            return None
        return bool(_binop(op, a, b)) if op in ("==", "!=", "<", "<=", ">", ">=") \
            else _binop(op, a, b)


def _sizes_named(f: Any, sizes: Mapping[str, int], out: dict[str, int]) -> dict[str, int]:
    if isinstance(f, list) and f:
        if f[0] == "size":
            out[f[1]] = int(sizes[f[1]])
        for x in f[1:]:
            _sizes_named(x, sizes, out)
    return out


def _explain(c: Mapping[str, Any], form: list[Any], sizes: Mapping[str, int],
             arrays: Mapping[str, Any], at: Mapping[str, int]) -> tuple[dict[str, int], str]:
    """The elements the clause reads at one point, their values, and the sizes it names."""
    pt = _Point(sizes, arrays, at)
    pt.ev(form)
    parts = [f"{k} = {v}" for k, v in pt.reads.items()]
    if pt.outside:
        parts.append(pt.outside)
    text = ", ".join(parts) or "the condition is false"
    named = _sizes_named(form, sizes, {})
    if named:
        text += f" ({', '.join(f'{k} = {v}' for k, v in named.items())})"
    return pt.reads, text


def _name(c: Mapping[str, Any], sizes: Mapping[str, int], arrays: Mapping[str, Any],
          var: str, p: int) -> str:
    """`sids[17]` for value `sids[p]` at p = 17 (the last read of the value term)."""
    pt = _Point(sizes, arrays, {var: p})
    pt.ev(c["value"])
    return next(reversed(pt.reads)) if pt.reads else f"{_value_text(c)} at {var} = {p}"


def _value_text(c: Mapping[str, Any]) -> str:
    text = c["text"]
    body = text.split(":", 1)[1] if ":" in text else text
    return body.split(",")[0].strip().rstrip(")")
