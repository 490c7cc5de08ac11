"""TMA descriptors: admissible for every size `where` allows, and writing shared memory in
exactly the arrangement the buffer's layout declares.

Three kinds of obligation per tensormap:
1. static rules of `cuTensorMapEncodeTiled` that do not depend on sizes (rank, box, inner
   row bytes, swizzle span, dtype) — decided on the spec;
2. operand rules on global dims and strides (`1 <= dim <= 2^32`, stride a multiple of 16
   and below 2^40) — proved with ISL for all sizes, a sample of the violating set otherwise;
3. per copy statement: the shared destination is 128-byte aligned, and for every stage the
   slice can name and every placement of the buffer its `align` allows, each box element
   lands where the layout says — decided exhaustively (the box is finite); on a mismatch
   the swizzle mode that would fit is synthesised, or the reason none does is given;
4. per copy statement, over all sizes and instances (ISL): the box's innermost start is
   16-byte aligned (TS516), and the box meets the tensor (TS517, a warning: a box wholly
   outside moves nothing -- semantics/access/tma_boxes.py).
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import time
from collections.abc import Callable, Iterator

import islpy as isl
import numpy as np

from tilesafe.checkers.obligation import Obligation, Severity, Verdict
from tilesafe.checkers.registry import CheckOptions
from tilesafe.frontend import ir
from tilesafe.frontend.walk import statements
from tilesafe.semantics.access import tma_boxes
from tilesafe.semantics.access.access import collect, params_env, point_values, where_params
from tilesafe.semantics.expr import products
from tilesafe.semantics.expr.affine import NotAffine, constant, eval_sizes, term
from tilesafe.semantics.hw import tma_rules as tr
from tilesafe.semantics.interpreter.interp_io import tensormap_spec
from tilesafe.semantics.interpreter.smem import realize_offsets

CHECKER = "tma"
OPERAND_CODES = ("TS505", "TS506", "TS511")
ISL_LIMIT = "TS590"
OPS_PER_MS = 1000


def check(kernel: ir.Kernel, options: CheckOptions) -> list[Obligation]:
    out: list[Obligation] = []
    for tmap in kernel.tensormaps:
        spec = _spec(kernel, tmap)
        out.append(_timed(lambda t=tmap, s=spec: _static(kernel, t, s)))
        out.extend(_operand_obligations(kernel, tmap, spec, options))
    for stmt in statements(kernel.body):
        if not isinstance(stmt, (ir.TmaLoad, ir.TmaStore)):
            continue
        out.extend(_copy_obligations(kernel, stmt))
    out.extend(_instance_obligations(kernel, options))
    return out


def _timed(fn: Callable[[], Obligation]) -> Obligation:
    start = time.perf_counter()
    ob = fn()
    return dataclasses.replace(ob, seconds=time.perf_counter() - start)


def _spec(kernel: ir.Kernel, tmap: ir.TensorMap) -> tr.TensorMapSpec:
    """The descriptor with the box as a stand-in shape: only size-free rules read it."""
    return tensormap_spec(kernel, tmap, tmap.box)


# ---- 1. size-free rules -------------------------------------------------------------------


def _static(kernel: ir.Kernel, tmap: ir.TensorMap, spec: tr.TensorMapSpec) -> Obligation:
    name = f"{kernel.name}: tensormap {tmap.name} descriptor rules (box, dtype, swizzle span)"
    found = [v for v in tr.static_violations(spec) if v.code not in OPERAND_CODES]
    evidence = {"spec": repr(spec), "rules": sorted(tr.RULES)}
    if not found:
        return Obligation(CHECKER, name, Verdict.PROVED, "rules", tmap.span, evidence=evidence)
    first = found[0]
    return Obligation(
        CHECKER, name, Verdict.REFUTED, "rules", tmap.span, first.code,
        "; ".join(f"{v.message} [{v.citation}]" for v in found),
        counterexample={"violations": [v.code for v in found]}, evidence=evidence)


# ---- 2. operand rules over all sizes ------------------------------------------------------


def _operand_obligations(kernel: ir.Kernel, tmap: ir.TensorMap, spec: tr.TensorMapSpec,
                         options: CheckOptions) -> Iterator[Obligation]:
    tensor = kernel.tensor(tmap.tensor)
    ctx = isl.Context()
    ctx.set_max_operations(max(1000, options.timeout_ms * OPS_PER_MS))
    for rule in tr.operand_rules(spec):
        if rule.field == "global_address":
            continue  # base pointers come from cudaMalloc: 256-byte aligned (documented)
        label = _operand_label(tensor, rule)
        name = f"{kernel.name}: tensormap {tmap.name} {label} admissible for all sizes"
        start = time.perf_counter()
        ctx.reset_operations()
        try:
            verdict, code, message, cex, evidence = _prove_operand(kernel, ctx, tensor, rule,
                                                                   options.timeout_ms)
        except (isl.Error, NotAffine) as err:
            verdict, code, cex, evidence = Verdict.UNKNOWN, ISL_LIMIT, None, {}
            message = f"could not decide {label}: {str(err).splitlines()[0] if str(err) else err}"
        method = "z3 (facts of a product of sizes)" if "product" in evidence else "isl"
        yield Obligation(CHECKER, name, verdict, method, tmap.span, code, message,
                         seconds=time.perf_counter() - start, counterexample=cex,
                         evidence=evidence)


def _operand_label(tensor: ir.GlobalTensor, rule: tr.OperandRule) -> str:
    rank = len(tensor.shape)
    if rule.field == "global_dim":
        return f"extent of dim {rank - 1 - rule.index} of {tensor.name}"
    return f"byte stride of dim {rank - 2 - rule.index} of {tensor.name}"


def _operand_factors(tensor: ir.GlobalTensor, rule: tr.OperandRule
                     ) -> tuple[int, tuple[ir.Expr, ...]]:
    """The operand as scale x product of extents: a global dim is one extent; the byte
    stride of a row-major dim is the element size times every inner extent."""
    first = len(tensor.shape) - 1 - rule.index
    if rule.field == "global_dim":
        return 1, (tensor.shape[first],)
    return tensor.dtype.nbytes, tensor.shape[first:]


def _operand_term(env, tensor: ir.GlobalTensor, rule: tr.OperandRule) -> isl.PwAff:
    """The operand as an affine function of the sizes (a stride is a product of extents:
    affine only while at most one of them is symbolic)."""
    scale, extents = _operand_factors(tensor, rule)
    symbolic = []
    for extent in extents:
        if isinstance(extent, ir.IntConst):
            scale *= extent.value
        else:
            symbolic.append(extent)
    if len(symbolic) > 1:
        raise NotAffine("the stride multiplies two symbolic extents", symbolic[1])
    value = constant(env, scale)
    return value.mul(term(symbolic[0], env)) if symbolic else value


def _prove_product(kernel: ir.Kernel, tensor: ir.GlobalTensor, rule: tr.OperandRule,
                   timeout_ms: int):
    """A stride that multiplies several symbolic extents (semantics/expr/products.py): proved
    from the facts of the product, refuted at sizes z3 finds, else unknown (TS590)."""
    scale, extents = _operand_factors(tensor, rule)
    for e in extents:
        if isinstance(e, ir.IntConst):
            scale *= e.value
    sym = tuple(e for e in extents if not isinstance(e, ir.IntConst))
    f = products.facts(kernel, scale, sym, timeout_ms)
    evidence = {"method": "product facts (bounds and power-of-two divisors of each factor, "
                          "z3 over the where clause)", "citation": rule.citation}
    if f is not None:
        evidence.update(f.evidence())
        ok = ((rule.minimum is None or f.lo >= rule.minimum)
              and (rule.maximum is None or (f.hi is not None and f.hi <= rule.maximum))
              and f.divisor % rule.multiple_of == 0)
        if ok:
            return Verdict.PROVED, None, f"{rule.describe()} (from the facts of the product " \
                f"{evidence['product']})", None, evidence
    sizes = products.violation(kernel, scale, sym, rule.minimum, rule.maximum,
                               rule.multiple_of, timeout_ms)
    if sizes is not None:
        actual = _concrete_operand(tensor, rule, sizes)
        message = (f"{rule.describe()}, but at {_sizes(sizes)} it is {actual}; add a 'where' "
                   f"constraint that rules this out")
        return Verdict.REFUTED, rule.code, message, {"sizes": sizes, "value": actual}, evidence
    return (Verdict.UNKNOWN, ISL_LIMIT, f"could not decide {_operand_label(tensor, rule)}: the "
            "facts of the product do not imply the rule and no violating sizes were found",
            None, evidence)


def _prove_operand(kernel: ir.Kernel, ctx: isl.Context, tensor: ir.GlobalTensor,
                   rule: tr.OperandRule, timeout_ms: int = 10_000):
    scale, extents = _operand_factors(tensor, rule)
    if sum(not isinstance(e, ir.IntConst) for e in extents) > 1:
        return _prove_product(kernel, tensor, rule, timeout_ms)
    env = params_env(kernel, ctx)
    where = where_params(kernel, ctx)
    value = _operand_term(env, tensor, rule)
    pieces = []
    if rule.minimum is not None:
        pieces.append(value.lt_set(constant(env, rule.minimum)))
    if rule.maximum is not None:
        pieces.append(value.gt_set(constant(env, rule.maximum)))
    if rule.multiple_of > 1:
        m = isl.Val.int_from_si(ctx, rule.multiple_of)
        pieces.append(value.mod_val(m).ne_set(constant(env, 0)))
    bad = pieces[0]
    for p in pieces[1:]:
        bad = bad.union(p)
    violating = bad.params().intersect(where.over)
    evidence = {"operand": str(value), "violations": str(violating),
                "where": str(where.over), "citation": rule.citation}
    if violating.is_empty():
        note = "" if where.exact else " (where-clause atoms dropped: " + \
            "; ".join(where.dropped) + ")"
        return Verdict.PROVED, None, f"{rule.describe()}{note}", None, evidence
    sizes, _ = point_values(violating.sample_point())
    actual = _concrete_operand(tensor, rule, sizes)
    message = (f"{rule.describe()}, but at {_sizes(sizes)} it is {actual}; add a 'where' "
               f"constraint that rules this out")
    return Verdict.REFUTED, rule.code, message, {"sizes": sizes, "value": actual}, evidence


def _concrete_operand(tensor: ir.GlobalTensor, rule: tr.OperandRule,
                      sizes: dict[str, int]) -> int:
    """The operand at concrete sizes (for the message)."""
    scale, extents = _operand_factors(tensor, rule)
    return scale * math.prod(eval_sizes(e, sizes) for e in extents)


def _sizes(sizes: dict[str, int]) -> str:
    return ", ".join(f"{k}={v}" for k, v in sizes.items()) or "every size"


# ---- 2b. the box's innermost start coordinate -------------------------------------------

BOX_START = "TS516"


def _instance_obligations(kernel: ir.Kernel, options: CheckOptions) -> Iterator[Obligation]:
    """Rules on each copy's run-time coordinates, over every instance of every size: the
    box's start (TS516) and whether the box meets the tensor at all (TS517)."""
    if not kernel.tensormaps:
        return
    ctx = isl.Context()
    ctx.set_max_operations(max(1000, options.timeout_ms * OPS_PER_MS))
    try:
        accesses = [a for a in collect(kernel, ctx) if a.clipped]
    except (isl.Error, NotAffine) as err:
        yield Obligation(CHECKER, f"{kernel.name}: TMA box starts 16-byte aligned",
                         Verdict.UNKNOWN, "isl", kernel.span, ISL_LIMIT, str(err))
        return
    yield from _box_start_obligations(kernel, ctx, accesses)
    for a in accesses:
        ctx.reset_operations()
        yield _timed(lambda a=a: _box_meets_tensor(kernel, a))


