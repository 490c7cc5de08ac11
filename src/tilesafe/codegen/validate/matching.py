"""TS720, which PTX instructions implement which IR statement, and which PTX loop is which
`for`: the pairing every later obligation is about.

A memory or synchronisation instruction names its statement in its `// LINE:COL what`
comment; that is a claim, never a fact: the kind, the annotation's text, the access's
space and type, the copy's rank and the wait_group's operands must agree with the
statement, and the instruction must sit in as many counted loops as the statement in
`for`s, each PTX loop standing for one `for` throughout.

Why separate: the matching is structural (no question to the solver except for the
witness of a refutation) and what it decides -- `Matching` -- is the input of the loop,
instance, order and wait obligations; nothing else here is.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tilesafe.checkers.obligation import Verdict
from tilesafe.codegen.validate import encode
from tilesafe.codegen.validate import terms as T
from tilesafe.codegen.validate.context import Context
from tilesafe.codegen.validate.fragment_checks import (
    copies_of,
    fragment_registers,
    match_writes,
    mma_shape,
)
from tilesafe.codegen.validate.reporting import STRUCTURE, SYNC
from tilesafe.codegen.validate.spec import SpecEvent
from tilesafe.codegen.validate.symexec import Event
from tilesafe.codegen.validate.terms import LeafInfo
from tilesafe.frontend import ir

# PTX event kind -> IR event kind
KIND = {"ld": "ld", "st": "st", "mbar.init": "mbar.init", "mbar.arrive": "mbar.arrive",
        "mbar.expect_tx": "mbar.expect_tx", "mbar.wait": "mbar.wait",
        "fence.mbarrier_init": "fence.mbarrier_init", "fence.proxy_async": "fence.proxy_async",
        "bar.sync": "bar.sync", "bar.arrive": "bar.arrive", "bar.warp.sync": "converge",
        "tma.load": "tma.load",
        "tma.store": "tma.store", "commit": "commit", "wait_group": "wait_group",
        "wgmma": "wgmma", "wgmma.fence": "wgmma.fence", "wgmma.commit": "wgmma.commit",
        "wgmma.wait": "wgmma.wait", "setmaxnreg": "setmaxnreg", "frag.write": "frag.write",
        "cluster.arrive": "cluster.arrive", "cluster.wait": "cluster.wait"}
_LD_TYPES = {ir.DType.F16: {"b16", "f16"}, ir.DType.BF16: {"b16"}, ir.DType.F32: {"f32", "b32"},
             ir.DType.I32: {"s32", "b32", "u32"}, ir.DType.U8: {"u8", "s8", "b8"}}


def semantics(ev: Event, e: SpecEvent) -> str | None:
    """An mbarrier or cluster-barrier instruction's memory semantics and scope (and, for an
    arrive, whether it names a peer's barrier) as the IR says (a `.cta` release where the
    IR asks for `.cluster` is a race the checkers refuted in the other spelling)."""
    default = "acquire.cta" if ev.kind == "mbar.wait" else "release.cta"
    got, want = ev.ops.get("sem", default), e.ops.get("sem", default)
    if got != want:
        return f".{got} where the IR asks for .{want}"
    if ev.kind == "mbar.arrive" and ev.ops.get("space", "shared") != e.ops.get("space",
                                                                               "shared"):
        return (f"an arrive on a barrier in .{ev.ops.get('space', 'shared')} where the IR's "
                f"is in .{e.ops.get('space', 'shared')}")
    return None


@dataclass
class Match:
    """One IR statement instance and the PTX instructions that claim to implement it."""

    spec: SpecEvent
    ptx: list[Event] = field(default_factory=list)


@dataclass(frozen=True)
class Matching:
    """What the matching decided, for the families after it."""

    matches: list[Match]
    loop_map: dict[int, ir.For]  # PTX loop id -> IR for
    for_to_loop: dict[int, int]  # IR for's variable uid -> PTX loop id
    bad_nesting: set[int]  # PTX event indices whose loops do not match
    fragments: dict[str, tuple[str, ...]]  # IR fragment -> its PTX registers, in order


class Matcher:
    """Pairs instructions with statements and PTX loops with `for`s, reporting every
    claim that does not hold; then bounds each `for`'s iteration counter."""

    def __init__(self, cx: Context) -> None:
        self.cx = cx
        self.k = cx.kernel
        self.spec = cx.spec
        self.res = cx.res
        self.rep = cx.rep
        self.bad_nesting: set[int] = set()

    def run(self) -> Matching:
        matches, writes = self.match()
        fragments = fragment_registers(self.cx, matches)
        match_writes(self.cx, matches, fragments, writes)
        loop_map, for_to_loop = self.match_loops(matches)
        self.bound_counters(for_to_loop)
        return Matching(matches, loop_map, for_to_loop, self.bad_nesting, fragments)

    def match(self) -> tuple[list[Match], list[Event]]:
        """The annotated instructions paired with statements (an instruction in an
        unrolled loop with the statement's copy its `// unrolled` line names); the
        fragment register writes, which carry no annotation, apart."""
        index: dict[tuple[int, int, str, tuple[tuple[int, int], ...]], Match] = {}
        uids: dict[tuple[int, int, str], tuple[int, ...]] = {}
        matches = []
        writes = []
        for e in self.spec.events:
            m = Match(e)
            matches.append(m)
            index[(e.span.line, e.span.col, e.kind, e.copies)] = m
            uids[(e.span.line, e.span.col, e.kind)] = tuple(u for u, _ in e.copies)
        for ev in self.res.events:
            ins = ev.instr
            a = ins.annotation
            name = f"PTX line {ins.line}: {ins.text}"
            if ev.kind == "frag.write":
                writes.append(ev)
                continue
            if a is None:
                self.rep.ob(name, Verdict.REFUTED, STRUCTURE, "a memory or synchronisation "
                            "instruction without a source annotation: no IR statement asks "
                            "for it", self.k.span, self.rep.witness(ev),
                            method="structural + z3")
                continue
            where = (a.line, a.col, KIND[ev.kind])
            copies = copies_of(ins.copies, uids.get(where, ()))
            m = index.get(where + (copies,)) if copies is not None else None
            problem = None
            if copies is None:
                problem = (f"claims {a.line}:{a.col} '{a.what}', a statement of an unrolled "
                           "loop, but no `// unrolled` line above it says which copy")
            elif m is None and copies:
                problem = (f"claims {a.line}:{a.col} '{a.what}' in the copy"
                           f"{self.spec.copy_label(copies)} of its unrolled loop(s), which "
                           "the IR does not have")
            elif m is None:
                problem = (f"claims {a.line}:{a.col} '{a.what}', but no IR statement of kind "
                           f"{KIND[ev.kind]} starts there")
            elif a.what != m.spec.what:
                problem = f"annotated '{a.what}', the IR statement is '{m.spec.what}'"
            elif ev.kind in ("ld", "st"):
                problem = self._check_access_kind(ev, m.spec)
            elif ev.kind == "mbar.arrive" and ("tx" in ev.ops) != ("tx" in m.spec.ops):
                problem = "arrive with expect_tx where the IR has none, or the reverse"
            elif ev.kind in ("mbar.arrive", "mbar.wait", "cluster.arrive", "cluster.wait"):
                problem = semantics(ev, m.spec)
            elif ev.kind == "tma.load" and ("mask" in ev.ops) != ("mask" in m.spec.ops):
                problem = "a multicast where the IR has none, or the reverse"
            elif ev.kind in ("tma.load", "tma.store") and ev.ops["dims"] != m.spec.ops["dims"]:
                problem = f"{ev.ops['dims']}-d copy of a {m.spec.ops['dims']}-d box"
            elif ev.kind == "wait_group" and (ev.ops["pending"], ev.ops["read"]) != (
                    m.spec.ops["pending"], m.spec.ops["read"]):
                problem = (f"wait_group {ev.ops['pending']}{' read' if ev.ops['read'] else ''}"
                           f", the IR says {m.spec.ops['pending']}"
                           f"{' read' if m.spec.ops['read'] else ''}")
            elif ev.kind == "wgmma.wait" and ev.ops["pending"] != m.spec.ops["pending"]:
                problem = (f"wgmma.wait_group {ev.ops['pending']}, the IR says "
                           f"{m.spec.ops['pending']}")
            elif ev.kind == "wgmma":
                problem = mma_shape(ev, m.spec)
            if problem is not None or m is None:
                code = SYNC if ev.kind in ("wait_group", "wgmma.wait") and m is not None \
                    else STRUCTURE
                self.rep.ob(name, Verdict.REFUTED, code, problem, self.rep.span(ins),
                            self.rep.witness(ev), method="structural + z3")
                continue
            m.ptx.append(ev)
        return matches, writes

    def _check_access_kind(self, ev: Event, e: SpecEvent) -> str | None:
        """The state space, element type and path of a load or store."""
        space = e.ops["space"]
        if ev.ops["space"] != space:
            return f"{ev.ops['space']} access for a {space} one"
        dtype: ir.DType = e.ops["dtype"]  # type: ignore[assignment]
        if ev.ops["nbytes"] != dtype.nbytes or ev.ops["type"] not in _LD_TYPES[dtype]:
            return f"accesses .{ev.ops['type']} for a {dtype.value} element"
        if ev.kind == "ld" and ev.ops.get("nc") and space != "global":
            return ".nc on a shared load"
        return None

    def match_loops(self, matches: list[Match]) -> tuple[dict[int, ir.For], dict[int, int]]:
        """PTX loop id -> IR for, and back: from the loops around each matched instruction,
        then from the `for` annotations of loops without accesses."""
        owner: dict[int, ir.For] = {}
        rev: dict[int, int] = {}
        for m in matches:
            for ev in m.ptx:
                ptx_loops = self.cx.counted(ev)
                fors = m.spec.fors
                spin = [lid for lid in ev.loops if lid not in ptx_loops]
                if ev.kind != "mbar.wait" and spin:
                    self.bad_nesting.add(ev.instr.index)
                    self.rep.ob(f"PTX line {ev.instr.line}: {ev.instr.text}", Verdict.UNKNOWN,
                                STRUCTURE, "runs inside a loop without a recognised induction "
                                "register (a spin loop, or a counted loop of a shape the "
                                "validator does not summarise): it may run any number of "
                                "times", m.spec.span, method="structural")
                    continue
                if len(ptx_loops) != len(fors):
                    self.bad_nesting.add(ev.instr.index)
                    self.rep.ob(f"PTX line {ev.instr.line}: {ev.instr.text}", Verdict.REFUTED,
                                STRUCTURE, f"inside {len(ptx_loops)} counted loop(s), its IR "
                                f"statement inside {len(fors)} for(s)", m.spec.span,
                                self.rep.witness(ev), method="structural")
                    continue
                for lid, f in zip(ptx_loops, fors, strict=True):
                    uid = f.var.uid
                    if owner.get(lid, f) is not f or rev.get(uid, lid) != lid:
                        self.bad_nesting.add(ev.instr.index)
                        self.rep.ob(f"PTX line {ev.instr.line}: {ev.instr.text}",
                                    Verdict.REFUTED, STRUCTURE, f"PTX loop L{lid} would have "
                                    f"to be two different IR loops (or for {f.var.name} two "
                                    "PTX loops)", m.spec.span, self.rep.witness(ev),
                                    method="structural")
                        break
                    owner[lid] = f
                    rev[uid] = lid
        # loops without accesses: the `for` annotation on the induction register's start
        for ins in self.cx.mod.instrs:
            a = ins.annotation
            if a is None or not a.what.startswith("for "):
                continue
            f = next((lp.node for lp in self.spec.loops.values()
                      if (lp.node.span.line, lp.node.span.col) == (a.line, a.col)
                      and copies_of(ins.copies, tuple(u for u, _ in lp.copies))
                      == lp.copies), None)
            dest = ins.operands[0] if ins.operands else None
            if f is None or f.var.uid in rev or not hasattr(dest, "name"):
                continue
            cands = [lid for lid, info in self.res.loops.items()
                     if info.counter is not None and dest.name in info.ivs  # type: ignore
                     and lid not in owner]
            if len(cands) == 1:
                owner[cands[0]] = f
                rev[f.var.uid] = cands[0]
        return owner, rev

    def bound_counters(self, for_to_loop: dict[int, int]) -> None:
        """Give each iteration counter the range every execution keeps it in: below the
        IR's largest trip count (for IR instances) and below the count at which the PTX's
        induction registers would leave their width (for PTX executions, as the loop
        obligation proves). Small ranges keep the solver's bit-vectors narrow."""
        for uid, sl in self.spec.loops.items():
            iv = encode.intervals([T.isub(sl.hi, sl.lo)])
            span = iv[id(T.isub(sl.hi, sl.lo))][1] if not T.isub(sl.hi, sl.lo).is_const \
                else int(T.isub(sl.hi, sl.lo).val)  # type: ignore[arg-type]
            bound = max(0, -(-span // sl.step))
            lid = for_to_loop.get(uid)
            info = self.res.loops.get(lid) if lid is not None else None
            if info is None or not info.ivs:
                ptx = 2**64 - 1 if info is not None else 0
            else:
                ptx = 0
                for init, step, w in info.ivs.values():
                    lo, hi = encode.leaf_range(init, True) if not init.is_const \
                        else (T.sval(init), T.sval(init))
                    room = (2 ** (w - 1) - 1 - lo) // step if step > 0 \
                        else (hi + 2 ** (w - 1)) // -step
                    ptx = max(ptx, room)
            T.leaf(f"n:F{uid}", 64, LeafInfo("int", False, 0, min(2**64 - 1,
                                                                  max(bound, ptx) + 1),
                                              note=f"iteration of for {sl.node.var.name}"))
