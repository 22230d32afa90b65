"""Pre-copy live migration as a sequence of transfers, with post-copy and the non-convergence policies.

The model (docs/mobility.md gives it with its sources):

1. The first pass sends all memory: each page that holds data costs a page plus an
   8-byte header, each zero page a 9-byte marker.
2. The dirty log is read ("synced") at the end of each transfer. What a sync finds is the
   part of the previous transfer left unsent plus what the VM dirtied since the last sync
   (distinct bytes, capped by the working set), less the dirtied pages that were still
   waiting to be sent (they are sent once; in the first pass, which of them the scan had
   not reached is the memory model's answer: the working set spread evenly, or its
   measured place in the scan and the order the VM writes it).
3. At each sync the pending set is compared with what the live bandwidth observed in the
   last transfer moves within the downtime limit (QEMU's `threshold_size = bandwidth x
   downtime_limit`). If it fits, the VM is paused and the set is sent at the final
   bandwidth (QEMU's max-bandwidth does not apply to it), then the VM resumes at the
   destination after `resume_s`: downtime = stop-and-copy + resume.
4. Otherwise the next transfer sends whole rate-limit periods (100 ms of the live
   bandwidth each) until less than the threshold is left unsent, QEMU's trigger for the
   next sync (`syncs="qemu"`); with `syncs="rounds"` (the textbook model) it sends the
   whole pending set and nothing is left unsent.
5. Two rounds in a row that do not shrink the pending set, `max_rounds`, or `timeout_s`
   mean no convergence; the policy then aborts (the VM keeps running at the source),
   raises the downtime limit step by step, switches auto-converge on (QEMU's throttle:
   from 20 %, +10 % per step, up to 99 %, slowing the VM as much), or switches to
   post-copy (pause for the device state only, then the rest is pushed while the VM runs
   at the destination; each page it touches before it arrives costs a round trip plus
   the page).

`Migration` is a stepper: it says which transfer comes next and is told when the
transfer ended, so the same model runs with a constant bandwidth (`plan_migration`) or
with each round as a flow of the engine, sharing the path with tenant traffic.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Literal

from cloudtwin.mobility.memory import PAGE_BYTES, VmMemory
from cloudtwin.mobility.options import (
    PAGE_HEADER_BYTES,
    THROTTLE_PERIOD_S,
    ZERO_PAGE_BYTES,
    MigrationOptions,
)

__all__ = ["Migration", "MigrationResult", "PathEvent", "Phase", "Round", "Transfer", "plan_migration"]

Phase = Literal["disk", "bulk", "live", "stop-and-copy", "postcopy", "disk-background"]
Outcome = Literal["running", "completed", "aborted"]
WIRE_FACTOR = (PAGE_BYTES + PAGE_HEADER_BYTES) / PAGE_BYTES


SAME_DIRTY_FRACTION = 1e-9
"""Two rounds' dirty sets this close (relative) are the same set: the dirty set does not shrink."""

@dataclass(frozen=True)
class Transfer:
    """One transfer of a migration: its phase, round, bytes on the wire and rate cap (bit/s)."""

    phase: Phase
    round: int
    wire_bytes: float
    rate_cap_bps: float

    @property
    def paused(self) -> bool:
        """True while the VM is stopped (the stop-and-copy)."""
        return self.phase == "stop-and-copy"


PathEvent = dict[str, str | int | float]
"""A stall, re-route or resume of a migration's stream on the engine's path:
`{"time_s", "event"[, "flows" | "links"]}` (the extra count depends on the event)."""


@dataclass(frozen=True)
class Round:
    """One transfer as it ran: phase, round, start and end (s from the migration's start),
    bytes on the wire, the throttle and downtime limit then; on the engine, the path events
    that happened while it was sent (None in a plan, which has no path)."""

    phase: Phase
    round: int
    start_s: float
    end_s: float
    bytes: float
    throttle: float
    downtime_limit_s: float
    path_events: tuple[PathEvent, ...] | None = None

    def to_json(self) -> dict[str, object]:
        """`{"phase", "round", "start_s", "end_s", "bytes", "throttle", "downtime_limit_s"}`, and
        `"path_events"` when the round ran on the engine."""
        document: dict[str, object] = {
            "phase": self.phase,
            "round": self.round,
            "start_s": self.start_s,
            "end_s": self.end_s,
            "bytes": self.bytes,
            "throttle": self.throttle,
            "downtime_limit_s": self.downtime_limit_s,
        }
        if self.path_events is not None:
            document["path_events"] = list(self.path_events)
        return document


