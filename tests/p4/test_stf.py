"""p4c's STF packet tests: the script parser, the runner, and the whole shared suite.

The suite (`../shared/datasets/p4c-stf/`, 160 v1model and PSA tests) runs in-process: every
test passes or is refused as unsupported with the construct named; none may fail.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.conftest import DATASETS, dataset

from cloudtwin.errors import NicError, P4Error
from cloudtwin.p4.frontend import parse_program
from cloudtwin.p4.preprocess import preprocess
from cloudtwin.p4.run import load_datapath
from cloudtwin.p4.stf import Expect, StfResult, compare, parse_stf, run_stf

SUITE = DATASETS / "p4c-stf"

PASS_FLOOR = 156
"""How many of the shared suite's tests pass (the rest are refused as unsupported)."""


def test_add_with_priority_ternary_lpm_and_params() -> None:
    (cmd,) = parse_stf("add ingress.t 7 h.a:0x0A&&&0xF0 h.b:0x0A000000/8 h.c:5 ingress.act(x:0x1f, y:2)\n")
    assert (cmd.kind, cmd.name, cmd.priority, cmd.action) == ("add", "ingress.t", 7, "ingress.act")
    assert cmd.keys == (("h.a", ("ternary", 10, 0xF0)), ("h.b", ("lpm", 0x0A000000, 8)), ("h.c", 5))
    assert cmd.params == (("x", 31), ("y", 2))


def test_add_without_priority_and_wildcard_nibbles() -> None:
    (cmd,) = parse_stf("add t data.f1:0x****0101 setb1(val:0x7f)")
    assert cmd.priority is None
    assert cmd.keys == (("data.f1", ("ternary", 0x0101, 0x0000FFFF)),)
    (bits,) = parse_stf("add t f:0b1*0 a()")
    assert bits.keys == (("f", ("ternary", 0b100, 0b101)),)


def test_expect_wildcards_and_end_marker() -> None:
    loose, exact = parse_stf("expect 2 0b **** 11 # comment\nexpect 3 0b11 $\n")
    assert loose.expect == Expect(2, "0B****11", False) and exact.expect == Expect(3, "0B11", True)
    assert loose.expect.matches(bytes.fromhex("0b123411ff"))  # longer is fine without `$`
    assert not loose.expect.matches(bytes.fromhex("0b123412"))
    assert not loose.expect.matches(bytes.fromhex("0b1234"))  # shorter never
    assert exact.expect.matches(bytes.fromhex("0b11")) and not exact.expect.matches(bytes.fromhex("0b1100"))


def test_other_commands() -> None:
    commands = parse_stf(
        "packet 0 ab cd\nwait\nsetdefault t drop()\nmc_mgrp_create 1\nmc_node_create 0 6 7\n"
        "mc_node_associate 1 0\ncheck_counter c(3) bytes == 64\nregister_write r 5 100\n"
        "meter_set_rates m 2 0.5:4 1:5\nmirroring_add 1 3\nremove t k:1\n"
    )
    assert [c.kind for c in commands][:3] == ["packet", "wait", "setdefault"]
    assert commands[0].data == b"\xab\xcd"
    assert commands[4].numbers == (0, 6, 7)
    assert (commands[6].name, commands[6].numbers, commands[6].counter_kind) == ("c", (3, 64), "bytes")
    assert commands[8].rates == ((0.5, 4), (1.0, 5))


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        ("packet 0 0g", "not a hex digit"),
        ("packet 0 abc", "whole number of bytes"),
        ("packet 0 ab$", "`$` ends only an expected packet"),
        ("add t k=1 a()", "is not FIELD:VALUE"),
        ("add t k:1", "no ACTION(...)"),
        ("add t k:1 a(x)", "is not NAME:VALUE"),
        ("frobnicate 1", "unknown command 'frobnicate'"),
        ("mc_node_associate 1", "takes 2 numbers"),
    ],
)
def test_malformed_line_is_one_line_naming_file_and_line(line: str, reason: str) -> None:
    with pytest.raises(NicError) as info:
        parse_stf(f"# header\n{line}\n", "t.stf")
    message = str(info.value)
    assert message.startswith("t.stf:2: ") and reason in message and "\n" not in message


@settings(max_examples=60, deadline=None)
@given(st.text(alphabet="addpacketxe0123456789abcdefABCDEF*$:&/()., \n#_-", max_size=80))
def test_fuzzed_scripts_parse_or_fail_in_one_line(text: str) -> None:
    try:
        parse_stf(text, "f.stf")
    except NicError as err:
        assert str(err).startswith("f.stf:") and "\n" not in str(err)


PROGRAM = """#include <core.p4>
#include <v1model.p4>
header h_t { bit<8> a; bit<8> b; }
struct H { h_t h; }
struct M { }
parser P(packet_in p, out H h, inout M m, inout standard_metadata_t sm) {
    state start { p.extract(h.h); transition accept; }
}
control V(inout H h, inout M m) { apply { } }
control I(inout H h, inout M m, inout standard_metadata_t sm) {
    action set(bit<8> v, bit<9> port) { h.h.b = v; sm.egress_spec = port; }
    action drop() { mark_to_drop(sm); }
    table t { key = { h.h.a : ternary; } actions = { set; drop; } default_action = drop; }
    apply { t.apply(); }
}
control E(inout H h, inout M m, inout standard_metadata_t sm) { apply { } }
control C(inout H h, inout M m) { apply { } }
control D(packet_out p, in H h) { apply { p.emit(h.h); } }
V1Switch(P(), V(), I(), E(), C(), D()) main;
"""


def _run(script: str) -> object:
    if not SUITE.is_dir():
        dataset("p4c-stf")
    return run_stf(PROGRAM, str(SUITE / "tests" / "inline.p4"), script, "inline.stf", (SUITE / "include",))


def test_runner_priorities_drop_and_differences() -> None:
    entries = "add t 1 h.a:0x10&&&0xF0 set(v:1, port:2)\nadd t 5 h.a:0x11 set(v:5, port:3)\n"
    ok = _run(entries + "packet 0 11 00\nexpect 3 11 05 $\npacket 0 12 00\nexpect 2 12 *1\npacket 0 20 00\n")
    assert ok.status == "pass" and (ok.expected, ok.matched, ok.unexpected) == (2, 2, 0)  # type: ignore[attr-defined]
    wrong = _run(entries + "packet 0 12 00\nexpect 2 12 02\n")
    assert wrong.status == "fail" and wrong.reason == "port 2 packet 1: expected 1202, got 1201"  # type: ignore[attr-defined]
    extra = _run(entries + "packet 0 12 00\n")
    assert extra.status == "fail" and extra.unexpected == 1  # type: ignore[attr-defined]


ENTRIES = "add t 1 h.a:0x10&&&0xF0 set(v:1, port:2)\nadd t 5 h.a:0x11 set(v:5, port:3)\n"


