"""`tilesafe` command line: lint, run, fmt, verify. The only module that prints.

Exit codes (DESIGN.md): 0 ok / everything proved; 1 a property refuted or unknown (or, for
`run`, the kernel failed at run time; for `fmt --check`, a file would change); 2 a usage,
parse or type error; 3 an internal error (a bug in tilesafe: never a traceback for the
user, unless TILESAFE_DEBUG=1 asks for one).
"""

from __future__ import annotations

import argparse
import difflib
import json
import os
import sys
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

from tilesafe import __version__
from tilesafe.frontend.diagnostics import Diagnostic, DiagnosticError, render
from tilesafe.frontend.span import Span

OK, FAILED, USAGE, INTERNAL = 0, 1, 2, 3


class _Usage(Exception):
    """A usage error found after argument parsing (exit 2)."""


# ---- output helpers ------------------------------------------------------------------------


class _Out:
    def __init__(self, out: TextIO, err: TextIO):
        self.out, self.err = out, err

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


# ---- lint ----------------------------------------------------------------------------------


def _cmd_lint(args: argparse.Namespace, out: _Out) -> int:
    from tilesafe import api

    all_diags: list[Diagnostic] = []
    for path in args.files:
        all_diags.extend(api.lint(path))
    if args.format == "json":
        out.json([d.to_record() for d in all_diags])
    else:
        _render_diags(out, all_diags)
        n_err = len(_errors(all_diags))
        n_files = len(args.files)
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
            return _run_gpu(args, out, sizes)
        rec = api.run_detailed(args.file, sizes, seed=args.seed, kernel=args.kernel)
    except api.Unavailable as err:
        out.error(f"run: {err}")
        return USAGE
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
            out.json({"path": args.file, "kernel": args.kernel, "sizes": sizes,
                      "seed": args.seed, "ok": False,
                      "error": {**diag.to_record(), "detail": json_safe(detail)}})
        else:
            out.line(render(diag, _source(args.file)))
            for key, value in detail.items():
                out.line(f"     {key}: {value}")
        return status
    interp = api._interp_module()
    summary = interp.summarize(rec.result)
    saved = None
    if args.out:
        saved = _save_npz(args.out, rec.inputs, _result_arrays(rec.result))
    if args.format == "json":
        out.json({"path": args.file, "kernel": rec.kernel.name, "sizes": dict(rec.sizes),
                  "seed": rec.seed, "ok": True, "summary": json_safe(summary),
                  "saved": saved})
    else:
        given = ", ".join(f"{k}={v}" for k, v in rec.sizes.items()) or "no sizes"
        out.line(f"{args.file}: kernel {rec.kernel.name} ({given}, seed {rec.seed})")
        for line in _summary_text(summary):
            out.line(f"  {line}")
        if saved:
            out.line(f"saved inputs and outputs to {saved}")
    return OK


def _is_interp_error(err: Exception) -> bool:
    try:
        from tilesafe.semantics.interp_error import InterpError
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
        out.json({"path": args.file, "kernel": rec.kernel.name, "sizes": dict(rec.sizes),
                  "seed": rec.seed, "device": "gpu", "status": gpu.status, "error": gpu.error,
                  "checked": args.check, "bit_exact": rec.bit_exact if args.check else None,
                  "mismatches": [m.describe() for m in rec.mismatches]})
    else:
        out.line(f"{args.file}: kernel {rec.kernel.name} on the GPU ({given}, seed "
                 f"{rec.seed}): {verdict}")
        if gpu.status == "ok":
            from tilesafe.semantics.interp_io import summarize_tensor

            for name, arr in gpu.tensors.items():
                info = summarize_tensor(arr, rec.kernel.tensor(name).dtype)
                out.line(f"  {_summary_text({name: info})[0]}")
    ok = gpu.status == "ok" and (not args.check or rec.bit_exact)
    return OK if ok else FAILED


# ---- compile -------------------------------------------------------------------------------


