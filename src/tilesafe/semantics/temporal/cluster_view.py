"""A thread-block cluster seen as one block: the kernel the temporal model explores for a
cluster kernel (docs/temporal.md, §16).

Why a view: the event model, the explorer with its families, ownership with footprints
that keep thread identity, the argument for every trip count and the counterexample
machinery all reason about one block. The CTAs of a cluster are exactly that with three
differences -- each CTA has its own shared memory and barriers, its own `sync`, and the
threads of all CTAs meet at the cluster barrier -- and each is a renaming:

* thread t of CTA r is thread r * B + t of the view (B threads per CTA); in CTA r's copy of
  the body `thread` reads `thread - r * B` and every role's threads move up by r * B, so
  the view has one set of roles per CTA (classes are named `ctaR+role`);
* every shared buffer gains a leading CTA dimension: `buf[i, j]` of CTA r is
  `buf[r, i, j]`, a peer's `buf@p[i, j]` is `buf[p, i, j]` (distributed shared memory is
  ordinary shared memory of the view, so races and hand-offs between CTAs are the ownership
  checker's as they are within one);
* every barrier array of L instances becomes one of C * L: `full[s]` of CTA r is instance
  r * L + s, a peer's `full@p[s]` instance p * L + s; a barrier hands over its guarded
  stage in every CTA (ir.BarrierGuard.per_cta): the arrive of a consumer of CTA 1 on CTA
  0's `empty` gives up its share of CTA 1's stage, which CTA 0's multicast overwrites;
* CTA r's `sync` is a named barrier of CTA r's B threads (id CTA_SYNC + r), the cluster
  barrier one of all C * B (id CLUSTER_BARRIER, semantics/temporal/event_sync.py), user
  named barriers get ids per CTA;
* a multicast TMA load is one load per CTA of its mask, each into that CTA's slice and
  signalling that CTA's barrier (the mask must be a constant per CTA: Unsupported else);
* the block index of CTA r is the cluster's index times the cluster's dims plus r's
  position, and terms such as `cta_rank` (`block.x % CX`) fold back to constants.

The view is used for proofs only through the ordinary search; what is cluster-specific
(scopes, lifetimes) is the cluster family's (semantics/temporal/explore/ops/cluster.py),
which reads `ClusterInfo`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from tilesafe.frontend import ir
from tilesafe.frontend.span import Span
from tilesafe.frontend.walk import statements
from tilesafe.semantics.temporal.event_terms import Unsupported

INT = ir.ScalarType.INT
CTA_SYNC = 1 << 20  # named-barrier id of CTA r's `sync` in the view: CTA_SYNC + r
CLUSTER_BARRIER = CTA_SYNC - 1  # named-barrier id of the cluster barrier in the view
AXES = (ir.BuiltinKind.BLOCK_X, ir.BuiltinKind.BLOCK_Y, ir.BuiltinKind.BLOCK_Z)


@dataclass(frozen=True)
class ClusterInfo:
    """How the view's parts map back to CTAs."""

    ctas: int
    per_cta: int  # threads per CTA
    dims: tuple[int, int, int]
    bar_len: tuple[tuple[str, int], ...]  # barrier -> instances per CTA
    lengths: tuple[tuple[str, int | None], ...] = ()  # barrier -> its declared length

    def cta_of_thread(self, t: int) -> int:
        return t // self.per_cta

    def instances(self, name: str) -> int:
        return dict(self.bar_len)[name]

    def original_length(self, name: str) -> int | None:
        return dict(self.lengths).get(name)

    def cta_of_atom_elements(self, buffer_size: int, element: int) -> int:
        """The CTA of an element of a view buffer (its leading dim is the CTA)."""
        return element // (buffer_size // self.ctas)

    def is_sync(self, named: int) -> bool:
        return named >= CTA_SYNC

    def named_text(self, named: int) -> str:
        if named == CLUSTER_BARRIER:
            return "the cluster barrier"
        if named >= CTA_SYNC:
            return f"sync of cta {named - CTA_SYNC}"
        return f"named barrier {named % ir.NAMED_BARRIERS} of cta {named // ir.NAMED_BARRIERS}"


def info(kernel: ir.Kernel) -> ClusterInfo | None:
    if kernel.cluster is None:
        return None
    return ClusterInfo(kernel.cluster_size, kernel.block, kernel.cluster,
                       tuple((b.name, b.instances) for b in kernel.barriers),
                       tuple((b.name, b.length) for b in kernel.barriers))


