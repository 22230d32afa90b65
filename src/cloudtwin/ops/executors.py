"""Mining chunks on workers and taking the results back in chunk order.

The workers come from an executor (a local process pool or a Ray cluster: the ones
`cloudtwin sweep` uses, built by the caller); without one, chunks are mined in this
process. At most a few chunks per worker are out at a time, so memory stays bounded
by the window, not by the input. A chunk whose worker died is sent again.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any, Protocol

from cloudtwin.errors import LogFormatError
from cloudtwin.ops.chunks import Chunk
from cloudtwin.ops.columnar import MinedChunk

__all__ = ["ChunkExecutor", "MAX_TRIES", "mine_in_order"]

#: How many times a chunk is sent before the ingest gives up on it.
MAX_TRIES = 3
#: Chunks out per worker: one being mined, one waiting, one coming back.
_WINDOW_PER_WORKER = 3
_WAIT_S = 1.0


class ChunkExecutor(Protocol):
    """Runs one job on payloads, in workers, and reports results as they finish.

    The shape of `cloudtwin.sweep`'s executors: ``finished`` gives ``(handle, result)``
    pairs, with ``None`` for a payload whose worker died.
    """

    workers: int

    def start(self, job: Callable[[Any], Any]) -> None:
        """Get ready to run ``job`` (start processes, connect, ship it)."""

    def submit(self, handle: int, payload: Any) -> None:
        """Run the job on a payload; the result comes back under ``handle``."""

    def finished(self, timeout_s: float) -> list[tuple[int, Any]]:
        """Payloads done (waiting up to ``timeout_s`` for the first)."""

    def close(self) -> None:
        """Stop every worker this executor started."""


def mine_in_order(
    job: Callable[[Chunk], MinedChunk],
    chunks: Iterable[Chunk],
    executor: ChunkExecutor | None = None,
) -> Iterator[MinedChunk]:
    """Each chunk mined by ``job``, on ``executor``'s workers, yielded in chunk order."""
    if executor is None:
        for chunk in chunks:
            yield job(chunk)
        return
    executor.start(job)
    try:
        yield from _ordered(executor, iter(chunks))
    finally:
        executor.close()


def _ordered(executor: ChunkExecutor, chunks: Iterator[Chunk]) -> Iterator[MinedChunk]:
    window = max(2, _WINDOW_PER_WORKER * executor.workers)
    out: dict[int, Chunk] = {}
    tries: dict[int, int] = {}
    done: dict[int, MinedChunk] = {}
    following = 0
    exhausted = False
    while True:
        while not exhausted and len(out) + len(done) < window:
            chunk = next(chunks, None)
            if chunk is None:
                exhausted = True
                break
            out[chunk.index] = chunk
            tries[chunk.index] = 1
            executor.submit(chunk.index, chunk)
        while following in done:
            yield done.pop(following)
            following += 1
        if exhausted and not out and not done:
            return
        for handle, result in executor.finished(timeout_s=_WAIT_S):
            chunk = out.pop(handle)
            if result is None:
                if tries[handle] >= MAX_TRIES:
                    raise LogFormatError(
                        f"chunk {handle} (bytes from {chunk.offset}, line {chunk.first_line}): "
                        f"its worker died {MAX_TRIES} times"
                    )
                tries[handle] += 1
                out[handle] = chunk
                executor.submit(handle, chunk)
                continue
            del tries[handle]
            done[handle] = result
