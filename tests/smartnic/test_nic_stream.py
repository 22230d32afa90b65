"""`nic run` from file to file (`run_pcap`): the capture read a block at a time, batches of
packet heads, output records spliced from the new heads and the untouched rest. Checked
against the reference meaning, one packet at a time through `Datapath.process` with the
whole packet, on random captures (cut anywhere, snaplen below the length, both byte
orders, micro- and nanosecond files)."""

from __future__ import annotations

import io
import struct

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.smartnic.p4_helpers import EXAMPLES, shipped

from cloudtwin.errors import NicError, P4Error
from cloudtwin.smartnic.p4 import PacketBatch, index_pcap, iter_pcap, parse_program, run_pcap
from cloudtwin.smartnic.p4 import run as run_module
from cloudtwin.smartnic.p4.depth import parse_depth

FRAMES = {
    "host": index_pcap((EXAMPLES / "host-frames.pcap").read_bytes()).packets(),
    "network": index_pcap((EXAMPLES / "network-frames.pcap").read_bytes()).packets(),
    "tenant": index_pcap((EXAMPLES / "tenant-traffic.pcap").read_bytes()).packets(),
}


def capture(records: list[tuple[bytes, int, int]], order: str = "<", nanos: bool = True) -> bytes:
    """A pcap file of (captured bytes, original length, fraction) records, 1 s apart."""
    magic = 0xA1B23C4D if nanos else 0xA1B2C3D4
    parts = [struct.pack(order + "IHHiIII", magic, 2, 4, 0, 0, 262144, 1)]
    for i, (data, original, fraction) in enumerate(records):
        parts += [struct.pack(order + "IIII", 1_700_000_000 + i, fraction, len(data), original), data]
    return b"".join(parts)


def reference(name: str, data: bytes, direction: int) -> bytes:
    """The output file as the meaning says: each packet alone through a fresh datapath's
    `process`, whole, in capture order (one pcap record at a time, nanoseconds)."""
    datapath = shipped(name)
    records = index_pcap(data)
    parts = [struct.pack("<IHHiIII", 0xA1B23C4D, 2, 4, 0, 0, 262144, 1)]
    for packet, stamp in zip(records.packets(), records.timestamp_ns.tolist(), strict=True):
        batch = PacketBatch.from_packets([packet], direction, direction, np.array([stamp], dtype=np.uint64))
        out = datapath.process(batch).packet(0)
        if out is not None:
            seconds, nanos = divmod(stamp, 1_000_000_000)
            parts += [struct.pack("<IIII", seconds, nanos, len(out), len(out)), out]
    return b"".join(parts)


def streamed(name: str, data: bytes, direction: int, chunk: int) -> bytes:
    """The output file of `run_pcap` reading `data` `chunk` bytes at a time."""
    sink = io.BytesIO()
    source = io.BytesIO(data)
    report = run_pcap(shipped(name), _chunked(source, chunk), sink.write, direction, direction, "c.pcap")
    assert report.packets_in == len(index_pcap(data)) and report.pcap_parts == []
    return sink.getvalue()


def _chunked(source: io.BytesIO, chunk: int):  # type: ignore[no-untyped-def]
    return lambda view: source.readinto(view[:chunk])


@st.composite
def packets(draw: st.DrawFn) -> tuple[bytes, int, int]:
    """A shipped frame with a random payload after it (or random bytes), maybe cut short of
    its original length as a small snaplen cuts it."""
    kind = draw(st.sampled_from([*FRAMES, "random"]))
    if kind == "random":
        data = draw(st.binary(max_size=200))
    else:
        frames = FRAMES[kind]
        data = frames[draw(st.integers(0, len(frames) - 1))] + draw(st.binary(max_size=400))
    original = len(data)
    if draw(st.booleans()):
        data = data[: draw(st.integers(0, len(data)))]
    return data, original, draw(st.integers(0, 999_999))


CAPTURES = st.tuples(st.lists(packets(), max_size=24), st.sampled_from("<>"), st.booleans())


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    CAPTURES,
    st.sampled_from(["vxlan_gateway", "parse_only", "tenant_meter"]),
    st.integers(0, 1),
    st.sampled_from([16, 97, 1 << 20]),
)
def test_file_to_file_writes_what_one_packet_at_a_time_writes(
    made: tuple[list[tuple[bytes, int, int]], str, bool], name: str, direction: int, chunk: int
) -> None:
    records, order, nanos = made
    data = capture(records, order, nanos)
    assert streamed(name, data, direction, chunk) == reference(name, data, direction)


@settings(max_examples=40, deadline=None)
@given(CAPTURES, st.integers(0, 1 << 16), st.sampled_from([1, 16, 97, 4096]))
def test_blocks_read_the_records_and_errors_of_the_whole_file(
    made: tuple[list[tuple[bytes, int, int]], str, bool], cut: int, chunk: int
) -> None:
    records, order, nanos = made
    data = capture(records, order, nanos)
    data = data[: max(24, len(data) - cut)] if cut % 3 == 0 else data  # a third cut anywhere
    try:
        whole = index_pcap(data, "c.pcap")
    except NicError as err:
        with pytest.raises(NicError) as caught:
            list(_blocks(data, chunk))
        assert str(caught.value) == str(err)
        return
    got = [(r.packets(), r.timestamp_ns.tolist()) for r in _blocks(data, chunk)]
    assert [p for packets_, _ in got for p in packets_] == whole.packets()
    assert [t for _, times in got for t in times] == whole.timestamp_ns.tolist()


