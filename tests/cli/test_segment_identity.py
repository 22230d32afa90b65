"""A store whose segment files are not the ones it registered: `logs sql`, `logs compact` and
the service each refuse it in one line naming the segment, and nothing is stored."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.cli.cli_helpers import cloudtwin

from cloudtwin.ops import PRESETS, log_stream
from cloudtwin.store import Store, ingest_stream
from cloudtwin.store.ops_segments import segment_dir


@pytest.fixture
def swapped(tmp_path: Path, hdfs_2k: Path) -> tuple[Path, str]:
    """A store of hdfs_2k in four segments, the first two swapped; the name of the first."""
    db = tmp_path / "ops.duckdb"
    with Store(db) as store, log_stream(hdfs_2k.open("rb"), "hdfs") as stream:
        ingest_stream(store, stream, PRESETS["hdfs"], chunk_bytes=80_000, segments=True)
    first, second = sorted(segment_dir(db).iterdir())[:2]  # type: ignore[union-attr]
    parked = first.with_name("parked")
    first.rename(parked)
    second.rename(first)
    parked.rename(second)
    return db, first.name


def test_logs_sql_and_compact_refuse_a_swapped_segment(swapped: tuple[Path, str]) -> None:
    db, name = swapped
    for args in (["logs", "sql", "SELECT count(*) FROM ops_lines"], ["logs", "compact"]):
        done = cloudtwin(*args, "--db", str(db))
        assert done.returncode == 2, done.stderr
        assert done.stdout == "" and len(done.stderr.strip().splitlines()) == 1, done.stderr
        assert f"segment {name}" in done.stderr and "Traceback" not in done.stderr
    assert len(list(segment_dir(db).iterdir())) >= 2  # type: ignore[union-attr]  # nothing compacted


def test_the_service_refuses_a_swapped_segment(swapped: tuple[Path, str], tmp_path: Path) -> None:
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient

    from cloudtwin.service import ServiceSettings, create_app

    db, name = swapped
    settings = ServiceSettings(db=db, token="test-token-0123456789", snapshot_dir=tmp_path)
    with TestClient(create_app(settings)) as client:
        answer = client.get("/api/logs/templates")
    assert answer.status_code == 400, answer.text
    assert f"segment {name}" in answer.json()["error"]["message"]
