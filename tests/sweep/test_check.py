"""Checking a sweep before it runs: the cost is estimated from the first checks (on a clock
given here, so nothing depends on the machine's speed), a large sweep checks each varied
value once, and checks above the limit are refused with the estimate and what lifts it."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from cloudtwin.errors import LimitError, SweepError
from cloudtwin.sweep import Plan, Task, check_plan, parse_vary

SMALL = """name: small
fabric: {kind: leaf-spine, leaves: 4, spines: 2, hosts_per_leaf: 2}
workload: {kind: perftest, pattern: permutation, size: 1MiB}
"""


def ticking(step_s: float) -> Callable[[], float]:
    """A clock that moves `step_s` each time it is read: every check takes `step_s`."""
    now = [0.0]

    def clock() -> float:
        now[0] += step_s
        return now[0]

    return clock


def plan(*varies: str) -> Plan:
    return Plan(tuple(parse_vary(v) for v in varies))


def test_a_quick_sweep_is_checked_point_by_point() -> None:
    p = plan("fabric.spines=1,2", "fabric.leaves=2,3")
    checked = check_plan(p, Task(SMALL, "s.yaml"), clock=ticking(0.5))
    assert (checked.checked, checked.full, checked.per_check_s, checked.sampled) == (4, 4, 0.5, False)


def test_a_large_sweep_checks_each_value_once_and_reports_progress() -> None:
    heard: list[tuple[int, int]] = []
    # 2,000 checks of 0.5 s: 1,000 s point by point; the first, each range's other end and
    # the last corner are 4 checks (2 s)
    p = plan("fabric.spines=1..50", "fabric.leaves=2..41")
    checked = check_plan(p, Task(SMALL, "s.yaml"), lambda d, t: heard.append((d, t)), clock=ticking(0.5))
    # the three timed checks are among the first point's neighbours, not all of the sample
    assert (checked.full, checked.sampled, checked.per_check_s) == (2000, True, 0.5)
    assert checked.checked == 3 + 3 and heard[-1] == (6, 6)


def test_checks_above_the_limit_are_refused_with_the_estimate_and_the_flag() -> None:
    p = plan("fabric.spines=1..50", "fabric.leaves=2..41")
    with pytest.raises(LimitError) as caught:
        check_plan(p, Task(SMALL, "s.yaml"), clock=ticking(0.5), limit_s=1.0, limit_name="--check-limit")
    assert str(caught.value) == (
        "checks: checking the sweep (4 checks, one per varied value, instead of 2,000 point by point; "
        "about 500.0 ms each) would take about 2 s, more than the 1 s limit; --check-limit 3 lifts it"
    )
    assert caught.value.limit == "--check-limit"


def test_a_bad_value_is_found_by_the_sampled_check() -> None:
    p = plan("fabric.spines=1..50", "fabric.leaves=2..41", "routing.strategy=ecmp,nonsense")
    with pytest.raises(SweepError, match="routing.strategy=nonsense"):
        check_plan(p, Task(SMALL, "s.yaml"), clock=ticking(0.5))
