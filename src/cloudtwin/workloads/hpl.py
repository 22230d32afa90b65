"""High-Performance Linpack on GPUs: right-looking blocked LU with look-ahead, step by step.

For every panel k of NB columns (n = N - k NB rows left), on a P x Q process grid with
one GPU per process:
- the trailing update is a DGEMM of (n/P) x NB x (n/Q) per GPU, timed on the roofline
  of the GPU's FP64 tensor cores;
- the panel factorisation (on one process column) costs its (n/P) NB^2 flops at DGEMM
  rate (recursive panel factorisation is matrix-multiply bound) plus one pivot search
  per column, a log2(P)-step reduction paying a message latency each;
- the panel, (n/P) x NB doubles, is broadcast along the process row (a pipelined ring);
- the row swaps and the broadcast of U move NB x (n/Q) doubles along the process
  column (HPL's long "spread-roll" swap: about twice that).
With look-ahead depth 1 the factorisation and broadcast of the next panel overlap the
update; the swaps do not. A step takes max(update, panel + broadcast) + swap.

MPI moves a message over a network link at `MPI_BANDWIDTH_EFFICIENCY` of the rate the
engine gives its flow (protocol headers, rendezvous handshakes, pipelining gaps); a VM
adds its virtualization overheads (cluster/profiles.py) to the rate and latency of its
NICs and to the GPU's compute. docs/hpl-validation.md checks the whole against the
Top500 list.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from cloudtwin.errors import WorkloadError
from cloudtwin.flows import Flows
from cloudtwin.scenario.cluster import HplWorkload
from cloudtwin.topology.topology import Topology
from cloudtwin.workloads.perftest import qp_flows

if TYPE_CHECKING:  # the cluster package sits above workloads; only its type is used here
    from cloudtwin.cluster.spec import ClusterSpec

__all__ = [
    "MPI_BANDWIDTH_EFFICIENCY",
    "MPI_LATENCY_S",
    "PROBE_BYTES",
    "HplTimes",
    "grid_ring_flows",
    "hpl_flops",
    "hpl_times",
    "rank_of",
]

MPI_LATENCY_S = 3e-6
"""Small-message latency between processes on different nodes over RoCE (MPI ping-pong
on 100G RoCE NICs is measured at 1.5-3 us; we take the upper end for a switch hop)."""

MPI_BANDWIDTH_EFFICIENCY = 37.23 / 40.0
"""Fraction of a network link's rate that MPI point-to-point messages reach at large sizes:
Open MPI over a 40 Gb/s NIC, NetPIPE, "the bandwidth reaches 37.23Gbps" (J. Squyres, "MPI
over 40Gb Ethernet", Cisco blog, 2014). ASSUMPTION that the same fraction holds for the
100-200 Gb/s RoCE and InfiniBand NICs of GPU clusters."""

PROBE_BYTES = 1e9
"""What each ring hop carries when the fabric is probed for the rings' bandwidth."""

_DOUBLE = 8.0
WORKSPACE_BYTES = 3e9


def hpl_flops(n: int) -> float:
    """HPL's operation count: 2/3 N^3 + 2 N^2.

    >>> hpl_flops(1000)
    668666666.6666666
    """
    return 2.0 / 3.0 * n**3 + 2.0 * n**2


def rank_of(p: np.ndarray | int, q: np.ndarray | int, grid_p: int) -> np.ndarray:
    """Column-major process mapping: consecutive ranks (one node's GPUs) fill a process column.

    >>> rank_of(np.array([0, 1, 0]), np.array([0, 0, 1]), 32).tolist()
    [0, 1, 32]
    """
    return np.asarray(p, dtype=np.int64) + grid_p * np.asarray(q, dtype=np.int64)


def check_fits(w: HplWorkload, spec: ClusterSpec) -> None:
    """WorkloadError naming the key when the grid or the matrix does not fit."""
    if w.p * w.q > spec.gpus:
        raise WorkloadError(
            f"workload.p: a {w.p} x {w.q} grid needs {w.p * w.q} GPUs, the cluster has {spec.gpus}"
        )
    per_gpu = _DOUBLE * w.n * w.n / (w.p * w.q)
    limit = spec.profile.gpu_memory_bytes - WORKSPACE_BYTES
    if per_gpu > limit:
        raise WorkloadError(
            f"workload.n: an N={w.n} matrix needs {per_gpu / 1e9:.1f} GB per GPU on a "
            f"{w.p} x {w.q} grid, more than the {limit / 1e9:.0f} GB free on a GPU"
        )
    if w.nb > w.n:
        raise WorkloadError(f"workload.nb: block {w.nb} is larger than N={w.n}")
    if w.n < w.nb * max(w.p, w.q):
        raise WorkloadError(
            f"workload.n: N={w.n} gives some of the {w.p} x {w.q} grid no {w.nb}-wide block; "
            f"N must be at least {w.nb * max(w.p, w.q)}"
        )


@dataclass(frozen=True)
class HplTimes:
    """Seconds spent over the whole run, by what the critical path waited for."""

    total_s: float
    update_s: float
    exposed_panel_s: float
    swap_s: float


def hpl_times(
    w: HplWorkload, spec: ClusterSpec, row_bytes_per_s: float, column_bytes_per_s: float,
    row_latency_s: float, column_latency_s: float,
) -> HplTimes:
    """Time of the whole factorisation, given the ring bandwidths along rows and columns."""
    gpu = spec.profile
    rate = gpu.peak_fp64_flops * gpu.dgemm_efficiency_max * spec.compute_factor
    hbm = gpu.hbm_bytes_per_s * gpu.hbm_efficiency
    n = (w.n - w.nb * np.arange(-(-w.n // w.nb))).astype(float)
    nb = np.minimum(float(w.nb), n)
    rows, cols = n / w.p, n / w.q
    update_flops = 2.0 * rows * nb * cols
    update_bytes = _DOUBLE * (rows * nb + nb * cols + 2 * rows * cols)
    update = np.maximum(update_flops / rate, update_bytes / hbm) + gpu.kernel_launch_s
    pivots = nb * np.ceil(np.log2(max(w.p, 1))) * column_latency_s
    panel = rows * nb * nb / rate + pivots + nb * gpu.kernel_launch_s
    broadcast = _DOUBLE * rows * nb / row_bytes_per_s + (w.q - 1) * row_latency_s * (w.q > 1)
    swap = 0.0
    if w.p > 1:
        swap = 2.0 * _DOUBLE * nb * cols * (w.p - 1) / w.p / column_bytes_per_s + column_latency_s
    step = np.maximum(update, panel + broadcast) + swap
    return HplTimes(
        total_s=float(step.sum()),
        update_s=float(update.sum()),
        exposed_panel_s=float(np.maximum(0.0, panel + broadcast - update).sum()),
        swap_s=float(np.sum(swap * np.ones_like(step))),
    )


def grid_ring_flows(
    w: HplWorkload,
    spec: ClusterSpec,
    topology: Topology,
    along: str,
    size_bytes: float,
    seed: int | np.random.Generator,
    tenant_of_host: np.ndarray | None = None,
) -> Flows:
    """Inter-node hops of the rings along every process row (`along="row"`) or column,
    one flow per channel; all rows (or columns) communicate at once, as HPL's do."""
    p, q = np.meshgrid(np.arange(w.p), np.arange(w.q), indexing="ij")
    src = rank_of(p, q, w.p)
    dst = rank_of(p, (q + 1) % w.q, w.p) if along == "row" else rank_of((p + 1) % w.p, q, w.p)
    gpus = spec.profile.gpus
    src_node, dst_node = src // gpus, dst // gpus
    remote = src_node != dst_node
    src_nic = topology.host_nics[src_node[remote], spec.nic_of_gpu(src[remote] % gpus)]
    dst_nic = topology.host_nics[dst_node[remote], spec.nic_of_gpu(dst[remote] % gpus)]
    tenant = -1 if tenant_of_host is None else tenant_of_host[src_node[remote]]
    size = np.full(src_nic.size, float(size_bytes))
    return qp_flows(topology, src_nic, dst_nic, size, w.channels, np.random.default_rng(seed), 0.0, tenant)
