"""Operations data from a simulated run: what the fabric would have logged and measured.

- **switch syslog** (NX-OS style): link down/up per port (`%LINK-3-UPDOWN`), degraded
  ports, and healthy periodic lines from every switch (LLDP, NTP, sensors, keepalives),
  plus rare harmless transceiver warnings that name a cable (decoys);
- **routing and controller events**: ECMP member removal (local repair), BFD and BGP
  sessions down/up, or for a controller strategy its port-status event, recompute and
  rule installs, at the times the strategy's reaction model gives;
- **job logs**: job start/finish and slow steps (a flow that took over 1.4 times its
  line-rate time);
- **flow telemetry**: every QP's rate every `sample_s` (the sum of the engine flows it
  carries: one for perftest, a collective's pipelined rounds), with its path;
- **NIC counters** per NIC and interval, derived from the sampled rates (see
  `nic_counters`).

Times are wall-clock: the run starts `history_s` after `start` so that the healthy
lines before it give the anomaly detector a baseline. The same run and seed give the
same records.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

import numpy as np

from cloudtwin.diagnosis.rates import DEFAULT_SAMPLE_S, FlowSamples, sample_rates
from cloudtwin.faults.reaction import phases_for
from cloudtwin.ops.record import LogRecord
from cloudtwin.scenario.faults import Reaction
from cloudtwin.store.database import Store
from cloudtwin.store.ops_ingest import ingest_records
from cloudtwin.store.twin_tables import TwinMeta, replace_rows
from cloudtwin.topology.topology import NodeKind, Topology
from cloudtwin.twin import FaultedRun

__all__ = [
    "ACK_TIMEOUT_S",
    "DEFAULT_START",
    "MTU_BYTES",
    "EmitConfig",
    "emit_run",
    "interface_names",
    "nic_counters",
    "node_address",
    "run_records",
]

DEFAULT_START = datetime(2026, 3, 1, 12, 0, 0)
#: RoCE MTU: packets per bit sent, for ECN marks.
MTU_BYTES = 4096
#: One PFC pause frame holds a 100G port for 65535 quanta of 512 bit times.
PAUSE_QUANTA_BITS = 65535 * 512
#: RoCE local ACK timeout (4.096 us x 2^10): a stalled QP times out once per period.
ACK_TIMEOUT_S = 4.096e-6 * 2**10
#: A step (flow) that takes this many times its line-rate time is logged as slow.
SLOW_FACTOR = 1.4
#: DCQCN: a receiver sends at most one CNP per QP every 50 us.
CNP_INTERVAL_S = 50e-6
_NOISE = (
    "%LLDP-6-NEIGHBOR_REFRESH: LLDP neighbor on {port} refreshed, ttl 120",
    "%NTP-6-SYNC: clock synchronized to 10.255.0.{a}, offset {b} us",
    "%PLATFORM-6-TEMP: sensor {a} at {c} C, within limits",
    "%BGP-6-KEEPALIVE: {c} keepalives sent, {a} peers established",
    "%SYSMGR-6-HEARTBEAT: service {svc} heartbeat ok",
)
_SERVICES = ("bgp", "bfd", "lldp", "urib", "ethpm", "pfm")


@dataclass(frozen=True)
class EmitConfig:
    """Settings of the emitter: telemetry interval, healthy history, noise rates, clock."""

    sample_s: float = DEFAULT_SAMPLE_S
    history_s: float = 1.0
    tail_s: float = 0.2
    noise_per_switch_s: float = 40.0
    decoys_per_s: float = 2.0
    start: datetime = DEFAULT_START


def node_address(node: int) -> str:
    """A switch's (or host's) loopback address, as BGP and BFD name neighbours."""
    return f"10.{node // 250}.{node % 250 + 1}.1"


def interface_names(topology: Topology) -> list[str]:
    """Per directed link, its port name at the sending node (`Ethernet1/5`, `eth0` on a NIC)."""
    names = [""] * topology.link_count
    for node, row in enumerate(topology.out_links):
        for k, link in enumerate(row[row >= 0]):
            is_nic = topology.node_kind[node] == NodeKind.NIC
            names[int(link)] = f"eth{k}" if is_nic else f"Ethernet1/{k + 1}"
    return names


def _device(topology: Topology, node: int) -> str:
    """A switch's name, or the host a NIC belongs to."""
    name = topology.node_name(node)
    return name.split("/")[0]


