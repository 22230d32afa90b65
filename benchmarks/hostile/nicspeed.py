"""Hostile captures for `cloudtwin nic run` reading pcap records as columns (issue 22).

Each case is one `cloudtwin nic run` call; `benchmarks/bad_inputs.py` runs them (ok or clean
is a pass): records cut short in their header or their data, announced lengths past the
longest packet or past 4 GiB, the 64 MiB limit filled with 4 million empty records or with
one packet per record of every length, both byte orders and resolutions, the latest
timestamp a pcap can hold, and an output written over the input; and, since the capture
is read a 4 MiB block at a time, records across a block's end: the longest packet, a
record cut short or announcing too much there, and a capture of many blocks (96 MiB,
past the old 64 MiB limit) whose memory must stay the block's.

    python benchmarks/bad_inputs.py --only nicspeed
"""

from __future__ import annotations

import struct
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
P4 = REPO / "examples" / "p4"
MAX_PACKET_BYTES = 65_535 + 128
PCAP_BYTES = 64 << 20
BLOCK_BYTES = 4 << 20


def capture(packets: list[bytes], order: str = "<", nanos: bool = True, seconds: int = 0) -> bytes:
    magic = 0xA1B23C4D if nanos else 0xA1B2C3D4
    parts = [struct.pack(order + "IHHiIII", magic, 2, 4, 0, 0, 262144, 1)]
    for packet in packets:
        parts += [
            struct.pack(order + "IIII", seconds, 999_999_999 if nanos else 999_999, len(packet), len(packet))
        ]
        parts.append(packet)
    return b"".join(parts)


def _files(tmp: Path) -> dict[str, bytes]:
    frame = (P4 / "host-frames.pcap").read_bytes()[24 + 16 :][:114]
    good = capture([frame] * 3)
    lengths = [i % 1600 for i in range(60_000)]
    return {
        "header cut short": good + b"\x00" * 15,
        "data cut short": good[:-1],
        "only the file header": good[:24],
        "announced 4 GiB": good + struct.pack("<IIII", 0, 0, 0xFFFFFFFF, 0xFFFFFFFF),
        "announced one past the longest": good + struct.pack("<IIII", 0, 0, MAX_PACKET_BYTES + 1, 0),
        "too long then cut short": good + struct.pack("<IIII", 0, 0, MAX_PACKET_BYTES + 1, 0) + b"\x00" * 9,
        "big-endian microseconds": capture([frame] * 3, ">", nanos=False),
        "latest timestamp": capture([frame] * 3, seconds=0xFFFFFFFF),
        "four million empty records": capture([b""] * ((PCAP_BYTES - 24) // 16)),
        "the longest packet": capture([b"\x00" * MAX_PACKET_BYTES, frame]),
        "every length to 1600": capture([bytes(n) for n in lengths]),
        "original length differs": good[:24] + struct.pack("<IIII", 0, 0, 114, 9000) + frame,
        **_across_blocks(frame),
    }


def _across_blocks(frame: bytes) -> dict[str, bytes]:
    """Captures whose records cross the end of `nic run`'s 4 MiB read blocks."""
    fill = capture([frame] * ((BLOCK_BYTES - 24) // (16 + len(frame)) - 1))  # ends a little before 4 MiB
    longest = capture([b"\x00" * MAX_PACKET_BYTES])[24:]
    return {
        "the longest packet across a block": fill + longest + capture([frame])[24:],
        "cut short across a block": fill + longest[:-1],
        "too long across a block": fill + struct.pack("<IIII", 0, 0, MAX_PACKET_BYTES + 1, 0) + bytes(1 << 7),
        "96 MiB of frames": capture([frame] * ((96 << 20) // (16 + len(frame)))),
    }


def cases(tmp: Path) -> list[tuple[str, list[str], bytes | None]]:
    gateway = [str(P4 / "vxlan_gateway.p4"), "--entries", str(P4 / "vxlan_gateway.entries.yaml")]
    out: list[tuple[str, list[str], bytes | None]] = []
    for name, data in _files(tmp).items():
        path = tmp / f"nicspeed-{name.replace(' ', '-')}.pcap"
        path.write_bytes(data)
        for origin in ("host", "network"):
            argv = ["nic", "run", *gateway, "--pcap", str(path), "--from", origin, "--json"]
            out.append(
                (f"nicspeed {name} from {origin}", [*argv, "--out", str(tmp / "nicspeed-out.pcap")], None)
            )
    same = tmp / "nicspeed-in-and-out.pcap"
    same.write_bytes(_files(tmp)["big-endian microseconds"])
    argv = ["nic", "run", *gateway, "--pcap", str(same), "--from", "host", "--out", str(same)]
    out.append(("nicspeed output over its own input", argv, None))
    return out
