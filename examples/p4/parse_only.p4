// A probe program: parses every header the Janus datapath knows (Ethernet, 802.1Q,
// IPv4, IPv6, UDP, TCP, VXLAN with its inner frame, RoCEv2 BTH) and emits them unchanged,
// back out of the port it came in on. Packets that are truncated or malformed are
// parser errors and are dropped.
#include <core.p4>
#include <pna.p4>

header ethernet_t { bit<48> dst; bit<48> src; bit<16> etherType; }
header vlan_t { bit<3> pcp; bit<1> dei; bit<12> vid; bit<16> etherType; }
header ipv4_t {
    bit<4> version; bit<4> ihl; bit<8> diffserv; bit<16> totalLen;
    bit<16> identification; bit<3> flags; bit<13> fragOffset;
    bit<8> ttl; bit<8> protocol; bit<16> hdrChecksum; bit<32> src; bit<32> dst;
}
header ipv6_t {
    bit<4> version; bit<8> trafficClass; bit<20> flowLabel; bit<16> payloadLen;
    bit<8> nextHdr; bit<8> hopLimit; bit<128> src; bit<128> dst;
}
header udp_t { bit<16> srcPort; bit<16> dstPort; bit<16> length; bit<16> checksum; }
header tcp_t {
    bit<16> srcPort; bit<16> dstPort; bit<32> seqNo; bit<32> ackNo;
    bit<4> dataOffset; bit<4> res; bit<8> flags; bit<16> window; bit<16> checksum; bit<16> urgentPtr;
}
header vxlan_t { bit<8> flags; bit<24> reserved; bit<24> vni; bit<8> reserved2; }
// InfiniBand base transport header, as RoCEv2 carries it after UDP port 4791.
header bth_t {
    bit<8> opcode; bit<1> solicited; bit<1> migReq; bit<2> padCount; bit<4> version;
    bit<16> pkey; bit<8> reserved; bit<24> destQp; bit<1> ackReq; bit<7> reserved2; bit<24> psn;
}

struct headers_t {
    ethernet_t ethernet; vlan_t vlan; ipv4_t ipv4; ipv6_t ipv6; udp_t udp; tcp_t tcp;
    vxlan_t vxlan; bth_t bth; ethernet_t inner_ethernet;
}
struct metadata_t { bit<8> l4; }

parser MainParserImpl(packet_in pkt, out headers_t hdr, inout metadata_t meta,
                      in pna_main_parser_input_metadata_t istd) {
    state start {
        pkt.extract(hdr.ethernet);
        transition select(hdr.ethernet.etherType) {
            0x8100: parse_vlan;
            0x0800: parse_ipv4;
            0x86dd: parse_ipv6;
            default: accept;
        }
    }
    state parse_vlan {
        pkt.extract(hdr.vlan);
        transition select(hdr.vlan.etherType) {
            0x0800: parse_ipv4;
            0x86dd: parse_ipv6;
            default: accept;
        }
    }
    state parse_ipv4 {
        pkt.extract(hdr.ipv4);
        meta.l4 = hdr.ipv4.protocol;
        transition select(hdr.ipv4.version, hdr.ipv4.ihl) {
            (4, 5): parse_l4;
            default: reject;
        }
    }
    state parse_ipv6 {
        pkt.extract(hdr.ipv6);
        meta.l4 = hdr.ipv6.nextHdr;
        transition select(hdr.ipv6.version) {
            6: parse_l4;
            default: reject;
        }
    }
    state parse_l4 {
        transition select(meta.l4) {
            17: parse_udp;
            6: parse_tcp;
            default: accept;
        }
    }
    state parse_udp {
        pkt.extract(hdr.udp);
        transition select(hdr.udp.dstPort) {
            4789: parse_vxlan;
            4791: parse_bth;
            default: accept;
        }
    }
    state parse_tcp { pkt.extract(hdr.tcp); transition accept; }
    state parse_vxlan {
        pkt.extract(hdr.vxlan);
        pkt.extract(hdr.inner_ethernet);
        transition accept;
    }
    state parse_bth { pkt.extract(hdr.bth); transition accept; }
}

control MainControlImpl(inout headers_t hdr, inout metadata_t meta,
                        in pna_main_input_metadata_t istd,
                        inout pna_main_output_metadata_t ostd) {
    apply { send_to_port(istd.input_port); }
}

control MainDeparserImpl(packet_out pkt, in headers_t hdr, in metadata_t meta,
                         in pna_main_output_metadata_t ostd) {
    apply {
        pkt.emit(hdr.ethernet); pkt.emit(hdr.vlan); pkt.emit(hdr.ipv4); pkt.emit(hdr.ipv6);
        pkt.emit(hdr.udp); pkt.emit(hdr.tcp); pkt.emit(hdr.vxlan); pkt.emit(hdr.bth);
        pkt.emit(hdr.inner_ethernet);
    }
}

PNA_NIC(MainParserImpl(), MainControlImpl(), MainDeparserImpl()) main;
