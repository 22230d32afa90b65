"""Where a measurement came from: cloudtwin's version and commit, the command line, when."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from cloudtwin import __version__

__all__ = ["provenance"]

SOURCE = Path(__file__).resolve().parents[2]


def _commit() -> str | None:
    """The commit of the source tree cloudtwin runs from (with "-dirty" when files under
    src/ differ from it), or None outside a git checkout."""
    try:
        head = subprocess.run(["git", "-C", str(SOURCE), "rev-parse", "HEAD"],
                              capture_output=True, text=True, timeout=10)
        if head.returncode != 0:
            return None
        dirty = subprocess.run(["git", "-C", str(SOURCE), "status", "--porcelain", "--", str(SOURCE)],
                               capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return head.stdout.strip() + ("-dirty" if dirty else "")


def provenance(seed: int | None = None, command: list[str] | None = None) -> dict[str, object]:
    """cloudtwin's version and commit, the command line (default: the cloudtwin command
    running), the time (UTC), and the seed of any random draw the measurement makes."""
    return {
        "cloudtwin": __version__,
        "commit": _commit(),
        "command": command if command is not None else ["cloudtwin", *sys.argv[1:]],
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "seed": seed,
    }
