"""perftest (ib_write_bw-style) RoCE test traffic: who sends to whom, over which QPs.

Patterns, inside each tenant's host set:
- `pairs`: hosts are paired at random; the first of each pair writes to the second.
- `permutation`: every host writes to one other host and receives from one (a random
  derangement).
- `shift`: host i writes to host i + shift (default: hosts per leaf, so every flow
  leaves its leaf).
- `incast`: `incast_senders` hosts (default: all others) write to the first host.
- `all-to-all`: every host writes to every other host.

With several NICs per host, NIC r writes to NIC r of the peer (one connection per
rail, as one ib_write_bw per device). A connection's bytes are split evenly over its
`qps` queue pairs; each QP is one flow with its own QP numbers and, as RoCEv2 NICs do,
its own UDP source port (or one port per connection with `hosts.udp_sport: fixed`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from cloudtwin.errors import WorkloadError
from cloudtwin.flows import Flows
from cloudtwin.hashing import hash_fields
from cloudtwin.scenario.model import PerftestWorkload
from cloudtwin.topology.topology import Topology

__all__ = ["TenantHosts", "host_pairs", "perftest_flows", "qp_flows"]

TenantHosts = tuple[int, np.ndarray]
"""(tenant index or -1 for none, host indices)."""

_MAX_FLOWS = 5_000_000


def host_pairs(
    pattern: str,
    hosts: np.ndarray,
    rng: np.random.Generator,
    shift: int,
    incast_senders: int | None,
) -> tuple[np.ndarray, np.ndarray]:
    """(source host, destination host) arrays for one pattern over `hosts`."""
    n = hosts.size
    if n < 2:
        raise WorkloadError(f"workload.pattern: {pattern} needs at least 2 hosts, got {n}")
    if pattern == "pairs":
        order = rng.permutation(n)[: n - n % 2]
        return hosts[order[0::2]], hosts[order[1::2]]
    if pattern == "permutation":
        return hosts, hosts[_derangement(n, rng)]
    if pattern == "shift":
        if shift % n == 0:
            raise WorkloadError(f"workload.shift: {shift} maps every one of {n} hosts onto itself")
        if shift >= n:
            raise WorkloadError(f"workload.shift: {shift} is not below the {n} hosts it shifts")
        return hosts, hosts[(np.arange(n) + shift) % n]
    if pattern == "incast":
        senders = n - 1 if incast_senders is None else incast_senders
        if senders > n - 1:
            raise WorkloadError(
                f"workload.incast_senders: {senders} is more than the {n - 1} other hosts"
            )
        return hosts[1 : senders + 1], np.full(senders, hosts[0])
    if pattern == "all-to-all":
        src, dst = np.meshgrid(hosts, hosts, indexing="ij")
        off = src != dst
        return src[off], dst[off]
    raise WorkloadError(f"workload.pattern: unknown pattern {pattern!r}")


def _derangement(n: int, rng: np.random.Generator) -> np.ndarray:
    """A uniformly random permutation with no fixed point (rejection sampling)."""
    while True:
        perm = rng.permutation(n)
        if not np.any(perm == np.arange(n)):
            return perm


def qp_flows(
    topology: Topology,
    src_nic: np.ndarray,
    dst_nic: np.ndarray,
    size_bytes: np.ndarray,
    qps: int,
    rng: np.random.Generator,
    start_s: np.ndarray | float = 0.0,
    tenant: np.ndarray | int = -1,
    job: int = 0,
    sport_per_qp: bool = True,
) -> Flows:
    """Flows for connections `src_nic[i] -> dst_nic[i]`, each split over `qps` QPs."""
    connections = src_nic.size
    if connections * qps > _MAX_FLOWS:
        raise WorkloadError(
            f"{connections * qps:,} flows is more than the {_MAX_FLOWS:,} supported"
        )
    conn = np.repeat(np.arange(connections), qps)
    share = np.asarray(size_bytes, dtype=float)[conn] / qps
    src = src_nic[conn]
    dst = dst_nic[conn]
    base = rng.integers(0x100, 0x7FFF00, size=topology.node_count)
    src_qp = base[src] + _rank_within(src)
    dst_qp = base[dst] + 0x400000 + _rank_within(dst)
    if sport_per_qp:
        entropy = hash_fields([src_qp, dst_qp], seed=0) & np.uint64(0x3FFF)
    else:
        entropy = hash_fields([src, dst], seed=0) & np.uint64(0x3FFF)
    sport = (np.uint64(0xC000) | entropy).astype(np.int64)
    n = conn.size
    return Flows(
        src=src.astype(np.int64),
        dst=dst.astype(np.int64),
        size_bytes=share,
        start_s=np.broadcast_to(np.asarray(start_s, dtype=float), (connections,))[conn].copy(),
        tenant=np.broadcast_to(np.asarray(tenant, dtype=np.int64), (connections,))[conn].copy(),
        job=np.full(n, job, dtype=np.int64),
        connection=conn.astype(np.int64),
        src_qp=src_qp.astype(np.int64),
        dst_qp=dst_qp.astype(np.int64),
        sport=sport,
    )


def _rank_within(nodes: np.ndarray) -> np.ndarray:
    """0, 1, 2, ... for the successive occurrences of each value (QPs numbered per NIC)."""
    order = np.argsort(nodes, kind="stable")
    sorted_nodes = nodes[order]
    first = np.searchsorted(sorted_nodes, sorted_nodes, side="left")
    rank = np.empty(nodes.size, dtype=np.int64)
    rank[order] = np.arange(nodes.size) - first
    return rank


def perftest_flows(
    workload: PerftestWorkload,
    topology: Topology,
    groups: Sequence[TenantHosts],
    seed: int | np.random.Generator,
    sport_per_qp: bool = True,
    job: int = 0,
) -> Flows:
    """The flows of a perftest workload over the given tenant host groups."""
    rng = np.random.default_rng(seed)
    first_edge = topology.edge_of_nic[topology.host_nics[:, 0]]
    default_shift = int(np.count_nonzero(first_edge == first_edge[0]))  # hosts per leaf
    src_hosts, dst_hosts, tenants = [], [], []
    for tenant_index, hosts in groups:
        shift = workload.shift or min(default_shift, max(1, hosts.size - 1))
        src, dst = host_pairs(
            workload.pattern, np.asarray(hosts), rng, shift, workload.incast_senders
        )
        src_hosts.append(src)
        dst_hosts.append(dst)
        tenants.append(np.full(src.size, tenant_index))
    src_h = np.concatenate(src_hosts)
    dst_h = np.concatenate(dst_hosts)
    rails = topology.nics_per_host
    src_nic = topology.host_nics[src_h].reshape(-1)
    dst_nic = topology.host_nics[dst_h].reshape(-1)
    tenant = np.repeat(np.concatenate(tenants), rails)
    size = np.full(src_nic.size, float(workload.size))
    return qp_flows(
        topology,
        src_nic,
        dst_nic,
        size,
        workload.qps,
        rng,
        workload.start,
        tenant,
        job,
        sport_per_qp,
    )
