"""`tilesafe mutate` (issue 12): operators, ids, linting, sampling and sharding, the bounded
worker pool, the differential classification of survivors, reports and the command line.

The checkers themselves are measured by the campaign (docs/mutation.md); here every step of
the machinery is checked on small, fast cases with verdicts worked out by hand.
"""

from __future__ import annotations

import dataclasses
import json
import os
import time
from pathlib import Path

import pytest

from tilesafe.frontend.load import compile_source
from tilesafe.frontend.parser import parse
from tilesafe.mutation import campaign, differential, operators, pool, report, sizes, worker
from tilesafe.mutation.generate import generate, propose

ROOT = Path(__file__).resolve().parent.parent
GOOD = ROOT / "corpus" / "good"

SMALL = """kernel small(x: global f32[N], y: global f32[N])
  where N > 0
  grid ((N + 63) / 64) block 64
{
  let i = block.x * 64 + thread
  if i < N {
    y[i] = x[i] + 1.0
  }
}
"""


def _by_operator(path: Path) -> dict[str, list]:
    _, cands, *_ = propose(path)
    out: dict[str, list] = {}
    for c in cands:
        out.setdefault(c.operator, []).append(c)
    return out


def _after(cands: list, before_part: str) -> set[str]:
    return {c.after for c in cands if before_part in c.before}


# ---- operators and ids -----------------------------------------------------------------------


def test_ids_are_stable_unique_and_every_mutant_is_one_new_kernel():
    path = GOOD / "pipeline2.tsk"
    original, first, *_ = propose(path)
    _, second, *_ = propose(path)
    assert [c.id for c in first] == [c.id for c in second]
    assert [c.text for c in first] == [c.text for c in second]
    assert len({c.id for c in first}) == len(first)
    assert len({c.text for c in first}) == len(first)
    header = original.splitlines()[0]
    for i, c in enumerate(first):
        assert c.text != original
        assert c.text.splitlines()[0] == header  # the parameter list is never touched
        assert c.id.startswith(f"pipeline2:{c.operator}:")
        if i % 10 == 0:
            parse(c.text)


def test_every_operator_family_fires_on_the_corpus():
    seen: set[str] = set()
    for name in ("pipeline2", "ragged_tail", "smem_fence_tma_store", "tma_copy_single",
                 "transpose_swizzled", "cute_layout", "named_handoff"):
        seen.update(_by_operator(GOOD / f"{name}.tsk"))
    seen.update(_by_operator(ROOT / "bench" / "kernels" / "gemm_multicast.tsk"))
    families = {op.split(".")[0] if op.split(".")[0] in ("int", "delete", "cluster") else op
                for op in seen}
    # no corpus TMA coordinate is a sum at the top; coord-drop is checked on its own below
    assert set(operators.FAMILIES) - {"coord-drop"} <= families | {"delete", "int"}
    for kind in ("wait", "arrive", "sync", "fence", "store", "init", "tma_load", "tma_store",
                 "commit_group", "wait_group", "let", "bar_sync", "bar_arrive"):
        assert f"delete.{kind}" in seen, kind
    for ctx in ("count", "parity", "box", "loop", "align", "where", "grid", "block", "tma-coord",
                "index", "const", "bar-id", "bar-count"):
        assert f"int.{ctx}" in seen, ctx


def test_protocol_edits_print_what_they_say():
    ops = _by_operator(GOOD / "pipeline2.tsk")
    producer_wait = "wait empty[s] parity (k / STAGES + 1) % 2"
    assert _after(ops["parity"], producer_wait) == {
        "wait empty[s] parity k / STAGES + 1",  # `% 2` dropped
        "wait empty[s] parity (k / STAGES) % 2",  # `+ 1` removed
    }
    assert "wait full[s] parity (k / STAGES + 1) % 2" in _after(ops["parity"], "wait full[s]")
    assert _after(ops["arrive-mode"], "arrive empty[s], one per warp") == {
        "arrive empty[s]", "arrive empty[s], one"}
    assert _after(ops["role-range"], "warps 1 .. 5") == {
        "role consumer = warps 2 .. 6 { ... }", "role consumer = warps 0 .. 4 { ... }",
        "role consumer = warps 1 .. 4 { ... }", "role consumer = warps 2 .. 5 { ... }"}
    assert "role producer = warp 0 { ... }" in _after(ops["elect-one"], "role producer")
    assert _after(ops["fence-kind"], "fence mbarrier_init") == {"fence proxy_async"}
    deleted = {c.before for c in ops["delete.wait"]}
    assert deleted == {producer_wait, "wait full[s] parity (k / STAGES) % 2"}
    assert all(c.after == "" for c in ops["delete.wait"])
    assert "arrive full[s]" in _after(ops["expect-tx"], "arrive full[s]")
    assert "arrive full[s], expect_tx bytes(buf)" in _after(ops["expect-tx"], "arrive full[s]")


