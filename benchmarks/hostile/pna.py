"""Hostile input for PNA programs under `cloudtwin nic run` (issue 22): PNA externs used
wrongly, add_entry with the wrong arguments or outside an add-on-miss table, a recirculation
loop, a register index past its cells, connection floods; and the eight PNA examples on a
small capture (they must run).

Every case must end ok (exit 0) or clean (one line naming file:line, exit 2).

    python benchmarks/bad_inputs.py --only pna
"""

from __future__ import annotations

import struct
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PNA = REPO.parent / "shared" / "datasets" / "pna-examples"

HEAD = """#include <core.p4>
#include "{pna}"
extern void recirc_packet();
header h_t {{ bit<8> a; bit<8> b; }}
struct hs_t {{ h_t h; }}
struct m_t {{ }}
struct none_t {{ }}
struct one_t {{ bit<8> v; }}
parser P(packet_in pkt, out hs_t hdr, inout m_t m, in pna_main_parser_input_metadata_t istd) {{
    state start {{ pkt.extract(hdr.h); transition accept; }}
}}
control C(inout hs_t hdr, inout m_t m, in pna_main_input_metadata_t istd,
          inout pna_main_output_metadata_t ostd) {{
"""
TAIL = """
}
control D(packet_out pkt, inout hs_t hdr, in m_t m, in pna_main_output_metadata_t ostd) {
    apply { pkt.emit(hdr.h); }
}
PNA_NIC(P(), C(), D()) main;
"""
AOM = """    action hit(bit<8> v) { hdr.h.b = v; }
    action miss() { %s }
    table ct {
        key = { hdr.h.a : %s; }
        actions = { hit; miss; }
        add_on_miss = true;
        const default_action = miss;
    }
"""


def program(body: str) -> str:
    return HEAD.format(pna=PNA / "pna.p4") + body + TAIL


def _programs() -> dict[str, str]:
    add = 'add_entry("hit", (one_t){hdr.h.b}, (ExpireTimeProfileId_t) 1);'
    fine = AOM % (add, "exact") + "    apply { ct.apply(); send_to_port((PortId_t) 1); }"
    return {
        "add-on-miss fine": fine,
        "add_entry two arguments": fine.replace(add, 'add_entry("hit", (one_t){hdr.h.b});'),
        "add_entry unknown named argument": fine.replace(
            add, 'add_entry(action_name = "hit", params = (one_t){hdr.h.b}, expire_time_profile_id = 1);'
        ),
        "add_entry unknown action": fine.replace('"hit"', '"launch"'),
        "add_entry params of another shape": fine.replace("(one_t){hdr.h.b}", "(none_t){}"),
        "add_entry outside an add-on-miss table": fine.replace("add_on_miss = true;", ""),
        "add_entry in a hit action": (AOM % ("", "exact")).replace("hdr.h.b = v;", add)
        + "    apply { ct.apply(); }",
        "add-on-miss table with a ternary key": AOM % (add, "ternary") + "    apply { ct.apply(); }",
        "expiry call outside an add-on-miss table": "    action a() { restart_expire_timer(); }\n"
        "    apply { a(); }",
        "mirror_packet one argument": "    apply { mirror_packet((MirrorSlotId_t) 0); }",
        "mirror slot 9": "    apply { mirror_packet((MirrorSlotId_t) 9, (MirrorSessionId_t) 1); }",
        "recirculation loop": "    apply { recirc_packet(); }",
        "recirculation loop after a send": "    apply { send_to_port((PortId_t) 1); recirc_packet(); }",
        "register index past its cells": "    Register<bit<8>, bit<8>>(4) r;\n"
        "    apply { hdr.h.b = r.read(hdr.h.a); r.write(hdr.h.a, 1); send_to_port((PortId_t) 1); }",
        "register of 2^21 cells": "    Register<bit<8>, bit<32>>(2097152) r;\n    apply { }",
        "hash of an unsupported algorithm": "    Hash<bit<16>>(PNA_HashAlgorithm_t.CRC16_CUSTOM) h;\n"
        "    apply { hdr.h.b = (bit<8>) h.get_hash(hdr.h.a); }",
        "hash with max 0": "    Hash<bit<16>>(PNA_HashAlgorithm_t.CRC16) h;\n"
        "    apply { hdr.h.b = (bit<8>) h.get_hash(16w0, {hdr.h.a}, 16w0); send_to_port((PortId_t) 1); }",
        "direct counter of no table": "    DirectCounter<bit<32>>(PNA_CounterType_t.PACKETS) c;\n"
        "    action a() { c.count(); }\n    apply { a(); }",
        "direct counter on two tables": "    DirectCounter<bit<32>>(PNA_CounterType_t.PACKETS) c;\n"
        "    action a() { c.count(); }\n"
        "    table t1 { key = { hdr.h.a : exact; } actions = { a; } pna_direct_counter = c; }\n"
        "    table t2 { key = { hdr.h.b : exact; } actions = { a; } pna_direct_counter = c; }\n"
        "    apply { t1.apply(); t2.apply(); }",
        "unknown table property": "    table t { key = { hdr.h.a : exact; } actions = { NoAction; } "
        "pna_everything = true; }\n    apply { t.apply(); }",
        "top-level Register instance": "    apply { }",
    }


