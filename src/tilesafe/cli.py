"""`tilesafe` command line: lint, run, fmt, verify. The only module that prints.

Exit codes (README, "Exit codes"): 0 ok / everything proved, warnings (TS6xx, TS216) included;
1 a property refuted or unknown (or, for `run`, the kernel failed at run time; for `fmt
--check`/`--diff`, a file would change; with --warnings-as-errors, a warning); 2 a usage,
parse or type error; 3 an internal error (a bug in tilesafe: never a traceback for the user,
unless TILESAFE_DEBUG=1 asks for one).
"""

from __future__ import annotations

import argparse
import difflib
import json
import os
import sys
import time
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

from tilesafe import __version__
from tilesafe.frontend.diagnostics import Diagnostic, DiagnosticError, render
from tilesafe.frontend.span import Span

# The value checker's inputs `run --inputs` replays (semantics/value/spec_inputs.RUN_KINDS; kept
# here so that parsing the command line imports no numpy; a test keeps the two equal).
VALUE_INPUTS = ("distinct", "integers", "special", "special-integers", "wide", "edges",
                "edges-integers")

OK, FAILED, USAGE, INTERNAL = 0, 1, 2, 3


class _Usage(Exception):
    """A usage error found after argument parsing (exit 2)."""


# ---- output helpers ------------------------------------------------------------------------


class _Out:
    def __init__(self, out: TextIO, err: TextIO, stdin: TextIO | None = None):
        self.out, self.err = out, err
        self.stdin = stdin or sys.stdin

    def line(self, text: str = "") -> None:
        self.out.write(text + "\n")

    def error(self, text: str) -> None:
        self.err.write(f"tilesafe: {text}\n")

    def json(self, data: object) -> None:
        self.out.write(json.dumps(data, indent=2) + "\n")


_SOURCES: dict[str, str | None] = {}


def _source(path: str) -> str | None:
    """The text of a file for caret excerpts (None when it cannot be read)."""
    if path not in _SOURCES:
        try:
            _SOURCES[path] = Path(path).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            _SOURCES[path] = None
    return _SOURCES[path]


def _render_diags(out: _Out, diags: Sequence[Diagnostic]) -> None:
    for d in sorted(diags, key=lambda d: (d.span.path, d.span.line, d.span.col)):
        out.line(render(d, _source(d.span.path)))


def _errors(diags: Sequence[Diagnostic]) -> list[Diagnostic]:
    return [d for d in diags if d.severity == "error"]


STDIN = "<stdin>"


def _inputs(names: Sequence[str], stdin: TextIO) -> list[tuple[str, str | None]]:
    """The files a command works on: each FILE as given, each directory searched
    (recursively, sorted) for `*.tsk`, and `-` standard input (read once, named <stdin>).
    Pairs of (path, text): text is None for a file (read where it is used)."""
    found: list[tuple[str, str | None]] = []
    for name in names:
        if name == "-":
            text = stdin.read()
            _SOURCES[STDIN] = text
            found.append((STDIN, text))
        elif Path(name).is_dir():
            tsk = sorted(str(p) for p in Path(name).rglob("*.tsk") if p.is_file())
            if not tsk:
                raise _Usage(f"no .tsk files under {name}")
            found.extend((p, None) for p in tsk)
        else:
            found.append((name, None))
    return found


# ---- lint ----------------------------------------------------------------------------------


def _cmd_lint(args: argparse.Namespace, out: _Out) -> int:
    from tilesafe import api
    from tilesafe.proofs.report import diagnostic_record

    inputs = _inputs(args.files, out.stdin)
    all_diags: list[Diagnostic] = []
    for path, text in inputs:
        all_diags.extend(api.lint(path, text, args.target))
    if args.format == "json":
        out.json([diagnostic_record(d) for d in all_diags])
    else:
        _render_diags(out, all_diags)
        n_err = len(_errors(all_diags))
        n_files = len(inputs)
        files = f"{n_files} file{'s' if n_files != 1 else ''}"
        if all_diags:
            out.line(f"{files} checked: {n_err} error{'s' if n_err != 1 else ''}"
                     + (f", {len(all_diags) - n_err} other" if len(all_diags) > n_err else ""))
        else:
            out.line(f"{files} checked: no problems")
    return USAGE if _errors(all_diags) else OK


# ---- run -----------------------------------------------------------------------------------


def _stat(value: object) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def _summary_text(summary: object) -> list[str]:
    """One line per output tensor: type, shape, statistics and a checksum."""
    if isinstance(summary, str):
        return summary.rstrip("\n").splitlines()
    if isinstance(summary, dict):
        lines = []
        for name, info in summary.items():
            if not isinstance(info, dict):
                lines.append(f"{name}: {info}")
                continue
            rest = dict(info)
            head = f"{name}: {rest.pop('dtype', '?')}{rest.pop('shape', '')}"
            checksum = rest.pop("checksum", None)
            stats = "  ".join(f"{k}={_stat(v)}" for k, v in rest.items())
            lines.append(f"{head}  {stats}" + (f"  checksum {checksum}" if checksum else ""))
        return lines
    if isinstance(summary, (list, tuple)):
        return [str(s) for s in summary]
    return [str(summary)]


