"""tilesafe's TMA and mbarrier semantics, checked against a real Hopper GPU.

What is compared (each test says which function of tilesafe it holds to account):
  (a) `tma_rules.admissibility` against `cuTensorMapEncodeTiled` itself, on targeted boundary
      descriptors and on a seeded random sweep;
  (b) `tma_rules.tma_box_byte_offset` (and `box_bytes`, `box_smem_bytes`) against the bytes a
      real TMA tile load leaves in shared memory, for every swizzle mode, destinations on and
      off the swizzle period, narrow rows, traversal strides and boxes partly out of bounds;
      plus the run-time rule that a box must start on a 16-byte boundary along dimension 0,
      which the hardware enforces by trapping and tma_rules does not model yet;
  (c) `mbarrier.MbarrierState` against mbarrier.test_wait/try_wait.parity answers on the
      device, on fixed scripts and on seeded random programs.

Every test is marked `gpu` and skips (with the reason) when cuda-python, nvcc or a compute
capability 9.0 device is missing; TILESAFE_REQUIRE_GPU=1 turns those skips into failures.
The probe kernels (hw_kernels.cu) are compiled with nvcc for sm_90a at test time.
Results of recorded runs: docs/hardware-runs.md.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import os
import random
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import hw_probe
import numpy as np
import pytest

from tilesafe.semantics.hw.mbarrier import MbarrierError, MbarrierState
from tilesafe.semantics.hw.tma_rules import (
    DTYPES,
    L2_PROMOTIONS,
    MAX_BOX_BYTES,
    SWIZZLE_SPAN,
    SWIZZLES,
    TensorMapSpec,
    admissibility,
    box_bytes,
    box_smem_bytes,
    tma_box_byte_offset,
    traversed_box,
)

pytestmark = pytest.mark.gpu

# The one documented rule the tested driver (580.159.04) does not enforce: 32-byte interleave
# with a swizzle other than 32B (docs/hardware-rules.md, TS509). tilesafe keeps the documented
# rule, so the model may refuse what the driver accepts here -- never the other way round.
DRIVER_LENIENT_RULES = frozenset({"interleave-swizzle"})

RANDOM_DESCRIPTORS = 4000
RANDOM_SEED = 20251123
MBAR_PROGRAMS = 256
MBAR_SEED = 7


@pytest.fixture(scope="module")
def hw(tmp_path_factory: pytest.TempPathFactory) -> Iterator[hw_probe.Hopper]:
    reason = hw_probe.unavailable_reason()
    if reason is not None:
        if os.environ.get(hw_probe.REQUIRE_ENV) == "1":
            pytest.fail(f"{hw_probe.REQUIRE_ENV}=1 but the GPU tests cannot run: {reason}")
        pytest.skip(reason)
    device = hw_probe.Hopper(hw_probe.build_cubin(tmp_path_factory.mktemp("hw_kernels")))
    yield device
    device.close()


@pytest.fixture(scope="module")
def scratch(hw: hw_probe.Hopper) -> int:
    """A device allocation whose address the encode tests hand to the driver (never read)."""
    return hw.alloc(1 << 20)


def _aligned(address: int) -> int:
    return address & -address


def test_probe_kernels_build(tmp_path: Path) -> None:
    """Needs nvcc only: keeps hw_kernels.cu compiling on machines without a GPU."""
    if hw_probe.find_nvcc() is None:
        pytest.skip("nvcc not found")
    cubin = hw_probe.build_cubin(tmp_path)
    assert cubin.stat().st_size > 0


def test_device_facts(hw: hw_probe.Hopper) -> None:
    smem = hw.shared_memory_per_sm()
    print(f"device={hw.name()!r} driver_api={hw.driver_version()} smem_per_sm={smem}")
    # TS515's limit is this attribute; tma_rules hard-codes the H100/H200 value.
    assert smem == MAX_BOX_BYTES


# ---------------------------------------------------------------------------------------------
# (a) descriptor admissibility: the model against cuTensorMapEncodeTiled
# ---------------------------------------------------------------------------------------------


def _spec(
    dtype: str,
    dims: Sequence[int],
    strides: Sequence[int],
    box: Sequence[int],
    es: Sequence[int] | None = None,
    *,
    interleave: str = "none",
    swizzle: str = "none",
    l2: str = "none",
    oob: str = "zero",
) -> TensorMapSpec:
    """Innermost-first spec; the address alignment is filled in by `_verdicts`."""
    return TensorMapSpec(
        dtype,
        DTYPES[dtype][0],
        len(dims),
        tuple(dims),
        tuple(strides),
        tuple(box),
        tuple(es) if es is not None else (1,) * len(dims),
        interleave,
        swizzle,
        l2,
        oob,
    )


def _u16(**kw: object) -> TensorMapSpec:
    """2-D u16, 256 x 256, rows 512 bytes apart, box 64 x 64, unless overridden."""
    args: dict[str, object] = {"dims": (256, 256), "strides": (512,), "box": (64, 64)}
    args.update(kw)
    return _spec(str(args.pop("dtype", "u16")), **args)  # type: ignore[arg-type]


def _cube(dtype: str, side: int, pitch: int, box: Sequence[int], es=None, **kw) -> TensorMapSpec:
    eb = DTYPES[dtype][0]
    r = len(box)
    strides = [eb * pitch * side**k for k in range(r - 1)]
    return _spec(dtype, (side,) * r, strides, box, es, **kw)


# (name, spec, byte offset of the global address from a 256-aligned base, model codes expected)
TARGETED: list[tuple[str, TensorMapSpec, int, set[str]]] = [
    ("baseline 64x64 u16", _u16(), 0, set()),
    ("rank 1", _spec("u16", (256,), (), (64,)), 0, set()),
    ("element stride 9 on dim 0", _u16(es=(9, 1)), 0, {"TS507"}),
    ("element stride 0", _u16(es=(1, 0)), 0, {"TS507"}),
    ("element stride 8", _u16(es=(8, 8)), 0, set()),
    ("rows overlap", _u16(strides=(256,)), 0, set()),
    (
        "strides decrease",
        _spec("u16", (64, 4, 4), (1024, 128), (64, 4, 4)),
        0,
        set(),
    ),
    ("global dim 2^32", _u16(dims=(2**32, 1), strides=(2**33,), box=(64, 1)), 0, set()),
    (
        "global dim 2^32+1",
        _u16(dims=(2**32 + 1, 1), strides=(2**34,), box=(64, 1)),
        0,
        {"TS511"},
    ),
    ("global dim 0", _u16(dims=(256, 0)), 0, {"TS511"}),
    ("stride 2^40-16", _u16(strides=(2**40 - 16,)), 0, set()),
    ("stride 2^40", _u16(strides=(2**40,)), 0, {"TS505"}),
    ("stride 520", _u16(strides=(520,)), 0, {"TS505"}),
    ("address +8", _u16(), 8, {"TS506"}),
    ("address +16, 128B swizzle", _u16(swizzle="128B"), 16, set()),
    ("NaN fill on u16", _u16(oob="nan"), 0, {"TS512"}),
    ("NaN fill on f16", _u16(dtype="f16", oob="nan"), 0, set()),
    ("8-byte inner row", _u16(box=(4, 64)), 0, {"TS503"}),
    ("box dim 0", _u16(box=(64, 0)), 0, {"TS502"}),
    ("box dim 257", _u16(box=(64, 257)), 0, {"TS502"}),
    ("box dim 256", _u16(box=(64, 256)), 0, set()),
    ("256-byte row, 128B swizzle", _u16(box=(128, 8), swizzle="128B"), 0, {"TS504"}),
    ("128-byte row, 128B swizzle", _u16(box=(64, 8), swizzle="128B"), 0, set()),
    ("64-byte row, 32B swizzle", _u16(box=(32, 8), swizzle="32B"), 0, {"TS504"}),
    ("L2 promotion 256B", _u16(l2="256B"), 0, set()),
    ("16B interleave at rank 2", _u16(interleave="16B"), 0, {"TS509"}),
    (
        "16B interleave, 24-byte inner row",
        _spec("u16", (12, 256, 256), (32, 8192), (12, 8, 8), interleave="16B"),
        0,
        {"TS503"},
    ),
    (
        "16B interleave, 512-byte row under 128B swizzle",
        _spec("u16", (256, 16, 16), (512, 8192), (256, 8, 8), interleave="16B", swizzle="128B"),
        0,
        set(),
    ),
    (
        "32B interleave, 32B swizzle",
        _spec("u16", (16, 16, 16), (64, 1024), (16, 8, 8), interleave="32B", swizzle="32B"),
        0,
        set(),
    ),
    (
        "32B interleave, 64B swizzle (documented rule; driver lenient)",
        _spec("u16", (16, 16, 16), (64, 1024), (16, 8, 8), interleave="32B", swizzle="64B"),
        0,
        {"TS509"},
    ),
    (
        "32B interleave, stride 48",
        _spec("u16", (16, 16, 16), (48, 1024), (16, 8, 8), interleave="32B", swizzle="32B"),
        0,
        {"TS505"},
    ),
    ("box of exactly 233472 bytes", _cube("u8", 4096, 4096, (256, 228, 4)), 0, set()),
    ("box of 234496 bytes", _cube("u8", 4096, 4096, (256, 229, 4)), 0, {"TS515"}),
    ("f32 box of 233472 bytes", _cube("f32", 4096, 4096, (64, 228, 4)), 0, set()),
    (
        "swizzle padding not counted (224 KiB data, 896 KiB footprint)",
        _cube("u8", 4096, 4096, (32, 256, 28), swizzle="128B"),
        0,
        set(),
    ),
    ("size uses floor(7/2)", _cube("u8", 300, 304, (256, 256, 7), (1, 1, 2)), 0, set()),
    ("size divides dim 0 too", _cube("u8", 300, 304, (256, 230, 4), (2, 1, 1)), 0, set()),
    ("235520-byte box", _cube("u8", 300, 304, (256, 230, 4)), 0, {"TS515"}),
]


def _verdicts(hw: hw_probe.Hopper, spec: TensorMapSpec, address: int):
    spec = dataclasses.replace(spec, global_address_alignment=_aligned(address))
    model = admissibility(spec, max_box_bytes=hw.shared_memory_per_sm())
    return spec, model, hw.encode(spec, address)


@pytest.mark.parametrize(
    ("name", "spec", "offset", "expected"), TARGETED, ids=[t[0] for t in TARGETED]
)
def test_targeted_descriptor_matches_driver(
    hw: hw_probe.Hopper, scratch: int, name: str, spec: TensorMapSpec, offset: int, expected
) -> None:
    spec, model, drv = _verdicts(hw, spec, scratch + offset)
    assert {v.code for v in model} == expected, [v.message for v in model]
    if model and {v.rule for v in model} <= DRIVER_LENIENT_RULES:
        print(f"{name}: model refuses ({model[0].rule}); driver accepted={drv.accepted}")
        return
    assert drv.accepted == (not model), (
        f"driver {'accepted' if drv.accepted else 'refused (' + drv.error + ')'}, "
        f"model says {[v.message for v in model] or 'admissible'}"
    )


_BOX_CHOICES = (0, 1, 2, 3, 5, 8, 16, 24, 32, 40, 64, 128, 200, 256, 257)
_ES_CHOICES = (0, 1, 1, 1, 1, 2, 3, 7, 8, 9)
_NEAR_VALID_FIELDS = ("-", "-", "-", "rank", "il-rank", "dim", "stride", "box", "inner", "span")
_NEAR_VALID_FIELDS += ("es", "addr", "nan", "big")


def _random_dim(rng: random.Random) -> int:
    if rng.random() < 0.12:
        return rng.choice((0, 1, 2, 2**32 - 1, 2**32, 2**32 + 1, 2**40))
    return rng.randint(1, 400)


def _random_stride(rng: random.Random, unit: int) -> int:
    if rng.random() < 0.2:
        return rng.choice((0, 8, 16, 24, 32, 48, 2**40 - 32, 2**40 - 16, 2**40, 2**40 + 16))
    return unit * rng.randint(1, 4096)


def _random_descriptor(rng: random.Random, base: int) -> tuple[TensorMapSpec, int]:
    """Half 'wild' descriptors (every field drawn independently, boundary values included),
    half valid ones with at most one field pushed to a boundary, so that both verdicts and
    every rule's edge are exercised. Ranks 0 and 6 appear rarely; all arrays match the rank
    (TS508, TS513 and TS514 cannot be put to the driver through typed arguments)."""
    dtype = rng.choice(sorted(DTYPES))
    eb = DTYPES[dtype][0]
    wild = rng.random() < 0.5
    field = "-" if wild else rng.choice(_NEAR_VALID_FIELDS)
    if field == "rank":
        rank = rng.choice((0, 6))
    elif field == "il-rank":
        rank = rng.randint(1, 2)
    else:
        rank = rng.choice((0, 6)) if wild and rng.random() < 0.02 else rng.randint(1, 5)
    interleave = rng.choice(("none", "none", "none", "16B", "32B"))
    if field == "il-rank":
        interleave = rng.choice(("16B", "32B"))
    elif interleave != "none" and not wild and rank < 3:
        rank = rng.randint(3, 5)
    swizzle = rng.choice(SWIZZLES)
    if interleave == "32B" and not wild:
        swizzle = "32B"
    unit = 32 if interleave == "32B" else 16
    oob = "zero"
    if wild:
        dims = [_random_dim(rng) for _ in range(rank)]
        strides = [_random_stride(rng, unit) for _ in range(rank - 1)]
        box = [rng.choice(_BOX_CHOICES) for _ in range(rank)]
        es = [rng.choice(_ES_CHOICES) for _ in range(rank)]
        offset = rng.choice((0, 0, 0, 8, 16, 32, 48, 64, 128))
        oob = rng.choice(("zero", "zero", "nan"))
    else:
        dims = [rng.randint(1, 400) for _ in range(rank)]
        row = -(-dims[0] * eb // unit) * unit if rank else unit
        strides = [row * math.prod(dims[1:k]) for k in range(1, rank)]
        span = SWIZZLE_SPAN[swizzle] if interleave == "none" and swizzle != "none" else 256 * eb
        inner = 16 * rng.randint(1, min(span, 256 * eb) // 16)
        box = [max(1, inner // eb)] + [rng.choice((1, 2, 4, 8, 16)) for _ in range(rank - 1)]
        box = box[:rank]
        es = [rng.choice((1, 1, 1, 2, 4, 8)) for _ in range(rank)]
        offset = rng.choice((0, 0, 16, 32, 64)) if interleave != "32B" else rng.choice((0, 32))
        if field == "dim" and rank:
            dims[rng.randrange(rank)] = rng.choice((0, 2**32, 2**32 + 1))
        elif field == "stride" and rank > 1:
            strides[rng.randrange(rank - 1)] = rng.choice((8, 24, 48, 2**40 - 32, 2**40))
        elif field == "box" and rank:
            box[rng.randrange(rank)] = rng.choice((0, 256, 257))
        elif field == "inner" and rank:
            box[0] = rng.choice((1, 3, 5, 24, 40, 72, 136))
        elif field == "span" and rank:
            box[0] = min(256, 2 * max(1, SWIZZLE_SPAN[swizzle]) // eb)
        elif field == "es" and rank:
            es[rng.randrange(rank)] = rng.choice((0, 8, 9))
        elif field == "addr":
            offset = rng.choice((8, 16, 24, 48))
        elif field == "nan":
            oob = "nan"
        elif field == "big" and rank >= 2:
            box[1:] = [rng.choice((64, 128, 200, 256)) for _ in range(rank - 1)]
    address = base + offset
    spec = TensorMapSpec(
        dtype,
        eb,
        rank,
        tuple(dims),
        tuple(strides),
        tuple(box),
        tuple(es),
        interleave,
        swizzle,
        rng.choice(L2_PROMOTIONS),
        oob,
        _aligned(address),
    )
    return spec, address


def random_descriptors(n: int, seed: int, base: int) -> list[tuple[TensorMapSpec, int]]:
    rng = random.Random(seed)
    return [_random_descriptor(rng, base) for _ in range(n)]


def test_random_descriptors_match_driver(hw: hw_probe.Hopper, scratch: int) -> None:
    smem = hw.shared_memory_per_sm()
    agree_ok = agree_refused = lenient = 0
    sole: Counter[str] = Counter()  # driver refused a descriptor breaking this rule alone
    disagreements: list[str] = []
    for spec, address in random_descriptors(RANDOM_DESCRIPTORS, RANDOM_SEED, scratch):
        model = admissibility(spec, max_box_bytes=smem)
        drv = hw.encode(spec, address)
        if model and {v.rule for v in model} <= DRIVER_LENIENT_RULES:
            lenient += 1
            continue
        if drv.accepted == (not model):
            if drv.accepted:
                agree_ok += 1
            else:
                agree_refused += 1
                if len({v.code for v in model}) == 1:
                    sole[model[0].code] += 1
            continue
        disagreements.append(
            f"driver {'accepted' if drv.accepted else 'refused ' + drv.error}; model "
            f"{[v.code for v in model] or 'admissible'}; {spec}"
        )
    print(
        f"random descriptors: {RANDOM_DESCRIPTORS} (seed {RANDOM_SEED}); both accept {agree_ok}, "
        f"both refuse {agree_refused}, documented leniency {lenient}, disagree "
        f"{len(disagreements)}; rules refused as the only violation: {dict(sorted(sole.items()))}"
    )
    assert not disagreements, "\n".join(disagreements[:25])
    # The sweep must exercise both verdicts and each rule the driver can be asked about.
    assert agree_ok >= RANDOM_DESCRIPTORS // 10
    assert agree_refused >= RANDOM_DESCRIPTORS // 10
    wanted = {"TS501", "TS502", "TS503", "TS504", "TS505", "TS506", "TS507", "TS509", "TS511"}
    wanted |= {"TS512", "TS515"}
    assert wanted <= set(sole), f"rules never seen alone: {sorted(wanted - set(sole))}"


# ---------------------------------------------------------------------------------------------
# (b) where a tile load puts each element: tma_box_byte_offset against shared memory
# ---------------------------------------------------------------------------------------------

_NP_TYPES = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


@dataclass(frozen=True)
class TileCase:
    """One load: row-major tensor `shape` of `dtype` holding (linear index + 1), a box at
    `coords` (row-major, may be negative or run past the end), landing `smem_offset` bytes
    after a 1024-aligned shared address; `global_shift` moves the tensor's base address."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    box: tuple[int, ...]
    swizzle: str
    smem_offset: int
    coords: tuple[int, ...] | None = None
    global_shift: int = 0
    traversal: tuple[int, ...] | None = None


