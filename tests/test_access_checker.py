"""The access checker against brute force.

An independent evaluator below runs a kernel's control flow for concrete sizes (every
block, every thread, every loop iteration) and records each access's (instance, element)
pairs. The ISL relations of semantics/access/access.py, with the sizes fixed, must hold exactly
the same pairs; and the checker's parametric verdicts must agree with what enumeration
finds at several sizes: PROVED means no violation at any of them, REFUTED comes with a
counterexample that really is a violation when run concretely.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import islpy as isl
import pytest
from corpus_files import load_corpus
from hypothesis import given, settings
from hypothesis import strategies as st

from tilesafe.checkers import access as checker
from tilesafe.checkers.obligation import Severity, Verdict
from tilesafe.checkers.registry import CHECKERS, CheckOptions, load
from tilesafe.frontend import ir
from tilesafe.frontend.load import compile_source, load_program
from tilesafe.frontend.span import Span
from tilesafe.semantics.access import coverage
from tilesafe.semantics.access.access import Kind, collect, point_values, valid_indices
from tilesafe.semantics.expr.affine import eval_sizes

ROOT = Path(__file__).resolve().parent.parent
GOOD = sorted((ROOT / "corpus" / "good").glob("*.tsk"))
# The access checker's codes (TS217 and up belong to the global-memory checker).
ACCESS_CODES = {checker.GLOBAL_OOB, checker.SHARED_OOB, checker.WRITTEN_TWICE,
                checker.UNWRITTEN, checker.EMPTY_GRID, checker.GRID_TOO_LARGE,
                checker.INPUT_WRITTEN, checker.ROLE_UNDECLARED}
BAD = [p for p in sorted((ROOT / "corpus" / "bad").glob("ts2*.tsk"))
       if p.name[:5].upper() in ACCESS_CODES]
OPTIONS = CheckOptions()

# ---- an independent evaluator of the IR's control flow ----------------------------------

Key = tuple[int, str]  # (id of the IR node, tensor or buffer name)
Pairs = dict[Key, set[tuple[tuple[int, ...], tuple[int, ...]]]]


class _Run:
    """Walk the body for one (block, thread); loads return 0 (values never steer control
    flow in the kernels tested here) -- except reads of the index tensors in `data` (a
    kernel with gathers: they index and guard), which return the element (0 outside)."""

    def __init__(self, kernel: ir.Kernel, sizes: dict[str, int], pairs: Pairs,
                 data: dict | None = None):
        self.k, self.sizes, self.pairs = kernel, sizes, pairs
        self.data = data or {}

    def ev(self, e: ir.Expr, env: dict) -> object:
        if isinstance(e, (ir.IntConst, ir.FloatConst)):
            return e.value
        if isinstance(e, ir.SizeVar):
            return self.sizes[e.name]
        if isinstance(e, ir.Builtin):
            t = env["thread"]
            return {"thread": t, "lane": t % 32, "warp_id": t // 32, "block.x": env["block"][0],
                    "block.y": env["block"][1] if len(env["block"]) > 1 else None,
                    "block.z": env["block"][2] if len(env["block"]) > 2 else None}[e.kind.value]
        if isinstance(e, (ir.LoopVar, ir.LocalRef)):
            return env["vars"][e.uid]
        if isinstance(e, ir.UnOp):
            v = self.ev(e.operand, env)
            return (not v) if e.op == "!" else -v
        if isinstance(e, ir.BinOp):
            a = self.ev(e.lhs, env)
            if e.op == "&&":
                return bool(a) and bool(self.ev(e.rhs, env))
            if e.op == "||":
                return bool(a) or bool(self.ev(e.rhs, env))
            b = self.ev(e.rhs, env)
            return {"+": lambda: a + b, "-": lambda: a - b, "*": lambda: a * b,
                    "/": lambda: a // b if isinstance(a, int) else a / b, "%": lambda: a % b,
                    "==": lambda: a == b, "!=": lambda: a != b, "<": lambda: a < b,
                    "<=": lambda: a <= b, ">": lambda: a > b, ">=": lambda: a >= b}[e.op]()
        if isinstance(e, ir.Call):
            args = [self.ev(a, env) for a in e.args]
            return {"min": min, "max": max, "abs": abs, "f32": float,
                    "i32": lambda v: int(v)}[e.func](*args)
        if isinstance(e, ir.Load):
            idx = tuple(self.ev(i, env) for i in e.indices)
            self.record(e, e.tensor, env, [idx])
            arr = self.data.get(e.tensor)
            if arr is not None and all(0 <= i < n for i, n in zip(idx, arr.shape, strict=True)):
                return int(arr[idx])
            return 0
        if isinstance(e, ir.FragLoad):  # a register: no tensor or buffer element
            self.ev(e.reg, env)
            return 0
        raise AssertionError(f"unexpected {e}")

    def record(self, node: object, tensor: str, env: dict, elements) -> None:
        inst = tuple(env["block"]) + (env["thread"],) + tuple(env["loops"])
        bucket = self.pairs.setdefault((id(node), tensor), set())
        bucket.update((inst, tuple(x)) for x in elements)

    def box(self, coords, extents, clip_to=None) -> Iterator[tuple[int, ...]]:
        for off in itertools.product(*(range(b) for b in extents)):
            x = tuple(c + o for c, o in zip(coords, off, strict=True))
            if clip_to is None or all(0 <= v < s for v, s in zip(x, clip_to, strict=True)):
                yield x

    def shape(self, tensor: str) -> tuple[int, ...]:
        return tuple(self.ev(s, {}) for s in self.k.tensor(tensor).shape)

    def stmts(self, stmts, env: dict) -> None:
        for s in stmts:
            self.stmt(s, env)

    def stmt(self, s: ir.Stmt, env: dict) -> None:
        if isinstance(s, (ir.Let, ir.VarDecl, ir.Assign)):
            value = self.ev(s.value, env)
            if not isinstance(s, ir.Assign) or s.op == "=":
                env["vars"][s.uid] = value  # compound updates of floats do not matter here
        elif isinstance(s, ir.Store):
            idx = tuple(self.ev(i, env) for i in s.indices)
            self.ev(s.value, env)
            self.record(s, s.tensor, env, [idx])
        elif isinstance(s, ir.For):
            v, hi = self.ev(s.lo, env), self.ev(s.hi, env)
            while v < hi:
                inner = {**env, "vars": {**env["vars"], s.var.uid: v},
                         "loops": env["loops"] + (v,)}
                self.stmts(s.body, inner)
                v += s.step
        elif isinstance(s, ir.If):
            taken = self.ev(s.cond, env)
            self.stmts(s.then if taken else s.orelse, {**env, "vars": dict(env["vars"])})
        elif isinstance(s, ir.Role):
            lo, hi = s.threads.lo, (s.threads.lo + 1 if s.elect_one else s.threads.hi)
            if lo <= env["thread"] < hi:
                self.stmts(s.body, {**env, "vars": dict(env["vars"])})
        elif isinstance(s, ir.FragStore):
            self.ev(s.reg, env)
            self.ev(s.value, env)
        elif isinstance(s, ir.Wgmma):  # every thread of the warpgroup reads both tiles
            for tile in (s.a, s.b):
                starts = tuple(self.ev(i.start, env) for i in tile.index)
                extents = tuple(i.extent or 1 for i in tile.index)
                self.record(s, tile.buffer, env, self.box(starts, extents))
        elif isinstance(s, (ir.TmaLoad, ir.TmaStore)):
            tmap = self.k.tensormap(s.tensormap)
            coords = tuple(self.ev(c, env) for c in s.coords)
            sl = s.dst if isinstance(s, ir.TmaLoad) else s.src
            prefix = tuple(self.ev(p, env) for p in sl.prefix)
            tile = self.k.buffer(sl.buffer).shape[len(prefix):]
            self.record(s, tmap.tensor, env, self.box(coords, tmap.box, self.shape(tmap.tensor)))
            self.record(s, sl.buffer, env, [prefix + x for x in self.box((0,) * len(tile), tile)])


def brute_force(kernel: ir.Kernel, sizes: dict[str, int], stride: int = 1,
                data: dict | None = None) -> Pairs:
    """(instance, element) pairs of every access; only threads that are multiples of
    `stride` run (to keep large corpus kernels cheap); `data`: index tensors' contents."""
    pairs: Pairs = {}
    run = _Run(kernel, sizes, pairs, data)
    grid = [run.ev(g, {}) for g in kernel.grid]
    for block in itertools.product(*(range(g) for g in grid)):
        for t in range(0, kernel.block, stride):
            run.stmts(kernel.body, {"block": block, "thread": t, "loops": (), "vars": {}})
    return pairs