def test_an_expected_packet_that_never_comes_out_fails() -> None:
    # 0x20 matches no entry: the default drops it, so nothing comes out on port 2
    missing = _run(ENTRIES + "packet 0 20 00\nexpect 2 20 01\n")
    assert missing.status == "fail"  # type: ignore[attr-defined]
    assert missing.reason == "port 2 packet 1: expected 2001, got nothing"  # type: ignore[attr-defined]
    # two expected, one out: the second is missing
    short = _run(ENTRIES + "packet 0 11 00\nexpect 3 11 05\nexpect 3 11 05\n")
    assert short.status == "fail" and short.matched == 1  # type: ignore[attr-defined]
    assert short.reason == "port 3 packet 2: expected 1105, got nothing"  # type: ignore[attr-defined]


def test_an_expectation_on_the_wrong_port_fails() -> None:
    # 0x11 leaves on port 3: expecting the same bytes on port 2 is a fail, both ways
    wrong = _run(ENTRIES + "packet 0 11 00\nexpect 2 11 05\n")
    assert wrong.status == "fail" and wrong.matched == 0 and wrong.unexpected == 1  # type: ignore[attr-defined]
    assert wrong.reason == "port 2 packet 1: expected 1105, got nothing"  # type: ignore[attr-defined]


def test_a_difference_deep_in_a_long_payload_fails() -> None:
    # 64 bytes through (the payload after h is not parsed, carried as is): one nibble at
    # byte 60 differs from what is expected
    payload = bytes(range(62))
    sent = "11 00 " + payload.hex()
    right = "11 05 " + payload.hex()
    wrong = bytearray(bytes.fromhex(right.replace(" ", "")))
    wrong[60] ^= 0x01
    ok = _run(ENTRIES + f"packet 0 {sent}\nexpect 3 {right} $\n")
    assert ok.status == "pass", ok.reason  # type: ignore[attr-defined]
    bad = _run(ENTRIES + f"packet 0 {sent}\nexpect 3 {wrong.hex()} $\n")
    assert bad.status == "fail"  # type: ignore[attr-defined]
    longer = _run(ENTRIES + f"packet 0 {sent}\nexpect 3 {right} 00 $\n")  # one byte too many
    assert longer.status == "fail"  # type: ignore[attr-defined]


def test_entry_that_does_not_fit_is_an_error_naming_the_line() -> None:
    with pytest.raises(NicError, match=r"^inline\.stf:1: .*does not fit bit<9>"):
        _run("add t h.a:1 set(v:1, port:512)\n")


def _reason(text: str | None) -> str:
    """A refusal's construct, without the file position and the names in quotes."""
    text = re.sub(r"^\S+?:\d+(:\d+)?: ", "", text or "")
    return re.sub(r"'[^']*'", "'…'", text)[:70]


CHECKED_FLOOR = 153
"""How many passes send at least one packet (3 of p4c's scripts send none: they pass on nothing)."""
FLIPPED_FLOOR = 496
"""How many expect lines of passing tests are flipped, each required to fail."""


def _sends(text: str) -> bool:
    return any(line.split()[:1] == ["packet"] for line in text.splitlines())


def _flip(line: str) -> str:
    """The expect line with its last significant nibble changed (a nibble deep in the packet)."""
    words = line.split("#", 1)[0].rstrip()
    for k in range(len(words) - 1, 0, -1):
        ch = words[k]
        if ch in "0123456789abcdefABCDEF" and words[k - 1] not in ("x", "X"):
            return words[:k] + format(int(ch, 16) ^ 1, "X") + words[k + 1 :]
    return words


def _every_flipped_expectation_fails(script: Path, result: StfResult) -> int:
    """Each expect line of a passing script, one at a time, with one nibble flipped in memory:
    the packets that came out must then fail the comparison. How many lines were flipped."""
    commands = parse_stf(script.read_text(), script.name)
    expected = [c.expect for c in commands if c.kind == "expect" and c.expect is not None]
    lines = script.read_text().splitlines()
    flipped = 0
    for k, command in enumerate(c for c in commands if c.kind == "expect"):
        text = lines[command.line - 1]
        if not text.split("#", 1)[0].strip().startswith("expect") or set(text.split()[2:]) <= {"*", "$"}:
            continue
        [changed] = parse_stf(_flip(text), script.name)
        assert changed.expect is not None and changed.expect != expected[k], text
        trial = [*expected[:k], changed.expect, *expected[k + 1 :]]
        outcome = compare(trial, result.sent)
        assert outcome.status == "fail", f"{script.name}:{command.line}: a flipped expectation passed"
        flipped += 1
    return flipped


def test_the_shared_suite_passes_or_is_refused_never_fails() -> None:
    if not SUITE.is_dir():
        dataset("p4c-stf")
    status: Counter[str] = Counter()
    reasons: Counter[str] = Counter()
    failures = []
    checked_passes = flipped = 0
    for script in sorted((SUITE / "tests").glob("*.stf")):
        program = script.with_suffix(".p4")
        try:
            result = run_stf(
                program.read_text(), str(program), script.read_text(), str(script), (SUITE / "include",)
            )
        except NicError as err:  # an entry the program cannot take: refused, named
            result = StfResult("unsupported", reason=str(err))
        status[result.status] += 1
        if result.status == "pass":
            checked_passes += bool(result.sent) or _sends(script.read_text())
            flipped += _every_flipped_expectation_fails(script, result)
        if result.status == "fail":
            failures.append(f"{script.name}: {result.reason}")
        elif result.status == "unsupported":
            reasons[_reason(result.reason)] += 1
    print(f"\np4c STF suite: {dict(status)}; {checked_passes} passes send packets; "
          f"{flipped} expectations flipped")
    for reason, count in reasons.most_common():
        print(f"{count:4d}  {reason}")
    assert not failures, failures
    assert status["pass"] >= PASS_FLOOR
    assert checked_passes >= CHECKED_FLOOR and flipped >= FLIPPED_FLOOR, (checked_passes, flipped)


FEATURES = """#include <core.p4>
#include <v1model.p4>
header h_t { bit<8> a; bit<8> b; }
struct H { h_t h; }
struct M { }
parser P(packet_in p, out H h, inout M m, inout standard_metadata_t sm) {
    state start { p.extract(h.h); transition accept; }
}
control V(inout H h, inout M m) { apply { } }
bit<8> twice(in bit<8> x) { return x + x; }
control I(inout H h, inout M m, inout standard_metadata_t sm) {
    register<bit<8>>(4) seen;
    @name("ingress.go") action go_0(bit<9> port) { sm.egress_spec = port; }
    action flood() { sm.mcast_grp = 1; }
    @name("ingress.fwd") table fwd_0 { key = { h.h.a : exact; } actions = { go_0; flood; } }
    apply {
        bit<8> last;
        seen.read(last, 0);
        seen.write(0, h.h.a);
        h.h.b = last |+| twice(h.h.a);
        switch (fwd_0.apply().action_run) {
            flood: { h.h.a = 0xff; }
            default: { }
        }
    }
}
control E(inout H h, inout M m, inout standard_metadata_t sm) {
    apply { if (sm.egress_rid == 7) { h.h.a = 0x77; } }
}
control C(inout H h, inout M m) { apply { } }
control D(packet_out p, in H h) { apply { p.emit(h.h); } }
V1Switch(P(), V(), I(), E(), C(), D()) main;
"""