@dataclass
class MigrationResult:
    """What a migration did; `to_dict` is the `--json` form."""

    converged: bool
    outcome: Outcome
    total_time_s: float
    downtime_s: float
    stop_copy_s: float
    resume_s: float
    overlay_update_s: float
    bytes: float
    rounds: int
    timeline: list[Round]
    actions: list[str] = field(default_factory=list)
    max_throttle: float = 0.0
    downtime_limit_s: float = 0.0
    postcopy_faults: float = 0.0
    postcopy_stall_s: float = 0.0
    crypto_cpu_s: float = 0.0
    reason: str = ""

    @property
    def over_limit(self) -> bool:
        """Whether the migration completed with a pause longer than its downtime limit.

        The switchover test is QEMU's: the pending pages against what the live bandwidth
        moves within the limit. The pause also sends the pages' headers and the device
        state, at the final bandwidth, and then resumes, so it can end past the limit (in
        QEMU as here); the migration converged, but not within the limit.
        """
        return self.converged and self.downtime_s > self.downtime_limit_s

    def status(self) -> str:
        """`converged`, `converged, over the limit` or `did not converge`."""
        if not self.converged:
            return "did not converge"
        return "converged, over the limit" if self.over_limit else "converged"

    def over_limit_note(self) -> str:
        """Why the pause passed the limit ("" when it did not)."""
        if not self.over_limit:
            return ""
        return (
            f"downtime {self.downtime_s * 1e3:.1f} ms is over the {self.downtime_limit_s * 1e3:g} ms "
            "limit (QEMU's switchover test counts the pending pages only, not their headers, "
            "the device state or the resume)"
        )

    @property
    def connectivity_downtime_s(self) -> float:
        """How long the VM's address does not answer: stop-and-copy + resume + overlay update."""
        return self.downtime_s + self.overlay_update_s if self.converged else 0.0

    def to_dict(self) -> dict[str, object]:
        return {
            "converged": self.converged,
            "outcome": self.outcome,
            "total_time_s": self.total_time_s,
            "downtime_s": self.downtime_s,
            "downtime_parts_s": {
                "stop_and_copy": self.stop_copy_s,
                "resume": self.resume_s,
                "overlay_update": self.overlay_update_s if self.converged else 0.0,
            },
            "connectivity_downtime_s": self.connectivity_downtime_s,
            "bytes": self.bytes,
            "rounds": self.rounds,
            "downtime_limit_s": self.downtime_limit_s,
            "max_throttle": self.max_throttle,
            "postcopy_faults": self.postcopy_faults,
            "postcopy_stall_s": self.postcopy_stall_s,
            "crypto_cpu_s": self.crypto_cpu_s,
            "actions": list(self.actions),
            "reason": self.reason,
            "timeline": [r.to_json() for r in self.timeline],
        }


