"""Running one benchmark case in a fresh process, so that its peak memory is its own."""

from __future__ import annotations

import multiprocessing as mp
import resource
from collections.abc import Callable
from typing import Any

__all__ = ["run_isolated"]


def _child(queue: mp.Queue, target: Callable[..., dict[str, Any]], args: tuple[object, ...]) -> None:
    result = target(*args)
    result["peak_rss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    queue.put(result)


def run_isolated(target: Callable[..., dict[str, Any]], *args: object) -> dict[str, Any]:
    """`target(*args)` in a spawned process, with its peak RSS (MiB) added to the result.

    `target` must be a module-level function of an importable module or of the script.
    """
    ctx = mp.get_context("spawn")
    queue: mp.Queue = ctx.Queue()
    proc = ctx.Process(target=_child, args=(queue, target, args))
    proc.start()
    result = queue.get()
    proc.join()
    return result
