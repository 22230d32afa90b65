"""One writer, many readers: a process writing the store never makes a page fail, and the
service never makes the writer fail; nothing written is lost."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import httpx
from tests.cli.cli_helpers import REPO
from tests.service.server import running_server

READERS = 20
WRITES = 30

#: The writer: like a sweep, it opens the store for each run it stores; once it holds the
#: store for two seconds (as a long ingest does). Each run is a copy of run 1, re-numbered.
WRITER = """
import json, sys, time
from cloudtwin.store.database import Store
from cloudtwin.store.runs import FlowRows, save_run
from cloudtwin.evaluation.results import read_results
import numpy as np
db, count = sys.argv[1], int(sys.argv[2])
with Store(db, read_only=True) as s:
    document = json.loads(s.query("SELECT document FROM eval_runs WHERE run_id = 1")[1][0][0])
flows = [FlowRows("ecmp", ["j"] * 3, ["t1"] * 3, np.arange(3), np.arange(3) + 1, np.ones(3),
                  np.zeros(3), np.ones(3), np.ones(3), np.zeros(3), np.zeros(3, dtype=bool))]
for i in range(count):
    with Store(db) as store:
        save_run(store, read_results({**document, "scenario": f"written-{i}"}), flows)
        if i == count // 2:
            time.sleep(2.0)
    time.sleep(0.05)
"""


def test_twenty_readers_and_a_writer_see_no_lock_error_and_lose_nothing(db: Path, tmp_path: Path) -> None:
    with running_server(db, tmp_path) as server:
        statuses: Counter[int] = Counter()
        failures: list[str] = []
        stop = threading.Event()

        def read() -> None:
            with httpx.Client(base_url=server.url, timeout=30) as http:
                while not stop.is_set():
                    for path in ("/api/runs?limit=5", "/api/runs/1", "/", "/runs/2"):
                        answer = http.get(path)
                        statuses[answer.status_code] += 1
                        if answer.status_code != 200:
                            failures.append(f"{path}: {answer.status_code} {answer.text[:200]}")

        readers = [threading.Thread(target=read) for _ in range(READERS)]
        for thread in readers:
            thread.start()
        env = {"PYTHONPATH": str(REPO / "src")}
        writer = subprocess.run(
            [sys.executable, "-c", WRITER, str(db), str(WRITES)],
            capture_output=True, text=True, timeout=300, env=env,
        )
        time.sleep(0.5)
        stop.set()
        for thread in readers:
            thread.join(timeout=60)
        assert writer.returncode == 0, writer.stderr
        assert failures == [], failures[:5]
        assert sum(statuses.values()) > READERS * 4
        deadline = time.monotonic() + 30
        while (total := httpx.get(server.url + "/api/runs").json()["total"]) < 3 + WRITES:
            assert time.monotonic() < deadline, f"the service shows {total} runs"
            time.sleep(0.2)
        runs = httpx.get(server.url + "/api/runs?limit=500&sort=run_id&order=asc").json()["runs"]
        assert [r["run_id"] for r in runs] == list(range(1, 4 + WRITES))
        assert {r["scenario"] for r in runs[3:]} == {f"written-{i}" for i in range(WRITES)}
        assert "Traceback" not in server.output.read_text()
