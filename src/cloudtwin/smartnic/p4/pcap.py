"""The classic pcap format (microsecond or nanosecond, either byte order) to and from bytes.

A capture is read as columns over its bytes (`Records`: where each packet starts, its
length, its timestamp) and written the same way, with no Python object per packet: the
only per-record step in Python is one pass in C over the chain of record offsets.
Reading checks every record: a file cut short in a record header or its data is an
error naming the record, never a partial result.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from functools import partial
from itertools import repeat, takewhile
from operator import add, gt, itemgetter

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from cloudtwin.errors import NicError

__all__ = [
    "LINKTYPE_ETHERNET",
    "MAX_PACKET_BYTES",
    "Capture",
    "Records",
    "dense_rows",
    "index_pcap",
    "pcap_parts",
    "record_block",
    "read_pcap",
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
    if len(data) < 24:
        raise NicError(f"{source}: not a pcap file (shorter than its 24-byte header)")
    for order in ("<", ">"):
        magic = struct.unpack(order + "I", data[:4])[0]
        if magic in (_MAGIC_US, _MAGIC_NS):
            break
    else:
        raise NicError(f"{source}: not a pcap file (magic {data[:4].hex()})")
    _snaplen, linktype = struct.unpack(order + "II", data[16:24])
    if linktype != LINKTYPE_ETHERNET:
        raise NicError(f"{source}: link type {linktype} is not Ethernet (1)")
    buffer = np.frombuffer(data, dtype=np.uint8)
    starts = np.array(_record_starts(data, order), dtype=np.int64)
    header = _record_headers(buffer, starts[:-1], order)
    captured = header[:, 2].astype(np.int64)
    _check_records(captured, starts, len(data), source)
    scale = np.uint64(1 if magic == _MAGIC_NS else 1000)
    times = header[:, 0].astype(np.uint64) * np.uint64(1_000_000_000) + header[:, 1].astype(np.uint64) * scale
    return Records(buffer, starts[:-1] + _RECORD_HEADER, captured, times)


def _record_starts(data: bytes, order: str) -> list[int]:
    """The offsets of the record headers, then where the chain stops (the end of the file,
    or a header cut short, or past the end when the last record is).

    `starts` is extended by maps that read `starts` itself (a list iterator sees what is
    appended behind it), so each new offset is computed in C from the one before:
    offset + 16 + the captured length at offset + 8, for as long as a whole header fits."""
    captured = struct.Struct(order + "8xI").unpack_from
    starts = [24]
    whole = takewhile(partial(gt, len(data) - _RECORD_HEADER + 1), starts)
    lengths = map(itemgetter(0), map(captured, repeat(data), whole))
    starts.extend(map(add, starts, map(add, repeat(_RECORD_HEADER), lengths)))
    return starts


def _record_headers(buffer: np.ndarray, starts: np.ndarray, order: str) -> np.ndarray:
    """The four 32-bit words (seconds, fraction, captured, original) of each record header."""
    return sliding_window_view(buffer, _RECORD_HEADER)[starts].view(order + "u4")


def _check_records(captured: np.ndarray, starts: np.ndarray, size: int, source: str) -> None:
    """NicError for the first broken record: longer than a packet can be, or cut short."""
    too_long = np.flatnonzero(captured > MAX_PACKET_BYTES)
    if too_long.size:
        record = int(too_long[0])
        raise NicError(
            f"{source}: record {record} holds {int(captured[record]):,} bytes, more than the "
            f"{MAX_PACKET_BYTES:,} of the longest packet (a 64 KiB IP packet with Ethernet, VLAN "
            "and tunnel headers)"
        )
    stop, last = int(starts[-1]), starts.size - 1
    if stop > size:
        raise NicError(f"{source}: record {last - 1} is truncated ({int(captured[-1])} bytes announced)")
    if stop < size:
        raise NicError(f"{source}: record {last} is truncated in its header")


def dense_rows(buffer: np.ndarray, offset: np.ndarray, length: np.ndarray) -> np.ndarray:
    """A (packets, longest packet) byte matrix: row i is `buffer[offset[i]:][:length[i]]`, then zeros.

    Each row is copied whole from a sliding-window view of the bytes (row p of the view is
    the bytes from p on, so the gather moves one block per packet), then the bytes past
    each row's length are cleared a 64-bit word at a time."""
    n = length.size
    width = max(int(length.max()) if n else 0, 1)
    words = -(-width // 8)
    if n == 0:
        return np.zeros((0, width), dtype=np.uint8)
    low, last = int(offset.min()), int(offset.max())
    if last + 8 * words <= buffer.size:  # whole rows from the buffer itself
        out = sliding_window_view(buffer[low:], 8 * words)[offset - low]
    else:  # rows reach past the end: from a padded copy of the bytes they hold
        high = int((offset + length).max())
        span = np.zeros(high - low + 8 * words, dtype=np.uint8)
        span[: high - low] = buffer[low:high]
        out = sliding_window_view(span, 8 * words)[offset - low]
    out.view(np.uint64)[:] &= _keep_words(length, width, words)
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
    records laid end to end, each with its 16-byte record header in front.

    Every record is copied as one block into a window of the output: the headers
    together, then the packets of each length together (a window as long as they are, so
    no copy reaches into the next record); no object is made per packet."""
    rows = np.arange(length.size) if kept is None else np.flatnonzero(kept)
    size = length[rows]
    at = np.cumsum(size + _RECORD_HEADER) - size  # where each packet's bytes go
    out = np.empty(int(at[-1] + size[-1]) if rows.size else 0, dtype=np.uint8)
    if not rows.size:
        return out
    header = np.empty((rows.size, 4), dtype="<u4")
    seconds, nanos = np.divmod(np.asarray(timestamp_ns, dtype=np.uint64)[rows], np.uint64(1_000_000_000))
    header[:, 0], header[:, 1], header[:, 2], header[:, 3] = seconds, nanos, size, size
    sliding_window_view(out, _RECORD_HEADER, writeable=True)[at - _RECORD_HEADER] = header.view(np.uint8)
    # packets grouped by length: a radix sort when lengths fit 16 bits (they nearly always do)
    order = np.argsort(size.astype(np.uint16) if size.max() < 1 << 16 else size, kind="stable")
    ordered = size[order]
    bounds = [0, *(np.flatnonzero(np.diff(ordered)) + 1).tolist(), rows.size]
    for first, stop in zip(bounds, bounds[1:], strict=False):
        same, count = order[first:stop], int(ordered[first])
        if count:
            sliding_window_view(out, count, writeable=True)[at[same]] = data[rows[same], :count]
    return out


def write_pcap(packets: list[bytes], timestamp_ns: np.ndarray | None = None) -> bytes:
    """A nanosecond-resolution pcap file holding `packets`."""
    records = Records.of(packets, timestamp_ns)
    data = dense_rows(records.buffer, records.offset, records.length)
    return b"".join(pcap_parts([record_block(data, records.length, records.timestamp_ns)]))
