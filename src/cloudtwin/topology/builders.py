"""Builders of Clos fabrics: leaf-spine, rail-optimized leaf-spine and the 3-tier k-ary fat-tree."""

from __future__ import annotations

import numpy as np

from cloudtwin.errors import TopologyError
from cloudtwin.scenario.model import (
    FatTreeFabric,
    Hosts,
    LeafSpineFabric,
    RailOptimizedFabric,
    Scenario,
)
from cloudtwin.topology.estimate import check_memory
from cloudtwin.topology.topology import NodeKind, Topology

__all__ = ["build_topology", "fat_tree", "leaf_spine", "rail_optimized"]

MAX_NODES = 2_000_000


class _Cables:
    """Accumulates full-duplex cables as pairs of directed links."""

    def __init__(self) -> None:
        self.src: list[np.ndarray] = []
        self.dst: list[np.ndarray] = []
        self.rate: list[np.ndarray] = []

    def add(self, a: np.ndarray, b: np.ndarray, rate_bps: float) -> None:
        a, b = np.broadcast_arrays(np.asarray(a, dtype=np.int64), np.asarray(b, dtype=np.int64))
        self.src += [a.ravel(), b.ravel()]
        self.dst += [b.ravel(), a.ravel()]
        self.rate += [np.full(a.size, rate_bps)] * 2


def _topology(
    kind: str,
    kinds: list[tuple[NodeKind, int]],
    host_nics: np.ndarray,
    cables: _Cables,
    latency_s: float,
    nic_rate_bps: float,
    oversubscription: float,
) -> Topology:
    node_kind = np.concatenate([np.full(n, k, dtype=np.int8) for k, n in kinds])
    node_index = np.concatenate([np.arange(n) for _, n in kinds])
    src = np.concatenate(cables.src)
    return Topology(
        kind=kind,
        node_kind=node_kind,
        node_index=node_index,
        host_nics=host_nics,
        link_src=src,
        link_dst=np.concatenate(cables.dst),
        capacity_bps=np.concatenate(cables.rate),
        latency_s=np.full(src.size, latency_s),
        nic_rate_bps=nic_rate_bps,
        oversubscription=oversubscription,
    )


def _check_size(nodes: int, what: str) -> None:
    if nodes > MAX_NODES:
        raise TopologyError(f"{what}: {nodes:,} nodes is more than the {MAX_NODES:,} supported")


