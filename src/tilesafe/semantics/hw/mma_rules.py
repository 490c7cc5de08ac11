"""The hardware rules of a `wgmma` that the kernel text and the layouts decide: a matrix
descriptor for every operand placement, a descriptor uniform across the warpgroup, a whole
aligned warpgroup executing it, and accumulators that fit the register budget.

Why here (not in the temporal model): these are facts about every instance of the statement
for every size -- which tile origins its operands take (an ISL image over the instances,
which is finite because the access checker proves the tiles inside their buffers), where
the buffers sit (the interpreter's placement, shifted by every base the code generator's
rule allows: R = 1024 modulo the largest alignment), and which threads run it. The
descriptor itself is semantics/hw/wgmma_desc.py's.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import islpy as isl
import numpy as np

from tilesafe.frontend import fragments as fr
from tilesafe.frontend import ir, walk
from tilesafe.semantics.access.access import AccessRelation, Via
from tilesafe.semantics.hw import wgmma_desc as wd
from tilesafe.semantics.interpreter.smem import Placement, plan_shared

MAX_ORIGINS = 4096  # tile origins enumerated per operand (a buffer holds at most 2^17)
SWIZZLE_REPEAT = 1024  # bytes after which every swizzle pattern repeats
MIN_ALIGN = 16  # the dynamic shared memory base's alignment (codegen/placement.py)
REGISTER_LIMIT = 255  # registers a thread may use


@dataclass(frozen=True)
class Operand:
    """One operand of one wgmma statement: its access relation and its role."""

    stmt: ir.Wgmma
    tile: ir.MmaTile
    which: str  # "A" or "B"
    access: AccessRelation


def operands(accesses: tuple[AccessRelation, ...]) -> Iterator[Operand]:
    for a in accesses:
        if a.via is Via.WGMMA:
            s = a.node
            assert isinstance(s, ir.Wgmma)
            which = "A" if a.span == s.a.span and a.tensor == s.a.buffer else "B"
            yield Operand(s, s.a if which == "A" else s.b, which, a)


@dataclass(frozen=True)
class DescriptorVerdict:
    """The descriptor found for every (origin, placement shift), or the first failure."""

    found: wd.Found | None
    origins: tuple[tuple[int, ...], ...]
    shifts: tuple[int, ...]
    failure: str = ""
    undecided: str = ""  # why no verdict (origins not enumerable)


def origins(op: Operand) -> tuple[tuple[int, ...], ...] | None:
    """Every start coordinate the tile takes, over every instance and size (None: more than
    MAX_ORIGINS or not bounded)."""
    rel = op.access.origin
    if rel is None:
        return None
    rng = rel.range()
    rng = rng.project_out(isl.dim_type.param, 0, rng.dim(isl.dim_type.param))
    if not rng.is_bounded():
        return None
    pts: list[tuple[int, ...]] = []

    def take(p: isl.Point) -> None:
        pts.append(tuple(int(p.get_coordinate_val(isl.dim_type.set, i).to_python())
                         for i in range(rng.dim(isl.dim_type.set))))

    if rng.count_val().to_python() > MAX_ORIGINS:
        return None
    rng.foreach_point(take)
    return tuple(sorted(pts))


def tile_addresses(op: Operand, origin: tuple[int, ...], place: Placement) -> np.ndarray:
    """[mn, k] byte addresses (interpreter placement) of the operand's elements: for A,
    (m, k) is (row, column) of the tile; for B, (n, k) is (column, row)."""
    rows_dim, cols_dim = op.tile.ranged
    rows, cols = op.tile.shape
    mn, k = (rows, cols) if op.which == "A" else (cols, rows)
    i = np.arange(mn)[:, None]
    j = np.arange(k)[None, :]
    coord = [np.full((mn, k), o, dtype=np.int64) for o in origin]
    if op.which == "A":
        coord[rows_dim] = coord[rows_dim] + i
        coord[cols_dim] = coord[cols_dim] + j
    else:
        coord[rows_dim] = coord[rows_dim] + j
        coord[cols_dim] = coord[cols_dim] + i
    flat = sum(c * s for c, s in zip(coord, place.strides, strict=True))
    return np.asarray(place.slots, dtype=np.int64)[flat] * place.elem_bytes


def _inside(op: Operand, origin: tuple[int, ...], shape: tuple[int, ...]) -> bool:
    extent = dict(zip(op.tile.ranged, op.tile.shape, strict=True))
    return all(0 <= o and o + extent.get(d, 1) <= n
               for d, (o, n) in enumerate(zip(origin, shape, strict=True)))


def placement_shifts(kernel: ir.Kernel) -> tuple[int, ...]:
    """The bases the code generator may place the buffers at, relative to the interpreter's,
    modulo the swizzle repeat: R = SMEM_BASE (mod A), A the largest alignment."""
    a = max([MIN_ALIGN] + [b.align for b in kernel.shared])
    return tuple(range(0, SWIZZLE_REPEAT, a)) if a < SWIZZLE_REPEAT else (0,)


def descriptor(kernel: ir.Kernel, op: Operand) -> DescriptorVerdict:
    found = origins(op)
    shifts = placement_shifts(kernel)
    if found is None:
        return DescriptorVerdict(None, (), shifts, undecided="the tile's origins are not a "
                                 f"bounded set of at most {MAX_ORIGINS} points")
    place = plan_shared(kernel.shared).placements[op.tile.buffer]
    buffer = kernel.buffer(op.tile.buffer)
    dtype = buffer.dtype
    # A tile that leaves its buffer is the access checker's refutation (TS202: MMA tiles are
    # access relations); its elements have no address here, so only in-bounds origins are
    # asked for a descriptor.
    found = tuple(o for o in found if _inside(op, o, buffer.shape))
    if not found:
        return DescriptorVerdict(None, (), shifts, undecided="every origin puts the tile "
                                 "outside its buffer (the access checker refutes it)")
    tiles = [tile_addresses(op, o, place) + d for o in found for d in shifts]
    result = wd.synthesize(tiles, dtype)
    if isinstance(result, wd.NotFound):
        return DescriptorVerdict(None, found, shifts, failure=result.describe())
    return DescriptorVerdict(result, found, shifts)


def thread_varying(op: Operand) -> isl.Map | None:
    """Pairs of instances of one warpgroup at one block and loop iteration whose threads
    see different tile origins (the descriptor must be the same for the whole warpgroup);
    None when none."""
    rel = op.access.origin
    if rel is None:
        return None
    dom = rel.domain()
    group = _warpgroup_map(dom.get_space(), op.access.dims.index("thread"))
    same_group = group.apply_range(group.reverse()).intersect_domain(dom).intersect_range(dom)
    same_origin = rel.apply_range(rel.reverse())
    bad = same_group.subtract(same_origin)
    return None if bad.is_empty() else bad


def _warpgroup_map(space: isl.Space, t: int) -> isl.Map:
    """x -> x with the thread coordinate replaced by its warpgroup (thread // 128)."""
    ls = isl.LocalSpace.from_space(space)
    ctx = space.get_ctx()
    lst = isl.PwAffList.alloc(ctx, space.dim(isl.dim_type.set))
    for i in range(space.dim(isl.dim_type.set)):
        v = isl.PwAff.var_on_domain(ls, isl.dim_type.set, i)
        if i == t:
            v = v.scale_down_val(isl.Val.int_from_si(ctx, fr.WARPGROUP)).floor()
        lst = lst.add(v)
    return isl.Map.from_multi_pw_aff(isl.MultiPwAff.from_pw_aff_list(space.map_from_set(), lst))


def partial_warpgroups(op: Operand, kernel: ir.Kernel) -> isl.Set | None:
    """Instances of threads whose warpgroup does not run the MMA whole at that block and
    iteration (an `.aligned` instruction executed by part of a warpgroup); None when every
    warpgroup that runs it runs it whole."""
    dom = op.access.domain
    space = dom.get_space()
    t = op.access.dims.index("thread")
    ls = isl.LocalSpace.from_space(space)
    ctx = space.get_ctx()
    group = _warpgroup_map(space, t)
    thread = isl.PwAff.var_on_domain(ls, isl.dim_type.set, t)
    threads = thread.ge_set(isl.PwAff.zero_on_domain(ls)) & thread.lt_set(
        isl.PwAff.zero_on_domain(ls).add_constant_val(isl.Val.int_from_si(ctx, kernel.block)))
    whole = dom.apply(group).apply(group.reverse()) & threads
    missing = whole.subtract(dom)
    return None if missing.is_empty() else missing


def fragment_registers(kernel: ir.Kernel) -> dict[str, int]:
    """Registers the fragments a role uses take per thread (N / 2 each), by role name."""
    out: dict[str, int] = {}

    def used(stmts: tuple[ir.Stmt, ...]) -> set[str]:
        names: set[str] = set()
        for s in walk.statements(stmts):
            if isinstance(s, ir.Wgmma):
                names.add(s.acc)
            if isinstance(s, ir.FragStore):
                names.add(s.fragment)
            for e in walk.own_exprs(s):
                names |= {x.fragment for x in walk.subexprs(e) if isinstance(x, ir.FragLoad)}
        return names

    roles = [s for s in walk.statements(kernel.body) if isinstance(s, ir.Role)]
    for r in roles:
        out[r.name] = sum(kernel.fragment(n).regs for n in used(r.body))
    outside = used(tuple(s for s in kernel.body if not isinstance(s, ir.Role)))
    if outside:
        out[""] = sum(kernel.fragment(n).regs for n in outside)
    return out


# ---- setmaxnreg ------------------------------------------------------------------------------

REGISTER_FILE = 65536  # 32-bit registers of one SM (one block of a warp-specialised kernel)
WARPGROUP = 128


@dataclass(frozen=True)
class RegisterShare:
    """The registers one set of threads holds once every `setmaxnreg` has run."""

    who: str  # a role's name, or "the other threads"
    threads: int
    per_thread: int
    from_setmaxnreg: bool


def launch_registers(block: int) -> int:
    """The most registers per thread a launch of `block` threads can have: the register file
    shared by the block's warps, in the allocation unit of 8, at most 255 (what ptxas is held
    to for this block size; with setmaxnreg, what every warp starts with)."""
    warps = -(-block // 32)
    return min(REGISTER_LIMIT, REGISTER_FILE // (warps * 32) // 8 * 8)


@dataclass(frozen=True)
class MaxNRegSite:
    """A setmaxnreg statement, the role around it (None: outside every role) and whether an
    `if` on the thread index stands between them."""

    stmt: ir.SetMaxNReg
    role: ir.Role | None
    thread_guarded: bool


_THREAD = (ir.BuiltinKind.THREAD, ir.BuiltinKind.LANE, ir.BuiltinKind.WARP_ID)


def _on_thread(e: ir.Expr, lets: dict[int, ir.Expr]) -> bool:
    for x in walk.subexprs(e):
        if isinstance(x, ir.Builtin) and x.kind in _THREAD:
            return True
        if isinstance(x, ir.LocalRef) and x.uid in lets and _on_thread(lets.pop(x.uid), lets):
            return True
    return False


def setmaxnreg_sites(kernel: ir.Kernel) -> list[MaxNRegSite]:
    lets = {s.uid: s.value for s in walk.statements(kernel.body) if isinstance(s, ir.Let)}
    out: list[MaxNRegSite] = []

    def visit(body: tuple[ir.Stmt, ...], role: ir.Role | None, guarded: bool) -> None:
        for s in body:
            if isinstance(s, ir.SetMaxNReg):
                out.append(MaxNRegSite(s, role, guarded))
            elif isinstance(s, ir.Role):
                visit(s.body, s, False)
            elif isinstance(s, ir.For):
                visit(s.body, role, guarded)
            elif isinstance(s, ir.If):
                g = guarded or _on_thread(s.cond, dict(lets))
                visit(s.then, role, g)
                visit(s.orelse, role, g)

    visit(kernel.body, None, False)
    return out


def register_shares(kernel: ir.Kernel) -> list[RegisterShare]:
    """Who holds how many registers after the setmaxnreg of each role: a role's threads at
    its last setmaxnreg count, the rest at the launch's allocation."""
    last: dict[str, tuple[ir.Role, int]] = {}
    for site in setmaxnreg_sites(kernel):
        if site.role is not None:
            last[site.role.name] = (site.role, site.stmt.count)
    shares = [RegisterShare(name, role.threads.size, count, True)
              for name, (role, count) in last.items()]
    rest = kernel.block - sum(r.threads for r in shares)
    if rest > 0:
        shares.append(RegisterShare("the other threads", rest, launch_registers(kernel.block),
                                    False))
    return shares


def setmaxnreg_split(site: MaxNRegSite, block: int) -> str | None:
    """Why the threads that run a setmaxnreg are not whole warpgroups (it is
    `.sync.aligned`: every thread of a warpgroup executes it together), or None."""
    role = site.role
    if site.thread_guarded:
        return "it sits under an `if` on the thread index"
    if role is None:
        return None if block % WARPGROUP == 0 else f"the block's {block} threads are not " \
            "whole warpgroups"
    if role.elect_one:
        return f"role {role.name} runs its body on one elected thread"
    lo, hi = role.threads.lo, role.threads.hi
    if lo % WARPGROUP or hi % WARPGROUP:
        return f"role {role.name} is threads {lo} .. {hi}, not whole warpgroups of 128"
    return None
