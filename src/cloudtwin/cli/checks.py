"""Checks of the command line made before any work starts: output paths, ignored sections.

A simulation can take minutes; a typo in `--out` or `--plot` must fail at once, not
after it. Options use these as typer callbacks, so they run while the line is parsed.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from cloudtwin.errors import CloudtwinError, OutputError, RoutingError, ScenarioError
from cloudtwin.files import check_readable

if TYPE_CHECKING:  # a type only: the pydantic models are not imported for `nic run`
    from cloudtwin.scenario.model import Scenario

__all__ = [
    "check_scenario_file",
    "readable",
    "check_flows_out_file",
    "check_out_dir",
    "check_out_file",
    "check_plot_file",
    "check_strategy_list",
    "refuse_ignored_sections",
]

#: What `--plot` can write (matplotlib's Agg back end).
PLOT_SUFFIXES = (".png", ".svg", ".pdf")


def _writable_dir(path: Path, flag: str, shown: Path) -> None:
    """The nearest existing folder at or above `path` accepts a new file."""
    folder = path
    while not folder.exists():
        if folder.parent == folder:
            break
        folder = folder.parent
    if not folder.is_dir():
        raise OutputError(f"{flag} {shown}: {folder} is a file, not a folder")
    try:
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".cloudtwin-probe-"):
            pass
    except OSError as err:
        raise OutputError(f"{flag} {shown}: cannot write in {folder} ({err.strerror})") from err


def readable(what: str, error: Callable[[str], CloudtwinError]) -> Callable[[Path | None], Path | None]:
    """A callback for an input file: one that cannot be read is refused while the line is
    parsed, with the line reading it would give (`PATH: no such WHAT file`), before the
    command imports what it runs."""

    def check(value: Path | None) -> Path | None:
        if value is not None:
            check_readable(value, what, error)
        return value

    return check


#: A scenario file argument's callback (the file `read_scenario_text` reads).
check_scenario_file = readable("scenario", ScenarioError)


def check_out_file(value: Path | None) -> Path | None:
    """A file the command will write: not a folder, in a place that can be written."""
    return _check_file(value, "--out")


def check_flows_out_file(value: Path | None) -> Path | None:
    """`--flows-out`: a file, as for `--out`."""
    return _check_file(value, "--flows-out")


def _check_file(value: Path | None, flag: str) -> Path | None:
    if value is None:
        return None
    if value.is_dir():
        raise OutputError(f"{flag} {value}: is a folder; give a file name")
    if value.exists() and not os.access(value, os.W_OK):
        raise OutputError(f"{flag} {value}: the file cannot be written")
    _writable_dir(value.parent if value.parent != Path() else Path.cwd(), flag, value)
    return value


def check_plot_file(value: Path | None) -> Path | None:
    """A plot file: a writable place and a suffix matplotlib can write."""
    if value is None:
        return None
    if value.suffix.lower() not in PLOT_SUFFIXES:
        raise OutputError(
            f"--plot {value}: the file name must end in {', '.join(PLOT_SUFFIXES)}"
        )
    return _check_file(value, "--plot")


def check_out_dir(value: Path | None) -> Path | None:
    """A report folder: not an existing file, in a place that can be written."""
    if value is None:
        return None
    if value.exists() and not value.is_dir():
        raise OutputError(f"--out {value}: is a file; give a folder for the report")
    _writable_dir(value, "--out", value)
    return value


def check_strategy_list(value: str | None) -> str | None:
    """`--strategies a,b`: each a strategy that loads, none twice (the second run would only
    repeat the first)."""
    if value is None:
        return None
    names = [s.strip() for s in value.split(",") if s.strip()]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise RoutingError(f"--strategies: {', '.join(twice)} named twice")
    from cloudtwin.evaluation.usecases import check_strategies

    try:
        check_strategies(names)
    except RoutingError as err:  # the flag, not the scenario key, named the unknown one
        raise RoutingError(f"--strategies: {str(err).removeprefix('strategies: ')}") from None
    return value


def refuse_ignored_sections(scenario: Scenario, command: str, jobs_too: bool = True) -> None:
    """Refuse what a command would silently drop, naming the command that uses it:
    `faults:` (run, compare and nccl-tests simulate a fault-free fabric) and, with
    `jobs_too`, `workloads:` jobs (nccl-tests sweeps the single `workload:`)."""
    if jobs_too and scenario.workloads:
        raise ScenarioError(
            f"workloads: {command} simulates the single `workload:`; this scenario's "
            f"{len(scenario.workloads)} jobs run under `cloudtwin evaluate` or `diagnose`"
        )
    if scenario.faults:
        raise ScenarioError(
            f"faults: {command} simulates a fault-free fabric; this scenario's "
            f"{len(scenario.faults)} faults run under `cloudtwin evaluate` or `diagnose`"
        )
