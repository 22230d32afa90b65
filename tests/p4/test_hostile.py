"""Hostile P4 programs, entries and captures: deep, self-referential, duplicated or huge input
is one `file:line:col` (or field) error, and memory follows what the input holds."""

from __future__ import annotations

import struct

import numpy as np
import pytest
from tests.p4.helpers import EXAMPLES, shipped

from cloudtwin.errors import NicError, P4Error
from cloudtwin.p4 import Datapath, PacketBatch, parse_entries, parse_program, read_pcap, run_capture
from cloudtwin.p4 import run as run_module
from cloudtwin.p4.cells import DENSE_CELLS, SparseCells
from cloudtwin.p4.frontend import MAX_NESTING
from cloudtwin.p4.pcap import MAX_PACKET_BYTES

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
TABLE = "action x() { } action y() { } table t { key = { hdr.h.a: exact; } actions = { x; y; } }"


def program(locals_: str, apply: str) -> str:
    """A one-header program whose main control holds `locals_` and applies `apply`."""
    params = "inout headers_t hdr, inout meta_t meta, in pna_main_input_metadata_t istd, "
    params += "inout pna_main_output_metadata_t ostd"
    return f"{HEAD}control C({params}) {{\n{locals_}\napply {{ {apply} }}\n}}\n{TAIL}"


def refusal(text: str) -> str:
    with pytest.raises(P4Error) as info:
        parse_program(text, "prog.p4")
    message = str(info.value)
    assert message.startswith("prog.p4:") and message.split(":")[1].isdigit(), message
    assert "\n" not in message
    return message


def _sum(terms: int) -> str:
    return program("", "hdr.h.a = " + " + ".join(["hdr.h.b"] * terms) + "; send_to_port(0);")


DEEP = {
    "a 1,000-term sum": _sum(1000),
    "400 nested ifs": program("", "if (hdr.h.a == 1) { " * 400 + "send_to_port(0);" + " }" * 400),
    "a 400-long else-if chain": program(
        "", "if (hdr.h.a == 0) { }" + "".join(f" else if (hdr.h.a == {i}) {{ }}" for i in range(400))
    ),
    "1,000 minus signs": program("", "hdr.h.a = " + "-" * 1000 + "hdr.h.b;"),
}


@pytest.mark.parametrize("case", DEEP)
def test_deep_programs_are_refused_at_a_depth_limit(case: str) -> None:
    assert f"nested more than {MAX_NESTING} levels deep" in refusal(DEEP[case])


def test_a_long_sum_under_the_limit_still_computes() -> None:
    datapath = Datapath(parse_program(_sum(150), "sum.p4"))
    out = datapath.process(PacketBatch.from_packets([b"\x00\x03"])).packet(0)
    assert out == bytes([150 * 3 % 256, 3])


@pytest.mark.parametrize(
    ("locals_", "apply", "what"),
    [
        ("action a() { a(); }", "a();", "action a calls itself (a -> a)"),
        ("action b() { c(); }\naction c() { b(); }", "b();", "action b calls itself (b -> c -> b)"),
        (
            "action a0() { }\n"
            + "".join(f"action a{i}() {{ a{i - 1}(); a{i - 1}(); }}\n" for i in range(1, 20)),
            "a19();",
            "runs more than 10,000 actions",
        ),
    ],
)
def test_actions_that_recurse_or_fan_out_are_refused(locals_: str, apply: str, what: str) -> None:
    assert what in refusal(program(locals_, apply))


BASE = program(TABLE, "t.apply(); send_to_port(0);")


@pytest.mark.parametrize(
    ("edit", "what"),
    [
        (
            ("state start {", "state start { transition accept; }\n state start {"),
            "state start is declared twice",
        ),
        (("header h_t {", "header h_t { bit<16> z; }\nheader h_t {"), "type h_t is declared twice"),
        (
            ("struct meta_t {", "struct headers_t { h_t h; }\nstruct meta_t {"),
            "type headers_t is declared twice",
        ),
        (("bit<8> a; bit<8> b;", "bit<8> a; bit<8> a;"), "field a is declared twice"),
        (("table t {", "table t { }\ntable t {"), "table t is declared twice"),
        (("table t {", "bit<8> v; bit<8> v;\ntable t {"), "C: variable v is declared twice"),
        (("action y() { }", "action y() { } action y() { drop_packet(); }"), "action y is declared twice"),
        (("actions = { x; y; }", "actions = { x; } actions = { y; }"), "property actions is declared twice"),
        (("action x() { }", "action x(bit<8> p, bit<8> p) { }"), "parameter p is declared twice"),
        (
            ("header h_t", "const bit<8> K = 1;\nconst bit<8> K = 2;\nheader h_t"),
            "constant K is declared twice",
        ),
        (("header h_t", "const bit<8> NET_TO_HOST = 7;\nheader h_t"), "declared by the architecture"),
        (
            ("struct meta_t { bit<8> x; }", "struct meta_t { bit<8> x; meta_t m; }"),
            "struct meta_t contains itself",
        ),
        (
            (
                "struct meta_t { bit<8> x; }",
                "struct a_t { b_t b; }\nstruct b_t { a_t a; }\nstruct meta_t { a_t m; }",
            ),
            "struct a_t contains itself (meta_t -> a_t -> b_t -> a_t)",
        ),
        (("PNA_NIC(", "PNA_NIC(P(), C(), D()) main;\nPNA_NIC("), "PNA_NIC is instantiated twice"),
    ],
)
def test_duplicate_and_self_containing_declarations_are_refused(edit: tuple[str, str], what: str) -> None:
    old, new = edit
    assert old in BASE
    assert what in refusal(BASE.replace(old, new, 1))


