"""A mutation campaign: mutants of some files, sampled and sharded deterministically,
classified in bounded worker processes, scored.

Why deterministic everywhere: a campaign is a measurement that others re-run (another
shard, another machine, after a checker changed). The population is fixed by the files and
operators; the sample by `seed`; a shard by its index; so `merge` of the shards of one
campaign is exactly the unsharded campaign.

Scores:
  score     killed / (killed + missed)           over everything the runs could decide
  in-scope  killed / (killed + missed runtime + race + unwritten)
            -- mutants whose difference is a property tilesafe claims (bounds, coverage,
            races, the barrier protocol, TMA rules): refuted, or failing / racing / leaving
            output elements unwritten in the interpreter
  value     missed mutants that deterministically compute something else: the value
            checker's job (checkers/value.py), which refutes them when the kernel carries
            `ensures` clauses (every corpus/good kernel does)
Unknown and error mutants are neither killed nor missed, and are reported on their own.
"""

from __future__ import annotations

import dataclasses
import random
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tilesafe.api import UsageError
from tilesafe.mutation.generate import Generated, Mutant, generate
from tilesafe.mutation.worker import Settings

VERDICTS = ("killed", "missed", "equivalent", "unknown", "error")
IN_SCOPE_KINDS = ("runtime", "race", "unwritten")


class CampaignError(UsageError):
    """A campaign that cannot run as asked (bad shard, unknown operator, shards that do not
    belong together, an original that does not verify)."""


@dataclass(frozen=True)
class Plan:
    """What a campaign (or one shard of it) will classify."""

    files: tuple[str, ...]
    selectors: tuple[str, ...] | None
    seed: int
    sample: int | None
    shard: tuple[int, int]
    population: int
    generated: dict[str, Generated]
    chosen: tuple[Mutant, ...]  # this shard's mutants, in run order

    def header(self) -> dict[str, Any]:
        return {"files": list(self.files), "operators": list(self.selectors or ()),
                "seed": self.seed, "sample": self.sample, "shard": list(self.shard),
                "population": self.population}


def parse_shard(text: str) -> tuple[int, int]:
    """`I/N` with 0 <= I < N."""
    try:
        i_text, n_text = text.split("/")
        i, n = int(i_text), int(n_text)
    except ValueError:
        raise CampaignError(f"bad shard {text!r}: expected I/N, e.g. 0/4") from None
    if n < 1 or not 0 <= i < n:
        raise CampaignError(f"bad shard {text!r}: need 0 <= I < N")
    return i, n


def stem_names(files: Sequence[str]) -> dict[str, str]:
    """The id prefix of each file: its stem, or parent/stem where two files share a stem."""
    stems = [Path(f).stem for f in files]
    out = {}
    for f, s in zip(files, stems, strict=True):
        out[f] = s if stems.count(s) == 1 else f"{Path(f).parent.name}/{s}"
    return out


def stratified_sample(mutants: Sequence[Mutant], k: int, seed: int) -> list[Mutant]:
    """k mutants, stratified by operator: every operator first gets a floor of two (one, or
    none for the smallest, when there are more operators than room), the rest of the sample
    is apportioned to the operators in proportion to what each has left (largest
    remainder); within an operator, a seeded shuffle of its ids decides. The same
    population, k and seed always give the same sample."""
    if k >= len(mutants):
        return list(mutants)
    strata: dict[str, list[Mutant]] = {}
    for m in sorted(mutants, key=lambda m: m.id):
        strata.setdefault(m.operator, []).append(m)
    base = 2 if 2 * len(strata) <= k else 1
    quota = {op: min(len(ms), base) for op, ms in strata.items()}
    if sum(quota.values()) > k:  # more operators than room: one each for the biggest
        quota = dict.fromkeys(strata, 0)
        for op in sorted(strata, key=lambda o: (-len(strata[o]), o))[:k]:
            quota[op] = 1
    rest = k - sum(quota.values())
    weights = {op: len(ms) - quota[op] for op, ms in strata.items()}
    total = sum(weights.values())
    if rest > 0 and total > 0:
        exact = {op: rest * w / total for op, w in weights.items()}
        for op in strata:
            quota[op] += int(exact[op])
        left = k - sum(quota.values())
        for op in sorted(strata, key=lambda o: (-(exact[o] - int(exact[o])), o)):
            if left == 0:
                break
            if quota[op] < len(strata[op]):
                quota[op] += 1
                left -= 1
    chosen: list[Mutant] = []
    for op, ms in strata.items():
        ids = list(ms)
        random.Random(f"{seed}:{op}").shuffle(ids)
        chosen.extend(ids[: quota[op]])
    return chosen


