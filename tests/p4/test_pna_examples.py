"""The eight example programs of the PNA specification, read with pna.p4 itself and run on
packets their own comments describe. Every expected result is worked out by hand from the
program text (which table, which action, which port, which bytes), never from running it."""

from __future__ import annotations

import ipaddress
import json
import re
import struct
from functools import cache
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.conftest import DATASETS

from cloudtwin.errors import NicError, P4Error
from cloudtwin.p4.arch.pna import MAX_RECIRCULATIONS, NET_PORT, run_entries
from cloudtwin.p4.batch import PacketBatch
from cloudtwin.p4.datapath import Datapath
from cloudtwin.p4.frontend import parse_program
from cloudtwin.p4.program import Program

EXAMPLES = DATASETS / "pna-examples" / "examples"
PROGRAMS = sorted(p.name for p in EXAMPLES.glob("*.p4")) if EXAMPLES.is_dir() else []
S = 1_000_000_000  # one second in ns (profile p expires p seconds after it is set)

pytestmark = pytest.mark.skipif(not EXAMPLES.is_dir(), reason="needs ../shared/datasets/pna-examples")

MAC_D, MAC_S, MAC_D2 = "02:00:00:00:00:02", "02:00:00:00:00:01", "02:00:00:00:00:09"
HOST_IP, NET_IP, OTHER_IP = "10.0.0.1", "192.0.2.9", "198.51.100.7"


@cache
def _program(name: str) -> Program:
    path = EXAMPLES / name
    return parse_program(path.read_text(), str(path), here=path.parent)


def load(name: str) -> Datapath:
    """A fresh datapath (empty tables, zero counters) of example `name`."""
    return Datapath(_program(name))


def mac(text: str) -> bytes:
    return bytes.fromhex(text.replace(":", ""))


def eth(dst: str, src: str, ether_type: int) -> bytes:
    return mac(dst) + mac(src) + struct.pack("!H", ether_type)


def ipv4(src: str, dst: str, proto: int, total: int) -> bytes:
    return struct.pack(
        "!BBHHHBBH4s4s", 0x45, 0, total, 0, 0, 64, proto, 0,
        ipaddress.IPv4Address(src).packed, ipaddress.IPv4Address(dst).packed,
    )  # fmt: skip


def tcp(sport: int, dport: int, flags: int, seq: int = 0, ack: int = 0) -> bytes:
    return struct.pack("!HHIIBBHHH", sport, dport, seq, ack, 0x50, flags, 0, 0, 0)


def tcp_frame(src: str, dst: str, sport: int, dport: int, flags: int, seq: int = 0, ack: int = 0) -> bytes:
    return eth(MAC_D, MAC_S, 0x0800) + ipv4(src, dst, 6, 40) + tcp(sport, dport, flags, seq, ack)


def test_every_example_is_accepted() -> None:
    """All eight are read; `pytest -s` prints what each holds (the tests below run them)."""
    assert len(PROGRAMS) == 8
    print(f"\n{'PNA example':58} tables  add-on-miss  externs")
    for name in PROGRAMS:
        dp = load(name)
        externs = sorted({e.kind for c in dp.owners.values() for e in c.externs.values()})
        externs += sorted(str(n.children[0]) for n in dp.program.arch_instances.values())
        print(f"{name:58} {len(dp.tables):6}  {len(dp.pna.aom):11}  {', '.join(externs) or '-'}")


def test_l2_one_table_forwards_by_destination_mac() -> None:
    dp = load("pna-demo-L2-one-table.p4")
    entries = {"tables": {"L2_fwd": [{"match": {"hdr.eth.dstAddr": MAC_D}, "action": "L2_send_to_port",
                                      "params": {"port_id": 3}}]}}  # fmt: skip
    known, unknown = eth(MAC_D, MAC_S, 0x0800) + b"payload", eth(MAC_D2, MAC_S, 0x0800) + b"x"
    out = run_entries(dp, entries, [(0, known, 0), (1, unknown, 0), (2, known, 0)])
    # one table for both directions: the known MAC goes to port 3 from anywhere, unchanged;
    # the unknown one takes the default action `drop`
    assert out == [(3, known), None, (3, known)]


def test_l2_two_tables_one_per_direction() -> None:
    dp = load("pna-demo-L2-two-tables.p4")
    entry = {"match": {"hdr.eth.dstAddr": MAC_D}, "action": "L2_send_to_port"}
    entries = {"tables": {"L2_fwd_from_network": [{**entry, "params": {"port_id": 5}}],
                          "L2_fwd_from_host": [{**entry, "params": {"port_id": 0}}]}}  # fmt: skip
    frame = eth(MAC_D, MAC_S, 0x86DD)
    out = run_entries(dp, entries, [(0, frame, 0), (2, frame, 0), (2, eth(MAC_D2, MAC_S, 0x86DD), 0)])
    # port 0 is the network: its packets use L2_fwd_from_network (port 5); a host port's use
    # L2_fwd_from_host (port 0); a MAC neither table knows is dropped
    assert out == [(5, frame), (0, frame), None]


