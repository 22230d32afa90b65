"""One cloud's operations data: the faulted run's gateway, routing and tenant-traffic logs and
telemetry (as a federation run emits them) and every site's failed measured boots, each
NIC named with its site, so that `diagnose` ranks from the same run `evaluate` reports."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from cloudtwin.diagnosis.attestation import record_attestation
from cloudtwin.diagnosis.federation import emit_federation
from cloudtwin.engine.simulator import SimResult
from cloudtwin.errors import FederationError
from cloudtwin.smartnic.boot import boot_hosts
from cloudtwin.store.database import Store
from cloudtwin.store.twin_tables import TwinMeta
from cloudtwin.twin.cloud import CloudRun
from cloudtwin.twin.federation import FederationRun

__all__ = ["emit_cloud"]


def _traffic_result(run: CloudRun) -> SimResult:
    assert run.traffic is not None
    rows = run.traffic.ids
    return SimResult(run.start_s[rows], run.finish_s[rows], run.events, 0)


def federation_view(clean: CloudRun, hit: CloudRun) -> FederationRun:
    """The federated traffic of the cloud's two runs as a federation run (what the gateways,
    WAN edges and tenant flows log and measure)."""
    if hit.traffic is None or clean.traffic is None:
        raise FederationError(
            "federation.traffic", "diagnosing a cloud needs federated traffic to observe (give traffic:)"
        )
    traffic = hit.traffic
    joined = hit.joined
    paths = traffic.paths
    rate_cap = np.array(
        [joined.sites[int(hit.plan.ep_site[s])].topology.nic_rate_bps for s in traffic.flows.src]
    )
    latency = np.bincount(paths.flow_of_entry, joined.latency_s[paths.link_ids], minlength=paths.flow_count)
    named = hit.plan.scenario.model_copy(update={"name": hit.cloud.name})  # the run is the cloud's
    return FederationRun(
        plan=replace(hit.plan, scenario=named),
        joined=joined,
        flows=traffic.flows,
        paths=paths,
        capacity_bps=hit.capacity_bps[: joined.link_count],
        rate_cap_bps=rate_cap,
        latency_s=latency,
        changes=list(traffic.changes),
        failovers=list(traffic.failovers),
        stalled=traffic.stalled,
        baseline=_traffic_result(clean),
        result=_traffic_result(hit),
    )


def emit_cloud(store: Store, clean: CloudRun, hit: CloudRun) -> TwinMeta:
    """Write the cloud's operations data into the store (replacing any earlier run's)."""
    meta = emit_federation(store, federation_view(clean, hit))
    for part in hit.sites:
        scenario = part.scenario
        if scenario.nic.boot_faults:
            reports = boot_hosts(scenario.nic, part.topology.host_count, scenario.seed)
            record_attestation(store, scenario, reports, prefix=f"{part.name}.")
    return meta
