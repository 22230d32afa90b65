"""Tests of the `cloudtwin logs` commands, run in-process through the CLI entry point."""

from __future__ import annotations

import gzip
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from cloudtwin.cli.app import main


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def db(tmp_path: Path, capsys: pytest.CaptureFixture[str], hdfs_2k: Path) -> str:
    path = str(tmp_path / "ops.duckdb")
    assert run(capsys, "logs", "ingest", str(hdfs_2k), "--format", "hdfs", "--db", path)[0] == 0
    return path


def test_ingest_json_reports_what_was_added_then_nothing(
    db: str, capsys: pytest.CaptureFixture[str], hdfs_2k: Path
) -> None:
    code, out, err = run(capsys, "logs", "ingest", str(hdfs_2k), "-f", "hdfs", "--db", db, "--json")
    assert (code, err) == (0, "")
    [summary] = json.loads(out)
    assert (summary["lines"], summary["unparsed"], summary["templates"]) == (0, 0, 14)


def test_parse_jsonl_gives_one_object_per_input_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], hdfs_2k: Path
) -> None:
    log = tmp_path / "x.log.gz"
    lines = hdfs_2k.read_text().splitlines()[:50]
    log.write_bytes(gzip.compress(("\n".join(lines[:20] + ["not hdfs"] + lines[20:])).encode()))
    code, out, _ = run(capsys, "logs", "parse", str(log), "--format", "hdfs", "--jsonl")
    objs = [json.loads(x) for x in out.splitlines()]
    assert code == 0
    assert [o["line"] for o in objs] == list(range(1, 52))
    assert objs[20]["template_id"] is None and "does not match format" in objs[20]["error"]
    first = objs[0]
    assert first["template"] == "PacketResponder <*> for block <*> terminating"
    assert first["params"] == ["1", "blk_38865049064139660"]


def test_custom_masks_replace_the_format_masks(
    capsys: pytest.CaptureFixture[str], loghub: Path
) -> None:
    apache = str(loghub / "Apache" / "Apache_2k.log")
    code, out, _ = run(capsys, "logs", "parse", apache, "-f", "apache", "--json")
    plain = {json.loads(x)["template"] for x in out.splitlines()}
    code, out, _ = run(capsys, "logs", "parse", apache, "-f", "apache", "--json",
                       "--mask", r"\d+", "--mask", r"/[\w./-]+")
    masked = {json.loads(x)["template"] for x in out.splitlines()}
    assert code == 0
    assert "mod_jk child init <*> <*>" in plain and "mod_jk child init <*> -<*>" in masked
    code, _, err = run(capsys, "logs", "parse", apache, "-f", "apache", "--mask", "(")
    assert code == 2 and "mask '(' is not a valid pattern" in err
    code, _, err = run(capsys, "logs", "parse", apache, "-f", "apache", "--mask", r"(?<=x)\d")
    assert code == 2 and err.count("\n") == 1
    assert err.startswith("cloudtwin: error: mask '(?<=x)\\\\d' cannot run in time linear in the line")


@pytest.mark.parametrize("columns", [80, 160])
def test_search_reads_at_80_columns_and_shows_every_message_whole(
    db: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, columns: int
) -> None:
    monkeypatch.setenv("COLUMNS", str(columns))
    code, out, _ = run(capsys, "logs", "search", "blockMap", "--db", db, "--limit", "3", "--json")
    messages = [row["content"] for row in json.loads(out)]
    code, out, _ = run(capsys, "logs", "search", "blockMap", "--db", db, "--limit", "3")
    assert code == 0 and len(messages) == 3
    assert max(len(line) for line in out.splitlines()) <= columns
    assert out.splitlines()[0].startswith("3 lines of ")  # one source: named once, in the title
    flat = "".join(out.split())
    assert all("".join(message.split()) in flat for message in messages)


