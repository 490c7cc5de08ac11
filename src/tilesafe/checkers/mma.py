"""Checker "mma": the hardware rules of every `wgmma` (docs/wgmma.md).

Thin: the rules are semantics/hw/mma_rules.py's and the descriptor forms
semantics/hw/wgmma_desc.py's. For every wgmma statement and each of its two operands:

* TS530 -- a matrix descriptor reads exactly the tile's elements, for every tile origin
  the statement takes (any size, any iteration) and every base the code generator may
  place the buffers at; the descriptor is synthesised, never written by hand. Refuted with
  the form that came closest and the first element it would read wrong.
* TS531 -- the tile is the same for every thread of the warpgroup (one descriptor).
And for the statement: TS532 -- every warpgroup that runs it runs it whole (`.aligned`: no
guard that splits a warpgroup). For every role: TS533 -- its fragments' registers fit the
thread's budget (255, or the role's `setmaxnreg`). A question these cannot decide is TS539.

The async-group rules -- MMAs pending until a covering `wgmma_wait`, stages and registers
untouched meanwhile, proxy fences for thread-written operands, `wgmma_fence` (TS534) --
are the temporal checkers' (semantics/temporal/explore/ops/wgmma.py, docs/temporal.md §14).
"""

from __future__ import annotations

import dataclasses
import time

import islpy as isl

from tilesafe.checkers.obligation import Obligation, Verdict
from tilesafe.checkers.registry import CheckOptions
from tilesafe.frontend import ir, walk
from tilesafe.semantics.access.access import collect
from tilesafe.semantics.hw import mma_rules as mr

CHECKER = "mma"
NO_DESCRIPTOR = "TS530"
NOT_UNIFORM = "TS531"
SPLIT_WARPGROUP = "TS532"
REGISTERS = "TS533"
SETMAXNREG_SPLIT = "TS536"
REGISTER_FILE = "TS537"
UNDECIDED = "TS539"


def check(kernel: ir.Kernel, options: CheckOptions) -> list[Obligation]:
    if not any(isinstance(s, (ir.Wgmma, ir.SetMaxNReg)) for s in walk.statements(kernel.body)) \
            and not kernel.fragments:
        return []
    ctx = isl.Context()
    ctx.set_max_operations(max(1000, options.timeout_ms * 1000))
    out: list[Obligation] = []
    try:
        ops = list(mr.operands(collect(kernel, ctx)))
    except isl.Error as err:
        return [Obligation(CHECKER, f"{kernel.name}: wgmma operands", Verdict.UNKNOWN, "isl",
                           kernel.span, UNDECIDED, f"ISL stopped: {err}")]
    for op in ops:
        out.append(_timed(lambda op=op: _descriptor(kernel, op)))
        out.append(_timed(lambda op=op: _uniform(kernel, op)))
    for s in {id(op.stmt): op for op in ops if op.which == "A"}.values():
        out.append(_timed(lambda s=s: _whole(kernel, s)))
    out.extend(_registers(kernel))
    out.extend(_setmaxnreg(kernel))
    return out


def _timed(fn) -> Obligation:
    start = time.perf_counter()
    ob = fn()
    return dataclasses.replace(ob, seconds=time.perf_counter() - start)


def _at(s: ir.Stmt) -> str:
    return f"{s.span.line}:{s.span.col}"


def _descriptor(kernel: ir.Kernel, op: mr.Operand) -> Obligation:
    name = (f"{kernel.name}: wgmma at {_at(op.stmt)}: a matrix descriptor reads operand "
            f"{op.which} ({op.tile.buffer})")
    try:
        v = mr.descriptor(kernel, op)
    except isl.Error as err:
        return Obligation(CHECKER, name, Verdict.UNKNOWN, "isl", op.tile.span, UNDECIDED,
                          f"ISL stopped: {err}")
    if v.undecided:
        return Obligation(CHECKER, name, Verdict.UNKNOWN, "isl + enumeration", op.tile.span,
                          UNDECIDED, v.undecided)
    evidence = {"origins": [list(o) for o in v.origins], "placement_shifts": list(v.shifts)}
    if v.found is None:
        return Obligation(CHECKER, name, Verdict.REFUTED, "isl + enumeration", op.tile.span,
                          NO_DESCRIPTOR, f"no wgmma matrix descriptor reads the {op.which} "
                          f"tile of '{op.tile.buffer}' as its layout places it: {v.failure}",
                          counterexample={"origin": list(v.origins[0]) if v.origins else [],
                                          "forms_tried": v.failure},
                          evidence=evidence)
    d = v.found.descriptor
    evidence.update(descriptor=d.describe(), starts=sorted(set(v.found.starts)))
    return Obligation(CHECKER, name, Verdict.PROVED, "isl + enumeration", op.tile.span,
                      message=f"{d.describe()}, for all {len(v.origins)} tile origin(s) and "
                              f"{len(v.shifts)} placement(s)", evidence=evidence)


