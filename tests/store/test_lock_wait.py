"""Opening a store that another process holds waits for it (up to a bound), then says why."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import duckdb
import pytest

from cloudtwin.errors import StoreError
from cloudtwin.store.database import Store

HOLD = """
import sys, time, duckdb
con = duckdb.connect(sys.argv[1])
print("holding", flush=True)
time.sleep(float(sys.argv[2]))
"""


def _hold(db: Path, seconds: float) -> subprocess.Popen[str]:
    process = subprocess.Popen([sys.executable, "-c", HOLD, str(db), str(seconds)], stdout=subprocess.PIPE,
                               text=True)
    assert process.stdout is not None and process.stdout.readline().strip() == "holding"
    return process


def test_opening_waits_for_another_process_to_let_go(tmp_path: Path) -> None:
    db = tmp_path / "s.duckdb"
    duckdb.connect(str(db)).close()
    holder = _hold(db, 1.0)
    try:
        start = time.monotonic()
        with Store(db) as store:
            assert store.query("SELECT 42")[1] == [(42,)]
        assert time.monotonic() - start > 0.3  # it did wait
    finally:
        holder.wait(timeout=30)


def test_past_the_wait_the_error_names_the_store(tmp_path: Path) -> None:
    db = tmp_path / "s.duckdb"
    duckdb.connect(str(db)).close()
    holder = _hold(db, 3.0)
    try:
        with pytest.raises(StoreError, match=r"^store .*s\.duckdb: cannot open it: .*lock"):
            Store(db, lock_wait_s=0.2)
    finally:
        holder.wait(timeout=30)
