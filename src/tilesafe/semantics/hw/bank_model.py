"""Which bank model the banks checker proves under: NVIDIA's 32-lane warps or AMD CDNA3's
64-lane wavefronts (LDS), chosen by the kernel's target (frontend/target.py).

Why two counts per model: a proof needs a count that can only over-estimate, a refutation
one that can only under-estimate. NVIDIA documents how lanes touching one 32-bit word are
served (together), so both are the same count. AMD documents the lane phases of LDS reads
and the broadcast of lanes reading one *address*, but not whether lanes reading different
bytes of one dword, or writing one dword, are served together (docs/banks.md). So on CDNA3
`cost` merges only what is documented (identical read addresses; no writes) -- conflict-free
there is conflict-free on the hardware -- and `cost_merged` merges every pair of lanes
touching one dword, which the hardware can at best do: a conflict there is a conflict on
the hardware. Between the two the checker says `unknown` and names the undocumented rule.
The phases are the documented ones for reads of 4, 8 and 16 bytes and the stated
assumption of semantics/hw/banks.py (`phases_amd`) for writes. For 1- and 2-byte accesses
nothing is documented, and 64 lanes x 2 bytes fit the 128 bytes the LDS serves per cycle, so
the hardware may serve all 64 lanes in one phase: `cost` takes the worse of that and the two
32-lane phases (a conflict in either grouping is counted), `cost_merged` the 32-lane phases
(a conflict there is one in the single phase too).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass

from tilesafe.frontend.target import Target
from tilesafe.semantics.hw import banks


@dataclass(frozen=True)
class BankModel:
    """name: "nvidia" or "cdna3"; lanes: of the warp/wavefront one instruction serves;
    unit: what the messages call that group; synth: the swizzle synthesiser's target name;
    describe: the model in one line, for evidence."""

    name: str
    lanes: int
    unit: str
    synth: str
    describe: str

    @property
    def exact_merge(self) -> bool:
        """Whether `cost` and `cost_merged` are the same count (the merge rule is known)."""
        return self.name == "nvidia"

    def cost(self, addrs: tuple[int | None, ...], width: int, op: str) -> banks.BankReport:
        """Wavefronts counting only documented merges: an upper bound (proofs)."""
        return _cost(self.name, addrs, width, op, False)

    def cost_merged(self, addrs: tuple[int | None, ...], width: int, op: str
                    ) -> banks.BankReport:
        """Wavefronts with every lane pair touching one dword merged: a lower bound
        (refutations)."""
        return _cost(self.name, addrs, width, op, True)


NVIDIA = BankModel("nvidia", banks.NVIDIA_WARP, "warp", "nvidia",
                   "NVIDIA sm_50..sm_90: 32 banks of 4 B; lanes touching one 32-bit word "
                   "merge (semantics/hw/banks.py wavefronts_nvidia)")
CDNA3 = BankModel("cdna3", banks.AMD_WAVE, "wavefront", "cdna3",
                  "AMD CDNA3 LDS (gfx942): 64-lane wavefronts, 32 banks of 4 B, lane phases "
                  "per instruction width and read/write (semantics/hw/banks.py phases_amd); "
                  "proved with documented merges only (identical read addresses), refuted "
                  "with every dword merge")

_MODELS = {m.name: m for m in (NVIDIA, CDNA3)}


def for_target(target: Target) -> BankModel:
    return _MODELS[target.banks]


@functools.lru_cache(maxsize=1 << 16)
def _cost(model: str, addrs: Sequence[int | None], width: int, op: str, merged: bool
          ) -> banks.BankReport:
    if model == "nvidia":
        return banks.wavefronts_nvidia(addrs, width)
    rw: banks.Op = "read" if op == "read" else "write"
    nbanks = banks.amd_banks("cdna3")
    if merged:
        return banks.count_wavefronts(addrs, width, banks.phases_amd(width, rw, "cdna3"),
                                      nbanks, "word")
    halves = banks.wavefronts_amd_lds(addrs, width, rw, "cdna3")
    if width >= banks.WORD_BYTES:
        return halves
    whole = banks.count_wavefronts(addrs, width, (tuple(range(banks.AMD_WAVE)),), nbanks,
                                   "address" if rw == "read" else "none")
    return whole if whole.max_way > halves.max_way else halves
