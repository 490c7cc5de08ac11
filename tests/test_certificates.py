"""Certificates (issue 11, item 2): `verify --certificates` writes them, `check-certificates`
re-checks them with code that shares nothing with the prover (cvc5 for SMT-LIB, its own
mbarrier rules for state graphs), and a corrupted certificate fails."""

from __future__ import annotations

import io
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tilesafe.cli import main

pytest.importorskip("cvc5")

ROOT = Path(__file__).resolve().parent.parent
GOOD = ROOT / "corpus" / "good"
BAD = ROOT / "corpus" / "bad"


def cli(*args: object) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main([str(a) for a in args], stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def certs(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("certs")
    code, out, err = cli("verify", GOOD / "pipeline2.tsk", GOOD / "elementwise.tsk",
                         BAD / "ts201_tail_read_oob.tsk", "--certificates", d)
    assert code == 1, out  # the bad kernel is refuted
    assert "certificate file(s)" in err
    return d


def copy(certs: Path, tmp_path: Path) -> Path:
    dst = tmp_path / "c"
    shutil.copytree(certs, dst)
    return dst


def manifest(d: Path) -> dict:
    return json.loads((d / "manifest.json").read_text())


def files_of(d: Path, fmt: str, role: str | None = None) -> list[dict]:
    out = []
    for ob in manifest(d)["obligations"]:
        for f in ob["files"]:
            if f["format"] == fmt and (role is None or f.get("role") == role):
                out.append({**f, "verdict": ob["verdict"], "name": ob["name"]})
    return out


def test_every_certificate_rechecks(certs):
    code, out, _ = cli("check-certificates", certs)
    assert code == 0, out
    n = int(re.search(r"(\d+) certificate\(s\) checked", out).group(1))
    assert n >= 40 and "0 failed" in out
    kinds = {f["format"] for ob in manifest(certs)["obligations"] for f in ob["files"]}
    assert {"smt2", "isl", "state-graph", "facts"} <= kinds


def test_refuted_obligation_is_certified_sat(certs):
    refuted = [f for f in files_of(certs, "smt2", "ISL question re-encoded as QF_LIA")
               if f["verdict"] == "refuted"]
    assert refuted and all(f["expect"] == "sat" for f in refuted)


def test_flipped_status_fails(certs, tmp_path):
    d = copy(certs, tmp_path)
    f = files_of(d, "smt2", "ISL question re-encoded as QF_LIA")[0]
    doc = manifest(d)
    for ob in doc["obligations"]:
        for g in ob["files"]:
            if g["file"] == f["file"]:
                g["expect"] = "sat" if g["expect"] == "unsat" else "unsat"
                ob["verdict"] = "refuted" if ob["verdict"] == "proved" else "proved"
    (d / "manifest.json").write_text(json.dumps(doc))
    path = d / f["file"]
    path.write_text(re.sub(r":status (un)?sat", ":status " + ("sat" if f["expect"] == "unsat"
                                                              else "unsat"), path.read_text()))
    code, out, _ = cli("check-certificates", d)
    assert code == 1 and "cvc5 answers" in out


def test_dropped_assertion_fails(certs, tmp_path):
    """Removing the 'outside the valid range' half of an in-bounds query makes it
    satisfiable: cvc5 no longer confirms `unsat`."""
    d = copy(certs, tmp_path)
    target = next(f for f in files_of(d, "smt2", "ISL question re-encoded as QF_LIA")
                  if "in bounds" in f["name"] and f["expect"] == "unsat")
    path = d / target["file"]
    lines = path.read_text().splitlines()
    last = max(i for i, ln in enumerate(lines) if ln.startswith("(assert"))
    path.write_text("\n".join(lines[:last] + lines[last + 1:]) + "\n")
    code, out, _ = cli("check-certificates", d)
    assert code == 1 and target["file"] in out and "cvc5 answers sat" in out


def test_manifest_verdict_must_match_query(certs, tmp_path):
    d = copy(certs, tmp_path)
    doc = manifest(d)
    ob = next(o for o in doc["obligations"] if o["verdict"] == "refuted" and o["files"])
    ob["verdict"] = "proved"  # claims a proof of what the certificate refutes
    (d / "manifest.json").write_text(json.dumps(doc))
    code, out, _ = cli("check-certificates", d)
    assert code == 1 and "needs unsat" in out


def _graph(d: Path) -> tuple[Path, dict]:
    best = max((d / f["file"] for f in files_of(d, "state-graph")),
               key=lambda p: p.stat().st_size)
    return best, json.loads(best.read_text())


def test_corrupted_graph_edge_fails(certs, tmp_path):
    d = copy(certs, tmp_path)
    path, g = _graph(d)
    edge = next(e for e in g["edges"] if any(op[1] == "arrive" for op in e[3]))
    op = next(op for op in edge[3] if op[1] == "arrive")
    op[2] += 1  # one more arrival than recorded
    path.write_text(json.dumps(g))
    code, out, _ = cli("check-certificates", d)
    assert code == 1 and "FAILED" in out


def test_corrupted_graph_state_fails(certs, tmp_path):
    d = copy(certs, tmp_path)
    path, g = _graph(d)
    s = next(s for s in g["states"] if any(b[0] for b in s["bars"]))
    b = next(b for b in s["bars"] if b[0])
    b[4] += 4096  # bytes no operation accounts for
    path.write_text(json.dumps(g))
    assert cli("check-certificates", d)[0] == 1


def test_graph_with_a_removed_successor_is_a_deadlock(certs, tmp_path):
    d = copy(certs, tmp_path)
    path, g = _graph(d)
    src = next(e[0] for e in g["edges"] if not g["states"][e[0]]["final"])
    g["edges"] = [e for e in g["edges"] if e[0] != src]
    path.write_text(json.dumps(g))
    code, out, _ = cli("check-certificates", d)
    assert code == 1 and "deadlock" in out


def test_wait_that_cannot_pass_is_illegal():
    from tilesafe.certcheck.mbarrier import Illegal, step

    b = [1, 0, 1, 1, 0]
    with pytest.raises(Illegal):
        step(b, "wait", [0])  # phase 0 has not completed
    step(b, "arrive", [1, None])
    step(b, "wait", [0])


def test_checker_shares_no_code_with_the_prover(certs):
    """The checker package imports none of the prover's modules, nor z3 or islpy, even
    while it checks a directory."""
    code = (
        "import sys\n"
        "from tilesafe.certcheck import check_directory\n"
        f"rs = check_directory({str(certs)!r})\n"
        "assert rs and all(r.ok for r in rs), [r.line() for r in rs if not r.ok]\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('z3', 'islpy', 'pysmt')"
        " or m.startswith(('tilesafe.semantics', 'tilesafe.checkers', 'tilesafe.proofs',"
        " 'tilesafe.frontend', 'tilesafe.api', 'tilesafe.codegen')))\n"
        "print(bad)\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=600, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[]", r.stdout
    for path in (ROOT / "src" / "tilesafe" / "certcheck").glob("*.py"):
        text = path.read_text()
        assert not re.search(r"^\s*(from|import)\s+(tilesafe\.(semantics|checkers|proofs|"
                             r"frontend)|z3|islpy)", text, re.M), path.name


def test_check_certificates_usage_errors(tmp_path):
    assert cli("check-certificates", tmp_path / "nope")[0] == 2
    assert cli("check-certificates", tmp_path)[0] == 2  # no manifest


# ---- the two re-implementations agree with the prover's (brute force / hypothesis) ---------


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["arrive", "arrive_tx", "expect_tx", "complete_tx"]),
                          st.integers(1, 3), st.integers(0, 64)), max_size=12),
       st.integers(1, 4))
