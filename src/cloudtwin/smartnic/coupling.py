"""The NIC datapath as engine constraints: a tier that moves fewer bits per second than the
fabric offers becomes a link of that capacity on the path of every flow through it.

Software tiers (the host's datapath cores, the NIC's embedded cores) and the pipeline
each become one virtual link per host (host cores) or per NIC (embedded cores and
pipeline), shared by the flows the host sends and receives. With `basic` NICs, or
tiers at least as fast as the NIC's own line rate, nothing is added and every result
stays bit-identical.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from cloudtwin.engine.simulator import Change
from cloudtwin.errors import NicError
from cloudtwin.flows import Paths
from cloudtwin.smartnic.capacity import tier_capacity_bps, tier_latency_s
from cloudtwin.smartnic.placement import NicPlan
from cloudtwin.topology.topology import NodeKind, Topology

__all__ = ["NicCoupling", "couple_nics", "flow_hosts", "swap_changes"]


@dataclass(frozen=True, eq=False)
class NicCoupling:
    """Engine inputs with the NIC constraints added (or the same objects when none apply)."""

    capacity_bps: np.ndarray
    paths: Paths
    extra_latency_s: np.ndarray
    tier_links: int

    @property
    def changed(self) -> bool:
        return self.tier_links > 0


def flow_hosts(topology: Topology, paths: Paths) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(source host, source NIC node, destination host, destination NIC node) per flow, -1 where
    a flow does not start or end at a NIC of the fabric (NVLink segments inside a host)."""
    host_of_node = np.full(topology.node_count, -1, dtype=np.int64)
    hosts, nics = np.indices(topology.host_nics.shape)
    host_of_node[topology.host_nics.ravel()] = hosts.ravel()
    counts = np.diff(paths.indptr)
    has = counts > 0
    first = np.where(has, paths.link_ids[np.minimum(paths.indptr[:-1], paths.link_ids.size - 1)], -1)
    last = np.where(has, paths.link_ids[np.maximum(paths.indptr[1:] - 1, 0)], -1)
    src_node = _nic_end(topology, first, topology.link_src)
    dst_node = _nic_end(topology, last, topology.link_dst)
    src_host = np.where(src_node >= 0, host_of_node[np.maximum(src_node, 0)], -1)
    dst_host = np.where(dst_node >= 0, host_of_node[np.maximum(dst_node, 0)], -1)
    return src_host, src_node, dst_host, dst_node


def _nic_end(topology: Topology, link: np.ndarray, end: np.ndarray) -> np.ndarray:
    inside = (link >= 0) & (link < topology.link_count)
    node = np.where(inside, end[np.clip(link, 0, topology.link_count - 1)], -1)
    is_nic = inside & (topology.node_kind[np.maximum(node, 0)] == NodeKind.NIC)
    return np.where(is_nic, node, -1)


def couple_nics(
    topology: Topology,
    capacity_bps: np.ndarray,
    paths: Paths,
    plan: NicPlan,
) -> NicCoupling:
    """Capacities and paths with one virtual link per constraining tier (see the module doc)."""
    _check_quarantine(topology, paths, plan)
    links = _tier_links(topology, plan)
    no_latency = np.zeros(paths.flow_count)
    if not links:
        return NicCoupling(capacity_bps, paths, no_latency, 0)
    src_host, src_node, dst_host, dst_node = flow_hosts(topology, paths)
    base = capacity_bps.size
    extra_flow, extra_link, extra_latency = [], [], np.zeros(paths.flow_count)
    for i, (key, _, latency_s) in enumerate(links):
        scope, owner = key
        if scope == "host":
            through = (src_host == owner) | (dst_host == owner)
        else:
            through = (src_node == owner) | (dst_node == owner)
        flows = np.flatnonzero(through)
        extra_flow.append(flows)
        extra_link.append(np.full(flows.size, base + i, dtype=np.int64))
        extra_latency[flows] += latency_s
    capacity = np.concatenate([capacity_bps, [c for _, c, _ in links]])
    new_paths = _append(paths, np.concatenate(extra_flow), np.concatenate(extra_link))
    return NicCoupling(capacity, new_paths, extra_latency, len(links))


def _tier_links(topology: Topology, plan: NicPlan) -> list[tuple[tuple[str, int], float, float]]:
    """((scope, owner), capacity_bps, latency_s) of every tier that constrains its flows."""
    links = []
    line_rate = topology.nic_rate_bps
    for host in range(topology.host_count):
        nic = plan.nics[plan.nic_of_host[host]]
        if not nic.profile.modelled:
            continue
        nics = topology.host_nics[host]
        host_cap = tier_capacity_bps(nic, "host", plan)
        if host_cap < line_rate * nics.size:
            links.append((("host", host), host_cap, tier_latency_s(nic, "host")))
        for tier in ("nic-cores", "pipeline"):
            cap = tier_capacity_bps(nic, tier, plan)
            if cap < line_rate:
                links.extend(((tier, int(node)), cap, tier_latency_s(nic, tier)) for node in nics)
    return links


def _append(paths: Paths, flows: np.ndarray, link_ids: np.ndarray) -> Paths:
    """`paths` with entry (flows[i], link_ids[i]) appended to each flow's path (weight 1)."""
    counts = np.diff(paths.indptr)
    added = np.bincount(flows, minlength=paths.flow_count)
    indptr = np.concatenate(([0], np.cumsum(counts + added))).astype(np.int64)
    out = np.empty(int(indptr[-1]), dtype=np.int64)
    weights = np.ones(int(indptr[-1]))
    old_pos = indptr[paths.flow_of_entry] + (
        np.arange(paths.link_ids.size) - paths.indptr[paths.flow_of_entry]
    )
    out[old_pos] = paths.link_ids
    weights[old_pos] = paths.entry_weights
    order = np.argsort(flows, kind="stable")
    flows, link_ids = flows[order], link_ids[order]
    rank = np.arange(flows.size) - np.searchsorted(flows, flows)
    new_pos = indptr[flows] + counts[flows] + rank
    out[new_pos] = link_ids
    return Paths(indptr, out, None if paths.weights is None else weights)


def swap_changes(topology: Topology, capacity_bps: np.ndarray, plan: NicPlan) -> list[Change]:
    """A pipeline swap as engine changes: the host's NIC links carry nothing for the
    profile's stall, then their capacity comes back."""
    changes = []
    at_nic = topology.node_kind[topology.link_src] == NodeKind.NIC
    to_nic = topology.node_kind[topology.link_dst] == NodeKind.NIC
    for host, at_s, stall_s in plan.swaps:
        nics = topology.host_nics[host]
        links = np.flatnonzero(
            (at_nic & np.isin(topology.link_src, nics)) | (to_nic & np.isin(topology.link_dst, nics))
        )
        changes.append(Change(at_s, links, np.zeros(links.size)))
        changes.append(Change(at_s + stall_s, links, capacity_bps[links]))
    return changes


def _check_quarantine(topology: Topology, paths: Paths, plan: NicPlan) -> None:
    """NicError when a flow starts or ends at a quarantined host: its port moves nothing,
    so the flow could never finish."""
    if not plan.quarantined:
        return
    src_host, _, dst_host, _ = flow_hosts(topology, paths)
    for host, why in plan.quarantined:
        if ((src_host == host) | (dst_host == host)).any():
            raise NicError(
                f"nic.boot_faults: host{host}'s NIC failed measured boot ({why}); its port is "
                "quarantined and its flows get no bandwidth, so they can never finish"
            )
