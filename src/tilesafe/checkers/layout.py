"""Shared-buffer layouts: realisable, injective (no two logical elements share a slot),
non-negative, and the block's shared memory within the per-block limit.

Injectivity and bounds are decided with ISL on the layout's relation (swizzles and F2
layouts are lowered by bit decomposition), so the proof covers every coordinate at once.
"""

from __future__ import annotations

import time

import numpy as np

from tilesafe.checkers.obligation import Obligation, Verdict
from tilesafe.checkers.registry import CheckOptions
from tilesafe.frontend import ir
from tilesafe.frontend.limits import MAX_SHARED_BYTES
from tilesafe.semantics.interpreter.smem import plan_shared
from tilesafe.semantics.layout import layout_isl as LI
from tilesafe.semantics.layout import layouts

CHECKER = "layout"
MAX_SMEM_PER_BLOCK = MAX_SHARED_BYTES  # 227 KiB, frontend/limits.py
OPS_PER_MS = 1000
# Wide XOR swizzles make ISL's bit decomposition slow (a 5-bit swizzle took 22 s); buffers
# are finite, so past this budget the checker enumerates every coordinate instead, which
# decides the same property completely.
ISL_OPS_BEFORE_FALLBACK = 40_000


def check(kernel: ir.Kernel, options: CheckOptions) -> list[Obligation]:
    out: list[Obligation] = []
    realised = True
    for buf in kernel.shared:
        start = time.perf_counter()
        try:
            real = layouts.realize(buf.layout, buf.shape, buf.dtype.nbytes)
        except (layouts.LayoutError, ValueError) as err:
            realised = False
            out.append(Obligation(CHECKER, f"{kernel.name}: layout of {buf.name} realisable",
                                  Verdict.REFUTED, "construction", buf.span, "TS100", str(err),
                                  seconds=time.perf_counter() - start))
            continue
        setup = time.perf_counter() - start
        max_ops = isl_budget(options.timeout_ms)
        inj = LI.injective(real, max_ops=max_ops)
        if inj.unknown:
            inj = LI.enumerated("injective", buf.shape, _all_offsets(real), inj.reason,
                                inj.seconds)
        out.append(_obligation(kernel, buf, "injective (no aliasing)", inj, "TS101", setup,
                               _alias_message(buf, inj.witness)))
        low = LI.in_bounds(real, lo=0, hi=None, max_ops=max_ops)
        if low.unknown:
            low = LI.enumerated("in_bounds", buf.shape, _all_offsets(real), low.reason,
                                low.seconds)
        out.append(_obligation(kernel, buf, "offsets non-negative", low, "TS102", setup,
                               _below_message(buf, low.witness)))
        realised = realised and low.ok
    if realised and kernel.shared:
        out.append(_capacity(kernel))
    return out


def isl_budget(timeout_ms: int) -> int:
    """ISL operations a layout query may take before the enumeration fallback: the query
    timeout at OPS_PER_MS, at least 1000, at most ISL_OPS_BEFORE_FALLBACK."""
    return min(ISL_OPS_BEFORE_FALLBACK, max(1000, timeout_ms * OPS_PER_MS))


def _all_offsets(real: layouts.RealLayout) -> np.ndarray:
    """Every logical coordinate's element offset of a realised layout, negative ones
    included. (The interpreter's table, smem.realize_offsets, raises on a negative offset --
    which is what the fallback of the non-negativity proof must report, not crash on.)"""
    return np.asarray([int(o) for o in layouts.flat_offsets(real)], dtype=np.int64)


def _obligation(kernel: ir.Kernel, buf: ir.SharedBuffer, what: str, result: LI.Result,
                code: str, setup: float, message: str) -> Obligation:
    verdict = {LI.PROVED: Verdict.PROVED, LI.REFUTED: Verdict.REFUTED}.get(
        result.verdict, Verdict.UNKNOWN)
    if verdict is Verdict.UNKNOWN:
        code, message = "TS190", f"ISL could not decide: {result.reason}"
    evidence = {**dict(result.evidence), "layout": str(buf.layout),
                "setup_seconds": round(setup, 4)}
    method = ("exhaustive" if str(result.evidence.get("method", "")).startswith("enumeration")
              else "isl")
    return Obligation(
        CHECKER, f"{kernel.name}: layout {buf.layout} of {buf.name} {what}", verdict, method,
        buf.span, None if verdict is Verdict.PROVED else code,
        "" if verdict is Verdict.PROVED else message, seconds=result.seconds,
        counterexample=dict(result.witness) if result.witness else None, evidence=evidence)


def _alias_message(buf: ir.SharedBuffer, w: object) -> str:
    if not w:
        return "two logical elements share one offset"
    return (f"{buf.name}{list(w['coord_a'])} and {buf.name}{list(w['coord_b'])} both map to "
            f"element offset {w['offset']}: writes to one clobber the other")


def _below_message(buf: ir.SharedBuffer, w: object) -> str:
    if not w:
        return "an element maps below the buffer's base"
    return (f"{buf.name}{list(w['coord'])} maps to element offset {w['offset']}, below the "
            f"buffer's base")


def _capacity(kernel: ir.Kernel) -> Obligation:
    start = time.perf_counter()
    plan = plan_shared(kernel.shared)
    used = max(p.base + p.nbytes for p in plan.placements.values()) - min(
        p.base for p in plan.placements.values())
    most = min(MAX_SMEM_PER_BLOCK, kernel.target.max_shared)  # gfx942: 64 KiB of LDS
    name = f"{kernel.name}: shared memory {used} bytes within {most}"
    evidence = {b: {"base": p.base, "bytes": p.nbytes} for b, p in plan.placements.items()}
    if used <= most:
        return Obligation(CHECKER, name, Verdict.PROVED, "arithmetic", kernel.span,
                          seconds=time.perf_counter() - start, evidence=evidence)
    return Obligation(CHECKER, name, Verdict.REFUTED, "arithmetic", kernel.span, "TS103",
                      f"the buffers need {used} bytes of shared memory; a block may use at "
                      f"most {most} on {kernel.target.name}", seconds=time.perf_counter() - start,
                      counterexample={"bytes": used}, evidence=evidence)
