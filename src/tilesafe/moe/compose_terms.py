"""An executor's `requires` clauses as z3 terms over the inspector's theory, with the
launch check's meaning (docs/language.md section 13): a universal clause holds wherever its
direct reads are inside their tensors; a read through a read is evaluated with short-circuit
&& / || and must be inside its tensor where it decides. `obligation` gives the goal of a
clause, `assumption` an input clause as a fact, `validity_from_inputs` the flat "every id
is an expert" fact (tilesafe/moe/compose.py uses them).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import z3

from tilesafe.moe.align_lemmas import check
from tilesafe.moe.compose_bind import Theory
from tilesafe.semantics.expr.z3_terms import floor_div, floor_mod

# ---- clause terms -------------------------------------------------------------------------------


class Foreign(Exception):
    """A clause reads a tensor the inspector does not produce."""


@dataclass
class Term:
    value: Any
    ok: Any  # every read through a read that decides is inside its tensor


class Encoder:
    """A clause's form (semantics/access/requires_form.py) as z3 terms with the launch
    check's meaning; `domain` collects the bounds of the direct reads."""

    def __init__(self, theory: Theory, env: dict[str, z3.ArithRef]) -> None:
        self.t, self.env = theory, env
        self.domain: list[z3.BoolRef] = []
        self.direct: list[z3.ExprRef] = []
        self.reads: set[str] = set()

    def term(self, f: list[Any]) -> Term:
        tag = f[0]
        if tag == "int":
            return Term(z3.IntVal(f[1]), z3.BoolVal(True))
        if tag == "size":
            return Term(self.t.sizes[f[1]], z3.BoolVal(True))
        if tag == "var":
            return Term(self.env[f[1]], z3.BoolVal(True))
        if tag == "load":
            return self._load(f[1], f[2])
        if tag == "un":
            a = self.term(f[2])
            return Term(z3.Not(a.value) if f[1] == "!" else -a.value, a.ok)
        if tag == "call":
            args = [self.term(a) for a in f[2]]
            ok = z3.And(*[a.ok for a in args])
            v = [a.value for a in args]
            if f[1] == "abs":
                return Term(z3.If(v[0] >= 0, v[0], -v[0]), ok)
            pick = (lambda x, y: z3.If(x <= y, x, y)) if f[1] == "min" else (
                lambda x, y: z3.If(x >= y, x, y))
            out = v[0]
            for x in v[1:]:
                out = pick(out, x)
            return Term(out, ok)
        return self._binary(f[1], self.term(f[2]), self.term(f[3]))

    def _load(self, tensor: str, index: list[Any]) -> Term:
        if tensor not in self.t.tensors:
            raise Foreign(tensor)
        self.reads.add(tensor)
        bound = self.t.tensors[tensor]
        if len(index) != len(bound.extents):
            raise Foreign(tensor)
        parts = [self.term(i) for i in index]
        inside = z3.And(*[z3.And(0 <= p.value, p.value < x)
                          for p, x in zip(parts, bound.extents, strict=True)])
        flat = sum((p.value * k for p, k in zip(parts, bound.strides, strict=True)),
                   z3.IntVal(0))
        ok = z3.And(*[p.ok for p in parts])
        if all(reads_nothing(i) for i in index):
            self.domain.append(inside)
            self.direct.append(bound.func(flat))
            return Term(bound.func(flat), ok)
        return Term(bound.func(flat), z3.And(ok, inside))

    @staticmethod
    def _binary(op: str, a: Term, b: Term) -> Term:
        if op == "&&":
            return Term(z3.And(a.value, b.value), z3.And(a.ok, z3.Or(z3.Not(a.value), b.ok)))
        if op == "||":
            return Term(z3.Or(a.value, b.value), z3.And(a.ok, z3.Or(a.value, b.ok)))
        ok = z3.And(a.ok, b.ok)
        x, y = a.value, b.value
        ops = {"+": lambda: x + y, "-": lambda: x - y, "*": lambda: x * y,
               "/": lambda: floor_div(x, y), "%": lambda: floor_mod(x, y),
               "==": lambda: x == y, "!=": lambda: x != y, "<": lambda: x < y,
               "<=": lambda: x <= y, ">": lambda: x > y, ">=": lambda: x >= y}
        return Term(ops[op](), ok)


def reads_nothing(f: Any) -> bool:
    """The form reads no tensor (a *direct* read's index)."""
    if not isinstance(f, list):
        return True
    if f and f[0] == "load":
        return False
    return all(reads_nothing(x) for x in f)


# ---- obligations ------------------------------------------------------------------------------


