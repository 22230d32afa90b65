"""Real packets through the P4 interpreter: scapy round trips, VXLAN encap/decap, parser errors."""

from __future__ import annotations

import functools

import numpy as np
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from scapy.all import IP, TCP, UDP, VXLAN, Dot1Q, Ether, IPv6, Raw
from scapy.contrib.roce import BTH
from tests.p4.helpers import EXAMPLES, shipped

from cloudtwin.p4 import Datapath, PacketBatch, Program, install, parse_program

MAC = st.integers(0, (1 << 48) - 1).map(
    lambda v: ":".join(f"{(v >> s) & 0xFF:02x}" for s in range(40, -8, -8))
)
IP4 = st.integers(0, (1 << 32) - 1).map(lambda v: ".".join(str((v >> s) & 0xFF) for s in (24, 16, 8, 0)))
IP6 = st.integers(0, (1 << 128) - 1).map(
    lambda v: ":".join(f"{(v >> s) & 0xFFFF:x}" for s in range(112, -16, -16))
)
PORT = st.integers(0, 65535)


@st.composite
def packets(draw: st.DrawFn) -> bytes:
    """A random Ethernet frame of the header kinds the Janus datapath parses."""
    frame = Ether(src=draw(MAC), dst=draw(MAC))
    if draw(st.booleans()):
        frame = frame / Dot1Q(vlan=draw(st.integers(0, 4095)), prio=draw(st.integers(0, 7)))
    if draw(st.booleans()):
        frame = frame / IP(src=draw(IP4), dst=draw(IP4), ttl=draw(st.integers(0, 255)), id=draw(PORT))
    else:
        frame = frame / IPv6(src=draw(IP6), dst=draw(IP6), fl=draw(st.integers(0, (1 << 20) - 1)))
    kind = draw(st.sampled_from(["udp", "tcp", "vxlan", "roce"]))
    if kind == "tcp":
        frame = frame / TCP(sport=draw(PORT), dport=draw(PORT), seq=draw(st.integers(0, (1 << 32) - 1)))
    elif kind == "udp":
        frame = frame / UDP(sport=draw(PORT), dport=draw(PORT.filter(lambda p: p not in (4789, 4791))))
    elif kind == "vxlan":
        frame = frame / UDP(sport=draw(PORT), dport=4789) / VXLAN(vni=draw(st.integers(0, (1 << 24) - 1)))
        frame = frame / Ether(src=draw(MAC), dst=draw(MAC)) / IP()
    else:
        frame = (
            frame
            / UDP(sport=draw(PORT), dport=4791)
            / BTH(
                opcode=draw(st.integers(0, 255)),
                dqpn=draw(st.integers(0, (1 << 24) - 1)),
                psn=draw(st.integers(0, (1 << 24) - 1)),
            )
        )
    return bytes(frame / Raw(draw(st.binary(max_size=64))))


@settings(max_examples=120, deadline=None)
@given(st.lists(packets(), min_size=1, max_size=8))
def test_scapy_packets_round_trip_byte_for_byte(frames: list[bytes]) -> None:
    datapath = shipped("parse_only")
    result = datapath.process(PacketBatch.from_packets(frames, direction=0, input_port=0))
    assert not result.parser_error.any()
    assert result.packets() == frames


@settings(max_examples=80, deadline=None)
@given(packets(), st.data())
def test_truncated_packets_are_parser_errors(frame: bytes, data: st.DataObject) -> None:
    datapath = shipped("parse_only")
    parsed = datapath.process(PacketBatch.from_packets([frame]))
    cut = data.draw(st.integers(0, 13))
    result = datapath.process(PacketBatch.from_packets([frame[:cut], frame]))
    assert result.parser_error.tolist() == [True, False]
    assert result.dropped[0] and result.packet(1) == frame
    assert parsed.packet(0) == frame


def test_a_truncated_header_deep_in_the_stack_is_a_parser_error() -> None:
    frame = bytes(Ether() / IP() / UDP(dport=4791) / BTH())
    datapath = shipped("parse_only")
    result = datapath.process(PacketBatch.from_packets([frame[: 14 + 20 + 8 + 11], frame[: 14 + 19], frame]))
    assert result.parser_error.tolist() == [True, True, False]


