"""Run a kernel against its `ensures` clauses on small launches: the refuting half of the
value proof.

Why: a value bug (a swapped index, swapped TMA coordinates, `-` for `+` in a reduction tree,
`oob nan` where the kernel relies on the zero fill) leaves the kernel safe, so no safety
checker sees it; the interpreter computes the wrong element. Each run uses inputs built to
expose such bugs (semantics/value/spec_inputs.py), compares every output element bit for bit with
the spec evaluated by semantics/value/spec_eval.py, and a difference is a concrete refutation:
sizes, seed, the output element, the value it got and the one the spec asks for, and, when
the spec moves one input element, which input element arrived instead of which. The seed
and sizes replay it (`replay`). Agreement on these runs proves nothing for other sizes;
semantics/value/valueflow.py does that part.
"""

from __future__ import annotations

import dataclasses
import shlex
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import numpy as np

from tilesafe.frontend import ir, walk
from tilesafe.semantics.expr import evaluate
from tilesafe.semantics.interpreter.interp import RunResult, run_kernel
from tilesafe.semantics.interpreter.interp_error import InterpError
from tilesafe.semantics.interpreter.interp_io import tensor_shapes
from tilesafe.semantics.value import spec_eval
from tilesafe.semantics.value.spec_inputs import (
    Profile,
    choose_sizes,
    run_kind,
    value_inputs,
)

MAX_STEPS = 4_000_000

# Kinds of value bug, and their codes (docs/semantics.md, "Specifications").
MOVED = "TS801"  # the element arrived from the wrong input element
VALUE = "TS802"  # the arithmetic differs (operator, constant, conversion)
SUM = "TS803"  # a reduction's contributions differ (dropped, doubled, subtracted)
FILL = "TS804"  # a fill value (TMA out-of-bounds zero/NaN) arrived instead of data, or data
#                 where the spec expects the fill's value


@dataclass(frozen=True)
class Mismatch:
    code: str
    sizes: dict[str, int]
    seed: int
    exact: bool  # inputs were small integers (a spec with an order-free sum)
    profile: Profile  # which input values (plain, special IEEE values, wide integers)
    tensor: str
    element: tuple[int, ...]
    got: object
    want: object
    received: str | None  # the input element whose value arrived, when one has it
    expects: str | None  # the input element the spec moves there, for a plain-load spec
    mismatches: int  # elements of this output that differ at these sizes
    # a kernel with gathers: the index-tensor elements behind the element (the spec's reads
    # at it, `topk[3] = 1`; the positions of a scatter index holding its row, `sids[16] = 3`)
    routing: dict[str, int] | None = None

    def describe(self) -> str:
        at = f"{self.tensor}[{', '.join(map(str, self.element))}]"
        sizes = ", ".join(f"{k}={v}" for k, v in self.sizes.items())
        got, want = _plain(self.got), _plain(self.want)
        if self.code == MOVED and self.received and self.expects:
            what = f"receives {self.received} = {got}, the spec asks for {self.expects}"
        elif self.code == FILL and self.expects:
            what = (f"receives {got} (a fill value) where the spec asks for "
                    f"{self.expects} = {want}")
        else:
            what = f"holds {got}, the spec asks for {want}"
        via = ("; through " + ", ".join(f"{k} = {v}" for k, v in self.routing.items())
               if self.routing else "")
        return f"at {sizes}: {at} {what} ({self.mismatches} element(s) differ){via}"

    def as_counterexample(self, path: str | None = None, kernel: str | None = None
                          ) -> dict[str, object]:
        """The refutation's facts; with the kernel's file, `replay`: the `tilesafe run`
        command that runs this launch on these inputs."""
        cex = {"sizes": dict(self.sizes), "seed": self.seed, "inputs": _inputs_text(
            self.exact, self.profile), "profile": self.profile.value,
            "element": f"{self.tensor}[{', '.join(map(str, self.element))}]",
            "got": _plain(self.got), "want": _plain(self.want), "received": self.received,
            "expects": self.expects, "mismatches": self.mismatches, "routing": self.routing}
        if path is not None:
            cex["replay"] = self.replay_command(path, kernel)
        return {k: v for k, v in cex.items() if v is not None}

    def replay_command(self, path: str, kernel: str | None = None) -> str:
        """`tilesafe run` on these sizes, seed and inputs (it prints every output tensor;
        `--out FILE.npz` saves them to compare with the spec)."""
        sizes = ",".join(f"{k}={v}" for k, v in self.sizes.items())
        which = f" --kernel {kernel}" if kernel else ""
        return (f"tilesafe run {shlex.quote(path)}{which} --size {sizes} --seed {self.seed} "
                f"--inputs {run_kind(self.exact, self.profile)}")