def pcap(packets: list[bytes], times_ns: list[int] | None = None) -> bytes:
    parts = [struct.pack("<IHHiIII", 0xA1B23C4D, 2, 4, 0, 0, 262144, 1)]
    for i, packet in enumerate(packets):
        at = times_ns[i] if times_ns else i * 1000
        parts += [struct.pack("<IIII", at // 10**9, at % 10**9, len(packet), len(packet)), packet]
    return b"".join(parts)


def _tcp(flow: int, flags: int) -> bytes:
    eth = bytes.fromhex("020000000002020000000001") + b"\x08\x00"
    ip = struct.pack(
        "!BBHHHBBH4s4s",
        0x45,
        0,
        40,
        0,
        0,
        64,
        6,
        0,
        bytes([10, 0, flow >> 8, flow & 255]),
        bytes([192, 0, 2, 9]),
    )
    return eth + ip + struct.pack("!HHIIBBHHH", 1000 + flow % 50_000, 80, 0, 0, 0x50, flags, 0, 0, 0)


def cases(tmp: Path) -> list[tuple[str, list[str], bytes | None]]:
    folder = tmp / "pna"
    folder.mkdir(parents=True, exist_ok=True)
    frames = folder / "frames.pcap"
    frames.write_bytes(pcap([bytes([i % 7, 0]) + bytes(58) for i in range(64)]))
    tcp = folder / "tcp.pcap"
    tcp.write_bytes(pcap([_tcp(i % 3, 0x02 if i < 3 else 0x10) for i in range(64)]))
    flood = folder / "flood.pcap"  # a SYN per new connection, 20,000 of them
    flood.write_bytes(pcap([_tcp(i, 0x02) for i in range(20_000)]))
    same = folder / "same.pcap"  # one connection opened, expired and opened again, 2,000 times
    same.write_bytes(
        pcap([_tcp(0, 0x02 if i % 2 == 0 else 0x11) for i in range(4_000)], [i * 10**9 for i in range(4_000)])
    )
    pairs = folder / "pairs.pcap"  # 2,000 connections, each a SYN then an ACK: every ACK hits an
    # entry its own batch added, so each one ends a round (the worst case for rounds)
    pairs.write_bytes(pcap([_tcp(i // 2, 0x02 if i % 2 == 0 else 0x10) for i in range(4_000)]))
    out: list[tuple[str, list[str], bytes | None]] = []
    for label, body in _programs().items():
        text = program(body)
        if label == "top-level Register instance":
            text = text.replace("control C(", "Register<bit<8>, bit<8>>(4) r;\ncontrol C(")
        path = folder / f"{label.replace(' ', '_')}.p4"
        path.write_text(text)
        out.append((f"pna nic run {label}", ["nic", "run", str(path), "--pcap", str(frames), "--json"], None))
    for example in sorted((PNA / "examples").glob("*.p4")):
        capture = tcp if "tcp" in example.name else frames
        out.append(
            (
                f"pna nic run example {example.name}",
                ["nic", "run", str(example), "--pcap", str(capture), "--from", "host"],
                None,
            )
        )
    tracking = str(PNA / "examples" / "pna-example-tcp-connection-tracking.p4")
    for label, text in (
        ("profile of no duration", "pna:\n  expire_time_profiles: {1: soon}\n"),
        ("profile 300", "pna:\n  expire_time_profiles: {300: 1s}\n"),
        ("profile of 10^12 s", "pna:\n  expire_time_profiles: {1: 1000000000000s}\n"),
        (
            "default of a const default",
            "pna:\n  default_actions: {ct_tcp_table: {action: ct_tcp_table_miss}}\n",
        ),
        ("default of no table", "pna:\n  default_actions: {nope: {action: drop}}\n"),
        ("unknown pna key", "pna:\n  everything: true\n"),
    ):
        bad = folder / f"{label.replace(' ', '_')}.yaml"
        bad.write_text(text)
        argv = ["nic", "run", tracking, "--entries", str(bad), "--pcap", str(tcp), "--from", "host"]
        out.append((f"pna nic run entries {label}", argv, None))
    out.append(
        (
            "pna nic run 20,000 new connections",
            ["nic", "run", tracking, "--pcap", str(flood), "--from", "host", "--json"],
            None,
        )
    )
    out.append(
        (
            "pna nic run 2,000 SYN-ACK pairs",
            ["nic", "run", tracking, "--pcap", str(pairs), "--from", "host", "--json"],
            None,
        )
    )
    out.append(
        (
            "pna nic run one connection reopened 2,000 times",
            ["nic", "run", tracking, "--pcap", str(same), "--from", "host", "--json"],
            None,
        )
    )
    return out
