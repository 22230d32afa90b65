"""The classic pcap format (microsecond or nanosecond, either byte order) to and from bytes.

A capture is read as columns over its bytes (`Records`: where each packet starts, its
length, its timestamp) and written the same way, with no Python object per packet: the
only per-record step in Python is one pass in C over the chain of record offsets.
Reading checks every record: a file cut short in a record header or its data is an
error naming the record, never a partial result. A capture of any size is read in
blocks (`iter_pcap`), so memory follows the block, not the file; the output records are
spliced from new packet heads and the untouched rest of each packet (`spliced_block`).
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterator
from contextlib import suppress
from dataclasses import dataclass
from itertools import repeat
from operator import add, itemgetter

import numpy as np

from cloudtwin.errors import NicError

__all__ = [
    "CHUNK_BYTES",
    "LINKTYPE_ETHERNET",
    "MAX_PACKET_BYTES",
    "Capture",
    "Records",
    "dense_rows",
    "index_pcap",
    "iter_pcap",
    "pcap_parts",
    "record_block",
    "read_pcap",
    "spliced_block",
    "write_pcap",
]

LINKTYPE_ETHERNET = 1
MAX_PACKET_BYTES = 65_535 + 128
"""The longest packet the pipeline takes: a 65,535-byte IP packet and 128 bytes of headers
around it (Ethernet, two VLAN tags and an outer IPv6/UDP/VXLAN or Geneve encapsulation)."""
_MAGIC_US = 0xA1B2C3D4
_MAGIC_NS = 0xA1B23C4D
_FILE_HEADER = struct.pack("<IHHiIII", _MAGIC_NS, 2, 4, 0, 0, 262144, LINKTYPE_ETHERNET)
_RECORD_HEADER = 16
CHUNK_BYTES = 2 << 20
"""How many bytes of a capture `iter_pcap` reads at a time: large enough that the per-block
steps are amortised over some 10,000 packets, small enough that a block's packets, batch
and output stay in the caches (on the VXLAN benchmark 1 to 2 MiB ran 15 to 25 % faster
per packet than 4 MiB, and 8 to 16 MiB slower still)."""
FILE_HEADER_BYTES = 24


@dataclass(frozen=True)
class Capture:
    """Packets of a capture and their timestamps (ns since the epoch)."""

    packets: list[bytes]
    timestamp_ns: np.ndarray
    linktype: int = LINKTYPE_ETHERNET


@dataclass(frozen=True)
class Records:
    """A capture's packets as columns: packet i is `buffer[offset[i] : offset[i] + length[i]]`."""

    buffer: np.ndarray
    offset: np.ndarray
    length: np.ndarray
    timestamp_ns: np.ndarray

    def __len__(self) -> int:
        return int(self.length.size)

    def packets(self) -> list[bytes]:
        """Each packet's bytes (one object per packet: for tests and small captures)."""
        data = self.buffer.tobytes()
        return [data[o : o + n] for o, n in zip(self.offset.tolist(), self.length.tolist(), strict=True)]

    @classmethod
    def of(cls, packets: list[bytes], timestamp_ns: np.ndarray | None = None) -> Records:
        """Records over the packets laid end to end."""
        length = np.fromiter((len(p) for p in packets), dtype=np.int64, count=len(packets))
        offset = np.cumsum(length) - length
        times = np.zeros(len(packets), dtype=np.uint64) if timestamp_ns is None else timestamp_ns
        buffer = np.frombuffer(b"".join(packets), dtype=np.uint8)
        return cls(buffer, offset, length, np.asarray(times, dtype=np.uint64))


def read_pcap(data: bytes, source: str = "<pcap>") -> Capture:
    """Parse a pcap file's bytes; NicError names the record where it is broken."""
    records = index_pcap(data, source)
    return Capture(records.packets(), records.timestamp_ns)


def index_pcap(data: bytes, source: str = "<pcap>") -> Records:
    """Where each packet of a pcap file's bytes is, its length and timestamp, as columns.

    The record headers are found by one pass in C over the chain of offsets (each record
    says where the next starts), then read together with numpy; NicError names the first
    record that is broken, as reading them one by one would."""
    order, scale = pcap_format(data[:FILE_HEADER_BYTES], source)
    records, used = _index_block(data, FILE_HEADER_BYTES, order, scale, 0, source)
    if used < len(data):
        _truncated(data, used, order, len(records), source)
    return records


