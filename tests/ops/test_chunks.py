"""Tests of reading a log as chunks of whole lines and mining a chunk into columns."""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cloudtwin.errors import LogFormatError
from cloudtwin.ops import PRESETS
from cloudtwin.ops import chunks as chunks_module
from cloudtwin.ops import columnar as columnar_module
from cloudtwin.ops.chunks import read_chunks
from cloudtwin.ops.columnar import chunk_pattern, mine_chunk
from cloudtwin.ops.miner import TemplateMiner

HDFS = PRESETS["hdfs"]
LINE = b"081109 203615 148 INFO dfs.DataNode: PacketResponder 1 for block blk_38 terminating\n"


def _mine(data: bytes, chunk_bytes: int = 1 << 20) -> list[columnar_module.MinedChunk]:
    miner = TemplateMiner(HDFS.miner_config())
    pattern = chunk_pattern(HDFS.format)
    return [
        mine_chunk(c, HDFS.format, miner, pattern)
        for c in read_chunks(io.BytesIO(data), "x", chunk_bytes=chunk_bytes)
    ]


def test_chunks_hold_whole_lines_and_count_them() -> None:
    found = list(read_chunks(io.BytesIO(b"a\nbb\r\nccc\nd"), "x", chunk_bytes=4))
    assert [(c.data, c.offset, c.first_line, c.lines) for c in found] == [
        (b"a\nbb\r\n", 0, 1, 2), (b"ccc\n", 6, 3, 1), (b"d", 10, 4, 1),
    ]
    assert [c.index for c in found] == [0, 1, 2]
    assert found[-1].end_offset == 11


def test_a_line_longer_than_the_limit_is_cut_and_kept_as_unparsed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(chunks_module, "MAX_LINE_BYTES", 200)
    monkeypatch.setattr(columnar_module, "MAX_LINE_BYTES", 200)
    monkeypatch.setattr(chunks_module, "_READ_BYTES", 64)
    data = LINE + b"x" * 1000 + b"\n" + LINE
    mined = _mine(data, chunk_bytes=64)
    lines = [r for m in mined for r in m.lines.to_pylist()]
    bad = [r for m in mined for r in m.unparsed.to_pylist()]
    assert [(r["byte_offset"], r["line"]) for r in lines] == [(0, 1), (len(LINE) + 1001, 3)]
    assert [(r["byte_offset"], r["line"], len(r["text"]), r["reason"]) for r in bad] == [
        (len(LINE), 2, 200, "line longer than 200 bytes (cut)")
    ]


def test_a_line_without_end_stops_the_chunks_after_the_lines_before_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(chunks_module, "MAX_LINE_BYTES", 8)
    monkeypatch.setattr(chunks_module, "MAX_UNBROKEN_BYTES", 100)
    monkeypatch.setattr(chunks_module, "_READ_BYTES", 5)
    stream = io.BufferedReader(io.BytesIO(b"ok\n" + b"y" * 10_000))
    got = []
    with pytest.raises(LogFormatError, match="x: line 2 runs for more than"):
        for chunk in read_chunks(stream, "x", chunk_bytes=2):  # type: ignore[arg-type]
            got.append(chunk.data)
    assert got == [b"ok\n"]


def test_invalid_utf8_is_replaced_line_by_line_and_offsets_stay_in_bytes() -> None:
    first = LINE.replace(b"terminating", b"termin\xffating")
    mined = _mine(first + LINE)[0]
    rows = mined.lines.to_pylist()
    assert [r["byte_offset"] for r in rows] == [0, len(first)]
    assert rows[0]["content"].endswith("termin\ufffdating")


def test_syslog_priorities_become_severities() -> None:
    fmt = PRESETS["syslog"].format
    miner = TemplateMiner()
    data = b"<11>Mar  1 10:00:00 host sshd[7]: a\n<14>Mar  1 10:00:01 host cron: b\nMar  1 10:00:02 h k: c\n"
    mined = mine_chunk(next(read_chunks(io.BytesIO(data), "x")), fmt, miner, chunk_pattern(fmt))
    assert mined.lines.column("level").to_pylist() == ["err", "info", None]
    assert mined.lines.column("component").to_pylist() == ["sshd", "cron", "k"]


def test_a_line_of_64_mib_is_one_line_naming_the_file_and_keeps_what_came_before(
    tmp_path: Path,
) -> None:
    log = tmp_path / "huge.log"
    with log.open("wb") as out:
        out.write(LINE * 3)
        out.write(b"z" * (65 << 20))
    db = tmp_path / "s.duckdb"
    done = subprocess.run(
        [str(Path(sys.executable).with_name("cloudtwin")), "logs", "ingest", str(log), "--format", "hdfs",
         "--db", str(db)],
        capture_output=True, text=True, timeout=300,
    )
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1
    assert "huge.log: line 4 runs for more than 64 MiB without a line break" in done.stderr
    import duckdb

    with duckdb.connect(str(db), read_only=True) as con:
        assert con.execute("SELECT count(*) FROM ops_lines").fetchone() == (3,)


def test_a_file_cut_short_while_it_is_read_is_an_error_naming_it(tmp_path: Path) -> None:
    from cloudtwin.ops import log_stream

    path = tmp_path / "moving.log"
    path.write_bytes(LINE * 40_000)  # 3.4 MB: more than the reader's buffer
    got = []
    with (
        log_stream(path.open("rb"), "moving.log") as log,
        pytest.raises(LogFormatError, match="moving.log: shrank from at least"),
    ):
        for chunk in read_chunks(log.stream, log.name, chunk_bytes=1 << 20):
            got.append(chunk.lines)
            if len(got) == 1:
                with path.open("r+b") as out:
                    out.truncate(1000)
    assert got and got[0] > 0


@settings(max_examples=60, deadline=None)
@given(data=st.lists(st.one_of(st.binary(max_size=120), st.just(LINE.rstrip(b"\n"))), max_size=40)
       .map(b"\n".join), chunk_bytes=st.integers(1, 500), fmt=st.sampled_from(["hdfs", "syslog", "jsonl"]))
def test_any_bytes_are_mined_into_lines_and_unparsed_lines_that_add_up(
    data: bytes, chunk_bytes: int, fmt: str
) -> None:
    preset = PRESETS[fmt]
    miner = TemplateMiner(preset.miner_config())
    pattern = chunk_pattern(preset.format)
    lines = unparsed = 0
    offsets: list[int] = []
    for chunk in read_chunks(io.BytesIO(data), "fuzz", chunk_bytes=chunk_bytes):
        mined = mine_chunk(chunk, preset.format, miner, pattern)
        assert mined.lines.num_rows + mined.unparsed.num_rows == chunk.lines
        lines += mined.lines.num_rows
        unparsed += mined.unparsed.num_rows
        offsets += mined.lines.column("byte_offset").to_pylist()
        offsets += mined.unparsed.column("byte_offset").to_pylist()
    expected = data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)
    assert lines + unparsed == expected
    assert sorted(offsets) == ([0] + [i + 1 for i, b in enumerate(data) if b == 10])[:expected]