def view(kernel: ir.Kernel, values: bool = False) -> ir.Kernel:
    """The cluster as one block (a kernel without a cluster is its own view).

    `values`: the view the value proof reads (semantics/value/): it knows `sync` as the
    block's barrier and named barriers, not CTAs, so a CTA's `sync` becomes a named barrier
    of the CTA's threads and `cluster_sync` the view's `sync` (every thread of the cluster
    meets there, which is what the block barrier means); a cluster barrier split into
    arrive and wait has no such form (Unsupported). The `ensures` clauses are kept."""
    if kernel.cluster is None:
        return kernel
    if values and any(isinstance(s, ir.ClusterBarrier) and not (s.arrive and s.wait)
                      for s in statements(kernel.body)):
        raise Unsupported("a cluster barrier split into cluster_arrive and cluster_wait",
                          kernel.span)
    if kernel.block % 32:
        raise Unsupported("a cluster of CTAs whose block is not whole warps", kernel.span)
    c = kernel.cluster_size
    uid_span = 1 + max((_max_uid(s) for s in kernel.body), default=0)
    body = tuple(
        ir.Role(kernel.span, f"cta{r}", ir.ThreadRange(r * kernel.block, (r + 1) * kernel.block),
                False, _Copy(kernel, r, r * uid_span, values).stmts(kernel.body))
        for r in range(c))
    shared = tuple(replace(b, shape=(c,) + b.shape, layout=ir.LayoutTerm("row_major"))
                   for b in kernel.shared)
    barriers = tuple(
        replace(b, length=c * b.instances,
                guards=_guard(b.guards, b.instances),
                extra_guards=tuple(_guard(g, b.instances) for g in b.extra_guards))
        for b in kernel.barriers)
    grid = tuple(_fold(ir.BinOp(g.span, INT, "/", g, ir.IntConst(g.span, INT, d)))
                 for g, d in zip(kernel.grid, kernel.cluster, strict=False))
    return replace(kernel, grid=grid, block=c * kernel.block, shared=shared,
                   barriers=barriers, body=body, ensures=kernel.ensures if values else (),
                   requires=(), specializations=(), cluster=None)


def _guard(g: ir.BarrierGuard | None, per_cta: int) -> ir.BarrierGuard | None:
    return None if g is None else ir.BarrierGuard(g.buffer, g.indexed, per_cta)


def _max_uid(s: ir.Stmt) -> int:
    out = 0
    for x in _stmt_uids(s):
        out = max(out, x)
    return out


def _stmt_uids(s: ir.Stmt):
    if isinstance(s, (ir.Let, ir.VarDecl, ir.Assign)):
        yield s.uid
    if isinstance(s, ir.For):
        yield s.var.uid
        for b in s.body:
            yield from _stmt_uids(b)
    elif isinstance(s, ir.Role):
        for b in s.body:
            yield from _stmt_uids(b)
    elif isinstance(s, ir.If):
        for b in s.then + s.orelse:
            yield from _stmt_uids(b)


