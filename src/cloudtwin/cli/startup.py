"""A command's start-up: what it does before its work, kept quick."""

from __future__ import annotations

import ctypes
import gc
import os
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["collector_paused", "keep_freed_blocks", "one_blas_thread", "thawed_at_end"]

#: glibc's mallopt parameters (malloc.h) and the values `keep_freed_blocks` gives them.
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
_TRIM_BYTES, _MMAP_BYTES = 128 << 20, 64 << 20


BLAS_THREADS = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS")
"""What numpy's OpenBLAS reads, once, when numpy is first imported, for its thread count."""


def one_blas_thread() -> None:
    """Ask numpy's OpenBLAS for one thread, unless the user's environment says otherwise.

    OpenBLAS starts a thread per core when numpy is first imported, and on a 2-core machine
    that start took about 0.09 s of CPU, half of numpy's import, in every command. No
    command does dense linear algebra big enough to gain from the threads (a window of
    telemetry's PCA is the largest), and one thread gives the same sums on any machine.
    Has no effect once numpy is imported (the CLI imports it only inside a command)."""
    if not any(name in os.environ for name in BLAS_THREADS):
        os.environ["OPENBLAS_NUM_THREADS"] = "1"


@contextmanager
def collector_paused() -> Iterator[None]:
    """Python's cyclic garbage collector paused while start-up makes its long-lived objects
    (modules, classes, typer's commands, a parsed P4 program), which are then frozen
    (`gc.freeze`: left out of every later pass) and the collector resumed.

    Start-up allocates hundreds of thousands of objects and almost no garbage, and the
    collector scanned the growing heap over and over: about a quarter of `cloudtwin nic
    run`'s start-up CPU. A command's work runs with the collector as usual, and
    `thawed_at_end` thaws what was frozen when the command ends (so in-process callers keep no garbage).
    Nested pauses resume once, at the outermost."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        gc.enable()


@contextmanager
def thawed_at_end() -> Iterator[None]:
    """Around a whole command: what `collector_paused` froze during it is thawed at its end."""
    try:
        yield
    finally:
        gc.unfreeze()


def keep_freed_blocks() -> bool:
    """For a command that streams (`nic run`): glibc's malloc serves blocks up to 64 MiB from
    its heap and keeps up to 128 MiB of freed heap, instead of mapping each large block
    fresh and unmapping it when freed (its default past a few hundred KiB at first, 32 MiB
    at most). Such a command makes and frees arrays of the same few MiB batch after batch;
    mapped fresh, every batch faulted its pages in again (75,000 page faults on a
    1,048,576-packet capture, about a tenth of its CPU). Peak memory stays as it was.
    False (nothing changed) where the C library has no mallopt (not glibc)."""
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    return bool(mallopt(_M_TRIM_THRESHOLD, _TRIM_BYTES) and mallopt(_M_MMAP_THRESHOLD, _MMAP_BYTES))
