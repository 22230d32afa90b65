"""Migrations inside a running scenario: every round a flow of the engine on the inter-cloud path.

The path of a migration is host -> (fabric) -> source gateway -> WAN -> destination
gateway -> (fabric) -> host, routed by the scenario's strategy: the gateways' NIC links
and the WAN link are shared with every other migration and with tenant traffic, so a
round lasts as long as the engine's max-min share makes it last, and the next round's
size follows from that. Faults from the scenario take links down and up; the tenants'
flows are repaired by their strategy's reaction model, a migration's stream is moved
to a surviving path after the converged repair delay (or stalls while there is none).

Admission and consent go through the insularity protocol (`mobility/insularity.py`): the
destination cloud picks the host; the source knows the ticket only. Each cloud's log
holds its own side.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from cloudtwin.engine import Change, Simulation
from cloudtwin.errors import EngineError, MobilityError, ScenarioError
from cloudtwin.flows import Paths
from cloudtwin.mobility.insularity import AdmissionPolicy, Cloud, ConsentError, Transaction, VmProfile
from cloudtwin.mobility.plan import memory_of, options_of, scenario_nic_bps
from cloudtwin.mobility.precopy import Migration, Transfer, plan_migration
from cloudtwin.scenario.mobility import MigrationJob, Mobility, VmSpec
from cloudtwin.scenario.model import Scenario
from cloudtwin.topology.paths import surviving_topology
from cloudtwin.topology.topology import Topology

__all__ = ["MigrationRun", "run_migrations"]

Progress = Callable[[int, int], None]
SINK_BPS = 1e18
"""Capacity of the virtual link a cancelled stream is moved onto, so it leaves the fabric at once."""


@dataclass
class _Live:
    """One migration in the engine: its model, transaction, path, current flow."""

    index: int
    job: MigrationJob
    vm: VmSpec
    migration: Migration
    transaction: Transaction
    path: np.ndarray
    flow: int = -1
    dst_host: int = -1
    transfer: Transfer | None = None
    alone: dict[str, Any] = field(default_factory=dict)
    reroutes: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class MigrationRun:
    """Every migration's outcome, the tenants' traffic, and each cloud's own log."""

    scenario: str
    migrations: list[dict[str, Any]]
    tenant_flows: int
    tenant_completion_s: float
    tenant_completion_alone_s: float
    logs: dict[str, list[dict[str, Any]]]
    events: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "scenario": self.scenario,
            "migrations": self.migrations,
            "tenants": {
                "flows": self.tenant_flows,
                "completion_s": self.tenant_completion_s,
                "completion_without_migrations_s": self.tenant_completion_alone_s,
            },
            "engine_events": self.events,
            "logs": self.logs,
        }

    def log_rows(self) -> list[dict[str, Any]]:
        """Every cloud's log records, each tagged with its cloud (for the store)."""
        return [row for rows in self.logs.values() for row in rows]


def run_migrations(scenario: Scenario, progress: Progress | None = None) -> MigrationRun:
    """Run the scenario's migrations (and its tenant traffic, if it names a workload) on the engine."""
    mobility = scenario.mobility
    if not mobility.migrations:
        raise MobilityError("mobility.migrations: the scenario has no migration to run")
    return _Runner(scenario, progress).run()


