"""Routing a job's flows: the scenario's tenants as host groups, and a strategy's paths for
flows with the scenario's hashing settings (what every run routes through)."""

from __future__ import annotations

import numpy as np

from cloudtwin.flows import Flows, Paths
from cloudtwin.routing.strategy import RoutingContext, Strategy
from cloudtwin.scenario.model import FlowsWorkload, Scenario
from cloudtwin.tenancy.overlay import outer_headers
from cloudtwin.topology.topology import Topology
from cloudtwin.workloads.perftest import TenantHosts

__all__ = ["route_flows", "tenant_groups", "tenant_name", "tenant_of_host"]


def tenant_groups(scenario: Scenario) -> list[TenantHosts]:
    """Host groups per tenant; without tenants, every host in one group with no overlay."""
    if not scenario.tenants:
        return [(-1, np.arange(scenario.host_count))]
    return [(i, np.array(t.hosts, dtype=np.int64)) for i, t in enumerate(scenario.tenants)]


def tenant_name(scenario: Scenario, tenant: int) -> str:
    """A tenant's name, or `-` for flows outside any tenant."""
    return scenario.tenants[tenant].name if 0 <= tenant < len(scenario.tenants) else "-"


def tenant_of_host(scenario: Scenario) -> np.ndarray:
    """The tenant index owning each host (-1: no overlay)."""
    owner = np.full(scenario.host_count, -1, dtype=np.int64)
    for index, tenant in enumerate(scenario.tenants):
        owner[list(tenant.hosts)] = index
    return owner


def route_flows(scenario: Scenario, topology: Topology, flows: Flows, strategy: Strategy) -> Paths:
    """Paths for `flows` under `strategy`, with the scenario's hashing settings."""
    vnis = np.array([t.vni for t in scenario.tenants] or [0], dtype=np.int64)
    context = RoutingContext(
        topology=topology,
        flows=flows,
        headers=outer_headers(topology, flows, vnis),
        rate_bps=np.full(len(flows), topology.nic_rate_bps),
        hash_kind=scenario.routing.hash,
        per_switch_seed=scenario.routing.per_switch_seed,
        seed=scenario.seed,
    )
    paths = strategy.route(context)
    if isinstance(scenario.workload, FlowsWorkload) and not scenario.workloads:
        # rows that name their own path take it, whatever the strategy
        from cloudtwin.workloads.flowlist import apply_explicit_paths, explicit_paths, workload_table

        chosen = explicit_paths(workload_table(scenario.workload), topology)
        paths = apply_explicit_paths(paths, flows, chosen)
    return paths
