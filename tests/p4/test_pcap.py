"""The pcap columns `nic run` reads and writes: the same records, errors and output bytes as
reading and writing one packet at a time (the path before, kept here as the reference)."""

from __future__ import annotations

import hashlib
import json
import struct

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.p4.helpers import EXAMPLES, shipped

from cloudtwin.errors import NicError
from cloudtwin.p4 import Capture, PacketBatch, index_pcap, read_pcap, run_capture, write_pcap
from cloudtwin.p4.pcap import MAX_PACKET_BYTES, dense_rows


def reference_read(data: bytes) -> tuple[list[bytes], list[int]]:
    """Record by record, as `read_pcap` did before it read columns (valid files only)."""
    order = "<" if struct.unpack("<I", data[:4])[0] in (0xA1B2C3D4, 0xA1B23C4D) else ">"
    scale = 1 if struct.unpack(order + "I", data[:4])[0] == 0xA1B23C4D else 1000
    packets, times, offset = [], [], 24
    while offset < len(data):
        seconds, fraction, captured, _ = struct.unpack_from(order + "IIII", data, offset)
        packets.append(data[offset + 16 : offset + 16 + captured])
        times.append(seconds * 1_000_000_000 + fraction * scale)
        offset += 16 + captured
    return packets, times


def reference_write(packets: list[bytes], times: list[int]) -> bytes:
    """A record at a time, as `write_pcap` did before."""
    parts = [struct.pack("<IHHiIII", 0xA1B23C4D, 2, 4, 0, 0, 262144, 1)]
    for packet, time_ns in zip(packets, times, strict=True):
        seconds, nanos = divmod(time_ns, 1_000_000_000)
        parts += [struct.pack("<IIII", seconds, nanos, len(packet), len(packet)), packet]
    return b"".join(parts)


def capture(packets: list[bytes], fractions: list[int], order: str = "<", nanos: bool = True) -> bytes:
    magic = 0xA1B23C4D if nanos else 0xA1B2C3D4
    parts = [struct.pack(order + "IHHiIII", magic, 2, 4, 0, 0, 262144, 1)]
    for i, (packet, fraction) in enumerate(zip(packets, fractions, strict=True)):
        parts += [struct.pack(order + "IIII", 1_700_000_000 + i, fraction, len(packet), len(packet)), packet]
    return b"".join(parts)


PACKETS = st.lists(st.binary(max_size=300), max_size=40)


@settings(max_examples=60, deadline=None)
@given(PACKETS, st.sampled_from("<>"), st.booleans(), st.integers(0, 999_999))
def test_columns_read_what_record_by_record_reads(
    packets: list[bytes], order: str, nanos: bool, f: int
) -> None:
    data = capture(packets, [(f * (i + 1)) % 1_000_000 for i in range(len(packets))], order, nanos)
    expected, times = reference_read(data)
    records = index_pcap(data)
    assert records.packets() == expected == packets
    assert records.timestamp_ns.tolist() == times
    assert read_pcap(data).packets == packets


@settings(max_examples=60, deadline=None)
@given(PACKETS, st.integers(0, (1 << 32) - 1))
def test_columns_write_what_record_by_record_writes(packets: list[bytes], first_s: int) -> None:
    times = [(first_s * 1_000_000_000 + 7_777 * i) % ((1 << 32) * 1_000_000_000) for i in range(len(packets))]
    assert write_pcap(packets, np.array(times, dtype=np.uint64)) == reference_write(packets, times)


@settings(max_examples=40, deadline=None)
@given(PACKETS)
def test_a_batch_from_a_buffer_is_the_packets_then_zeros(packets: list[bytes]) -> None:
    batch = PacketBatch.from_packets(packets)
    assert batch.data.shape == (len(packets), max([len(p) for p in packets] + [1]))
    for i, packet in enumerate(packets):
        assert batch.data[i, : len(packet)].tobytes() == packet and not batch.data[i, len(packet) :].any()


