"""TS728, the shared-memory base and extent: every shared address the PTX forms starts
from R (the smallest address >= tsmem congruent to 1024 modulo the largest buffer
alignment) plus a constant, and the buffers and mbarriers end inside the dynamic shared
memory the module declares.

Why separate: the operand obligations compare shared addresses with the specification's
`R + offset`; this obligation proves the PTX's own base terms are that R, for every
16-byte aligned tsmem, and reads the module's header comment, which nothing else does.
"""

from __future__ import annotations

import re
import time

from tilesafe.codegen.validate import terms as T
from tilesafe.codegen.validate.context import Context
from tilesafe.codegen.validate.reporting import SMEM
from tilesafe.codegen.validate.solve import UNKNOWN, Outcome
from tilesafe.codegen.validate.terms import Term

_SMEM_DECL = re.compile(r"Dynamic shared memory:\s*(\d+)\s*bytes")


def shared_bases(cx: Context, tsmem: Term) -> list[Term]:
    """The largest sub-terms of the shared operands built from tsmem and constants alone
    (the PTX's base computations), each once."""
    roots: list[Term] = []
    for ev in cx.res.events:
        for key in ("addr", "smem", "bar"):
            v = ev.ops.get(key)
            if isinstance(v, Term) and (ev.kind != "ld" and ev.kind != "st"
                                        or ev.ops.get("space") == "shared"):
                roots.append(v)
    bases: list[Term] = []
    seen: set[int] = set()
    only: dict[int, bool] = {}
    for t in T.postorder(roots):
        only[id(t)] = (t is tsmem or t.is_const) if not t.args else all(
            only[id(a)] for a in t.args)
    for t in T.postorder(roots):
        if only[id(t)] or t.is_const:
            continue
        for a in t.args:
            if only[id(a)] and not a.is_const and id(a) not in seen:
                seen.add(id(a))
                bases.append(a)
    return bases


def check_smem(cx: Context) -> None:
    t0 = time.monotonic()
    spec, prover = cx.spec, cx.prover
    tsmem = T.leaf("tsmem", 32)
    R = spec.R
    bases = shared_bases(cx, tsmem)
    results: list[tuple[str, Outcome]] = []
    for b in bases:
        at = T.substitute([b], {id(tsmem): T.bv(1024, 32)})[0]
        c = T.const_int(int(at.val) - 1024)  # type: ignore[arg-type]
        results.append((f"the shared base term {T.show(b, 5)} is not R + constant",
                        prover.prove(
            [], T.eq(T.uint(b), T.iadd(R, c)),
            {"PTX base": T.uint(b), "R + constant": T.iadd(R, c)})))
    m = None
    for c in cx.mod.header_comments:
        m = _SMEM_DECL.search(c) or m
    if m is None:
        results.append(("the declared dynamic shared memory covers the buffers", Outcome(
            UNKNOWN, "the module does not state its dynamic shared memory size")))
    else:
        declared = int(m.group(1))
        need = T.iadd(T.isub(R, T.uint(tsmem)), T.const_int(spec.smem_end))
        results.append(("buffers and mbarriers exceed the declared dynamic shared memory",
                        prover.prove(
            [], T.ile(need, T.const_int(declared)),
            {"bytes needed from tsmem": need, "declared": T.const_int(declared)})))
    cx.rep.combine("shared-memory base and extent", results, SMEM, cx.kernel.span, t0,
                   f"{len(bases)} base term(s) equal R + constant for every 16-byte aligned "
                   f"tsmem (R = smallest address >= tsmem congruent to 1024 modulo "
                   f"{spec.align}); buffers and barriers end {spec.smem_end} bytes "
                   "after R, inside the declared dynamic shared memory")