def make_plan(files: Sequence[str], selectors: tuple[str, ...] | None = None, seed: int = 0,
              sample: int | None = None, shard: tuple[int, int] = (0, 1), jobs: int = 1,
              log: Callable[[str], None] | None = None) -> Plan:
    """Generate, sample and shard. Raises DiagnosticError when a file does not parse."""
    names = stem_names(files)
    generated: dict[str, Generated] = {}
    population: list[Mutant] = []
    for f in files:
        g = generate(f, selectors, jobs, names[f])
        generated[f] = g
        population.extend(g.mutants)
        if log:
            log(f"{f}: {len(g.mutants)} mutants ({g.proposed} edits proposed, "
                f"{sum(g.lint_rejected.values())} do not lint, {g.duplicate} duplicates, "
                f"{g.noop} no-ops)")
    chosen = stratified_sample(population, sample, seed) if sample else list(population)
    order = {f: i for i, f in enumerate(files)}
    chosen.sort(key=lambda m: (order[m.path], m.id))
    i, n = shard
    mine = tuple(m for j, m in enumerate(chosen) if j % n == i)
    return Plan(tuple(files), selectors, seed, sample, shard, len(population), generated, mine)


def _mutant_record(m: Mutant) -> dict[str, Any]:
    d = dataclasses.asdict(m)
    d.pop("text")
    d["sha"] = m.sha
    return d


def _from_outcome(m: Mutant, outcome: Any, timeout_s: float) -> dict[str, Any]:
    rec = _mutant_record(m)
    if outcome.status == "ok":
        rec.update(outcome.value)
    elif outcome.status == "timeout":
        verified = outcome.progress or {}
        if verified.get("phase") == "verified":
            rec["verify"] = verified.get("verify")
            rec.update(verdict="unknown", reason=f"verification proved it; the runs deciding "
                       f"it did not finish within {timeout_s:g} s")
        else:
            rec.update(verdict="unknown", reason=f"verification did not finish within "
                       f"{timeout_s:g} s")
    else:
        first = (outcome.error or "").strip().splitlines()
        rec.update(verdict="error", reason="tilesafe failed on this mutant: "
                   + (first[0] if first else "unknown error"), traceback=outcome.error[-2000:])
    rec["seconds"] = round(outcome.seconds, 2)
    return rec


def verify_originals(files: Sequence[str], settings: Settings, jobs: int, engine: Any = None
                     ) -> dict[str, dict[str, Any]]:
    """Every original's verification summary (a timeout or crash becomes an `error` entry).
    `engine`: where tasks run (pool.py's interface; default local processes)."""
    from tilesafe.mutation import pool, worker

    pool = engine or pool

    tasks = [{"kind": "original", "path": f, "settings": dataclasses.asdict(settings)}
             for f in files]
    out = {}
    for f, o in zip(files, pool.map_bounded(worker.classify, tasks, jobs, settings.timeout_s),
                    strict=True):
        out[f] = o.value if o.status == "ok" else {"error": o.error or o.status}
    return out


@dataclass
class Result:
    """A campaign's (or a shard's, or a merge's) results document."""

    header: dict[str, Any]
    settings: dict[str, Any]
    environment: dict[str, Any]
    generation: dict[str, dict[str, Any]]
    originals: dict[str, dict[str, Any]]
    records: list[dict[str, Any]] = field(default_factory=list)
    seconds: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return {"tool": "tilesafe mutate", "campaign": self.header, "settings": self.settings,
                "environment": self.environment, "generation": self.generation,
                "originals": self.originals, "seconds": round(self.seconds, 1),
                "summary": summarize(self.records), "records": self.records}

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> Result:
        return cls(doc["campaign"], doc["settings"], doc.get("environment", {}),
                   doc.get("generation", {}), doc.get("originals", {}), list(doc["records"]),
                   float(doc.get("seconds", 0.0)))


def environment() -> dict[str, Any]:
    """What the verdicts depend on besides the mutants: budgets the checkers know, the
    interpreter's scheduling policies."""
    from tilesafe.checkers.registry import CheckOptions
    from tilesafe.mutation.differential import schedules

    return {"check_option_fields": [f.name for f in dataclasses.fields(CheckOptions)],
            "policies": sorted({p for p, _ in schedules(2)}),
            "python": sys.version.split()[0]}