def obligation(theory: Theory, clause: Mapping[str, Any], tag: str
          ) -> tuple[list[z3.BoolRef], z3.BoolRef, set[str]]:
    """(facts, goal, tensors read): the clause at fresh values of its variables -- the goal
    follows from the facts for all of them exactly when the clause holds."""
    env = {v: z3.Int(f"{tag}_{v}") for v in clause["vars"]}
    if clause["kind"] == "all":
        enc = Encoder(theory, env)
        c = enc.term(clause["cond"])
        return enc.domain, z3.And(c.ok, c.value), enc.reads
    var = clause["vars"][0]
    p, q = env[var], z3.Int(f"{tag}_{var}_other")
    bounds = Encoder(theory, {})
    lo, hi = bounds.term(clause["lo"]).value, bounds.term(clause["hi"]).value
    ep, eq = Encoder(theory, {var: p}), Encoder(theory, {var: q})
    vp, vq = ep.term(clause["value"]), eq.term(clause["value"])
    dom_p = [lo <= p, p < hi] + ep.domain
    dom_q = [lo <= q, q < hi] + eq.domain
    if clause["kind"] == "sorted":
        goal = z3.And(vp.ok, vq.ok, vp.value <= vq.value)
        return dom_p + dom_q + [p < q], goal, ep.reads
    if clause.get("vlo") is None:
        vlo, vhi = z3.IntVal(0), hi - lo
    else:
        vlo, vhi = bounds.term(clause["vlo"]).value, bounds.term(clause["vhi"]).value

    def counts(v: Any) -> Any:
        return z3.And(vlo <= v, v < vhi)

    distinct = z3.And(vp.ok, vq.ok, z3.Implies(z3.And(counts(vp.value), counts(vq.value)),
                                               vp.value != vq.value))
    if clause["kind"] == "injective":
        return dom_p + dom_q + [p != q], distinct, ep.reads
    # permutation: distinct, and every value v of the range is E(w) for some position w;
    # the witness the theory knows is the pair's position, pos(v) (sids is pos's inverse)
    v = z3.Int(f"{tag}_value")
    w = theory.d.pos(v)
    ew = Encoder(theory, {var: w})
    vw = ew.term(clause["value"])
    taken = z3.And(lo <= w, w < hi, *ew.domain, vw.ok, vw.value == v)
    goal = z3.And(z3.Implies(z3.And(*dom_p, *dom_q, p != q), distinct),
                  z3.Implies(counts(v), taken))
    return [], goal, ep.reads


def assumption(theory: Theory, clause: Mapping[str, Any]) -> z3.BoolRef | None:
    """An input clause (on the router's ids) as a quantified fact; None for the forms not
    assumed (predicates: leaving a fact out only weakens what is assumed)."""
    if clause["kind"] != "all":
        return None
    env = {v: z3.Int(f"a{clause['line']}_{v}") for v in clause["vars"]}
    enc = Encoder(theory, env)
    try:
        c = enc.term(clause["cond"])
    except Foreign:  # about tensors the inspector does not touch: nothing to assume
        return None
    body = z3.Implies(z3.And(*enc.domain), z3.And(c.ok, c.value))
    if not env:
        return body
    if not enc.direct:
        return None
    return z3.ForAll(list(env.values()), body, patterns=[z3.MultiPattern(*enc.direct)])


def validity_from_inputs(theory: Theory, inputs: list[Mapping[str, Any]]
                          ) -> list[z3.BoolRef]:
    """"Every pair's id is an expert", as one fact over the flat pair index, when the input
    clauses imply it. Why: a clause over [T, K] ids (`topk_ids[t, k]`) is quantified over
    (t, k), and its patterns, ids(t K + k), never match the ids(i) of an obligation; the
    flat fact does. Shown by instantiating each clause whose direct read of the ids is at
    plain variables at (i / K, i % K) for a fresh pair i (linear arithmetic: z3 decides)."""
    d = theory.d
    i = z3.Int("flat_pair")
    facts: list[z3.BoolRef] = []
    for clause in inputs:
        inst = at_pair(theory, clause, i)
        if inst is not None:
            facts.append(inst)
    goal = z3.Implies(z3.And(0 <= i, i < d.tk), z3.And(0 <= d.ids(i), d.ids(i) < d.experts))
    if not facts or check(theory.facts + d.base() + facts, goal, vacuity=False) != "unsat":
        return []
    return [every_id_an_expert(theory, "q_flat_pair")]


def every_id_an_expert(theory: Theory, name: str) -> z3.BoolRef:
    """For every pair i, 0 <= id(i) < E, quantified with the pattern id(i)."""
    d = theory.d
    q = z3.Int(name)
    return z3.ForAll([q], z3.Implies(z3.And(0 <= q, q < d.tk), z3.And(
        0 <= d.ids(q), d.ids(q) < d.experts)), patterns=[d.ids(q)])


def at_pair(theory: Theory, clause: Mapping[str, Any], i: z3.ArithRef) -> z3.BoolRef | None:
    """The clause at the variables that make its first direct read of the ids read pair i."""
    if clause["kind"] != "all":
        return None
    load = first_load(clause["cond"])
    if load is None or load[1] not in theory.tensors or any(
            x[0] != "var" for x in load[2]):
        return None
    bound = theory.tensors[load[1]]
    env: dict[str, Any] = {v: z3.Int(f"free_{v}") for v in clause["vars"]}
    rest = i
    for x, stride in zip(load[2], bound.strides, strict=True):
        env[x[1]] = rest / stride if stride > 1 else rest
        rest = rest % stride if stride > 1 else rest
    enc = Encoder(theory, env)
    try:
        c = enc.term(clause["cond"])
    except Foreign:
        return None
    return z3.Implies(z3.And(*enc.domain), z3.And(c.ok, c.value))


def first_load(f: Any) -> list[Any] | None:
    if not isinstance(f, list) or not f:
        return None
    if f[0] == "load" and reads_nothing(f[2]):
        return f
    for x in f:
        found = first_load(x)
        if found is not None:
            return found
    return None
