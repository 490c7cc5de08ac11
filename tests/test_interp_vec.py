"""The vector (lockstep) engine against the scalar engine.

The vector engine claims one legal schedule and records it in the scalar engine's terms, so
the sharpest check is to replay that schedule on the scalar engine: the outputs must be
bit-identical, the step counts and schedules equal, and a failing run must fail there with
the same code, message and detail at the same step. Race-free kernels (corpus/good,
corpus/codegen) must also agree with seeded random scalar schedules. The float rules the
vector engine writes for arrays are checked against semantics/expr/fp.py's scalar rules on
random bit patterns, and hypothesis generates small kernels (divergent ifs and loops,
every var dtype, shared memory and `sync`, out-of-bounds indices) to compare the engines on.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from tilesafe.frontend.load import compile_source, load_program
from tilesafe.mutation.sizes import choose, cost
from tilesafe.semantics.expr import fp
from tilesafe.semantics.interpreter import interp_vec_expr
from tilesafe.semantics.interpreter.interp import (
    InterpError,
    check_where,
    random_inputs,
    run_kernel,
)
from tilesafe.semantics.interpreter.interp_vec import vector_unsupported

ROOT = Path(__file__).resolve().parent.parent
GOOD = sorted((ROOT / "corpus" / "good").glob("*.tsk"))
CODEGEN = sorted((ROOT / "corpus" / "codegen").glob("*.tsk"))
BAD = sorted((ROOT / "corpus" / "bad").glob("*.tsk"))


def _bits(a: np.ndarray) -> bytes:
    return np.ascontiguousarray(a).tobytes()


def _same_tensors(a: dict, b: dict) -> list[str]:
    return [n for n in a if _bits(a[n]) != _bits(b[n])]


def _outcome(k, sizes, inputs, **how):
    try:
        return run_kernel(k, sizes, inputs, **how)
    except InterpError as err:
        return err


def _replayed(k, sizes, inputs, vec) -> None:
    """The scalar engine, replaying the vector run's schedule, does exactly what it did."""
    sched = vec.schedule
    ref = _outcome(k, sizes, inputs, schedule=sched, engine="scalar")
    if isinstance(vec, InterpError):
        assert isinstance(ref, InterpError), f"vector: {vec.code} {vec.message}; scalar ran"
        assert (ref.code, ref.message, str(ref.span)) == (vec.code, vec.message, str(vec.span))
        assert ref.detail == vec.detail
        assert (ref.schedule, ref.steps) == (vec.schedule, vec.steps)
        return
    assert not isinstance(ref, InterpError), f"scalar replay failed: {ref.code} {ref.message}"
    assert not _same_tensors(vec.tensors, ref.tensors)
    assert ref.steps == vec.steps and ref.schedule == sched


def _codegen_sizes(path: Path) -> dict[str, int]:
    line = next(t for t in path.read_text().splitlines() if t.startswith("// sizes:"))
    options = [dict((kv.split("=")[0].strip(), int(kv.split("=")[1]))
                    for kv in alt.split(",")) for alt in line[len("// sizes:"):].split("|")]
    k = load_program(path).kernels[0]
    return min(options, key=lambda s: cost(k, s))


def _small_sizes(path: Path, k) -> dict[str, int]:
    if path.parent.name == "codegen":
        return _codegen_sizes(path)
    both, _ = choose(path, k, k, 3)
    return min(both, key=lambda s: cost(k, s))


# ---- the corpus ---------------------------------------------------------------------------


@pytest.mark.parametrize("path", GOOD + CODEGEN, ids=lambda p: p.stem)
def test_vector_run_is_a_scalar_schedule(path: Path) -> None:
    k = load_program(path).kernels[0]
    sizes = _small_sizes(path, k)
    for input_seed in (0, 1):
        inputs = random_inputs(k, sizes, input_seed)
        vec = run_kernel(k, sizes, inputs)
        assert vec.engine == "vector", vec.fallback
        _replayed(k, sizes, inputs, vec)
        if input_seed == 0:  # race-free: any schedule gives these outputs
            other = run_kernel(k, sizes, inputs, seed=7)
            assert other.engine == "scalar" and other.fallback
            assert not _same_tensors(vec.tensors, other.tensors)
    inputs = random_inputs(k, sizes, 2)
    for seed in (1, 2):  # the vector engine picking its group steps at random
        _replayed(k, sizes, inputs, run_kernel(k, sizes, inputs, seed=seed, engine="vector"))


