"""Reading a user's file whole, bounded: a regular file only, never more than a given size.

`Path.read_bytes()` on a FIFO blocks until a writer comes, on `/dev/zero` it grows until
memory runs out, and on a symlink loop or a directory it raises an OSError whose
traceback reaches the user. `read_bounded` refuses each of those with one line that
names the file, what it was meant to be and the reason, as the caller's error class.

>>> import tempfile, pathlib
>>> folder = pathlib.Path(tempfile.mkdtemp())
>>> read_bounded(folder, 10, "scenario")  # doctest: +ELLIPSIS
Traceback (most recent call last):
cloudtwin.errors.CloudtwinError: ...: the scenario is a directory, not a regular file
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from cloudtwin.errors import CloudtwinError

__all__ = ["BoundedReader", "check_readable", "open_bounded", "read_bounded", "read_text_bounded"]

#: How much one read() asks for: a file is read in pieces, so a file that grows while it
#: is read (a /proc file, a log being written) is still cut at the limit.
_CHUNK_BYTES = 1 << 20

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
    error: Callable[[str], CloudtwinError] = CloudtwinError,
    hint: str = "",
) -> bytes:
    """The bytes of the regular file `path`, at most `limit` of them; else `error(line)`.

    Refused, each with one line `"{path}: the {what} ..."`: a missing or unreadable path, a
    symlink loop, anything but a regular file (FIFO, device, directory, socket), and a
    file holding more than `limit` bytes (`hint`, when given, follows: how to raise it).
    The FIFO check comes before the open, and the open does not block, so a FIFO never
    hangs the reader.
    """
    name = os.fspath(path)
    fd = _open_regular(name, what, error)
    try:
        return _read_fd(fd, name, limit, what, error, hint)
    except OSError as err:
        raise error(_os_reason(err, name, what)) from None
    finally:
        os.close(fd)


def check_readable(
    path: str | os.PathLike[str], what: str, error: Callable[[str], CloudtwinError] = CloudtwinError
) -> None:
    """Refuse `path` as `read_bounded` would (missing, unreadable, a symlink loop, not a
    regular file), with the same line, without reading it: a command checks its input
    files this way before it imports what it runs, so a typo fails at once."""
    os.close(_open_regular(os.fspath(path), what, error))


class BoundedReader:
    """A regular file opened by `open_bounded`, read in pieces (`read(n)`: at most n bytes,
    b"" at the end; `readinto(view)`: into a buffer); more than `limit` bytes in all, or an
    OSError, is `error(line)`."""

    def __init__(
        self, fd: int, name: str, limit: int, what: str, error: Callable[[str], CloudtwinError]
    ) -> None:
        self.fd, self.name, self.limit, self.what, self.error = fd, name, limit, what, error
        self.total = 0

    def readinto(self, view: memoryview) -> int:
        """Bytes of the file into the start of `view`; how many (0 at the end)."""
        room = min(len(view), self.limit + 1 - self.total)
        try:
            got = os.readv(self.fd, [view[:room]])
        except OSError as err:
            raise self.error(_os_reason(err, self.name, self.what)) from None
        self.total += got
        if self.total > self.limit:
            raise self.error(_too_big(self.name, self.what, self.limit, ""))
        return got

    def read(self, size: int) -> bytes:
        try:
            chunk = os.read(self.fd, min(size, self.limit + 1 - self.total))
        except OSError as err:
            raise self.error(_os_reason(err, self.name, self.what)) from None
        self.total += len(chunk)
        if self.total > self.limit:
            raise self.error(_too_big(self.name, self.what, self.limit, ""))
        return chunk


def _open_regular(name: str, what: str, error: Callable[[str], CloudtwinError]) -> int:
    """A descriptor of the regular file `name`, opened without blocking (the kind is checked
    before the open, so a FIFO never hangs it); else `error` with one line."""
    try:
        _check_kind(os.stat(name).st_mode, name, what, error)
        return os.open(name, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0))
    except OSError as err:
        raise error(_os_reason(err, name, what)) from None


@contextmanager
def open_bounded(
    path: str | os.PathLike[str],
    limit: int,
    what: str,
    error: Callable[[str], CloudtwinError] = CloudtwinError,
) -> Iterator[BoundedReader]:
    """The regular file `path` to read in pieces, at most `limit` bytes in all: for a file
    too large to hold (a capture), read a block at a time. Refused as `read_bounded`
    refuses (missing, a symlink loop, a FIFO, a device, a directory, larger than `limit`)."""
    name = os.fspath(path)
    fd = _open_regular(name, what, error)
    try:
        try:
            info = os.fstat(fd)
        except OSError as err:
            raise error(_os_reason(err, name, what)) from None
        _check_kind(info.st_mode, name, what, error)
        if info.st_size > limit:
            raise error(_too_big(name, what, limit, ""))
        yield BoundedReader(fd, name, limit, what, error)
    finally:
        os.close(fd)


def read_text_bounded(
    path: str | os.PathLike[str],
    limit: int,
    what: str,
    error: Callable[[str], CloudtwinError] = CloudtwinError,
    hint: str = "",
) -> str:
    """`read_bounded` decoded as UTF-8; `error` when it is not UTF-8 text."""
    data = read_bounded(path, limit, what, error, hint)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise error(f"{os.fspath(path)}: the {what} is not UTF-8 text") from None


def _read_fd(
    fd: int, name: str, limit: int, what: str, error: Callable[[str], CloudtwinError], hint: str
) -> bytes:
    info = os.fstat(fd)  # the file opened, not the one stat()ed: it may have been swapped
    _check_kind(info.st_mode, name, what, error)
    if info.st_size > limit:
        raise error(_too_big(name, what, limit, hint))
    chunks: list[bytes] = []
    total = 0
    while total <= limit:
        # the size the file announces in one read (one copy, no join), then chunks up to the limit
        chunk = os.read(fd, min(max(_CHUNK_BYTES, info.st_size + 1 - total), limit + 1 - total))
        if not chunk:
            break
        chunks.append(chunk)
        total += len(chunk)
    if total > limit:  # a file that says it is small (/proc) or grew while read
        raise error(_too_big(name, what, limit, hint))
    return b"".join(chunks)


def _check_kind(mode: int, name: str, what: str, error: Callable[[str], CloudtwinError]) -> None:
    if stat.S_ISREG(mode):
        return
    kind = next((label for test, label in _KINDS if test(mode)), "not a regular file")
    raise error(f"{name}: the {what} is {kind}, not a regular file")


def _too_big(name: str, what: str, limit: int, hint: str) -> str:
    tail = f"; {hint}" if hint else ""
    return f"{name}: the {what} is larger than {limit:,} bytes, the most it may be{tail}"


def _os_reason(err: OSError, name: str, what: str) -> str:
    if err.errno == errno.ENOENT:
        return f"{name}: no such {what}" + ("" if what.endswith("file") else " file")
    if err.errno == errno.ELOOP:
        return f"{name}: the {what} path is a symlink loop"
    return f"{name}: cannot read the {what}: {err.strerror or type(err).__name__}"

