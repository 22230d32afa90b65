"""Shared CLI plumbing: reading scenarios, progress bars, JSON and atomic result files."""

from __future__ import annotations

import json
import os
import stat
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

from cloudtwin.errors import ScenarioError
from cloudtwin.files import read_text_bounded
from cloudtwin.scenario.safe_yaml import MAX_TEXT_CHARS
from cloudtwin.store.documents import finite_json

if TYPE_CHECKING:  # types only: a command that reads no scenario does not import the models
    from rich.console import Console
    from rich.progress import TaskID

    from cloudtwin.scenario.cloud import CloudScenario
    from cloudtwin.scenario.model import Scenario

__all__ = [
    "BUILTIN_STRATEGIES",
    "emit_json",
    "progress_bar",
    "read_scenario",
    "read_scenario_text",
    "stage_progress",
    "write_json",
    "write_text",
    "wrote",
]

BUILTIN_STRATEGIES = "ecmp,ecmp-qp,adaptive,spray,pinning"
"""The strategies compared by default, in the order tables show them (ECMP first: ratios are to it);
`dmodk`, a single-path baseline, is named explicitly when wanted."""

#: Width of tables written to a file or a pipe (a terminal gives its own; COLUMNS wins).
PIPE_WIDTH = 200


def __getattr__(name: str) -> Console:
    """`stdout`, the console tables are printed on, made when first asked for: a command
    that prints JSON (`nic run --json`) does not import rich's console."""
    if name != "stdout":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from rich.console import Console

    console = Console(
        soft_wrap=False,
        width=None if sys.stdout.isatty() or "COLUMNS" in os.environ else PIPE_WIDTH,
    )
    globals()["stdout"] = console
    return console


def read_scenario(path: Path, overrides: list[str] | None) -> Scenario:
    """Load a scenario file with `--set` overrides and the profile files it names (a NIC
    profile, a migration profile); ScenarioError (NicError, MobilityError) names the problem."""
    from cloudtwin.cli.profilefiles import with_profiles
    from cloudtwin.scenario.loader import load_scenario

    scenario = load_scenario(read_scenario_text(path), str(path), overrides or ())
    return with_profiles(scenario, path, overrides)


def is_cloud_file(path: Path) -> bool:
    """Whether a scenario file describes one cloud of federated sites (a `federation:` section)."""
    from cloudtwin.scenario.cloud import is_cloud
    from cloudtwin.scenario.loader import parse_yaml

    try:
        text = read_scenario_text(path)
    except ScenarioError:
        return False  # read_scenario says what is wrong with it
    return is_cloud(parse_yaml(text, str(path))[0])


def read_cloud(path: Path, overrides: list[str] | None) -> CloudScenario:
    """Load a one-cloud scenario file with `--set` overrides; ScenarioError names the problem."""
    from cloudtwin.cli.profilefiles import with_cloud_profiles
    from cloudtwin.scenario.cloud import load_cloud

    cloud = load_cloud(read_scenario_text(path), str(path), overrides or ())
    return with_cloud_profiles(cloud, path, overrides)


#: The most bytes a scenario file may hold: MAX_TEXT_CHARS characters of up to 4 UTF-8 bytes.
MAX_SCENARIO_BYTES = 4 * MAX_TEXT_CHARS


def read_scenario_text(path: Path) -> str:
    """The text of a scenario file; ScenarioError when it cannot be read, is not a regular
    file (a FIFO never blocks, /dev/zero is never read) or holds more than MAX_SCENARIO_BYTES."""
    return read_text_bounded(path, MAX_SCENARIO_BYTES, "scenario", ScenarioError)


def emit_json(document: object) -> None:
    """JSON on stdout and nothing else (strict: no NaN or Infinity)."""
    sys.stdout.write(json.dumps(finite_json(document), indent=2, sort_keys=False) + "\n")


def write_json(path: Path, document: object, mode: int | None = None) -> None:
    """Write JSON to `path` atomically: a crash never leaves a half-written file.

    The file gets `mode`, else the mode of the file it replaces, or the usual mode of a
    new file (0666 less the umask); it has that mode before it appears under its name.
    """
    with atomic_file(path, mode) as handle:
        handle.write(json.dumps(finite_json(document), indent=2).encode("utf-8") + b"\n")


@contextmanager
def atomic_file(path: Path, mode: int | None = None) -> Iterator[BinaryIO]:
    """A binary file to write that replaces `path` when the block ends without an error
    and leaves no trace when it fails: never a half-written `path`. Its mode is as
    `write_json` gives it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    mode = _file_mode(path) if mode is None else mode
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            yield handle
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _file_mode(path: Path) -> int:
    try:
        return stat.S_IMODE(path.stat().st_mode)
    except OSError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask


def wrote(path: Path, what: str = "") -> None:
    """Say on stderr which file a command wrote (stdout stays the command's output):
    `wrote PATH`, or `wrote WHAT to PATH`."""
    print(f"wrote {what} to {path}" if what else f"wrote {path}", file=sys.stderr, flush=True)


def write_text(path: Path, text: str) -> None:
    """Write a text file atomically (a crash never leaves half a report)."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)


@contextmanager
def progress_bar(
    label: str, enabled: bool = True, unit: str | None = None
) -> Iterator[Callable[[int, int], None] | None]:
    """A progress callback drawing a bar on stderr when stderr is a terminal (unless
    `enabled` is False, as under --json). When it is not (a log, CI) and a `unit` is given,
    lines on stderr at most once a second, as `sweep` prints them, from the first second on."""
    if not sys.stderr.isatty() and unit is not None:
        yield progress_lines(label, unit)
        return
    if not enabled or not sys.stderr.isatty():
        yield None
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    console = Console(stderr=True)
    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
    )
    with Progress(*columns, console=console, transient=True) as progress:
        task = progress.add_task(label, total=None)

        def update(done: int, total: int) -> None:
            progress.update(task, completed=done, total=total)

        yield update


PROGRESS_INTERVAL_S = 1.0
"""Seconds between two progress lines on a stderr that is not a terminal."""


def progress_lines(label: str, unit: str = "") -> Callable[[int, int], None]:
    """`LABEL: DONE/TOTAL UNIT` on stderr, at most once a second; a run over within its first
    second prints nothing, one that printed ends with its last line."""
    last = [time.monotonic()]
    shown: list[tuple[int, int] | None] = [None]
    suffix = f" {unit}" if unit else ""

    def line(done: int, total: int) -> None:
        if shown[0] == (done, total):
            return
        now = time.monotonic()
        if now - last[0] >= PROGRESS_INTERVAL_S or (done == total and shown[0] is not None):
            last[0], shown[0] = now, (done, total)
            print(f"{label}: {done:,}/{total:,}{suffix}", file=sys.stderr, flush=True)

    return line


@contextmanager
def stage_progress(label: str, enabled: bool = True) -> Iterator[Callable[[str, int, int], None] | None]:
    """A use case's (stage, done, total) progress as one bar per stage on a terminal's stderr."""
    if not enabled or not sys.stderr.isatty():
        yield None
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    console = Console(stderr=True)
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=console, transient=True) as progress:
        tasks: dict[str, TaskID] = {}

        def update(stage: str, done: int, total: int) -> None:
            if stage not in tasks:
                tasks[stage] = progress.add_task(f"{label}: {stage}", total=None)
            progress.update(tasks[stage], completed=done, total=total or None)

        yield update
