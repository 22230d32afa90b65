"""cloudtwin: a digital twin of a multi-tenant AI cloud."""

import ast
import importlib
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from cloudtwin.errors import (
    CloudtwinError,
    EngineError,
    LogFormatError,
    RoutingError,
    ScenarioError,
    StoreError,
    TopologyError,
    WorkloadError,
)

__version__ = "0.1.0"


def lazy_exports(package: str) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """`__getattr__` and `__dir__` for a package whose public names are imported on first
    use, so that importing one of its modules (`cloudtwin.scenario.units`) does not import
    them all (pydantic models, DuckDB, the simulator: seconds of a command's start-up).

    The names are those the package's `__init__` imports under `if TYPE_CHECKING:` (what
    mypy reads too, so the two cannot drift): `from cloudtwin.x.m import a, b` there makes
    `cloudtwin.x.a` import `cloudtwin.x.m` when it is first used."""
    sources: dict[str, str] = {}

    def find(name: str) -> str | None:
        if not sources:
            sources.update(_type_checking_imports(sys.modules[package].__file__ or ""))
        return sources.get(name)

    def getattr_(name: str) -> Any:
        module = find(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        setattr(sys.modules[package], name, value)  # found once: later uses do not come here
        return value

    def dir_() -> list[str]:
        find("")
        return sorted(set(vars(sys.modules[package])) | set(sources))

    return getattr_, dir_


def _type_checking_imports(path: str) -> dict[str, str]:
    """name -> module of the `from module import name` lines under `if TYPE_CHECKING:`."""
    tree = ast.parse(Path(path).read_text(encoding="utf-8"))
    found: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
            for line in node.body:
                if isinstance(line, ast.ImportFrom) and line.module:
                    found.update({alias.asname or alias.name: line.module for alias in line.names})
    return found


__all__ = [
    "CloudtwinError",
    "EngineError",
    "LogFormatError",
    "RoutingError",
    "ScenarioError",
    "StoreError",
    "TopologyError",
    "WorkloadError",
    "__version__",
    "lazy_exports",
]