def test_names_registers_functions_switch_and_multicast() -> None:
    """@name'd table and action by their control-plane names; a register carrying a value
    from one packet to the next; |+| saturating; replication with rids, ports ascending."""
    if not SUITE.is_dir():
        dataset("p4c-stf")
    script = (
        "add ingress.fwd h.a:1 ingress.go(port:3)\nadd ingress.fwd h.a:2 ingress.flood()\n"
        "mc_mgrp_create 1\nmc_node_create 7 6 5\nmc_node_associate 1 0\n"
        "packet 0 01 00\nexpect 3 01 02 $\n"  # first packet: the register held 0; 0 + 2
        "packet 0 02 00\nexpect 5 77 05 $\nexpect 6 77 05 $\n"  # 1 + 4; flood: a = ff, rid 7
        "packet 0 7f 00\n"  # no entry: the default NoAction leaves egress_spec 0
        "expect 0 7f ff $\n"  # 2 |+| 0xfe saturates at 0xff
    )
    result = run_stf(FEATURES, str(SUITE / "tests" / "features.p4"), script, "f.stf", (SUITE / "include",))
    assert result.status == "pass", result.reason
    assert (result.expected, result.matched, result.unexpected) == (4, 4, 0)


def test_lookahead_and_advance() -> None:
    """A parser that peeks at the first byte without moving: 1 means skip it (advance),
    then parse as usual."""
    program = PROGRAM.replace(
        "state start { p.extract(h.h); transition accept; }",
        "state start { transition select(p.lookahead<bit<8>>()) { 1: skip; default: take; } }\n"
        "    state skip { p.advance(8); transition take; }\n"
        "    state take { p.extract(h.h); transition accept; }",
    )
    script = (
        "add t h.a:0&&&0 set(v:9, port:4)\n"
        "packet 0 01 22 33\nexpect 4 22 09 $\n"  # skipped 01, parsed 22 33, b set to 9
        "packet 0 05 06\nexpect 4 05 09 $\n"
    )
    if not SUITE.is_dir():
        dataset("p4c-stf")
    result = run_stf(program, str(SUITE / "tests" / "look.p4"), script, "l.stf", (SUITE / "include",))
    assert result.status == "pass", result.reason


def test_typed_constants_keep_their_width_and_fold() -> None:
    """`const bit<4> K = 0xF`: K + K wraps at 4 bits (0xE), as P4 types it; constant
    expressions (112 / 8) fold when the program is read."""
    program = PROGRAM.replace(
        "control V(",
        "const bit<4> K = 0xF;\nconst bit<8> BYTES = 112 / 8;\ncontrol V(",
    ).replace("apply { t.apply(); }", "apply { h.h.a = (bit<8>)(K + K); h.h.b = BYTES; sm.egress_spec = 1; }")
    if not SUITE.is_dir():
        dataset("p4c-stf")
    result = run_stf(
        program,
        str(SUITE / "tests" / "c.p4"),
        "packet 0 00 00\nexpect 1 0e 0e $\n",
        "c.stf",
        (SUITE / "include",),
    )
    assert result.status == "pass", result.reason


PSA_PROGRAM = """#include <core.p4>
#include <bmv2/psa.p4>
header h_t { bit<8> a; bit<8> path; bit<16> instance; bit<32> port; }
struct H { h_t h; }
struct M { bit<8> seen; }
struct E { }
parser IP(packet_in p, out H h, inout M m, in psa_ingress_parser_input_metadata_t istd,
          in E r1, in E r2) {
    state start { p.extract(h.h); transition accept; }
}
control I(inout H h, inout M m, in psa_ingress_input_metadata_t istd,
          inout psa_ingress_output_metadata_t ostd) {
    action fwd(PortId_t port) { send_to_port(ostd, port); }
    action flood(MulticastGroup_t g) { multicast(ostd, g); }
    action mark() { m.seen = 1; }
    table t { key = { h.h.a : exact; } actions = { fwd; flood; mark; } default_action = mark; }
    apply { t.apply(); h.h.port = (bit<32>) istd.ingress_port; }
}
parser EP(packet_in p, out H h, inout M m, in psa_egress_parser_input_metadata_t istd,
          in E n, in E c1, in E c2) {
    state start { p.extract(h.h); transition accept; }
}
control Eg(inout H h, inout M m, in psa_egress_input_metadata_t istd,
           inout psa_egress_output_metadata_t ostd) {
    apply {
        if (istd.packet_path == PSA_PacketPath_t.NORMAL_MULTICAST) { h.h.path = 2; }
        if (istd.packet_path == PSA_PacketPath_t.NORMAL_UNICAST) { h.h.path = 1; }
        h.h.instance = (bit<16>) istd.instance;
        if (h.h.a == 9) { egress_drop(ostd); }
        if (m.seen == 1) { h.h.a = 0xee; }
    }
}
control Common(packet_out p, inout H h) { apply { p.emit(h.h); } }
control ID(packet_out p, out E c, out E r, out E n, inout H h, in M m,
           in psa_ingress_output_metadata_t o) {
    Common() c1;
    apply { c1.apply(p, h); }
}
control ED(packet_out p, out E c, out E r, inout H h, in M m, in psa_egress_output_metadata_t o,
           in psa_egress_deparser_input_metadata_t d) {
    Common() c2;
    apply { c2.apply(p, h); }
}
IngressPipeline(IP(), I(), ID()) ip;
EgressPipeline(EP(), Eg(), ED()) ep;
PSA_Switch(ip, PacketReplicationEngine(), ep, BufferingQueueingEngine()) main;
"""


def _psa(script: str) -> StfResult:
    if not SUITE.is_dir():
        dataset("p4c-stf")
    return run_stf(PSA_PROGRAM, str(SUITE / "tests" / "psa.p4"), script, "psa.stf", (SUITE / "include",))


def test_psa_unicast_multicast_drop_and_the_default_drop() -> None:
    """PSA as psa_switch runs it: ostd.drop starts true (a miss runs `mark`, which forwards
    nothing); send_to_port unicasts (path NORMAL_UNICAST = 1, instance 0); multicast sends a
    copy per member (path 2, instance = rid), ports ascending; egress_drop drops one copy;
    user metadata is not carried to egress (m.seen is 0 there)."""
    entries = (
        "add t h.a:1 fwd(port:5)\nadd t h.a:2 flood(g:3)\nadd t h.a:9 fwd(port:4)\n"
        "mc_mgrp_create 3\nmc_node_create 7 8 6\nmc_node_associate 3 0\n"
    )
    packets = (
        "packet 2 01 00 0000 00000000\nexpect 5 01 01 0000 00000002 $\n"
        "packet 3 02 00 0000 00000000\nexpect 6 02 02 0007 00000003 $\nexpect 8 02 02 0007 00000003 $\n"
        "packet 1 09 00 0000 00000000\n"  # egress drops it
        "packet 1 05 00 0000 00000000\n"  # a miss: `mark` leaves ostd.drop true
    )
    result = _psa(entries + packets)
    assert result.status == "pass", result.reason
    assert (result.expected, result.matched, result.unexpected) == (3, 3, 0)
    wrong = _psa(entries + "packet 2 01 00 0000 00000000\nexpect 5 01 02 0000 00000002 $\n")
    difference = "port 5 packet 1: expected 0102000000000002$, got 0101000000000002"
    assert wrong.status == "fail" and wrong.reason == difference


