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
from tilesafe.moe.align_lemmas import FOR_OBLIGATIONS, LemmaResult, check, prove_lemmas, quantified
from tilesafe.moe.align_theory import Defs
from tilesafe.moe.compose_search import SizeLeaves
from tilesafe.semantics.expr.z3_terms import floor_div, floor_mod

# the inspector's arrays an executor reads; "total" is a one-element tensor holding
# Routing.total (vLLM's num_tokens_post_padded)
FIELDS = ("topk_ids", "sorted_ids", "expert_ids", "total")
CUTS = ("used", "allocated")  # Routing.used() (blocks in use) or the whole allocation


class BindingError(Exception):
    """The executor cannot take the inspector's arrays as bound (TS922)."""

    def __init__(self, message: str, span: Any = None) -> None:
        super().__init__(message)
        self.span = span


@dataclass(frozen=True)
class Binding:
    """Which executor tensor holds which inspector array, the executor's size that is the
    number of experts, the block size B, and which cut of the arrays the launch passes."""

    tensors: Mapping[str, str]  # executor tensor -> one of FIELDS
    experts: str = "E"
    block: int = 64
    cut: str = "used"

    @staticmethod
    def default(kernel: ir.Kernel, block: int = 64, cut: str = "used") -> Binding:
        """The executor's tensors named as corpus/moe and vLLM name them (those it has):
        topk / topk_ids, sids / sorted_ids / sorted_token_ids, be / expert_ids, ntp /
        num_tokens_post_padded."""
        have = [t.name for t in kernel.params]
        tensors = {n: f for f, names in ALIASES.items() for n in names if n in have}
        return Binding(tensors, block=block, cut=cut)


ALIASES = {"topk_ids": ("topk", "topk_ids"),
           "sorted_ids": ("sids", "sorted_ids", "sorted_token_ids"),
           "expert_ids": ("be", "expert_ids"),
           "total": ("ntp", "num_tokens_post_padded")}


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


# ---- binding the executor to the theory ------------------------------------------------------


@dataclass(frozen=True)
class _Bound:
    """An executor tensor bound to an inspector array: element [i0, i1, ..] is
    func(i0 * strides[0] + i1 * strides[1] + ..), inside `extents`."""

    func: z3.FuncDeclRef
    extents: tuple[z3.ArithRef, ...]
    strides: tuple[int, ...]


@dataclass
class _Theory:
    """The theory bound to one executor: functions and lengths of its bound tensors."""

    d: Defs
    sizes: dict[str, z3.ArithRef]
    tensors: dict[str, _Bound]
    facts: list[z3.BoolRef]


def _bind(kernel: ir.Kernel, binding: Binding) -> _Theory:
    if binding.cut not in CUTS:
        raise BindingError(f"cut must be one of {', '.join(CUTS)}, not {binding.cut!r}")
    if binding.block < 1:
        raise BindingError(f"the block must be positive, not {binding.block}")
    if not binding.tensors:
        raise BindingError(f"kernel '{kernel.name}' reads none of the inspector's arrays "
                           f"(bind them with --bind)", kernel.span)
    if binding.experts not in kernel.sizes:
        raise BindingError(f"kernel '{kernel.name}' has no size `{binding.experts}` (the "
                           f"number of experts; name it with --experts)", kernel.span)
    d = Defs(binding.block)
    sizes = {n: z3.Int(f"size_{n}") for n in kernel.sizes}
    terms = SizeLeaves(sizes)
    facts: list[z3.BoolRef] = [terms.fold(w) for w in kernel.where]
    facts.append(sizes[binding.experts] == d.experts)
    rows, blocks = z3.Int("rows"), z3.Int("blocks")
    held = z3.Function("num_tokens_post_padded", z3.IntSort(), z3.IntSort())
    facts.append(held(0) == d.total)
    funcs = {"topk_ids": (d.ids, d.tk), "sorted_ids": (d.sids, rows),
             "expert_ids": (d.be, blocks), "total": (held, z3.IntVal(1))}
    tensors = {}
    for name, what in binding.tensors.items():
        if what not in FIELDS:
            raise BindingError(f"`{name}` bound to {what!r}: the inspector's arrays are "
                               f"{', '.join(FIELDS)}")
        t = next((p for p in kernel.params if p.name == name), None)
        if t is None:
            raise BindingError(f"kernel '{kernel.name}' has no tensor `{name}`", kernel.span)
        func, length = funcs[what]
        tensors[name] = _shape(t, what, func, length, terms, facts)
    b = binding.block
    facts += [rows == blocks * b, d.tk >= 0, d.experts >= 1]
    if binding.cut == "used":
        facts.append(rows == d.total)
    else:  # allocated_blocks: the worst case, TK + E (B - 1) rows in whole blocks
        worst = d.tk + d.experts * (b - 1)
        facts += [blocks * b >= worst, (blocks - 1) * b < worst]
    return _Theory(d, sizes, tensors, facts)


