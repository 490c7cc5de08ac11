"""The library face of tilesafe: what the CLI does, as functions that return data.

Nothing here prints. Problems in the user's input come back as diagnostics
(`lint`) or as a raised `DiagnosticError` (`load`, `verify`, `run`); a request that cannot
be served as asked (an unknown kernel, a bad size list) raises `UsageError`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tilesafe.checkers.obligation import Obligation
from tilesafe.frontend import diagnostics as dg
from tilesafe.frontend import ir
from tilesafe.frontend.diagnostics import Diagnostic, DiagnosticError
from tilesafe.frontend.load import load_program


class UsageError(ValueError):
    """A request that cannot be served as asked (unknown kernel, malformed sizes, ...)."""


# ---- loading and linting -------------------------------------------------------------------


def load(path: str | Path, target: str | None = None) -> ir.Program:
    """Parse and resolve a .tsk file for `target` (None: sm_90a; frontend/target.py) (raises
    DiagnosticError with every problem found)."""
    return load_program(path, target=target)


def layout_diagnostics(program: ir.Program) -> list[Diagnostic]:
    """TS030 for every shared buffer whose layout cannot be realised over its shape."""
    from tilesafe.semantics.layout import layouts

    diags = []
    for kernel in program.kernels:
        for buf in kernel.shared:
            try:
                layouts.realize(buf.layout, buf.shape, buf.dtype.nbytes)
            except layouts.LayoutError as err:
                diags.append(Diagnostic(dg.BAD_LAYOUT, f"layout of '{buf.name}' ({buf.layout}) "
                                        f"does not fit {buf.dtype.value}{list(buf.shape)}: {err}",
                                        buf.span))
    return diags


def spec_diagnostics(program: ir.Program) -> list[Diagnostic]:
    """TS041 for every `ensures` read outside its tensor at some allowed size (a malformed
    specification: it has no value there, so nothing could prove or test it)."""
    from tilesafe.semantics.value import spec_bounds

    diags = []
    for kernel in program.kernels:
        for spec in kernel.ensures:
            for hit in spec_bounds.outside_reads(kernel, spec):
                diags.append(Diagnostic(dg.SPEC_OUTSIDE, hit.describe(spec.tensor),
                                        hit.load.span))
    return diags


def lint(path: str | Path, text: str | None = None,
         target: str | None = None) -> list[Diagnostic]:
    """Every problem the frontend, the layout calculus and the spec bounds find in a file
    (empty: clean); `text` stands for the file's contents (standard input)."""
    try:
        program = load_program(path, text, target)
    except DiagnosticError as err:
        return list(err.diagnostics)
    return layout_diagnostics(program) + spec_diagnostics(program)


def checked_program(path: str | Path, text: str | None = None,
                    target: str | None = None) -> ir.Program:
    """`load`, then require a clean `lint` (raises DiagnosticError otherwise)."""
    program = load_program(path, text, target)
    diags = [d for d in layout_diagnostics(program) + spec_diagnostics(program)
             if d.severity == "error"]
    if diags:
        raise DiagnosticError(diags)
    return program


# ---- verification --------------------------------------------------------------------------


def checker_names() -> tuple[str, ...]:
    from tilesafe.checkers import registry

    return tuple(registry.CHECKERS)


def verify_kernel(kernel: ir.Kernel, options: Any = None,
                  only: Sequence[str] | None = None) -> list[Obligation]:
    from tilesafe.checkers import registry

    if only is not None:
        unknown = [n for n in only if n not in registry.CHECKERS]
        if unknown:
            known = ", ".join(registry.CHECKERS) or "none registered"
            raise UsageError(f"unknown checker(s) {', '.join(unknown)}; known: {known}")
    from tilesafe.checkers import followon

    # A follow-on whose refutation was not checked (--only) stands on its own.
    return followon.settle(registry.run_all(kernel, options or registry.CheckOptions(),
                                            tuple(only) if only is not None else None))


def verify(path: str | Path, options: Any = None,
           only: Sequence[str] | None = None, target: str | None = None) -> list[Obligation]:
    """Every proof obligation of every kernel of a file (raises DiagnosticError if the file
    does not lint clean)."""
    program = checked_program(path, target=target)
    out: list[Obligation] = []
    for kernel in program.kernels:
        out.extend(verify_kernel(kernel, options, only))
    return out


# ---- running on the reference interpreter --------------------------------------------------

_SIZE_ITEM = re.compile(r"\s*([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(-?[0-9]+)\s*")