def test_psa_resubmit_runs_ingress_again_and_a_loop_is_refused() -> None:
    """A miss resubmits the packet once (packet_path RESUBMIT = 5 the second time, when it
    is sent to port 7 with its original bytes); resubmitting every time is refused."""
    once = (
        "action mark() { if (istd.packet_path != PSA_PacketPath_t.RESUBMIT) { ostd.resubmit = true;\n"
        "    ostd.drop = false; h.h.a = 0x77; } else { send_to_port(ostd, 7); h.h.instance = 5; } }"
    )
    if not SUITE.is_dir():
        dataset("p4c-stf")
    again = run_stf(
        PSA_PROGRAM.replace("action mark() { m.seen = 1; }", once),
        str(SUITE / "tests" / "psa.p4"),
        "packet 2 05 00 0000 00000000\nexpect 7 05 01 0000 00000002 $\n",  # egress sets instance 0
        "psa.stf",
        (SUITE / "include",),
    )
    assert again.status == "pass", again.reason
    resubmit = "action mark() { ostd.resubmit = true; ostd.drop = false; }"
    program = PSA_PROGRAM.replace("action mark() { m.seen = 1; }", resubmit)
    if not SUITE.is_dir():
        dataset("p4c-stf")
    where = (str(SUITE / "tests" / "psa.p4"), "psa.stf", (SUITE / "include",))
    script = "add t h.a:1 fwd(port:5)\npacket 2 01 00 0000 00000000\nexpect 5 01 01 0000 00000002 $\n"
    assert run_stf(program, where[0], script, *where[1:]).status == "pass"
    refused = run_stf(program, where[0], "packet 2 07 00 0000 00000000\n", *where[1:])
    assert refused.status == "unsupported" and "resubmit" in (refused.reason or "")


def test_nic_run_refuses_v1model_and_psa_programs(tmp_path: Path) -> None:
    """`nic run` runs the NIC's PNA pipeline; other architectures are one line naming it."""
    if not SUITE.is_dir():
        dataset("p4c-stf")
    for name in ("core.p4", "v1model.p4"):
        (tmp_path / name).write_text((SUITE / "include" / name).read_text())
    (tmp_path / "bmv2").mkdir()
    (tmp_path / "bmv2" / "psa.p4").write_text((SUITE / "include" / "bmv2" / "psa.p4").read_text())
    for text, architecture in ((PROGRAM, "v1model"), (PSA_PROGRAM, "psa")):
        with pytest.raises(P4Error, match=f"a {architecture} program; `nic run` runs the NIC's PNA pipeline"):
            load_datapath(text, str(tmp_path / "x.p4"), {})


def test_range_optional_keys_and_priorities() -> None:
    """Const entries: the smallest priority number wins (bmv2): `@priority(N)`, else one more
    than the entry before. Range bounds are inclusive; an optional key is a value or `_`."""
    program = PROGRAM.replace(
        "table t { key = { h.h.a : ternary; } actions = { set; drop; } default_action = drop; }",
        "table t { key = { h.h.a : range; h.h.b : optional; } actions = { set; drop; }\n"
        "    default_action = drop;\n"
        "    const entries = {\n"
        "        (1 .. 8, _) : set(1, 1) @priority(5);\n"  # priority 5
        "        (6 .. 12, 7) : set(2, 2);\n"  # priority 6
        "        (8, _) : set(3, 3) @priority(2);\n"  # priority 2
        "        (_, 9) : set(4, 4);\n"  # priority 3
        "    } }",
    )
    script = (
        "packet 0 01 00\nexpect 1 01 01 $\n"  # only the first
        "packet 0 08 00\nexpect 3 08 03 $\n"  # first and third: 2 < 5
        "packet 0 07 07\nexpect 1 07 01 $\n"  # first (5) and second (6)
        "packet 0 0c 07\nexpect 2 0c 02 $\n"  # the second alone (12 is in 6 .. 12)
        "packet 0 0d 07\n"  # nothing: the default drops it
        "packet 0 08 09\nexpect 3 08 03 $\n"  # third (2) before fourth (3)
        "packet 0 0d 09\nexpect 4 0d 04 $\n"
    )
    if not SUITE.is_dir():
        dataset("p4c-stf")
    result = run_stf(program, str(SUITE / "tests" / "r.p4"), script, "r.stf", (SUITE / "include",))
    assert result.status == "pass", result.reason
    assert (result.expected, result.matched, result.unexpected) == (6, 6, 0)


def test_division_and_modulo_round_down_and_refuse_zero() -> None:
    """bit<8>: 200 / 7 = 28, 200 % 7 = 4; a divisor of 0 reached by a packet is refused."""
    program = PROGRAM.replace(
        "apply { t.apply(); }",
        "apply { bit<8> q = h.h.a / h.h.b; h.h.b = h.h.a % h.h.b; h.h.a = q; sm.egress_spec = 1; }",
    )
    if not SUITE.is_dir():
        dataset("p4c-stf")
    where = (str(SUITE / "tests" / "d.p4"), "d.stf", (SUITE / "include",))
    result = run_stf(program, where[0], "packet 0 c8 07\nexpect 1 1c 04 $\n", *where[1:])
    assert result.status == "pass", result.reason
    zero = run_stf(program, where[0], "packet 0 c8 00\n", *where[1:])
    assert zero.status == "unsupported" and zero.reason == f"{where[0]}:14:24: division by 0 at run time"


def test_signed_int_wraps_saturates_shifts_compares_and_extends() -> None:
    """int<8> held as its bits: -112 + -96 wraps to 48 (0x30); |+| clamps to -128 (0x80);
    >> 2 fills with the sign (-28, 0xe4); < compares signed; (int<16>) sign-extends (0xff90).
    And 112 + 32: wraps to 0x90, saturates at 127 (0x7f), 112 >> 2 = 28."""
    program = (
        PROGRAM.replace(
            "header h_t { bit<8> a; bit<8> b; }",
            "typedef int<8> S8;\n"
            "header h_t { S8 a; int<8> b; int<8> sum; int<8> sat; int<8> shr; bit<8> lt; int<16> wide; }",
        )
        .replace(
            "apply { t.apply(); }",
            "apply { h.h.sum = h.h.a + h.h.b; h.h.sat = h.h.a |+| h.h.b; h.h.shr = h.h.a >> 2;\n"
            "        h.h.lt = (bit<8>)(bit<1>)(h.h.a < h.h.b); h.h.wide = (int<16>) h.h.a;\n"
            "        sm.egress_spec = 1; }",
        )
        .replace("table t { key = { h.h.a : ternary; } actions = { set; drop; } default_action = drop; }", "")
        .replace("action set(bit<8> v, bit<9> port) { h.h.b = v; sm.egress_spec = port; }", "")
    )
    script = (
        "packet 0 90 a0 00 00 00 00 0000\nexpect 1 90 a0 30 80 e4 01 ff90 $\n"
        "packet 0 70 20 00 00 00 00 0000\nexpect 1 70 20 90 7f 1c 00 0070 $\n"
    )
    if not SUITE.is_dir():
        dataset("p4c-stf")
    result = run_stf(program, str(SUITE / "tests" / "s.p4"), script, "s.stf", (SUITE / "include",))
    assert result.status == "pass", result.reason


