"""Hardware limits the language holds every kernel to: threads per block, shared memory per
block, blocks per grid dimension.

Why one module, in the frontend: the resolver refuses constants past them (TS026), the
access checker proves the grid within them for every allowed size (TS213, TS214), the
layout checker proves the placed buffers fit (TS103), and the reference interpreter refuses
a launch the driver would refuse; all must use the same numbers, and every stage may
import the frontend.
"""

from __future__ import annotations

# Threads per block (CUDA C++ Programming Guide, "Features and Technical Specifications").
MAX_BLOCK = 1024

# Largest dynamic shared memory one Hopper block may opt into (227 KiB): CUDA C++
# Programming Guide, "Features and Technical Specifications", compute capability 9.0.
MAX_SHARED_BYTES = 232_448

# An mbarrier is an 8-byte object in shared memory (PTX ISA, "Size and alignment of
# mbarrier object").
MBARRIER_BYTES = 8

# cudaDeviceProp.maxGridSize on every compute capability since 3.0, sm_90 included.
GRID_LIMITS = (2**31 - 1, 65535, 65535)


def grid_problem(grid: tuple[int, ...]) -> tuple[int, str] | None:
    """(axis, why) for the first grid dimension the driver would refuse, or None."""
    for axis, (extent, limit) in enumerate(zip(grid, GRID_LIMITS, strict=False)):
        if extent < 1:
            return axis, f"grid dimension {'xyz'[axis]} evaluates to {extent} (at least 1)"
        if extent > limit:
            return axis, (f"grid dimension {'xyz'[axis]} evaluates to {extent}, more than the "
                          f"hardware's {limit}")
    return None

# CTAs in a thread-block cluster: 8 is the portable maximum on sm_90 (16 needs the
# non-portable cluster-size attribute, which the launcher does not set).
MAX_CLUSTER = 8
