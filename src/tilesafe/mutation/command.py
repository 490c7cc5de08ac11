"""`tilesafe mutate`: the command-line face of a campaign (cli.py only registers it).

Exit codes follow the CLI's: 0 the campaign ran and found no soundness hole; 1 some mutant
verified clean yet fails or races on the interpreter, or tilesafe failed on a mutant; 2 a
usage error (bad shard, unknown operator, unreadable or unparsable file, results that are
not shards of one campaign).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from tilesafe.api import UsageError

OK, FAILED = 0, 1


def add_parser(sub: Any) -> None:
    p = sub.add_parser("mutate", help="measure the checkers with single-edit mutants",
                       description="Plant one bug at a time in kernels that verify; report "
                       "which mutants verification kills, which it misses (checked on the "
                       "reference interpreter) and which are likely equivalent.")
    p.add_argument("files", nargs="+", metavar="FILE",
                   help=".tsk kernels (with --merge: result files of shards, JSON)")
    p.add_argument("--operators", metavar="OPS",
                   help="comma-separated operator families or names (default: all), e.g. "
                        "delete,parity,int.box")
    p.add_argument("--jobs", type=int, default=1, metavar="N",
                   help="worker processes (default 1)")
    p.add_argument("--shard", default="0/1", metavar="I/N",
                   help="run the I-th of N deterministic parts of the campaign")
    p.add_argument("--seed", type=int, default=0, help="seed of the sample (default 0)")
    p.add_argument("--sample", type=int, metavar="K",
                   help="a stratified sample of K mutants (by operator) instead of all")
    p.add_argument("--format", choices=("text", "json", "html"), default="text",
                   help="output format (default text)")
    p.add_argument("--out", metavar="FILE", help="write the report here (default: stdout)")
    p.add_argument("--list", action="store_true",
                   help="only list the mutants (id, operator, edit); classify nothing")
    p.add_argument("--merge", action="store_true",
                   help="combine the JSON results of the shards of one campaign")
    p.add_argument("--timeout", type=float, default=300.0, metavar="SECONDS",
                   help="wall-clock limit per mutant, verification and runs (default 300)")
    p.add_argument("--max-states", type=int, default=200_000, metavar="N",
                   help="explicit-state budget of the temporal checkers (default 200000)")
    p.add_argument("--query-timeout", type=int, default=10_000, metavar="MS",
                   help="per solver / ISL query (default 10000)")
    p.add_argument("--sizes", type=int, default=3, metavar="K",
                   help="sizes a survivor is run at (default 3)")
    p.add_argument("--seeds", type=int, default=3, metavar="K",
                   help="schedules per size: the random scheduler's seed 0, then adversarial "
                        "PCT seeds (default 3)")
    p.add_argument("--quiet", action="store_true", help="no progress lines on stderr")


def _positive(name: str, value: float) -> None:
    if value <= 0:
        raise UsageError(f"{name} must be positive, got {value:g}")


def _selectors(text: str | None) -> tuple[str, ...] | None:
    from tilesafe.mutation.operators import FAMILIES, unknown_selectors

    if not text:
        return None
    sel = tuple(s.strip() for s in text.split(",") if s.strip())
    bad = unknown_selectors(sel)
    if bad:
        raise UsageError(f"unknown operator(s) {', '.join(bad)}; families: "
                         f"{', '.join(FAMILIES)} (a family may be narrowed: int.box, "
                         "delete.wait)")
    return sel


def _load_result(path: str) -> Any:
    from tilesafe.mutation.campaign import Result

    try:
        doc = json.loads(Path(path).read_text(encoding="utf-8"))
        return Result.from_json(doc)
    except (OSError, UnicodeDecodeError) as err:
        raise UsageError(f"cannot read {path}: {err}") from None
    except (ValueError, KeyError, TypeError) as err:
        raise UsageError(f"{path} is not a tilesafe mutate JSON result ({err})") from None


def _emit(args: argparse.Namespace, out: Any, text: str) -> None:
    if args.out:
        try:
            Path(args.out).write_text(text, encoding="utf-8")
        except OSError as err:
            raise UsageError(f"cannot write {args.out}: {err.strerror or err}") from None
    else:
        out.out.write(text)


def run(args: argparse.Namespace, out: Any) -> int:
    from tilesafe.mutation import campaign, report
    from tilesafe.mutation.worker import Settings

    def log(line: str) -> None:
        if not args.quiet:
            out.err.write(line + "\n")
            out.err.flush()

    if args.merge:
        result = campaign.merge([_load_result(f) for f in args.files])
        _emit(args, out, report.render(result, args.format))
        return _status(result)
    for name in ("jobs", "timeout", "sizes", "seeds", "max_states", "query_timeout"):
        _positive("--" + name.replace("_", "-"), getattr(args, name))
    if args.sample is not None:
        _positive("--sample", args.sample)
    shard = campaign.parse_shard(args.shard)
    selectors = _selectors(args.operators)
    plan = campaign.make_plan(args.files, selectors, args.seed, args.sample, shard,
                              args.jobs, log)
    if args.list:
        lines = [f"{m.id}  {m.operator}  {m.edit}" for m in plan.chosen]
        if args.format == "json":
            recs = [{k: v for k, v in campaign._mutant_record(m).items()} for m in plan.chosen]
            _emit(args, out, json.dumps({"kind": "mutant-list", "campaign": plan.header(),
                                         "mutants": recs},
                                        indent=1) + "\n")
        else:
            _emit(args, out, "\n".join(lines) + ("\n" if lines else "")
                  + f"{len(plan.chosen)} mutants (population {plan.population})\n")
        return OK
    settings = Settings(timeout_s=args.timeout, query_timeout_ms=args.query_timeout,
                        max_states=args.max_states, sizes=args.sizes, seeds=args.seeds)
    if getattr(args, "dask", None):  # a Dask cluster runs the tasks (mutation/dask_engine.py)
        from tilesafe.mutation.dask_engine import DaskEngine

        with DaskEngine(args.dask, args.jobs) as engine:
            log(f"classifying {len(plan.chosen)} mutants on Dask ({args.dask}, "
                f"{engine.workers()} workers)")
            result = campaign.run_plan(plan, settings, args.jobs, log, engine)
    else:
        log(f"classifying {len(plan.chosen)} mutants with {args.jobs} job(s)")
        result = campaign.run_plan(plan, settings, args.jobs, log)
    _emit(args, out, report.render(result, args.format))
    return _status(result)


def _status(result: Any) -> int:
    from tilesafe.mutation.campaign import soundness_holes

    bad = soundness_holes(result.records) or [r for r in result.records
                                               if r["verdict"] == "error"]
    return FAILED if bad else OK


if __name__ == "__main__":  # pragma: no cover - `tilesafe mutate` is the entry point
    from tilesafe.cli import main

    sys.exit(main(["mutate", *sys.argv[1:]]))
