"""Pipelined rounds: a per-round template of transfers and dependencies, unrolled over rounds.

A collective is a small graph of *units* (one QP of a network hop, or one NVLink segment)
that repeats every round: in round r a unit moves its share of the data once the units
it depends on in the same round (`same`) and in the previous round (`prev`) have
finished. Unrolling R rounds gives the engine R x units flows and their dependencies,
built with numpy only (no Python loop per flow).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from cloudtwin.engine.simulator import Dependencies

__all__ = ["Template", "Unrolled", "pairs_to_csr", "unroll"]


def pairs_to_csr(waiter: np.ndarray, after: np.ndarray, units: int) -> tuple[np.ndarray, np.ndarray]:
    """CSR (indptr, after) of dependency pairs `waiter[i]` waits for `after[i]`.

    >>> indptr, after = pairs_to_csr(np.array([1, 0, 1]), np.array([0, 2, 2]), 3)
    >>> indptr.tolist(), after.tolist()
    ([0, 1, 3, 3], [2, 0, 2])
    """
    waiter = np.asarray(waiter, dtype=np.int64)
    order = np.argsort(waiter, kind="stable")
    indptr = np.concatenate(([0], np.cumsum(np.bincount(waiter, minlength=units))))
    return indptr.astype(np.int64), np.asarray(after, dtype=np.int64)[order]


@dataclass(frozen=True, eq=False)
class Template:
    """One round of a pipelined collective: per unit its route, bytes, rate cap and gaps.

    `route` indexes a table of paths (network QPs first, then NVLink segments);
    `gap_first_s` is the latency before a unit's round-0 transfer, `gap_later_s` before
    each later one; `same_*`/`prev_*` are CSR lists of the units it waits for in the
    same and in the previous round.
    """

    route: np.ndarray
    bytes_per_round: np.ndarray
    rate_cap_bps: np.ndarray
    gap_first_s: np.ndarray
    gap_later_s: np.ndarray
    job: np.ndarray
    same_indptr: np.ndarray
    same_after: np.ndarray
    prev_indptr: np.ndarray
    prev_after: np.ndarray

    @property
    def units(self) -> int:
        """Units per round."""
        return int(self.route.size)


@dataclass(frozen=True, eq=False)
class Unrolled:
    """R rounds of a template as flow rows: flow = round x units + unit."""

    route: np.ndarray
    size_bytes: np.ndarray
    start_s: np.ndarray
    rate_cap_bps: np.ndarray
    job: np.ndarray
    round: np.ndarray
    dependencies: Dependencies


def _round_pairs(indptr: np.ndarray, after: np.ndarray, units: int) -> tuple[np.ndarray, np.ndarray]:
    waiter = np.repeat(np.arange(units), np.diff(indptr))
    return waiter, after


def unroll(template: Template, rounds: int) -> Unrolled:
    """Flows and dependencies of `rounds` rounds of `template`."""
    units = template.units
    offsets = np.arange(rounds, dtype=np.int64) * units
    sw, sa = _round_pairs(template.same_indptr, template.same_after, units)
    pw, pa = _round_pairs(template.prev_indptr, template.prev_after, units)
    waiter = [(offsets[:, None] + sw[None, :]).ravel()]
    after = [(offsets[:, None] + sa[None, :]).ravel()]
    if rounds > 1:
        waiter.append((offsets[1:, None] + pw[None, :]).ravel())
        after.append((offsets[:-1, None] + pa[None, :]).ravel())
    total = rounds * units
    indptr, after_sorted = pairs_to_csr(np.concatenate(waiter), np.concatenate(after), total)
    first = np.arange(total) < units
    gap = np.where(first, np.tile(template.gap_first_s, rounds), np.tile(template.gap_later_s, rounds))
    return Unrolled(
        route=np.tile(template.route, rounds),
        size_bytes=np.tile(template.bytes_per_round, rounds),
        start_s=np.where(first, gap, 0.0),
        rate_cap_bps=np.tile(template.rate_cap_bps, rounds),
        job=np.tile(template.job, rounds),
        round=np.repeat(np.arange(rounds, dtype=np.int64), units),
        dependencies=Dependencies(indptr, after_sorted, gap),
    )
