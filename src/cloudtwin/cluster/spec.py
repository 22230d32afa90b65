"""The resolved cluster of a scenario: node profile, VMs on the fabric's hosts, effective rates."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from cloudtwin.cluster.profiles import (
    BARE_METAL,
    NODE_PROFILES,
    VM_OVERHEADS,
    NodeProfile,
    VirtualizationOverheads,
)
from cloudtwin.errors import ScenarioError
from cloudtwin.scenario.model import Scenario

__all__ = ["ClusterSpec", "cluster_spec"]


@dataclass(frozen=True)
class ClusterSpec:
    """One VM per node, each with all the node's GPUs (passthrough) and NICs (SR-IOV VFs)."""

    profile: NodeProfile
    overheads: VirtualizationOverheads
    virtualized: bool
    nodes: int
    nics_per_node: int
    nic_rate_bps: float

    @property
    def gpus(self) -> int:
        """GPUs in the whole cluster."""
        return self.nodes * self.profile.gpus

    @property
    def compute_factor(self) -> float:
        """Fraction of the GPU's throughput a workload gets (1 on bare metal)."""
        return 1.0 - self.overheads.compute

    @property
    def nic_rate_cap_bps(self) -> float:
        """What one NIC (virtual function in a VM) can send."""
        return self.nic_rate_bps * (1.0 - self.overheads.nic_bandwidth)

    def nic_of_gpu(self, gpu: np.ndarray | int) -> np.ndarray:
        """The NIC (rail) NCCL pairs with a local GPU: the closest one on the PCIe tree."""
        return np.asarray(gpu, dtype=np.int64) * self.nics_per_node // self.profile.gpus


def cluster_spec(scenario: Scenario, nic_rate_bps: float) -> ClusterSpec:
    """The cluster the scenario describes, with overrides applied to the profile's defaults."""
    cluster = scenario.cluster
    profile = NODE_PROFILES.get(cluster.node)
    if profile is None:  # pragma: no cover - the model's Literal already rejects it
        raise ScenarioError(f"cluster.node: unknown node profile {cluster.node!r}")
    if scenario.hosts.gpus != profile.gpus:
        raise ScenarioError(
            f"hosts.gpus: {scenario.hosts.gpus} GPUs per host, but a {profile.name} node has "
            f"{profile.gpus}"
        )
    if profile.gpu_nics is not None and scenario.hosts.nics != profile.gpu_nics:
        raise ScenarioError(
            f"hosts.nics: {scenario.hosts.nics} NICs per host, but a {profile.name} node has "
            f"{profile.gpu_nics} for GPU traffic"
        )
    virtualized = cluster.virtualization == "vm"
    base = VM_OVERHEADS if virtualized else BARE_METAL
    given = cluster.overheads
    if not virtualized and any(v is not None for v in given.model_dump().values()):
        raise ScenarioError("cluster.overheads: bare-metal has no virtualization overheads to set")
    overheads = VirtualizationOverheads(
        compute=base.compute if given.compute is None else given.compute,
        nic_bandwidth=base.nic_bandwidth if given.nic_bandwidth is None else given.nic_bandwidth,
        nic_latency_s=base.nic_latency_s if given.nic_latency is None else given.nic_latency,
        host_memory_reserved=base.host_memory_reserved,
    )
    return ClusterSpec(
        profile=profile,
        overheads=overheads,
        virtualized=virtualized,
        nodes=scenario.host_count,
        nics_per_node=scenario.hosts.nics,
        nic_rate_bps=nic_rate_bps,
    )