def test_templates_search_and_sql_as_json(db: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "logs", "templates", "--db", db, "--json", "--limit", "2")
    assert code == 0 and [t["lines"] for t in json.loads(out)] == [314, 311]
    code, out, _ = run(capsys, "logs", "search", "--template", "1", "--db", db, "--json",
                       "--since", "2008-11-10T00:00:00", "--limit", "1000")
    rows = json.loads(out)
    assert code == 0 and rows and all(r["template_id"] == 1 for r in rows)
    assert all(r["ts"] >= "2008-11-10T00:00:00" for r in rows)
    code, out, _ = run(capsys, "logs", "sql", "SELECT count(*) AS n FROM ops_lines", "--db", db,
                       "--json")
    assert (code, json.loads(out)) == (0, [{"n": 2000}])


def test_counts_and_anomalies_as_json(db: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "logs", "counts", "--window", "1h", "--by", "component",
                       "--db", db, "--json")
    rows = json.loads(out)
    assert code == 0 and sum(r["lines"] for r in rows) == 2000
    code, out, _ = run(capsys, "logs", "anomalies", "--window", "1h", "--pca", "--db", db,
                       "--json")
    found = json.loads(out)
    assert code == 0
    assert {a["kind"] for a in found} <= {"burst", "new", "silent", "pca"}
    assert all(set(a) >= {"window_start", "template", "score", "text"} for a in found)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["logs", "ingest", "missing.log", "-f", "hdfs"], "missing.log: no such file"),
        (["logs", "ingest", "{hdfs_2k}", "-f", "<Date> <Oops!> <Content>"], "placeholder <Oops!>"),
        (["logs", "parse", "{hdfs_2k}", "-f", "nosuch"], "format 'nosuch' is neither a preset"),
        (["logs", "search", "x", "--since", "yesterday"], "since 'yesterday': not an ISO"),
        (["logs", "counts", "--window", "5 parsecs"], "window '5 parsecs'"),
        (["logs", "anomalies", "--by", "node"], "by 'node'"),
        (["logs", "sql", "DROP TABLE ops_lines"], "read-only SELECT, got a DROP"),
        (["logs", "search"], "needs a TEXT argument or --template"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    db: str, capsys: pytest.CaptureFixture[str], hdfs_2k: Path, args: list[str], message: str
) -> None:
    extra = [] if args[1] == "parse" else ["--db", db]
    code, out, err = run(capsys, *[a.replace("{hdfs_2k}", str(hdfs_2k)) for a in args], *extra)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and message in err
    assert run(capsys, "logs", "sql", "SELECT count(*) FROM ops_lines", "--db", db)[0] == 0


