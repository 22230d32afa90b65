// Janus-style VXLAN overlay gateway for cloudtwin's PNA-like NIC.
//
// From the host (HOST_TO_NET): a frame from tenant virtual function `input_port` is
// encapsulated in VXLAN with the VNI that function belongs to, towards the VTEP that
// holds the inner destination MAC in that VNI. A function without a VNI, or a
// destination unknown in its VNI, is dropped: a tenant cannot put an unencapsulated
// frame on the underlay.
// From the network (NET_TO_HOST): VXLAN to this NIC's VTEP address is decapsulated
// and handed to the function that owns the VNI and the inner destination MAC; all
// other traffic is dropped (the control plane is not reachable through the datapath).
#include <core.p4>
#include <pna.p4>

const bit<16> ETHERTYPE_IPV4 = 0x0800;
const bit<16> ETHERTYPE_IPV6 = 0x86dd;
const bit<16> ETHERTYPE_VLAN = 0x8100;
const bit<8>  PROTO_UDP = 17;
const bit<16> VXLAN_PORT = 4789;

typedef bit<48> mac_t;
typedef bit<32> ip4_t;

header ethernet_t { mac_t dst; mac_t src; bit<16> etherType; }
header vlan_t { bit<3> pcp; bit<1> dei; bit<12> vid; bit<16> etherType; }
header ipv4_t {
    bit<4> version; bit<4> ihl; bit<8> diffserv; bit<16> totalLen;
    bit<16> identification; bit<3> flags; bit<13> fragOffset;
    bit<8> ttl; bit<8> protocol; bit<16> hdrChecksum; ip4_t src; ip4_t dst;
}
header udp_t { bit<16> srcPort; bit<16> dstPort; bit<16> length; bit<16> checksum; }
header vxlan_t { bit<8> flags; bit<24> reserved; bit<24> vni; bit<8> reserved2; }

struct headers_t {
    ethernet_t outer_ethernet;
    ipv4_t     outer_ipv4;
    udp_t      outer_udp;
    vxlan_t    vxlan;
    ethernet_t ethernet;
    vlan_t     vlan;
}

struct metadata_t { bit<24> vni; bit<32> vtep; mac_t vtep_mac; }

parser MainParserImpl(packet_in pkt, out headers_t hdr, inout metadata_t meta,
                      in pna_main_parser_input_metadata_t istd) {
    state start {
        transition select(istd.direction) {
            HOST_TO_NET: parse_inner;
            default: parse_outer;
        }
    }
    state parse_outer {
        pkt.extract(hdr.outer_ethernet);
        transition select(hdr.outer_ethernet.etherType) {
            ETHERTYPE_IPV4: parse_outer_ipv4;
            default: accept;
        }
    }
    state parse_outer_ipv4 {
        pkt.extract(hdr.outer_ipv4);
        transition select(hdr.outer_ipv4.ihl, hdr.outer_ipv4.protocol) {
            (5, PROTO_UDP): parse_outer_udp;
            default: accept;
        }
    }
    state parse_outer_udp {
        pkt.extract(hdr.outer_udp);
        transition select(hdr.outer_udp.dstPort) {
            VXLAN_PORT: parse_vxlan;
            default: accept;
        }
    }
    state parse_vxlan {
        pkt.extract(hdr.vxlan);
        transition parse_inner;
    }
    state parse_inner {
        pkt.extract(hdr.ethernet);
        transition select(hdr.ethernet.etherType) {
            ETHERTYPE_VLAN: parse_vlan;
            default: accept;
        }
    }
    state parse_vlan {
        pkt.extract(hdr.vlan);
        transition accept;
    }
}