_S2 = (200, 256)  # u16 values 1..51200 stay distinct
TILE_CASES = [
    # 128B swizzle: full 128-byte rows, narrow rows, bases on and off the 1024-byte period
    TileCase("128B 64x64 @0", "u16", _S2, (64, 64), "128B", 0),
    TileCase("128B 64x64 @384", "u16", _S2, (64, 64), "128B", 384),
    TileCase("128B 32x64 @1280", "u16", _S2, (32, 64), "128B", 1280),
    TileCase("128B 16x32 (64B rows) @0", "u16", _S2, (16, 32), "128B", 0),
    TileCase("128B 16x32 (64B rows) @128", "u16", _S2, (16, 32), "128B", 128),
    TileCase("128B 16x16 (32B rows) @640", "u16", _S2, (16, 16), "128B", 640),
    TileCase("128B 8x8 (16B rows) @256", "u16", _S2, (8, 8), "128B", 256),
    TileCase("128B u32 32x32 @896", "u32", (128, 96), (32, 32), "128B", 896),
    TileCase("128B 3-D 2x8x64 @512", "u16", (4, 50, 256), (2, 8, 64), "128B", 512, (1, 3, 64)),
    TileCase("128B global base +16", "u16", _S2, (64, 64), "128B", 0, (3, 8), global_shift=16),
    TileCase("128B partial OOB high", "u16", _S2, (16, 64), "128B", 0, (190, 224)),
    TileCase("128B partial OOB low @128", "u16", _S2, (16, 64), "128B", 128, (-5, -16)),
    TileCase("128B row stride 2", "u16", _S2, (9, 64), "128B", 0, (1, 0), traversal=(2, 1)),
    # 64B swizzle
    TileCase("64B 16x32 @0", "u16", _S2, (16, 32), "64B", 0),
    TileCase("64B 16x32 @128", "u16", _S2, (16, 32), "64B", 128),
    TileCase("64B 16x32 @256", "u16", _S2, (16, 32), "64B", 256),
    TileCase("64B 16x16 (32B rows) @384", "u16", _S2, (16, 16), "64B", 384),
    TileCase("64B u32 16x16 @1152", "u32", (128, 96), (16, 16), "64B", 1152),
    TileCase("64B partial OOB", "u16", _S2, (16, 32), "64B", 0, (192, 240)),
    # 32B swizzle
    TileCase("32B 16x16 @0", "u16", _S2, (16, 16), "32B", 0),
    TileCase("32B 16x16 @128", "u16", _S2, (16, 16), "32B", 128),
    TileCase("32B 8x8 (16B rows) @0", "u16", _S2, (8, 8), "32B", 0),
    TileCase("32B 8x8 (16B rows) @128", "u16", _S2, (8, 8), "32B", 128),
    TileCase("32B u64 8x4 @896", "u64", (64, 32), (8, 4), "32B", 896),
    TileCase("32B partial OOB", "u16", _S2, (16, 16), "32B", 128, (196, -8)),
    # no swizzle
    TileCase("none 64x64 @0", "u16", _S2, (64, 64), "none", 0),
    TileCase("none 5x24 (48B rows) @128", "u16", _S2, (5, 24), "none", 128, (7, 40)),
    TileCase("none 8x8 @384", "u16", _S2, (8, 8), "none", 384),
    TileCase("none 1-D partial OOB", "u16", (1000,), (64,), "none", 128, (976,)),
    TileCase("none dim-0 stride ignored", "u16", _S2, (8, 64), "none", 0, traversal=(1, 2)),
    TileCase("none row stride 3", "u16", _S2, (8, 32), "none", 256, (2, 16), traversal=(3, 1)),
]


