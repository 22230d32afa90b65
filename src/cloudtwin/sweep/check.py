"""Checking a sweep before any point runs: every varied key exists, and every point's
scenario is valid for the command and within its `limits` (the memory and flow estimate
each run makes before building anything).

Every point is covered when that is quick: each combination of the keys other than the
seed is checked, and the seed's values through their probes (see `Plan.checks`), so a
seed range of any length costs two checks. The cost is estimated first (checks times
the time the first ones took): a sweep whose point-by-point check would take longer than
`FULL_CHECK_S` checks each varied value once instead (`Plan.value_checks`), and one whose
checks would take longer than a limit (`limit_s`) is refused before any more of them.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from cloudtwin.errors import CloudtwinError, LimitError, SweepError

if TYPE_CHECKING:  # types only: the limit is read by `cloudtwin sweep --help` too
    from cloudtwin.sweep.points import Plan
    from cloudtwin.sweep.task import Task

__all__ = ["CHECK_LIMIT_S", "FULL_CHECK_S", "Checked", "check_plan"]

#: How often (in points) a long check reports progress.
_PROGRESS_EVERY = 1000
#: Checks timed to estimate the cost of the rest (the quickest one counts).
_TIMED = 3
#: Point-by-point checks are made when they take at most this long (seconds).
FULL_CHECK_S = 10.0
#: Checks that would take longer than this (seconds) are refused, unless told otherwise.
CHECK_LIMIT_S = 60.0


@dataclass(frozen=True)
class Checked:
    """What the check of a sweep did: `checked` of the `full` point-by-point checks (fewer
    when only each varied value was checked), each taking about `per_check_s`."""

    checked: int
    full: int
    per_check_s: float

    @property
    def sampled(self) -> bool:
        """Whether only each varied value was checked (not every point)."""
        return self.checked < self.full


def check_plan(
    plan: Plan,
    task: Task,
    progress: Callable[[int, int], None] | None = None,
    limit_s: float = CHECK_LIMIT_S,
    clock: Callable[[], float] = time.perf_counter,
    limit_name: str = "check_limit_s",
) -> Checked:
    """Raise SweepError naming the key, or the point (its overrides) and the field, that a
    sweep cannot run, or LimitError naming `limit_name` (how the caller sets `limit_s`)
    when the checks would take longer than `limit_s` seconds. `progress` hears (checks
    done, checks to do) now and then; `clock` times the first checks."""
    _check_keys(plan, task)
    full = plan.check_count()
    checks = plan.checks()
    timed = [next(checks) for _ in range(min(_TIMED, full))]
    per_check_s = min(_timed_check(task, overrides, clock) for overrides in timed)
    rest: Iterable[tuple[str, ...]] = checks
    total = full
    if full * per_check_s > min(FULL_CHECK_S, limit_s):
        sampled = plan.value_checks()
        _refuse_above(len(sampled), per_check_s, full, limit_s, limit_name)
        rest = [o for o in sampled if o not in timed]
        total = len(timed) + len(rest)
    for done, overrides in enumerate(rest, len(timed) + 1):
        _check_one(task, overrides)
        if progress is not None and done % _PROGRESS_EVERY == 0:
            progress(done, total)
    if progress is not None:
        progress(total, total)
    return Checked(total, full, per_check_s)


def _check_keys(plan: Plan, task: Task) -> None:
    for vary in plan.varies:
        try:
            task.scenario([vary.overrides(0)])
        except CloudtwinError as err:
            if str(err).endswith("unknown key") or ": unknown key" in str(err):
                raise SweepError(f"vary {vary.key}: not a key of the scenario ({err})") from err


def _check_one(task: Task, overrides: Sequence[str]) -> None:
    try:
        task.check(overrides)
    except CloudtwinError as err:
        raise SweepError(f"vary {' '.join(overrides)}: {err}") from err


def _timed_check(task: Task, overrides: Sequence[str], clock: Callable[[], float]) -> float:
    start = clock()
    _check_one(task, overrides)
    return max(clock() - start, 0.0)


def _refuse_above(count: int, per_check_s: float, full: int, limit_s: float, limit_name: str) -> None:
    estimate_s = count * per_check_s
    if estimate_s > limit_s:
        raise LimitError(
            f"checks: checking the sweep ({count:,} checks, one per varied value, instead of "
            f"{full:,} point by point; about {per_check_s * 1000:.1f} ms each) would take about "
            f"{_seconds(estimate_s)} s, "
            f"more than the {limit_s:g} s limit; {limit_name} {math.ceil(estimate_s * 1.5)} lifts it",
            limit=limit_name,
        )


def _seconds(value: float) -> str:
    """Whole seconds from 10 s up, two significant digits below (a sub-second estimate
    against a sub-second limit reads 0.00042, not 0)."""
    return f"{value:,.0f}" if value >= 10 else f"{value:.2g}"