def test_named_barrier_edits():
    ops = _by_operator(GOOD / "named_handoff.tsk")
    assert _after(ops["bar-mode"], "bar_sync 1, 256") == {"bar_arrive 1, 256"}
    assert _after(ops["bar-mode"], "bar_arrive 2, 256") == {"bar_sync 2, 256"}
    assert {c.before for c in ops["delete.bar_sync"]} == {"bar_sync 1, 256", "bar_sync 2, 256"}
    assert {c.before for c in ops["delete.bar_arrive"]} == {"bar_arrive 1, 256",
                                                            "bar_arrive 2, 256"}
    assert "bar_sync 1, 128" in _after(ops["int.bar-count"], "bar_sync 1, 256")
    assert "bar_sync 2, 256" in _after(ops["int.bar-id"], "bar_sync 1, 256")


def test_cluster_edits(tmp_path: Path):
    """The slips of the real-world cluster bugs: a scope forgotten, a release made relaxed,
    the cluster barrier written as the CTA's, a peer's buffer or barrier as the own, a
    multicast made plain, a mask or rank off by one, a cluster barrier deleted."""
    ops = _by_operator(ROOT / "corpus" / "cluster" / "multicast_ring.tsk")
    remote = "arrive empty_w@s[s], one per warp, scope cluster"
    assert _after(ops["cluster.scope"], remote) == {"arrive empty_w@s[s], one per warp"}
    assert _after(ops["cluster.relaxed"], remote) == {
        "arrive empty_w@s[s], one per warp, relaxed, scope cluster"}
    assert _after(ops["cluster.local"], remote) == {
        "arrive empty_w[s], one per warp, scope cluster"}
    assert {c.after for c in ops["cluster.cta-sync"]} == {"sync"}
    assert {c.before for c in ops["delete.cluster_barrier"]} == {"cluster_sync"}
    assert len(ops["delete.cluster_barrier"]) == 2
    assert [c.after for c in ops["cluster.unicast"]] == [
        "tma_load ws[s] <- tw[k * 64] signal full[s]"]
    assert {c.edit for c in ops["int.mask"]} >= {"`3` -> `1` (/2)", "`3` -> `2` (-1)"}
    ops = _by_operator(ROOT / "corpus" / "cluster" / "cluster_row_sum.tsk")
    assert [c.edit for c in ops["cluster.local"]] == ["`part@1[0]` -> `part[0]`"]
    assert "`1` -> `0` (-1)" in [c.edit for c in ops["int.rank"]]
    text = (ROOT / "corpus" / "cluster" / "cluster_row_sum.tsk").read_text()
    assert text.endswith("  cluster_sync\n}\n")
    split = tmp_path / "split.tsk"
    split.write_text(text[:-len("  cluster_sync\n}\n")] + "  cluster_arrive\n  cluster_wait\n}\n")
    relaxed = _by_operator(split)["cluster.relaxed"]
    assert [c.after for c in relaxed] == ["cluster_arrive relaxed"]


def test_guard_index_and_layout_edits():
    ops = _by_operator(GOOD / "ragged_tail.tsk")
    guard = "if row < M && col < N { ... }"
    assert _after(ops["guard-weaken"], guard) == {
        "if row <= M && col < N { ... }", "if row < M && col <= N { ... }",
        "if col < N { ... }", "if row < M { ... }"}
    assert "y[row, col] = x[col, row] + bias[col]" in _after(ops["index-swap"], "y[row, col]")
    ops = _by_operator(GOOD / "tma_copy_single.tsk")
    store = "dst[block.x * 64 + idx / 64, block.y * 64 + idx % 64] = tile[idx / 64, idx % 64]"
    assert ("dst[idx / 64, block.y * 64 + idx % 64] = tile[idx / 64, idx % 64]"
            in _after(ops["index-drop"], store))
    assert ("tma_load tile <- tin[block.y * 64, block.x * 64] signal ready"
            in _after(ops["coord-swap"], "tma_load"))
    layouts = _after(ops["layout-swizzle"], "shared tile")
    assert "shared tile: f16[64, 64] layout swizzle64B(row_major) align 1024" in layouts
    assert "shared tile: f16[64, 64] layout row_major align 1024" in layouts
    assert ("tensormap tin = tiled(src, box [64, 64])"
            in _after(ops["tensormap-swizzle"], "tensormap tin"))
    assert ("tensormap tin = tiled(src, box [64, 64], swizzle 128B, oob nan)"
            in _after(ops["oob-fill"], "tensormap tin"))
    ops = _by_operator(GOOD / "smem_fence_tma_store.tsk")
    assert _after(ops["wait-group"], "wait_group 0") == {"wait_group 0 read", "wait_group 1"}


