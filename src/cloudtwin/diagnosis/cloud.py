"""One cloud's operations data, every site's, from the faulted run `evaluate` reports.

Names are site-qualified (`west.leaf1`, `east.gw0`, `east.wan`, `west.host7/nic0`), as in
the joined sites' inventory. What the devices log:

- **each site's fabric** (its `faults:`): both ends of a link that goes down or up log
  `%ETHPORT-5-IF_DOWN_LINK_FAILURE` and `%LINK-3-UPDOWN` (a degraded one
  `%ETHPORT-4-IF_ERRORS`); a host logs its NIC's `mlx5_core ... Link down`; a switch drops
  the dead port from its ECMP groups after `local_detect` and loses its BFD and BGP
  sessions after `bfd_detect` (up again on recovery); a dead switch logs nothing;
- **gateways**: a failed gateway's border leaf and WAN edge report their ports to it
  down, the WAN edge loses its BGP session, the standby becomes VRRP master, the peer
  gateways re-establish their tunnels, the WAN edge learns the routes again; a repaired
  gateway's ports come up and it rejoins as the backup;
- **WAN links**: both WAN edges report the port of a cut WAN link down and lose the BGP
  session to the far edge (a degraded one logs `%ETHPORT-4-IF_ERRORS`), up again at its end;
- healthy periodic lines from every switch, gateway and WAN edge, and rare harmless
  transceiver warnings that name a random cable (decoys);
- the NICs that failed measured boot (`diagnosis.attestation`).

Flow telemetry covers every network flow of the run (each site's jobs, the federated
traffic, the migration streams): its rate every `telemetry.sample` seconds, recomputed
from what the engine was given (max-min over the fabric as it was at that instant, as
`diagnosis.rates` does for one fabric), stored once per stretch of instants at the same
rate on the same path (`ts` to
`until_ts`). NIC counters (pauses, ECN marks,
CNPs, ACK timeouts; see `emit.nic_counters`) per NIC and interval, stored when not zero.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import timedelta

import numpy as np

from cloudtwin.diagnosis.attestation import record_attestation
from cloudtwin.diagnosis.emit import (
    ACK_TIMEOUT_S,
    CNP_INTERVAL_S,
    MTU_BYTES,
    PAUSE_QUANTA_BITS,
    EmitConfig,
    Log,
    node_address,
)
from cloudtwin.diagnosis.joined import device_of, joined_inventory, joined_ports, switch_noise
from cloudtwin.engine.maxmin import max_min_rates
from cloudtwin.faults.events import FabricState, expand_faults
from cloudtwin.flows import Paths
from cloudtwin.ops.record import LogRecord
from cloudtwin.scenario.faults import Reaction
from cloudtwin.smartnic.boot import boot_hosts
from cloudtwin.store.database import Store
from cloudtwin.store.ops_ingest import ingest_records
from cloudtwin.store.twin_tables import TwinMeta, replace_rows
from cloudtwin.topology.sites import SitesTopology
from cloudtwin.twin.cloud import CloudRun
from cloudtwin.twin.run import RunHistory
from cloudtwin.twin.wan import wan_fault_links

__all__ = ["CLOUD_NOISE_PER_DEVICE_S", "CLOUD_DECOYS_PER_S", "cloud_records", "emit_cloud"]

#: Healthy periodic lines per second from each switch, gateway and WAN edge.
CLOUD_NOISE_PER_DEVICE_S = 4.0
#: Harmless transceiver warnings naming a random cable, per second over the whole cloud.
CLOUD_DECOYS_PER_S = 0.5
@dataclass
class _Cloud:
    """What the log writers share: the joined sites, their port names and the log."""

    run: CloudRun
    ports: list[str]
    log: Log

    @property
    def joined(self) -> SitesTopology:
        return self.run.joined

    def name(self, node: int) -> str:
        return self.joined.node_names[node]

    def port_down(self, t: float, link: int, down: bool) -> None:
        """The sending node of `link` reports its port down or up."""
        joined = self.joined
        src = int(joined.link_src[link])
        device, port = device_of(self.name(src)), self.ports[link]
        if joined.node_kinds[src] == "nic":
            word = "down" if down else "up"
            self.log.at(
                t,
                device,
                "err" if down else "info",
                "kernel",
                f"mlx5_core {self.name(src)} {port}: Link {word}",
            )
            return
        described = f"{port} ({joined.link_name(link)})"
        if down:
            self.log.at(
                t,
                device,
                "err",
                "ethpm",
                f"%ETHPORT-5-IF_DOWN_LINK_FAILURE: Interface {port} is down (Link failure)",
            )
        self.log.at(
            t,
            device,
            "err" if down else "info",
            "ethpm",
            f"%LINK-3-UPDOWN: Interface {described}, changed state to {'down' if down else 'up'}",
        )

    def port_degraded(self, t: float, link: int, capacity_bps: float) -> None:
        src = int(self.joined.link_src[link])
        device, port = device_of(self.name(src)), self.ports[link]
        self.log.at(
            t,
            device,
            "warning",
            "ethpm",
            f"%ETHPORT-4-IF_ERRORS: Interface {port} ({self.joined.link_name(link)}) FEC errors "
            f"high, effective rate {capacity_bps / 1e9:g} Gbps",
        )

    def sessions(self, t: float, link: int, up: bool, timing: Reaction, local: bool = True) -> None:
        """A switch's ECMP member, BFD and BGP lines for the port of `link` to its peer."""
        joined = self.joined
        src, dst = int(joined.link_src[link]), int(joined.link_dst[link])
        device, port, peer = self.name(src), self.ports[link], node_address(dst)
        if up:
            self.log.at(
                t + timing.bfd_detect,
                device,
                "info",
                "bfd",
                f"%BFD-5-SESSION_STATE_UP: BFD session to neighbor {peer} on interface {port} is up",
            )
            self.log.at(t + timing.bfd_detect, device, "info", "bgp", f"%BGP-5-ADJCHANGE: neighbor {peer} Up")
            return
        if local:
            self.log.at(
                t + timing.local_detect,
                device,
                "warning",
                "urib",
                f"%URIB-5-ECMP_MEMBER_REMOVED: next hop {peer} via {port} removed from ECMP groups",
            )
        self.log.at(
            t + timing.bfd_detect,
            device,
            "err",
            "bfd",
            f"%BFD-5-SESSION_STATE_DOWN: BFD session to neighbor {peer} on interface {port} has "
            "gone down. Reason: Control Detection Time Expired.",
        )
        self.log.at(
            t + timing.bfd_detect,
            device,
            "err",
            "bgp",
            f"%BGP-5-ADJCHANGE: neighbor {peer} Down - BFD session down",
        )


