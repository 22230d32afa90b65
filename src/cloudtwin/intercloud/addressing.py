"""Address modes of a federated network and their rules.

- `l2-stretch`: one subnet across the sites; each site keeps its own VNI and the gateways
  map it to the network's federated VNI; two endpoints with the same address are refused.
- `l3-routed`: each site's prefix is routed to the others; prefixes must not overlap.
- `global-nat`: prefixes may overlap; each site's segment gets a block of global addresses
  (one per endpoint) and the active gateway translates between local and global.
"""

from __future__ import annotations

import ipaddress

import numpy as np

from cloudtwin.errors import FederationError
from cloudtwin.scenario.federation import ADDRESS_MODES, FederationScenario

__all__ = ["EPHEMERAL_PORTS", "allocate_global", "check_mode_rules", "nat_port_usage"]

L2, L3, NAT = (ADDRESS_MODES.index(m) for m in ("l2-stretch", "l3-routed", "global-nat"))

EPHEMERAL_PORTS = 65535 - 1024 + 1
"""Source ports one global address offers a gateway's translation table (1024-65535)."""


def _prefix(lo: int, hi: int) -> str:
    size = hi - lo + 1
    return f"{ipaddress.IPv4Address(lo)}/{32 - size.bit_length() + 1}"


def _ip(value: int) -> str:
    return str(ipaddress.IPv4Address(int(value)))


def _sorted_within_networks(
    seg_network: np.ndarray, modes: np.ndarray, mode: int, key: np.ndarray
) -> np.ndarray:
    """Segments of networks in `mode`, sorted by (network, key)."""
    rows = np.flatnonzero((seg_network >= 0) & (modes[np.maximum(seg_network, 0)] == mode))
    return rows[np.lexsort((key[rows], seg_network[rows]))]


def _site_name(scenario: FederationScenario, seg: dict[str, np.ndarray], row: int) -> str:
    return scenario.sites[int(seg["site"][row])].name


def check_mode_rules(
    scenario: FederationScenario, seg: dict[str, np.ndarray], seg_network: np.ndarray, modes: np.ndarray
) -> None:
    """Refuse overlapping prefixes (l3-routed), split subnets and duplicate addresses (l2-stretch)."""
    if not modes.size:
        return
    rows = _sorted_within_networks(seg_network, modes, L3, seg["lo"])
    a, b = rows[:-1], rows[1:]
    clash = np.flatnonzero((seg_network[a] == seg_network[b]) & (seg["lo"][b] <= seg["hi"][a]))
    if clash.size:
        x, y = int(a[clash[0]]), int(b[clash[0]])
        raise FederationError(
            f"networks.{int(seg_network[x])}.sites",
            f"l3-routed needs unique prefixes: {_prefix(int(seg['lo'][x]), int(seg['hi'][x]))} at "
            f"{_site_name(scenario, seg, x)!r} overlaps {_prefix(int(seg['lo'][y]), int(seg['hi'][y]))} at "
            f"{_site_name(scenario, seg, y)!r}",
        )
    _check_stretch(scenario, seg, seg_network, modes)


def _check_stretch(
    scenario: FederationScenario, seg: dict[str, np.ndarray], seg_network: np.ndarray, modes: np.ndarray
) -> None:
    rows = _sorted_within_networks(seg_network, modes, L2, seg["first"])
    a, b = rows[:-1], rows[1:]
    same = seg_network[a] == seg_network[b]
    split = np.flatnonzero(same & ((seg["lo"][a] != seg["lo"][b]) | (seg["hi"][a] != seg["hi"][b])))
    if split.size:
        x, y = int(a[split[0]]), int(b[split[0]])
        raise FederationError(
            f"networks.{int(seg_network[x])}.sites",
            f"an l2-stretch network needs one subnet: {_prefix(int(seg['lo'][x]), int(seg['hi'][x]))} at "
            f"{_site_name(scenario, seg, x)!r}, {_prefix(int(seg['lo'][y]), int(seg['hi'][y]))} at "
            f"{_site_name(scenario, seg, y)!r}",
        )
    duplicate = np.flatnonzero(same & (seg["first"][b] < seg["first"][a] + seg["count"][a]))
    if duplicate.size:
        x, y = int(a[duplicate[0]]), int(b[duplicate[0]])
        raise FederationError(
            f"networks.{int(seg_network[x])}.sites",
            f"l2-stretch refuses duplicate addresses: {_ip(seg['first'][y])} is used at both "
            f"{_site_name(scenario, seg, x)!r} and {_site_name(scenario, seg, y)!r}",
        )


def allocate_global(
    scenario: FederationScenario, count: np.ndarray, seg_network: np.ndarray, modes: np.ndarray
) -> np.ndarray:
    """First global address of each global-nat segment's block (-1 elsewhere).

    A block is the smallest power of two holding one address per endpoint, aligned to its
    size, handed out from the pool in order of (network, site) as the controller does.
    """
    first = np.full(count.size, -1, dtype=np.int64)
    if not modes.size:
        return first
    rows = np.flatnonzero((seg_network >= 0) & (modes[np.maximum(seg_network, 0)] == NAT))
    rows = rows[np.argsort(seg_network[rows], kind="stable")]
    pool = ipaddress.IPv4Network(scenario.global_pool)
    _check_pool(scenario, rows, seg_network, pool)
    end = 0
    for row in rows.tolist():
        size = 1 << max(int(count[row]) - 1, 0).bit_length()
        start = -(-end // size) * size
        end = start + size
        first[row] = start
    if end > pool.num_addresses:
        raise FederationError(
            "global_pool",
            f"{pool} holds {pool.num_addresses:,} addresses, the global-nat networks need {end:,}",
        )
    first[rows] += int(pool.network_address)
    return first


def _check_pool(
    scenario: FederationScenario, rows: np.ndarray, seg_network: np.ndarray, pool: ipaddress.IPv4Network
) -> None:
    """A global-nat segment's own subnet may not overlap the global pool (its peers' addresses)."""
    index = [(i, t) for i, site in enumerate(scenario.sites) for t in site.tenants]
    for row in rows.tolist():
        site, tenant = index[row]
        if tenant.network.overlaps(pool):
            raise FederationError(
                f"networks.{int(seg_network[row])}.sites",
                f"{tenant.network} at {scenario.sites[site].name!r} overlaps the global pool {pool}",
            )


def nat_port_usage(flows_per_source: np.ndarray, addresses: int) -> tuple[int, int]:
    """(ports in use, flows refused) when `flows_per_source[i]` concurrent flows leave through
    the translation of global address i (one of `addresses`) toward one destination.

    Each global address offers `EPHEMERAL_PORTS` source ports to one destination
    address and port; flows beyond that are refused.
    """
    flows = np.asarray(flows_per_source, dtype=np.int64)
    if flows.size > addresses:
        raise FederationError("flows", f"{flows.size} sources share {addresses} global addresses")
    used = np.minimum(flows, EPHEMERAL_PORTS)
    return int(used.sum()), int((flows - used).sum())
