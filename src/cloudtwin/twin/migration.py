"""Live migrations inside a running scenario: every round a flow of the engine on its path.

A migration's stream goes from its host to the new host over the links its paths give
(`MigrationPaths`: on one fabric through a gateway host and a WAN link per pair of
clouds, or across the joined sites of a cloud through their gateways and WAN path), NIC
tiers included: the links are shared with every other migration and with tenant traffic,
so a round lasts as long as the engine's max-min share makes it last, and the next round's
size follows from that. When the run's faults take links down, the paths call the driver
back once the fabric (or a gateway) has recovered, and its streams move to a surviving
path (or stall while there is none).

Admission and consent go through the insularity protocol (`mobility/insularity.py`): the
destination cloud picks the host; the source knows the ticket only. Each cloud's log
holds its own side.

`MigrationDriver` is a driver of the run's one `Run` (`twin/run.py`): every round is a
flow added when the last one finished, on the same engine as the tenants' jobs, their
faults and repairs and the hosts' NIC tiers; aborts and re-routes are timers.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import partial
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from cloudtwin.engine.simulator import Change
from cloudtwin.errors import MobilityError
from cloudtwin.flows import Paths
from cloudtwin.mobility.insularity import AdmissionPolicy, Cloud, ConsentError, Transaction, VmProfile
from cloudtwin.mobility.plan import calibration_of, memory_of, options_of
from cloudtwin.mobility.precopy import Migration, MigrationResult, PathEvent, Round, Transfer, plan_migration
from cloudtwin.scenario.mobility import MigrationJob, Mobility, VmSpec

if TYPE_CHECKING:
    from cloudtwin.store.documents import Document  # store/ imports DuckDB: for the checker only
    from cloudtwin.twin.run import Run

__all__ = [
    "MigrationDriver",
    "MigrationOutcome",
    "MigrationPaths",
    "MigrationRun",
    "Reroute",
    "VmMigration",
]

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
    alone: MigrationResult | None = None
    reroutes: list[PathEvent] = field(default_factory=list)

    @property
    def stalled(self) -> bool:
        """Whether the stream is stalled (its last path event says so)."""
        return bool(self.reroutes) and str(self.reroutes[-1]["event"]).startswith("stalled")


@dataclass(frozen=True)
class VmMigration:
    """One VM's live migration in a run: where it went, its admission (ticket, phase, running
    copies), the precopy model's result (each round with the path events that happened while
    it was sent), and how long it would have taken alone on its path."""

    vm: str
    source: str
    destination: str
    start_s: float
    ticket: str | None
    phase: str
    running_copies: int
    result: MigrationResult
    total_time_alone_s: float
    path_events: tuple[PathEvent, ...]
    client_finish_s: tuple[float, ...]

    @property
    def converged(self) -> bool:
        return self.result.converged

    @property
    def total_time_s(self) -> float:
        return self.result.total_time_s

    @property
    def downtime_s(self) -> float:
        return self.result.downtime_s

    @property
    def connectivity_downtime_s(self) -> float:
        return self.result.connectivity_downtime_s

    @property
    def bytes(self) -> float:
        return self.result.bytes

    @property
    def rounds(self) -> int:
        return self.result.rounds

    @property
    def timeline(self) -> list[Round]:
        """Its rounds, each with the path events during it."""
        return self.result.timeline

    @property
    def slowdown(self) -> float | None:
        """Total time over the time alone (None unless it converged)."""
        alone = self.total_time_alone_s
        return self.total_time_s / alone if alone and self.converged else None

    def to_json(self) -> Document:
        """`{"vm", "from", "to", "start_s", "ticket", "phase", "running_copies", **result,
        "total_time_alone_s", "slowdown", "path_events", "client_finish_s"}`."""
        return {
            "vm": self.vm,
            "from": self.source,
            "to": self.destination,
            "start_s": self.start_s,
            "ticket": self.ticket,
            "phase": self.phase,
            "running_copies": self.running_copies,
            **self.result.to_dict(),
            "total_time_alone_s": self.total_time_alone_s,
            "slowdown": self.slowdown,
            "path_events": list(self.path_events),
            "client_finish_s": list(self.client_finish_s),
        }


@dataclass(frozen=True, eq=False)
class MigrationRun:
    """Every migration's outcome, the tenants' traffic, and each cloud's own log."""

    scenario: str
    migrations: list[VmMigration]
    tenant_flows: int
    tenant_completion_s: float
    tenant_completion_alone_s: float
    logs: dict[str, list[Document]]  # each cloud's log records: free-form fields per event
    events: int
    tenant_finish_s: np.ndarray = field(default_factory=lambda: np.empty(0))

    def to_dict(self) -> Document:
        """The `migrate run --json` document."""
        return {
            "scenario": self.scenario,
            "migrations": [m.to_json() for m in self.migrations],
            "tenants": {
                "flows": self.tenant_flows,
                "completion_s": self.tenant_completion_s,
                "completion_without_migrations_s": self.tenant_completion_alone_s,
            },
            "engine_events": self.events,
            "logs": self.logs,
        }

    def log_rows(self) -> list[Document]:
        """Every cloud's log records, each tagged with its cloud (for the store)."""
        return [row for rows in self.logs.values() for row in rows]


