"""Reading a log as chunks of whole lines: raw bytes, cut on line boundaries, for columnar mining.

A chunk is the unit that workers mine and the store commits: its bytes hold whole lines
(each ended by a newline, but for the stream's last line), so chunks can go to different
processes or machines and come back in any order. Where chunks are cut depends only on
the stream and ``chunk_bytes``, never on how many workers mine them, so every executor
sees the same chunks.
"""

from __future__ import annotations

import gzip
import io
import os
import stat
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import BinaryIO

from cloudtwin.errors import LogFormatError
from cloudtwin.ops.reader import MAX_LINE_BYTES, MAX_UNBROKEN_BYTES, skip_to

__all__ = ["CHUNK_BYTES", "Chunk", "read_chunks"]

#: Bytes of whole lines per chunk (a chunk may exceed it by one read).
CHUNK_BYTES = 4 << 20
_READ_BYTES = 1 << 20


@dataclass
class Chunk:
    """Consecutive whole lines of a stream, as bytes.

    ``offset`` is the stream offset of ``data[0]`` and ``first_line`` the 1-based number
    of its first line. A line cut because it ran past MAX_LINE_BYTES keeps its head in
    ``data`` (ended by a newline); ``cut`` maps its position in the chunk to the bytes
    left out, so offsets after it stay those of the stream.
    """

    index: int
    data: bytes
    offset: int
    first_line: int
    lines: int
    cut: dict[int, int] = field(default_factory=dict)

    @property
    def end_offset(self) -> int:
        """The stream offset just after the chunk's last line."""
        return self.offset + len(self.data) + sum(self.cut.values())


class _Pending:
    """Lines gathered for the next chunk."""

    def __init__(self, offset: int, line: int) -> None:
        self.parts: list[bytes] = []
        self.size = 0
        self.lines = 0
        self.cut: dict[int, int] = {}
        self.offset = offset
        self.line = line

    def add(self, data: bytes) -> None:
        """Whole lines, the last one ended by a newline."""
        self.parts.append(data)
        self.size += len(data)
        self.lines += data.count(b"\n")

    def add_cut(self, head: bytes, left_out: int) -> None:
        self.cut[self.lines] = left_out
        self.add(head + b"\n")

    def take(self, index: int, last_line_open: bool = False) -> Chunk:
        data = b"".join(self.parts)
        lines = self.lines + (1 if last_line_open else 0)
        chunk = Chunk(index, data, self.offset, self.line, lines, self.cut)
        self.__init__(chunk.end_offset, self.line + lines)  # type: ignore[misc]
        return chunk


def read_chunks(
    stream: BinaryIO,
    name: str,
    start_offset: int = 0,
    start_line: int = 1,
    chunk_bytes: int = CHUNK_BYTES,
    base_offset: int = 0,
) -> Iterator[Chunk]:
    """Yield ``stream``'s lines from ``start_offset`` on as chunks of about ``chunk_bytes``.

    Offsets count bytes of the (decompressed) stream plus ``base_offset``, as in
    :func:`cloudtwin.ops.reader.read_batches`: a corrupt gzip stream or a "line" of more
    than MAX_UNBROKEN_BYTES yields the whole lines read before it, then raises
    LogFormatError. Memory is bounded by one chunk and one line.

    >>> import io
    >>> [(c.data, c.offset, c.first_line, c.lines)
    ...  for c in read_chunks(io.BytesIO(b"a\\nbb\\nc"), "x", chunk_bytes=3)]
    [(b'a\\nbb\\n', 0, 1, 2), (b'c', 5, 3, 1)]
    """
    offset = base_offset + skip_to(stream, name, start_offset)
    pending = _Pending(offset, start_line)
    index = 0
    carry = b""
    read = getattr(stream, "read1", stream.read)  # read1: a corrupt tail loses least
    size = max(1, min(_READ_BYTES, chunk_bytes))
    try:
        while True:
            piece = read(size)
            if not piece:
                break
            data = carry + piece if carry else piece
            end = data.rfind(b"\n") + 1
            if end == 0:
                if len(data) <= MAX_LINE_BYTES:
                    carry = data
                    continue
                rest = _discard_rest_of_line(stream, len(data))  # a line longer than the limit
                pending.add_cut(data[:MAX_LINE_BYTES], len(data) + rest - MAX_LINE_BYTES - 1)
                carry = b""
            else:
                carry = data[end:]
                pending.add(data[:end] if end < len(data) else data)
            if pending.size >= chunk_bytes:
                yield pending.take(index)
                index += 1
    except (gzip.BadGzipFile, EOFError, zlib.error) as err:
        if pending.lines:
            yield pending.take(index)
        raise LogFormatError(
            f"{name}: corrupt gzip data after line {pending.line - 1} "
            f"(byte {pending.offset - base_offset} of the decompressed stream): {err}"
        ) from err
    except _UnbrokenLine as err:
        if pending.lines:
            yield pending.take(index)
        raise LogFormatError(
            f"{name}: line {pending.line + pending.lines} runs for more than "
            f"{MAX_UNBROKEN_BYTES >> 20} MiB without a line break; "
            "this is not a line-oriented log"
        ) from err
    _check_not_shrunk(stream, name, pending.offset + pending.size + len(carry) - base_offset)
    if carry:
        pending.parts.append(carry)
        pending.size += len(carry)
    if pending.size:
        yield pending.take(index, last_line_open=bool(carry))


def _check_not_shrunk(stream: BinaryIO, name: str, consumed: int) -> None:
    """At the end of a regular file: it must still hold every byte that was read from it."""
    if isinstance(stream, gzip.GzipFile):
        return
    try:
        info = os.fstat(stream.fileno())
    except (OSError, ValueError, AttributeError, io.UnsupportedOperation):
        return
    if stat.S_ISREG(info.st_mode) and info.st_size < consumed:
        raise LogFormatError(
            f"{name}: shrank from at least {consumed} to {info.st_size} bytes while it was "
            "read; the lines before the change are stored, ingest it again once it is whole"
        )


class _UnbrokenLine(Exception):
    """A line went on for more than MAX_UNBROKEN_BYTES."""


def _discard_rest_of_line(stream: BinaryIO, read: int) -> int:
    """Read up to and including the next newline of a line ``read`` bytes into; the bytes read.

    A line that runs past MAX_UNBROKEN_BYTES is no line at all: _UnbrokenLine.
    """
    skipped = 0
    while True:
        piece = stream.readline(MAX_LINE_BYTES)
        skipped += len(piece)
        if read + skipped > MAX_UNBROKEN_BYTES:
            raise _UnbrokenLine
        if not piece or piece.endswith(b"\n"):
            return skipped