def isl_pairs(rel: isl.Map, sizes: dict[str, int], ndims: int, thread: int,
              stride: int = 1) -> set:
    if stride > 1:
        ls = isl.LocalSpace.from_space(rel.domain().get_space())
        t = isl.PwAff.var_on_domain(ls, isl.dim_type.set, thread)
        rel = rel.intersect_domain(t.mod_val(isl.Val.int_from_si(rel.get_ctx(), stride))
                                   .eq_set(t.sub(t)))
    s = rel.wrap()
    for i in range(s.dim(isl.dim_type.param)):
        name = s.get_dim_name(isl.dim_type.param, i)
        s = s.fix_val(isl.dim_type.param, i, isl.Val.int_from_si(s.get_ctx(), sizes[name]))
    out: set = set()

    def add(point: isl.Point) -> None:
        coords = point_values(point)[1]
        out.add((tuple(coords[:ndims]), tuple(coords[ndims:])))

    s.foreach_point(add)
    return out


def allowed(kernel: ir.Kernel, sizes: dict[str, int]) -> bool:
    run = _Run(kernel, sizes, {})
    return all(run.ev(w, {}) for w in kernel.where)


def small_sizes(kernel: ir.Kernel, count: int = 2) -> list[dict[str, int]]:
    """A few small sizes the `where` clause allows (smallest products first)."""
    values = (1, 3, 8, 33, 64, 72, 100, 128, 136, 192)
    found = []
    for combo in itertools.product(values, repeat=len(kernel.sizes)):
        sizes = dict(zip(kernel.sizes, combo, strict=True))
        if allowed(kernel, sizes):
            found.append(sizes)
    found.sort(key=lambda s: (sorted(s.values(), reverse=True), list(s.values())))
    return found[:count]


# ---- comparisons ------------------------------------------------------------------------


def _elements(kernel: ir.Kernel, tensor: str, sizes) -> set[tuple[int, ...]]:
    shape = [_Run(kernel, sizes, {}).ev(e, {}) for e in kernel.tensor(tensor).shape]
    return set(itertools.product(*(range(max(0, s)) for s in shape)))


def compare_relations(kernel: ir.Kernel, sizes: dict[str, int], accesses=None,
                      stride: int = 1) -> Pairs:
    """Every exact ISL relation equals brute force at these sizes (for the threads that
    are multiples of `stride`); returns brute force."""
    pairs = brute_force(kernel, sizes, stride)
    for a in accesses or collect(kernel, isl.Context()):
        assert a.exact, a.dropped
        want = pairs.get((id(a.node), a.tensor), set())
        got = isl_pairs(a.relation, sizes, len(a.dims), len(kernel.grid), stride)
        assert got == want, (a.name, a.tensor, sizes, sorted(got ^ want)[:5])
    return pairs