def _result_arrays(result: Any) -> dict[str, Any]:
    """The output tensors of a run result, whatever the interpreter calls them."""
    import numpy as np

    if isinstance(result, dict):
        candidates: list[Any] = [result]
    else:
        candidates = [getattr(result, n, None) for n in
                      ("outputs", "tensors", "globals", "memory", "arrays")]
    for c in candidates:
        if isinstance(c, dict) and c and all(isinstance(v, np.ndarray) for v in c.values()):
            return dict(c)
    return {}


def _cmd_run(args: argparse.Namespace, out: _Out) -> int:
    from tilesafe import api
    from tilesafe.proofs.report import json_safe

    sizes = api.parse_sizes(args.size or "")
    try:
        if args.device == "gpu":
            if args.inputs != "random":
                raise _Usage(f"--inputs {args.inputs} runs on the interpreter only")
            if args.target not in (None, "sm_90a"):
                raise _Usage(f"--device gpu runs PTX on an NVIDIA GPU; {args.target} HIP "
                             "runs through tests/gpu/build_hip_cases.py (docs/codegen.md)")
            return _run_gpu(args, out, sizes)
        rec = api.run_detailed(args.file, sizes, seed=args.seed, kernel=args.kernel,
                               inputs_kind=args.inputs, schedule=args.schedule,
                               target=args.target)
    except DiagnosticError:
        raise
    except Exception as err:  # the interpreter's InterpError: the kernel failed at run time
        if not _is_interp_error(err):
            raise
        # TS200: the sizes do not fit the kernel (missing, unknown, or against `where`).
        status = USAGE if err.code == "TS200" else FAILED
        span = err.span if err.span.line > 0 else Span(args.file, 0, 0, 0, 0)
        diag = Diagnostic(err.code, err.message, span)
        detail = getattr(err, "detail", None) or {}
        if args.format == "json":
            out.json({"kind": "run", "path": args.file, "kernel": args.kernel, "sizes": sizes,
                      "seed": args.seed, "ok": False,
                      "error": {**diag.to_record(), "detail": json_safe(detail)}})
        else:
            out.line(render(diag, _source(args.file)))
            for key, value in detail.items():
                out.line(f"     {key}: {value}")
        return status
    from tilesafe.semantics.interpreter import interp
    summary = interp.summarize(rec.result)
    saved = None
    if args.out:
        saved = _save_npz(args.out, rec.inputs, _result_arrays(rec.result))
    if args.format == "json":
        out.json({"kind": "run", "path": args.file, "kernel": rec.kernel.name,
                  "sizes": dict(rec.sizes), "seed": rec.seed, "inputs": args.inputs,
                  "ok": True,
                  "summary": json_safe(summary),
                  "saved": saved})
    else:
        given = ", ".join(f"{k}={v}" for k, v in rec.sizes.items()) or "no sizes"
        kind = "" if args.inputs == "random" else f", {args.inputs} inputs"
        out.line(f"{args.file}: kernel {rec.kernel.name} ({given}, seed {rec.seed}{kind})")
        for line in _summary_text(summary):
            out.line(f"  {line}")
        if saved:
            out.line(f"saved inputs and outputs to {saved}")
    return OK


def _is_interp_error(err: Exception) -> bool:
    try:
        from tilesafe.semantics.interpreter.interp_error import InterpError
    except ModuleNotFoundError:
        return all(hasattr(err, a) for a in ("code", "message", "span"))
    return isinstance(err, InterpError)


def _save_npz(path: str, inputs: Any, outputs: dict[str, Any]) -> str:
    import numpy as np

    arrays = {f"in_{k}": np.asarray(v) for k, v in dict(inputs).items()}
    arrays.update({f"out_{k}": np.asarray(v) for k, v in outputs.items()})
    try:
        np.savez(path, **arrays)
    except OSError as err:
        raise _Usage(f"cannot write {path}: {err.strerror or err}") from None
    return path if path.endswith(".npz") else path + ".npz"


def _run_gpu(args: argparse.Namespace, out: _Out, sizes: dict[str, int]) -> int:
    from tilesafe import api
    from tilesafe.codegen.plan import ContractError
    from tilesafe.gpu.driver import unavailable_reason

    why = unavailable_reason()
    if why is not None:
        raise _Usage(f"no GPU to run on: {why}")
    try:
        rec = api.run_gpu(args.file, sizes, args.seed, args.kernel, check=args.check,
                          unverified=args.unverified, timeout=args.timeout)
    except ContractError as err:
        raise _Usage(str(err)) from None
    gpu = rec.gpu
    given = ", ".join(f"{k}={v}" for k, v in rec.sizes.items()) or "no sizes"
    verdict = "ok" if gpu.status == "ok" else f"{gpu.status}: {gpu.error}"
    if args.check and gpu.status == "ok":
        if rec.reference_error is not None:
            verdict = f"the interpreter failed: {rec.reference_error}"
        elif rec.mismatches:
            verdict = "DIFFERS from the interpreter: " + "; ".join(
                m.describe() for m in rec.mismatches)
        else:
            verdict = "bit-exact with the interpreter"
    if args.format == "json":
        out.json({"kind": "run", "path": args.file, "kernel": rec.kernel.name,
                  "sizes": dict(rec.sizes), "seed": rec.seed, "device": "gpu",
                  "status": gpu.status, "error": gpu.error,
                  "checked": args.check, "bit_exact": rec.bit_exact if args.check else None,
                  "mismatches": [m.describe() for m in rec.mismatches]})
    else:
        out.line(f"{args.file}: kernel {rec.kernel.name} on the GPU ({given}, seed "
                 f"{rec.seed}): {verdict}")
        if gpu.status == "ok":
            from tilesafe.semantics.interpreter.interp_io import summarize_tensor

            for name, arr in gpu.tensors.items():
                info = summarize_tensor(arr, rec.kernel.tensor(name).dtype)
                out.line(f"  {_summary_text({name: info})[0]}")
    ok = gpu.status == "ok" and (not args.check or rec.bit_exact)
    return OK if ok else FAILED


