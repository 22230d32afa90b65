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
from tests.conftest import DATASETS
from tests.p4.helpers import EXAMPLES, shipped

from cloudtwin.errors import NicError, P4Error
from cloudtwin.p4 import Datapath, PacketBatch, index_pcap, iter_pcap, parse_program, run_pcap
from cloudtwin.p4 import run as run_module
from cloudtwin.p4.depth import parse_depth

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


class _Repeating:
    """A pcap stream of the shipped host frames repeated `copies` times, made as it is read
    (the capture is never held whole)."""

    def __init__(self, copies: int) -> None:
        data = (EXAMPLES / "host-frames.pcap").read_bytes()
        self.header, self.records = data[:24], data[24:]
        self.left = 24 + len(self.records) * copies
        self.at = 0

    def readinto(self, view: memoryview) -> int:
        size = min(len(view), self.left)
        got = 0
        while got < size:
            if self.at < 24:
                part = self.header[self.at : self.at + size - got]
            else:
                offset = (self.at - 24) % len(self.records)
                part = self.records[offset : offset + size - got]
            view[got : got + len(part)] = part
            got += len(part)
            self.at += len(part)
        self.left -= got
        return got


def test_memory_follows_the_block_not_the_capture() -> None:
    """64 MiB of capture (360,000 packets) through the gateway with at most a few block's
    worth of memory: numpy's arrays are counted by tracemalloc."""
    import tracemalloc

    copies = (64 << 20) // 1424  # the shipped file's 8 records take 1,424 bytes
    stream = _Repeating(copies)
    datapath = shipped("vxlan_gateway")
    written = 0

    def count(part: object) -> None:
        nonlocal written
        written += memoryview(part).nbytes  # type: ignore[arg-type]

    tracemalloc.start()
    try:
        report = run_pcap(datapath, stream.readinto, count, 1, 1, "big.pcap")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert report.packets_in == copies * 8 and report.packets_out == copies * 6
    # per copy, frames 1-3 and 5-7 leave (122 + 138 + 154 + 186 + 202 + 218 = 1,020 bytes),
    # each 50 bytes longer and behind a 16-byte record header
    assert written == 24 + copies * (1020 + 6 * (50 + 16))
    assert peak < 24 << 20, f"{peak / 2**20:.1f} MiB"


def test_without_an_output_the_counts_are_those_with_one() -> None:
    data = capture([(f, len(f), 0) for f in FRAMES["host"]] * 20)
    sink = io.BytesIO()
    written = run_pcap(shipped("vxlan_gateway"), io.BytesIO(data).readinto, sink.write, 1, 1)
    counted = run_pcap(shipped("vxlan_gateway"), io.BytesIO(data).readinto, None, 1, 1)
    assert counted.to_json() == written.to_json() and counted.packets_out == 120
    assert len(index_pcap(sink.getvalue())) == 120


_D = "02:00:00:00:00:02"  # the destination MAC of the frames below
PNA_ENTRIES = {
    "pna-demo-L2-one-table.p4": {"tables": {"L2_fwd": [
        {"match": {"hdr.eth.dstAddr": _D}, "action": "L2_send_to_port", "params": {"port_id": 3}}]}},
    "pna-demo-L2-two-tables.p4": {"tables": {
        "L2_fwd_from_network": [
            {"match": {"hdr.eth.dstAddr": _D}, "action": "L2_send_to_port", "params": {"port_id": 5}}],
        "L2_fwd_from_host": [
            {"match": {"hdr.eth.dstAddr": _D}, "action": "L2_send_to_port", "params": {"port_id": 0}}]}},
    "pna-example-template.p4": {"tables": {"ipv4_da_lpm": [
        {"match": {"hdr.ipv4.dstAddr": "10.0.0.0/8"}, "action": "next_hop", "params": {"port": 2}}]}},
}  # fmt: skip


@pytest.mark.parametrize(
    "name",
    [
        "pna-demo-L2-one-table.p4",
        "pna-demo-L2-two-tables.p4",
        "pna-example-template.p4",
        "pna-example-tcp-connection-tracking.p4",
        "pna-example-tcp-connection-state-tracking.p4",
    ],
)
def test_pna_examples_give_the_same_file_from_heads_as_from_whole_packets(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The PNA examples whose parsers `parse_depth` bounds (14 to 54 bytes), TCP frames with
    payloads of 0 to 700 bytes both ways: batches of heads write the bytes and counts that
    batches of whole packets write (add-on-miss tables, direct counters and all)."""
    examples = DATASETS / "pna-examples" / "examples"
    if not examples.is_dir():
        pytest.skip("needs ../shared/datasets/pna-examples")
    from tests.p4.test_pna_examples import HOST_IP, NET_IP, tcp_frame

    from cloudtwin.p4.run import install

    program = (examples / name).read_text()
    assert parse_depth(parse_program(program, name, here=examples)) is not None
    ends = [(HOST_IP, NET_IP), (NET_IP, HOST_IP)]
    flags = [0x02, 0x12, 0x10, 0x11]  # SYN, SYN+ACK, ACK, FIN+ACK
    frames = [
        tcp_frame(*ends[i % 2], 1000 + i % 7, 80, flags[i % 4]) + bytes(range(256)) * (i % 3) + bytes(i % 190)
        for i in range(120)
    ]
    data = capture([(f, len(f), (i * 37_000) % 1_000_000) for i, f in enumerate(frames)])

    def run(direction: int) -> tuple[bytes, dict[str, object]]:
        datapath = Datapath(parse_program(program, name, here=examples))
        install(datapath, PNA_ENTRIES.get(name))
        sink = io.BytesIO()
        report = run_pcap(datapath, io.BytesIO(data).readinto, sink.write, direction, direction)
        return sink.getvalue(), report.to_json()

    heads = [run(d) for d in (0, 1)]
    monkeypatch.setattr(run_module, "parse_depth", lambda program: None)
    assert [run(d) for d in (0, 1)] == heads
    if name in PNA_ENTRIES:  # forwarded by the entries (the connection trackers send nothing)
        assert all(len(index_pcap(out)) > 0 for out, _ in heads)