def concrete_violations(kernel: ir.Kernel, sizes, pairs: Pairs,
                        accesses=None) -> dict[str, set]:
    """Per obligation kind, what enumeration finds wrong at these sizes."""
    out: dict[str, set] = {"bounds": set(), "twice": set(), "unwritten": set(),
                           "input": set(), "grid": set()}
    grid = [eval_sizes(g, sizes) for g in kernel.grid]
    out["grid"] = {(axis, n) for axis, (n, limit) in enumerate(zip(grid, checker.GRID_LIMITS,
                                                                     strict=False))
                   if not 1 <= n <= limit}
    roles = {t.name: t.role for t in kernel.params}
    nodes = {(id(a.node), a.tensor): a for a in accesses or collect(kernel, isl.Context())}
    writes: dict[str, Counter] = {}
    for key, found in pairs.items():
        a = nodes[key]
        if a.space is ir.Space.GLOBAL:
            shape = [_Run(kernel, sizes, {}).ev(e, {}) for e in kernel.tensor(a.tensor).shape]
        else:
            shape = list(kernel.buffer(a.tensor).shape)
        for inst, idx in found:
            if not all(0 <= v < s for v, s in zip(idx, shape, strict=True)):
                out["bounds"].add((a.span, inst, idx))
        if a.kind is Kind.WRITE and a.space is ir.Space.GLOBAL:
            if not roles[a.tensor].written:
                out["input"] |= {(a.tensor, idx) for _, idx in found}
                continue
            counter = writes.setdefault(a.tensor, Counter())
            counter.update(idx for _, idx in found)
    for t in kernel.params:  # an output nothing writes is entirely unwritten ...
        if t.role.written and not out["grid"]:  # ... if the grid launches (TS213/TS214)
            writes.setdefault(t.name, Counter())
    for tensor, counter in writes.items():
        out["twice"] |= {(tensor, idx) for idx, n in counter.items() if n > 1}
        out["unwritten"] |= {(tensor, idx) for idx in _elements(kernel, tensor, sizes)
                             if counter[idx] == 0}
    return out


def check_against_enumeration(kernel: ir.Kernel, size_list) -> list:
    """The parametric verdicts agree with enumeration at every size in `size_list`."""
    # TS216 (a role inferred, not declared) is a warning about the text, not about accesses.
    obligations = [o for o in checker.check(kernel, OPTIONS) if o.severity is Severity.ERROR]
    by_kind: dict[str, list] = {"bounds": [], "twice": [], "unwritten": [], "input": [],
                                "grid": []}
    for o in obligations:
        kind = ("twice" if "at most once" in o.name else
                "unwritten" if "at least once" in o.name else
                "input" if "never written" in o.name else
                "grid" if "grid dimension" in o.name else "bounds")
        by_kind[kind].append(o)
        assert o.verdict is not Verdict.UNKNOWN, o.message
    accesses = collect(kernel, isl.Context())
    for sizes in size_list:
        pairs = compare_relations(kernel, sizes, accesses)
        found = concrete_violations(kernel, sizes, pairs, accesses)
        for kind, obs in by_kind.items():
            if found[kind]:  # a violation at concrete sizes: some obligation refutes it
                assert any(o.verdict is Verdict.REFUTED for o in obs), (kind, sizes, found)
            if kind == "bounds":
                for o in obs:
                    if o.verdict is Verdict.PROVED:
                        assert not {x for x in found["bounds"] if x[0] == o.span}, (o.name, sizes)
            elif all(o.verdict is Verdict.PROVED for o in obs):
                assert not found[kind], (kind, sizes)
    for o in obligations:
        if o.verdict is Verdict.REFUTED:
            replay_counterexample(kernel, o)
    return obligations


def gathered_data(kernel: ir.Kernel, cex: dict, seed: int = 0) -> dict | None:
    """For a kernel with `requires` clauses: index tensors that hold the values a
    counterexample's instances read (`gathered`) and satisfy every clause, drawn by
    semantics/access/requires_synth.py -- data with those values exists, so the
    refutation is one of a launch the clauses allow. None for a kernel without clauses."""
    if not kernel.requires:
        return None
    import numpy as np

    from tilesafe.semantics.interpreter.interp_io import satisfying_index_tensors, tensor_shapes

    fixed: dict[str, dict[tuple[int, ...], int]] = {}
    for inst in [cex] + [cex[w] for w in ("writer1", "writer2") if w in cex]:
        for elem, value in inst.get("gathered", {}).items():
            name, idx = elem[:-1].split("[")
            fixed.setdefault(name, {})[tuple(int(i) for i in idx.split(", "))] = value
    sizes = cex["sizes"]
    return satisfying_index_tensors(kernel, sizes, tensor_shapes(kernel, sizes),
                                    np.random.default_rng(seed), fixed)


def replay_counterexample(kernel: ir.Kernel, o) -> None:
    """A refutation's counterexample is a real violation when run concretely (through index
    tensors: on data the clauses allow that holds the values it names)."""
    cex = o.counterexample
    sizes = cex["sizes"]
    assert allowed(kernel, sizes)
    if max(sizes.values(), default=0) > 300:
        return  # too large to enumerate cheaply; the ISL point itself satisfied the query
    pairs = brute_force(kernel, sizes, data=gathered_data(kernel, cex))
    nodes = {a.name: a for a in collect(kernel, isl.Context())}
    if o.code in (checker.GLOBAL_OOB, checker.SHARED_OOB):
        a = nodes[cex["statement"].split()[0]]
        inst = tuple(cex["block"]) + (cex["thread"],) + tuple(cex["loops"].values())
        assert (inst, tuple(cex["index"])) in pairs[(id(a.node), a.tensor)]
        assert not all(0 <= v < s for v, s in zip(cex["index"], cex["shape"], strict=True))
    elif o.code == checker.WRITTEN_TWICE:
        element = tuple(cex["element"])
        seen = []
        for w in ("writer1", "writer2"):
            a = nodes[cex[w]["statement"].split()[0]]
            inst = tuple(cex[w]["block"]) + (cex[w]["thread"],) + tuple(cex[w]["loops"].values())
            assert (inst, element) in pairs[(id(a.node), a.tensor)]
            seen.append((a.name, inst))
        assert seen[0] != seen[1]
    elif o.code == checker.EMPTY_GRID:
        assert min(eval_sizes(g, sizes) for g in kernel.grid) < 1
    elif o.code == checker.GRID_TOO_LARGE:
        assert any(eval_sizes(g, sizes) > limit
                   for g, limit in zip(kernel.grid, checker.GRID_LIMITS, strict=False))
    elif o.code == checker.INPUT_WRITTEN:
        a = nodes[cex["statement"].split()[0]]
        assert kernel.tensor(a.tensor).role is ir.ParamRole.IN
        inst = tuple(cex["block"]) + (cex["thread"],) + tuple(cex["loops"].values())
        assert (inst, tuple(cex["element"])) in pairs[(id(a.node), a.tensor)]
    elif o.code == checker.UNWRITTEN:
        element = tuple(cex["element"])
        tensor = o.name.split(": ")[1].split()[0]
        assert element in _elements(kernel, tensor, sizes)
        for a in nodes.values():
            if a.tensor == tensor and a.kind is Kind.WRITE and a.space is ir.Space.GLOBAL:
                found = pairs.get((id(a.node), a.tensor), set())
                assert all(idx != element for _, idx in found), (a.name, element)
    else:
        raise AssertionError(f"unexpected code {o.code}")


