"""The Topology: nodes and directed links of a fabric as numpy arrays (structure of arrays)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from functools import cached_property

import numpy as np
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import shortest_path

from cloudtwin.errors import TopologyError

__all__ = ["NodeKind", "Topology"]


class NodeKind(IntEnum):
    """What a node is. NICs are the endpoints; every other node is a switch."""

    NIC = 0
    LEAF = 1
    SPINE = 2
    AGG = 3
    CORE = 4


_PREFIX = {
    NodeKind.NIC: "nic",
    NodeKind.LEAF: "leaf",
    NodeKind.SPINE: "spine",
    NodeKind.AGG: "agg",
    NodeKind.CORE: "core",
}


@dataclass(frozen=True, eq=False)
class Topology:
    """A fabric: nodes (NICs and switches) and full-duplex cables as pairs of directed links.

    Attributes
    ----------
    kind : the builder that made it (`leaf-spine`, `fat-tree`, `rail-optimized`).
    node_kind : NodeKind per node.
    node_index : index of a node among the nodes of its kind (leaf 3 is `leaf3`).
    host_nics : (hosts, nics) array of the NIC node of each host's NIC (rail).
    link_src, link_dst : endpoints of each directed link.
    capacity_bps, latency_s : per directed link.
    """

    kind: str
    node_kind: np.ndarray
    node_index: np.ndarray
    host_nics: np.ndarray
    link_src: np.ndarray
    link_dst: np.ndarray
    capacity_bps: np.ndarray
    latency_s: np.ndarray
    nic_rate_bps: float
    oversubscription: float = 1.0

    @property
    def node_count(self) -> int:
        """Number of nodes (NICs and switches)."""
        return int(self.node_kind.size)

    @property
    def link_count(self) -> int:
        """Number of directed links."""
        return int(self.link_src.size)

    @property
    def host_count(self) -> int:
        """Number of hosts."""
        return int(self.host_nics.shape[0])

    @property
    def nics_per_host(self) -> int:
        """NICs (rails) per host."""
        return int(self.host_nics.shape[1])

    @property
    def switch_count(self) -> int:
        """Number of switches."""
        return int(np.count_nonzero(self.node_kind != NodeKind.NIC))

    def node_name(self, node: int) -> str:
        """`leaf3`, `spine0`, or `host5/nic1` for a NIC."""
        kind = NodeKind(int(self.node_kind[node]))
        if kind is NodeKind.NIC:
            host, rail = divmod(int(self.node_index[node]), self.nics_per_host)
            return f"host{host}/nic{rail}"
        return f"{_PREFIX[kind]}{int(self.node_index[node])}"

    def link_name(self, link: int) -> str:
        """`leaf0->spine3` for a directed link."""
        return f"{self.node_name(int(self.link_src[link]))}->{self.node_name(int(self.link_dst[link]))}"

    def find_link(self, src: int, dst: int) -> int:
        """The first directed link from node `src` to node `dst`."""
        hits = np.flatnonzero((self.link_src == src) & (self.link_dst == dst))
        if hits.size == 0:
            raise TopologyError(f"no link from {self.node_name(src)} to {self.node_name(dst)}")
        return int(hits[0])

    @cached_property
    def out_links(self) -> np.ndarray:
        """(nodes, max out-degree) array of each node's outgoing links, padded with -1."""
        order = np.argsort(self.link_src, kind="stable")
        degree = np.bincount(self.link_src, minlength=self.node_count)
        width = int(degree.max()) if degree.size else 0
        table = np.full((self.node_count, max(width, 1)), -1, dtype=np.int64)
        starts = np.concatenate(([0], np.cumsum(degree)[:-1]))
        column = np.arange(order.size) - np.repeat(starts, degree)
        table[self.link_src[order], column] = order
        return table

    @cached_property
    def edge_of_nic(self) -> np.ndarray:
        """For each node, the switch a NIC hangs off (-1 for switches)."""
        edge = np.full(self.node_count, -1, dtype=np.int64)
        is_nic = self.node_kind[self.link_src] == NodeKind.NIC
        edge[self.link_src[is_nic]] = self.link_dst[is_nic]
        return edge

    @cached_property
    def down_link(self) -> np.ndarray:
        """For each node, the link from its edge switch down to it (-1 for switches)."""
        down = np.full(self.node_count, -1, dtype=np.int64)
        to_nic = self.node_kind[self.link_dst] == NodeKind.NIC
        down[self.link_dst[to_nic]] = np.flatnonzero(to_nic)
        return down

    @cached_property
    def edge_switches(self) -> np.ndarray:
        """The switches that have NICs attached, in node order."""
        edges = np.unique(self.edge_of_nic[self.node_kind == NodeKind.NIC])
        return edges[edges >= 0]

    @cached_property
    def edge_slot(self) -> np.ndarray:
        """For each node, its column in `hops_to_edge` (-1 if it is not an edge switch)."""
        slot = np.full(self.node_count, -1, dtype=np.int64)
        slot[self.edge_switches] = np.arange(self.edge_switches.size)
        return slot

    @cached_property
    def hops_to_edge(self) -> np.ndarray:
        """(nodes, edge switches) hop counts through switches only (NICs never forward)."""
        switch = self.node_kind[self.link_src] != NodeKind.NIC
        both = switch & (self.node_kind[self.link_dst] != NodeKind.NIC)
        graph = csr_matrix(
            (np.ones(int(both.sum())), (self.link_dst[both], self.link_src[both])),
            shape=(self.node_count, self.node_count),
        )
        # Distances from every edge switch over reversed links = hops *to* that edge.
        dist = shortest_path(graph, unweighted=True, indices=self.edge_switches)
        hops = np.where(np.isinf(dist), -1, dist).astype(np.int16).T
        return np.ascontiguousarray(hops)

    def nic(self, host: int | np.ndarray, rail: int | np.ndarray = 0) -> np.ndarray:
        """NIC node ids for host(s) and rail(s)."""
        return np.asarray(self.host_nics[host, rail])

    def describe(self) -> dict[str, object]:
        """A small summary for reports."""
        return {
            "kind": self.kind,
            "hosts": self.host_count,
            "nics_per_host": self.nics_per_host,
            "switches": self.switch_count,
            "links": self.link_count // 2,
            "oversubscription": round(self.oversubscription, 4),
        }