def leaf_spine(fabric: LeafSpineFabric, hosts: Hosts) -> Topology:
    """Every leaf to every spine; all NICs of a host on the host's leaf."""
    nics = hosts.nics
    n_nics = fabric.leaves * fabric.hosts_per_leaf * nics
    _check_size(n_nics + fabric.leaves + fabric.spines, "fabric")
    nic_rate = min(fabric.host_link, hosts.nic_rate or fabric.host_link)
    leaf0, spine0 = n_nics, n_nics + fabric.leaves
    cables = _Cables()
    nic_nodes = np.arange(n_nics)
    cables.add(nic_nodes, leaf0 + nic_nodes // (fabric.hosts_per_leaf * nics), nic_rate)
    _add_leaf_spine(cables, fabric, leaf0, spine0)
    host_nics = nic_nodes.reshape(-1, nics)
    down = fabric.hosts_per_leaf * nics * nic_rate
    return _topology(
        "leaf-spine",
        [(NodeKind.NIC, n_nics), (NodeKind.LEAF, fabric.leaves), (NodeKind.SPINE, fabric.spines)],
        host_nics,
        cables,
        fabric.latency,
        nic_rate,
        down / _up_capacity(fabric),
    )


def _up_capacity(fabric: LeafSpineFabric) -> float:
    return fabric.spines * fabric.uplinks_per_spine * fabric.uplink


def _add_leaf_spine(cables: _Cables, fabric: LeafSpineFabric, leaf0: int, spine0: int) -> None:
    leaf, spine = np.meshgrid(np.arange(fabric.leaves), np.arange(fabric.spines), indexing="ij")
    for _ in range(fabric.uplinks_per_spine):
        cables.add(leaf0 + leaf, spine0 + spine, fabric.uplink)


def rail_optimized(fabric: RailOptimizedFabric, hosts: Hosts) -> Topology:
    """Groups of `hosts_per_leaf` hosts; NIC i of each host in group g sits on leaf g*nics + i."""
    nics = hosts.nics
    if fabric.leaves % nics:
        raise TopologyError(
            f"fabric.leaves: rail-optimized needs a multiple of hosts.nics ({nics}), "
            f"got {fabric.leaves}"
        )
    groups = fabric.leaves // nics
    n_hosts = groups * fabric.hosts_per_leaf
    n_nics = n_hosts * nics
    _check_size(n_nics + fabric.leaves + fabric.spines, "fabric")
    nic_rate = min(fabric.host_link, hosts.nic_rate or fabric.host_link)
    leaf0, spine0 = n_nics, n_nics + fabric.leaves
    host_nics = np.arange(n_nics).reshape(n_hosts, nics)
    host = np.arange(n_hosts)[:, None]
    rail = np.arange(nics)[None, :]
    leaf_of = (host // fabric.hosts_per_leaf) * nics + rail
    cables = _Cables()
    cables.add(host_nics, leaf0 + leaf_of, nic_rate)
    _add_leaf_spine(cables, fabric, leaf0, spine0)
    return _topology(
        "rail-optimized",
        [(NodeKind.NIC, n_nics), (NodeKind.LEAF, fabric.leaves), (NodeKind.SPINE, fabric.spines)],
        host_nics,
        cables,
        fabric.latency,
        nic_rate,
        fabric.hosts_per_leaf * nic_rate / _up_capacity(fabric),
    )


def fat_tree(fabric: FatTreeFabric, hosts: Hosts) -> Topology:
    """k pods of k/2 edge and k/2 aggregation switches and (k/2)^2 cores; k/2 NIC ports per edge."""
    k, nics = fabric.k, hosts.nics
    half = k // 2
    if half % nics:
        raise TopologyError(
            f"hosts.nics: a k={k} fat-tree edge has {half} host ports, "
            f"which {nics} NICs per host do not divide"
        )
    n_edges = k * half
    n_nics = n_edges * half
    n_cores = half * half
    _check_size(n_nics + 2 * n_edges + n_cores, "fabric.k")
    nic_rate = min(fabric.host_link, hosts.nic_rate or fabric.host_link)
    edge0 = n_nics
    agg0 = edge0 + n_edges
    core0 = agg0 + n_edges
    cables = _Cables()
    nic_nodes = np.arange(n_nics)
    cables.add(nic_nodes, edge0 + nic_nodes // half, nic_rate)
    pod, e, a = np.meshgrid(np.arange(k), np.arange(half), np.arange(half), indexing="ij")
    cables.add(edge0 + pod * half + e, agg0 + pod * half + a, fabric.link)
    pod, a, c = np.meshgrid(np.arange(k), np.arange(half), np.arange(half), indexing="ij")
    cables.add(agg0 + pod * half + a, core0 + a * half + c, fabric.link)
    return _topology(
        "fat-tree",
        [
            (NodeKind.NIC, n_nics),
            (NodeKind.LEAF, n_edges),
            (NodeKind.AGG, n_edges),
            (NodeKind.CORE, n_cores),
        ],
        nic_nodes.reshape(-1, nics),
        cables,
        fabric.latency,
        nic_rate,
        nic_rate / fabric.link,
    )


def build_topology(scenario: Scenario) -> Topology:
    """The topology a scenario describes; LimitError first if it would not fit in memory."""
    check_memory(scenario)
    fabric = scenario.fabric
    if isinstance(fabric, FatTreeFabric):
        return fat_tree(fabric, scenario.hosts)
    if isinstance(fabric, RailOptimizedFabric):
        return rail_optimized(fabric, scenario.hosts)
    return leaf_spine(fabric, scenario.hosts)