def _tile_spec(case: TileCase, address: int) -> TensorMapSpec:
    return TensorMapSpec.from_row_major(
        case.dtype,
        case.shape,
        case.box,
        traversal_strides=case.traversal,
        swizzle=case.swizzle,
        global_address_alignment=_aligned(address),
    )


def _expected_value(case: TileCase, box_coord: Sequence[int], steps: Sequence[int]) -> int:
    coords = case.coords or (0,) * len(case.shape)
    g = [c + j * s for c, j, s in zip(coords, box_coord, steps, strict=True)]
    if not all(0 <= x < n for x, n in zip(g, case.shape, strict=True)):
        return 0  # out-of-bounds elements are zero-filled
    linear = 0
    for x, n in zip(g, case.shape, strict=True):
        linear = linear * n + x
    return linear + 1


@pytest.mark.parametrize("case", TILE_CASES, ids=[c.name for c in TILE_CASES])
def test_tile_load_placement(hw: hw_probe.Hopper, case: TileCase) -> None:
    eb = DTYPES[case.dtype][0]
    count = math.prod(case.shape)
    assert count < 2 ** (8 * eb) - 1, "values must be distinct"
    data = (np.arange(count, dtype=np.uint64) + 1).astype(_NP_TYPES[eb])
    base = hw.alloc(data.nbytes + 256)
    address = base + case.global_shift
    hw.upload(address, data)

    spec = _tile_spec(case, address)
    smem_align = _aligned(case.smem_offset) if case.smem_offset else 1024
    assert admissibility(spec, smem_base_alignment=smem_align) == ()
    drv = hw.encode(spec, address)
    assert drv.accepted, drv.error

    coords = case.coords or (0,) * len(case.shape)
    res = hw.tile_load(
        drv.tensor_map, coords[::-1], smem_offset=case.smem_offset, tx_bytes=box_bytes(spec)
    )
    assert res.smem_base % 1024 == 0
    # The barrier closes with exactly box_bytes of transactions, and parity flips as modelled.
    assert (res.parity1_after_init, res.parity0_after_init) == (True, False)
    assert res.completed, "phase did not complete with tx = box_bytes"
    assert (res.parity1_after, res.parity0_after) == (False, True)

    trav = traversed_box(spec)[::-1]  # row-major, elements actually copied
    steps = list(spec.element_strides[::-1])
    steps[-1] = 1  # without interleave the copy ignores dimension 0's traversal stride
    footprint = box_smem_bytes(trav, eb, case.swizzle)
    covered = np.zeros(hw_probe.DUMP_BYTES, dtype=bool)
    mismatches = []
    for c in itertools.product(*(range(d) for d in trav)):
        rel = tma_box_byte_offset(c, trav, eb, case.swizzle, res.smem_base + case.smem_offset)
        assert 0 <= rel <= footprint - eb, f"{c} predicted outside box_smem_bytes"
        off = case.smem_offset + rel
        got = int.from_bytes(res.dump[off : off + eb].tobytes(), "little")
        want = _expected_value(case, c, steps)
        covered[off : off + eb] = True
        if got != want:
            mismatches.append(f"{c}: byte {off} holds {got}, expected {want}")
    assert not mismatches, f"{len(mismatches)} misplaced elements: {mismatches[:5]}"
    stray = np.flatnonzero((res.dump != hw_probe.SENTINEL) & ~covered)
    assert stray.size == 0, f"bytes written outside the prediction: {stray[:8].tolist()}"


