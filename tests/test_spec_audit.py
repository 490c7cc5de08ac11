"""Issue 17, item 1 audited from the outside: a specification the kernel does not meet never
passes, one it meets and tilesafe cannot prove fails (TS890), one it meets is proved however
it is spelled -- on edits of the good corpus's specs of the kind a held-out tester makes
(other kernels, other index edits, other special values), not only on the issue's three.

Every refutation's `replay` command is parsed with `tilesafe run`'s own argument parser and
run: it must reproduce the element's value the refutation reports.
"""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from tilesafe import api
from tilesafe.checkers import value
from tilesafe.checkers.obligation import Verdict
from tilesafe.checkers.registry import CheckOptions
from tilesafe.frontend.load import compile_source
from tilesafe.semantics.value import spec_run
from tilesafe.semantics.value.spec_inputs import RUN_KINDS

ROOT = Path(__file__).resolve().parent.parent
GOOD = ROOT / "corpus" / "good"


def _edited(tmp_path: Path, name: str, old: str, new: str) -> Path:
    text = (GOOD / f"{name}.tsk").read_text(encoding="utf-8")
    assert old in text, (name, old)
    path = tmp_path / f"{name}.tsk"
    path.write_text(text.replace(old, new, 1), encoding="utf-8")  # the spec precedes the body
    return path


def _value(path: Path):
    """The kernel and its value obligation: the one not proved, if any (the edited one)."""
    k = api.load(path).kernels[0]
    obligations = value.check(k, CheckOptions())
    return k, next((o for o in obligations if o.verdict is not Verdict.PROVED),
                   obligations[0])


def _replayed(cex: dict) -> object:
    """Run the refutation's replay command the way the CLI would: the element's value, as
    the counterexample writes it."""
    from tilesafe.cli import _parser

    words = shlex.split(cex["replay"])
    assert words[:2] == ["tilesafe", "run"]
    args = _parser().parse_args(words[1:])
    rec = api.run_detailed(args.file, args.size, seed=args.seed, kernel=args.kernel,
                           inputs_kind=args.inputs)
    tensor, rest = cex["element"].split("[", 1)
    index = tuple(int(i) for i in rest.rstrip("]").split(","))
    dtype = rec.kernel.tensor(tensor).dtype
    return spec_run._plain(spec_run._element_value(rec.result.tensors[tensor], dtype, index))


# Spec edits that stay inside the tensors (so lint accepts them) and are wrong.
WRONG = [
    ("pipeline3", "== src[i, j]", "== src[i, N - 1 - j]"),  # columns mirrored
    ("pipeline3", "== src[i, j]", "== src[i, j] + 0.0"),  # -0 becomes +0
    ("persistent_ring", "ensures dst[i, j] == src[i, j]",
     "ensures dst[i, j] == src[(i + 64) % M, j]"),  # the next tile's rows
    ("batched_copy", "== src[b, i, j]", "== src[B - 1 - b, i, j]"),  # batches reversed
    ("batched_copy", "== src[b, i, j]", "== src[b, i, j] + src[b, i, j] * 0.0"),  # NaN at inf
    ("row_reduce", "sum(j in 0 .. N: x[i, j])", "sum(j in 0 .. N - 1: x[i, j])"),  # one short
    ("elementwise", "a[0] * x[i] + y[i]", "a[0] * x[i] + y[i] + x[N - 1] * 0.0"),  # a corner
    # -0 in a kernel whose other clause has a sum (so its inputs are integers, without -0)
    ("ragged_tma", "== src[i, j] * 2.0", "== src[i, j] * 2.0 + 0.0"),
]


@pytest.mark.parametrize("name,old,new", WRONG, ids=[f"{w[0]}:{w[2]}" for w in WRONG])
def test_a_wrong_spec_is_refuted_and_replays(tmp_path: Path, name: str, old: str, new: str):
    path = _edited(tmp_path, name, old, new)
    assert api.lint(path) == []
    _, o = _value(path)
    assert o.verdict is Verdict.REFUTED and o.failed, o.message
    cex = o.counterexample
    got = _replayed(cex)
    assert repr(got) == repr(cex["got"])  # repr: -0.0 and 0.0 are different answers
    assert repr(cex["got"]) != repr(cex["want"])


def test_a_spec_term_at_a_fixed_index_is_refuted_on_corner_inputs(tmp_path: Path):
    """x[N - 1] * 0.0 is NaN only where x[N - 1] is infinite or NaN: the one-in-eight special
    values rarely put one there; the corner inputs always do (issue 17: "search for
    refuting inputs with special values too")."""
    path = _edited(tmp_path, "elementwise", "a[0] * x[i] + y[i]",
                   "a[0] * x[i] + y[i] + x[N - 1] * 0.0")
    _, o = _value(path)
    assert o.counterexample["profile"] == "edges"
    assert "--inputs edges" in o.counterexample["replay"]


RIGHT = [
    ("pipeline3", "== src[i, j]", "== src[i, j] * 1.0"),
    ("pipeline3", "== src[i, j]", "== src[i, j] - 0.0"),
    ("ragged_tma", "== src[i, j] * 2.0", "== 2.0 * src[i, j]"),
    ("tma_store_pipeline", "src[i, j] * 0.5 + 1.0", "1.0 + 0.5 * src[i, j]"),
    ("elementwise", "a[0] * x[i] + y[i]", "y[i] + x[i] * a[0]"),
]


@pytest.mark.parametrize("name,old,new", RIGHT, ids=[f"{w[0]}:{w[2]}" for w in RIGHT])
def test_a_right_spec_spelled_otherwise_is_proved(tmp_path: Path, name: str, old: str,
                                                  new: str):
    _, o = _value(_edited(tmp_path, name, old, new))
    assert o.verdict is Verdict.PROVED, o.message


def test_x_plus_zero_is_not_taken_for_x():
    """x + 0.0 differs from x at -0 (the identity the prover strips is x - 0.0, not this)."""
    src = """kernel k(x: in global f32[N], y: out global f32[N])
  where N > 0, N <= 1048576
  grid ((N + 255) / 256) block 256
  ensures y[i] == x[i] + 0.0
{
  let i = block.x * 256 + thread
  if i < N {
    y[i] = x[i]
  }
}
"""
    (o,) = value.check(compile_source(src, "t.tsk").kernels[0], CheckOptions())
    assert o.verdict is Verdict.REFUTED and o.counterexample["got"] == -0.0


def test_run_takes_every_kind_of_value_input():
    from tilesafe.cli import VALUE_INPUTS

    assert set(VALUE_INPUTS) == set(RUN_KINDS)
