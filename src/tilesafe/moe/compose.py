"""Inspector then executor: each of the executor's `requires` clauses proved of the
inspector's output, for every routing and every size.

Why: an executor (corpus/moe) is proved under its clauses on the routing; the launch checks
them on the data. When the data is `tilesafe.moe.align`'s output, the clauses about it are
facts about the inspector, provable once: then the composition needs no trust and no check
of those clauses (only the router's ids, an input that arrives at run time, are checked at
launch). This module binds the executor's index tensors to the inspector's arrays
(`Binding`), translates each clause into z3 over the theory of tilesafe/moe/align_theory.py
(with the lemmas of align_lemmas.py), and answers per clause:

* "input": the clause reads no inspector output (the router's ids): assumed here, checked
  at launch;
* "proved": z3 shows it for every routing the input clauses allow, every size;
* "refuted": a concrete routing on which align's output violates it (found by search on
  small sizes, evaluated by the launch check's own code, semantics/access/requires_eval.py);
* "unknown": neither (also a clause that reads a tensor the inspector does not produce);
  it stays checked at launch.

The meaning of a clause is the launch check's (docs/language.md section 13): a universal
clause holds wherever its direct reads are inside their tensors; a read through a read is
evaluated with short-circuit && / || and must be inside its tensor where it decides.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import z3

from tilesafe.frontend import ir
from tilesafe.moe import ground
from tilesafe.moe.align_lemmas import LemmaResult, check, prove_lemmas
from tilesafe.moe.compose_bind import (  # noqa: F401 - BindingError re-exported
    Binding,
    BindingError,
    Theory,
    bind,
    theory_facts,
)
from tilesafe.moe.compose_terms import (
    Foreign,
    assumption,
    every_id_an_expert,
    obligation,
    validity_from_inputs,
)


@dataclass(frozen=True)
class ClauseVerdict:
    index: int
    text: str
    line: int
    status: str  # input | proved | refuted | unknown
    detail: str = ""
    routing: list[int] | None = None  # refuted: the router ids (flattened) and sizes
    sizes: dict[str, int] = field(default_factory=dict)
    by_validity: bool = False  # an input implied by every router id being an expert


@dataclass(frozen=True)
class Composition:
    kernel: str
    binding: Binding
    lemmas: tuple[LemmaResult, ...]
    clauses: tuple[ClauseVerdict, ...]

    @property
    def proved(self) -> bool:
        """Every clause about the inspector's output proved (inputs are checked at launch)."""
        return all(c.status in ("input", "proved") for c in self.clauses)

    @property
    def unchecked(self) -> frozenset[int]:
        """The clauses a launch on this inspector's output need not check."""
        return frozenset(c.index for c in self.clauses if c.status == "proved")

    @property
    def unchecked_when_valid(self) -> frozenset[int]:
        """... and those too when the inspector found every router id an expert
        (`Routing.invalid == 0`): the input clauses that this implies."""
        return self.unchecked | frozenset(c.index for c in self.clauses if c.by_validity)


