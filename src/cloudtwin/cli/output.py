"""Shared CLI plumbing: reading scenarios, progress bars, JSON and atomic result files."""

from __future__ import annotations

import json
import os
import stat
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from cloudtwin.errors import ScenarioError
from cloudtwin.scenario.loader import load_scenario
from cloudtwin.scenario.model import Scenario

__all__ = ["BUILTIN_STRATEGIES", "emit_json", "progress_bar", "read_scenario", "stdout", "write_json"]

BUILTIN_STRATEGIES = "ecmp,ecmp-qp,adaptive,spray,pinning"
"""The built-in strategies in the order tables show them (ECMP first: ratios are to it)."""

#: Width of tables written to a file or a pipe (a terminal gives its own; COLUMNS wins).
PIPE_WIDTH = 200

stdout = Console(
    soft_wrap=False,
    width=None if sys.stdout.isatty() or "COLUMNS" in os.environ else PIPE_WIDTH,
)


def read_scenario(path: Path, overrides: list[str] | None) -> Scenario:
    """Load a scenario file with `--set` overrides; ScenarioError names the problem."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError as err:
        raise ScenarioError(f"{path}: no such scenario file") from err
    except (OSError, UnicodeDecodeError) as err:
        raise ScenarioError(f"{path}: cannot read scenario: {err}") from err
    return load_scenario(text, str(path), overrides or ())


def emit_json(document: object) -> None:
    """JSON on stdout and nothing else."""
    sys.stdout.write(json.dumps(document, indent=2, sort_keys=False) + "\n")


def write_json(path: Path, document: object) -> None:
    """Write JSON to `path` atomically: a crash never leaves a half-written file.

    The file gets the mode of the file it replaces, or the usual mode of a new file
    (0666 less the umask), not the 0600 of a temporary file.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    mode = _file_mode(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(document, handle, indent=2)
            handle.write("\n")
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


@contextmanager
def progress_bar(label: str, enabled: bool = True) -> Iterator[Callable[[int, int], None] | None]:
    """A progress callback drawing on stderr when stderr is a terminal; None otherwise."""
    if not enabled or not sys.stderr.isatty():
        yield None
        return
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
