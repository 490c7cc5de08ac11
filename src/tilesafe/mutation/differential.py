"""Run a surviving mutant against the original on the reference interpreter.

A mutant that verification could not refute is either equivalent to the original or a bug
the checkers missed. The interpreter decides which, as far as runs can: the same random
inputs go to both kernels at several sizes, and the mutant is run under several schedules
(the seeded random scheduler and, where the interpreter has it, the adversarial PCT one).

What a run can show, strongest first:
  runtime  the mutant fails (out of bounds, deadlock, barrier misuse, a TMA rule): a
           property tilesafe claims to prove;
  race     the mutant's output depends on the schedule (same inputs, different results):
           a data race or a missing ordering, also claimed;
  unwritten the mutant leaves output elements the original writes as they started (the
           poison of an output): "every output element written" is claimed too (TS212);
  value    the mutant deterministically computes something else: a specification bug
           (issue 10), not something the current checkers claim to find;
  same     bit-identical outputs everywhere.

Outputs are compared bit for bit (the interpreter is exact), every tensor, inputs included.
"""

from __future__ import annotations

import contextlib
import hashlib
import inspect
import signal
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from tilesafe.frontend import ir
from tilesafe.mutation.sizes import Sizes

_ORIGINAL_CACHE: dict[tuple[str, tuple[tuple[str, int], ...], int], Any] = {}
_CACHE_LIMIT = 64
SLOW_FACTOR = 20  # a mutant run may take this many times the original's run ...
SLOW_FLOOR_S = 10.0  # ... or this many seconds, whichever is more
MAX_GROWTH = 16  # a mutant launching more threads than this many times the original is
# not interpreted at those sizes (the interpreter runs every thread of every block)


@dataclass(frozen=True)
class Run:
    """One comparison (or, for sizes only the mutant allows, one mutant run)."""

    sizes: dict[str, int]
    input_seed: int
    policy: str
    seed: int
    # same | differs | unwritten | runtime | ok (mutant-only) | step-limit | skipped | internal
    status: str
    detail: str = ""
    digest: str = ""  # hash of the mutant's outputs (same/differs runs)

    def to_record(self) -> dict[str, Any]:
        return asdict(self)


def schedules(count: int) -> list[tuple[str, int]]:
    """`count` (policy, seed) pairs per size: the seeded random scheduler's seed 0, then the
    adversarial PCT scheduler's seeds 0, 1, ... where the interpreter has it (seeds of PCT
    vary the copy engine too: slow, stores last, fast), else more random seeds."""
    from tilesafe.semantics.interpreter import interp

    has_pct = "policy" in inspect.signature(interp.run_kernel).parameters
    out = [("random", 0)]
    for i in range(max(0, count - 1)):
        out.append(("pct", i) if has_pct else ("random", i + 1))
    return out


class RunTooLong(BaseException):
    """Raised inside an interpreter run by the alarm: a BaseException so that nothing in the
    interpreter mistakes it for a kernel error."""


@contextlib.contextmanager
def _time_limit(seconds: float) -> Iterator[None]:
    """Interrupt the (pure-Python) interpreter after `seconds`, where SIGALRM exists and we
    are on the main thread; otherwise rely on the caller's outer limit."""
    usable = hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread()
    if not usable:
        yield
        return

    def fire(signum: int, frame: Any) -> None:
        raise RunTooLong()

    old = signal.signal(signal.SIGALRM, fire)
    signal.setitimer(signal.ITIMER_REAL, max(0.01, seconds))
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def _run(kernel: ir.Kernel, sizes: Mapping[str, int], inputs: Mapping[str, np.ndarray],
         policy: str, seed: int, max_steps: int, seconds: float = 600.0) -> Any:
    from tilesafe.semantics.interpreter import interp

    kwargs: dict[str, Any] = {"seed": seed, "max_steps": max_steps}
    if policy != "random":
        kwargs["policy"] = policy
    with _time_limit(seconds):
        return interp.run_kernel(kernel, dict(sizes), inputs, **kwargs)