class Migration:
    """The migration of one VM as a stepper: `next()` gives a transfer, `done(end_s)` closes it."""

    def __init__(
        self,
        memory: VmMemory,
        options: MigrationOptions,
        start_s: float = 0.0,
        disk_bytes: int = 0,
        disk_dirty_rate_bps: float = 0.0,
        rate_hint_bps: float | None = None,
    ) -> None:
        """`rate_hint_bps`: the live rate expected for the first pass, which decides where its
        first sync falls (later passes use the rate the previous one observed); default the
        live cap."""
        self.memory = memory
        self.options = options
        self.start_s = start_s
        self.disk_bytes = disk_bytes
        self.disk_dirty_rate_bps = disk_dirty_rate_bps
        self.limit_s = options.downtime_limit_s
        self.throttle = 0.0
        self.auto_converge = options.auto_converge
        self.high_periods = 0
        self.stalled = 0
        self.rounds = 0
        self.outcome: Outcome = "running"
        self.rate_hint_bps = options.live_cap_bps() if rate_hint_bps is None else rate_hint_bps
        self.unsent = 0.0
        self.never_sent = 0.0  # the part of `unsent` the first pass has not reached yet
        self.final_bps: float | None = None
        self.observed_bps = 0.0  # the live rate the last round observed (QEMU's bandwidth estimate)
        self.period = [0.0, 0.0, 0.0]  # auto-converge's sync period: seconds, fresh dirty, sent
        self.actions: list[str] = []
        self.timeline: list[Round] = []
        self.bytes = 0.0
        self.pending: Transfer | None = self._first()
        self.began_s = start_s + options.setup_s  # QEMU's set-up: dirty logging on, the first sync
        self.synced_s = self.began_s  # when the dirty log was last read
        self.pending_dirty = 0.0
        self.previous_dirty = math.inf
        self.stop_copy_s = 0.0
        self.resume_s = 0.0
        self.end_s = start_s
        self.faults = 0.0
        self.stall_s = 0.0
        self.reason = ""
        self.switched = False

    # -- the stepper -------------------------------------------------------------------

    def next(self) -> Transfer | None:
        """The transfer to run now (it starts when the previous one ended), or None when finished."""
        return self.pending

    def done(self, end_s: float, final_bps: float | None = None) -> None:
        """The current transfer ended at `end_s` (its start was the previous end).

        `final_bps`: the rate the transfer had at its end, when the caller knows it. QEMU
        sizes its threshold with the bandwidth of its last 100 ms, which after a stall or
        a change of sharing is not the transfer's average; by default the average is used.
        """
        transfer = self.pending
        if transfer is None:
            raise RuntimeError("no transfer in progress")
        if self._past_timeout(transfer, end_s):
            # the round would end after the timeout: the migration gives up at the timeout,
            # with the part of the round that arrived by then (at the round's mean rate)
            deadline = self.start_s + self.options.timeout_s
            share = (deadline - self.began_s) / (end_s - self.began_s)
            cut = replace(transfer, wire_bytes=transfer.wire_bytes * share)
            self.bytes += cut.wire_bytes
            self._record(cut, self.began_s, deadline)
            self.began_s = deadline
            self.abort(deadline, self.timeout_reason())
            return
        self.final_bps = final_bps
        duration = end_s - self.began_s
        self.bytes += transfer.wire_bytes
        self._record(transfer, self.began_s, end_s)
        self.began_s = end_s
        handler = {
            "disk": self._after_live,
            "bulk": self._after_live,
            "live": self._after_live,
            "stop-and-copy": self._after_stop,
            "postcopy": self._after_postcopy,
            "disk-background": self._after_background,
        }[transfer.phase]
        handler(transfer, duration, end_s)

    def _past_timeout(self, transfer: Transfer, end_s: float) -> bool:
        """A pre-copy round (not post-copy, not the stop-and-copy) that ends past the timeout."""
        return (
            transfer.phase in ("disk", "bulk", "live")
            and self.options.policy != "postcopy"
            and end_s > self.start_s + self.options.timeout_s
        )

    def timeout_reason(self) -> str:
        """Why a migration stopped at its timeout."""
        return f"no convergence within the timeout ({self.options.timeout_s:g} s)"

    def abort(self, now_s: float, reason: str) -> None:
        """Give up (a phase failed, consent withdrawn): the VM keeps running at the source."""
        if self.outcome != "running":
            return
        if self.pending is not None and self.pending.paused:
            self.actions.append(f"abort during stop-and-copy at {now_s:.6g} s: the source resumes")
        self.outcome = "aborted"
        self.reason = reason
        self.pending = None
        self.end_s = now_s

    def result(self) -> MigrationResult:
        """The outcome so far (final once `next()` is None)."""
        converged = self.outcome == "completed"
        return MigrationResult(
            converged=converged,
            outcome=self.outcome,
            total_time_s=self.end_s - self.start_s,
            downtime_s=self.stop_copy_s + self.resume_s if converged else 0.0,
            stop_copy_s=self.stop_copy_s if converged else 0.0,
            resume_s=self.resume_s if converged else 0.0,
            overlay_update_s=self.options.overlay_update_s,
            bytes=self.bytes,
            rounds=self.rounds,
            timeline=self.timeline,
            actions=self.actions,
            max_throttle=max((r.throttle for r in self.timeline), default=0.0),
            downtime_limit_s=self.limit_s,
            postcopy_faults=self.faults,
            postcopy_stall_s=self.stall_s,
            crypto_cpu_s=self.bytes * 8 / self.options.stream_bps if self.options.protected else 0.0,
            reason=self.reason,
        )

    # -- transitions -------------------------------------------------------------------

    def _first(self) -> Transfer:
        if self.options.storage == "block" and self.disk_bytes:
            return Transfer("disk", 0, float(self.disk_bytes), self.options.live_cap_bps())
        return self._bulk()

    def _bulk(self) -> Transfer:
        data = float(self.memory.data_bytes)
        send = self._portion(data, self.rate_hint_bps)
        self.unsent = self.never_sent = data - send
        zero_pages = self.memory.pages(self.memory.zero_bytes)
        wire = self.memory.pages(send) * (PAGE_BYTES + PAGE_HEADER_BYTES) + zero_pages * ZERO_PAGE_BYTES
        return Transfer("bulk", 0, wire, self.options.live_cap_bps())

    def _portion(self, pending: float, rate_bps: float) -> float:
        """Bytes of `pending` the next transfer sends before the sync that ends it.

        QEMU sends one rate-limit period at a time and syncs at the first period end that
        leaves less than the threshold unsent; the textbook model sends it all.
        """
        if self.options.syncs == "rounds" or not math.isfinite(rate_bps) or rate_bps <= 0:
            return pending
        threshold = rate_bps / 8 * self.limit_s
        if pending < threshold:
            return 0.0
        chunk = rate_bps / 8 * self.options.sync_period_s
        periods = math.floor((pending - threshold) / chunk) + 1
        return min(pending, periods * chunk)

    def _after_live(self, transfer: Transfer, duration: float, end_s: float) -> None:
        first_pass = transfer.phase == "bulk"
        window = end_s - self.synced_s  # the sync reads what was dirtied since the last one
        self.synced_s = end_s
        if first_pass:  # dirtied pages the pass had not reached yet are sent with it
            memory_dirty = self.memory.dirtied_behind_scan(end_s - window, window, self.throttle, self.unsent)
        else:
            memory_dirty = self.memory.dirtied(end_s - window, window, self.throttle)
        disk_dirty = self.disk_dirty_rate_bps / 8 * duration if self.options.storage == "block" else 0.0
        if transfer.phase == "disk":
            # memory has not been sent yet: its first pass comes next, disk writes mirrored into it
            self.pending = Transfer("bulk", 0, self._bulk().wire_bytes + disk_dirty, transfer.rate_cap_bps)
            return
        self.began_s = end_s + self.options.sync_s  # nothing is sent while the sync runs
        self.rounds += 1
        fresh = memory_dirty if first_pass else memory_dirty * (1.0 - self._waiting_share())
        dirty = self.unsent + fresh + disk_dirty
        observed_bps = transfer.wire_bytes * 8 / duration if duration > 0 else math.inf
        if self.options.syncs == "qemu" and self.final_bps is not None and self.final_bps > 0:
            observed_bps = self.final_bps
        self.observed_bps = observed_bps
        self._throttle_check(fresh + disk_dirty, transfer.wire_bytes, duration)
        # not shrinking: a dirty set within rounding of the last one is the same set (the
        # same rounds on the engine and in the plan differ in their last bits)
        shrank = dirty < self.previous_dirty * (1 - SAME_DIRTY_FRACTION)
        self.stalled = 0 if shrank else self.stalled + 1
        self.previous_dirty = dirty
        self.pending_dirty = dirty
        self.unsent = 0.0
        if dirty * 8 <= observed_bps * self.limit_s:
            self._stop_and_copy(dirty)
            return
        if self.options.postcopy and transfer.phase == "bulk":
            self.actions.append("post-copy after the first round")
            self._switch_to_postcopy(dirty)
            return
        if self._stuck(end_s) and not self._apply_policy(end_s):
            return
        send = self._portion(dirty, observed_bps)
        self.unsent = dirty - send
        # the scan goes on from where the first pass stopped: its unsent tail goes first
        first = min(self.never_sent, send)
        self.never_sent -= first
        self.pending = Transfer("live", self.rounds, self._wire(send, first), self.options.live_cap_bps())

    def _waiting_share(self) -> float:
        """Share of the dirtiable pages still waiting to be sent after a later round:
        dirtying them adds nothing. Every page left unsent then is a dirtied one (the
        first pass asks the memory model instead: `VmMemory.dirtied_behind_scan`)."""
        dirtiable = float(self.memory.working_set_bytes + self.memory.cold_set_bytes)
        if self.unsent <= 0 or dirtiable <= 0:
            return 0.0
        return min(1.0, self.unsent / dirtiable)

    def _stuck(self, now_s: float) -> bool:
        """No convergence yet: the dirty set stopped shrinking, or the round limit or timeout hit."""
        return (
            self.stalled >= self.options.stall_rounds
            or self.rounds >= self.options.max_rounds
            or now_s - self.start_s >= self.options.timeout_s
        )

    def _wire(self, dirty_bytes: float, first_time: float = 0.0) -> float:
        """Bytes on the wire to send `dirty_bytes` of pages, `first_time` of them never sent before.

        XBZRLE encodes only pages sent before (it needs the old copy in its cache).
        """
        first = min(first_time, dirty_bytes)
        wire = (dirty_bytes - first) * WIRE_FACTOR
        if self.options.xbzrle:
            dirtiable = self.memory.working_set_bytes + self.memory.cold_set_bytes
            hit = min(1.0, self.options.xbzrle_cache_bytes / dirtiable) if dirtiable else 1.0
            wire *= hit * self.options.xbzrle_ratio + (1 - hit)
        return wire + first * WIRE_FACTOR

    def _throttle_check(self, dirty: float, sent: float, duration: float) -> None:
        """QEMU's auto-converge: two sync periods that dirtied more than the trigger share of what they sent.

        QEMU judges over syncs at least a second apart; the textbook model at every round.
        """
        if not self.auto_converge:
            return
        self.period = [self.period[0] + duration, self.period[1] + dirty, self.period[2] + sent]
        if self.options.syncs == "qemu" and self.period[0] < THROTTLE_PERIOD_S:
            return
        _, dirty, sent = self.period
        self.period = [0.0, 0.0, 0.0]
        if dirty <= self.options.throttle_trigger * sent:
            return
        self.high_periods += 1
        if self.high_periods < 2:
            return
        self.high_periods = 0
        step = (
            self.options.throttle_initial
            if self.throttle == 0
            else self.throttle + self.options.throttle_increment
        )
        self.throttle = min(self.options.throttle_max, step)
        self.actions.append(f"throttle {self.throttle:.0%} after round {self.rounds}")

    def _apply_policy(self, now_s: float) -> bool:
        """Non-convergence: True if the migration goes on."""
        self.stalled = 0
        self.previous_dirty = math.inf
        policy = self.options.policy
        if self.rounds >= self.options.max_rounds or now_s - self.start_s >= self.options.timeout_s:
            if policy == "postcopy":
                self.actions.append("post-copy: round limit or timeout reached")
                self._switch_to_postcopy(self.pending_dirty)
                return False
            self.abort(now_s, "no convergence within the round limit or timeout")
            return False
        if policy == "raise-downtime" and self.limit_s < self.options.max_downtime_s:
            self.limit_s = min(self.options.max_downtime_s, self.limit_s + self.options.downtime_step_s)
            self.actions.append(
                f"downtime limit raised to {self.limit_s * 1000:.0f} ms after round {self.rounds}"
            )
            return True
        if policy == "auto-converge" and self.throttle < self.options.throttle_max:
            if not self.auto_converge:
                self.auto_converge = True
                self.actions.append(f"auto-converge on after round {self.rounds}")
            return True
        if policy == "postcopy":
            self.actions.append(f"post-copy after round {self.rounds}")
            self._switch_to_postcopy(self.pending_dirty)
            return False
        self.abort(now_s, "the dirty set does not shrink (does not converge)")
        return False

    def _stop_and_copy(self, dirty: float) -> None:
        first = min(self.never_sent, dirty) * WIRE_FACTOR
        wire = self._wire(dirty, self.never_sent) + self.options.device_state_bytes
        self.never_sent = 0.0
        self.pending = Transfer("stop-and-copy", self.rounds, wire, self._pause_cap_bps(wire, first))

    def _pause_cap_bps(self, wire: float, first: float) -> float:
        """The stop-and-copy's rate as the source sees it, bit/s (QEMU's downtime ends when the
        last byte is written into the socket, not when it arrives).

        The destination takes pages it never held (`first` wire bytes, each a page fault
        there) at the final bandwidth and pages it holds at the re-sent bandwidth; the
        path's buffer takes the last bytes at once, less what of the last live period is
        still in it (the part the destination could not take within that period).
        """
        options = self.options
        first_bps, resent_bps = options.final_cap_bps(), options.resent_cap_bps()
        if options.socket_buffer_bytes <= 0 and resent_bps == first_bps:
            return first_bps
        drain_s = first * 8 / first_bps + (wire - first) * 8 / resent_bps
        in_flight = max(0.0, (self.observed_bps - first_bps) / 8 * options.sync_period_s)
        free = options.socket_buffer_bytes - min(options.socket_buffer_bytes, in_flight)
        pause_s = drain_s * max(0.0, 1.0 - free / wire) if wire > 0 else 0.0
        return wire * 8 / pause_s if pause_s > 0 else math.inf

    def _switch_to_postcopy(self, dirty: float) -> None:
        self.switched = True
        self.postcopy_bytes = dirty
        self.pending = Transfer(
            "stop-and-copy", self.rounds, float(self.options.device_state_bytes), self.options.final_cap_bps()
        )

    def _after_stop(self, transfer: Transfer, duration: float, end_s: float) -> None:
        self.stop_copy_s = duration
        self.resume_s = self.options.resume_s
        resumed = end_s + self.resume_s
        self.began_s = resumed
        if self.switched:
            self.pending = Transfer(
                "postcopy", self.rounds + 1, self.postcopy_bytes * WIRE_FACTOR, self.options.final_cap_bps()
            )
            return
        self._finish_or_background(resumed)

    def _after_postcopy(self, transfer: Transfer, duration: float, end_s: float) -> None:
        """Pages the VM touched before they arrived: each a fault costing a round trip and a page."""
        self.rounds += 1
        touched = self.memory.dirtied(end_s - duration, duration) / 2
        self.faults = self.memory.pages(min(self.postcopy_bytes, touched))
        rate_bps = transfer.wire_bytes * 8 / duration if duration > 0 else math.inf
        # a vCPU waits on its faults while the push goes on: never longer than the push
        self.stall_s = min(duration, self.faults * (self.options.rtt_s + PAGE_BYTES * 8 / rate_bps))
        self._finish_or_background(end_s)

    def _finish_or_background(self, now_s: float) -> None:
        if self.options.storage == "remote-then-local" and self.disk_bytes:
            self.pending = Transfer(
                "disk-background", self.rounds, float(self.disk_bytes), self.options.live_cap_bps()
            )
            return
        self.outcome = "completed"
        self.pending = None
        self.end_s = now_s

    def _after_background(self, transfer: Transfer, duration: float, end_s: float) -> None:
        self.outcome = "completed"
        self.pending = None
        self.end_s = end_s

    def _record(self, transfer: Transfer, start_s: float, end_s: float) -> None:
        self.timeline.append(
            Round(
                phase=transfer.phase,
                round=transfer.round,
                start_s=start_s - self.start_s,
                end_s=end_s - self.start_s,
                bytes=transfer.wire_bytes,
                throttle=self.throttle,
                downtime_limit_s=self.limit_s,
            )
        )


