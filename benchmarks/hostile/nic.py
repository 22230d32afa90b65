"""Hostile input for `cloudtwin nic`: unbounded reads, allocations sized from input, deep or
self-referential P4, silent duplicates and non-finite NIC settings (issue 24).

Each case is one `cloudtwin` call; `benchmarks/bad_inputs.py` runs them (ok or clean is a pass).
"""

from __future__ import annotations

import os
import random
import struct
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
P4 = REPO / "examples" / "p4"
SMARTNIC = str(REPO / "examples" / "smartnic.yaml")

HEAD = """header h_t { bit<8> a; bit<8> b; }
struct headers_t { h_t h; }
struct meta_t { bit<8> x; }
parser P(packet_in pkt, out headers_t hdr, inout meta_t meta, in pna_main_parser_input_metadata_t istd) {
    state start { pkt.extract(hdr.h); transition accept; }
}
"""
TAIL = """
control D(packet_out pkt, in headers_t hdr, in meta_t meta, in pna_main_output_metadata_t ostd) {
    apply { pkt.emit(hdr.h); }
}
PNA_NIC(P(), C(), D()) main;
"""
ENTRIES = (
    "tables:\n  t:\n"
    "    - {{match: {{hdr.h.a: 1}}, action: x}}\n    - {{match: {{hdr.h.a: {}}}, action: y}}\n"
)
TABLE = "action x() { } action y() { } table t { key = { hdr.h.a: exact; } actions = { x; y; } }"


def program(locals_: str, apply: str) -> str:
    params = "inout headers_t hdr, inout meta_t meta, in pna_main_input_metadata_t istd, "
    params += "inout pna_main_output_metadata_t ostd"
    return f"{HEAD}control C({params}) {{\n{locals_}\napply {{ {apply} }}\n}}\n{TAIL}"


def pcap(packets: list[bytes], cut: int = 0) -> bytes:
    parts = [struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 262144, 1)]
    for packet in packets:
        parts += [struct.pack("<IIII", 0, 0, len(packet), len(packet)), packet]
    data = b"".join(parts)
    return data[: len(data) - cut] if cut else data


