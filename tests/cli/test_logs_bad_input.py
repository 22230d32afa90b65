"""Bad and hostile input to `cloudtwin logs`: no data lost, no hang, no unbounded memory."""

from __future__ import annotations

import io
import json
import random
import sys
from pathlib import Path

import pytest

from cloudtwin.cli.app import main


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def pipe(monkeypatch: pytest.MonkeyPatch, data: bytes) -> None:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data)))


def sql(capsys: pytest.CaptureFixture[str], db: Path, query: str) -> list[dict[str, object]]:
    code, out, err = run(capsys, "logs", "sql", query, "--db", str(db), "--json")
    assert code == 0, err
    return json.loads(out)  # type: ignore[no-any-return]


def test_a_second_stdin_stream_under_the_default_source_is_stored_whole(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
    loghub: Path, hdfs_2k: Path,
) -> None:
    db = tmp_path / "s.duckdb"
    pipe(monkeypatch, (loghub / "Spark" / "Spark_2k.log").read_bytes()[:300_000])
    assert run(capsys, "logs", "ingest", "-", "-f", "spark", "--db", str(db))[0] == 0
    pipe(monkeypatch, hdfs_2k.read_bytes())
    code, out, _ = run(capsys, "logs", "ingest", "-", "-f", "hdfs", "--db", str(db), "--json")
    assert code == 0
    [summary] = json.loads(out)
    assert (summary["lines"], summary["unparsed"]) == (2000, 0)
    pipe(monkeypatch, hdfs_2k.read_bytes())  # the same stream again adds nothing
    code, out, _ = run(capsys, "logs", "ingest", "-", "-f", "hdfs", "--db", str(db), "--json")
    assert json.loads(out)[0]["lines"] == 0
    [row] = sql(capsys, db, "SELECT count(*) AS n FROM ops_lines WHERE content LIKE '%blk_%'")
    assert row["n"] == 2000


def test_a_second_file_adds_no_duplicate_template(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], hdfs_2k: Path
) -> None:
    db = tmp_path / "s.duckdb"
    copy = tmp_path / "copy.log"
    copy.write_bytes(hdfs_2k.read_bytes())
    for path in (hdfs_2k, copy):
        assert run(capsys, "logs", "ingest", str(path), "-f", "hdfs", "--db", str(db))[0] == 0
    dupes = sql(capsys, db, "SELECT template FROM ops_templates GROUP BY 1 HAVING count(*) > 1")
    assert dupes == []
    assert sql(capsys, db, "SELECT count(*) AS n FROM ops_templates") == [{"n": 14}]


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b"\0" * 100_000, "is not a text log (a NUL byte at byte 0)"),
        (random.Random(7).randbytes(50_000), "is not a text log"),
    ],
)
def test_binary_input_is_refused_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], data: bytes, reason: str
) -> None:
    path = tmp_path / "blob.bin"
    path.write_bytes(data)
    code, out, err = run(capsys, "logs", "ingest", str(path), "-f", "hdfs",
                         "--db", str(tmp_path / "s.duckdb"))
    assert (code, out) == (2, "") and err.count("\n") == 1 and reason in err


def test_dev_zero_is_refused_at_once(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "logs", "ingest", "/dev/zero", "-f", "hdfs",
                       "--db", str(tmp_path / "s.duckdb"))
    assert code == 2 and "/dev/zero: is not a text log" in err


@pytest.fixture
def db(tmp_path: Path, capsys: pytest.CaptureFixture[str], hdfs_2k: Path) -> Path:
    path = tmp_path / "ops.duckdb"
    assert run(capsys, "logs", "ingest", str(hdfs_2k), "--format", "hdfs", "--db", str(path))[0] == 0
    return path


def test_a_huge_sql_result_is_refused_naming_the_limit_and_the_flag(
    db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    query = "SELECT * FROM range(100000000)"
    code, out, err = run(capsys, "logs", "sql", query, "--db", str(db))
    assert (code, out) == (2, "") and err.count("\n") == 1
    assert "more than 10,000 rows (max_rows)" in err and "--max-rows" in err
    code, out, _ = run(capsys, "logs", "sql", "SELECT * FROM range(20000)", "--db", str(db),
                       "--max-rows", "20000", "--json")
    assert code == 0 and len(json.loads(out)) == 20000


def test_a_long_sql_query_is_stopped_naming_the_limit_and_the_flag(
    db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    query = "SELECT count(*) FROM range(100000000000)"
    code, _, err = run(capsys, "logs", "sql", query, "--db", str(db), "--timeout", "0.5")
    assert code == 2 and "stopped after 0.5 s (timeout_s)" in err and "--timeout" in err


@pytest.mark.parametrize("limit", ["0", "-1"])
def test_a_template_limit_below_one_is_refused(
    db: Path, capsys: pytest.CaptureFixture[str], limit: str
) -> None:
    code, out, err = run(capsys, "logs", "templates", "--limit", limit, "--db", str(db))
    assert (code, out) == (2, "") and err.count("\n") == 1 and "--limit" in err


@pytest.mark.parametrize("command", ["counts", "anomalies"])
def test_too_many_windows_times_keys_are_refused_naming_the_flag(
    db: Path, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    # 2k HDFS lines over ~40 hours in 1 ms windows: 1.4e8 windows x 16 templates
    code, out, err = run(capsys, "logs", command, "--window", "1ms", "--db", str(db))
    assert (code, out) == (2, "") and err.count("\n") == 1
    assert "(max_cells)" in err and "--max-cells" in err