def test_coordinate_terms_are_dropped(tsk):
    text = (GOOD / "tma_copy_single.tsk").read_text().replace(
        "tin[block.x * 64, block.y * 64]", "tin[block.x * 64, block.y * 32 + block.y * 32]")
    _, cands, *_ = propose(tsk(text), ("coord-drop",))
    assert {c.after for c in cands} == {"tma_load tile <- tin[block.x * 64, block.y * 32] "
                                        "signal ready"}
    assert len(cands) == 1  # dropping either term prints the same kernel: kept once


def test_swaps_never_move_a_declaration():
    for c in _by_operator(GOOD / "pipeline2.tsk")["swap-adjacent"]:
        for word in ("const ", "tensormap ", "shared ", "mbarrier "):
            assert word not in c.before


def test_identical_texts_are_kept_once(tsk):
    path = tsk(SMALL.replace("  let i", "  sync\n  sync\n  let i"))
    _, cands, _, _, dup = propose(path, ("delete.sync",))
    assert len(cands) == 1 and dup == 1


def test_only_lint_clean_mutants_are_kept(tsk):
    gen = generate(tsk(SMALL), ("delete.let", "int.block"))
    assert gen.lint_rejected == {"delete.let": 1}  # `i` is still used
    assert {m.operator for m in gen.mutants} == {"int.block"}
    assert len(gen.mutants) == 4


def test_selectors_pick_families_and_contexts():
    _, cands, *_ = propose(GOOD / "pipeline2.tsk", ("delete", "int.box"))
    assert {c.operator.split(".")[0] for c in cands} == {"delete", "int"}
    assert {c.operator for c in cands if c.operator.startswith("int")} == {"int.box"}
    assert operators.unknown_selectors(("nope", "int.box", "delete.wait", "parity")) == ["nope"]


# ---- sampling, sharding, merging, scores ----------------------------------------------------


def _population():
    """The printed edits of pipeline2 as mutants (linting them is not what is tested)."""
    path = str(GOOD / "pipeline2.tsk")
    return [campaign.Mutant(c.id, path, c.kernel, c.operator, c.edit, c.line, c.col, c.before,
                            c.after, c.text) for c in propose(path)[1]]


def test_stratified_sample_is_exact_deterministic_and_covers_operators():
    pop = _population()
    ops = {m.operator for m in pop}
    for k in (len(ops) - 3, len(ops), 2 * len(ops) + 1, len(pop) - 1):
        a = campaign.stratified_sample(pop, k, 7)
        assert len(a) == k == len({m.id for m in a})
        assert [m.id for m in a] == [m.id for m in campaign.stratified_sample(pop, k, 7)]
    a = campaign.stratified_sample(pop, 150, 7)
    assert {m.operator for m in a} == ops
    size = {op: sum(m.operator == op for m in pop) for op in ops}
    floor = {op: min(2, n) for op, n in size.items()}
    rest, left = 150 - sum(floor.values()), len(pop) - sum(floor.values())
    for op in ops:  # the floor, then in proportion to what each operator has left
        want = floor[op] + rest * (size[op] - floor[op]) / left
        assert abs(sum(m.operator == op for m in a) - want) < 1
    assert {m.id for m in campaign.stratified_sample(pop, 150, 8)} != {m.id for m in a}


