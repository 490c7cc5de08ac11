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

This module reads and models the PTX, then runs the obligation families in order, each in
its own module and passing on what the next needs: interface.py, matching.py (which
instructions implement which statement, which PTX loop is which `for`), loop_checks.py
(which loops are exact), instance_checks.py with operand_claims.py (which statements
execute as in the IR), order_checks.py, wait_checks.py, smem_checks.py; reporting.py
writes the obligations down and context.py holds what they all read.
"""

from __future__ import annotations

import z3

from tilesafe.checkers.obligation import Obligation, Verdict
from tilesafe.codegen.validate import cfg as cfgmod
from tilesafe.codegen.validate import terms as T
from tilesafe.codegen.validate.context import Context, Renaming
from tilesafe.codegen.validate.fragment_checks import FragmentValues
from tilesafe.codegen.validate.instance_checks import InstanceChecks
from tilesafe.codegen.validate.interface import check_interface
from tilesafe.codegen.validate.layout_terms import LayoutUnsupported
from tilesafe.codegen.validate.loop_checks import LoopChecks
from tilesafe.codegen.validate.matching import Matcher
from tilesafe.codegen.validate.order_checks import OrderChecks
from tilesafe.codegen.validate.ptx_parse import PtxSyntaxError, parse
from tilesafe.codegen.validate.reporting import (  # noqa: F401 - re-exported
    ADDRESS,
    CHECKER,
    CODES,
    EXECUTION,
    FRAGMENT,
    LOOP,
    MBARRIER,
    METHOD,
    NONCOHERENT,
    ORDER,
    SMEM,
    STRUCTURE,
    SYNC,
    TENSOR,
    TMA,
    Reporter,
    obligation,
)
from tilesafe.codegen.validate.smem_checks import check_smem
from tilesafe.codegen.validate.solve import Budget, Prover
from tilesafe.codegen.validate.spec import Spec, SpecUnsupported
from tilesafe.codegen.validate.symexec import Executor, Unsupported
from tilesafe.codegen.validate.terms import LeafInfo
from tilesafe.codegen.validate.wait_checks import check_waits
from tilesafe.frontend import ir


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
        return v.out + [obligation("validate the PTX", Verdict.UNKNOWN, STRUCTURE,
                                   f"internal error of the validator: "
                                   f"{type(err).__name__}: {err}", kernel.span)]


class _Validator:
    """The driver: read and model the PTX, then each obligation family in turn."""

    def __init__(self, kernel: ir.Kernel, ptx: str, budget: Budget) -> None:
        self.k = kernel
        self.text = ptx
        self.budget = budget
        self.out: list[Obligation] = []

    def _unmodelled(self, name: str, message: str, method: str = METHOD) -> list[Obligation]:
        o = obligation(name, Verdict.UNKNOWN, STRUCTURE, message, method=method)
        self.out.append(o)
        return [o]

    def run(self) -> list[Obligation]:
        try:
            mod = parse(self.text)
        except PtxSyntaxError as err:
            return self._unmodelled("read the PTX", f"the PTX could not be read: {err}",
                                    "PTX reader")
        if mod.entries != 1:
            return self._unmodelled("read the PTX", f"expected one .entry, found "
                                    f"{mod.entries}", "PTX reader")
        try:
            cfg = cfgmod.build(mod)
            spec = Spec(self.k)
            res = Executor(mod, cfg).run()
        except (cfgmod.CfgError, SpecUnsupported, LayoutUnsupported, Unsupported) as err:
            return self._unmodelled("model the kernel", f"not modelled: {err}")
        self._register_leaves(mod, spec)
        prover = Prover(self.budget, spec.contract_products())
        rename = Renaming()
        rep = Reporter(self.k, spec, prover, rename, self.out)
        cx = Context(self.k, mod, cfg, spec, res, prover, self.budget, rename, rep)
        check_interface(cx)
        for u in res.unknowns:
            rep.ob(f"PTX line {u.instr.line}: {u.instr.text}", Verdict.UNKNOWN, STRUCTURE,
                   f"instruction not understood: {u.reason}", span=rep.span(u.instr))
        matching = Matcher(cx).run()
        rename.bind(matching.loop_map, res, ((m.spec, m.ptx) for m in matching.matches))
        loop_exact = LoopChecks(cx, matching.for_to_loop).run()
        exec_ok = InstanceChecks(cx, matching.bad_nesting, loop_exact).run(matching.matches)
        FragmentValues(cx, matching.fragments, loop_exact).run(matching.matches)
        order = OrderChecks(cx, matching.matches, exec_ok)
        order.noncoherent()
        order.order()
        check_waits(cx, matching.matches)
        check_smem(cx)
        return self.out

    def _register_leaves(self, mod, spec: Spec) -> None:
        for p in mod.params:
            T.leaf(f"param:{p.name}", 64 if p.type in ("u64", "s64", "b64") else 32,
                   self._param_info(p.name, spec))
            T.leaf(f"param_addr:{p.name}", 64,
                   LeafInfo("int", False, 0, 2**64 - 1, note=f"param-space address of {p.name}"))

    def _param_info(self, name: str, spec: Spec) -> LeafInfo:
        if name.startswith("s_") and name[2:] in self.k.sizes:
            lo, hi = spec.size_ranges[name[2:]]
            return LeafInfo("int", True, lo, hi, note=f"size {name[2:]}")
        return LeafInfo("int", False, 0, 2**64 - 1, note=f"parameter {name}")
