"""NCCL collectives as pipelined flows: rings, chains, double binary trees and point-to-point.

Structure, as NCCL lays it out:

- A job's ranks are GPUs; NCCL orders its rings by rank, host after host. On each host
  a channel's ring enters at one GPU, visits the host's other ranks over NVLink and
  leaves from the last; channel c enters at local rank c mod m, so channels spread
  over GPUs and, through GPU-to-NIC affinity, over NICs. The ring leaves and enters
  every host through the NIC of its entry GPU (no cross-NIC: rail-aligned, so on a
  rail-optimized fabric a channel stays on one rail).
- Each channel's network hop is its own connection: `qps_per_connection` QPs, each
  with its own QP numbers and UDP source port, routed by the scenario's strategy.
- The NVLink hops of a channel on one host are one *segment*: in a pipeline every
  hop of it carries the same rate, so one flow crossing all its NVLink links loads
  them as the separate hops would.

Time: the collective runs as R pipelined *rounds*. In round r each unit (a QP of a
network hop, or an NVLink segment) moves 1/R of its bytes once the units it depends
on have finished: for a ring, its own previous round and its predecessor's previous
round (a rank forwards what it received a step earlier), so one slow hop delays the
hop after it, and in turn the whole ring. R is 2(n-1) steps for an AllReduce ring when
the flow budget allows, fewer (each round standing for several steps) on large rings.
Per-step latencies follow NCCL's tuning model (Simple protocol) and are spread over
the rounds so that the total is NCCL's.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from cloudtwin.errors import WorkloadError
from cloudtwin.flows import Flows
from cloudtwin.scenario.model import CollectiveOp, CollectiveWorkload
from cloudtwin.topology.nvlink import Nvlink, gpu_nic
from cloudtwin.topology.paths import Paths
from cloudtwin.topology.topology import Topology
from cloudtwin.workloads.perftest import TenantHosts, qp_flows
from cloudtwin.workloads.pipeline import Template, Unrolled, pairs_to_csr, unroll

__all__ = [
    "FLOW_BUDGET",
    "CollectivePlan",
    "JobRanks",
    "bus_factor",
    "choose_algorithm",
    "collective_jobs",
    "plan_collective",
    "ring_bound",
]

FLOW_BUDGET = 32_768
"""Most flows a plan unrolls to when `rounds` is not given (rounds shrink to fit)."""

_MAX_PAIRS = 2_000_000


def bus_factor(op: CollectiveOp, ranks: int) -> float:
    """busbw / algbw as nccl-tests defines it.

    >>> bus_factor("allreduce", 8), bus_factor("allgather", 8), bus_factor("sendrecv", 8)
    (1.75, 0.875, 1.0)
    """
    n = ranks
    if op == "allreduce":
        return 2 * (n - 1) / n
    if op in ("allgather", "reducescatter", "alltoall"):
        return (n - 1) / n
    return 1.0


@dataclass(frozen=True, eq=False)
class JobRanks:
    """One job: its tenant, its hosts in ring order, and (hosts, m) global GPU ids in rank order."""

    tenant: int
    hosts: np.ndarray
    local: np.ndarray

    @property
    def size(self) -> int:
        """Number of ranks."""
        return int(self.local.size)


def _job_from_gpus(tenant: int, gpus: np.ndarray, gpus_per_host: int) -> JobRanks:
    """Hosts in order of their first rank; each host's ranks in their given order."""
    host = gpus // gpus_per_host
    unique, first, inverse = np.unique(host, return_index=True, return_inverse=True)
    position = np.empty(unique.size, dtype=np.int64)
    position[np.argsort(first)] = np.arange(unique.size)
    counts = np.bincount(inverse)
    if np.any(counts != counts[0]):
        raise WorkloadError(
            "workload.ranks: every host of a job must hold the same number of ranks "
            f"(got {sorted(set(counts.tolist()))})"
        )
    order = np.argsort(position[inverse], kind="stable")
    local = gpus[order].reshape(unique.size, int(counts[0]))
    return JobRanks(tenant, unique[np.argsort(first)], local)