# ---- compile -------------------------------------------------------------------------------


def _cmd_compile(args: argparse.Namespace, out: _Out) -> int:
    from tilesafe import api
    from tilesafe.proofs import report

    res = api.compile(args.file, args.kernel, unverified=args.unverified, target=args.target)
    if res.refused:
        entries = [report.Entry(args.file, res.kernel.name, o) for o in res.failing]
        if args.format == "json":
            out.json({"kind": "compile", "path": args.file, "kernel": res.kernel.name,
                      "compiled": False,
                      "failing": [report.obligation_record(e) for e in entries]})
        else:
            for e in entries:
                for line in report.obligation_lines(e):
                    out.line(line)
            out.line(f"{args.file}: kernel {res.kernel.name} not compiled: "
                     f"{len(res.failing)} obligation(s) not proved (--unverified emits "
                     "anyway)")
        return FAILED
    ptx = getattr(res.compiled, "hip", None) or res.compiled.ptx  # --target gfx942: HIP C++
    failed_validation = [o for o in res.validation if o.failed]
    # PTX that translation validation did not prove is not handed out as a result (it may
    # still be wanted for experiments: --unverified writes it, as for unproved kernels)
    withheld = bool(failed_validation) and not args.unverified
    if args.output and not withheld:
        try:
            Path(args.output).write_text(ptx, encoding="utf-8")
        except OSError as err:
            raise _Usage(f"cannot write {args.output}: {err.strerror or err}") from None
    if args.format == "json":
        out.json({"kind": "compile", "path": args.file, "kernel": res.kernel.name,
                  "compiled": True,
                  "unverified": bool(res.failing), "output": args.output,
                  "ptx": None if args.output or withheld else ptx,
                  "withheld": withheld,
                  "smem_bytes": res.compiled.smem_bytes, "block": res.compiled.block,
                  "validation": [report.obligation_record(report.Entry(
                      args.file, res.kernel.name, o)) for o in res.validation]})
    else:
        if withheld:
            out.line(f"{args.file}: kernel {res.kernel.name}: PTX not written: translation "
                     f"validation did not prove {len(failed_validation)} obligation(s) "
                     "(--unverified writes it anyway)")
        elif not args.output:
            out.out.write(ptx)
        else:
            note = " (UNVERIFIED)" if res.failing or failed_validation else ""
            out.line(f"{args.file}: kernel {res.kernel.name} -> {args.output}{note} "
                     f"({res.compiled.smem_bytes} bytes of shared memory, "
                     f"{res.compiled.block} threads)")
        for o in failed_validation:
            for line in report.obligation_lines(report.Entry(args.file, res.kernel.name, o)):
                out.err.write(line + "\n")
    return FAILED if failed_validation else OK


# ---- fmt -----------------------------------------------------------------------------------


def _safe_format(path: str, text: str) -> str:
    """Format and prove the result means the same: it must parse, be a fixed point, and
    (if the input resolves) resolve to the same IR up to spans."""
    from tilesafe.frontend.fmt import format_module, without_spans
    from tilesafe.frontend.parser import parse
    from tilesafe.frontend.resolve import resolve

    module = parse(text, path)
    result = format_module(module, text)
    try:
        again = parse(result, path)
    except DiagnosticError as err:
        raise RuntimeError(f"fmt produced text that does not parse ({err})") from None
    if format_module(again, result) != result:
        raise RuntimeError(f"fmt is not idempotent on {path}")
    if len(again.comments) != len(module.comments):
        raise RuntimeError(f"fmt lost or merged comments in {path}")
    try:
        before = without_spans(resolve(module))
    except DiagnosticError:
        return result
    if without_spans(resolve(again)) != before:
        raise RuntimeError(f"fmt changed the meaning of {path}")
    return result


def _cmd_fmt(args: argparse.Namespace, out: _Out) -> int:
    """Rewrite files in place (standard input: print the result); --check and --diff write
    nothing and exit 1 when some file would change."""
    from tilesafe.frontend.load import read_source

    status = OK
    changed = unchanged = 0
    for path, given in _inputs(args.files, out.stdin):
        try:
            text = read_source(path) if given is None else given
            result = _safe_format(path, text)
        except DiagnosticError as err:
            _render_diags(out, err.diagnostics)
            status = max(status, USAGE)
            continue
        if given is not None and not (args.check or args.diff):
            out.out.write(result)  # standard input: the formatted text is the output
            continue
        if result == text:
            unchanged += 1
            continue
        changed += 1
        if args.diff:
            out.out.writelines(difflib.unified_diff(
                text.splitlines(keepends=True), result.splitlines(keepends=True),
                fromfile=path, tofile=path))
        if args.check or args.diff:
            if args.check:
                out.line(f"would reformat {path}")
            status = max(status, FAILED)
        else:
            try:
                Path(path).write_text(result, encoding="utf-8")
            except OSError as err:
                out.error(f"cannot write {path}: {err.strerror or err}")
                status = max(status, USAGE)
                continue
            out.line(f"reformatted {path}")
    if changed or unchanged:
        verb = "would be reformatted" if (args.check or args.diff) else "reformatted"
        line = f"{changed} file{'s' if changed != 1 else ''} {verb}, {unchanged} unchanged"
        (out.err.write(line + "\n") if args.diff else out.line(line))
    return status