def test_signed_int_is_refused_where_its_sign_would_be_lost() -> None:
    """A function returning int<N> (its sign is not carried through calls) is refused by name."""
    program = PROGRAM.replace("control V(", "int<8> f(in bit<8> x) { return (int<8>) x; }\ncontrol V(")
    if not SUITE.is_dir():
        dataset("p4c-stf")
    result = run_stf(program, str(SUITE / "tests" / "s.p4"), "", "s.stf", (SUITE / "include",))
    assert result.status == "unsupported"
    assert "function f return: a signed int<N> is outside the supported subset here" in (result.reason or "")


def test_header_equality_and_lookahead_statement() -> None:
    """`a == b` on headers: both invalid, or both valid with equal fields. A lookahead used
    as a statement only checks that the bytes are there (else PacketTooShort)."""
    program = PROGRAM.replace(
        "apply { t.apply(); }",
        "apply { h_t x = { 8w1, 8w2 }; h_t y; sm.egress_spec = 1;\n"
        "        if (x == h.h) { h.h.b = 0xee; }\n"
        "        if (y == h.h) { h.h.a = 0xdd; }\n"  # y is invalid, h.h valid: never equal
        "        if (sm.parser_error == error.PacketTooShort) { sm.egress_spec = 2; } }",
    ).replace("state start { p.extract(h.h); transition accept; }",
              "state start { p.lookahead<bit<24>>(); p.extract(h.h); transition accept; }")
    script = (
        "packet 0 01 02 00\nexpect 1 01 ee 00 $\n"
        "packet 0 01 03 00\nexpect 1 01 03 00 $\n"
        "packet 0 01 02\nexpect 2 01 02 $\n"  # too short for the lookahead: nothing extracted
    )
    if not SUITE.is_dir():
        dataset("p4c-stf")
    result = run_stf(program, str(SUITE / "tests" / "e.p4"), script, "e.stf", (SUITE / "include",))
    assert result.status == "pass", result.reason


VARBIT = """#include <core.p4>
#include <v1model.p4>
header v_t { bit<8> len; bit<16> sum; varbit<32> opts; }
struct H { v_t v; }
struct M { }
parser P(packet_in p, out H h, inout M m, inout standard_metadata_t sm) {
    state start { p.extract(h.v, (bit<32>) p.lookahead<bit<8>>() * 8); transition accept; }
}
control V(inout H h, inout M m) { apply { } }
control I(inout H h, inout M m, inout standard_metadata_t sm) {
    apply {
        sm.egress_spec = 1;
        if (sm.parser_error == error.HeaderTooShort) { sm.egress_spec = 2; }
        if (sm.parser_error == error.PacketTooShort) { sm.egress_spec = 3; }
        if (h.v.isValid()) { h.v.len = 0x77; }
    }
}
control E(inout H h, inout M m, inout standard_metadata_t sm) { apply { } }
control C(inout H h, inout M m) {
    apply { update_checksum(h.v.isValid(), { h.v.len, h.v.opts }, h.v.sum, HashAlgorithm.csum16); }
}
control D(packet_out p, in H h) { apply { p.emit(h.v); } }
V1Switch(P(), V(), I(), E(), C(), D()) main;
"""


def test_varbit_extract_emit_checksum_and_errors() -> None:
    """extract(h, bits): the first byte says how many bytes of options follow (at most 4).
    The options keep their own length when emitted; the checksum covers 77 aa bb padded to
    0x77aabb00: 0x77aa + 0xbb00 = 0x132aa, folded 0x32ab, complemented 0xcd54. 5 bytes is
    more than varbit<32> holds (HeaderTooShort); 3 bytes with 1 left is PacketTooShort."""
    script = (
        "packet 0 02 0000 aabb cc\nexpect 1 77 cd54 aabb cc $\n"
        "packet 0 05 0000 aabbccddee\nexpect 2 05 0000 aabbccddee $\n"
        "packet 0 03 0000 aa\nexpect 3 03 0000 aa $\n"
    )
    if not SUITE.is_dir():
        dataset("p4c-stf")
    result = run_stf(VARBIT, str(SUITE / "tests" / "v.p4"), script, "v.stf", (SUITE / "include",))
    assert result.status == "pass", result.reason
    bad = VARBIT.replace("if (h.v.isValid()) { h.v.len = 0x77; }", "h.v.len = (bit<8>) h.v.opts;")
    refused = run_stf(bad, str(SUITE / "tests" / "v.p4"), script, "v.stf", (SUITE / "include",))
    assert refused.status == "unsupported" and "a varbit field is only extracted" in (refused.reason or "")


UNIONS = """#include <core.p4>
#include <v1model.p4>
header s_t { bit<8> t; }
header one_t { bit<8> v; }
header two_t { bit<16> v; }
header_union u_t { one_t one; two_t two; }
struct H { s_t s; u_t[2] u; }
struct M { bit<8> x; bit<8> y; }
parser P(packet_in p, out H h, inout M m, inout standard_metadata_t sm) {
    state start { p.extract<s_t>(h.s); transition select(h.s.t) { 1: a; default: b; } }
    state a { p.extract(h.u.next.one); p.extract(h.u.next.two); transition accept; }
    state b { p.extract(h.u[0].two); transition accept; }
}
control V(inout H h, inout M m) { apply { } }
control Low(in bit<8> v, out bit<4> r) { apply { r = v[3:0]; } }
control I(inout H h, inout M m, inout standard_metadata_t sm) {
    apply {
        M local = { 3, 4 };
        sm.egress_spec = (bit<9>) (local.x + local.y);
        Low.apply(h.s.t, h.s.t[7:4]);  // an out argument into a slice
        if (h.u[0].one.isValid() && h.u[1].two.isValid()) { h.u[0].one.v = 0xaa; }
        if (h.u[0].two.isValid()) { h.u[0].one.setValid(); h.u[0].one.v = 0xbb; }
    }
}
control E(inout H h, inout M m, inout standard_metadata_t sm) { apply { } }
control C(inout H h, inout M m) { apply { } }
control D(packet_out p, in H h) { apply { p.emit(h); } }
V1Switch(P(), V(), I(), E(), C(), D()) main;
"""


