"""How much memory a scenario's fabric and traffic will take, known before anything is built.

The figures are the sizes of the arrays the builders, the path tables and the workload
generators allocate, computed from the scenario's numbers alone: node and link tables,
the out-link table (nodes x largest out-degree), the hop table from every node to every
edge switch (a float64 shortest-path matrix and its int16 copies) and, for perftest
traffic, the flow table and its paths. A run whose estimate is above `limits.memory` is
refused with the estimate, so a typo (a million hosts, k=180) costs a second, not the
machine.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sized
from dataclasses import dataclass

from cloudtwin.errors import LimitError
from cloudtwin.scenario.cloud import CloudScenario
from cloudtwin.scenario.federation import FederationScenario
from cloudtwin.scenario.limits import Limits
from cloudtwin.scenario.model import (
    CollectiveWorkload,
    FatTreeFabric,
    FlowsWorkload,
    PerftestWorkload,
    RailOptimizedFabric,
    Scenario,
)
from cloudtwin.scenario.units import format_size

__all__ = [
    "MemoryEstimate",
    "check_cloud",
    "check_federation",
    "check_memory",
    "collective_ranks",
    "estimate_flows",
    "estimate_memory",
]

#: Bytes per link at the build's peak: the cable lists and their concatenation coexist
#: (source, destination, capacity: 2 x 24), latency and state (9), and the sort order and
#: column temporaries of the out-link table (16).
_LINK_BYTES = 2 * 24 + 9 + 16
#: Bytes per node: kind, index, edge switch, down link, edge slot.
_NODE_BYTES = 1 + 8 * 4
#: Bytes per hop-table cell: the float64 shortest-path result, its int16 copy and transpose.
_HOP_CELL_BYTES = 8 + 2 + 2
#: Bytes per flow: the ten int64/float64 columns of `Flows`, rate cap and latency.
_FLOW_BYTES = 8 * 12
#: Bytes per path entry (link id and weight) and per hop of the routing work table.
_PATH_ENTRY_BYTES = 8 * 2 + 8
#: Bytes per flow and candidate next hop while routing: link ids and the usable mask.
_CANDIDATE_BYTES = 8 + 8


@dataclass(frozen=True)
class MemoryEstimate:
    """Estimated bytes by part; `total_bytes` is their sum."""

    parts: dict[str, int]

    @property
    def total_bytes(self) -> int:
        """All parts together."""
        return sum(self.parts.values())

    def describe(self) -> str:
        """`fabric hop table 181GiB, ...`, largest first."""
        ranked = sorted(self.parts.items(), key=lambda kv: -kv[1])
        return ", ".join(f"{name} {_human(size)}" for name, size in ranked if size > 0)


def _fabric_shape(scenario: Scenario) -> tuple[int, int, int, int, int]:
    """Nodes, links, edge switches, largest out-degree and the longest path in links."""
    fabric, nics = scenario.fabric, scenario.hosts.nics
    if isinstance(fabric, FatTreeFabric):
        k, half = fabric.k, fabric.k // 2
        edges = k * half
        n_nics = edges * half
        nodes = n_nics + 2 * edges + half * half
        links = 2 * (n_nics + 2 * k * half * half)
        return nodes, links, edges, max(k, 1), 6
    groups = fabric.leaves // nics if isinstance(fabric, RailOptimizedFabric) else fabric.leaves
    n_nics = groups * fabric.hosts_per_leaf * nics
    uplinks = fabric.leaves * fabric.spines * fabric.uplinks_per_spine
    nodes = n_nics + fabric.leaves + fabric.spines
    links = 2 * (n_nics + uplinks)
    hosts_per_leaf = fabric.hosts_per_leaf * (1 if isinstance(fabric, RailOptimizedFabric) else nics)
    degree = max(
        hosts_per_leaf + fabric.spines * fabric.uplinks_per_spine,
        fabric.leaves * fabric.uplinks_per_spine,
    )
    return nodes, links, fabric.leaves, degree, 4


def _perftest_flows(workload: PerftestWorkload, hosts: int) -> int:
    """Flows a perftest pattern makes over `hosts` hosts (all hosts take part)."""
    if workload.pattern == "all-to-all":
        pairs = hosts * (hosts - 1)
    elif workload.pattern == "incast":
        pairs = min(workload.incast_senders or hosts - 1, hosts - 1)
    elif workload.pattern == "pairs":
        pairs = hosts // 2
    else:
        pairs = hosts
    return max(pairs, 0) * workload.qps


def collective_ranks(scenario: Scenario, workload: CollectiveWorkload) -> list[int]:
    """Ranks of each collective job: one job over `ranks`, or one per tenant (or all GPUs)."""
    gpus = scenario.hosts.gpus
    if workload.ranks is not None:
        return [len(workload.ranks)]
    if scenario.tenants:
        return [len(t.hosts) * gpus for t in scenario.tenants]
    return [scenario.host_count * gpus]


def _alltoall_pairs(scenario: Scenario, workload: CollectiveWorkload) -> int:
    if workload.op != "alltoall":
        return 0
    return sum(n * (n - 1) for n in collective_ranks(scenario, workload))


def estimate_flows(scenario: Scenario) -> int:
    """Flows of the scenario's perftest traffic, alltoall collectives and listed flows (at
    the workload's QPs a row)."""
    jobs = [scenario.workload] if not scenario.workloads else list(scenario.workloads)
    flows = 0
    for job in jobs:
        if isinstance(job, PerftestWorkload):
            flows += _perftest_flows(job, scenario.host_count)
        elif isinstance(job, CollectiveWorkload):
            flows += _alltoall_pairs(scenario, job)
        elif isinstance(job, FlowsWorkload):
            table = job.table
            listed = len(table) if isinstance(table, Sized) else len(job.rows)
            flows += listed * job.qps
    return flows


