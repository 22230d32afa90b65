"""A migration profile: the rates, buffer and pause of one pair of hosts, as measured.

`cloudtwin calibrate migration` migrates real QEMU guests between two hosts' QEMU
processes and writes what the pre-copy model cannot know from a VM's description:

- `final_bandwidth_bps`: the stop-and-copy rate of pages the destination never held
  (each a page fault there);
- `resent_bandwidth_bps`: the stop-and-copy rate of pages it already holds;
- `socket_buffer_bytes`: what the path buffers between the two QEMU processes (QEMU's
  downtime ends when the last byte is written into it);
- `resume_s`: the fixed part of a pause (stop the vCPUs, save and load the devices);
- `path_bandwidth_bps`: how fast the path migrates at all (an uncapped idle guest);
- `setup_s`: QEMU's set-up before the first page (dirty logging on, the first sync);
- `sync_s`: what one dirty-log sync of a live round costs (the migration thread sends
  nothing meanwhile): the live time of a capped migration beyond its bytes at the cap,
  per sync.

A scenario (`mobility.calibration`) and `migrate plan --calibration` load it; what a
migration sets itself wins over it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from cloudtwin.errors import MobilityError

__all__ = [
    "CALIBRATED",
    "MigrationCalibration",
    "calibration_from_data",
    "fit_parameters",
    "floor_s",
    "guest_resident_bytes",
    "rate_bps",
    "switchover_rate_bps",
]

CALIBRATED = (
    "final_bandwidth_bps",
    "resent_bandwidth_bps",
    "socket_buffer_bytes",
    "resume_s",
    "path_bandwidth_bps",
)
"""The parameters a migration profile holds (its `parameters` section)."""
OPTIONAL = ("setup_s", "sync_s")
"""Parameters a profile may lack (written by an earlier cloudtwin): 0 then."""


@dataclass(frozen=True)
class MigrationCalibration:
    """The calibrated parameters of a migration profile (rates in bit/s)."""

    final_bandwidth_bps: float
    resent_bandwidth_bps: float
    socket_buffer_bytes: float
    resume_s: float
    path_bandwidth_bps: float
    setup_s: float = 0.0
    sync_s: float = 0.0
    source: str = ""


def calibration_from_data(data: object, where: str) -> MigrationCalibration:
    """The calibration a profile file holds; MobilityError naming `where` and the key
    when it is not one `cloudtwin calibrate migration` writes."""
    if not isinstance(data, Mapping):
        raise MobilityError(f"{where}: not a migration profile (a JSON object written by "
                            "cloudtwin calibrate migration)")
    parameters = data.get("parameters")
    if not isinstance(parameters, Mapping):
        raise MobilityError(f"{where}: parameters: missing (a profile written by cloudtwin calibrate "
                            "migration has it)")
    values = {}
    for key in CALIBRATED + OPTIONAL:
        if key in OPTIONAL and key not in parameters:
            continue
        value = parameters.get(key)
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
            raise MobilityError(f"{where}: parameters.{key}: must be a finite number, got {value!r}")
        positive = key.endswith("_bps")
        if value < 0 or (positive and value == 0):
            sign = "positive" if positive else "non-negative"
            raise MobilityError(f"{where}: parameters.{key}: must be {sign}, got {value}")
        values[key] = float(value)
    machine = data.get("machine")
    said = where
    if isinstance(machine, Mapping):
        said = (f"{where} ({machine.get('qemu', 'QEMU')}, {machine.get('accel', '?')}, "
                f"{machine.get('date', '?')})")
    return MigrationCalibration(**values, source=said)


# -- fitting the parameters to QEMU's statistics -----------------------------------------

MIB = 1 << 20


def rate_bps(stats: Mapping[str, object]) -> float:
    """Bytes an uncapped migration moved per second of its total time, in bit/s."""
    ram = stats["ram"]
    assert isinstance(ram, Mapping)
    return float(ram["transferred"]) * 8 / (float(stats["total-time"]) / 1000)  # type: ignore[arg-type]


def switchover_rate_bps(
    switchover: list[dict[str, object]], calibrates: str = "first", rule: str = "median"
) -> float | None:
    """Stop-and-copy rate, bit/s: bytes sent while paused / downtime of the largest pauses.

    The runs with the most data paused are used (the fixed part of a pause and the
    socket buffer matter least there): their median (`rule` "median") or the fastest of
    them ("fastest"). `calibrates`: "first" (pages the destination never held) or
    "resent" (pages it holds). None when no such run completed.
    """
    done = [
        s for s in switchover
        if s["status"] == "completed" and s.get("downtime") and s.get("calibrates", "first") == calibrates
    ]
    if not done:
        return None
    paused = [float(s["ram"]["downtime-bytes"]) for s in done]  # type: ignore[index]
    largest = max(paused)
    rates = [b * 8 / (float(s["downtime"]) / 1000)  # type: ignore[arg-type]
             for b, s in zip(paused, done, strict=True) if b >= 0.9 * largest]
    if rule == "fastest":
        return max(rates)
    if rule == "median":
        return float(np.median(rates))
    raise MobilityError(f"calibration_rule: unknown rule {rule!r} (median or fastest)")


def floor_s(idle: Mapping[str, Mapping[str, Any]]) -> float:
    """The fixed part of a pause (stop the vCPU, save the devices): the smallest downtime of
    the idle guests, whose pauses hold least (QEMU's 0, no time computed, does not count)."""
    downtimes = [
        float(ms) for stats in idle.values()
        for ms in stats.get("idle_downtimes_ms", [stats.get("downtime")]) or ()
        if ms
    ]
    return min(downtimes, default=0.0) / 1000


def setup_time_s(switchover: list[dict[str, object]]) -> float:
    """QEMU's set-up time: the median `setup-time` of the stop-and-copy calibration runs."""
    times = [float(s["setup-time"]) for s in switchover if s.get("setup-time") is not None]  # type: ignore[arg-type]
    return float(np.median(times)) / 1000 if times else 0.0


def sync_time_s(switchover: list[dict[str, object]]) -> float:
    """What one sync of a live round costs: over the completed stop-and-copy calibration
    runs (their live rounds capped at `live_cap_mib_s`), the live time (total less set-up
    and downtime) beyond the pre-copy bytes at the cap, per sync of a live round (QEMU's
    `dirty-sync-count` less the set-up's and the pause's); the median run, 0 at least."""
    per_sync = []
    for s in switchover:
        ram, cap = s.get("ram"), s.get("live_cap_mib_s")
        done = s.get("status") == "completed" and bool(s.get("total-time"))
        if not done or not isinstance(ram, Mapping) or not cap:
            continue
        live_syncs = int(ram.get("dirty-sync-count", 0)) - 2
        if live_syncs < 1:
            continue
        live_s = (float(s["total-time"]) - float(s.get("downtime") or 0)  # type: ignore[arg-type]
                  - float(s.get("setup-time") or 0)) / 1000  # type: ignore[arg-type]
        sending_s = float(ram["precopy-bytes"]) / (float(cap) * MIB)  # type: ignore[arg-type]
        per_sync.append((live_s - sending_s) / live_syncs)
    return max(0.0, float(np.median(per_sync))) if per_sync else 0.0


def fit_parameters(calibration: Mapping[str, object]) -> dict[str, float]:
    """The profile's parameters from its calibration runs (`idle` guests by memory size,
    `switchover` runs of first-time and re-sent pages, `socket_buffer_bytes`): the median
    try of the largest pauses for each stop-and-copy rate (re-sent pages: the first-time
    rate when none completed), the smallest idle pause, the median idle guest's rate, the
    median set-up and the median cost of a sync of the stop-and-copy runs."""
    idle = calibration["idle"]
    switchover = calibration["switchover"]
    assert isinstance(idle, Mapping) and isinstance(switchover, list)
    first = switchover_rate_bps(switchover, "first")
    if first is None:
        raise MobilityError("calibration: no stop-and-copy calibration run completed")
    resent = switchover_rate_bps(switchover, "resent")
    return {
        "final_bandwidth_bps": first,
        "resent_bandwidth_bps": first if resent is None else resent,
        "socket_buffer_bytes": float(calibration["socket_buffer_bytes"]),  # type: ignore[arg-type]
        "resume_s": floor_s(idle),
        "path_bandwidth_bps": float(np.median([rate_bps(stats) for stats in idle.values()])),
        "setup_s": setup_time_s(switchover),
        "sync_s": sync_time_s(switchover),
    }


def guest_resident_bytes(idle_stats: Mapping[str, Any], working_set_bytes: int) -> int:
    """The memory holding data of a calibration guest whose dirtier keeps `working_set_bytes`:
    the idle guest's non-zero pages, less its own 1 MiB buffer, plus the working set."""
    ram = idle_stats["ram"]
    page = int(ram["page-size"])
    return (int(ram["normal"]) - MIB // page) * page + working_set_bytes