# ---- random kernels from a template -----------------------------------------------------

TEMPLATE = """
kernel tiles(src: in global f32[M, N], dst: {dst_role}global f32[M, N])
  where M > 0, N > 0, M <= 65536, N <= 65536{where}
  grid ({grid}) block {block}
{{
  shared s: f32[{srows}, {cols}]
  {role_open}
  for k in 0 .. {loop_hi} step {step} {{
    let r = block.x * {tile} + thread / {cols}{roff}
    let c = k * {cols} + thread % {cols}{coff}
    if {guard} {{
      dst[r, c] = src[r, c{src_off}]
    }}
    {extra}
  }}
  s[thread / {cols}, thread % {cols}] = 1.0
  {role_close}
}}
"""


@st.composite
def tile_kernels(draw) -> str:
    cols = draw(st.sampled_from([1, 2, 4]))
    rows = draw(st.sampled_from([1, 2, 3]))
    block = cols * rows
    tile = draw(st.sampled_from([rows, rows, max(1, rows - 1), rows + 1]))
    grid = draw(st.sampled_from([f"(M + {tile - 1}) / {tile}", f"M / {tile}",
                                 f"(M + {tile}) / {tile}"]))
    loop_hi = draw(st.sampled_from([f"(N + {cols - 1}) / {cols}", f"N / {cols}",
                                    f"N / {cols} + 1"]))
    guard = draw(st.sampled_from(["r < M && c < N", "r < M && c < N", "r <= M && c < N",
                                  "r < M", "c < N && r >= 0", "r < M && !(c >= N)"]))
    off = st.sampled_from(["", "", "", " + 1", " - 1"])
    extra = draw(st.sampled_from(["", "", "if thread == 0 && k == 0 { dst[0, 0] = 2.0 }",
                                  "if r < M && c < N { } else { dst[0, 0] = 3.0 }",
                                  "if thread == 0 && k == 1 { src[0, 0] = 4.0 }"]))
    role = draw(st.sampled_from(["", "", "threads", "elect"]))
    role_open, role_close = "", ""
    if role:
        hi = draw(st.integers(1, block))
        role_open = f"role w = threads 0 .. {hi}" + (", elect one" if role == "elect" else "")
        role_open += " {"
        role_close = "}"
    return TEMPLATE.format(
        where=draw(st.sampled_from(["", f", M % {tile} == 0", f", N % {cols} == 0"])),
        grid=grid, block=block, srows=draw(st.sampled_from([rows, max(1, rows - 1)])),
        dst_role=draw(st.sampled_from(["out ", "out ", "inout ", ""])),
        cols=cols, role_open=role_open, role_close=role_close, loop_hi=loop_hi,
        step=draw(st.sampled_from([1, 1, 2])), tile=tile, roff=draw(off), coff=draw(off),
        guard=guard, src_off=draw(st.sampled_from(["", "", " + 1"])), extra=extra)


TEMPLATE_SIZES = [{"M": m, "N": n} for m, n in ((1, 1), (2, 4), (3, 5), (5, 2), (6, 4), (4, 3))]


@settings(max_examples=40, deadline=None)
@given(tile_kernels())
def test_random_tile_kernels_agree_with_enumeration(source: str) -> None:
    kernel = compile_source(source).kernels[0]
    sizes = [s for s in TEMPLATE_SIZES if allowed(kernel, s)]
    check_against_enumeration(kernel, sizes)


TMA_TEMPLATE = """
kernel boxes(src: in global f16[M, N], dst: out global f16[M, N])
  where M > 0, N > 0, M <= 65536, N <= 65536
  grid ({grid_x}, {grid_y}) block 64
{{
  tensormap tin = tiled(src, box [{br}, {bc}])
  tensormap tout = tiled(dst, box [{br}, {bc}])
  shared tile: f16[{br}, {bc}]
  mbarrier ready count 1 guards tile
  if thread == 0 {{ init ready; fence mbarrier_init }}
  sync
  role leader = warp 0{elect} {{
    arrive ready, expect_tx bytes(tile)
    tma_load tile <- tin[block.x * {sr}, block.y * {sc}] signal ready
  }}
  wait ready parity 0
  role storer = warp 1{elect} {{
    tma_store tout[block.x * {sr}, block.y * {sc}{coff}] <- tile
    commit_group
    wait_group 0
  }}
}}
"""


