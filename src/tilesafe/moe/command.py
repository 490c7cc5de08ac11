"""`tilesafe compose`: an executor's `requires` clauses proved of the inspector's output
(tilesafe/moe/compose.py); cli.py only registers it.

Exit codes follow the CLI's: 0 every clause about the inspector's arrays proved (clauses
on the router's ids are inputs, checked at launch); 1 a clause refuted (TS920, with the
routing that shows it) or not proved (TS921); 2 a usage error, a file that does not parse,
or an executor that cannot take the arrays as bound (TS922).
"""

from __future__ import annotations

import argparse
from typing import Any

OK, FAILED = 0, 1
REFUTED, UNKNOWN, BINDING = "TS920", "TS921", "TS922"


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "compose", help="prove an MoE executor's requires clauses of the inspector's output",
        description="Bind an executor's index tensors to the arrays of tilesafe.moe.align "
        "(the router's ids, the sorted ids, the block -> expert table) and prove each of its "
        "`requires` clauses for every routing and size (docs/moe.md).")
    p.add_argument("file", metavar="FILE", help="the executor's .tsk file")
    p.add_argument("--kernel", metavar="NAME", help="the kernel (if the file has several)")
    p.add_argument("--bind", metavar="T=FIELD,...",
                   help="executor tensor = inspector array (topk_ids, sorted_ids, "
                        "expert_ids, total: a one-element tensor holding the rows in use); "
                        "default: the tensors named topk/topk_ids, sids/sorted_ids/"
                        "sorted_token_ids, be/expert_ids, ntp/num_tokens_post_padded")
    p.add_argument("--experts", default="E", metavar="SIZE",
                   help="the executor's size that is the number of experts (default E)")
    p.add_argument("--block", type=int, default=64, metavar="B",
                   help="the inspector's block of rows (default 64)")
    p.add_argument("--cut", choices=("used", "allocated"), default="used",
                   help="the arrays the launch passes: Routing.used() (default) or the "
                        "whole allocation (blocks past the routing have expert -1)")
    p.add_argument("--format", choices=("text", "json"), default="text",
                   help="text (default) or json")


def run(args: argparse.Namespace, out: Any) -> int:
    from tilesafe import api
    from tilesafe.frontend.diagnostics import Diagnostic, DiagnosticError
    from tilesafe.moe.compose import Binding, BindingError, compose

    program = api.load(args.file)
    kernels = [k for k in program.kernels if args.kernel in (None, k.name)]
    if len(kernels) != 1:
        raise api.UsageError(f"{args.file}: name one kernel with --kernel (found "
                             f"{', '.join(k.name for k in program.kernels) or 'none'})")
    kernel = kernels[0]
    binding = Binding.default(kernel, args.block, args.cut)
    if args.bind:
        pairs = [b.split("=", 1) for b in args.bind.split(",")]
        if any(len(p) != 2 for p in pairs):
            raise api.UsageError(f"--bind takes TENSOR=FIELD pairs, not {args.bind!r}")
        binding = Binding({t.strip(): f.strip() for t, f in pairs}, args.experts,
                          args.block, args.cut)
    elif args.experts != "E":
        binding = Binding(binding.tensors, args.experts, args.block, args.cut)
    try:
        result = compose(kernel, binding)
    except BindingError as err:
        raise DiagnosticError([Diagnostic(BINDING, str(err), err.span or kernel.span)]
                              ) from None
    if args.format == "json":
        out.json({"kind": "compose", "file": args.file, "kernel": kernel.name,
                  "binding": dict(binding.tensors), "experts": binding.experts,
                  "block": binding.block, "cut": binding.cut, "proved": result.proved,
                  "lemmas": [{"name": r.name, "proved": r.proved, "detail": r.detail}
                             for r in result.lemmas],
                  "clauses": [{"index": c.index, "text": c.text, "line": c.line,
                               "status": c.status, "detail": c.detail,
                               "routing": c.routing, "sizes": c.sizes}
                              for c in result.clauses]})
        return OK if result.proved else FAILED
    lemmas = sum(r.proved for r in result.lemmas)
    bound = ", ".join(f"{t} = {f}" for t, f in binding.tensors.items())
    out.line(f"{args.file}: {kernel.name} on tilesafe.moe.align's {binding.cut} arrays "
             f"(blocks of {binding.block}; {bound}): {lemmas} of {len(result.lemmas)} lemmas "
             f"about the inspector proved")
    for c in result.clauses:
        span = kernel.requires[c.index].span
        where = f"{span.path}:{span.line}:{span.col}"
        if c.status == "refuted":
            out.line(f"{where}: {REFUTED} error: requires `{c.text}` does not hold of the "
                     f"inspector's output: {c.detail}")
            out.line(f"    routing: topk_ids = {c.routing} at "
                     f"{', '.join(f'{k}={v}' for k, v in c.sizes.items())}")
        elif c.status == "unknown":
            out.line(f"{where}: {UNKNOWN} error: requires `{c.text}` is not proved of the "
                     f"inspector's output ({c.detail}); a launch still checks it")
        else:
            what = ("proved for every routing and size: a launch on the inspector's output "
                    "need not check it") if c.status == "proved" else (
                "an input (the router's ids): checked at launch")
            out.line(f"{where}: requires `{c.text}` -- {what}")
    return OK if result.proved else FAILED