def test_bad_ip_version_is_rejected_not_raised() -> None:
    frame = bytearray(bytes(Ether() / IP() / UDP()))
    frame[14] = 0x75  # version 7
    result = shipped("parse_only").process(PacketBatch.from_packets([bytes(frame)]))
    assert result.parser_error.tolist() == [True]


def inner_frame(src: str = "0a:00:00:00:10:01", dst: str = "0a:00:00:00:10:02", size: int = 100) -> bytes:
    return bytes(
        Ether(src=src, dst=dst) / IP(src="192.168.1.1", dst="192.168.1.2") / UDP() / Raw(bytes(size))
    )


def test_gateway_encapsulates_a_tenant_frame_as_scapy_expects() -> None:
    frame = inner_frame()
    result = shipped("vxlan_gateway").process(PacketBatch.from_packets([frame], direction=1, input_port=1))
    assert result.out_port.tolist() == [0]
    out = Ether(result.packet(0))
    assert out[VXLAN].vni == 1001 and bytes(out[VXLAN].payload) == frame
    assert out[IP].src == "10.0.0.1" and out[IP].dst == "10.0.0.2" and out.dst == "02:00:0a:00:00:fe"
    assert out[IP].len == len(frame) + 36 and out[UDP].len == len(frame) + 16
    assert 49152 <= out[UDP].sport <= 65535 and out[UDP].dport == 4789
    checksum = out[IP].chksum
    del out[IP].chksum
    assert Ether(bytes(out))[IP].chksum == checksum  # scapy recomputes the same checksum


def test_gateway_decapsulates_to_the_owning_function_only() -> None:
    inner = inner_frame(src="0a:00:00:00:10:02", dst="0a:00:00:00:10:01")
    outer = Ether() / IP(src="10.0.0.2", dst="10.0.0.1") / UDP(sport=50000, dport=4789)
    frames = [bytes(outer / VXLAN(vni=1001) / Raw(inner)), bytes(outer / VXLAN(vni=2002) / Raw(inner))]
    result = shipped("vxlan_gateway").process(PacketBatch.from_packets(frames))
    assert result.packet(0) == inner and result.out_port[0] == 1
    assert result.dropped[1]  # VNI 2002 does not own that MAC


def test_one_packet_and_a_batch_agree() -> None:
    frames = [
        inner_frame(size=s, dst=d) for s in (10, 200, 900) for d in ("0a:00:00:00:10:02", "0a:00:00:00:20:02")
    ]
    ports = np.array([1, 2] * 3)
    batch = shipped("vxlan_gateway").process(PacketBatch.from_packets(frames, 1, ports))
    single = [
        shipped("vxlan_gateway").process(PacketBatch.from_packets([f], 1, p)).packet(0)
        for f, p in zip(frames, ports, strict=True)
    ]
    assert batch.packets() == single


@pytest.mark.parametrize("cut", [0, 5, 14, 30])
def test_gateway_survives_truncated_network_packets(cut: int) -> None:
    frame = bytes(Ether() / IP(dst="10.0.0.1") / UDP(dport=4789) / VXLAN(vni=1001) / Raw(inner_frame()))
    result = shipped("vxlan_gateway").process(PacketBatch.from_packets([frame[:cut]]))
    assert result.dropped[0]


@functools.cache
def _parsed(name: str) -> tuple[Program, object]:
    text = (EXAMPLES / f"{name}.p4").read_text()
    entries = EXAMPLES / f"{name}.entries.yaml"
    return parse_program(text, f"{name}.p4"), yaml.safe_load(
        entries.read_text()
    ) if entries.exists() else None


def fresh(name: str) -> Datapath:
    """A shipped program with its entries, parsed once per test session."""
    program, document = _parsed(name)
    datapath = Datapath(program)
    install(datapath, document)
    return datapath


