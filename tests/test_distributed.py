"""Campaigns on Dask distributed (mutation/dask_engine.py): `tilesafe mutate --dask` and
`tilesafe verify --dask` on a LocalCluster of 2 worker processes give the local run's
results (everything but the seconds), and a task on the cluster keeps pool.py's contract:
a wall-clock limit that kills it, a crash reported with its message.
"""

from __future__ import annotations

import dataclasses
import io
import json
import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("distributed")

from tilesafe.cli import main  # noqa: E402
from tilesafe.mutation import campaign, pool  # noqa: E402
from tilesafe.mutation.dask_engine import DaskEngine  # noqa: E402
from tilesafe.mutation.worker import Settings  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
FILES = [ROOT / "corpus" / "good" / "elementwise.tsk",
         ROOT / "corpus" / "bad" / "ts201_tail_read_oob.tsk",
         ROOT / "corpus" / "bad" / "ts010_barrier_typo.tsk"]


def _without_seconds(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_seconds(v) for k, v in value.items()
                if not k.endswith("seconds")}  # seconds, setup_seconds: wall-clock times
    if isinstance(value, list):
        return [_without_seconds(v) for v in value]
    return value


@pytest.fixture(scope="module")
def engine():
    with DaskEngine("local", 2) as e:
        assert e.workers() == 2
        yield e


def test_tasks_keep_the_pools_contract(engine):
    tasks = [(time.sleep, 30), (int, "not a number"), (len, "four")]
    outcomes = engine.map_bounded(pool._plain, tasks, 2, 3.0)
    assert [o.index for o in outcomes] == [0, 1, 2]
    assert outcomes[0].status == "timeout" and outcomes[0].seconds < 30
    assert outcomes[1].status == "crash" and "ValueError" in outcomes[1].error
    assert outcomes[2].status == "ok" and outcomes[2].value == 4


def test_a_mutation_campaign_matches_the_local_one(engine):
    plan = campaign.make_plan([str(ROOT / "corpus" / "good" / "elementwise.tsk")], None,
                              seed=1, sample=6)
    settings = Settings(timeout_s=180, sizes=2, seeds=2)
    local = campaign.run_plan(plan, settings, 1)
    remote = campaign.run_plan(plan, settings, 2, None, engine)
    assert len(local.records) == 6
    assert _without_seconds(remote.to_json()) == _without_seconds(local.to_json())
    assert {r["verdict"] for r in local.records} >= {"killed"}


def _cli(*args: object) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main([str(a) for a in args], stdout=out, stderr=err, stdin=io.StringIO(""))
    return code, out.getvalue()


def test_verify_dask_local_matches_the_local_run():
    code, local = _cli("verify", "--format", "json", *FILES)
    dcode, remote = _cli("verify", "--format", "json", "--dask", "local", "--jobs", "2",
                         *FILES)
    assert code == dcode == 2  # a refuted kernel and a file that does not load
    assert _without_seconds(json.loads(remote)) == _without_seconds(json.loads(local))


def test_mutate_accepts_dask_and_an_unreachable_scheduler_is_a_usage_error():
    code, _ = _cli("mutate", "--dask", "tcp://127.0.0.1:9", "--sample", "1", "--quiet",
                   "--timeout", "60", FILES[0])
    assert code == 2


def test_settings_travel_unchanged():
    s = Settings(timeout_s=1.5, query_timeout_ms=7, max_states=9, sizes=1, seeds=1)
    assert Settings(**dataclasses.asdict(s)) == s
