"""Write each obligation's evidence in a form another tool can re-check.

`tilesafe verify --certificates DIR` writes, per kernel, a folder of certificate files and
one `manifest.json` for the whole run:

* every SMT query a checker asked z3 (the temporal checkers' periodicity and stage-projection
  arguments, the symbolic tx-count range) as SMT-LIB 2 with z3's answer as `:status`;
* every Presburger obligation whose evidence names its sets (accesses in bounds, outputs
  covered, grid extents, layouts injective and non-negative) as ISL text *and* as a
  QF_LIA SMT-LIB script (proofs/isl_lia.py) whose answer is the verdict: `unsat` for a
  proved obligation (no violation exists), `sat` for a refuted one;
* the temporal checkers' explored state graphs (JSON): every state the searches visited,
  projected on the mbarriers and the copies in flight, and every transition with the
  barrier operations it performed, plus the periodicity facts of the argument.

tilesafe/certcheck re-checks them (cvc5; its own mbarrier successor function) without
importing any of this. Obligations without a certificate are listed in the manifest with
the reason (a rule-table check, an enumeration, a verdict cvc5 cannot confirm).
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tilesafe.checkers.obligation import Verdict
from tilesafe.proofs.report import Entry, json_safe

FORMAT_VERSION = 1
MAX_GRAPH_STATES = 200_000  # a larger search is summarised, not written


# ---- state graphs (recorded while the temporal searches run) --------------------------------


def _bars(state: Any) -> list[list[int]]:
    return [[int(b.st.initialized), b.st.parity, b.st.pending, b.st.expected, b.st.tx]
            for b in state.bars]


def _loads(state: Any) -> list[list[int]]:
    """The TMA loads in flight: (barrier instance, bytes), sorted."""
    from tilesafe.semantics.temporal.explore.state import LoadCopy

    return sorted([int(c.inst), int(c.nbytes)] for c in state.copies
                  if isinstance(c, LoadCopy))


@dataclass
class Graph:
    """One search's states and transitions, projected on what the mbarrier model sees."""

    machine: Any
    por: bool
    labels: list[str]
    ownership: bool = False
    ids: dict = field(default_factory=dict)
    states: list[dict[str, Any]] = field(default_factory=list)
    edges: list[list[Any]] = field(default_factory=list)
    roots: list[int] = field(default_factory=list)
    overflow: bool = False

    def _id(self, state: tuple) -> int:
        k = self.ids.get(state)
        if k is None:
            from tilesafe.semantics.temporal.explore import finished

            k = self.ids[state] = len(self.states)
            final = finished(self.machine, state)
            self.states.append({"bars": _bars(state), "loads": _loads(state), "final": final,
                                "visited": False})
        return k

    def visit(self, state: tuple) -> None:
        if len(self.states) > MAX_GRAPH_STATES:
            self.overflow = True
            return
        self.states[self._id(state)]["visited"] = True

    def edge(self, state: tuple, move: tuple, nxt: tuple) -> None:
        if self.overflow:
            return
        from tilesafe.semantics.temporal.explore.notes import BarNote, CopyDoneNote, IssuedNote
        from tilesafe.semantics.temporal.explore.state import LoadCopy

        notes: list[Any] = []
        raw, _ = self.machine.apply(state, move, notes)
        ops = [[int(n.inst), n.what, *[json_safe(a) for a in n.args]]
               for n in notes if isinstance(n, BarNote)]
        issued = [[int(n.who)] for n in notes if isinstance(n, IssuedNote) and n.kind == "L"]
        done = [[int(n.copy.inst), int(n.copy.nbytes)] for n in notes
                if isinstance(n, CopyDoneNote) and isinstance(n.copy, LoadCopy)]
        self.edges.append([self._id(state), self._id(nxt), " ".join(map(str, move)), ops,
                           _bars(raw), _loads(raw), issued, done])

    def to_json(self) -> dict[str, Any]:
        return {"kind": "mbarrier-state-graph", "barriers": self.labels,
                "checker": "ownership" if self.ownership else "barrier",
                "partial_order_reduction": self.por, "complete": not self.overflow,
                "roots": self.roots, "states": self.states, "edges": self.edges}


