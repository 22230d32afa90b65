"""Use cases behind `cloudtwin nic offload` and `cloudtwin nic boot`: a scenario's NICs
accounted from its workload's flows, a connection storm, and every NIC's measured boot."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from cloudtwin.scenario.model import CollectiveWorkload, PerftestWorkload, Scenario
from cloudtwin.smartnic.boot import BootReport, boot_hosts
from cloudtwin.smartnic.capacity import tier_capacity_bps
from cloudtwin.smartnic.flowcache import StormResult, storm
from cloudtwin.smartnic.offload import HostTraffic, OffloadReport, account
from cloudtwin.smartnic.placement import plan_nics
from cloudtwin.smartnic.profiles import SLOW_PATH_CYCLES_PER_FLOW, SLOW_PATH_CYCLES_PER_PACKET, X86_HZ
from cloudtwin.topology.builders import build_topology
from cloudtwin.topology.topology import Topology

__all__ = ["NicOffload", "boot_nics", "nic_offload"]


@dataclass(frozen=True)
class NicOffload:
    """The offload report of a scenario, with its storm when it describes one."""

    scenario: str
    report: OffloadReport
    storm: StormResult | None
    traffic: str

    def to_json(self) -> dict[str, object]:
        document = self.report.to_json()
        document["scenario"] = self.scenario
        document["traffic"] = self.traffic
        if self.storm is not None:
            document["storm"] = self.storm.to_json()
        return document


def _host_traffic(scenario: Scenario, topology: Topology) -> tuple[HostTraffic, str]:
    """Bytes and flows per host from the workload's flows; for a training or HPL workload,
    every host's NICs busy in both directions (their gradient and panel rings)."""
    hosts = topology.host_count
    line = np.full(hosts, topology.nic_rate_bps * topology.nics_per_host)
    workload = scenario.workload
    if isinstance(workload, PerftestWorkload | CollectiveWorkload):
        from cloudtwin.evaluation.run import build_flows

        flows = build_flows(scenario, topology)
        host_of_node = np.full(topology.node_count, -1, dtype=np.int64)
        host_of_node[topology.host_nics.ravel()] = np.repeat(np.arange(hosts), topology.nics_per_host)
        src, dst = host_of_node[flows.src], host_of_node[flows.dst]
        size = flows.size_bytes.astype(float)
        traffic = HostTraffic(
            np.bincount(src, size, hosts),
            np.bincount(dst, size, hosts),
            np.bincount(src, minlength=hosts).astype(float),
            np.bincount(dst, minlength=hosts).astype(float),
            line,
            topology.nics_per_host,
        )
        return traffic, f"{len(flows)} flows of the {workload.kind} workload"
    busy, no_new_flows = np.ones(hosts), np.zeros(hosts)  # rings keep their QPs: no new flows
    traffic = HostTraffic(busy, busy, no_new_flows, no_new_flows, line, topology.nics_per_host)
    return traffic, f"every host's NICs busy in both directions ({workload.kind} rings)"


def nic_offload(scenario: Scenario) -> NicOffload:
    """Offload accounting for every host of `scenario` (and its connection storm, if any)."""
    topology = build_topology(scenario)
    plan = plan_nics(scenario.nic, topology.host_count)
    traffic, described = _host_traffic(scenario, topology)
    quarantined = np.array([not r.attested for r in boot_nics(scenario, topology.host_count)])
    names = tuple(f"host{h}" for h in range(topology.host_count))
    report = account(plan, traffic, names, quarantined)
    return NicOffload(scenario.name, report, _storm(scenario, topology, plan), described)


def _storm(scenario: Scenario, topology: Topology, plan) -> StormResult | None:  # noqa: ANN001
    spec = scenario.nic.storm
    if spec is None:
        return None
    nic = plan.nics[plan.nic_of_host[0]]
    line = topology.nic_rate_bps
    fast = min([line] + [tier_capacity_bps(nic, t, plan) for t in ("nic-cores", "pipeline")])
    software = nic.all_on_host()
    chain = float(plan.packet_share @ software.load("host").cycles(plan.packet_bytes))
    upcall_pps = software.profile.host.packets_per_s(chain + SLOW_PATH_CYCLES_PER_PACKET)
    slow = min(upcall_pps * plan.mean_packet_bytes * 8, line)  # upcalled packets, in host software
    pipeline = nic.profile.pipeline
    if pipeline is not None and nic.load("pipeline").functions:
        insertions = pipeline.insertions_per_s
    else:
        insertions = nic.profile.host.cores * X86_HZ / SLOW_PATH_CYCLES_PER_FLOW
    return storm(
        fast,
        slow,
        plan.new_flows_per_s,
        spec.new_flows_per_s,
        insertions,
        spec.start,
        spec.duration,
        spec.flow_lifetime,
    )


def boot_nics(scenario: Scenario, host_count: int | None = None) -> list[BootReport]:
    """Every host's NIC booted through the signed chain; `nic.boot_faults` alter stages."""
    hosts = scenario.host_count if host_count is None else host_count
    return boot_hosts(scenario.nic, hosts, scenario.seed)
