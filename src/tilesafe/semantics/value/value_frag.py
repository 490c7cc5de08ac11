"""Which writes a fragment register read sees: the prover's half of the value proof through
tensor cores (semantics/value/value_mma.py gives the writes).

Why it is the shared accumulation rule: every access of a fragment is an access of one
register (thread, r), so all writes a read can see are its own thread's, ordered by program
order. The read sees the last write that sets the register -- a store `acc[r] = v` or a
wgmma whose scale-d is false (0) -- plus the products of every wgmma between that write and
the read: the prover's `accumulate` (valueflow.py) decides both with ISL for every size,
and the comparison treats the products as an order-free multiset (value_compare.py), so an
MMA's unspecified accumulation order and the spec's order-free `sum` mean the same thing.
With it, "no k-tile dropped, none twice, the accumulator reset exactly once at the start,
A and B paired right" is the multiset equality of the products with the spec's terms.

A register read before anything set it holds the interpreter's poison (NaN, 0xDEADBEEF):
not a value the proof can denote, so that is NotProved with a point, and the refuting
search shows the poison in the output.
"""

from __future__ import annotations

from typing import Protocol

import islpy as isl

from tilesafe.frontend import ir
from tilesafe.semantics.value.value_mma import FragWrite
from tilesafe.semantics.value.value_space import NotProved, ValueSpace, subtract
from tilesafe.semantics.value.value_terms import (
    Accum,
    Choice,
    Frag,
    Inst,
    Link,
    Round,
    Term,
    rename,
)


class Resolver(Protocol):
    """What the fragment rule needs of the prover (semantics/value/valueflow.py)."""

    k: ir.Kernel
    frag_writes: list[FragWrite]
    resolved: set[str]

    def space(self, involved: list[Inst]) -> ValueSpace: ...

    def fresh_ns_map(self): ...

    def resolve(self, t: Term, depth: int) -> Term: ...

    def accumulate(self, t: Frag, plain: list, steps: list, depth: int) -> Accum: ...

    def check_ordered(self, read: Frag, writers: list) -> None: ...

    def last_writer(self, link: Link, writers: list) -> str | None: ...


def resolve_fragment(p: Resolver, t: Frag, depth: int) -> Term:
    """The value register t.indices holds when `t` reads it."""
    frag = p.k.fragment(t.buffer)
    writers = [w for w in p.frag_writes if w.target == t.buffer]
    plain = [w for w in writers if not w.step]
    steps = [(w, w.value) for w in writers if w.step]
    if not plain:
        raise NotProved(f"nothing sets fragment '{t.buffer}' (no wgmma with scale-d false, "
                        f"no `{t.buffer}[r] = ...`): every read sees the registers' initial "
                        "poison, plus whatever the MMAs added to it")
    _check_set_before(p, t, plain)
    value = p.accumulate(t, plain, steps, depth) if steps else _last_set(p, t, plain, depth)
    # an s32 accumulator wraps modulo 2^32 at every MMA: the same as wrapping once at the end
    return Round(ir.DType.I32, value) if frag.dtype is ir.DType.I32 else value


def _check_set_before(p: Resolver, t: Frag, plain: list[FragWrite]) -> None:
    """Every instance of the read has some setting write of its register before it (the
    accumulation then starts from that write, not from the poison)."""
    space = p.space([t.inst] + [w.inst.renamed(-8 - n) for n, w in enumerate(plain)])
    covered = isl.Set.empty(space.space)
    for n, w in enumerate(plain):
        wi = w.inst.renamed(-8 - n)
        s = space.same_element(t.inst, t.indices, wi, w.indices) & space.hb(wi, t.inst)
        for name in space.owned_dims(wi):
            s = s.eliminate(isl.dim_type.set, space.pos[name], 1)
        covered = covered | s
    bare = subtract(space.domain(t.inst), covered)
    if not bare.is_empty():
        raise NotProved(f"a read of fragment '{t.buffer}' comes before anything sets its "
                        "register (a wgmma with scale-d false, or a store): it sees the "
                        "registers' initial poison", space.point(bare))


def _last_set(p: Resolver, t: Frag, plain: list[FragWrite], depth: int) -> Term:
    """No wgmma writes the fragment: the read sees the last store of its register."""
    p.check_ordered(t, plain)
    options = []
    for w in plain:
        nsmap = p.fresh_ns_map()
        winst = w.inst.renamed(nsmap(w.inst.ns))
        order = p.last_writer(Link(t.inst, t.indices, winst, w.indices), plain)
        if order is None:
            continue
        options.append((Link(t.inst, t.indices, winst, w.indices, order),
                        p.resolve(rename(w.value, nsmap), depth + 1)))
    p.resolved.add(t.buffer)
    return Choice(t.buffer, tuple(options))