def test_shards_partition_the_campaign():
    files = [str(GOOD / "elementwise.tsk")]
    whole = campaign.make_plan(files, ("int",), sample=15, seed=3)
    parts = [campaign.make_plan(files, ("int",), sample=15, seed=3, shard=(i, 3))
             for i in range(3)]
    ids = [m.id for p in parts for m in p.chosen]
    assert sorted(ids) == sorted(m.id for m in whole.chosen) and len(ids) == len(set(ids)) == 15
    with pytest.raises(campaign.CampaignError):
        campaign.parse_shard("3/3")
    with pytest.raises(campaign.CampaignError):
        campaign.parse_shard("one/two")


def _rec(i: int, verdict: str, kind: str | None = None, op: str = "parity") -> dict:
    r = {"id": f"k:{op}:{i}.1-{i}.2:x", "path": "corpus/good/k.tsk", "operator": op,
         "edit": "e", "verdict": verdict}
    if kind:
        r["kind"] = kind
    return r


def test_scores_separate_claimed_properties_from_value_bugs():
    recs = ([_rec(i, "killed") for i in range(3)] + [_rec(10, "missed", "runtime"),
            _rec(11, "missed", "value"), _rec(12, "missed", "value"), _rec(13, "equivalent"),
            _rec(14, "unknown"), _rec(15, "error")])
    o = campaign.summarize(recs)["overall"]
    assert (o["killed"], o["missed"], o["equivalent"], o["unknown"], o["error"]) == (3, 3, 1, 1, 1)
    assert o["score"] == 0.5 and o["in_scope_score"] == 0.75 and o["missed_value"] == 2
    assert [r["id"] for r in campaign.soundness_holes(recs)] == ["k:parity:10.1-10.2:x"]


def _result(shard: tuple[int, int], recs: list[dict], **header) -> campaign.Result:
    h = {"files": ["corpus/good/k.tsk"], "operators": [], "seed": 0, "sample": None,
         "shard": list(shard), "population": 4, **header}
    return campaign.Result(h, {}, {}, {}, {}, recs, 1.0)


def test_merge_combines_shards_and_refuses_strangers():
    a = _result((0, 2), [_rec(1, "killed"), _rec(3, "missed", "value")])
    b = _result((1, 2), [_rec(2, "equivalent"), _rec(4, "killed")])
    merged = campaign.merge([b, a])
    assert merged.header["shard"] == [0, 1]
    assert [r["id"] for r in merged.records] == sorted(r["id"] for r in a.records + b.records)
    assert campaign.summarize(merged.records)["overall"]["killed"] == 2
    with pytest.raises(campaign.CampaignError, match="twice"):
        campaign.merge([a, a])
    with pytest.raises(campaign.CampaignError, match="not shards"):
        campaign.merge([a, _result((1, 2), [], seed=5)])


# ---- the bounded pool ------------------------------------------------------------------------


def _task(task: str, progress) -> str:
    if task == "sleep":
        progress("started")
        time.sleep(60)
    if task == "boom":
        raise RuntimeError("boom")
    if task == "die":
        os._exit(3)
    return task.upper()


def test_pool_kills_stuck_tasks_and_survives_crashes():
    outcomes = pool.map_bounded(_task, ["a", "sleep", "boom", "die", "b"], jobs=2, timeout_s=3)
    status = [(o.status, o.value) for o in outcomes]
    assert status == [("ok", "A"), ("timeout", None), ("crash", None), ("crash", None),
                      ("ok", "B")]
    assert outcomes[1].progress == "started"
    assert "RuntimeError: boom" in outcomes[2].error
    assert "died" in outcomes[3].error


def test_a_timed_out_survivor_is_unknown_not_equivalent():
    m = propose(GOOD / "elementwise.tsk", ("int.block",))[1][0]
    mutant = campaign.Mutant(m.id, "corpus/good/elementwise.tsk", m.kernel, m.operator, m.edit,
                             m.line, m.col, m.before, m.after, m.text)
    out = pool.Outcome(0, "timeout", None, {"phase": "verified", "verify": {}}, 9.0)
    rec = campaign._from_outcome(mutant, out, 9.0)
    assert rec["verdict"] == "unknown" and "runs" in rec["reason"]
    rec = campaign._from_outcome(mutant, pool.Outcome(0, "timeout", None, None, 9.0), 9.0)
    assert rec["verdict"] == "unknown" and "verification did not finish" in rec["reason"]


# ---- sizes and the differential runs ---------------------------------------------------------


def _kernel(text: str, path: str = "k.tsk"):
    return compile_source(text, path).kernels[0]


