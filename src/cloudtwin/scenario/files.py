"""The profile files a scenario names, and a scenario holding their parsed content.

A scenario names a measured NIC profile (`nic.profile`, a group's `profile`) and a
migration profile (`mobility.calibration`) by path; whoever reads files (the CLI) reads
them and attaches their content here, so the models below never open a file.
"""

from __future__ import annotations

from collections.abc import Mapping

from cloudtwin.scenario.model import Scenario

__all__ = ["FILE_KEYS", "attach_files", "named_files"]

FILE_KEYS = ("nic.profile", "nic.groups", "mobility.calibration")
"""Scenario keys (and key prefixes) whose value may name a profile file."""


def named_files(scenario: Scenario) -> list[tuple[str, str]]:
    """(key, path) of every profile file the scenario names."""
    found = [("nic.profile" if name == scenario.nic.profile else "nic.groups", name)
             for name in scenario.nic.profile_files()]
    if scenario.mobility.calibration is not None:
        found.append(("mobility.calibration", scenario.mobility.calibration))
    return found


def attach_files(scenario: Scenario, files: Mapping[str, object]) -> Scenario:
    """The scenario holding the parsed content of the files it names (`files`: path as the
    scenario gives it -> content); a file missing from `files` stays unread (the run then
    says so, naming its key)."""
    nic_files = {name: files[name] for name in scenario.nic.profile_files() if name in files}
    nic = scenario.nic.with_profile_data(nic_files) if nic_files else scenario.nic
    mobility = scenario.mobility
    if mobility.calibration is not None and mobility.calibration in files:
        mobility = mobility.with_calibration_data(files[mobility.calibration])
    if nic is scenario.nic and mobility is scenario.mobility:
        return scenario
    return scenario.model_copy(update={"nic": nic, "mobility": mobility})