@st.composite
def mixed_batches(draw: st.DrawFn) -> tuple[list[bytes], list[int], list[int]]:
    """Frames of every kind the shipped programs act on (tenant frames to known and unknown
    MACs, VXLAN to this NIC's VTEP, random stacks), some cut short, from any direction and port."""
    frames, directions, ports = [], [], []
    for _ in range(draw(st.integers(1, 12))):
        kind = draw(st.sampled_from(["tenant", "vxlan", "random"]))
        if kind == "tenant":
            dst = draw(st.sampled_from(["0a:00:00:00:10:02", "0a:00:00:00:20:02", "0a:00:00:00:99:99"]))
            frame = inner_frame(dst=dst, size=draw(st.integers(0, 300)))
        elif kind == "vxlan":
            inner = inner_frame(dst=draw(st.sampled_from(["0a:00:00:00:10:01", "0a:00:00:00:20:01"])))
            outer = Ether() / IP(src="10.0.0.2", dst=draw(st.sampled_from(["10.0.0.1", "10.0.0.3"])))
            vni = draw(st.sampled_from([1001, 2002, 3003]))
            frame = bytes(outer / UDP(dport=4789) / VXLAN(vni=vni) / Raw(inner))
        else:
            frame = draw(packets())
        if draw(st.integers(0, 9)) == 0:
            frame = frame[: draw(st.integers(0, len(frame)))]
        frames.append(frame)
        directions.append(draw(st.integers(0, 1)))
        ports.append(draw(st.integers(0, 3)))
    return frames, directions, ports


@settings(max_examples=40, deadline=None)
@given(mixed_batches())
def test_a_mixed_batch_gives_what_its_packets_give_one_by_one(
    batch: tuple[list[bytes], list[int], list[int]],
) -> None:
    """Rows of one batch take different parser paths, emit different headers and start
    their payload at different offsets; each still leaves as it would alone, and the
    counters, table hits and meters end the same."""
    frames, directions, ports = batch
    times = np.arange(len(frames), dtype=np.uint64) * 1000
    for name in ("vxlan_gateway", "security_groups", "tenant_meter", "parse_only"):
        together, alone = fresh(name), fresh(name)
        result = together.process(
            PacketBatch.from_packets(frames, np.array(directions), np.array(ports), times)
        )
        for i, frame in enumerate(frames):
            one = alone.process(PacketBatch.from_packets([frame], directions[i], ports[i], times[i : i + 1]))
            assert result.packet(i) == one.packet(0), (name, i)
            assert (result.out_port[i], result.parser_error[i]) == (one.out_port[0], one.parser_error[0])
        for counter, (packets_, octets) in together.counters.items():
            assert packets_.tolist() == alone.counters[counter][0].tolist(), counter
            assert octets.tolist() == alone.counters[counter][1].tolist(), counter
        for table, state in together.tables.items():
            assert state.hits.tolist() == alone.tables[table].hits.tolist(), table


EXIT_PROGRAM = """
header ethernet_t { bit<48> dst; bit<48> src; bit<16> etherType; }
struct headers_t { ethernet_t ethernet; }
struct metadata_t { bit<8> unused; }
parser P(packet_in pkt, out headers_t hdr, inout metadata_t meta, in pna_main_parser_input_metadata_t istd) {
    state start { pkt.extract(hdr.ethernet); transition accept; }
}
control C(inout headers_t hdr, inout metadata_t meta, in pna_main_input_metadata_t istd,
          inout pna_main_output_metadata_t ostd) {
    apply {
        send_to_port(1);
        if (hdr.ethernet.etherType == 0x0001) {
            hdr.ethernet.src = 1;
            exit;
            hdr.ethernet.src = 2;
        }
        if (hdr.ethernet.etherType == 0x0002) {
            hdr.ethernet.src = 3;
        }
        hdr.ethernet.dst = 4;
    }
}
control D(packet_out pkt, in headers_t hdr, in metadata_t meta, in pna_main_output_metadata_t ostd) {
    apply { pkt.emit(hdr.ethernet); }
}
PNA_NIC(P(), C(), D()) main;
"""