def _uniform(kernel: ir.Kernel, op: mr.Operand) -> Obligation:
    name = (f"{kernel.name}: wgmma at {_at(op.stmt)}: operand {op.which} the same for the "
            "whole warpgroup")
    bad = mr.thread_varying(op)
    if bad is None:
        return Obligation(CHECKER, name, Verdict.PROVED, "isl", op.tile.span)
    return Obligation(CHECKER, name, Verdict.REFUTED, "isl", op.tile.span, NOT_UNIFORM,
                      f"threads of one warpgroup start the {op.which} tile at different "
                      f"elements: {bad.wrap().sample_point()}; the descriptor is one value "
                      "for the warpgroup", counterexample={"pair": str(bad.wrap().sample_point())})


def _whole(kernel: ir.Kernel, op: mr.Operand) -> Obligation:
    name = f"{kernel.name}: wgmma at {_at(op.stmt)} run by whole warpgroups"
    missing = mr.partial_warpgroups(op, kernel)
    if missing is None:
        return Obligation(CHECKER, name, Verdict.PROVED, "isl", op.stmt.span)
    p = missing.sample_point()
    return Obligation(CHECKER, name, Verdict.REFUTED, "isl", op.stmt.span, SPLIT_WARPGROUP,
                      "a warpgroup runs this wgmma only in part (wgmma.mma_async is "
                      "`.aligned`: all 128 threads must execute it together); a thread "
                      f"that does not: {p}", counterexample={"instance": str(p)})


def _registers(kernel: ir.Kernel) -> list[Obligation]:
    out = []
    budgets = {s.name: _budget(s) for s in walk.statements(kernel.body)
               if isinstance(s, ir.Role)}
    for role, regs in mr.fragment_registers(kernel).items():
        limit = budgets.get(role) or mr.REGISTER_LIMIT
        who = f"role {role}" if role else "the kernel outside roles"
        name = f"{kernel.name}: fragments of {who} fit {limit} registers"
        if regs <= limit:
            out.append(Obligation(CHECKER, name, Verdict.PROVED, "arithmetic", kernel.span,
                                  message=f"{regs} fragment registers per thread (the rest "
                                          "is ptxas's: its report says if it spills)"))
        else:
            out.append(Obligation(CHECKER, name, Verdict.REFUTED, "arithmetic", kernel.span,
                                  REGISTERS, f"{who} holds {regs} fragment registers per "
                                  f"thread, over its budget of {limit}",
                                  counterexample={"registers": regs, "limit": limit}))
    return out


def _setmaxnreg(kernel: ir.Kernel) -> list[Obligation]:
    """Each setmaxnreg run by whole warpgroups (TS536); the budgets it leaves fit the SM's
    register file (TS537)."""
    sites = mr.setmaxnreg_sites(kernel)
    if not sites:
        return []
    out = []
    for site in sites:
        name = f"{kernel.name}: setmaxnreg at {_at(site.stmt)} run by whole warpgroups"
        why = mr.setmaxnreg_split(site, kernel.block)
        out.append(Obligation(CHECKER, name, Verdict.PROVED, "arithmetic", site.stmt.span)
                   if why is None else
                   Obligation(CHECKER, name, Verdict.REFUTED, "arithmetic", site.stmt.span,
                              SETMAXNREG_SPLIT, f"setmaxnreg is `.sync.aligned` (every thread "
                              f"of a warpgroup together) but {why}"))
    shares = mr.register_shares(kernel)
    used = sum(s.threads * s.per_thread for s in shares)
    parts = ", ".join(f"{s.who}: {s.threads} x {s.per_thread}" for s in shares)
    name = f"{kernel.name}: setmaxnreg budgets fit the register file"
    if used <= mr.REGISTER_FILE:
        out.append(Obligation(CHECKER, name, Verdict.PROVED, "arithmetic", kernel.span,
                              message=f"{used} of {mr.REGISTER_FILE} registers ({parts})"))
    else:
        out.append(Obligation(CHECKER, name, Verdict.REFUTED, "arithmetic", kernel.span,
                              REGISTER_FILE, f"after setmaxnreg the block holds {used} "
                              f"registers ({parts}), more than the SM's {mr.REGISTER_FILE}: "
                              "the increase waits forever for registers no warp gives back",
                              counterexample={"registers": used, "parts": parts}))
    return out


def _budget(role: ir.Role) -> int | None:
    """The register count the role's last `setmaxnreg` sets (None: none does)."""
    counts = [s.count for s in walk.statements(role.body) if isinstance(s, ir.SetMaxNReg)]
    return counts[-1] if counts else None
