"""NVLink/NVSwitch inside hosts: one up and one down link per GPU, appended after the fabric's links.

An NVSwitch is non-blocking, so a GPU-to-GPU transfer is limited only by the sender's
NVLink bandwidth out and the receiver's NVLink bandwidth in (A100 NVSwitch: 300 GB/s
per GPU per direction). The links are numbered after the fabric's own, so a flow's path
may mix fabric and NVLink links and the engine sees one capacity array.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from cloudtwin.topology.topology import Topology

__all__ = ["Nvlink", "gpu_nic"]


def gpu_nic(local_gpu: np.ndarray | int, gpus: int, nics: int) -> np.ndarray:
    """The NIC (rail) closest to a GPU: GPUs spread evenly over the host's NICs, in order.

    This is the PCIe affinity of HGX/DGX boards (8 GPUs and 8 NICs: GPU i with NIC i;
    8 GPUs and 2 NICs: GPUs 0-3 with NIC 0), and the NIC NCCL picks for a GPU.

    >>> gpu_nic(np.arange(8), 8, 2).tolist()
    [0, 0, 0, 0, 1, 1, 1, 1]
    """
    return np.asarray(local_gpu, dtype=np.int64) * nics // gpus


@dataclass(frozen=True)
class Nvlink:
    """The NVLink links of every GPU of a fabric's hosts, numbered from `link_offset`."""

    hosts: int
    gpus_per_host: int
    rate_bps: float
    link_offset: int

    @classmethod
    def of(cls, topology: Topology, gpus_per_host: int, rate_bps: float) -> Nvlink:
        """NVLink for every host of `topology`, numbered after its links."""
        return cls(topology.host_count, gpus_per_host, rate_bps, topology.link_count)

    @property
    def gpu_count(self) -> int:
        """GPUs in the cluster (global GPU id = host x gpus_per_host + local GPU)."""
        return self.hosts * self.gpus_per_host

    def up(self, gpu: np.ndarray | int) -> np.ndarray:
        """Link id of each GPU's NVLink towards the NVSwitch (what it sends)."""
        return self.link_offset + 2 * np.asarray(gpu, dtype=np.int64)

    def down(self, gpu: np.ndarray | int) -> np.ndarray:
        """Link id of each GPU's NVLink from the NVSwitch (what it receives)."""
        return self.link_offset + 2 * np.asarray(gpu, dtype=np.int64) + 1

    def capacity_bps(self, topology: Topology) -> np.ndarray:
        """The fabric's link capacities followed by the NVLink ones."""
        return np.concatenate((topology.capacity_bps, np.full(2 * self.gpu_count, self.rate_bps)))

    def latency_s(self, topology: Topology) -> np.ndarray:
        """The fabric's link latencies followed by NVLink's (0: counted in the hop latency)."""
        return np.concatenate((topology.latency_s, np.zeros(2 * self.gpu_count)))