# ---- verify --------------------------------------------------------------------------------


def _only(text: str | None) -> tuple[str, ...] | None:
    """--only NAMES as a tuple of checker names (None: all); an empty or unknown name is a
    usage error."""
    from tilesafe import api

    if text is None:
        return None
    only = tuple(n.strip() for n in text.split(",") if n.strip())
    known = api.checker_names()
    if not only:
        raise _Usage(f"--only needs at least one checker name; known: {', '.join(known)}")
    unknown = [n for n in only if n not in known]
    if unknown:
        raise _Usage(f"unknown checker(s) {', '.join(unknown)}; known: "
                     f"{', '.join(known) or 'none registered yet'}")
    return only


def verify_entries(args: argparse.Namespace, out: _Out, recorder: Any = None
                   ) -> tuple[list[Any], list[Diagnostic], int]:
    """Every obligation of every kernel of the inputs, the diagnostics of the files that do
    not load, and how many files did: what `verify` and `report` share. A certificate
    `recorder` is told which kernel the searches that follow belong to. With `--jobs N`
    (and no recorder, which must see every search in this process) files are verified in N
    worker processes; results keep the order of the inputs either way. On a terminal, a
    progress line on standard error names each file as it finishes."""
    only = _only(args.only)
    options = _check_options(args)
    files = _inputs(args.files, out.stdin)
    jobs = getattr(args, "jobs", 1)
    if jobs < 1:
        raise _Usage(f"--jobs must be at least 1, got {jobs}")
    shown = _Progress(out.err, len(files))
    if getattr(args, "dask", None):  # the files as tasks of a Dask cluster
        if recorder is not None:
            raise _Usage("--dask does not combine with --certificates (the recording needs "
                         "every search in this process)")
        return _verify_dask(files, only, options, args.dask, jobs, shown,
                            getattr(args, "target", None))
    results: list[tuple[list[Any], list[Diagnostic], int]]
    if jobs > 1 and recorder is None and len(files) > 1:
        results = _verify_parallel(files, only, options, jobs, shown,
                                   getattr(args, "target", None))
    else:
        results = []
        for path, text in files:
            start = time.monotonic()
            results.append(verify_file(path, text, only, options, recorder,
                                       getattr(args, "target", None)))
            shown.done(path, time.monotonic() - start)
    shown.close()
    entries = [e for r in results for e in r[0]]
    diags = [d for r in results for d in r[1]]
    return entries, diags, sum(r[2] for r in results)


def verify_file(path: str, text: str | None, only: tuple[str, ...] | None, options: Any,
                recorder: Any = None, target: str | None = None
                ) -> tuple[list[Any], list[Diagnostic], int]:
    """One file: its entries, its diagnostics if it does not load, and 1 if it did."""
    from tilesafe import api
    from tilesafe.proofs import report

    try:
        program = api.checked_program(path, text, target)
    except DiagnosticError as err:
        return [], list(err.diagnostics), 0
    entries = []
    for kernel in program.kernels:
        if recorder is not None:
            recorder.kernel(path, kernel.name)
        for o in api.verify_kernel(kernel, options, only):
            entries.append(report.Entry(path, kernel.name, o))
    return entries, [], 1


# A worker's wall-clock limit per file: the checkers bound their own searches (--timeout and
# the other budgets), so this only catches a worker that never answers.
WORKER_LIMIT_S = 24 * 3600.0


def _verify_task(task: tuple, progress: Any) -> tuple[list[Any], list[Diagnostic], int]:
    return verify_file(*task)


def _verify_parallel(files: list[tuple[str, str | None]], only: tuple[str, ...] | None,
                     options: Any, jobs: int, shown: _Progress,
                     target: str | None = None
                     ) -> list[tuple[list[Any], list[Diagnostic], int]]:
    """Files in worker processes (tilesafe/mutation/pool.py: a worker that crashes is an
    internal error, as it would be in this process)."""
    from tilesafe.mutation.pool import run_tasks

    tasks = [(path, text, only, options, None, target) for path, text in files]
    results: list[Any] = [None] * len(tasks)
    for outcome in run_tasks(_verify_task, tasks, jobs, WORKER_LIMIT_S):
        if outcome.status != "ok":
            raise RuntimeError(f"verifying {files[outcome.index][0]} failed in a worker "
                               f"({outcome.status}): {outcome.error}")
        results[outcome.index] = outcome.value
        shown.done(files[outcome.index][0], outcome.seconds)
    return results