class Log:
    """The log lines a run's devices write, each stamped from the start of the history."""

    def __init__(self, config: EmitConfig) -> None:
        self.config = config
        self.records: list[LogRecord] = []

    def at(self, t_s: float, device: str, level: str, component: str, content: str) -> None:
        when = self.config.start + timedelta(seconds=self.config.history_s + t_s)
        self.records.append(LogRecord(when, device, level, component, content))


def _port_events(log: Log, run: FaultedRun, ports: list[str]) -> None:
    """Link down/up/degraded lines from the switches (and hosts) at both ends of each link."""
    topology = run.topology
    base = topology.capacity_bps.astype(float)
    previous = base.copy()
    for state in run.states:
        capacity = state.capacity_bps
        alive = np.bincount(topology.link_src, capacity > 0, minlength=topology.node_count) > 0
        for link in state.changed.tolist():
            src = int(topology.link_src[link])
            if not alive[src]:
                continue  # a dead switch logs nothing
            device, port = _device(topology, src), ports[link]
            was, now = previous[link] > 0, capacity[link] > 0
            described = f"{port} ({topology.link_name(link)})"
            if topology.node_kind[src] == NodeKind.NIC:
                state_word = "up" if now else "down"
                log.at(state.time_s, device, "err" if not now else "info", "kernel",
                       f"mlx5_core {topology.node_name(src)} {port}: Link {state_word}")
            elif was and not now:
                log.at(state.time_s, device, "err", "ethpm",
                       f"%ETHPORT-5-IF_DOWN_LINK_FAILURE: Interface {port} is down (Link failure)")
                log.at(state.time_s, device, "err", "ethpm",
                       f"%LINK-3-UPDOWN: Interface {described}, changed state to down")
            elif now and not was:
                log.at(state.time_s, device, "info", "ethpm",
                       f"%LINK-3-UPDOWN: Interface {described}, changed state to up")
            else:
                gbps = capacity[link] / 1e9
                log.at(state.time_s, device, "warning", "ethpm",
                       f"%ETHPORT-4-IF_ERRORS: Interface {described} FEC errors high, "
                       f"effective rate {gbps:g} Gbps")
        previous = capacity


def _session_events(log: Log, t: float, device: str, port: str, peer: str, up: bool,
                    local: bool, timing: Reaction) -> None:
    """A switch's ECMP member removal (local repair), BFD and BGP lines for one port."""
    if not up:
        if local:
            log.at(t + timing.local_detect, device, "warning", "urib",
                   f"%URIB-5-ECMP_MEMBER_REMOVED: next hop {peer} via {port} removed from ECMP groups")
        log.at(t + timing.bfd_detect, device, "err", "bfd",
               f"%BFD-5-SESSION_STATE_DOWN: BFD session to neighbor {peer} on interface "
               f"{port} has gone down. Reason: Control Detection Time Expired.")
        log.at(t + timing.bfd_detect, device, "err", "bgp",
               f"%BGP-5-ADJCHANGE: neighbor {peer} Down - BFD session down")
        return
    log.at(t + timing.bfd_detect, device, "info", "bfd",
           f"%BFD-5-SESSION_STATE_UP: BFD session to neighbor {peer} on interface {port} is up")
    log.at(t + timing.bfd_detect, device, "info", "bgp", f"%BGP-5-ADJCHANGE: neighbor {peer} Up")