control MainControlImpl(inout headers_t hdr, inout metadata_t meta,
                        in pna_main_input_metadata_t istd,
                        inout pna_main_output_metadata_t ostd) {
    Counter<bit<64>, bit<24>>(4096, PNA_CounterType_t.PACKETS_AND_BYTES) vni_packets;
    bit<32> local_vtep = 0;
    mac_t local_mac = 0;

    action drop() { drop_packet(); }

    action set_vni(bit<24> vni, bit<32> local_ip, bit<48> nic_mac) {
        meta.vni = vni;
        local_vtep = local_ip;
        local_mac = nic_mac;
    }

    action set_vtep(bit<32> remote_ip, bit<48> next_hop_mac) {
        meta.vtep = remote_ip;
        meta.vtep_mac = next_hop_mac;
    }

    action deliver(bit<32> function) { send_to_port(function); }

    // A tenant's virtual function -> its VNI and this NIC's VTEP address.
    table vf_vni {
        key = { istd.input_port: exact; }
        actions = { set_vni; drop; }
        const default_action = drop();
        size = 4096;
    }
    // (VNI, inner destination MAC) -> the remote VTEP that holds it.
    table vtep {
        key = { meta.vni: exact; hdr.ethernet.dst: exact; }
        actions = { set_vtep; drop; }
        const default_action = drop();
        size = 65536;
    }
    // Decapsulation: (VNI, inner destination MAC) -> the local function.
    table vni_function {
        key = { hdr.vxlan.vni: exact; hdr.ethernet.dst: exact; }
        actions = { deliver; drop; }
        const default_action = drop();
        size = 65536;
    }
    // Which underlay addresses are this NIC's own VTEPs.
    table local_vteps {
        key = { hdr.outer_ipv4.dst: exact; }
        actions = { NoAction; drop; }
        const default_action = drop();
        size = 64;
    }

    apply {
        if (istd.direction == HOST_TO_NET) {
            if (vf_vni.apply().hit) {
                if (vtep.apply().hit) {
                    hdr.outer_ethernet.setValid();
                    hdr.outer_ethernet.dst = meta.vtep_mac;
                    hdr.outer_ethernet.src = local_mac;
                    hdr.outer_ethernet.etherType = ETHERTYPE_IPV4;
                    hdr.outer_ipv4.setValid();
                    hdr.outer_ipv4.version = 4;
                    hdr.outer_ipv4.ihl = 5;
                    hdr.outer_ipv4.diffserv = 0;
                    hdr.outer_ipv4.totalLen = istd.packet_length + 36;
                    hdr.outer_ipv4.identification = 0;
                    hdr.outer_ipv4.flags = 2;
                    hdr.outer_ipv4.fragOffset = 0;
                    hdr.outer_ipv4.ttl = 64;
                    hdr.outer_ipv4.protocol = PROTO_UDP;
                    hdr.outer_ipv4.src = local_vtep;
                    hdr.outer_ipv4.dst = meta.vtep;
                    hdr.outer_ipv4.hdrChecksum = 0;
                    hdr.outer_ipv4.hdrChecksum = checksum16(
                        hdr.outer_ipv4.version, hdr.outer_ipv4.ihl, hdr.outer_ipv4.diffserv,
                        hdr.outer_ipv4.totalLen, hdr.outer_ipv4.identification,
                        hdr.outer_ipv4.flags, hdr.outer_ipv4.fragOffset, hdr.outer_ipv4.ttl,
                        hdr.outer_ipv4.protocol, hdr.outer_ipv4.src, hdr.outer_ipv4.dst);
                    hdr.outer_udp.setValid();
                    // Source port: entropy from the inner addresses, in 49152..65535 (RFC 7348).
                    hdr.outer_udp.srcPort = 0xC000 | (bit<16>) (checksum16(hdr.ethernet.dst, hdr.ethernet.src))[13:0];
                    hdr.outer_udp.dstPort = VXLAN_PORT;
                    hdr.outer_udp.length = istd.packet_length + 16;
                    hdr.outer_udp.checksum = 0;
                    hdr.vxlan.setValid();
                    hdr.vxlan.flags = 0x08;
                    hdr.vxlan.reserved = 0;
                    hdr.vxlan.vni = meta.vni;
                    hdr.vxlan.reserved2 = 0;
                    vni_packets.count((bit<64>) meta.vni[11:0]);
                    send_to_port(0);
                }
            }
        } else {
            if (hdr.vxlan.isValid()) {
                if (local_vteps.apply().hit) {
                    if (vni_function.apply().hit) {
                        vni_packets.count((bit<64>) hdr.vxlan.vni[11:0]);
                        hdr.outer_ethernet.setInvalid();
                        hdr.outer_ipv4.setInvalid();
                        hdr.outer_udp.setInvalid();
                        hdr.vxlan.setInvalid();
                    }
                }
            } else {
                drop_packet();
            }
        }
    }
}

control MainDeparserImpl(packet_out pkt, in headers_t hdr, in metadata_t meta,
                         in pna_main_output_metadata_t ostd) {
    apply {
        pkt.emit(hdr.outer_ethernet);
        pkt.emit(hdr.outer_ipv4);
        pkt.emit(hdr.outer_udp);
        pkt.emit(hdr.vxlan);
        pkt.emit(hdr.ethernet);
        pkt.emit(hdr.vlan);
    }
}

PNA_NIC(MainParserImpl(), MainControlImpl(), MainDeparserImpl()) main;