def _programs() -> dict[str, str]:
    base = program(TABLE, "t.apply(); send_to_port(0);")
    counter = "Counter<bit<32>, bit<32>>({}, PNA_CounterType_t.PACKETS_AND_BYTES) c;"
    meter = "Meter<bit<32>>({}, PNA_MeterType_t.PACKETS) m;"
    fan = "action a0() { }\n" + "".join(
        f"action a{i}() {{ a{i - 1}(); a{i - 1}(); }}\n" for i in range(1, 40)
    )
    structs = "struct s0 { bit<8> x; bit<8> y; }\n"
    structs += "".join(f"struct s{i} {{ s{i - 1} l; s{i - 1} r; }}\n" for i in range(1, 40))
    chain = "struct c0 { bit<8> x; }\n" + "".join(f"struct c{i} {{ c{i - 1} c; }}\n" for i in range(1, 5000))
    return {
        "sum of 20,000 terms": program("", "hdr.h.a = " + " + ".join(["hdr.h.b"] * 20_000) + ";"),
        "sum of 150 terms": program("", "hdr.h.a = " + " + ".join(["hdr.h.b"] * 150) + "; send_to_port(0);"),
        "3,000 nested ifs": program("", "if (hdr.h.a == 1) { " * 3000 + "send_to_port(0);" + " }" * 3000),
        "3,000 else-ifs": program(
            "",
            "if (hdr.h.a == 0) { }" + "".join(f" else if (hdr.h.a == {i % 256}) {{ }}" for i in range(3000)),
        ),
        "90 else-ifs": program(
            "", "if (hdr.h.a == 0) { }" + "".join(f" else if (hdr.h.a == {i}) {{ }}" for i in range(90))
        ),
        "5,000 deep parentheses": program("", "hdr.h.a = " + "(" * 5000 + "hdr.h.b" + ")" * 5000 + ";"),
        "5,000 minus signs": program("", "hdr.h.a = " + "-" * 5000 + "hdr.h.b;"),
        "5,000 casts": program("", "hdr.h.a = " + "(bit<8>) " * 5000 + "hdr.h.b;"),
        "action calls itself": program("action a() { a(); }", "a();"),
        "actions call each other": program("action b() { c(); }\naction c() { b(); }", "b();"),
        "action applies its own table": program(
            "action x() { t.apply(); } table t { key = { hdr.h.a: exact; } actions = { x; } }", "t.apply();"
        ),
        "actions fan out 2^39": program(fan, "a39();"),
        "struct contains itself": base.replace(
            "struct meta_t { bit<8> x; }", "struct meta_t { bit<8> x; meta_t m; }"
        ),
        "structs contain each other": base.replace(
            "struct meta_t { bit<8> x; }",
            "struct a_t { b_t b; }\nstruct b_t { a_t a; }\nstruct meta_t { a_t m; }",
        ),
        "structs fan out 2^40 fields": base.replace(
            "struct meta_t { bit<8> x; }", structs + "struct meta_t { s39 m; }"
        ),
        "structs nested 5,000 deep": base.replace(
            "struct meta_t { bit<8> x; }", chain + "struct meta_t { c4999 m; }"
        ),
        "Counter(2^20)": program(counter.format(1 << 20), "c.count((bit<32>) hdr.h.a); send_to_port(0);"),
        "Counter(2^31)": program(counter.format(1 << 31), "c.count((bit<32>) hdr.h.a); send_to_port(0);"),
        "Counter(2^32-1)": program(counter.format((1 << 32) - 1), "c.count(0); send_to_port(0);"),
        "Counter(2^40)": program(counter.format(1 << 40), "c.count(0); send_to_port(0);"),
        "Counter(2^64)": program(counter.format(1 << 64), "c.count(0); send_to_port(0);"),
        "Meter(2^40)": program(meter.format(1 << 40), "send_to_port(0);"),
        "second state start": base.replace(
            "state start {", "state start { transition accept; }\n state start {"
        ),
        "duplicate header": "header h_t { bit<16> z; }\n" + base,
        "duplicate struct": "struct meta_t { bit<16> z; }\n" + base,
        "duplicate field": base.replace("bit<8> a; bit<8> b;", "bit<8> a; bit<8> a;"),
        "duplicate table": base.replace("table t {", "table t { }\ntable t {"),
        "duplicate action": base.replace("action y() { }", "action y() { } action y() { drop_packet(); }"),
        "duplicate constant": "const bit<8> K = 1;\nconst bit<8> K = 2;\n" + base,
        "architecture constant redeclared": "const bit<8> NET_TO_HOST = 7;\n" + base,
        "duplicate table property": base.replace("actions = { x; y; }", "actions = { x; } actions = { y; }"),
        "duplicate action parameter": base.replace("action x() { }", "action x(bit<8> p, bit<8> p) { }"),
        "duplicate counter": program(counter.format(4) + counter.format(8), "send_to_port(0);"),
        "two mains": base + "PNA_NIC(P(), C(), D()) main;\n",
        "a fine program": base,
        "a program of 1 MiB": program("", "hdr.h.a = 1;\n" * 80_000 + "send_to_port(0);"),
        "a program over 1 MiB": program("", "hdr.h.a = 1;\n" * 81_000),
    }