@dataclass(frozen=True)
class ValueCheck:
    """Outcome for one spec: the launches it agreed on, or the first mismatch."""

    runs: tuple[dict[str, int], ...]
    mismatch: Mismatch | None = None
    skipped: tuple[str, ...] = field(default=())  # launches that could not be compared, why


def check(kernel: ir.Kernel, sizes_list: list[dict[str, int]] | None = None,
          seed: int = 0, specs: tuple[ir.Ensures, ...] | None = None,
          profile: Profile = Profile.PLAIN, exact: bool | None = None) -> list[ValueCheck]:
    """One ValueCheck per clause of `specs` (default: every `ensures` of `kernel`), from one
    interpreter run per size with inputs of `profile`; small integers when `exact` (by
    default when some clause of the kernel has an order-free sum, `exact_inputs`)."""
    specs = kernel.ensures if specs is None else specs
    if not specs:
        return []
    exact = exact_inputs(kernel) if exact is None else exact
    with np.errstate(all="ignore"):  # special inputs: inf * 0 is NaN, not a warning
        return _check(kernel, sizes_list, seed, specs, profile, exact)


def _check(kernel: ir.Kernel, sizes_list: list[dict[str, int]] | None, seed: int,
           specs: tuple[ir.Ensures, ...], profile: Profile, exact: bool) -> list[ValueCheck]:
    runs: list[list[dict[str, int]]] = [[] for _ in specs]
    skipped: list[list[str]] = [[] for _ in specs]
    found: list[Mismatch | None] = [None for _ in specs]
    for sizes in (sizes_list if sizes_list is not None else choose_sizes(kernel)):
        if all(f is not None for f in found):
            break
        try:
            arrays = value_inputs(kernel, sizes, seed, exact, profile)
            result = run_kernel(kernel, sizes, arrays, max_steps=MAX_STEPS)
        except InterpError as err:
            for s in skipped:
                s.append(f"{_sizes_text(sizes)}: the run failed ({err.code}): the safety "
                         "checkers report why")
            continue
        except (ValueError, MemoryError) as err:
            for s in skipped:
                s.append(f"{_sizes_text(sizes)}: {err}")
            continue
        shapes = tensor_shapes(kernel, sizes)
        for i, spec in enumerate(specs):
            if found[i] is not None:
                continue
            try:
                mismatch = compare(kernel, spec, sizes, seed, exact, arrays, result, shapes,
                                   profile, rerun=_rerun(sizes, arrays))
            except (spec_eval.SpecOutOfBounds, evaluate.EvalError, ZeroDivisionError,
                    OverflowError) as err:
                skipped[i].append(f"{_sizes_text(sizes)}: the spec has no value: {err}")
                continue
            runs[i].append(dict(sizes))
            found[i] = mismatch
    return [ValueCheck(tuple(r), m, tuple(s)) for r, m, s in zip(runs, found, skipped,
                                                                 strict=True)]


def _rerun(sizes: dict[str, int], arrays: Mapping[str, np.ndarray]
           ) -> Callable[[ir.Kernel], RunResult]:
    """The same launch on the same inputs, for a variant of the kernel (the fill probe)."""
    return lambda k: run_kernel(k, sizes, arrays, max_steps=MAX_STEPS)


def exact_inputs(kernel: ir.Kernel) -> bool:
    """Small-integer inputs: a clause has an order-free sum, whose value must not depend on
    the order the kernel adds in."""
    return any(spec_eval.has_free_sum(s.rhs) for s in kernel.ensures)