def _box_start_obligations(kernel: ir.Kernel, ctx: isl.Context, accesses: list
                           ) -> Iterator[Obligation]:
    """The innermost start coordinate of every copy must be 16-byte aligned (measured on an
    H100: an unaligned start traps with an illegal-instruction error; no document states it,
    and the driver cannot check it because coordinates are run-time operands)."""
    for a in accesses:
        eb = kernel.tensor(a.tensor).dtype.nbytes
        rank = len(kernel.tensor(a.tensor).shape)
        where = f"{a.span.line}:{a.span.col}"
        name = (f"{kernel.name}: {a.via.value} at {where}: innermost box start of {a.tensor} "
                f"16-byte aligned")
        start = time.perf_counter()
        ctx.reset_operations()
        if a.origin is None or a.origin_under is None:
            yield Obligation(CHECKER, name, Verdict.UNKNOWN, "isl", a.span, ISL_LIMIT,
                             f"cannot model the coordinates: {a.error}")
            continue
        step = 16 // math.gcd(16, eb)  # coordinate multiple that makes coord * eb % 16 == 0
        outs = ", ".join(f"c{k}" for k in range(rank))
        text = (f"[{', '.join(kernel.sizes)}] -> {{ {a.tensor}[{outs}] : "
                f"c{rank - 1} mod {step} > 0 }}")
        evidence = {"origin": str(a.origin), "rule": f"c{rank - 1} * {eb} % 16 == 0"}
        try:
            bad = isl.Set.read_from_str(ctx, text) if step > 1 else None
            violations = a.origin.intersect_range(bad) if bad is not None else None
            surely = a.origin_under.intersect_range(bad) if bad is not None else None
        except isl.Error as err:
            yield Obligation(CHECKER, name, Verdict.UNKNOWN, "isl", a.span, ISL_LIMIT,
                             str(err).splitlines()[0] if str(err) else "isl error")
            continue
        seconds = time.perf_counter() - start
        if violations is None or violations.is_empty():
            yield Obligation(CHECKER, name, Verdict.PROVED, "isl", a.span,
                             seconds=seconds, evidence=evidence)
        elif surely.is_empty():
            yield Obligation(CHECKER, name, Verdict.UNKNOWN, "isl", a.span, "TS591",
                             "unaligned only where an unmodelled guard allows it",
                             seconds=seconds, evidence=evidence)
        else:
            params, values = point_values(surely.wrap().sample_point())
            coord = values[len(a.dims):]
            instance = dict(zip(a.dims, values[:len(a.dims)], strict=False))
            yield Obligation(
                CHECKER, name, Verdict.REFUTED, "isl", a.span, BOX_START,
                f"the box starts at column {coord[-1]} ({coord[-1] * eb} bytes), not a "
                f"multiple of 16 bytes, at {_sizes(params)} ({_show(instance)}); the copy "
                f"traps with an illegal-instruction error", seconds=seconds,
                counterexample={"sizes": params, "instance": instance, "coord": coord},
                evidence=evidence)