def _site_events(cloud: _Cloud) -> None:
    """Each site's fabric faults as its devices log them, in joined names."""
    timing = cloud.run.cloud.reaction
    for part in cloud.run.sites:
        if not part.scenario.faults:
            continue
        topology, layout = part.topology, part.layout
        states = expand_faults(part.scenario.faults, topology, part.scenario.seed)
        previous = topology.capacity_bps.astype(float)
        for state in states:
            _site_state(cloud, state, previous, layout.link0, layout.node0, timing)
            previous = state.capacity_bps


def _site_state(
    cloud: _Cloud, state: FabricState, previous: np.ndarray, link0: int, node0: int, timing: Reaction
) -> None:
    joined = cloud.joined
    local_src = joined.link_src[link0 : link0 + previous.size] - node0
    alive = np.bincount(local_src, state.capacity_bps > 0, minlength=int(local_src.max()) + 1) > 0
    for link in state.changed.tolist():
        src_kind = joined.node_kinds[int(joined.link_src[link0 + link])]
        if src_kind != "nic" and not alive[int(local_src[link])]:
            continue  # a dead switch logs nothing (a host logs its NIC's link going down)
        was, now = previous[link] > 0, state.capacity_bps[link] > 0
        run_link = link0 + link
        kinds = (
            joined.node_kinds[int(joined.link_src[run_link])],
            joined.node_kinds[int(joined.link_dst[run_link])],
        )
        if was and now:
            cloud.port_degraded(state.time_s, run_link, float(state.capacity_bps[link]))
            continue
        if was == now:
            continue
        cloud.port_down(state.time_s, run_link, down=not now)
        if "nic" not in kinds:
            cloud.sessions(state.time_s, run_link, up=bool(now), timing=timing)