Reroute = Callable[[float, float, np.ndarray, str | None], None]
"""reroute(now_s, since_s, down, stalled_by): the run's links that are `down` (a mask over
the first links of the run) since `since_s`; the driver moves its streams off them now.
With `stalled_by`, the streams on them that lived through it first stall for that reason."""


class MigrationPaths(Protocol):
    """Where a run's migration streams go: on one fabric (host, gateway, WAN link, gateway,
    host) or across the joined sites of a cloud (host, site fabric, gateways, WAN path, ...).

    It brings its own links (`links_bps`, numbered from the run's `first_link` at `bind`),
    gives each stream's links with some links `down`, and watches the run's faults, calling
    the driver back to move its streams once the fabric or a gateway has recovered.
    """

    @property
    def links_bps(self) -> np.ndarray: ...

    @property
    def nic_bps(self) -> float: ...

    def bind(self, run: Run, first_link: int) -> None: ...

    def path(
        self, src_host: int, src_cloud: str, dst_host: int, dst_cloud: str, down: np.ndarray
    ) -> np.ndarray: ...

    def fabric(self, a: int, b: int, down: np.ndarray) -> np.ndarray | None: ...

    def couple(self, paths: Paths) -> Paths: ...

    def path_bps(self, src_cloud: str, dst_cloud: str) -> float: ...

    def latency_s(self, src_cloud: str, dst_cloud: str) -> float: ...

    def identity_update_s(self, vm: VmSpec, to: str) -> float | None: ...

    def watch(self, run: Run, reroute: Reroute) -> None: ...


@dataclass(frozen=True, eq=False)
class MigrationOutcome:
    """What a migration driver reports once its run has ended: every migration's outcome
    (in the order of the scenario's `migrations:`) and each cloud's own log."""

    migrations: tuple[VmMigration, ...]
    logs: dict[str, list[Document]]

    def run(
        self, name: str, events: int, tenant_finish_s: np.ndarray, tenant_alone_s: float
    ) -> MigrationRun:
        """The migrations' run, beside tenants whose flows finished at `tenant_finish_s`
        (`tenant_alone_s`: their completion in a run without migrations)."""
        completion = float(np.nanmax(tenant_finish_s)) if tenant_finish_s.size else 0.0
        return MigrationRun(
            scenario=name,
            migrations=list(self.migrations),
            tenant_flows=int(tenant_finish_s.size),
            tenant_completion_s=completion,
            tenant_completion_alone_s=tenant_alone_s,
            logs=self.logs,
            events=events,
            tenant_finish_s=tenant_finish_s.copy(),
        )


