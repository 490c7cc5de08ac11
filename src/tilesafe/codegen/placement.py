"""Where the block's shared memory holds each buffer and each mbarrier.

Buffers sit where semantics/smem.plan_shared puts them for the interpreter (declaration
order, each at the next multiple of its `align`, the first at SMEM_BASE), relative to a base
R the kernel computes at run time: the smallest address at or above its dynamic shared
memory with R ≡ SMEM_BASE (mod A), A the largest alignment (at least 16). Every buffer is
then aligned as declared — the TMA swizzles act on absolute addresses — and keeps its
interpreter offset modulo A. The mbarriers follow the last buffer, 8 bytes each, in
declaration order. docs/codegen.md states the same rule for readers of the PTX (and the
translation validator re-derives it independently).
"""

from __future__ import annotations

from dataclasses import dataclass

from tilesafe.frontend import ir
from tilesafe.frontend.limits import MBARRIER_BYTES
from tilesafe.semantics.interpreter.smem import SMEM_BASE, plan_shared

BARRIER_BYTES = MBARRIER_BYTES
MIN_ALIGN = 16  # what the dynamic shared-memory base is always aligned to


@dataclass(frozen=True)
class SharedPlacement:
    align: int  # A
    buffer_start: dict[str, int]  # bytes from R
    barrier_start: dict[str, int]  # bytes from R, instance i at + 8 i
    nbytes: int  # dynamic shared memory to request: alignment slack + buffers + barriers

    @staticmethod
    def of(kernel: ir.Kernel) -> SharedPlacement:
        plan = plan_shared(kernel.shared)
        align = max([MIN_ALIGN] + [b.align for b in kernel.shared])
        starts = {name: p.base - SMEM_BASE for name, p in plan.placements.items()}
        end = max((p.base + p.nbytes for p in plan.placements.values()),
                  default=SMEM_BASE) - SMEM_BASE
        end = -(-end // BARRIER_BYTES) * BARRIER_BYTES
        bars: dict[str, int] = {}
        for b in kernel.barriers:
            bars[b.name] = end
            end += BARRIER_BYTES * b.instances
        return SharedPlacement(align, starts, bars, (align - MIN_ALIGN) + end)
