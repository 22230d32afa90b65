"""Operations data from a federation run: what the sites' devices and gateways would have logged
and measured, in the same tables as a single-fabric run, so `cloudtwin diagnose` ranks from them.

- the inventory of the joined sites (site-qualified names: `east.leaf0`, `east.gw0`,
  `east.wan`), with every device's loopback address;
- healthy periodic lines from every switch, gateway and WAN edge router;
- when a gateway fails: its border leaf and WAN edge report their ports to it down, the
  WAN edge loses its BGP session to it, the standby gateway becomes VRRP master after
  detection and election, the peer gateways re-establish their tunnels, and the WAN edge
  learns the routes again after route propagation;
- flow telemetry: every flow's max-min rate at each sample instant, with its path.
"""

from __future__ import annotations

from datetime import timedelta

import numpy as np

from cloudtwin.diagnosis.emit import EmitConfig, Log, node_address
from cloudtwin.diagnosis.joined import joined_inventory, joined_ports, switch_noise
from cloudtwin.diagnosis.rates import DEFAULT_SAMPLE_S, MAX_SAMPLES
from cloudtwin.engine.maxmin import max_min_rates
from cloudtwin.ops.record import LogRecord
from cloudtwin.store.database import Store
from cloudtwin.store.ops_ingest import ingest_records
from cloudtwin.store.twin_tables import TwinMeta, replace_rows
from cloudtwin.twin.federation import FederationRun

__all__ = ["emit_federation", "federation_records"]

def _gateway_events(log: Log, run: FederationRun, ports: list[str]) -> None:
    joined = run.joined
    index = {s.name: i for i, s in enumerate(joined.sites)}
    active = {s.name: 0 for s in joined.sites}
    for info in run.failovers:
        site = joined.sites[index[info.site]]
        gone, standby = site.gateways[active[info.site]], site.gateways[1 - active[info.site]]
        active[info.site] = 1 - active[info.site]
        name = joined.node_names
        for link in joined.links_of(gone).tolist():
            if int(joined.link_dst[link]) == gone:
                device = name[int(joined.link_src[link])]
                log.at(
                    info.at_s,
                    device,
                    "error",
                    "ethpm",
                    f"%ETHPORT-5-IF_DOWN_LINK_FAILURE: Interface "
                    f"{ports[link]} ({joined.link_name(link)}) is down (link failure)",
                )
        log.at(
            info.at_s + info.detection_s,
            name[site.wan_edge],
            "warning",
            "bgp",
            f"%BGP-5-ADJCHANGE: neighbor {node_address(gone)} Down - hold time expired",
        )
        took_over = info.at_s + info.detection_s + info.election_s
        log.at(
            took_over,
            name[standby],
            "notice",
            "vrrp",
            "%VRRP-6-STATECHANGE: vrid 1 state Backup -> Master (master down timer expired)",
        )
        for peer in joined.sites:
            if peer.name != info.site:
                log.at(
                    took_over + info.tunnel_setup_s,
                    name[peer.gateways[active[peer.name]]],
                    "info",
                    "ike",
                    f"%TUNNEL-5-UPDOWN: tunnel to site {info.site} re-established",
                )
        log.at(
            info.at_s + info.total_s,
            name[site.wan_edge],
            "info",
            "bgp",
            f"%BGP-5-ADJCHANGE: neighbor {node_address(standby)} Up",
        )


def federation_records(run: FederationRun, config: EmitConfig, end_s: float) -> list[LogRecord]:
    """Every log line of the run (gateway events and healthy noise), in time order."""
    log = Log(config)
    ports = joined_ports(run.joined)
    _gateway_events(log, run, ports)
    switch_noise(log, run.joined, ports, end_s, np.random.default_rng([run.plan.scenario.seed, 11]))
    return sorted(log.records, key=lambda r: (r.timestamp or config.start, r.source, r.content))