def test_last_forwarding_action_wins_and_mirrors_are_counted() -> None:
    dp = load("pna-demo-last-forwarding-action-wins.p4")
    entries = {
        "tables": {
            "mirror_decision_near_ports_rx": [
                {
                    "match": {"hdr.eth.srcAddr": MAC_S},
                    "action": "my_mirror0",
                    "params": {"mirror_session_id": 5},
                }
            ],
            "t1_rx": [
                {"match": {"hdr.eth.srcAddr": MAC_S}, "action": "my_send_to_port", "params": {"port_id": 1}}
            ],
            "t2_rx": [{"match": {"hdr.eth.dstAddr": MAC_D}, "action": "my_drop"}],
            "t3_rx": [
                {
                    "match": {"hdr.eth.etherType": 0x0800},
                    "action": "my_send_to_port",
                    "params": {"port_id": 2},
                }
            ],
            "mirror_decision_near_host_rx": [
                {
                    "match": {"hdr.eth.srcAddr": MAC_S},
                    "action": "my_mirror3",
                    "params": {"mirror_session_id": 7},
                }
            ],
        }
    }
    all_three = eth(MAC_D, MAC_S, 0x0800)  # t1 sends to 1, t2 drops, t3 sends to 2: port 2
    drop_last = eth(MAC_D, MAC_S, 0x86DD)  # t3 misses (NoAction): t2's drop is the last
    send_only = eth(MAC_D2, MAC_S, 0x86DD)  # only t1 acts: port 1
    from_host = eth(MAC_D, MAC_S, 0x0800)  # from a host port no table applies: dropped
    packets = [(0, all_three, 0), (0, drop_last, 0), (0, send_only, 0), (4, from_host, 0)]
    assert run_entries(dp, entries, packets) == [(2, all_three), None, (1, send_only), None]
    # every network packet from MAC_S asked for a copy in slot 0 (session 5) and slot 3 (session 7)
    assert dp.pna.mirror_copies == {5: 3, 7: 3}
    assert dp.counter_totals()["mirror_packet"] == {5: (3, 0), 7: (3, 0)}  # as `nic run` reports them


def test_template_counts_ports_and_prefixes() -> None:
    dp = load("pna-example-template.p4")
    entries = {"tables": {"ipv4_da_lpm": [{"match": {"hdr.ipv4.dstAddr": "10.1.0.0/16"}, "action": "next_hop",
                                           "params": {"port": 2}}]}}  # fmt: skip
    routed = eth(MAC_D, MAC_S, 0x0800) + ipv4(HOST_IP, "10.1.2.3", 17, 28) + bytes(8)
    missed = eth(MAC_D, MAC_S, 0x0800) + ipv4(HOST_IP, "10.2.0.1", 17, 28) + bytes(8)
    arp = eth(MAC_D, MAC_S, 0x0806) + bytes(28)
    out = run_entries(dp, entries, [(1, routed, 0), (3, missed, 0), (0, arp, 0)])
    assert out == [(2, routed), None, None]  # a miss runs default_route_drop; ARP meets no table
    totals = dp.counter_totals()
    # port_bytes_in counts every packet by its input port (42, 42 and 42 bytes)
    assert totals["port_bytes_in"] == {0: (1, 42), 1: (1, 42), 3: (1, 42)}
    # the direct counter: entry 0 counted the routed packet, the default entry (-1) the miss
    assert totals["per_prefix_pkt_byte_count"] == {-1: (1, 42), 0: (1, 42)}


def _actions(dp: Datapath, packets: list[tuple[int, bytes, int]], entries: object = None) -> list[str]:
    """Which of ct_tcp_table's actions each packet ran, packet by packet."""
    out = []
    run_entries(dp, entries, [])
    for packet in packets:
        before = dict(dp.action_runs)
        _run_one(dp, packet)
        ran = [
            a
            for a in ("ct_tcp_table_hit", "ct_tcp_table_miss")
            if dp.action_runs.get(a, 0) > before.get(a, 0)
        ]
        out.append(ran[0] if ran else "-")
    return out


def _run_one(dp: Datapath, packet: tuple[int, bytes, int]) -> None:
    port, data, time_ns = packet
    dp.process(PacketBatch.from_packets([data], int(port != NET_PORT), port, np.array([time_ns])))