def iter_pcap(
    readinto: Callable[[memoryview], int], source: str = "<pcap>", chunk_bytes: int = CHUNK_BYTES
) -> Iterator[Records]:
    """The records of a pcap stream, a block of about `chunk_bytes` at a time: each block's
    whole records as columns, a record cut by the block's end carried to the next (at most
    one record: 64 KiB). `readinto(view)` fills the start of `view` from the stream and
    says how many bytes it put there (0 at the end), like `io.RawIOBase.readinto`.

    Every block is read into one buffer, used again for the next block (no new memory per
    block): use a block's columns before asking for the next. Errors are those of
    `index_pcap`, naming records by their number in the whole file."""
    header = bytearray(FILE_HEADER_BYTES)
    order, scale = pcap_format(bytes(header[: _fill(readinto, memoryview(header))]), source)
    room = chunk_bytes + _RECORD_HEADER + MAX_PACKET_BYTES
    buffer = np.empty(room, dtype=np.uint8)
    view = memoryview(buffer)  # type: ignore[arg-type]
    carried, first = 0, 0
    while True:
        got = readinto(view[carried : carried + chunk_bytes])
        if not got:
            if carried:
                _truncated(view[:carried], 0, order, first, source)
            return
        end = carried + got
        records, used = _index_block(view[:end], 0, order, scale, first, source)
        if len(records):
            yield records
        carried, first = end - used, first + len(records)
        buffer[:carried] = buffer[used:end].copy()  # the record cut short, to the front


def _fill(readinto: Callable[[memoryview], int], view: memoryview) -> int:
    """Bytes read into the whole of `view`, fewer only at the stream's end (a pipe may give
    them in parts)."""
    got = 0
    while got < len(view):
        part = readinto(view[got:])
        if not part:
            break
        got += part
    return got


def pcap_format(header: bytes, source: str = "<pcap>") -> tuple[str, np.uint64]:
    """The byte order (`<` or `>`) and the nanoseconds per timestamp fraction of a pcap
    file, from its 24-byte header; NicError when it is not an Ethernet pcap."""
    if len(header) < FILE_HEADER_BYTES:
        raise NicError(f"{source}: not a pcap file (shorter than its 24-byte header)")
    for order in ("<", ">"):
        magic = struct.unpack(order + "I", header[:4])[0]
        if magic in (_MAGIC_US, _MAGIC_NS):
            break
    else:
        raise NicError(f"{source}: not a pcap file (magic {header[:4].hex()})")
    _snaplen, linktype = struct.unpack(order + "II", header[16:24])
    if linktype != LINKTYPE_ETHERNET:
        raise NicError(f"{source}: link type {linktype} is not Ethernet (1)")
    return order, np.uint64(1 if magic == _MAGIC_NS else 1000)


def _index_block(
    data: bytes | memoryview, at: int, order: str, scale: np.uint64, first: int, source: str
) -> tuple[Records, int]:
    """The whole records of `data` from offset `at` on, as columns, and where the first
    record that does not end inside `data` starts (len(data) when every one does).
    `first` is the number of the record at `at` (for errors)."""
    buffer = np.frombuffer(data, dtype=np.uint8)
    starts = np.array(_record_starts(data, order, at), dtype=np.int64)
    whole = int(np.searchsorted(starts[1:], len(data), side="right"))  # records ending in `data`
    read = whole + 1 if starts[whole] + _RECORD_HEADER <= len(data) else whole  # and a whole header after
    header = _record_headers(buffer, starts[:read], order) if read else np.zeros((0, 4), dtype=np.uint32)
    captured = header[:, 2].astype(np.int64)
    _check_lengths(captured, first, source)
    captured = captured[:whole]
    seconds, fraction = header[:whole, 0].astype(np.uint64), header[:whole, 1].astype(np.uint64)
    times = seconds * np.uint64(1_000_000_000) + fraction * scale
    return Records(buffer, starts[:whole] + _RECORD_HEADER, captured, times), int(starts[whole])


