"""Lowering of every layout kind to ISL maps, and decision procedures over those maps.

`to_isl(x)` returns an isl.Map { [coordinates] -> [offset(s)] } restricted to the layout's
domain (parameters for symbolic extents):

* CuTe `Layout`: one input per top-level mode; a nested mode splits its coordinate
  colexicographically with floor/mod by constants (exact quasi-affine form).
* `Swizzle` / `ComposedLayout`: the XOR of two B-bit fields is written bit by bit: bit k of
  an offset is floor(o / 2^k) mod 2, and the XOR of two bits is their sum mod 2.
* F2 `LinearLayout`: input bit i of x is floor(x / 2^i) mod 2 and output bit j is the parity
  of the bits in row j of the matrix (an existential-bit form is available too).
* LEGO layouts and piecewise layouts: their div/mod (and guarded) forms directly.

Decision procedures (`equivalent`, `injective`, `in_bounds`, `covers`, `check_pieces`)
return a `Result`: "proved", "refuted" with a concrete witness sampled by ISL, or "unknown"
when ISL ran past its operation budget (`ctx.set_max_operations`) -- never a false proof.
All of them run under one mechanism (`_guarded`): the verdict under `max_ops`, a witness
search after a settled verdict under its own share; a refutation whose witness search runs
out is returned without witness. Given a layout object rather than a map they may use exact
structure (recorded in the evidence): a swizzle is a bijection of the naturals, F2 layouts
are decided by GF(2) algebra, coverage of a finite codomain by pigeonhole counting, and a
CuTe layout's image by its leaf form (`cute_image_map`). A map always gets plain ISL
(counting aside).
"""

from __future__ import annotations

import itertools
import math
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import islpy as isl
import numpy as np

from tilesafe.semantics.layout.cute import ComposedLayout, Layout, Swizzle, coalesce
from tilesafe.semantics.layout.inttuple import flatten, prefix_product, product, suffix_product
from tilesafe.semantics.layout.lego import LegoChain, LegoLayout
from tilesafe.semantics.layout.linear_layout import LinearLayout, _Pivots
from tilesafe.semantics.layout.piecewise import PiecewiseLayout

CTX = isl.Context()
"""The one ISL context all tilesafe maps live in (objects of different contexts never mix)."""

DEFAULT_MAX_OPS = 1_000_000
"""Operation budget per decision; exceeding it yields verdict "unknown". The realistic
layouts of bench/bench_layouts.py (up to 2^20 elements) need at most 1e5; the count is a
coarse guard, 1e6 operations took from a few seconds to a minute on 2 cores."""

PROVED, REFUTED, UNKNOWN = "proved", "refuted", "unknown"


def read_map(text: str) -> isl.Map:
    return isl.Map.read_from_str(CTX, text)


def read_set(text: str) -> isl.Set:
    return isl.Set.read_from_str(CTX, text)


def coord_names(n: int) -> list[str]:
    return [f"c{i}" for i in range(n)]


def _ident(name: str, fallback: str) -> str:
    s = re.sub(r"[^A-Za-z0-9_]", "_", name)
    if not s or s[0].isdigit():
        s = fallback
    return f"{s}_"  # trailing underscore keeps clear of ISL keywords (and, mod, floor, ...)


# --- builders ---------------------------------------------------------------------------


def box_set(shape: Sequence[int | str], params: Sequence[str] = ()) -> isl.Set:
    """{ [c0, ...] : 0 <= c_i < shape_i } (extents may be ISL expressions in `params`)."""
    names = coord_names(len(shape))
    cons = " and ".join(f"0 <= {c} < {e}" for c, e in zip(names, shape, strict=False)) or "true"
    prefix = f"[{', '.join(params)}] -> " if params else ""
    return read_set(f"{prefix}{{ [{', '.join(names)}] : {cons} }}")


def _mode_expr(coord: str, shape: Any, stride: Any) -> str:
    """Offset contributed by one top-level mode whose coordinate is the int `coord`."""
    leaves, strides = flatten(shape), flatten(stride)
    if len(leaves) == 1:
        return f"{strides[0]}*{coord}"
    colex = flatten(prefix_product(shape))
    terms = []
    for j, (s, d, p) in enumerate(zip(leaves, strides, colex, strict=False)):
        if s == 1 or d == 0:
            continue
        part = coord if p == 1 else f"floor({coord}/{p})"
        if j != len(leaves) - 1:
            part = f"({part} mod {s})"
        terms.append(f"{d}*{part}")
    return " + ".join(terms) or "0"


def _cute_parts(layout: Layout, linear: bool) -> tuple[list[str], list[str], str]:
    """(coordinate names, bound constraints, offset expression) of a CuTe layout."""
    modes = [layout] if linear else list(layout.modes())
    names = coord_names(len(modes))
    bounds = [f"0 <= {c} < {m.size()}" for c, m in zip(names, modes, strict=True)]
    if linear:
        expr = _mode_expr(names[0], (layout.shape,), (layout.stride,))
    else:
        expr = " + ".join(
            _mode_expr(c, m.shape, m.stride) for c, m in zip(names, modes, strict=True)
        )
    return names, bounds, expr


def cute_map(layout: Layout, *, linear: bool = False) -> isl.Map:
    """{ [c0..c_{r-1}] -> [o] } for a CuTe layout: one input per top-level mode (or a single
    linear index when `linear`)."""
    names, bounds, expr = _cute_parts(layout, linear)
    return read_map(f"{{ [{', '.join(names)}] -> [o] : {' and '.join(bounds)} and o = {expr} }}")


