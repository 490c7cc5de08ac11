"""Equivalence of two kernels: same outputs from the same inputs, for every size.

Why: a rewrite (a new tiling, a TMA version of a copy, a swizzled staging buffer) should
compute exactly what the kernel it replaces computed, and with no spec written that is the
claim to check. The same two halves as `ensures` (docs/semantics.md, "Specifications"):

* refuting: both kernels run on the interpreter on the same inputs (pairwise distinct
  values; then, on the two cheapest launches, special IEEE values sprinkled and at every
  corner -- `x + 0.0` and `x` differ only on -0) at launches both `where`s allow; the first
  output element that differs is a distinguishing input (sizes, seed, inputs, element, both
  values);
* proving: the value terms of both kernels (semantics/value/value_exec.py) are compared with ISL
  for every write of A and every write of B that write the same element (each kernel's
  coverage proof makes that every element), through shared memory and TMA on both sides.
  Reductions are bit-exact only in one order, so two folds are compared by execution only
  (unknown).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from tilesafe.frontend import ir
from tilesafe.frontend.fmt import without_spans
from tilesafe.frontend.ir_text import expr_text
from tilesafe.semantics.interpreter.interp import run_kernel
from tilesafe.semantics.interpreter.interp_error import InterpError
from tilesafe.semantics.temporal import sync_counts
from tilesafe.semantics.value import valueflow
from tilesafe.semantics.value.spec_inputs import (
    RUN_KINDS,
    _cost,
    choose_sizes,
    edge_specials,
    value_inputs,
)
from tilesafe.semantics.value.spec_run import MAX_STEPS, same_bits
from tilesafe.semantics.value.value_compare import Compare
from tilesafe.semantics.value.value_exec import Executor, Unsupported
from tilesafe.semantics.value.value_space import is_block
from tilesafe.semantics.value.value_terms import rename, show

EDGE_RUNS = len(edge_specials(ir.DType.F32, exact=False))  # one run per corner value


@dataclass(frozen=True)
class Difference:
    sizes: dict[str, int]
    seed: int
    tensor: str
    element: tuple[int, ...]
    a: object
    b: object
    mismatches: int
    inputs: str = "distinct"  # the `run --inputs` kind (spec_inputs.RUN_KINDS)

    def describe(self) -> str:
        sizes = ", ".join(f"{k}={v}" for k, v in self.sizes.items())
        at = f"{self.tensor}[{', '.join(map(str, self.element))}]"
        kind = "" if self.inputs == "distinct" else f", {self.inputs} inputs"
        return (f"at {sizes} (seed {self.seed}{kind}): {at} is {self.a} in A and {self.b} "
                f"in B ({self.mismatches} element(s) differ)")


@dataclass(frozen=True)
class Result:
    verdict: str  # "proved", "refuted", "unknown"
    reason: str
    difference: Difference | None = None
    launches: tuple[dict[str, int], ...] = ()
    tensors: dict[str, str] = field(default_factory=dict)  # out tensor -> proved / why not


def interface_mismatch(a: ir.Kernel, b: ir.Kernel) -> str | None:
    """Why A and B cannot be compared (different parameters), or None."""
    pa = [(t.name, t.dtype, t.role.written, without_spans(t.shape)) for t in a.params]
    pb = [(t.name, t.dtype, t.role.written, without_spans(t.shape)) for t in b.params]
    if pa != pb:
        # Named as the source writes them (an enum's text would read `DType.F16`).
        return ("the kernels' parameters differ (names, dtypes, roles or shapes, in order): "
                f"{_params_text(a)} vs {_params_text(b)}")
    return None


def _params_text(k: ir.Kernel) -> str:
    return "(" + ", ".join(
        f"{t.name}: {t.role.value} {t.dtype.value}"
        f"[{', '.join(expr_text(e) for e in t.shape)}]" for t in k.params) + ")"


def check(a: ir.Kernel, b: ir.Kernel, seed: int = 0) -> Result:
    why = interface_mismatch(a, b)
    if why:
        return Result("unknown", why)
    launches = []
    for sizes in choose_sizes(a) + choose_sizes(b):
        if sizes in launches or _cost(a, sizes) is None or _cost(b, sizes) is None:
            continue
        launches.append(sizes)
    ran: list[dict[str, int]] = []
    runs = [(sizes, seed, "distinct") for sizes in launches[:4]]
    runs += [(sizes, seed, "special") for sizes in launches[:2]]
    runs += [(sizes, s, "edges") for sizes in launches[:1] for s in range(EDGE_RUNS)]
    for sizes, s, kind in runs:
        exact, profile = RUN_KINDS[kind]
        arrays = value_inputs(a, sizes, s, exact, profile)
        try:
            with np.errstate(all="ignore"):
                ra = run_kernel(a, sizes, arrays, max_steps=MAX_STEPS)
                rb = run_kernel(b, sizes, arrays, max_steps=MAX_STEPS)
        except InterpError as err:
            return Result("unknown", f"a run failed at {sizes} ({err.code}): verify each "
                          "kernel first", launches=tuple(ran))
        for t in a.params:
            if not t.role.written:
                continue
            differ = ~same_bits(ra.tensors[t.name], rb.tensors[t.name])
            if differ.any():
                el = tuple(int(i) for i in np.argwhere(differ)[0])
                d = Difference(dict(sizes), s, t.name, el, _val(ra.tensors[t.name][el]),
                               _val(rb.tensors[t.name][el]), int(differ.sum()), kind)
                return Result("refuted", d.describe(), d, tuple(ran))
        if sizes not in ran:
            ran.append(sizes)
    tensors = {}
    for t in a.params:
        if t.role.written:
            try:
                prove_tensor(a, b, t.name)
                tensors[t.name] = "proved"
            except (valueflow.NotProved, Unsupported) as err:
                tensors[t.name] = getattr(err, "reason", str(err))
    if all(v == "proved" for v in tensors.values()):
        return Result("proved", "same outputs for every size", None, tuple(ran), tensors)
    return Result("unknown", "; ".join(f"{k}: {v}" for k, v in tensors.items()
                                       if v != "proved"), None, tuple(ran), tensors)


def prove_tensor(a: ir.Kernel, b: ir.Kernel, tensor: str) -> None:
    """Every element of `tensor` gets the same value in A and B, for every size."""
    ea, eb = Executor(a, 0), Executor(b, 1)
    wa, wb = ea.run(), eb.run()
    pa = valueflow.Prover(a, wa, (a, b), arrivals=ea.arrivals,
                          phases=sync_counts.phase_members(ea.named_uses))
    pb = valueflow.Prover(b, wb, (a, b), first_ns=1 << 20, ctx=pa.ctx, arrivals=eb.arrivals,
                          phases=sync_counts.phase_members(eb.named_uses))
    outs_a = [w for w in wa if w.space is ir.Space.GLOBAL and w.target == tensor]
    outs_b = [w for w in wb if w.space is ir.Space.GLOBAL and w.target == tensor]
    if not outs_a or not outs_b:
        raise valueflow.NotProved(f"no write of '{tensor}' in one of the kernels")
    dtype = a.tensor(tensor).dtype
    for x in outs_a:
        mx = pa.fresh_ns_map()
        vx = pa.resolve(rename(x.value, mx), 0)
        ix = x.inst.renamed(mx(x.inst.ns))
        for y in outs_b:
            my = pb.fresh_ns_map()
            vy = pb.resolve(rename(y.value, my), 0)
            iy = y.inst.renamed(my(y.inst.ns))
            space = pa.space([ix, iy, *valueflow.insts(vx), *valueflow.insts(vy)])
            ctx = space.domain(ix) & space.domain(iy)
            for p, q in zip(x.indices, y.indices, strict=True):
                ctx = ctx & space.term(p, ix).eq_set(space.term(q, iy))
            outer = {n for n in space.names if is_block(n)}
            outer |= set(space.inst_dims(ix)) | set(space.inst_dims(iy))
            try:
                Compare(space, dtype, outer).equal(vx, vy, ctx, top=True)
            except valueflow.NotProved as err:
                raise valueflow.NotProved(f"{err.reason} (A: {show(vx)}; B: {show(vy)})",
                                          err.point) from None


def _val(v: object) -> object:
    f = float(v)  # type: ignore[arg-type]
    return "NaN" if f != f else f