@dataclass
class Recorder:
    """Graphs per (file, kernel), in the order the searches ran."""

    current: tuple[str, str] | None = None
    graphs: dict[tuple[str, str], list[Graph]] = field(default_factory=dict)

    def kernel(self, path: str, name: str) -> None:
        self.current = (path, name)

    def begin(self, machine: Any, roots: Sequence[tuple], por: bool) -> Graph:
        g = Graph(machine, por, list(machine.labels), bool(getattr(machine, "ownership", False)))
        g.roots = [g._id(r) for r in roots]
        if self.current is not None:
            self.graphs.setdefault(self.current, []).append(g)
        return g


@contextlib.contextmanager
def recording() -> Iterator[Recorder]:
    """Record every temporal search run inside the block (explore.GRAPH_RECORDER)."""
    from tilesafe.semantics.temporal.explore import GRAPH_RECORDER

    rec = Recorder()
    token = GRAPH_RECORDER.set(rec)
    try:
        yield rec
    finally:
        GRAPH_RECORDER.reset(token)


# ---- Presburger obligations -> ISL text + QF_LIA --------------------------------------------


@dataclass(frozen=True)
class Query:
    """One satisfiability question whose answer is the obligation's verdict."""

    isl_text: str
    smt: str
    expect: str


def _expect(verdict: Verdict) -> str:
    return "unsat" if verdict is Verdict.PROVED else "sat"


def _isl_doc(question: str, sets: dict[str, str], expect: str) -> str:
    body = "\n".join(f"{k} := {v};" for k, v in sets.items())
    return (f"# {question}\n# expected: {'empty' if expect == 'unsat' else 'not empty'} "
            f"({expect})\n{body}\n")


