"""Evaluation runs in the store: written whole or not at all, even when the writer is killed."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np

from cloudtwin.store import Store
from cloudtwin.store.runs import FlowRows, list_runs, load_run, save_run


def _document(name: str = "demo") -> SimpleNamespace:
    """Results as the store reads them (its `RunResults` protocol): the indexed figures as
    attributes, the rest only in their JSON."""
    timeline = {"t_s": [0.0, 0.5, 1.0], "baseline_gbps": [10.0, 10.0, 0.0], "faulted_gbps": [10.0, 0.0, 5.0]}
    resiliency = {"recovered": True, "time_to_recover_s": 0.25, "dip": 1.0, "bytes_delayed": 1e6}
    strategy = {
        "performance": {"aggregate_gbps": 10.0},
        "resiliency": {**resiliency, "timeline": timeline},
        "complexity": {"score": 2.5},
    }
    document = {"scenario": name, "seed": 1, "strategies": {"ecmp": strategy}, "recommendation": "ecmp: x"}
    typed = SimpleNamespace(
        performance=SimpleNamespace(aggregate_gbps=10.0),
        resiliency=SimpleNamespace(**resiliency, timeline=SimpleNamespace(**timeline)),
        complexity=SimpleNamespace(score=2.5),
    )
    return SimpleNamespace(
        scenario=name, seed=1, recommendation="ecmp: x", strategies={"ecmp": typed}, to_json=lambda: document
    )


def _flows(count: int = 5) -> list[FlowRows]:
    z = np.zeros(count)
    return [
        FlowRows(
            "ecmp",
            ["job0"] * count,
            ["t1"] * count,
            np.arange(count),
            np.arange(count) + 1,
            z + 8,
            z,
            z + 1,
            z + 1,
            z,
            np.zeros(count, dtype=bool),
        )
    ]


def test_runs_are_listed_newest_first_and_loaded_whole(tmp_path: Path) -> None:
    with Store(tmp_path / "r.duckdb") as store:
        assert list_runs(store) == []
        first = save_run(store, _document("one"), _flows())
        second = save_run(store, _document("two"), _flows(3))
        assert (first, second) == (1, 2)
        assert [r["scenario"] for r in list_runs(store)] == ["two", "one"]
        loaded = load_run(store, 1)
        assert (loaded.run_id, loaded.flow_rows) == (1, 5)
        document = json.loads(loaded.json)
        assert document["scenario"] == "one"
        assert document["strategies"]["ecmp"]["resiliency"]["dip"] == 1.0
        _, rows = store.query("SELECT strategy, aggregate_gbps, dip, complexity_score FROM eval_strategies")
        assert rows == [("ecmp", 10.0, 1.0, 2.5), ("ecmp", 10.0, 1.0, 2.5)]
        _, rows = store.query("SELECT count(*) FROM eval_timelines WHERE run_id = 2")
        assert rows == [(3,)]


_KILLER = """
import json, os, signal, sys
import numpy as np
sys.path.insert(0, sys.argv[3])
from tests.store.test_runs import _document, _flows
import cloudtwin.store.runs as runs
from cloudtwin.store import Store
with Store(sys.argv[1]) as store:
    runs.save_run(store, _document("kept"), _flows())
    def die(*args, **kwargs):  # after the run and its flows are inserted, before the commit
        os.kill(os.getpid(), signal.SIGKILL)
    runs._insert_timelines = die
    runs.save_run(store, _document("lost"), _flows(7))
"""


def test_a_run_killed_halfway_leaves_no_rows(tmp_path: Path) -> None:
    db = tmp_path / "killed.duckdb"
    repo = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [sys.executable, "-c", _KILLER, str(db), "unused", str(repo)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == -signal.SIGKILL, done.stderr
    with Store(db) as store:
        assert [r["scenario"] for r in list_runs(store)] == ["kept"]
        _, rows = store.query("SELECT count(*) FROM eval_flows")
        assert rows == [(5,)]
        _, rows = store.query("SELECT count(*) FROM eval_strategies")
        assert rows == [(1,)]
        assert save_run(store, _document("after"), _flows()) == 2
