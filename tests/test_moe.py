"""The MoE inspector-executor (issue 23, items 3-4; docs/moe.md): the corpus/moe kernels
proved, compiled and translation-validated; the inspector against brute force; the
executors on the reference interpreter against numpy on skewed routings; the composition
through tilesafe.jit, with a wrong routing refused at launch (TS911) naming the element."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tilesafe import api
from tilesafe.checkers.obligation import Verdict
from tilesafe.frontend.load import load_program
from tilesafe.moe import reference as ref
from tilesafe.moe import routing as R
from tilesafe.moe.align import align, allocated_blocks
from tilesafe.semantics.access import requires_eval, requires_form
from tilesafe.semantics.expr import fp
from tilesafe.semantics.interpreter import interp
from tilesafe.semantics.interpreter.interp_error import InterpError

ROOT = Path(__file__).resolve().parent.parent
MOE = ROOT / "corpus" / "moe"
KERNELS = sorted(MOE.glob("*.tsk"))


def kernel(name: str):
    return load_program(MOE / f"{name}.tsk").kernels[0]


# ---- proved, compiled, validated, assembled -----------------------------------------------


@pytest.mark.parametrize("path", KERNELS, ids=[p.stem for p in KERNELS])
def test_kernel_is_proved_compiled_and_validated(path: Path, tmp_path: Path):
    res = api.compile(path)
    assert not res.failing, [(o.code, o.name, o.message) for o in res.failing]
    assert all(o.verdict is Verdict.PROVED for o in res.obligations
               if o.severity.value == "error"), "an error obligation is not proved"
    assert [o for o in res.kernel.ensures], "every MoE kernel states what it computes"
    values = [o for o in res.obligations if o.checker == "value"]
    assert values and all(o.verdict is Verdict.PROVED for o in values)
    assert res.validation and all(o.verdict is Verdict.PROVED for o in res.validation), [
        (o.code, o.name) for o in res.validation if o.verdict is not Verdict.PROVED]
    if shutil.which("ptxas") is None:
        pytest.skip("ptxas not on PATH: assembly not checked")
    ptx = tmp_path / "k.ptx"
    ptx.write_text(res.compiled.ptx)
    out = subprocess.run(["ptxas", "-arch=sm_90a", str(ptx), "-o", str(tmp_path / "k.cubin")],
                         capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr


# ---- the inspector --------------------------------------------------------------------------


def _brute(topk: np.ndarray, experts: int, block: int):
    """The routing by the definition, one pair at a time."""
    flat = topk.reshape(-1)
    groups = [[i for i in range(flat.size) if flat[i] == e] for e in range(experts)]
    sids, be = [], []
    for e, g in enumerate(groups):
        padded = -(-len(g) // block) * block
        sids += g + [flat.size] * (padded - len(g))
        be += [e] * (padded // block)
    return sids, be


@settings(max_examples=60, deadline=None)
@given(t=st.integers(1, 40), e=st.integers(2, 9), block=st.sampled_from([1, 2, 4, 16, 64]),
       kind=st.sampled_from(R.KINDS), seed=st.integers(0, 2**16))
def test_inspector_is_the_definition(t, e, block, kind, seed):
    topk = R.routing(kind, t, e, 2, np.random.default_rng(seed))
    r = align(topk, e, block)
    sids, be = _brute(topk, e, block)
    assert r.total == len(sids) and r.sorted_ids[:r.total].tolist() == sids
    assert r.expert_ids[:r.used_blocks].tolist() == be
    nb = allocated_blocks(topk.size, e, block)
    assert r.sorted_ids.shape == (nb * block,) and r.expert_ids.shape == (nb,)
    assert (r.sorted_ids[r.total:] == topk.size).all()
    assert (r.expert_ids[r.used_blocks:] == -1).all()


@settings(max_examples=40, deadline=None)
@given(t=st.integers(1, 40), e=st.integers(2, 9), kind=st.sampled_from(R.KINDS),
       seed=st.integers(0, 2**16))
def test_inspector_output_satisfies_the_executors_requires(t, e, kind, seed):
    """The inspector's postconditions are the executors' preconditions (tested here on
    every shape of routing; checked at every launch)."""
    rng = np.random.default_rng(seed)
    topk = R.routing(kind, t, e, 2, rng)
    t = topk.shape[0]
    r = align(topk, e, 64)
    full = {"topk": topk.reshape(-1), "sids": r.sorted_ids, "be": r.expert_ids}
    sizes = {"T": t, "TK": 2 * t, "E": e, "NB": r.expert_ids.size, "P": r.sorted_ids.size}
    assert requires_eval.first_violation(requires_form.encode(kernel("moe_scale")), sizes,
                                         full) is None
    sids, be = r.used()
    used = {"topk": topk.reshape(-1), "sids": sids, "be": be}
    sizes.update(NB=be.size, P=sids.size)
    assert requires_eval.first_violation(requires_form.encode(kernel("moe_gemm")), sizes,
                                         used) is None


def test_torch_inspector_equals_numpy():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(3)
    for kind in R.KINDS:
        topk = R.routing(kind, 37, 8, 2, rng)
        a, b = align(topk, 8, 16), align(torch.from_numpy(topk), 8, 16)
        assert a.total == b.total
        assert (a.sorted_ids == b.sorted_ids.numpy()).all()
        assert (a.expert_ids == b.expert_ids.numpy()).all()


# ---- the executors on the interpreter against numpy ----------------------------------------


def _scale_inputs(kind: str, t: int, e: int, h: int, seed: int):
    rng = np.random.default_rng(seed)
    topk = R.routing(kind, t, e, 2, rng)
    r = align(topk, e, 64)
    t = topk.shape[0]
    arrays = {"x": R.quarters((t, h), rng), "topk": topk.reshape(-1),
              "tw": R.route_weights(t, 2, rng), "sids": r.sorted_ids, "be": r.expert_ids,
              "s": R.quarters((e, h), rng), "inter": np.full((2 * t, h), np.nan, np.float32)}
    sizes = {"T": t, "TK": 2 * t, "E": e, "NB": r.expert_ids.size, "P": r.sorted_ids.size,
             "H": h}
    return topk, arrays, sizes


@pytest.mark.parametrize("kind", R.KINDS)
def test_scale_executor_and_combine_match_numpy(kind):
    topk, arrays, sizes = _scale_inputs(kind, 11, 6, 128, seed=5)
    out = interp.run_kernel(kernel("moe_scale"), sizes, arrays).tensors["inter"]
    want = ref.scale(arrays["x"], topk, arrays["tw"], arrays["s"])
    assert out.tobytes() == want.tobytes()
    y = interp.run_kernel(kernel("moe_combine"), {"T": sizes["T"], "TK": sizes["TK"], "H": 128},
                          {"inter": out, "y": np.full((sizes["T"], 128), np.nan, np.float32)})
    assert y.tensors["y"].tobytes() == ref.combine(want).tobytes()


@pytest.mark.parametrize("kind", ["hot", "empty", "one_token"])
def test_grouped_gemm_matches_numpy(kind):
    rng = np.random.default_rng(11)
    t, e, d, n = 9, 5, 128, 128
    topk = R.routing(kind, t, e, 2, rng)
    t = topk.shape[0]
    sids, be = align(topk, e, 64).used()
    x, w, tw = R.quarters((t, d), rng), R.quarters((e, n, d), rng), R.route_weights(t, 2, rng)
    arrays = {"x": fp.f32_array_to_bf16(x), "topk": topk.reshape(-1), "tw": tw, "sids": sids,
              "be": be, "w": fp.f32_array_to_bf16(w),
              "inter": np.full((2 * t, n), np.nan, np.float32)}
    sizes = {"T": t, "TK": 2 * t, "E": e, "NB": be.size, "P": sids.size, "D": d, "N": n}
    out = interp.run_kernel(kernel("moe_gemm"), sizes, arrays).tensors["inter"]
    assert (out == ref.gemm(x, topk, tw, w)).all()  # exact: small multiples of 1/8


# ---- launch-time checks ---------------------------------------------------------------------


@pytest.mark.parametrize(("bug", "needle"), [
    # a sentinel left inside a group, the pair it stood for nowhere
    ("sids[1] = TK", "each value of 0 .. 22 must be taken once"),
    # a stale block -> expert table (the blocks of two experts swapped)
    ("be[0] = 1", "topk["),
    # expert parallelism: a pair routed to expert -1 (not local) reaches the executor
    ("topk[3] = -1", "topk[3] = -1"),
    # an out-of-range row id (vLLM #27917)
    ("sids[0] = TK + 1", "sids[0] = 23"),
])
def test_wrong_routing_is_refused_before_the_run(bug, needle):
    topk, arrays, sizes = _scale_inputs("single", 11, 6, 128, seed=2)
    target, value = bug.split(" = ")
    name, idx = target[:-1].split("[")
    arrays[name] = arrays[name].copy()
    arrays[name][int(idx)] = eval(value, {"TK": sizes["TK"]})
    with pytest.raises(InterpError) as err:
        interp.run_kernel(kernel("moe_scale"), sizes, arrays)
    assert err.value.code == "TS205" and needle in err.value.message, err.value.message


def test_jit_pipeline_and_its_launch_check(tmp_path: Path):
    from tilesafe.jit.contract import JitError
    from tilesafe.moe.pipeline import MoE

    moe = MoE(5, device="interp", cache=tmp_path)
    rng = np.random.default_rng(1)
    t, d, n = 7, 64, 128
    topk = R.routing("hot", t, 5, 2, rng)
    x, w, tw = R.quarters((t, d), rng), R.quarters((5, n, d), rng), R.route_weights(t, 2, rng)
    xb, wb = fp.f32_array_to_bf16(x), fp.f32_array_to_bf16(w)
    y = moe(xb, topk, tw, wb)
    assert (y == ref.moe(x, topk, tw, w)).all()
    bad = topk.copy()
    bad[2, 0] = -1  # an expert-parallel id that no inspector stage filtered out
    with pytest.raises(JitError) as err:
        moe(xb, bad, tw, wb)
    (d0,) = err.value.diagnostics
    assert d0.code == "TS911" and "topk[4] = -1" in d0.message


def test_the_weight_box_at_expert_minus_one_is_refuted_with_the_id():
    """moe_gemm's weight tile is a TMA box at w[be[b], ...]: bounded by the clause on the
    table, every box meets w; with -1 allowed and no guard, a box lies wholly outside w
    (TS517), at the block whose table entry is -1."""
    text = (MOE / "moe_gemm.tsk").read_text().replace(
        "requires 0 <= be[b] && be[b] < E", "requires be[b] == -1 || 0 <= be[b] && be[b] < E")
    k = load_program("g.tsk", text=text).kernels[0]
    from tilesafe.checkers import tma
    from tilesafe.checkers.registry import CheckOptions

    boxes = [o for o in tma.check(k, CheckOptions()) if "every box meets w" in o.name]
    assert boxes and boxes[0].verdict is Verdict.REFUTED and boxes[0].code == "TS517"
    assert "g0_be -1" in boxes[0].message
    good = [o for o in tma.check(kernel("moe_gemm"), CheckOptions())
            if "every box meets w" in o.name]
    assert good and good[0].verdict is Verdict.PROVED