def _counting(size: int) -> str:
    return program(
        f"Counter<bit<32>, bit<32>>({size}, PNA_CounterType_t.PACKETS_AND_BYTES) c;",
        "c.count((bit<32>) hdr.h.a); send_to_port(0);",
    )


@pytest.mark.parametrize("size", [4, DENSE_CELLS, DENSE_CELLS + 1, 1 << 31, (1 << 32) - 1])
def test_counters_of_any_pna_size_count_the_same_cells(size: int) -> None:
    datapath = Datapath(parse_program(_counting(size), "c.p4"))
    sparse = isinstance(datapath.counters["c"][0], SparseCells)
    assert sparse == (size > DENSE_CELLS)
    datapath.process(PacketBatch.from_packets([b"\x01\x00", b"\x03\x00\x00", b"\x01\x00"]))
    assert datapath.counter_totals() == {"c": {1: (2, 4), 3: (1, 3)}}


@pytest.mark.parametrize("size", [1 << 32, 1 << 40, 1 << 64])
def test_counters_beyond_pnas_bit32_size_are_refused_at_their_declaration(size: int) -> None:
    assert f"Counter c: size {size} is outside 1..4294967295" in refusal(_counting(size))


def _pcap(packets: list[bytes], announced: int | None = None) -> bytes:
    data = struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 262144, 1)
    for packet in packets:
        data += struct.pack("<IIII", 0, 0, announced or len(packet), len(packet)) + packet
    return data


def test_a_packet_longer_than_64_kib_and_headers_is_refused_naming_its_record() -> None:
    assert len(read_pcap(_pcap([b"\x00" * 60, b"\x00" * 65_536])).packets) == 2
    with pytest.raises(NicError, match=r"^c\.pcap: record 1 holds 16,777,216 bytes, more than the 65,663 "):
        read_pcap(_pcap([b"\x00" * 60]) + struct.pack("<IIII", 0, 0, 1 << 24, 1 << 24), "c.pcap")
    assert MAX_PACKET_BYTES == 65_663


def test_one_long_packet_shrinks_its_batch_instead_of_widening_every_row() -> None:
    lengths = np.array([64] * 8191 + [MAX_PACKET_BYTES] + [64] * 100)
    spans = run_module.batches(lengths)
    assert spans[0][0] == 0 and spans[-1][1] == lengths.size
    assert all(a[1] == b[0] for a, b in zip(spans, spans[1:], strict=False))
    widest = max((stop - start) * int(lengths[start:stop].max()) for start, stop in spans)
    assert widest <= run_module.BATCH_BYTES


def test_small_batches_give_the_same_packets_in_the_same_order(monkeypatch: pytest.MonkeyPatch) -> None:
    capture = read_pcap((EXAMPLES / "tenant-traffic.pcap").read_bytes())
    whole = run_capture(shipped("tenant_meter"), capture, 1, 1)
    monkeypatch.setattr(run_module, "BATCH_BYTES", 1500)  # a packet a batch; meters see time order
    split = run_capture(shipped("tenant_meter"), capture, 1, 1)
    assert len(run_module.batches(np.array([len(p) for p in capture.packets]))) == len(capture.packets)
    assert 0 < whole.dropped < whole.packets_in  # the meter marks some red
    assert split.output == whole.output and split.to_json() == whole.to_json()


def _entries(table: str, *rows: dict[str, object]) -> dict[str, object]:
    return {"tables": {table: list(rows)}}


def test_two_entries_with_the_same_exact_key_are_refused_naming_the_second() -> None:
    datapath = Datapath(parse_program(BASE, "t.p4"))
    same = _entries(
        "t", {"match": {"hdr.h.a": 1}, "action": "x"}, {"match": {"hdr.h.a": "0x01"}, "action": "y"}
    )
    with pytest.raises(NicError, match=r"^tables\.t\.1\.match: the same match as tables\.t\.0"):
        parse_entries(datapath, same)
    parse_entries(
        datapath,
        _entries("t", {"match": {"hdr.h.a": 1}, "action": "x"}, {"match": {"hdr.h.a": 2}, "action": "y"}),
    )


def test_ternary_entries_repeat_a_match_only_at_another_priority() -> None:
    datapath = Datapath(parse_program(BASE.replace("hdr.h.a: exact", "hdr.h.a: ternary"), "t.p4"))
    row = {"match": {"hdr.h.a": {"value": 1, "mask": 255}}, "action": "x", "priority": 1}
    parse_entries(datapath, _entries("t", row, {**row, "priority": 2}))
    with pytest.raises(NicError, match=r"tables\.t\.1\.match: the same match"):
        parse_entries(datapath, _entries("t", row, {**row, "action": "y"}))
