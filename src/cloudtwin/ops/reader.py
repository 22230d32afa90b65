"""Reading log lines from plain or gzip files and streams, in batches of bounded size."""

from __future__ import annotations

import gzip
import io
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from itertools import accumulate
from pathlib import Path
from typing import BinaryIO

from cloudtwin.errors import LogFormatError

__all__ = ["MAX_LINE_BYTES", "LineBatch", "open_log", "read_batches"]

#: Longer lines are cut to this many bytes and reported as unparsed.
MAX_LINE_BYTES = 1 << 20
DEFAULT_BATCH_LINES = 20_000
_GZIP_MAGIC = b"\x1f\x8b"
_SKIP_CHUNK = 1 << 20
_READ_CHUNK = 1 << 20


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
    pending = LineBatch(end_offset=offset)
    try:
        for texts, lengths, cut in _split_lines(stream):
            take = 0
            while take < len(texts):
                room = batch_lines - len(pending)
                part = slice(take, take + room)
                offsets = list(accumulate(lengths[part], initial=offset))
                count = len(offsets) - 1
                pending.too_long.update(len(pending) + i for i in cut if take <= i < take + count)
                pending.texts += texts[part]
                pending.offsets += offsets[:-1]
                pending.numbers += range(number, number + count)
                offset, number, take = offsets[-1], number + count, take + count
                pending.end_offset = offset
                if len(pending) >= batch_lines:
                    yield pending
                    pending = LineBatch(end_offset=offset)
    except (gzip.BadGzipFile, EOFError, zlib.error) as err:
        if pending.texts:
            yield pending
        raise LogFormatError(
            f"{name}: corrupt gzip data after line {number - 1} "
            f"(byte {offset} of the decompressed stream): {err}"
        ) from err
    if pending.texts:
        yield pending


def _split_lines(stream: BinaryIO) -> Iterator[tuple[list[str], list[int], list[int]]]:
    """Whole lines of a stream, a chunk at a time: texts, byte lengths, cut positions."""
    carry = b""
    read = getattr(stream, "read1", stream.read)  # read1: a corrupt tail loses least
    while True:
        chunk = read(_READ_CHUNK)
        if not chunk:
            break
        data = carry + chunk if carry else chunk
        end = data.rfind(b"\n") + 1
        if end == 0 and len(data) <= MAX_LINE_BYTES:
            carry = data
            continue
        if end == 0:  # one line longer than the limit: keep its head, skip the rest
            yield _cut_line(data, stream)
            carry = b""
            continue
        carry = data[end:]
        yield _decode(data[:end])
    if carry:
        texts, lengths, cut = _decode(carry + b"\n")
        lengths[-1] -= 1
        yield texts, lengths, cut


def _decode(block: bytes) -> tuple[list[str], list[int], list[int]]:
    """Lines of a block that ends with a newline (each line ends with one)."""
    pieces = block.split(b"\n")
    pieces.pop()
    lengths = [len(p) + 1 for p in pieces]
    texts = block.decode("utf-8", "replace").split("\n")
    texts.pop()
    if b"\r" in block:
        texts = [t[:-1] if t.endswith("\r") else t for t in texts]
    cut = [i for i, n in enumerate(lengths) if n > MAX_LINE_BYTES]
    for i in cut:
        texts[i] = texts[i][:MAX_LINE_BYTES]
    return texts, lengths, cut


def _cut_line(data: bytes, stream: BinaryIO) -> tuple[list[str], list[int], list[int]]:
    length = len(data) + _discard_rest_of_line(stream)
    text = data[:MAX_LINE_BYTES].decode("utf-8", "replace").rstrip("\r\n")
    return [text], [length], [0]


def _skip(stream: BinaryIO, name: str, start_offset: int) -> int:
    if start_offset <= 0:
        return 0
    left = start_offset
    if not isinstance(stream, gzip.GzipFile) and stream.seekable():
        size = stream.seek(0, io.SEEK_END)
        stream.seek(min(size, start_offset))
        left = max(start_offset - size, 0)
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