def estimate_memory(scenario: Scenario, flows: int | None = None) -> MemoryEstimate:
    """The memory the scenario's fabric tables and traffic will take: `flows` engine flows
    (by default its workload's, `estimate_flows`)."""
    nodes, links, edges, degree, hops = _fabric_shape(scenario)
    parts = {
        "fabric links": links * _LINK_BYTES,
        "fabric nodes": nodes * _NODE_BYTES,
        "out-link table": nodes * degree * 8,
        "hop table": nodes * edges * _HOP_CELL_BYTES,
    }
    flows = estimate_flows(scenario) if flows is None else flows
    parts["flows"] = flows * _FLOW_BYTES
    parts["paths"] = flows * (hops + 1) * _PATH_ENTRY_BYTES
    parts["next-hop candidates"] = flows * degree * _CANDIDATE_BYTES
    return MemoryEstimate(parts)


def _check_migrations(count: int, limit: int) -> None:
    if count > limit:
        raise LimitError(
            f"the scenario has {count:,} live migrations, above limits.migrations = "
            f"{limit:,} (larger runs can take many minutes); migrate "
            "fewer VMs at once, or raise limits.migrations",
            "limits.migrations",
        )


def _check_flows(flows: int, limit: int) -> None:
    if flows > limit:
        raise LimitError(
            f"the scenario makes {flows:,} flows in one simulation, above limits.flows = "
            f"{limit:,} (larger runs can take many minutes); use fewer "
            "hosts, GPUs or QPs, or raise limits.flows",
            "limits.flows",
        )


def _check_total(estimate: MemoryEstimate, limit: int) -> None:
    if estimate.total_bytes > limit:
        raise LimitError(
            f"the scenario needs about {_human(estimate.total_bytes)} of memory "
            f"({estimate.describe()}), above limits.memory = {_human(limit)}; make the "
            "fabric or the workload smaller, or raise limits.memory",
            "limits.memory",
        )
    machine = machine_memory_bytes()
    if machine is not None and estimate.total_bytes > machine:
        raise LimitError(
            f"the scenario needs about {_human(estimate.total_bytes)} of memory "
            f"({estimate.describe()}), more than this machine's {_human(machine)}; raising "
            f"limits.memory (now {_human(limit)}) does not add any: make the fabric or the "
            "workload smaller",
            "limits.memory",
        )


def machine_memory_bytes() -> int | None:
    """The machine's physical memory, or None where the system does not say."""
    try:
        pages, page = os.sysconf("SC_PHYS_PAGES"), os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, ValueError, OSError):
        return None
    return pages * page if pages > 0 and page > 0 else None


