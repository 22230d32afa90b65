"""Builds the example captures in this folder with scapy (deterministic; rerun to refresh).

python examples/p4/make_captures.py
"""

from pathlib import Path

from scapy.all import IP, TCP, UDP, VXLAN, Ether, Raw, wrpcap

HERE = Path(__file__).parent


def host_frames() -> list:
    """Frames tenant A's function sends: to its remote VM, and to an unknown MAC."""
    frames = []
    for i in range(8):
        dst = "0a:00:00:00:10:02" if i % 4 else "0a:00:00:00:99:99"
        frame = Ether(src="0a:00:00:00:10:01", dst=dst) / IP(src="192.168.1.1", dst="192.168.1.2")
        frames.append(frame / UDP(sport=4000 + i, dport=80) / Raw(bytes(64 + 16 * i)))
    for i, frame in enumerate(frames):
        frame.time = 1_700_000_000 + i / 1000
    return frames


def network_frames() -> list:
    """VXLAN from the remote VTEP: for tenant A, for tenant B, and with a VNI nobody owns."""
    frames = []
    for i, (vni, dst) in enumerate(
        [(1001, "0a:00:00:00:10:01"), (2002, "0a:00:00:00:20:01"), (3003, "0a:00:00:00:10:01")]
    ):
        inner = Ether(src="0a:00:00:00:10:02", dst=dst) / IP() / TCP(dport=443) / Raw(b"payload")
        outer = Ether(dst="02:00:0a:00:00:01", src="02:00:0a:00:00:fe") / IP(src="10.0.0.2", dst="10.0.0.1")
        frame = outer / UDP(sport=49152 + i, dport=4789) / VXLAN(vni=vni) / inner
        frame.time = 1_700_000_000 + i / 1000
        frames.append(frame)
    return frames


def tenant_traffic() -> list:
    """Function 1's 1500-byte packets, 1 ms apart, towards the security groups and meter."""
    frames = []
    for i in range(12):
        dst, l4 = ("10.1.2.3", TCP(dport=443)) if i % 3 else ("10.1.9.9", UDP(dport=53))
        frame = Ether(src="0a:00:00:00:10:01", dst="02:00:0a:00:00:fe") / IP(src="192.168.1.1", dst=dst) / l4
        frame = frame / Raw(bytes(1500 - 14 - len(frame.payload)))
        frame.time = 1_700_000_000 + i / 10_000
        frames.append(frame)
    return frames


if __name__ == "__main__":
    wrpcap(str(HERE / "host-frames.pcap"), host_frames())
    wrpcap(str(HERE / "network-frames.pcap"), network_frames())
    wrpcap(str(HERE / "tenant-traffic.pcap"), tenant_traffic())
