"""Reading the profile files a scenario names: a measured NIC profile (`nic.profile`) and a
migration profile (`mobility.calibration`), both written by `cloudtwin calibrate`.

A path in the scenario file is relative to the scenario file's folder; a path given with
`--set` is relative to the current directory, as any path typed on a command line.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from cloudtwin.errors import CloudtwinError, MobilityError, NicError
from cloudtwin.files import read_text_bounded

if TYPE_CHECKING:
    from cloudtwin.scenario.cloud import CloudScenario
    from cloudtwin.scenario.mobility import Calibrated
    from cloudtwin.scenario.model import Scenario

__all__ = ["MAX_PROFILE_BYTES", "read_json_file", "read_named_files", "with_cloud_profiles", "with_profiles"]

MAX_PROFILE_BYTES = 16 << 20
"""The most bytes a profile file may hold (a migration profile with a hundred raw runs is
about 1 MB)."""


def read_json_file(path: Path, what: str, error: Callable[[str], CloudtwinError]) -> object:
    """The JSON document in `path`; `error` with one line naming the file otherwise."""
    text = read_text_bounded(path, MAX_PROFILE_BYTES, what, error)
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        raise error(f"{path}: the {what} is not JSON ({err.msg}, line {err.lineno})") from None


def _where(name: str, key: str, scenario_path: Path, overrides: list[str]) -> Path:
    """Where the file `name` that scenario key `key` gives is (see the module's docstring)."""
    path = Path(name)
    typed = any(item.partition("=")[0].strip().startswith(key) and item.partition("=")[2].strip() == name
                for item in overrides)
    if path.is_absolute() or typed:
        return path
    return scenario_path.parent / path


def _read(name: str, key: str, scenario_path: Path, overrides: list[str],
          what: str, error: Callable[[str], CloudtwinError]) -> object:
    def named(line: str) -> CloudtwinError:
        return error(f"{key}: {line}")

    return read_json_file(_where(name, key, scenario_path, overrides), what, named)


def _calibrated(mobility: Calibrated, scenario_path: Path, overrides: list[str]) -> Calibrated:
    if mobility.calibration is None:
        return mobility
    data = _read(mobility.calibration, "mobility.calibration", scenario_path, overrides,
                 "migration profile", MobilityError)
    return mobility.with_calibration_data(data)


def read_named_files(named: list[tuple[str, str]], scenario_path: Path, overrides: list[str]
                     ) -> dict[str, object]:
    """The content of each (key, path) profile file, by path as given."""
    files: dict[str, object] = {}
    for key, name in named:
        if name not in files:
            what, error = (("migration profile", MobilityError) if key == "mobility.calibration"
                           else ("NIC profile", NicError))
            files[name] = _read(name, key, scenario_path, overrides, what, error)
    return files


def with_profiles(scenario: Scenario, scenario_path: Path, overrides: list[str] | None) -> Scenario:
    """The scenario holding the content of the profile files it names."""
    from cloudtwin.scenario.files import attach_files, named_files

    named = named_files(scenario)
    if not named:
        return scenario
    return attach_files(scenario, read_named_files(named, scenario_path, list(overrides or ())))


def with_cloud_profiles(
    cloud: CloudScenario, scenario_path: Path, overrides: list[str] | None
) -> CloudScenario:
    """The one-cloud scenario holding the content of its migration profile."""
    mobility = _calibrated(cloud.mobility, scenario_path, list(overrides or ()))
    return cloud if mobility is cloud.mobility else cloud.model_copy(update={"mobility": mobility})