def compose(kernel: ir.Kernel, binding: Binding, search: bool = True) -> Composition:
    """Every clause of `kernel` judged on the inspector's output (see the module docstring).
    Raises BindingError when the executor cannot take the arrays as bound."""
    from tilesafe.semantics.access import requires_form
    from tilesafe.semantics.temporal.parametric import fresh_z3_context

    forms = requires_form.encode(kernel)
    with fresh_z3_context():
        theory = bind(kernel, binding)
        lemmas = tuple(prove_lemmas(theory.d))
        base = theory_facts(theory)
        if check(theory.facts + theory.d.base(), z3.BoolVal(False)) != "sat":
            raise BindingError(
                f"no launch of '{kernel.name}' takes the inspector's arrays as bound (its "
                f"`where` and the shapes of the bound tensors contradict the {binding.cut} "
                f"cut of a routing with blocks of {binding.block})", kernel.span)
        kinds, verdicts = _classify(theory, forms)
        inputs = [f for i, f in enumerate(forms) if kinds[i] == "input"]
        assumed = [a for f in inputs for a in [assumption(theory, f)] if a is not None]
        assumed += validity_from_inputs(theory, inputs)
        for i, f in enumerate(forms):
            if kinds[i] == "input" and _implied_by_validity(theory, f, f"v{i}"):
                verdicts[i] = dataclasses.replace(
                    verdicts[i], by_validity=True, detail="checked at launch, or implied "
                    "when align finds every router id an expert (Routing.invalid == 0)")
        broken = [r.name for r in lemmas if not r.proved]
        for i, f in enumerate(forms):
            if kinds[i] != "obligation":
                continue
            if broken:
                verdicts[i] = _verdict(i, f, "unknown", f"lemmas not proved: {broken}")
                continue
            facts, goal, _ = obligation(theory, f, f"c{i}")
            # the theory's facts are definitions and their theorems (conservative, so
            # consistent); the sizes were found satisfiable above: no vacuity question
            answer = _entails(base + assumed + facts, goal)
            verdicts[i] = (_verdict(i, f, "proved") if answer == "unsat" else
                           _verdict(i, f, "unknown", f"z3 answered {answer}"))
    if search:
        from tilesafe.moe.compose_search import refute

        for i, v in enumerate(verdicts):
            if v is not None and v.status == "unknown":
                found = refute(kernel, binding, forms, i, kinds)
                if found is not None:
                    verdicts[i] = found
    return Composition(kernel.name, binding, lemmas, tuple(v for v in verdicts if v))


def _implied_by_validity(theory: Theory, clause: Mapping[str, Any], tag: str) -> bool:
    """Does "every pair's id is an expert" imply this clause on the router's ids?"""
    if not all(n in theory.tensors and theory.tensors[n].func is theory.d.ids
               for n in _tensors_read(clause)):
        return False
    valid = every_id_an_expert(theory, f"{tag}_pair")
    try:
        facts, goal, _ = obligation(theory, clause, tag)
    except Foreign:
        return False
    return _entails(theory.facts + theory.d.base() + [valid] + facts, goal) == "unsat"


def _entails(given: list[z3.BoolRef], goal: z3.BoolRef) -> str:
    """"unsat" when `given` implies `goal`. First without quantifiers: the ground facts
    and the instances of the quantified ones at the query's terms (moe/ground.py), which
    z3 decides; only if that does not settle it, the quantified facts themselves."""
    inst = ground.instances(given, goal)
    plain = [f for f in given if not z3.is_quantifier(f)] + inst
    if check(plain, goal, vacuity=False) == "unsat":
        return "unsat"
    return check(given, goal, vacuity=False)


def _tensors_read(clause: Mapping[str, Any]) -> list[str]:
    from tilesafe.semantics.access import requires_form

    return requires_form.tensors((clause,))


def _classify(theory: Theory, forms: tuple[dict[str, Any], ...]
              ) -> tuple[list[str], list[ClauseVerdict | None]]:
    """"input" (reads only the router's ids or tensors not bound at all), "obligation"
    (reads the inspector's sorted ids or block table), or unknown at once (reads such an
    output together with a tensor the inspector does not produce)."""
    outputs = {n for n, b in theory.tensors.items() if b.func is not theory.d.ids}
    kinds: list[str] = []
    verdicts: list[ClauseVerdict | None] = []
    for i, f in enumerate(forms):
        read = set(_tensors_read(f))
        foreign = read - set(theory.tensors)
        if not read & outputs:
            kinds.append("input")
            verdicts.append(_verdict(i, f, "input", "checked at launch"))
        elif foreign:
            kinds.append("foreign")
            verdicts.append(_verdict(i, f, "unknown", f"reads {', '.join(sorted(foreign))}, "
                                     f"which the inspector does not produce"))
        else:
            kinds.append("obligation")
            verdicts.append(None)
    return kinds, verdicts


def _verdict(i: int, f: Mapping[str, Any], status: str, detail: str = "") -> ClauseVerdict:
    return ClauseVerdict(i, f["text"], f["line"], status, detail)