class _Runner:
    def __init__(self, scenario: Scenario, progress: Progress | None) -> None:
        from cloudtwin.topology import build_topology

        self.scenario = scenario
        self.mobility: Mobility = scenario.mobility
        self.topology: Topology = build_topology(scenario)
        self.progress = progress
        self.clouds = _clouds(self.mobility, scenario.seed)
        self.tenants = _tenant_traffic(scenario, self.topology)
        base = self.tenants["capacity"] if self.tenants else self.topology.capacity_bps.astype(float)
        self.base_links = base.size
        self.wan = _wan_links(self.mobility, base.size)
        self.sink = base.size + len(self.wan)
        self.paused_link = self.sink + 1
        self.capacity = np.concatenate(
            (base, np.full(len(self.wan), self.mobility.wan.bandwidth), [SINK_BPS, 0.0])
        )
        self.nic_bps = scenario_nic_bps(scenario)
        self.live: list[_Live] = []
        self.owner: dict[int, _Live] = {}
        self.down = np.zeros(self.capacity.size, dtype=bool)
        self.done = 0
        self.routes: dict[tuple[int, int], np.ndarray | None] = {}
        self.vms = {vm.name: vm for vm in self.mobility.vms}
        self.clients: dict[str, tuple[np.ndarray, np.ndarray, Paths]] = {}

    # -- set-up ------------------------------------------------------------------------

    def run(self) -> MigrationRun:
        sim = Simulation(self.capacity, on_finish=self._finished)
        self.sim = sim
        if self.tenants:
            sim.add_flows(
                self.tenants["paths"],
                self.tenants["size"],
                self.tenants["start"],
                self.tenants["cap"],
                latency_s=self.tenants["latency"],
            )
        self._add_clients(sim)
        timers = self._faults(sim)
        for index, job in enumerate(self.mobility.migrations):
            self._admit(index, job)
            if job.abort_at is not None:
                timers.append((job.abort_at, "abort", index))
        for at, kind, index in sorted(timers, key=lambda t: (t[0], t[1], t[2])):
            # when every flow in flight is stalled, nothing moves until this timer acts
            with contextlib.suppress(EngineError):
                sim.run(until=at)

            if kind == "abort":
                self._abort(self.live_by_index(index), at, "consent withdrawn")
            else:
                self._reroute(at)
        try:
            result = sim.run()
        except EngineError as err:
            raise ScenarioError(
                f"faults: some flows can never finish ({err}); give the fault an until"
            ) from err
        return self._outcome(result.events, result.finish_s)

    def live_by_index(self, index: int) -> _Live | None:
        return next((m for m in self.live if m.index == index), None)

    def _admit(self, index: int, job: MigrationJob) -> None:
        vm = self.vms[job.vm]
        source, destination = self.clouds[vm.cloud], self.clouds[job.to]
        profile = VmProfile(
            vm.name, vm.memory, vm.vcpus, vm.labels, vm.mac or _mac(vm.name), vm.ip or _ip(index)
        )
        transaction = Transaction(f"m{index}", vm.name, source, destination, profile)
        path_bps = min(self.nic_bps, self.mobility.wan.bandwidth)
        options = options_of(job, path_bps, 2 * self.mobility.wan.latency)
        # the first pass expects the path's free rate; later passes use the rate they saw
        live_bps = min(path_bps, options.live_cap_bps())
        migration = Migration(memory_of(vm), options, job.start, vm.disk, vm.disk_dirty_rate, live_bps)
        alone = plan_migration(memory_of(vm), options, vm.disk, vm.disk_dirty_rate)
        try:
            transaction.request(job.start)
        except ConsentError as err:
            migration.abort(job.start, f"refused: {err}")
            self.live.append(
                _Live(index, job, vm, migration, transaction, np.empty(0, np.int64), alone=alone.to_dict())
            )
            return
        host = destination.host_of_ticket(transaction.ticket.ticket_id)  # type: ignore[union-attr]
        dst_host = int(host.rsplit("-h", 1)[1])
        path = self._path(vm.host, vm.cloud, dst_host, job.to, self.down)
        live = _Live(index, job, vm, migration, transaction, path, dst_host=dst_host, alone=alone.to_dict())
        self.live.append(live)
        transaction.start_transfer(job.start)
        self._launch(live)

    def _path(
        self, src_host: int, src_cloud: str, dst_host: int, dst_cloud: str, down: np.ndarray
    ) -> np.ndarray:
        """Links of host -> source gateway -> WAN -> destination gateway -> host (empty if unroutable)."""
        gw_a = _cloud_spec(self.mobility, src_cloud).gateway_host
        gw_b = _cloud_spec(self.mobility, dst_cloud).gateway_host
        first = self._fabric(src_host, gw_a, down)
        last = self._fabric(gw_b, dst_host, down)
        if first is None or last is None:
            return np.empty(0, dtype=np.int64)
        wan = self.wan[(src_cloud, dst_cloud)]
        if down[wan]:
            return np.empty(0, dtype=np.int64)
        return np.concatenate((first, [wan], last)).astype(np.int64)

    def _fabric(self, a: int, b: int, down: np.ndarray) -> np.ndarray | None:
        if a == b:
            return np.empty(0, dtype=np.int64)
        intact = not down.any()
        if intact and (a, b) in self.routes:
            return self.routes[(a, b)]
        links = self._route(a, b, down)
        if intact:
            self.routes[(a, b)] = links
        return links

    def _route(self, a: int, b: int, down: np.ndarray) -> np.ndarray | None:
        from cloudtwin.routing import load_strategy
        from cloudtwin.twin.routing import route_flows
        from cloudtwin.workloads import qp_flows

        topology = self.topology
        view = (
            topology
            if not down[: topology.link_count].any()
            else surviving_topology(topology, ~down[: topology.link_count])
        )
        table = qp_flows(
            topology,
            topology.host_nics[[a], 0],
            topology.host_nics[[b], 0],
            np.array([1.0]),
            1,
            np.random.default_rng([self.scenario.seed, a, b]),
        )
        try:
            paths = route_flows(self.scenario, view, table, load_strategy(self.scenario.routing.strategy))
        except Exception:  # no route on the surviving fabric
            return None
        links = paths.path(0)
        return None if down[links].any() else links

    # -- the migration's flows ---------------------------------------------------------

    def _launch(self, live: _Live) -> None:
        """Add the migration's next transfer as a flow (zero-byte steps pass at once)."""
        migration, transaction = live.migration, live.transaction
        while (transfer := migration.next()) is not None:
            if transfer.paused and transaction.phase.value == "transferring":
                transaction.pause_source(migration.began_s)
                self._hold_clients(live, migration.began_s)
            if transfer.wire_bytes > 0:
                break
            migration.done(migration.began_s)
            self._after(live, transfer)
        if transfer is None:
            self._settle(live)
            return
        path = live.path if live.path.size else np.array([self.sink], dtype=np.int64)
        paths = Paths(np.array([0, path.size], dtype=np.int64), path)
        cap = min(transfer.rate_cap_bps, self.nic_bps)
        latency = float(self.mobility.wan.latency) if live.path.size else 0.0
        flow = int(
            self.sim.add_flows(
                paths,
                np.array([transfer.wire_bytes]),
                np.array([migration.began_s]),
                np.array([cap]),
                latency_s=np.array([latency]),
            )[0]
        )
        live.flow, live.transfer = flow, transfer
        self.owner[flow] = live
        if not live.path.size:
            live.reroutes.append({"time_s": migration.began_s, "event": "stalled: no path"})

    def _finished(self, sim: Simulation, flows: np.ndarray) -> None:
        finish = sim.finish_s
        for flow in flows.tolist():
            live = self.owner.pop(flow, None)
            if live is None or live.migration.outcome != "running" or live.flow != flow:
                continue
            transfer = live.transfer
            assert transfer is not None
            # the threshold follows the stream's rate at its end, as QEMU's last 100 ms do
            live.migration.done(float(finish[flow]), float(sim.final_rate_bps(np.array([flow]))[0]))
            self._after(live, transfer)
            self._launch(live)

    def _after(self, live: _Live, transfer: Transfer) -> None:
        """The insularity side of a transfer that ended: commit at switchover."""
        migration, transaction = live.migration, live.transaction
        if transfer.paused and transaction.phase.value == "switching":
            transaction.commit(migration.began_s)
            self._repoint(live, migration.began_s)

    # -- the VM's clients: its identity kept -------------------------------------------

    def _add_clients(self, sim: Simulation) -> None:
        """Each client host of a VM sends it `client_bytes` from t = 0, to the VM's address."""
        for vm in self.mobility.vms:
            if not vm.clients:
                continue
            links = [self._fabric(c, vm.host, self.down) for c in vm.clients]
            if any(path is None for path in links):
                raise MobilityError(f"mobility.vms: a client of {vm.name} cannot reach it")
            paths = _csr([p for p in links if p is not None])
            count = len(vm.clients)
            ids = sim.add_flows(
                paths, np.full(count, float(vm.client_bytes)), np.zeros(count), np.full(count, self.nic_bps)
            )
            self.clients[vm.name] = (ids, np.array(vm.clients), paths)

    def _hold_clients(self, live: _Live, now_s: float) -> None:
        """The VM stops answering: its clients' flows make no progress while it is paused."""
        if live.vm.name in self.clients:
            ids = self.clients[live.vm.name][0]
            held = _csr([np.array([self.paused_link])] * ids.size)
            self.sim.apply(Change(now_s, flows=ids, paths=held))

    def _release_clients(self, live: _Live, now_s: float, new_home: bool) -> None:
        """The clients' flows go on: to the destination (after the overlay update) or back to the source."""
        if live.vm.name not in self.clients:
            return
        ids, hosts, original = self.clients[live.vm.name]
        paths = original
        if new_home:
            routes = [self._client_path(int(h), live.vm.cloud, live.dst_host, live.job.to) for h in hosts]
            paths = _csr([r if r.size else np.array([self.paused_link]) for r in routes])
            live.reroutes.append({"time_s": now_s, "event": "clients re-pointed", "flows": int(ids.size)})
        self.sim.apply(Change(now_s, flows=ids, paths=paths))

    def _client_path(self, client: int, src_cloud: str, dst_host: int, dst_cloud: str) -> np.ndarray:
        """A client in the destination cloud reaches the VM inside it; any other crosses the WAN."""
        in_destination = client in _cloud_spec(self.mobility, dst_cloud).hosts
        if in_destination:
            path = self._fabric(client, dst_host, self.down)
            return np.empty(0, dtype=np.int64) if path is None else path
        return self._path(client, src_cloud, dst_host, dst_cloud, self.down)

    def _repoint(self, live: _Live, now_s: float) -> None:
        """Identity kept: the overlay re-points the VM's MAC/IP to the destination gateway."""
        at = now_s + live.migration.options.overlay_update_s
        self._release_clients(live, at, new_home=True)
        profile = live.transaction.profile
        live.transaction.destination.record(
            at, "endpoint-repointed", vm=profile.name, mac=profile.mac, ip=profile.ip
        )
        live.transaction.source.record(
            at,
            "endpoint-moved-away",
            vm=profile.name,
            mac=profile.mac,
            ip=profile.ip,
            destination=live.transaction.destination.name,
        )

    def _settle(self, live: _Live) -> None:
        migration, transaction = live.migration, live.transaction
        if migration.outcome == "aborted":
            transaction.abort(migration.end_s, migration.reason or "aborted")
        self.done += 1
        if self.progress is not None:
            self.progress(self.done, len(self.mobility.migrations))

    def _abort(self, live: _Live | None, now_s: float, reason: str) -> None:
        if live is None or live.migration.outcome != "running":
            return
        if live.transaction.paused:
            self._release_clients(live, now_s, new_home=False)
        live.migration.abort(now_s, reason)
        if live.flow >= 0:
            self.owner.pop(live.flow, None)
            self.sim.apply(
                Change(
                    now_s,
                    flows=np.array([live.flow]),
                    paths=Paths(np.array([0, 1], dtype=np.int64), np.array([self.sink])),
                )
            )
        self._settle(live)

    # -- faults ------------------------------------------------------------------------

    def _faults(self, sim: Simulation) -> list[tuple[float, str, int]]:
        if not self.scenario.faults:
            return []
        from cloudtwin.faults.events import expand_faults
        from cloudtwin.faults.reaction import phases_for
        from cloudtwin.routing import load_strategy
        from cloudtwin.routing.facts import reaction_of

        self.states = expand_faults(self.scenario.faults, self.topology, self.scenario.seed)
        for state in self.states:
            sim.apply(
                Change(
                    state.time_s,
                    link_ids=state.changed.astype(np.int64),
                    capacity_bps=state.capacity_bps[state.changed],
                )
            )
        if self.tenants:
            for change in self.tenants["repairs"]:
                sim.apply(change)
        kind = reaction_of(load_strategy(self.scenario.routing.strategy))
        delay = phases_for(kind, self.scenario.reaction)[-1].delay_s
        return [(state.time_s + delay, "reroute", i) for i, state in enumerate(self.states)]

    def _reroute(self, now_s: float) -> None:
        """Move each migration stream off dead links, once the fabric has converged."""
        current = next(s for s in reversed(self.states) if s.time_s <= now_s + 1e-12)
        down = np.zeros(self.capacity.size, dtype=bool)
        down[: current.capacity_bps.size] = current.capacity_bps <= 0
        self.down = down
        for live in self.live:
            if live.migration.outcome != "running" or live.flow < 0:
                continue
            if live.path.size and not down[live.path].any():
                if live.reroutes and live.reroutes[-1]["event"].startswith("stalled"):
                    # the links came back at this state's instant, and the stream with them
                    live.reroutes.append({"time_s": current.time_s, "event": "resumed"})
                continue
            if live.transaction.phase.value not in ("transferring", "switching"):
                continue
            new = self._path(live.vm.host, live.vm.cloud, live.dst_host, live.job.to, down)
            if not new.size or np.array_equal(new, live.path):
                # the stream stopped when the links went down, not when this was noticed
                live.reroutes.append({"time_s": current.time_s, "event": "stalled: no surviving path"})
                continue
            live.path = new
            self.sim.apply(
                Change(
                    now_s,
                    flows=np.array([live.flow]),
                    paths=Paths(np.array([0, new.size], dtype=np.int64), new),
                )
            )
            live.reroutes.append({"time_s": now_s, "event": "re-routed", "links": int(new.size)})

    # -- results -----------------------------------------------------------------------

    def _outcome(self, events: int, finish: np.ndarray) -> MigrationRun:
        documents = []
        for live in sorted(self.live, key=lambda m: m.index):
            result = live.migration.result().to_dict()
            result["timeline"] = _with_path_events(result["timeline"], live.reroutes, live.migration.start_s)
            alone = live.alone.get("total_time_s", 0.0)
            documents.append(
                {
                    "vm": live.vm.name,
                    "from": live.vm.cloud,
                    "to": live.job.to,
                    "start_s": live.job.start,
                    "ticket": live.transaction.ticket.ticket_id if live.transaction.ticket else None,
                    "phase": live.transaction.phase.value,
                    "running_copies": live.transaction.running_copies(),
                    **result,
                    "total_time_alone_s": alone,
                    "slowdown": result["total_time_s"] / alone if alone and result["converged"] else None,
                    "path_events": live.reroutes,
                    "client_finish_s": [float(finish[i]) for i in self.clients.get(live.vm.name, ((),))[0]],
                }
            )
        tenants = self.tenants
        count = int(tenants["size"].size) if tenants else 0
        completion = float(np.nanmax(finish[:count])) if count else 0.0
        return MigrationRun(
            scenario=self.scenario.name,
            migrations=documents,
            tenant_flows=count,
            tenant_completion_s=completion,
            tenant_completion_alone_s=tenants["alone_s"] if tenants else 0.0,
            logs={name: cloud.log for name, cloud in self.clouds.items()},
            events=events,
        )