# ---- 2c. the box meets the tensor ---------------------------------------------------------

BOX_OUTSIDE = "TS517"


def _box_meets_tensor(kernel: ir.Kernel, a) -> Obligation:
    """A warning when some instance that runs copies a box lying wholly outside its tensor
    (legal -- a load fills it, a store drops it -- but it moves nothing: usually a grid or
    tile loop that does not match the tensor). Proved for every size with ISL."""
    where = f"{a.span.line}:{a.span.col}"
    name = f"{kernel.name}: {a.via.value} at {where}: every box meets {a.tensor}"
    warn = Severity.WARNING
    if a.relation is None or a.origin is None:
        return Obligation(CHECKER, name, Verdict.UNKNOWN, "isl", a.span, "TS591",
                          f"cannot model the coordinates: {a.error}", warn)
    try:
        out = tma_boxes.outside(a)
        if out.possible.is_empty():
            return Obligation(CHECKER, name, Verdict.PROVED, "isl", a.span,
                              message="for every size and instance the box meets the tensor",
                              severity=warn, evidence={"origin": str(a.origin)})
        if out.certain.is_empty():
            return Obligation(CHECKER, name, Verdict.UNKNOWN, "isl", a.span, "TS591",
                              "a box wholly outside the tensor only where an unmodelled "
                              "guard allows it", warn,
                              evidence={"outside (over-approximated)": str(out.possible)})
        w = tma_boxes.witness(a, out.certain)
    except isl.Error as err:
        return Obligation(CHECKER, name, Verdict.UNKNOWN, "isl", a.span, ISL_LIMIT,
                          str(err).splitlines()[0] if str(err) else "isl error", warn)
    tensor = kernel.tensor(a.tensor)
    shape = [eval_sizes(e, w.sizes) for e in tensor.shape]
    verb = ("loads only fill values" if a.via.value == "tma_load" else
            "stores nothing")
    return Obligation(
        CHECKER, name, Verdict.REFUTED, "isl", a.span, BOX_OUTSIDE,
        f"at {_sizes(w.sizes)} ({_show(w.instance)}) the box {list(a.box)} at {w.start} lies "
        f"wholly outside {a.tensor} (shape {shape}): the copy {verb}; size the grid (or the "
        f"tile loop) to the tensor, or guard the copy", warn,
        counterexample={"sizes": w.sizes, "instance": w.instance, "coord": w.start,
                        "box": list(a.box), "shape": shape},
        evidence={"outside": str(out.certain), "origin": str(a.origin)})