def _gateway_events(cloud: _Cloud) -> None:
    """Gateway failures, failovers and repairs."""
    joined, run = cloud.joined, cloud.run
    index = {s.name: i for i, s in enumerate(joined.sites)}
    active = {s.name: 0 for s in joined.sites}
    faults = run.cloud.federation.gateway_failures()
    for fault, info in zip(faults, run.failovers, strict=True):
        site = joined.sites[index[info.site]]
        gone, standby = site.gateways[active[info.site]], site.gateways[1 - active[info.site]]
        active[info.site] = 1 - active[info.site]
        into = [k for k in joined.links_of(gone).tolist() if int(joined.link_dst[k]) == gone]
        for link in into:
            cloud.port_down(info.at_s, link, down=True)
        cloud.log.at(
            info.at_s + info.detection_s,
            cloud.name(site.wan_edge),
            "warning",
            "bgp",
            f"%BGP-5-ADJCHANGE: neighbor {node_address(gone)} Down - hold time expired",
        )
        took_over = info.at_s + info.detection_s + info.election_s
        cloud.log.at(
            took_over,
            cloud.name(standby),
            "notice",
            "vrrp",
            "%VRRP-6-STATECHANGE: vrid 1 state Backup -> Master (master down timer expired)",
        )
        for peer in joined.sites:
            if peer.name != info.site:
                cloud.log.at(
                    took_over + info.tunnel_setup_s,
                    cloud.name(peer.gateways[active[peer.name]]),
                    "info",
                    "ike",
                    f"%TUNNEL-5-UPDOWN: tunnel to site {info.site} re-established",
                )
        cloud.log.at(
            info.at_s + info.total_s,
            cloud.name(site.wan_edge),
            "info",
            "bgp",
            f"%BGP-5-ADJCHANGE: neighbor {node_address(standby)} Up",
        )
        if fault.until is not None:
            for link in into:
                cloud.port_down(fault.until, link, down=False)
            cloud.log.at(
                fault.until,
                cloud.name(gone),
                "notice",
                "vrrp",
                "%VRRP-6-STATECHANGE: vrid 1 state Init -> Backup",
            )
            cloud.log.at(
                fault.until + info.detection_s,
                cloud.name(site.wan_edge),
                "info",
                "bgp",
                f"%BGP-5-ADJCHANGE: neighbor {node_address(gone)} Up",
            )


def _wan_events(cloud: _Cloud) -> None:
    """WAN links cut, degraded and back, as both WAN edges log them."""
    run, timing = cloud.run, cloud.run.cloud.reaction
    federation = run.cloud.federation
    for fault in federation.wan_faults:
        links = wan_fault_links(federation, cloud.joined, fault).tolist()
        for start, end in fault.windows():
            for link in links:
                if fault.capacity is not None:
                    base = float(run.capacity_bps[link])
                    rate = base * fault.capacity if fault.capacity <= 1 else min(base, fault.capacity)
                    cloud.port_degraded(start, link, rate)
                    continue
                cloud.port_down(start, link, down=True)
                cloud.sessions(start, link, up=False, timing=timing, local=False)
                if np.isfinite(end):
                    cloud.port_down(end, link, down=False)
                    cloud.sessions(end, link, up=True, timing=timing)


