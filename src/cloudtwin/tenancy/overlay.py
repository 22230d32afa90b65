"""Tenants' VXLAN overlays and the header a switch hashes: outer for a tenant, inner otherwise.

A tenant's VMs use their own address space (tenants may overlap); the hypervisor's
VTEP puts a VXLAN header around each packet whose UDP source port is a hash of the
inner headers (as Linux's vxlan driver does), in the range 49152-65535. ECMP in the
underlay sees only the outer header, so the inner entropy reaches it only through
that one source port.
"""

from __future__ import annotations

import numpy as np

from cloudtwin.flows import ROCE_UDP_PORT, Flows
from cloudtwin.hashing import hash_fields
from cloudtwin.headers import Headers
from cloudtwin.topology.topology import Topology

__all__ = ["UDP", "VXLAN_UDP_PORT", "Headers", "outer_headers", "underlay_ip"]

VXLAN_UDP_PORT = 4789
UDP = 17
_UNDERLAY_BASE = 10 << 24
_OVERLAY_BASE = (192 << 24) | (168 << 16)
_EPHEMERAL_LOW = 49152
_EPHEMERAL_SPAN = 16384


def underlay_ip(nic_nodes: np.ndarray) -> np.ndarray:
    """The underlay (VTEP) address of a NIC node: 10.0.0.0 plus its id."""
    return (_UNDERLAY_BASE + np.asarray(nic_nodes, dtype=np.int64)).astype(np.uint64)


def overlay_ip(topology: Topology, nic_nodes: np.ndarray, vni: np.ndarray) -> np.ndarray:
    """A VM address inside its tenant's space: 192.168.0.0 plus the host number.

    Tenants reuse the same addresses; only the VNI keeps them apart.
    """
    host = np.asarray(nic_nodes) // topology.nics_per_host
    return (_OVERLAY_BASE + host).astype(np.uint64) + (np.asarray(vni) * 0).astype(np.uint64)


def outer_headers(topology: Topology, flows: Flows, vnis: np.ndarray) -> Headers:
    """What switches hash for each flow; `vnis[t]` is tenant t's VNI (0: no overlay)."""
    n = len(flows)
    src_ip = underlay_ip(flows.src)
    dst_ip = underlay_ip(flows.dst)
    proto = np.full(n, UDP, dtype=np.uint64)
    sport = flows.sport.astype(np.uint64)
    dport = np.full(n, ROCE_UDP_PORT, dtype=np.uint64)
    vni = (
        np.where(flows.tenant >= 0, np.asarray(vnis)[np.maximum(flows.tenant, 0)], 0)
        if n
        else np.zeros(0)
    )
    overlay = vni > 0
    if overlay.any():
        inner = [
            overlay_ip(topology, flows.src[overlay], vni[overlay]),
            overlay_ip(topology, flows.dst[overlay], vni[overlay]),
            proto[overlay],
            sport[overlay],
            dport[overlay],
        ]
        entropy = hash_fields(inner, seed=0) % np.uint64(_EPHEMERAL_SPAN)
        sport = sport.copy()
        dport = dport.copy()
        sport[overlay] = np.uint64(_EPHEMERAL_LOW) + entropy
        dport[overlay] = VXLAN_UDP_PORT
    return Headers(src_ip, dst_ip, proto, sport, dport)
