"""Checking a sweep before any point runs: every varied key exists, and every point's
scenario is valid for the command and within its `limits` (the memory and flow estimate
each run makes before building anything).

Every point is covered: each combination of the keys other than the seed is checked,
and the seed's values through their probes (see `Plan.checks`), so a seed range of any
length costs two checks.
"""

from __future__ import annotations

from collections.abc import Callable

from cloudtwin.errors import CloudtwinError, SweepError
from cloudtwin.sweep.points import Plan
from cloudtwin.sweep.task import Task

__all__ = ["check_plan"]

#: How often (in points) a long check reports progress.
_PROGRESS_EVERY = 1000


def check_plan(plan: Plan, task: Task, progress: Callable[[int, int], None] | None = None) -> None:
    """Raise SweepError naming the key, or the point (its overrides) and the field, that a
    sweep cannot run. `progress` hears (points checked, points to check) now and then."""
    for vary in plan.varies:
        try:
            task.scenario([vary.overrides(0)])
        except CloudtwinError as err:
            if str(err).endswith("unknown key") or ": unknown key" in str(err):
                raise SweepError(f"vary {vary.key}: not a key of the scenario ({err})") from err
    total = plan.check_count()
    for done, overrides in enumerate(plan.checks(), 1):
        try:
            task.check(overrides)
        except CloudtwinError as err:
            raise SweepError(f"vary {' '.join(overrides)}: {err}") from err
        if progress is not None and (done % _PROGRESS_EVERY == 0 or done == total):
            progress(done, total)