def _shape(t: ir.GlobalTensor, what: str, func: z3.FuncDeclRef, length: z3.ArithRef,
           terms: SizeLeaves, facts: list[z3.BoolRef]) -> _Bound:
    """How an executor tensor's elements map onto the inspector's array: a vector one to
    one; the router's ids also as [T, K] (vLLM's topk_ids), pair t K + k at [t, k], for a
    constant K."""
    if t.dtype.value != "i32" or t.role is not ir.ParamRole.IN:
        raise BindingError(f"`{t.name}` must be an `in` i32 tensor to hold {what}", t.span)
    if len(t.shape) == 1:
        facts.append(terms.fold(t.shape[0]) == length)
        return _Bound(func, (terms.fold(t.shape[0]),), (1,))
    k = t.shape[1] if len(t.shape) == 2 else None
    if what != "topk_ids" or not isinstance(k, ir.IntConst) or k.value < 1:
        raise BindingError(f"`{t.name}` must be a vector to hold {what} (the router's ids "
                           f"may also be [T, K] with a constant K)", t.span)
    rows = terms.fold(t.shape[0])
    facts.append(rows * k.value == length)
    return _Bound(func, (rows, z3.IntVal(k.value)), (k.value, 1))


def _theory_facts(t: _Theory) -> list[z3.BoolRef]:
    p = z3.Int("q_sids_p")
    sids_def = z3.ForAll([p], t.d.sids_def(p), patterns=[t.d.sids(p)])
    return t.d.base() + [quantified(t.d, n) for n in FOR_OBLIGATIONS] + [sids_def] + t.facts


# ---- clause terms -------------------------------------------------------------------------------


class _Foreign(Exception):
    """A clause reads a tensor the inspector does not produce."""


@dataclass
class _Term:
    value: Any
    ok: Any  # every read through a read that decides is inside its tensor


class _Encoder:
    """A clause's form (semantics/access/requires_form.py) as z3 terms with the launch
    check's meaning; `domain` collects the bounds of the direct reads."""

    def __init__(self, theory: _Theory, env: dict[str, z3.ArithRef]) -> None:
        self.t, self.env = theory, env
        self.domain: list[z3.BoolRef] = []
        self.direct: list[z3.ExprRef] = []
        self.reads: set[str] = set()

    def term(self, f: list[Any]) -> _Term:
        tag = f[0]
        if tag == "int":
            return _Term(z3.IntVal(f[1]), z3.BoolVal(True))
        if tag == "size":
            return _Term(self.t.sizes[f[1]], z3.BoolVal(True))
        if tag == "var":
            return _Term(self.env[f[1]], z3.BoolVal(True))
        if tag == "load":
            return self._load(f[1], f[2])
        if tag == "un":
            a = self.term(f[2])
            return _Term(z3.Not(a.value) if f[1] == "!" else -a.value, a.ok)
        if tag == "call":
            args = [self.term(a) for a in f[2]]
            ok = z3.And(*[a.ok for a in args])
            v = [a.value for a in args]
            if f[1] == "abs":
                return _Term(z3.If(v[0] >= 0, v[0], -v[0]), ok)
            pick = (lambda x, y: z3.If(x <= y, x, y)) if f[1] == "min" else (
                lambda x, y: z3.If(x >= y, x, y))
            out = v[0]
            for x in v[1:]:
                out = pick(out, x)
            return _Term(out, ok)
        return self._binary(f[1], self.term(f[2]), self.term(f[3]))

    def _load(self, tensor: str, index: list[Any]) -> _Term:
        if tensor not in self.t.tensors:
            raise _Foreign(tensor)
        self.reads.add(tensor)
        bound = self.t.tensors[tensor]
        if len(index) != len(bound.extents):
            raise _Foreign(tensor)
        parts = [self.term(i) for i in index]
        inside = z3.And(*[z3.And(0 <= p.value, p.value < x)
                          for p, x in zip(parts, bound.extents, strict=True)])
        flat = sum((p.value * k for p, k in zip(parts, bound.strides, strict=True)),
                   z3.IntVal(0))
        ok = z3.And(*[p.ok for p in parts])
        if all(_reads_nothing(i) for i in index):
            self.domain.append(inside)
            self.direct.append(bound.func(flat))
            return _Term(bound.func(flat), ok)
        return _Term(bound.func(flat), z3.And(ok, inside))

    @staticmethod
    def _binary(op: str, a: _Term, b: _Term) -> _Term:
        if op == "&&":
            return _Term(z3.And(a.value, b.value), z3.And(a.ok, z3.Or(z3.Not(a.value), b.ok)))
        if op == "||":
            return _Term(z3.Or(a.value, b.value), z3.And(a.ok, z3.Or(a.value, b.ok)))
        ok = z3.And(a.ok, b.ok)
        x, y = a.value, b.value
        ops = {"+": lambda: x + y, "-": lambda: x - y, "*": lambda: x * y,
               "/": lambda: floor_div(x, y), "%": lambda: floor_mod(x, y),
               "==": lambda: x == y, "!=": lambda: x != y, "<": lambda: x < y,
               "<=": lambda: x <= y, ">": lambda: x > y, ">=": lambda: x >= y}
        return _Term(ops[op](), ok)