def _files(tmp: Path) -> dict[str, Path]:
    rng = random.Random(24)
    small = [bytes([1, 2]) + bytes(58)] * 8191
    files = {
        "frames.pcap": pcap(small[:16]),
        "one 256 KiB packet.pcap": pcap(small + [bytes(256 << 10)]),
        "one 64 KiB packet.pcap": pcap(small + [bytes(65_536)]),
        "one 65,663-byte packet.pcap": pcap(small[:100] + [bytes(65_663)] + small[:100]),
        "one 65,664-byte packet.pcap": pcap(small[:100] + [bytes(65_664)]),
        "one 16 MiB packet.pcap": pcap(small[:10]) + struct.pack("<IIII", 0, 0, 1 << 24, 1 << 24),
        "alternating 64 KiB and 60 B.pcap": pcap([bytes(65_536), small[0]] * 200),
        "truncated last record.pcap": pcap(small[:100], cut=10),
        "truncated last header.pcap": pcap(small[:100]) + b"\x00" * 7,
        "random bytes.pcap": rng.randbytes(1 << 20),
        "64 MiB of 60-byte packets.pcap": pcap([small[0]] * ((64 << 20) // 76 - 1)),
        "over 64 MiB.pcap": pcap([bytes(1500)] * ((64 << 20) // 1516 + 1)),
        "random bytes.p4": rng.randbytes(1 << 16),
        "random bytes.yaml": rng.randbytes(1 << 16),
        "dup.yaml": ENTRIES.format("0x01").encode(),
        "distinct.yaml": ENTRIES.format("2").encode(),
    }
    for name, text in _programs().items():
        files[f"{name}.p4"] = text.encode()
    out = {}
    for name, data in files.items():
        path = tmp / "nic" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        out[name] = path
    fifo = tmp / "nic" / "fifo"
    if not fifo.exists():
        os.mkfifo(fifo)
    out["fifo"] = fifo
    return out


def cases(tmp: Path) -> list[tuple[str, list[str], bytes | None]]:
    files = _files(tmp)
    fine = str(files["a fine program.p4"])
    frames = str(files["frames.pcap"])
    parse_only = str(P4 / "parse_only.p4")
    out: list[tuple[str, list[str], bytes | None]] = []
    for kind, bad in (
        ("/dev/zero", "/dev/zero"),
        ("/dev/urandom", "/dev/urandom"),
        ("FIFO", str(files["fifo"])),
        ("directory", str(tmp)),
        ("random bytes", None),
    ):
        program = bad or str(files["random bytes.p4"])
        entries = bad or str(files["random bytes.yaml"])
        capture = bad or str(files["random bytes.pcap"])
        out.append((f"nic run program {kind}", ["nic", "run", program, "--pcap", frames], None))
        out.append(
            (f"nic run entries {kind}", ["nic", "run", fine, "--entries", entries, "--pcap", frames], None)
        )
        out.append((f"nic run pcap {kind}", ["nic", "run", parse_only, "--pcap", capture], None))
    for name in files:
        if name.endswith(".pcap") and not name.startswith(("frames", "random")):
            out.append((f"nic run pcap {name}", ["nic", "run", parse_only, "--pcap", str(files[name])], None))
    for name in _programs():
        out.append(
            (f"nic run program {name}", ["nic", "run", str(files[f"{name}.p4"]), "--pcap", frames], None)
        )
    for name in ("dup.yaml", "distinct.yaml"):
        out.append(
            (
                f"nic run entries {name}",
                ["nic", "run", fine, "--entries", str(files[name]), "--pcap", frames],
                None,
            )
        )
    offload = ["nic", "offload", SMARTNIC]
    for label, override in (
        ("NaN packet-mix share", "nic.packet_mix=[[64, .nan], [1500, 1]]"),
        ("infinite packet-mix share", "nic.packet_mix=[[64, .inf], [1500, 1]]"),
        ("infinite new_flows_per_s", "nic.new_flows_per_s=.inf"),
        ("NaN new_flows_per_s", "nic.new_flows_per_s=.nan"),
        ("infinite storm rate", "nic.storm.new_flows_per_s=.inf"),
        (
            "overlapping groups",
            "nic.groups=[{hosts: '0-3', profile: basic}, {hosts: '2-5', profile: bmv2-like}]",
        ),
        ("function placed twice", "nic.functions=[{name: overlay}, {name: overlay, tier: host}]"),
        (
            "group function placed twice",
            "nic.groups=[{hosts: '1', functions: [{name: conntrack}, {name: conntrack}]}]",
        ),
    ):
        out.append((f"nic offload {label}", [*offload, "--set", override], None))
    out.append(("nic offload --top 3", [*offload, "--top", "3"], None))
    out.append(("nic offload --all", [*offload, "--all"], None))
    return out