def presburger_query(entry: Entry) -> Query | None:
    """The obligation's question over its ISL sets, when its evidence names them."""
    import islpy as isl

    from tilesafe.proofs.isl_lia import Encoder, distinct_tuples, script

    o = entry.obligation
    ev = {k: v for k, v in o.evidence.items() if isinstance(v, str)}
    expect = _expect(o.verdict)
    enc = Encoder()
    note = f"{entry.path}: {o.name} ({o.verdict.value})"
    if "relation" in ev and "valid" in ev:  # accesses in bounds
        rel, valid = isl.Map(ev["relation"]), isl.Set(ev["valid"])
        xs = enc.tuple_vars("x", rel.dim(isl.dim_type.in_))
        ys = enc.tuple_vars("y", rel.dim(isl.dim_type.out))
        out_of = valid.complement()
        asserts = [enc.map(rel, xs, ys), enc.set(out_of, ys)]
        question = "is some access of `relation` outside `valid`? (R(x, y) and y not in V)"
        sets = {"R": ev["relation"], "V": ev["valid"], "Q": "R * (dom R -> complement(V))"}
    elif "target" in ev and "written" in ev:  # every output element written
        target, written = isl.Set(ev["target"]), isl.Set(ev["written"])
        ys = enc.tuple_vars("y", target.dim(isl.dim_type.set))
        asserts = [enc.set(target, ys), enc.set(written.complement(), ys)]
        question = "is some element of `target` not `written`?"
        sets = {"T": ev["target"], "W": ev["written"], "Q": "T - W"}
    elif "extent" in ev and "where" in ev:  # grid extents: "at least 1" / "at most LIMIT"
        bound = re.search(r"at (least|most) (\d+)", o.name)
        if bound is None:
            return None
        ext, where = isl.Map(ev["extent"]), isl.Set(ev["where"])
        (e,) = enc.tuple_vars("e", 1)
        least, limit = bound.group(1) == "least", int(bound.group(2))
        bad = f"(< {e} {limit})" if least else f"(> {e} {limit})"
        asserts = [enc.set(where, []), enc.map(ext, [], [e]), bad]
        question = (f"does some size allowed by `where` give an extent "
                    f"{'below' if least else 'above'} {limit}?")
        sets = {"where": ev["where"], "extent": ev["extent"]}
    elif "map" in ev and "collisions" in ev:  # layout injective
        # With a lemma (a swizzle is a bijection of offsets), ISL decided the inner
        # layout: certify that question; the lemma is stated in the .isl file.
        m = isl.Map(ev.get("decided_on", ev["map"]))
        n_in, n_out = m.dim(isl.dim_type.in_), m.dim(isl.dim_type.out)
        xs, xs2 = enc.tuple_vars("x", n_in), enc.tuple_vars("z", n_in)
        ps = enc.tuple_vars("p", n_out)
        asserts = [enc.map(m, xs, ps), enc.map(m, xs2, ps), distinct_tuples(xs, xs2)]
        question = "do two different coordinates map to one offset? (L(x) = L(z), x != z)"
        sets = {"L": ev.get("decided_on", ev["map"])}
        if "lemma" in ev:
            question += f"; L is the layout inside the swizzle, by the lemma: {ev['lemma']}"
            sets["full layout"] = ev["map"]
    elif "map" in ev and "out_of_bounds" in ev:  # layout offsets in range
        m, oob = isl.Map(ev["map"]), isl.Set(ev["out_of_bounds"])
        xs = enc.tuple_vars("x", m.dim(isl.dim_type.in_))
        ps = enc.tuple_vars("p", m.dim(isl.dim_type.out))
        asserts = [enc.map(m, xs, ps), enc.set(oob, ps)]
        question = "does some coordinate map to an offset in `out_of_bounds`?"
        sets = {"L": ev["map"], "OOB": ev["out_of_bounds"]}
    else:
        return None
    smt = script(enc, asserts, expect, comment=f"{note}\n{question}")
    return Query(_isl_doc(question, sets, expect), smt, expect)


# ---- writing --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Written:
    files: int
    obligations: int
    uncertified: int


def _slug(text: str, limit: int = 48) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "-", text).strip("-")[:limit] or "x"


def _temporal_key(entry: Entry) -> bool:
    return entry.obligation.checker in ("barrier", "ownership") and \
        "explorations" in entry.obligation.evidence