@st.composite
def tma_kernels(draw) -> str:
    br, bc = draw(st.sampled_from([1, 2, 3])), draw(st.sampled_from([1, 2, 4]))
    sr = draw(st.sampled_from([br, br, max(1, br - 1), br + 1]))
    sc = draw(st.sampled_from([bc, bc, max(1, bc - 1)]))
    return TMA_TEMPLATE.format(
        br=br, bc=bc, sr=sr, sc=sc,
        grid_x=draw(st.sampled_from([f"(M + {sr - 1}) / {sr}", f"M / {sr}"])),
        grid_y=draw(st.sampled_from([f"(N + {sc - 1}) / {sc}", f"N / {sc}"])),
        elect=draw(st.sampled_from([", elect one", ", elect one", ""])),
        coff=draw(st.sampled_from(["", "", " + 1"])))


@settings(max_examples=15, deadline=None)
@given(tma_kernels())
def test_random_tma_kernels_agree_with_enumeration(source: str) -> None:
    kernel = compile_source(source).kernels[0]
    check_against_enumeration(kernel, [{"M": m, "N": n} for m in (1, 3, 4) for n in (1, 5)])


# ---- fixed cases ------------------------------------------------------------------------


def _only(source: str) -> ir.Kernel:
    return compile_source(source).kernels[0]


def _codes(kernel: ir.Kernel) -> dict[str, Verdict]:
    return {o.name.split(": ", 1)[1]: o.verdict for o in checker.check(kernel, OPTIONS)}


def test_registered() -> None:
    assert CHECKERS["access"] == "tilesafe.checkers.access"
    assert load("access") is checker.check


def test_stepped_loop_and_lets() -> None:
    k = _only("""
kernel evens(x: global f32[N], y: global f32[N]) where N % 64 == 0, N > 0
  grid (N / 64) block 32 {
  for j in 0 .. 64 step 2 {
    let i = block.x * 64 + j + (thread % 2)
    if thread < 2 { y[i] = x[i] }
  }
}""")
    verdicts = _codes(k)
    assert verdicts["y written at most once"] is Verdict.PROVED
    assert verdicts["y written at least once"] is Verdict.PROVED
    check_against_enumeration(k, [{"N": 64}, {"N": 128}])


def test_symbolic_only_counterexample() -> None:
    """The bug shows only past a size no fixed test would pick: N > 4096."""
    k = _only("""
kernel late(x: global f32[N], y: global f32[N]) where N > 0
  grid ((N + 127) / 128) block 128 {
  let i = block.x * 128 + thread
  if i < N && i != 5000 { y[i] = x[i] }
  if i == 5000 { y[i + 1] = x[i] }
}""")
    obs = {o.name.split(": ", 1)[1]: o for o in checker.check(k, OPTIONS)}
    twice = obs["y written at most once"]
    assert twice.verdict is Verdict.REFUTED and twice.code == checker.WRITTEN_TWICE
    assert twice.counterexample["element"] == [5001]
    cover = obs["y written at least once"]
    assert cover.verdict is Verdict.REFUTED and cover.counterexample["element"] == [5000]
    oob = {o.counterexample["index"][0]: o.counterexample for o in obs.values()
           if o.code == checker.GLOBAL_OOB}
    assert set(oob) == {5000, 5001}  # x[5000] and y[5001], when N is just below them
    assert all(c["index"][0] >= c["sizes"]["N"] > 4992 for c in oob.values())
    replay_counterexample(k, twice)
    replay_counterexample(k, cover)


def test_data_dependent_guard_is_unknown_not_proved() -> None:
    """A guard that reads memory: bounds still proved (the guard only narrows), but
    coverage cannot be, and an overlap through it is not claimed either way."""
    k = _only("""
kernel relu_mask(x: global f32[N], y: global f32[N]) where N > 0
  grid ((N + 31) / 32) block 32 {
  let i = block.x * 32 + thread
  if i < N && x[i] > 0.0 { y[i] = x[i] }
}""")
    obs = {o.name.split(": ", 1)[1]: o for o in checker.check(k, OPTIONS)}
    assert obs["y written at most once"].verdict is Verdict.PROVED
    cover = obs["y written at least once"]
    assert cover.verdict is Verdict.UNKNOWN and cover.code == checker.INEXACT
    bounds = [o for o in obs.values() if "in bounds" in o.name]
    assert bounds and all(o.verdict is Verdict.PROVED for o in bounds)  # short-circuit guard


def test_data_dependent_if_else_covers() -> None:
    """Opposite branches of one if at one instance never both run; the else branch with
    the same index is not a second writer -- and one of the two runs at every instance,
    so together they write every element (semantics/access/branch_cover.py)."""
    k = _only("""
kernel relu(x: global f32[N], y: global f32[N]) where N > 0
  grid ((N + 31) / 32) block 32 {
  let i = block.x * 32 + thread
  if i < N {
    if x[i] > 0.0 { y[i] = x[i] } else { y[i] = 0.0 }
  }
}""")
    verdicts = _codes(k)
    assert verdicts["y written at most once"] is Verdict.PROVED
    # Each branch alone is guarded by an unknown condition, but whatever it is, one of the
    # two writes runs: coverage is proved (tests/test_branch_cover.py has the cases where
    # it must not be).
    assert verdicts["y written at least once"] is Verdict.PROVED


def test_budget_exhaustion_is_unknown() -> None:
    k = load_program(ROOT / "corpus" / "good" / "ragged_tail.tsk").kernels[0] if (
        ROOT / "corpus" / "good" / "ragged_tail.tsk").exists() else None
    if k is None:
        pytest.skip("corpus/good/ragged_tail.tsk not present")
    obs = checker.check(k, CheckOptions(timeout_ms=0))
    assert obs and all(o.verdict is not Verdict.PROVED for o in obs)
    assert all(o.code == checker.ISL_LIMIT for o in obs)


# ---- corpora ----------------------------------------------------------------------------


