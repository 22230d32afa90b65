"""The bearer token that every change through the service needs: made once, kept mode 0600."""

from __future__ import annotations

import hmac
import os
import secrets
from pathlib import Path

from cloudtwin.errors import StoreError
from cloudtwin.files import read_bounded
from cloudtwin.store.private import PRIVATE_MODE, check_private

__all__ = ["load_or_create_token", "same_token"]

_TOKEN_BYTES = 32
#: A token file holds one token (43 characters); anything much longer is not one.
MAX_TOKEN_FILE_BYTES = 4096


def load_or_create_token(path: Path) -> tuple[str, bool]:
    """The token stored at `path`, creating it (mode 0600) on first use; and whether it is new.

    The file is created exclusively with its final mode, so the token is never readable
    by another user, not even for a moment.
    """
    text = _read_token(path) if os.path.lexists(path) else ""
    if text:
        check_private(path, "token file")
        return text, False
    token = secrets.token_urlsafe(_TOKEN_BYTES)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, PRIVATE_MODE)
    except FileExistsError as err:
        raise StoreError(f"token file {path}: exists but is empty; remove it to make a new token") from err
    except OSError as err:
        raise StoreError(f"token file {path}: cannot create it: {err}") from err
    with os.fdopen(fd, "w", encoding="ascii") as handle:
        handle.write(token + "\n")
    return token, True


def _read_token(path: Path) -> str:
    """The token in an existing file: a regular file of at most MAX_TOKEN_FILE_BYTES ASCII
    bytes (a FIFO, /dev/zero or a symlink loop as --token-file is one line, not a hang)."""
    data = read_bounded(path, MAX_TOKEN_FILE_BYTES, "token", StoreError)
    if not data.isascii():
        raise StoreError(f"{path}: the token is not ASCII text")
    return data.decode("ascii").strip()


def same_token(given: str, expected: str) -> bool:
    """Compare in constant time."""
    return hmac.compare_digest(given.encode(), expected.encode())
