"""Offload accounting: host cores, NIC-core utilisation, pipeline packets/s, slow-path share and
added latency per host, from the traffic each host sends and receives.

A host's datapath is accounted while it communicates: each direction it has flows in
runs at the rate its NICs and datapath tiers allow (the busy-period load). Host cores
are the x86 cores its host-tier functions and slow path need at that load; cores saved
compare with every function of the same chain in host software at the same throughput.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from cloudtwin.smartnic.capacity import tier_capacity_bps, tier_latency_s, tier_packets_per_s
from cloudtwin.smartnic.flowcache import slow_path_share
from cloudtwin.smartnic.placement import HostNic, NicPlan
from cloudtwin.smartnic.profiles import SLOW_PATH_CYCLES_PER_FLOW

__all__ = ["HostTraffic", "OffloadReport", "account"]


@dataclass(frozen=True)
class HostTraffic:
    """Per host: bytes and flows sent and received, and its NICs' line rate in total."""

    tx_bytes: np.ndarray
    rx_bytes: np.ndarray
    tx_flows: np.ndarray
    rx_flows: np.ndarray
    line_rate_bps: np.ndarray
    nics_per_host: int = 1


@dataclass(frozen=True)
class OffloadReport:
    """Per-host figures (arrays over hosts) and totals."""

    host_names: tuple[str, ...]
    profile: tuple[str, ...]
    throughput_bps: np.ndarray
    host_cores: np.ndarray
    baseline_host_cores: np.ndarray
    nic_core_utilization: np.ndarray
    pipeline_pps: np.ndarray
    slow_path_share: np.ndarray
    added_latency_s: np.ndarray
    quarantined: np.ndarray

    def to_json(self) -> dict[str, object]:
        hosts = {}
        for i, name in enumerate(self.host_names):
            hosts[name] = {
                "profile": self.profile[i],
                "host_cores": float(self.host_cores[i]),
                "nic_core_utilization": float(self.nic_core_utilization[i]),
                "pipeline_pps": float(self.pipeline_pps[i]),
                "slow_path_share": float(self.slow_path_share[i]),
                "added_latency_s": float(self.added_latency_s[i]),
                "throughput_gbps": float(self.throughput_bps[i] / 1e9),
                "host_cores_without_offload": float(self.baseline_host_cores[i]),
                "quarantined": bool(self.quarantined[i]),
            }
        return {"hosts": hosts, "totals": self.totals()}

    def totals(self) -> dict[str, float]:
        return {
            "host_cores": float(self.host_cores.sum()),
            "host_cores_saved": float((self.baseline_host_cores - self.host_cores).sum()),
            "host_cores_without_offload": float(self.baseline_host_cores.sum()),
            "throughput_gbps": float(self.throughput_bps.sum() / 1e9),
            "hosts": len(self.host_names),
            "quarantined_hosts": int(self.quarantined.sum()),
        }


def _busy_rate(nic: HostNic, plan: NicPlan, offered_bps: np.ndarray, nics: int) -> np.ndarray:
    """Datapath throughput: the offered load capped by every tier (tiers serve both
    directions; the host's cores serve all its NICs, each NIC has its own cores and pipeline)."""
    cap = min(
        tier_capacity_bps(nic, "host", plan),
        nics * tier_capacity_bps(nic, "nic-cores", plan),
        nics * tier_capacity_bps(nic, "pipeline", plan),
    )
    return np.minimum(offered_bps, cap)


def _host_cycles(nic: HostNic, plan: NicPlan) -> float:
    load = nic.load("host")
    return float(plan.packet_share @ (load.cycles_per_packet + load.cycles_per_byte * plan.packet_bytes))


def account(
    plan: NicPlan, traffic: HostTraffic, host_names: tuple[str, ...], quarantined: np.ndarray | None = None
) -> OffloadReport:
    """The offload figures of every host (vectorised over the hosts of each NIC group)."""
    hosts = len(host_names)
    quarantined = np.zeros(hosts, dtype=bool) if quarantined is None else quarantined
    offered = traffic.line_rate_bps * ((traffic.tx_bytes > 0).astype(float) + (traffic.rx_bytes > 0))
    offered = np.where(quarantined, 0.0, offered)
    fields = {k: np.zeros(hosts) for k in ("rate", "cores", "base", "util", "pps", "slow", "lat")}
    for index, nic in enumerate(plan.nics):
        mine = plan.nic_of_host == index
        if not mine.any():
            continue
        _account_group(plan, nic, traffic, offered, mine, fields)
    for name in ("cores", "base", "util", "pps", "slow"):
        fields[name][quarantined] = 0.0  # a quarantined port moves nothing
    return OffloadReport(
        host_names,
        tuple(plan.nics[i].profile.name for i in plan.nic_of_host),
        fields["rate"],
        fields["cores"],
        fields["base"],
        fields["util"],
        fields["pps"],
        fields["slow"],
        fields["lat"],
        quarantined,
    )


def _account_group(
    plan: NicPlan,
    nic: HostNic,
    traffic: HostTraffic,
    offered: np.ndarray,
    mine: np.ndarray,
    out: dict[str, np.ndarray],
) -> None:
    if not nic.profile.modelled:
        out["rate"][mine] = offered[mine]
        return
    rate = _busy_rate(nic, plan, offered[mine], traffic.nics_per_host)
    pps = rate / (8 * plan.mean_packet_bytes)
    flows = traffic.tx_flows[mine] + traffic.rx_flows[mine]
    volume = traffic.tx_bytes[mine] + traffic.rx_bytes[mine]
    busy_s = np.where(rate > 0, volume * 8 / np.maximum(rate, 1e-9), 0.0)
    new_flows = plan.new_flows_per_s or 0.0
    flow_rate = (
        np.full(rate.size, new_flows)
        if new_flows
        else np.where(busy_s > 0, flows / np.maximum(busy_s, 1e-12), 0.0)
    )
    insert_rate = _insertions_per_s(nic)
    slow = np.array([slow_path_share(r, insert_rate) for r in flow_rate])
    setup_cycles = SLOW_PATH_CYCLES_PER_FLOW + nic.load("host").setup_cycles_per_flow
    out["rate"][mine] = rate
    hz = nic.profile.host.clock_hz
    out["cores"][mine] = pps * _host_cycles(nic, plan) / hz + flow_rate * setup_cycles / hz
    baseline = nic.all_on_host()  # the same traffic with every function in host software
    base_setup = SLOW_PATH_CYCLES_PER_FLOW + baseline.load("host").setup_cycles_per_flow
    base_hz = baseline.profile.host.clock_hz
    out["base"][mine] = pps * _host_cycles(baseline, plan) / base_hz + flow_rate * base_setup / base_hz
    nic_pps = tier_packets_per_s(nic, "nic-cores", plan) * traffic.nics_per_host
    out["util"][mine] = np.minimum(pps / nic_pps, 1.0) if np.isfinite(nic_pps) else 0.0
    out["pps"][mine] = pps if nic.load("pipeline").functions else 0.0
    out["slow"][mine] = slow
    out["lat"][mine] = sum(tier_latency_s(nic, t) for t in ("host", "nic-cores", "pipeline"))


def _insertions_per_s(nic: HostNic) -> float:
    """How fast new flows enter the flow cache: the pipeline's insertion rate when the
    pipeline holds functions, else what the slow path's share of host cores sets up."""
    pipeline = nic.profile.pipeline
    if pipeline is not None and nic.load("pipeline").functions:
        return pipeline.insertions_per_s
    return nic.profile.host.cores * nic.profile.host.clock_hz / SLOW_PATH_CYCLES_PER_FLOW
