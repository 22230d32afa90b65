"""Tests of log ingestion into the store: idempotence, resume after a kill, unparsed lines."""

from __future__ import annotations

import gzip
import io
import os
import signal
import subprocess
import sys
from datetime import datetime
from pathlib import Path

import pytest

from cloudtwin.errors import LogFormatError, StoreError
from cloudtwin.ops import PRESETS, LogRecord, Preset, log_stream
from cloudtwin.store import IngestSummary, Store, ingest_records, ingest_stream

HDFS = PRESETS["hdfs"]


def ingest_file(store: Store, path: Path, preset: Preset, **kwargs: object) -> IngestSummary:
    """Ingest a file as the CLI does: opened here, named by its absolute path."""
    with log_stream(path.open("rb"), str(path.resolve())) as log:
        return ingest_stream(store, log, preset, **kwargs)  # type: ignore[arg-type]


def _stdin(data: bytes, name: str = "stdin:hdfs") -> object:
    return log_stream(io.BytesIO(data), name)


def _generated_log(path: Path, lines: int) -> None:
    """HDFS-style lines from four templates, with a malformed line every 997 lines."""
    with path.open("w", encoding="utf-8") as out:
        for i in range(lines):
            if i % 997 == 500:
                out.write(f"garbage line {i} without a header\n")
                continue
            kind = i % 4
            msg = [
                f"Receiving block blk_{i} src: /10.0.{i % 250}.1:50010 dest: /10.0.0.2:50010",
                f"PacketResponder {i % 3} for block blk_{i} terminating",
                f"Received block blk_{i} of size {i * 7} from /10.0.0.{i % 200}",
                f"Deleting block blk_{i} file /data/{i}/blk_{i}",
            ][kind]
            out.write(f"081109 {203615 + i % 40:06d} {i % 900} INFO dfs.DataNode: {msg}\n")


def _counts(store: Store) -> dict[str, object]:
    q = store.query
    return {
        "lines": q("SELECT count(*), count(DISTINCT byte_offset) FROM ops_lines")[1],
        "unparsed": q("SELECT count(*) FROM ops_unparsed")[1],
        "params": q("SELECT count(*) FROM ops_params")[1],
        "templates": q("SELECT template_id, template, size FROM ops_templates ORDER BY 1")[1],
        "per_template": q("SELECT template_id, count(*) FROM ops_lines GROUP BY 1 ORDER BY 1")[1],
    }


def test_reingesting_the_same_file_adds_nothing(tmp_path: Path, hdfs_2k: Path) -> None:
    with Store(tmp_path / "s.duckdb") as store:
        first = ingest_file(store, hdfs_2k, HDFS)
        before = _counts(store)
        again = ingest_file(store, hdfs_2k, HDFS)
        assert (first.lines, again.lines, again.unparsed, again.new_templates) == (2000, 0, 0, 0)
        assert _counts(store) == before


def test_gzip_and_plain_copies_give_the_same_store(tmp_path: Path, hdfs_2k: Path) -> None:
    gz = tmp_path / "hdfs.log.gz"
    gz.write_bytes(gzip.compress(hdfs_2k.read_bytes()))
    with Store(tmp_path / "a.duckdb") as a, Store(tmp_path / "b.duckdb") as b:
        ingest_file(a, hdfs_2k, HDFS)
        ingest_file(b, gz, HDFS)
        assert _counts(a) == _counts(b)
        assert a.query("SELECT min(ts), max(ts) FROM ops_lines")[1] == [
            (datetime(2008, 11, 9, 20, 36, 15), datetime(2008, 11, 11, 10, 20, 17))
        ]


def test_lines_that_do_not_fit_are_kept_with_the_reason(tmp_path: Path) -> None:
    log = tmp_path / "mixed.log"
    log.write_text(
        "081109 203615 148 INFO dfs.DataNode: PacketResponder 1 for block blk_1 terminating\n"
        "this is not hdfs\n\n"
        "081109 203616 149 INFO dfs.DataNode: PacketResponder 2 for block blk_2 terminating\n"
    )
    with Store(tmp_path / "s.duckdb") as store:
        summary = ingest_file(store, log, HDFS)
        assert (summary.lines, summary.unparsed) == (2, 2)
        rows = store.query("SELECT line, text, reason FROM ops_unparsed ORDER BY line")[1]
    assert rows[0][:2] == (2, "this is not hdfs")
    assert rows[0][2].startswith("does not match format '<Date> <Time> <Pid>")
    assert rows[1] == (3, "", "empty line")


