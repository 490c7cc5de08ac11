"""Data nodes of the lockstep interpreter: expression leaves (registers, builtins, memory
reads), local code between steps, and the visible data statements (stores, lets and `if`s
that read memory other threads write).

Why exact: a group step stands for its threads' steps one after another in thread order
(semantics/interpreter/interp_vec.py records exactly that schedule). Evaluating all reads before all
writes is the same thing unless one thread of the group reads what an earlier one writes
in the same statement, or two write one element: a store records the elements it reads
of the buffer it writes, and on such a read it executes its threads one by one; duplicate
writes keep the last thread's value. Bounds are checked before anything is written, so a
failing step leaves memory as it was for the re-run that locates the failing thread.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from tilesafe.frontend import ir
from tilesafe.frontend.span import Span
from tilesafe.frontend.walk import loads, statements
from tilesafe.semantics.expr import evaluate
from tilesafe.semantics.interpreter import interp_error as E
from tilesafe.semantics.interpreter.interp_vec_expr import VAR_CONVERT, compile_vexpr, mask_of
from tilesafe.semantics.interpreter.interp_vec_prog import Kind, Node
from tilesafe.semantics.interpreter.interp_vec_state import Group, VGlobal
from tilesafe.semantics.interpreter.smem import SmemPlan

Go = list[tuple[int, np.ndarray]]  # (program counter, lanes) pairs that move on


@dataclass
class Outcome:
    """What a visible node did to its group: lanes that go on, lanes that now wait."""

    go: Go
    blocked: Any = None  # interp_vec_sync.Blocked


def per_lane(v: Any, n: int) -> np.ndarray:
    """An integer value as an int64 array over n lanes (a uniform value repeated)."""
    if isinstance(v, np.ndarray) and v.ndim == 1:
        return v if v.dtype == np.int64 else v.astype(np.int64)
    return np.full(n, v, dtype=np.int64)


def split(node: Node, lanes: np.ndarray, mask: np.ndarray) -> Go:
    return [(node.next, lanes[mask]), (node.alt, lanes[~mask])]


class DataOps:
    """Compiles expressions, local nodes and data effects of one launch."""

    def __init__(self, kernel: ir.Kernel, sizes: dict[str, int], plan: SmemPlan,
                 globals_: dict[str, VGlobal], batched: bool) -> None:
        self.kernel = kernel
        self.sizes = sizes
        self.plan = plan
        self.globals = globals_
        self.batched = batched
        self.var_dtypes = {s.uid: s.dtype for s in statements(kernel.body)
                           if isinstance(s, ir.VarDecl)}
        self.slots = {name: np.array(pl.slots, dtype=np.int64)
                      for name, pl in plan.placements.items()}

    # -- expressions ------------------------------------------------------------------------

    def expr(self, e: ir.Expr) -> Callable[[Group], Any]:
        return compile_vexpr(e, self.leaf)

    def leaf(self, e: ir.Expr) -> Callable[[Group], Any]:
        if isinstance(e, ir.SizeVar):
            v = self.sizes[e.name]
            return lambda g: v
        if isinstance(e, ir.Builtin):
            kind = e.kind
            if kind is ir.BuiltinKind.THREAD:
                return lambda g: g.tid
            if kind is ir.BuiltinKind.LANE:
                return lambda g: g.tid % 32
            if kind is ir.BuiltinKind.WARP_ID:
                return lambda g: g.tid // 32
            axis = {ir.BuiltinKind.BLOCK_X: 0, ir.BuiltinKind.BLOCK_Y: 1,
                    ir.BuiltinKind.BLOCK_Z: 2}[kind]
            if axis >= len(self.kernel.grid):
                return lambda g: 0
            return lambda g: g.block_coord(axis)
        if isinstance(e, (ir.LoopVar, ir.LocalRef)):
            uid = e.uid
            return lambda g: g.reg(uid)
        if isinstance(e, ir.Load):
            return self.load(e)
        raise TypeError(f"no meaning for {type(e).__name__}")

    def index(self, name: str, shape: tuple[int, ...], indices: tuple[ir.Expr, ...],
              span: Span, code: str, space: str) -> Callable[[Group], np.ndarray]:
        """Row-major linear index per lane; TS201/TS202 naming the first lane outside."""
        fns = [self.expr(i) for i in indices]
        strides = [int(np.prod(shape[k + 1:], dtype=np.int64)) for k in range(len(shape))]

        def flat(g: Group) -> np.ndarray:
            idx = [per_lane(f(g), g.n) for f in fns]
            ok = None
            for i, d in zip(idx, shape, strict=True):
                inside = i.view(np.uint64) < d  # a negative index is a huge unsigned one
                ok = inside if ok is None else ok & inside
            if ok is not None and not ok.all():
                j = int(np.argmin(ok))
                at = [int(i[j]) for i in idx]
                raise g.st.lane_err(code, f"{space} access {name}{at} is outside shape "
                                    f"{list(shape)}", span, int(g.lanes[j]), tensor=name,
                                    index=at, shape=list(shape))
            out = idx[0] * strides[0]
            for i, s in zip(idx[1:], strides[1:], strict=True):
                out = out + i * s
            return out

        return flat

    def elements(self, buffer: str) -> Callable[[Group, np.ndarray], np.ndarray]:
        """Element index (in units of the buffer's dtype) of logical index k, per lane."""
        slots, eb = self.slots[buffer], self.plan.placements[buffer].elem_bytes
        per = self.plan.total // eb

        def elems(g: Group, k: np.ndarray) -> np.ndarray:
            s = slots[k]
            return s if g.st.nblocks == 1 else g.row * per + s

        return elems

    def load(self, e: ir.Load) -> Callable[[Group], Any]:
        key = (e.space.value, e.tensor)
        if e.space is ir.Space.GLOBAL:
            gl = self.globals[e.tensor]
            flat = self.index(e.tensor, gl.shape, e.indices, e.span, E.GLOBAL_OOB, "global")
            read = gl.read

            def load_global(g: Group) -> Any:
                k = flat(g)
                g.note_read(key, k)
                return read(k)

            return load_global
        pl = self.plan.placements[e.tensor]
        flat = self.index(e.tensor, pl.buffer.shape, e.indices, e.span, E.SHARED_OOB, "shared")
        elems, dtype = self.elements(e.tensor), pl.buffer.dtype

        def load_shared(g: Group) -> Any:
            el = elems(g, flat(g))
            g.note_read(key, el)
            return g.st.codec(dtype)[0](el)

        return load_shared

    # -- local nodes ------------------------------------------------------------------------

    def assign(self, s: ir.Let | ir.VarDecl | ir.Assign) -> Callable[[Group], None]:
        f, uid = self.expr(s.value), s.uid
        if isinstance(s, ir.Let):
            return lambda g: g.set_reg(uid, f(g))
        dtype = s.dtype if isinstance(s, ir.VarDecl) else self.var_dtypes[uid]
        conv = VAR_CONVERT[dtype]
        name = None if isinstance(s, ir.VarDecl) else evaluate.assign_op(s.op, dtype.scalar)
        if name is None:
            return lambda g: g.set_reg(uid, conv(f(g)))
        combine = evaluate.CONCRETE[name]
        return lambda g: g.set_reg(uid, conv(combine(g.reg(uid), f(g))))

    def local(self, node: Node) -> Callable[[Group], Go]:
        """The closure of a local node: runs it on a group, says where each lane goes."""
        s, kind = node.stmt, node.kind
        if kind is Kind.LOCAL and isinstance(s, ir.CommitGroup):
            def commit(g: Group) -> Go:
                for lane in g.lanes.tolist():
                    bulk = g.st.bulk.setdefault(lane, [[], []])
                    bulk[1].append(bulk[0])
                    bulk[0] = []
                return [(node.next, g.lanes)]

            return commit
        if kind is Kind.LOCAL:
            run = self.assign(s)  # type: ignore[arg-type]

            def local(g: Group) -> Go:
                run(g)
                return [(node.next, g.lanes)]

            return local
        if kind is Kind.BRANCH:
            cond = self.expr(s.cond)  # type: ignore[union-attr]
            return lambda g: split(node, g.lanes, mask_of(cond(g), g.n))
        if kind is Kind.ROLE:
            lo, hi, elect = node.lo, node.hi, s.elect_one  # type: ignore[union-attr]
            if elect:
                return lambda g: split(node, g.lanes, g.tid == lo)
            return lambda g: split(node, g.lanes, (g.tid >= lo) & (g.tid < hi))
        if kind is Kind.ELECT:
            return lambda g: split(node, g.lanes, g.tid == node.lo)
        if kind is Kind.LEADER:
            lo = node.lo
            return lambda g: split(node, g.lanes, g.tid == np.maximum(lo, g.tid - g.tid % 32))
        if kind is Kind.FOR:
            return self.loop_head(node)
        if kind is Kind.NEXT:
            return self.loop_back(node)
        if kind is Kind.JUMP:
            return lambda g: [(node.next, g.lanes)]
        raise TypeError(f"not a local node: {kind}")

    def loop_head(self, node: Node) -> Callable[[Group], Go]:
        s = node.stmt
        assert isinstance(s, ir.For)
        lo, hi, uid, end = self.expr(s.lo), self.expr(s.hi), s.var.uid, -1 - node.loop

        def head(g: Group) -> Go:
            v, e = per_lane(lo(g), g.n), per_lane(hi(g), g.n)
            g.set_reg(end, e)
            g.set_reg(uid, v)
            return split(node, g.lanes, v < e)

        return head

    def loop_back(self, node: Node) -> Callable[[Group], Go]:
        s = node.stmt
        assert isinstance(s, ir.For)
        uid, end, step = s.var.uid, -1 - node.loop, s.step

        def back(g: Group) -> Go:
            v = g.reg(uid) + step
            g.set_reg(uid, v)
            return split(node, g.lanes, v < g.reg(end))

        return back

    # -- visible data statements ------------------------------------------------------------

    def effect(self, node: Node) -> Callable[[Group], Outcome]:
        s = node.stmt
        if node.kind is Kind.VIF:
            cond = self.expr(s.cond)  # type: ignore[union-attr]
            return lambda g: Outcome(split(node, g.lanes, mask_of(cond(g), g.n)))
        if isinstance(s, (ir.Let, ir.VarDecl, ir.Assign)):
            run = self.assign(s)

            def let(g: Group) -> Outcome:
                run(g)
                return Outcome([(node.next, g.lanes)])

            return let
        assert isinstance(s, ir.Store)
        return self.store(node, s)

    def store(self, node: Node, s: ir.Store) -> Callable[[Group], Outcome]:
        val = self.expr(s.value)
        key = (s.space.value, s.tensor)
        self_read = any((ld.space.value, ld.tensor) == key
                        for e in (*s.indices, s.value) for ld in loads(e))
        if s.space is ir.Space.GLOBAL:
            gl = self.globals[s.tensor]
            flat = self.index(s.tensor, gl.shape, s.indices, s.span, E.GLOBAL_OOB, "global")
            target: Callable = lambda g: flat(g)  # noqa: E731
            commit = self.commit_global(gl)
        else:
            pl = self.plan.placements[s.tensor]
            flat = self.index(s.tensor, pl.buffer.shape, s.indices, s.span, E.SHARED_OOB,
                              "shared")
            elems = self.elements(s.tensor)
            target = lambda g: elems(g, flat(g))  # noqa: E731
            commit = self.commit_shared(pl.buffer.dtype, pl.elem_bytes)

        def one(g: Group) -> None:
            w = target(g)
            commit(g, g.lanes, w, np.broadcast_to(val(g), (g.n,)))

        def store(g: Group) -> Outcome:
            g.reads = [] if self_read and g.n > 1 else None
            w = target(g)
            v = np.broadcast_to(val(g), (g.n,))
            if g.reads and _reads_earlier_write(g.lanes, w, g.reads, key):
                for k in range(g.n):  # a thread reads what an earlier one writes
                    one(Group(g.st, g.lanes[k:k + 1]))
            else:
                commit(g, *_last_writes(g.lanes, w, v))
            return Outcome([(node.next, g.lanes)])

        return store

    def commit_global(self, gl: VGlobal) -> Callable[..., None]:
        batched = self.batched

        def commit(g: Group, lanes: np.ndarray, w: np.ndarray, v: np.ndarray) -> None:
            if batched:
                st = g.st
                gl.order.claim(w, st.first + lanes // st.nthreads + 1)
            gl.write(w, v)

        return commit

    def commit_shared(self, dtype: ir.DType, eb: int) -> Callable[..., None]:
        def commit(g: Group, lanes: np.ndarray, w: np.ndarray, v: np.ndarray) -> None:
            st = g.st
            st.codec(dtype)[1](w, v)
            if st.tags is not None:
                tid = lanes % st.nthreads
                for k in range(eb):
                    st.tags[w * eb + k] = tid
                    st.tag_epoch[w * eb + k] = st.rel[lanes]

        return commit


def _last_writes(lanes: np.ndarray, w: np.ndarray, v: np.ndarray
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The writes that survive a step: of several threads writing one element, the last."""
    if len(w) < 2 or bool(np.all(w[1:] > w[:-1])):
        return lanes, w, v
    u, first = np.unique(w[::-1], return_index=True)
    if len(u) == len(w):
        return lanes, w, v
    keep = len(w) - 1 - first
    return lanes[keep], w[keep], v[keep]


def _reads_earlier_write(lanes: np.ndarray, w: np.ndarray, reads: list,
                         key: tuple[str, str]) -> bool:
    """Does some lane read an element that a lane before it (in thread order) writes?"""
    mine = [(rl, ra) for rl, k, ra in reads if k == key]
    if not mine:
        return False
    order = np.argsort(w, kind="stable")
    ws, ls, n = w[order], lanes[order], len(w)
    for rl, ra in mine:
        idx = np.searchsorted(ws, ra)
        at = np.minimum(idx, n - 1)
        if np.any((idx < n) & (ws[at] == ra) & (ls[at] < rl)):
            return True
    return False