def parse_sizes(text: str) -> dict[str, int]:
    """`M=128,N=192` -> {"M": 128, "N": 192}."""
    sizes: dict[str, int] = {}
    if not text.strip():
        return sizes
    for item in text.split(","):
        m = _SIZE_ITEM.fullmatch(item)
        if m is None:
            raise UsageError(f"bad size {item.strip()!r}: expected NAME=INTEGER, "
                             "e.g. --size M=128,N=192")
        if m.group(1) in sizes:
            raise UsageError(f"size {m.group(1)} given twice")
        sizes[m.group(1)] = int(m.group(2))
    return sizes


def select_kernel(program: ir.Program, name: str | None) -> ir.Kernel:
    names = [k.name for k in program.kernels]
    if name is None:
        if len(program.kernels) == 1:
            return program.kernels[0]
        raise UsageError(f"{program.path} has {len(names)} kernels ({', '.join(names)}); "
                         "choose one with --kernel NAME")
    for k in program.kernels:
        if k.name == name:
            return k
    raise UsageError(f"no kernel '{name}' in {program.path}; kernels: {', '.join(names)}")


@dataclass(frozen=True)
class RunRecord:
    """A run with what went into it: the kernel, sizes, seed and the random inputs."""

    kernel: ir.Kernel
    sizes: Mapping[str, int]
    seed: int
    inputs: Mapping[str, Any]
    result: Any


SCHEDULES = ("lockstep", "random", "pct")


def run_detailed(path: str | Path, sizes: Mapping[str, int] | str, seed: int = 0,
                 kernel: str | None = None, inputs_kind: str = "random",
                 schedule: str = "lockstep", target: str | None = None) -> RunRecord:
    """Interpret one kernel on random inputs drawn from `seed` (`inputs_kind` "distinct":
    the pairwise distinct float inputs `equiv` and the value checker run on; the other
    names of spec_inputs.RUN_KINDS: the value checker's other inputs -- small integers,
    special values, wide integers, special corners -- so that every distinguishing or
    refuting launch can be replayed). Raises DiagnosticError for a bad file,
    UsageError for a bad request, and the interpreter's InterpError when the sizes do not
    fit the kernel (code TS200) or the run itself goes wrong (out of bounds, deadlock, ...)."""
    import numpy as np

    if isinstance(sizes, str):
        sizes = parse_sizes(sizes)
    program = checked_program(path, target=target)
    k = select_kernel(program, kernel)
    from tilesafe.semantics.interpreter import interp
    interp.check_where(k, dict(sizes))  # InterpError TS200: sizes missing, unknown or bad
    from tilesafe.semantics.value.spec_inputs import RUN_KINDS, value_inputs

    if inputs_kind in RUN_KINDS:
        exact, profile = RUN_KINDS[inputs_kind]
        inputs = value_inputs(k, dict(sizes), seed, exact, profile)
    elif inputs_kind == "random":
        inputs = interp.random_inputs(k, dict(sizes), np.random.default_rng(seed))
    else:
        raise UsageError(f"unknown kind of inputs '{inputs_kind}' (random, "
                         f"{', '.join(RUN_KINDS)})")
    result = interp.run_kernel(k, dict(sizes), inputs, **schedule_options(schedule, seed))
    return RunRecord(k, dict(sizes), seed, inputs, result)


def schedule_options(schedule: str, seed: int) -> dict[str, Any]:
    """How `run` schedules the threads: "lockstep" (the vector engine's one legal schedule,
    fast; the scalar engine where the vector one cannot run), "random" (the scalar engine's
    seeded uniform choice) or "pct" (its adversarial priorities, seeded)."""
    if schedule == "lockstep":
        return {}
    if schedule in ("random", "pct"):
        return {"seed": seed, "policy": schedule}
    raise UsageError(f"unknown schedule '{schedule}' ({', '.join(SCHEDULES)})")


def run(path: str | Path, sizes: Mapping[str, int] | str, seed: int = 0,
        kernel: str | None = None) -> Any:
    """Interpret a kernel on random inputs; returns the interpreter's RunResult."""
    return run_detailed(path, sizes, seed, kernel).result


# ---- code generation and GPU runs ----------------------------------------------------------


@dataclass(frozen=True)
class CompileResult:
    """A kernel through the verification gate and the code generator.

    `compiled` is None when the gate refused (some error obligation is not proved and
    `unverified` was not asked for): `failing` names them. `validation` holds the
    translation validator's obligations on the emitted code."""

    kernel: ir.Kernel
    compiled: Any
    obligations: tuple[Obligation, ...]
    failing: tuple[Obligation, ...]
    validation: tuple[Obligation, ...] = ()

    @property
    def refused(self) -> bool:
        return self.compiled is None