def cute_image_map(layout: Layout) -> isl.Map:
    """{ [x_0, ..., x_{k-1}] -> [o] : 0 <= x_j < s_j and o = sum_j d_j x_j } over the leaves
    (s_j, d_j) of coalesce(layout): one input per leaf, no floor or mod.

    Its range is the layout's image: the leaf coordinates are in bijection with the layout's
    linear indices, and coalescing keeps the function of the linear index. Use it wherever
    only the image matters (range, coverage). ISL projects this affine form at once, while
    the per-mode map of a nested non-power-of-two mode (`floor(c/2) mod 8`, ...) can make
    the range and its complement take minutes: `(((2,8),5)):(((240,15),1))` against the
    codomain [0, 350) ran past 120 s, the leaf form takes milliseconds."""
    flat = coalesce(layout)
    shapes, strides = flatten(flat.shape), flatten(flat.stride)
    names = [f"x{j}" for j in range(len(shapes))]
    bounds = " and ".join(f"0 <= {x} < {e}" for x, e in zip(names, shapes, strict=True))
    expr = " + ".join(f"{d}*{x}" for x, d in zip(names, strides, strict=True))
    return read_map(f"{{ [{', '.join(names)}] -> [o] : {bounds} and o = {expr} }}")


def swizzle_expr(sw: Swizzle, var: str) -> str:
    """ISL expression of sw(var): each target bit t is replaced by (t + source) mod 2."""
    if sw.bits == 0:
        return var
    zb = sw.base - min(0, sw.shift)
    yb = sw.base + max(0, sw.shift)
    parts = [var]
    for i in range(sw.bits):
        z = f"floor(({var})/{1 << (zb + i)})"
        y = f"floor(({var})/{1 << (yb + i)})"
        parts.append(f"{1 << (zb + i)}*((({z}) + ({y})) mod 2) - {1 << (zb + i)}*(({z}) mod 2)")
    return " + ".join(parts)


def swizzle_map(sw: Swizzle, offset: int = 0) -> isl.Map:
    """{ [o] -> [p] : o >= 0, p = sw(o + offset) }."""
    var = f"(o + {offset})" if offset else "o"
    return read_map(f"{{ [o] -> [p] : o >= 0 and p = {swizzle_expr(sw, var)} }}")


def composed_map(cl: ComposedLayout, *, linear: bool = False) -> isl.Map:
    """The swizzle expression substituted into the layout's offset expression (one map, no
    projected intermediate, which keeps ISL's representation small)."""
    names, bounds, expr = _cute_parts(cl.layout, linear)
    inner = f"({expr} + {cl.offset})" if cl.offset else f"({expr})"
    return read_map(f"{{ [{', '.join(names)}] -> [o] : {' and '.join(bounds)} and "
                    f"o = {swizzle_expr(cl.swizzle, inner)} }}")


def linear_layout_text(ll: LinearLayout, form: str = "div") -> str:
    """ISL text of an F2 layout by bit decomposition.

    form="div" (default): bit i of input x is floor(x / 2^i) mod 2, and since
    floor(x / 2^i) is congruent to that bit mod 2, output bit j is
    (sum of floor(x / 2^i) over row j of the matrix) mod 2 -- ISL keeps these as integer
    divisions. form="exists": every input bit is an existential b in {0, 1} with
    x = sum 2^i b_i and output bit j = (sum of b_i in row j) mod 2. Both are exact; the
    div form is the one ISL decides quickly (see bench/bench_layouts.py).
    """
    if form not in ("div", "exists"):
        raise ValueError(f"unknown F2 lowering form {form!r}")
    ins = [_ident(n, f"i{k}") for k, n in enumerate(ll.in_names)]
    outs = [_ident(n, f"o{k}") for k, n in enumerate(ll.out_names)]
    bits: list[str] = []
    cons: list[str] = []
    flat_bits: list[tuple[str, tuple[int, ...]]] = []
    for k, (_, bases) in enumerate(ll.in_dims):
        x = ins[k]
        cons.append(f"0 <= {x} < {1 << len(bases)}")
        if form == "div":
            flat_bits += [(x if i == 0 else f"floor({x}/{1 << i})", b)
                          for i, b in enumerate(bases)]
            continue
        bs = [f"b{k}_{i}" for i in range(len(bases))]
        bits += bs
        cons += [f"0 <= {b} <= 1" for b in bs]
        if bs:
            cons.append(f"{x} = " + " + ".join(f"{1 << i}*{b}" for i, b in enumerate(bs)))
        flat_bits += list(zip(bs, bases, strict=True))
    for j, (_, osize) in enumerate(ll.out_dims):
        terms = []
        for bit in range(osize.bit_length() - 1):
            row = [v for v, basis in flat_bits if (basis[j] >> bit) & 1]
            if not row:
                continue
            if form == "exists" and len(row) == 1:
                terms.append(f"{1 << bit}*{row[0]}")
            else:
                terms.append(f"{1 << bit}*(({' + '.join(row)}) mod 2)")
        cons.append(f"{outs[j]} = " + (" + ".join(terms) if terms else "0"))
    body = " and ".join(cons)
    if bits:
        body = f"exists ({', '.join(bits)} : {body})"
    return f"{{ [{', '.join(ins)}] -> [{', '.join(outs)}] : {body} }}"


def linear_layout_map(ll: LinearLayout, form: str = "div") -> isl.Map:
    return read_map(linear_layout_text(ll, form))


