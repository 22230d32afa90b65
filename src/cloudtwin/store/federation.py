"""Where the federation controller keeps its state on disk: one JSON file, replaced atomically."""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path

from cloudtwin.errors import FederationError

__all__ = ["JsonFileStore"]


class JsonFileStore:
    """The controller's StateStore as a JSON file: written to a temporary file, synced, then renamed
    over the old one, so a kill at any moment leaves either the old state or the new one."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)

    def load(self) -> dict[str, object] | None:
        """The saved state, or None when there is no file yet."""
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return None
        except UnicodeDecodeError as err:
            raise FederationError(
                "state", f"{self.path}: not a controller state file (not UTF-8 text)"
            ) from err
        except OSError as err:
            raise FederationError("state", f"{self.path}: cannot read: {err.strerror}") from err
        try:
            state = json.loads(text)
        except json.JSONDecodeError as err:
            raise FederationError(
                "state", f"{self.path}: not a controller state file (line {err.lineno})"
            ) from err
        except RecursionError as err:
            raise FederationError(
                "state", f"{self.path}: not a controller state file (nested too deep)"
            ) from err
        if not isinstance(state, dict):
            raise FederationError("state", f"{self.path}: not a controller state file")
        return state  # a JSON object as parsed: the controller checks it (check_state)

    def save(self, state: Mapping[str, object]) -> None:
        """Replace the file, all or nothing."""
        if self.path.is_dir():
            raise FederationError("state", f"{self.path}: is a folder; give a file name")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=f".{self.path.name}.", dir=self.path.parent)
        except OSError as err:
            raise FederationError("state", f"{self.path}: cannot write here ({err.strerror})") from err
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                json.dump(state, handle, indent=1, sort_keys=True)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(tmp, self.path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
