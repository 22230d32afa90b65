"""The kernel of every run: one `Simulation` over the run's links, fed by drivers.

A run's tenant jobs come in engine form (`EngineJobs`: their flows, the links they need,
their planned changes); a driver (a live migration, federated traffic) brings its own
links and feeds the same `Run` with flows, changes and timers as the run goes. Only this
module calls the engine's simulation; it knows no driver and no scenario.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Protocol

import numpy as np

from cloudtwin.engine.simulator import Change, Dependencies, Progress, SimResult, Simulation
from cloudtwin.flows import Paths

__all__ = [
    "Driver",
    "EngineJobs",
    "FinishHandler",
    "Run",
    "RunHistory",
    "Timer",
    "attach_drivers",
]

FinishHandler = Callable[[np.ndarray], None]
"""handler(flows): run ids of a driver's flows that finished at `Run.now`."""

Timer = Callable[[float], None]
"""timer(now): a driver's callback at the time it asked for."""


@dataclass(frozen=True, eq=False)
class RunHistory:
    """What a run's engine was given, in run ids: every flow's first path, rate cap and
    latency, and every change in the order applied, at the time it took effect (the
    telemetry recomputes the engine's rates at any instant from it)."""

    paths: Paths
    rate_cap_bps: np.ndarray
    latency_s: np.ndarray
    changes: tuple[Change, ...]


class Run:
    """One run on the engine: a `Simulation` over the run's links, shared by every job.

    Drivers add flows (with a handler that hears when they finish), apply changes and
    set timers; `run()` runs it all to the end. With `record`, the run keeps what it was
    given for `history()`.
    """

    def __init__(
        self,
        capacity_bps: np.ndarray,
        *,
        timeline: bool = False,
        progress: Progress | None = None,
        record: bool = False,
    ) -> None:
        self._sim = Simulation(capacity_bps, on_finish=self._finished, progress=progress, timeline=timeline)
        self._first: list[int] = []  # first flow id of each batch with a handler
        self._end: list[int] = []
        self._handler: list[FinishHandler] = []
        self._record = record
        self._added: list[tuple[Paths, np.ndarray, np.ndarray]] = []
        self._changes: list[Change] = []

    @property
    def now(self) -> float:
        """The time of the last event handled."""
        return self._sim.now

    @property
    def flow_count(self) -> int:
        """Flows added so far (the next flow's id)."""
        return self._sim.flow_count

    @property
    def capacity_bps(self) -> np.ndarray:
        """Every link of the run, as it was built (before any change)."""
        return self._sim.capacity_bps

    @property
    def finish_s(self) -> np.ndarray:
        """When each flow finished (NaN while it has not)."""
        return self._sim.finish_s

    def final_rate_bps(self, flows: np.ndarray) -> np.ndarray:
        """The rate each of `flows` had when its last bit went."""
        return self._sim.final_rate_bps(flows)

    @property
    def remaining_bytes(self) -> np.ndarray:
        """Bytes each flow has still to send now (what the engine has not yet delivered)."""
        return self._sim.remaining_bytes

    @property
    def link_load_bps(self) -> np.ndarray:
        """What the flows in flight put on each link now."""
        return self._sim.link_load_bps

    @property
    def link_capacity_bps(self) -> np.ndarray:
        """Each link's capacity now (after the changes applied so far)."""
        return self._sim.link_capacity_bps

    def add_flows(
        self,
        paths: Paths,
        size_bytes: np.ndarray,
        start_s: np.ndarray,
        rate_cap_bps: np.ndarray,
        *,
        latency_s: np.ndarray | None = None,
        dependencies: Dependencies | None = None,
        timeline_flows: np.ndarray | None = None,
        on_finish: FinishHandler | None = None,
    ) -> np.ndarray:
        """Add flows (see `Simulation.add_flows`); `on_finish` hears when any of them finishes."""
        ids = self._sim.add_flows(
            paths, size_bytes, start_s, rate_cap_bps, latency_s, dependencies, timeline_flows
        )
        if on_finish is not None and ids.size:
            self._first.append(int(ids[0]))
            self._end.append(int(ids[-1]) + 1)
            self._handler.append(on_finish)
        if self._record:
            count = paths.flow_count
            latency = np.zeros(count) if latency_s is None else np.asarray(latency_s, dtype=float)
            cap = np.broadcast_to(np.asarray(rate_cap_bps, dtype=float), (count,))
            self._added.append((paths, cap, np.broadcast_to(latency, (count,))))
        return ids

    def apply(self, change: Change) -> None:
        """A change at its time (at the next event if that has passed)."""
        self._sim.apply(change)
        if self._record:
            self._changes.append(replace(change, time_s=max(float(change.time_s), self.now)))

    def schedule(self, at_s: float, timer: Timer) -> None:
        """Call `timer(now)` at `at_s` (even when every flow in flight is stalled)."""
        self._sim.schedule(at_s, lambda sim: timer(sim.now))

    def run(self) -> SimResult:
        """Every event to the end; EngineError when flows can never finish."""
        return self._sim.run()

    def history(self) -> RunHistory:
        """Every flow and change the run was given (empty unless it was made with `record`)."""
        if not self._added:
            empty = Paths(np.zeros(1, dtype=np.int64), np.empty(0, dtype=np.int64))
            return RunHistory(empty, np.empty(0), np.empty(0), tuple(self._changes))
        return RunHistory(
            Paths.concat([a[0] for a in self._added]),
            np.concatenate([a[1] for a in self._added]),
            np.concatenate([a[2] for a in self._added]),
            tuple(self._changes),
        )

    def _finished(self, sim: Simulation, flows: np.ndarray) -> None:
        if not self._handler:
            return
        for flow in flows.tolist():
            k = bisect_right(self._first, flow) - 1
            if k >= 0 and flow < self._end[k]:
                self._handler[k](np.array([flow], dtype=np.int64))