def replay(kernel: ir.Kernel, sizes: dict[str, int], seed: int, exact: bool,
           profile: Profile = Profile.PLAIN) -> tuple[dict[str, np.ndarray], RunResult]:
    """The inputs and the interpreter run a Mismatch came from."""
    arrays = value_inputs(kernel, sizes, seed, exact, profile)
    return arrays, run_kernel(kernel, sizes, arrays, max_steps=MAX_STEPS)


def compare(kernel: ir.Kernel, spec: ir.Ensures, sizes: dict[str, int], seed: int,
            exact: bool, arrays: Mapping[str, np.ndarray], result: RunResult,
            shapes: Mapping[str, tuple[int, ...]], profile: Profile = Profile.PLAIN,
            rerun: Callable[[ir.Kernel], RunResult] | None = None) -> Mismatch | None:
    """The first output element where the run differs from the spec, classified; `rerun`
    runs the same launch for a variant of the kernel (to ask whether a TMA fill value
    flowed into the element, `_fill_arrived`; without it, no element is a fill)."""
    want = spec_eval.expected(kernel, spec, sizes, arrays, shapes)
    got = result.tensors[spec.tensor]
    differ = ~same_bits(got, want)
    if not differ.any():
        return None
    element = tuple(int(i) for i in np.argwhere(differ)[0])
    out = kernel.tensor(spec.tensor)
    g, w = _element_value(got, out.dtype, element), _element_value(want, out.dtype, element)
    load = spec_eval.plain_load(spec.rhs)
    expects = None
    if load is not None:
        idx = spec_eval.load_index(load, spec, element, sizes)
        expects = f"{load.tensor}[{', '.join(map(str, idx))}]"
    received = (_find_source(kernel, arrays, g)
                if not exact and profile is Profile.PLAIN else None)
    fill = rerun is not None and _fill_arrived(kernel, spec, element, got, g, w, rerun)
    code = _classify(spec, load, received, fill)
    routing = _routing(kernel, spec, element, sizes, arrays) if kernel.requires else None
    return Mismatch(code, dict(sizes), seed, exact, profile, spec.tensor, element, g, w,
                    received, expects, int(differ.sum()), routing or None)


def _routing(kernel: ir.Kernel, spec: ir.Ensures, element: tuple[int, ...],
             sizes: Mapping[str, int], arrays: Mapping[str, np.ndarray]) -> dict[str, int]:
    """The index-tensor elements behind an output element: what the spec reads of them
    there, and, for a store indexed through an index tensor (a scatter), where that tensor
    holds the element's index -- the offending routing entries of a counterexample."""
    from tilesafe.semantics.access import requires_eval, requires_form
    from tilesafe.semantics.access.gather_keys import is_index_read, keys_in

    env = {v.name: int(i) for v, i in zip(spec.index_vars, element, strict=True)}
    point = requires_eval._Point(sizes, arrays, env)
    for ld in (x for x in walk.subexprs(spec.rhs) if is_index_read(kernel, x)):
        try:
            point.ev(requires_form.expr(ld))
        except (KeyError, requires_form.NotEncodable):
            continue  # a read under a sum's variable: not one element
    out = dict(point.reads)
    lets: dict[int, ir.Expr] = {}
    for st in walk.statements(kernel.body):
        if isinstance(st, ir.Let):
            lets[st.uid] = st.value
        if isinstance(st, ir.Store) and st.tensor == spec.tensor:
            for dim, index in enumerate(st.indices):
                for key in keys_in(kernel, (index,), lets):
                    arr = arrays[key.tensor]
                    v = element[dim]
                    for idx in np.argwhere(arr == v)[:2]:
                        out[f"{key.tensor}[{', '.join(str(int(i)) for i in idx)}]"] = int(v)
    return out