def _routing_events(log: Log, run: FaultedRun, ports: list[str]) -> None:
    """BFD/BGP sessions and ECMP members where switches repair, and controller events
    where a controller does (both with pinning through UDP source ports)."""
    topology, timing = run.topology, run.scenario.reaction
    phases = {phase.name for phase in phases_for(run.reaction, timing)}
    controller, switches = "controller" in phases, "routing protocol" in phases
    previous = topology.capacity_bps.astype(float)
    for state in run.states:
        capacity = state.capacity_bps
        alive = np.bincount(topology.link_src, capacity > 0, minlength=topology.node_count) > 0
        for link in state.changed.tolist():
            src, dst = int(topology.link_src[link]), int(topology.link_dst[link])
            both_switches = NodeKind.NIC not in (topology.node_kind[src], topology.node_kind[dst])
            was, now = previous[link] > 0, capacity[link] > 0
            if not both_switches or was == now or not alive[src]:
                continue
            device, port, peer = _device(topology, src), ports[link], node_address(dst)
            if controller:
                log.at(state.time_s + timing.controller_detect, "controller", "warning", "pinning",
                       f"port-status from {device}: {port} {'up' if now else 'down'}, "
                       "recomputing affected paths")
            if switches:
                _session_events(log, state.time_s, device, port, peer, bool(now),
                                "local repair" in phases, timing)
        previous = capacity
    for repair in run.plan.repairs:
        if repair.phase == "controller":
            compute_ms = 1e3 * timing.controller_compute
            log.at(repair.decided_s, "controller", "info", "pinning",
                   f"recomputed {repair.flows} flow paths in {compute_ms:g} ms")
            log.at(repair.moved_s, "controller", "info", "pinning",
                   f"installed {repair.rules_changed} flow rules")


def _job_events(log: Log, run: FaultedRun) -> None:
    """Job start/finish and slow steps: a flow that took over SLOW_FACTOR times its line-rate time,
    the time its bytes take at its share of the NIC among its connection's QPs."""
    bench, result, topology = run.bench, run.result, run.topology
    for j, info in enumerate(bench.jobs):
        rows = np.flatnonzero(bench.flow_job == j)
        if rows.size == 0:
            continue
        begin, end = float(result.start_s[rows].min()), float(result.finish_s[rows].max())
        log.at(begin, "scheduler", "info", "jobs",
               f"job {info.name} started: {rows.size} flows, tenants {','.join(info.tenants)}")
        log.at(end, "scheduler", "info", "jobs", f"job {info.name} finished in {end - begin:.3f} s")
    qps = np.bincount(bench.group)[bench.group]
    ideal = bench.size_bytes * 8.0 * qps / bench.rate_cap_bps
    fct = result.finish_s - result.start_s
    owner = bench.owner
    for f in np.flatnonzero(run.network & (fct > SLOW_FACTOR * ideal)).tolist():
        conn = bench.connections
        src, dst = topology.node_name(int(conn.src[owner[f]])), topology.node_name(int(conn.dst[owner[f]]))
        job = bench.jobs[int(bench.flow_job[f])].name
        log.at(float(result.finish_s[f]), "scheduler", "warning", "jobs",
               f"job {job}: slow step, flow {f} {src} to {dst} took {1e3 * fct[f]:.1f} ms "
               f"({fct[f] / ideal[f]:.1f}x line rate)")


def _noise(log: Log, run: FaultedRun, ports: list[str], end_s: float, rng: np.random.Generator) -> None:
    """Healthy periodic lines from every switch, and rare harmless transceiver warnings."""
    topology, config = run.topology, log.config
    switches = np.flatnonzero(topology.node_kind != NodeKind.NIC)
    begin = -config.history_s
    span = end_s - begin
    for node in switches.tolist():
        device = topology.node_name(node)
        own = topology.out_links[node][topology.out_links[node] >= 0]
        count = int(rng.poisson(config.noise_per_switch_s * span))
        for t in np.sort(rng.uniform(begin, end_s, count)).tolist():
            template = _NOISE[int(rng.integers(len(_NOISE)))]
            text = template.format(
                port=ports[int(rng.choice(own))], a=int(rng.integers(1, 9)), b=int(rng.integers(1, 400)),
                c=int(rng.integers(30, 60)), svc=_SERVICES[int(rng.integers(len(_SERVICES)))],
            )
            log.at(t, device, "info", text.split("-")[0].lstrip("%").lower(), text)
    inner = np.flatnonzero(
        (topology.node_kind[topology.link_src] != NodeKind.NIC)
        & (topology.node_kind[topology.link_dst] != NodeKind.NIC)
    )
    for t in np.sort(rng.uniform(begin, end_s, int(rng.poisson(config.decoys_per_s * span)))).tolist():
        link = int(rng.choice(inner))
        device = topology.node_name(int(topology.link_src[link]))
        log.at(t, device, "warning", "ethpm",
               f"%TRANSCEIVER-4-DDM_WARN: Interface {ports[link]} ({topology.link_name(link)}) "
               f"rx power -{rng.uniform(7, 9):.1f} dBm below warning threshold")