def test_union_stacks_struct_lists_slice_out_arguments_and_type_arguments() -> None:
    """A stack of unions (`next`, constant indices); `M local = {3, 4}` (fields in declaration
    order: port 7); an out argument copied back into t[7:4] (t = 0x21: low nibble 1 -> 0x11);
    `extract<s_t>(h.s)`; setValid on one union member invalidates the other (02 1234 -> bb)."""
    script = (
        "packet 0 01 05 1234 ff\nexpect 7 11 aa 1234 ff $\n"
        "packet 0 02 1234 ff\nexpect 7 22 bb ff $\n"
    )
    if not SUITE.is_dir():
        dataset("p4c-stf")
    result = run_stf(UNIONS, str(SUITE / "tests" / "u.p4"), script, "u.stf", (SUITE / "include",))
    assert result.status == "pass", result.reason


def test_functions_returning_headers_and_checksum_with_payload() -> None:
    """A function returning a header: its `return {...}` makes it valid with those fields,
    no return leaves it invalid. update_checksum_with_payload covers the fields and then
    the bytes after the parsed headers: 0x0102 + 0x0304 + 0x0500 = 0x0906 -> 0xf6f9."""
    program = (
        PROGRAM.replace(
            "control V(",
            "h_t pick(in bit<8> a) { if (a == 1) { return { 8w1, 8w2 }; } return { a, 8w9 }; }\n"
            "control V(",
        )
        .replace("struct H {", "header c_t { bit<16> c; }\nstruct H {")
        .replace("struct H { h_t h; }", "struct H { h_t h; c_t c; }")
        .replace("p.extract(h.h); transition accept;", "p.extract(h.h); p.extract(h.c); transition accept;")
        .replace("apply { t.apply(); }", "apply { h.h = pick(h.h.a); sm.egress_spec = 1; }")
        .replace(
            "control C(inout H h, inout M m) { apply { } }",
            "control C(inout H h, inout M m) {\n"
            "    apply { update_checksum_with_payload(true, { h.h.a, h.h.b }, h.c.c,\n"
            "                                         HashAlgorithm.csum16); }\n"
            "}",
        )
        .replace("p.emit(h.h);", "p.emit(h.h); p.emit(h.c);")
    )
    script = (
        "packet 0 01 00 0000 0304 05\nexpect 1 01 02 f6f9 0304 05 $\n"
        "packet 0 07 00 0000\nexpect 1 07 09 f8f6 $\n"  # {7, 9}, no payload: ~0x0709
    )
    if not SUITE.is_dir():
        dataset("p4c-stf")
    result = run_stf(program, str(SUITE / "tests" / "f.p4"), script, "f.stf", (SUITE / "include",))
    assert result.status == "pass", result.reason


def test_psa_meter_rates_from_stf() -> None:
    """meter_set_rates m 0 0.000001:1 0.000002:2: 1 packet/s committed (burst 1), 2 peak
    (burst 2). Three packets at one instant: green (both buckets paid), yellow (peak only),
    red. An unconfigured cell marks green; meter_array_set_rates configures every cell."""
    program = PSA_PROGRAM.replace(
        "apply { t.apply(); h.h.port = (bit<32>) istd.ingress_port; }",
        "Meter<bit<8>>(4, PSA_MeterType_t.PACKETS) meter0;\n"
        "    apply {\n"
        "        PSA_MeterColor_t c = meter0.execute(h.h.path);\n"
        "        if (c == PSA_MeterColor_t.GREEN) { h.h.a = 1; }\n"
        "        if (c == PSA_MeterColor_t.YELLOW) { h.h.a = 2; }\n"
        "        if (c == PSA_MeterColor_t.RED) { h.h.a = 3; }\n"
        "        send_to_port(ostd, 1);\n"
        "    }",
    )
    packet = "packet 0 00 {cell} 0000 00000000\n"
    out = "expect 1 {colour} 01 0000 00000000 $\n"
    script = (
        "meter_set_rates I.meter0 0 0.000001:1 0.000002:2\n"
        + "".join(packet.format(cell="00") + out.format(colour=c) for c in ("01", "02", "03"))
        + packet.format(cell="01") + out.format(colour="01")  # cell 1: not configured
        + "meter_array_set_rates I.meter0 0.000001:1 0.000001:1\nmeter_get_rates I.meter0 1\n"
        + packet.format(cell="01") + out.format(colour="01")
        + packet.format(cell="01") + out.format(colour="03")  # both buckets of 1 spent
    )
    if not SUITE.is_dir():
        dataset("p4c-stf")
    result = run_stf(program, str(SUITE / "tests" / "psa.p4"), script, "psa.stf", (SUITE / "include",))
    assert result.status == "pass", result.reason


def test_function_like_macros_expand_nested_calls() -> None:
    """`ADD(SQ(K), f(1, 2))`: K first, then ADD with its two top-level arguments, then SQ."""
    text = (
        "#define SQ(x) ((x) * (x))\n#define ADD(a, b) (a + b)\n#define K 3\n"
        "const bit<8> c = ADD(SQ(K), f(1, 2));\n#undef SQ\nSQ(2)\n"
    )
    lines = preprocess(text, "m.p4").text.splitlines()
    assert lines[3] == "const bit<8> c = (((3) * (3)) + f(1, 2));"
    assert lines[5] == "SQ(2)"  # undefined again
    with pytest.raises(P4Error, match=r"^m\.p4:2: a macro expands the line past"):
        preprocess("#define G(x) G(x) G(x) G(x) G(x)\nG(1)\n", "m.p4")
    with pytest.raises(P4Error, match=r"^m\.p4:1: #define F\(\.\.\.\): parameters are distinct names"):
        preprocess("#define F(a, a) a\n", "m.p4")


@settings(max_examples=80, deadline=None)
@given(st.text(alphabet="#define FGx(),ab \n1+", max_size=120))
def test_fuzzed_macros_expand_or_fail_in_one_line(text: str) -> None:
    try:
        preprocess(text, "f.p4")
    except P4Error as err:
        assert str(err).startswith("f.p4") and "\n" not in str(err)


def test_stf_range_entries() -> None:
    """`add t PRIORITY key:LOW->HIGH ...` (p4c's STF range form): bounds inclusive, the
    higher STF priority first where two overlap; an empty range is refused."""
    program = PROGRAM.replace("h.h.a : ternary;", "h.h.a : range;")
    entries = "add t 2 h.a:0x10->0x1f set(v:1, port:2)\nadd t 1 h.a:0x18->0x28 set(v:2, port:3)\n"
    script = entries + (
        "packet 0 18 00\nexpect 2 18 01 $\n"
        "packet 0 28 00\nexpect 3 28 02 $\n"
        "packet 0 29 00\n"  # no entry: dropped
    )
    if not SUITE.is_dir():
        dataset("p4c-stf")
    where = (str(SUITE / "tests" / "r.p4"), "r.stf", (SUITE / "include",))
    result = run_stf(program, where[0], script, *where[1:])
    assert result.status == "pass", result.reason
    with pytest.raises(NicError, match=r"^r\.stf:1: key h\.h\.a: range 5->4 is empty"):
        run_stf(program, where[0], "add t 1 h.a:5->4 set(v:1, port:2)\n", *where[1:])


