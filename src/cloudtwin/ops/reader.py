"""Reading log lines from plain or gzip files and streams, in batches of bounded size."""

from __future__ import annotations

import gzip
import io
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from cloudtwin.errors import LogFormatError

__all__ = ["MAX_LINE_BYTES", "LineBatch", "open_log", "read_batches"]

#: Longer lines are cut to this many bytes and reported as unparsed.
MAX_LINE_BYTES = 1 << 20
DEFAULT_BATCH_LINES = 20_000
_GZIP_MAGIC = b"\x1f\x8b"
_SKIP_CHUNK = 1 << 20


@dataclass
class LineBatch:
    """Consecutive lines: their text (no line ending), byte offsets and 1-based numbers.

    ``end_offset`` is the offset just after the last line, where the next batch starts;
    ``too_long`` holds the positions (within the batch) of lines that were cut.
    """

    texts: list[str] = field(default_factory=list)
    offsets: list[int] = field(default_factory=list)
    numbers: list[int] = field(default_factory=list)
    end_offset: int = 0
    too_long: set[int] = field(default_factory=set)

    def __len__(self) -> int:
        return len(self.texts)


def open_log(path: str | Path) -> BinaryIO:
    """Open a log file for binary reading, decompressing it if it is gzip."""
    p = Path(path)
    try:
        raw = p.open("rb")
    except FileNotFoundError as err:
        raise LogFormatError(f"{path}: no such file") from err
    except IsADirectoryError as err:
        raise LogFormatError(f"{path}: is a directory, not a log file") from err
    except OSError as err:
        raise LogFormatError(f"{path}: cannot open ({err.strerror})") from err
    if raw.peek(2)[:2] == _GZIP_MAGIC:
        return gzip.GzipFile(fileobj=raw, mode="rb")  # type: ignore[return-value]
    return raw


def read_batches(
    stream: BinaryIO,
    name: str,
    start_offset: int = 0,
    start_line: int = 1,
    batch_lines: int = DEFAULT_BATCH_LINES,
) -> Iterator[LineBatch]:
    """Yield the lines of ``stream`` from ``start_offset`` on, ``batch_lines`` at a time.

    Memory is bounded by one batch. Offsets count bytes of the (decompressed) stream,
    so a later call can resume exactly where a committed batch ended. A corrupt or
    truncated gzip stream yields the lines read so far, then raises LogFormatError.

    >>> import io
    >>> [b.texts for b in read_batches(io.BytesIO(b"a\\r\\nb\\nc"), "x", batch_lines=2)]
    [['a', 'b'], ['c']]
    """
    offset = _skip(stream, name, start_offset)
    number = start_line
    batch = LineBatch(end_offset=offset)
    try:
        for raw in iter(lambda: stream.readline(MAX_LINE_BYTES), b""):
            length = len(raw)
            if length == MAX_LINE_BYTES and not raw.endswith(b"\n"):
                length += _discard_rest_of_line(stream)
                batch.too_long.add(len(batch.texts))
            batch.texts.append(raw.decode("utf-8", "replace").rstrip("\r\n"))
            batch.offsets.append(offset)
            batch.numbers.append(number)
            offset += length
            number += 1
            batch.end_offset = offset
            if len(batch.texts) >= batch_lines:
                yield batch
                batch = LineBatch(end_offset=offset)
    except (gzip.BadGzipFile, EOFError, zlib.error) as err:
        if batch.texts:
            yield batch
        raise LogFormatError(
            f"{name}: corrupt gzip data after line {number - 1} "
            f"(byte {offset} of the decompressed stream): {err}"
        ) from err
    if batch.texts:
        yield batch


def _skip(stream: BinaryIO, name: str, start_offset: int) -> int:
    if start_offset <= 0:
        return 0
    if not isinstance(stream, gzip.GzipFile) and stream.seekable():
        stream.seek(start_offset)
        return start_offset
    left = start_offset
    try:
        while left > 0:
            chunk = stream.read(min(left, _SKIP_CHUNK))
            if not chunk:
                break
            left -= len(chunk)
    except (gzip.BadGzipFile, EOFError, zlib.error) as err:
        raise LogFormatError(f"{name}: corrupt gzip data before byte {start_offset}") from err
    if left > 0:
        raise LogFormatError(
            f"{name}: is shorter ({start_offset - left} bytes) than the part already "
            f"ingested ({start_offset} bytes); ingest it under another source name"
        )
    return start_offset


def _discard_rest_of_line(stream: BinaryIO) -> int:
    skipped = 0
    while True:
        piece = stream.readline(MAX_LINE_BYTES)
        skipped += len(piece)
        if not piece or piece.endswith(b"\n"):
            return skipped


def lines_of(text: str) -> io.BytesIO:
    """A binary stream over some text (handy for tests and doctests)."""
    return io.BytesIO(text.encode("utf-8"))
