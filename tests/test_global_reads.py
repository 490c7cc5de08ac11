"""Reads of an `out` tensor see a write (TS220, the global checker;
semantics/access/global_reads.py).

An `out` tensor's contents before the launch are undefined: a read of an element no write
is ordered before computes with garbage on every schedule. Checked on small kernels (an
`out` that should have been `inout`, a read before the `sync` that publishes the element,
program order inside loops, a race's unwritten read reported under the race), on the bad
corpus kernel, against the interpreter (the garbage shows: the result depends on the
output's initial contents), and against brute force: a hypothesis family of generated
index expressions (a write y[w] and a read y[r], quasi-affine in thread, block and a loop
variable, in either order, with or without `sync`s) enumerated at small sizes.
"""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np
from access_family import Family, families
from hypothesis import given, settings

from tilesafe.checkers import followon, global_memory
from tilesafe.checkers.obligation import Obligation, Severity, Verdict
from tilesafe.checkers.registry import CheckOptions
from tilesafe.frontend.load import compile_source, load_program
from tilesafe.semantics.interpreter.interp import random_inputs, run_kernel

ROOT = Path(__file__).resolve().parent.parent
BAD = ROOT / "corpus" / "bad"


@functools.cache
def _kernel(src: str):
    return compile_source(src, "t.tsk").kernels[0]


def _reads(src: str, tensor: str = "y") -> Obligation:
    [o] = [o for o in global_memory.check(_kernel(src), CheckOptions())
           if o.name.endswith(f"every read of {tensor} sees a write")]
    return o


ONE_D = """kernel k(x: in global f32[N], y: out global f32[N], z: out global f32[N])
  where N % 256 == 0, N > 0, N <= 1073741824
  grid (N / 256) block 256
{{
  let i = block.x * 256 + thread
{body}
}}
"""


def test_an_out_updated_in_place_reads_garbage():
    o = _reads(ONE_D.format(body="  y[i] = y[i] + x[i]\n  z[i] = 1.0"))
    assert o.verdict is Verdict.REFUTED and o.code == "TS220"
    assert o.severity is Severity.ERROR
    assert o.counterexample["element"] == [o.counterexample["reader"]["thread"]]
    assert "inout" in o.message  # the likely fix


def test_the_same_update_of_an_inout_is_no_finding():
    src = ONE_D.format(body="  y[i] = y[i] + x[i]\n  z[i] = 1.0").replace(
        "y: out global", "y: inout global")
    assert not [o for o in global_memory.check(_kernel(src), CheckOptions())
                if "sees a write" in o.name]


def test_own_write_before_the_read_is_proved():
    o = _reads(ONE_D.format(body="  y[i] = x[i] * 2.0\n  z[i] = y[i] + 1.0"))
    assert o.verdict is Verdict.PROVED


def test_a_neighbours_write_needs_the_sync_before_the_read():
    body = ("  y[i] = x[i] * 2.0\n{sync}"
            "  z[i] = y[block.x * 256 + (thread + 1) % 256]")
    assert _reads(ONE_D.format(body=body.format(sync="  sync\n"))).verdict is Verdict.PROVED
    # without it the pair races (TS217), and the unwritten read is reported under the race
    o = _reads(ONE_D.format(body=body.format(sync="")))
    assert o.verdict is Verdict.REFUTED and o.code is None
    assert followon.cause_of(o) == "TS217" and followon.own_code(o) == "TS220"


def test_a_read_before_the_sync_that_publishes_the_element():
    body = ("  z[i] = y[block.x * 256 + (thread + 1) % 256]\n  sync\n"
            "  y[i] = x[i] * 2.0")
    o = _reads(ONE_D.format(body=body))
    assert o.verdict is Verdict.REFUTED and o.code == "TS220"
    reader = o.counterexample["reader"]
    assert o.counterexample["element"] == [(reader["thread"] + 1) % 256
                                           + 256 * reader["block"][0]]