def write_certificates(directory: str | Path, entries: Sequence[Entry],
                       recorder: Recorder | None = None) -> Written:
    """Write the certificates of `entries` (and the graphs `recorder` holds) under
    `directory`; returns how many files and obligations were written."""
    root = Path(directory)
    root.mkdir(parents=True, exist_ok=True)
    manifest: list[dict[str, Any]] = []
    files = 0
    kernel_dirs: dict[tuple[str, str], Path] = {}

    def kdir(path: str, kernel: str) -> Path:
        key = (path, kernel)
        if key not in kernel_dirs:
            d = root / f"{len(kernel_dirs):03d}-{_slug(Path(path).stem, 24)}-{_slug(kernel, 24)}"
            d.mkdir(parents=True, exist_ok=True)
            kernel_dirs[key] = d
        return kernel_dirs[key]

    def write(path: Path, text: str) -> str:
        nonlocal files
        path.write_text(text, encoding="utf-8")
        files += 1
        return str(path.relative_to(root))

    # A protocol graph is claimed safe only when every temporal property its checker
    # reports for the kernel is proved; otherwise it holds a violation and is only legal.
    safe: dict[tuple[str, str, str], bool] = {}
    for e in entries:
        if _temporal_key(e):
            k3 = (e.path, e.kernel, e.obligation.checker)
            safe[k3] = safe.get(k3, True) and e.obligation.verdict is Verdict.PROVED
    shared: dict[tuple[str, str], list[dict[str, str]]] = {}

    def kernel_files(entry: Entry) -> list[dict[str, str]]:
        """The SMT queries and periodicity facts of the kernel's argument (written once)."""
        key = (entry.path, entry.kernel)
        if key in shared:
            return shared[key]
        d = kdir(*key) / "temporal"
        d.mkdir(exist_ok=True)
        out: list[dict[str, str]] = []
        ev = entry.obligation.evidence
        for i, q in enumerate(ev.get("smt-lib", []) or []):
            status = re.search(r":status (\w+)", q)
            expect = status.group(1) if status else "unknown"
            if expect in ("sat", "unsat"):
                out.append({"file": write(d / f"query-{i:03d}.smt2", q), "format": "smt2",
                            "expect": expect, "role": "periodicity argument"})
        arg = {"kind": "periodicity-facts", "argument": json_safe(ev.get("argument", {})),
               "explorations": json_safe(ev.get("explorations", [])),
               "states": json_safe(ev.get("states explored (with partial-order reduction)"))}
        out.append({"file": write(d / "periodicity.json", json.dumps(arg, indent=1)),
                    "format": "facts", "expect": "informational"})
        graphs = recorder.graphs.get(key, []) if recorder else []
        for i, g in enumerate(graphs):
            checker = "ownership" if g.ownership else "barrier"
            expect = "safe" if safe.get((*key, checker), False) else "legal"
            out.append({"file": write(d / f"graph-{i:03d}.json", json.dumps(g.to_json())),
                        "format": "state-graph", "expect": expect, "checker": checker})
        shared[key] = out
        return out

    def temporal(entry: Entry) -> list[dict[str, str]]:
        """The kernel's shared files, the graphs limited to the obligation's checker."""
        return [dict(f) for f in kernel_files(entry)
                if f.get("checker", entry.obligation.checker) == entry.obligation.checker]

    uncertified = 0
    for n, e in enumerate(entries):
        o = e.obligation
        rec: dict[str, Any] = {"id": n, "path": e.path, "kernel": e.kernel, "checker": o.checker,
                               "name": o.name, "verdict": o.verdict.value, "method": o.method,
                               "code": o.code, "files": []}
        if o.verdict is Verdict.UNKNOWN:
            rec["uncertified"] = "unknown verdict: nothing to certify"
        elif _temporal_key(e):
            rec["files"] = temporal(e)
        elif "smt-lib" in o.evidence:
            d = kdir(e.path, e.kernel)
            q = str(o.evidence["smt-lib"])
            status = re.search(r":status (\w+)", q)
            rec["files"].append({"file": write(d / f"{n:04d}-{_slug(o.name)}.smt2", q),
                                 "format": "smt2",
                                 "expect": status.group(1) if status else "unknown"})
        else:
            try:
                query = presburger_query(e)
            except Exception as err:  # noqa: BLE001 - ISL refusing a string: no certificate
                query = None
                rec["uncertified"] = f"ISL could not re-read the evidence: {err}"
            if query is not None:
                d = kdir(e.path, e.kernel)
                stem = f"{n:04d}-{_slug(o.name)}"
                rec["files"].append({"file": write(d / f"{stem}.isl", query.isl_text),
                                     "format": "isl", "expect": "informational"})
                rec["files"].append({"file": write(d / f"{stem}.lia.smt2", query.smt),
                                     "format": "smt2", "expect": query.expect,
                                     "role": "ISL question re-encoded as QF_LIA"})
            elif "uncertified" not in rec:
                rec["uncertified"] = f"decided by {o.method}: no solver query to re-check"
        if not rec["files"]:
            uncertified += 1
        manifest.append(rec)
    doc = {"kind": "tilesafe-certificates", "format_version": FORMAT_VERSION,
           "obligations": manifest}
    (root / "manifest.json").write_text(json.dumps(doc, indent=1), encoding="utf-8")
    return Written(files + 1, len(entries), uncertified)
