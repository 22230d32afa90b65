"""Opening a store that another process holds waits for it (up to a bound), then says why."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

import duckdb
import pytest

from cloudtwin.errors import StoreError
from cloudtwin.store.database import Store

HOLD = """
import sys, time, duckdb
con = duckdb.connect(sys.argv[1])
print("holding", flush=True)
if sys.argv[2] == "until-told":
    sys.stdin.readline()
else:
    time.sleep(float(sys.argv[2]))
"""


def _hold(db: Path, seconds: float | str) -> subprocess.Popen[str]:
    process = subprocess.Popen([sys.executable, "-c", HOLD, str(db), str(seconds)], stdout=subprocess.PIPE,
                               stdin=subprocess.PIPE, text=True)
    assert process.stdout is not None and process.stdout.readline().strip() == "holding"
    return process


def test_opening_waits_for_another_process_to_let_go(tmp_path: Path) -> None:
    # The holder lets go only when told, after the opening is seen blocked: nothing here
    # depends on how fast either process runs.
    db = tmp_path / "s.duckdb"
    duckdb.connect(str(db)).close()
    holder = _hold(db, "until-told")
    answers: list[object] = []

    def open_and_ask() -> None:
        with Store(db, lock_wait_s=600) as store:
            answers.append(store.query("SELECT 42")[1])

    opening = threading.Thread(target=open_and_ask)
    try:
        opening.start()
        opening.join(timeout=0.3)
        assert opening.is_alive() and not answers  # it waits while the other process holds it
    finally:
        assert holder.stdin is not None
        holder.stdin.write("\n")
        holder.stdin.flush()
        holder.wait(timeout=30)
    opening.join(timeout=600)
    assert answers == [[(42,)]]


def test_past_the_wait_the_error_names_the_store(tmp_path: Path) -> None:
    db = tmp_path / "s.duckdb"
    duckdb.connect(str(db)).close()
    holder = _hold(db, 3.0)
    try:
        with pytest.raises(StoreError, match=r"^store .*s\.duckdb: cannot open it: .*lock"):
            Store(db, lock_wait_s=0.2)
    finally:
        holder.wait(timeout=30)