def run_plan(plan: Plan, settings: Settings, jobs: int,
             log: Callable[[str], None] | None = None, engine: Any = None) -> Result:
    """Classify a plan's mutants (originals verified first; the mutants of an original that
    does not verify are not run: a kill would mean nothing). `engine`: where the tasks run
    (pool.py's interface: local processes by default, mutation/dask_engine.py's cluster)."""
    from tilesafe.mutation import pool, worker

    pool = engine or pool
    t0 = time.monotonic()
    originals = verify_originals(plan.files, settings, jobs, pool)
    bad = {f for f, v in originals.items() if "error" in v or v.get("n_refuted")}
    for f in sorted(bad):
        if log:
            log(f"{f}: the original does not verify; its mutants are not run")
    generation = {f: {"proposed": g.proposed, "noop": g.noop, "duplicate": g.duplicate,
                      "lint_rejected": g.lint_rejected, "mutants": len(g.mutants)}
                  for f, g in plan.generated.items()}
    result = Result(plan.header(), dataclasses.asdict(settings), environment(), generation,
                    originals)
    todo = [m for m in plan.chosen if m.path not in bad]
    tasks = [{"kind": "mutant", "mutant": dataclasses.asdict(m),
              "settings": dataclasses.asdict(settings)} for m in todo]
    records: list[dict[str, Any] | None] = [None] * len(todo)
    done = 0
    for outcome in pool.run_tasks(worker.classify, tasks, jobs, settings.timeout_s):
        rec = _from_outcome(todo[outcome.index], outcome, settings.timeout_s)
        records[outcome.index] = rec
        done += 1
        if log:
            kind = f"/{rec['kind']}" if rec.get("kind") else ""
            log(f"[{done}/{len(todo)}] {rec['id']} {rec['verdict']}{kind} "
                f"({rec['seconds']:.1f} s)")
    result.records = [r for r in records if r is not None]
    result.seconds = time.monotonic() - t0
    return result


def merge(results: Sequence[Result]) -> Result:
    """The shards of one campaign combined (raises CampaignError if they differ in files,
    operators, seed, sample or shard count, or two hold the same shard)."""
    if not results:
        raise CampaignError("nothing to merge")
    first = results[0].header
    key = ("files", "operators", "seed", "sample", "population")
    shards: set[int] = set()
    for r in results:
        h = r.header
        if any(h.get(k) != first.get(k) for k in key) or h["shard"][1] != first["shard"][1]:
            raise CampaignError("these results are not shards of one campaign (files, "
                                "operators, seed, sample or shard count differ)")
        if h["shard"][0] in shards:
            raise CampaignError(f"shard {h['shard'][0]}/{h['shard'][1]} given twice")
        shards.add(h["shard"][0])
    header = dict(first)
    n = first["shard"][1]
    header["shard"] = [0, 1] if len(shards) == n else [sorted(shards), n]
    merged = Result(header, results[0].settings, results[0].environment,
                    results[0].generation, {}, [], sum(r.seconds for r in results))
    seen: set[str] = set()
    for r in results:
        merged.originals.update(r.originals)
        for rec in r.records:
            if rec["id"] not in seen:
                seen.add(rec["id"])
                merged.records.append(rec)
    order = {f: i for i, f in enumerate(first["files"])}
    merged.records.sort(key=lambda rec: (order.get(rec["path"], 0), rec["id"]))
    return merged


# ---- scoring -----------------------------------------------------------------------------------


def _ratio(a: int, b: int) -> float | None:
    return round(a / b, 4) if b else None


def _counts(records: Sequence[dict[str, Any]]) -> dict[str, Any]:
    c = {v: 0 for v in VERDICTS}
    kinds: dict[str, int] = {}
    for r in records:
        c[r["verdict"]] = c.get(r["verdict"], 0) + 1
        if r["verdict"] == "missed":
            kinds[r.get("kind", "value")] = kinds.get(r.get("kind", "value"), 0) + 1
    in_scope_missed = sum(kinds.get(k, 0) for k in IN_SCOPE_KINDS)
    return {**c, "total": len(records), "missed_kinds": kinds,
            "missed_in_scope": in_scope_missed, "missed_value": c["missed"] - in_scope_missed,
            "score": _ratio(c["killed"], c["killed"] + c["missed"]),
            "in_scope_score": _ratio(c["killed"], c["killed"] + in_scope_missed)}


def summarize(records: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Counts and scores overall, per operator and per kernel file."""
    by_op: dict[str, list[dict[str, Any]]] = {}
    by_file: dict[str, list[dict[str, Any]]] = {}
    for r in records:
        by_op.setdefault(r["operator"], []).append(r)
        by_file.setdefault(Path(r["path"]).stem, []).append(r)
    return {"overall": _counts(records),
            "operators": {k: _counts(v) for k, v in sorted(by_op.items())},
            "kernels": {k: _counts(v) for k, v in sorted(by_file.items())}}


def soundness_holes(records: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Missed mutants whose difference is a claimed property: verification proved every
    obligation, yet the interpreter shows a run-time failure, a race, or output elements
    left unwritten."""
    return [r for r in records if r["verdict"] == "missed" and r.get("kind") in IN_SCOPE_KINDS]
