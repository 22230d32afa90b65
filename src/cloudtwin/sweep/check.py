"""Checking a sweep before any point runs: every varied key exists, every value is valid.

All points are checked when there are at most `CHECK_ALL` of them; a larger sweep checks
the points that give every varied key each of its listed values and its ranges' ends.
"""

from __future__ import annotations

from cloudtwin.errors import CloudtwinError, SweepError
from cloudtwin.sweep.points import Plan
from cloudtwin.sweep.task import Task

__all__ = ["CHECK_ALL", "check_plan"]

#: Sweeps up to this many points have every point checked before the first runs.
CHECK_ALL = 1000


def check_plan(plan: Plan, task: Task) -> None:
    """Raise SweepError naming the key (or the point) that a sweep cannot run."""
    for vary in plan.varies:
        try:
            task.scenario([vary.overrides(0)])
        except CloudtwinError as err:
            if str(err).endswith("unknown key") or ": unknown key" in str(err):
                raise SweepError(f"vary {vary.key}: not a key of the scenario ({err})") from err
    probes = list(plan.overrides()) if plan.size <= CHECK_ALL else plan.probes()
    for overrides in probes:
        try:
            task.check(overrides)
        except CloudtwinError as err:
            raise SweepError(f"vary {' '.join(overrides)}: {err}") from err