def test_a_grown_file_adds_only_its_new_lines(tmp_path: Path) -> None:
    log = tmp_path / "grow.log"
    _generated_log(log, 3000)
    text = log.read_text()
    head = text[: text.index("\n", len(text) // 2) + 1]
    log.write_text(head)
    with Store(tmp_path / "s.duckdb") as store:
        first = ingest_file(store, log, HDFS, chunk_bytes=500 * 100)
        log.write_text(text)
        second = ingest_file(store, log, HDFS, chunk_bytes=500 * 100)
        assert first.lines + second.lines + first.unparsed + second.unparsed == 3000
        assert second.skipped_bytes == len(head.encode())
        grown = _counts(store)
    with Store(tmp_path / "clean.duckdb") as clean:
        ingest_file(clean, log, HDFS, chunk_bytes=500 * 100)
        assert _counts(clean) == grown


def test_a_changed_file_is_refused(tmp_path: Path) -> None:
    log = tmp_path / "a.log"
    _generated_log(log, 100)
    with Store(tmp_path / "s.duckdb") as store:
        ingest_file(store, log, HDFS)
        log.write_text("081109 203615 1 INFO x: something else entirely\n")
        with pytest.raises(StoreError, match="first .* bytes differ"):
            ingest_file(store, log, HDFS)


def test_corrupt_gzip_keeps_what_was_read_and_names_the_line(tmp_path: Path, hdfs_2k: Path) -> None:
    data = gzip.compress(hdfs_2k.read_bytes())
    bad = tmp_path / "bad.log.gz"
    bad.write_bytes(data[: len(data) // 2])
    with Store(tmp_path / "s.duckdb") as store:
        with pytest.raises(LogFormatError, match=r"bad.log.gz: corrupt gzip data after line \d+"):
            ingest_file(store, bad, HDFS, chunk_bytes=100 * 100)
        kept = store.query("SELECT count(*) FROM ops_lines")[1][0][0]
    assert 500 < kept < 2000


def test_stdin_streams_resume_by_source_name(tmp_path: Path, hdfs_2k: Path) -> None:
    data = hdfs_2k.read_bytes()
    with Store(tmp_path / "s.duckdb") as store:
        one = ingest_stream(store, _stdin(data), HDFS, new_stream="append")  # type: ignore[arg-type]
        two = ingest_stream(store, _stdin(data), HDFS, new_stream="append")  # type: ignore[arg-type]
    assert (one.lines, two.lines) == (2000, 0)


def test_structured_records_are_mined_into_the_same_store(tmp_path: Path, hdfs_2k: Path) -> None:
    records = [
        LogRecord(datetime(2026, 1, 1, 0, 0, i), "leaf1", "err", "lldp",
                  f"Interface Ethernet{i % 4} changed state to {'down' if i % 2 else 'up'}")
        for i in range(40)
    ]
    with Store(tmp_path / "s.duckdb") as store:
        ingest_file(store, hdfs_2k, HDFS)
        first = ingest_records(store, records[:30], "sim:run1/leaf1")
        second = ingest_records(store, records, "sim:run1/leaf1")
        assert (first.lines, second.lines) == (30, 10)
        rows = store.query(
            "SELECT t.template, count(*), min(l.ts) FROM ops_lines l "
            "JOIN ops_sources s USING (source_id) JOIN ops_templates t USING (template_id) "
            "WHERE s.source = 'sim:run1/leaf1' GROUP BY 1"
        )[1]
    assert rows == [
        ("Interface <*> changed state to <*>", 40, datetime(2026, 1, 1, 0, 0, 0))
    ]


def test_a_killed_ingest_resumes_to_the_same_store_as_a_clean_one(tmp_path: Path) -> None:
    log = tmp_path / "big.log"
    _generated_log(log, 60_000)
    killed_db = tmp_path / "killed.duckdb"
    script = (
        "import sys\n"
        "from cloudtwin.ops import PRESETS\n"
        "from pathlib import Path\n"
        "from cloudtwin.ops import PRESETS, log_stream\n"
        "from cloudtwin.store import Store, ingest_stream\n"
        "path = Path(sys.argv[2])\n"
        "with Store(sys.argv[1]) as s, log_stream(path.open('rb'), str(path.resolve())) as log:\n"
        "    ingest_stream(s, log, PRESETS['hdfs'], chunk_bytes=1000 * 100, commit_lines=1,\n"
        "                  progress=lambda n: print(n, flush=True))\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", script, str(killed_db), str(log)],
        stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    assert proc.stdout is not None
    for _ in range(5):  # five batches committed, the process is busy with the next ones
        assert proc.stdout.readline()
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL
    with Store(killed_db) as store:
        partial = store.query(
            "SELECT (SELECT count(*) FROM ops_lines) + (SELECT count(*) FROM ops_unparsed)"
        )[1][0][0]
        assert 5000 <= partial < 60_000
        resumed = ingest_file(store, log, HDFS, chunk_bytes=1000 * 100)
        assert resumed.skipped_bytes > 0
        after_resume = _counts(store)
    with Store(tmp_path / "clean.duckdb") as clean:
        ingest_file(clean, log, HDFS, chunk_bytes=1000 * 100)
        assert _counts(clean) == after_resume


def test_another_stream_under_a_used_source_is_stored_whole(tmp_path: Path, hdfs_2k: Path) -> None:
    # A second, different stream piped in under the same (default) source name used to
    # be skipped up to the first stream's length: 505 of 2,000 lines stored, silently.
    second = hdfs_2k.read_bytes()
    first = second[: second.index(b"\n", 196_000) + 1]
    with Store(tmp_path / "s.duckdb") as store:
        a = ingest_stream(store, _stdin(b"x: " + first, "stdin"), HDFS,  # type: ignore[arg-type]
                          new_stream="append")
        b = ingest_stream(store, _stdin(second, "stdin"), HDFS,  # type: ignore[arg-type]
                          new_stream="append")
        again = ingest_stream(store, _stdin(second, "stdin"), HDFS,  # type: ignore[arg-type]
                              new_stream="append")
        rows = store.query("SELECT count(*), count(DISTINCT byte_offset) FROM ops_lines")[1]
    assert a.lines + a.unparsed == first.count(b"\n")
    assert (b.lines, b.unparsed, b.skipped_bytes) == (2000, 0, 0)
    assert (again.lines, again.skipped_bytes) == (0, len(second))
    assert rows == [(a.lines + 2000, a.lines + 2000)]


def test_a_file_source_refuses_a_different_stream(tmp_path: Path) -> None:
    with Store(tmp_path / "s.duckdb") as store:
        ingest_stream(store, _stdin(b"081109 203615 1 INFO x: a\n", "f"), HDFS)  # type: ignore[arg-type]
        with pytest.raises(StoreError, match="source 'f': its first 26 bytes differ"):
            ingest_stream(store, _stdin(b"081109 203615 1 INFO y: b\n", "f"), HDFS)  # type: ignore[arg-type]


def _duplicates(store: Store) -> list[tuple[object, ...]]:
    return store.query(
        "SELECT template, count(*) FROM ops_templates GROUP BY 1 HAVING count(*) > 1"
    )[1]


def test_a_second_ingest_mines_into_the_same_templates_as_one_run(tmp_path: Path, hdfs_2k: Path) -> None:
    # Restoring the miner lost its exact-message cache: a second file of the same lines
    # created templates 17 and 18, equal in text to 14 and 16.
    copy = tmp_path / "copy.log"
    copy.write_bytes(hdfs_2k.read_bytes())
    both = tmp_path / "both.log"
    both.write_bytes(hdfs_2k.read_bytes() * 2)
    with Store(tmp_path / "two.duckdb") as store:
        ingest_file(store, hdfs_2k, HDFS)
        second = ingest_file(store, copy, HDFS)
        assert (second.lines, second.new_templates) == (2000, 0)
        assert _duplicates(store) == []
        two = _counts(store)
    with Store(tmp_path / "one.duckdb") as store:
        ingest_file(store, both, HDFS)
        one = _counts(store)
    assert two["templates"] == one["templates"]
    assert two["per_template"] == one["per_template"]


def test_a_resumed_stream_stores_every_line_once_and_no_duplicate_template(
    tmp_path: Path, hdfs_2k: Path,
) -> None:
    data = hdfs_2k.read_bytes()
    cut = data.index(b"\n", len(data) // 3) + 1
    with Store(tmp_path / "s.duckdb") as store:
        ingest_stream(store, _stdin(data[:cut]), HDFS, new_stream="append")  # type: ignore[arg-type]
        ingest_stream(store, _stdin(data), HDFS, new_stream="append")  # type: ignore[arg-type]
        resumed = _counts(store)
        assert _duplicates(store) == []
    with Store(tmp_path / "clean.duckdb") as clean:
        ingest_stream(clean, _stdin(data), HDFS, new_stream="append")  # type: ignore[arg-type]
        assert _counts(clean) == resumed


def test_the_tree_settings_are_kept_and_an_older_store_keeps_drains_ways(
    tmp_path: Path, hdfs_2k: Path,
) -> None:
    from cloudtwin.ops import MinerConfig
    from cloudtwin.store.ops_tables import load_miner

    with Store(tmp_path / "s.duckdb") as store:
        ingest_file(store, hdfs_2k, HDFS)
        assert load_miner(store, MinerConfig()).config == MinerConfig()
        with store.transaction() as con:  # a store from before the measure was kept
            con.execute("DELETE FROM ops_miner WHERE key = 'similarity'")
            con.execute("UPDATE ops_miner SET value = '4' WHERE key = 'depth'")
            con.execute("UPDATE ops_miner SET value = '0.5' WHERE key = 'sim_threshold'")
            con.execute("DELETE FROM ops_miner WHERE key = 'join_by_words'")
        old = load_miner(store, MinerConfig()).config
        assert (old.similarity, old.depth, old.sim_threshold) == ("drain", 4, 0.5)
        assert not old.join_by_words
