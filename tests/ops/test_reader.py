"""Tests of the line reader: offsets, line endings, gzip, resume, over-long lines."""

from __future__ import annotations

import gzip
import io
from pathlib import Path

import pytest

from cloudtwin.errors import LogFormatError
from cloudtwin.ops import log_stream, read_batches
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
    with log_stream(path.open("rb"), str(path)) as log:
        texts = _all(log.stream, start_offset=4, start_line=2)  # type: ignore[arg-type]
        assert texts == (["two", "three"], [4, 8], [2, 3])


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


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b"\0" * 5000, "a NUL byte at byte 0"),
        (bytes(range(1, 256)) * 8, "control bytes or invalid UTF-8"),
    ],
)
def test_a_stream_that_is_not_text_is_refused_at_once(data: bytes, reason: str) -> None:
    with pytest.raises(LogFormatError, match=reason):
        log_stream(io.BytesIO(data), "x.bin")


def test_a_gzip_stream_is_detected_from_its_head_and_text_survives() -> None:
    log = log_stream(io.BytesIO(gzip.compress("é\nb\n".encode())), "x")
    assert _all(log.stream)[0] == ["é", "b"]  # type: ignore[arg-type]


def test_a_line_without_end_stops_reading_with_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(reader_module, "MAX_LINE_BYTES", 8)
    monkeypatch.setattr(reader_module, "MAX_UNBROKEN_BYTES", 100)
    monkeypatch.setattr(reader_module, "_READ_CHUNK", 5)
    stream = io.BufferedReader(io.BytesIO(b"ok\n" + b"y" * 10_000))
    with pytest.raises(LogFormatError, match="line 2 runs for more than"):
        _all(stream)  # type: ignore[arg-type]


def test_a_shorter_stream_than_the_ingested_part_is_an_error() -> None:
    with pytest.raises(LogFormatError, match="shorter .* than the part already ingested"):
        list(read_batches(io.BytesIO(b"abc\n"), "gz", start_offset=100))
