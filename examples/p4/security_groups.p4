// Security groups on the Janus pipeline: a stateless per-function ACL over the
// 5-tuple of IPv4 traffic leaving a tenant's virtual function. Rules are ternary with
// priorities (highest first); a function's traffic is denied unless a rule allows it.
// Allowed packets go to the network port (0); each rule counts what it matched.
#include <core.p4>
#include <pna.p4>

header ethernet_t { bit<48> dst; bit<48> src; bit<16> etherType; }
header ipv4_t {
    bit<4> version; bit<4> ihl; bit<8> diffserv; bit<16> totalLen;
    bit<16> identification; bit<3> flags; bit<13> fragOffset;
    bit<8> ttl; bit<8> protocol; bit<16> hdrChecksum; bit<32> src; bit<32> dst;
}
header ports_t { bit<16> srcPort; bit<16> dstPort; }

struct headers_t { ethernet_t ethernet; ipv4_t ipv4; ports_t ports; }
struct metadata_t { bit<16> rule; }

parser MainParserImpl(packet_in pkt, out headers_t hdr, inout metadata_t meta,
                      in pna_main_parser_input_metadata_t istd) {
    state start {
        pkt.extract(hdr.ethernet);
        transition select(hdr.ethernet.etherType) {
            0x0800: parse_ipv4;
            default: accept;
        }
    }
    state parse_ipv4 {
        pkt.extract(hdr.ipv4);
        transition select(hdr.ipv4.protocol) {
            6: parse_ports;
            17: parse_ports;
            default: accept;
        }
    }
    state parse_ports { pkt.extract(hdr.ports); transition accept; }
}

control MainControlImpl(inout headers_t hdr, inout metadata_t meta,
                        in pna_main_input_metadata_t istd,
                        inout pna_main_output_metadata_t ostd) {
    Counter<bit<64>, bit<16>>(1024, PNA_CounterType_t.PACKETS_AND_BYTES) rule_hits;

    action allow(bit<16> rule) { meta.rule = rule; send_to_port(0); }
    action deny(bit<16> rule) { meta.rule = rule; drop_packet(); }

    table security_group {
        key = {
            istd.input_port: exact;
            hdr.ipv4.dst: lpm;
            hdr.ipv4.protocol: ternary;
            hdr.ports.dstPort: ternary;
        }
        actions = { allow; deny; }
        const default_action = deny(0);
        size = 4096;
    }

    apply {
        if (hdr.ipv4.isValid() && istd.direction == HOST_TO_NET) {
            if (security_group.apply().hit) {
                rule_hits.count((bit<64>) meta.rule);
            }
        } else {
            drop_packet();
        }
    }
}

control MainDeparserImpl(packet_out pkt, in headers_t hdr, in metadata_t meta,
                         in pna_main_output_metadata_t ostd) {
    apply { pkt.emit(hdr.ethernet); pkt.emit(hdr.ipv4); pkt.emit(hdr.ports); }
}

PNA_NIC(MainParserImpl(), MainControlImpl(), MainDeparserImpl()) main;
