"""The example scenarios shipped with cloudtwin, offered by the service to start jobs from."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import cloudtwin
from cloudtwin.errors import ScenarioError
from cloudtwin.scenario.loader import parse_yaml

__all__ = ["Example", "default_examples_dir", "list_examples", "read_example"]


@dataclass(frozen=True)
class Example:
    """One shipped scenario: its name (the file's stem), file and workload kind (`cloud` for a
    one-cloud file)."""

    name: str
    path: Path
    workload: str


def default_examples_dir() -> Path | None:
    """`cloudtwin/examples` in an installed wheel, else `examples/` of a source checkout."""
    package = Path(cloudtwin.__file__).resolve().parent
    for candidate in (package / "examples", package.parents[1] / "examples"):
        if candidate.is_dir():
            return candidate
    return None


@lru_cache(maxsize=8)
def list_examples(directory: Path | None) -> tuple[Example, ...]:
    """The examples in `directory`, by name (read once: they ship with cloudtwin)."""
    if directory is None:
        return ()
    found = []
    for path in sorted(directory.glob("*.yaml")):
        try:
            data, _ = parse_yaml(path.read_text(encoding="utf-8"), path.name)
        except (OSError, ScenarioError):
            continue
        workload = data.get("workload") or {}
        kind = workload.get("kind", "perftest") if isinstance(workload, dict) else "perftest"
        if "federation" in data:  # one cloud of federated sites: `evaluate` runs it whole
            kind = "cloud"
        found.append(Example(path.stem, path, "workloads" if "workloads" in data else str(kind)))
    return tuple(found)


def read_example(directory: Path | None, name: str) -> tuple[str, str]:
    """The YAML text and file name of a shipped example; ScenarioError naming `example`."""
    for example in list_examples(directory):
        if example.name == name or example.path.name == name:
            return example.path.read_text(encoding="utf-8"), example.path.name
    known = ", ".join(e.name for e in list_examples(directory)) or "none found"
    raise ScenarioError(f"example: no shipped example named {name!r} (known: {known})")
