"""Tenants, their VXLAN overlays, and the outer-header entropy ECMP sees."""

from cloudtwin.tenancy.overlay import (
    UDP,
    VXLAN_UDP_PORT,
    Headers,
    outer_headers,
    overlay_ip,
    underlay_ip,
)

__all__ = ["UDP", "VXLAN_UDP_PORT", "Headers", "outer_headers", "overlay_ip", "underlay_ip"]
