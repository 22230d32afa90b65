"""GPU clusters: node profiles, VMs with passthrough GPUs and SR-IOV NICs, virtualization overheads."""

from cloudtwin.cluster.profiles import (
    BARE_METAL,
    NODE_PROFILES,
    VM_OVERHEADS,
    NodeProfile,
    VirtualizationOverheads,
)
from cloudtwin.cluster.spec import ClusterSpec, cluster_spec

__all__ = [
    "BARE_METAL",
    "NODE_PROFILES",
    "VM_OVERHEADS",
    "ClusterSpec",
    "NodeProfile",
    "VirtualizationOverheads",
    "cluster_spec",
]