def test_corpus_kernels_run_at_the_sizes_their_tests_use():
    import importlib.util
    import sys

    spec = importlib.util.spec_from_file_location("refs_for_mutation", ROOT / "tests" /
                                                  "corpus_refs.py")
    refs = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = refs
    spec.loader.exec_module(refs)
    want = list(refs.CASES["pipeline2"].sizes)
    assert want and list(sizes.corpus_sizes(GOOD / "pipeline2.tsk")) == want
    assert sizes.corpus_sizes(ROOT / "corpus" / "bad" / "ts402_double_init.tsk") == ()


def test_size_search_respects_both_where_clauses():
    orig = _kernel(SMALL.replace("where N > 0", "where N % 64 == 0, N > 0"))
    mut = _kernel(SMALL)  # the mutant dropped `N % 64 == 0`
    both, only = sizes.choose("elsewhere/k.tsk", orig, mut, 3)
    assert len(both) == 3 and all(s["N"] % 64 == 0 and s["N"] > 0 for s in both)
    assert only and all(s["N"] % 64 != 0 for s in only)
    assert sizes.choose("elsewhere/k.tsk", mut, mut, 2)[1] == []


def _compare(mutant_text: str, seeds: int = 2):
    orig = _kernel(SMALL, "orig.tsk")
    mut = _kernel(mutant_text, "mut.tsk")
    both, only = sizes.choose("elsewhere/orig.tsk", orig, mut, 2)
    return differential.compare("elsewhere/orig.tsk", orig, mut, both, only, seeds,
                                time.monotonic() + 120)


def test_differential_runs_tell_value_from_runtime_from_same():
    runs, complete = _compare(SMALL.replace("x[i] + 1.0", "x[i] - 1.0"))
    assert complete and {r.status for r in runs} == {"differs"}
    assert worker._evidence(runs) == "value"
    runs, _ = _compare(SMALL.replace("if i < N", "if i <= N"))
    assert runs[-1].status == "runtime" and "TS201" in runs[-1].detail
    assert worker._evidence(runs) == "runtime"
    runs, complete = _compare(SMALL.replace("block.x * 64 + thread", "thread + block.x * 64"))
    assert complete and {r.status for r in runs} == {"same"} and len(runs) == 4


def test_an_output_left_unwritten_is_its_own_kind():
    small = SMALL.replace("if i < N", "if i < N - 1")  # the last element is never written
    runs, complete = _compare(small)
    assert complete and {r.status for r in runs} == {"unwritten"}
    assert "never written" in runs[0].detail
    assert worker._evidence(runs) == "unwritten"


def test_schedule_dependent_outputs_are_a_race():
    d = {"M": 1}
    runs = [differential.Run(d, 0, "random", 0, "same", "", "aa"),
            differential.Run(d, 0, "pct", 0, "differs", "x", "bb")]
    assert differential.racy(runs) and worker._evidence(runs) == "race"
    runs = [differential.Run(d, 0, "random", 0, "differs", "x", "bb"),
            differential.Run(d, 0, "pct", 0, "differs", "x", "bb")]
    assert not differential.racy(runs) and worker._evidence(runs) == "value"


def test_a_mutant_launching_far_more_threads_is_not_interpreted():
    runs, _ = _compare(SMALL.replace("(N + 63) / 64", "(N + 63) * 64"))
    assert {r.status for r in runs} == {"skipped"} and "threads" in runs[0].detail


# ---- one mutant, end to end ------------------------------------------------------------------


def _classify(path: Path, operator: str, before: str, after: str | None = None) -> dict:
    _, cands, *_ = propose(path, (operator,))
    c = next(c for c in cands if before in c.before and (after is None or c.after == after))
    m = dict(dataclasses.asdict(c), path=str(path))
    settings = dataclasses.asdict(worker.Settings(timeout_s=120))
    return worker.classify({"mutant": m, "settings": settings}, lambda p: None)