def _down(cloud: _Cloud) -> dict[int, list[tuple[float, float]]]:
    """When each switch or gateway is dead (every link out of it down): it logs nothing then."""
    down: dict[int, list[tuple[float, float]]] = defaultdict(list)
    for part in cloud.run.sites:
        if not part.scenario.faults:
            continue
        topology, node0 = part.topology, part.layout.node0
        states = expand_faults(part.scenario.faults, topology, part.scenario.seed)
        for k, state in enumerate(states):
            end = states[k + 1].time_s if k + 1 < len(states) else np.inf
            alive = np.bincount(topology.link_src, state.capacity_bps > 0, minlength=topology.node_count) > 0
            for node in np.flatnonzero(~alive).tolist():
                down[node0 + node].append((state.time_s, end))
    joined = cloud.joined
    index = {s.name: i for i, s in enumerate(joined.sites)}
    active = {s.name: 0 for s in joined.sites}
    for fault in cloud.run.cloud.federation.gateway_failures():
        site = joined.sites[index[fault.site]]
        down[site.gateways[active[fault.site]]].append(
            (fault.at, np.inf if fault.until is None else fault.until)
        )
        active[fault.site] = 1 - active[fault.site]
    return down


def _noise(cloud: _Cloud, end_s: float, rng: np.random.Generator) -> None:
    """Healthy periodic lines from every device, and harmless transceiver warnings (none
    from a device while it is dead)."""
    joined, config = cloud.joined, cloud.log.config
    begin = -config.history_s
    dead = _down(cloud)

    def silent(node: int, t: float) -> bool:
        return any(a <= t < b for a, b in dead.get(node, ()))

    switch_noise(cloud.log, joined, cloud.ports, end_s, rng, silent)
    kinds = np.array(joined.node_kinds)
    inner = np.flatnonzero((kinds[joined.link_src] != "nic") & (kinds[joined.link_dst] != "nic"))
    count = int(rng.poisson(config.decoys_per_s * (end_s - begin)))
    for t in np.sort(rng.uniform(begin, end_s, count)).tolist():
        link = int(rng.choice(inner))
        power = rng.uniform(7, 9)
        if silent(int(joined.link_src[link]), t):
            continue
        cloud.log.at(
            t,
            cloud.name(int(joined.link_src[link])),
            "warning",
            "ethpm",
            f"%TRANSCEIVER-4-DDM_WARN: Interface {cloud.ports[link]} ({joined.link_name(link)}) "
            f"rx power -{power:.1f} dBm below warning threshold",
        )


def cloud_records(run: CloudRun, config: EmitConfig, end_s: float) -> list[LogRecord]:
    """Every log line of the cloud's run (site, gateway and WAN events, noise), in time order."""
    cloud = _Cloud(run, joined_ports(run.joined), Log(config))
    _site_events(cloud)
    _gateway_events(cloud)
    _wan_events(cloud)
    _noise(cloud, end_s, np.random.default_rng([run.cloud.seed, 11]))
    return sorted(cloud.log.records, key=lambda r: (r.timestamp or config.start, r.source, r.content))


# -- telemetry ---------------------------------------------------------------------------


def _network_flows(run: CloudRun) -> np.ndarray:
    """Which run flows cross the fabric (not NVLink segments inside a host)."""
    network = np.ones(run.start_s.size, dtype=bool)
    for part in run.sites:
        if part.jobs.flow_count:
            network[part.flows] = np.asarray(part.jobs.network, dtype=bool)
    return network


@dataclass(frozen=True, eq=False)
class _Stretch:
    """Sample instants `first` to `last` between two events of the run: the flows in flight
    then, their rates, their own ports' shares, and the paths of every flow."""

    first: int
    last: int
    flows: np.ndarray
    rate_bps: np.ndarray
    share_bps: np.ndarray
    moved: np.ndarray
    paths: Paths