def run_records(run: FaultedRun, config: EmitConfig, end_s: float) -> list[LogRecord]:
    """Every log record of the run (fault, routing, job and noise lines), in time order."""
    log = Log(config)
    ports = interface_names(run.topology)
    _port_events(log, run, ports)
    _routing_events(log, run, ports)
    _job_events(log, run)
    _noise(log, run, ports, end_s, np.random.default_rng([run.scenario.seed, 7]))
    return sorted(log.records, key=lambda r: (r.timestamp or config.start, r.source, r.content))


def nic_counters(run: FaultedRun, samples: FlowSamples) -> dict[str, np.ndarray]:
    """Per NIC and sample interval: PFC pauses, ECN marks, CNPs and ACK timeouts.

    A flow in flight at rate r below c, its share of its sender's own port (max-min over
    the first hops alone), was held back by a congested link for the fraction `1 - r/c`
    of the interval dt. Its sender NIC receives the pause frames
    that hold it back that long (`(1 - r/c) dt c / (65535 x 512 bit)`), and that share of
    its packets (`r dt / MTU`) arrives ECN-marked, the receiver answering with CNPs (at
    most one per 50 us). A flow at rate 0 is stalled on a dead link: no pauses or marks,
    but its QP times out once per ACK timeout. Counters are whole numbers (rounded).
    """
    topology, conn, owner = run.topology, run.bench.connections, run.bench.owner
    flows = samples.flows
    src, dst = conn.src[owner[flows]], conn.dst[owner[flows]]
    cap = np.nan_to_num(samples.port_share_bps, nan=1.0)
    rate = np.nan_to_num(samples.rate_bps, nan=-1.0)
    live = rate >= 0
    dt = samples.interval_s
    ratio = np.divide(rate, cap, out=np.ones_like(rate), where=cap > 0)
    held = np.where(live & (rate > 0), np.clip(1 - ratio, 0.0, 1.0), 0.0)
    pauses = held * dt * cap / PAUSE_QUANTA_BITS
    marks = held * np.maximum(rate, 0) * dt / (MTU_BYTES * 8)
    cnps = np.minimum(marks, dt / CNP_INTERVAL_S)
    timeouts = np.where(live & (rate == 0), dt / ACK_TIMEOUT_S, 0.0)
    nics = np.unique(np.concatenate([src, dst]))
    column = {int(n): k for k, n in enumerate(nics)}
    at_src = np.array([column[int(n)] for n in src], dtype=np.int64)
    at_dst = np.array([column[int(n)] for n in dst], dtype=np.int64)

    def per_nic(values: np.ndarray, where: np.ndarray) -> np.ndarray:
        out = np.zeros((values.shape[0], nics.size))
        np.add.at(out.T, where, values.T)
        return np.rint(out).astype(np.int64)

    return {
        "nics": np.array([topology.node_name(int(n)) for n in nics]),
        "pfc_pause_rx": per_nic(pauses, at_src),
        "ecn_marked": per_nic(marks, at_dst),
        "cnp_sent": per_nic(cnps, at_dst),
        "ack_timeouts": per_nic(timeouts, at_src),
    }


