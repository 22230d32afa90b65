"""The P4 front end: the subset parses, and anything outside it is one `file:line:col` line."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from tests.p4.helpers import EXAMPLES, PROGRAMS

from cloudtwin.errors import NicError, P4Error
from cloudtwin.p4 import (
    Datapath,
    PacketBatch,
    Program,
    install,
    keep_programs,
    parse_entries,
    parse_program,
    read_pcap,
    write_pcap,
)

GATEWAY = (EXAMPLES / "vxlan_gateway.p4").read_text()


@pytest.mark.parametrize("name", PROGRAMS)
def test_shipped_programs_parse(name: str) -> None:
    program = parse_program((EXAMPLES / f"{name}.p4").read_text(), f"{name}.p4")
    assert program.emit_order and program.parser.states["start"] is not None


def _error(text: str) -> str:
    with pytest.raises(P4Error) as info:
        parse_program(text, "prog.p4")
    message = str(info.value)
    assert "\n" not in message
    return message


@pytest.mark.parametrize(
    ("edit", "line", "what"),
    [
        (("size = 4096;", "size = 4096; register<bit<8>>(1) r;"), None, "unexpected"),
        (("transition parse_inner;", "transition parse_nowhere;"), None, "unknown state 'parse_nowhere'"),
        (
            ("hdr.vxlan.flags = 0x08;", "hdr.vxlan.bogus = 0x08;"),
            None,
            "'hdr.vxlan.bogus' cannot be assigned",
        ),
        (("istd.input_port: exact;", "istd.input_port: selector;"), None, "match kind 'selector'"),
        (("actions = { set_vni; drop; }", "actions = { set_vni; launch; }"), None, "unknown action 'launch'"),
        (
            ("hdr.vxlan.flags = 0x08;", "hdr.vxlan.flags = hdr.vxlan.flags[9:2];"),
            None,
            "slice [9:2] is outside bit<8>",
        ),
        (("typedef bit<48> mac_t;", "typedef bit<0> mac_t;"), None, "bit<0>"),
        (("hdr.vxlan.setValid();", "hdr.vxlan.frobnicate();"), None, "outside the supported subset"),
        (("    state parse_vlan {", "    state parse_vlan { for (;;) { }"), None, "a for loop in a parser"),
    ],
)
def test_outside_the_subset_names_file_line_column(
    edit: tuple[str, str], line: int | None, what: str
) -> None:
    old, new = edit
    assert old in GATEWAY
    message = _error(GATEWAY.replace(old, new, 1))
    assert re.match(r"^prog\.p4:\d+:\d+: ", message), message
    assert what in message
    expected_line = GATEWAY[: GATEWAY.index(old)].count("\n") + 1
    assert int(message.split(":")[1]) in range(expected_line - 3, expected_line + 2), message


def test_unexpected_character_and_end_of_file() -> None:
    assert _error("header h { bit<8> a; } $").startswith("prog.p4:1:24: unexpected character '$'")
    assert "end of file" in _error("header h { bit<8> a;")


def test_header_of_odd_bits_is_refused() -> None:
    assert "not a whole number of bytes" in _error("header h { bit<7> a; }")


def test_program_without_main_is_refused() -> None:
    assert "PNA_NIC" in _error("header h { bit<8> a; }")


def _datapath() -> Datapath:
    return Datapath(parse_program(GATEWAY, "gw.p4"))


@pytest.mark.parametrize(
    ("document", "what"),
    [
        ({"tables": {"nope": []}}, "tables.nope: the program has no table 'nope'"),
        (
            {"tables": {"vf_vni": [{"match": {"istd.input_port": 1}, "action": "fly"}]}},
            "tables.vf_vni.0.action",
        ),
        (
            {"tables": {"vf_vni": [{"match": {"istd.input_port": 1 << 40}, "action": "drop"}]}},
            "does not fit in bit<32>",
        ),
        ({"tables": {"vf_vni": [{"match": {"hdr.x": 1}, "action": "drop"}]}}, "has no key 'hdr.x'"),
        ({"tables": {"vf_vni": [{"match": {}, "action": "drop"}]}}, "exact key 'istd.input_port' is missing"),
        (
            {
                "tables": {
                    "vf_vni": [{"match": {"istd.input_port": 1}, "action": "set_vni", "params": {"vni": 1}}]
                }
            },
            "parameter 'local_ip'",
        ),
        (
            {"tables": {"vtep": [{"match": {"meta.vni": 1, "hdr.ethernet.dst": "zz:00"}, "action": "drop"}]}},
            "not a number, MAC or IP",
        ),
        ({"nonsense": 1}, "entries: a mapping"),
    ],
)
def test_entries_that_do_not_fit_the_program(document: object, what: str) -> None:
    with pytest.raises(NicError) as info:
        parse_entries(_datapath(), document)
    assert what in str(info.value)


def test_pcap_round_trip_and_truncation() -> None:
    frames = [bytes(range(60)), bytes(range(100))]
    data = write_pcap(frames)
    assert read_pcap(data).packets == frames
    with pytest.raises(NicError, match="record 1 is truncated"):
        read_pcap(data[:-1], "in.pcap")
    with pytest.raises(NicError, match="record 1 is truncated in its header"):
        read_pcap(data[: 24 + 16 + 60 + 5], "in.pcap")
    with pytest.raises(NicError, match="not a pcap file"):
        read_pcap(b"hello world, this is not a capture", "in.pcap")


def test_scapy_reads_what_we_write() -> None:
    from scapy.all import Ether, IP, rdpcap  # noqa: I001
    import tempfile

    frames = [bytes(Ether() / IP(dst="10.0.0.9"))]
    with tempfile.NamedTemporaryFile(suffix=".pcap") as handle:
        handle.write(write_pcap(frames))
        handle.flush()
        assert [bytes(p) for p in rdpcap(handle.name)] == frames


def test_batch_of_no_packets() -> None:
    result = _datapath().process(PacketBatch.from_packets([]))
    assert result.packets() == []


def _gateway_output(program: Program) -> tuple[list[bytes | None], list[int]]:
    """The VXLAN gateway's packets and ports for the shipped host frames, its entries installed."""
    datapath = Datapath(program)
    install(datapath, yaml.safe_load((EXAMPLES / "vxlan_gateway.entries.yaml").read_text()))
    capture = read_pcap((EXAMPLES / "host-frames.pcap").read_bytes())
    result = datapath.process(PacketBatch.from_packets(capture.packets, direction=1, input_port=1))
    return result.packets(), result.out_port.tolist()