@pytest.mark.parametrize("path", GOOD, ids=[p.stem for p in GOOD])
def test_good_corpus_proved_and_exact(path: Path) -> None:
    for kernel in load_corpus(path).kernels:
        obligations = checker.check(kernel, OPTIONS)
        for o in obligations:
            assert o.verdict is Verdict.PROVED, (o.name, o.message)
        accesses = collect(kernel, isl.Context())
        for sizes in small_sizes(kernel, count=1):
            # Threads 0, 7, 14, ..: every lane and warp position still shows up.
            compare_relations(kernel, sizes, accesses, stride=7)


@pytest.mark.parametrize("path", BAD, ids=[p.stem for p in BAD])
def test_bad_corpus_refuted(path: Path) -> None:
    head = path.read_text().splitlines()[0].split()
    code = head[2]
    line = int(head[4]) if len(head) > 4 else None
    refuted = [o for k in load_corpus(path).kernels for o in checker.check(k, OPTIONS)
               if o.verdict is Verdict.REFUTED]
    assert any(o.code == code for o in refuted), [o.code for o in refuted]
    if line is not None:
        assert any(o.code == code and o.span.line == line for o in refuted)
    for k in load_corpus(path).kernels:
        for o in checker.check(k, OPTIONS):
            if o.verdict is Verdict.REFUTED:
                replay_counterexample(k, o)


# ---- the reference interpreter agrees with the counterexamples ---------------------------


def _interp_inputs(kernel: ir.Kernel, sizes: dict[str, int]):
    import numpy as np

    from tilesafe.semantics.interpreter.smem import NUMPY_DTYPE

    out = {}
    for t in kernel.params:
        shape = tuple(_Run(kernel, sizes, {}).ev(e, {}) for e in t.shape)
        dtype = NUMPY_DTYPE[t.dtype]
        fill = np.nan if np.dtype(dtype).kind == "f" else 0
        out[t.name] = np.full(shape, fill, dtype=dtype)
    return out


@pytest.mark.parametrize("path", BAD, ids=[p.stem for p in BAD])
def test_interpreter_confirms_counterexample(path: Path) -> None:
    """semantics/interpreter/interp.py (written independently) runs the refuted kernel at the
    counterexample's sizes: an out-of-bounds refutation makes it raise the same code; an
    unwritten element stays at its NaN fill."""
    interp = pytest.importorskip("tilesafe.semantics.interpreter.interp")
    from tilesafe.semantics.interpreter.interp_error import InterpError

    kernel = load_corpus(path).kernels[0]
    refuted = [o for o in checker.check(kernel, OPTIONS) if o.verdict is Verdict.REFUTED]
    o = refuted[0]
    sizes = o.counterexample["sizes"]
    if o.code in (checker.EMPTY_GRID, checker.GRID_TOO_LARGE):
        with pytest.raises(InterpError) as err:  # the launch itself is rejected, before
            interp.run_kernel(kernel, sizes, {})  # any input is looked at
        assert err.value.code == ("TS200" if o.code == checker.EMPTY_GRID else o.code)
        return
    inputs = _interp_inputs(kernel, sizes)
    inputs.update(gathered_data(kernel, o.counterexample) or {})
    if o.code in (checker.GLOBAL_OOB, checker.SHARED_OOB):
        with pytest.raises(InterpError) as err:
            interp.run_kernel(kernel, sizes, inputs)
        assert err.value.code == o.code
    elif o.code == checker.INPUT_WRITTEN:  # the input's element really changes
        tensor = o.name.split("input ")[1].split()[0]
        result = interp.run_kernel(kernel, sizes, inputs)
        value = result.tensors[tensor][tuple(o.counterexample["element"])]
        assert value == value  # no longer the NaN it started as
    elif o.code == checker.UNWRITTEN:
        result = interp.run_kernel(kernel, sizes, inputs)
        tensor = o.name.split(": ")[1].split()[0]
        assert result.tensors[tensor][tuple(o.counterexample["element"])] != \
            result.tensors[tensor][tuple(o.counterexample["element"])]  # still NaN
    else:  # TS211: the interpreter does not count writes; it must at least run
        interp.run_kernel(kernel, sizes, inputs)


# ---- the term translator on its own -----------------------------------------------------

_SPAN = Span("<test>", 1, 1, 1, 1)
_INT = ir.ScalarType.INT


def _exprs() -> st.SearchStrategy[ir.Expr]:
    leaves = st.one_of(
        st.integers(-70, 70).map(lambda v: ir.IntConst(_SPAN, _INT, v)),
        st.just(ir.SizeVar(_SPAN, _INT, "M")),
        st.just(ir.LoopVar(_SPAN, _INT, "k", 1)),
        st.sampled_from(list(ir.BuiltinKind)[:4]).map(lambda b: ir.Builtin(_SPAN, _INT, b)),
        st.just(ir.LocalRef(_SPAN, _INT, "a", 7, False)),  # let a = k - 3 * thread
    )

    def grow(sub):
        c = st.integers(1, 9).map(lambda v: ir.IntConst(_SPAN, _INT, v))
        return st.one_of(
            st.tuples(st.sampled_from("+-"), sub, sub).map(
                lambda t: ir.BinOp(_SPAN, _INT, t[0], t[1], t[2])),
            st.tuples(st.sampled_from("*/%"), sub, c).map(
                lambda t: ir.BinOp(_SPAN, _INT, t[0], t[1], t[2])),
            st.tuples(st.sampled_from(["min", "max"]), sub, sub).map(
                lambda t: ir.Call(_SPAN, _INT, t[0], (t[1], t[2]))),
            sub.map(lambda e: ir.Call(_SPAN, _INT, "abs", (e,))),
            sub.map(lambda e: ir.UnOp(_SPAN, _INT, "-", e)),
        )

    return st.recursive(leaves, grow, max_leaves=8)


