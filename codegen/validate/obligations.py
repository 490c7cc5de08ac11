"""The translation obligations: for each IR access or synchronisation statement, the PTX
instructions that claim to implement it, checked against the specification.

What is proved (docs/codegen.md gives the full list and the codes):

* structure (TS720): the module's interface (entry name, parameters, block size, the
  shared array); every PTX memory/synchronisation instruction names, in its `// LINE:COL`
  comment, an IR statement of the same kind, and every IR statement that can run has its
  instructions; instructions sit in as many counted loops as their statements in `for`s;
  every instruction is understood;
* operands: addresses of loads and stores (TS721), mbarrier operands (TS724), TMA operands
  (TS725), other synchronisation operands (TS729), equal to the specification's as
  integers, for every instance that runs;
* execution (TS722): the PTX runs each instruction for exactly the instances the IR runs
  its statement, and at most once per instance;
* `ld.global.nc` only on tensors the kernel never writes (TS723);
* the order of memory and synchronisation operations (TS726);
* loops (TS727): start, step, exit test and the absence of wrap-around;
* waits spin until their phase completes (TS729); the shared-memory base and extent (TS728).

A comment is a claim, never a fact: it only says which proof to attempt, and every proof is
about the instruction's real operands and path condition.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field

import z3

from tilesafe.checkers.obligation import Obligation, Verdict
from tilesafe.codegen.validate import cfg as cfgmod
from tilesafe.codegen.validate import encode, lift, narrow, nia
from tilesafe.codegen.validate import spec as specmod
from tilesafe.codegen.validate import terms as T
from tilesafe.codegen.validate.layout_terms import LayoutUnsupported
from tilesafe.codegen.validate.ptx_parse import PtxSyntaxError, parse
from tilesafe.codegen.validate.solve import PROVED, REFUTED, UNKNOWN, Budget, Outcome, Prover
from tilesafe.codegen.validate.spec import Spec, SpecEvent, SpecUnsupported
from tilesafe.codegen.validate.symexec import Event, ExecResult, Executor, Unsupported
from tilesafe.codegen.validate.terms import LeafInfo, Term
from tilesafe.frontend import ir
from tilesafe.frontend.span import Span

CHECKER = "translation"
METHOD = "z3 symbolic execution"

STRUCTURE, ADDRESS, EXECUTION, NONCOHERENT = "TS720", "TS721", "TS722", "TS723"
MBARRIER, TMA, ORDER, LOOP, SMEM, SYNC = "TS724", "TS725", "TS726", "TS727", "TS728", "TS729"
CODES = {
    STRUCTURE: "PTX structure: interface, annotations, missing or unknown instructions",
    ADDRESS: "address of a global or shared load/store differs from the IR's",
    EXECUTION: "an instruction runs for other instances than its IR statement (or twice)",
    NONCOHERENT: "ld.global.nc on a tensor the kernel writes",
    MBARRIER: "mbarrier operand (address, count, tx bytes, parity) differs from the IR's",
    TMA: "TMA operand (shared address, tensor map, coordinates, mbarrier) differs",
    ORDER: "memory/synchronisation operations in a different order than the IR's",
    LOOP: "loop start, step, exit test or wrap-around differs from the IR's for",
    SMEM: "shared-memory base or extent differs from the layout contract",
    SYNC: "other synchronisation operand (bar.sync, warp mask, wait_group, spin loop)",
}

# PTX event kind -> IR event kind
KIND = {"ld": "ld", "st": "st", "mbar.init": "mbar.init", "mbar.arrive": "mbar.arrive",
        "mbar.expect_tx": "mbar.expect_tx", "mbar.wait": "mbar.wait",
        "fence.mbarrier_init": "fence.mbarrier_init", "fence.proxy_async": "fence.proxy_async",
        "bar.sync": "bar.sync", "bar.arrive": "bar.arrive", "bar.warp.sync": "converge",
        "tma.load": "tma.load",
        "tma.store": "tma.store", "commit": "commit", "wait_group": "wait_group"}
OPERAND_CODE = {"ld": ADDRESS, "st": ADDRESS, "mbar.init": MBARRIER, "mbar.arrive": MBARRIER,
                "mbar.expect_tx": MBARRIER, "mbar.wait": MBARRIER, "tma.load": TMA,
                "tma.store": TMA, "converge": SYNC, "bar.sync": SYNC, "bar.arrive": SYNC,
                "wait_group": SYNC}
ONCE_KINDS = {"st", "mbar.init", "mbar.arrive", "mbar.expect_tx", "bar.sync", "bar.arrive",
              "converge",
              "tma.load", "tma.store", "commit", "wait_group"}
_MEMORY_OPS = {"ld", "st", "atom", "red", "mbarrier", "cp", "bar", "barrier", "fence", "membar",
               "elect", "prefetch", "tensormap"}
# A no-overflow question the integer solver has not settled by then is left to the
# bit-vector encoding (they take milliseconds when they hold).
NIA_MS = 2000
_SMEM_DECL = re.compile(r"Dynamic shared memory:\s*(\d+)\s*bytes")
_LD_TYPES = {ir.DType.F16: {"b16", "f16"}, ir.DType.BF16: {"b16"}, ir.DType.F32: {"f32", "b32"},
             ir.DType.I32: {"s32", "b32", "u32"}, ir.DType.U8: {"u8", "s8", "b8"}}


def validate_ptx(kernel: ir.Kernel, ptx: str, *, budget_s: float = 120.0,
                 query_ms: int = 10000) -> list[Obligation]:
    """Every translation obligation of `ptx` against `kernel` (never raises for a property
    of the input: what cannot be decided is an `unknown` obligation)."""
    T.reset()
    v = _Validator(kernel, ptx, Budget(budget_s, query_ms))
    try:
        return v.run()
    except (RecursionError, z3.Z3Exception, ValueError, KeyError, TypeError, AttributeError,
            AssertionError, IndexError) as err:
        # a defect of the validator itself must never read as "proved" (nor crash compile)
        return v.out + [Obligation(CHECKER, "validate the PTX", Verdict.UNKNOWN, METHOD,
                                   kernel.span, STRUCTURE, f"internal error of the validator: "
                                   f"{type(err).__name__}: {err}")]


@dataclass
class _Match:
    spec: SpecEvent
    ptx: list[Event] = field(default_factory=list)


class _Validator:
    def __init__(self, kernel: ir.Kernel, ptx: str, budget: Budget) -> None:
        self.k = kernel
        self.text = ptx
        self.budget = budget
        self.out: list[Obligation] = []
        self.sub: dict[int, Term] = {}
        self.memo: dict[int, Term] = {}
        self.loop_map: dict[int, ir.For] = {}  # PTX loop id -> IR for
        self.loop_exact: dict[int, bool] = {}  # PTX loop id -> its loop obligation holds
        self.exec_ok: dict[int, bool] = {}  # id(spec event) -> executes as in the IR
        self.bad_nesting: set[int] = set()  # PTX event indices whose loops do not match

    # -- driver ---------------------------------------------------------------------------

    def run(self) -> list[Obligation]:
        t0 = time.monotonic()
        try:
            self.mod = parse(self.text)
        except PtxSyntaxError as err:
            return [self.ob("read the PTX", Verdict.UNKNOWN, STRUCTURE,
                            f"the PTX could not be read: {err}", method="PTX reader")]
        if self.mod.entries != 1:
            return [self.ob("read the PTX", Verdict.UNKNOWN, STRUCTURE,
                            f"expected one .entry, found {self.mod.entries}",
                            method="PTX reader")]
        try:
            self.cfg = cfgmod.build(self.mod)
            self.spec = Spec(self.k)
            self.exe = Executor(self.mod, self.cfg)
            self.res: ExecResult = self.exe.run()
        except (cfgmod.CfgError, SpecUnsupported, LayoutUnsupported, Unsupported) as err:
            return [self.ob("model the kernel", Verdict.UNKNOWN, STRUCTURE,
                            f"not modelled: {err}")]
        self._register_leaves()
        self.prover = Prover(self.budget, self.spec.contract_products())
        self.interface()
        for u in self.res.unknowns:
            self.ob(f"PTX line {u.instr.line}: {u.instr.text}", Verdict.UNKNOWN, STRUCTURE,
                    f"instruction not understood: {u.reason}", span=self._span(u.instr))
        self.matches = self.match()
        self.match_loops()
        self.bound_counters()
        self.finish_substitution()
        self.loops()
        for m in self.matches:
            self.check_event(m)
        self.noncoherent()
        self.order()
        self.waits()
        self.smem()
        self.elapsed = time.monotonic() - t0
        return self.out

    def _register_leaves(self) -> None:
        for p in self.mod.params:
            T.leaf(f"param:{p.name}", 64 if p.type in ("u64", "s64", "b64") else 32,
                   self._param_info(p.name))
            T.leaf(f"param_addr:{p.name}", 64,
                   LeafInfo("int", False, 0, 2**64 - 1, note=f"param-space address of {p.name}"))

    def _param_info(self, name: str) -> LeafInfo:
        if name.startswith("s_") and name[2:] in self.k.sizes:
            lo, hi = self.spec.size_ranges[name[2:]]
            return LeafInfo("int", True, lo, hi, note=f"size {name[2:]}")
        return LeafInfo("int", False, 0, 2**64 - 1, note=f"parameter {name}")

    # -- reporting ------------------------------------------------------------------------

    def ob(self, name: str, verdict: Verdict, code: str | None, message: str = "",
           span: Span | None = None, cex: dict | None = None, evidence: dict | None = None,
           seconds: float = 0.0, method: str = METHOD) -> Obligation:
        o = Obligation(CHECKER, name, verdict, method, span, code if verdict
                       is not Verdict.PROVED else None, message, seconds=seconds,
                       counterexample=cex, evidence=evidence or {})
        self.out.append(o)
        return o

    def _span(self, ins) -> Span:
        a = ins.annotation
        if a is not None:
            return Span(self.k.span.path, a.line, a.col, a.line, a.col)
        return self.k.span

    def report(self, name: str, outcome: Outcome, code: str, span: Span | None,
               ok: str, bad: str, t0: float, evidence: dict | None = None) -> Obligation:
        secs = time.monotonic() - t0
        if outcome.verdict == PROVED:
            return self.ob(name, Verdict.PROVED, code, ok, span, seconds=secs,
                           evidence=evidence)
        if outcome.verdict == REFUTED:
            cex = self.describe(outcome.values)
            cex.update(outcome.shown)
            if outcome.note:
                cex["data"] = outcome.note
            return self.ob(name, Verdict.REFUTED, code, bad, span, cex, evidence, secs)
        return self.ob(name, Verdict.UNKNOWN, code, f"{bad} could not be decided: "
                       f"{outcome.note}", span, evidence=evidence, seconds=secs)

    def describe(self, values: dict[str, int]) -> dict[str, object]:
        out: dict[str, object] = {}
        fors = {f"n:F{lp.node.var.uid}": lp.node for lp in self.spec.loops.values()}
        for name, v in sorted(values.items()):
            if name.startswith("param:s_"):
                out[name[8:]] = T.signed(v, 64)
            elif name == "tid.x":
                out["thread"] = v
            elif name.startswith("ctaid."):
                out["block." + name[6:]] = v
            elif name in fors:
                f = fors[name]
                out[f"iteration of {f.var.name} ({f.span.line}:{f.span.col})"] = v
            elif name.startswith("n:L"):
                out[f"iteration of PTX loop {name[2:]}"] = v
            elif name == "tsmem":
                out["tsmem (shared address of the dynamic array)"] = v
            elif name.startswith("e:"):
                out["barrier element"] = v
            elif name.startswith("gbase:p_"):
                out[f"global address of {name[8:]}"] = hex(v)
            elif name.startswith("tmap:"):
                out[f"generic address of {name[5:]}"] = hex(v)
            elif name.startswith("param_addr:"):
                out[f"param-space address of {name[11:]}"] = hex(v)
            elif name.startswith("param:"):
                out[f"parameter {name[6:]}"] = hex(v)
            else:
                out[name] = v
        return out

    def witness(self, ev: Event, **extra: object) -> dict[str, object]:
        """A concrete instance (sizes, block, thread, iterations) in which the PTX runs the
        instruction, for structural refutations."""
        out = self.prover.satisfiable(self.spec.assumptions + [self.p(ev.pc)])
        cex = self.describe(out.values) if out.verdict == REFUTED else {}
        cex.update({"instruction": ev.instr.text, "PTX line": ev.instr.line}, **extra)
        return cex

    # -- substitution of PTX names by IR names --------------------------------------------

    def p(self, t: Term) -> Term:
        """A PTX term with its loop counters and loaded values renamed to the IR's."""
        return T.substitute([t], self.sub, self.memo)[0]

    def finish_substitution(self) -> None:
        for lid, f in self.loop_map.items():
            info = self.res.loops.get(lid)
            if info is not None and info.counter is not None:
                self.sub[id(info.counter)] = specmod.counter(f)
        for m in self.matches:
            for ev in m.ptx:
                if ev.result is not None and m.spec.data is not None \
                        and ev.result.w == m.spec.data.w:
                    self.sub[id(ev.result)] = m.spec.data
        self.memo = {}

    # -- interface --------------------------------------------------------------------------

    def interface(self) -> None:
        mod, k = self.mod, self.k
        problems = []
        if mod.entry != k.name:
            problems.append(f"entry is '{mod.entry}', the kernel is '{k.name}'")
        if mod.target is None or "sm_90a" not in mod.target:
            problems.append(f"target is {mod.target}, expected sm_90a")
        if mod.address_size != 64:
            problems.append(f".address_size is {mod.address_size}, expected 64")
        want: dict[str, tuple[str, int | None, int | None]] = {}
        for t in k.params:
            want[f"p_{t.name}"] = ("u64", None, None)
        for s in k.sizes:
            want[f"s_{s}"] = ("s64", None, None)
        for tm in k.tensormaps:
            want[f"tm_{tm.name}"] = ("b8", 64, 128)
        have = {p.name: (p.type, p.align, p.array) for p in mod.params}
        for name, sig in want.items():
            if name not in have:
                problems.append(f"parameter {name} is missing")
            elif have[name] != sig:
                problems.append(f"parameter {name} is {have[name]}, expected {sig}")
        for name in have:
            if name not in want:
                problems.append(f"unexpected parameter {name}")
        if mod.reqntid is None or mod.reqntid[0] != k.block or any(d != 1 for d in
                                                                    mod.reqntid[1:]):
            problems.append(f".reqntid is {mod.reqntid}, expected ({k.block}, 1, 1): the "
                            "thread range every proof assumes")
        shared = [d for d in mod.shared_decls if d[0] == "tsmem"]
        if len(mod.shared_decls) != 1 or not shared or not shared[0][3] \
                or (shared[0][1] or 0) < 16:
            problems.append(f"expected exactly '.extern .shared .align 16 .b8 tsmem[]', found "
                            f"{mod.shared_decls}")
        for ins, reg in self.res.undefined:
            problems.append(f"line {ins.line}: {reg} is read before it is written")
        if problems:
            self.ob("module interface", Verdict.REFUTED, STRUCTURE, "; ".join(problems),
                    k.span, {"problems": problems}, method="structural")
        else:
            self.ob("module interface", Verdict.PROVED, STRUCTURE,
                    "entry, parameters, .reqntid and the shared array as the IR needs",
                    k.span, method="structural")

    # -- matching ---------------------------------------------------------------------------

    def match(self) -> list[_Match]:
        index: dict[tuple[int, int, str], _Match] = {}
        matches = []
        for e in self.spec.events:
            m = _Match(e)
            matches.append(m)
            index[(e.span.line, e.span.col, e.kind)] = m
        for ev in self.res.events:
            ins = ev.instr
            a = ins.annotation
            name = f"PTX line {ins.line}: {ins.text}"
            if a is None:
                self.ob(name, Verdict.REFUTED, STRUCTURE, "a memory or synchronisation "
                        "instruction without a source annotation: no IR statement asks for "
                        "it", self.k.span, self.witness(ev), method="structural + z3")
                continue
            m = index.get((a.line, a.col, KIND[ev.kind]))
            problem = None
            if m is None:
                problem = (f"claims {a.line}:{a.col} '{a.what}', but no IR statement of kind "
                           f"{KIND[ev.kind]} starts there")
            elif a.what != m.spec.what:
                problem = f"annotated '{a.what}', the IR statement is '{m.spec.what}'"
            elif ev.kind in ("ld", "st"):
                problem = self._check_access_kind(ev, m.spec)
            elif ev.kind == "mbar.arrive" and ("tx" in ev.ops) != ("tx" in m.spec.ops):
                problem = "arrive with expect_tx where the IR has none, or the reverse"
            elif ev.kind in ("tma.load", "tma.store") and ev.ops["dims"] != m.spec.ops["dims"]:
                problem = f"{ev.ops['dims']}-d copy of a {m.spec.ops['dims']}-d box"
            elif ev.kind == "wait_group" and (ev.ops["pending"], ev.ops["read"]) != (
                    m.spec.ops["pending"], m.spec.ops["read"]):
                problem = (f"wait_group {ev.ops['pending']}{' read' if ev.ops['read'] else ''}"
                           f", the IR says {m.spec.ops['pending']}"
                           f"{' read' if m.spec.ops['read'] else ''}")
            if problem is not None or m is None:
                code = SYNC if ev.kind == "wait_group" and m is not None else STRUCTURE
                self.ob(name, Verdict.REFUTED, code, problem, self._span(ins),
                        self.witness(ev), method="structural + z3")
                continue
            m.ptx.append(ev)
        return matches

    def _check_access_kind(self, ev: Event, e: SpecEvent) -> str | None:
        space = e.ops["space"]
        if ev.ops["space"] != space:
            return f"{ev.ops['space']} access for a {space} one"
        dtype: ir.DType = e.ops["dtype"]  # type: ignore[assignment]
        if ev.ops["nbytes"] != dtype.nbytes or ev.ops["type"] not in _LD_TYPES[dtype]:
            return f"accesses .{ev.ops['type']} for a {dtype.value} element"
        if ev.kind == "ld" and ev.ops.get("nc") and space != "global":
            return ".nc on a shared load"
        return None

    def counted(self, ev: Event) -> list[int]:
        return [lid for lid in ev.loops
                if self.res.loops.get(lid) is not None and self.res.loops[lid].counter
                is not None]

    def match_loops(self) -> None:
        owner: dict[int, ir.For] = {}
        rev: dict[int, int] = {}
        for m in self.matches:
            for ev in m.ptx:
                ptx_loops = self.counted(ev)
                fors = m.spec.fors
                spin = [lid for lid in ev.loops if lid not in ptx_loops]
                if ev.kind != "mbar.wait" and spin:
                    self.bad_nesting.add(ev.instr.index)
                    self.ob(f"PTX line {ev.instr.line}: {ev.instr.text}", Verdict.UNKNOWN,
                            STRUCTURE, "runs inside a loop without a recognised induction "
                            "register (a spin loop, or a counted loop of a shape the validator "
                            "does not summarise): it may run any number of times",
                            m.spec.span, method="structural")
                    continue
                if len(ptx_loops) != len(fors):
                    self.bad_nesting.add(ev.instr.index)
                    self.ob(f"PTX line {ev.instr.line}: {ev.instr.text}", Verdict.REFUTED,
                            STRUCTURE, f"inside {len(ptx_loops)} counted loop(s), its IR "
                            f"statement inside {len(fors)} for(s)", m.spec.span,
                            self.witness(ev), method="structural")
                    continue
                for lid, f in zip(ptx_loops, fors, strict=True):
                    uid = f.var.uid
                    if owner.get(lid, f) is not f or rev.get(uid, lid) != lid:
                        self.bad_nesting.add(ev.instr.index)
                        self.ob(f"PTX line {ev.instr.line}: {ev.instr.text}",
                                Verdict.REFUTED, STRUCTURE, f"PTX loop L{lid} would have to be "
                                f"two different IR loops (or for {f.var.name} two PTX loops)",
                                m.spec.span, self.witness(ev),
                                method="structural")
                        break
                    owner[lid] = f
                    rev[uid] = lid
        # loops without accesses: the `for` annotation on the induction register's start
        for ins in self.mod.instrs:
            a = ins.annotation
            if a is None or not a.what.startswith("for "):
                continue
            f = next((lp.node for lp in self.spec.loops.values()
                      if (lp.node.span.line, lp.node.span.col) == (a.line, a.col)), None)
            dest = ins.operands[0] if ins.operands else None
            if f is None or f.var.uid in rev or not hasattr(dest, "name"):
                continue
            cands = [lid for lid, info in self.res.loops.items()
                     if info.counter is not None and dest.name in info.ivs  # type: ignore
                     and lid not in owner]
            if len(cands) == 1:
                owner[cands[0]] = f
                rev[f.var.uid] = cands[0]
        self.loop_map = owner
        self.for_to_loop = rev

    def bound_counters(self) -> None:
        """Give each iteration counter the range every execution keeps it in: below the
        IR's largest trip count (for IR instances) and below the count at which the PTX's
        induction registers would leave their width (for PTX executions, as the loop
        obligation proves). Small ranges keep the solver's bit-vectors narrow."""
        for uid, sl in self.spec.loops.items():
            iv = encode.intervals([T.isub(sl.hi, sl.lo)])
            span = iv[id(T.isub(sl.hi, sl.lo))][1] if not T.isub(sl.hi, sl.lo).is_const \
                else int(T.isub(sl.hi, sl.lo).val)  # type: ignore[arg-type]
            bound = max(0, -(-span // sl.step))
            lid = self.for_to_loop.get(uid)
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

    # -- loops ------------------------------------------------------------------------------

    def loops(self) -> None:
        hyps0 = self.spec.assumptions
        for uid, sl in self.spec.loops.items():
            f = sl.node
            name = f"loop for {f.var.name} at {f.span.line}:{f.span.col}"
            t0 = time.monotonic()
            var = T.iadd(sl.lo, T.imul(T.uint(sl.counter), T.const_int(sl.step)))
            runs = T.and_(sl.cond, T.ilt(var, sl.hi))
            lid = self.for_to_loop.get(uid)
            if lid is None:
                out = self.prover.satisfiable(hyps0 + [runs])
                if out.verdict == PROVED:
                    self.ob(name, Verdict.PROVED, LOOP, "never runs for any allowed size; "
                            "no PTX loop needed", f.span, seconds=time.monotonic() - t0)
                elif out.verdict == REFUTED and not self._has_events(f):
                    self.ob(name, Verdict.UNKNOWN, LOOP, "a loop without memory or "
                            "synchronisation that no PTX loop is annotated as", f.span)
                else:
                    self.report(name, out, LOOP, f.span, "", "the loop can run but has no "
                                "PTX loop", t0)
                continue
            info = self.res.loops[lid]
            if not info.top_tested:
                self.loop_exact[lid] = False
                self.ob(name, Verdict.UNKNOWN, LOOP, f"PTX loop L{lid} leaves from elsewhere "
                        "than its head or has a conditional back edge: only top-tested loops "
                        "are summarised exactly", f.span, seconds=time.monotonic() - t0)
                continue
            pc0, region, latch = self.p(info.pc0), self.p(info.region), self.p(info.latch_pc)
            n = specmod.counter(f)
            prev = T.ilt(T.iadd(sl.lo, T.imul(T.isub(T.uint(n), T.const_int(1)),
                                              T.const_int(sl.step))), sl.hi)
            # reached: iteration 0, or the IR ran iteration n - 1 (a counterexample at the
            # first difference is then a real execution; see docs/codegen.md)
            reached = T.or_(T.eq(T.uint(n), T.const_int(0)), prev)
            results: list[tuple[str, Outcome]] = []
            # iteration n completes exactly when lo + step*n < hi (for the IR's loop)
            it = self.first_difference(hyps0 + [pc0, sl.cond, region, reached],
                                       T.eq(latch, T.ilt(var, sl.hi)),
                                       {"PTX continues": latch,
                                        "IR continues": T.ilt(var, sl.hi)}, n)
            results.append(("the PTX loop and the IR's for run different iterations", it))
            primary = [r for r, (init, _, w) in info.ivs.items()
                       if self._mentions(info.latch_pc, self.exe_value(info, r))]
            for r, (init, step, w) in info.ivs.items():
                after = T.iadd(T.sint(self.p(init)),
                               T.imul(T.iadd(T.uint(n), T.const_int(1)), T.const_int(step)))
                lim = T.ile(after, T.const_int(2 ** (w - 1) - 1)) if step > 0 \
                    else T.ile(T.const_int(-(2 ** (w - 1))), after)
                results.append((f"induction register {r} can wrap around", self.prover.prove(
                    hyps0 + [pc0, region, latch, reached, sl.cond], lim,
                    {f"{r} after the step": after})))
            note = ""
            if len(primary) == 1:
                r = primary[0]
                init, step, w = info.ivs[r]
                if step != sl.step:
                    results.append((f"{r} steps by {step}, the IR by {sl.step}", Outcome(
                        REFUTED, "", {}, {"PTX step": step, "IR step": sl.step})))
                results.append((f"{r} does not start at the IR's lower bound", self.prover.prove(
                    hyps0 + [pc0, sl.cond], T.eq(T.sint(self.p(init)), sl.lo),
                    {"PTX start": T.sint(self.p(init)), "IR start": sl.lo})))
                note = f"induction register {r}, step {step}"
            else:
                note = "no single induction register decides the exit; checked by the " \
                       "iteration equivalence"
            self.loop_exact[lid] = all(o.verdict == PROVED for _, o in results)
            self._combine(name, results, LOOP, f.span, t0,
                          f"PTX loop L{lid} runs iteration n exactly when {f.var.name} = lo + "
                          f"{sl.step}n < hi, without wrap-around ({note})")

    def first_difference(self, hyps: list[Term], claim: Term, show: dict[str, Term],
                         n: Term) -> Outcome:
        """A refutation at the smallest iteration the solver can find (a few rounds): the
        first iteration where PTX and IR differ is the one a real run reaches."""
        out = self.prover.prove(hyps, claim, show)
        name = str(n.val)
        for _ in range(6):
            if out.verdict != REFUTED or not out.values.get(name):
                break
            smaller = self.prover.prove(hyps + [T.ilt(T.uint(n),
                                                      T.const_int(out.values[name]))],
                                        claim, show)
            if smaller.verdict != REFUTED:
                break
            out = smaller
        return out

    def exe_value(self, info, r: str) -> Term:
        init, step, w = info.ivs[r]
        n = T.trunc(info.counter, w) if w < 64 else info.counter
        return T.add(init, T.mul(n, T.bv(step, w)))

    @staticmethod
    def _mentions(t: Term, sub: Term) -> bool:
        return any(x is sub for x in T.postorder([t]))

    def _has_events(self, f: ir.For) -> bool:
        return any(f in e.fors for e in self.spec.events)

    def _combine(self, name: str, results: list[tuple[str, Outcome]], code: str,
                 span: Span | None, t0: float, ok: str) -> None:
        secs = time.monotonic() - t0
        for what, out in results:
            if out.verdict == REFUTED:
                cex = self.describe(out.values)
                cex.update(out.shown)
                self.ob(name, Verdict.REFUTED, code, what, span, cex, seconds=secs)
                return
        unknown = [(w, o) for w, o in results if o.verdict == UNKNOWN]
        if unknown:
            self.ob(name, Verdict.UNKNOWN, code, "; ".join(
                f"could not decide whether {w}: {o.note}" for w, o in unknown), span,
                seconds=secs)
            return
        self.ob(name, Verdict.PROVED, code, ok, span, seconds=secs)

    # -- per statement ----------------------------------------------------------------------

    def check_event(self, m: _Match) -> None:
        e = m.spec
        span = e.span
        label = f"{e.what}{' ' + str(e.ops['tensor']) if 'tensor' in e.ops else ''} at " \
                f"{span.line}:{span.col}"
        hyps0 = self.spec.assumptions
        ptx = [ev for ev in m.ptx if ev.instr.index not in self.bad_nesting]
        t0 = time.monotonic()
        if len(ptx) != len(m.ptx):
            self.ob(f"{label}: executes as in the IR", Verdict.UNKNOWN, EXECUTION,
                    "an instruction of this statement is in the wrong loops (see structure)",
                    span)
            return
        if not m.ptx:
            out = self.prover.satisfiable(hyps0 + [e.cond])
            if out.verdict == REFUTED and self.opaque_memory(e):
                out = Outcome(UNKNOWN, "an instruction the validator does not understand may "
                              "implement it")
            if out.verdict == PROVED:
                self.ob(f"{label}: has its instructions", Verdict.PROVED, STRUCTURE,
                        "never runs for any allowed size: no instruction needed", span,
                        seconds=time.monotonic() - t0)
            else:
                self.report(f"{label}: has its instructions", out, STRUCTURE, span, "",
                            "no PTX instruction implements this statement, which runs", t0)
            return
        elem = e.ops.get("elem")
        # operands, per instruction
        code = OPERAND_CODE.get(e.kind)
        if code is not None:
            for ev in ptx:
                t1 = time.monotonic()
                hyps = hyps0 + [self.p(ev.pc), e.cond, e.inbounds]
                claim, shown = self.operands(e, ev, hyps)
                exact = all(self.loop_exact.get(lid, False) for lid in self.counted(ev))
                out = self.gate(self.prover.prove(hyps, claim, shown), exact)
                self.report(f"{label}: operands of PTX line {ev.instr.line}", out, code, span,
                            self._ok_text(e), self._bad_text(e), t1,
                            {"instruction": ev.instr.text})
        # execution: exactly the IR's instances
        t1 = time.monotonic()
        exact = all(self.loop_exact.get(lid, False) for ev in ptx for lid in self.counted(ev))
        pcs = [self.p(ev.pc) for ev in ptx]
        if isinstance(elem, Term):
            cover = T.or_(*[T.and_(pc, T.eq(T.uint(self.p(ev.ops["addr"])),  # type: ignore
                                           e.ops["addr"])) for pc, ev in zip(pcs, ptx,
                                                                             strict=True)])
            ir_to_ptx = self.prover.prove(hyps0 + [e.cond, e.inbounds], cover,
                                          {"IR runs": e.cond, "PTX runs": cover})
        else:
            ir_to_ptx = self.prover.prove(hyps0 + [e.cond], T.or_(*pcs),
                                          {"IR runs": e.cond, "PTX runs": T.or_(*pcs)})
        results = [("the IR runs it but the PTX does not", self.gate(ir_to_ptx, exact,
                                                                      keep=REFUTED))]
        for ev, pc in zip(ptx, pcs, strict=True):
            results.append((f"PTX line {ev.instr.line} runs where the IR does not",
                            self.gate(self.prover.prove(hyps0 + [pc], e.cond,
                                                        {"IR runs": e.cond, "PTX runs": pc}),
                                      exact)))
        if e.kind in ONCE_KINDS and len(ptx) > 1:
            for i in range(len(ptx)):
                for j in range(i + 1, len(ptx)):
                    both = [pcs[i], pcs[j]]
                    if isinstance(elem, Term):
                        both.append(T.eq(self.p(ptx[i].ops["addr"]),  # type: ignore
                                         self.p(ptx[j].ops["addr"])))  # type: ignore
                    results.append((f"PTX lines {ptx[i].instr.line} and {ptx[j].instr.line} "
                                    "both run for one instance",
                                    self.gate(self.prover.prove(hyps0 + both, T.FALSE), exact)))
        self.exec_ok[id(e)] = all(o.verdict == PROVED for _, o in results)
        self._combine(f"{label}: executes exactly when the IR does", results, EXECUTION,
                      span, t1, f"{len(ptx)} instruction(s) run for exactly the IR's "
                      "instances, once each")

    @staticmethod
    def gate(out: Outcome, exact: bool, keep: str | None = None) -> Outcome:
        """Inside a loop whose obligation did not hold, the summary at the loop head is
        neither an over- nor an under-approximation of the PTX's iterations any more (the
        no-wrap assumption is unproved): only a verdict that does not depend on it (`keep`:
        an IR instance the PTX cannot run at all) survives; the rest becomes unknown."""
        if exact or out.verdict == keep or out.verdict == UNKNOWN:
            return out
        return Outcome(UNKNOWN, "inside a PTX loop whose loop obligation does not hold, the "
                       "PTX's iterations are not known exactly")

    def opaque_memory(self, e: SpecEvent) -> bool:
        """Could a not-understood instruction be this statement's implementation? (yes when
        it claims the statement, or is an unannotated memory/synchronisation opcode)"""
        for u in self.res.unknowns:
            a = u.instr.annotation
            if a is not None and (a.line, a.col) == (e.span.line, e.span.col):
                return True
            if a is None and u.instr.parts[0] in _MEMORY_OPS:
                return True
        return False

    def _ok_text(self, e: SpecEvent) -> str:
        return "operands equal the IR's for every instance that runs"

    def _bad_text(self, e: SpecEvent) -> str:
        return {"ld": "the load's address differs from the IR's",
                "st": "the store's address differs from the IR's"}.get(
            e.kind, "an operand differs from the IR's")

    def operands(self, e: SpecEvent, ev: Event, hyps: list[Term]
                 ) -> tuple[Term, dict[str, Term]]:
        """The claim 'the PTX operands equal the IR's' where `hyps` hold, and the terms a
        counterexample shows."""
        parts: list[Term] = []
        shown: dict[str, Term] = {}

        def same(label: str, ptx: Term, want: Term, signed: bool = False,
                 modulo: int | None = None) -> None:
            got = T.sint(self.p(ptx)) if signed else T.uint(self.p(ptx))
            target = T.ifmod(want, T.const_int(modulo)) if modulo else want
            parts.append(T.eq(got, target))
            shown[f"PTX {label}"] = got
            shown[f"IR {label}"] = target

        k = e.kind
        if k in ("ld", "st") and e.ops["space"] == "global":
            # modulo 2^64: the address register is 64 bits (docs/codegen.md)
            base = T.leaf(f"gbase:p_{e.ops['tensor']}", 64)
            off: Term = e.ops["addr"]  # type: ignore[assignment]
            got = self.p(ev.ops["addr"])  # type: ignore[arg-type]
            rest = got.args[1 - got.args.index(base)] if got.op == "add" and base in \
                got.args else None
            lifted = self.integer_view(rest, hyps) if rest is not None else None
            if lifted is not None:
                # got = base + rest with rest = lifted (mod 2^64): compare the offsets as
                # integers modulo 2^64 (lift.py says why this is the same question)
                parts.append(T.eq(T.ifmod(T.isub(lifted, off), T.const_int(2**64)),
                                  T.const_int(0)))
            else:
                parts.append(T.eq(got, T.add(base, T.tobv(off, 64))))
            shown["PTX address"] = T.uint(got)
            shown["IR address"] = T.iadd(T.uint(base), off)
        elif k in ("ld", "st"):
            same("address", ev.ops["addr"], e.ops["addr"])  # type: ignore[arg-type]
        elif k == "mbar.init":
            elem = e.ops.get("elem")
            if isinstance(elem, Term):
                bar = self.k.barrier(e.node.barrier.name)  # type: ignore[attr-defined]
                got = T.uint(self.p(ev.ops["addr"]))  # type: ignore[arg-type]
                alts = []
                for i in range(bar.instances):
                    want = T.substitute([e.ops["addr"]], {id(elem): T.bv(i, 32)})[0]
                    alts.append(T.eq(got, want))  # type: ignore[arg-type]
                parts.append(T.or_(*alts))
                shown["PTX address"] = got
            else:
                same("address", ev.ops["addr"], e.ops["addr"])  # type: ignore[arg-type]
            same("count", ev.ops["count"], T.const_int(e.ops["count"]))  # type: ignore
        elif k in ("mbar.arrive", "mbar.expect_tx"):
            same("address", ev.ops["addr"], e.ops["addr"])  # type: ignore[arg-type]
            if "tx" in e.ops and "tx" in ev.ops:
                same("tx bytes", ev.ops["tx"], e.ops["tx"])  # type: ignore[arg-type]
        elif k == "mbar.wait":
            same("address", ev.ops["addr"], e.ops["addr"])  # type: ignore[arg-type]
            same("parity", ev.ops["parity"], e.ops["parity"])  # type: ignore[arg-type]
        elif k in ("tma.load", "tma.store"):
            same("shared address", ev.ops["smem"], e.ops["smem"])  # type: ignore[arg-type]
            tm = T.leaf(f"tmap:{e.ops['tmap']}", 64)
            parts.append(T.eq(self.p(ev.ops["tmap"]), tm))  # type: ignore[arg-type]
            shown["PTX tensor map"] = T.uint(self.p(ev.ops["tmap"]))  # type: ignore
            shown[f"IR tensor map (generic address of {e.ops['tmap']})"] = T.uint(tm)
            pc, sc = ev.ops["coords"], e.ops["coords"]
            for i, (a, b) in enumerate(zip(pc, sc, strict=True)):  # type: ignore[arg-type]
                same(f"coordinate {i} (innermost first)", a, b, signed=True)
            if k == "tma.load":
                same("mbarrier", ev.ops["bar"], e.ops["bar"])  # type: ignore[arg-type]
        elif k == "converge":
            same("lane mask", ev.ops["mask"], e.ops["mask"])  # type: ignore[arg-type]
        elif k in ("bar.sync", "bar.arrive"):
            # `sync` is bar.sync 0 over the block; a named barrier names its id and count.
            want_id = e.ops.get("id", 0)
            same("barrier id", ev.ops["id"], T.const_int(want_id))  # type: ignore[arg-type]
            want = e.ops.get("count")
            if "count" in ev.ops or want is not None:
                if "count" not in ev.ops:
                    parts.append(T.FALSE)  # bar.sync without a count: the whole block
                    shown["IR thread count"] = T.const_int(want)
                else:
                    same("thread count", ev.ops["count"],  # type: ignore[arg-type]
                         T.const_int(self.k.block if want is None else want))
        return T.and_(*parts), shown

    def integer_view(self, t: Term, hyps: list[Term]) -> Term | None:
        """lift.py's integer reading of `t` under the question's hypotheses, or None (the
        caller keeps bit-vectors). Where intervals cannot show it exact, its no-overflow
        conditions are proved first, as their own question in integer arithmetic (nia.py)."""
        bounds = narrow.bounds_from(hyps)
        lifted = lift.modular(t, bounds)
        if lifted is not None:
            return lifted
        lifted, fits = lift.modular_deferred(t, bounds)
        left = self.budget.left_ms()
        if lifted is None or left <= 0:
            return None
        self.budget.queries += 1
        timeout = min(self.budget.per_query_ms, NIA_MS, left)
        return lifted if nia.prove(hyps, fits, bounds, timeout) else None

    # -- ld.global.nc -----------------------------------------------------------------------

    def noncoherent(self) -> None:
        t0 = time.monotonic()
        bad = []
        for m in self.matches:
            for ev in m.ptx:
                if ev.kind == "ld" and ev.ops.get("nc"):
                    tensor = m.spec.ops["tensor"]
                    if tensor in self.spec.written:
                        bad.append((ev, m.spec))
        if not bad:
            self.ob("ld.global.nc reads only tensors the kernel never writes", Verdict.PROVED,
                    NONCOHERENT, f"written tensors: {sorted(self.spec.written) or 'none'}",
                    self.k.span, seconds=time.monotonic() - t0, method="structural")
            return
        for ev, e in bad:
            cex = self.witness(ev, **{"tensor written by": self._writer(str(e.ops["tensor"]))})
            self.ob(f"PTX line {ev.instr.line}: {ev.instr.text}", Verdict.REFUTED, NONCOHERENT,
                    f"non-coherent load from '{e.ops['tensor']}', which the kernel writes: the "
                    "read-only cache may return stale data", e.span, cex,
                    seconds=time.monotonic() - t0, method="structural + z3")

    def _writer(self, tensor: str) -> str:
        for e in self.spec.events:
            if e.kind in ("st", "tma.store") and (e.ops.get("tensor") == tensor or (
                    e.kind == "tma.store" and self.k.tensormap(str(e.ops["tmap"])[3:]).tensor
                    == tensor)):
                return f"{e.what} at {e.span.line}:{e.span.col}"
        return "?"

    # -- order ------------------------------------------------------------------------------

    def order(self) -> None:
        t0 = time.monotonic()
        cfg = self.cfg
        # reachability without back edges; a loop's latch reaches its exit targets
        succ: dict[int, set[int]] = {b.id: set() for b in cfg.blocks}
        for b in cfg.blocks:
            for t, _, _ in b.succs:
                if (b.id, t) not in cfg.back_edges:
                    succ[b.id].add(t)
        for lp in cfg.loops:
            targets = {t for _, t in lp.exits}
            for latch in lp.latches:
                succ[latch] |= targets
        reach: dict[int, set[int]] = {}
        for bid in reversed(cfg.rpo):
            r = {bid}
            for t in succ[bid]:
                r |= reach.get(t, {t})
            reach[bid] = r
        pos = {ins.index: i for b in cfg.blocks for i, ins in enumerate(b.instrs)}
        evs = [(m.spec, ev) for m in self.matches for ev in m.ptx]

        def before(a: Event, b: Event) -> bool:
            """Can `a` run and then `b` in one pass (no back edge)?"""
            if a.block == b.block:
                return pos[a.instr.index] < pos[b.instr.index]
            return b.block in reach.get(a.block, set())

        violations = []
        for e1, p1 in evs:
            for e2, p2 in evs:
                if e1.order < e2.order and p1 is not p2 and before(p2, p1) \
                        and not before(p1, p2):
                    violations.append((e1, p1, e2, p2))
        for e1, p1, e2, p2 in violations:
            out = self.prover.satisfiable(self.spec.assumptions + [e1.cond, e2.cond])
            if out.verdict == PROVED:
                continue
            if not (self.exec_ok.get(id(e1)) and self.exec_ok.get(id(e2))):
                out = Outcome(UNKNOWN, "their execution conditions did not verify")
            cex = self.describe(out.values) if out.verdict == REFUTED else {}
            cex.update({"first in the IR": f"{e1.what} at {e1.span.line}:{e1.span.col}",
                        "first in the PTX": p2.instr.text})
            verdict = Verdict.REFUTED if out.verdict == REFUTED else Verdict.UNKNOWN
            self.ob(f"order of {e1.what} ({e1.span.line}:{e1.span.col}) and {e2.what} "
                    f"({e2.span.line}:{e2.span.col})", verdict, ORDER,
                    f"PTX line {p2.instr.line} comes before PTX line {p1.instr.line} on the "
                    "control flow, the IR has them the other way round for one thread",
                    e1.span, cex, seconds=time.monotonic() - t0)
            return
        self.ob("order of memory and synchronisation operations", Verdict.PROVED, ORDER,
                f"for {len(evs)} instructions: whenever two run for one thread in one iteration, "
                "the PTX control flow has them in the IR's program order", self.k.span,
                seconds=time.monotonic() - t0, method="CFG reachability + z3")

    # -- waits ------------------------------------------------------------------------------

    def waits(self) -> None:
        for m in self.matches:
            for ev in m.ptx:
                if ev.kind != "mbar.wait":
                    continue
                t0 = time.monotonic()
                name = f"wait at {m.spec.span.line}:{m.spec.span.col} (PTX line " \
                       f"{ev.instr.line}) spins until the phase completes"
                spin = [lid for lid in ev.loops if lid not in self.counted(ev)]
                inner = ev.loops[-1] if ev.loops else None
                if inner is None or inner not in spin:
                    self.ob(name, Verdict.REFUTED, SYNC, "the try_wait is not inside a loop "
                            "of its own: the code goes on whether or not the phase completed",
                            m.spec.span, self.witness(ev), seconds=time.monotonic() - t0)
                    continue
                info = self.res.loops[inner]
                lp = self.cfg.loops[inner]
                others = [x for x in self.res.events if inner in x.loops and x is not ev]
                problems = []
                if others:
                    problems.append(f"the spin loop also runs '{others[0].instr.text}'")
                for b, _ in info.exit_conds:
                    if not self.cfg.dominates(ev.block, b):
                        problems.append(f"the loop can exit from block {b} without the wait")
                if problems:
                    self.ob(name, Verdict.REFUTED, SYNC, "; ".join(problems), m.spec.span,
                            self.witness(ev), seconds=time.monotonic() - t0)
                    continue
                assert ev.result is not None
                outs = []
                for _, raw in info.exit_conds:
                    pc = self.p(raw)
                    out = self.prover.prove([pc], ev.result)
                    if out.verdict == UNKNOWN and all(
                            x is ev.result or T.leaf_info(str(x.val)).kind == "int"
                            for x in T.leaves([pc])):
                        # the only free value is the try_wait's answer, and the hardware
                        # may answer false: the loop can exit before the phase completed
                        w = self.prover.exists([pc, T.not_(ev.result)])
                        if w.verdict == REFUTED:
                            out = Outcome(REFUTED, "when the try_wait answers false", w.values)
                    outs.append(out)
                bad = next((o for o in outs if o.verdict != PROVED), None)
                if bad is None:
                    self.ob(name, Verdict.PROVED, SYNC, f"the only way out of spin loop "
                            f"L{lp.id} is the try_wait answering true", m.spec.span,
                            seconds=time.monotonic() - t0)
                else:
                    self.report(name, bad, SYNC, m.spec.span, "", "the spin loop can exit "
                                "while the try_wait answered false", t0)

    # -- shared memory ----------------------------------------------------------------------

    def smem(self) -> None:
        t0 = time.monotonic()
        tsmem = T.leaf("tsmem", 32)
        R = self.spec.R
        roots: list[Term] = []
        for ev in self.res.events:
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
        results: list[tuple[str, Outcome]] = []
        for b in bases:
            at = T.substitute([b], {id(tsmem): T.bv(1024, 32)})[0]
            c = T.const_int(int(at.val) - 1024)  # type: ignore[arg-type]
            results.append((f"the shared base term {T.show(b, 5)} is not R + constant",
                            self.prover.prove(
                [], T.eq(T.uint(b), T.iadd(R, c)),
                {"PTX base": T.uint(b), "R + constant": T.iadd(R, c)})))
        m = None
        for c in self.mod.header_comments:
            m = _SMEM_DECL.search(c) or m
        if m is None:
            results.append(("the declared dynamic shared memory covers the buffers", Outcome(
                UNKNOWN, "the module does not state its dynamic shared memory size")))
        else:
            declared = int(m.group(1))
            need = T.iadd(T.isub(R, T.uint(tsmem)), T.const_int(self.spec.smem_end))
            results.append(("buffers and mbarriers exceed the declared dynamic shared memory",
                            self.prover.prove(
                [], T.ile(need, T.const_int(declared)),
                {"bytes needed from tsmem": need, "declared": T.const_int(declared)})))
        self._combine("shared-memory base and extent", results, SMEM, self.k.span, t0,
                      f"{len(bases)} base term(s) equal R + constant for every 16-byte aligned "
                      f"tsmem (R = smallest address >= tsmem congruent to 1024 modulo "
                      f"{self.spec.align}); buffers and barriers end {self.spec.smem_end} bytes "
                      "after R, inside the declared dynamic shared memory")
