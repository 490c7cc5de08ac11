"""Shared-memory bank models: how many wavefronts one warp/wavefront-wide access costs.

Pure functions over concrete byte addresses (one per lane, ``None`` = inactive lane). They are
the ground truth that the swizzle synthesiser (:mod:`tilesafe.semantics.layout.swizzle_synth`) and
the bank checker are tested against, so they are deliberately simple enumerations.

Model shared by both vendors (sources are cited in ``docs/banks.md``):

* Memory is split into ``n_banks`` banks of 4-byte words; word ``w`` lives in bank
  ``w % n_banks``.
* The lanes of one instruction are split into *phases* (fixed lane groups that depend on the
  access width). Only lanes of the same phase can conflict; phases are serviced one after
  another.
* Inside one phase a bank delivers one word per cycle, so the phase costs
  ``max over banks of (distinct words wanted from that bank)`` cycles ("wavefronts"). Several
  lanes wanting the *same* word are served together (broadcast) where the vendor documents it.
* The ideal cost is one wavefront per phase that has at least one active lane.

Accesses must be naturally aligned (``addr % width == 0``): both vendors require it for
vector accesses, and it guarantees a lane's words fall in ``width/4`` distinct banks.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

WORD_BYTES = 4
NVIDIA_BANKS = 32
NVIDIA_WARP = 32
AMD_WAVE = 64

Op = Literal["read", "write"]
AmdArch = Literal["cdna3", "cdna4"]

_WIDTHS = (1, 2, 4, 8, 16)


@dataclass(frozen=True)
class WorstBank:
    """The most contended bank of the access: where a diagnostic should point."""

    phase: int  # index into the phase list of the model
    bank: int
    distinct_words: int  # cycles this bank needs in that phase
    lanes: tuple[int, ...]  # active lanes of that phase touching the bank
    addrs: tuple[int, ...]  # their byte addresses (the start of each lane's access)


@dataclass(frozen=True)
class BankReport:
    """Cost of one warp-wide (or wavefront-wide) shared-memory access."""

    wavefronts: int  # total shared-memory cycles/transactions over all phases
    ideal: int  # minimum for this width: one per phase with an active lane
    per_phase: tuple[int, ...]  # wavefronts of each phase (0 for a phase with no active lane)
    worst: WorstBank | None  # None when no lane is active

    @property
    def degree(self) -> float:
        """Conflict degree: wavefronts / ideal (1.0 = conflict-free; 1.0 when nothing runs)."""
        return self.wavefronts / self.ideal if self.ideal else 1.0

    @property
    def max_way(self) -> int:
        """Worst per-phase multiplicity (the 'N-way conflict' of the worst phase)."""
        return max(self.per_phase, default=0)

    @property
    def conflict_free(self) -> bool:
        return self.wavefronts == self.ideal


# ---------------------------------------------------------------------------------------------
# Phase tables
# ---------------------------------------------------------------------------------------------


def _contiguous(total: int, size: int) -> tuple[tuple[int, ...], ...]:
    return tuple(tuple(range(s, s + size)) for s in range(0, total, size))


def _groups(*spans: tuple[tuple[int, int], ...]) -> tuple[tuple[int, ...], ...]:
    """Build phases from inclusive lane ranges, e.g. ((0, 3), (20, 23))."""
    return tuple(tuple(lane for lo, hi in phase for lane in range(lo, hi + 1)) for phase in spans)


# MI300 (CDNA3) ds_read_b128: 8 non-contiguous groups of 8 lanes (nod-ai AMDGPU optimisation
# guide; the same groups are listed, in another order, in the Composable Kernel LDS doc).
_CDNA3_READ_B128 = _groups(
    ((0, 3), (20, 23)),
    ((32, 35), (52, 55)),
    ((4, 7), (16, 19)),
    ((36, 39), (48, 51)),
    ((8, 11), (28, 31)),
    ((40, 43), (60, 63)),
    ((12, 15), (24, 27)),
    ((44, 47), (56, 59)),
)

# MI350 (CDNA4, 64 banks) ds_read_b128: 4 groups of 16 lanes (same guide).
_CDNA4_READ_B128 = _groups(
    ((0, 3), (12, 15), (20, 23), (24, 27)),
    ((32, 35), (44, 47), (52, 55), (56, 59)),
    ((4, 7), (8, 11), (16, 19), (28, 31)),
    ((36, 39), (40, 43), (48, 51), (60, 63)),
)


def _check_width(width_bytes: int) -> None:
    if width_bytes not in _WIDTHS:
        raise ValueError(f"access width must be one of {_WIDTHS} bytes, got {width_bytes}")


def phases_nvidia(width_bytes: int) -> tuple[tuple[int, ...], ...]:
    """Lane phases of one warp-wide shared-memory instruction on NVIDIA (sm_50 .. sm_90).

    Up to 4 bytes per lane the whole warp is one phase (32 banks x 4 B = 128 B per cycle);
    8-byte accesses are split into half-warps and 16-byte accesses into quarter-warps, so
    each phase again asks for at most 128 B. The CUDA programming guide documents only the
    32-bit case; the half/quarter-warp split is from NVIDIA's GTC material and NVIDIA's own
    nvFuser bank-conflict analysis (docs/banks.md).

    Unspecified publicly: whether phases with identical addresses are ever merged (a forum
    answer from NVIDIA describes a merge for some 16-byte patterns on sm_70/75). We never
    merge, which can only over-count: the model is conservative.
    """
    _check_width(width_bytes)
    if width_bytes <= WORD_BYTES:
        return _contiguous(NVIDIA_WARP, NVIDIA_WARP)
    return _contiguous(NVIDIA_WARP, NVIDIA_WARP * WORD_BYTES // width_bytes)


def amd_banks(arch: AmdArch) -> int:
    """LDS bank count: 32 on CDNA1-3 (MI100..MI300), 64 on CDNA4 (MI350)."""
    if arch == "cdna3":
        return 32
    if arch == "cdna4":
        return 64
    raise ValueError(f"unknown AMD arch {arch!r} (expected 'cdna3' or 'cdna4')")


def phases_amd(
    width_bytes: int, op: Op = "read", arch: AmdArch = "cdna3"
) -> tuple[tuple[int, ...], ...]:
    """Lane phases of one 64-lane LDS instruction on AMD CDNA.

    Documented (see docs/banks.md): CDNA3 ds_read_b32 = 2 x 32 contiguous lanes,
    ds_read_b64 = 4 x 16 contiguous, ds_read_b128 = 8 non-contiguous groups of 8,
    ds_write_b128 = 8 x 8 contiguous; CDNA4 reads: b32 one phase of 64, b64 2 x 32,
    b128 4 non-contiguous groups of 16.

    Not documented, our choice: CDNA3 writes of 1..8 bytes use the same contiguous groups as
    the reads of that width (the only grouping that fits 128 B per cycle with contiguous lanes),
    and 1- and 2-byte accesses use the 4-byte phases. CDNA4 writes are not documented at all,
    so they are refused rather than guessed.
    """
    _check_width(width_bytes)
    if op not in ("read", "write"):
        raise ValueError(f"op must be 'read' or 'write', got {op!r}")
    banks = amd_banks(arch)
    if arch == "cdna4" and op == "write":
        raise ValueError("the lane phases of LDS writes on CDNA4 are not publicly documented")
    if width_bytes == 16 and op == "read":
        return _CDNA3_READ_B128 if arch == "cdna3" else _CDNA4_READ_B128
    lanes_per_phase = banks * WORD_BYTES // max(width_bytes, WORD_BYTES)
    return _contiguous(AMD_WAVE, min(lanes_per_phase, AMD_WAVE))


# ---------------------------------------------------------------------------------------------
# Counting
# ---------------------------------------------------------------------------------------------

# How lanes that touch the same word are merged:
#   "word": any two lanes touching one 32-bit word are served together (NVIDIA, read & write).
#   "address": only lanes with the identical byte address are merged (AMD reads; conservative).
#   "none": every lane is a separate access (AMD writes; conservative).
Merge = Literal["word", "address", "none"]


def _validated(byte_addrs: Sequence[int | None], lanes: int, width: int) -> list[int | None]:
    if len(byte_addrs) > lanes:
        raise ValueError(f"at most {lanes} lane addresses expected, got {len(byte_addrs)}")
    out: list[int | None] = list(byte_addrs) + [None] * (lanes - len(byte_addrs))
    for lane, addr in enumerate(out):
        if addr is None:
            continue
        if isinstance(addr, bool) or not isinstance(addr, int) or addr < 0:
            raise ValueError(f"lane {lane}: address must be a non-negative int, got {addr!r}")
        if addr % width:
            raise ValueError(f"lane {lane}: address {addr} is not aligned to {width} bytes")
    return out


def access_keys(addr: int, lane: int, width: int, merge: Merge) -> list[tuple[int, object]]:
    """The (word, merge key) pairs one lane's access occupies.

    Two accesses to the same bank in one phase cost one cycle iff their merge keys are equal.
    Exposed so that the synthesiser encodes exactly what this module counts.
    """
    first = addr // WORD_BYTES
    n_words = max(1, width // WORD_BYTES)
    out: list[tuple[int, object]] = []
    for k in range(n_words):
        word = first + k
        key: object
        if merge == "word":
            key = word
        elif merge == "address":
            key = (addr, k)
        else:
            key = (lane, k)
        out.append((word, key))
    return out


def count_wavefronts(
    byte_addrs: Sequence[int | None],
    width_bytes: int,
    phases: Sequence[Sequence[int]],
    n_banks: int,
    merge: Merge,
) -> BankReport:
    """Generic counter: cost of an access under the given phases, banks and merge rule."""
    _check_width(width_bytes)
    n_lanes = max(lane for phase in phases for lane in phase) + 1
    addrs = _validated(byte_addrs, n_lanes, width_bytes)
    per_phase: list[int] = []
    best: tuple[tuple[int, int], WorstBank] | None = None
    for p, phase in enumerate(phases):
        keys_by_bank: dict[int, set[object]] = {}
        users_by_bank: dict[int, dict[int, int]] = {}  # bank -> {lane: its byte address}
        for lane in phase:
            addr = addrs[lane]
            if addr is None:
                continue
            for word, key in access_keys(addr, lane, width_bytes, merge):
                bank = word % n_banks
                keys_by_bank.setdefault(bank, set()).add(key)
                users_by_bank.setdefault(bank, {})[lane] = addr
        cost = max((len(k) for k in keys_by_bank.values()), default=0)
        per_phase.append(cost)
        for bank in sorted(keys_by_bank):
            users = users_by_bank[bank]
            score = (len(keys_by_bank[bank]), len(users))
            if best is None or score > best[0]:
                worst = WorstBank(
                    phase=p,
                    bank=bank,
                    distinct_words=len(keys_by_bank[bank]),
                    lanes=tuple(users),
                    addrs=tuple(users.values()),
                )
                best = (score, worst)
    ideal = sum(1 for cost in per_phase if cost > 0)
    return BankReport(
        wavefronts=sum(per_phase),
        ideal=ideal,
        per_phase=tuple(per_phase),
        worst=None if best is None else best[1],
    )


def wavefronts_nvidia(byte_addrs: Sequence[int | None], width_bytes: int) -> BankReport:
    """Cost of one warp-wide shared-memory access on NVIDIA (Maxwell .. Hopper).

    ``byte_addrs[i]`` is lane i's shared-memory byte address (None = inactive; fewer than 32
    entries means the rest are inactive). ``width_bytes`` in {1, 2, 4, 8, 16}. Lanes touching
    the same 32-bit word never conflict (reads broadcast it; for writes one lane wins), per the
    CUDA programming guide. Phases: see :func:`phases_nvidia`.
    """
    return count_wavefronts(
        byte_addrs, width_bytes, phases_nvidia(width_bytes), NVIDIA_BANKS, "word"
    )


def wavefronts_amd_lds(
    byte_addrs: Sequence[int | None],
    width_bytes: int,
    op: Op = "read",
    arch: AmdArch = "cdna3",
) -> BankReport:
    """Cost of one 64-lane LDS access on AMD CDNA (ds_read/ds_write_b{8,16,32,64,128}).

    Phases: see :func:`phases_amd`. AMD documents broadcast for lanes reading the *same
    address*; whether lanes reading different bytes of one dword, or lanes writing one dword,
    are merged is not documented, so reads merge only identical byte addresses and writes
    merge nothing (both choices can only over-count).
    """
    phases = phases_amd(width_bytes, op, arch)
    merge: Merge = "address" if op == "read" else "none"
    return count_wavefronts(byte_addrs, width_bytes, phases, amd_banks(arch), merge)