def test_a_broken_record_is_named_as_reading_one_by_one_would() -> None:
    good = capture([b"\x01" * 60, b"\x02" * 70], [0, 0])
    with pytest.raises(NicError, match=r"^c\.pcap: record 2 is truncated in its header$"):
        index_pcap(good + b"\x00" * 15, "c.pcap")
    with pytest.raises(NicError, match=r"^c\.pcap: record 1 is truncated \(70 bytes announced\)$"):
        index_pcap(good[:-1], "c.pcap")
    too_long = struct.pack("<IIII", 0, 0, MAX_PACKET_BYTES + 1, 0)
    with pytest.raises(NicError, match=r"^c\.pcap: record 2 holds 65,664 bytes, more than the 65,663 "):
        index_pcap(good + too_long + b"\x00" * 16, "c.pcap")  # before the truncation after it
    with pytest.raises(NicError, match=r"^c\.pcap: record 0 holds 4,294,967,295 bytes"):
        index_pcap(good[:24] + struct.pack(">IIII", 0, 0, 0xFFFFFFFF, 0), "c.pcap")
    assert len(index_pcap(good[:24])) == 0 and len(index_pcap(capture([b""] * 3, [0] * 3))) == 3


def test_dense_rows_read_past_the_end_of_the_buffer_as_zeros() -> None:
    buffer = np.frombuffer(b"abcdefghij", dtype=np.uint8)
    rows = dense_rows(buffer, np.array([0, 7, 9]), np.array([3, 3, 1]))
    assert [bytes(r) for r in rows] == [b"abc", b"hij", b"j\x00\x00"]


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:16]


# sha256 prefixes of the output pcap and of the --json report of `nic run`, as computed by
# the code that read and wrote one packet at a time (main before the columns)
SHIPPED = {
    ("vxlan_gateway", "host-frames", 1): ("6894cbc2f332f7cc", "c53846302d9af84e"),
    ("vxlan_gateway", "network-frames", 0): ("bc8870fe81ed5e1c", "a2a6e20bcbb1d64b"),
    ("security_groups", "tenant-traffic", 1): ("f006e6e0f920f7d9", "6ec5205a717a7298"),
    ("tenant_meter", "tenant-traffic", 1): ("94cd1d74681e8f42", "6eda02ae248ba055"),
    ("tenant_meter", "host-frames", 1): ("92d4281112bdaddc", "278a72fc974d9360"),
    ("parse_only", "tenant-traffic", 0): ("223557612ac9ebbe", "677fc4287f85d830"),
    ("parse_only", "network-frames", 1): ("af0826740585f79b", "b770e2762e262bd4"),
}


@pytest.mark.parametrize(("program", "pcap", "direction"), sorted(SHIPPED))
def test_shipped_captures_give_the_bytes_they_gave_before(program: str, pcap: str, direction: int) -> None:
    report = run_capture(
        shipped(program), index_pcap((EXAMPLES / f"{pcap}.pcap").read_bytes()), direction, direction
    )
    as_json = json.dumps(report.to_json(), sort_keys=True).encode()
    assert (_digest(report.pcap), _digest(as_json)) == SHIPPED[program, pcap, direction]


# the shipped captures repeated (timestamps 1 s apart per copy): output pcap of the
# program and of parse_only, as computed by the code before the columns
SCALED = {
    ("host-frames", 1, 1000, "vxlan_gateway"): ("de456de5f5b86ac5", "531f145e630071a2"),
    ("network-frames", 0, 3000, "vxlan_gateway"): ("57779f5b63fc4f65", "e03c37e6702b2ea6"),
    ("tenant-traffic", 1, 50, "tenant_meter"): ("aa19589e98810f1f", "99aa5834c8ebe250"),
}


@pytest.mark.parametrize(("pcap", "direction", "copies", "program"), sorted(SCALED))
def test_scaled_captures_give_the_bytes_they_gave_before(
    pcap: str, direction: int, copies: int, program: str
) -> None:
    one = read_pcap((EXAMPLES / f"{pcap}.pcap").read_bytes())
    step = np.repeat(np.arange(copies, dtype=np.uint64) * np.uint64(10**9), len(one.packets))
    scaled = Capture(one.packets * copies, np.tile(one.timestamp_ns, copies) + step)
    outputs = tuple(
        _digest(run_capture(shipped(p), scaled, direction, direction).pcap) for p in (program, "parse_only")
    )
    assert outputs == SCALED[pcap, direction, copies, program]


def test_the_longest_packet_beside_short_ones_is_read_and_written_whole() -> None:
    packets = [b"\x07" * MAX_PACKET_BYTES, b"\x01" * 60, b"\x02" * 61]  # a 65,664-wide batch of 3 rows
    report = run_capture(shipped("parse_only"), index_pcap(capture(packets, [0, 1, 2])), 0, 0)
    assert report.output == packets
