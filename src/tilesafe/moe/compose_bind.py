"""Binding an MoE executor to the inspector's theory (tilesafe/moe/compose.py's first
step): which executor tensor holds which of `tilesafe.moe.align`'s arrays, the sizes that
ties them to the theory's TK, E, rows and blocks, and the facts every obligation starts from.

Why a module of its own: the binding decides what the proofs are about -- a wrong length
fact would prove clauses of arrays the launch never passes -- so it is kept apart and small.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import z3

from tilesafe.frontend import ir
from tilesafe.moe.align_lemmas import FOR_OBLIGATIONS, quantified
from tilesafe.moe.align_theory import Defs
from tilesafe.semantics.expr.z3_terms import SizeTerms

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


# ---- binding the executor to the theory ------------------------------------------------------


@dataclass(frozen=True)
class Bound:
    """An executor tensor bound to an inspector array: element [i0, i1, ..] is
    func(i0 * strides[0] + i1 * strides[1] + ..), inside `extents`."""

    func: z3.FuncDeclRef
    extents: tuple[z3.ArithRef, ...]
    strides: tuple[int, ...]


@dataclass
class Theory:
    """The theory bound to one executor: functions and lengths of its bound tensors."""

    d: Defs
    sizes: dict[str, z3.ArithRef]
    tensors: dict[str, Bound]
    facts: list[z3.BoolRef]


def bind(kernel: ir.Kernel, binding: Binding) -> Theory:
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
    terms = SizeTerms(sizes)
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
        tensors[name] = shape(t, what, func, length, terms, facts)
    b = binding.block
    facts += [rows == blocks * b, d.tk >= 0, d.experts >= 1]
    if binding.cut == "used":
        facts.append(rows == d.total)
    else:  # allocated_blocks: the worst case, TK + E (B - 1) rows in whole blocks
        worst = d.tk + d.experts * (b - 1)
        facts += [blocks * b >= worst, (blocks - 1) * b < worst]
    return Theory(d, sizes, tensors, facts)


def shape(t: ir.GlobalTensor, what: str, func: z3.FuncDeclRef, length: z3.ArithRef,
           terms: SizeTerms, facts: list[z3.BoolRef]) -> Bound:
    """How an executor tensor's elements map onto the inspector's array: a vector one to
    one; the router's ids also as [T, K] (vLLM's topk_ids), pair t K + k at [t, k], for a
    constant K."""
    if t.dtype.value != "i32" or t.role is not ir.ParamRole.IN:
        raise BindingError(f"`{t.name}` must be an `in` i32 tensor to hold {what}", t.span)
    if len(t.shape) == 1:
        facts.append(terms.fold(t.shape[0]) == length)
        return Bound(func, (terms.fold(t.shape[0]),), (1,))
    k = t.shape[1] if len(t.shape) == 2 else None
    if what != "topk_ids" or not isinstance(k, ir.IntConst) or k.value < 1:
        raise BindingError(f"`{t.name}` must be a vector to hold {what} (the router's ids "
                           f"may also be [T, K] with a constant K)", t.span)
    rows = terms.fold(t.shape[0])
    facts.append(rows * k.value == length)
    return Bound(func, (rows, z3.IntVal(k.value)), (k.value, 1))


def theory_facts(t: Theory) -> list[z3.BoolRef]:
    p = z3.Int("q_sids_p")
    sids_def = z3.ForAll([p], t.d.sids_def(p), patterns=[t.d.sids(p)])
    return t.d.base() + [quantified(t.d, n) for n in FOR_OBLIGATIONS] + [sids_def] + t.facts