def _lego_stage_expr(lg: LegoLayout, names: Sequence[str]) -> str:
    w = lg.weights()
    terms = []
    for sd in lg.order.order:
        f = lg.group.factor(sd)
        if f == 1:
            continue
        inner = lg.group.inner(sd)
        c = names[sd[0]]
        part = c if inner == 1 else f"floor({c}/{inner})"
        if inner * f != lg.shape[sd[0]]:
            part = f"({part} mod {f})"
        terms.append(f"{w[sd]}*{part}")
    return " + ".join(terms) or "0"


def lego_map(lg: LegoLayout | LegoChain) -> isl.Map:
    """Quasi-affine map of a LEGO layout. A chain substitutes each stage's row-major
    delinearisation of the previous offset into the next stage's expression, so the result
    is one map with nested floors and no projected intermediates (which keeps ISL fast)."""
    stages = lg.stages if isinstance(lg, LegoChain) else (lg,)
    first = stages[0]
    names = coord_names(len(first.shape))
    bounds = " and ".join(f"0 <= {c} < {e}" for c, e in zip(names, first.shape, strict=True))
    expr = _lego_stage_expr(first, names)
    for st in stages[1:]:
        total = product(tuple(st.shape))
        parts = []
        for e, sfx in zip(st.shape, suffix_product(tuple(st.shape)), strict=True):
            part = f"({expr})" if sfx == 1 else f"floor(({expr})/{sfx})"
            parts.append(part if sfx * e == total else f"({part} mod {e})")
        expr = _lego_stage_expr(st, [f"({p})" for p in parts])
    return read_map(f"{{ [{', '.join(names)}] -> [o] : {bounds} and o = {expr} }}")


def delinearize_map(shape: Sequence[int]) -> isl.Map:
    """{ [l] -> [c0..] } row-major (last dim fastest), for 0 <= l < prod(shape)."""
    names = coord_names(len(shape))
    strides = suffix_product(tuple(shape))
    cons = [f"0 <= l < {product(tuple(shape))}"]
    for c, e, s in zip(names, shape, strides, strict=False):
        part = "l" if s == 1 else f"floor(l/{s})"
        cons.append(f"{c} = ({part} mod {e})" if s * e != product(tuple(shape)) else
                    f"{c} = {part}")
    return read_map(f"{{ [l] -> [{', '.join(names)}] : {' and '.join(cons)} }}")


def linearize_map(shape: Sequence[int]) -> isl.Map:
    """{ [c0..] -> [l] } row-major index on the box."""
    names = coord_names(len(shape))
    strides = suffix_product(tuple(shape))
    bounds = " and ".join(f"0 <= {c} < {e}" for c, e in zip(names, shape, strict=False))
    expr = " + ".join(f"{s}*{c}" for c, s in zip(names, strides, strict=False))
    return read_map(f"{{ [{', '.join(names)}] -> [l] : {bounds} and l = {expr} }}")


def piecewise_map(pw: PiecewiseLayout) -> isl.Map:
    """Union of the pieces (with parameters)."""
    maps = [read_map(pw.piece_map_isl(p)) for p in pw.pieces]
    m = maps[0]
    for x in maps[1:]:
        m = m.union(x)
    return m.coalesce()


def _cute_image(obj: object) -> tuple[Layout, Swizzle | None, int] | None:
    """(L, swizzle, offset) when `obj`'s image is swizzle(offset + image(L)) for a CuTe
    layout L (swizzle None: image(L) itself), so that `cute_image_map(L)` gives the image
    (a Layout, a ComposedLayout, or anything with `isl_cute_image()`)."""
    if isinstance(obj, Layout):
        return obj, None, 0
    if isinstance(obj, ComposedLayout):
        return obj.layout, obj.swizzle, obj.offset
    method = getattr(obj, "isl_cute_image", None)
    return method() if callable(method) else None


def range_set(obj: object) -> isl.Set:
    """The set of offsets a layout produces. A CuTe layout's range is taken from its leaf
    form (`cute_image_map`). For a swizzled layout the inner range is computed first and then
    mapped through the swizzle, which ISL does far faster than projecting the composed map
    (measured: 0.2 s instead of 110 s on a nested 3x3 case)."""
    image = _cute_image(obj)
    if image is not None:
        layout, sw, off = image
        rng = cute_image_map(layout).range()
        return rng if sw is None else rng.apply(swizzle_map(sw, off))
    method = getattr(obj, "isl_range", None)
    if callable(method):
        return method()
    return to_isl(obj).range()


def to_isl(obj: object, *, linear: bool = False) -> isl.Map:
    """Lower any supported layout (or anything with a `to_isl()` method) to an isl.Map."""
    if isinstance(obj, isl.Map):
        return obj
    if isinstance(obj, str):
        return read_map(obj)
    if isinstance(obj, Layout):
        return cute_map(obj, linear=linear)
    if isinstance(obj, ComposedLayout):
        return composed_map(obj, linear=linear)
    if isinstance(obj, Swizzle):
        return swizzle_map(obj)
    if isinstance(obj, LinearLayout):
        return linear_layout_map(obj)
    if isinstance(obj, (LegoLayout, LegoChain)):
        return lego_map(obj)
    if isinstance(obj, PiecewiseLayout):
        return piecewise_map(obj)
    method = getattr(obj, "to_isl", None)
    if callable(method):
        return method()
    raise TypeError(f"cannot lower {type(obj).__name__} to ISL")


