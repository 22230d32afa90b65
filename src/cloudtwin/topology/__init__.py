"""Fabrics as arrays: builders, the Topology, and equal-cost paths."""

from cloudtwin.topology.builders import build_topology, fat_tree, leaf_spine, rail_optimized
from cloudtwin.topology.nvlink import Nvlink, gpu_nic
from cloudtwin.topology.paths import (
    Chooser,
    Paths,
    equal_cost_paths,
    next_hop_candidates,
    pick_nth,
    route_hop_by_hop,
    spread_fractions,
)
from cloudtwin.topology.topology import NodeKind, Topology

__all__ = [
    "Chooser",
    "NodeKind",
    "Nvlink",
    "Paths",
    "Topology",
    "build_topology",
    "equal_cost_paths",
    "fat_tree",
    "gpu_nic",
    "leaf_spine",
    "next_hop_candidates",
    "pick_nth",
    "rail_optimized",
    "route_hop_by_hop",
    "spread_fractions",
]