def _record_starts(data: bytes | memoryview, order: str, at: int = FILE_HEADER_BYTES) -> list[int]:
    """The offsets of the record headers from `at` on, then where the chain stops (the end
    of the data, or a header cut short, or past the end when the last record is).

    `starts` is extended by maps that read `starts` itself (a list iterator sees what is
    appended behind it), so each new offset is computed in C from the one before:
    offset + 16 + the captured length at offset + 8, for as long as a whole header fits
    (reading a header that does not fit raises struct.error, which ends the chain; what
    `extend` appended until then stays)."""
    captured = struct.Struct(order + "8xI4x").unpack_from
    starts = [at]
    lengths = map(itemgetter(0), map(captured, repeat(data), starts))
    with suppress(struct.error):
        starts.extend(map(add, starts, map(add, repeat(_RECORD_HEADER), lengths)))
    return starts


def _record_headers(buffer: np.ndarray, starts: np.ndarray, order: str) -> np.ndarray:
    """The four 32-bit words (seconds, fraction, captured, original) of each record header."""
    return _windows(buffer, _RECORD_HEADER)[starts].view(order + "u4")


def _windows(data: np.ndarray, size: int) -> np.ndarray:
    """Every run of `size` bytes of the contiguous byte array `data`, overlapping: row p is
    `data[p : p + size]` (numpy's sliding_window_view, without its checks: made per copy)."""
    return np.ndarray((max(data.size - size + 1, 0), size), np.uint8, data, 0, (1, 1))


def _check_lengths(captured: np.ndarray, first: int, source: str) -> None:
    """NicError for the first record longer than a packet can be."""
    too_long = np.flatnonzero(captured > MAX_PACKET_BYTES)
    if too_long.size:
        record = int(too_long[0])
        raise NicError(
            f"{source}: record {first + record} holds {int(captured[record]):,} bytes, more than the "
            f"{MAX_PACKET_BYTES:,} of the longest packet (a 64 KiB IP packet with Ethernet, VLAN "
            "and tunnel headers)"
        )


def _truncated(data: bytes | memoryview, at: int, order: str, record: int, source: str) -> None:
    """NicError for record `record`, which starts at `at` and does not end inside `data`."""
    if len(data) - at < _RECORD_HEADER:
        raise NicError(f"{source}: record {record} is truncated in its header")
    announced = struct.unpack_from(order + "I", data, at + 8)[0]
    raise NicError(f"{source}: record {record} is truncated ({announced} bytes announced)")


