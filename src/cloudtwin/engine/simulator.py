"""The event-driven fluid simulator: flows arrive, share links max-min fairly, and complete.

Events are flow arrivals, flow completions (remaining bits / rate) and dependency
releases (a flow waits until every flow it depends on has finished, plus a gap).
Flows that finish at the same instant are handled in one batch. After an event only
what changed is recomputed when that is exact: a new flow that fits in the residual
capacity of its links, or a finished flow whose links no other flow was held back by,
leaves every other rate as it was; otherwise the max-min rates are solved again.
"""

from __future__ import annotations

import bisect
import heapq
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from cloudtwin.engine.compiled import compiled_settle
from cloudtwin.engine.maxmin import COMPILED, RELATIVE_TOLERANCE, water_fill
from cloudtwin.errors import EngineError
from cloudtwin.topology.paths import Paths

__all__ = [
    "Change",
    "Dependencies",
    "FinishCallback",
    "SimResult",
    "Simulation",
    "TimerCallback",
    "simulate",
]

COMPLETION_TOLERANCE = 1e-9
"""A flow with at most this fraction of its bits left after an event finishes with it."""

REGION_WIDENINGS = 8
"""How often `settle` widens a region before it solves every flow in flight."""

FULL_SOLVE_COST = 2.5
"""What solving every flow in flight costs, per entry, in the regional re-solve's units of
work (entries visited), as measured with the compiled kernels. When regional re-solves
have lately cost more (every flow coupled to every other: the region grows to all of
them), `settle` solves everything directly."""

FULL_SOLVE_LINK_COST = 4.0
"""What solving every flow in flight costs on top, per link of the fabric, in the same
units: the fill's heap holds every loaded link, so on a fabric with about as many links
as entries in flight (a k=16 fat-tree at 40% load: about 6,000 of each) a full solve
costs some 7 units per entry (CPU time measured against the regional re-solve's), where
on a small fabric carrying many flows (128 hosts, 10,000 flows) it is near 2.5."""

REGIONAL_COST_DECAY = 0.9
"""Per full solve taken instead of a regional one, the estimate of the regional cost
shrinks by this factor, so that the region is tried again after a few events."""

Progress = Callable[[int, int], None]
"""progress(finished_flows, total_flows), called now and then during a run."""

FinishCallback = Callable[["Simulation", np.ndarray], None]
"""on_finish(simulation, flows): the ids of the flows that finished at `simulation.now`."""

TimerCallback = Callable[["Simulation"], None]
"""callback(simulation): a timer set with `Simulation.schedule`, called at its time."""


@dataclass(frozen=True)
class Dependencies:
    """Flow f may start only after every flow in `after[indptr[f]:indptr[f+1]]` has finished,
    plus `gap_s[f]` (a per-step software/launch latency)."""

    indptr: np.ndarray
    after: np.ndarray
    gap_s: np.ndarray | None = None


@dataclass(frozen=True, eq=False)
class Change:
    """Something that happens to the fabric at `time_s`: links change capacity (0 for a
    link that is down), and/or flows are moved to new paths (a strategy's repair)."""

    time_s: float
    link_ids: np.ndarray = field(default_factory=lambda: np.empty(0, dtype=np.int64))
    capacity_bps: np.ndarray = field(default_factory=lambda: np.empty(0))
    flows: np.ndarray = field(default_factory=lambda: np.empty(0, dtype=np.int64))
    paths: Paths | None = None


@dataclass(frozen=True)
class SimResult:
    """What happened to each flow (seconds)."""

    start_s: np.ndarray
    finish_s: np.ndarray
    events: int
    solves: int
    local_solves: int = 0
    timeline_s: np.ndarray | None = None
    timeline_bps: np.ndarray | None = None

    @property
    def fct_s(self) -> np.ndarray:
        """Flow completion time: finish minus (actual) start."""
        return self.finish_s - self.start_s

    @property
    def completion_s(self) -> float:
        """When the last flow finished."""
        return float(self.finish_s.max()) if self.finish_s.size else 0.0