# The box's first element along dimension 0 must start on a 16-byte boundary of global memory
# (coordinate x element size, the base being 16-aligned by TS506); otherwise the copy traps with
# an illegal instruction instead of loading. The driver cannot see it (coordinates are run-time
# operands) and tma_rules does not model it yet (docs/hardware-runs.md). A trap poisons the
# context, so each of these loads runs in a child process.
# (name, dtype, row-major shape, box, coords, swizzle, traps)
START_ALIGNMENT = [
    ("u16 col 8 = 16 B", "u16", (64, 256), (8, 64), (0, 8), "none", False),
    ("u16 col 4 = 8 B", "u16", (64, 256), (8, 64), (0, 4), "none", True),
    ("u16 col -4 = -8 B", "u16", (64, 256), (8, 64), (0, -4), "none", True),
    ("u16 col 4 = 8 B, 128B swizzle", "u16", (64, 256), (8, 64), (0, 4), "128B", True),
    ("u16 row 3 col 0", "u16", (64, 256), (8, 64), (3, 0), "none", False),
    ("u8 col 8 = 8 B", "u8", (64, 256), (8, 64), (0, 8), "none", True),
    ("u8 col 16 = 16 B", "u8", (64, 256), (8, 64), (0, 16), "none", False),
    ("u32 col 2 = 8 B", "u32", (64, 128), (8, 32), (0, 2), "none", True),
    ("u64 col 1 = 8 B", "u64", (64, 64), (8, 16), (0, 1), "none", True),
    ("u16 1-D col 980 = 1960 B, partly out of bounds", "u16", (1000,), (64,), (980,), "none", True),
]