def _telemetry_rows(run: FaultedRun, samples: FlowSamples, config: EmitConfig) -> dict[str, dict[str, list]]:
    """Flow samples per QP (a collective's rounds on one QP add up), and NIC counters."""
    topology, conn, owner = run.topology, run.bench.connections, run.bench.owner
    clock = [config.start + timedelta(seconds=config.history_s + float(t)) for t in samples.times_s]
    names = [topology.node_name(n) for n in range(topology.node_count)]
    flow_rows: dict[str, list] = {k: [] for k in ("ts", "flow", "src", "dst", "rate_bps", "cap_bps", "path")}
    qp_of = owner[samples.flows]
    for i in range(samples.times_s.size):
        live = np.flatnonzero(np.isfinite(samples.rate_bps[i]))
        qps, first = np.unique(qp_of[live], return_index=True)
        rates = np.bincount(np.searchsorted(qps, qp_of[live]), samples.rate_bps[i, live], minlength=qps.size)
        for qp, k, rate in zip(qps.tolist(), first.tolist(), rates.tolist(), strict=True):
            f = int(samples.flows[live[k]])
            path = samples.paths[int(samples.epoch[i])].path(f)
            flow_rows["ts"].append(clock[i])
            flow_rows["flow"].append(qp)
            flow_rows["src"].append(names[int(conn.src[qp])])
            flow_rows["dst"].append(names[int(conn.dst[qp])])
            flow_rows["rate_bps"].append(float(rate))
            flow_rows["cap_bps"].append(float(run.rate_cap_bps[f]))
            flow_rows["path"].append([int(x) for x in path if x < topology.link_count])
    counters = nic_counters(run, samples)
    nic_rows: dict[str, list] = {"ts": [], "nic": []}
    kinds = ("pfc_pause_rx", "ecn_marked", "cnp_sent", "ack_timeouts")
    for kind in kinds:
        nic_rows[kind] = counters[kind].reshape(-1).tolist()
    for i in range(samples.times_s.size):
        nic_rows["ts"].extend([clock[i]] * counters["nics"].size)
        nic_rows["nic"].extend(counters["nics"].tolist())
    return {"twin_flow_samples": flow_rows, "twin_nic_counters": nic_rows}


def _inventory_rows(topology: Topology) -> dict[str, dict[str, list]]:
    ports = interface_names(topology)
    kinds = {k: k.name.lower() for k in NodeKind}
    nodes = {
        "node": list(range(topology.node_count)),
        "name": [topology.node_name(n) for n in range(topology.node_count)],
        "kind": [kinds[NodeKind(int(k))] for k in topology.node_kind],
        "address": [node_address(n) for n in range(topology.node_count)],
    }
    links = {
        "link_id": list(range(topology.link_count)),
        "name": [topology.link_name(k) for k in range(topology.link_count)],
        "src": [topology.node_name(int(n)) for n in topology.link_src],
        "dst": [topology.node_name(int(n)) for n in topology.link_dst],
        "device": [_device(topology, int(n)) for n in topology.link_src],
        "interface": ports,
        "capacity_bps": topology.capacity_bps.astype(float).tolist(),
    }
    return {"twin_nodes": nodes, "twin_links": links}


def emit_run(store: Store, run: FaultedRun, config: EmitConfig | None = None) -> TwinMeta:
    """Write the run's logs (via `ingest_records`), telemetry and inventory into the store."""
    config = config or EmitConfig()
    samples = sample_rates(run, config.sample_s)
    end_s = float(run.result.finish_s.max()) + config.tail_s
    prefix = f"twin/{run.scenario.name}/"
    records = run_records(run, config, end_s)
    by_device: dict[str, list[LogRecord]] = {}
    for record in records:
        by_device.setdefault(record.source, []).append(record)
    meta = TwinMeta(
        run=run.scenario.name,
        strategy=run.strategy,
        start=config.start,
        end=config.start + timedelta(seconds=config.history_s + end_s),
        sample_s=samples.interval_s,
        log_prefix=prefix,
    )
    rows = {**_inventory_rows(run.topology), **_telemetry_rows(run, samples, config)}
    replace_rows(store, meta, rows)
    for device in sorted(by_device):
        ingest_records(store, by_device[device], source=prefix + device)
    return meta
