"""The reductions of the temporal search (semantics/temporal/symmetry.py,
semantics/temporal/ring.py, semantics/temporal/reduce.py) against the unreduced search: on small
rings both prove; on mutants (one role's arrive deleted, one stage's parity changed, one role's
parity changed) the reductions do not prove and the checkers refute."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from tilesafe.checkers import barrier, ownership, temporal
from tilesafe.checkers.obligation import Severity, Verdict
from tilesafe.checkers.registry import CheckOptions
from tilesafe.frontend.load import compile_source, load_program
from tilesafe.semantics.temporal import reduce, ring, symmetry
from tilesafe.semantics.temporal.budget import Budget
from tilesafe.semantics.temporal.events import build_model
from tilesafe.semantics.temporal.parametric import explore_all


def ring_kernel(roles: int, stages: int, *, drop_arrive: int = -1, stage_parity: bool = False,
                role_parity: int = -1, warps: int = 1) -> str:
    """A producer warp and `roles` consumer roles of `warps` warps over a ring of `stages`.
    Mutants: role `drop_arrive` never releases its stage; with `stage_parity` the consumers
    wait on the wrong parity in the last stage only; role `role_parity` waits on the wrong
    parity everywhere."""
    cons = []
    for r in range(roles):
        lo = 1 + warps * r
        par = "(k / STAGES) % 2"
        if stage_parity:
            par = "(k / STAGES + k % STAGES / (STAGES - 1)) % 2"
        if r == role_parity:
            par = "(k / STAGES + 1) % 2"
        arrive = "" if r == drop_arrive else "      arrive empty[s], one per warp\n"
        cons.append(f"""  role c{r} = warps {lo} .. {lo + warps} {{
    for k in 0 .. N / 64 {{
      let s = k % STAGES
      wait full[s] parity {par}
      for e in 0 .. {4096 // (32 * warps)} {{
        let idx = e * {32 * warps} + (thread - {32 + 32 * warps * r})
        d{r}[block.x * 64 + idx / 64, k * 64 + idx % 64] = buf[s, idx / 64, idx % 64]
      }}
{arrive}    }}
  }}""")
    outs = ", ".join(f"d{r}: global f16[M, N]" for r in range(roles))
    body = "\n".join(cons)
    return f"""kernel ring(src: global f16[M, N], {outs})
  where M % 64 == 0, N % 64 == 0, M > 0, N > 0, M <= 1048576, N <= 1048576
  grid (M / 64) block {32 + 32 * warps * roles}
{{
  const STAGES = {stages}
  tensormap tin = tiled(src, box [64, 64], swizzle 128B)
  shared buf: f16[STAGES, 64, 64] layout swizzle128B(row_major) align 1024
  mbarrier full[STAGES] count 1 guards buf[i]
  mbarrier empty[STAGES] count {warps * roles} guards buf[i]

  if thread == 0 {{ init full; init empty; fence mbarrier_init }}
  sync

  role producer = warp 0, elect one {{
    for k in 0 .. N / 64 {{
      let s = k % STAGES
      wait empty[s] parity (k / STAGES + 1) % 2
      arrive full[s], expect_tx bytes(buf[s])
      tma_load buf[s] <- tin[block.x * 64, k * 64] signal full[s]
    }}
  }}
{body}
}}
"""


def kernel_of(text: str):
    return compile_source(text, "ring.tsk").kernels[0]


def unreduced(kernel, ownership_mode: bool):
    return explore_all(build_model(kernel, ownership_mode), True, 200_000, 10_000)


def codes(kernel) -> set[str]:
    temporal._CACHE.clear()
    opts = CheckOptions()
    obs = barrier.check(kernel, opts) + ownership.check(kernel, opts)
    return {o.code for o in obs if o.verdict is not Verdict.PROVED
            and o.severity is Severity.ERROR}


def proved(kernel) -> bool:
    temporal._CACHE.clear()
    opts = CheckOptions()
    obs = barrier.check(kernel, opts) + ownership.check(kernel, opts)
    return all(o.verdict is Verdict.PROVED for o in obs)


@pytest.mark.parametrize("roles,stages", [(2, 1), (3, 1), (2, 2)])
@pytest.mark.parametrize("own", [False, True])
def test_symmetry_agrees_with_the_unreduced_search(roles: int, stages: int, own: bool) -> None:
    k = kernel_of(ring_kernel(roles, stages))
    model = build_model(k, own)
    assert len(symmetry.groups(model.agents)) == 1
    plain = explore_all(model, True, 200_000, 10_000)
    sym = explore_all(replace(model, symmetric=True), True, 200_000, 10_000)
    assert reduce.proves(plain) and reduce.proves(sym)
    assert sym.states < plain.states


@pytest.mark.parametrize("stages", [2, 3])
def test_stage_projection_agrees_with_the_unreduced_search(stages: int) -> None:
    k = kernel_of(ring_kernel(2, stages))
    r = ring.project(k)
    assert isinstance(r, ring.Ring) and r.stages == stages
    assert set(r.barriers) == {"empty", "full"} and r.buffers == ("buf",)
    for own in (False, True):
        assert reduce.proves(unreduced(k, own))
        hit = reduce.by_ring(k, own, 10_000, Budget(max_states=200_000))
        assert hit is not None and reduce.proves(hit[1])
        assert hit[1].argument["ring"]["stages"] == stages


def test_projection_is_the_same_system_for_every_stage_count() -> None:
    sizes = set()
    for stages in (2, 4, 8):
        hit = reduce.by_ring(kernel_of(ring_kernel(2, stages)), True, 10_000,
                             Budget(max_states=200_000))
        assert hit is not None
        sizes.add(hit[1].states)
    assert len(sizes) == 1  # P does not grow with S


@pytest.mark.parametrize("mutant", [
    {"drop_arrive": 1},
    {"stage_parity": True},
    {"role_parity": 1},
])
@pytest.mark.parametrize("roles,stages", [(2, 2), (3, 4)])
def test_mutants_of_reduced_kernels_are_refuted(mutant: dict, roles: int, stages: int) -> None:
    k = kernel_of(ring_kernel(roles, stages, **mutant))
    for own in (False, True):
        model = build_model(k, own)
        assert reduce.prove(k, model, 10_000, Budget(max_states=200_000)) is None
    assert not proved(k)
    assert codes(k) & {"TS406", "TS408", "TS410", "TS420", "TS303", "TS304", "TS403"}


def test_the_projection_needs_a_ring() -> None:
    # A stage index that is not k % S: the argument does not apply (the kernel is still
    # explored whole).
    text = ring_kernel(1, 2).replace("tma_load buf[s]", "tma_load buf[(k + 1) % STAGES]")
    assert isinstance(ring.project(kernel_of(text)), str)
    for name in ("pipeline2", "tma_store_pipeline", "row_reduce"):
        path = f"corpus/good/{name}.tsk"
        k = load_program(path).kernels[0]
        r = ring.project(k)
        assert isinstance(r, (str, ring.Ring))


def test_many_roles_and_stages_are_proved() -> None:
    # 8 consumer roles x 8 stages: unreachable for the unreduced search (see
    # bench/bench_temporal.py for the times); proved through the projection and symmetry.
    k = kernel_of(ring_kernel(8, 8))
    assert proved(k)
    temporal._CACHE.clear()
    b = barrier.check(k, CheckOptions())
    arg = b[0].evidence["argument"]
    assert arg["ring"]["stages"] == 8 and len(arg["ring"]["symmetry"][0]) == 8


TMA_RING_MMA = "corpus/wgmma/tma_ring_mma.tsk"
ARRIVE = "      arrive empty[s], one per warp\n"
MMA_MUTANTS = {
    # the stage released before the MMAs reading it are waited for: projected, refuted
    "arrive before wgmma_wait": ("      wgmma_wait 0\n" + ARRIVE,
                                 ARRIVE + "      wgmma_wait 0\n", True, {"TS303"}),
    "no wgmma_fence": ("      wgmma_fence\n", "", True, {"TS534"}),
    # groups crossing iterations: not projected at all
    "wgmma_wait 1": ("wgmma_wait 0", "wgmma_wait 1", False, {"TS308"}),
    "no wgmma_wait": ("      wgmma_wait 0\n", "", False, {"TS308"}),
}


def test_stage_projection_with_tensor_cores_agrees_with_the_unreduced_search() -> None:
    """A ring feeding wgmma whose iterations commit and wait for their MMAs: its class's
    tensor-core state is the same at every iteration's head, so the projection applies;
    both searches prove it."""
    k = load_program(TMA_RING_MMA).kernels[0]
    r = ring.project(k)
    assert isinstance(r, ring.Ring) and r.alike and r.buffers == ("sa", "sb")
    for own in (False, True):
        assert reduce.proves(unreduced(k, own))
        hit = reduce.by_ring(k, own, 10_000, Budget(max_states=200_000), r)
        assert hit is not None and reduce.proves(hit[1])


@pytest.mark.parametrize("name", sorted(MMA_MUTANTS))
def test_tensor_core_mutants_not_proved_by_the_projection(name: str) -> None:
    old, new, projected, want = MMA_MUTANTS[name]
    text = Path(TMA_RING_MMA).read_text()
    assert text.count(old) == 1
    k = kernel_of(text.replace(old, new))
    r = ring.project(k)
    assert isinstance(r, ring.Ring) is projected, r
    if projected:  # the ownership semantics (permissions and the barrier protocol)
        reduce._PROGRESS.clear()
        assert reduce.by_ring(k, True, 10_000, Budget(max_states=200_000), r) is None
    else:
        assert "wgmma groups may cross iterations" in r
    assert codes(k) & want