def _original(key_path: str, kernel: ir.Kernel, sizes: Sizes, input_seed: int
              ) -> tuple[dict[str, np.ndarray], Any, float]:
    """(inputs, result or the InterpError, seconds) of the original at these sizes, cached."""
    from tilesafe.semantics.interpreter import interp

    key = (key_path, tuple(sorted(sizes.items())), input_seed)
    if key not in _ORIGINAL_CACHE:
        if len(_ORIGINAL_CACHE) >= _CACHE_LIMIT:
            _ORIGINAL_CACHE.pop(next(iter(_ORIGINAL_CACHE)))
        inputs = interp.random_inputs(kernel, sizes, np.random.default_rng(input_seed))
        t0 = time.monotonic()
        try:
            result: Any = _run(kernel, sizes, inputs, "random", 0, interp.DEFAULT_MAX_STEPS)
        except interp.InterpError as err:
            result = err
        _ORIGINAL_CACHE[key] = (inputs, result, time.monotonic() - t0)
    return _ORIGINAL_CACHE[key]


def _bits(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a).view(f"u{a.dtype.itemsize}")


def diff_text(orig: Mapping[str, np.ndarray], mut: Mapping[str, np.ndarray],
              dtypes: Mapping[str, ir.DType]) -> str:
    """'' when every tensor is bit-identical, else where the first one differs."""
    from tilesafe.semantics.interpreter.interp_io import as_float

    for name in sorted(orig):
        a, b = orig[name], mut[name]
        if a.shape != b.shape or a.dtype != b.dtype:
            return f"{name}: shape or type differs"
        neq = _bits(a) != _bits(b)
        n = int(neq.sum())
        if n:
            idx = tuple(int(i) for i in np.argwhere(neq)[0])
            fa = as_float(a[idx].reshape(1), dtypes[name])[0]
            fb = as_float(b[idx].reshape(1), dtypes[name])[0]
            return (f"{name}: {n} of {a.size} elements differ; first at {list(idx)}: "
                    f"original {fa:g}, mutant {fb:g}")
    return ""


def unwritten_text(orig: Mapping[str, np.ndarray], mut: Mapping[str, np.ndarray],
                   initial: Mapping[str, np.ndarray]) -> str:
    """'' unless the mutant leaves elements the original writes as they started (poison,
    for an output): the coverage property "every output element is written" (TS212) is
    violated, not just the value."""
    for name in sorted(orig):
        a, b, start = _bits(orig[name]), _bits(mut[name]), _bits(initial[name])
        if a.shape != b.shape or a.shape != start.shape:
            continue
        left = (a != b) & (b == start) & (a != start)
        n = int(left.sum())
        if n:
            idx = [int(i) for i in np.argwhere(left)[0]]
            return (f"{name}: {n} element(s) the original writes are never written by the "
                    f"mutant (first at {idx})")
    return ""


def _digest(tensors: Mapping[str, np.ndarray]) -> str:
    h = hashlib.sha256()
    for name in sorted(tensors):
        h.update(name.encode())
        h.update(np.ascontiguousarray(tensors[name]).tobytes())
    return h.hexdigest()[:16]


def _error_text(err: Any) -> str:
    return f"{err.code} {err.message}"[:300]


