"""The mutation baseline of corpus/good: what a campaign found, kept as a regression gate.

One JSON file per kernel under corpus/mutants/ records, for every mutant the campaign
classified, its id, operator, edit (and the statement before and after) and the verdict it
got. A change to a checker must not let a mutant the baseline records as *killed* survive:
the CI test re-verifies a fixed sample of them (the ones marked `gate`, chosen across
operators and cheap to verify), the slow test all of them.

Why regenerate rather than store the mutant's text: the text would go stale with every
edit of the kernel that does not matter to the mutant (a new parameter role in the header,
say). Regenerating by id and checking that the statement before and after are still the
recorded ones keeps a baseline entry valid exactly as long as it means the same edit.

    python -m tilesafe.mutation.baseline write RESULTS.json [--out corpus/mutants]
    python -m tilesafe.mutation.baseline check [--all] [--dir corpus/mutants]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

GATE_SIZE = 48
GATE_SECONDS = 60.0  # verify time of the gate sample, as the campaign measured it (loaded)
ROOT = Path(__file__).resolve().parent.parent


def expected(rec: dict[str, Any]) -> str:
    """The verdict a record stands for: killed, missed:KIND, equivalent, unknown, error."""
    if rec["verdict"] == "missed":
        return f"missed:{rec.get('kind', 'value')}"
    return str(rec["verdict"])


def _gate(records: Sequence[dict[str, Any]], size: int, seconds: float) -> set[str]:
    """Killed mutants for the CI gate: round-robin over operators, cheapest first, until
    `size` of them or `seconds` of (measured) verification time."""
    by_op: dict[str, list[dict[str, Any]]] = {}
    for r in records:
        if r["verdict"] == "killed":
            by_op.setdefault(r["operator"], []).append(r)
    for rs in by_op.values():
        rs.sort(key=lambda r: ((r.get("verify") or {}).get("seconds", 99.0), r["id"]))
    chosen: set[str] = set()
    spent = 0.0
    while len(chosen) < size and any(by_op.values()):
        for op in sorted(by_op):
            if not by_op[op] or len(chosen) >= size:
                continue
            r = by_op[op].pop(0)
            cost = (r.get("verify") or {}).get("seconds", 99.0)
            if spent + cost > seconds:
                by_op[op] = []
                continue
            chosen.add(r["id"])
            spent += cost
    return chosen


def write(result_doc: dict[str, Any], out_dir: Path, gate_size: int = GATE_SIZE,
          gate_seconds: float = GATE_SECONDS) -> list[Path]:
    """One baseline file per kernel file of the campaign."""
    records = result_doc["records"]
    gate = _gate(records, gate_size, gate_seconds)
    out_dir.mkdir(parents=True, exist_ok=True)
    by_file: dict[str, list[dict[str, Any]]] = {}
    for r in records:
        by_file.setdefault(r["path"], []).append(r)
    written = []
    header = result_doc["campaign"]
    for path, recs in sorted(by_file.items()):
        stem = Path(path).stem
        entries = []
        for r in sorted(recs, key=lambda r: r["id"]):
            e = {"id": r["id"], "operator": r["operator"], "edit": r["edit"],
                 "before": r["before"], "after": r["after"], "expected": expected(r)}
            if r["id"] in gate:
                e["gate"] = True
            if r["verdict"] == "killed":
                e["codes"] = (r.get("verify") or {}).get("refuted_codes", [])
            entries.append(e)
        doc = {"kernel": path, "source_sha": _sha(ROOT / path if not Path(path).is_absolute()
                                                   else Path(path)),
               "campaign": {k: header.get(k) for k in ("seed", "sample", "population")},
               "mutants": entries}
        target = out_dir / f"{stem}.json"
        lines = ",\n".join("  " + json.dumps(e) for e in entries)
        meta = json.dumps({k: v for k, v in doc.items() if k != "mutants"})[:-1]
        target.write_text(f"{meta}, \"mutants\": [\n{lines}\n]}}\n", encoding="utf-8")
        written.append(target)
    return written


def _sha(path: Path) -> str:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()[:16]
    except OSError:
        return ""


@dataclass(frozen=True)
class Entry:
    kernel: str  # path of the kernel file, relative to the repository
    id: str
    operator: str
    edit: str
    before: str
    after: str
    expected: str
    gate: bool
    codes: tuple[str, ...] = ()  # the codes refuted when the baseline was taken (killed)


def load(directory: Path) -> list[Entry]:
    out = []
    for f in sorted(directory.glob("*.json")):
        doc = json.loads(f.read_text(encoding="utf-8"))
        for e in doc["mutants"]:
            out.append(Entry(doc["kernel"], e["id"], e["operator"], e["edit"], e["before"],
                             e["after"], e["expected"], bool(e.get("gate")),
                             tuple(e.get("codes", ()))))
    return out


@dataclass(frozen=True)
class Check:
    """One baseline-killed mutant re-verified: `killed` now? and why not."""

    entry: Entry
    killed: bool
    detail: str


def _content(mutant_id: str, operator: str, edit: str, before: str, after: str
             ) -> tuple[str, ...]:
    """A mutant by what it does rather than where: its id without the source position
    (`kernel:operator:L.C-L.C:detail` -> kernel, operator, detail), the edit and the
    statement before and after."""
    parts = mutant_id.split(":")
    where_free = tuple(p for p in parts if not re.fullmatch(r"\d+\.\d+-\d+\.\d+", p))
    return (*where_free, operator, edit, before, after)


def _start(mutant_id: str) -> tuple[int, int] | None:
    m = re.search(r":(\d+)\.(\d+)-\d+\.\d+:", mutant_id)
    return (int(m.group(1)), int(m.group(2))) if m else None


def _relocate(entries: Sequence[Entry], by_id: dict[str, Any],
              by_content: dict[tuple[str, ...], list[Any]]) -> dict[str, Any]:
    """Each entry's mutant in the kernel as it is now: by id when the id still names the
    recorded edit; else, when an edit elsewhere moved the statement, the only mutant that
    does the same thing to the same statement text; else (the same text in several places,
    e.g. two identical loops) the one at the recorded position moved by the line shift the
    unambiguous entries of this kernel agree on. None when neither settles it (stale)."""
    found: dict[str, Any] = {}
    shifts: dict[int, int] = {}
    ambiguous = []
    for e in entries:
        c = by_id.get(e.id)
        if c is not None and (c.before, c.after) == (e.before, e.after):
            found[e.id] = c
            continue
        moved = by_content.get(_content(e.id, e.operator, e.edit, e.before, e.after), [])
        old = _start(e.id)
        if len(moved) == 1:
            found[e.id] = moved[0]
            new = _start(moved[0].id)
            if old and new:
                shifts[new[0] - old[0]] = shifts.get(new[0] - old[0], 0) + 1
        elif moved and old:
            ambiguous.append((e, moved, old))
    if shifts:
        shift = max(shifts, key=lambda d: shifts[d])
        for e, moved, (line, col) in ambiguous:
            at = [c for c in moved if _start(c.id) == (line + shift, col)]
            if len(at) == 1:
                found[e.id] = at[0]
    return found


def check(entries: Sequence[Entry], root: Path = ROOT, options: Any = None) -> list[Check]:
    """Regenerate each entry's mutant by id and verify it (in this process; the checkers'
    own budgets bound each verification)."""
    from tilesafe import api
    from tilesafe.frontend.diagnostics import DiagnosticError
    from tilesafe.mutation.generate import propose
    from tilesafe.mutation.worker import Settings, check_options

    options = options or check_options(Settings())
    by_kernel: dict[str, list[Entry]] = {}
    for e in entries:
        by_kernel.setdefault(e.kernel, []).append(e)
    out: list[Check] = []
    with tempfile.TemporaryDirectory(prefix="tilesafe-gate-") as tmp:
        for kernel, es in by_kernel.items():
            path = root / kernel
            _, cands, *_ = propose(path, tuple(sorted({e.operator for e in es})))
            by_id = {c.id: c for c in cands}
            by_content: dict[tuple[str, ...], list[Any]] = {}
            for c in cands:
                by_content.setdefault(_content(c.id, c.operator, c.edit, c.before, c.after),
                                      []).append(c)
            found = _relocate(es, by_id, by_content)
            for e in es:
                c = found.get(e.id)
                if c is None:
                    out.append(Check(e, False, "the baseline is stale: this id no longer names "
                                     "the recorded edit (regenerate corpus/mutants)"))
                    continue
                target = Path(tmp) / path.name
                target.write_text(c.text, encoding="utf-8")
                try:
                    obligations = api.verify(target, options)
                except DiagnosticError as err:
                    out.append(Check(e, False, "the mutant no longer lints: "
                                     + "; ".join(d.code for d in err.diagnostics)))
                    continue
                refuted = sorted({o.code or "-" for o in obligations
                                  if o.failed and o.verdict.value == "refuted"})
                unknown = sorted({o.code or "-" for o in obligations
                                  if o.failed and o.verdict.value == "unknown"})
                detail = ("refuted " + ", ".join(refuted) if refuted else
                          "nothing refuted" + (f" (unknown: {', '.join(unknown)})"
                                               if unknown else ": every obligation proved"))
                out.append(Check(e, bool(refuted), detail))
    return out


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tilesafe.mutation.baseline")
    sub = p.add_subparsers(dest="cmd", required=True)
    w = sub.add_parser("write", help="write corpus/mutants from a campaign's JSON results")
    w.add_argument("results")
    w.add_argument("--out", default=str(ROOT / "corpus" / "mutants"))
    w.add_argument("--gate", type=int, default=GATE_SIZE)
    c = sub.add_parser("check", help="re-verify baseline-killed mutants")
    c.add_argument("--dir", default=str(ROOT / "corpus" / "mutants"))
    c.add_argument("--all", action="store_true", help="every killed one, not the gate sample")
    args = p.parse_args(argv)
    if args.cmd == "write":
        doc = json.loads(Path(args.results).read_text(encoding="utf-8"))
        for f in write(doc, Path(args.out), args.gate):
            print(f"wrote {f}")
        return 0
    entries = [e for e in load(Path(args.dir))
               if e.expected == "killed" and (args.all or e.gate)]
    results = check(entries)
    bad = [r for r in results if not r.killed]
    for r in bad:
        print(f"REGRESSION {r.entry.id}: {r.entry.edit} -- {r.detail}")
    print(f"{len(results) - len(bad)} of {len(results)} baseline-killed mutants still killed")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