def _epochs(run: FederationRun, times: np.ndarray) -> tuple[list[np.ndarray], list, np.ndarray]:
    capacity, paths = run.capacity_bps.copy(), run.paths
    capacities, all_paths, starts = [capacity.copy()], [paths], [-np.inf]
    for change in sorted(run.changes, key=lambda c: c.time_s):
        if change.link_ids.size:
            capacity[change.link_ids] = change.capacity_bps
        if change.paths is not None:
            paths = paths.replace(np.asarray(change.flows, dtype=np.int64), change.paths)
        capacities.append(capacity.copy())
        all_paths.append(paths)
        starts.append(change.time_s)
    return capacities, all_paths, np.searchsorted(np.array(starts), times, side="right") - 1


def _telemetry(run: FederationRun, config: EmitConfig) -> tuple[dict[str, list], float]:
    result = run.result
    begin, end = float(result.start_s.min()), float(result.finish_s.max())
    interval = max(config.sample_s, (end - begin) / MAX_SAMPLES)
    times = np.arange(begin, end, interval)
    capacities, all_paths, epoch = _epochs(run, times)
    sending_until = result.finish_s - run.latency_s
    names = run.joined.node_names
    rows: dict[str, list] = {k: [] for k in ("ts", "flow", "src", "dst", "rate_bps", "cap_bps", "path")}
    for i, t in enumerate(times.tolist()):
        active = np.flatnonzero((result.start_s <= t) & (t < sending_until))
        if not active.size:
            continue
        paths = all_paths[int(epoch[i])]
        lengths = paths.indptr[active + 1] - paths.indptr[active]
        take = np.concatenate([paths.link_ids[paths.indptr[f] : paths.indptr[f + 1]] for f in active])
        rate = max_min_rates(
            np.concatenate(([0], np.cumsum(lengths))),
            take,
            capacities[int(epoch[i])],
            run.rate_cap_bps[active],
        )
        when = config.start + timedelta(seconds=config.history_s + t)
        for f, r in zip(active.tolist(), rate.tolist(), strict=True):
            src = run.joined.sites[int(run.plan.ep_site[run.flows.src[f]])]
            rows["ts"].append(when)
            rows["flow"].append(f)
            rows["src"].append(names[int(run.joined.link_src[paths.path(f)[0]])] if src else "")
            rows["dst"].append(names[int(run.joined.link_dst[paths.path(f)[-1]])])
            rows["rate_bps"].append(float(r))
            rows["cap_bps"].append(float(run.rate_cap_bps[f]))
            rows["path"].append([int(k) for k in paths.path(f)])
    return rows, interval


def emit_federation(store: Store, run: FederationRun, config: EmitConfig | None = None) -> TwinMeta:
    """Write the federation run's logs, telemetry and inventory into the store (replacing any run)."""
    config = config or EmitConfig(sample_s=DEFAULT_SAMPLE_S, noise_per_switch_s=4.0)
    samples, interval = _telemetry(run, config)
    end_s = float(run.result.finish_s.max()) + config.tail_s
    prefix = f"twin/{run.plan.scenario.name}/"
    meta = TwinMeta(
        run=run.plan.scenario.name,
        strategy="federation",
        start=config.start,
        end=config.start + timedelta(seconds=config.history_s + end_s),
        sample_s=interval,
        log_prefix=prefix,
    )
    nic_rows: dict[str, list] = {
        k: [] for k in ("ts", "nic", "pfc_pause_rx", "ecn_marked", "cnp_sent", "ack_timeouts")
    }
    replace_rows(
        store,
        meta,
        {
            **joined_inventory(run.joined, joined_ports(run.joined), run.joined.capacity_bps),
            "twin_flow_samples": samples,
            "twin_nic_counters": nic_rows,
        },
    )
    by_device: dict[str, list[LogRecord]] = {}
    for record in federation_records(run, config, end_s):
        by_device.setdefault(record.source, []).append(record)
    for device in sorted(by_device):
        ingest_records(store, by_device[device], source=prefix + device)
    return meta