def dense_rows(buffer: np.ndarray, offset: np.ndarray, length: np.ndarray) -> np.ndarray:
    """A (packets, longest packet) byte matrix: row i is `buffer[offset[i]:][:length[i]]`, then zeros.

    Each row is copied whole from a sliding-window view of the bytes (row p of the view is
    the bytes from p on, so the gather moves one block per packet), then the bytes past
    the length of each row shorter than the matrix are cleared a 64-bit word at a time."""
    n = length.size
    width = max(int(length.max()) if n else 0, 1)
    words = -(-width // 8)
    if n == 0:
        return np.zeros((0, width), dtype=np.uint8)
    low, last = int(offset.min()), int(offset.max())
    if last + 8 * words <= buffer.size:  # whole rows from the buffer itself
        out = _windows(buffer[low:], 8 * words)[offset - low]
    else:  # rows reach past the end: from a padded copy of the bytes they hold
        high = int((offset + length).max())
        span = np.zeros(high - low + 8 * words, dtype=np.uint8)
        span[: high - low] = buffer[low:high]
        out = _windows(span, 8 * words)[offset - low]
    short = np.flatnonzero(length < width)  # rows that end before the matrix does
    if short.size == n:
        out.view(np.uint64)[:] &= _keep_words(length, width, words)
    elif short.size:  # the others hold `width` bytes of their own: the rest is cut off below
        out.view(np.uint64)[short] &= _keep_words(length[short], width, words)
    return out[:, :width]


def _keep_words(length: np.ndarray, width: int, words: int) -> np.ndarray:
    """Per row, the `words` 64-bit words that keep its first `length` bytes under `&`: rows
    of a table by length when the table is smaller than the batch, else word by word."""
    if width < length.size:
        keep = np.arange(8 * words) < np.arange(width + 1)[:, None]
        return (keep.astype(np.uint8) * np.uint8(255)).view(np.uint64)[length]
    return _PREFIX[np.clip(length[:, None] - 8 * np.arange(words), 0, 8)]


_PREFIX = np.frombuffer(b"".join(bytes([255] * j + [0] * (8 - j)) for j in range(9)), dtype=np.uint64)
"""_PREFIX[j]: the 64-bit word whose first j bytes (in memory order) `&` keeps."""


def pcap_parts(blocks: list[np.ndarray]) -> list[memoryview]:
    """A nanosecond-resolution pcap file of record blocks made by `record_block`, as the
    parts to write one after the other (`writelines`), so the file is never copied whole."""
    return [memoryview(_FILE_HEADER), *(block.data for block in blocks)]


def record_block(
    data: np.ndarray, length: np.ndarray, timestamp_ns: np.ndarray, kept: np.ndarray | None = None
) -> np.ndarray:
    """The rows of `data` (the first `length[i]` bytes of row i) where `kept`, as pcap
    records laid end to end, each with its 16-byte record header in front."""
    return spliced_block(data, length, timestamp_ns, kept)


def spliced_block(
    head: np.ndarray,
    head_length: np.ndarray,
    timestamp_ns: np.ndarray,
    kept: np.ndarray | None = None,
    rest: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None,
) -> np.ndarray:
    """Packets where `kept` as pcap records laid end to end: each record's 16-byte header,
    the first `head_length[i]` bytes of row i of `head`, then (when `rest` is given as
    (buffer, offset, length)) `buffer[offset[i]:][:length[i]]`, the packet's untouched rest.

    Every piece is copied as one block into a window of the output: the headers together,
    then the heads of each length together and the rests of each length together (a
    window as long as they are, so no copy reaches into the next record); no object is
    made per packet."""
    rows = np.arange(head_length.size) if kept is None else np.flatnonzero(kept)
    first = head_length[rows]
    tail = None if rest is None else rest[2][rows]
    size = first if tail is None else first + tail
    at = np.cumsum(size + _RECORD_HEADER) - size  # where each packet's bytes go
    out = np.empty(int(at[-1] + size[-1]) if rows.size else 0, dtype=np.uint8)
    if not rows.size:
        return out
    header = np.empty((rows.size, 4), dtype="<u4")
    seconds, nanos = np.divmod(np.asarray(timestamp_ns, dtype=np.uint64)[rows], np.uint64(1_000_000_000))
    header[:, 0], header[:, 1], header[:, 2], header[:, 3] = seconds, nanos, size, size
    _windows(out, _RECORD_HEADER)[at - _RECORD_HEADER] = header.view(np.uint8)
    _copy_by_length(out, at, first, lambda same, count: head[rows[same], :count])
    if rest is not None and tail is not None:
        buffer, offset = rest[0], rest[1][rows]
        _copy_by_length(
            out, at + first, tail, lambda same, count: _windows(buffer, count)[offset[same]]
        )
    return out


def _copy_by_length(
    out: np.ndarray, at: np.ndarray, size: np.ndarray, source: Callable[[np.ndarray, int], np.ndarray]
) -> None:
    """`out[at[i]:][:size[i]] = source(...)[i]`, one block copy per distinct size: `source(same,
    count)` gives the rows `same` (positions into `at`), `count` bytes each."""
    # grouped by size: a radix sort when sizes fit 16 bits (they nearly always do)
    count = int(size[0])
    if (size == count).all():
        if count:
            _windows(out, count)[at] = source(np.arange(size.size), count)
        return
    order = np.argsort(size.astype(np.uint16) if size.max() < 1 << 16 else size, kind="stable")
    ordered = size[order]
    bounds = [0, *(np.flatnonzero(np.diff(ordered)) + 1).tolist(), size.size]
    for first, stop in zip(bounds, bounds[1:], strict=False):
        same, count = order[first:stop], int(ordered[first])
        if count:
            _windows(out, count)[at[same]] = source(same, count)


def write_pcap(packets: list[bytes], timestamp_ns: np.ndarray | None = None) -> bytes:
    """A nanosecond-resolution pcap file holding `packets`."""
    records = Records.of(packets, timestamp_ns)
    data = dense_rows(records.buffer, records.offset, records.length)
    return b"".join(pcap_parts([record_block(data, records.length, records.timestamp_ns)]))
