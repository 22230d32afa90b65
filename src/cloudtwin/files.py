"""Reading a user's file whole, bounded: a regular file of at most a given size, or one error line.

`/dev/zero`, `/dev/urandom`, a FIFO or a directory named where a file is meant would
otherwise be read until memory runs out, or block forever; a file larger than a command
can use is refused before it is read.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from cloudtwin.errors import CloudtwinError

__all__ = ["read_bounded", "read_text_bounded"]

_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def read_bounded(
    path: str | os.PathLike[str],
    limit: int,
    what: str,
    error: type[CloudtwinError] = CloudtwinError,
) -> bytes:
    """The bytes of the regular file `path`, at most `limit` of them; `error` (one line naming
    `path` and `what` it is) when it is missing, unreadable, not a regular file or larger.

    The file is opened without blocking (a FIFO with no writer returns at once) and its
    kind checked on the open descriptor, then at most `limit + 1` bytes are read, so a file
    that grows while it is read is refused too.

    >>> read_bounded("/dev/zero", 10, "pcap")
    Traceback (most recent call last):
    ...
    cloudtwin.errors.CloudtwinError: /dev/zero: the pcap is a character device, not a regular file
    """
    name = os.fspath(path)
    try:
        fd = os.open(name, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except FileNotFoundError:
        raise error(f"{name}: no such {what} file") from None
    except OSError as err:
        raise error(f"{name}: cannot read the {what}: {err.strerror}") from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            kind = next((label for test, label in _KINDS if test(mode)), "not a regular file")
            raise error(f"{name}: the {what} is {kind}, not a regular file")
        with os.fdopen(fd, "rb", closefd=False) as handle:
            data = handle.read(limit + 1)
    except OSError as err:
        raise error(f"{name}: cannot read the {what}: {err.strerror}") from None
    finally:
        os.close(fd)
    if len(data) > limit:
        raise error(f"{name}: the {what} is larger than {limit:,} bytes, the most it may be")
    return data


def read_text_bounded(
    path: str | os.PathLike[str],
    limit: int,
    what: str,
    error: type[CloudtwinError] = CloudtwinError,
) -> str:
    """`read_bounded` decoded as UTF-8; `error` when it is not UTF-8 text."""
    try:
        return read_bounded(path, limit, what, error).decode("utf-8")
    except UnicodeDecodeError:
        raise error(f"{Path(path)}: the {what} is not UTF-8 text") from None