def test_control_variables_initialise_in_declaration_order() -> None:
    """A control's `bit<8> v = x.a;` reads the control-local header x declared before it
    (invalid there, so its fields read 0), then the apply block runs."""
    program = PROGRAM.replace(
        "    apply { t.apply(); }",
        "    h_t x;\n    bit<8> v = x.a + 5;\n    apply { h.h.b = v; sm.egress_spec = 1; }",
    )
    if not SUITE.is_dir():
        dataset("p4c-stf")
    result = run_stf(program, str(SUITE / "tests" / "o.p4"), "packet 0 01 02\nexpect 1 01 05 $\n", "o.stf",
                     (SUITE / "include",))
    assert result.status == "pass", result.reason


def test_sub_control_takes_a_struct_with_a_header_stack() -> None:
    """`c.apply(hdr)` with a stack inside hdr: push_front(1) in the sub-control moves s[0]
    to s[1] and leaves s[0] invalid, as the caller then sees."""
    program = (
        PROGRAM.replace("struct H { h_t h; }", "struct H { h_t h; h_t[2] s; }")
        .replace("p.extract(h.h); transition", "p.extract(h.h); p.extract(h.s.next); transition")
        .replace(
            "control I(",
            "control Push(inout H hh) {\n"
            "    apply { hh.s.push_front(1); hh.h.b = (bit<8>) (hh.s.lastIndex ++ 4w0); }\n"
            "}\n"
            "control I(",
        )
        .replace("    apply { t.apply(); }", "    Push() p;\n    apply { p.apply(h); sm.egress_spec = 1; }")
        .replace("p.emit(h.h);", "p.emit(h.h); p.emit(h.s);")
    )
    if not SUITE.is_dir():
        dataset("p4c-stf")
    script = "packet 0 01 00 aa bb\nexpect 1 01 10 aa bb $\n"  # lastIndex 1 -> 0x10; s[1] = aa bb
    result = run_stf(program, str(SUITE / "tests" / "k.p4"), script, "k.stf", (SUITE / "include",))
    assert result.status == "pass", result.reason


def test_struct_inside_a_header_is_laid_out_field_by_field() -> None:
    """header h_t { bit<8> a; pair_t p; } with pair_t { bit<4> x; int<4> y; }: p.x and p.y
    sit in the second byte; p.y is signed (0xf is -1 < 0)."""
    program = PROGRAM.replace(
        "header h_t { bit<8> a; bit<8> b; }",
        "struct pair_t { bit<4> x; int<4> y; }\nheader h_t { bit<8> a; pair_t p; }",
    ).replace(
        "apply { t.apply(); }", "apply { if (h.h.p.y < 0) { h.h.a = (bit<8>) h.h.p.x; } sm.egress_spec = 1; }"
    )
    program = program.replace("action set(bit<8> v, bit<9> port) { h.h.b = v; sm.egress_spec = port; }", "")
    program = program.replace("actions = { set; drop; }", "actions = { drop; }")
    if not SUITE.is_dir():
        dataset("p4c-stf")
    script = "packet 0 00 3f\nexpect 1 03 3f $\npacket 0 00 37\nexpect 1 00 37 $\n"
    result = run_stf(program, str(SUITE / "tests" / "n.p4"), script, "n.stf", (SUITE / "include",))
    assert result.status == "pass", result.reason


def test_extract_into_nothing_skips_a_header() -> None:
    """`p.extract<h_t>(_)` moves past two bytes, which are then not in the packet."""
    program = PROGRAM.replace("{ p.extract(h.h);", "{ p.extract<h_t>(_); p.extract(h.h);")
    if not SUITE.is_dir():
        dataset("p4c-stf")
    script = "add t h.a:1 set(v:9, port:2)\npacket 0 aa bb 01 02 03\nexpect 2 01 09 03 $\n"
    result = run_stf(program, str(SUITE / "tests" / "x.p4"), script, "x.stf", (SUITE / "include",))
    assert result.status == "pass", result.reason


def test_psa_internet_checksum_in_a_deparser() -> None:
    """A deparser's statements run before its emits: add({a, path}) is the word 0x0101,
    subtract({0, 1}) adds ~0x0001 = 0xfffe: 0x100ff folds to 0x0100, get() = ~0x0100 =
    0xfeff. An emit inside an `if` of a deparser is refused."""
    program = PSA_PROGRAM.replace(
        "    Common() c2;\n    apply { c2.apply(p, h); }",
        "    Common() c2;\n    InternetChecksum() ck;\n"
        "    apply { ck.clear(); ck.add({h.h.a, h.h.path}); ck.subtract({8w0, 8w1});\n"
        "            h.h.instance = ck.get(); c2.apply(p, h); }",
    )
    if not SUITE.is_dir():
        dataset("p4c-stf")
    where = (str(SUITE / "tests" / "psa.p4"), "psa.stf", (SUITE / "include",))
    script = "add t h.a:1 fwd(port:5)\npacket 2 01 00 0000 00000000\nexpect 5 01 01 feff 00000002 $\n"
    result = run_stf(program, where[0], script, *where[1:])
    assert result.status == "pass", result.reason
    nested = program.replace("c2.apply(p, h); }", "if (h.h.a == 1) { p.emit(h.h); } }")
    refused = run_stf(nested, where[0], script, *where[1:])
    assert refused.status == "unsupported"
    assert "an emit (or apply) inside a deparser's if" in (refused.reason or "")


def test_for_loops_with_break_and_continue_per_packet() -> None:
    """Sum the odd i in 1..a, leaving at i == 6: a = 3 gives 1 + 3 = 4; a = 10 gives
    1 + 3 + 5 = 9; a = 0 runs no round. A loop past 4,096 rounds is refused by line."""
    loop = (
        "apply { bit<8> s = 0;\n"
        "        for (bit<8> i = 1; i <= h.h.a; i = i + 1) {\n"
        "            if (i == 6) { break; }\n"
        "            if ((i & 1) == 0) { continue; }\n"
        "            s = s + i;\n"
        "        }\n"
        "        h.h.b = s; sm.egress_spec = 1; }"
    )
    program = PROGRAM.replace("apply { t.apply(); }", loop)
    if not SUITE.is_dir():
        dataset("p4c-stf")
    where = (str(SUITE / "tests" / "l.p4"), "l.stf", (SUITE / "include",))
    cases = (("03", "04"), ("0a", "09"), ("00", "00"))
    script = "".join(f"packet 0 {a} 00\nexpect 1 {a} {s} $\n" for a, s in cases)
    result = run_stf(program, where[0], script, *where[1:])
    assert result.status == "pass", result.reason
    endless = PROGRAM.replace(
        "apply { t.apply(); }", "apply { for (bit<16> i = 0; i < 0xffff; i = i + 1) { h.h.b = 1; } }"
    )
    refused = run_stf(endless, where[0], "packet 0 01 00\n", *where[1:])
    assert refused.status == "unsupported"
    assert refused.reason == f"{where[0]}:14:13: a for loop ran more than 4,096 rounds"
    stray = PROGRAM.replace("apply { t.apply(); }", "apply { break; }")
    assert "break outside a for loop" in (run_stf(stray, where[0], "", *where[1:]).reason or "")


