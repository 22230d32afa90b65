"""Reading log lines from plain or gzip byte streams, in batches of bounded size.

The caller opens the file (or takes stdin) and hands the byte stream to
:func:`log_stream`, which looks at its head: gzip is decompressed, a stream that is not
text is refused, and the head's fingerprint tells a resumed stream from a new one.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from itertools import accumulate
from typing import BinaryIO

from cloudtwin.errors import LogFormatError

__all__ = [
    "MAX_LINE_BYTES", "MAX_UNBROKEN_BYTES", "LineBatch", "LogStream", "log_stream", "read_batches",
    "skip_to",
]

#: Longer lines are cut to this many bytes and reported as unparsed.
MAX_LINE_BYTES = 1 << 20
#: A "line" longer than this has no line structure at all: reading stops with an error.
MAX_UNBROKEN_BYTES = 64 << 20
#: How much of a stream's head identifies it (and is checked for being text).
HEAD_BYTES = 4096
#: A head with more than this fraction of control bytes or invalid UTF-8 is not text.
MAX_BINARY_FRACTION = 0.3
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


@dataclass
class LogStream:
    """A log ready to read: ``stream`` gives its (decompressed) bytes.

    ``head`` is its first HEAD_BYTES bytes as they came (compressed or not); their
    fingerprint tells the same stream read again from a different one.
    """

    name: str
    stream: BinaryIO
    head: bytes = field(default=b"", repr=False)

    def __enter__(self) -> LogStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stream.close()

    @property
    def fingerprint(self) -> tuple[str, int]:
        """SHA-256 of the head, and the head's length in bytes."""
        return hashlib.sha256(self.head).hexdigest(), len(self.head)

    def same_head(self, fingerprint: str, fingerprint_bytes: int) -> bool:
        """Whether this stream starts with the bytes a stored fingerprint was taken of."""
        if fingerprint_bytes > len(self.head):
            return False
        return hashlib.sha256(self.head[:fingerprint_bytes]).hexdigest() == fingerprint


def log_stream(raw: BinaryIO, name: str, *, close_raw: bool = True) -> LogStream:
    """Wrap an open byte stream (a file, stdin) as a log: gzip is detected from its head.

    Closing the log closes ``raw`` too, unless ``close_raw`` is false (stdin).

    Raises LogFormatError if the stream is not text (NUL bytes, or mostly control bytes
    and invalid UTF-8), so a binary file or ``/dev/zero`` is refused at once.

    >>> import io
    >>> log = log_stream(io.BytesIO(b"a\\nb\\n"), "x")
    >>> [b.texts for b in read_batches(log.stream, log.name)]
    [['a', 'b']]
    """
    head = _read_head(raw, HEAD_BYTES)
    prefixed = _Prefixed(head, raw, close_raw)
    stream: BinaryIO = io.BufferedReader(prefixed, buffer_size=_READ_CHUNK)  # type: ignore[type-var]
    if head[:2] == _GZIP_MAGIC:
        stream = gzip.GzipFile(fileobj=stream, mode="rb")  # type: ignore[assignment]
        try:
            text_head = stream.peek(HEAD_BYTES)[:HEAD_BYTES]  # type: ignore[attr-defined]
        except (gzip.BadGzipFile, EOFError, zlib.error) as err:
            raise LogFormatError(f"{name}: corrupt gzip data at its start: {err}") from err
    else:
        text_head = head
    _check_text(text_head, name)
    return LogStream(name, stream, head)


def _read_head(raw: BinaryIO, size: int) -> bytes:
    parts: list[bytes] = []
    got = 0
    while got < size:
        piece = raw.read(size - got)
        if not piece:
            break
        parts.append(piece)
        got += len(piece)
    return b"".join(parts)


class _Prefixed(io.RawIOBase):
    """A raw stream giving ``head`` first, then the rest of ``raw``."""

    def __init__(self, head: bytes, raw: BinaryIO, close_raw: bool) -> None:
        self._head = memoryview(head)
        self._raw = raw
        self._close_raw = close_raw

    def readable(self) -> bool:
        return True

    def fileno(self) -> int:
        return self._raw.fileno()

    def readinto(self, buffer: bytearray) -> int:  # type: ignore[override]
        if self._head:
            n = min(len(buffer), len(self._head))
            buffer[:n] = self._head[:n]
            self._head = self._head[n:]
            return n
        data = self._raw.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)

    def close(self) -> None:
        if self._close_raw:
            self._raw.close()
        super().close()


def _check_text(head: bytes, name: str) -> None:
    nul = head.find(b"\0")
    if nul >= 0:
        raise LogFormatError(f"{name}: is not a text log (a NUL byte at byte {nul})")
    if not head:
        return
    text = head.decode("utf-8", "replace")
    odd = sum(1 for c in text if c == "\ufffd" or (c < " " and c not in "\t\n\r\f\v\x1b"))
    if odd > MAX_BINARY_FRACTION * len(text):
        raise LogFormatError(
            f"{name}: is not a text log ({odd} of its first {len(text)} characters are "
            "control bytes or invalid UTF-8)"
        )


def read_batches(
    stream: BinaryIO,
    name: str,
    start_offset: int = 0,
    start_line: int = 1,
    batch_lines: int = DEFAULT_BATCH_LINES,
    base_offset: int = 0,
) -> Iterator[LineBatch]:
    """Yield the lines of ``stream`` from ``start_offset`` on, ``batch_lines`` at a time.

    Memory is bounded by one batch. Offsets count bytes of the (decompressed) stream,
    plus ``base_offset``, so a later call can resume exactly where a committed batch
    ended. A corrupt or truncated gzip stream, or a "line" of more than
    MAX_UNBROKEN_BYTES, yields the lines read so far, then raises LogFormatError.

    >>> import io
    >>> [b.texts for b in read_batches(io.BytesIO(b"a\\r\\nb\\nc"), "x", batch_lines=2)]
    [['a', 'b'], ['c']]
    """
    offset = base_offset + skip_to(stream, name, start_offset)
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
            f"(byte {offset - base_offset} of the decompressed stream): {err}"
        ) from err
    except _UnbrokenLine as err:
        if pending.texts:
            yield pending
        raise LogFormatError(
            f"{name}: line {number} runs for more than {MAX_UNBROKEN_BYTES >> 20} MiB "
            "without a line break; this is not a line-oriented log"
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


def skip_to(stream: BinaryIO, name: str, start_offset: int) -> int:
    """Move past the first ``start_offset`` bytes; LogFormatError if the stream is shorter."""
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


class _UnbrokenLine(Exception):
    """A line went on for more than MAX_UNBROKEN_BYTES."""


def _discard_rest_of_line(stream: BinaryIO) -> int:
    skipped = 0
    while True:
        piece = stream.readline(MAX_LINE_BYTES)
        skipped += len(piece)
        if not piece or piece.endswith(b"\n"):
            return skipped
        if skipped > MAX_UNBROKEN_BYTES:
            raise _UnbrokenLine
