"""Benchmark of PNA's data-plane state: the connection-tracking example of the PNA
specification on connection patterns, and a stateless example for comparison.

    python benchmarks/pna_examples.py

Each case is one batch through `Datapath.process` (rounds included), timed in CPU seconds
(`time.process_time`), with the 1-minute load average beside it. The programs are read
from `../shared/datasets/pna-examples/`.
"""

from __future__ import annotations

import os
import struct
import time
from pathlib import Path

import numpy as np

from cloudtwin.p4.batch import PacketBatch
from cloudtwin.p4.datapath import Datapath
from cloudtwin.p4.frontend import parse_program
from cloudtwin.p4.run import install

EXAMPLES = Path(__file__).resolve().parents[2] / "shared" / "datasets" / "pna-examples" / "examples"
ETH = bytes.fromhex("020000000002020000000001") + b"\x08\x00"


def load(name: str) -> Datapath:
    path = EXAMPLES / name
    return Datapath(parse_program(path.read_text(), str(path), here=path.parent))


def tcp(flow: int, flags: int) -> bytes:
    """A TCP packet of connection `flow` from the host (10.0.x.y:1000+ to 192.0.2.9:80)."""
    source, destination = bytes([10, 0, flow >> 8 & 255, flow & 255]), bytes([192, 0, 2, 9])
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 40, 0, 0, 64, 6, 0, source, destination)
    return ETH + ip + struct.pack("!HHIIBBHHH", 1000 + flow % 50_000, 80, 0, 0, 0x50, flags, 0, 0, 0)


def measure(label: str, datapath: Datapath, packets: list[bytes], port: int) -> None:
    times = np.arange(len(packets), dtype=np.uint64) * 1000  # a packet a microsecond
    batch = PacketBatch.from_packets(packets, int(port != 0), port, times)
    began = time.process_time()
    datapath.process(batch)
    cpu = time.process_time() - began
    rate = len(packets) / cpu if cpu else float("inf")
    load = os.getloadavg()[0]
    print(f"{label}: {len(packets):,} packets, {cpu:.2f} CPU s, {rate:,.0f} per CPU s (load {load:.1f})")


def main() -> None:
    tracking = "pna-example-tcp-connection-tracking.p4"
    cases = {
        "3 connections, 20,000 packets after their SYNs": [
            tcp(i % 3, 0x02 if i < 3 else 0x10) for i in range(20_000)
        ],
        "20,000 new connections (table full after 1,024)": [tcp(i, 0x02) for i in range(20_000)],
        "2,000 SYN then ACK pairs (each ACK ends a round)": [
            tcp(i // 2, 0x02 if i % 2 == 0 else 0x10) for i in range(4_000)
        ],
    }
    for label, packets in cases.items():
        measure(f"{tracking} {label}", load(tracking), packets, 1)
    l2 = load("pna-demo-L2-one-table.p4")
    entry = {
        "match": {"hdr.eth.dstAddr": "02:00:00:00:00:02"},
        "action": "L2_send_to_port",
        "params": {"port_id": 3},
    }
    install(l2, {"tables": {"L2_fwd": [entry]}})
    measure("pna-demo-L2-one-table.p4 (no data-plane state: one pass)", l2, [ETH + bytes(50)] * 32_768, 0)


if __name__ == "__main__":
    main()