def _tcp_tracking_packets() -> list[tuple[int, bytes, int]]:
    syn = tcp_frame(HOST_IP, NET_IP, 1000, 80, 0x02)
    return [
        (1, syn, 0),  # host SYN: set_ct_options -> tcp_syn_packet; miss -> add_entry, profile NEW (1 s)
        (0, tcp_frame(NET_IP, HOST_IP, 80, 1000, 0x12), S // 2),  # net SYN+ACK: same key reversed, hit
        (1, tcp_frame(HOST_IP, NET_IP, 1000, 80, 0x10), 9 * S // 10),  # host ACK: ESTABLISHED, 0.9 + 2 s
        (0, tcp_frame(NET_IP, HOST_IP, 80, 1000, 0x10), 3 * S // 2),  # hit at 1.5 s (2.9 s > 1.5 s)
        (1, tcp_frame(HOST_IP, NET_IP, 1000, 80, 0x11), 2 * S),  # host FIN: profile NOW, expires at 2 s
        (0, tcp_frame(NET_IP, HOST_IP, 80, 1000, 0x10), 2 * S),  # at 2 s: expired, a miss (dropped)
        (0, tcp_frame(OTHER_IP, HOST_IP, 5, 6, 0x10), 2 * S + 1),  # unknown connection: miss, drop
    ]


def test_tcp_connection_tracking_adds_on_miss_and_expires() -> None:
    dp = load("pna-example-tcp-connection-tracking.p4")
    packets = _tcp_tracking_packets()
    assert _actions(dp, packets) == [
        "ct_tcp_table_miss",
        *["ct_tcp_table_hit"] * 4,
        *["ct_tcp_table_miss"] * 2,
    ]
    entries = dp.tables["ct_tcp_table"].entries
    key = (int(ipaddress.IPv4Address(NET_IP)), int(ipaddress.IPv4Address(HOST_IP)), 6, 80, 1000)
    assert [(e.match, e.action) for e in entries] == [(key, "ct_tcp_table_hit")]
    assert dp.pna.aom["ct_tcp_table"].expire_at == [2 * S]  # the FIN's profile NOW
    # the program never calls send_to_port: every packet ends dropped
    assert run_entries(load("pna-example-tcp-connection-tracking.p4"), None, packets) == [None] * 7


def test_expire_time_profiles_from_the_entries_document() -> None:
    dp = load("pna-example-tcp-connection-tracking.p4")
    packets = _tcp_tracking_packets()
    document = {"pna": {"expire_time_profiles": {1: "100ms"}}}
    # profile NEW now lasts 100 ms: the SYN+ACK at 0.5 s finds the entry gone and is dropped
    assert _actions(dp, packets[:2], document) == ["ct_tcp_table_miss", "ct_tcp_table_miss"]
    assert dp.pna.aom["ct_tcp_table"].expire_at == [S // 10]


@pytest.mark.parametrize(
    ("pna", "message"),
    [
        ({"expire_time_profiles": {1: "soon"}}, "pna.expire_time_profiles.1: "),
        ({"expire_time_profiles": {300: "1s"}}, "pna.expire_time_profiles.300: a profile is a number 0..255"),
        (
            {"default_actions": {"nope": {"action": "drop"}}},
            "pna.default_actions.nope: the program has no table",
        ),
        ({"default_actions": {"ct_tcp_table": {"action": "drop"}}}, "default action is const"),
        ({"frobnicate": 1}, "pna: a mapping with"),
        (
            {"direct_meters": {"nope": []}},
            "pna.direct_meters.nope: a list of settings of one of the program's",
        ),
    ],
)
def test_bad_pna_settings_name_their_key(pna: dict[str, object], message: str) -> None:
    with pytest.raises(NicError, match=re.escape(message)):
        run_entries(load("pna-example-tcp-connection-tracking.p4"), {"pna": pna}, [])


def test_tcp_connection_tracking_without_the_ack_expires_at_one_second() -> None:
    dp = load("pna-example-tcp-connection-tracking.p4")
    packets = _tcp_tracking_packets()
    # without the host's ACK the entry keeps profile NEW: gone at 1 s, so the 1.5 s packet misses
    assert _actions(dp, [packets[0], packets[1], packets[3]]) == ["ct_tcp_table_miss", "ct_tcp_table_hit",
                                                                    "ct_tcp_table_miss"]  # fmt: skip


def test_tcp_state_tracking_stores_sequence_numbers_in_the_entry() -> None:
    dp = load("pna-example-tcp-connection-state-tracking.p4")
    packets = [
        (1, tcp_frame(HOST_IP, NET_IP, 1000, 80, 0x02, seq=100), 0),  # SYN: add, h2n_seqNo = 100, 1 s
        (0, tcp_frame(NET_IP, HOST_IP, 80, 1000, 0x12, seq=500, ack=101), S // 10),  # 101 == 100 + 1: restart
        (0, tcp_frame(NET_IP, HOST_IP, 80, 1000, 0x10, ack=50), 2 * S // 10),  # 50 <= 100, >= 0: ESTABLISHED
        (1, tcp_frame(HOST_IP, NET_IP, 1000, 80, 0x10, ack=0), 15 * S // 10),  # 0 <= 0, >= 0: ESTABLISHED
        (0, tcp_frame(NET_IP, HOST_IP, 80, 1000, 0x12, ack=999), 16 * S // 10),  # wrong ack: NOW, dropped
        (1, tcp_frame(HOST_IP, NET_IP, 1000, 80, 0x10), 17 * S // 10),  # expired at 1.6 s: miss, dropped
    ]
    assert _actions(dp, packets) == ["ct_tcp_table_miss", *["ct_tcp_table_hit"] * 4, "ct_tcp_table_miss"]
    (entry,) = dp.tables["ct_tcp_table"].entries
    assert entry.params == (0, 100, 0, 0)  # n2h_seqNo, h2n_seqNo, n2h_ackNo, h2n_ackNo
    assert dp.pna.aom["ct_tcp_table"].expire_at == [16 * S // 10]


def test_tcp_state_tracking_restart_keeps_the_profile() -> None:
    dp = load("pna-example-tcp-connection-state-tracking.p4")
    syn = (1, tcp_frame(HOST_IP, NET_IP, 1000, 80, 0x02, seq=100), 0)
    synack = (0, tcp_frame(NET_IP, HOST_IP, 80, 1000, 0x12, ack=101), 8 * S // 10)
    _actions(dp, [syn, synack])
    assert dp.pna.aom["ct_tcp_table"].expire_at == [18 * S // 10]  # restarted at 0.8 s with profile NEW


def test_tcp_state_tracking_simplified_with_a_control_plane_entry() -> None:
    dp = load("pna-example-tcp-connection-state-tracking-simplified.p4")
    match = {"ipv4_addr_0": NET_IP, "ipv4_addr_1": HOST_IP, "hdr.ipv4.protocol": 6, "tcp_port_0": 80,
             "tcp_port_1": 1000}  # fmt: skip
    params = {"n2h_seqNo": 500, "h2n_seqNo": 100, "n2h_ackNo": 0, "h2n_ackNo": 0}
    entries = {"tables": {"ct_tcp_table": [{"match": match, "action": "ct_tcp_table_hit", "params": params}]}}
    packets = [
        (1, tcp_frame(HOST_IP, NET_IP, 1000, 80, 0x10, ack=300), 0),  # 300 <= 500, >= 0: ESTABLISHED (2 s)
        (0, tcp_frame(NET_IP, HOST_IP, 80, 1000, 0x10, ack=150), S // 2),  # 150 > 100: dropped, no change
        (1, tcp_frame(HOST_IP, NET_IP, 1000, 80, 0x10, ack=300), 5 * S // 2),  # 2.5 s: expired, a miss
    ]
    assert _actions(dp, packets, entries) == ["ct_tcp_table_hit", "ct_tcp_table_hit", "ct_tcp_table_miss"]
    assert dp.pna.aom["ct_tcp_table"].expire_at == [2 * S]


SA = {"spi": 0x1234, "salt": 0xAABBCCDD, "key": 1, "key_size": 256, "ext_esn_en": 0, "auth_en": 1,
      "valid_flag": 1, "esn": 0x0000000500000007}  # fmt: skip


def test_ipsec_encrypt_builds_the_esp_headers_with_a_null_cipher() -> None:
    dp = load("ipsec-acc.p4")
    dp.pna.trace = True
    entries = {"tables": {"ipsec_sa": [{"match": {"main_meta.sa_index": 1}, "action": "ipsec_sa_action",
                                        "params": SA}]}}  # fmt: skip
    inner = ipv4(HOST_IP, NET_IP, 6, 40) + tcp(1000, 80, 0x10)
    frame = eth(MAC_D, MAC_S, 0x0800) + inner
    assert run_entries(dp, entries, [(1, frame, 0)]) == [None]  # no forwarding call: dropped
    # the parser set sa_index = 1; ipsec_esp_encrypt copies ipv4_1 to ipv4_2, adds ESP (spi, seq =
    # esn[31:0]) and its IV (esn), and makes the outer header ESP, 40 + 8 + 8 bytes long
    esp = struct.pack("!II", 0x1234, 7) + struct.pack("!Q", 0x0000000500000007)
    outer = ipv4(HOST_IP, NET_IP, 50, 56)
    assert dp.pna.emitted == [eth(MAC_D, MAC_S, 0x0800) + outer + esp + inner]


def test_ipsec_decrypt_recirculates_once() -> None:
    dp = load("ipsec-acc.p4")
    dp.pna.trace = True
    sa = {"match": {"main_meta.sa_index": 0x1234}, "action": "ipsec_sa_action", "params": SA}
    # the keyless post-decrypt table runs only its default action: the control plane sets it
    post = {"ipsec_post_decrypt_table": {"action": "ipsec_post_decrypt_action"}}
    entries = {"tables": {"ipsec_sa": [sa]}, "pna": {"default_actions": post}}
    inner = ipv4(NET_IP, HOST_IP, 6, 40) + tcp(80, 1000, 0x10)
    esp = struct.pack("!II", 0x1234, 7) + struct.pack("!Q", 0x0000000500000007)
    frame = eth(MAC_S, MAC_D, 0x0800) + ipv4(OTHER_IP, HOST_IP, 50, 76) + esp + inner
    assert run_entries(dp, entries, [(0, frame, 0)]) == [None]
    # pass 1: parse_esp sets sa_index = spi; ipsec_esp_decrypt prepends the recirculation header
    # (ipsec_op 2 in its top two bits, ipsec_len = 76 - 20 - 8 - 8 = 40) and recirculates
    recirc = bytes([0x80]) + struct.pack("!H", 40)
    # pass 2: recirculated, the parser reads that header, the outer IPv4, ESP and its IV, then the
    # inner IPv4 into ipv4_1 again and the TCP header; the post-decrypt action copies the never
    # valid ipv4_2 over ipv4_1 and invalidates ESP: recirc header, Ethernet and TCP remain
    assert dp.pna.emitted == [recirc + frame, recirc + eth(MAC_S, MAC_D, 0x0800) + tcp(80, 1000, 0x10)]
    assert dp.pna.recirculations == 1
    assert dp.counter_totals()["recirc_packet"] == {0: (1, 0)}


RECIRCULATE_FOREVER = """
#include <core.p4>
#include "../pna.p4"
extern void recirc_packet();
header h_t { bit<8> b; }
struct hs_t { h_t h; }
struct m_t { }
parser P(packet_in pkt, out hs_t hdr, inout m_t m, in pna_main_parser_input_metadata_t istd) {
    state start { pkt.extract(hdr.h); transition accept; }
}
control C(inout hs_t hdr, inout m_t m, in pna_main_input_metadata_t istd,
          inout pna_main_output_metadata_t ostd) {
    apply { recirc_packet(); }
}
control D(packet_out pkt, inout hs_t hdr, in m_t m, in pna_main_output_metadata_t ostd) {
    apply { pkt.emit(hdr.h); }
}
PNA_NIC(P(), C(), D()) main;
"""


def test_a_recirculation_loop_is_refused_naming_the_call() -> None:
    path = EXAMPLES / "loop.p4"  # not written: `here` only says where the includes are
    dp = Datapath(parse_program(RECIRCULATE_FOREVER, str(path), here=EXAMPLES))
    with pytest.raises(
        P4Error, match=rf"loop.p4:13:13: a packet recirculated more than {MAX_RECIRCULATIONS}"
    ):
        run_entries(dp, None, [(0, b"\x01", 0)])


_FLOW_PACKETS = st.lists(
    st.tuples(
        st.sampled_from([0, 1]),  # direction: from the network (port 0) or the host (port 1)
        st.integers(0, 2),  # which of three connections
        st.sampled_from([0x02, 0x12, 0x10, 0x11, 0x04]),  # SYN, SYN+ACK, ACK, FIN+ACK, RST
        st.integers(0, 3),  # ack number choice
        st.integers(0, 700_000_000),  # time step (ns)
    ),
    min_size=1,
    max_size=40,
)


def _flow_packets(drawn: list[tuple[int, int, int, int, int]]) -> list[tuple[int, bytes, int]]:
    packets, now = [], 0
    for from_host, flow, flags, ack, step in drawn:
        now += step
        host_port, net_port = 1000 + flow, 80
        if from_host:
            frame = tcp_frame(HOST_IP, NET_IP, host_port, net_port, flags, seq=100 + flow, ack=ack)
        else:
            frame = tcp_frame(NET_IP, HOST_IP, net_port, host_port, flags, seq=500, ack=100 + flow + ack - 1)
        packets.append((1 if from_host else 0, frame, now))
    return packets


def _state(dp: Datapath) -> tuple[object, ...]:
    state = dp.tables["ct_tcp_table"]
    return (
        [(e.match, e.action, e.params) for e in state.entries],
        list(dp.pna.aom["ct_tcp_table"].expire_at),
        state.hits.tolist(),
        dict(dp.action_runs),
    )


@pytest.mark.parametrize(
    "name", ["pna-example-tcp-connection-tracking.p4", "pna-example-tcp-connection-state-tracking.p4"]
)
@settings(max_examples=30, deadline=None)
@given(drawn=_FLOW_PACKETS)
def test_a_batch_gives_what_one_packet_at_a_time_gives(
    name: str, drawn: list[tuple[int, int, int, int, int]]
) -> None:
    packets = _flow_packets(drawn)
    batch, single = load(name), load(name)
    batch.pna.trace = single.pna.trace = True
    out = run_entries(batch, None, packets)
    for packet in packets:
        _run_one(single, packet)
    assert out == [None] * len(packets)
    assert len(batch.process(PacketBatch.from_packets([], 1, 1)).dropped) == 0  # an empty batch: nothing
    assert batch.pna.emitted == single.pna.emitted
    assert _state(batch) == _state(single)


SMALL_TABLE = """
#include <core.p4>
#include "../pna.p4"
header h_t { bit<8> a; bit<8> b; }
struct hs_t { h_t h; }
struct m_t { }
struct one_t { bit<8> v; }
parser P(packet_in pkt, out hs_t hdr, inout m_t m, in pna_main_parser_input_metadata_t istd) {
    state start { pkt.extract(hdr.h); transition accept; }
}
control C(inout hs_t hdr, inout m_t m, in pna_main_input_metadata_t istd,
          inout pna_main_output_metadata_t ostd) {
    AddEntryErrorStatus_t st;
    action hit(bit<8> v) { hdr.h.b = v; send_to_port((PortId_t) 2); }
    action miss() {
        st = add_entry(action_name = "hit", action_params = (one_t){hdr.h.a},
                       expire_time_profile_id = (ExpireTimeProfileId_t) hdr.h.b);
        if (st == ADD_ENTRY_SUCCESS) { send_to_port((PortId_t) 1); } else { send_to_port((PortId_t) 9); }
    }
    table ct {
        key = { hdr.h.a : exact; }
        actions = { hit; miss; }
        add_on_miss = true;
        const default_action = miss;
        size = 2;
    }
    apply { ct.apply(); }
}
control D(packet_out pkt, inout hs_t hdr, in m_t m, in pna_main_output_metadata_t ostd) {
    apply { pkt.emit(hdr.h); }
}
PNA_NIC(P(), C(), D()) main;
"""


@cache
def _small_program() -> Program:
    return parse_program(SMALL_TABLE, str(EXAMPLES / "small.p4"), here=EXAMPLES)


def test_a_full_add_on_miss_table_answers_not_done_until_an_entry_expires() -> None:
    dp = Datapath(_small_program())
    packets = [(0, bytes([1, 5]), 0), (0, bytes([2, 1]), 0), (0, bytes([3, 1]), 0), (0, bytes([1, 0]), 0),
               (0, bytes([3, 1]), 2 * S), (0, bytes([2, 0]), 2 * S)]  # fmt: skip
    # 1 and 2 are added (5 s and 1 s); 3 finds the two-entry table full (port 9); 1 hits (hit
    # writes its parameter, 1, into b); at 2 s entry 2 has expired: 3 is added, then 2 finds the
    # table full again (1 and 3 live)
    expected = [(1, [1, 5]), (1, [2, 1]), (9, [3, 1]), (2, [1, 1]), (1, [3, 1]), (9, [2, 0])]
    assert run_entries(dp, None, packets) == [(port, bytes(data)) for port, data in expected]


@settings(max_examples=40, deadline=None)
@given(
    drawn=st.lists(
        st.tuples(st.integers(0, 4), st.integers(0, 3), st.integers(0, 1_500_000_000)), max_size=40
    )
)
def test_a_full_table_in_a_batch_answers_as_one_packet_at_a_time(drawn: list[tuple[int, int, int]]) -> None:
    packets, now = [], 0
    for key, profile, step in drawn:
        now += step
        packets.append((0, bytes([key, profile]), now))
    batch, single = Datapath(_small_program()), Datapath(_small_program())
    out = run_entries(batch, None, packets)
    assert out == [run_entries(single, None, [p])[0] for p in packets]
    assert _live(batch, now) == _live(single, now)


def _live(dp: Datapath, now: int) -> list[tuple[object, int]]:
    """The entries not expired at `now` with their expiry, by key (expired ones are deleted;
    when their storage is reclaimed depends on how the packets were batched)."""
    aom = dp.pna.aom["ct"]
    pairs = zip(dp.tables["ct"].entries, aom.expire_at, strict=True)
    return sorted(((e.match, e.params), t) for e, t in pairs if t > now)


def _pcap(packets: list[bytes]) -> bytes:
    head = struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 262144, 1)
    return head + b"".join(struct.pack("<IIII", 0, i, len(p), len(p)) + p for i, p in enumerate(packets))


def test_nic_run_takes_the_same_path(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`cloudtwin nic run` on a PNA example: the forwarding and mirror counts of the test above."""
    from cloudtwin.cli.app import main
    from cloudtwin.p4.pcap import index_pcap

    entries = tmp_path / "entries.yaml"
    source = {"hdr.eth.srcAddr": MAC_S}
    document = {
        "tables": {
            "mirror_decision_near_ports_rx": [
                {"match": source, "action": "my_mirror0", "params": {"mirror_session_id": 5}}
            ],
            "t1_rx": [{"match": source, "action": "my_send_to_port", "params": {"port_id": 1}}],
            "t2_rx": [{"match": {"hdr.eth.dstAddr": MAC_D}, "action": "my_drop"}],
        }
    }
    entries.write_text(json.dumps(document))  # JSON is YAML
    frames = [eth(MAC_D, MAC_S, 0x0800), eth(MAC_D2, MAC_S, 0x0800)]
    capture, out = tmp_path / "in.pcap", tmp_path / "out.pcap"
    capture.write_bytes(_pcap(frames))
    program = str(EXAMPLES / "pna-demo-last-forwarding-action-wins.p4")
    code = main(
        [
            "nic",
            "run",
            program,
            "--entries",
            str(entries),
            "--pcap",
            str(capture),
            "--out",
            str(out),
            "--json",
        ]
    )
    report = json.loads(capsys.readouterr().out)
    assert code in (0, None)
    # the first frame is sent to 1 by t1 and dropped by t2 (the last word); the second only sent
    assert (report["packets_out"], report["out_ports"]) == (1, {"1": 1})
    assert index_pcap(out.read_bytes()).packets() == [frames[1]]
    assert report["counters"]["mirror_packet"] == {"5": {"packets": 2, "bytes": 0}}


EXTERNS = """
#include <core.p4>
#include "../pna.p4"
header d_t { bit<72> x; }
header ip_t { bit<64> a; bit<64> b; bit<32> c; }
header o_t { bit<16> crc16; bit<32> crc32; bit<16> ones; bit<16> csum; bit<16> mod; bit<8> count; }
struct hs_t { d_t d; ip_t ip; o_t o; }
struct m_t { }
parser P(packet_in pkt, out hs_t hdr, inout m_t m, in pna_main_parser_input_metadata_t istd) {
    state start { pkt.extract(hdr.d); pkt.extract(hdr.ip); pkt.extract(hdr.o); transition accept; }
}
control C(inout hs_t hdr, inout m_t m, in pna_main_input_metadata_t istd,
          inout pna_main_output_metadata_t ostd) {
    Hash<bit<16>>(PNA_HashAlgorithm_t.CRC16) h16;
    Hash<bit<32>>(PNA_HashAlgorithm_t.CRC32) h32;
    Hash<bit<16>>(PNA_HashAlgorithm_t.ONES_COMPLEMENT16) ones;
    InternetChecksum() ck;
    Register<bit<8>, bit<8>>(4) r;
    apply {
        hdr.o.crc16 = h16.get_hash(hdr.d.x);
        hdr.o.crc32 = h32.get_hash({hdr.d.x});
        hdr.o.mod = h16.get_hash(16w10, {hdr.d.x}, 16w100);
        hdr.o.ones = ones.get_hash({hdr.ip.a, hdr.ip.b, hdr.ip.c});
        ck.clear();
        ck.add({hdr.ip.a, hdr.ip.b});
        ck.add(hdr.ip.c);
        hdr.o.csum = ck.get();
        bit<8> seen = r.read(8w1) + 1;
        r.write(8w1, seen);
        hdr.o.count = seen;
        send_to_port((PortId_t) 1);
    }
}
control D(packet_out pkt, inout hs_t hdr, in m_t m, in pna_main_output_metadata_t ostd) {
    apply { pkt.emit(hdr.d); pkt.emit(hdr.ip); pkt.emit(hdr.o); }
}
PNA_NIC(P(), C(), D()) main;
"""


def test_hash_checksum_and_register_externs() -> None:
    dp = Datapath(parse_program(EXTERNS, str(EXAMPLES / "externs.p4"), here=EXAMPLES))
    # RFC 1071's example IPv4 header (checksum field 0): its checksum is 0xb861
    header = bytes.fromhex("4500007300004000401100 00c0a80001c0a800c7".replace(" ", ""))
    packet = b"123456789" + header + bytes(13)
    out = run_entries(dp, None, [(0, packet, 0), (0, packet, 1), (0, packet, 2)])
    # the check values of the CRC catalogue for "123456789": CRC-16/ARC 0xbb3d, CRC-32 0xcbf43926;
    # 10 + 0xbb3d % 100 = 10 + 47933 % 100 = 43; the register counts the packets: 1, 2, 3
    tail = struct.pack("!HIHHH", 0xBB3D, 0xCBF43926, 0xB861, 0xB861, 43)
    assert out == [(1, b"123456789" + header + tail + bytes([n])) for n in (1, 2, 3)]


DIRECT_METER = """
#include <core.p4>
#include "../pna.p4"
header h_t { bit<8> a; bit<8> colour; }
struct hs_t { h_t h; }
struct m_t { }
parser P(packet_in pkt, out hs_t hdr, inout m_t m, in pna_main_parser_input_metadata_t istd) {
    state start { pkt.extract(hdr.h); transition accept; }
}
control C(inout hs_t hdr, inout m_t m, in pna_main_input_metadata_t istd,
          inout pna_main_output_metadata_t ostd) {
    DirectMeter(PNA_MeterType_t.PACKETS) per_flow;
    action mark() {
        PNA_MeterColor_t colour = per_flow.execute();
        if (colour == PNA_MeterColor_t.RED) { hdr.h.colour = 1; }
        else if (colour == PNA_MeterColor_t.YELLOW) { hdr.h.colour = 2; }
        else { hdr.h.colour = 3; }
        send_to_port((PortId_t) 1);
    }
    table t {
        key = { hdr.h.a : exact; }
        actions = { mark; }
        default_action = mark;
        pna_direct_meter = per_flow;
    }
    apply { t.apply(); }
}
control D(packet_out pkt, inout hs_t hdr, in m_t m, in pna_main_output_metadata_t ostd) {
    apply { pkt.emit(hdr.h); }
}
PNA_NIC(P(), C(), D()) main;
"""


def test_direct_meter_colours_each_entry_apart() -> None:
    dp = Datapath(parse_program(DIRECT_METER, str(EXAMPLES / "meter.p4"), here=EXAMPLES))
    rates = {"cir": 1, "cburst": 1, "pir": 2, "pburst": 2}  # packets per second, packets
    document = {
        "tables": {"t": [{"match": {"hdr.h.a": 7}, "action": "mark"}]},
        "pna": {"direct_meters": {"per_flow": [{"entry": 0, **rates}]}},
    }
    packets = [(0, bytes([7, 0]), 0)] * 3 + [(0, bytes([9, 0]), 0)] * 3
    # entry 0 (a = 7), at one instant: the first packet takes a committed and a peak token
    # (GREEN, 3), the second the last peak token (YELLOW, 2), the third finds none (RED, 1).
    # The default entry (a = 9) has no rates configured: GREEN every time
    expected = [bytes([7, c]) for c in (3, 2, 1)] + [bytes([9, 3])] * 3
    assert run_entries(dp, document, packets) == [(1, b) for b in expected]


def test_a_recirculating_program_refuses_packet_heads_and_nic_run_gives_it_whole_packets() -> None:
    from cloudtwin.p4.depth import copies_packets, parse_depth

    dp = load("ipsec-acc.p4")
    assert copies_packets(dp.program) and parse_depth(dp.program) is None  # nic run batches it whole
    frame = eth(MAC_S, MAC_D, 0x0800) + ipv4(OTHER_IP, HOST_IP, 6, 40) + tcp(80, 1000, 0x10)
    heads = np.frombuffer(frame[:20], np.uint8).reshape(1, 20).copy()
    with pytest.raises(P4Error, match="recirculates or mirrors needs whole packets"):
        dp.process(PacketBatch.of_rows(heads, np.array([len(frame)], np.uint32)))


def test_nic_run_streams_a_stateless_pna_program_from_packet_heads(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The L2 example reads 14 bytes of each packet: nic run batches heads, and long packets
    must leave whole and unchanged (the payload after the head follows it)."""
    from cloudtwin.cli.app import main
    from cloudtwin.p4.depth import parse_depth
    from cloudtwin.p4.pcap import index_pcap

    assert parse_depth(_program("pna-demo-L2-one-table.p4")) == 14
    entries = tmp_path / "entries.yaml"
    entry = {"match": {"hdr.eth.dstAddr": MAC_D}, "action": "L2_send_to_port", "params": {"port_id": 3}}
    entries.write_text(json.dumps({"tables": {"L2_fwd": [entry]}}))
    frames = [eth(MAC_D, MAC_S, 0x0800) + bytes(range(256)) * 5, eth(MAC_D2, MAC_S, 0x0800) + bytes(1000)]
    frames += [eth(MAC_D, MAC_S, 0x86DD) + b"short"]
    capture, out = tmp_path / "in.pcap", tmp_path / "out.pcap"
    capture.write_bytes(_pcap(frames))
    program = str(EXAMPLES / "pna-demo-L2-one-table.p4")
    argv = [
        "nic",
        "run",
        program,
        "--entries",
        str(entries),
        "--pcap",
        str(capture),
        "--out",
        str(out),
        "--json",
    ]
    assert main(argv) in (0, None)
    report = json.loads(capsys.readouterr().out)
    assert report["out_ports"] == {"3": 2}
    assert index_pcap(out.read_bytes()).packets() == [frames[0], frames[2]]