@pytest.mark.parametrize("path", BAD, ids=lambda p: p.stem)
def test_vector_errors_are_the_scalar_errors(path: Path) -> None:
    """Bad kernels fail (or give wrong outputs) on the vector engine exactly as the scalar
    engine does on the same schedule: code, message, detail, schedule and step."""
    try:
        k = load_program(path).kernels[0]
        both, _ = choose(path, k, k, 2)
    except Exception:  # noqa: BLE001 - a kernel the front end rejects has nothing to run
        pytest.skip("not a runnable kernel")
    if not both:
        pytest.skip("no small launch")
    sizes = min(both, key=lambda s: cost(k, s))
    try:
        inputs = random_inputs(k, sizes, 0)
    except InterpError:
        pytest.skip("the launch itself is refused")
    vec = _outcome(k, sizes, inputs)
    if not isinstance(vec, InterpError) and vec.engine != "vector":
        pytest.skip(f"outside the vector fragment: {vec.fallback}")
    _replayed(k, sizes, inputs, vec)


def _launches(path: Path) -> list[dict[str, int]]:
    """A few launches of a corpus kernel, cheap enough to replay on the scalar engine."""
    k = load_program(path).kernels[0]
    if path.parent.name == "codegen":
        return [_codegen_sizes(path)]
    both, _ = choose(path, k, k, 4)
    return [s for s in both if cost(k, s) <= 60_000] or [min(both, key=lambda s: cost(k, s))]


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(GOOD + CODEGEN), st.integers(0, 3), st.integers(0, 2**16),
       st.one_of(st.none(), st.integers(0, 2**16)))
def test_corpus_launches_vector_equals_scalar(path: Path, pick: int, input_seed: int,
                                              seed: int | None) -> None:
    """Hypothesis draws a corpus kernel, one of its launches, inputs and a vector schedule
    (the lockstep default, or a seeded one): the scalar engine replays it exactly, and the
    outputs are those of the default schedule (the corpus is race-free)."""
    k = load_program(path).kernels[0]
    launches = _launches(path)
    sizes = launches[pick % len(launches)]
    inputs = random_inputs(k, sizes, input_seed)
    vec = run_kernel(k, sizes, inputs, seed=seed, engine="vector")
    _replayed(k, sizes, inputs, vec)
    if seed is not None:
        assert not _same_tensors(vec.tensors, run_kernel(k, sizes, inputs).tensors)


def test_some_bad_kernels_do_fail_on_the_vector_engine() -> None:
    """So that the error comparison above compares errors (not only outputs)."""
    codes = set()
    for path in BAD:
        try:
            k = load_program(path).kernels[0]
            both, _ = choose(path, k, k, 2)
            sizes = min(both, key=lambda s: cost(k, s))
            inputs = random_inputs(k, sizes, 0)
        except Exception:  # noqa: BLE001 - not runnable (see above)
            continue
        try:
            run_kernel(k, sizes, inputs)
        except InterpError as err:
            codes.add(err.code)
    assert {"TS201", "TS301", "TS307", "TS402", "TS405", "TS410", "TS414", "TS420", "TS421",
            "TS430"} <= codes, codes


# ---- engine choice -------------------------------------------------------------------------


ELEMENTWISE = ROOT / "corpus" / "good" / "elementwise.tsk"


def test_engine_choice_is_visible() -> None:
    k = load_program(ELEMENTWISE).kernels[0]
    sizes = {"N": 300}
    inputs = random_inputs(k, sizes, 0)
    assert run_kernel(k, sizes, inputs).engine == "vector"
    seeded = run_kernel(k, sizes, inputs, seed=3)
    assert seeded.engine == "scalar" and "seed 3" in seeded.fallback
    pct = run_kernel(k, sizes, inputs, policy="pct")
    assert pct.engine == "scalar" and "pct" in pct.fallback
    forced = run_kernel(k, sizes, inputs, engine="scalar")
    assert forced.engine == "scalar" and forced.fallback is None
    with pytest.raises(ValueError, match="own schedule"):
        run_kernel(k, sizes, inputs, engine="vector", policy="pct")
    with pytest.raises(ValueError, match="unknown engine"):
        run_kernel(k, sizes, inputs, engine="gpu")


