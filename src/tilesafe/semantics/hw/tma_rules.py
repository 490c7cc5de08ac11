"""Hardware rules for Hopper TMA tensor maps and where the copy engine puts a box in shared memory.

Why this module exists: the TMA checker must refuse a descriptor the driver would refuse (or a
copy that would fault) before anything runs, and the layout checker must know the *exact*
byte every box element lands on, swizzle included, to prove that the consumer's layout reads
what the copy engine wrote. Pure Python; no IR, no solver. Sources and our own wording of each
rule: docs/hardware-rules.md.

Codes (stable; every violation carries one):

  TS501  tensor rank outside 1..5
  TS502  a box dimension outside 1..256
  TS503  inner box row (box_dims[0] * element size) not a multiple of 16 bytes
  TS504  inner box row wider than the swizzle span (32/64/128 bytes)
  TS505  a global stride not a multiple of 16 (32 with 32-byte interleave), or >= 2**40
  TS506  global base address not 16-byte aligned (32 with 32-byte interleave)
  TS507  an element stride outside 1..8
  TS508  element type not a plain TMA type, or elem_bytes disagrees with it
  TS509  interleave rules: rank must be >= 3; 32-byte interleave needs the 32-byte swizzle
  TS510  shared-memory destination not 128-byte aligned
  TS511  a global dimension outside 1..2**32
  TS512  NaN out-of-bounds fill on a non-floating-point type
  TS513  unknown enumeration value (interleave, swizzle, L2 promotion, OOB fill)
  TS514  array lengths do not match the rank
  TS515  the driver's box size exceeds the device's shared memory per SM (233472)

Where the driver and the documents differ (checked on an H100, driver 580; see the docs):
TS503 is enforced by the driver for every interleave mode, not only 'none' as documented;
TS509's "32-byte interleave needs the 32-byte swizzle" is documented but not enforced by
that driver -- tilesafe keeps the documented rule; TS515 is enforced but not documented.

Symbolic sizes. Everything except the global dimensions, the global strides and the global
address is a compile-time constant in a kernel, so `static_violations` checks it directly.
The rest are per-operand linear facts ("lo <= v <= hi and v % m == 0"); `operand_rules`
returns them as data so a checker can prove them for every size allowed by a kernel's
`where` clause (isl / z3), and `admissibility` simply evaluates them on concrete values.
Whatever the caller does, the two together are exactly the rule set.

Conventions. Arrays in `TensorMapSpec` are innermost-first, as the driver takes them
(`global_dims[0]` is the contiguous dimension; `global_strides_bytes[k]` is the byte stride
of dimension k+1). `TensorMapSpec.from_row_major` builds one from row-major shapes.
`tma_box_byte_offset` and `synthesize` take box coordinates in row-major order (last index
fastest), the order kernels index shared buffers in.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

DRIVER_API = (
    "CUDA Driver API, 6.30 Tensor Map Object Management, cuTensorMapEncodeTiled, "
    "https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__TENSOR__MEMORY.html"
)
PROG_GUIDE_SWIZZLE = (
    "CUDA C++ Programming Guide, TMA Swizzle (Table: swizzle pattern requirements), "
    "https://docs.nvidia.com/cuda/cuda-programming-guide/04-special-topics/async-copies.html"
)
DRIVER_OBSERVED = (
    "Observed: cuTensorMapEncodeTiled, driver 580.159.04 on an H100 (docs/hardware-rules.md, "
    "'Checked on hardware')"
)
PTX_SWIZZLE = (
    "PTX ISA 5.5.7 Swizzling Modes, "
    "https://docs.nvidia.com/cuda/parallel-thread-execution/#tensor-swizzling-modes"
)

# code -> (what it means, where the rule comes from); for reports and docs.
RULES: dict[str, tuple[str, str]] = {
    "TS501": ("tensor rank outside 1..5", DRIVER_API),
    "TS502": ("box dimension outside 1..256", DRIVER_API),
    "TS503": ("inner box row not a multiple of 16 bytes", DRIVER_API),
    "TS504": ("inner box row wider than the swizzle span", DRIVER_API),
    "TS505": ("global stride not a multiple of 16 (32) or >= 2**40", DRIVER_API),
    "TS506": ("global address not 16-byte (32-byte) aligned", DRIVER_API),
    "TS507": ("element stride outside 1..8", DRIVER_API),
    "TS508": ("not a plain TMA element type", DRIVER_API),
    "TS509": ("interleave needs rank >= 3; 32B interleave needs 32B swizzle", DRIVER_API),
    "TS510": ("shared destination not 128-byte aligned", PROG_GUIDE_SWIZZLE),
    "TS511": ("global dimension outside 1..2**32", DRIVER_API),
    "TS512": ("NaN OOB fill on a non-float type", DRIVER_API),
    "TS513": ("unknown enumeration value", DRIVER_API),
    "TS514": ("array length does not match the rank", DRIVER_API),
    "TS515": ("box larger than shared memory per SM", DRIVER_OBSERVED),
    # A run-time operand, not a descriptor field: the TMA checker proves it per copy.
    "TS516": ("innermost box start coordinate not 16-byte aligned (the copy traps)",
              "measured on an H100 (tests/gpu/test_hw_tma.py)"),
}

# Plain TMA element types: name -> (bytes, floating point?). Names follow CUtensorMapDataType.
DTYPES: dict[str, tuple[int, bool]] = {
    "u8": (1, False),
    "u16": (2, False),
    "u32": (4, False),
    "i32": (4, False),
    "u64": (8, False),
    "i64": (8, False),
    "f16": (2, True),
    "f32": (4, True),
    "f64": (8, True),
    "bf16": (2, True),
    "f32_ftz": (4, True),
    "tf32": (4, True),
    "tf32_ftz": (4, True),
}
# The sub-byte packed types exist in the driver but tilesafe does not model them.
PACKED_DTYPES = frozenset({"16u4_align8b", "16u4_align16b", "16u6_align16b"})
# Kernel element types with no TMA type of their own travel as the unsigned type of the same
# width: a tile copy moves bytes, so the carrier is bit-exact (only NaN fill cares).
CARRIERS: dict[str, str] = {"i8": "u8", "e4m3": "u8", "e5m2": "u8", "i16": "u16"}

INTERLEAVES = ("none", "16B", "32B")
SWIZZLES = ("none", "32B", "64B", "128B")
L2_PROMOTIONS = ("none", "64B", "128B", "256B")
OOB_FILLS = ("zero", "nan")

MAX_RANK = 5
MAX_BOX_DIM = 256
MAX_ELEMENT_STRIDE = 8
MAX_GLOBAL_DIM = 2**32
STRIDE_LIMIT = 2**40  # strides must be strictly below this
SMEM_ALIGNMENT = 128  # every bulk-tensor shared-memory destination, any swizzle mode
MAX_BOX_BYTES = 233472  # H100/H200 shared memory per SM; the driver refuses larger copies

SWIZZLE_SPAN = {"none": 0, "32B": 32, "64B": 64, "128B": 128}
SWIZZLE_PERIOD = {"none": 16, "32B": 256, "64B": 512, "128B": 1024}
_SWIZZLE_ROW_MASK = {"none": 0, "32B": 1, "64B": 3, "128B": 7}


@dataclass(frozen=True)
class RuleViolation:
    code: str
    rule: str
    message: str
    citation: str


@dataclass(frozen=True)
class TensorMapSpec:
    """Everything `cuTensorMapEncodeTiled` is given, innermost dimension first.

    `global_address_alignment` is the largest power of two known to divide the base address
    (cudaMalloc gives at least 256). `oob_fill` 'zero' is the driver's FILL_NONE (zeros);
    'nan' is FILL_NAN_REQUEST_ZERO_FMA.
    """

    dtype: str
    elem_bytes: int
    rank: int
    global_dims: tuple[int, ...]
    global_strides_bytes: tuple[int, ...]
    box_dims: tuple[int, ...]
    element_strides: tuple[int, ...]
    interleave: str = "none"
    swizzle: str = "none"
    l2_promotion: str = "none"
    oob_fill: str = "zero"
    global_address_alignment: int = 256

    @staticmethod
    def from_row_major(
        dtype: str,
        shape: Sequence[int],
        box: Sequence[int],
        *,
        elem_strides_row_major: Sequence[int] | None = None,
        traversal_strides: Sequence[int] | None = None,
        swizzle: str = "none",
        interleave: str = "none",
        l2_promotion: str = "none",
        oob_fill: str = "zero",
        global_address_alignment: int = 256,
    ) -> TensorMapSpec:
        """Build a spec from row-major `shape`/`box` (last index contiguous).

        `elem_strides_row_major` are the tensor's strides in elements (default: packed
        row-major); the last one must be 1, since TMA has no stride for dimension 0.
        `traversal_strides` are the driver's elementStrides, row-major order (default all 1).
        """
        carrier = CARRIERS.get(dtype, dtype)
        eb = DTYPES[carrier][0] if carrier in DTYPES else 0
        rank = len(shape)
        if elem_strides_row_major is None:
            strides = [math.prod(shape[i + 1 :]) for i in range(rank)]
        else:
            strides = list(elem_strides_row_major)
        if len(strides) != rank or (rank and strides[-1] != 1):
            raise ValueError("row-major strides must have one entry per dimension and end in 1")
        trav = list(traversal_strides) if traversal_strides is not None else [1] * rank
        return TensorMapSpec(
            dtype=carrier,
            elem_bytes=eb,
            rank=rank,
            global_dims=tuple(reversed(shape)),
            global_strides_bytes=tuple(s * eb for s in reversed(strides[:-1])),
            box_dims=tuple(reversed(box)),
            element_strides=tuple(reversed(trav)),
            interleave=interleave,
            swizzle=swizzle,
            l2_promotion=l2_promotion,
            oob_fill=oob_fill,
            global_address_alignment=global_address_alignment,
        )


@dataclass(frozen=True)
class OperandRule:
    """A linear fact one run-time operand must satisfy: minimum <= v <= maximum, v % m == 0.

    `field` is 'global_dim', 'global_stride' or 'global_address'; `index` is the position in
    the driver's innermost-first array (0 for the address). For 'global_address' the value
    may be the address or its power-of-two alignment: for power-of-two moduli both agree.
    """

    code: str
    rule: str
    field: str
    index: int
    minimum: int | None
    maximum: int | None
    multiple_of: int
    citation: str

    def holds(self, value: int) -> bool:
        if self.minimum is not None and value < self.minimum:
            return False
        if self.maximum is not None and value > self.maximum:
            return False
        return value % self.multiple_of == 0

    def describe(self) -> str:
        parts = []
        if self.minimum is not None:
            parts.append(f">= {self.minimum}")
        if self.maximum is not None:
            parts.append(f"<= {self.maximum}")
        if self.multiple_of != 1:
            parts.append(f"a multiple of {self.multiple_of}")
        return f"{self.field}[{self.index}] must be " + " and ".join(parts)


def _v(code: str, rule: str, message: str, citation: str = DRIVER_API) -> RuleViolation:
    return RuleViolation(code, rule, message, citation)


def _enum_violations(spec: TensorMapSpec) -> list[RuleViolation]:
    out = []
    for name, value, allowed in (
        ("interleave", spec.interleave, INTERLEAVES),
        ("swizzle", spec.swizzle, SWIZZLES),
        ("l2_promotion", spec.l2_promotion, L2_PROMOTIONS),
        ("oob_fill", spec.oob_fill, OOB_FILLS),
    ):
        if value not in allowed:
            out.append(_v("TS513", f"{name}-enum", f"{name} {value!r} is not one of {allowed}"))
    return out


def _dtype_violations(spec: TensorMapSpec) -> list[RuleViolation]:
    if spec.dtype in PACKED_DTYPES:
        return [_v("TS508", "dtype", f"packed type {spec.dtype} is not modelled by tilesafe")]
    if spec.dtype not in DTYPES:
        hint = f" (copy it as {CARRIERS[spec.dtype]})" if spec.dtype in CARRIERS else ""
        return [_v("TS508", "dtype", f"{spec.dtype!r} is not a TMA element type{hint}")]
    size, is_float = DTYPES[spec.dtype]
    out = []
    if spec.elem_bytes != size:
        out.append(
            _v("TS508", "dtype-size", f"{spec.dtype} is {size} bytes, not {spec.elem_bytes}")
        )
    if spec.oob_fill == "nan" and not is_float:
        out.append(
            _v(
                "TS512",
                "oob-nan-float",
                f"NaN out-of-bounds fill needs a float type, not {spec.dtype}",
            )
        )
    return out


def _shape_violations(spec: TensorMapSpec) -> list[RuleViolation]:
    """Rank and array lengths; when these fail the per-dimension rules cannot be read."""
    if not 1 <= spec.rank <= MAX_RANK:
        return [_v("TS501", "rank", f"rank {spec.rank} is outside 1..{MAX_RANK}")]
    out = []
    for name, arr, want in (
        ("global_dims", spec.global_dims, spec.rank),
        ("global_strides_bytes", spec.global_strides_bytes, spec.rank - 1),
        ("box_dims", spec.box_dims, spec.rank),
        ("element_strides", spec.element_strides, spec.rank),
    ):
        if len(arr) != want:
            out.append(
                _v(
                    "TS514",
                    "arity",
                    f"{name} has {len(arr)} entries; rank {spec.rank} needs {want}",
                )
            )
    return out


def static_violations(
    spec: TensorMapSpec,
    *,
    smem_base_alignment: int | None = None,
    max_box_bytes: int = MAX_BOX_BYTES,
) -> tuple[RuleViolation, ...]:
    """Every rule that does not depend on global dims, global strides or the global address.

    `smem_base_alignment` (the power of two known to divide the shared-memory destination)
    enables TS510; leave it None when the destination is checked elsewhere.
    `max_box_bytes` is the device's shared memory per SM (TS515; 233472 on H100/H200).
    """
    out = _enum_violations(spec) + _dtype_violations(spec)
    shape = _shape_violations(spec)
    out += shape
    if shape:
        return tuple(out)
    if spec.interleave != "none" and spec.interleave in INTERLEAVES:
        if spec.rank < 3:
            out.append(
                _v("TS509", "interleave-rank", f"interleave needs rank >= 3, not {spec.rank}")
            )
        if spec.interleave == "32B" and spec.swizzle != "32B":
            out.append(
                _v(
                    "TS509",
                    "interleave-swizzle",
                    f"32B interleave needs the 32B swizzle, not {spec.swizzle}",
                )
            )
    for i, b in enumerate(spec.box_dims):
        if not 1 <= b <= MAX_BOX_DIM:
            out.append(_v("TS502", "box-dim", f"box_dims[{i}] = {b} is outside 1..{MAX_BOX_DIM}"))
    for i, e in enumerate(spec.element_strides):
        if not 1 <= e <= MAX_ELEMENT_STRIDE:
            out.append(
                _v(
                    "TS507",
                    "element-stride",
                    f"element_strides[{i}] = {e} is outside 1..{MAX_ELEMENT_STRIDE}",
                )
            )
    inner = spec.box_dims[0] * spec.elem_bytes
    if inner % 16 != 0:
        # Documented for interleave 'none'; the driver also enforces it with interleave.
        out.append(
            _v(
                "TS503",
                "inner-box-16B",
                f"inner box row is {inner} bytes, not a multiple of 16",
            )
        )
    sizable = all(e >= 1 for e in spec.element_strides)  # else the driver size is undefined
    if sizable and driver_box_bytes(spec) > max_box_bytes:
        out.append(
            _v(
                "TS515",
                "box-bytes",
                f"the driver sizes this box at {driver_box_bytes(spec)} bytes and refuses more "
                f"than {max_box_bytes} (the device's shared memory per SM)",
                DRIVER_OBSERVED,
            )
        )
    if spec.interleave == "none":
        span = SWIZZLE_SPAN.get(spec.swizzle, 0)
        if span and inner > span:
            out.append(
                _v(
                    "TS504",
                    "swizzle-span",
                    f"inner box row is {inner} bytes, wider than the {spec.swizzle} swizzle span",
                )
            )
    if smem_base_alignment is not None and smem_base_alignment % SMEM_ALIGNMENT != 0:
        out.append(
            _v(
                "TS510",
                "smem-align",
                f"shared destination is {smem_base_alignment}-aligned; TMA needs {SMEM_ALIGNMENT}",
                PROG_GUIDE_SWIZZLE,
            )
        )
    return tuple(out)


def operand_rules(spec: TensorMapSpec) -> tuple[OperandRule, ...]:
    """The linear facts each global dim, global stride and the base address must satisfy."""
    rank = max(0, min(spec.rank, MAX_RANK))
    stride_mod = 32 if spec.interleave == "32B" else 16
    addr_mod = 32 if spec.interleave == "32B" else 16
    rules = [
        OperandRule("TS511", "global-dim", "global_dim", i, 1, MAX_GLOBAL_DIM, 1, DRIVER_API)
        for i in range(rank)
    ]
    rules += [
        OperandRule(
            "TS505",
            "global-stride",
            "global_stride",
            k,
            None,
            STRIDE_LIMIT - 1,
            stride_mod,
            DRIVER_API,
        )
        for k in range(max(0, rank - 1))
    ]
    rules.append(
        OperandRule("TS506", "global-align", "global_address", 0, None, None, addr_mod, DRIVER_API)
    )
    return tuple(rules)


def _operand_value(spec: TensorMapSpec, rule: OperandRule) -> int:
    if rule.field == "global_dim":
        return spec.global_dims[rule.index]
    if rule.field == "global_stride":
        return spec.global_strides_bytes[rule.index]
    return spec.global_address_alignment


def admissibility(
    spec: TensorMapSpec,
    *,
    smem_base_alignment: int | None = None,
    max_box_bytes: int = MAX_BOX_BYTES,
) -> tuple[RuleViolation, ...]:
    """All rule violations of a concrete spec; empty means the driver and the copy accept it."""
    out = list(
        static_violations(
            spec, smem_base_alignment=smem_base_alignment, max_box_bytes=max_box_bytes
        )
    )
    if any(v.code in ("TS501", "TS514") for v in out):
        return tuple(out)
    for rule in operand_rules(spec):
        value = _operand_value(spec, rule)
        if not rule.holds(value):
            out.append(
                RuleViolation(
                    rule.code, rule.rule, f"{rule.describe()}; it is {value}", rule.citation
                )
            )
    return tuple(out)


def traversed_box(spec: TensorMapSpec) -> tuple[int, ...]:
    """Elements actually copied along each dimension (innermost first).

    With element stride e the engine copies ceil(box/e) elements; without interleave the
    stride of dimension 0 is ignored, so dimension 0 always copies box_dims[0].
    """
    out = []
    for i, (b, e) in enumerate(zip(spec.box_dims, spec.element_strides, strict=True)):
        out.append(b if (i == 0 and spec.interleave == "none") else -(-b // e))
    return tuple(out)


def box_bytes(spec: TensorMapSpec) -> int:
    """Bytes one tile-mode copy of this map moves: the complete-tx count it signals."""
    return math.prod(traversed_box(spec)) * spec.elem_bytes


def driver_box_bytes(spec: TensorMapSpec) -> int:
    """The box size the driver compares with shared memory per SM (TS515).

    Observed, not documented: prod(box_i // element_stride_i) * element size, floor division,
    dimension 0 included even though the copy ignores its stride. It is *not* the number of
    bytes a copy moves (`box_bytes`) nor its footprint (`box_smem_bytes`).
    """
    return (
        math.prod(b // e for b, e in zip(spec.box_dims, spec.element_strides, strict=True))
        * spec.elem_bytes
    )


def smem_alignment(swizzle: str) -> int:
    """Alignment the shared-memory destination of a bulk tensor copy *must* have (any mode).

    The hardware rule is 128 bytes for every swizzle mode. Aligning to `swizzle_period`
    instead only makes the swizzle phase zero; it is a convenience, not a requirement.
    """
    if swizzle not in SWIZZLE_SPAN:
        raise ValueError(f"unknown swizzle {swizzle!r}")
    return SMEM_ALIGNMENT


def swizzle_period(swizzle: str) -> int:
    """Bytes after which the swizzle pattern repeats (256/512/1024; 16 for none)."""
    return SWIZZLE_PERIOD[swizzle]


def swizzle_address(addr: int, swizzle: str) -> int:
    """Absolute shared address the engine uses for the unswizzled address `addr`.

    The 16-byte chunk index inside each 128-byte line (address bits 4..6) is XORed with
    the line index (bits 7..9), masked to 1, 2 or 3 bits for 32B, 64B, 128B. An involution.
    Source: PTX_SWIZZLE (tables and base-offset formula); confirmed on an H100.
    """
    mask = _SWIZZLE_ROW_MASK[swizzle]
    return addr ^ (((addr >> 7) & mask) << 4)


def box_row_pitch(inner_bytes: int, swizzle: str) -> int:
    """Shared-memory bytes between consecutive box rows (all outer dimensions flattened).

    Without swizzle rows are packed. With a swizzle mode every row takes the full span even
    when it is narrower (an inner row of 64 bytes under 128B swizzle occupies 128 bytes);
    observed on an H100 (docs/hardware-rules.md) and what the programming guide means by
    allocating "the full swizzle width".
    """
    return max(inner_bytes, SWIZZLE_SPAN[swizzle])


def box_smem_bytes(box_dims: Sequence[int], elem_bytes: int, swizzle: str) -> int:
    """Shared-memory footprint of a box (row-major dims), padding rows included."""
    if not box_dims:
        return 0
    rows = math.prod(box_dims[:-1])
    return rows * box_row_pitch(box_dims[-1] * elem_bytes, swizzle)


def tma_box_byte_offset(
    coord_in_box: Sequence[int],
    box_dims: Sequence[int],
    elem_bytes: int,
    swizzle: str,
    smem_base_addr: int = 0,
) -> int:
    """Byte offset, from `smem_base_addr`, where a tile-mode copy writes box element `coord`.

    `box_dims` and `coord_in_box` are row-major (last index contiguous) and count the
    elements the engine copies (see `traversed_box`). The box is laid out row-major with
    rows `box_row_pitch` apart, and then every byte address is swizzled as an *absolute*
    shared address, which is why a base that is 128- but not period-aligned shifts the
    pattern. Interleaved maps are not modelled. Raises ValueError for a base the hardware
    rejects (not 128-byte aligned).
    """
    if len(coord_in_box) != len(box_dims):
        raise ValueError("coordinate and box have different ranks")
    if smem_base_addr % SMEM_ALIGNMENT != 0:
        raise ValueError(f"shared base {smem_base_addr} is not {SMEM_ALIGNMENT}-byte aligned")
    for c, d in zip(coord_in_box, box_dims, strict=True):
        if not 0 <= c < d:
            raise ValueError(f"coordinate {tuple(coord_in_box)} is outside box {tuple(box_dims)}")
    if not box_dims:
        return 0
    row = 0
    for c, d in zip(coord_in_box[:-1], box_dims[:-1], strict=True):
        row = row * d + c
    pitch = box_row_pitch(box_dims[-1] * elem_bytes, swizzle)
    addr = smem_base_addr + row * pitch + coord_in_box[-1] * elem_bytes
    return swizzle_address(addr, swizzle) - smem_base_addr


def box_arrangement_array(
    box_dims: Sequence[int], elem_bytes: int, swizzle: str, smem_base_addr: int = 0
) -> np.ndarray:
    """`tma_box_byte_offset` of every box element at once (row-major coordinate order), for
    checkers that compare whole boxes; the same formula, evaluated on numpy arrays."""
    if smem_base_addr % SMEM_ALIGNMENT != 0:
        raise ValueError(f"shared base {smem_base_addr} is not {SMEM_ALIGNMENT}-byte aligned")
    if not box_dims:
        return np.zeros(0, dtype=np.int64)
    flat = np.arange(math.prod(box_dims), dtype=np.int64)
    row, col = flat // box_dims[-1], flat % box_dims[-1]
    pitch = box_row_pitch(box_dims[-1] * elem_bytes, swizzle)
    addr = smem_base_addr + row * pitch + col * elem_bytes
    return swizzle_address(addr, swizzle) - smem_base_addr


def box_arrangement(
    box_dims: Sequence[int], elem_bytes: int, swizzle: str, smem_base_addr: int = 0
) -> tuple[int, ...]:
    """Byte offsets of every box element, row-major coordinate order."""
    ranges = [range(d) for d in box_dims]
    return tuple(
        tma_box_byte_offset(c, box_dims, elem_bytes, swizzle, smem_base_addr)
        for c in itertools.product(*ranges)
    )


@dataclass(frozen=True)
class SwizzleChoice:
    """Swizzle mode(s) whose arrangement equals the given layout; `swizzle` is preferred."""

    swizzle: str
    alternatives: tuple[str, ...] = ()


@dataclass(frozen=True)
class NoSwizzleFits:
    """Why no swizzle mode reproduces the layout: one line per mode."""

    reasons: tuple[str, ...]


MAX_SYNTH_ELEMENTS = 1 << 20


def synthesize(
    offset_fn: Callable[[tuple[int, ...]], int],
    box_dims: Sequence[int],
    elem_bytes: int,
    *,
    smem_base_addr: int = 0,
    offset_unit: str = "elements",
) -> SwizzleChoice | NoSwizzleFits:
    """Find the swizzle mode whose copy arrangement equals `offset_fn` over the whole box.

    `offset_fn` maps a row-major box coordinate to an offset from the buffer base, in
    elements (default) or bytes. Modes are tried from plainest to widest ('none' first) and
    must also pass the inner-row rules (TS503/TS504) for `box_dims`; several can fit when
    the box is small, all fitting modes are reported.
    """
    if offset_unit not in ("elements", "bytes"):
        raise ValueError("offset_unit must be 'elements' or 'bytes'")
    if math.prod(box_dims) > MAX_SYNTH_ELEMENTS:
        raise ValueError("box too large to compare element by element")
    scale = elem_bytes if offset_unit == "elements" else 1
    inner = box_dims[-1] * elem_bytes if box_dims else 0
    fits: list[str] = []
    reasons: list[str] = []
    for mode in SWIZZLES:
        span = SWIZZLE_SPAN[mode]
        if inner % 16 != 0:
            reasons.append(f"{mode}: inner box row is {inner} bytes, not a multiple of 16 (TS503)")
            continue
        if span and inner > span:
            reasons.append(
                f"{mode}: inner box row is {inner} bytes, wider than the {span}-byte span (TS504)"
            )
            continue
        mismatch = None
        for c in itertools.product(*(range(d) for d in box_dims)):
            want = offset_fn(c) * scale
            got = tma_box_byte_offset(c, box_dims, elem_bytes, mode, smem_base_addr)
            if want != got:
                mismatch = (c, want, got)
                break
        if mismatch is None:
            fits.append(mode)
        else:
            c, want, got = mismatch
            reasons.append(
                f"{mode}: element {c} is at byte {want} in the layout; the copy writes byte {got}"
            )
    if fits:
        return SwizzleChoice(fits[0], tuple(fits[1:]))
    return NoSwizzleFits(tuple(reasons))