def compile_kernel(program: ir.Program, kernel: str | None = None, *,
                   unverified: bool = False, options: Any = None,
                   validate: bool = True) -> CompileResult:
    """Verify one kernel, then emit PTX for it if every error obligation is proved (or
    anyway, with a banner, when `unverified`), and with `validate` prove that the PTX does
    what the IR says (the translation validator, TS720-TS729, docs/codegen.md). Raises
    DiagnosticError (TS7xx) when no exact code exists for it."""
    from tilesafe.codegen.compile import compile_kernel as generate
    from tilesafe.codegen.compile import unverified_banner

    k = select_kernel(program, kernel)
    obligations = tuple(verify_kernel(k, options))
    failing = tuple(o for o in obligations if o.failed)
    if failing and not unverified:
        return CompileResult(k, None, obligations, failing)
    banner = unverified_banner([f"{o.code or '-'} {o.name}" for o in failing]) \
        if unverified and failing else ""
    if k.target.is_amd:  # HIP C++; the translation validator reads PTX only
        from tilesafe.codegen.hip_compile import compile_hip

        return CompileResult(k, compile_hip(k, program.path, banner), obligations, failing)
    compiled = generate(k, program.path, banner)
    validation: tuple[Obligation, ...] = ()
    if validate:
        from tilesafe.codegen.validate import validate_ptx

        validation = tuple(validate_ptx(k, compiled.ptx))
    return CompileResult(k, compiled, obligations, failing, validation)


def compile(path: str | Path, kernel: str | None = None, *, unverified: bool = False,
            options: Any = None, validate: bool = True,
            target: str | None = None) -> CompileResult:
    """`tilesafe compile`: load, lint, verify, generate, validate (PTX for sm_90a; HIP C++
    for gfx942, codegen/hip.py)."""
    return compile_kernel(checked_program(path, target=target), kernel,
                          unverified=unverified, options=options, validate=validate)


@dataclass(frozen=True)
class GpuRecord:
    """A GPU run with what went into it and, with `check`, the interpreter's verdict."""

    kernel: ir.Kernel
    sizes: Mapping[str, int]
    seed: int
    inputs: Mapping[str, Any]
    gpu: Any  # tilesafe.gpu.launcher.GpuRun
    reference: Any = None  # the interpreter's RunResult (check only)
    reference_error: Any = None  # the interpreter's InterpError, if it failed
    mismatches: tuple[Any, ...] = ()

    @property
    def bit_exact(self) -> bool:
        return (self.gpu.status == "ok" and self.reference is not None
                and not self.mismatches)


def run_gpu(path: str | Path, sizes: Mapping[str, int] | str, seed: int = 0,
            kernel: str | None = None, *, check: bool = False, unverified: bool = False,
            timeout: float = 60.0, compiled: CompileResult | None = None) -> GpuRecord:
    """Compile (through the verification gate), launch on the GPU in a child process with a
    timeout, and with `check` run the interpreter on the same inputs and compare bit for
    bit. Raises UsageError when the gate refuses."""
    import numpy as np

    from tilesafe.codegen.plan import bind
    from tilesafe.gpu.compare import compare
    from tilesafe.gpu.launcher import run_isolated

    if isinstance(sizes, str):
        sizes = parse_sizes(sizes)
    program = checked_program(path)
    res = compiled or compile_kernel(program, kernel, unverified=unverified, validate=False)
    if res.refused:
        names = "; ".join(f"{o.code or '-'} {o.name}" for o in res.failing)
        raise UsageError(f"refusing to run unverified code (not proved: {names}); pass "
                         "--unverified to run it anyway")
    from tilesafe.semantics.interpreter import interp
    interp.check_where(res.kernel, dict(sizes))
    spec = bind(res.kernel, res.compiled, sizes)
    inputs = interp.random_inputs(res.kernel, dict(sizes), np.random.default_rng(seed))
    gpu = run_isolated(spec, inputs, timeout=timeout)
    if not check:
        return GpuRecord(res.kernel, dict(sizes), seed, inputs, gpu)
    try:
        ref = interp.run_kernel(res.kernel, dict(sizes), inputs)
    except interp.InterpError as err:
        return GpuRecord(res.kernel, dict(sizes), seed, inputs, gpu, None, err)
    mism = tuple(compare(ref.tensors, gpu.tensors)) if gpu.status == "ok" else ()
    return GpuRecord(res.kernel, dict(sizes), seed, inputs, gpu, ref, None, mism)
