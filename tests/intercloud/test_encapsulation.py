"""Tunnel cost by hand: header bytes, inner MTU, MSS and goodput of each encapsulation."""

from __future__ import annotations

import pytest

from cloudtwin.intercloud.encapsulation import (
    encapsulation_cost,
    goodput_fraction,
    inner_mtu,
    overhead_bytes,
)


@pytest.mark.parametrize(
    ("encapsulation", "layer3", "layer2"),
    [
        # outer IPv4 20 + UDP 8 + VXLAN 8 + inner Ethernet 14
        ("vxlan", 50, 50),
        ("geneve", 50, 50),
        # outer IPv4 20 + UDP 8 + WireGuard header 16 + tag 16 + padding up to 15; + VXLAN's 50 for L2
        ("wireguard", 75, 125),
        # outer IPv4 20 + ESP 8 + IV 8 + trailer 2 + padding up to 3 + ICV 16; + VXLAN's 50 for L2
        ("ipsec-esp", 57, 107),
    ],
)
def test_header_bytes(encapsulation: str, layer3: int, layer2: int) -> None:
    assert overhead_bytes(encapsulation) == layer3
    assert overhead_bytes(encapsulation, layer2=True) == layer2
    assert inner_mtu(encapsulation, 1500) == 1500 - layer3


def test_goodput_and_mss() -> None:
    cost = encapsulation_cost("wireguard", 1500, layer2=False, clamped=True)
    assert cost.inner_mtu == 1425 and cost.mss_bytes == 1385
    # payload = 1425 - 20 (IP) - 20 (TCP) - 12 (timestamps); on the wire 1500 + 14 (Ethernet)
    assert cost.goodput_fraction == pytest.approx(1373 / 1514)
    assert goodput_fraction(None, 9000) == pytest.approx((9000 - 52) / 9014)
    assert cost.flags() == []


def test_a_full_sized_packet_without_clamping_is_flagged() -> None:
    cost = encapsulation_cost("vxlan", 1500, layer2=True, clamped=False)
    (flag,) = cost.flags(endpoint_mtu=1500)
    assert "1500 bytes exceed the tunnel's inner MTU of 1450" in flag
    assert cost.flags(endpoint_mtu=1450) == []
    with pytest.raises(ValueError, match="no room"):
        goodput_fraction("ipsec-esp", 100, layer2=True)