def test_classify_kill_value_and_equivalence(tmp_path: Path):
    rec = _classify(GOOD / "tma_copy_single.tsk", "delete.wait", "wait ready")
    assert rec["verdict"] == "killed" and rec["verify"]["n_refuted"] > 0
    # A value bug: the value checker refutes it against elementwise's `ensures` (TS802);
    # without the spec, verification misses it and the runs show the difference.
    rec = _classify(GOOD / "elementwise.tsk", "arith-swap", "z[i]",
                    "z[i] = a[0] * x[i] - y[i]")
    assert rec["verdict"] == "killed" and rec["verify"]["n_refuted"] > 0
    nospec = tmp_path / "elementwise.tsk"
    nospec.write_text("\n".join(line for line in (GOOD / "elementwise.tsk").read_text()
                                .splitlines() if not line.strip().startswith("ensures")))
    rec = _classify(nospec, "arith-swap", "z[i]", "z[i] = a[0] * x[i] - y[i]")
    assert (rec["verdict"], rec["kind"]) == ("missed", "value")
    assert "z:" in rec["reason"]
    rec = _classify(GOOD / "ragged_tail.tsk", "swap-adjacent", "let row")
    assert rec["verdict"] == "equivalent" and "bit-identical" in rec["reason"]
    assert {r["status"] for r in rec["runs"]} == {"same"}


def test_check_options_set_every_budget_this_installation_has():
    from tilesafe.checkers.registry import CheckOptions

    opts = worker.check_options(worker.Settings(query_timeout_ms=1234, max_states=99))
    assert isinstance(opts, CheckOptions)
    assert opts.timeout_ms == 1234 and opts.max_states == 99


# ---- reports and the command line ------------------------------------------------------------


def test_reports_text_json_and_self_contained_html():
    recs = [_rec(1, "killed"), dict(_rec(2, "missed", "runtime"), edit="`a < b` -> `a <= b`",
                                    reason="TS201 out of bounds")]
    res = _result((0, 1), recs)
    text = report.text(res)
    assert text.count("\n") > 4 and "k:parity:1.1-1.2:x  parity  e  killed" in text
    assert "SOUNDNESS" in text and "in-scope score 50.0%" in text
    doc = json.loads(report.to_json(res))
    assert doc["summary"]["overall"]["killed"] == 1 and len(doc["records"]) == 2
    page = report.to_html(res)
    assert "<script" not in page and "http" not in page and "`a &lt; b`" in page


def test_cli_lists_and_refuses_bad_requests(cli, tsk, tmp_path):
    r = cli("mutate", str(GOOD / "elementwise.tsk"), "--list", "--operators", "int.block")
    assert r.code == 0 and r.out.strip().endswith("4 mutants (population 4)")
    for args, words in ((("--shard", "2/2"), "bad shard"), (("--operators", "bogus"), "unknown"),
                        (("--sample", "0"), "positive"), (("--jobs", "0"), "positive")):
        r = cli("mutate", str(GOOD / "elementwise.tsk"), *args)
        assert r.code == 2 and words in r.err and "Traceback" not in r.err + r.out
    r = cli("mutate", str(tmp_path / "missing.tsk"))
    assert r.code == 2 and "TS004" in r.out
    r = cli("mutate", str(tsk("kernel k(")))
    assert r.code == 2 and "TS003" in r.out
    r = cli("mutate", "--merge", str(tsk("not json", "r.json")))
    assert r.code == 2 and "not a tilesafe mutate JSON result" in r.err


def test_cli_campaign_in_shards_merges_to_the_whole(cli, tmp_path):
    args = (str(GOOD / "elementwise.tsk"), "--operators", "int.block,int.let", "--quiet")
    whole = cli("mutate", *args, "--format", "json")
    assert whole.code == 0
    parts = []
    for i in range(2):
        out = tmp_path / f"s{i}.json"
        assert cli("mutate", *args, "--shard", f"{i}/2", "--format", "json", "--out",
                   str(out)).code == 0
        parts.append(str(out))
    merged = cli("mutate", "--merge", *parts, "--format", "json")
    assert merged.code == 0
    a, b = json.loads(whole.out), json.loads(merged.out)
    assert a["summary"] == b["summary"] and a["summary"]["overall"]["killed"] == 8
    assert [r["id"] for r in a["records"]] == [r["id"] for r in b["records"]]
    text = cli("mutate", "--merge", *parts)
    assert text.code == 0 and "score 100.0%" in text.out


def test_workers_retire_and_are_replaced_without_losing_tasks(monkeypatch):
    monkeypatch.setattr(pool, "RETIRE_TASKS", 2)
    outcomes = pool.map_bounded(_task, [f"t{i}" for i in range(7)], jobs=2, timeout_s=30)
    assert [(o.status, o.value) for o in outcomes] == [("ok", f"T{i}") for i in range(7)]
    assert pool.rss_mb() > 0