class _Copy:
    """CTA r's copy of the body, renamed into the view (the module docstring)."""

    def __init__(self, kernel: ir.Kernel, rank: int, uid_shift: int,
                 values: bool = False) -> None:
        self.values = values
        self.k = kernel
        self.r = rank
        self.shift = uid_shift
        self.base = rank * kernel.block
        cx, cy, _ = kernel.cluster
        self.pos = (rank % cx, rank // cx % cy, rank // (cx * cy))

    # -- expressions -----------------------------------------------------------------------

    def int(self, v: int, span: Span) -> ir.Expr:
        return ir.IntConst(span, INT, v)

    def expr(self, e: ir.Expr) -> ir.Expr:
        span = e.span
        if isinstance(e, ir.Builtin):
            t = ir.Builtin(span, INT, ir.BuiltinKind.THREAD)
            local = t if not self.base else ir.BinOp(span, INT, "-", t, self.int(self.base, span))
            if e.kind is ir.BuiltinKind.THREAD:
                return local
            if e.kind is ir.BuiltinKind.WARP_ID:
                return ir.BinOp(span, INT, "/", local, self.int(32, span))
            if e.kind is ir.BuiltinKind.LANE:
                return e
            axis = AXES.index(e.kind)
            d = self.k.cluster[axis]
            if d == 1:
                return e
            return ir.BinOp(span, INT, "+", ir.BinOp(span, INT, "*", self.int(d, span), e),
                            self.int(self.pos[axis], span))
        if isinstance(e, ir.LoopVar):
            return replace(e, uid=e.uid + self.shift)
        if isinstance(e, ir.LocalRef):
            return replace(e, uid=e.uid + self.shift)
        if isinstance(e, ir.BinOp):
            return _fold(replace(e, lhs=self.expr(e.lhs), rhs=self.expr(e.rhs)))
        if isinstance(e, ir.UnOp):
            return replace(e, operand=self.expr(e.operand))
        if isinstance(e, ir.Call):
            return replace(e, args=tuple(self.expr(a) for a in e.args))
        if isinstance(e, ir.Load):
            idx = tuple(self.expr(i) for i in e.indices)
            if e.space is ir.Space.SHARED:
                idx = (self.cta(e.cta, span),) + idx
            return replace(e, indices=idx, cta=None)
        if isinstance(e, ir.FragLoad):
            return replace(e, reg=self.expr(e.reg))
        return e

    def cta(self, e: ir.Expr | None, span: Span) -> ir.Expr:
        return self.int(self.r, span) if e is None else self.expr(e)

    def bar(self, ref: ir.BarrierRef) -> ir.BarrierRef:
        n = self.k.barrier(ref.name).instances
        cta = self.cta(ref.cta, ref.span)
        first = cta if n == 1 else ir.BinOp(ref.span, INT, "*", cta, self.int(n, ref.span))
        index = first if ref.index is None else ir.BinOp(ref.span, INT, "+", first,
                                                         self.expr(ref.index))
        return ir.BarrierRef(ref.span, ref.name, _fold(index))

    def slice(self, sl: ir.BufferSlice, cta: ir.Expr | None = None) -> ir.BufferSlice:
        return ir.BufferSlice(sl.span, sl.buffer, (cta if cta is not None else
                                                   self.int(self.r, sl.span),)
                              + tuple(self.expr(p) for p in sl.prefix))

    def tile(self, t: ir.MmaTile) -> ir.MmaTile:
        first = ir.TileIndex(self.int(self.r, t.span), None)
        return replace(t, index=(first,) + tuple(ir.TileIndex(self.expr(i.start), i.extent)
                                                 for i in t.index))

    # -- statements ------------------------------------------------------------------------

    def stmts(self, stmts: tuple[ir.Stmt, ...]) -> tuple[ir.Stmt, ...]:
        out: list[ir.Stmt] = []
        for s in stmts:
            out.extend(self.stmt(s))
        return tuple(out)

    def stmt(self, s: ir.Stmt) -> list[ir.Stmt]:
        e = self.expr
        if isinstance(s, ir.Let):
            return [replace(s, uid=s.uid + self.shift, value=e(s.value))]
        if isinstance(s, (ir.VarDecl, ir.Assign)):
            return [replace(s, uid=s.uid + self.shift, value=e(s.value))]
        if isinstance(s, ir.Store):
            idx = tuple(e(i) for i in s.indices)
            if s.space is ir.Space.SHARED:
                idx = (self.cta(s.cta, s.span),) + idx
            return [replace(s, indices=idx, value=e(s.value), cta=None)]
        if isinstance(s, ir.For):
            return [replace(s, var=replace(s.var, uid=s.var.uid + self.shift), lo=e(s.lo),
                            hi=e(s.hi), body=self.stmts(s.body))]
        if isinstance(s, ir.If):
            return [replace(s, cond=e(s.cond), then=self.stmts(s.then),
                            orelse=self.stmts(s.orelse))]
        if isinstance(s, ir.Role):
            th = ir.ThreadRange(s.threads.lo + self.base, s.threads.hi + self.base)
            return [replace(s, threads=th, body=self.stmts(s.body))]
        if isinstance(s, ir.Sync) and self.values:
            return [ir.NamedBar(s.span, False, CTA_SYNC + self.r, self.k.block)]
        if isinstance(s, ir.Sync):
            return [s]  # the CTA's own: the event model makes it a joint step of its classes
        if isinstance(s, ir.ClusterBarrier) and self.values:
            return [ir.Sync(s.span)]
        if isinstance(s, ir.NamedBar):
            return [replace(s, bar_id=s.bar_id + ir.NAMED_BARRIERS * self.r)]
        if isinstance(s, ir.Init) and s.barrier.index is None:
            # `init full`: every instance of the CTA's own array, one init each
            n = self.k.barrier(s.barrier.name).instances
            return [replace(s, barrier=self.bar(replace(s.barrier, index=self.int(i, s.span))))
                    for i in range(n)]
        if isinstance(s, (ir.Init, ir.Wait, ir.ExpectTx)):
            return [replace(s, barrier=self.bar(s.barrier),
                            **self.own_exprs(s))]
        if isinstance(s, ir.Arrive):
            tx = e(s.tx_bytes) if s.tx_bytes is not None else None
            return [replace(s, barrier=self.bar(s.barrier), tx_bytes=tx)]
        if isinstance(s, ir.TmaLoad):
            return self.tma_load(s)
        if isinstance(s, ir.TmaStore):
            return [replace(s, src=self.slice(s.src), coords=tuple(e(c) for c in s.coords))]
        if isinstance(s, ir.Wgmma):
            scale = e(s.scale_d) if s.scale_d is not None else None
            return [replace(s, a=self.tile(s.a), b=self.tile(s.b), scale_d=scale)]
        if isinstance(s, ir.FragStore):
            return [replace(s, reg=e(s.reg), value=e(s.value))]
        return [s]

    def own_exprs(self, s: ir.Stmt) -> dict:
        if isinstance(s, ir.Wait):
            return {"parity": self.expr(s.parity)}
        if isinstance(s, ir.ExpectTx):
            return {"nbytes": self.expr(s.nbytes)}
        return {}

    def tma_load(self, s: ir.TmaLoad) -> list[ir.Stmt]:
        coords = tuple(self.expr(c) for c in s.coords)
        if s.multicast is None:
            return [replace(s, dst=self.slice(s.dst), barrier=self.bar(s.barrier),
                            coords=coords)]
        mask = self.expr(s.multicast)
        if not isinstance(mask, ir.IntConst):
            raise Unsupported("a multicast mask that is not a constant in each CTA",
                              s.multicast.span)
        out: list[ir.Stmt] = []
        for r in range(self.k.cluster_size):
            if (mask.value >> r) & 1:
                peer = self.int(r, s.span)
                bar = self.bar(replace(s.barrier, cta=peer))
                out.append(replace(s, dst=self.slice(s.dst, peer), barrier=bar, coords=coords,
                                   multicast=None))
        return out


# ---- folding ---------------------------------------------------------------------------------


def _linear(e: ir.Expr) -> tuple[dict, int] | None:
    """e as sum(coefficient * atom) + constant, atoms being builtins, loop variables and
    sizes; None when it is not linear so."""
    if isinstance(e, ir.IntConst):
        return {}, e.value
    if isinstance(e, (ir.Builtin, ir.LoopVar, ir.SizeVar, ir.LocalRef)) and e.type is INT:
        key = (type(e).__name__, getattr(e, "kind", None), getattr(e, "uid", None),
               getattr(e, "name", None))
        return {key: (1, e)}, 0
    if isinstance(e, ir.BinOp) and e.op in "+-" and e.type is INT:
        a, b = _linear(e.lhs), _linear(e.rhs)
        if a is None or b is None:
            return None
        sign = 1 if e.op == "+" else -1
        out = dict(a[0])
        for k, (c, atom) in b[0].items():
            out[k] = (out.get(k, (0, atom))[0] + sign * c, atom)
        return out, a[1] + sign * b[1]
    if isinstance(e, ir.BinOp) and e.op == "*" and e.type is INT:
        for const, other in ((e.lhs, e.rhs), (e.rhs, e.lhs)):
            if isinstance(const, ir.IntConst):
                inner = _linear(other)
                if inner is None:
                    return None
                return ({k: (c * const.value, atom) for k, (c, atom) in inner[0].items()},
                        inner[1] * const.value)
    return None


def _fold(e: ir.Expr) -> ir.Expr:
    """Constant folding, and `(d * X + c) % d` -> `c % d`, `(d * X + c) / d` -> `X + c / d`
    (exact for floor division): how `cta_rank` of a CTA folds back to its rank."""
    if not isinstance(e, ir.BinOp) or e.type is not INT:
        return e
    lhs, rhs = e.lhs, e.rhs
    if isinstance(lhs, ir.IntConst) and isinstance(rhs, ir.IntConst) and e.op in "+-*/%":
        a, b = lhs.value, rhs.value
        if e.op in "/%" and b <= 0:
            return e
        v = {"+": a + b, "-": a - b, "*": a * b}.get(e.op) if e.op in "+-*" else (
            a // b if e.op == "/" else a % b)
        return ir.IntConst(e.span, INT, v)
    if e.op in "/%" and isinstance(rhs, ir.IntConst) and rhs.value > 0:
        d = rhs.value
        lin = _linear(lhs)
        if lin is not None and all(c % d == 0 for c, _ in lin[0].values()):
            terms, c = lin
            if e.op == "%":
                return ir.IntConst(e.span, INT, c % d)
            out: ir.Expr = ir.IntConst(e.span, INT, c // d)
            for coeff, atom in terms.values():
                if coeff:
                    term = atom if coeff == d else ir.BinOp(
                        e.span, INT, "*", ir.IntConst(e.span, INT, coeff // d), atom)
                    out = term if (isinstance(out, ir.IntConst) and out.value == 0) else \
                        ir.BinOp(e.span, INT, "+", out, term)
            return out
    return e