def compare(path: str, original: ir.Kernel, mutant: ir.Kernel, both: list[Sizes],
            only: list[Sizes], seeds: int, deadline: float) -> tuple[list[Run], bool]:
    """Run the mutant against the original; returns (runs, complete). Stops at the first
    run-time failure, and after the sizes at which outputs first differ (the remaining
    schedules of those sizes still run, to tell a race from a value change). `complete` is
    False when the deadline cut the runs short."""
    from tilesafe.mutation.sizes import threads
    from tilesafe.semantics.interpreter import interp

    runs: list[Run] = []
    plan = schedules(seeds)
    for sizes in both:
        differs_here = False
        grown = threads(mutant, sizes)
        if grown > MAX_GROWTH * max(1, threads(original, sizes)) and grown > 65536:
            runs.append(Run(sizes, 0, "random", 0, "skipped",
                            f"the mutant launches {grown} threads, over {MAX_GROWTH}x the "
                            "original's: too slow to interpret"))
            continue
        for input_seed in (0,):
            inputs, ref, ref_seconds = _original(path, original, sizes, input_seed)
            if isinstance(ref, interp.InterpError):
                runs.append(Run(sizes, input_seed, "random", 0, "skipped",
                                "the ORIGINAL fails here: " + _error_text(ref)))
                continue
            budget = 10 * ref.steps + 100_000
            for policy, seed in plan:
                left = deadline - time.monotonic()
                if left <= 0:
                    return runs, False
                limit = min(left, max(SLOW_FLOOR_S, SLOW_FACTOR * ref_seconds))
                try:
                    res = _run(mutant, sizes, inputs, policy, seed, budget, limit)
                except RunTooLong:
                    if limit >= left:
                        return runs, False
                    runs.append(Run(sizes, input_seed, policy, seed, "skipped",
                                    f"the mutant ran over {limit:.0f} s here (the original: "
                                    f"{ref_seconds:.1f} s)"))
                    break
                except interp.InterpError as err:
                    status = "step-limit" if err.code == "TS499" else "runtime"
                    runs.append(Run(sizes, input_seed, policy, seed, status, _error_text(err)))
                    if status == "runtime":
                        return runs, True
                    differs_here = True
                    continue
                except ValueError as err:  # the mutant's tensors have other shapes
                    runs.append(Run(sizes, input_seed, policy, seed, "skipped", str(err)))
                    break
                except Exception as err:  # noqa: BLE001 - a crash of the interpreter itself
                    runs.append(Run(sizes, input_seed, policy, seed, "internal",
                                    f"the interpreter crashed: {type(err).__name__}: {err}"))
                    return runs, True
                text = diff_text(ref.tensors, res.tensors, ref.dtypes)
                left = unwritten_text(ref.tensors, res.tensors, inputs) if text else ""
                status = "unwritten" if left else "differs" if text else "same"
                runs.append(Run(sizes, input_seed, policy, seed, status,
                                f"{left}; {text}" if left else text, _digest(res.tensors)))
                differs_here = differs_here or bool(text)
        if differs_here:
            return runs, True
    for sizes in only:
        if threads(mutant, sizes) > 1 << 20:
            continue
        inputs = interp.random_inputs(mutant, sizes, np.random.default_rng(0))
        for policy, seed in plan[:1] + [p for p in plan if p[0] == "pct"][:1]:
            left = deadline - time.monotonic()
            if left <= 0:
                return runs, False
            try:
                _run(mutant, sizes, inputs, policy, seed, interp.DEFAULT_MAX_STEPS // 4,
                     min(left, 4 * SLOW_FLOOR_S))
            except RunTooLong:
                runs.append(Run(sizes, 0, policy, seed, "skipped", "too slow to interpret"))
                break
            except interp.InterpError as err:
                status = "step-limit" if err.code == "TS499" else "runtime"
                runs.append(Run(sizes, 0, policy, seed, status,
                                "at sizes only the mutant allows: " + _error_text(err)))
                if status == "runtime":
                    return runs, True
                continue
            except Exception as err:  # noqa: BLE001 - a crash of the interpreter itself
                runs.append(Run(sizes, 0, policy, seed, "internal",
                                f"the interpreter crashed: {type(err).__name__}: {err}"))
                return runs, True
            runs.append(Run(sizes, 0, policy, seed, "ok", "sizes only the mutant allows"))
    return runs, True


def racy(runs: list[Run]) -> bool:
    """Did the mutant give different outputs under different schedules on the same inputs?"""
    by_input: dict[tuple, set[str]] = {}
    for r in runs:
        if r.status in ("same", "differs", "unwritten"):
            key = (tuple(sorted(r.sizes.items())), r.input_seed)
            by_input.setdefault(key, set()).add(r.digest)
    return any(len(v) > 1 for v in by_input.values())
