"""Running a scenario end to end: topology, flows, routing, simulation, summary."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from cloudtwin.engine.simulator import Progress, SimResult, simulate
from cloudtwin.errors import WorkloadError
from cloudtwin.evaluation.metrics import RunSummary, summarize
from cloudtwin.flows import Flows
from cloudtwin.routing.strategy import RoutingContext, Strategy, load_strategy
from cloudtwin.scenario.model import CollectiveWorkload, PerftestWorkload, Scenario
from cloudtwin.smartnic.coupling import NicCoupling, couple_nics
from cloudtwin.smartnic.placement import plan_nics
from cloudtwin.tenancy.overlay import outer_headers
from cloudtwin.topology.builders import build_topology
from cloudtwin.topology.paths import Paths
from cloudtwin.topology.topology import Topology
from cloudtwin.workloads.perftest import TenantHosts, perftest_flows

__all__ = ["Run", "build_flows", "couple_scenario_nics", "route_flows", "run_scenario", "tenant_groups"]


@dataclass(frozen=True, eq=False)
class Run:
    """Everything one simulated run produced."""

    scenario: Scenario
    strategy: str
    topology: Topology
    flows: Flows
    paths: Paths
    result: SimResult
    summary: RunSummary


def tenant_groups(scenario: Scenario) -> list[TenantHosts]:
    """Host groups per tenant; without tenants, every host in one group with no overlay."""
    if not scenario.tenants:
        return [(-1, np.arange(scenario.host_count))]
    return [(i, np.array(t.hosts, dtype=np.int64)) for i, t in enumerate(scenario.tenants)]


def build_flows(scenario: Scenario, topology: Topology) -> Flows:
    """The flows of the scenario's workload (for a collective: its network QPs, as routed)."""
    if isinstance(scenario.workload, CollectiveWorkload):
        from cloudtwin.evaluation.collective import plan_for

        return plan_for(scenario, topology).connections
    kind = scenario.workload.kind
    if not isinstance(scenario.workload, PerftestWorkload):
        command = "train" if kind == "training" else "hpl"
        raise WorkloadError(f"workload.kind: {kind} is predicted by `cloudtwin {command}`, not run here")
    sport_per_qp = scenario.hosts.udp_sport == "per-qp"
    return perftest_flows(
        scenario.workload, topology, tenant_groups(scenario), scenario.seed, sport_per_qp
    )


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
    return strategy.route(context)


def couple_scenario_nics(
    scenario: Scenario, topology: Topology, capacity_bps: np.ndarray, paths: Paths
) -> NicCoupling:
    """The scenario's NIC datapath as engine constraints (nothing added with `basic` NICs)."""
    plan = plan_nics(scenario.nic, topology.host_count)
    if not plan.modelled:
        return NicCoupling(capacity_bps, paths, np.zeros(paths.flow_count), 0)
    return couple_nics(topology, capacity_bps, paths, plan)


def run_scenario(
    scenario: Scenario, strategy: str | None = None, progress: Progress | None = None
) -> Run:
    """Simulate the scenario under `strategy` (default: the scenario's own)."""
    spec = strategy or scenario.routing.strategy
    chosen = load_strategy(spec)
    topology = build_topology(scenario)
    if isinstance(scenario.workload, CollectiveWorkload):
        return _run_collective(scenario, topology, chosen, progress)
    flows = build_flows(scenario, topology)
    paths = route_flows(scenario, topology, flows, chosen)
    rate = np.full(len(flows), topology.nic_rate_bps)
    coupled = couple_scenario_nics(scenario, topology, topology.capacity_bps, paths)
    latency = paths.latency_s(topology)
    result = simulate(
        coupled.paths,
        coupled.capacity_bps,
        flows.size_bytes,
        flows.start_s,
        rate,
        latency_s=latency + coupled.extra_latency_s if coupled.changed else latency,
        progress=progress,
    )
    summary = summarize(
        scenario.name,
        chosen.name,
        flows.connection,
        flows.size_bytes,
        result.start_s,
        result.finish_s,
        rate,
    )
    return Run(scenario, chosen.name, topology, flows, paths, result, summary)


def _run_collective(
    scenario: Scenario, topology: Topology, chosen: Strategy, progress: Progress | None
) -> Run:
    """A collective's run: `flows` are its routed QPs; the summary groups every round's
    network flows by the QP that carries them (NVLink segments are left out)."""
    from cloudtwin.evaluation.collective import simulate_collective

    collective = simulate_collective(scenario, topology, chosen, progress=progress)
    unrolled = collective.plan.unrolled
    net = unrolled.route < len(collective.plan.connections)
    if not net.any():
        net[:] = True  # a single host: only NVLink
    summary = summarize(
        scenario.name,
        chosen.name,
        unrolled.route[net],
        unrolled.size_bytes[net],
        collective.result.start_s[net],
        collective.result.finish_s[net],
        unrolled.rate_cap_bps[net],
    )
    return Run(
        scenario,
        chosen.name,
        topology,
        collective.plan.connections,
        collective.paths,
        collective.result,
        summary,
    )
