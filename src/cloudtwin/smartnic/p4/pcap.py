"""The classic pcap format (microsecond or nanosecond, either byte order) to and from bytes.

Reading checks every record: a file cut short in a record header or its data is an
error naming the record, never a partial result.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import numpy as np

from cloudtwin.errors import NicError

__all__ = ["LINKTYPE_ETHERNET", "MAX_PACKET_BYTES", "Capture", "read_pcap", "write_pcap"]

LINKTYPE_ETHERNET = 1
MAX_PACKET_BYTES = 65_535 + 128
"""The longest packet the pipeline takes: a 65,535-byte IP packet and 128 bytes of headers
around it (Ethernet, two VLAN tags and an outer IPv6/UDP/VXLAN or Geneve encapsulation)."""
_MAGIC_US = 0xA1B2C3D4
_MAGIC_NS = 0xA1B23C4D


@dataclass(frozen=True)
class Capture:
    """Packets of a capture and their timestamps (ns since the epoch)."""

    packets: list[bytes]
    timestamp_ns: np.ndarray
    linktype: int = LINKTYPE_ETHERNET


def read_pcap(data: bytes, source: str = "<pcap>") -> Capture:
    """Parse a pcap file's bytes; NicError names the record where it is broken."""
    if len(data) < 24:
        raise NicError(f"{source}: not a pcap file (shorter than its 24-byte header)")
    for order in ("<", ">"):
        magic = struct.unpack(order + "I", data[:4])[0]
        if magic in (_MAGIC_US, _MAGIC_NS):
            break
    else:
        raise NicError(f"{source}: not a pcap file (magic {data[:4].hex()})")
    scale = 1 if magic == _MAGIC_NS else 1000
    _snaplen, linktype = struct.unpack(order + "II", data[16:24])
    if linktype != LINKTYPE_ETHERNET:
        raise NicError(f"{source}: link type {linktype} is not Ethernet (1)")
    packets, times = [], []
    offset, record = 24, 0
    header = struct.Struct(order + "IIII")
    while offset < len(data):
        if offset + 16 > len(data):
            raise NicError(f"{source}: record {record} is truncated in its header")
        seconds, fraction, captured, original = header.unpack_from(data, offset)
        offset += 16
        if captured > MAX_PACKET_BYTES:
            raise NicError(
                f"{source}: record {record} holds {captured:,} bytes, more than the {MAX_PACKET_BYTES:,} "
                "of the longest packet (a 64 KiB IP packet with Ethernet, VLAN and tunnel headers)"
            )
        if offset + captured > len(data):
            raise NicError(f"{source}: record {record} is truncated ({captured} bytes announced)")
        packets.append(data[offset : offset + captured])
        times.append(seconds * 1_000_000_000 + fraction * scale)
        offset += captured
        record += 1
    return Capture(packets, np.array(times, dtype=np.uint64))


def write_pcap(packets: list[bytes], timestamp_ns: np.ndarray | None = None) -> bytes:
    """A nanosecond-resolution pcap file holding `packets`."""
    times = np.zeros(len(packets), dtype=np.uint64) if timestamp_ns is None else timestamp_ns
    parts = [struct.pack("<IHHiIII", _MAGIC_NS, 2, 4, 0, 0, 262144, LINKTYPE_ETHERNET)]
    for packet, time_ns in zip(packets, times, strict=True):
        seconds, nanos = divmod(int(time_ns), 1_000_000_000)
        parts.append(struct.pack("<IIII", seconds, nanos, len(packet), len(packet)))
        parts.append(packet)
    return b"".join(parts)
