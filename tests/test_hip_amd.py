"""HIP for AMD (issue 25): the AMD subset of the corpus re-verified for 64-lane wavefronts,
printed as HIP, compiled to gfx942 code objects (Debian's clang-19; skips without it) and
for sm_90a through the HIP-on-CUDA prelude (nvcc; skips without it), the disassembly read
back for what the bank proof assumed.

The AMD subset is every corpus/good, corpus/codegen and corpus/amd kernel that loads for
gfx942 (no TS036/TS032 refusal). Each is either proved for gfx942 -- then it compiles -- or
listed in WAVE64_REFUTED with the codes its 32-lane assumptions earn on 64-lane wavefronts.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path

import pytest

from tilesafe import api
from tilesafe.codegen import hip_toolchain as tc
from tilesafe.codegen.hip_compile import HipKernel, compile_hip
from tilesafe.frontend import ir, walk
from tilesafe.frontend.diagnostics import DiagnosticError

ROOT = Path(__file__).resolve().parent.parent
CANDIDATES = sorted([*(ROOT / "corpus" / "good").glob("*.tsk"),
                     *(ROOT / "corpus" / "codegen").glob("*.tsk"),
                     *(ROOT / "corpus" / "amd").glob("*.tsk")])

# Proved for 32-lane warps, refuted for 64-lane wavefronts: `lane` reaches 63, `warp_id`
# counts half as many warps, `thread / 32` no longer names the warp.
WAVE64_REFUTED = {
    "row_reduce": {"TS202", "TS212"},
    "row_sum_ilp": {"TS201", "TS202", "TS212"},
    "transpose_ragged": {"TS202", "TS212", "TS306"},
    "transpose_swizzled": {"TS201", "TS202", "TS290", "TS306"},
}


@functools.cache
def amd_kernel(path: Path) -> ir.Kernel | None:
    try:
        return api.checked_program(path, target="gfx942").kernels[0]
    except DiagnosticError as err:
        codes = {d.code for d in err.diagnostics}
        assert codes <= {"TS036", "TS032", "TS026"}, codes
        return None


SUBSET = [p for p in CANDIDATES if amd_kernel(p) is not None]
PROVED = [p for p in SUBSET if p.stem not in WAVE64_REFUTED]


@functools.cache
def failing_codes(path: Path) -> frozenset[str]:
    kernel = amd_kernel(path)
    assert kernel is not None
    return frozenset(o.code or "-" for o in api.verify_kernel(kernel) if o.failed)


@functools.cache
def hip_of(path: Path) -> HipKernel:
    kernel = amd_kernel(path)
    assert kernel is not None
    return compile_hip(kernel, str(path.relative_to(ROOT)))


def test_the_subset_is_what_the_issue_expects():
    names = {p.stem for p in SUBSET}
    assert {"elementwise", "scalar_ops", "layouts_zoo", "tile_history"} <= names
    assert not names & {"pipeline2", "tma_copy_single", "named_handoff", "sync_zoo"}
    assert set(WAVE64_REFUTED) <= names
    assert len(PROVED) >= 11


@pytest.mark.parametrize("path", SUBSET, ids=[p.stem for p in SUBSET])
def test_wave64_verdicts(path: Path):
    """Proved kernels stay proved for gfx942; the listed ones fail with exactly their codes
    (and were proved for 32 lanes: they are corpus/good kernels)."""
    assert failing_codes(path) == frozenset(WAVE64_REFUTED.get(path.stem, set()))


@pytest.mark.parametrize("path", PROVED, ids=[p.stem for p in PROVED])
def test_hip_module_shape(path: Path):
    h = hip_of(path)
    kernel = amd_kernel(path)
    assert kernel is not None
    assert f'TS_KERNEL({kernel.block}) void {kernel.name}(' in h.hip
    assert "unsigned char tsmem[]" in h.hip
    # every shared/global access of the IR has its line:col annotation
    spans = {(s.span.line, s.span.col) for s in walk.statements(kernel.body)
             if isinstance(s, ir.Store)}
    for line, col in spans:
        assert f"// {line}:{col} store" in h.hip
    # nothing of Hopper's asynchronous machinery
    assert not re.search(r"mbarrier|cp\.async|wgmma|bar\.sync|__shfl", h.hip)


def _lds_widths(kernel: ir.Kernel) -> set[int]:
    """Element widths of the kernel's shared loads and stores: what the bank proof counted."""
    widths = set()
    for s in walk.statements(kernel.body):
        if isinstance(s, ir.Store) and s.space is ir.Space.SHARED:
            widths.add(kernel.buffer(s.tensor).dtype.nbytes)
        for e in walk.own_exprs(s):
            for load in walk.loads(e):
                if load.space is ir.Space.SHARED:
                    widths.add(kernel.buffer(load.tensor).dtype.nbytes)
    return widths