@pytest.mark.parametrize(
    ("name", "dtype", "shape", "box", "coords", "swizzle", "traps"),
    START_ALIGNMENT,
    ids=[c[0] for c in START_ALIGNMENT],
)
def test_box_start_must_be_16_byte_aligned(
    hw: hw_probe.Hopper, name, dtype, shape, box, coords, swizzle, traps: bool
) -> None:
    status, completed = hw_probe.isolated_tile_load(hw.cubin, dtype, shape, box, coords, swizzle)
    print(f"{name}: {status} completed={completed}")
    if traps:
        assert status == "CUDA_ERROR_ILLEGAL_INSTRUCTION"
    else:
        assert (status, completed) == ("CUDA_SUCCESS", True)


@pytest.mark.parametrize("delta", [16, -16])
def test_wrong_tx_count_leaves_phase_open(hw: hw_probe.Hopper, delta: int) -> None:
    """box_bytes is the complete-tx count: arming with 16 bytes more or less never closes."""
    case = TileCase("tx", "u16", _S2, (64, 64), "128B", 0)
    data = (np.arange(math.prod(_S2), dtype=np.uint32) + 1).astype(np.uint16)
    address = hw.alloc(data.nbytes)
    hw.upload(address, data)
    spec = _tile_spec(case, address)
    drv = hw.encode(spec, address)
    assert drv.accepted, drv.error
    nbytes = box_bytes(spec)
    res = hw.tile_load(
        drv.tensor_map, (0, 0), smem_offset=0, tx_bytes=nbytes + delta, timeout_cycles=2_000_000
    )
    assert not res.completed
    assert (res.parity1_after, res.parity0_after) == (True, False)
    model, _ = MbarrierState().init(1).arrive_expect_tx(nbytes + delta)
    model = model.complete_tx(nbytes)
    assert model.test_wait_parity(0) is False and model.tx == delta