def same_bits(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Elementwise bit equality, every NaN equal to every NaN (payloads are not modelled)."""
    if a.dtype.kind == "f":
        return np.where(np.isnan(a) & np.isnan(b), True,
                        a.view(f"u{a.dtype.itemsize}") == b.view(f"u{b.dtype.itemsize}"))
    return a == b


def _element_value(arr: np.ndarray, dtype: ir.DType, element: tuple[int, ...]) -> object:
    v = arr[element]
    if dtype is ir.DType.BF16:
        from tilesafe.semantics.expr import fp
        return float(fp.bf16_bits_to_f32(int(v)))
    return float(v) if dtype.is_float else int(v)


def _find_source(kernel: ir.Kernel, arrays: Mapping[str, np.ndarray], value: object
                 ) -> str | None:
    """The input element holding exactly `value` (when several do, the first, saying so)."""
    if not isinstance(value, float) or value != value or value == 0.0:
        return None
    hits, total = [], 0
    for t in kernel.params:
        if not (t.role is ir.ParamRole.IN and t.dtype.is_float):
            continue
        arr = arrays[t.name]
        if t.dtype is ir.DType.BF16:
            from tilesafe.semantics.expr import fp
            arr = fp.bf16_array_to_f32(arr)
        found = np.argwhere(arr.astype(np.float64) == value)
        total += len(found)
        for idx in found[:1]:
            hits.append(f"{t.name}[{', '.join(str(int(i)) for i in idx)}]")
    if not hits:
        return None
    return hits[0] if total == 1 else f"{hits[0]} (or one of {total - 1} other elements " \
        "holding the same value)"


def _classify(spec: ir.Ensures, load: ir.Load | None, received: str | None,
              fill: bool) -> str:
    """The kind of value bug (one code, one meaning): a fill value that flowed into the
    element, a moved element, a sum's contributions, or other arithmetic."""
    if fill:
        return FILL
    if load is not None:
        return MOVED if received is not None else VALUE
    if _has_sum(spec.rhs):
        return SUM
    return VALUE


def _fill_arrived(kernel: ir.Kernel, spec: ir.Ensures, element: tuple[int, ...],
                  got_array: np.ndarray, got: object, want: object,
                  rerun: Callable[[ir.Kernel], RunResult]) -> bool:
    """Did an out-of-bounds TMA fill value arrive where the spec wants data?

    Decided by cause, not by look: the same launch is run again with every tensormap's fill
    swapped (zero <-> NaN); the fill arrived exactly when the element changes. A 0.0 or a
    NaN that arithmetic made (`x - x`, a poisoned fragment, a NaN input) does not change,
    so it is not called a fill -- in a kernel without TMA loads there is no fill at all.
    Only a value that is itself a fill (0.0 under `oob zero`, NaN under `oob nan`) is
    asked about, and for a spec with an order-free sum only the NaN fill: zero fills are
    legitimate +0.0 contributions there, so a wrong sum is the sum's (TS803)."""
    if not isinstance(got, float):
        return False
    loads = {s.tensormap for s in walk.statements(kernel.body) if isinstance(s, ir.TmaLoad)}
    fills = {kernel.tensormap(n).oob_fill for n in loads}
    if isinstance(want, float) and (want != want or want == 0.0):
        return False
    if got != got:
        if "nan" not in fills:
            return False
    elif got != 0.0 or "zero" not in fills or _has_sum(spec.rhs):
        return False
    swapped = tuple(dataclasses.replace(t, oob_fill="nan" if t.oob_fill == "zero" else "zero")
                    if t.name in loads else t for t in kernel.tensormaps)
    try:
        other = rerun(dataclasses.replace(kernel, tensormaps=swapped))
    except InterpError:
        return False
    before = got_array[element]
    after = other.tensors[spec.tensor][element]
    return not bool(same_bits(np.asarray([before]), np.asarray([after]))[0])


def _has_sum(e: ir.Expr) -> bool:
    return any(isinstance(x, ir.Reduce) for x in walk.subexprs(e))


def _plain(v: object) -> object:
    if isinstance(v, float) and v != v:
        return "NaN"
    if isinstance(v, float) and v in (float("inf"), float("-inf")):
        return "inf" if v > 0 else "-inf"
    return v


def _inputs_text(exact: bool, profile: Profile) -> str:
    base = "small integers" if exact else "distinct values"
    if profile is Profile.SPECIAL:
        return f"{base} with special values (inf, NaN, zeros, extremes)"
    if profile is Profile.WIDE:
        return "integers times 4096 (their sums overflow f16)"
    if profile is Profile.EDGES:
        return f"{base} with a special value at every corner of every input"
    return base


def _sizes_text(sizes: Mapping[str, int]) -> str:
    return ", ".join(f"{k}={v}" for k, v in sizes.items())
