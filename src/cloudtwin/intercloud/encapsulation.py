"""What a tunnel between gateways costs: header bytes, inner MTU, MSS clamping and goodput.

Byte counts are for an IPv4 underlay. An encapsulation that carries IP packets only
(WireGuard, IPsec ESP in tunnel mode) carries an `l2-stretch` network's Ethernet frames
inside a VXLAN header of its own, so the two overheads add up.

>>> overhead_bytes("vxlan")
50
>>> inner_mtu("vxlan", 1500)
1450
>>> round(goodput_fraction("vxlan", 1500), 4)
0.9234
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypedDict

__all__ = [
    "CostJson",
    "ETHERNET_HEADER_BYTES",
    "IPV4_HEADER_BYTES",
    "TCP_HEADER_BYTES",
    "TCP_TIMESTAMP_BYTES",
    "EncapsulationCost",
    "carries_ethernet",
    "encapsulation_cost",
    "goodput_fraction",
    "inner_mtu",
    "overhead_bytes",
]

ETHERNET_HEADER_BYTES = 14
IPV4_HEADER_BYTES = 20
UDP_HEADER_BYTES = 8
TCP_HEADER_BYTES = 20
#: Linux sends the TCP timestamp option (10 bytes padded to 12) on every segment.
TCP_TIMESTAMP_BYTES = 12
VXLAN_HEADER_BYTES = 8
GENEVE_BASE_BYTES = 8
#: WireGuard transport data message: type, receiver index, counter; then the Poly1305 tag.
WIREGUARD_HEADER_BYTES = 16
WIREGUARD_TAG_BYTES = 16
#: ESP header (SPI, sequence number), AES-GCM IV, pad length + next header, ICV.
ESP_HEADER_BYTES = 8
ESP_IV_BYTES = 8
ESP_TRAILER_BYTES = 2
ESP_ICV_BYTES = 16

_ETHERNET = {"vxlan": True, "geneve": True, "wireguard": False, "ipsec-esp": False}


def carries_ethernet(encapsulation: str) -> bool:
    """Whether the encapsulation carries Ethernet frames (VXLAN, Geneve) or IP packets only."""
    return _ETHERNET[encapsulation]


def _vxlan_like(option_bytes: int) -> int:
    return IPV4_HEADER_BYTES + UDP_HEADER_BYTES + VXLAN_HEADER_BYTES + option_bytes + ETHERNET_HEADER_BYTES


def overhead_bytes(encapsulation: str, layer2: bool = False, geneve_option_bytes: int = 0) -> int:
    """Bytes added to each inner IP packet between the gateways (worst-case padding included).

    The count runs from the outer IP header to the inner IP header: it is what the
    underlay MTU has to hold beyond the inner packet. `layer2` adds the inner Ethernet
    header carried for an `l2-stretch` network over an IP-only encapsulation.
    """
    if encapsulation == "vxlan":
        return _vxlan_like(0)
    if encapsulation == "geneve":
        return _vxlan_like(geneve_option_bytes)
    if encapsulation == "wireguard":
        # Plaintext is padded to 16 bytes: up to 15 bytes of padding.
        crypto = IPV4_HEADER_BYTES + UDP_HEADER_BYTES + WIREGUARD_HEADER_BYTES + WIREGUARD_TAG_BYTES + 15
    elif encapsulation == "ipsec-esp":
        # Payload plus trailer is padded to 4 bytes: up to 3 bytes of padding.
        crypto = IPV4_HEADER_BYTES + ESP_HEADER_BYTES + ESP_IV_BYTES + ESP_TRAILER_BYTES + 3 + ESP_ICV_BYTES
    else:
        raise ValueError(f"unknown encapsulation {encapsulation!r}")
    return crypto + (_vxlan_like(0) if layer2 else 0)


def inner_mtu(encapsulation: str, underlay_mtu: int, layer2: bool = False) -> int:
    """The largest inner IP packet that crosses the tunnel without fragmentation."""
    return underlay_mtu - overhead_bytes(encapsulation, layer2)


def goodput_fraction(
    encapsulation: str | None,
    underlay_mtu: int,
    layer2: bool = False,
    tcp_option_bytes: int = TCP_TIMESTAMP_BYTES,
    framing_bytes: int = ETHERNET_HEADER_BYTES,
) -> float:
    """payload / (payload + overhead) for full-sized TCP segments with the MSS clamped to the tunnel.

    `framing_bytes` is the underlay's per-frame cost that a rate limit counts (the
    Ethernet header for a Linux qdisc; 38 with preamble, FCS and gap on a physical wire).
    `encapsulation=None` is the same flow without a tunnel.
    """
    tunnel = 0 if encapsulation is None else overhead_bytes(encapsulation, layer2)
    mtu = underlay_mtu - tunnel
    payload = mtu - IPV4_HEADER_BYTES - TCP_HEADER_BYTES - tcp_option_bytes
    if payload <= 0:
        raise ValueError(f"an underlay MTU of {underlay_mtu} leaves no room for TCP payload")
    return payload / (underlay_mtu + framing_bytes)


class CostJson(TypedDict):
    """An encapsulation cost as JSON (`federate plan --json`)."""

    encapsulation: str
    overhead_bytes: int
    inner_mtu: int
    mss_bytes: int
    goodput_fraction: float
    mss_clamping: bool
    flags: list[str]


@dataclass(frozen=True)
class EncapsulationCost:
    """The cost of one federated network's tunnel, as reported by the planner."""

    encapsulation: str
    overhead_bytes: int
    inner_mtu: int
    mss_bytes: int
    goodput_fraction: float
    clamped: bool

    def flags(self, endpoint_mtu: int = 1500) -> list[str]:
        """Warnings: a full-sized packet that does not fit the tunnel without clamping."""
        if self.clamped or endpoint_mtu <= self.inner_mtu:
            return []
        return [
            f"packets of {endpoint_mtu} bytes exceed the tunnel's inner MTU of {self.inner_mtu} "
            f"without MSS clamping: TCP black-holes or fragments them"
        ]

    def to_json(self) -> CostJson:
        """A JSON-ready summary."""
        return {
            "encapsulation": self.encapsulation,
            "overhead_bytes": self.overhead_bytes,
            "inner_mtu": self.inner_mtu,
            "mss_bytes": self.mss_bytes,
            "goodput_fraction": round(self.goodput_fraction, 6),
            "mss_clamping": self.clamped,
            "flags": self.flags(),
        }


def encapsulation_cost(
    encapsulation: str, underlay_mtu: int, layer2: bool, clamped: bool
) -> EncapsulationCost:
    """The tunnel cost of a network of the given layer over `encapsulation`."""
    mtu = inner_mtu(encapsulation, underlay_mtu, layer2)
    mss = mtu - IPV4_HEADER_BYTES - TCP_HEADER_BYTES
    return EncapsulationCost(
        encapsulation=encapsulation,
        overhead_bytes=overhead_bytes(encapsulation, layer2),
        inner_mtu=mtu,
        mss_bytes=mss,
        goodput_fraction=goodput_fraction(encapsulation, underlay_mtu, layer2),
        clamped=clamped,
    )