def _blocks(data: bytes, chunk: int):  # type: ignore[no-untyped-def]
    source = io.BytesIO(data)
    for records in iter_pcap(_chunked(source, chunk), "c.pcap", chunk_bytes=chunk):
        yield records  # each block's columns view the reused buffer: read them now
        yield from ()


def test_a_record_cut_at_the_end_of_a_long_capture_is_named_by_its_number() -> None:
    frame = FRAMES["host"][0]
    data = capture([(frame, len(frame), 0)] * 5_000)
    with pytest.raises(NicError, match=r"^c\.pcap: record 4999 is truncated \(106 bytes announced\)$"):
        list(iter_pcap(io.BytesIO(data[:-1]).readinto, "c.pcap", chunk_bytes=4096))
    with pytest.raises(NicError, match=r"^c\.pcap: record 5000 is truncated in its header$"):
        list(iter_pcap(io.BytesIO(data + b"\x00" * 15).readinto, "c.pcap", chunk_bytes=4096))
    too_long = struct.pack("<IIII", 0, 0, 1 << 20, 1 << 20)
    with pytest.raises(NicError, match=r"^c\.pcap: record 5000 holds 1,048,576 bytes"):
        list(iter_pcap(io.BytesIO(data + too_long).readinto, "c.pcap", chunk_bytes=4096))


def test_heads_and_whole_packets_give_the_same_file(monkeypatch: pytest.MonkeyPatch) -> None:
    """A payload much longer than the head: the batch holds 68 bytes of each packet, the
    rest is copied from the capture; the same bytes as with whole packets in the batch."""
    host = [(f + bytes(range(256)) * 5, len(f) + 1280, 0) for f in FRAMES["host"]]
    data = capture(host * 50)
    heads = streamed("vxlan_gateway", data, 1, 1 << 20)
    monkeypatch.setattr(run_module, "parse_depth", lambda program: None)
    assert streamed("vxlan_gateway", data, 1, 1 << 20) == heads
    # frames 0 and 4 go to a MAC no VTEP holds (dropped); the others leave encapsulated,
    # 50 bytes longer (outer Ethernet, IPv4, UDP, VXLAN)
    kept = [f for i, f in enumerate(FRAMES["host"]) if i % 4]
    assert index_pcap(heads).length.tolist() == [len(f) + 1280 + 50 for f in kept] * 50


HEAD = """
#include <core.p4>
#include <pna.p4>
header eth_t { bit<48> dst; bit<48> src; bit<16> type; }
header ip_t { bit<8> a; bit<8> next; bit<16> b; }
struct h_t { eth_t eth; ip_t ip; ip_t inner; }
struct m_t { }
parser P(packet_in pkt, out h_t hdr, inout m_t meta, in pna_main_parser_input_metadata_t istd) {
    state start { pkt.extract(hdr.eth); transition select(hdr.eth.type) { 1: ip; 2: peek; default: accept; } }
    state ip { pkt.extract(hdr.ip); transition select(hdr.ip.next) { 1: inner; default: accept; } }
    state peek { transition select(pkt.lookahead<bit<24>>()) { 0: accept; default: ip; } }
    state inner { LOOP }
}
control C(inout h_t hdr, inout m_t meta, in pna_main_input_metadata_t istd,
          inout pna_main_output_metadata_t ostd) { apply { } }
control D(packet_out pkt, in h_t hdr, in m_t meta, in pna_main_output_metadata_t ostd) {
    apply { pkt.emit(hdr.eth); pkt.emit(hdr.ip); pkt.emit(hdr.inner); }
}
PNA_NIC(P(), C(), D()) main;
"""


@pytest.mark.parametrize(
    ("inner", "depth"),
    [
        # the longest path: start (14) -> peek (3, the lookahead) -> ip (4) -> inner (4)
        ("pkt.extract(hdr.inner); transition accept;", 14 + 3 + 4 + 4),
        ("transition ip;", None),  # a loop between states
        ("pkt.advance(32); transition accept;", None),  # a jump the text does not bound
    ],
)
def test_the_parser_reads_at_most_its_longest_path_of_extracts(inner: str, depth: int | None) -> None:
    assert parse_depth(parse_program(HEAD.replace("LOOP", inner), "h.p4")) == depth


def test_the_gateway_reads_68_bytes_at_most() -> None:
    # outer Ethernet 14, IPv4 20, UDP 8, VXLAN 8, inner Ethernet 14, VLAN 4
    assert parse_depth(shipped("vxlan_gateway").program) == 68


def test_a_parser_past_its_head_is_an_error_not_wrong_bytes() -> None:
    datapath = shipped("parse_only")
    frame = FRAMES["tenant"][0]
    batch = PacketBatch.from_packets([frame])
    narrow = PacketBatch.of_rows(batch.data[:, :20].copy(), batch.length)
    with pytest.raises((P4Error, ValueError, IndexError)):
        datapath.process(narrow)