def test_independent_mbarrier_rules_agree_with_the_model(ops, count):
    from tilesafe.certcheck.mbarrier import Illegal, step
    from tilesafe.semantics.hw import mbarrier as mb

    model = mb.MbarrierState().init(count)
    mine = [1, 0, count, count, 0]
    for op, n, tx in ops:
        try:
            if op == "arrive":
                model = model.arrive(n)[0]
            elif op == "arrive_tx":
                for _ in range(n):
                    model = model.arrive_expect_tx(tx)[0]
            elif op == "expect_tx":
                for _ in range(n):
                    model = model.expect_tx(tx)
            else:
                model = model.complete_tx(tx)
            ok = True
        except mb.MbarrierError:
            ok = False
        try:
            if op == "arrive":
                step(mine, "arrive", [n, None])
            elif op == "arrive_tx":
                step(mine, "arrive", [n, tx])
            elif op == "expect_tx":
                step(mine, "expect_tx", [n, tx])
            else:
                step(mine, "complete_tx", [tx])
            ok2 = True
        except Illegal:
            ok2 = False
        if op == "arrive_tx" and n > 1 and ok != ok2:
            return  # the model refuses the whole group up front, mine at the failing one
        assert ok == ok2, (op, n, tx, model, mine)
        if not ok:
            return
        assert mine == [1, model.parity, model.pending, model.expected, model.tx]