def _stretches(run: CloudRun, history: RunHistory, times: np.ndarray) -> list[_Stretch]:
    """The sample instants grouped by the events between them (rates change only at events),
    with the engine's rates then: max-min over the fabric as it was (`diagnosis.rates`)."""
    order = sorted(range(len(history.changes)), key=lambda k: history.changes[k].time_s)
    changes = [history.changes[k] for k in order]
    change_s = np.array([c.time_s for c in changes])
    sending_until = run.finish_s - history.latency_s
    events = np.unique(np.concatenate([run.start_s, sending_until, change_s]))
    segment = np.searchsorted(events, times, side="right")
    bounds = np.flatnonzero(np.diff(segment)) + 1
    firsts, lasts = np.concatenate(([0], bounds)), np.concatenate((bounds - 1, [times.size - 1]))
    capacity = run.capacity_bps.astype(float).copy()
    paths = history.paths
    applied = 0
    out = []
    for first, last in zip(firsts.tolist(), lasts.tolist(), strict=True):
        t = float(times[first])
        moved = []
        while applied < len(changes) and change_s[applied] <= t:
            change = changes[applied]
            if change.link_ids.size:
                capacity[np.asarray(change.link_ids)] = change.capacity_bps
            if change.paths is not None:
                flows = np.asarray(change.flows, dtype=np.int64)
                paths = paths.replace(flows, change.paths)
                moved.append(flows)
            applied += 1
        active = np.flatnonzero((run.start_s <= t) & (t < sending_until))
        sub = paths.take(active)
        rate = max_min_rates(sub.indptr, sub.link_ids, capacity, history.rate_cap_bps[active], sub.weights)
        first_hop = sub.link_ids[sub.indptr[:-1]] if active.size else np.empty(0, dtype=np.int64)
        share = max_min_rates(np.arange(active.size + 1), first_hop, capacity, history.rate_cap_bps[active])
        moved_flows = np.concatenate(moved) if moved else np.empty(0, dtype=np.int64)
        out.append(_Stretch(first, last, active, rate, share, moved_flows, paths))
    return out


class _FabricPaths:
    """Each flow's path over the joined sites' links (NIC tiers, NVLink and sinks left out),
    worked out once per flow and again when the flow moves."""

    def __init__(self, fabric: int) -> None:
        self.fabric = fabric
        self.known: dict[int, tuple[int, ...]] = {}

    def of(self, flow: int, paths: Paths) -> tuple[int, ...]:
        if flow not in self.known:
            full = paths.path(flow)
            self.known[flow] = tuple(int(k) for k in full[full < self.fabric])
        return self.known[flow]

    def forget(self, flows: np.ndarray) -> None:
        for f in flows.tolist():
            self.known.pop(int(f), None)


_COUNTERS = ("pfc_pause_rx", "ecn_marked", "cnp_sent", "ack_timeouts")


def _telemetry(run: CloudRun, sample_s: float, config: EmitConfig) -> dict[str, dict[str, list]]:
    """Flow samples and NIC counters of every network flow, one row per stretch of instants
    with the same values (`ts` to `until_ts`); counters only when not zero."""
    history = run.history
    assert history is not None
    joined = run.joined
    names = joined.node_names
    is_nic = np.array([k == "nic" for k in joined.node_kinds])
    network = _network_flows(run)
    times = np.arange(float(np.nanmin(run.start_s)), float(np.nanmax(run.finish_s)), sample_s)
    clock = [config.start + timedelta(seconds=config.history_s + float(t)) for t in times]
    rows: dict[str, list] = {
        k: [] for k in ("ts", "flow", "src", "dst", "rate_bps", "cap_bps", "path", "until_ts")
    }
    counters: dict[str, list] = {k: [] for k in ("ts", "nic", *_COUNTERS, "until_ts")}
    held: dict[int, tuple[float, tuple[int, ...]]] = {}
    open_row: dict[int, int] = {}
    fabric_paths = _FabricPaths(joined.link_count)
    for stretch in _stretches(run, history, times):
        paths = stretch.paths
        fabric_paths.forget(stretch.moved)
        until = clock[stretch.last] if stretch.last > stretch.first else None
        per_nic: dict[int, np.ndarray] = {}
        for f, rate, share in zip(
            stretch.flows.tolist(), stretch.rate_bps.tolist(), stretch.share_bps.tolist(), strict=True
        ):
            if not network[f]:
                continue
            path = fabric_paths.of(f, paths)
            if not path:
                continue
            src, dst = int(joined.link_src[path[0]]), int(joined.link_dst[path[-1]])
            _count_nic(per_nic, is_nic, src, dst, rate, share, sample_s)
            if held.get(f) == (rate, path):
                rows["until_ts"][open_row[f]] = clock[stretch.last]
                continue
            held[f] = (rate, path)
            open_row[f] = len(rows["ts"])
            for key, value in (
                ("ts", clock[stretch.first]),
                ("flow", f),
                ("src", names[src]),
                ("dst", names[dst]),
                ("rate_bps", float(rate)),
                ("cap_bps", float(history.rate_cap_bps[f])),
                ("path", list(path)),
                ("until_ts", until),
            ):
                rows[key].append(value)
        for nic in sorted(per_nic):
            values = np.rint(per_nic[nic]).astype(np.int64)
            if not values.any():
                continue
            counters["ts"].append(clock[stretch.first])
            counters["nic"].append(names[nic])
            counters["until_ts"].append(until)
            for k, key in enumerate(_COUNTERS):
                counters[key].append(int(values[k]))
    return {"twin_flow_samples": rows, "twin_nic_counters": counters}