class Driver(Protocol):
    """A job that feeds a run as it goes (a migration, federated traffic): it brings its own
    links (`links_bps`, numbered from `first_link` in the run) and attaches to the run."""

    @property
    def links_bps(self) -> np.ndarray: ...

    def attach(self, run: Run, first_link: int) -> None: ...


def attach_drivers(run: Run, drivers: Sequence[Driver], first_link: int) -> None:
    """Attach `drivers` to `run` in order, their links one after another from `first_link`."""
    for driver in drivers:
        driver.attach(run, first_link)
        first_link += driver.links_bps.size


@dataclass(frozen=True, eq=False)
class EngineJobs:
    """The tenants' jobs in engine form: every flow's path (NIC tiers included), the links
    they need (fabric, NVLink segments, NIC tiers), the changes planned for them."""

    paths: Paths
    capacity_bps: np.ndarray
    size_bytes: np.ndarray
    start_s: np.ndarray
    rate_cap_bps: np.ndarray
    latency_s: np.ndarray | None
    dependencies: Dependencies | None
    changes: list[Change]
    network: np.ndarray
    flow_job: np.ndarray = field(default_factory=lambda: np.empty(0, dtype=np.int64))
    job_names: tuple[str, ...] = ()

    @property
    def flow_count(self) -> int:
        return self.paths.flow_count

    def add_to(self, run: Run, timeline: bool = False) -> np.ndarray:
        """Add these flows and changes to `run`; their run ids."""
        ids = run.add_flows(
            self.paths,
            self.size_bytes,
            self.start_s,
            self.rate_cap_bps,
            latency_s=self.latency_s,
            dependencies=self.dependencies,
            timeline_flows=self.network if timeline else None,
        )
        for change in self.changes:
            run.apply(change)
        return ids

    def run(
        self, drivers: Sequence[Driver] = (), *, timeline: bool = False, progress: Progress | None = None
    ) -> tuple[Run, SimResult]:
        """These jobs on a run of their own links, `drivers` beside them (their links after
        the jobs'), run to the end: the run (for the drivers' outcomes) and the result."""
        run = Run(
            np.concatenate([self.capacity_bps, *(d.links_bps for d in drivers)]),
            timeline=timeline,
            progress=progress,
        )
        self.add_to(run, timeline)
        attach_drivers(run, drivers, self.capacity_bps.size)
        return run, run.run()

    def own(self, result: SimResult) -> SimResult:
        """The result of these jobs' flows (the run's first), without the drivers' (theirs
        are the drivers' to report; the timeline already counts the jobs' alone)."""
        flows = self.flow_count
        if result.finish_s.size == flows:
            return result
        return replace(result, start_s=result.start_s[:flows], finish_s=result.finish_s[:flows])