# ---------------------------------------------------------------------------------------------
# (c) mbarrier phases and parity waits: MbarrierState against the device
# ---------------------------------------------------------------------------------------------

Op = tuple[int, int, int]
_WAITS = (hw_probe.OP_TEST_WAIT_PARITY, hw_probe.OP_TRY_WAIT_PARITY)


def _model_run(program: Sequence[Op]) -> list[int]:
    """Execute a program on MbarrierState (one per barrier index); -1 for non-waits."""
    bars: dict[int, MbarrierState] = {}
    out = []
    for op, b, arg in program:
        s = bars.get(b, MbarrierState())
        r = -1
        if op == hw_probe.OP_INIT:
            s = s.init(arg)
        elif op == hw_probe.OP_ARRIVE:
            s, _ = s.arrive(arg)
        elif op == hw_probe.OP_EXPECT_TX:
            s = s.expect_tx(arg)
        elif op == hw_probe.OP_COMPLETE_TX:
            s = s.complete_tx(arg)
        elif op == hw_probe.OP_ARRIVE_EXPECT_TX:
            s, _ = s.arrive_expect_tx(arg)
        elif op in _WAITS:
            r = int(s.test_wait_parity(arg))
        elif op == hw_probe.OP_INVAL:
            s = s.inval()
        bars[b] = s
        out.append(r)
    return out