def _count_nic(
    per_nic: dict[int, np.ndarray],
    is_nic: np.ndarray,
    src: int,
    dst: int,
    rate: float,
    share: float,
    dt: float,
) -> None:
    """One flow's part of its NICs' counters over one interval (see `emit.nic_counters`)."""
    held = min(max(1 - rate / share, 0.0), 1.0) if share > 0 and rate > 0 else 0.0
    marks = held * rate * dt / (MTU_BYTES * 8)
    if is_nic[src]:
        values = per_nic.setdefault(src, np.zeros(4))
        values[0] += held * dt * share / PAUSE_QUANTA_BITS
        values[3] += dt / ACK_TIMEOUT_S if rate == 0 else 0.0
    if is_nic[dst]:
        values = per_nic.setdefault(dst, np.zeros(4))
        values[1] += marks
        values[2] += min(marks, dt / CNP_INTERVAL_S)


def emit_cloud(store: Store, clean: CloudRun, hit: CloudRun) -> TwinMeta:
    """Write the faulted run's operations data into the store (replacing an earlier run's).

    `clean` is the fault-free run beside it (what `evaluate` compares it with); the data
    comes from `hit` alone."""
    del clean  # the devices of the faulted run log only what happened in it
    sample_s = hit.cloud.telemetry.sample
    config = EmitConfig(
        sample_s=sample_s, noise_per_switch_s=CLOUD_NOISE_PER_DEVICE_S, decoys_per_s=CLOUD_DECOYS_PER_S
    )
    end_s = float(np.nanmax(hit.finish_s)) + config.tail_s
    prefix = f"twin/{hit.cloud.name}/"
    meta = TwinMeta(
        run=hit.cloud.name,
        strategy=hit.strategy,
        start=config.start,
        end=config.start + timedelta(seconds=config.history_s + end_s),
        sample_s=sample_s,
        log_prefix=prefix,
    )
    ports = joined_ports(hit.joined)
    rows = {**joined_inventory(hit.joined, ports, hit.capacity_bps), **_telemetry(hit, sample_s, config)}
    replace_rows(store, meta, rows)
    by_device: dict[str, list[LogRecord]] = {}
    for record in cloud_records(hit, config, end_s):
        by_device.setdefault(record.source, []).append(record)
    for device in sorted(by_device):
        ingest_records(store, by_device[device], source=prefix + device)
    for part in hit.sites:
        scenario = part.scenario
        if scenario.nic.boot_faults:
            reports = boot_hosts(scenario.nic, part.topology.host_count, scenario.seed)
            record_attestation(store, scenario, reports, prefix=f"{part.name}.", run=hit.cloud.name)
    return meta