# --- results ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Result:
    """Verdict of one decision. `ok` is True only for a proof; `witness` holds concrete
    values (params, coordinates, offsets) when refuted; `evidence` holds ISL text."""

    prop: str
    verdict: str
    witness: Mapping[str, Any] | None = None
    evidence: Mapping[str, str] = field(default_factory=dict)
    reason: str = ""
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return self.verdict == PROVED

    @property
    def refuted(self) -> bool:
        return self.verdict == REFUTED

    @property
    def unknown(self) -> bool:
        return self.verdict == UNKNOWN

    def __str__(self) -> str:
        w = f" witness={dict(self.witness)}" if self.witness else ""
        r = f" ({self.reason})" if self.reason else ""
        return f"{self.prop}: {self.verdict}{r}{w}"


WITNESS_SHARE = 20
"""A witness search that starts after the verdict is settled gets max_ops // WITNESS_SHARE
operations of its own (a fresh count). The verdict is sound without a witness, so the search
for one must not be where a decision spends its time: ISL's cost per operation grows with the
size of its sets, and a witness search on an awkward map (a nested non-power-of-two mode) ran
for minutes within the verdict's 10^6 operations."""


def _arm(max_ops: int) -> None:
    """Start a fresh operation count limited to `max_ops` (ISL reads 0 as "no limit")."""
    CTX.reset_operations()
    CTX.set_max_operations(max(1, max_ops))