def _verify_dask(files: list[tuple[str, str | None]], only: tuple[str, ...] | None,
                 options: Any, address: str, jobs: int, shown: _Progress,
                 target: str | None = None) -> tuple[list[Any], list[Diagnostic], int]:
    """`verify_entries` with the files verified on a Dask cluster (mutation/dask_engine.py;
    "local": a LocalCluster of --jobs workers). Results in the inputs' order,
    the same as a local run's."""
    from tilesafe.mutation.dask_engine import DaskEngine

    tasks = [(path, text, only, options, None, target) for path, text in files]
    results: list[Any] = [None] * len(tasks)
    with DaskEngine(address, jobs) as engine:
        for outcome in engine.run_tasks(_verify_task, tasks, jobs, WORKER_LIMIT_S):
            if outcome.status != "ok":
                raise RuntimeError(f"verifying {files[outcome.index][0]} failed on a Dask "
                                   f"worker ({outcome.status}): {outcome.error}")
            results[outcome.index] = outcome.value
            shown.done(files[outcome.index][0], outcome.seconds)
    shown.close()
    return ([e for r in results for e in r[0]], [d for r in results for d in r[1]],
            sum(r[2] for r in results))


class _Progress:
    """`[k/n] path (seconds)` on one rewritten line of a terminal; silent when standard
    error is not one (a log or a pipe gets only the results)."""

    def __init__(self, err: TextIO, total: int) -> None:
        self.err, self.total, self.count = err, total, 0
        self.on = total > 1 and bool(getattr(err, "isatty", lambda: False)())

    def done(self, path: str, seconds: float) -> None:
        self.count += 1
        if self.on:
            self.err.write(f"\r\x1b[K[{self.count}/{self.total}] {path} ({seconds:.1f} s)")
            self.err.flush()

    def close(self) -> None:
        if self.on and self.count:
            self.err.write("\r\x1b[K")
            self.err.flush()


def _cmd_verify(args: argparse.Namespace, out: _Out) -> int:
    from tilesafe import api
    from tilesafe.proofs import report

    strict = args.warnings_as_errors
    certs = getattr(args, "certificates", None)
    if certs:
        from tilesafe.proofs.certificates import recording

        with recording() as recorder:
            entries, diags, loaded = verify_entries(args, out, recorder)
    else:
        entries, diags, loaded = verify_entries(args, out)
    if args.format == "json":
        out.json([report.diagnostic_record(d) for d in diags]
                 + report.obligation_records(entries))
    elif args.format == "sarif":
        out.json(report.sarif_log(entries, diags, version=__version__, strict=strict))
    else:
        _render_diags(out, diags)
        for line in report.text_lines(entries, verbose=args.verbose, strict=strict):
            out.line(line)
        if not api.checker_names():
            out.line("note: no checkers are registered yet; nothing was verified")
        summary = _verify_summary(entries, diags, loaded, strict)
        if summary:
            out.line(summary)
    if certs:
        from tilesafe.proofs.certificates import write_certificates

        try:
            written = write_certificates(certs, entries, recorder)
        except OSError as err:
            raise _Usage(f"cannot write certificates to {certs}: {err.strerror or err}"
                         ) from None
        out.err.write(f"tilesafe: wrote {written.files} certificate file(s) for "
                      f"{written.obligations} obligation(s) to {certs}\n")
    if _errors(diags):
        return USAGE
    return FAILED if any(report.failing(e.obligation, strict) for e in entries) else OK


def _verify_summary(entries: Sequence[Any], diags: Sequence[Diagnostic], loaded: int,
                    strict: bool) -> str | None:
    """The last line of `verify`: the obligations' summary, saying how many files were not
    verified; none when no file was (the diagnostics say why: '0 obligations' would read as
    if something had been checked)."""
    from tilesafe.proofs import report

    unread = len({d.span.path for d in _errors(diags)})
    if not loaded:
        return None
    line = report.summary_line(entries, strict=strict)
    if unread:
        line += (f"; {unread} file{'s' if unread != 1 else ''} not verified (see the "
                 "diagnostics above)")
    return line


def _check_options(args: argparse.Namespace) -> Any:
    """The verify budgets given on the command line (defaults: checkers/registry.py)."""
    from tilesafe.checkers.registry import CheckOptions

    given = {"max_seconds": args.timeout, "max_states": args.max_states,
             "max_memory_mb": args.max_memory, "timeout_ms": args.query_timeout}
    for flag, value in zip(("--timeout", "--max-states", "--max-memory", "--query-timeout"),
                           given.values(), strict=True):
        if value is not None and value <= 0:
            raise _Usage(f"{flag} must be positive, got {value:g}")
    return CheckOptions(**{k: v for k, v in given.items() if v is not None})


# ---- argument parsing ----------------------------------------------------------------------


FILES_HELP = ".tsk files; a directory is searched for *.tsk; - reads standard input"


def _add_files(p: argparse.ArgumentParser) -> None:
    p.add_argument("files", nargs="+", metavar="FILE", help=FILES_HELP)


def _add_format(p: argparse.ArgumentParser, choices: tuple[str, ...]) -> None:
    p.add_argument("--format", choices=choices, default="text",
                   help=f"output format: {', '.join(choices)} (default text)")


