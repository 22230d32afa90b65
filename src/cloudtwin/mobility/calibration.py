"""A migration profile: the rates, buffer and pause of one pair of hosts, as measured.

`cloudtwin calibrate migration` migrates real QEMU guests between two hosts' QEMU
processes and writes what the pre-copy model cannot know from a VM's description:

- `final_bandwidth_bps`: the stop-and-copy rate of pages the destination never held
  (each a page fault there);
- `resent_bandwidth_bps`: the stop-and-copy rate of pages it already holds;
- `socket_buffer_bytes`: what the path buffers between the two QEMU processes (QEMU's
  downtime ends when the last byte is written into it);
- `resume_s`: the fixed part of a pause (stop the vCPUs, save and load the devices);
- `path_bandwidth_bps`: how fast the path migrates at all (an uncapped idle guest).

A scenario (`mobility.calibration`) and `migrate plan --calibration` load it; what a
migration sets itself wins over it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from cloudtwin.errors import MobilityError

__all__ = ["CALIBRATED", "MigrationCalibration", "calibration_from_data"]

CALIBRATED = (
    "final_bandwidth_bps",
    "resent_bandwidth_bps",
    "socket_buffer_bytes",
    "resume_s",
    "path_bandwidth_bps",
)
"""The parameters a migration profile holds (its `parameters` section)."""


@dataclass(frozen=True)
class MigrationCalibration:
    """The calibrated parameters of a migration profile (rates in bit/s)."""

    final_bandwidth_bps: float
    resent_bandwidth_bps: float
    socket_buffer_bytes: float
    resume_s: float
    path_bandwidth_bps: float
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
    for key in CALIBRATED:
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