def test_a_kernel_outside_the_fragment_falls_back() -> None:
    """A loop bound that reads shared memory (the language refuses it, TS023, but IR built
    by a program may hold it): the scalar engine reads it between steps, which the vector
    engine's order does not reproduce, so it is left to the scalar engine."""
    import dataclasses

    from tilesafe.frontend import ir

    src = """
    kernel f(x: global f32[64]) grid 1 block 32 {
      shared s: i32[1]
      if thread == 0 { s[0] = 2 }
      sync
      for j in 0 .. 2 { x[thread * 2 + j] = 1.0 }
    }
    """
    k = compile_source(src, "<test>").kernels[0]
    loop = k.body[-1]
    assert isinstance(loop, ir.For)
    load = ir.Load(loop.hi.span, ir.ScalarType.INT, "s", ir.Space.SHARED,
                   (ir.IntConst(loop.hi.span, ir.ScalarType.INT, 0),))
    k = dataclasses.replace(k, body=k.body[:-1] + (dataclasses.replace(loop, hi=load),))
    r = run_kernel(k, {}, {"x": np.zeros(64, np.float32)})
    assert r.engine == "scalar" and "bounds" in r.fallback
    assert r.tensors["x"].tolist() == [1.0] * 64
    with pytest.raises(ValueError, match="cannot run"):
        run_kernel(k, {}, {"x": np.zeros(64, np.float32)}, engine="vector")


def test_constructs_the_vector_engine_does_not_know_are_left_to_the_scalar_engine() -> None:
    src = """
    kernel f(x: global f32[128]) grid 1 block 128 {
      wgmma_fence
      x[thread] = 1.0
    }
    """
    k = compile_source(src, "<test>").kernels[0]
    why = vector_unsupported(k, {}, (1,))
    assert why is not None and "WgmmaFence" in why


def test_wide_integers_fall_back() -> None:
    src = """
    kernel w(k: global i32[32], o: global i32[32]) grid 1 block 32 {
      let a = k[thread] * k[thread] * k[thread] * k[thread] * k[thread]
      o[thread] = a
    }
    """
    k = compile_source(src, "<test>").kernels[0]
    ins = {"k": np.full(32, 2**31 - 1, np.int32), "o": np.zeros(32, np.int32)}
    r = run_kernel(k, {}, ins)
    assert r.engine == "scalar" and "2**62" in r.fallback
    assert r.tensors["o"][0] == fp.wrap_i32((2**31 - 1) ** 5)


def test_batched_blocks_that_overwrite_an_element_keep_launch_order() -> None:
    """Every block writes o[0]: the last block of the launch must win, as in the scalar
    engine's block order, although the batch ran the blocks side by side."""
    src = """
    kernel last(o: global f32[1]) grid 64 block 32 {
      if thread == block.x % 32 { o[0] = f32(block.x) }
    }
    """
    k = compile_source(src, "<test>").kernels[0]
    ins = {"o": np.zeros(1, np.float32)}
    r = run_kernel(k, {}, ins)
    assert r.engine == "vector" and r.tensors["o"][0] == 63.0
    _replayed(k, {}, ins, r)


def test_same_step_read_after_write_runs_thread_by_thread() -> None:
    """s[t] = s[t - 1] + 1 by all threads in one group step: thread t must see thread
    t-1's write (thread order), as the scalar engine's steps one after another do."""
    src = """
    kernel chain(o: global f32[32]) grid 1 block 32 {
      shared s: f32[33]
      s[thread + 1] = 0.0
      if thread == 0 { s[0] = 0.0 }
      sync
      s[thread + 1] = s[thread] + 1.0
      sync
      o[thread] = s[thread + 1]
    }
    """
    k = compile_source(src, "<test>").kernels[0]
    ins = {"o": np.zeros(32, np.float32)}
    r = run_kernel(k, {}, ins)
    assert r.engine == "vector"
    assert r.tensors["o"].tolist() == [float(i + 1) for i in range(32)]
    _replayed(k, {}, ins, r)


FIRST_FAILURE = """
kernel e(x: global f32[BLOCKS, 64], d: global i32[32]) grid BLOCKS block 32 {
  var z: i32 = d[thread]
  x[block.x, thread + 60 * (thread / 5)] = 1.0
  let q = 7 / z
  x[block.x, thread] = f32(q)
}
"""


