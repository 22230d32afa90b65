"""Hostile input for `cloudtwin nic stf` (issue 22): malformed STF lines, scripts and
programs that would loop, nest, include themselves or grow without bound.

Every case must end ok (exit 0 or 1: the test ran) or clean (one line, exit 2).

    python benchmarks/bad_inputs.py --only p4stf
"""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SUITE = REPO.parent / "shared" / "datasets" / "p4c-stf"

PROGRAM = """#include <core.p4>
#include <v1model.p4>
header h_t { bit<8> a; bit<8> b; }
struct H { h_t h; h_t[2] s; }
struct M { }
parser P(packet_in p, out H h, inout M m, inout standard_metadata_t sm) {
    state start { p.extract(h.h); transition select(h.h.a) { 1: loop; 2: stack; default: accept; } }
    state loop { transition loop; }
    state stack { p.extract(h.s.next); transition stack; }
}
control V(inout H h, inout M m) { apply { } }
control I(inout H h, inout M m, inout standard_metadata_t sm) {
    action set(bit<8> v, bit<9> port) { h.h.b = v; sm.egress_spec = port; }
    table t { key = { h.h.a : ternary; } actions = { set; } default_action = set(0, 1); }
    apply { t.apply(); }
}
control E(inout H h, inout M m, inout standard_metadata_t sm) { apply { } }
control C(inout H h, inout M m) { apply { } }
control D(packet_out p, in H h) { apply { p.emit(h.h); } }
V1Switch(P(), V(), I(), E(), C(), D()) main;
"""

VARBIT = PROGRAM.replace(
    "struct H { h_t h; h_t[2] s; }",
    "header v_t { bit<8> n; varbit<65536> v; }\nstruct H { h_t h; h_t[2] s; v_t v; }",
).replace("p.extract(h.h);", "p.extract(h.h); p.extract(h.v, 32w0xfffffff8);")
"""A varbit length far past the field and the packet: HeaderTooShort, nothing read."""

PSA_RECIRCULATE = """#include <core.p4>
#include <bmv2/psa.p4>
header h_t { bit<8> a; bit<8> b; }
struct H { h_t h; }
struct M { }
struct E { }
parser IP(packet_in p, out H h, inout M m, in psa_ingress_parser_input_metadata_t i, in E a, in E b) {
    state start { p.extract(h.h); transition accept; }
}
control I(inout H h, inout M m, in psa_ingress_input_metadata_t i, inout psa_ingress_output_metadata_t o) {
    apply { send_to_port(o, PSA_PORT_RECIRCULATE); }
}
parser EP(packet_in p, out H h, inout M m, in psa_egress_parser_input_metadata_t i, in E a, in E b, in E c) {
    state start { p.extract(h.h); transition accept; }
}
control Eg(inout H h, inout M m, in psa_egress_input_metadata_t i, inout psa_egress_output_metadata_t o) {
    apply { }
}
control ID(packet_out p, out E a, out E b, out E c, inout H h, in M m, in psa_ingress_output_metadata_t o) {
    apply { p.emit(h.h); }
}
control ED(packet_out p, out E a, out E b, inout H h, in M m, in psa_egress_output_metadata_t o,
           in psa_egress_deparser_input_metadata_t d) {
    apply { p.emit(h.h); }
}
IngressPipeline(IP(), I(), ID()) ip;
EgressPipeline(EP(), Eg(), ED()) ep;
PSA_Switch(ip, PacketReplicationEngine(), ep, BufferingQueueingEngine()) main;
"""
"""A PSA program whose every packet asks to recirculate (refused, never looped)."""

BAD_LINES = {
    "bad hex digit": "packet 0 0g\n",
    "odd hex digits": "packet 0 abc\n",
    "dollar on a packet": "packet 0 ab$\n",
    "unknown command": "frobnicate 1 2\n",
    "key without value": "add t h.h.a set(v:1, port:1)\n",
    "action without parens": "add t h.h.a:1 set\n",
    "param without value": "add t h.h.a:1 set(v, port:1)\n",
    "port too large": "packet 4294967296 00\n",
    "packet over 64 KiB": "packet 0 " + "00" * 70_000 + "\n",
    "entry does not fit": "add t h.h.a:1 set(v:1, port:512)\n",
    "key too wide": "add t h.h.a:0x1ff set(v:1, port:1)\n",
    "unknown table": "add nope h.h.a:1 set(v:1, port:1)\n",
    "unknown action": "add t h.h.a:1 launch()\n",
    "unknown key": "add t h.h.zz:1 set(v:1, port:1)\n",
    "missing params": "add t h.h.a:1 set(v:1)\n",
    "group without node": "mc_mgrp_create 1\nmc_node_associate 1 5\n",
    "counter check malformed": "check_counter c[1] == 2\n",
    "unsupported command": "register_read r 1\npacket 0 01 00\n",
    "NUL bytes": "packet 0 00\x00\x00\n",
}