def test_a_kept_program_is_read_back_and_runs_the_same(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`keep_programs`: the first parse writes the checked program, the second reads it back
    (the grammar's parser is not asked again) and the two run alike packet for packet."""
    from cloudtwin.p4 import frontend

    monkeypatch.setattr(frontend, "_PROGRAMS", [])
    fresh = parse_program(GATEWAY, "vxlan_gateway.p4")
    keep_programs(tmp_path)
    first = parse_program(GATEWAY, "vxlan_gateway.p4")
    [kept] = tmp_path.glob("*.pickle")

    def no_parse() -> None:
        raise AssertionError("parsed again")

    monkeypatch.setattr(frontend, "_lark", no_parse)
    again = parse_program(GATEWAY, "vxlan_gateway.p4")
    assert again is not first and kept.stat().st_size > 1000
    assert _gateway_output(again) == _gateway_output(first) == _gateway_output(fresh)
    assert sum(packet is not None for packet in _gateway_output(fresh)[0]) == 6  # 2 of 8 dropped


def test_kept_programs_miss_on_another_front_end_and_keep_no_errors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A program checked by another front end (another file of this package, another
    lark) is parsed again; a program with an error is not kept; the folder keeps at most
    KEPT_PROGRAMS files, the oldest dropped first."""
    from cloudtwin.p4 import frontend

    monkeypatch.setattr(frontend, "_PROGRAMS", [])
    keep_programs(tmp_path)
    parse_program(GATEWAY, "a.p4")
    monkeypatch.setattr(frontend, "_front_end", lambda: "another front end")
    parse_program(GATEWAY, "a.p4")
    assert len(list(tmp_path.glob("*.pickle"))) == 2
    with pytest.raises(P4Error):
        parse_program(GATEWAY.replace("transition parse_inner;", "transition nowhere;"), "a.p4")
    assert len(list(tmp_path.glob("*.pickle"))) == 2
    monkeypatch.setattr(frontend, "KEPT_PROGRAMS", 2)
    parse_program(GATEWAY, "b.p4")
    assert len(list(tmp_path.glob("*.pickle"))) == 2
    assert not list(tmp_path.glob("*.tmp")) and not list(tmp_path.glob(".*"))


def test_a_control_variables_initial_value_reaches_every_packet() -> None:
    """A variable declared with a value at the control's scope holds it when the control
    runs (the values are set after the parser, before the apply block)."""
    flagged = GATEWAY.replace("mac_t local_mac = 0;", "mac_t local_mac = 0;\n    bit<8> vxlan_flags = 0x08;")
    flagged = flagged.replace("hdr.vxlan.flags = 0x08;", "hdr.vxlan.flags = vxlan_flags;")
    assert flagged.count("vxlan_flags") == 2
    packets, ports = _gateway_output(parse_program(flagged, "flagged.p4"))
    assert (packets, ports) == _gateway_output(parse_program(GATEWAY, "vxlan_gateway.p4"))
    assert sum(packet is not None for packet in packets) == 6


def test_a_return_inside_an_action_ends_the_action_not_its_caller() -> None:
    """`return` in an action with a header parameter (inlined at its call, the header copied
    in and back) ends the action only: what it set before returning is copied back, and
    what the apply block does after the call still happens."""
    returning = GATEWAY.replace(
        "action drop() { drop_packet(); }",
        "action drop() { drop_packet(); }\n"
        "    action mark(inout vxlan_t v) { v.flags = 0x08; return; v.flags = 0xFF; }",
    )
    returning = returning.replace("hdr.vxlan.flags = 0x08;", "hdr.vxlan.flags = 0; mark(hdr.vxlan);")
    returning = returning.replace("hdr.vxlan.reserved2 = 0;", "hdr.vxlan.reserved2 = 7;")
    assert returning.count("mark(") == 2 and "reserved2 = 7" in returning
    packets, ports = _gateway_output(parse_program(returning, "returning.p4"))
    before, same_ports = _gateway_output(parse_program(GATEWAY, "vxlan_gateway.p4"))
    assert ports == same_ports and sum(packet is not None for packet in packets) == 6
    for packet, old in zip(packets, before, strict=True):
        if packet is not None and old is not None:
            # after the outer Ethernet, IPv4 and UDP: the VXLAN header's flags ... reserved2
            assert packet[42] == 0x08 and packet[49] == 7
            assert packet[:49] == old[:49] and packet[50:] == old[50:]