def _traffic_flows(federation: FederationScenario) -> int:
    """Flows of the federated networks' traffic: all pairs or a ring of their endpoints."""
    sites = {s.name: s for s in federation.sites}
    networks = {n.name: n for n in federation.networks}
    flows = 0
    for spec in federation.traffic:
        network = networks.get(spec.network)
        if network is None:
            continue  # the planner names the unknown network
        endpoints = sum(
            len(t.hosts) for name in network.sites if name in sites
            for t in sites[name].tenants if t.name == network.tenant
        )
        flows += endpoints * (endpoints - 1) if spec.pattern == "all-pairs" else endpoints
    return flows


_WAN_PAIR_BYTES = 2_300
"""What joining the sites holds per WAN link (both directions, and the pair's model when
the scenario lets every pair of sites be joined): 2.2 KB measured between 300 and 900
sites (178 and 964 MB peak for 44,850 and 404,550 pairs)."""


def _wan_pairs(federation: FederationScenario) -> int:
    """WAN links: the listed ones, or one between every pair of sites when none is listed."""
    sites = len(federation.sites)
    return len(federation.wan) or sites * (sites - 1) // 2


def _check_sites(federation: FederationScenario, limit: int) -> None:
    sites = len(federation.sites)
    if sites > limit:
        pairs = _wan_pairs(federation)
        raise LimitError(
            f"the federation has {sites:,} sites joined by {pairs:,} WAN links (about "
            f"{_human(pairs * _WAN_PAIR_BYTES)} for the WAN alone), above limits.sites = {limit:,} "
            "(larger federations can take many minutes); join fewer sites, or raise limits.sites",
            "limits.sites",
        )


def _check_federation(
    federation: FederationScenario, sites: Iterable[tuple[int, MemoryEstimate]], limits: Limits
) -> MemoryEstimate:
    """The sites' count first (it costs nothing to check), then the sites' own (flows,
    estimate), one by one, then the flows (with the federated traffic) and memory together."""
    _check_sites(federation, limits.sites)
    flows = _traffic_flows(federation)
    parts = {
        "federated flows": flows * _FLOW_BYTES,
        "WAN links": _wan_pairs(federation) * _WAN_PAIR_BYTES,
    }
    for site_flows, estimate in sites:
        flows += site_flows
        for name, size in estimate.parts.items():  # the sites' parts together: one short line
            parts[f"sites' {name}"] = parts.get(f"sites' {name}", 0) + size
    _check_flows(flows, limits.flows)
    total = MemoryEstimate(parts)
    _check_total(total, limits.memory)
    return total


def check_cloud(cloud: CloudScenario) -> MemoryEstimate:
    """One cloud's estimate before anything is built, or LimitError naming the limit it is
    above: every site is checked as a scenario of its own with the cloud's limits, then the
    sites' flows (with the federated traffic) and memory together against the same limits."""
    limits = cloud.limits
    _check_migrations(len(cloud.mobility.migrations), limits.migrations)
    scenarios = (
        site.site_scenario(cloud.seed, cloud.routing, cloud.reaction, limits)
        for site in cloud.federation.sites
    )
    sites = ((estimate_flows(scenario), check_memory(scenario)) for scenario in scenarios)
    return _check_federation(cloud.federation, sites, limits)


def check_federation(federation: FederationScenario) -> MemoryEstimate:
    """A federation's estimate (`cloudtwin federate evaluate`) before anything is built, or
    LimitError naming `limits.sites`, `limits.flows` or `limits.memory`, checked as
    `check_cloud` checks one cloud's, with the federation's own `limits` (a site runs no
    traffic of its own here: its fabric alone counts)."""
    sites = ((0, estimate_memory(site.scenario(), flows=0)) for site in federation.sites)
    return _check_federation(federation, sites, federation.limits)


def check_memory(scenario: Scenario) -> MemoryEstimate:
    """The estimate, or LimitError naming `limits.memory`, `limits.flows` or
    `limits.migrations` when the scenario is above one of them."""
    _check_migrations(len(scenario.mobility.migrations), scenario.limits.migrations)
    _check_flows(estimate_flows(scenario), scenario.limits.flows)
    estimate = estimate_memory(scenario)
    _check_total(estimate, scenario.limits.memory)
    return estimate


def _human(size: int) -> str:
    for unit, scale in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if size >= scale:
            return f"{size / scale:.1f}{unit}"
    return format_size(max(size, 1))