def _csr(paths: list[np.ndarray]) -> Paths:
    """Paths from a list of link arrays."""
    indptr = np.concatenate(([0], np.cumsum([p.size for p in paths]))).astype(np.int64)
    links = np.concatenate(paths).astype(np.int64) if paths else np.empty(0, dtype=np.int64)
    return Paths(indptr, links)


def _cloud_spec(mobility: Mobility, name: str) -> Any:
    return next(c for c in mobility.clouds if c.name == name)


def _clouds(mobility: Mobility, seed: int) -> dict[str, Cloud]:
    clouds: dict[str, Cloud] = {}
    for i, spec in enumerate(mobility.clouds):
        hosts = [f"{spec.name}-h{h}" for h in spec.hosts]
        underlay = {f"{spec.name}-h{h}": f"10.{i}.{h // 256}.{h % 256}" for h in spec.hosts}
        policy = AdmissionPolicy(
            spec.admission.max_vms,
            spec.admission.max_memory,
            spec.admission.host_memory,
            spec.admission.allowed_labels,
        )
        clouds[spec.name] = Cloud(spec.name, hosts, underlay, policy, seed)
    for vm in mobility.vms:
        clouds[vm.cloud].place(vm.name, f"{vm.cloud}-h{vm.host}", vm.memory)
    return clouds


