// A per-tenant meter on the Janus pipeline: each virtual function maps to its tenant's
// meter cell (a two-rate three-colour meter, RFC 2698, in bytes); red packets are
// dropped, yellow ones leave with DSCP lowered to best effort, green ones unchanged.
#include <core.p4>
#include <pna.p4>

header ethernet_t { bit<48> dst; bit<48> src; bit<16> etherType; }
header ipv4_t {
    bit<4> version; bit<4> ihl; bit<6> dscp; bit<2> ecn; bit<16> totalLen;
    bit<16> identification; bit<3> flags; bit<13> fragOffset;
    bit<8> ttl; bit<8> protocol; bit<16> hdrChecksum; bit<32> src; bit<32> dst;
}

struct headers_t { ethernet_t ethernet; ipv4_t ipv4; }
struct metadata_t { bit<16> tenant; bit<8> color; }

parser MainParserImpl(packet_in pkt, out headers_t hdr, inout metadata_t meta,
                      in pna_main_parser_input_metadata_t istd) {
    state start {
        pkt.extract(hdr.ethernet);
        transition select(hdr.ethernet.etherType) {
            0x0800: parse_ipv4;
            default: accept;
        }
    }
    state parse_ipv4 { pkt.extract(hdr.ipv4); transition accept; }
}

control MainControlImpl(inout headers_t hdr, inout metadata_t meta,
                        in pna_main_input_metadata_t istd,
                        inout pna_main_output_metadata_t ostd) {
    Meter<bit<16>>(1024, PNA_MeterType_t.BYTES) tenant_rate;
    Counter<bit<64>, bit<16>>(1024, PNA_CounterType_t.PACKETS_AND_BYTES) red_drops;

    action set_tenant(bit<16> tenant) { meta.tenant = tenant; }
    action unknown_function() { drop_packet(); }

    table function_tenant {
        key = { istd.input_port: exact; }
        actions = { set_tenant; unknown_function; }
        const default_action = unknown_function();
        size = 4096;
    }

    apply {
        if (function_tenant.apply().hit) {
            meta.color = tenant_rate.execute(meta.tenant);
            if (meta.color == PNA_MeterColor_t.RED) {
                red_drops.count((bit<64>) meta.tenant);
                drop_packet();
            } else {
                if (meta.color == PNA_MeterColor_t.YELLOW && hdr.ipv4.isValid()) {
                    hdr.ipv4.dscp = 0;
                    hdr.ipv4.hdrChecksum = 0;
                    hdr.ipv4.hdrChecksum = checksum16(
                        hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.dscp, hdr.ipv4.ecn,
                        hdr.ipv4.totalLen, hdr.ipv4.identification, hdr.ipv4.flags,
                        hdr.ipv4.fragOffset, hdr.ipv4.ttl, hdr.ipv4.protocol,
                        hdr.ipv4.src, hdr.ipv4.dst);
                }
                send_to_port(0);
            }
        }
    }
}

control MainDeparserImpl(packet_out pkt, in headers_t hdr, in metadata_t meta,
                         in pna_main_output_metadata_t ostd) {
    apply { pkt.emit(hdr.ethernet); pkt.emit(hdr.ipv4); }
}

PNA_NIC(MainParserImpl(), MainControlImpl(), MainDeparserImpl()) main;