def test_v1model_top_level_register_is_shared_by_the_controls() -> None:
    """`register<bit<8>>(4) seen;` outside any control: ingress counts into cell 0, egress
    reads the count it left (packet 1: b = 0, a = 1; packet 2: b = 1, a = 2)."""
    program = (
        PROGRAM.replace("control V(", "register<bit<8>>(4) seen;\ncontrol V(")
        .replace(
            "apply { t.apply(); }",
            "apply { bit<8> x; seen.read(x, 0); seen.write(0, x + 1); h.h.b = x; sm.egress_spec = 1; }",
        )
        .replace(
            "control E(inout H h, inout M m, inout standard_metadata_t sm) { apply { } }",
            "control E(inout H h, inout M m, inout standard_metadata_t sm) {\n"
            "    apply { bit<8> y; seen.read(y, 0); h.h.a = y; }\n}",
        )
    )
    if not SUITE.is_dir():
        dataset("p4c-stf")
    script = "packet 0 07 07\nexpect 1 01 00 $\npacket 0 07 07\nexpect 1 02 01 $\n"
    result = run_stf(program, str(SUITE / "tests" / "g.p4"), script, "g.stf", (SUITE / "include",))
    assert result.status == "pass", result.reason


def test_stack_element_with_a_run_time_index_as_an_inout_argument() -> None:
    """bump(h.a, s[h.a].b): the element is the one h.a named when the call began (s[0]),
    though bump sets h.a to 1 and h.a is copied back first."""
    program = (
        PROGRAM.replace("struct H { h_t h; }", "struct H { h_t h; h_t[2] s; }")
        .replace("p.extract(h.h); transition", "p.extract(h.h); p.extract(h.s.next);\n"
                 " p.extract(h.s.next); transition")
        .replace(
            "control V(",
            "bit<8> bump(inout bit<8> i, inout bit<8> v) { v = v + 1; i = 1; return 0; }\ncontrol V(",
        )
        .replace("apply { t.apply(); }", "apply { bit<8> r = bump(h.h.a, h.s[h.h.a].b);\n"
                 " sm.egress_spec = 1; }")
        .replace("p.emit(h.h);", "p.emit(h.h); p.emit(h.s);")
    )
    if not SUITE.is_dir():
        dataset("p4c-stf")
    script = "packet 0 00 00 10 20 30 40\nexpect 1 01 00 10 21 30 40 $\n"
    result = run_stf(program, str(SUITE / "tests" / "b.p4"), script, "b.stf", (SUITE / "include",))
    assert result.status == "pass", result.reason


def _signed8(value: int) -> int:
    return value - 256 if value >= 128 else value


@settings(max_examples=15, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 255), st.integers(0, 255), st.integers(0, 9)), max_size=9))
def test_signed_int_matches_twos_complement_reference(rows: list[tuple[int, int, int]]) -> None:
    """int<8> a + b, a |-| b, a >> k and a < b against Python's integers, packet by packet."""
    program = PROGRAM.replace(
        "header h_t { bit<8> a; bit<8> b; }",
        "header h_t { int<8> a; int<8> b; bit<8> k; int<8> sum; int<8> sat; int<8> shr; bit<8> lt; }",
    ).replace(
        "apply { t.apply(); }",
        "apply { h.h.sum = h.h.a + h.h.b; h.h.sat = h.h.a |-| h.h.b; h.h.shr = h.h.a >> h.h.k;\n"
        "        h.h.lt = (bit<8>)(bit<1>)(h.h.a < h.h.b); sm.egress_spec = 1; }",
    ).replace("table t { key = { h.h.a : ternary; } actions = { set; drop; } default_action = drop; }", "")
    program = program.replace("action set(bit<8> v, bit<9> port) { h.h.b = v; sm.egress_spec = port; }", "")
    lines = []  # (a, b, k) packets and what the reference computes
    for a, b, k in rows:
        sa, sb = _signed8(a), _signed8(b)
        out = (sa + sb) & 0xFF, max(-128, min(127, sa - sb)) & 0xFF, (sa >> k) & 0xFF, int(sa < sb)
        lines.append(f"packet 0 {a:02x} {b:02x} {k:02x} 00 00 00 00\n")
        lines.append(f"expect 1 {a:02x} {b:02x} {k:02x} " + " ".join(f"{v:02x}" for v in out) + " $\n")
    if not SUITE.is_dir():
        dataset("p4c-stf")
    result = run_stf(program, str(SUITE / "tests" / "p.p4"), "".join(lines), "p.stf", (SUITE / "include",))
    assert result.status == "pass", result.reason


def test_compound_assignment_evaluates_a_run_time_index_once() -> None:
    """`h.s[post(h.h.a) & 1].b += 1` twice: each statement calls post once (the element it
    reads is the one it writes), so s[0].b and s[1].b each gain 1 and a ends at 2. Read
    twice, the index would move between the read and the write."""
    program = (
        PROGRAM.replace("struct H { h_t h; }", "struct H { h_t h; h_t[2] s; }")
        .replace("p.extract(h.h); transition",
                 "p.extract(h.h); p.extract(h.s.next); p.extract(h.s.next); transition")
        .replace("control V(", "bit<8> post(inout bit<8> x) { bit<8> was = x; x += 1; return was; }\n"
                 "control V(")
        .replace("apply { t.apply(); }",
                 "apply { h.s[post(h.h.a) & 1].b += 1; h.s[post(h.h.a) & 1].b |+|= 0xf0;\n"
                 "        sm.egress_spec = 1; }")
        .replace("p.emit(h.h);", "p.emit(h.h); p.emit(h.s);")
    )
    if not SUITE.is_dir():
        dataset("p4c-stf")
    # s[0].b: 0x20 + 1 = 0x21; s[1].b: 0x40 |+| 0xf0 saturates at 0xff
    script = "packet 0 00 00 10 20 30 40\nexpect 1 02 00 10 21 30 ff $\n"
    result = run_stf(program, str(SUITE / "tests" / "o.p4"), script, "o.stf", (SUITE / "include",))
    assert result.status == "pass", result.reason


def test_an_include_found_nowhere_is_named_with_the_folders_searched(tmp_path: Path) -> None:
    """v1model.p4 missing: named, with every folder searched, not a later 'no parser named'.
    A <core.p4> found nowhere is named when the program then misses a declaration."""
    program = tmp_path / "prog.p4"
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(P4Error) as info:
        parse_program(PROGRAM, str(program), (empty,))
    message = str(info.value)
    searched = f"(looked in {empty}, {tmp_path})"
    assert message.startswith(f"{program}:2: #include <v1model.p4> is not found {searched}")
    assert "\n" not in message
    bare = "#include <core.p4>\nV1Switch(P(), V(), I(), E(), C(), D()) main;\n"
    with pytest.raises(P4Error, match=r"#include <core\.p4> is not found \(looked in .*\); the built-in"):
        parse_program(bare, str(program), (empty,))