@settings(max_examples=80, deadline=None)
@given(_exprs(), st.integers(0, 99), st.integers(-40, 40), st.integers(1, 50))
def test_term_matches_python(expr: ir.Expr, thread: int, k: int, m: int) -> None:
    """Floor division and modulo of negative values, min/max/abs, lane/warp_id and a let
    are translated exactly: the ISL function at a point equals direct evaluation."""
    from tilesafe.semantics.expr.affine import AffineEnv, condition, make_space, term

    ctx = isl.Context()
    let = ir.BinOp(_SPAN, _INT, "-", ir.LoopVar(_SPAN, _INT, "k", 1),
                   ir.BinOp(_SPAN, _INT, "*", ir.IntConst(_SPAN, _INT, 3),
                            ir.Builtin(_SPAN, _INT, ir.BuiltinKind.THREAD)))
    env = AffineEnv(make_space(ctx, ("M",), ("block_x", "thread", "k"), "S"), {1: 2}, (0,), 1,
                    {7: let})
    kernel = _only("kernel t(x: global f32[M]) grid (1) block 1 { x[0] = 1.0 }")
    run = _Run(kernel, {"M": m}, {})
    scope = {"block": (0,), "thread": thread, "loops": (k,), "vars": {1: k}}
    scope["vars"][7] = run.ev(let, scope)
    want = run.ev(expr, scope)
    point = isl.Set.read_from_str(
        ctx, f"[M] -> {{ S[0, {thread}, {k}] : M = {m} }}").sample_point()
    got = term(expr, env).eval(point).to_python()
    assert got == want
    # and as a condition: `expr >= 0` holds at the point iff Python says so
    cond = ir.BinOp(_SPAN, ir.ScalarType.BOOL, ">=", expr, ir.IntConst(_SPAN, _INT, 0))
    sets = condition(cond, env)
    at = isl.Set.from_point(point)
    assert sets.exact and sets.over.intersect(at).is_empty() == (want < 0)


def test_possible_overlap_through_unknown_guard_is_unknown() -> None:
    k = _only("""
kernel flag(x: global f32[N], y: global f32[N]) where N > 0
  grid ((N + 31) / 32) block 32 {
  let i = block.x * 32 + thread
  if i < N { y[i] = 1.0 }
  if x[0] > 0.0 { y[0] = 2.0 }
}""")
    obs = {o.name.split(": ", 1)[1]: o for o in checker.check(k, OPTIONS)}
    once = obs["y written at most once"]
    assert once.verdict is Verdict.UNKNOWN and once.code == checker.INEXACT
    assert once.evidence["dropped_guards"]
    assert obs["y written at least once"].verdict is Verdict.PROVED  # the first store alone


# ---- coverage through the tile structure (semantics/access/coverage.py) -------------------------

BLOCKED = """
kernel blocked(src: in global f32[M, N], dst: out global f32[M, N])
  where M > 0, N > 0, M <= 4096, N <= 4096{where}
  grid ({gx}, {gy}) block {block}
{{
  for e in 0 .. {sweeps} {{
    let idx = e * {block} + thread
    let i = block.x * {tile} + {row}
    let j = block.y * {tile} + {col}
    {guard_open}dst[i, j] = src[i, j]{guard_close}
  }}
}}
"""


def _factor(draw, n: int) -> list[int]:
    """n as an ordered product of radices > 1 (a CuTe mode's hierarchical shape)."""
    out = []
    while n > 1:
        r = draw(st.sampled_from([d for d in range(2, n + 1) if n % d == 0]))
        out.append(r)
        n //= r
    return out


