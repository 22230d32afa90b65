"""Building the executor a command runs its work on: serial, a local process pool, or Ray.

`cloudtwin sweep` and `cloudtwin logs ingest` take the same flags (`--executor`,
`--workers`, `--address`) and get their executors from here.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from cloudtwin.errors import CloudtwinError
from cloudtwin.sweep.executors import SWEEP_PRELOAD, Executor

__all__ = ["MAX_WORKERS_PER_CPU", "build_executor", "default_workers"]

#: Local workers beyond this many per CPU only add processes (all started at once).
MAX_WORKERS_PER_CPU = 4


def default_workers() -> int:
    """The CPUs this process may use."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return max(1, os.cpu_count() or 1)


def build_executor(
    kind: str,
    address: str | None,
    workers: int | None,
    *,
    error: type[CloudtwinError],
    ray_default_address: str | None = "auto",
    preload: Sequence[str] = SWEEP_PRELOAD,
) -> Executor:
    """The executor named ``kind`` (``serial``, ``local``/``process``, ``ray``).

    An ``address`` implies Ray. Without one, Ray joins ``ray_default_address`` (``auto``:
    the cluster this machine runs), or starts a local cluster for the run when that is
    None. Errors name the field and are raised as ``error``.
    """
    from cloudtwin.sweep import PoolExecutor, SerialExecutor

    if workers is not None and workers < 1:
        raise error(f"workers: at least 1, got {workers}")
    if kind == "ray" or address is not None:
        from cloudtwin.sweep.ray_executor import RayExecutor, check_address

        chosen = address or ray_default_address
        if chosen is not None:
            check_address(chosen)
        return RayExecutor(chosen, workers or (None if chosen is not None else default_workers()))
    if kind == "serial":
        return SerialExecutor()
    most = MAX_WORKERS_PER_CPU * (os.cpu_count() or 1)
    if workers is not None and workers > most:
        raise error(
            f"workers: {workers:,} local worker processes, more than the {most} "
            f"({MAX_WORKERS_PER_CPU} per CPU) that can help here; each is a Python process "
            "of its own"
        )
    return PoolExecutor(workers or default_workers(), preload)