def _cmd_compile(args: argparse.Namespace, out: _Out) -> int:
    from tilesafe import api
    from tilesafe.proofs import report

    res = api.compile(args.file, args.kernel, unverified=args.unverified)
    if res.refused:
        entries = [report.Entry(args.file, res.kernel.name, o) for o in res.failing]
        if args.format == "json":
            out.json({"path": args.file, "kernel": res.kernel.name, "compiled": False,
                      "failing": [report.obligation_record(e) for e in entries]})
        else:
            for e in entries:
                for line in report.obligation_lines(e):
                    out.line(line)
            out.line(f"{args.file}: kernel {res.kernel.name} not compiled: "
                     f"{len(res.failing)} obligation(s) not proved (--unverified emits "
                     "anyway)")
        return FAILED
    ptx = res.compiled.ptx
    if args.output:
        try:
            Path(args.output).write_text(ptx, encoding="utf-8")
        except OSError as err:
            raise _Usage(f"cannot write {args.output}: {err.strerror or err}") from None
    failed_validation = [o for o in res.validation if o.failed]
    if args.format == "json":
        out.json({"path": args.file, "kernel": res.kernel.name, "compiled": True,
                  "unverified": bool(res.failing), "output": args.output,
                  "ptx": None if args.output else ptx,
                  "smem_bytes": res.compiled.smem_bytes, "block": res.compiled.block,
                  "validation": [report.obligation_record(report.Entry(
                      args.file, res.kernel.name, o)) for o in res.validation]})
    else:
        if not args.output:
            out.out.write(ptx)
        else:
            note = " (UNVERIFIED)" if res.failing else ""
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
    from tilesafe.frontend.load import read_source

    status = OK
    changed = unchanged = 0
    for path in args.files:
        try:
            text = read_source(path)
            result = _safe_format(path, text)
        except DiagnosticError as err:
            _render_diags(out, err.diagnostics)
            status = max(status, USAGE)
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
    verb = "would be reformatted" if (args.check or args.diff) else "reformatted"
    out.line(f"{changed} file{'s' if changed != 1 else ''} {verb}, {unchanged} unchanged")
    return status


# ---- verify --------------------------------------------------------------------------------


def _cmd_verify(args: argparse.Namespace, out: _Out) -> int:
    from tilesafe import api
    from tilesafe.proofs import report

    only = None
    if args.only:
        only = tuple(n.strip() for n in args.only.split(",") if n.strip())
        known = api.checker_names()
        unknown = [n for n in only if n not in known]
        if unknown:
            raise _Usage(f"unknown checker(s) {', '.join(unknown)}; known: "
                         f"{', '.join(known) or 'none registered yet'}")
    entries: list[report.Entry] = []
    diags: list[Diagnostic] = []
    for path in args.files:
        try:
            program = api.checked_program(path)
        except DiagnosticError as err:
            diags.extend(err.diagnostics)
            continue
        for kernel in program.kernels:
            for o in api.verify_kernel(kernel, _check_options(args), only):
                entries.append(report.Entry(path, kernel.name, o))
    if args.format == "json":
        out.json([report.diagnostic_record(d) for d in diags]
                 + [report.obligation_record(e) for e in entries])
    elif args.format == "sarif":
        out.json(report.sarif_log(entries, diags, version=__version__))
    else:
        _render_diags(out, diags)
        for e in entries:
            for line in report.obligation_lines(e):
                out.line(line)
        if not api.checker_names():
            out.line("note: no checkers are registered yet; nothing was verified")
        out.line(report.summary_line(entries))
    if _errors(diags):
        return USAGE
    return FAILED if any(e.obligation.failed for e in entries) else OK


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


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="tilesafe",
        description="Verify Hopper GPU kernels written in the tilesafe language (.tsk).",
        epilog="exit codes: 0 ok/proved, 1 refuted or unknown, 2 usage/parse/type error, "
               "3 internal error",
    )
    p.add_argument("--version", action="version", version=f"tilesafe {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", required=True)

    lint = sub.add_parser("lint", help="parse, type-check and realise layouts")
    lint.add_argument("files", nargs="+", metavar="FILE")
    lint.add_argument("--format", choices=("text", "json"), default="text")

    run = sub.add_parser("run", help="interpret a kernel on random inputs")
    run.add_argument("file", metavar="FILE")
    run.add_argument("--size", metavar="M=..,N=..", default="",
                     help="values of the size parameters, e.g. M=128,N=192")
    run.add_argument("--kernel", metavar="NAME", help="kernel to run (if the file has several)")
    run.add_argument("--seed", type=int, default=0, help="random seed for inputs (default 0)")
    run.add_argument("--out", metavar="FILE.npz", help="save inputs and outputs here")
    run.add_argument("--format", choices=("text", "json"), default="text")
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

    comp = sub.add_parser("compile", help="emit PTX (sm_90a) for a verified kernel")
    comp.add_argument("file", metavar="FILE")
    comp.add_argument("--kernel", metavar="NAME", help="kernel to compile (if several)")
    comp.add_argument("-o", "--output", metavar="OUT.ptx",
                      help="write the PTX here (default: standard output)")
    comp.add_argument("--unverified", action="store_true",
                      help="emit even if some obligation is not proved (with a banner)")
    comp.add_argument("--format", choices=("text", "json"), default="text")

    fmt = sub.add_parser("fmt", help="rewrite files in canonical style")
    fmt.add_argument("files", nargs="+", metavar="FILE")
    fmt.add_argument("--check", action="store_true",
                     help="do not write; exit 1 if a file would change")
    fmt.add_argument("--diff", action="store_true", help="do not write; print a unified diff")

    verify = sub.add_parser("verify", help="prove every obligation of every kernel")
    verify.add_argument("files", nargs="+", metavar="FILE")
    verify.add_argument("--format", choices=("text", "json", "sarif"), default="text")
    verify.add_argument("--only", metavar="CHECKERS",
                        help="comma-separated checker names (default: all)")
    verify.add_argument("--timeout", type=float, metavar="SECONDS",
                        help="time for the temporal searches of one kernel (default 300); "
                             "past it: unknown")
    verify.add_argument("--max-states", type=int, metavar="N",
                        help="states for the temporal searches of one kernel, all together "
                             "(default 1000000); past it: unknown")
    verify.add_argument("--max-memory", type=int, metavar="MB",
                        help="resident memory of the process while those searches run "
                             "(default 4096); past it: unknown")
    verify.add_argument("--query-timeout", type=int, metavar="MS",
                        help="per solver/ISL query (default 10000); past it: unknown")

    eq = sub.add_parser("equiv", help="prove two kernels compute the same outputs")
    eq.add_argument("a", metavar="A.tsk")
    eq.add_argument("b", metavar="B.tsk")
    eq.add_argument("--kernel", metavar="NAME", help="kernel of each file (if several)")
    eq.add_argument("--seed", type=int, default=0, help="seed of the inputs (default 0)")
    eq.add_argument("--format", choices=("text", "json"), default="text")

    from tilesafe.mutation.command import add_parser as add_mutate

    add_mutate(sub)
    return p


