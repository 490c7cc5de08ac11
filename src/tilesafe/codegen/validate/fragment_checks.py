"""TS731, fragment registers: which PTX registers hold a fragment, and that every `acc[r]` the
IR reads or writes is the register at position r of its wgmmas' accumulator list.

A fragment has no declaration in PTX: the registers a `wgmma.mma_async` lists *are* the
fragment, the i-th one holding the element the PTX ISA's accumulator layout gives register
i (frontend/fragments.py says the same of `acc[i]`). So:

* every wgmma of one fragment lists the same registers in the same order, as many as the
  fragment has per thread, each once, none shared with another fragment;
* a store whose value reads `acc[r]` stores what the PTX register at position r holds at
  that instruction (through the same conversions as the IR's), and an `acc[r] = v` is a
  write of v to that register -- the executor records every write to an accumulator
  register by anything but a wgmma (they carry no annotation: the register says which
  statement they implement, the `// unrolled` line which copy), and a write that no IR
  statement asks for is refuted.

Why a family of its own: the registers are only known once the wgmmas are matched, and the
value questions are the only ones that compare *what* is stored rather than where; loaded
data and floats stay opaque (registers' contents are terms), so a store of another
fragment register is refuted by naming it: distinct accumulator registers hold distinct
elements of the product, which the inputs can make differ.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from tilesafe.checkers.obligation import Verdict
from tilesafe.codegen.validate import terms as T
from tilesafe.codegen.validate.context import Context
from tilesafe.codegen.validate.reporting import FRAGMENT
from tilesafe.codegen.validate.solve import PROVED, REFUTED, UNKNOWN, Outcome
from tilesafe.codegen.validate.spec import SpecEvent
from tilesafe.codegen.validate.symexec import Event
from tilesafe.codegen.validate.symexec_operands import undef
from tilesafe.codegen.validate.terms import Term
from tilesafe.frontend import ir

if TYPE_CHECKING:
    from tilesafe.codegen.validate.matching import Match

Copies = tuple[tuple[int, int], ...]
NARROW = {ir.DType.F16: "cvt.rn.f16.f32", ir.DType.BF16: "cvt.rn.bf16.f32"}
INT_BITS = {ir.DType.I32: 32, ir.DType.U8: 8}


def copies_of(have: Copies, uids: tuple[int, ...]) -> Copies | None:
    """The copy an instruction claims of the unrolled loops `uids` (None: no `// unrolled`
    line for one of them above it)."""
    d = dict(have)
    if any(u not in d for u in uids):
        return None
    return tuple((u, d[u]) for u in uids)


def mma_shape(ev: Event, e: SpecEvent) -> str | None:
    """The instruction's shape and types against the IR's MMA (TS720 when they differ)."""
    got = (ev.ops["m"], ev.ops["n"], ev.ops["k"], ev.ops["dtype"], ev.ops["atype"])
    want = (64, e.ops["n"], e.ops["k"], e.ops["dtype"], e.ops["atype"])
    if got == want:
        return None
    return (f"m{got[0]}n{got[1]}k{got[2]}.{got[3]}.{got[4]}, the IR's MMA is "
            f"m{want[0]}n{want[1]}k{want[2]}.{want[3]}.{want[4]}")


def fragment_registers(cx: Context, matches: list[Match]) -> dict[str, tuple[str, ...]]:
    """Each fragment's PTX registers in order, from the wgmmas matched with its IR
    wgmmas; one obligation per fragment the IR uses. Fragments whose registers are not
    consistent are left out (what needs them is then unknown or refuted)."""
    rep = cx.rep
    by_frag: dict[str, list[Event]] = {}
    for m in matches:
        if m.spec.kind == "wgmma":
            by_frag.setdefault(str(m.spec.ops["fragment"]), []).extend(m.ptx)
    used = set(by_frag) | {r.fragment for r in cx.spec.frag_reads.values()} | {
        str(m.spec.ops["fragment"]) for m in matches if m.spec.kind == "frag.write"}
    out: dict[str, tuple[str, ...]] = {}
    owner: dict[str, str] = {}
    for frag in cx.kernel.fragments:
        if frag.name not in used:
            continue
        t0 = time.monotonic()
        name = f"fragment {frag.name}: its PTX registers"
        evs = by_frag.get(frag.name, [])
        if not evs:
            rep.ob(name, Verdict.UNKNOWN, FRAGMENT, "no PTX wgmma accumulates into it, so "
                   "which registers hold it is not known", frag.span)
            continue
        lists = sorted({ev.ops["acc"] for ev in evs}, key=str)  # type: ignore[misc]
        regs: tuple[str, ...] = lists[0]
        problems = []
        if len(lists) > 1:
            problems.append(f"its wgmmas accumulate into {len(lists)} different register "
                            "lists")
        if len(regs) != frag.regs:
            problems.append(f"{len(regs)} accumulator registers, the fragment has "
                            f"{frag.regs} per thread")
        twice = sorted({r for r in regs if regs.count(r) > 1})
        if twice:
            problems.append(f"{', '.join(twice)} listed twice")
        shared = sorted({f"{r} (also {owner[r]})" for r in regs if r in owner})
        if shared:
            problems.append(f"registers of another fragment: {', '.join(shared)}")
        if problems:
            rep.ob(name, Verdict.REFUTED, FRAGMENT, "; ".join(problems), frag.span,
                   rep.witness(evs[0]), seconds=time.monotonic() - t0,
                   method="structural + z3")
            continue
        out[frag.name] = regs
        owner.update({r: frag.name for r in regs})
        rep.ob(name, Verdict.PROVED, FRAGMENT, f"{len(evs)} wgmma(s) accumulate into the "
               f"same {len(regs)} registers, {regs[0]} .. {regs[-1]}, in one order",
               frag.span, seconds=time.monotonic() - t0, method="structural")
    return out


def match_writes(cx: Context, matches: list[Match], fragments: dict[str, tuple[str, ...]],
                 writes: list[Event]) -> None:
    """Pair each write of an accumulator register (other than by a wgmma) with the
    `acc[r] = v` it implements: the fragment and r from the register, the copy of the
    unrolled loops from the `// unrolled` lines; a write no statement asks for is refuted."""
    rep = cx.rep
    position = {reg: (f, i) for f, regs in fragments.items() for i, reg in enumerate(regs)}
    stores = [m for m in matches if m.spec.kind == "frag.write"]
    for ev in writes:
        ins = ev.instr
        name = f"PTX line {ins.line}: {ins.text}"
        reg = str(ev.ops["reg"])
        if reg not in position:
            rep.ob(name, Verdict.UNKNOWN, FRAGMENT, f"writes {reg}, an accumulator register "
                   "of a wgmma whose fragment's registers are not known", rep.span(ins))
            continue
        frag, i = position[reg]
        cands = [m for m in stores if m.spec.ops["fragment"] == frag and m.spec.ops["reg"] == i
                 and copies_of(ins.copies, tuple(u for u, _ in m.spec.copies))
                 == m.spec.copies]
        if len(cands) == 1:
            cands[0].ptx.append(ev)
            continue
        if len(cands) > 1:
            rep.ob(name, Verdict.UNKNOWN, FRAGMENT, f"writes {frag}[{i}] ({reg}): "
                   f"{len(cands)} IR statements write that register and nothing tells which "
                   "this is", rep.span(ins))
            continue
        runs = cx.prover.satisfiable(cx.spec.assumptions + [cx.p(ev.pc)])
        if runs.verdict == PROVED:
            continue  # never runs: nothing is written
        cex = rep.witness(ev, register=f"{frag}[{i}] ({reg})")
        verdict = Verdict.REFUTED if runs.verdict == REFUTED else Verdict.UNKNOWN
        rep.ob(name, verdict, FRAGMENT, f"writes fragment register {frag}[{i}] ({reg}), "
               "which no IR statement writes there", rep.span(ins), cex,
               method="structural + z3")


class FragmentValues:
    """The value of every store that reads a fragment and of every `acc[r] = v`."""

    def __init__(self, cx: Context, fragments: dict[str, tuple[str, ...]],
                 loop_exact: dict[int, bool]) -> None:
        self.cx = cx
        self.fragments = fragments
        self.loop_exact = loop_exact

    def run(self, matches: list[Match]) -> None:
        reads = self.cx.spec.frag_reads
        for m in matches:
            e = m.spec
            value = e.ops.get("value")
            if not isinstance(value, Term):
                continue
            if e.kind == "frag.write" or (e.kind == "st" and any(
                    str(x.val) in reads for x in T.leaves([value]))):
                for ev in m.ptx:
                    self.check(e, ev, value)

    def check(self, e: SpecEvent, ev: Event, value: Term) -> None:
        cx = self.cx
        t0 = time.monotonic()
        what = f"write {e.ops['fragment']}[{e.ops['reg']}]" if e.kind == "frag.write" \
            else f"store {e.ops['tensor']}"
        name = f"{what} at {e.span.line}:{e.span.col}{cx.spec.copy_label(e.copies)}: " \
               f"value of PTX line {ev.instr.line}"
        dtype: ir.DType = (cx.kernel.fragment(str(e.ops["fragment"])).dtype
                           if e.kind == "frag.write" else e.ops["dtype"])  # type: ignore
        got = ev.ops["value"]
        assert isinstance(got, Term)
        want, why = self.substituted(e, ev, value, {})
        if want is None:
            cx.rep.ob(name, Verdict.UNKNOWN, FRAGMENT, why, e.span,
                      seconds=time.monotonic() - t0)
            return
        claim = self.claim(got, want, dtype)
        if claim is None:
            cx.rep.ob(name, Verdict.UNKNOWN, FRAGMENT, "the value's type is not the "
                      "element's", e.span, seconds=time.monotonic() - t0)
            return
        hyps = cx.spec.assumptions + [cx.p(ev.pc), e.cond, e.inbounds]
        exact = all(self.loop_exact.get(lid, False) for lid in cx.counted(ev))
        out = cx.prover.prove(hyps, claim)
        if out.verdict != PROVED:
            out = self.other_register(e, ev, value, got, dtype, hyps) or out
        if not exact and out.verdict != PROVED:
            out = Outcome(UNKNOWN, "inside a PTX loop whose loop obligation does not hold, "
                          "the PTX's iterations are not known exactly")
        cx.rep.report(name, out, FRAGMENT, e.span, "the value is the IR's, reading each "
                      "fragment register where the instruction runs",
                      "the value differs from the IR's", t0, {"instruction": ev.instr.text})

    def substituted(self, e: SpecEvent, ev: Event, value: Term, alt: dict[str, int]
                    ) -> tuple[Term | None, str]:
        """The IR's value with each `acc[r]` replaced by what the PTX register at position
        r (or `alt`'s position for that leaf) holds just before the instruction."""
        mapping: dict[int, Term] = {}
        for x in T.leaves([value]):
            fr = self.cx.spec.frag_reads.get(str(x.val))
            if fr is None:
                continue
            if fr.order != e.order[0]:
                return None, (f"reads {fr.fragment}[{fr.reg}] in an earlier statement (a "
                              "`let`): the register may have changed since")
            regs = self.fragments.get(fr.fragment)
            if regs is None:
                return None, f"the PTX registers of '{fr.fragment}' are not known"
            reg = regs[alt.get(str(x.val), fr.reg)]
            held = ev.state.get(reg)
            mapping[id(x)] = held if held is not None else undef(reg, 32)
        return T.substitute([value], mapping)[0], ""

    def claim(self, got: Term, want: Term, dtype: ir.DType) -> Term | None:
        p = self.cx.p
        if dtype.is_float:
            if want.w != 32:
                return None
            if dtype in NARROW:
                want = T.uf(NARROW[dtype], 16, want)
            return T.eq(p(got), p(want)) if got.w == want.w else None
        bits = INT_BITS[dtype]
        if want.w != T.INT or got.w != bits:
            return None
        return T.eq(T.uint(p(got)), T.ifmod(p(want), T.const_int(2**bits)))

    def other_register(self, e: SpecEvent, ev: Event, value: Term, got: Term,
                       dtype: ir.DType, hyps: list[Term]) -> Outcome | None:
        """Refuted when the PTX value is exactly the IR's with one `acc[r]` read from
        another register of the fragment."""
        reads = self.cx.spec.frag_reads
        inside = {id(t) for t in T.postorder([got])}
        for x in T.leaves([value]):
            fr = reads.get(str(x.val))
            if fr is None:
                continue
            regs = self.fragments.get(fr.fragment, ())
            for j, reg in enumerate(regs):
                if j == fr.reg or id(ev.state.get(reg)) not in inside:
                    continue  # only registers the PTX value reads are candidates
                want, _ = self.substituted(e, ev, value, {str(x.val): j})
                claim = self.claim(got, want, dtype) if want is not None else None
                if claim is None or self.cx.prover.prove(hyps, claim).verdict != PROVED:
                    continue
                w = self.cx.prover.satisfiable(hyps)
                if w.verdict != REFUTED:
                    return None
                return Outcome(REFUTED, "", w.values, {
                    "PTX reads": f"{fr.fragment}[{j}] ({regs[j]})",
                    "IR reads": f"{fr.fragment}[{fr.reg}] ({regs[fr.reg]})"})
        return None