def _reads_nothing(f: Any) -> bool:
    """The form reads no tensor (a *direct* read's index)."""
    if not isinstance(f, list):
        return True
    if f and f[0] == "load":
        return False
    return all(_reads_nothing(x) for x in f)


# ---- obligations ------------------------------------------------------------------------------


def _goal(theory: _Theory, clause: Mapping[str, Any], tag: str
          ) -> tuple[list[z3.BoolRef], z3.BoolRef, set[str]]:
    """(facts, goal, tensors read): the clause at fresh values of its variables -- the goal
    follows from the facts for all of them exactly when the clause holds."""
    env = {v: z3.Int(f"{tag}_{v}") for v in clause["vars"]}
    if clause["kind"] == "all":
        enc = _Encoder(theory, env)
        c = enc.term(clause["cond"])
        return enc.domain, z3.And(c.ok, c.value), enc.reads
    var = clause["vars"][0]
    p, q = env[var], z3.Int(f"{tag}_{var}_other")
    bounds = _Encoder(theory, {})
    lo, hi = bounds.term(clause["lo"]).value, bounds.term(clause["hi"]).value
    ep, eq = _Encoder(theory, {var: p}), _Encoder(theory, {var: q})
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
    ew = _Encoder(theory, {var: w})
    vw = ew.term(clause["value"])
    taken = z3.And(lo <= w, w < hi, *ew.domain, vw.ok, vw.value == v)
    goal = z3.And(z3.Implies(z3.And(*dom_p, *dom_q, p != q), distinct),
                  z3.Implies(counts(v), taken))
    return [], goal, ep.reads


def _assumption(theory: _Theory, clause: Mapping[str, Any]) -> z3.BoolRef | None:
    """An input clause (on the router's ids) as a quantified fact; None for the forms not
    assumed (predicates: leaving a fact out only weakens what is assumed)."""
    if clause["kind"] != "all":
        return None
    env = {v: z3.Int(f"a{clause['line']}_{v}") for v in clause["vars"]}
    enc = _Encoder(theory, env)
    try:
        c = enc.term(clause["cond"])
    except _Foreign:  # about tensors the inspector does not touch: nothing to assume
        return None
    body = z3.Implies(z3.And(*enc.domain), z3.And(c.ok, c.value))
    if not env:
        return body
    if not enc.direct:
        return None
    return z3.ForAll(list(env.values()), body, patterns=[z3.MultiPattern(*enc.direct)])


