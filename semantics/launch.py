"""Launch limits of the hardware: how many blocks a grid may have in each dimension.

Why a module of its own: the access checker proves a kernel's grid within these limits for
every size `where` allows (TS213, TS214), and the reference interpreter refuses a run whose
grid the driver would refuse; both must use the same numbers.
"""

from __future__ import annotations

# cudaDeviceProp.maxGridSize on every compute capability since 3.0, sm_90 included
# (CUDA C++ Programming Guide, "Features and Technical Specifications").
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
