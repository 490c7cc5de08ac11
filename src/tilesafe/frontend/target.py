"""The machines a kernel can be verified and compiled for: NVIDIA Hopper (`sm_90a`, the
default) and AMD CDNA3 (`gfx942`, MI300).

Why one small module, in the frontend: a target changes what the source *means* before any
checker runs -- `warp 1` is threads 64..127 on a 64-lane wavefront, `lane` is `thread % 64`
-- and which limits hold (LDS per workgroup), so the resolver needs it; the checkers, the
interpreter and the code generators read it off the kernel (`ir.Kernel.target`) instead of
assuming 32 lanes or Hopper's shared memory. Every stage may import the frontend.

Sources for gfx942 (docs/codegen.md, "HIP for AMD"): the ROCm GPU specifications table
(MI300X/MI300A/MI325X: LLVM target gfx942, wavefront size 64, LDS 64 KiB per CU); a
workgroup may use the whole 64 KiB and has at most 1024 work-items (HIP
`hipDeviceProp_t::sharedMemPerBlock` / `maxThreadsPerBlock` on MI300; the GCN/CDNA ISA limit
of 1024 work-items per workgroup).
"""

from __future__ import annotations

from dataclasses import dataclass

from tilesafe.frontend.limits import MAX_BLOCK, MAX_SHARED_BYTES


@dataclass(frozen=True)
class Target:
    """What the semantics and the code generators need to know about one machine.

    warp        lanes that execute together: the warp (32) or wavefront (64) that `lane`,
                `warp_id`, `warp N` / `warps a .. b` roles and the bank model count in
    max_block   threads per block (workgroup)
    max_shared  bytes of shared memory (LDS) one block may use
    banks       the shared-memory bank model (semantics/hw/banks.py): "nvidia" or "cdna3"
    has_async   TMA, mbarriers, named barriers, async-proxy fences, wgmma, setmaxnreg:
                Hopper's asynchronous machinery, which AMD hardware does not have
    """

    name: str
    vendor: str  # "nvidia" | "amd"
    warp: int
    max_block: int
    max_shared: int
    banks: str
    has_async: bool

    @property
    def is_amd(self) -> bool:
        return self.vendor == "amd"


SM90A = Target("sm_90a", "nvidia", 32, MAX_BLOCK, MAX_SHARED_BYTES, "nvidia", True)
GFX942 = Target("gfx942", "amd", 64, 1024, 65_536, "cdna3", False)

TARGETS: dict[str, Target] = {t.name: t for t in (SM90A, GFX942)}
DEFAULT = SM90A


class UnknownTarget(ValueError):
    """A target name tilesafe does not know (the message lists the known ones)."""


def lookup(name: str | Target | None) -> Target:
    """The target called `name` (None: the default, sm_90a)."""
    if name is None:
        return DEFAULT
    if isinstance(name, Target):
        return name
    try:
        return TARGETS[name]
    except KeyError:
        raise UnknownTarget(f"unknown target {name!r}; known: {', '.join(TARGETS)}") from None