@pytest.mark.parametrize("blocks", [1, 3])
def test_the_first_failing_thread_fails_first(blocks: int) -> None:
    """Threads 5.. store out of bounds, thread 2 divides by zero in the local code right
    after its (good) store. One thread after the other, thread 2's step fails first; the
    vector step fails as a whole, so the launch is re-run with that step executed thread
    by thread (and, with several blocks, first block by block)."""
    k = compile_source(FIRST_FAILURE.replace("BLOCKS", str(blocks)), "<test>").kernels[0]
    d = np.ones(32, np.int32)
    d[2] = 0
    ins = {"x": np.zeros((blocks, 64), np.float32), "d": d}
    with pytest.raises(InterpError) as info:
        run_kernel(k, {}, ins)
    err = info.value
    assert err.code == "TS203" and err.detail == {"block": (0,), "thread": 2}
    assert err.schedule == (0, 1, 2) and err.steps == 2
    _replayed(k, {}, ins, err)
    d[2] = 1
    with pytest.raises(InterpError) as info:
        run_kernel(k, {}, ins)
    assert info.value.code == "TS201" and info.value.detail["thread"] == 5


def test_the_step_limit_falls_where_the_scalar_engine_puts_it() -> None:
    k = load_program(ROOT / "corpus" / "good" / "pipeline2.tsk").kernels[0]
    sizes = {"M": 128, "N": 128}
    ins = random_inputs(k, sizes, 0)
    for limit in (1, 100, 777, 3000):
        vec = _outcome(k, sizes, ins, max_steps=limit)
        assert isinstance(vec, InterpError) and vec.code == "TS499" and vec.steps == limit
        ref = _outcome(k, sizes, ins, max_steps=limit, schedule=vec.schedule)
        assert (ref.code, ref.message, ref.schedule) == (vec.code, vec.message, vec.schedule)


# ---- the float rules, array against scalar --------------------------------------------------