class MigrationDriver:
    """Live migrations as a driver of one run: its links (those of its paths, then a sink
    for cancelled streams and a zero-capacity link for paused clients) come after the run's,
    and its rounds are flows of the run."""

    def __init__(
        self,
        paths: MigrationPaths,
        mobility: Mobility,
        *,
        name: str,
        seed: int,
        progress: Progress | None = None,
    ) -> None:
        if not mobility.migrations:
            raise MobilityError("mobility.migrations: the scenario has no migration to run")
        self.paths = paths
        self.name = name
        self.mobility = mobility
        self.calibration = calibration_of(mobility)
        self.progress = progress
        self.clouds = _clouds(mobility, seed)
        self.links_bps = np.concatenate((paths.links_bps, [SINK_BPS, 0.0]))
        self.nic_bps = paths.nic_bps
        self.live: list[_Live] = []
        self.owner: dict[int, _Live] = {}
        self.done = 0
        self.vms = {vm.name: vm for vm in mobility.vms}
        self.clients: dict[str, tuple[np.ndarray, np.ndarray, Paths]] = {}

    def attach(self, run: Run, first_link: int) -> None:
        """Start on `run`: the VMs' clients, the fault timers, every migration's admission."""
        own = self.paths.links_bps.size
        self.sink = first_link + own
        self.paused_link = self.sink + 1
        self.down = np.zeros(first_link + self.links_bps.size, dtype=bool)
        self.paths.bind(run, first_link)
        self.sim = run
        self._add_clients()
        for index, job in enumerate(self.mobility.migrations):
            if job.abort_at is not None:  # before a re-route due at the same instant
                run.schedule(job.abort_at, partial(self._withdraw, index))
            # the timeout holds inside a round too, not only at the syncs between rounds
            run.schedule(job.start + job.timeout, partial(self._timed_out, index))
        self.paths.watch(run, self._reroute)
        for index, job in enumerate(self.mobility.migrations):
            self._admit(index, job)

    def _withdraw(self, index: int, now_s: float) -> None:
        self._abort(self.live_by_index(index), now_s, "consent withdrawn")

    def _timed_out(self, index: int, now_s: float) -> None:
        """The timeout came during a pre-copy round: give up now, as a sync would have
        (post-copy, the stop-and-copy and the background disk copy finish as they are)."""
        live = self.live_by_index(index)
        if live is None or live.migration.outcome != "running" or live.transfer is None:
            return
        options = live.migration.options
        if live.transfer.phase in ("disk", "bulk", "live") and options.policy != "postcopy":
            self._abort(live, now_s, live.migration.timeout_reason())

    def live_by_index(self, index: int) -> _Live | None:
        return next((m for m in self.live if m.index == index), None)

    def _admit(self, index: int, job: MigrationJob) -> None:
        vm = self.vms[job.vm]
        source, destination = self.clouds[vm.cloud], self.clouds[job.to]
        profile = VmProfile(
            vm.name, vm.memory, vm.vcpus, vm.labels, vm.mac or _mac(vm.name), vm.ip or _ip(index)
        )
        transaction = Transaction(f"m{index}", vm.name, source, destination, profile)
        path_bps = self.paths.path_bps(vm.cloud, job.to)
        options = options_of(job, path_bps, 2 * self.paths.latency_s(vm.cloud, job.to), self.calibration)
        update_s = self.paths.identity_update_s(vm, job.to)
        if update_s is not None:
            options = replace(options, overlay_update_s=update_s)
        # the first pass expects the path's free rate; later passes use the rate they saw
        live_bps = min(path_bps, options.live_cap_bps())
        migration = Migration(memory_of(vm), options, job.start, vm.disk, vm.disk_dirty_rate, live_bps)
        alone = plan_migration(memory_of(vm), options, vm.disk, vm.disk_dirty_rate)
        try:
            transaction.request(job.start)
        except ConsentError as err:
            migration.abort(job.start, f"refused: {err}")
            self.live.append(
                _Live(index, job, vm, migration, transaction, np.empty(0, np.int64), alone=alone)
            )
            return
        host = destination.host_of_ticket(transaction.ticket.ticket_id)  # type: ignore[union-attr]
        dst_host = int(host.rsplit("-h", 1)[1])
        path = self.paths.path(vm.host, vm.cloud, dst_host, job.to, self.down)
        live = _Live(index, job, vm, migration, transaction, path, dst_host=dst_host, alone=alone)
        self.live.append(live)
        transaction.start_transfer(job.start)
        self._launch(live)

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
        cap = min(transfer.rate_cap_bps, self.nic_bps)
        latency = self.paths.latency_s(live.vm.cloud, live.job.to) if live.path.size else 0.0
        flow = int(
            self.sim.add_flows(
                self._stream(live.path),
                np.array([transfer.wire_bytes]),
                np.array([migration.began_s]),
                np.array([cap]),
                latency_s=np.array([latency]),
                timeline_flows=np.zeros(1, dtype=bool),  # a job's timeline counts its own flows
                on_finish=self._finished,
            )[0]
        )
        live.flow, live.transfer = flow, transfer
        self.owner[flow] = live
        if not live.path.size:
            live.reroutes.append({"time_s": migration.began_s, "event": "stalled: no path"})

    def _stream(self, path: np.ndarray) -> Paths:
        """A stream's engine path: through the NIC tiers of its ends, or into the sink when it has none."""
        if not path.size:
            return Paths(np.array([0, 1], dtype=np.int64), np.array([self.sink], dtype=np.int64))
        return self.paths.couple(Paths(np.array([0, path.size], dtype=np.int64), path))

    def _finished(self, flows: np.ndarray) -> None:
        sim = self.sim
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

    def _add_clients(self) -> None:
        """Each client host of a VM sends it `client_bytes` from t = 0, to the VM's address."""
        for vm in self.mobility.vms:
            if not vm.clients:
                continue
            links = [self.paths.fabric(c, vm.host, self.down) for c in vm.clients]
            if any(path is None for path in links):
                raise MobilityError(f"mobility.vms: a client of {vm.name} cannot reach it")
            paths = self.paths.couple(_csr([p for p in links if p is not None]))
            count = len(vm.clients)
            ids = self.sim.add_flows(
                paths,
                np.full(count, float(vm.client_bytes)),
                np.zeros(count),
                np.full(count, self.nic_bps),
                timeline_flows=np.zeros(count, dtype=bool),
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
            paths = self.paths.couple(_csr([r if r.size else np.array([self.paused_link]) for r in routes]))
            live.reroutes.append({"time_s": now_s, "event": "clients re-pointed", "flows": int(ids.size)})
        self.sim.apply(Change(now_s, flows=ids, paths=paths))

    def _client_path(self, client: int, src_cloud: str, dst_host: int, dst_cloud: str) -> np.ndarray:
        """A client in the destination cloud reaches the VM inside it; any other crosses the WAN."""
        in_destination = client in _cloud_spec(self.mobility, dst_cloud).hosts
        if in_destination:
            path = self.paths.fabric(client, dst_host, self.down)
            return np.empty(0, dtype=np.int64) if path is None else path
        return self.paths.path(client, src_cloud, dst_host, dst_cloud, self.down)

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

    def _reroute(self, now_s: float, since_s: float, links_down: np.ndarray, stalled_by: str | None) -> None:
        """The paths' call once the fabric (or a gateway) has recovered: the streams on a link
        that is down since `since_s` move now (those that lived through it and stall first
        for `stalled_by` when it is given)."""
        down = np.zeros(self.down.size, dtype=bool)
        down[: links_down.size] = links_down
        if stalled_by is not None:
            for live in self.live:
                if (
                    live.migration.outcome == "running"
                    and live.flow >= 0
                    and live.migration.start_s < now_s  # it lived through it
                    and not live.stalled
                    and down[live.path[live.path < down.size]].any()
                ):
                    since = max(since_s, live.migration.start_s)
                    live.reroutes.append({"time_s": since, "event": f"stalled: {stalled_by}"})
        self._move_streams(now_s, since_s, down)

    def _move_streams(self, now_s: float, since_s: float, down: np.ndarray) -> None:
        """Streams on a link that is `down` (since `since_s`) move to a path that is up, now."""
        self.down = down
        for live in self.live:
            if live.migration.outcome != "running" or live.flow < 0:
                continue
            # a migration that starts after this moves silently: it never saw the fault
            lived = live.migration.start_s < now_s
            since = max(since_s, live.migration.start_s)
            if live.path.size and not down[live.path].any():
                if live.stalled:
                    # the links came back at this state's instant, and the stream with them
                    live.reroutes.append({"time_s": since, "event": "resumed"})
                continue
            if live.transaction.phase.value not in ("transferring", "switching"):
                continue
            new = self.paths.path(live.vm.host, live.vm.cloud, live.dst_host, live.job.to, down)
            if not new.size or np.array_equal(new, live.path):
                # the stream stopped when the links went down, not when this was noticed
                if lived and not live.stalled:
                    live.reroutes.append({"time_s": since, "event": "stalled: no surviving path"})
                continue
            live.path = new
            self.sim.apply(Change(now_s, flows=np.array([live.flow]), paths=self._stream(new)))
            if lived:
                live.reroutes.append({"time_s": now_s, "event": "re-routed", "links": int(new.size)})

    # -- results -----------------------------------------------------------------------

    def outcome(self) -> MigrationOutcome:
        """Every migration's outcome once the run has ended."""
        finish = self.sim.finish_s
        migrations = []
        for live in sorted(self.live, key=lambda m: m.index):
            result = live.migration.result()
            rounds = _with_path_events(result.timeline, live.reroutes, live.migration.start_s)
            migrations.append(
                VmMigration(
                    vm=live.vm.name,
                    source=live.vm.cloud,
                    destination=live.job.to,
                    start_s=live.job.start,
                    ticket=live.transaction.ticket.ticket_id if live.transaction.ticket else None,
                    phase=live.transaction.phase.value,
                    running_copies=live.transaction.running_copies(),
                    result=replace(result, timeline=rounds),
                    total_time_alone_s=live.alone.total_time_s if live.alone is not None else 0.0,
                    path_events=tuple(live.reroutes),
                    client_finish_s=tuple(float(finish[i]) for i in self.clients.get(live.vm.name, ((),))[0]),
                )
            )
        return MigrationOutcome(tuple(migrations), {name: cloud.log for name, cloud in self.clouds.items()})


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


def _mac(name: str) -> str:
    import hashlib

    digest = hashlib.sha256(name.encode()).digest()
    return "52:54:00:" + ":".join(f"{b:02x}" for b in digest[:3])


def _ip(index: int) -> str:
    return f"192.168.{index // 250}.{index % 250 + 2}"


def _with_path_events(timeline: list[Round], events: list[PathEvent], start_s: float) -> list[Round]:
    """Each round with the path events (stall, re-route, resume) that happened while it was sent,
    timed like the rounds, from the migration's start."""
    rounds = []
    for k, entry in enumerate(timeline):
        end = entry.end_s if k + 1 < len(timeline) else float("inf")  # the last keeps what follows
        during: list[PathEvent] = [
            {**event, "time_s": float(event["time_s"]) - start_s}
            for event in events
            if entry.start_s <= float(event["time_s"]) - start_s < end
        ]
        rounds.append(replace(entry, path_events=tuple(during)))
    return rounds