def _cmd_equiv(args: argparse.Namespace, out: _Out) -> int:
    from tilesafe import api
    from tilesafe.semantics import equiv

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
    if args.format == "json":
        d = res.difference
        out.json({"a": args.a, "b": args.b, "verdict": res.verdict, "reason": res.reason,
                  "launches_agreed": list(res.launches), "tensors": res.tensors,
                  "difference": None if d is None else {
                      "sizes": d.sizes, "seed": d.seed, "tensor": d.tensor,
                      "element": list(d.element), "a": d.a, "b": d.b,
                      "mismatches": d.mismatches}})
    else:
        out.line(f"{args.a} vs {args.b}: {res.verdict} — {res.reason}")
        if res.difference is not None:
            out.line("    distinguishing input: `tilesafe run` both with --size "
                     + ",".join(f"{k}={v}" for k, v in res.difference.sizes.items())
                     + f" on distinct-valued inputs, seed {res.difference.seed}")
        elif res.launches:
            out.line(f"    the interpreter agrees on {len(res.launches)} launch(es)")
    return OK if res.verdict == "proved" else FAILED


def _cmd_mutate(args: argparse.Namespace, out: _Out) -> int:
    from tilesafe.mutation.command import run

    return run(args, out)


_COMMANDS = {"lint": _cmd_lint, "run": _cmd_run, "fmt": _cmd_fmt, "verify": _cmd_verify,
             "compile": _cmd_compile, "mutate": _cmd_mutate, "equiv": _cmd_equiv}


def main(argv: Sequence[str] | None = None, stdout: TextIO | None = None,
         stderr: TextIO | None = None) -> int:
    """Run the CLI; returns the exit code (never raises, never shows a traceback unless
    TILESAFE_DEBUG=1)."""
    out = _Out(stdout or sys.stdout, stderr or sys.stderr)
    try:
        try:
            args = _parser().parse_args(argv)
        except SystemExit as stop:  # argparse already printed usage or --help
            return stop.code if isinstance(stop.code, int) else USAGE
        try:
            return _COMMANDS[args.command](args, out)
        except DiagnosticError as err:
            if getattr(args, "format", "text") == "json":
                out.json([d.to_record() for d in err.diagnostics])
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
