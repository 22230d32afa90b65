"""A federation's traffic run assembled for the engine (`TrafficDriver`), with and without its
gateway faults.

The inter-site flows share every link with the site-local ones; when a site's active
gateway fails, its links go to zero capacity (the flows through it stall) and after the
failover time the flows move to the standby gateway. The result reports what the engine
computed: throughput, completion, the bytes the faulted run fell behind the fault-free
one, and each failover's parts.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from cloudtwin.engine.simulator import Change, SimResult
from cloudtwin.errors import EngineError, FederationError
from cloudtwin.intercloud.addressing import nat_port_usage
from cloudtwin.intercloud.plan import FederationPlan
from cloudtwin.intercloud.traffic import Failover, FederatedFlows, federated_flows, tunnel_capacity
from cloudtwin.topology.estimate import check_federation
from cloudtwin.topology.paths import Paths
from cloudtwin.topology.sites import SitesTopology, join_sites
from cloudtwin.twin.run import Run, attach_drivers
from cloudtwin.twin.timeline import bytes_behind
from cloudtwin.twin.traffic import TrafficDriver

__all__ = ["FederationRun", "simulate_federation"]


@dataclass(frozen=True, eq=False)
class FederationRun:
    """The joined sites, the flows and paths, the changes, and both engine results."""

    plan: FederationPlan
    joined: SitesTopology
    flows: FederatedFlows
    paths: Paths
    capacity_bps: np.ndarray
    rate_cap_bps: np.ndarray
    latency_s: np.ndarray
    changes: list[Change]
    failovers: list[Failover]
    stalled: np.ndarray
    baseline: SimResult
    result: SimResult

    def nat_usage(self) -> dict[str, dict[str, int]]:
        """Per site gateway: global-nat translations in use, flows refused for want of a port."""
        return _nat_usage(self)

    @property
    def inter_site(self) -> np.ndarray:
        """Which flows cross sites."""
        return self.plan.ep_site[self.flows.src] != self.plan.ep_site[self.flows.dst]

    def summary(self) -> dict[str, object]:
        """Throughput, completion and resiliency figures, as JSON."""
        result, base = self.result, self.baseline
        total = float(self.flows.size_bytes.sum())
        inter = self.inter_site
        fct = result.finish_s - result.start_s
        networks = {}
        for n, name in enumerate(self.plan.network_names):
            rows = np.flatnonzero(self.flows.network == n)
            if rows.size:
                networks[name] = {
                    "flows": int(rows.size),
                    "completion_s": float(result.finish_s[rows].max()),
                    "throughput_gbps": float(
                        self.flows.size_bytes[rows].sum()
                        * 8
                        / max(result.finish_s[rows].max() - result.start_s[rows].min(), 1e-12)
                        / 1e9
                    ),
                }
        return {
            "flows": len(self.flows),
            "inter_site_flows": int(inter.sum()),
            "completion_s": result.completion_s,
            "baseline_completion_s": base.completion_s,
            "aggregate_gbps": total * 8 / max(result.completion_s, 1e-12) / 1e9,
            "inter_site_fct_s": {
                "p50": float(np.median(fct[inter])) if inter.any() else 0.0,
                "max": float(fct[inter].max()) if inter.any() else 0.0,
            },
            "networks": networks,
            "gateway_faults": [
                {**f.to_json(), "flows_stalled": int(self.stalled[k].sum())}
                for k, f in enumerate(self.failovers)
            ],
            "bytes_delayed": bytes_behind(base, result),
            "nat": self.nat_usage(),
            "slowdown": result.completion_s / base.completion_s if base.completion_s else 1.0,
        }


def _nat_usage(run: FederationRun) -> dict[str, dict[str, int]]:
    plan, flows = run.plan, run.flows
    nat = np.array([plan.mode_of(n) == "global-nat" for n in range(len(plan.network_names))], dtype=bool)
    crossing = run.inter_site & (nat[flows.network] if nat.size else False)
    usage = {}
    for site, name in enumerate(plan.site_names):
        rows = np.flatnonzero(crossing & (plan.ep_site[flows.src] == site))
        if not rows.size:
            continue
        # One translation (a source port of the sender's global address) per flow and destination.
        pairs = flows.src[rows] * plan.endpoint_count + flows.dst[rows]
        _, per_pair = np.unique(pairs, return_counts=True)
        senders = np.unique(flows.src[rows]).size
        used, refused = nat_port_usage(per_pair, addresses=max(senders, per_pair.size))
        usage[name] = {"translations": used, "refused": refused, "global_addresses": senders}
    return usage


def simulate_federation(plan: FederationPlan, seed: int | None = None) -> FederationRun:
    """Run the scenario's `traffic:` over the joined sites, fault-free and with its `gateway_faults:`.

    The run is estimated first (sites, WAN links, flows, memory) and refused with LimitError
    above the scenario's `limits`, before anything is built.
    """
    seed = plan.scenario.seed if seed is None else seed
    check_federation(plan.scenario)
    flows = federated_flows(plan)
    joined = join_sites(plan.scenario)
    capacity = tunnel_capacity(plan, joined)
    hit = TrafficDriver.of(plan, joined, flows, seed=seed)
    baseline = _run(capacity, hit.without_faults())
    try:
        result = _run(capacity, hit)
    except EngineError as err:
        raise FederationError("gateway_faults", f"some flows can never finish ({err})") from err
    part = hit.outcome()
    return FederationRun(
        plan,
        joined,
        flows,
        part.paths,
        capacity,
        hit.rate_cap_bps,
        hit.latency_s,
        part.changes,
        part.failovers,
        part.stalled,
        baseline,
        result,
    )


def _run(capacity_bps: np.ndarray, traffic: TrafficDriver) -> SimResult:
    """The traffic alone on the joined sites' links (the aggregate rate recorded)."""
    run = Run(capacity_bps, timeline=True)
    attach_drivers(run, [traffic], capacity_bps.size)
    return run.run()