PROGRAMS = {
    "includes itself": '#include "self.p4"\n',
    "function-like macro": "#define F(x) x\n",
    "macro bomb": "#define G(x) G(x) G(x) G(x) G(x)\nG(1)\n",
    "#if garbage": "#if __import__\n#endif\n",
    "#if without #endif": "#ifdef X\n",
    "recursive function": PROGRAM.replace(
        "control V(", "bit<8> f(in bit<8> x) { return f(x); }\ncontrol V("
    ).replace("apply { t.apply(); }", "apply { h.h.b = f(h.h.a); }"),
    "unknown package": PROGRAM.replace("V1Switch(", "PSA_Switch("),
    "include /dev/zero": '#include "/dev/zero"\n',
    "annotation that changes meaning": PROGRAM.replace("table t {", "@priority(3) table t {"),
    "deep #if nesting": "#ifdef A\n" * 2000 + "#endif\n" * 2000,
    "division by zero at run time": PROGRAM.replace(
        "apply { t.apply(); }", "apply { t.apply(); h.h.b = h.h.a / h.h.b; }"
    ),
    "signed shift by 255": PROGRAM.replace(
        "apply { t.apply(); }", "apply { t.apply(); h.h.b = (bit<8>) ((int<8>) h.h.a >> h.h.a); }"
    ),
    "PSA recirculation": PSA_RECIRCULATE,
    "endless for loop": PROGRAM.replace(
        "apply { t.apply(); }", "apply { for (bit<32> i = 0; i < 0xffffffff; i = i + 0) { h.h.b = 1; } }"
    ),
    "PSA unknown pipeline": PSA_RECIRCULATE.replace("PSA_Switch(ip,", "PSA_Switch(nope,"),
}


def _write(tmp: Path, name: str, text: str) -> str:
    path = tmp / "p4stf" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return str(path)


def cases(tmp: Path) -> list[tuple[str, list[str], bytes | None]]:
    include = str(SUITE / "include")
    program = _write(tmp, "prog.p4", PROGRAM)
    out: list[tuple[str, list[str], bytes | None]] = []
    for label, script in BAD_LINES.items():
        stf = _write(tmp, f"{label.replace(' ', '_')}.stf", script)
        out.append((f"nic stf {label}", ["nic", "stf", program, stf, "-I", include], None))
    # a parser loop and a stack overflow end the parse (ParserTimeout, StackOutOfBounds) and
    # the packets go on with the error in standard_metadata, as in simple_switch
    fine = _write(
        tmp,
        "fine.stf",
        "packet 0 01 00\npacket 0 02 00 00 00\npacket 0 03 00\n"
        "expect 1 01 00 $\nexpect 1 02 00 $\nexpect 1 03 00 $\n",
    )
    out.append(
        (
            "nic stf parser loop and stack overflow (bounded)",
            ["nic", "stf", program, fine, "-I", include],
            None,
        )
    )
    many = _write(tmp, "many.stf", "packet 0 03 00\n" * 100_000 + "expect 1 03 00\n" * 100_000)
    out.append(("nic stf 10^5 packets", ["nic", "stf", program, many, "-I", include, "--json"], None))
    for label, text in PROGRAMS.items():
        bad = _write(tmp, "self.p4" if label == "includes itself" else f"{label.replace(' ', '_')}.p4", text)
        out.append((f"nic stf program {label}", ["nic", "stf", bad, fine, "-I", include], None))
    varbit = _write(tmp, "varbit.p4", VARBIT)
    whole = _write(tmp, "varbit.stf", "packet 0 01 00\nexpect 1 01 00 $\n")  # the packet as it came
    out.append(("nic stf varbit length past the packet", ["nic", "stf", varbit, whole, "-I", include], None))
    out.append(("nic stf stf is /dev/zero", ["nic", "stf", program, "/dev/zero", "-I", include], None))
    out.append(("nic stf missing program", ["nic", "stf", str(tmp / "nope.p4"), fine], None))
    out.append(
        ("nic stf include dir missing", ["nic", "stf", program, fine, "-I", str(tmp / "nowhere")], None)
    )
    return out