I, A, E, C, AE, T, W, X = (
    hw_probe.OP_INIT,
    hw_probe.OP_ARRIVE,
    hw_probe.OP_EXPECT_TX,
    hw_probe.OP_COMPLETE_TX,
    hw_probe.OP_ARRIVE_EXPECT_TX,
    hw_probe.OP_TEST_WAIT_PARITY,
    hw_probe.OP_TRY_WAIT_PARITY,
    hw_probe.OP_INVAL,
)

# (name, program on barrier 0, the wait answers expected, in order)
SCRIPTS: list[tuple[str, list[Op], list[int]]] = [
    (
        "parity right after init, after one phase, after two",
        [(I, 0, 1), (T, 0, 1), (T, 0, 0), (W, 0, 1), (W, 0, 0), (A, 0, 1)]
        + [(T, 0, 0), (T, 0, 1), (W, 0, 0), (W, 0, 1), (A, 0, 1), (T, 0, 1), (T, 0, 0), (X, 0, 0)],
        [1, 0, 1, 0, 1, 0, 1, 0, 1, 0],
    ),
    (
        "expect_tx then arrive: the phase waits for the bytes",
        [(I, 0, 1), (E, 0, 64), (T, 0, 0), (A, 0, 1), (T, 0, 0), (C, 0, 32), (T, 0, 0)]
        + [(C, 0, 32), (T, 0, 0), (T, 0, 1), (X, 0, 0)],
        [0, 0, 0, 1, 0],
    ),
    (
        "arrive.expect_tx then complete_tx",
        [(I, 0, 1), (AE, 0, 48), (W, 0, 0), (C, 0, 48), (W, 0, 0), (X, 0, 0)],
        [0, 1],
    ),
    (
        "count 2: bytes done, one arrival still missing",
        [(I, 0, 2), (E, 0, 32), (A, 0, 1), (T, 0, 0), (C, 0, 32), (T, 0, 0), (A, 0, 1)]
        + [(T, 0, 0), (T, 0, 1), (X, 0, 0)],
        [0, 0, 1, 0],
    ),
    (
        "copy completes before its expect (tx goes negative)",
        [(I, 0, 1), (C, 0, 64), (T, 0, 0), (AE, 0, 64), (T, 0, 0), (T, 0, 1), (X, 0, 0)],
        [0, 1, 0],
    ),
    (
        "arrive with a count",
        [(I, 0, 3), (A, 0, 2), (T, 0, 0), (A, 0, 1), (T, 0, 0), (A, 0, 3), (T, 0, 1), (X, 0, 0)],
        [0, 1, 1],
    ),
]


