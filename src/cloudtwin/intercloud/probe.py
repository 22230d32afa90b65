"""`python -m cloudtwin.intercloud.probe IP...`: ping addresses for real from the current namespace.

Sends ICMP echo requests on a raw socket (needs CAP_NET_RAW), waits for the replies, and
prints one JSON object: each address that answered, with the TTL of the answer and the
MAC address the kernel's neighbour table holds for it (which endpoint answered, when two
networks share addresses).
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import socket
import struct
import subprocess
import sys
import time

__all__ = ["checksum", "echo_request", "main", "probe"]

WAIT_S = 1.5
TRIES = 3


def checksum(data: bytes) -> int:
    """The Internet checksum (RFC 1071)."""
    if len(data) % 2:
        data += b"\0"
    total = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


def echo_request(ident: int, sequence: int) -> bytes:
    """An ICMP echo request with a small payload."""
    payload = b"cloudtwin-probe"
    header = struct.pack("!BBHHH", 8, 0, 0, ident, sequence)
    return struct.pack("!BBHHH", 8, 0, checksum(header + payload), ident, sequence) + payload


def probe(addresses: list[str], wait_s: float = WAIT_S) -> dict[str, int]:
    """The addresses that answered an echo request within `wait_s`, with the TTL of the answer."""
    ident = os.getpid() & 0xFFFF
    answered: dict[str, int] = {}
    with socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP) as sock:
        deadline = time.monotonic() + wait_s
        for attempt in range(TRIES):
            for address in addresses:
                if address not in answered:
                    with contextlib.suppress(OSError):  # no route: it does not answer
                        sock.sendto(echo_request(ident, attempt), (address, 0))
            until = min(deadline, time.monotonic() + wait_s / TRIES)
            while (left := until - time.monotonic()) > 0:
                ready, _, _ = select.select([sock], [], [], left)
                if not ready:
                    break
                packet, (source, _) = sock.recvfrom(2048)
                ihl = (packet[0] & 0x0F) * 4
                kind, _, _, got_ident, _ = struct.unpack("!BBHHH", packet[ihl : ihl + 8])
                if kind == 0 and got_ident == ident:
                    answered[source] = packet[8]
            if set(answered) >= set(addresses):
                break
    return answered


def main() -> None:
    """Probe argv's addresses; print {address: [ttl, mac]} for those that answered."""
    answered = probe(sys.argv[1:])
    neighbours = subprocess.run(["ip", "-j", "neigh", "show"], capture_output=True, text=True).stdout
    macs = {n["dst"]: n.get("lladdr") for n in json.loads(neighbours or "[]")}
    print(json.dumps({address: [ttl, macs.get(address)] for address, ttl in sorted(answered.items())}))


if __name__ == "__main__":
    main()
