"""Tests of the line reader: offsets, line endings, gzip, resume, over-long lines."""

from __future__ import annotations

import gzip
import io
from pathlib import Path

import pytest

from cloudtwin.errors import LogFormatError
from cloudtwin.ops import open_log, read_batches
from cloudtwin.ops import reader as reader_module


def _all(stream: io.BufferedIOBase, **kwargs: int) -> tuple[list[str], list[int], list[int]]:
    texts: list[str] = []
    offsets: list[int] = []
    numbers: list[int] = []
    for batch in read_batches(stream, "test", **kwargs):  # type: ignore[arg-type]
        texts += batch.texts
        offsets += batch.offsets
        numbers += batch.numbers
    return texts, offsets, numbers


def test_offsets_count_bytes_and_endings_are_removed() -> None:
    data = "a\r\nbé\n\nlast".encode()
    texts, offsets, numbers = _all(io.BytesIO(data), batch_lines=2)
    assert texts == ["a", "bé", "", "last"]
    assert offsets == [0, 3, 7, 8]
    assert numbers == [1, 2, 3, 4]


def test_resuming_at_an_offset_gives_the_rest(tmp_path: Path) -> None:
    path = tmp_path / "x.log.gz"
    path.write_bytes(gzip.compress(b"one\ntwo\nthree\n"))
    with open_log(path) as stream:
        assert _all(stream, start_offset=4, start_line=2) == (["two", "three"], [4, 8], [2, 3])


def test_batches_are_bounded_and_cover_every_line() -> None:
    data = b"".join(b"line %d\n" % i for i in range(10_000))
    batches = list(read_batches(io.BytesIO(data), "t", batch_lines=3000))
    assert [len(b) for b in batches] == [3000, 3000, 3000, 1000]
    assert batches[-1].end_offset == len(data)


def test_an_over_long_line_is_cut_and_flagged(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(reader_module, "MAX_LINE_BYTES", 8)
    monkeypatch.setattr(reader_module, "_READ_CHUNK", 5)
    stream = io.BufferedReader(io.BytesIO(b"ok\n" + b"x" * 30 + b"\nafter\n"))
    [batch] = read_batches(stream, "t")  # type: ignore[arg-type]
    assert batch.texts == ["ok", "x" * 8, "after"]
    assert batch.offsets == [0, 3, 34] and batch.too_long == {1}


def test_missing_file_and_directory_are_clear_errors(tmp_path: Path) -> None:
    with pytest.raises(LogFormatError, match="nope.log: no such file"):
        open_log(tmp_path / "nope.log")
    with pytest.raises(LogFormatError, match="is a directory"):
        open_log(tmp_path)


def test_a_shorter_stream_than_the_ingested_part_is_an_error() -> None:
    with pytest.raises(LogFormatError, match="shorter .* than the part already ingested"):
        list(read_batches(io.BytesIO(b"abc\n"), "gz", start_offset=100))