CLANG = tc.find_clang()
OBJDUMP = tc.find_objdump(CLANG) if CLANG else None
NVCC = tc.find_nvcc()


@pytest.mark.skipif(CLANG is None or OBJDUMP is None,
                    reason="no clang with the AMDGPU backend (apt-get install clang-19 lld-19)")
@pytest.mark.parametrize("path", PROVED, ids=[p.stem for p in PROVED])
def test_compiles_for_gfx942_as_the_proof_assumed(path: Path):
    """A gfx942 code object; every LDS instruction moves one element of a width the bank
    proof counted (no ds_read2/b64/b128 merges), nothing touches scratch memory, no spills,
    f32 subnormals kept (denorm mode 3) and round to nearest even."""
    kernel = amd_kernel(path)
    assert kernel is not None and CLANG is not None and OBJDUMP is not None
    co = tc.compile_gfx942(hip_of(path).hip, CLANG, OBJDUMP)
    widths = _lds_widths(kernel)
    for op in co.lds_ops:
        assert op in tc.LDS_WIDTH, f"{op}: an LDS instruction the bank model does not count"
        assert tc.LDS_WIDTH[op] in widths, f"{op} but the kernel's LDS widths are {widths}"
    if widths:
        assert co.lds_ops, "shared accesses but no LDS instruction"
    assert not [m for m in co.memory_ops if m.startswith(("scratch_", "buffer_"))]
    assert co.field("vgpr_spill_count") == 0 and co.field("sgpr_spill_count") == 0
    assert co.field("private_segment_fixed_size") == 0
    assert co.descriptor("float_denorm_mode_32") == 3
    assert co.descriptor("float_round_mode_32") == 0


@pytest.mark.skipif(NVCC is None, reason="nvcc not on PATH")
@pytest.mark.parametrize("path", PROVED, ids=[p.stem for p in PROVED])
def test_compiles_with_nvcc_through_the_hip_on_cuda_prelude(path: Path):
    """The same source for sm_90a (what tests/gpu/build_hip_cases.py runs on an H100):
    an entry of the kernel's name whose parameters are the LIR's (u64 pointers, s64 sizes)."""
    h = hip_of(path)
    assert NVCC is not None
    ptx = tc.compile_cuda(h.hip, NVCC)
    entry = re.search(rf"\.visible \.entry {h.name}\(([^)]*)\)", ptx)
    assert entry is not None
    params = re.findall(r"\.param \.(u64|b64|s64|u32|b32)", entry.group(1))
    assert len(params) == len(h.params)
    assert all(p in ("u64", "b64", "s64") for p in params)


def test_amd_corpus_kernels_compute_what_numpy_does():
    """corpus/amd (kernels written for 64-lane wavefronts) on the interpreter, small-integer
    inputs so that any summation order is exact; on sm_90a their 64-lane indexing is
    refuted (they are AMD kernels)."""
    import numpy as np

    from tilesafe.semantics.interpreter.interp import run_kernel

    rng = np.random.default_rng(7)
    red = amd_kernel(ROOT / "corpus" / "amd" / "row_reduce64.tsk")
    x = rng.integers(-8, 9, (37, 200)).astype(np.float32)
    got = run_kernel(red, {"M": 37, "N": 200}, {"x": x, "out": np.zeros(37, np.float32)})
    assert np.array_equal(got.tensors["out"], x.sum(axis=1))
    tr = amd_kernel(ROOT / "corpus" / "amd" / "transpose64.tsk")
    src = rng.standard_normal((192, 128)).astype(np.float32)
    got = run_kernel(tr, {"M": 192, "N": 128},
                     {"src": src, "dst": np.zeros((128, 192), np.float32)})
    assert np.array_equal(got.tensors["dst"], src.T)
    nv = api.checked_program(ROOT / "corpus" / "amd" / "row_reduce64.tsk").kernels[0]
    assert "TS202" in {o.code for o in api.verify_kernel(nv) if o.failed}


@pytest.mark.skipif(NVCC is None, reason="nvcc not on PATH")
def test_hip_on_cuda_cases_build():
    """tests/gpu/build_hip_cases.py for one kernel: nvcc's PTX for the HIP source, bound to
    a launch, with the interpreter's gfx942 outputs as what the GPU must reproduce."""
    import sys

    import numpy as np

    sys.path.insert(0, str(ROOT / "tests" / "gpu"))
    from build_hip_cases import hip_cases

    cases = list(hip_cases(1, NVCC, {"elementwise"}))
    assert cases and all(c.name.startswith("hip-elementwise-") for c in cases)
    case = cases[0]
    assert ".entry elementwise(" in case.spec.ptx and case.spec.block == 256
    assert "z" in case.expected and case.expect == "interp"
    assert np.array_equal(case.expected["x"], case.inputs["x"])  # inputs unchanged