def _add_budgets(p: argparse.ArgumentParser) -> None:
    p.add_argument("--timeout", type=float, metavar="SECONDS",
                   help="time for the temporal searches of one kernel (default 300); "
                        "past it: unknown")
    p.add_argument("--max-states", type=int, metavar="N",
                   help="states for the temporal searches of one kernel, all together "
                        "(default 1000000); past it: unknown")
    p.add_argument("--max-memory", type=int, metavar="MB",
                   help="resident memory of the process while those searches run "
                        "(default 4096); past it: unknown")
    p.add_argument("--query-timeout", type=int, metavar="MS",
                   help="per solver/ISL query (default 10000); past it: unknown")


def _add_target(p: argparse.ArgumentParser) -> None:
    from tilesafe.frontend.target import TARGETS

    p.add_argument("--target", choices=tuple(TARGETS), default=None,
                   help="the GPU the kernel is for: sm_90a (NVIDIA Hopper, the default) or "
                        "gfx942 (AMD CDNA3, MI300; frontend/target.py)")


def _add_selection(p: argparse.ArgumentParser) -> None:
    from tilesafe.checkers.registry import CHECKERS

    p.add_argument("--only", metavar="CHECKERS",
                   help="comma-separated checker names, at least one (default: all): "
                        + ", ".join(CHECKERS))
    p.add_argument("--warnings-as-errors", action="store_true",
                   help="a warning (TS6xx bank conflicts, TS216, ...) fails the run: exit 1 "
                        "(without it warnings exit 0)")


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="tilesafe",
        description="Verify Hopper GPU kernels written in the tilesafe language (.tsk).",
        epilog="exit codes: 0 ok/proved (warnings included), 1 refuted or unknown (or a "
               "warning with --warnings-as-errors; fmt --check/--diff: a file would change), "
               "2 usage/parse/type error, 3 internal error",
    )
    p.add_argument("-V", "--version", action="version", version=f"tilesafe {__version__}",
                   help="print the version and exit")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", required=True,
                           help="what to do (tilesafe COMMAND --help for its options)")

    lint = sub.add_parser("lint", help="parse, type-check and realise layouts",
                          description="Parse, type-check and realise every shared layout.")
    _add_files(lint)
    _add_format(lint, ("text", "json"))
    _add_target(lint)

    run = sub.add_parser("run", help="interpret a kernel on random inputs",
                         description="Interpret a kernel on random inputs (or run it on "
                                     "the GPU).")
    run.add_argument("file", metavar="FILE", help="the .tsk file")
    run.add_argument("--size", metavar="M=..,N=..", default="",
                     help="values of the size parameters, e.g. M=128,N=192")
    run.add_argument("--kernel", metavar="NAME", help="kernel to run (if the file has several)")
    run.add_argument("--seed", type=int, default=0,
                     help="random seed for the inputs, and for a random or pct schedule "
                          "(default 0)")
    run.add_argument("--schedule", choices=("lockstep", "random", "pct"), default="lockstep",
                     help="how threads interleave: lockstep (one legal schedule, groups of "
                          "threads as numpy operations: fast), random (seeded uniform, thread "
                          "by thread) or pct (adversarial priorities); default lockstep")
    run.add_argument("--out", metavar="FILE.npz", help="save inputs and outputs here")
    run.add_argument("--inputs", choices=("random", *VALUE_INPUTS), default="random",
                     help="random (default), or the inputs `equiv` and the value checker "
                          "run on, to replay their launches: distinct (pairwise distinct "
                          "floats), integers (small integers), special / special-integers "
                          "(with inf, NaN, zeros, extremes), wide (integers whose sums "
                          "overflow f16), edges / edges-integers (a special value, picked "
                          "by the seed, at every corner of every input)")
    _add_format(run, ("text", "json"))
    _add_target(run)
    run.add_argument("--device", choices=("interp", "gpu"), default="interp",
                     help="where to run: the reference interpreter (default) or the GPU "
                          "(compiles through the verification gate first)")
    run.add_argument("--check", action="store_true",
                     help="with --device gpu: also interpret the same inputs and compare "
                          "every output bit for bit (exit 1 on a difference)")
    run.add_argument("--unverified", action="store_true",
                     help="with --device gpu: run even if verification does not prove it")
    run.add_argument("--timeout", type=float, default=60.0, metavar="SECONDS",
                     help="with --device gpu: report a hang after this long (default 60)")

    comp = sub.add_parser("compile", help="emit PTX (sm_90a) for a verified kernel",
                          description="Verify, then emit and validate PTX for sm_90a.")
    comp.add_argument("file", metavar="FILE", help="the .tsk file")
    comp.add_argument("--kernel", metavar="NAME", help="kernel to compile (if several)")
    comp.add_argument("-o", "--output", metavar="OUT.ptx",
                      help="write the PTX here (default: standard output)")
    comp.add_argument("--unverified", action="store_true",
                      help="emit even if some obligation is not proved (with a banner)")
    _add_format(comp, ("text", "json"))
    _add_target(comp)

    fmt = sub.add_parser("fmt", help="rewrite files in canonical style",
                         description="Rewrite files in the canonical style (comments kept; "
                                     "refuses to change meaning). Standard input (-) is "
                                     "printed formatted.")
    _add_files(fmt)
    fmt.add_argument("--check", action="store_true",
                     help="do not write; exit 1 if a file would change")
    fmt.add_argument("--diff", action="store_true",
                     help="do not write; print a unified diff and exit 1 if there is one")

    verify = sub.add_parser("verify", help="prove every obligation of every kernel",
                            description="Prove every obligation of every kernel. Prints "
                                        "what is not proved and a summary; -v prints the "
                                        "proofs too.")
    _add_files(verify)
    _add_format(verify, ("text", "json", "sarif"))
    verify.add_argument("-v", "--verbose", action="store_true",
                        help="also print every proved obligation (one line per temporal "
                             "exploration)")
    _add_selection(verify)
    _add_target(verify)
    verify.add_argument("--certificates", metavar="DIR",
                        help="write each obligation's evidence in checkable form to DIR "
                             "(SMT-LIB 2, ISL and linear integer arithmetic, state graphs); "
                             "re-check them with `tilesafe check-certificates DIR`")
    _add_budgets(verify)
    verify.add_argument("--jobs", "-j", type=int, default=1, metavar="N",
                        help="verify files in N worker processes (default 1; not with "
                             "--certificates, whose recording needs one process)")
    _add_dask(verify, "verify the files")

    check = sub.add_parser("check-certificates",
                           help="re-check certificates written by verify --certificates",
                           description="Re-check certificates with cvc5 and an independent "
                                       "mbarrier model (shares no code with the prover's "
                                       "encodings).")
    check.add_argument("directory", metavar="DIR", help="a directory written by "
                                                        "verify --certificates")
    _add_format(check, ("text", "json"))
    check.add_argument("-v", "--verbose", action="store_true",
                       help="print every certificate, not only those that fail")
    check.add_argument("--timeout", type=float, default=60.0, metavar="SECONDS",
                       help="per SMT query given to cvc5 (default 60)")

    rep = sub.add_parser("report", help="an HTML (or Markdown) proof report",
                         description="Verify, then write one self-contained HTML file (or "
                                     "Markdown for CI comments) with the source, the "
                                     "obligations, counterexamples and layouts drawn.")
    _add_files(rep)
    rep.add_argument("-o", "--output", metavar="FILE",
                     help="write the report here (default: standard output)")
    rep.add_argument("--format", choices=("html", "markdown"), default="html",
                     help="html (default) or markdown")
    _add_selection(rep)
    _add_budgets(rep)

    eq = sub.add_parser("equiv", help="prove two kernels compute the same outputs")
    eq.add_argument("a", metavar="A.tsk", help="the first kernel's file")
    eq.add_argument("b", metavar="B.tsk", help="the second kernel's file")
    eq.add_argument("--kernel", metavar="NAME", help="kernel of each file (if several)")
    eq.add_argument("--seed", type=int, default=0, help="seed of the inputs (default 0)")
    eq.add_argument("--format", choices=("text", "json"), default="text",
                    help="text (default) or json")

    from tilesafe.mutation.command import add_parser as add_mutate

    add_mutate(sub)
    _add_dask(sub.choices["mutate"], "classify the mutants")
    from tilesafe.moe.command import add_parser as add_compose

    add_compose(sub)
    return p


