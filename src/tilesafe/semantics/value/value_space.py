"""The ISL space a value proof works in: one set space over every coordinate involved.

Why: a value proof relates statement instances of different threads (a read and the write
it sees, a store and the spec's index variables). Each instance lives in a namespace of its
own -- its thread and loop coordinates are set dimensions (`t_n3`, `l_n3_17`) next to the
block coordinates, sizes are parameters -- so one ISL set can state "same element", "happens
before" or "last writer" over all of them at once, for every size `where` allows.
"""

from __future__ import annotations

from collections.abc import Mapping

import islpy as isl

from tilesafe.frontend import ir
from tilesafe.semantics.expr import affine
from tilesafe.semantics.expr.affine import AffineEnv, NotAffine
from tilesafe.semantics.temporal import sync_counts
from tilesafe.semantics.value import value_gather
from tilesafe.semantics.value.value_terms import Inst, IntV, Link, LoopInfo, show

SPEC_NS = 1_000_000  # the namespace of a spec's index variables


class NotProved(Exception):
    def __init__(self, reason: str, point: dict[str, int] | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.point = point


def multi_writer(buffer: str) -> str:
    """Why a buffer is not single-assignment, the start of several reasons."""
    return (f"shared buffer '{buffer}' is written more than once per element (a ring "
            "refilled every pass, or a reduction tree): which write a read sees is not "
            "identified for every size")


class ValueSpace:
    """One ISL set space: params = sizes; dims = block coordinates, then per namespace its
    thread and loop coordinates (`t_n3`, `l_n3_17`)."""

    def __init__(self, kernels: tuple[ir.Kernel, ...], ctx: isl.Context,
                 phases: Mapping[int, tuple[sync_counts.Member, ...]],
                 involved: list[Inst]) -> None:
        self.k = kernels[0]
        self.kernels = kernels
        self.ctx = ctx
        self.phases = phases
        names = [block_dim(tag, i) for tag, k in enumerate(self.kernels)
                 for i in range(len(k.grid))]
        seen: set[str] = set(names)
        for inst in involved:
            for n in self.inst_dims(inst):
                if n not in seen:
                    seen.add(n)
                    names.append(n)
        # reads of index tensors: one dim each per namespace (semantics/value/value_gather.py)
        self.gather_plan = value_gather.plan(self.kernels, involved, SPEC_NS, ident)
        names += [p.name for p in self.gather_plan]
        self._gather_names = {p.name for p in self.gather_plan}
        self._gather_ns = {p.ns for p in self.gather_plan}
        self.names = names
        sizes = tuple(dict.fromkeys(n for k in self.kernels for n in k.sizes))
        self.sizes = sizes
        self.space = affine.make_space(self.ctx, sizes, tuple(names))
        self.pos = {n: i for i, n in enumerate(names)}
        self._envs: dict[Inst, AffineEnv] = {}
        self._pins: dict[frozenset[str], isl.Set] = {}
        self._terms: dict[tuple[int, Inst], tuple[ir.Expr, isl.PwAff]] = {}
        self._domains: dict[Inst, isl.Set] = {}
        # order texts (`embed`) parsed: shared by the spaces of one proof, which read the
        # same last-writer sets under different coordinate names
        self.parsed: dict[str, isl.Set] = {}
        where = affine.exact_set(isl.Set.universe(self.space))
        env = AffineEnv(self.space)
        blocks = self.universe()
        for tag, k in enumerate(self.kernels):
            for c in k.where:
                where = where & affine.condition(c, env)
            for i, g in enumerate(k.grid):
                b = self.dim(block_dim(tag, i))
                blocks = blocks & b.ge_set(affine.constant(env, 0)) & b.lt_set(
                    affine.term(g, env))
        self.base = blocks & where.over
        if self.gather_plan:
            # The facts about gathered values, inside the bounds of the namespaces that read
            # them (an index read outside its tensor, a case every clause must allow, is
            # then empty at once, instead of a piece multiplying every other fact's). Those
            # namespaces' coordinates are so constrained in every set: a comparison projects
            # them rather than pinning them (facts_only, value_compare.image).
            bounds = self.base & self._bounds([i for i in involved if i.ns in self._gather_ns])
            self.base = value_gather.facts(self, self.gather_plan, bounds)

    def _bounds(self, involved: list[Inst]) -> isl.Set:
        """Every involved namespace's thread range and loop bounds (what each domain adds
        to the base)."""
        s = self.universe()
        env = AffineEnv(self.space)
        for inst in involved:
            if inst.ns != SPEC_NS:
                t = self.dim(thread_dim(inst))
                s = s & t.ge_set(affine.constant(env, inst.thread_lo))
                s = s & t.lt_set(affine.constant(env, inst.thread_lo + 1 if inst.elect
                                                  else inst.thread_hi))
            for lp in inst.loops:
                try:
                    s = s & loop_bounds(self, inst, lp)
                except NotProved:
                    continue
        return s

    @staticmethod
    def inst_dims(inst: Inst) -> list[str]:
        dims = [] if inst.ns == SPEC_NS else [thread_dim(inst)]
        return dims + [ValueSpace.loop_name(inst, lp.uid) for lp in inst.loops]

    def owned_dims(self, inst: Inst) -> list[str]:
        """inst_dims plus the gathered values its namespace reads (value_gather): what is
        fixed once the namespace's instance is (for `outer`), ranges with it, or is
        eliminated with it."""
        return self.inst_dims(inst) + [p.name for p in self.gather_plan if p.ns == inst.ns]

    def facts_only(self, name: str) -> bool:
        """`name` is a coordinate the gathered-value facts of the base may constrain: a
        gathered value, or a thread or loop coordinate of a namespace that reads one
        (functional consistency ties its reads to every other namespace's). Such a
        coordinate of no part of a comparison holds *some* value in every launch (the
        data's), so a comparison may project it rather than pin it (value_compare.image)."""
        if name in self._gather_names:
            return True
        for ns in self._gather_ns:
            if name == f"t_n{ident(ns)}" or name.startswith(f"l_n{ident(ns)}_"):
                return True
        return False

    @staticmethod
    def loop_name(inst: Inst, uid: int) -> str:
        return f"l_n{ident(inst.ns)}_{ident(uid)}"

    def universe(self) -> isl.Set:
        return isl.Set.universe(self.space)

    def pinned(self, names: frozenset[str]) -> isl.Set:
        """{ x : x[n] = 0 for every n in names }, built as one basic set (intersecting a
        large set with each equality in turn costs one ISL intersection per name)."""
        cached = self._pins.get(names)
        if cached is None:
            bset = isl.BasicSet.universe(self.space)
            ls = isl.LocalSpace.from_space(self.space)
            for n in names:
                c = isl.Constraint.alloc_equality(ls).set_coefficient_val(
                    isl.dim_type.set, self.pos[n], isl.Val.one(self.ctx))
                bset = bset.add_constraint(c)
            cached = self._pins[names] = isl.Set.from_basic_set(bset)
        return cached

    def dim(self, name: str) -> isl.PwAff:
        return affine.dim(AffineEnv(self.space), self.pos[name])

    def env(self, inst: Inst) -> AffineEnv:
        env = self._envs.get(inst)
        if env is None:
            loops = {lp.uid: self.pos[self.loop_name(inst, lp.uid)] for lp in inst.loops}
            thread = None if inst.ns == SPEC_NS else self.pos[thread_dim(inst)]
            grid = self.kernels[inst.kernel].grid
            blocks = tuple(self.pos[block_dim(inst.kernel, i)] for i in range(len(grid)))
            env = AffineEnv(self.space, loops, blocks, thread, dict(inst.lets),
                            value_gather.gathers(self.gather_plan, self.pos, inst.ns))
            self._envs[inst] = env
        return env

    def term(self, e: ir.Expr, inst: Inst) -> isl.PwAff:
        key = (id(e), inst)
        hit = self._terms.get(key)
        if hit is not None:
            return hit[1]
        try:
            pa = affine.term(e, self.env(inst))
        except NotAffine as why:
            raise NotProved(f"'{show(IntV(e, inst))}' is not quasi-affine: {why.reason}") \
                from None
        self._terms[key] = (e, pa)  # e kept alive: its id stays its own
        return pa

    def cond(self, e: ir.Expr, inst: Inst) -> isl.Set:
        """A guard as an exact set. A guard with no Presburger form is not approximated:
        the multiset and last-writer arguments need exact instance sets, so give up."""
        c = affine.condition(e, self.env(inst))
        if not c.exact:
            raise NotProved(f"a guard is not Presburger ({'; '.join(c.dropped)})")
        return c.over

    def domain(self, inst: Inst) -> isl.Set:
        """The instances, exactly (NotProved on a non-Presburger guard), in the block grid,
        at sizes `where` allows (cached: the proof asks for the same ones many times)."""
        hit = self._domains.get(inst)
        if hit is None:
            hit = self._domains[inst] = self._domain(inst)
        return hit

    def _domain(self, inst: Inst) -> isl.Set:
        env = self.env(inst)
        s = self.base
        if inst.ns != SPEC_NS:
            t = self.dim(thread_dim(inst))
            s = s & t.ge_set(affine.constant(env, inst.thread_lo))
            s = s & t.lt_set(affine.constant(env, inst.thread_lo + 1 if inst.elect
                                              else inst.thread_hi))
        for lp in inst.loops:
            v = self.dim(self.loop_name(inst, lp.uid))
            lo = self.term(lp.lo, inst)
            s = s & v.ge_set(lo) & v.lt_set(self.term(lp.hi, inst))
            if lp.step != 1:
                s = s & v.sub(lo).mod_val(affine.val(self.ctx, lp.step)).eq_set(
                    affine.constant(env, 0))
        for g in inst.guards:
            s = s & self.cond(g, inst)
        return s

    def same_element(self, reader: Inst, ridx, writer: Inst, widx) -> isl.Set:
        s = self.domain(writer)
        for r, w in zip(ridx, widx, strict=True):
            s = s & self.term(r, reader).eq_set(self.term(w, writer))
        return s

    def link(self, link: Link) -> isl.Set:
        s = self.same_element(link.reader, link.reader_idx, link.writer, link.writer_idx)
        if link.order is None:
            return s
        return s & self.embed(link.order)

    def embed(self, text: str) -> isl.Set:
        """A set over some of this space's coordinates (`[names]|set`) as a set of it."""
        names_text, set_text = text.split("|", 1)
        names = [n.strip(" '") for n in names_text.strip("[]").split(",")]
        small = self.parsed.get(set_text)
        if small is None:
            small = self.parsed[set_text] = isl.Set.read_from_str(self.ctx, set_text)
        small = small.align_params(self.space.params())
        if all(n in self.pos for n in names):
            # the preimage under the projection onto those coordinates: no map text of
            # every coordinate to parse (a reduction tree's space has ~100)
            ls = isl.LocalSpace.from_space(self.space)
            lst = isl.AffList.alloc(self.ctx, len(names))
            for n in names:
                lst = lst.add(isl.Aff.var_on_domain(ls, isl.dim_type.set, self.pos[n]))
            ma = isl.MultiAff.from_aff_list(
                self.space.map_from_domain_and_range(small.get_space()), lst)
            return small.preimage_multi_aff(ma)
        params = ", ".join(self.sizes)
        m = isl.Map.read_from_str(self.ctx, f"[{params}] -> {{ [{', '.join(names)}] -> "
                                  f"[{', '.join(self.names)}] }}")
        return self.universe() & small.align_params(m.get_space().params()).apply(m)

    def text(self, s: isl.Set, over: list[Inst]) -> str | None:
        """s projected onto the block coordinates and those of `over`, as the `[names]|set`
        text `embed` reads back (a link's order); None when it is empty."""
        keep = [n for n in self.names if is_block(n)]
        for inst in over:
            keep += self.inst_dims(inst)
        for name in reversed(self.names):
            if name not in keep:
                s = s.project_out(isl.dim_type.set, self.names.index(name), 1)
        s = s.coalesce()
        return None if s.is_empty() else f"{keep}|{s}"

    def unordered(self, a: Inst, a_idx: tuple[ir.Expr, ...], b: Inst,
                  b_idx: tuple[ir.Expr, ...]) -> isl.Set:
        """The instance pairs of a and b touching one element that happens-before orders in
        neither direction (one statement instance, `x[i] = x[i] + ..`, counts as ordered)."""
        s = self.domain(a) & self.same_element(a, a_idx, b, b_idx)
        s = s.subtract(self.hb(a, b)).subtract(self.hb(b, a))
        return s.subtract(self.same_instance(a, b))

    def hb(self, a: Inst, b: Inst) -> isl.Set:
        """a happens before b by program order (same thread), by a `sync` between them
        (a's epoch is smaller), or by a named barrier: a's thread takes part in the phase
        after a, whose number is smaller than that of the last phase b's thread waited
        for (sync_counts.py says when phase numbers are participation counts).
        Sufficient, and checked to decide every pair it is used on (check_ordered)."""
        s = self.lex_lt(a, b) & self.dim(thread_dim(a)).eq_set(self.dim(thread_dim(b)))
        if a.epoch is not None and b.epoch is not None:
            s = s | self.term(a.epoch, a).lt_set(self.term(b.epoch, b))
        waited = dict(b.named)
        for bar_id, before in a.named:
            after = waited.get(bar_id)
            members = self.phases.get(bar_id)
            if before is None or after is None or members is None:
                continue
            if sync_counts.member(members, a.thread_lo, a.thread_hi) is None:
                continue
            mb = sync_counts.member(members, b.thread_lo, b.thread_hi)
            if mb is None or not mb.waits:
                continue
            s = s | self.term(before, a).lt_set(self.term(after, b))
        return s

    def same_instance(self, a: Inst, b: Inst) -> isl.Set:
        """a and b are one statement instance of one thread."""
        if len(a.sched) != len(b.sched):
            return isl.Set.empty(self.space)
        s = self.dim(thread_dim(a)).eq_set(self.dim(thread_dim(b)))
        for x, y in zip(a.sched, b.sched, strict=True):
            s = s & self.term(x, a).eq_set(self.term(y, b))
        return s

    def lex_lt(self, a: Inst, b: Inst) -> isl.Set:
        env = AffineEnv(self.space)
        n = max(len(a.sched), len(b.sched))
        pad = affine.constant(env, -1)
        xs = [self.term(x, a) for x in a.sched] + [pad] * (n - len(a.sched))
        ys = [self.term(y, b) for y in b.sched] + [pad] * (n - len(b.sched))
        result = isl.Set.empty(self.space)
        eq = self.universe()
        for x, y in zip(xs, ys, strict=True):
            result = result | (eq & x.lt_set(y))
            eq = eq & x.eq_set(y)
        return result

    def point(self, s: isl.Set) -> dict[str, int]:
        """A point of s, with small sizes where s has one (a launch the interpreter can
        run to confirm the failure as a refutation)."""
        for bound in (256, 1024, 8192):
            small = s
            for i in range(len(self.sizes)):
                v = isl.PwAff.var_on_domain(isl.LocalSpace.from_space(self.space),
                                            isl.dim_type.param, i)
                small = small & v.le_set(affine.constant(AffineEnv(self.space), bound))
            if not small.is_empty():
                s = small
                break
        p = s.sample_point()
        out = {}
        for i, name in enumerate(self.sizes):
            out[name] = int(p.get_coordinate_val(isl.dim_type.param, i).to_python())
        for i, name in enumerate(self.names):
            if is_block(name) or name.startswith(f"l_n{SPEC_NS}_"):
                out[name] = int(p.get_coordinate_val(isl.dim_type.set, i).to_python())
        return out


def subtract(s: isl.Set, other: isl.Set) -> isl.Set:
    """s minus other, one basic set of `other` at a time, coalescing in between. The same
    set as s.subtract(other); much faster when `other` has existentials (a rival writer
    eliminated, a fragment layout's divisions): ISL's one-shot difference multiplies the
    pieces of every complement (a persistent GEMM's staging tile: 170 s against 0.1 s)."""
    pieces: list[isl.BasicSet] = []
    other.coalesce().foreach_basic_set(pieces.append)
    for piece in pieces:
        s = s.subtract(isl.Set.from_basic_set(piece)).coalesce()
        if s.is_empty():
            break
    return s


def shift(space: ValueSpace, pos: int, by: int) -> isl.MultiAff:
    """The map x -> x with coordinate pos lowered by `by` (x[pos] - by; by < 0 raises)."""
    ls = isl.LocalSpace.from_space(space.space)
    affs = []
    for i in range(len(space.names)):
        a = isl.Aff.var_on_domain(ls, isl.dim_type.set, i)
        if i == pos:
            a = a.add_constant_val(isl.Val.int_from_si(space.ctx, -by))
        affs.append(a)
    lst = isl.AffList.alloc(space.ctx, len(affs))
    for a in affs:
        lst = lst.add(a)
    return isl.MultiAff.from_aff_list(space.space.map_from_set(), lst)


def ident(x: int) -> str:
    """An ISL-safe name part for a namespace or uid (negative ones: m7)."""
    return str(x) if x >= 0 else f"m{-x}"


def thread_dim(inst: Inst) -> str:
    return f"t_n{ident(inst.ns)}"


def loop_bounds(space: ValueSpace, inst: Inst, lp: LoopInfo) -> isl.Set:
    v = space.dim(space.loop_name(inst, lp.uid))
    return v.ge_set(space.term(lp.lo, inst)) & v.lt_set(space.term(lp.hi, inst))


def block_dim(tag: int, axis: int) -> str:
    return f"{'bc'[tag]}{axis}"


def is_block(name: str) -> bool:
    return name[:1] in ("b", "c") and name[1:].isdigit()


def zero(space: ValueSpace) -> isl.PwAff:
    return affine.constant(AffineEnv(space.space), 0)