def test_corrupt_gzip_is_exit_2_and_keeps_what_was_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], hdfs_2k: Path
) -> None:
    data = gzip.compress(hdfs_2k.read_bytes())
    bad = tmp_path / "cut.log.gz"
    bad.write_bytes(data[: len(data) // 2])
    db = str(tmp_path / "s.duckdb")
    code, _, err = run(capsys, "logs", "ingest", str(bad), "-f", "hdfs", "--db", db)
    assert code == 2 and "cut.log.gz: corrupt gzip data after line" in err
    code, out, _ = run(capsys, "logs", "sql", "SELECT count(*) AS n FROM ops_lines", "--db", db,
                       "--json")
    assert code == 0 and json.loads(out)[0]["n"] > 0


@pytest.mark.parametrize(
    "command", ["ingest", "parse", "templates", "search", "sql", "counts", "anomalies"]
)
def test_every_command_has_help_with_an_example(
    capsys: pytest.CaptureFixture[str], command: str
) -> None:
    code, out, _ = run(capsys, "logs", command, "--help")
    assert code == 0 and "Example:" in out and "--json" in out


DOCS = Path(__file__).resolve().parents[2] / "docs" / "logs.md"


def _doc_blocks(kind: str) -> list[str]:
    text = DOCS.read_text(encoding="utf-8")
    return re.findall(rf"```{kind}\n(.*?)```", text, flags=re.DOTALL)


def test_every_console_command_in_the_docs_runs(tmp_path: Path, loghub: Path) -> None:
    """Run docs/logs.md's commands in order, from a directory next to `shared/`."""
    work = tmp_path / "main"
    work.mkdir()
    (tmp_path / "shared").symlink_to(loghub.parents[1])
    (work / "examples").symlink_to(Path(__file__).resolve().parents[2] / "examples")
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    commands = [
        line[2:] for block in _doc_blocks("console") for line in block.splitlines()
        if line.startswith("$ ")
    ]
    assert len(commands) >= 15
    for command in commands:
        expected = 2 if command.endswith("# exit 2") else 0
        done = subprocess.run(["bash", "-o", "pipefail", "-c", command], cwd=work, env=env,
                              capture_output=True, text=True)
        if "| head" in command and done.returncode == 141:  # head closed the pipe early
            done.returncode = 0
        assert done.returncode == expected, (command, done.stderr)
        if expected == 0 and command.endswith("--json"):
            json.loads(done.stdout)
        if expected == 2:
            assert done.stderr.count("\n") == 1 and done.stdout == ""


def test_the_python_example_in_the_docs_runs() -> None:
    [code] = _doc_blocks("python")
    exec(compile(code, str(DOCS), "exec"), {})


def test_window_lengths_down_to_milliseconds() -> None:
    from datetime import timedelta

    from cloudtwin.errors import LogFormatError
    from cloudtwin.store.ops_usecases import parse_window

    # the twin emits operations data at millisecond scale; windows must reach it
    assert parse_window("25ms") == timedelta(milliseconds=25)
    assert parse_window("5m") == timedelta(minutes=5)
    for bad in ("0ms", "25", "1.5s", "2w"):
        with pytest.raises(LogFormatError, match="window"):
            parse_window(bad)


def test_ingest_on_a_process_pool_stores_what_a_serial_ingest_stores(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], loghub: Path
) -> None:
    # the pool's workers store their lines as segments (by default), read as one table;
    # `logs compact` folds them into the table, which then holds the serial store's rows
    from cloudtwin.store import Store

    log = loghub / "Hadoop" / "Hadoop_2k.log"
    tables = {}
    for executor in ("serial", "process", "compacted"):
        db = str(tmp_path / f"{'process' if executor == 'compacted' else executor}.duckdb")
        if executor == "compacted":
            code, out, err = run(capsys, "logs", "compact", "--db", db, "--json")
            assert (code, err) == (0, "")
            assert json.loads(out) == {"segments": 1, "lines": 2000, "removed_orphans": 0}
        else:
            code, out, err = run(capsys, "logs", "ingest", str(log), "--format", "hadoop", "--db",
                                 db, "--executor", executor, "--workers", "2", "--json")
            assert (code, err) == (0, "")
            assert json.loads(out)[0]["lines"] == 2000
        segments = Path(db + ".segments")
        assert len(list(segments.glob("*.parquet")) if segments.exists() else []) == (
            executor == "process")
        with Store(db, read_only=True) as store:
            tables[executor] = [
                store.connection.execute(f"SELECT * FROM {t} ORDER BY ALL").fetchall()
                for t in ("ops_lines", "ops_templates", "ops_unparsed", "ops_params")
            ]
    assert tables["serial"] == tables["process"] == tables["compacted"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--workers", "0", "--executor", "process"], "workers: at least 1, got 0"),
        (["--executor", "threads"], "Invalid value for '--executor'"),
        (["--address", "nowhere"], "address 'nowhere': expected auto or HOST:PORT"),
        (["--workers", "-5"], "workers: at least 1, got -5"),
        (["--address", "a" * 100 + ":1"], "not a host name"),
        (["--address", "a" * 100_000 + ":1"], "expected auto or HOST:PORT"),
        (["--address", "h:99999"], "expected auto or HOST:PORT"),
    ],
)
def test_bad_executor_flags_are_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], hdfs_2k: Path, args: list[str],
    message: str,
) -> None:
    code, out, err = run(capsys, "logs", "ingest", str(hdfs_2k), "--format", "hdfs",
                         "--db", str(tmp_path / "x.duckdb"), *args)
    assert code == 2
    assert message in err
    assert err.count("\n") == 1 and len(err) < 300
    assert not (tmp_path / "x.duckdb").exists()