def _add_dask(p: argparse.ArgumentParser, what: str) -> None:
    p.add_argument("--dask", metavar="ADDRESS|local",
                   help=f"{what} on a Dask distributed cluster: the scheduler's address "
                        "(tcp://host:8786), or `local` for a LocalCluster of --jobs workers; "
                        "same results as a local run (needs the `distributed` extra; "
                        "docs/mutation.md)")


def _cmd_equiv(args: argparse.Namespace, out: _Out) -> int:
    from tilesafe import api
    from tilesafe.semantics.value import equiv

    kernels = []
    for path in (args.a, args.b):
        program = api.load(path)
        if args.kernel:
            found = [k for k in program.kernels if k.name == args.kernel]
            if not found:
                raise _Usage(f"{path} has no kernel '{args.kernel}'")
            kernels.append(found[0])
        elif len(program.kernels) != 1:
            raise _Usage(f"{path} has {len(program.kernels)} kernels: name one with --kernel")
        else:
            kernels.append(program.kernels[0])
    res = equiv.check(kernels[0], kernels[1], seed=args.seed)
    d = res.difference
    replay = [] if d is None else [
        _replay_command(path, d.sizes, d.seed, args.kernel, f"equiv_{side}.npz", d.inputs)
        for path, side in ((args.a, "a"), (args.b, "b"))]
    if args.format == "json":
        out.json({"kind": "equiv", "a": args.a, "b": args.b, "verdict": res.verdict,
                  "reason": res.reason, "launches_agreed": list(res.launches),
                  "tensors": res.tensors,
                  "difference": None if d is None else {
                      "sizes": d.sizes, "seed": d.seed, "tensor": d.tensor,
                      "element": list(d.element), "a": d.a, "b": d.b,
                      "mismatches": d.mismatches, "inputs": d.inputs, "replay": replay}})
    else:
        out.line(f"{args.a} vs {args.b}: {res.verdict} — {res.reason}")
        if d is not None:
            out.line("    replay on the interpreter, then compare "
                     f"{d.tensor}[{', '.join(map(str, d.element))}]:")
            for command in replay:
                out.line(f"      {command}")
        elif res.launches:
            out.line(f"    the interpreter agrees on {len(res.launches)} launch(es)")
    return OK if res.verdict == "proved" else FAILED


