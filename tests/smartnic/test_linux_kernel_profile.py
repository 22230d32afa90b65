"""The `linux-kernel` NIC profile: read from the measured file, costs as measured."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cloudtwin.errors import NicError
from cloudtwin.smartnic.profiles import FUNCTIONS, PROFILES, SECURITY_GROUP_RULES, linux_kernel_profile

MEASURED = {
    "machine": {"cpu": "Test CPU", "clock_hz": 2.0e9, "cpus": 2, "kernel": "6.1", "date": "2026-01-01"},
    "base": {"cycles_per_packet": 10_000.0, "cycles_per_byte": 0.25},
    "functions": {
        "overlay": {"cycles_per_packet": 3000.0, "cycles_per_byte": 0.5},
        "security-groups": {"cycles_per_packet": 200.0, "cycles_per_byte": 0.0, "cycles_per_rule": 40.0},
        "conntrack": {"cycles_per_packet": 900.0, "cycles_per_byte": -0.2,
                      "cycles_per_new_connection": 5000.0},
        "rate-limiter": {"cycles_per_packet": -50.0, "cycles_per_byte": 0.1},
    },
}


def _profile(tmp_path: Path, measured: dict) -> object:
    path = tmp_path / "linux-kernel.json"
    path.write_text(json.dumps(measured))
    return linux_kernel_profile(path)


def test_costs_come_from_the_measurement(tmp_path: Path) -> None:
    profile = _profile(tmp_path, MEASURED)
    assert profile.host.clock_hz == 2.0e9 and profile.host.cycle_scale == 1.0
    assert profile.cost("overlay").cycles_per_packet == 3000.0
    assert profile.cost("overlay").cycles_per_byte == 0.5
    # 200 + 40 cycles for each of the assumed rules of a port's group
    assert profile.cost("security-groups").cycles_per_packet == 200.0 + 40.0 * SECURITY_GROUP_RULES
    assert profile.cost("conntrack").setup_cycles_per_flow == 5000.0
    # a difference that came out below zero is no cost, not a negative one
    assert profile.cost("conntrack").cycles_per_byte == 0.0
    assert profile.cost("rate-limiter").cycles_per_packet == 0.0
    # what was not measured keeps the assumed figure, and every function says where it came from
    assert profile.cost("storage-initiator") == FUNCTIONS["storage-initiator"]
    assert "Test CPU" in profile.cost("overlay").source
    # the no-offload baseline keeps this profile's own costs and clock
    baseline = profile.software_only()
    assert baseline.cost("overlay").cycles_per_packet == 3000.0 and baseline.host.clock_hz == 2.0e9
    assert baseline.pipeline is None and baseline.nic_cores is None


def test_a_non_finite_measurement_is_refused(tmp_path: Path) -> None:
    broken = json.loads(json.dumps(MEASURED))
    broken["functions"]["overlay"]["cycles_per_packet"] = float("nan")
    with pytest.raises(NicError, match="functions.overlay"):
        _profile(tmp_path, broken)


def test_the_shipped_profile_is_a_measurement() -> None:
    profile = PROFILES["linux-kernel"]
    assert "measured by cloudtwin calibrate datapath" in profile.cost("overlay").source
    assert profile.cost("overlay").cycles_per_packet > 0
    assert PROFILES["software-vswitch"].software_only() is PROFILES["software-vswitch"]