def collective_jobs(
    workload: CollectiveWorkload,
    groups: list[TenantHosts],
    gpus_per_host: int,
    rng: np.random.Generator,
) -> list[JobRanks]:
    """The jobs of a collective: one per tenant group, or one over `workload.ranks`."""
    jobs: list[JobRanks] = []
    if workload.ranks is not None:
        gpus = np.asarray(workload.ranks, dtype=np.int64)
        owner = {int(h): t for t, hosts in groups for h in np.asarray(hosts).tolist()}
        tenants = {owner.get(int(h), -2) for h in np.unique(gpus // gpus_per_host).tolist()}
        if len(tenants) != 1 or -2 in tenants:
            raise WorkloadError("workload.ranks: a job's GPUs must all lie in one tenant's hosts")
        jobs.append(_job_from_gpus(tenants.pop(), gpus, gpus_per_host))
    else:
        for tenant, hosts in groups:
            hosts = np.asarray(hosts, dtype=np.int64)
            gpus = (hosts[:, None] * gpus_per_host + np.arange(gpus_per_host)).ravel()
            jobs.append(_job_from_gpus(tenant, gpus, gpus_per_host))
    for job in jobs:
        if job.size < 2:
            raise WorkloadError(f"workload.ranks: a collective needs at least 2 ranks, got {job.size}")
    if workload.host_order == "random":
        jobs = [
            JobRanks(j.tenant, j.hosts[p], j.local[p]) for j in jobs for p in [rng.permutation(j.hosts.size)]
        ]
    return jobs


def channel_entries(job: JobRanks, channels: int, gpus_per_host: int, nics: int) -> np.ndarray:
    """Column (local rank) at which each channel's ring enters every host.

    Channels are dealt over the NICs first (channel c on rail c mod rails, as NCCL
    spreads its rings over the NICs), then over the GPUs close to that NIC.

    >>> job = JobRanks(-1, np.array([0]), np.arange(8)[None, :])
    >>> channel_entries(job, 4, 8, 2).tolist()
    [0, 4, 1, 5]
    """
    rail = gpu_nic(job.local[0] % gpus_per_host, gpus_per_host, nics)
    rails = np.unique(rail)
    c = np.arange(channels)
    chosen = rails[c % rails.size]
    entries = np.empty(channels, dtype=np.int64)
    for r in rails.tolist():
        columns = np.flatnonzero(rail == r)
        mine = chosen == r
        entries[mine] = columns[(c[mine] // rails.size) % columns.size]
    return entries


@dataclass(frozen=True)
class _Latency:
    net_s: float
    nvlink_s: float


def ring_latency_s(op: CollectiveOp, ranks: int, hosts: int, latency: _Latency) -> float:
    """NCCL's ring latency: every step pays its hop's latency (network or NVLink)."""
    steps = 2 * (ranks - 1) if op == "allreduce" else ranks - 1
    inter = 0 if hosts == 1 else (2 * (hosts - 1) if op == "allreduce" else hosts - 1)
    return (steps - inter) * latency.nvlink_s + inter * latency.net_s


def tree_latency_s(ranks: int, hosts: int, latency: _Latency) -> float:
    """NCCL's tree latency: up and down the intra-host chain and log2(hosts) network hops."""
    depth = int(np.floor(np.log2(hosts))) if hosts > 1 else 0
    return 2 * ((ranks // hosts - 1) * latency.nvlink_s + depth * latency.net_s)


def ring_bound(
    workload: CollectiveWorkload,
    job: JobRanks,
    size_bytes: int,
    gpus_per_host: int,
    nics: int,
    nic_rate_bps: float,
    nvlink_bps: float,
) -> float:
    """Analytical ring time on a fabric without contention (s): NCCL's latency plus the bytes of
    one hop over the slowest per-channel constraint (a NIC's or an NVLink's share)."""
    hosts, m = job.local.shape
    n = job.size
    entry = channel_entries(job, workload.channels, gpus_per_host, nics)
    rate = _channel_rate_bps(entry, job, m, nics, nic_rate_bps, nvlink_bps, gpus_per_host)
    factor = 2 * (n - 1) / n if workload.op == "allreduce" else (n - 1) / n
    hop_bytes = factor * size_bytes / workload.channels
    latency = _Latency(workload.net_hop_latency, workload.nvlink_hop_latency)
    return ring_latency_s(workload.op, n, hosts, latency) + hop_bytes * 8 / rate


def _channel_rate_bps(
    entry: np.ndarray, job: JobRanks, m: int, nics: int, nic_rate: float, nvlink: float, gpus_per_host: int
) -> float:
    hosts = job.hosts.size
    channels = entry.size
    rates = []
    if hosts > 1:
        rail = gpu_nic(job.local[0, entry] % gpus_per_host, gpus_per_host, nics)
        rates.append(nic_rate / np.bincount(rail).max())
    if m > 1:
        # a GPU sends over NVLink in every channel but the one it leaves the host in
        sends = channels - (np.bincount(entry, minlength=m) if hosts > 1 else 0)
        rates.append(nvlink / np.max(sends))
    return float(min(rates))


def choose_algorithm(
    workload: CollectiveWorkload, job: JobRanks, size_bytes: int, nic_rate_bps: float, nics: int
) -> str:
    """`ring` or `tree` for `algorithm: auto`, as NCCL does: the smaller predicted time.

    Both predictions are this model's own, uncontended: NCCL's latency for each
    algorithm plus the bytes a NIC moves (2(n-1)/n x size for the ring, 2 x size for
    the tree) at the host's NIC bandwidth; the tree also fills and drains a pipeline
    of 2 x (depth + 1) of its rounds, as the simulated tree does.
    """
    if workload.op != "allreduce":
        return "ring"
    hosts, m = job.local.shape
    latency = _Latency(workload.net_hop_latency, workload.nvlink_hop_latency)
    n = job.size
    depth = int(np.floor(np.log2(hosts))) if hosts > 1 else 0
    host_bps = nic_rate_bps * min(nics, workload.channels) / 8
    units = workload.channels * hosts * (2 + 2 * workload.qps_per_connection)
    rounds = workload.rounds or max(
        1, min(int(np.ceil(size_bytes / workload.channels / workload.chunk)), FLOW_BUDGET // units)
    )
    ring = ring_latency_s("allreduce", n, hosts, latency) + 2 * (n - 1) / n * size_bytes / host_bps
    fill = (rounds + 2 * (depth + 1)) / rounds
    tree = tree_latency_s(n, hosts, latency) + 2 * size_bytes / host_bps * fill
    return "tree" if tree < ring else "ring"


@dataclass
class _Graph:
    """Super-edges (network hops and NVLink segments) and their dependencies, as they are added."""

    topology: Topology
    nvlink: Nvlink
    net_src: list[np.ndarray] = field(default_factory=list)
    net_dst: list[np.ndarray] = field(default_factory=list)
    net_bytes: list[np.ndarray] = field(default_factory=list)
    net_gap: list[np.ndarray] = field(default_factory=list)
    net_job: list[np.ndarray] = field(default_factory=list)
    net_tenant: list[np.ndarray] = field(default_factory=list)
    nvl_links: list[np.ndarray] = field(default_factory=list)
    nvl_bytes: list[np.ndarray] = field(default_factory=list)
    nvl_gap: list[np.ndarray] = field(default_factory=list)
    nvl_job: list[np.ndarray] = field(default_factory=list)
    pairs: dict[str, list[tuple[np.ndarray, np.ndarray]]] = field(
        default_factory=lambda: {"same": [], "prev": []}
    )
    nets: int = 0
    nvls: int = 0

    # Super-edge ids: network hop i is i, NVLink segment j is -1 - j.
    def add_net(
        self, src: np.ndarray, dst: np.ndarray, bytes_: float, gap_s: float, job: int, tenant: int
    ) -> np.ndarray:
        k = src.size
        self.net_src.append(src)
        self.net_dst.append(dst)
        self.net_bytes.append(np.full(k, bytes_))
        self.net_gap.append(np.full(k, gap_s))
        self.net_job.append(np.full(k, job))
        self.net_tenant.append(np.full(k, tenant))
        ids = self.nets + np.arange(k)
        self.nets += k
        return ids

    def add_nvl(self, gpu_path: np.ndarray, bytes_: float, gap_per_hop_s: float, job: int) -> np.ndarray:
        """Segments along rows of GPU ids (each row a path of >= 2 GPUs)."""
        k, length = gpu_path.shape
        links = np.empty((k, 2 * (length - 1)), dtype=np.int64)
        links[:, 0::2] = self.nvlink.up(gpu_path[:, :-1])
        links[:, 1::2] = self.nvlink.down(gpu_path[:, 1:])
        self.nvl_links.append(links)
        self.nvl_bytes.append(np.full(k, bytes_))
        self.nvl_gap.append(np.full(k, gap_per_hop_s * (length - 1)))
        self.nvl_job.append(np.full(k, job))
        ids = -1 - (self.nvls + np.arange(k))
        self.nvls += k
        return ids

    def depend(self, waiter: np.ndarray, after: np.ndarray, kind: str) -> None:
        """`waiter[i]` waits for `after[i]` in the same round (`same`) or the previous (`prev`)."""
        w, a = np.broadcast_arrays(np.asarray(waiter), np.asarray(after))
        self.pairs[kind].append((w.ravel(), a.ravel()))


@dataclass(frozen=True, eq=False)
class CollectivePlan:
    """What the engine runs for a collective, and what routing sees.

    `connections`: one row per network QP (what a strategy routes; its bytes are the
    QP's total over all rounds). `segments`: the NVLink links of each segment, with
    link ids after the fabric's. Flows of `unrolled` name a route: QP i is route i,
    segment j is route len(connections) + j. `jobs` are the jobs in order.
    """

    connections: Flows
    segments: Paths
    unrolled: Unrolled
    rounds: int
    jobs: list[JobRanks]
    algorithms: list[str]
    nvlink: Nvlink

    def flow_paths(self, connection_paths: Paths) -> Paths:
        """Paths of every unrolled flow, given the routed paths of the connections."""
        return Paths.concat([connection_paths, self.segments]).take(self.unrolled.route)


class _Builder:
    """Adds each job's super-edges to a graph for its op and algorithm."""

    def __init__(self, workload: CollectiveWorkload, graph: _Graph, size_bytes: int) -> None:
        self.w = workload
        self.g = graph
        self.size = size_bytes
        topology = graph.topology
        self.gpus = graph.nvlink.gpus_per_host
        self.nics = topology.nics_per_host
        self.host_nics = topology.host_nics

    def nic_of(self, hosts: np.ndarray, gpus: np.ndarray) -> np.ndarray:
        return self.host_nics[hosts, gpu_nic(gpus % self.gpus, self.gpus, self.nics)]

    def ring(self, index: int, job: JobRanks, ring_gap: list[np.ndarray]) -> None:
        w, g = self.w, self.g
        hosts, m = job.local.shape
        n = job.size
        hop_bytes = bus_factor(w.op, n) * self.size / w.channels
        entries = channel_entries(job, w.channels, self.gpus, self.nics)
        for c in range(w.channels):
            rot = np.roll(job.local, -int(entries[c]), axis=1)
            nics = self.nic_of(job.hosts, rot[:, 0])
            if hosts == 1:
                edges = g.add_nvl(np.concatenate([rot, rot[:, :1]], axis=1), hop_bytes, 0.0, index)
            elif m == 1:
                edges = g.add_net(nics, np.roll(nics, -1), hop_bytes, 0.0, index, job.tenant)
            else:
                segs = g.add_nvl(rot, hop_bytes, 0.0, index)
                nets = g.add_net(nics, np.roll(nics, -1), hop_bytes, 0.0, index, job.tenant)
                edges = np.stack([segs, nets], axis=1).ravel()
            g.depend(edges, edges, "prev")
            if edges.size > 1:
                g.depend(edges, np.roll(edges, 1), "prev")
            ring_gap.append(edges)

    def chain(self, index: int, job: JobRanks) -> None:
        """Broadcast: a pipeline from the root along the ring order, cut before the root."""
        w, g = self.w, self.g
        hosts, m = job.local.shape
        if w.root >= job.size:
            raise WorkloadError(f"workload.root: rank {w.root} is outside the job's {job.size} ranks")
        root_host, root_local = divmod(w.root, m)
        order = np.roll(np.arange(hosts), -root_host)
        lat = self.latency
        entries = channel_entries(job, w.channels, self.gpus, self.nics)
        for c in range(w.channels):
            entry = job.local[order][:, int(entries[c])]
            rot = np.roll(job.local[order], -int(entries[c]), axis=1)
            rot[0] = np.roll(job.local[root_host], -root_local)
            nics = self.nic_of(job.hosts[order], entry)
            parts: list[np.ndarray] = []
            segs = g.add_nvl(rot, self.size / w.channels, lat.nvlink_s, index) if m > 1 else None
            nets = (
                g.add_net(nics[:-1], nics[1:], self.size / w.channels, lat.net_s, index, job.tenant)
                if hosts > 1
                else np.empty(0, dtype=np.int64)
            )
            for h in range(hosts):
                if segs is not None:
                    parts.append(segs[h : h + 1])
                if h < hosts - 1:
                    parts.append(nets[h : h + 1])
            edges = np.concatenate(parts)
            g.depend(edges, edges, "prev")
            g.depend(edges[1:], edges[:-1], "same")

    @property
    def latency(self) -> _Latency:
        return _Latency(self.w.net_hop_latency, self.w.nvlink_hop_latency)

    def tree(self, index: int, job: JobRanks) -> None:
        """AllReduce on NCCL's double binary tree: intra-host chains, a binary tree of hosts."""
        w, g = self.w, self.g
        hosts, m = job.local.shape
        lat = self.latency
        parent0 = _inorder_parents(hosts)
        bytes_ = self.size / w.channels
        entries = channel_entries(job, w.channels, self.gpus, self.nics)
        for c in range(w.channels):
            shift = c % 2 if hosts > 2 else 0
            # tree t: position i holds host (i + t) mod H, so leaves of one are inner nodes of the other
            position_host = (np.arange(hosts) + shift) % hosts
            parent = np.full(hosts, -1)
            inner = parent0 >= 0
            parent[position_host[inner]] = position_host[parent0[inner]]
            rot = np.roll(job.local, -int(entries[c]), axis=1)
            nics = self.nic_of(job.hosts, rot[:, 0])
            up_seg = g.add_nvl(rot[:, ::-1], bytes_, lat.nvlink_s, index) if m > 1 else None
            down_seg = g.add_nvl(rot, bytes_, lat.nvlink_s, index) if m > 1 else None
            child = np.flatnonzero(parent >= 0)
            up = g.add_net(nics[child], nics[parent[child]], bytes_, lat.net_s, index, job.tenant)
            down = g.add_net(nics[parent[child]], nics[child], bytes_, lat.net_s, index, job.tenant)
            up_of = np.full(hosts, -(1 << 40))
            down_of = np.full(hosts, -(1 << 40))
            up_of[child] = up
            down_of[child] = down
            root = int(np.flatnonzero(parent < 0)[0])
            # reduce: a host's uplink waits for its own chain and its children's uplinks
            if up_seg is not None:
                g.depend(up, up_seg[child], "same")
            g.depend(up_of[parent[child]][parent[child] != root], up[parent[child] != root], "same")
            reduced = [up[parent[child] == root]] + ([up_seg[[root]]] if up_seg is not None else [])
            done = np.concatenate(reduced)
            # broadcast: from the root's reduced data down the tree, then down each chain
            at_root = parent[child] == root
            g.depend(np.repeat(down[at_root], done.size), np.tile(done, int(at_root.sum())), "same")
            g.depend(down[~at_root], down_of[parent[child][~at_root]], "same")
            if down_seg is not None:
                g.depend(down_seg[child], down, "same")
                g.depend(np.repeat(down_seg[[root]], done.size), done, "same")
            for edges in (up, down, up_seg, down_seg):
                if edges is not None:
                    g.depend(edges, edges, "prev")

    def p2p(self, index: int, job: JobRanks) -> None:
        """sendrecv (rank k to k+1, per channel) or alltoall (every pair, one connection each)."""
        w, g = self.w, self.g
        n = job.size
        m = job.local.shape[1]
        gpus = job.local.ravel()
        host = np.repeat(job.hosts, m)
        if w.op == "sendrecv":
            src = np.tile(np.arange(n), w.channels)
            dst = (src + 1) % n
            bytes_ = self.size / w.channels
        else:
            if n * (n - 1) > _MAX_PAIRS:
                raise WorkloadError(f"workload.ranks: alltoall over {n} ranks is too many pairs")
            src, dst = np.nonzero(~np.eye(n, dtype=bool))
            bytes_ = self.size / n
        lat = self.latency
        same = host[src] == host[dst]
        if same.any():
            g.add_nvl(np.stack([gpus[src[same]], gpus[dst[same]]], axis=1), bytes_, lat.nvlink_s, index)
        cross = ~same
        if cross.any():
            g.add_net(
                self.nic_of(host[src[cross]], gpus[src[cross]]),
                self.nic_of(host[dst[cross]], gpus[dst[cross]]),
                bytes_,
                lat.net_s,
                index,
                job.tenant,
            )


def _inorder_parents(count: int) -> np.ndarray:
    """Parent position of each position in a balanced in-order binary tree (-1 at the root).

    >>> _inorder_parents(7).tolist()
    [1, 3, 1, -1, 5, 3, 5]
    """
    parent = np.full(count, -1, dtype=np.int64)
    stack = [(0, count - 1, -1)]
    while stack:
        low, high, up = stack.pop()
        if low > high:
            continue
        mid = (low + high) // 2
        parent[mid] = up
        stack += [(low, mid - 1, mid), (mid + 1, high, mid)]
    return parent


def plan_collective(
    workload: CollectiveWorkload,
    topology: Topology,
    nvlink: Nvlink,
    jobs: list[JobRanks],
    rng: np.random.Generator,
    size_bytes: int | None = None,
    sport_per_qp: bool = True,
) -> CollectivePlan:
    """Flows, routes and dependencies of a collective of `size_bytes` (default: the workload's)."""
    size = workload.size if size_bytes is None else size_bytes
    graph = _Graph(topology, nvlink)
    builder = _Builder(workload, graph, size)
    ring_edges: list[np.ndarray] = []
    ring_jobs: list[tuple[int, float]] = []
    algorithms: list[str] = []
    for index, job in enumerate(jobs):
        algorithm = _algorithm(workload, job, size, topology.nic_rate_bps, topology.nics_per_host)
        algorithms.append(algorithm)
        before = len(ring_edges)
        if algorithm == "ring" and workload.op in ("allreduce", "allgather", "reducescatter"):
            builder.ring(index, job, ring_edges)
            lat = ring_latency_s(workload.op, job.size, job.hosts.size, builder.latency)
            ring_jobs += [(i, lat) for i in range(before, len(ring_edges))]
        elif algorithm == "tree":
            builder.tree(index, job)
        elif workload.op == "broadcast":
            builder.chain(index, job)
        else:
            builder.p2p(index, job)
    steps = _steps(workload, jobs, size, algorithms)
    return _assemble(workload, graph, jobs, algorithms, rng, steps, ring_edges, ring_jobs, sport_per_qp)


def _algorithm(workload: CollectiveWorkload, job: JobRanks, size: int, nic_rate_bps: float, nics: int) -> str:
    if workload.algorithm == "auto":
        return choose_algorithm(workload, job, size, nic_rate_bps, nics)
    if workload.algorithm == "tree" and workload.op != "allreduce":
        raise WorkloadError(f"workload.algorithm: tree runs allreduce only (as in NCCL), not {workload.op}")
    if workload.op in ("alltoall", "sendrecv"):
        return "p2p"
    if workload.op == "broadcast":
        return "chain"
    return workload.algorithm


def _steps(workload: CollectiveWorkload, jobs: list[JobRanks], size: int, algorithms: list[str]) -> int:
    """Rounds wanted before the flow budget: ring steps, or pipeline chunks."""
    wanted = 1
    for job, algorithm in zip(jobs, algorithms, strict=True):
        if algorithm == "ring":
            wanted = max(wanted, 2 * (job.size - 1) if workload.op == "allreduce" else job.size - 1)
        elif algorithm in ("tree", "chain"):
            wanted = max(wanted, int(np.ceil(size / workload.channels / workload.chunk)))
    return wanted


def _assemble(
    workload: CollectiveWorkload,
    graph: _Graph,
    jobs: list[JobRanks],
    algorithms: list[str],
    rng: np.random.Generator,
    steps: int,
    ring_edges: list[np.ndarray],
    ring_jobs: list[tuple[int, float]],
    sport_per_qp: bool,
) -> CollectivePlan:
    topology, q = graph.topology, workload.qps_per_connection
    nets, nvls = graph.nets, graph.nvls
    units = nets * q + nvls
    if workload.rounds is not None:
        rounds = workload.rounds
    else:
        rounds = max(1, min(steps, FLOW_BUDGET // max(units, 1)))
    if rounds * units > 5_000_000:
        raise WorkloadError(f"{rounds * units:,} flows is more than the 5,000,000 supported")
    cat = _cat
    connections = qp_flows(
        topology,
        cat(graph.net_src, np.int64),
        cat(graph.net_dst, np.int64),
        cat(graph.net_bytes, float),
        q,
        rng,
        0.0,
        cat(graph.net_tenant, np.int64),
        0,
        sport_per_qp,
    )
    job = np.concatenate((np.repeat(cat(graph.net_job, np.int64), q), cat(graph.nvl_job, np.int64)))
    connections = _with_job(connections, job[: nets * q])
    bytes_ = np.concatenate((np.repeat(cat(graph.net_bytes, float) / q, q), cat(graph.nvl_bytes, float)))
    gap = np.concatenate((np.repeat(cat(graph.net_gap, float), q), cat(graph.nvl_gap, float)))
    for edges_index, latency_s in ring_jobs:
        units_of = _units_of(ring_edges[edges_index], nets, q)
        gap[units_of] = latency_s / rounds
    ring_units = np.zeros(units, dtype=bool)
    for edges in ring_edges:
        ring_units[_units_of(edges, nets, q)] = True
    rate = np.concatenate((np.full(nets * q, topology.nic_rate_bps), np.full(nvls, graph.nvlink.rate_bps)))
    same = _expand_pairs(graph.pairs["same"], nets, q, units)
    prev = _expand_pairs(graph.pairs["prev"], nets, q, units)
    template = Template(
        route=np.arange(units, dtype=np.int64),
        bytes_per_round=bytes_ / rounds,
        rate_cap_bps=rate,
        gap_first_s=gap,
        gap_later_s=np.where(ring_units, gap, 0.0),
        job=job,
        same_indptr=same[0],
        same_after=same[1],
        prev_indptr=prev[0],
        prev_after=prev[1],
    )
    width = max((a.shape[1] for a in graph.nvl_links), default=1)
    rows = np.full((nvls, width), -1, dtype=np.int64)
    start = 0
    for links in graph.nvl_links:
        rows[start : start + links.shape[0], : links.shape[1]] = links
        start += links.shape[0]
    return CollectivePlan(
        connections=connections,
        segments=Paths.from_rows(rows),
        unrolled=unroll(template, rounds),
        rounds=rounds,
        jobs=jobs,
        algorithms=algorithms,
        nvlink=graph.nvlink,
    )


def _cat(parts: list[np.ndarray], dtype: type) -> np.ndarray:
    return np.concatenate(parts).astype(dtype) if parts else np.empty(0, dtype=dtype)


def _with_job(flows: Flows, job: np.ndarray) -> Flows:
    return Flows(
        src=flows.src,
        dst=flows.dst,
        size_bytes=flows.size_bytes,
        start_s=flows.start_s,
        tenant=flows.tenant,
        job=job.astype(np.int64),
        connection=flows.connection,
        src_qp=flows.src_qp,
        dst_qp=flows.dst_qp,
        sport=flows.sport,
    )


def _units_of(edges: np.ndarray, nets: int, q: int) -> np.ndarray:
    """Unit ids of super-edges: network hop i -> i*q .. i*q+q-1; NVLink segment -1-j -> nets*q + j."""
    edges = np.asarray(edges, dtype=np.int64)
    net = edges >= 0
    out = [np.repeat(edges[net] * q, q) + np.tile(np.arange(q), int(net.sum()))]
    out.append(nets * q + (-1 - edges[~net]))
    return np.concatenate(out)


def _expand_pairs(
    pairs: list[tuple[np.ndarray, np.ndarray]], nets: int, q: int, units: int
) -> tuple[np.ndarray, np.ndarray]:
    """Super-edge dependency pairs as unit pairs (every QP of the waiter waits for every QP of the other)."""
    if not pairs:
        return np.zeros(units + 1, dtype=np.int64), np.empty(0, dtype=np.int64)
    waiter = np.concatenate([w for w, _ in pairs]).astype(np.int64)
    after = np.concatenate([a for _, a in pairs]).astype(np.int64)
    w_count = np.where(waiter >= 0, q, 1)
    a_count = np.where(after >= 0, q, 1)
    w_first = np.where(waiter >= 0, waiter * q, nets * q + (-1 - waiter))
    a_first = np.where(after >= 0, after * q, nets * q + (-1 - after))
    per = w_count * a_count
    pair = np.repeat(np.arange(waiter.size), per)
    k = np.arange(int(per.sum())) - np.repeat(np.cumsum(per) - per, per)
    unit_w = w_first[pair] + k // a_count[pair]
    unit_a = a_first[pair] + k % a_count[pair]
    return pairs_to_csr(unit_w, unit_a, units)