@st.composite
def blocked_kernels(draw) -> tuple[str, bool]:
    """A tile of T x T elements walked in storage order of a hierarchical (CuTe-style)
    layout: idx = e * BLOCK + thread splits into mixed-radix digits, each a digit of the
    row or of the column. Without a planted bug the digits form a bijection onto the tile
    (a blocked row- or column-major order, or any interleaving of the modes). Returns the
    source and whether it is the bug-free kernel."""
    tile = draw(st.sampled_from([4, 6, 8]))
    rows, cols = _factor(draw, tile), _factor(draw, tile)
    order = draw(st.permutations([("i", k) for k in range(len(rows))] +
                                 [("j", k) for k in range(len(cols))]))
    weight, terms = 1, {"i": [], "j": []}
    for axis, k in order:  # digits of idx, least significant first
        radices = rows if axis == "i" else cols
        place = 1
        for r in radices[:k]:
            place *= r
        terms[axis].append((weight, radices[k], place))
        weight *= radices[k]
    bug = draw(st.sampled_from(["", "", "", "sweeps", "weight", "place", "guard"]))
    if bug == "weight":  # one digit read at the wrong position of idx
        axis = draw(st.sampled_from("ij"))
        w, r, p = terms[axis][0]
        terms[axis][0] = (w * 2, r, p)
    if bug == "place":  # one digit placed where another goes
        axis = draw(st.sampled_from("ij"))
        w, r, p = terms[axis][-1]
        terms[axis][-1] = (w, r, max(1, p // 2))

    def expr(axis: str) -> str:
        return " + ".join(f"((idx / {w}) % {r}) * {p}" for w, r, p in terms[axis])

    block = draw(st.sampled_from([d for d in range(4, tile * tile + 1)
                                  if (tile * tile) % d == 0]))
    sweeps = tile * tile // block - (1 if bug == "sweeps" and block < tile * tile else 0)
    ragged = draw(st.booleans())
    guard = "i < M && j < N" if bug != "guard" else "i <= M && j < N"
    if ragged or bug == "guard":
        where, gx, gy = "", f"(M + {tile - 1}) / {tile}", f"(N + {tile - 1}) / {tile}"
        opened, closed = f"if {guard} {{ ", " }"
    else:
        where, gx, gy = f", M % {tile} == 0, N % {tile} == 0", f"M / {tile}", f"N / {tile}"
        opened = closed = ""
    source = BLOCKED.format(where=where, gx=gx, gy=gy, block=block, sweeps=sweeps, tile=tile,
                            row=expr("i"), col=expr("j"), guard_open=opened,
                            guard_close=closed)
    return source, bug == "" or (bug == "sweeps" and block == tile * tile)


def _image_points(elements: isl.Set, sizes: dict[str, int]) -> set[tuple[int, ...]]:
    for i in range(elements.dim(isl.dim_type.param)):
        name = elements.get_dim_name(isl.dim_type.param, i)
        elements = elements.fix_val(isl.dim_type.param, i,
                                    isl.Val.int_from_si(elements.get_ctx(), sizes[name]))
    out: set[tuple[int, ...]] = set()
    elements.foreach_point(lambda p: out.add(tuple(point_values(p)[1])))
    return out


def check_images(kernel: ir.Kernel, size_list) -> dict[str, str]:
    """Every global write's image (coverage.image) holds exactly the elements of the tensor
    that enumeration writes, at every size; returns how each was computed."""
    ctx = isl.Context()
    accesses = collect(kernel, ctx)
    methods = {}
    for sizes in size_list:
        pairs = brute_force(kernel, sizes)
        for a in accesses:
            if a.kind is not Kind.WRITE or a.space is not ir.Space.GLOBAL or not a.exact:
                continue
            valid = valid_indices(kernel, ctx, a.tensor, ir.Space.GLOBAL)
            image = coverage.image(a, valid)
            inside = _elements(kernel, a.tensor, sizes)
            want = {idx for _, idx in pairs.get((id(a.node), a.tensor), set())} & inside
            assert _image_points(image.elements, sizes) == want, (a.name, sizes, image.method)
            methods[a.name] = image.method
    return methods


@settings(max_examples=60, deadline=None)
@given(blocked_kernels())
def test_random_blocked_kernels_agree_with_enumeration(case: tuple[str, bool]) -> None:
    """Hierarchical (CuTe-style) in-tile orders, full or ragged tiles, with and without a
    planted bug: the verdicts and the writers' images agree with enumeration, and the
    bug-free kernels' ranges are computed through the tile structure (the formulation
    this test is about, not ISL's plain range)."""
    source, correct = case
    kernel = compile_source(source).kernels[0]
    sizes = [s for s in ({"M": 4, "N": 8}, {"M": 12, "N": 6}, {"M": 7, "N": 13},
                         {"M": 16, "N": 24}) if allowed(kernel, s)]
    obligations = check_against_enumeration(kernel, sizes)
    methods = check_images(kernel, sizes)
    if correct:
        assert all(o.verdict is Verdict.PROVED for o in obligations), source
        assert set(methods.values()) == {"tiles"}, (methods, source)


def test_tile_images_of_template_kernels_and_the_fallback() -> None:
    """The template kernels (guards that clip ragged tiles, off-by-one offsets that write
    outside the tensor, half guards) decompose into tiles; an index that divides a sum of
    the block and the thread has no split and takes ISL's plain range. All are exact."""
    seen = set()
    for guard in ("r < M && c < N", "r <= M && c < N", "r < M"):
        for roff in ("", " + 1"):
            source = TEMPLATE.format(
                where="", grid="(M + 1) / 2", block=4, srows=2, dst_role="out ", cols=2,
                role_open="", role_close="", loop_hi="(N + 1) / 2", step=1, tile=2,
                roff=roff, coff="", guard=guard, src_off="", extra="")
            kernel = compile_source(source).kernels[0]
            seen |= set(check_images(kernel, [{"M": 3, "N": 5}, {"M": 4, "N": 4}]).values())
    assert seen == {"tiles"}
    mixed = _only("""
kernel mixed(x: in global f32[N], y: out global f32[N]) where N > 0, N <= 4096
  grid ((2 * N + 2) / 3) block 4 {
  let i = (block.x * 3 + thread) / 2
  if i < N { y[i] = x[i] }
}""")
    assert set(check_images(mixed, [{"N": 1}, {"N": 7}, {"N": 12}]).values()) == {"range"}
    check_against_enumeration(mixed, [{"N": 1}, {"N": 7}, {"N": 12}])


CUTE_BLOCKED = ROOT / "corpus" / "good" / "cute_blocked_colmajor.tsk"


def test_blocked_colmajor_coverage_needs_the_tile_structure(monkeypatch) -> None:
    """The blocked column-major transpose's coverage: decided within a tenth of the default
    ISL budget through the tile structure; with ISL's plain range (the formulation before)
    the same budget runs out (TS290) -- at the full budget it did too."""
    kernel = load_program(CUTE_BLOCKED).kernels[0]
    small = CheckOptions(timeout_ms=OPTIONS.timeout_ms // 10)
    cover = [o for o in checker.check(kernel, small) if "at least once" in o.name]
    assert [o.verdict for o in cover] == [Verdict.PROVED]
    assert set(cover[0].evidence["ranges"].values()) == {"tiles"}

    def plain(a, valid, under=False):
        return coverage.Image((a.relation_under if under else a.relation).range(), "range")

    monkeypatch.setattr(coverage, "image", plain)
    cover = [o for o in checker.check(kernel, small) if "at least once" in o.name]
    assert [(o.verdict, o.code) for o in cover] == [(Verdict.UNKNOWN, checker.ISL_LIMIT)]


def test_blocked_colmajor_short_store_loop_refuted() -> None:
    """The same kernel with its store loop one sweep short: refuted through the tile
    structure, with an element that enumeration confirms unwritten."""
    source = CUTE_BLOCKED.read_text().replace("for e in 0 .. 32 {\n    let idx",
                                              "for e in 0 .. 31 {\n    let idx")
    assert source != CUTE_BLOCKED.read_text()
    kernel = compile_source(source).kernels[0]
    cover = [o for o in checker.check(kernel, OPTIONS) if "at least once" in o.name]
    assert [(o.verdict, o.code) for o in cover] == [(Verdict.REFUTED, checker.UNWRITTEN)]
    replay_counterexample(kernel, cover[0])
