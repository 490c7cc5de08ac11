"""`tilesafe compose` (tilesafe/moe/compose.py): an executor's `requires` clauses proved of
the inspector's output. The theory's lemmas are proved and false variants of them are not;
the definitions are the ones align.py computes; every clause proved holds on every routing
drawn (brute force through the launch check's evaluator), every clause refuted is violated
by the routing reported; the corpus executors compose and the corpus/compose ones do not,
though each verifies alone."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import z3
from hypothesis import given, settings
from hypothesis import strategies as st

from tilesafe.frontend.load import load_program
from tilesafe.moe import align_lemmas as L
from tilesafe.moe.align import align
from tilesafe.moe.align_theory import Defs
from tilesafe.moe.compose import Binding, BindingError, compose
from tilesafe.semantics.access import requires_eval, requires_form
from tilesafe.semantics.temporal.parametric import fresh_z3_context

ROOT = Path(__file__).resolve().parents[1]
BAD = sorted((ROOT / "corpus" / "compose").glob("ts920_*.tsk"))

TEMPLATE = """kernel t(topk: in global i32[TK], sids: in global i32[P], be: in global i32[NB],
         y: out global f32[P])
  where T > 0, TK == 2 * T, T <= 65536, E > 0, E <= 256, NB > 0, NB <= 8192, P == 64 * NB
  grid (NB) block 64
  requires 0 <= topk[t] && topk[t] < E
  requires {clause}
{{
  y[block.x * 64 + thread] = 0.0
}}
"""

# clause -> (verdict on the used arrays, verdict on the whole allocation)
CLAUSES = {
    "0 <= sids[p] && sids[p] <= TK": ("proved", "proved"),
    "sids[p] < TK": ("refuted", "refuted"),
    "permutation(p in 0 .. P: sids[p], 0 .. TK)": ("proved", "proved"),
    "injective(p in 0 .. P: sids[p], 0 .. TK)": ("proved", "proved"),
    "injective(p in 0 .. P: sids[p])": ("refuted", "refuted"),
    "sorted(p in 0 .. P: sids[p])": ("refuted", "refuted"),
    "sorted(b in 0 .. NB: be[b])": ("proved", "refuted"),
    "0 <= be[b] && be[b] < E": ("proved", "refuted"),
    "be[b] == -1 || 0 <= be[b] && be[b] < E": ("proved", "proved"),
    "be[b] == 0": ("refuted", "refuted"),
    "b + 1 >= NB || be[b] < be[b + 1]": ("refuted", "refuted"),
    "sids[p] == TK || topk[sids[p]] == be[p / 64]": ("proved", "proved"),
    "sids[p] == TK || topk[sids[p]] == be[p / 128]": ("refuted", "refuted"),
    "sids[p] == TK || sids[p] / 2 < T": ("proved", "proved"),
    "sids[p] == TK || p < TK": ("refuted", "refuted"),
    "sids[b * 64] < TK || b >= NB": ("proved", "refuted"),
    "sids[p] < TK || p % 64 == 63 || sids[p + 1] == TK": ("proved", "proved"),
    "p + 1 >= P || sids[p] == TK || sids[p + 1] == TK || topk[sids[p]] != topk[sids[p + 1]] "
    "|| sids[p] < sids[p + 1]": ("proved", "proved"),
}


def _kernel(text: str, name: str = "t.tsk"):
    return load_program(name, text=text).kernels[0]


# ---- the theory --------------------------------------------------------------------------------


@pytest.mark.parametrize("block", [1, 16, 64, 128])
def test_every_lemma_is_proved(block):
    with fresh_z3_context():
        results = L.prove_lemmas(Defs(block))
    assert [r.name for r in results if not r.proved] == []


FALSE = {
    "pad_bounds": lambda d, e: z3.Implies(z3.And(0 <= e, e < d.experts),
                                          d.pad(e) <= d.cnt(e) + d.block - 2),
    "count_mono": lambda d, i, j, e: z3.Implies(z3.And(0 <= i, i <= j, j <= d.tk),
                                                d.count(i, e) < d.count(j, e)),
    "pos_injective": lambda d, i, j: z3.Implies(d.pos(i) == d.pos(j), i == j),
    "be_range": lambda d, b: z3.Implies(0 <= b, z3.And(0 <= d.be(b), d.be(b) < d.experts)),
    "total_bound": lambda d: d.total <= d.tk + d.experts * (d.block - 2),
    "off_mono": lambda d, a, c: z3.Implies(z3.And(0 <= a, a <= c, c <= d.experts),
                                           d.off(a) < d.off(c)),
    "sids_at_pos": lambda d, i: z3.Implies(z3.And(0 <= i, i < d.tk), d.sids(d.pos(i)) == i),
    "rows_real": lambda d, e, p: z3.Implies(z3.And(0 <= e, e < d.experts, d.off(e) <= p,
                                                   p <= d.off(e) + d.cnt(e)),
                                            d.sids(p) != d.tk),
}


@pytest.mark.parametrize("name", sorted(FALSE))
def test_a_false_lemma_is_not_proved(name, monkeypatch):
    """The proofs prove the statements: each lemma made false fails its own proof."""
    monkeypatch.setattr(L, "LEMMAS", tuple(
        dataclasses.replace(lem, statement=FALSE[name]) if lem.name == name else lem
        for lem in L.LEMMAS))
    with fresh_z3_context():
        (r,) = [r for r in L.prove_lemmas(Defs(64)) if r.name == name]
    assert not r.proved and "sat" in r.detail


def test_facts_that_contradict_each_other_are_vacuous_not_proved():
    with fresh_z3_context():
        x = z3.Int("x")
        assert L.check([x > 1, x < 0], x == 5) == "vacuous"
        assert L.check([x > 1], x >= 1) == "unsat"


@settings(max_examples=40, deadline=None)
@given(ids=st.lists(st.integers(-1, 4), min_size=1, max_size=40),
       e=st.integers(1, 4), block=st.sampled_from([1, 4, 64]))
def test_the_definitions_are_what_align_computes(ids, e, block):
    """C, cnt, off, pos, sids and be of align_theory, evaluated plainly, on align's output."""
    a = np.array(ids)
    r = align(a, e, block)
    tk = a.size

    def count(i, x):
        return int(np.sum(a[:i] == x))

    pad = [-(-count(tk, x) // block) * block for x in range(e)]
    off = np.concatenate([[0], np.cumsum(pad)]).astype(int)
    assert r.total == off[e]
    sids = np.full(r.sorted_ids.size, tk)
    for i in range(tk):
        if 0 <= a[i] < e:
            sids[off[a[i]] + count(i, a[i])] = i
    assert (r.sorted_ids == sids).all()
    ends = [sum(off[x + 1] <= b * block for x in range(e)) for b in range(r.expert_ids.size)]
    be = [-1 if b * block >= r.total else ends[b] for b in range(r.expert_ids.size)]
    assert r.expert_ids.tolist() == be


# ---- clauses ----------------------------------------------------------------------------------


@pytest.mark.parametrize("cut", ["used", "allocated"])
@pytest.mark.parametrize("clause", sorted(CLAUSES))
def test_clause_verdicts(clause, cut):
    k = _kernel(TEMPLATE.format(clause=clause))
    c = compose(k, Binding.default(k, cut=cut))
    assert c.clauses[0].status == "input"
    v = c.clauses[1]
    assert v.status == CLAUSES[clause][cut == "allocated"], v.detail
    if v.status == "refuted":  # the routing reported violates the clause
        _assert_violated(k, cut, v.routing, v.sizes, violated=True)


@settings(max_examples=25, deadline=None)
@given(ids=st.lists(st.integers(0, 3), min_size=2, max_size=140).filter(
    lambda x: len(x) % 2 == 0), e=st.integers(1, 4), cut=st.sampled_from(["used", "allocated"]))
def test_proved_clauses_hold_on_every_routing(ids, e, cut):
    """Brute force: every clause proved holds of align's output on routings the search
    never drew (up to 140 pairs, several blocks per expert)."""
    ids = [i % e for i in ids]
    for clause, verdicts in CLAUSES.items():
        if verdicts[cut == "allocated"] == "proved":
            k = _kernel(TEMPLATE.format(clause=clause))
            _assert_violated(k, cut, ids, None, violated=False)


def _assert_violated(k, cut: str, ids, sizes, violated: bool, shape=(-1,)) -> None:
    r = align(np.array(ids), int(sizes["E"]) if sizes else max(ids) + 1, 64)
    sids, be = r.used() if cut == "used" else (r.sorted_ids, r.expert_ids)
    topk = np.array(ids, dtype=np.int32).reshape(shape)
    names = {t.name for t in k.params}
    arrays = {"topk": topk, "sids": sids, "be": be} if "sids" in names else {
        "topk_ids": topk, "sorted_token_ids": sids, "expert_ids": be}
    if sizes is None:
        sizes = {"T": len(ids) // 2, "TK": len(ids), "E": max(ids) + 1, "P": sids.size,
                 "NB": be.size}
        if sids.size == 0:
            return
    v = requires_eval.first_violation(requires_form.encode(k), sizes, arrays)
    assert (v is not None) == violated, v and v.message()


# ---- the corpus ---------------------------------------------------------------------------


@pytest.mark.parametrize("name,cut", [("moe_gemm", "used"), ("moe_scale", "used"),
                                      ("moe_scale", "allocated")])
def test_corpus_executors_compose(name, cut):
    k = load_program(ROOT / "corpus" / "moe" / f"{name}.tsk").kernels[0]
    c = compose(k, Binding.default(k, cut=cut))
    assert c.proved and [v.status for v in c.clauses][0] == "input"
    assert c.unchecked == frozenset(range(1, len(k.requires)))


def test_moe_gemm_on_the_whole_allocation_is_refuted():
    """moe_gemm takes the used cut: on the allocation its table clause meets -1."""
    k = load_program(ROOT / "corpus" / "moe" / "moe_gemm.tsk").kernels[0]
    c = compose(k, Binding.default(k, cut="allocated"))
    assert [v.text for v in c.clauses if v.status == "refuted"] == ["0 <= be[b] && be[b] < E"]


@pytest.mark.parametrize("path", BAD, ids=lambda p: p.stem)
def test_bad_executor_verifies_alone_and_is_refuted_composed(path):
    from tilesafe.cli import main

    assert main(["verify", str(path)], stdout=_Null(), stderr=_Null()) == 0
    flags = path.read_text().splitlines()[0].removeprefix("// compose:").split()
    out = subprocess.run([sys.executable, "-m", "tilesafe.cli", "compose", str(path), *flags],
                         capture_output=True, text=True, check=False)
    assert out.returncode == 1, out.stdout + out.stderr
    assert "TS920" in out.stdout and "routing: topk_ids = " in out.stdout


class _Null:
    def write(self, _: str) -> int:
        return 0


def test_cli_exit_codes_and_json(tmp_path: Path):
    gemm = ROOT / "corpus" / "moe" / "moe_gemm.tsk"
    ok = subprocess.run([sys.executable, "-m", "tilesafe.cli", "compose", str(gemm),
                         "--format", "json"], capture_output=True, text=True, check=False)
    assert ok.returncode == 0, ok.stderr
    data = json.loads(ok.stdout)
    assert data["proved"] and {c["status"] for c in data["clauses"]} == {"input", "proved"}
    combine = ROOT / "corpus" / "moe" / "moe_combine.tsk"
    none = subprocess.run([sys.executable, "-m", "tilesafe.cli", "compose", str(combine)],
                          capture_output=True, text=True, check=False)
    assert none.returncode == 2 and "TS922" in none.stdout
    wrong = subprocess.run([sys.executable, "-m", "tilesafe.cli", "compose", str(gemm),
                            "--bind", "sids=sorted_ids,x=expert_ids"], capture_output=True,
                           text=True, check=False)
    assert wrong.returncode == 2 and "TS922" in wrong.stdout


def test_a_where_no_routing_meets_is_a_binding_error():
    text = TEMPLATE.format(clause="sids[p] < TK").replace("P == 64 * NB", "P == 32 * NB")
    k = _kernel(text)
    with pytest.raises(BindingError, match="no launch"):
        compose(k, Binding.default(k))


def test_input_clauses_implied_by_every_id_being_an_expert():
    """The layer skips an input clause only when align found no invalid id and the clause
    follows from that; a clause about the ids that does not follow stays checked."""
    text = TEMPLATE.format(clause="topk[t] != 0").replace(
        "requires 0 <= topk[t] && topk[t] < E", "requires topk[t] < E && topk[t] >= 0")
    k = _kernel(text)
    c = compose(k, Binding.default(k))
    assert [v.by_validity for v in c.clauses] == [True, False]
    assert c.unchecked_when_valid == frozenset({0})
    assert align(np.array([0, -1, 3, 2]), 3, 64).invalid == 2
    assert align(np.array([0, 1, 2, 2]), 3, 64).invalid == 0


VLLM = """kernel t(topk_ids: in global i32[T, 2], sorted_token_ids: in global i32[P],
         expert_ids: in global i32[NB], y: out global f32[P])
  where T > 0, T <= 65536, E > 0, E <= 256, NB > 0, NB <= 8192, P == 64 * NB
  grid (NB) block 64
  requires 0 <= topk_ids[t, k] && topk_ids[t, k] < E
  requires 0 <= sorted_token_ids[p] && sorted_token_ids[p] <= 2 * T
  requires permutation(p in 0 .. P: sorted_token_ids[p], 0 .. 2 * T)
  requires LINK(64)
  requires LINK(128)
{
  y[block.x * 64 + thread] = 0.0
}
""".replace("LINK(64)", "sorted_token_ids[p] == 2 * T || topk_ids[sorted_token_ids[p] / 2, "
            "sorted_token_ids[p] % 2] == expert_ids[p / 64]").replace(
    "LINK(128)", "sorted_token_ids[p] == 2 * T || topk_ids[sorted_token_ids[p] / 2, "
    "sorted_token_ids[p] % 2] == expert_ids[p / 128]")


def test_vllm_names_and_topk_as_tokens_by_choices():
    """vLLM's names bind by default, and its [T, K] topk_ids: pair t K + k at [t, k]."""
    k = _kernel(VLLM)
    c = compose(k, Binding.default(k))
    assert dict(c.binding.tensors) == {"topk_ids": "topk_ids",
                                       "sorted_token_ids": "sorted_ids",
                                       "expert_ids": "expert_ids"}
    assert [v.status for v in c.clauses] == ["input", "proved", "proved", "proved", "refuted"]
    assert c.clauses[0].by_validity
    bad = c.clauses[4]
    _assert_violated(k, "used", bad.routing, bad.sizes, violated=True, shape=(-1, 2))


def test_num_tokens_post_padded_as_a_tensor_on_the_whole_allocation():
    """vLLM passes `total` as a one-element tensor and launches over the allocation."""
    text = VLLM.replace("expert_ids: in global i32[NB],", "expert_ids: in global i32[NB], "
                        "num_tokens_post_padded: in global i32[1],")
    head, body = text.split("  requires 0 <= topk_ids", 1)
    clauses = ["b * 64 >= num_tokens_post_padded[0] || 0 <= expert_ids[b] && expert_ids[b] < E",
               "p < num_tokens_post_padded[0] || sorted_token_ids[p] == 2 * T",
               "b * 32 >= num_tokens_post_padded[0] || expert_ids[b] >= 0"]
    text = head + "".join(f"  requires {c}\n" for c in clauses) + "  requires 0 <= topk_ids" + (
        body)
    k = _kernel(text)
    c = compose(k, Binding.default(k, cut="allocated"))
    got = {v.text: v.status for v in c.clauses}
    assert [got[t] for t in clauses] == ["proved", "proved", "refuted"], got


# ---- random clauses against brute force ---------------------------------------------------

P_ATOMS = ["sids[p] == TK", "sids[p] < TK", "sids[p] <= TK", "sids[p] >= 0", "be[p / 64] >= 0",
           "be[p / 64] < E", "p < TK", "p % 64 == 0", "sids[p] % 2 == 0", "sids[p] < P",
           "topk[sids[p]] == be[p / 64]", "topk[sids[p]] < E", "p + 1 >= P",
           "sids[p + 1] == TK", "sids[p] < sids[p + 1]"]
B_ATOMS = ["be[b] >= 0", "be[b] < E", "be[b] == -1", "b * 64 < P", "be[b] <= be[0]",
           "b == 0", "be[b] >= be[0]", "be[b] < NB"]


@st.composite
def clauses(draw):
    atoms = draw(st.sampled_from([P_ATOMS, B_ATOMS]))
    parts = draw(st.lists(st.sampled_from(atoms), min_size=1, max_size=3))
    ops = draw(st.lists(st.sampled_from([" || ", " && "]), min_size=len(parts) - 1,
                        max_size=len(parts) - 1))
    text = parts[0]
    for op, part in zip(ops, parts[1:], strict=True):
        text += op + part
    return text


@settings(max_examples=12, deadline=None)
@given(clause=clauses(), cut=st.sampled_from(["used", "allocated"]),
       routings=st.lists(st.lists(st.integers(0, 3), min_size=2, max_size=140).filter(
           lambda x: len(x) % 2 == 0), min_size=3, max_size=3))
def test_a_random_clause_proved_holds_on_random_routings(clause, cut, routings):
    """Soundness against brute force: whatever random clause `compose` proves (without its
    search) holds of align's output on routings it never saw, evaluated by the launch check."""
    from hypothesis import assume

    from tilesafe.frontend.diagnostics import DiagnosticError

    try:
        k = _kernel(TEMPLATE.format(clause=clause))
    except DiagnosticError:  # a variable no direct read bounds (TS042): not a clause
        assume(False)
    c = compose(k, Binding.default(k, cut=cut), search=False)
    if c.clauses[1].status != "proved":
        return
    for ids in routings:
        try:
            _assert_violated(k, cut, ids, None, violated=False)
        except requires_eval.TooLarge:  # the launch check cannot enumerate it either
            return