def _validity_from_inputs(theory: _Theory, inputs: list[Mapping[str, Any]]
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
        inst = _at_pair(theory, clause, i)
        if inst is not None:
            facts.append(inst)
    goal = z3.Implies(z3.And(0 <= i, i < d.tk), z3.And(0 <= d.ids(i), d.ids(i) < d.experts))
    if not facts or check(theory.facts + d.base() + facts, goal, vacuity=False) != "unsat":
        return []
    q = z3.Int("q_flat_pair")
    return [z3.ForAll([q], z3.Implies(z3.And(0 <= q, q < d.tk), z3.And(
        0 <= d.ids(q), d.ids(q) < d.experts)), patterns=[d.ids(q)])]


def _at_pair(theory: _Theory, clause: Mapping[str, Any], i: z3.ArithRef) -> z3.BoolRef | None:
    """The clause at the variables that make its first direct read of the ids read pair i."""
    if clause["kind"] != "all":
        return None
    load = _first_load(clause["cond"])
    if load is None or load[1] not in theory.tensors or any(
            x[0] != "var" for x in load[2]):
        return None
    bound = theory.tensors[load[1]]
    env: dict[str, Any] = {v: z3.Int(f"free_{v}") for v in clause["vars"]}
    rest = i
    for x, stride in zip(load[2], bound.strides, strict=True):
        env[x[1]] = rest / stride if stride > 1 else rest
        rest = rest % stride if stride > 1 else rest
    enc = _Encoder(theory, env)
    try:
        c = enc.term(clause["cond"])
    except _Foreign:
        return None
    return z3.Implies(z3.And(*enc.domain), z3.And(c.ok, c.value))


def _first_load(f: Any) -> list[Any] | None:
    if not isinstance(f, list) or not f:
        return None
    if f[0] == "load" and _reads_nothing(f[2]):
        return f
    for x in f:
        found = _first_load(x)
        if found is not None:
            return found
    return None


def compose(kernel: ir.Kernel, binding: Binding, search: bool = True) -> Composition:
    """Every clause of `kernel` judged on the inspector's output (see the module docstring).
    Raises BindingError when the executor cannot take the arrays as bound."""
    from tilesafe.semantics.access import requires_form
    from tilesafe.semantics.temporal.parametric import fresh_z3_context

    forms = requires_form.encode(kernel)
    with fresh_z3_context():
        theory = _bind(kernel, binding)
        lemmas = tuple(prove_lemmas(theory.d))
        base = _theory_facts(theory)
        if check(theory.facts + theory.d.base(), z3.BoolVal(False)) != "sat":
            raise BindingError(
                f"no launch of '{kernel.name}' takes the inspector's arrays as bound (its "
                f"`where` and the shapes of the bound tensors contradict the {binding.cut} "
                f"cut of a routing with blocks of {binding.block})", kernel.span)
        kinds, verdicts = _classify(theory, forms)
        inputs = [f for i, f in enumerate(forms) if kinds[i] == "input"]
        assumed = [a for f in inputs for a in [_assumption(theory, f)] if a is not None]
        assumed += _validity_from_inputs(theory, inputs)
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
            facts, goal, _ = _goal(theory, f, f"c{i}")
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


def _implied_by_validity(theory: _Theory, clause: Mapping[str, Any], tag: str) -> bool:
    """Does "every pair's id is an expert" imply this clause on the router's ids?"""
    if not all(n in theory.tensors and theory.tensors[n].func is theory.d.ids
               for n in _tensors_read(clause)):
        return False
    d = theory.d
    i = z3.Int(f"{tag}_pair")
    valid = z3.ForAll([i], z3.Implies(z3.And(0 <= i, i < d.tk),
                                      z3.And(0 <= d.ids(i), d.ids(i) < d.experts)),
                      patterns=[d.ids(i)])
    try:
        facts, goal, _ = _goal(theory, clause, tag)
    except _Foreign:
        return False
    return _entails(theory.facts + d.base() + [valid] + facts, goal) == "unsat"


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


def _classify(theory: _Theory, forms: tuple[dict[str, Any], ...]
              ) -> tuple[list[str], list[ClauseVerdict | None]]:
    """"input" (reads only the router's ids or tensors not bound at all), "obligation"
    (reads the inspector's sorted ids or block table), or unknown at once (reads such an
    output together with a tensor the inspector does not produce)."""
    from tilesafe.semantics.access import requires_form

    outputs = {n for n, b in theory.tensors.items() if b.func is not theory.d.ids}
    kinds: list[str] = []
    verdicts: list[ClauseVerdict | None] = []
    for i, f in enumerate(forms):
        read = set(requires_form.tensors((f,)))
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