def _patterns(n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    raw = rng.integers(0, 2**32, size=n, dtype=np.uint64).astype(np.uint32)
    near = rng.integers(0x33000000, 0x47800000, size=n, dtype=np.uint64).astype(np.uint32)
    special = np.array([0, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000, 0xFFC00001,
                        0x477FF000, 0x477FEFFF, 0x33000000, 0x4F000000, 0xCF000000,
                        0x4EFFFFFF, 0x3F801000, 0x3F803000, 1], dtype=np.uint32)
    return np.concatenate([raw, near, special]).view(np.float32)


def _f32_bits(x) -> int:
    return int(np.asarray(x, dtype=np.float32).view(np.uint32))


def test_array_float_rules_equal_the_scalar_ones() -> None:
    a, b = _patterns(3000, 1), _patterns(3000, 2)
    rules = [
        (interp_vec_expr.fmin(a, b), lambda x, y: fp.fmin(x, y)),
        (interp_vec_expr.fmax(a, b), lambda x, y: fp.fmax(x, y)),
        (interp_vec_expr.fabs(a), lambda x, y: fp.fabs(x)),
        (interp_vec_expr.round_f16(a), lambda x, y: fp.round_to_f16(x)),
        (interp_vec_expr.round_bf16(a), lambda x, y: fp.round_to_bf16(x)),
    ]
    for got, rule in rules:
        want = [_f32_bits(rule(a[i], b[i])) for i in range(len(a))]
        assert got.view(np.uint32).tolist() == want
    conv = interp_vec_expr.f32_to_i32(a)
    assert [fp.f32_to_i32(x) for x in a] == conv.tolist()
    f16 = interp_vec_expr.f16_bits(a)
    assert [fp.f32_to_f16_bits(x) for x in a] == f16.tolist()


def test_array_int_rules_equal_the_scalar_ones() -> None:
    rng = np.random.default_rng(3)
    v = np.concatenate([rng.integers(-2**61, 2**61, 3000), rng.integers(-2**26, 2**26, 3000),
                        np.array([2**24 + 1, 2**24 + 3, -(2**24 + 3), 2**53 + 1])])
    assert [_f32_bits(fp.int_to_f32(int(x))) for x in v] == \
        interp_vec_expr.int_to_f32(v).view(np.uint32).tolist()
    assert [fp.wrap_i32(int(x)) for x in v] == interp_vec_expr.wrap_i32(v).tolist()
    assert [fp.wrap_u8(int(x)) for x in v] == interp_vec_expr.wrap_u8(v).tolist()


# ---- generated kernels ------------------------------------------------------------------------


INT_ATOMS = ("thread", "lane", "warp_id", "block.x", "7", "3")
DTYPES = ("f32", "f16", "bf16", "i32", "u8")


@st.composite
def _index(draw, loops: list[str], size: int) -> str:
    terms = [f"{draw(st.integers(1, 5))} * {draw(st.sampled_from(INT_ATOMS[:4] + tuple(loops)))}"
             for _ in range(draw(st.integers(1, 2)))]
    e = " + ".join(terms) + f" + {draw(st.integers(0, 9))}"
    if draw(st.integers(0, 9)):  # now and then an index that may leave the tensor
        e = f"({e}) % {size}"
    return e


@st.composite
def _float(draw, loops: list[str], lets: list[str], depth: int = 0) -> str:
    leaves = [f"x[{draw(_index(loops, 64))}]", f"f32(y[{draw(_index(loops, 64))}])",
              f"{draw(st.sampled_from(['0.5', '-1.25', '3.0', '70000.0', '-0.0']))}",
              f"f32({draw(st.sampled_from(INT_ATOMS + tuple(loops)))})"] + lets
    if depth >= 2 or draw(st.booleans()):
        return draw(st.sampled_from(leaves))
    a, b = draw(_float(loops, lets, depth + 1)), draw(_float(loops, lets, depth + 1))
    return draw(st.sampled_from([f"({a} + {b})", f"({a} * {b})", f"({a} - {b})",
                                 f"({a} / {b})", f"min({a}, {b})", f"max({a}, {b})",
                                 f"abs({a})", f"(-{a})", f"f32(i32({a}))"]))


@st.composite
def _cond(draw, loops: list[str], lets: list[str]) -> str:
    i = draw(st.sampled_from(INT_ATOMS[:4] + tuple(loops)))
    c = draw(st.sampled_from([f"{i} < {draw(st.integers(0, 40))}",
                              f"{i} % {draw(st.integers(2, 5))} == 0",
                              f"{draw(_float(loops, lets))} > 0.0"]))
    if draw(st.integers(0, 3)) == 0:
        c = f"{c} && x[{draw(_index(loops, 64))}] < 1.0"
    return c


@st.composite
def _stmts(draw, loops: list[str], lets: list[str], depth: int, n: list[int]) -> list[str]:
    out = []
    for _ in range(draw(st.integers(1, 3))):
        n[0] += 1
        kind = draw(st.sampled_from(["store", "istore", "let", "var", "if", "for", "shared"]
                                    if depth < 2 else ["store", "istore", "let", "shared"]))
        if kind == "store":
            out.append(f"o[{draw(_index(loops, 64))}] = {draw(_float(loops, lets))}")
        elif kind == "istore":
            idx, at = draw(_index(loops, 64)), draw(st.sampled_from(INT_ATOMS + tuple(loops)))
            out.append(f"oi[{idx}] = y[{draw(_index(loops, 64))}] * {at} - {at} / 2")
        elif kind == "let":
            name = f"l{n[0]}"
            out.append(f"let {name} = {draw(_float(loops, lets))}")
            lets = lets + [name]
        elif kind == "var":
            name, dt = f"v{n[0]}", draw(st.sampled_from(DTYPES))
            value = (draw(_float(loops, lets)) if dt in ("f32", "f16", "bf16")
                     else f"y[{draw(_index(loops, 64))}] * 77")
            out.append(f"var {name}: {dt} = {value}")
            op = draw(st.sampled_from(["+=", "*=", "-=", "="]))
            out.append(f"{name} {op} {value}")
            conv = name if dt in ("f32", "f16", "bf16") else f"f32({name})"
            out.append(f"o[{draw(_index(loops, 64))}] = {conv}")
        elif kind == "if":
            then = draw(_stmts(loops, lets, depth + 1, n))
            other = draw(_stmts(loops, lets, depth + 1, n)) if draw(st.booleans()) else []
            text = f"if {draw(_cond(loops, lets))} {{\n" + "\n".join(then) + "\n}"
            out.append(text + (" else {\n" + "\n".join(other) + "\n}" if other else ""))
        elif kind == "for":
            v = f"j{n[0]}"
            hi = draw(st.sampled_from(["3", "lane % 4", "warp_id + 1", "N / 32"]))
            body = draw(_stmts(loops + [v], lets, depth + 1, n))
            out.append(f"for {v} in 0 .. {hi} {{\n" + "\n".join(body) + "\n}")
        else:
            out.append(f"s[{draw(_index(loops, 64))}] = {draw(_float(loops, lets))}")
            out.append(draw(st.sampled_from(["sync", ""])))
            out.append(f"o[{draw(_index(loops, 64))}] = s[{draw(_index(loops, 64))}]")
    return out


@st.composite
def kernels(draw) -> str:
    body = draw(_stmts([], [], 0, [0]))
    blocks = draw(st.sampled_from([1, 2, 3]))
    return (f"kernel gen(x: in global f32[N], y: in global i32[N], o: inout global f32[64],"
            f" oi: inout global i32[64]) where N == 64 grid {blocks} block 64 {{\n"
            "shared s: f32[64]\n" + "\n".join(body) + "\n}\n")


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(kernels(), st.integers(0, 3))
def test_generated_kernels_vector_equals_scalar(text: str, seed: int) -> None:
    """The generator's kernels compile (else hypothesis's filter health check fails the
    test), and each runs the same on both engines, errors included."""
    try:
        k = compile_source(text, "<gen>").kernels[0]
    except Exception:  # noqa: BLE001 - the generator may write a kernel the language rejects
        assume(False)
        return
    sizes = {"N": 64}
    assume(vector_unsupported(k, sizes, check_where(k, sizes)) is None)
    inputs = random_inputs(k, sizes, seed)
    _replayed(k, sizes, inputs, _outcome(k, sizes, inputs))
    _replayed(k, sizes, inputs, _outcome(k, sizes, inputs, seed=seed, engine="vector"))


PIPELINE = """
kernel gen(src: in global f16[M, N], dst: out global f16[M, N])
  where M % 8 == 0, N % 8 == 0, M > 0, N > 0, M <= 64, N <= 512
  grid (M / 8) block {block}
{{
  const STAGES = {stages}
  tensormap tin = tiled(src, box [8, 8])
  shared buf: f16[STAGES, 8, 8]
  mbarrier full[STAGES] count 1 guards buf[i]
  mbarrier empty[STAGES] count {empty_count} guards buf[i]

  if thread == 0 {{ init full; init empty; fence mbarrier_init }}
  sync

  role producer = warp 0, elect one {{
    for k in 0 .. N / 8 {{
      let s = k % STAGES
      wait empty[s] parity (k / STAGES + {pp}) % 2
      arrive full[s], expect_tx {nbytes}
      tma_load buf[s] <- tin[block.x * 8, k * 8] signal full[s]
    }}
  }}
  role consumer = warps 1 .. {last} {{
    for k in 0 .. N / 8 {{
      let s = k % STAGES
      wait full[s] parity (k / STAGES + {cp}) % 2
      for e in 0 .. {sweeps} {{
        let idx = e * {width} + (thread - 32)
        if idx < 64 {{
          dst[block.x * 8 + idx / 8, k * 8 + idx % 8] = buf[s, idx / 8, idx % 8]
        }}
      }}
      arrive empty[s]{mode}
    }}
  }}
}}
"""


@st.composite
def pipelines(draw) -> tuple[str, dict[str, int]]:
    """Small TMA pipelines, correct or with one protocol bug (a parity, a count, a byte
    count, an arrive mode), at sizes where rings wrap and blocks run in batches."""
    warps = draw(st.integers(1, 3))
    mode, count = draw(st.sampled_from([(", one per warp", warps), ("", 32 * warps),
                                        (", one", 1)]))
    fields = dict(stages=draw(st.integers(1, 3)), block=32 * (warps + 1), empty_count=count,
                  pp=1, cp=0, nbytes=128, last=warps + 1, width=32 * warps,
                  sweeps=-(-64 // (32 * warps)), mode=mode)
    bug = draw(st.sampled_from(["none", "none", "pp", "cp", "count+", "count-", "bytes-",
                                "bytes+"]))
    fields.update({"pp": {"pp": 0}, "cp": {"cp": 1}, "count+": {"empty_count": count + 1},
                   "count-": {"empty_count": max(1, count - 1)}, "bytes-": {"nbytes": 64},
                   "bytes+": {"nbytes": 256}}.get(bug, {}))
    sizes = {"M": 8 * draw(st.integers(1, 3)), "N": 8 * draw(st.sampled_from([1, 2, 5]))}
    return PIPELINE.format(**fields), sizes


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pipelines(), st.integers(0, 2))
def test_generated_pipelines_vector_equals_scalar(case, seed: int) -> None:
    text, sizes = case
    k = compile_source(text, "<gen>").kernels[0]
    inputs = random_inputs(k, sizes, seed)
    _replayed(k, sizes, inputs, _outcome(k, sizes, inputs))
    _replayed(k, sizes, inputs, _outcome(k, sizes, inputs, seed=seed, engine="vector"))