def _replay_command(path: str, sizes: dict[str, int], seed: int, kernel: str | None,
                    npz: str, inputs: str = "distinct") -> str:
    """The `tilesafe run` command that interprets `path` on the inputs `equiv` used (of
    kind `inputs`, from `seed`): the two of a refutation differ at its element."""
    import shlex

    words = ["tilesafe", "run", path, "--size", ",".join(f"{k}={v}" for k, v in sizes.items()),
             "--seed", str(seed), "--inputs", inputs, "--out", npz]
    if kernel:
        words += ["--kernel", kernel]
    return shlex.join(words)


def _cmd_mutate(args: argparse.Namespace, out: _Out) -> int:
    from tilesafe.mutation.command import run

    return run(args, out)


def _cmd_compose(args: argparse.Namespace, out: _Out) -> int:
    from tilesafe.moe.command import run

    return run(args, out)


def _cmd_check_certificates(args: argparse.Namespace, out: _Out) -> int:
    from tilesafe.certcheck import check_directory

    if not Path(args.directory).is_dir():
        raise _Usage(f"{args.directory} is not a directory")
    if args.timeout <= 0:
        raise _Usage(f"--timeout must be positive, got {args.timeout:g}")
    try:
        results = check_directory(args.directory, timeout_s=args.timeout)
    except (OSError, ValueError) as err:
        raise _Usage(f"cannot read certificates in {args.directory}: {err}") from None
    if not results:
        raise _Usage(f"no certificates in {args.directory}")
    bad = [r for r in results if not r.ok]
    if args.format == "json":
        out.json([{"kind": "certificate", **r.record()} for r in results])
    else:
        for r in results:
            if args.verbose or not r.ok:
                out.line(r.line())
        out.line(f"{len(results)} certificate(s) checked: {len(results) - len(bad)} ok, "
                 f"{len(bad)} failed")
    return FAILED if bad else OK


def _cmd_report(args: argparse.Namespace, out: _Out) -> int:
    from tilesafe.report import build_report

    args.verbose = True
    entries, diags, loaded = verify_entries(args, out)
    if diags:  # on the terminal too: the report itself may go to a file or a pipe
        for d in sorted(diags, key=lambda d: (d.span.path, d.span.line, d.span.col)):
            out.err.write(render(d, _source(d.span.path)) + "\n")
        if not loaded:
            out.error("report: no file could be verified; no report written")
            return USAGE
    stdin = {STDIN: _SOURCES[STDIN]} if _SOURCES.get(STDIN) is not None else None
    text = build_report(entries, diags, args.format, version=__version__, sources=stdin)
    if args.output:
        try:
            Path(args.output).write_text(text, encoding="utf-8")
        except OSError as err:
            raise _Usage(f"cannot write {args.output}: {err.strerror or err}") from None
        out.err.write(f"tilesafe: wrote {args.output}\n")
    else:
        out.out.write(text)
    if _errors(diags):
        return USAGE
    strict = args.warnings_as_errors
    from tilesafe.proofs.report import failing

    return FAILED if any(failing(e.obligation, strict) for e in entries) else OK


_COMMANDS = {"lint": _cmd_lint, "run": _cmd_run, "fmt": _cmd_fmt, "verify": _cmd_verify,
             "compile": _cmd_compile, "mutate": _cmd_mutate, "equiv": _cmd_equiv,
             "check-certificates": _cmd_check_certificates, "report": _cmd_report,
             "compose": _cmd_compose}


def main(argv: Sequence[str] | None = None, stdout: TextIO | None = None,
         stderr: TextIO | None = None, stdin: TextIO | None = None) -> int:
    """Run the CLI; returns the exit code (never raises, never shows a traceback unless
    TILESAFE_DEBUG=1)."""
    out = _Out(stdout or sys.stdout, stderr or sys.stderr, stdin or sys.stdin)
    try:
        try:
            args = _parser().parse_args(argv)
        except SystemExit as stop:  # argparse already printed usage or --help
            return stop.code if isinstance(stop.code, int) else USAGE
        try:
            return _COMMANDS[args.command](args, out)
        except DiagnosticError as err:
            if getattr(args, "format", "text") == "json":
                from tilesafe.proofs.report import diagnostic_record

                out.json([diagnostic_record(d) for d in err.diagnostics])
            elif getattr(args, "format", "text") == "sarif":
                from tilesafe.proofs.report import sarif_log

                out.json(sarif_log((), err.diagnostics, version=__version__))
            else:
                _render_diags(out, err.diagnostics)
            return USAGE
        except (_Usage, ValueError) as err:
            from tilesafe.api import UsageError

            if isinstance(err, (_Usage, UsageError)):
                out.error(f"{args.command}: {err}")
                return USAGE
            raise
    except KeyboardInterrupt:
        out.error("interrupted")
        return 130
    except BrokenPipeError:
        return OK
    except Exception as err:  # noqa: BLE001 - the one place that turns bugs into exit 3
        if os.environ.get("TILESAFE_DEBUG"):
            traceback.print_exc(file=out.err)
        out.error(f"internal error: {type(err).__name__}: {err}")
        out.err.write("tilesafe: this is a bug in tilesafe; set TILESAFE_DEBUG=1 for the "
                      "traceback\n")
        return INTERNAL
    finally:
        _SOURCES.clear()


if __name__ == "__main__":
    sys.exit(main())