@dataclass
class _Budget:
    """The ISL operation budget of one decision, handed to its body by `_guarded`.

    The verdict runs under `max_ops`; `witness(search)` runs an optional search once the
    verdict is settled under its own, smaller share and gives None when that runs out, so
    every ISL operation of a decision -- verdict, witness and evidence -- is bounded."""

    max_ops: int
    in_witness: bool = False

    def witness(self, search: Callable[[], Any]) -> Any:
        """`search()`, or None if ISL gives up on it (out of budget or an ISL error)."""
        if not self.in_witness:
            self.in_witness = True
            _arm(self.max_ops // WITNESS_SHARE)
        try:
            return search()
        except isl.Error:
            return None


def _guarded(prop: str, max_ops: int, body: Callable[[_Budget], Result]) -> Result:
    """Run `body` under an ISL operation budget; an exhausted budget or ISL error is UNKNOWN.

    Every decision procedure goes through here, so all of them are bounded the same way:
    the verdict by `max_ops`, a witness search after it by its share (see `_Budget`)."""
    t0 = time.perf_counter()
    _arm(max_ops)
    try:
        res = body(_Budget(max_ops))
    except isl.Error as exc:
        res = Result(prop, UNKNOWN, reason=f"isl gave up: {exc}")
    finally:
        CTX.set_max_operations(0)
        CTX.reset_operations()
    return Result(res.prop, res.verdict, res.witness, res.evidence, res.reason,
                  time.perf_counter() - t0)


NO_WITNESS = " (no witness: its search ran out of its ISL budget)"


def _as_map(x: object) -> isl.Map:
    return to_isl(x)


def _as_set(x: object) -> isl.Set | None:
    if x is None or isinstance(x, isl.Set):
        return x
    if isinstance(x, str):
        return read_set(x)
    if isinstance(x, (tuple, list)):
        return box_set(list(x))
    raise TypeError(f"domain must be an isl.Set, ISL text or a shape tuple, not {type(x)}")


def _restrict(m: isl.Map, domain: object) -> isl.Map:
    d = _as_set(domain)
    return m if d is None else m.intersect_domain(d)


def _point(pt: isl.Point, n_set: int) -> tuple[dict[str, int], tuple[int, ...]]:
    sp = pt.get_space()
    params = {
        sp.get_dim_name(isl.dim_type.param, i): pt.get_coordinate_val(
            isl.dim_type.param, i).to_python()
        for i in range(sp.dim(isl.dim_type.param))
    }
    vals = tuple(pt.get_coordinate_val(isl.dim_type.set, i).to_python() for i in range(n_set))
    return params, vals


def _fix(s: isl.Set | isl.Map, params: Mapping[str, int]) -> Any:
    for name, v in params.items():
        idx = s.find_dim_by_name(isl.dim_type.param, name)
        if idx >= 0:
            s = s.fix_val(isl.dim_type.param, idx, isl.Val.int_from_si(CTX, v))
    return s


def eval_map(m: isl.Map, coord: Sequence[int], params: Mapping[str, int] | None = None
             ) -> tuple[int, ...] | None:
    """The offset(s) `m` gives at `coord` (None if undefined there): used for witnesses."""
    mm = _fix(m, params or {})
    for i, v in enumerate(coord):
        mm = mm.fix_val(isl.dim_type.in_, i, isl.Val.int_from_si(CTX, int(v)))
    rng = mm.range()
    if rng.is_empty():
        return None
    _, vals = _point(rng.sample_point(), rng.dim(isl.dim_type.set))
    return vals


def _scalar(t: tuple[int, ...] | None) -> Any:
    return t[0] if t is not None and len(t) == 1 else t


# --- decision procedures ----------------------------------------------------------------


def equivalent(a: object, b: object, domain: object = None, *,
               max_ops: int = DEFAULT_MAX_OPS) -> Result:
    """Do `a` and `b` define the same relation on `domain` (default: on their own domains,
    which must then coincide)? Witness: params, coord, offset_a, offset_b."""

    def body(budget: _Budget) -> Result:
        la, lb = _f2_of(a), _f2_of(b)
        if domain is None and la is not None and lb is not None and (
            [len(bs) for _, bs in la.in_dims] == [len(bs) for _, bs in lb.in_dims]
            and [s for _, s in la.out_dims] == [s for _, s in lb.out_dims]
        ):
            ev = {"method": "F2 maps are equal iff their bases are", "a": str(la), "b": str(lb)}
            for k, ((_, ba), (_, bb)) in enumerate(zip(la.in_dims, lb.in_dims, strict=True)):
                for i, (va, vb) in enumerate(zip(ba, bb, strict=True)):
                    if va != vb:
                        coord = tuple((1 << i) if j == k else 0 for j in range(len(la.in_dims)))
                        w = {"params": {}, "coord": coord, "offset_a": _scalar(la.apply(coord)),
                             "offset_b": _scalar(lb.apply(coord))}
                        return Result("equivalent", REFUTED, w, ev,
                                      reason="the layouts differ at coord")
            return Result("equivalent", PROVED, None, ev)
        ma, mb = _restrict(_as_map(a), domain), _restrict(_as_map(b), domain)
        ev = {"a": str(ma), "b": str(mb)}
        for t in (isl.dim_type.in_, isl.dim_type.out):
            if ma.dim(t) != mb.dim(t):
                return Result("equivalent", REFUTED, None, ev,
                              reason=f"arity differs: {ma.get_space()} vs {mb.get_space()}")
        diff = ma.subtract(mb).union(mb.subtract(ma))
        ev["difference"] = str(diff)
        if diff.is_empty():
            return Result("equivalent", PROVED, None, ev)

        def search() -> dict[str, Any]:
            params, coord = _point(diff.domain().sample_point(), ma.dim(isl.dim_type.in_))
            return {"params": params, "coord": coord,
                    "offset_a": _scalar(eval_map(ma, coord, params)),
                    "offset_b": _scalar(eval_map(mb, coord, params))}

        w = budget.witness(search)
        return Result("equivalent", REFUTED, w, ev,
                      reason="the layouts differ at coord" if w else
                      "the layouts differ" + NO_WITNESS)

    return _guarded("equivalent", max_ops, body)


def injective(m: object, domain: object = None, *, max_ops: int = DEFAULT_MAX_OPS) -> Result:
    """No two coordinates of the domain share an offset. Witness: coord_a, coord_b, offset."""

    def body(budget: _Budget) -> Result:
        ll = _f2_of(m) if domain is None else None
        if ll is not None:
            ker = ll.kernel()
            ev = {"method": "GF(2) rank of the basis matrix", "layout": str(ll)}
            if not ker:
                return Result("injective", PROVED, None, ev)
            zero = tuple(0 for _ in ll.in_dims)
            w = {"params": {}, "coord_a": zero, "coord_b": ker[0],
                 "offset": _scalar(ll.apply(zero)), "offset_b": _scalar(ll.apply(ker[0]))}
            return Result("injective", REFUTED, w, ev,
                          reason="a non-zero input lies in the kernel (maps like zero)")
        split = _swizzle_split(m)
        ev: dict[str, str] = {}
        if split is not None:
            # sw is a bijection of the naturals, so sw o (off + L) collides exactly where L
            # does; deciding on L avoids ISL's costly elimination of the XOR bits
            inner, sw, off = split
            full = _restrict(_as_map(m), domain)
            mm = _restrict(inner, domain)
            ev = {"map": str(full), "decided_on": str(mm),
                  "lemma": f"{sw} is a bijection on offsets >= 0, so only the inner layout "
                           "can collide"}
        else:
            full = mm = _restrict(_as_map(m), domain)
            ev = {"map": str(mm)}
        n = mm.dim(isl.dim_type.in_)
        pairs = mm.apply_range(mm.reverse())
        lt = isl.Map.lex_lt(mm.get_space().domain())
        coll = pairs.intersect(lt)
        ev["collisions"] = str(coll)
        if coll.is_empty():
            return Result("injective", PROVED, None, ev)

        def search() -> dict[str, Any]:
            params, vals = _point(coll.wrap().sample_point(), 2 * n)
            ca, cb = vals[:n], vals[n:]
            return {"params": params, "coord_a": ca, "coord_b": cb,
                    "offset": _scalar(eval_map(full, ca, params)),
                    "offset_b": _scalar(eval_map(full, cb, params))}

        w = budget.witness(search)
        return Result("injective", REFUTED, w, ev,
                      reason="two coordinates share an offset" + ("" if w else NO_WITNESS))

    return _or_enumerated(_guarded("injective", max_ops, body), m, domain, None)


def _param_prefix(m: isl.Map) -> str:
    names = [m.get_dim_name(isl.dim_type.param, i) for i in range(m.dim(isl.dim_type.param))]
    return f"[{', '.join(names)}] -> " if names else ""


def in_bounds(m: object, domain: object = None, lo: int | str | Sequence[int | str] = 0,
              hi: int | str | Sequence[int | str] | None = None, *,
              max_ops: int = DEFAULT_MAX_OPS) -> Result:
    """lo <= offset < hi for every coordinate (per output dim when tuples are given; hi may
    be an ISL expression in the map's parameters, e.g. "64*M"). Witness: coord, offset."""

    def body(budget: _Budget) -> Result:
        mm = _restrict(_as_map(m), domain)
        n_out = mm.dim(isl.dim_type.out)
        los = list(lo) if isinstance(lo, (tuple, list)) else [lo] * n_out
        his = list(hi) if isinstance(hi, (tuple, list)) else [hi] * n_out
        outs = [f"o{j}" for j in range(n_out)]
        bad = []
        for o, l, h in zip(outs, los, his, strict=False):
            if l is not None:
                bad.append(f"{o} < {l}")
            if h is not None:
                bad.append(f"{o} >= {h}")
        if not bad:
            return Result("in_bounds", PROVED, None, {"map": str(mm)}, reason="no bounds given")
        oob = read_set(f"{_param_prefix(mm)}{{ [{', '.join(outs)}] : {' or '.join(bad)} }}")
        viol = mm.intersect_range(oob)
        ev = {"map": str(mm), "out_of_bounds": str(oob), "violations": str(viol)}
        if viol.is_empty():
            return Result("in_bounds", PROVED, None, ev)
        n_in = mm.dim(isl.dim_type.in_)

        def search() -> dict[str, Any]:
            params, vals = _point(viol.wrap().sample_point(), n_in + n_out)
            return {"params": params, "coord": vals[:n_in], "offset": _scalar(vals[n_in:])}

        w = budget.witness(search)
        return Result("in_bounds", REFUTED, w, ev,
                      reason="an offset leaves the bounds" + ("" if w else NO_WITNESS))

    return _guarded("in_bounds", max_ops, body)


def _f2_of(obj: object) -> LinearLayout | None:
    """The F2 layout behind `obj` (a LinearLayout or anything with `f2_layout()`)."""
    if isinstance(obj, LinearLayout):
        return obj
    method = getattr(obj, "f2_layout", None)
    return method() if callable(method) else None


def _f2_box_units(ll: LinearLayout, extents: Sequence[int]) -> list[tuple[int, ...]]:
    """Unit vectors spanning the box [0, n_0) x ...: the box's span is the power-of-two box
    [0, 2^k_j) with k_j = bit_length(n_j - 1), since it holds n_j - 1 and all units below."""
    units = []
    for j, n in enumerate(extents):
        for i in range((n - 1).bit_length()):
            vec = [0] * len(extents)
            vec[j] = 1 << i
            units.append(tuple(vec))
    return units


def _swizzle_split(obj: object) -> tuple[isl.Map, Swizzle, int] | None:
    """(inner map, swizzle, offset) when `obj` is `swizzle o (offset + inner)`."""
    if isinstance(obj, ComposedLayout):
        return cute_map(obj.layout), obj.swizzle, obj.offset
    method = getattr(obj, "isl_swizzle_split", None)
    return method() if callable(method) else None


def _count(s: isl.Set) -> int | None:
    """Number of points of a parameter-free bounded set (None otherwise)."""
    if s.dim(isl.dim_type.param) or not s.is_bounded():
        return None
    v = s.count_val()
    return None if v.is_infty() or v.is_nan() else int(v.to_python())


def _swizzle_preimage(sw: Swizzle, off: int) -> isl.Map:
    """{ [p] -> [o] : o = sw(p) - off }: sw is an involution on the naturals, so p is
    sw(off + x) exactly when x = sw(p) - off."""
    return read_map(f"{{ [p] -> [o] : p >= 0 and o = {swizzle_expr(sw, 'p')} - {off} }}")


def _collisions(mm: isl.Map) -> isl.Map:
    """Pairs of distinct coordinates (first lexicographically smaller) with one offset."""
    return mm.apply_range(mm.reverse()).intersect(isl.Map.lex_lt(mm.get_space().domain()))


def _covers_by_counting(m: object, mm: isl.Map, cod: isl.Set, domain: object
                        ) -> Result | None:
    """Pigeonhole on finite, parameter-free sets: with as many coordinates as codomain
    points, the layout covers the codomain iff it stays inside it and is injective. Proves
    without projecting the map's range (ISL's costly step); a refutation here carries no
    witness (the caller looks for one).

    A CuTe layout (possibly swizzled) with non-negative offsets is counted on its leaf form
    instead: its size is known, its image is `range_set`, and it is injective iff its leaf
    form is (the swizzle is a bijection of the naturals)."""
    if mm.dim(isl.dim_type.param):
        return None
    image = _cute_image(m) if domain is None else None
    if image is not None and (image[2] < 0 or any(d < 0 for d in flatten(image[0].stride))):
        image = None  # a swizzle map only reads offsets >= 0
    n_cod = _count(cod)
    n_dom = image[0].size() if image is not None else _count(mm.domain())
    if n_dom is None or n_cod is None or n_dom > n_cod:
        return None
    ev = {"map": str(mm), "codomain": str(cod),
          "counting": f"{n_dom} coordinates for {n_cod} codomain points"}
    if n_dom < n_cod:
        return Result("covers", REFUTED, None, ev, reason="counting: fewer coordinates than "
                      "codomain points")
    if image is not None and any(d == 0 and n > 1 for n, d in
                                 zip(flatten(image[0].shape), flatten(image[0].stride),
                                     strict=True)):
        # A mode of extent > 1 with stride 0: two coordinates share every offset (the
        # swizzle is a bijection), so with no more coordinates than points one is missed.
        return Result("covers", REFUTED, None, ev, reason="counting: a mode of extent > 1 "
                      "has stride 0, so two coordinates share an offset")
    if image is not None:
        layout, sw, off = image
        leaves = cute_image_map(layout)
        ev["decided_on"] = f"leaf form {leaves} (swizzle {sw}, offset {off})"
        if sw is None:
            outside = not leaves.range().subtract(cod).is_empty()
        else:  # inside iff off + L(c) is the preimage sw(p) - off of a codomain point p
            outside = not leaves.range().subtract(cod.apply(_swizzle_preimage(sw, off))
                                                  ).is_empty()
    else:
        leaves = mm
        outside = not mm.subtract_range(cod).is_empty()
    if outside:
        return Result("covers", REFUTED, None, ev, reason="counting: some coordinate lands "
                      "outside the codomain, so fewer offsets remain inside")
    if _collisions(leaves).is_empty():
        ev["lemma"] = "injective, inside the codomain and as many coordinates as points"
        return Result("covers", PROVED, None, ev)
    return Result("covers", REFUTED, None, ev, reason="counting: two coordinates share an "
                  "offset, so some codomain point is missed")


def covers(m: object, domain: object = None, codomain: object = None, *,
           max_ops: int = DEFAULT_MAX_OPS) -> Result:
    """Every point of `codomain` (an isl.Set, ISL text, an int n for [0, n), or a shape
    tuple for a box) is the offset of some coordinate. Witness: an uncovered offset.

    Exact strategies, cheapest first: GF(2) algebra for F2 layouts; pigeonhole counting for
    finite parameter-free cases (injective + inside + equal counts); then the uncovered set
    itself (needed for witnesses and symbolic sizes). For a swizzled layout sw o (off + L)
    that set is computed on the preimage: sw is an involution on the naturals, so p is
    produced iff sw(p) - off is produced by L, which avoids the complement of a projected
    swizzle (ISL: 5 s vs 0.2 s measured). A refutation found by counting is returned without
    witness if the witness search exhausts the budget.
    """

    def body(budget: _Budget) -> Result:
        if isinstance(codomain, int):
            cod = box_set([codomain])
        else:
            cod = _as_set(codomain)
        if cod is None:
            raise ValueError("covers needs a codomain")
        ll = _f2_of(m) if domain is None else None
        if ll is not None and isinstance(codomain, (int, tuple, list)):
            extents = [codomain] if isinstance(codomain, int) else list(codomain)
            if len(extents) == len(ll.out_dims):
                piv, _ = _Pivots.build(ll.columns())
                ev = {"method": "GF(2): the box's span must lie in the image subspace",
                      "layout": str(ll), "codomain": str(cod)}
                for unit in _f2_box_units(ll, extents):
                    if piv.solve(ll._flatten_out(unit)) is None:
                        w = {"params": {}, "offset": _scalar(unit)}
                        return Result("covers", REFUTED, w, ev,
                                      reason="an offset is never produced")
                return Result("covers", PROVED, None, ev)
        mm = _restrict(_as_map(m), domain)
        counted = _covers_by_counting(m, mm, cod, domain)
        if counted is None:
            return _uncovered(m, mm, cod, domain, budget)
        if counted.ok:
            return counted
        # refuted by counting; the uncovered set only adds a witness
        found = budget.witness(lambda: _uncovered(m, mm, cod, domain, budget))
        if found is not None and found.refuted and found.witness is not None:
            return found
        return Result(counted.prop, counted.verdict, None, counted.evidence,
                      counted.reason + NO_WITNESS)

    return _or_enumerated(_guarded("covers", max_ops, body), m, domain, codomain)


def _uncovered(m: object, mm: isl.Map, cod: isl.Set, domain: object,
               budget: _Budget) -> Result:
    """covers, decided by computing the uncovered part of the codomain (gives witnesses)."""
    split = _swizzle_split(m) if domain is None and cod.dim(isl.dim_type.set) == 1 else None
    if split is not None:
        inner, sw, off = split
        image = _cute_image(m)
        inner_rng = cute_image_map(image[0]).range() if image is not None else inner.range()
        pre = _swizzle_preimage(sw, off)
        negative = cod.intersect(read_set("{ [p] : p < 0 }"))
        missed = cod.apply(pre).subtract(inner_rng).intersect_params(
            inner.domain().params())
        ev = {"inner": str(inner), "swizzle": f"{sw} offset {off}", "codomain": str(cod),
              "uncovered_preimage": str(missed), "uncovered_negative": str(negative)}
        if missed.is_empty() and negative.is_empty():
            return Result("covers", PROVED, None, ev)

        def search_swizzled() -> dict[str, Any]:
            if not negative.is_empty():
                params, vals = _point(negative.sample_point(), 1)
                return {"params": params, "offset": vals[0]}
            params, vals = _point(missed.sample_point(), 1)
            return {"params": params, "offset": sw(vals[0] + off)}

        w = budget.witness(search_swizzled)
        return Result("covers", REFUTED, w, ev,
                      reason="an offset is never produced" + ("" if w else NO_WITNESS))
    # only parameter values where the (restricted) layout is defined are in question
    rng = range_set(m) if domain is None else mm.range()
    uncovered = cod.subtract(rng).intersect_params(mm.domain().params())
    ev = {"map": str(mm), "codomain": str(cod), "uncovered": str(uncovered)}
    if uncovered.is_empty():
        return Result("covers", PROVED, None, ev)

    def search() -> dict[str, Any]:
        params, vals = _point(uncovered.sample_point(), uncovered.dim(isl.dim_type.set))
        return {"params": params, "offset": _scalar(vals)}

    w = budget.witness(search)
    return Result("covers", REFUTED, w, ev,
                  reason="an offset is never produced" + ("" if w else NO_WITNESS))


def check_pieces(pw: PiecewiseLayout, *, max_ops: int = DEFAULT_MAX_OPS) -> Result:
    """The pieces of a piecewise layout are pairwise disjoint and cover its domain, for every
    parameter value allowed by its context. Witness: params, coord, pieces (names)."""

    def body(budget: _Budget) -> Result:
        dom = read_set(pw.domain_set_isl())
        sets = [read_set(pw.piece_set_isl(p)) for p in pw.pieces]
        ev = {"domain": str(dom)}
        n = dom.dim(isl.dim_type.set)
        for i in range(len(sets)):
            for j in range(i + 1, len(sets)):
                both = sets[i].intersect(sets[j])
                if not both.is_empty():
                    ev["overlap"] = str(both)
                    names = (pw.pieces[i].name, pw.pieces[j].name)
                    w = budget.witness(lambda b=both, names=names: _piece_witness(b, n, names))
                    return Result("pieces", REFUTED, w, ev,
                                  reason="two pieces overlap" + ("" if w else NO_WITNESS))
        union = sets[0]
        for s in sets[1:]:
            union = union.union(s)
        gap = dom.subtract(union)
        ev["gap"] = str(gap)
        if gap.is_empty():
            return Result("pieces", PROVED, None, ev)
        w = budget.witness(lambda: _piece_witness(gap, n, ()))
        return Result("pieces", REFUTED, w, ev,
                      reason="no piece covers a coordinate" + ("" if w else NO_WITNESS))

    return _guarded("pieces", max_ops, body)


def _piece_witness(s: isl.Set, n: int, pieces: tuple[str, ...]) -> dict[str, Any]:
    params, coord = _point(s.sample_point(), n)
    return {"params": params, "coord": coord, "pieces": pieces}


ENUMERATION_LIMIT = 1 << 14
"""Coordinates a small concrete layout may have for the enumeration fallback below."""


def _or_enumerated(res: Result, m: object, domain: object, codomain: object) -> Result:
    """An ISL answer, or -- when ISL ran out of budget on a small concrete layout (a realised
    buffer: integer shape, an `offset` per coordinate, no parameters; or a CuTe layout of
    integer shape, one coordinate per top-level mode, as its ISL map) -- the same property
    decided by enumerating its coordinates (`enumerated`). XOR-heavy F2 bases can exhaust
    ISL's subtract on 32 elements; enumeration is exact there."""
    if not res.unknown or domain is not None:
        return res
    shape = getattr(m, "shape", None)
    offset = getattr(m, "offset", None)
    if isinstance(m, (Layout, ComposedLayout)):  # a CuTe layout: one coordinate per mode
        inner = m.layout if isinstance(m, ComposedLayout) else m
        if not all(isinstance(x, int) for x in flatten(inner.shape)):
            return res
        shape = tuple(mode.size() for mode in inner.modes())
        offset = m
    if not (isinstance(shape, tuple) and shape and callable(offset)
            and all(isinstance(e, int) and e > 0 for e in shape)
            and math.prod(shape) <= ENUMERATION_LIMIT):
        return res
    if res.prop == "covers" and not isinstance(codomain, int):
        return res
    t0 = time.perf_counter()
    offsets = [int(offset(c)) for c in itertools.product(*(range(e) for e in shape))]
    return enumerated(res.prop, shape, offsets, res.reason,
                      res.seconds + time.perf_counter() - t0, codomain=codomain)


def enumerated(prop: str, shape: tuple[int, ...], offsets: Sequence[int], isl_reason: str,
               isl_seconds: float, codomain: int | None = None) -> Result:
    """`prop` -- "injective", "in_bounds" (every offset >= 0) or "covers" (every offset of
    [0, codomain) produced) -- of a concrete layout, decided from the offsets of all its
    coordinates in row-major order: the one enumeration behind both the ISL facade's
    fallback and the layout checker's. Witnesses name coordinates as ISL's do."""
    t0 = time.perf_counter()
    flat = np.asarray(offsets, dtype=np.int64)
    ev = {"method": f"enumeration of {flat.size} coordinates (ISL: {isl_reason})"}

    def coord(k: int) -> tuple[int, ...]:
        return tuple(int(x) for x in np.unravel_index(k, shape))

    def done(verdict: str, witness: Mapping[str, Any] | None, reason: str = "") -> Result:
        return Result(prop, verdict, witness, ev, reason,
                      isl_seconds + time.perf_counter() - t0)

    if prop == "injective":
        order = np.argsort(flat, kind="stable")
        same = np.nonzero(flat[order][1:] == flat[order][:-1])[0]
        if same.size == 0:
            return done(PROVED, None)
        a, b = int(order[same[0]]), int(order[same[0] + 1])
        return done(REFUTED, {"params": {}, "coord_a": coord(a), "coord_b": coord(b),
                              "offset": int(flat[a]), "offset_b": int(flat[b])},
                    "two coordinates share an offset")
    if prop == "in_bounds":
        negative = np.nonzero(flat < 0)[0]
        if negative.size == 0:
            return done(PROVED, None)
        k = int(negative[0])
        return done(REFUTED, {"params": {}, "coord": coord(k), "offset": int(flat[k])},
                    "an offset is below the base")
    if prop == "covers" and codomain is not None:
        hit = np.zeros(codomain, dtype=bool)
        hit[flat[(flat >= 0) & (flat < codomain)]] = True
        missing = np.nonzero(~hit)[0]
        if missing.size == 0:
            return done(PROVED, None)
        return done(REFUTED, {"params": {}, "offset": int(missing[0])},
                    "an offset is never produced")
    raise ValueError(f"enumeration cannot decide {prop!r}")