class _Active:
    """Entries (flow, link, weight) of the flows now in flight, and the load they put on links."""

    def __init__(self, paths: Paths, capacity_bps: np.ndarray, rate_cap_bps: np.ndarray) -> None:
        self.paths = paths
        self.capacity = capacity_bps
        self.threshold = capacity_bps * (1 - RELATIVE_TOLERANCE)
        self.cap = rate_cap_bps
        self.flow = np.empty(0, dtype=np.int64)
        self.link = np.empty(0, dtype=np.int64)
        self.weight = np.empty(0)
        self.rate = np.zeros(rate_cap_bps.size)
        self.final = np.zeros(rate_cap_bps.size)  # each flow's rate when its last bit went
        self.load = np.zeros(capacity_bps.size)
        self.count = np.zeros(capacity_bps.size, dtype=np.int64)
        self.members = np.empty(0, dtype=np.int64)
        self.local = np.zeros(rate_cap_bps.size, dtype=np.int64)
        self.flag = np.zeros(rate_cap_bps.size, dtype=bool)  # scratch, all False between uses
        self.compiled = COMPILED
        if self.compiled:
            self.scratch_bool = np.zeros(2 * rate_cap_bps.size, dtype=bool)
            self.scratch_int = np.full(2 * rate_cap_bps.size + capacity_bps.size, -1, dtype=np.int64)
        self.solves = 0
        self.local_solves = 0
        self.regional_cost = 0.0  # recent regional re-solve cost per entry in flight
        self.active = np.zeros(rate_cap_bps.size, dtype=bool)

    def _entries(self, flows: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        indptr = self.paths.indptr
        if flows.size == 1:  # the usual event: one flow comes or goes
            begin, end = int(indptr[flows[0]]), int(indptr[flows[0] + 1])
            return (
                flows.repeat(end - begin),
                self.paths.link_ids[begin:end],
                self.paths.entry_weights[begin:end],
            )
        lengths = indptr[flows + 1] - indptr[flows]
        starts = np.repeat(indptr[flows] - np.cumsum(lengths) + lengths, lengths)
        index = starts + np.arange(int(lengths.sum()))
        return (
            np.repeat(flows, lengths),
            self.paths.link_ids[index],
            self.paths.entry_weights[index],
        )

    def remove(self, done: np.ndarray) -> tuple[bool, np.ndarray]:
        """Drop finished flows; True if the others' rates are still max-min, and their links."""
        flow, link, weight = self._entries(done)
        freed = np.bincount(link, weight * self.rate[flow], minlength=self.load.size)
        self.load -= freed
        np.subtract.at(self.count, link, 1)
        # A link that was saturated before *all* the finished flows left may now let others rise.
        held = (self.load[link] + freed[link] >= self.threshold[link]) & (self.count[link] > 0)
        self.active[done] = False
        keep = self.active[self.flow]
        self.flow, self.link, self.weight = self.flow[keep], self.link[keep], self.weight[keep]
        self.members = self.members[self.active[self.members]]
        self.final[done] = self.rate[done]
        self.rate[done] = 0.0
        return not held.any(), link

    def add(self, new: np.ndarray) -> tuple[bool, np.ndarray]:
        """Admit arriving flows; True if each fits at its cap without slowing anyone, and their links."""
        flow, link, weight = self._entries(new)
        self.flow = np.concatenate((self.flow, flow))
        self.link = np.concatenate((self.link, link))
        self.weight = np.concatenate((self.weight, weight))
        self.members = np.concatenate((self.members, new))
        self.active[new] = True
        np.add.at(self.count, link, 1)
        need = np.bincount(link, weight * self.cap[flow], minlength=self.load.size)
        # (a link crossed twice is checked twice, with the same numbers)
        fits = np.all(
            self.load[link] + need[link] <= self.capacity[link] * (1 + RELATIVE_TOLERANCE)
        )
        if fits:
            self.rate[new] = self.cap[new]
            self.load += need
        return bool(fits), link

    def extend(self, paths: Paths, rate_cap_bps: np.ndarray) -> None:
        """Room for more flows (added after those already known; none of them in flight)."""
        flows = rate_cap_bps.size
        self.paths = Paths.concat([self.paths, paths])
        self.cap = np.concatenate((self.cap, rate_cap_bps))
        self.rate = np.concatenate((self.rate, np.zeros(flows)))
        self.final = np.concatenate((self.final, np.zeros(flows)))
        self.local = np.concatenate((self.local, np.zeros(flows, dtype=np.int64)))
        self.flag = np.zeros(self.cap.size, dtype=bool)
        self.active = np.concatenate((self.active, np.zeros(flows, dtype=bool)))
        if self.compiled:
            self.scratch_bool = np.zeros(2 * self.cap.size, dtype=bool)
            self.scratch_int = np.full(2 * self.cap.size + self.capacity.size, -1, dtype=np.int64)

    def set_capacity(self, links: np.ndarray, capacity_bps: np.ndarray) -> None:
        """Links change capacity (a failure, a repair, a degradation)."""
        self.capacity = self.capacity.copy()
        self.capacity[links] = capacity_bps
        self.threshold = self.capacity * (1 - RELATIVE_TOLERANCE)

    def reroute(self, flows: np.ndarray, paths: Paths) -> np.ndarray:
        """Move `flows` to new paths; returns the links whose load may change."""
        moving = flows[self.active[flows]]
        old_flow, old_link, old_weight = self._entries(moving)
        self.paths = self.paths.replace(flows, paths)
        if moving.size == 0:
            return np.empty(0, dtype=np.int64)
        np.subtract.at(self.load, old_link, old_weight * self.rate[old_flow])
        np.subtract.at(self.count, old_link, 1)
        self.flag[moving] = True
        keep = ~self.flag[self.flow]
        self.flag[moving] = False
        self.flow, self.link, self.weight = self.flow[keep], self.link[keep], self.weight[keep]
        flow, link, weight = self._entries(moving)
        self.flow = np.concatenate((self.flow, flow))
        self.link = np.concatenate((self.link, link))
        self.weight = np.concatenate((self.weight, weight))
        np.add.at(self.count, link, 1)
        self.rate[moving] = 0.0
        return np.concatenate((old_link, link))

    def settle(self, touched: np.ndarray) -> None:
        """Restore max-min rates after flows came or went on the `touched` links.

        First solve only the flows that cross a touched link, the others' load held
        fixed, and accept the result if every flow whose links changed still meets the
        max-min conditions (an allocation that is feasible and gives every flow a
        bottleneck is the unique max-min one); else widen the region by the flows that
        share a link with a flow that failed the check (the compiled path; the numpy path
        widens by every link of the region), a few times, and solve everything once it
        holds half the flows.
        """
        if self.compiled:
            entries = max(self.flow.size, 1)
            full_cost = FULL_SOLVE_COST + FULL_SOLVE_LINK_COST * self.capacity.size / entries
            if self.regional_cost > full_cost:
                # lately a regional re-solve cost more than solving everything: solve
                # everything, and let the estimate decay so the region is tried again
                self.regional_cost *= REGIONAL_COST_DECAY
                self.solve()
                return
            work = compiled_settle(
                self.flow, self.link, self.weight, self.rate, self.cap, self.capacity, self.load,
                np.ascontiguousarray(touched, dtype=np.int64), self.members.size, REGION_WIDENINGS,
                RELATIVE_TOLERANCE, self.scratch_bool, self.scratch_int,
            )
            cost = (work if work >= 0 else -work - 1) / entries
            if work >= 0:
                self.local_solves += 1
            else:
                cost += full_cost
                self.solve()
            self.regional_cost = 0.5 * (self.regional_cost + cost)
            return
        links = np.zeros(self.capacity.size, dtype=bool)
        links[touched] = True
        for _ in range(REGION_WIDENINGS):
            region = np.unique(self.flow[links[self.link]])
            if region.size == 0:
                return
            if region.size * 2 > self.members.size:
                break
            if self._solve_region(region):
                self.local_solves += 1
                return
            self.flag[region] = True
            links[self.link[self.flag[self.flow]]] = True
            self.flag[region] = False
        self.solve()

    def _solve_region(self, region: np.ndarray) -> bool:
        self.flag[region] = True
        entry_in = self.flag[self.flow]
        self.flag[region] = False
        flow, link, weight = self.flow[entry_in], self.link[entry_in], self.weight[entry_in]
        own = np.bincount(link, weight * self.rate[flow], minlength=self.load.size)
        fixed = np.maximum(self.load - own, 0.0)
        residual = np.maximum(self.capacity - fixed, 0.0)
        self.local[region] = np.arange(region.size)
        rates = water_fill(self.local[flow], link, weight, residual, self.cap[region])
        old = self.rate[region].copy()
        self.rate[region] = rates
        load = fixed + np.bincount(link, weight * self.rate[flow], minlength=self.load.size)
        if self._max_min_holds(load, link):
            self.load = load.astype(float)
            return True
        self.rate[region] = old
        return False

    def _max_min_holds(self, load: np.ndarray, changed_links: np.ndarray) -> bool:
        """Feasible, and every flow crossing a changed link is at its cap or has a bottleneck."""
        changed = np.zeros(self.capacity.size, dtype=bool)
        changed[changed_links] = True
        if np.any(load[changed] > self.capacity[changed] * (1 + RELATIVE_TOLERANCE)):
            return False
        near = self.flow[changed[self.link]]
        self.flag[near] = True
        entries = self.flag[self.flow]
        self.flag[near] = False
        flow, link = self.flow[entries], self.link[entries]
        rate = self.rate[flow]
        highest = np.zeros(self.capacity.size)
        np.maximum.at(highest, self.link, self.rate[self.flow])
        saturated = load[link] >= self.threshold[link]
        good = (saturated & (rate >= highest[link] * (1 - RELATIVE_TOLERANCE))) | (
            rate >= self.cap[flow] * (1 - RELATIVE_TOLERANCE)
        )
        # a flow's entries are contiguous: it is fine if any of its entries is
        starts = np.flatnonzero(np.concatenate(([True], flow[1:] != flow[:-1])))
        return bool(np.all(np.logical_or.reduceat(good, starts))) if flow.size else True

    def solve(self) -> None:
        """Max-min rates of every flow in flight, from scratch."""
        self.solves += 1
        members = self.members
        self.local[members] = np.arange(members.size)
        rates = water_fill(
            self.local[self.flow], self.link, self.weight, self.capacity, self.cap[members]
        )
        self.rate[members] = rates
        self.load[:] = np.bincount(
            self.link, self.weight * self.rate[self.flow], minlength=self.capacity.size
        )


class Simulation:
    """A fluid simulation driven step by step: flows can be added and changes applied between
    events, and a callback hears of every flow that finishes.

    Time starts at the earliest start of the first flows added. Each `step()` handles one
    event: flows finishing (every flow whose last bit is sent by then, as one batch),
    flows arriving, scheduled changes; the others' rates are then restored to max-min.
    `on_finish(simulation, flows)` is called after each event that finished flows, so a
    job can decide its next transfer from what happened (its start is `simulation.now`
    or later). `simulate` is `add_flows` + `apply` for each change + `run()`.
    """

    def __init__(
        self,
        capacity_bps: np.ndarray,
        *,
        on_finish: FinishCallback | None = None,
        progress: Progress | None = None,
        timeline: bool = False,
    ) -> None:
        self.capacity_bps = np.asarray(capacity_bps, dtype=float)
        self.on_finish = on_finish
        self.progress = progress
        self.timeline = timeline
        self._active = _Active(
            Paths(np.zeros(1, dtype=np.int64), np.empty(0, dtype=np.int64)),
            self.capacity_bps,
            np.empty(0),
        )
        self._size_bits = np.empty(0)
        self._tiny = np.empty(0)  # bits left at which a flow counts as finished
        self._start = np.empty(0)
        self._latency = np.empty(0)
        self._remaining = np.empty(0)  # bits left as of `_since` (the last change of rate)
        self._since = np.empty(0)
        self._finish = np.empty(0)
        self._ready = np.empty(0)
        self._waiting = np.empty(0, dtype=np.int64)
        self._dependents = np.empty(0, dtype=np.int64)
        self._dep_ptr = np.zeros(1, dtype=np.int64)
        self._gap = np.empty(0)
        self._counted: np.ndarray | None = None
        self._initial = np.empty(0, dtype=np.int64)
        self._initial_start = np.empty(0)
        self._cursor = 0
        self._released: list[tuple[float, int]] = []
        self._schedule: list[Change] = []
        self._next_change = 0
        self._timers: list[tuple[float, int, TimerCallback]] = []
        self._timer_count = 0
        self._now: float | None = None
        self._times: list[float] = []
        self._totals: list[float] = []
        self._finished = 0
        self._events = 0
        self._report_every = 1
        self._next_report = np.inf

    @property
    def now(self) -> float:
        """The time of the last event handled (0 before the first)."""
        return 0.0 if self._now is None else self._now

    @property
    def flow_count(self) -> int:
        """Flows added so far."""
        return int(self._size_bits.size)

    @property
    def finished(self) -> int:
        """Flows finished so far."""
        return self._finished

    @property
    def start_s(self) -> np.ndarray:
        """When each flow started (or will: a waiting flow's start is known once released)."""
        return self._start.copy()

    @property
    def finish_s(self) -> np.ndarray:
        """When each flow finished (NaN while it has not)."""
        return self._finish.copy()

    @property
    def rate_bps(self) -> np.ndarray:
        """Each flow's rate now (0 for a flow not in flight)."""
        return self._active.rate.copy()

    @property
    def link_load_bps(self) -> np.ndarray:
        """What the flows in flight put on each link now (bits per second)."""
        return self._active.load.copy()

    @property
    def link_capacity_bps(self) -> np.ndarray:
        """Each link's capacity now (after the changes applied so far)."""
        return self._active.capacity.copy()

    def final_rate_bps(self, flows: np.ndarray) -> np.ndarray:
        """The rate each of `flows` had when its last bit went (0 for one not finished)."""
        return self._active.final[np.asarray(flows, dtype=np.int64)]

    @property
    def remaining_bytes(self) -> np.ndarray:
        """Bytes each flow has still to send as of `now`."""
        sent = self._active.rate * np.maximum(self.now - self._since, 0.0)
        return (self._remaining - sent) / 8.0

    def add_flows(
        self,
        paths: Paths,
        size_bytes: np.ndarray,
        start_s: np.ndarray,
        rate_cap_bps: np.ndarray,
        latency_s: np.ndarray | None = None,
        dependencies: Dependencies | None = None,
        timeline_flows: np.ndarray | None = None,
    ) -> np.ndarray:
        """Add flows; returns their ids (consecutive, after those already added).

        `dependencies` index the flows of this call (0 = the first flow added now). A flow
        whose start is before `now` starts at `now`. `timeline_flows` (a boolean mask over
        these flows) picks the flows a timeline sums (default: all).
        """
        flows = paths.flow_count
        size_bits = np.asarray(size_bytes, dtype=float) * 8.0
        start = np.asarray(start_s, dtype=float).copy()
        cap = np.asarray(rate_cap_bps, dtype=float)
        latency = np.zeros(flows) if latency_s is None else np.asarray(latency_s, dtype=float)
        _check(flows, size_bits, start, cap, latency, self.capacity_bps, paths)
        waiting, dependents, dep_ptr, gap = _dependency_tables(flows, dependencies)
        counted = None if timeline_flows is None else np.asarray(timeline_flows, dtype=bool)
        if counted is not None and counted.shape != (flows,):
            raise EngineError(f"timeline_flows has shape {counted.shape}, expected ({flows},)")
        if self._now is not None:
            start = np.maximum(start, self._now)
        offset = self.flow_count
        ids = np.arange(offset, offset + flows, dtype=np.int64)
        if offset == 0:
            self._size_bits, self._start, self._latency = size_bits, start, latency
            self._tiny = COMPLETION_TOLERANCE * size_bits
            self._remaining = size_bits.copy()
            self._since = start.copy()
            self._finish = np.full(flows, np.nan)
            self._ready = np.full(flows, -np.inf)
            self._waiting, self._dependents, self._dep_ptr, self._gap = (
                waiting, dependents, dep_ptr, gap,
            )
            self._active = _Active(paths, self.capacity_bps, cap)
            self._counted = counted
        else:
            self._size_bits = np.concatenate((self._size_bits, size_bits))
            self._tiny = np.concatenate((self._tiny, COMPLETION_TOLERANCE * size_bits))
            self._start = np.concatenate((self._start, start))
            self._latency = np.concatenate((self._latency, latency))
            self._remaining = np.concatenate((self._remaining, size_bits))
            self._since = np.concatenate((self._since, start))
            self._finish = np.concatenate((self._finish, np.full(flows, np.nan)))
            self._ready = np.concatenate((self._ready, np.full(flows, -np.inf)))
            self._waiting = np.concatenate((self._waiting, waiting))
            self._dependents = np.concatenate((self._dependents, dependents + offset))
            self._dep_ptr = np.concatenate((self._dep_ptr, dep_ptr[1:] + self._dep_ptr[-1]))
            self._gap = np.concatenate((self._gap, gap))
            self._active.extend(paths, cap)
            if counted is not None or self._counted is not None:
                before = np.ones(offset, dtype=bool) if self._counted is None else self._counted
                after = np.ones(flows, dtype=bool) if counted is None else counted
                self._counted = np.concatenate((before, after))
        initial = ids[waiting == 0]
        if self._cursor < self._initial.size:
            initial = np.concatenate((self._initial[self._cursor :], initial))
        self._initial = initial[np.argsort(self._start[initial], kind="stable")]
        self._initial_start = self._start[self._initial]
        self._cursor = 0
        self._report_every = max(1, self.flow_count // 200)
        self._next_report = min(self._next_report, self._finished + self._report_every)
        return ids

    def apply(self, change: Change) -> None:
        """Schedule a change (at its `time_s`; at the next event if that time has passed)."""
        pending = self._schedule[self._next_change :]
        position = bisect.bisect_right([c.time_s for c in pending], change.time_s)
        pending.insert(position, change)
        self._schedule = pending
        self._next_change = 0

    def schedule(self, at_s: float, callback: TimerCallback) -> None:
        """Call `callback(simulation)` when time reaches `at_s` (SimPy's timeout).

        A timer is an event of its own: the run stops there even when no flow finishes,
        arrives or changes, and even when every flow in flight is stalled on a link of
        capacity 0 (the callback may be what moves them). Timers due at the same instant
        fire in the order they were scheduled, after that instant's completions, arrivals
        and changes; flows they add and changes they apply at `now` are handled by the
        next step, at the same instant. A time already past fires at the next step.
        """
        if not math.isfinite(at_s):
            raise EngineError(f"a timer at {at_s} s never fires")
        heapq.heappush(self._timers, (float(at_s), self._timer_count, callback))
        self._timer_count += 1

    def step(self, until: float = np.inf) -> bool:
        """Handle the next event if it happens by `until`; False if there was none.

        The phases, in order: find the next event and advance every flow in flight to it;
        finish the flows whose last bit goes then; admit the flows that arrive; apply the
        changes due; restore max-min rates where something moved; record the timeline and
        progress; tell `on_finish` and the timers due.
        """
        now = self._clock()
        active = self._active
        members = active.members
        rate = active.rate[members]
        finish_at = self._finish_at(members, rate)
        at = self._next_event(now, finish_at, members.size)
        if at is None or at > until:
            return False
        self._events += 1
        step, now = at - now, at
        self._now = now
        left = self._left(now, members, rate)
        done, exact, touched = self._finish_flows(now, members, finish_at, left, step)
        exact = self._admit_arrivals(now, touched) and exact
        exact = self._apply_changes(now, touched) and exact
        if not exact:
            active.settle(np.concatenate(touched))
            self._rebase(now, members, rate)
        self._record(now)
        if done.size and self.on_finish is not None:
            self.on_finish(self, done)
        self._fire_timers(now)
        return True

    def _clock(self) -> float:
        """The time now; on the first step, the first arrival's (or the first timer's)."""
        if self._now is None:
            starts = [np.inf]
            if self._initial.size:
                starts.append(float(self._initial_start[0]))
            if self._released:
                starts.append(self._released[0][0])
            if self._timers:
                starts.append(self._timers[0][0])
            first = min(starts)
            self._now = first if math.isfinite(first) else 0.0
        return self._now

    def _finish_at(self, members: np.ndarray, rate: np.ndarray) -> np.ndarray:
        """When each flow in flight sends its last bit at its rate (inf when stalled).

        A flow's bits are counted from the last change of its rate (`_since`), so events
        that leave its rate alone (other flows' arrivals, completions, timers) do not
        touch its arithmetic: a job's times are the same, bit for bit, whatever runs
        beside it on other links.
        """
        to_finish = np.empty(members.size)
        to_finish.fill(np.inf)
        np.divide(self._remaining[members], rate, out=to_finish, where=rate > 0)
        to_finish += self._since[members]
        return to_finish

    def _next_event(self, now: float, finish_at: np.ndarray, in_flight: int) -> float | None:
        """When the next event happens (a completion, an arrival, a change, a timer; not
        before now); None if there is none. EngineError when flows are in flight and
        nothing can ever move them."""
        soonest = float(finish_at.min()) if in_flight else np.inf
        cursor = self._cursor
        next_arrival = min(
            float(self._initial_start[cursor]) if cursor < self._initial.size else np.inf,
            self._released[0][0] if self._released else np.inf,
        )
        schedule = self._schedule
        change_at = schedule[self._next_change].time_s if self._next_change < len(schedule) else np.inf
        timer_at = self._timers[0][0] if self._timers else np.inf
        at = max(min(soonest, next_arrival, change_at, timer_at), now)
        if math.isfinite(at):
            return at
        if in_flight:
            raise EngineError(f"{in_flight} flows can make no progress (a link of capacity 0?)")
        return None

    def _left(self, now: float, members: np.ndarray, rate: np.ndarray) -> np.ndarray:
        """Bits each flow in flight has left at `now`."""
        return self._remaining[members] - rate * (now - self._since[members])

    def _rebase(self, now: float, members: np.ndarray, rate: np.ndarray) -> None:
        """Flows that were in flight and whose rate the event changed count their bits from now."""
        active = self._active
        still = active.active[members]
        moved = members[still & (active.rate[members] != rate)]
        if moved.size:
            old = rate[still & (active.rate[members] != rate)]
            self._remaining[moved] -= old * (now - self._since[moved])
            self._since[moved] = now

    def _finish_flows(
        self, now: float, members: np.ndarray, finish_at: np.ndarray, left: np.ndarray, step: float
    ) -> tuple[np.ndarray, bool, list[np.ndarray]]:
        """Finish the flows whose last bit goes now, and those within a hair of it:
        completions that are one instant in exact arithmetic drift apart by rounding, and
        each would otherwise cost an event of its own. Returns them, whether the others'
        rates are still max-min, and the links touched."""
        done = members[(finish_at <= now + step * 1e-12 + 1e-18) | (left <= self._tiny[members])]
        if not done.size:
            return done, True, []
        self._remaining[done] = 0.0
        self._finish[done] = now + self._latency[done]
        exact, gone_links = self._active.remove(done)
        self._finished += done.size
        if self._dependents.size:
            _release(
                done, self._finish, self._waiting, (self._dependents, self._dep_ptr),
                self._gap, self._start, self._ready, self._released,
            )
        return done, exact, [gone_links]

    def _admit_arrivals(self, now: float, touched: list[np.ndarray]) -> bool:
        """Start the flows due by now; True if each fits without slowing anyone."""
        arriving, self._cursor = _arrivals(
            now, self._initial, self._initial_start, self._cursor, self._released
        )
        if not arriving.size:
            return True
        self._since[arriving] = now
        fits, new_links = self._active.add(arriving)
        touched.append(new_links)
        return fits

    def _apply_changes(self, now: float, touched: list[np.ndarray]) -> bool:
        """Apply the changes due by now; True if there was none."""
        schedule = self._schedule
        exact = True
        while self._next_change < len(schedule) and schedule[self._next_change].time_s <= now:
            touched.append(_apply(self._active, schedule[self._next_change]))
            exact = False
            self._next_change += 1
        return exact

    def _record(self, now: float) -> None:
        """The timeline's point and the progress report, after an event."""
        active = self._active
        if self.timeline:
            self._times.append(now)
            counted = self._counted
            members = active.members if counted is None else active.members[counted[active.members]]
            self._totals.append(float(active.rate[members].sum()))
        if self.progress is not None and self._finished >= self._next_report:
            self.progress(self._finished, self.flow_count)
            self._next_report = self._finished + self._report_every

    def _fire_timers(self, now: float) -> None:
        """Call every timer due by now, in order (a callback may schedule more)."""
        timers = self._timers
        while timers and timers[0][0] <= now:
            _, _, callback = heapq.heappop(timers)
            callback(self)

    def run(self, until: float | None = None) -> SimResult:
        """Handle every event up to `until` (default: until nothing is left); the result so far.

        Time stays at the last event handled; flows added afterwards with a start at
        `until` or later arrive exactly then. Run to the end, every flow must have finished.
        """
        limit = np.inf if until is None else float(until)
        while self.step(limit):
            pass
        if until is None:
            unfinished = int(np.isnan(self._finish).sum())
            if unfinished:
                raise EngineError(f"{unfinished} flows never started (a dependency cycle?)")
            if self.progress is not None:
                self.progress(self.flow_count, self.flow_count)
        return self.result()

    def result(self) -> SimResult:
        """Start and finish of every flow so far (finish NaN where not finished)."""
        return SimResult(
            start_s=self._start.copy(),
            finish_s=self._finish.copy(),
            events=self._events,
            solves=self._active.solves,
            local_solves=self._active.local_solves,
            timeline_s=np.array(self._times) if self.timeline else None,
            timeline_bps=np.array(self._totals) if self.timeline else None,
        )


def simulate(
    paths: Paths,
    capacity_bps: np.ndarray,
    size_bytes: np.ndarray,
    start_s: np.ndarray,
    rate_cap_bps: np.ndarray,
    latency_s: np.ndarray | None = None,
    dependencies: Dependencies | None = None,
    progress: Progress | None = None,
    changes: Sequence[Change] = (),
    timeline: bool = False,
    timeline_flows: np.ndarray | None = None,
) -> SimResult:
    """Run flows to completion; return when each one started and finished.

    A flow's finish time is when its last bit has been sent plus `latency_s` (its path's
    propagation delay). A dependent flow starts at the latest finish of the flows it
    depends on plus its gap, or at its own `start_s` if that is later. `changes` happen
    at their times: a flow on a link of capacity 0 makes no progress until a change
    moves it or restores the link. With `timeline`, the aggregate rate after every
    event is recorded (a step function for throughput plots), summed over the flows
    `timeline_flows` selects (a boolean mask; default: all). The same as one
    `Simulation` given these flows and changes and run to the end.
    """
    simulation = Simulation(capacity_bps, progress=progress, timeline=timeline)
    simulation.add_flows(
        paths, size_bytes, start_s, rate_cap_bps, latency_s, dependencies, timeline_flows
    )
    for change in sorted(changes, key=lambda c: c.time_s):
        simulation.apply(change)
    return simulation.run()


def _apply(active: _Active, change: Change) -> np.ndarray:
    """Apply one scheduled change; returns the links it touched."""
    touched = [np.asarray(change.link_ids, dtype=np.int64)]
    if change.link_ids.size:
        active.set_capacity(change.link_ids, change.capacity_bps)
    if change.paths is not None:
        touched.append(active.reroute(np.asarray(change.flows, dtype=np.int64), change.paths))
    return np.concatenate(touched)


def _check(
    flows: int,
    size_bits: np.ndarray,
    start: np.ndarray,
    cap: np.ndarray,
    latency: np.ndarray,
    capacity: np.ndarray,
    paths: Paths,
) -> None:
    for name, array in (
        ("size_bytes", size_bits),
        ("start_s", start),
        ("rate_cap_bps", cap),
        ("latency_s", latency),
    ):
        if array.shape != (flows,):
            raise EngineError(f"{name} has shape {array.shape}, expected ({flows},)")
        if not np.all(np.isfinite(array)):
            raise EngineError(f"{name} holds a value that is not finite")
    if np.any(size_bits <= 0):
        raise EngineError("size_bytes must be positive for every flow")
    if np.any(cap <= 0):
        raise EngineError("rate_cap_bps must be positive for every flow")
    if paths.link_ids.size and (paths.link_ids.min() < 0 or paths.link_ids.max() >= capacity.size):
        raise EngineError("a path names a link that does not exist")


def _dependency_tables(
    flows: int, dependencies: Dependencies | None
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per flow: how many flows it waits for, and (CSR) which flows wait for it."""
    if dependencies is None:
        empty = np.empty(0, dtype=np.int64)
        return (
            np.zeros(flows, dtype=np.int64),
            empty,
            np.zeros(flows + 1, dtype=np.int64),
            np.zeros(flows),
        )
    indptr = np.asarray(dependencies.indptr, dtype=np.int64)
    after = np.asarray(dependencies.after, dtype=np.int64)
    if indptr.size != flows + 1 or (after.size and (after.min() < 0 or after.max() >= flows)):
        raise EngineError("dependencies do not match the flows")
    waiter = np.repeat(np.arange(flows), np.diff(indptr))
    order = np.argsort(after, kind="stable")
    dep_ptr = np.concatenate(([0], np.cumsum(np.bincount(after, minlength=flows))))
    gap = (
        np.zeros(flows)
        if dependencies.gap_s is None
        else np.asarray(dependencies.gap_s, dtype=float)
    )
    return np.diff(indptr).astype(np.int64), waiter[order], dep_ptr, gap


def _release(
    done: np.ndarray,
    finish: np.ndarray,
    waiting: np.ndarray,
    table: tuple[np.ndarray, np.ndarray],
    gap: np.ndarray,
    start: np.ndarray,
    ready: np.ndarray,
    released: list[tuple[float, int]],
) -> None:
    """Count down the waiters of `done`; queue those with nothing left to wait for."""
    dependents, dep_ptr = table
    lengths = dep_ptr[done + 1] - dep_ptr[done]
    if not lengths.any():
        return
    index = np.repeat(dep_ptr[done] - np.cumsum(lengths) + lengths, lengths) + np.arange(
        int(lengths.sum())
    )
    waiters = dependents[index]
    np.subtract.at(waiting, waiters, 1)
    # A waiter starts after the latest finish among the flows it waited for.
    np.maximum.at(ready, waiters, np.repeat(finish[done], lengths))
    for flow in np.unique(waiters[waiting[waiters] == 0]):
        begin = max(float(start[flow]), float(ready[flow]) + float(gap[flow]))
        start[flow] = begin
        heapq.heappush(released, (begin, int(flow)))


def _arrivals(
    now: float,
    initial: np.ndarray,
    initial_start: np.ndarray,
    cursor: int,
    released: list[tuple[float, int]],
) -> tuple[np.ndarray, int]:
    """Flows due to start by `now`: the next initial ones and released waiters."""
    end = cursor
    if cursor < initial.size and initial_start[cursor] <= now:
        end = int(np.searchsorted(initial_start, now, side="right"))
    batch = [initial[cursor:end]]
    due: list[int] = []
    while released and released[0][0] <= now:
        due.append(heapq.heappop(released)[1])
    if not due:
        return batch[0], end
    batch.append(np.array(due, dtype=np.int64))
    return np.concatenate(batch), end