def _wan_links(mobility: Mobility, first: int) -> dict[tuple[str, str], int]:
    """One WAN link per ordered pair of clouds, numbered after the fabric's links."""
    names = [c.name for c in mobility.clouds]
    pairs = [(a, b) for a in names for b in names if a != b]
    return {pair: first + i for i, pair in enumerate(pairs)}


def _mac(name: str) -> str:
    import hashlib

    digest = hashlib.sha256(name.encode()).digest()
    return "52:54:00:" + ":".join(f"{b:02x}" for b in digest[:3])


def _ip(index: int) -> str:
    return f"192.168.{index // 250}.{index % 250 + 2}"


def _tenant_traffic(scenario: Scenario, topology: Topology) -> dict[str, Any] | None:
    """The scenario's workload as engine flows, with its repairs, and its completion alone."""
    if not ({"workload", "workloads"} & scenario.model_fields_set):
        return None
    from cloudtwin.engine import simulate
    from cloudtwin.routing import load_strategy
    from cloudtwin.twin.jobs import build_workbench
    from cloudtwin.twin.routing import route_flows

    bench = build_workbench(scenario, topology)
    strategy = load_strategy(scenario.routing.strategy)
    connection_paths = route_flows(scenario, topology, bench.connections, strategy)
    paths = bench.engine_paths(connection_paths)
    latency = bench.latency_s(topology, paths)
    latency = np.zeros(paths.flow_count) if latency is None else latency
    if bench.dependencies is not None:
        raise MobilityError(
            "workload: migrations run beside perftest traffic (collectives are not wired yet)"
        )
    repairs: list[Change] = []
    if scenario.faults:
        repairs = _tenant_repairs(scenario, topology, bench, connection_paths, strategy)
    alone = simulate(
        paths,
        bench.capacity_bps,
        bench.size_bytes,
        bench.start_s,
        bench.rate_cap_bps,
        latency_s=latency,
        changes=repairs,
    )
    return {
        "capacity": bench.capacity_bps.astype(float),
        "paths": paths,
        "size": bench.size_bytes,
        "start": bench.start_s,
        "cap": bench.rate_cap_bps,
        "latency": latency,
        "repairs": repairs,
        "alone_s": alone.completion_s,
    }


def _tenant_repairs(
    scenario: Scenario, topology: Topology, bench: Any, paths: Paths, strategy: Any
) -> list[Change]:
    from cloudtwin.faults.events import expand_faults
    from cloudtwin.twin.faulted import plan_faulted

    states = expand_faults(scenario.faults, topology, scenario.seed)
    plan = plan_faulted(scenario, topology, bench, strategy, paths, states)
    return [bench.engine_change(c) for c in plan.changes]


def _with_path_events(
    timeline: list[dict[str, Any]], events: list[dict[str, Any]], start_s: float
) -> list[dict[str, Any]]:
    """Each round with the path events (stall, re-route, resume) that happened while it was sent,
    timed like the rounds, from the migration's start."""
    rounds = []
    for k, entry in enumerate(timeline):
        end = entry["end_s"] if k + 1 < len(timeline) else float("inf")  # the last keeps what follows
        during = [
            {**event, "time_s": event["time_s"] - start_s}
            for event in events
            if entry["start_s"] <= event["time_s"] - start_s < end
        ]
        rounds.append({**entry, "path_events": during})
    return rounds