# ---- 3. copy statements: destination and arrangement --------------------------------------


def _copy_obligations(kernel: ir.Kernel, stmt: ir.TmaLoad | ir.TmaStore) -> list[Obligation]:
    sl = stmt.dst if isinstance(stmt, ir.TmaLoad) else stmt.src
    tmap = kernel.tensormap(stmt.tensormap)
    buf = kernel.buffer(sl.buffer)
    verb = "tma_load into" if isinstance(stmt, ir.TmaLoad) else "tma_store from"
    where = f"{stmt.span.line}:{stmt.span.col}"
    setup_start = time.perf_counter()
    offsets, _ = realize_offsets(buf)  # cached per buffer; reported as setup, not per check
    setup = time.perf_counter() - setup_start
    start = time.perf_counter()
    strides = [math.prod(buf.shape[i + 1:]) for i in range(len(buf.shape))]
    prefix_len = len(sl.prefix)
    stages = list(itertools.product(*(range(d) for d in buf.shape[:prefix_len])))
    box = tmap.box
    eb = buf.dtype.nbytes
    period = tr.swizzle_period(tmap.swizzle)
    bases = range(0, period, buf.align) if buf.align < period else [0]

    def layout_byte(stage: tuple[int, ...], coord: tuple[int, ...]) -> int:
        k = sum(c * s for c, s in zip(stage + coord, strides, strict=True))
        return offsets[k] * eb

    # (a) destination alignment
    align_name = f"{kernel.name}: {verb} {buf.name} at {where}: shared address 128-byte aligned"
    misaligned = None
    if buf.align % tr.smem_alignment(tmap.swizzle):
        misaligned = {"buffer_align": buf.align}
    else:
        for st in stages:
            rel = layout_byte(st, (0,) * len(box))
            if rel % tr.smem_alignment(tmap.swizzle):
                misaligned = {"stage": st, "offset_bytes": rel}
                break
    seconds = time.perf_counter() - start
    if misaligned is None:
        align_ob = Obligation(CHECKER, align_name, Verdict.PROVED, "exhaustive", stmt.span,
                              seconds=seconds, evidence={"stages": len(stages),
                                                         "setup_seconds": round(setup, 4)})
    else:
        align_ob = Obligation(
            CHECKER, align_name, Verdict.REFUTED, "exhaustive", stmt.span, "TS510",
            f"the copy's shared address must be {tr.smem_alignment(tmap.swizzle)}-byte "
            f"aligned; {_show(misaligned)}", seconds=seconds, counterexample=misaligned)

    # (b) arrangement == declared layout, for every stage and every allowed placement
    start = time.perf_counter()
    name = (f"{kernel.name}: {verb} {buf.name} at {where}: swizzle {tmap.swizzle} arrangement "
            f"equals layout {buf.layout}")
    mismatch = None
    if misaligned is None:
        flat_offsets = np.asarray(offsets, dtype=np.int64) * eb
        box_size = math.prod(box)
        for base, st in itertools.product(bases, stages):
            first = sum(c * s for c, s in zip(st, strides, strict=False))
            want = flat_offsets[first:first + box_size]
            want = want - want[0] if box_size else want
            got = tr.box_arrangement_array(box, eb, tmap.swizzle, base + int(flat_offsets[first]))
            diff = np.nonzero(want != got)[0]
            if diff.size:
                k = int(diff[0])
                coord = tuple(int(x) for x in np.unravel_index(k, box))
                mismatch = {"buffer_base_mod_period": base, "stage": st, "coord": coord,
                            "layout_byte": int(want[k]), "tma_byte": int(got[k])}
                break
    seconds = time.perf_counter() - start
    evidence = {"placements": list(bases), "stages": len(stages), "box": list(box),
                "setup_seconds": round(setup, 4),
                "elements_compared": len(stages) * len(bases) * math.prod(box)}
    if misaligned is not None:
        arr_ob = Obligation(CHECKER, name, Verdict.UNKNOWN, "exhaustive", stmt.span, "TS510",
                            "not checked: the destination is misaligned", seconds=seconds)
    elif mismatch is None:
        arr_ob = Obligation(CHECKER, name, Verdict.PROVED, "exhaustive", stmt.span,
                            seconds=seconds, evidence=evidence)
    else:
        if mismatch["buffer_base_mod_period"]:
            hint = (f"declare the buffer 'align {period}' so the swizzle pattern starts on its "
                    f"boundary")
        else:
            hint = _synthesis_hint(layout_byte, mismatch, box, eb)
        placement = ""
        if len(bases) > 1:
            placement = (f" when the buffer starts {mismatch['buffer_base_mod_period']} bytes "
                         f"past a {period}-byte boundary (its align {buf.align} allows that)")
        arr_ob = Obligation(
            CHECKER, name, Verdict.REFUTED, "exhaustive", stmt.span, "TS520",
            f"element {mismatch['coord']} of stage {mismatch['stage']} is at byte "
            f"{mismatch['layout_byte']} in the layout but the copy puts it at byte "
            f"{mismatch['tma_byte']}{placement}; {hint}",
            seconds=seconds, counterexample=mismatch, evidence=evidence)
    return [align_ob, arr_ob]


def _synthesis_hint(layout_byte, mismatch: dict, box: tuple[int, ...], eb: int) -> str:
    stage = mismatch["stage"]
    slice_base = layout_byte(stage, (0,) * len(box))
    base = mismatch["buffer_base_mod_period"] + slice_base
    result = tr.synthesize(lambda c: layout_byte(stage, c) - slice_base, box, eb,
                           smem_base_addr=base, offset_unit="bytes")
    if isinstance(result, tr.SwizzleChoice):
        return f"a tensormap with 'swizzle {result.swizzle}' writes exactly this layout"
    return "no swizzle mode writes this layout: " + "; ".join(result.reasons)


def _show(d: dict) -> str:
    return ", ".join(f"{k} {v}" for k, v in d.items())