def test_program_order_follows_loop_iterations():
    """Iteration k reads what iteration k - 1 of the same thread wrote: ordered, except the
    first iteration's read (k = 0), which nothing wrote."""
    body = """  for k in 0 .. 4 {{
    if k >= {first} {{
      z[i] = y[i]
    }}
    y[i] = x[i] + 1.0
  }}"""
    src = ONE_D.format(body=body.format(first=1))
    assert _reads(src).verdict is Verdict.PROVED
    o = _reads(ONE_D.format(body=body.format(first=0)))
    assert o.verdict is Verdict.REFUTED and o.code == "TS220"
    assert o.counterexample["reader"]["loops"] == {"k": 0}


def test_tma_and_hand_offs_leave_it_open_never_refuted():
    src = """kernel k(x: in global f32[N], y: out global f32[N], z: out global f32[N])
  where N % 32 == 0, N > 0, N <= 1048576
  grid (N / 32) block 64
{
  mbarrier done count 32

  if thread == 0 {
    init done
    fence mbarrier_init
  }
  sync
  role writer = warp 0 {
    y[block.x * 32 + lane] = x[block.x * 32 + lane] * 2.0
    arrive done
  }
  role reader = warp 1 {
    wait done parity 0
    z[block.x * 32 + lane] = y[block.x * 32 + lane]
  }
}
"""
    o = _reads(src)
    assert o.verdict is Verdict.UNKNOWN and o.code == "TS292"


def test_bad_corpus_kernel_is_garbage_on_the_interpreter():
    """corpus/bad/ts220_out_accumulated_in_place.tsk: its output depends on what the out
    tensor held before the launch -- two different initial contents, two results."""
    path = BAD / "ts220_out_accumulated_in_place.tsk"
    k = load_program(path).kernels[0]
    [o] = [o for o in global_memory.check(k, CheckOptions()) if "sees a write" in o.name]
    assert o.verdict is Verdict.REFUTED and o.code == "TS220"
    sizes = dict(o.counterexample["sizes"])
    inputs = random_inputs(k, sizes, 3)
    outs = []
    for fill in (0.0, 1.0):
        arrays = {n: np.array(a, copy=True) for n, a in inputs.items()}
        for t in k.params:
            if t.role.value == "out":
                arrays[t.name][...] = fill
        outs.append(run_kernel(k, sizes, arrays).tensors)
    assert any(not np.array_equal(outs[0][t.name], outs[1][t.name])
               for t in k.params if t.role.written)


# ---- brute force ------------------------------------------------------------------------------


def unwritten(f: Family, n: int) -> list[tuple]:
    """Reads (block, thread, k, element) no write of the element happens before."""
    acc = list(f.accesses(n))
    writes = [a for a in acc if a[0] == "w"]
    return [(b, t, k, e) for kind, b, t, k, pos, epoch, e in acc if kind == "r"
            and not any(before(w, (b, t, k, pos, epoch, e)) for w in writes)]


def before(w: tuple, r: tuple) -> bool:
    """The write happens before the read: same element and block, and the same thread
    earlier in program order or a `sync` between them."""
    _, bw, tw, kw, pw, ew, xw = w
    br, tr, kr, pr, er, xr = r
    if xw != xr or bw != br:
        return False
    return (tw == tr and (kw, pw) < (kr, pr)) or ew < er


family = families(tensor="y", role="out", result="z")


@settings(max_examples=80, deadline=None)
@given(family)
def test_verdict_agrees_with_brute_force(f: Family):
    o = _reads(f.source())
    assert o.verdict in (Verdict.PROVED, Verdict.REFUTED), o.message
    found = {n: unwritten(f, n) for n in range(1, 10)}
    if o.verdict is Verdict.PROVED:
        assert not any(found.values()), (f.source(), found)
        return
    cex = o.counterexample
    n = cex["sizes"]["N"]
    r = cex["reader"]
    [e] = cex["element"]
    assert (r["block"][0], r["thread"], r["loops"]["k"], e) in unwritten(f, n), f.source()