def plan_migration(
    memory: VmMemory,
    options: MigrationOptions,
    disk_bytes: int = 0,
    disk_dirty_rate_bps: float = 0.0,
) -> MigrationResult:
    """A migration over a path of constant bandwidth `options.bandwidth_bps` (a quick what-if).

    >>> from cloudtwin.mobility import VmMemory, MigrationOptions
    >>> vm = VmMemory(memory_bytes=1 << 30, working_set_bytes=0, dirty_rate_bps=0.0)
    >>> plan = plan_migration(vm, MigrationOptions(bandwidth_bps=8e9))
    >>> plan.converged, plan.rounds
    (True, 1)
    """
    live_bps = min(options.bandwidth_bps, options.live_cap_bps())
    migration = Migration(memory, options, 0.0, disk_bytes, disk_dirty_rate_bps, live_bps)
    final_bps = (
        options.final_bandwidth_bps if options.final_bandwidth_bps is not None else options.bandwidth_bps
    )
    final_bps = min(final_bps, options.stream_cap_bps)
    now = 0.0
    while (transfer := migration.next()) is not None:
        if transfer.paused and options.final_bandwidth_bps is not None:
            rate = transfer.rate_cap_bps
        elif transfer.paused or transfer.phase == "postcopy":
            rate = min(final_bps, transfer.rate_cap_bps)
        else:
            rate = min(options.bandwidth_bps, transfer.rate_cap_bps)
        now = migration.began_s + transfer.wire_bytes * 8 / rate
        migration.done(now)
    return migration.result()