def test_exit_stops_only_the_rows_that_run_it() -> None:
    """`exit` ends the control for its rows (the rest of its block and of every enclosing
    block); the other rows of the batch run on."""
    datapath = Datapath(parse_program(EXIT_PROGRAM, "exit.p4"))
    frames = [bytes(6) + bytes(6) + kind.to_bytes(2, "big") for kind in (1, 2, 3)]
    result = datapath.process(PacketBatch.from_packets(frames))
    fields = [(out[:6], out[6:12]) for out in result.packets()]  # (dst, src)
    one, four = (1).to_bytes(6, "big"), (4).to_bytes(6, "big")
    assert fields == [(bytes(6), one), (four, (3).to_bytes(6, "big")), (four, bytes(6))]
    assert result.out_port.tolist() == [1, 1, 1]


INDEX_PROGRAM = """
header index_t { bit<64> narrow; bit<128> wide; }
struct headers_t { index_t index; }
struct metadata_t { bit<8> color; }
parser P(packet_in pkt, out headers_t hdr, inout metadata_t meta, in pna_main_parser_input_metadata_t istd) {
    state start { pkt.extract(hdr.index); transition accept; }
}
control C(inout headers_t hdr, inout metadata_t meta, in pna_main_input_metadata_t istd,
          inout pna_main_output_metadata_t ostd) {
    Counter<bit<64>, bit<64>>(4, PNA_CounterType_t.PACKETS_AND_BYTES) by_narrow;
    Counter<bit<64>, bit<128>>(4, PNA_CounterType_t.PACKETS_AND_BYTES) by_wide;
    Meter<bit<64>>(4, PNA_MeterType_t.PACKETS) narrow_rate;
    Meter<bit<128>>(4, PNA_MeterType_t.PACKETS) wide_rate;
    apply {
        by_narrow.count(hdr.index.narrow);
        by_wide.count(hdr.index.wide);
        send_to_port(0);
        if (narrow_rate.execute(hdr.index.narrow) == PNA_MeterColor_t.RED) { drop_packet(); }
        if (wide_rate.execute(hdr.index.wide) == PNA_MeterColor_t.RED) { drop_packet(); }
    }
}
control D(packet_out pkt, in headers_t hdr, in metadata_t meta, in pna_main_output_metadata_t ostd) {
    apply { pkt.emit(hdr.index); }
}
PNA_NIC(P(), C(), D()) main;
"""


def test_an_index_outside_a_counter_or_meter_array_leaves_it_alone() -> None:
    """PNA: `c.count(i)` with i >= the array's size counts nothing, and `m.execute(i)` is
    GREEN. An index of 2**63 or more used to wrap to a negative cell (2**64 - 1 counted in
    the last cell, 2**63 raised IndexError)."""
    datapath = Datapath(parse_program(INDEX_PROGRAM, "index.p4"))
    never = {"cir": 0, "cburst": 0, "pir": 0, "pburst": 0}  # every packet RED
    install(datapath, {"meters": {"narrow_rate": [{"index": 3, **never}],
                                  "wide_rate": [{"index": 3, **never}]}})
    indexes = [(3, 3), (4, 4), (2**63, 2**64), (2**64 - 1, 2**128 - 1), (1, 2**64 + 1), (2**63 + 2, 2)]
    frames = [n.to_bytes(8, "big") + w.to_bytes(16, "big") for n, w in indexes]  # 24 bytes each
    result = datapath.process(PacketBatch.from_packets(frames))
    assert datapath.counters["by_narrow"][0].tolist() == [0, 1, 0, 1]
    assert datapath.counters["by_narrow"][1].tolist() == [0, 24, 0, 24]
    assert datapath.counters["by_wide"][0].tolist() == [0, 0, 1, 1]
    assert datapath.counters["by_wide"][1].tolist() == [0, 0, 24, 24]
    # only cell 3 is configured (RED): the first packet; every index outside the arrays is GREEN
    assert result.out_port.tolist() == [-1, 0, 0, 0, 0, 0]
    for i, frame in enumerate(frames):  # one packet at a time means the same
        alone = Datapath(parse_program(INDEX_PROGRAM, "index.p4"))
        install(alone, {"meters": {"narrow_rate": [{"index": 3, **never}],
                                   "wide_rate": [{"index": 3, **never}]}})
        assert alone.process(PacketBatch.from_packets([frame])).out_port.tolist() == [result.out_port[i]]