@pytest.mark.parametrize(("name", "program", "want"), SCRIPTS, ids=[s[0] for s in SCRIPTS])
def test_mbarrier_script(hw: hw_probe.Hopper, name: str, program: list[Op], want: list[int]):
    model = [r for r in _model_run(program) if r >= 0]
    assert model == want, "the script's expectation disagrees with MbarrierState"
    (device,) = hw.mbarrier_programs([program])
    assert [r for r in device if r >= 0] == want


def test_expect_tx_closing_a_phase_is_refused_by_the_model(hw: hw_probe.Hopper) -> None:
    """Arrivals done, tx at -64, then expect_tx(64): PTX does not say whether that completes
    the phase. The H100 completes it; tilesafe refuses to rely on either answer (TS416)."""
    program = [(I, 0, 1), (C, 0, 64), (A, 0, 1), (T, 0, 0), (E, 0, 64), (T, 0, 0), (T, 0, 1)]
    (device,) = hw.mbarrier_programs([program])
    answers = [r for r in device if r >= 0]
    print(f"expect_tx back to zero after all arrivals: waits answered {answers}")
    assert answers[0] == 0  # tx = -64 keeps the phase open after the last arrival
    assert answers[1:] == [1, 0], "observed on H100 (driver 580): the phase completes"
    s = MbarrierState().init(1).complete_tx(64)
    s, _ = s.arrive()
    with pytest.raises(MbarrierError) as err:
        s.expect_tx(64)
    assert err.value.code == "TS416"


_TX_CHOICES = (0, 16, 32, 64, 100, 1024, 65536)


def random_mbarrier_program(rng: random.Random, length: int) -> list[Op]:
    """A straight-line program on barriers 0 and 1 that stays inside what PTX defines: each
    candidate op is tried on the model first and dropped if the model calls it an error
    (over-arrival, tx range, TS416). Ends by invalidating both barriers."""
    states = {0: MbarrierState(), 1: MbarrierState()}
    prog: list[Op] = []
    for b in (0, 1):
        count = rng.choice((1, 1, 2, 3, 4))
        prog.append((I, b, count))
        states[b] = states[b].init(count)
    while len(prog) < length:
        b = rng.choice((0, 1))
        s = states[b]
        op = rng.choice((A, A, E, C, C, AE, T, W))
        if op == A:
            arg = rng.randint(1, max(1, s.pending))
        elif op in (E, C, AE):
            arg = rng.choice(_TX_CHOICES)
        else:
            arg = rng.randint(0, 1)
        try:
            if op == A:
                s, _ = s.arrive(arg)
            elif op == E:
                s = s.expect_tx(arg)
            elif op == C:
                s = s.complete_tx(arg)
            elif op == AE:
                s, _ = s.arrive_expect_tx(arg)
        except MbarrierError:
            continue
        states[b] = s
        prog.append((op, b, arg))
    prog += [(X, 0, 0), (X, 1, 0)]
    return prog


def test_random_mbarrier_programs_match_model(hw: hw_probe.Hopper) -> None:
    rng = random.Random(MBAR_SEED)
    programs = [random_mbarrier_program(rng, 48) for _ in range(MBAR_PROGRAMS)]
    device = hw.mbarrier_programs(programs)
    waits = Counter()
    bad = []
    for i, (prog, dev) in enumerate(zip(programs, device, strict=True)):
        model = _model_run(prog)
        for j, (op, m, d) in enumerate(zip(prog, model, dev, strict=True)):
            if m < 0:
                assert d == -1
                continue
            waits[(op[0], m)] += 1
            if m != d:
                bad.append(f"program {i} op {j} {op}: model {m}, device {d}; {prog[: j + 1]}")
    print(f"mbarrier programs: {len(programs)} (seed {MBAR_SEED}); waits by (op, answer): {waits}")
    assert not bad, "\n".join(bad[:5])
    # Both answers of both wait instructions must have been exercised.
    assert all(waits[(op, a)] >= 50 for op in _WAITS for a in (0, 1)), waits