_AFFINE = st.tuples(st.integers(-3, 3), st.integers(-3, 3), st.integers(-6, 6))


@settings(max_examples=60, deadline=None)
@given(st.lists(_AFFINE, min_size=1, max_size=3), st.integers(2, 5), st.integers(0, 4),
       st.integers(1, 4), st.booleans())
def test_isl_to_lia_agrees_with_isl(rows, mod, rem, den, complement):
    """A set with floors and mods, encoded as QF_LIA, is satisfiable exactly when ISL
    says it is not empty."""
    import islpy as isl

    from tilesafe.certcheck.smt import solve
    from tilesafe.proofs.isl_lia import Encoder, script

    cons = [f"{a}i + {b}j + {c} >= 0" for a, b, c in rows]
    cons.append(f"(i + j) mod {mod} = {rem % mod}")
    cons.append(f"j >= floor((i + N) / {den})")
    text = "[N] -> { [i, j] : " + " and ".join(cons) + " and 0 <= i <= 8 and 0 <= j <= 8 " \
        "and 0 <= N <= 5 }"
    s = isl.Set(text)
    if complement:
        s = s.complement().intersect(isl.Set("[N] -> { [i, j] : 0 <= i <= 8 and 0 <= j <= 8 "
                                             "and 0 <= N <= 5 }"))
    enc = Encoder()
    xs = enc.tuple_vars("x", 2)
    expect = "unsat" if s.is_empty() else "sat"
    assert solve(script(enc, [enc.set(s, xs)], expect), 30) == expect, text


def test_division_by_constants_is_linearised_when_cvc5_gives_up():
    """A periodicity fact of the shape z3 writes (nested div/mod by literals): the checker
    answers it, if need be after its own rewriting to fresh integers."""
    from tilesafe.certcheck.lia import linearise
    from tilesafe.certcheck.smt import solve

    query = ("(set-info :status unsat)(declare-fun i () Int)(declare-fun q () Int)"
             "(assert (>= i 16))(assert (let ((?x (+ i (* 12 q)))) (>= ?x 16)))"
             "(assert (or (distinct (mod i 2) (mod (+ i (* 12 q)) 2)) "
             "(distinct (mod (div i 3) 2) (mod (div (+ i (* 12 q)) 3) 2))))(check-sat)")
    assert "div" not in linearise(query) and "let" not in linearise(query)
    assert solve(query, 30) == "unsat"
    assert solve(query.replace("(* 12 q)", "(* 5 q)"), 30) == "sat"
