"""Files that hold secrets (bearer tokens): only their owner may read them.

`cloudtwin serve`'s token file and `cloudtwin federate`'s tokens file are checked the same
way before they are trusted: a regular file, with no permission for the group or others.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from cloudtwin.errors import StoreError

__all__ = ["PRIVATE_MODE", "check_private"]

#: The mode a file of secrets is created with, and the widest one accepted.
PRIVATE_MODE = 0o600


def check_private(path: Path, what: str, field: str | None = None) -> os.stat_result:
    """The file's status when only its owner can read it; StoreError (naming `what`, and
    `field` when given) when it is not a regular file or the group or others have any
    permission on it. FileNotFoundError passes through: whether a missing file is an
    error is the caller's to say."""
    try:
        info = path.stat()
    except FileNotFoundError:
        raise
    except OSError as err:
        raise StoreError(f"{what} {path}: cannot read it: {err.strerror}", field=field) from err
    if not stat.S_ISREG(info.st_mode):
        raise StoreError(f"{what} {path}: not a regular file", field=field)
    mode = stat.S_IMODE(info.st_mode)
    if mode & 0o077:
        raise StoreError(
            f"{what} {path}: mode {mode:o} lets other users read it; chmod 600 it", field=field
        )
    return info
